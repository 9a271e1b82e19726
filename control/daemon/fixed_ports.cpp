// SPDX-License-Identifier: Apache-2.0
#include "fixed_ports.h"

#include <algorithm>
#include <set>

#include "control_protocol.h"

namespace sluice {
namespace {

class FixedPortInterface : public HostedInterface {
  public:
    explicit FixedPortInterface(FixedPort port) : port_(std::move(port)) {}
    const std::string& name() const override { return port_.name; }
    EnforcementPoint& dataplane() override { return *port_.dataplane; }
    // The appliance's workers poll the port from the start.
    Status go_live() override { return ok_status(); }
    Status go_offline() override { return fixed_error(); }
    Status discard() override { return fixed_error(); }

  private:
    static Error fixed_error() { return Error{"sluice-dpdk's ports are fixed when the appliance starts"}; }
    FixedPort port_;
};

}  // namespace

FixedPortHost::FixedPortHost(std::vector<FixedPort> ports, uint32_t cpus) : ports_(std::move(ports)), cpus_(cpus) {
    decision_cost_enabled_ = std::all_of(ports_.begin(), ports_.end(), [](const FixedPort& port) {
        return port.dataplane && port.dataplane->decision_cost_enabled();
    });
}

Result<std::vector<std::unique_ptr<HostedInterface>>> FixedPortHost::adopt() {
    std::set<std::string> names;
    for (const FixedPort& port : ports_) {
        if (!port.dataplane) return Error{"port " + port.name + " has no dataplane"};
        if (!names.insert(port.name).second) return Error{"port " + port.name + " is given twice"};
    }
    std::vector<std::unique_ptr<HostedInterface>> adopted;
    for (FixedPort& port : ports_) adopted.push_back(std::make_unique<FixedPortInterface>(std::move(port)));
    ports_.clear();
    return adopted;
}

Status FixedPortHost::can_attach() const {
    return control_error(ErrorCode::invalid,
                         "sluice-dpdk's ports are fixed when the appliance starts (give them on its command line)",
                         "interface");
}

Result<std::unique_ptr<HostedInterface>> FixedPortHost::open(const std::string&, XdpMode) {
    return can_attach().error();
}

}  // namespace sluice
