// SPDX-License-Identifier: Apache-2.0
#include "xdp_host.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/syscall.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string_view>

#include "control_protocol.h"  // errno_message
#include "logger.h"

namespace sluice {
namespace {

constexpr std::string_view kBpffsRoot = "/sys/fs/bpf";

// CAP_BPF and CAP_PERFMON are newer than CAP_SYS_ADMIN, which the kernel
// still accepts in their place.
struct RequiredCapability {
    int capability;
    std::string_view name;
    std::string_view needed_for;
};
constexpr RequiredCapability kRequiredCapabilities[] = {
    {CAP_BPF, "CAP_BPF", "creating maps and loading the program"},
    {CAP_NET_ADMIN, "CAP_NET_ADMIN", "loading an XDP program and attaching it"},
    {CAP_PERFMON, "CAP_PERFMON", "the verifier's pointer arithmetic on packet data"},
};

// The effective capability set, read with capget(2) (no libcap for three bits).
std::optional<uint64_t> effective_capabilities() {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3]{};
    if (syscall(SYS_capget, &header, data) != 0) return std::nullopt;
    return static_cast<uint64_t>(data[1].effective) << 32 | data[0].effective;
}

// Checked before touching bpffs or bpf(): an EPERM from the verifier or
// the loader does not say which capability was missing.
Status check_capabilities() {
    const auto effective = effective_capabilities();
    if (!effective) return Error{errno_message("reading sluiced's capabilities (capget)", errno)};
    const auto has = [&](int capability) { return (*effective >> capability & 1) != 0; };
    std::string missing, why;
    for (const auto& required : kRequiredCapabilities) {
        const bool sys_admin_stands_in = required.capability != CAP_NET_ADMIN && has(CAP_SYS_ADMIN);
        if (has(required.capability) || sys_admin_stands_in) continue;
        missing += (missing.empty() ? "" : ", ") + std::string(required.name);
        why += (why.empty() ? "" : "; ") + std::string(required.name) + ": " + std::string(required.needed_for);
    }
    if (missing.empty()) return ok_status();
    return Error{"sluiced lacks " + missing + " in its effective capabilities (" + why +
                 "); run it as root, or grant CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON as sluiced.service does"};
}

// BPF_ENABLE_STATS needs CAP_SYS_ADMIN, which sluiced.service does not
// grant; the statistics are also on while the kernel.bpf_stats_enabled
// sysctl is 1.
bool bpf_stats_sysctl_on() {
    std::ifstream sysctl("/proc/sys/kernel/bpf_stats_enabled");
    int value = 0;
    return sysctl >> value && value == 1;
}

bool on_bpffs(const std::string& path) {
    struct statfs fs {};
    return statfs(path.c_str(), &fs) == 0 && static_cast<unsigned long>(fs.f_type) == BPF_FS_MAGIC;
}

// The XDP mode our program (`program_fd`) runs in on `ifindex`, from the kernel.
XdpMode attached_mode(int ifindex, int program_fd) {
    LIBBPF_OPTS(bpf_xdp_query_opts, query);
    bpf_prog_info info{};
    __u32 length = sizeof(info);
    if (bpf_xdp_query(ifindex, 0, &query) == 0 && bpf_obj_get_info_by_fd(program_fd, &info, &length) == 0 &&
        query.skb_prog_id == info.id)
        return XdpMode::generic;
    return XdpMode::native;
}

Result<uint32_t> possible_cpus() {
    const int cpus = libbpf_num_possible_cpus();
    if (cpus <= 0) return Error{errno_message("counting possible CPUs", -cpus)};
    return static_cast<uint32_t>(cpus);
}

class XdpInterface : public HostedInterface {
  public:
    // `created_pins`: opening made pin_dir, so an interface that never goes
    // live takes it away again.
    XdpInterface(std::string name, std::unique_ptr<XdpDataplane> dataplane, XdpPlacement placement, bool live,
                 bool created_pins)
        : name_(std::move(name)),
          dataplane_(std::move(dataplane)),
          placement_(std::move(placement)),
          live_(live),
          created_pins_(created_pins) {}
    ~XdpInterface() override {
        if (live_ || !created_pins_ || !dataplane_) return;
        dataplane_.reset();
        std::error_code ignored;
        std::filesystem::remove_all(placement_.pin_dir, ignored);
    }

