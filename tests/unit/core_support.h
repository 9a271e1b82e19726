// SPDX-License-Identifier: Apache-2.0
// Shared by the core's unit tests: the decision core built for a
// single-threaded simulation (CPUs are arrays, so the lease lock only counts),
// limits compiled the way the control plane compiles them, and the
// token-bucket bound checked over every window of an admission log.
#pragma once

#include <cstdint>

namespace sluice::test {
// How often the core took a shared bucket's lock, so tests can see when it does not.
inline uint64_t shared_lock_count = 0;
}  // namespace sluice::test
#define SLUICE_SHARED_LOCK(shared) ((void)(shared), ::sluice::test::shared_lock_count++)
#define SLUICE_SHARED_UNLOCK(shared) ((void)(shared))
#include "sluice/decide.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "rate_limits.h"

namespace sluice::test {

__extension__ typedef __int128 int128;

inline constexpr uint64_t kSecond = 1'000'000'000;
// Fake clock origin: far from 0 (a zero stamp means "new bucket").
inline constexpr uint64_t kT0 = 1'000 * kSecond;

inline sluice_level_limit level_or_die(const LevelSettings& settings) {
    auto level = compile_level(settings, "test");
    if (!level) {
        ADD_FAILURE() << level.error().message;
        return sluice_level_limit{};
    }
    return level.value();
}

inline sluice_level_limit make_level(uint64_t rate, uint64_t burst, Unit unit = Unit::packets,
                                     Accuracy accuracy = Accuracy::split, uint32_t cpus = 1,
                                     uint32_t max_frame_bytes = 1518) {
    LevelSettings settings;
    settings.limit = {rate, burst, unit};
    settings.accuracy = accuracy;
    settings.cpus = cpus;
    settings.max_frame_bytes = max_frame_bytes;
    return level_or_die(settings);
}

// A window limit as the policy says it, frames of at most 1518 bytes.
inline WindowSettings window_settings(Algorithm algorithm, uint64_t limit, uint64_t window_ns,
                                      Unit unit = Unit::packets) {
    WindowSettings settings;
    settings.algorithm = algorithm;
    settings.limit = limit;
    settings.window_ns = window_ns;
    settings.unit = unit;
    settings.max_frame_bytes = 1518;
    return settings;
}

struct Admission {
    uint64_t time_ns;
    uint64_t cost;  // units
};

// The largest excess, in nano-units, of admitted cost over
// burst + rate*T (+ extra) across every window [t_i, t_j] of the log; <= 0
// means the bound holds everywhere. Windows that start and end on admissions
// are the tightest, and a running minimum makes the check linear.
inline int128 worst_window_excess(const std::vector<Admission>& log, uint64_t rate_per_s, uint64_t burst,
                                  uint64_t extra_nano = 0) {
    const int128 burst_nano = static_cast<int128>(burst) * SLUICE_NANO + extra_nano;
    int128 prefix = 0;                                  // admitted nano-units before the current entry
    int128 best_start = static_cast<int128>(1) << 120;  // min over i <= j of prefix(i-1) - rate*t_i
    int128 worst = -burst_nano;
    for (const Admission& a : log) {
        const int128 rate_t = static_cast<int128>(rate_per_s) * a.time_ns;
        best_start = std::min(best_start, prefix - rate_t);
        prefix += static_cast<int128>(a.cost) * SLUICE_NANO;
        worst = std::max(worst, (prefix - rate_t) - best_start - burst_nano);
    }
    return worst;
}

inline std::string describe(int128 v) { return std::to_string(static_cast<long double>(v)); }

}  // namespace sluice::test
