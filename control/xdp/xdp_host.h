// SPDX-License-Identifier: Apache-2.0
// Layer: control/xdp. sluiced's InterfaceHost: puts an XdpDataplane on each
// interface it is asked to and owns what the kernel keeps around them: the
// bpf filesystem the pins live on (<bpffs_dir>/<ifname>/), adopting the
// programs a previous sluiced left pinned, bpf_link attach and detach, the
// CPUs the kernel may run the program on, and the BPF run-time statistics
// decision cost is read from. Here so that libbpf stays in this layer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "interface_host.h"
#include "result.h"
#include "unique_fd.h"
#include "xdp_dataplane.h"

namespace sluice {

struct XdpHostOptions {
    std::string bpffs_dir;
    uint32_t source_capacity = SLUICE_SOURCE_CAPACITY_DEFAULT;
    uint32_t drop_sample_period = SLUICE_DROP_SAMPLE_PERIOD_DEFAULT;  // the least; XdpOptions says more
    uint32_t prefix_capacity = SLUICE_PREFIX_CAPACITY_DEFAULT;        // per address family
};

class XdpHost : public InterfaceHost {
  public:
    // Checks the capabilities loading and attaching need (an error naming the
    // missing ones), prepares bpffs_dir (mounting bpffs on /sys/fs/bpf if
    // needed), counts the CPUs and turns the kernel's BPF run-time statistics
    // on for as long as the host lives (a warning, not an error, when the
    // kernel refuses).
    static Result<std::unique_ptr<XdpHost>> create(XdpHostOptions options);

    uint32_t cpus() const override { return cpus_; }
    // Every <bpffs_dir>/<ifname>/ whose pinned link still runs on ifname;
    // pins without a link stay for a later attach to re-use.
    Result<std::vector<std::unique_ptr<HostedInterface>>> adopt() override;
    Status can_attach() const override { return ok_status(); }
    Result<std::unique_ptr<HostedInterface>> open(const std::string& name, XdpMode mode) override;
    std::optional<std::string> pin_root() const override { return options_.bpffs_dir; }
    bool decision_cost_enabled() const override { return run_time_stats_.get() >= 0 || run_time_stats_by_sysctl_; }
    std::vector<std::string> unprotected(const std::vector<std::string>& hosted) const override;

  private:
    explicit XdpHost(XdpHostOptions options) : options_(std::move(options)) {}
    Result<std::unique_ptr<XdpDataplane>> open_dataplane(const std::string& pin_dir) const;

    XdpHostOptions options_;
    uint32_t cpus_ = 0;
    // Keeps the kernel's BPF run-time statistics on; they go off again when
    // it closes, so nothing is left behind.
    UniqueFd run_time_stats_;
    bool run_time_stats_by_sysctl_ = false;  // kernel.bpf_stats_enabled = 1 keeps them on instead
};

// Makes sure `dir` is on a bpf filesystem: mounts bpffs on /sys/fs/bpf when
// `dir` is under it and nothing is mounted there, then creates `dir`.
Status prepare_bpffs_dir(const std::string& dir);

}  // namespace sluice