    const std::string& name() const override { return name_; }
    EnforcementPoint& dataplane() override { return *dataplane_; }
    std::optional<XdpPlacement> xdp() const override { return placement_; }
    std::optional<SyscallErrorCounts> syscall_errors() const override { return dataplane_->syscall_errors(); }

    std::optional<InterfaceHealth> health() override {
        // Another interface of the same name (deleted and made again) is not
        // the one the program was attached to.
        errno = 0;
        const unsigned index = if_nametoindex(name_.c_str());
        if (index != 0)
            interface_present_ = static_cast<int>(index) == placement_.ifindex;
        else if (errno == ENODEV || errno == ENXIO)
            interface_present_ = false;
        // Other errors (EMFILE: if_nametoindex needs a socket) cannot tell.
        return InterfaceHealth{interface_present_, dataplane_->missing_pins()};
    }

    Status go_live() override {
        if (auto status = dataplane_->attach(placement_.ifindex, placement_.mode); !status) return status;
        live_ = true;
        log(LogLevel::info, "attached",
            {{"interface", name_},
             {"mode", std::string(xdp_mode_name(placement_.mode))},
             {"pin_dir", placement_.pin_dir}});
        return ok_status();
    }
    Status go_offline() override {
        if (auto status = dataplane_->detach(placement_.ifindex); !status) return status;
        live_ = false;
        return ok_status();
    }
    Status discard() override {
        dataplane_.reset();
        std::error_code error;
        std::filesystem::remove_all(placement_.pin_dir, error);
        if (error)
            return Error{"detached " + name_ + " but cannot remove its pins under " + placement_.pin_dir + ": " +
                         error.message()};
        return ok_status();
    }

  private:
    std::string name_;
    std::unique_ptr<XdpDataplane> dataplane_;
    XdpPlacement placement_;
    bool live_ = false;
    bool created_pins_ = false;
    bool interface_present_ = true;  // as health() last saw it
};

}  // namespace

Status prepare_bpffs_dir(const std::string& dir) {
    // The first existing ancestor tells which filesystem `dir` will be on.
    std::filesystem::path existing(dir);
    std::error_code error;
    while (!existing.empty() && existing != existing.root_path() && !std::filesystem::exists(existing, error)) {
        // Not "does not exist" but "cannot look": e.g. /sys/fs/bpf is 0700 and sluiced is not root.
        if (error) return Error{"cannot reach bpffs_dir " + dir + " at " + existing.string() + ": " + error.message()};
        existing = existing.parent_path();
    }
    if (!on_bpffs(existing)) {
        const bool under_root = dir.rfind(std::string(kBpffsRoot) + "/", 0) == 0;
        if (!under_root)
            return Error{"bpffs_dir " + dir +
                         " is not on a bpf filesystem: mount one there (mount -t bpf bpf DIR) "
                         "or use a directory under /sys/fs/bpf"};
        if (mount("bpffs", std::string(kBpffsRoot).c_str(), "bpf", 0, "mode=0700") != 0)
            return Error{errno_message("mounting bpffs on /sys/fs/bpf for bpffs_dir " + dir, errno)};
        log(LogLevel::info, "mounted bpffs", {{"path", std::string(kBpffsRoot)}});
    }
    std::filesystem::create_directories(dir, error);
    if (error) return Error{"cannot create bpffs_dir " + dir + ": " + error.message()};
    if (!on_bpffs(dir)) return Error{"bpffs_dir " + dir + " is not on a bpf filesystem"};
    return ok_status();
}

