// SPDX-License-Identifier: Apache-2.0
#include "xdp_host.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/statfs.h>

#include <cerrno>
#include <filesystem>
#include <string_view>

#include "control_protocol.h"  // errno_message
#include "logger.h"

namespace sluice {
namespace {

constexpr std::string_view kBpffsRoot = "/sys/fs/bpf";

bool on_bpffs(const std::string& path) {
    struct statfs fs {};
    return statfs(path.c_str(), &fs) == 0 && static_cast<unsigned long>(fs.f_type) == BPF_FS_MAGIC;
}

}  // namespace

Status prepare_bpffs_dir(const std::string& dir) {
    // The first existing ancestor tells which filesystem `dir` will be on.
    std::filesystem::path existing(dir);
    while (!existing.empty() && existing != existing.root_path() && !std::filesystem::exists(existing))
        existing = existing.parent_path();
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
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    if (error) return Error{"cannot create bpffs_dir " + dir + ": " + error.message()};
    if (!on_bpffs(dir)) return Error{"bpffs_dir " + dir + " is not on a bpf filesystem"};
    return ok_status();
}

// The XDP mode our program runs in on `ifindex`, from the kernel.
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

UniqueFd enable_bpf_run_time_stats() { return UniqueFd(bpf_enable_stats(BPF_STATS_RUN_TIME)); }

}  // namespace sluice
