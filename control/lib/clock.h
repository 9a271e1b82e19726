// SPDX-License-Identifier: Apache-2.0
// CLOCK_MONOTONIC in ns: the clock bpf_ktime_get_ns reads, and the base
// sluice-dpdk scales the TSC from, so stamps from either dataplane compare
// with the daemon's.
#pragma once

#include <time.h>

#include <cstdint>

namespace sluice {

inline uint64_t monotonic_ns() {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(now.tv_nsec);
}

}  // namespace sluice
