// SPDX-License-Identifier: Apache-2.0
// CLOCK_MONOTONIC in ns: the clock bpf_ktime_get_ns reads, and the base
// sluice-dpdk scales the TSC from, so stamps from either dataplane compare
// with the daemon's. And wall-clock time, as the daemon and sluicectl show it.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace sluice {

inline uint64_t monotonic_ns() {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(now.tv_nsec);
}

// Unix time in ns (CLOCK_REALTIME): what bans expire by, since they must
// outlive the daemon, the dataplane's clock and a reboot.
inline uint64_t unix_now_ns() {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
}

// "2026-12-02T13:25:54Z"; "-" when the time cannot be represented.
inline std::string utc_time(int64_t unix_s) {
    const auto seconds = static_cast<time_t>(unix_s);
    tm broken_down{};
    if (gmtime_r(&seconds, &broken_down) == nullptr) return "-";
    char text[64];
    if (strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &broken_down) == 0) return "-";
    return text;
}

}  // namespace sluice
