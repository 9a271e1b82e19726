// SPDX-License-Identifier: Apache-2.0
// What sluiced needs of the kernel around its XDP dataplanes rather than
// inside one of them: the bpf filesystem the pins live on, which XDP mode an
// adopted program runs in, the CPUs the kernel may run it on, and the BPF
// run-time statistics its decision cost is read from. Here so that libbpf
// stays in this layer.
#pragma once

#include <cstdint>
#include <string>

#include "result.h"
#include "unique_fd.h"
#include "xdp_dataplane.h"

namespace sluice {

// Makes sure `dir` is on a bpf filesystem: mounts bpffs on /sys/fs/bpf when
// `dir` is under it and nothing is mounted there, then creates `dir`.
Status prepare_bpffs_dir(const std::string& dir);

// The XDP mode our program (`program_fd`) runs in on `ifindex`.
XdpMode attached_mode(int ifindex, int program_fd);

// The CPUs a per-CPU map has a slot for (the policy's split shares divide by it).
Result<uint32_t> possible_cpus();

// Turns on the kernel's BPF run-time statistics for as long as the fd is
// open; an empty fd (errno set) when the kernel refuses.
UniqueFd enable_bpf_run_time_stats();

}  // namespace sluice
