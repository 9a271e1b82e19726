// SPDX-License-Identifier: Apache-2.0
// The InterfaceHost of an appliance whose ports are given once, when it
// starts (sluice-dpdk): adopt() hands them to the daemon, and attach/detach
// answer that the ports are fixed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "interface_host.h"

namespace sluice {

// A port sluice-dpdk enforces on, named as status and stats show it.
struct FixedPort {
    std::string name;
    std::unique_ptr<EnforcementPoint> dataplane;
};

class FixedPortHost : public InterfaceHost {
  public:
    // `cpus`: the workers the policy is compiled for.
    FixedPortHost(std::vector<FixedPort> ports, uint32_t cpus);

    uint32_t cpus() const override { return cpus_; }
    // The ports, once; an error for a port without a dataplane or given twice.
    Result<std::vector<std::unique_ptr<HostedInterface>>> adopt() override;
    Status can_attach() const override;
    Result<std::unique_ptr<HostedInterface>> open(const std::string& name, XdpMode mode) override;
    bool decision_cost_enabled() const override { return decision_cost_enabled_; }

  private:
    std::vector<FixedPort> ports_;
    uint32_t cpus_ = 0;
    bool decision_cost_enabled_ = true;
};

}  // namespace sluice
