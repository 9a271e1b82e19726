// SPDX-License-Identifier: Apache-2.0
// Layer: control/lib. What the daemon needs from whoever puts its
// enforcement points on the wire, so the daemon runs the same over XDP
// (control/xdp's XdpHost: bpffs pins, bpf_links) and over sluice-dpdk's fixed
// ports, and links neither libbpf nor DPDK itself.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane.h"
#include "result.h"

namespace sluice {

// How an XDP program is attached. The daemon's config and the attach verb
// speak it; a host that cannot attach ignores it.
enum class XdpMode { native, generic };
std::string_view xdp_mode_name(XdpMode mode);
Result<XdpMode> parse_xdp_mode(std::string_view name);

struct XdpPlacement {
    int ifindex = 0;
    XdpMode mode = XdpMode::native;
    std::string pin_dir;
};

// What the daemon's periodic check finds (README, "sluiced"): whether the
// interface the program was attached to still exists, and which pins are no
// longer in bpffs (someone deleted the link or removed the pins behind the
// daemon's back).
struct InterfaceHealth {
    bool interface_present = true;
    std::vector<std::string> missing_pins;
};

// One interface with an enforcement point, owned by the daemon. Destroying a
// live one leaves it enforcing (fail-static); destroying one that never went
// live removes what opening it created.
class HostedInterface {
  public:
    virtual ~HostedInterface() = default;
    virtual const std::string& name() const = 0;
    virtual EnforcementPoint& dataplane() = 0;
    // Where an XDP program runs, for status, the attach reply and logs;
    // empty for a fixed port.
    virtual std::optional<XdpPlacement> xdp() const { return std::nullopt; }
    // Puts the dataplane on the wire; the daemon applies the policy first.
    virtual Status go_live() = 0;
    // Takes it off the wire; the dataplane stays readable.
    virtual Status go_offline() = 0;
    // After go_offline: releases the dataplane and removes what the host
    // kept for it (pins). The daemon has let go of the dataplane first.
    virtual Status discard() = 0;
    // Looks again (cheap: no fd held, a few stat()s); nothing to check for a
    // fixed port. When it cannot tell (out of fds), it says what it last saw.
    virtual std::optional<InterfaceHealth> health() { return std::nullopt; }
    // Failed syscalls by operation, for /metrics; none for a userspace dataplane.
    virtual std::optional<SyscallErrorCounts> syscall_errors() const { return std::nullopt; }
};

class InterfaceHost {
  public:
    virtual ~InterfaceHost() = default;
    // The CPUs (workers) a policy is compiled for: split shares are rate / cpus.
    virtual uint32_t cpus() const = 0;
    // The interfaces enforcing when the daemon starts: programs a previous
    // daemon left pinned, or the appliance's ports.
    virtual Result<std::vector<std::unique_ptr<HostedInterface>>> adopt() = 0;
    // Whether attach/detach can change the set at run time; when not, an
    // `invalid` error says why.
    virtual Status can_attach() const = 0;
    // Loads a dataplane for `name`, not yet live: the daemon applies the
    // policy, then calls go_live().
    virtual Result<std::unique_ptr<HostedInterface>> open(const std::string& name, XdpMode mode) = 0;
    // Where state that outlives the daemon is kept (XDP: bpffs_dir).
    virtual std::optional<std::string> pin_root() const { return std::nullopt; }
    // Whether every hosted dataplane reports its decision cost.
    virtual bool decision_cost_enabled() const = 0;
    // Up, non-loopback links this host could protect and does not: `hosted`
    // are the ones it does.
    virtual std::vector<std::string> unprotected(const std::vector<std::string>& hosted) const {
        (void)hosted;
        return {};
    }
};

}  // namespace sluice
