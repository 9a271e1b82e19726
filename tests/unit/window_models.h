// SPDX-License-Identifier: Apache-2.0
// The window algorithms' reference models, written plainly (full window
// numbers in a map, a real list of admission times), and the randomised
// traces they are checked on: shared by the tests of the core's window
// steps (window_test.cpp) and of the per-source level that uses them
// (source_window_test.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <random>
#include <vector>

#include "core_support.h"

namespace sluice::test {

inline constexpr uint64_t kMs = 1'000'000;

inline sluice_window_limit window_limit(uint8_t algorithm, uint64_t window_ns, uint64_t limit, uint8_t index_bits,
                                        uint8_t count_bits) {
    sluice_window_limit l{};
    l.algorithm = algorithm;
    l.window_ns = window_ns;
    l.limit = limit;
    l.index_bits = index_bits;
    l.count_bits = count_bits;
    return l;
}

// ---- reference models ---------------------------------------------------------

// Window numbers in full. Counts stay with the latest window anything was
// admitted in, which a clock that went backwards reads at its start.
struct WindowModel {
    uint64_t window_ns, limit;
    bool sliding;
    std::map<uint64_t, uint64_t> admitted;  // window number -> units
    uint64_t latest = 0;                    // window of the latest admission

    bool decide(uint64_t now, uint64_t cost) {
        uint64_t window = now / window_ns;
        uint64_t elapsed = now - window * window_ns;
        if (window < latest) {
            window = latest;
            elapsed = 0;
        }
        const uint64_t cur = admitted[window];
        bool admit = false;
        if (!sliding) {
            admit = cur + cost <= limit;
        } else {
            const uint64_t prev = admitted[window - 1];
            const uint64_t weight = ((window_ns - elapsed) * 65536 + window_ns - 1) / window_ns;
            admit = cost <= limit && prev * weight + (cur + cost) * 65536 <= limit * 65536;
        }
        if (admit) {
            admitted[window] += cost;
            latest = window;
        }
        return admit;
    }
};

// Every admission's time; one is admitted iff fewer than `limit` lie in (t - W, t].
struct LogModel {
    uint64_t window_ns, limit;
    std::deque<uint64_t> times;  // admissions still inside the window, oldest first

    bool decide(uint64_t now) {
        if (!times.empty()) now = std::max(now, times.back());
        // The model's clock never goes back, so what left the window stays out.
        while (!times.empty() && now - times.front() >= window_ns) times.pop_front();
        if (times.size() >= limit) return false;
        times.push_back(now);
        return true;
    }
};

// ---- traces --------------------------------------------------------------------

// Arrival times: bursts at a window's end and the next one's start, steady
// streams, idle gaps of a few windows (fewer than 2^(index_bits - 1)) and
// steps back in time.
inline std::vector<uint64_t> random_trace(std::mt19937_64& rng, uint64_t window_ns, size_t length) {
    std::vector<uint64_t> trace;
    uint64_t now = kT0 + rng() % window_ns;
    std::uniform_int_distribution<int> pick(0, 99);
    while (trace.size() < length) {
        const int kind = pick(rng);
        if (kind < 10) {  // a burst straddling the next boundary
            const uint64_t boundary = (now / window_ns + 1) * window_ns;
            now = boundary - 1 - rng() % std::max<uint64_t>(1, window_ns / 50);
            for (int i = rng() % 12; i > 0; i--) trace.push_back(now += rng() % (window_ns / 25 + 1));
        } else if (kind < 14) {  // idle for up to 6 windows
            now += rng() % (6 * window_ns);
        } else if (kind < 18) {  // the clock steps back, at most a window and a half
            now -= std::min(now - kT0, rng() % (window_ns + window_ns / 2));
        } else {
            now += rng() % (window_ns / 8 + 1);
        }
        trace.push_back(now);
    }
    return trace;
}

inline uint64_t random_cost(std::mt19937_64& rng, bool units) { return units ? 1 : 1 + rng() % 3; }

}  // namespace sluice::test