Result<std::unique_ptr<XdpHost>> XdpHost::create(XdpHostOptions options) {
    if (auto status = check_capabilities(); !status) return status.error();
    if (auto status = prepare_bpffs_dir(options.bpffs_dir); !status) return status.error();
    auto cpus = possible_cpus();
    if (!cpus) return cpus.error();
    std::unique_ptr<XdpHost> host(new XdpHost(std::move(options)));
    host->cpus_ = cpus.value();
    host->run_time_stats_ = UniqueFd(bpf_enable_stats(BPF_STATS_RUN_TIME));
    const int stats_error = errno;
    if (host->run_time_stats_.get() < 0) {
        host->run_time_stats_by_sysctl_ = bpf_stats_sysctl_on();
        if (!host->run_time_stats_by_sysctl_)
            log(LogLevel::warn,
                "BPF run-time statistics unavailable (BPF_ENABLE_STATS needs CAP_SYS_ADMIN; or set the "
                "kernel.bpf_stats_enabled sysctl to 1); decision cost will read 0",
                {{"error", std::strerror(stats_error)}});
    }
    return host;
}

Result<std::unique_ptr<XdpDataplane>> XdpHost::open_dataplane(const std::string& pin_dir) const {
    XdpOptions options;
    options.pin_dir = pin_dir;
    options.source_capacity = options_.source_capacity;
    options.prefix_capacity = options_.prefix_capacity;
    options.drop_sample_period = options_.drop_sample_period;
    options.run_time_stats = decision_cost_enabled();
    return XdpDataplane::open(options);
}

Result<std::vector<std::unique_ptr<HostedInterface>>> XdpHost::adopt() {
    std::vector<std::unique_ptr<HostedInterface>> adopted;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(options_.bpffs_dir, error)) {
        if (!entry.is_directory()) continue;
        const std::string name = entry.path().filename();
        const int ifindex = static_cast<int>(if_nametoindex(name.c_str()));
        auto dataplane = open_dataplane(entry.path());
        if (!dataplane) return Error{"cannot re-adopt " + name + ": " + dataplane.error().message};
        const auto links = dataplane.value()->attached_ifindexes();
        if (ifindex == 0 || links.empty() || links.front() != ifindex) {
            log(LogLevel::warn, "pinned state without an attached program; sluicectl attach re-uses it",
                {{"interface", name}, {"pin_dir", entry.path()}});
            continue;
        }
        const XdpMode mode = attached_mode(ifindex, dataplane.value()->program_fd());
        log(LogLevel::info, "re-adopted pinned interface",
            {{"interface", name}, {"mode", std::string(xdp_mode_name(mode))}, {"pin_dir", entry.path()}});
        adopted.push_back(std::make_unique<XdpInterface>(name, std::move(dataplane.value()),
                                                         XdpPlacement{ifindex, mode, entry.path()}, true, false));
    }
    if (error) return Error{"cannot list bpffs_dir " + options_.bpffs_dir + ": " + error.message()};
    return adopted;
}

Result<std::unique_ptr<HostedInterface>> XdpHost::open(const std::string& name, XdpMode mode) {
    const int ifindex = static_cast<int>(if_nametoindex(name.c_str()));
    if (ifindex == 0) return Error{"no interface named \"" + name + "\" in sluiced's network namespace", "interface"};
    const std::string pin_dir = options_.bpffs_dir + "/" + name;
    const bool had_pins = std::filesystem::exists(pin_dir);
    auto dataplane = open_dataplane(pin_dir);
    if (!dataplane) return dataplane.error();
    return std::unique_ptr<HostedInterface>(std::make_unique<XdpInterface>(
        name, std::move(dataplane.value()), XdpPlacement{ifindex, mode, pin_dir}, false, !had_pins));
}

std::vector<std::string> XdpHost::unprotected(const std::vector<std::string>& hosted) const {
    std::vector<std::string> names;
    std::unique_ptr<struct if_nameindex, void (*)(struct if_nameindex*)> list(if_nameindex(), if_freenameindex);
    UniqueFd probe(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!list || probe.get() < 0) return names;
    for (const struct if_nameindex* it = list.get(); it->if_index != 0; ++it) {
        if (std::find(hosted.begin(), hosted.end(), it->if_name) != hosted.end()) continue;
        ifreq request{};
        std::strncpy(request.ifr_name, it->if_name, IFNAMSIZ - 1);
        if (ioctl(probe.get(), SIOCGIFFLAGS, &request) != 0) continue;
        if ((request.ifr_flags & IFF_UP) && !(request.ifr_flags & IFF_LOOPBACK)) names.emplace_back(it->if_name);
    }
    return names;
}

}  // namespace sluice
