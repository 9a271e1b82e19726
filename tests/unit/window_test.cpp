// SPDX-License-Identifier: Apache-2.0
// The window algorithms of the core (sluice/window.h) on a simulated clock:
// each checked decision by decision against a reference model written
// plainly (window_models.h), on randomised traces with arrivals bunched at window boundaries,
// bursts, idle gaps and clock regressions; their bounds over every window;
// the quota every decision answers (remaining, retry-after, reset); the
// sliding-window counter's error against the exact log; and each word's
// compare-and-swap discipline under real threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "window_models.h"

namespace sluice::test {
namespace {

// The word layouts the dataplanes use: a source-table entry's 45 bits, a class's 64.
struct Layout {
    uint8_t index_bits, count_bits;
};
constexpr Layout kFixedLayouts[] = {{16, 29}, {32, 32}};
constexpr Layout kSlidingLayouts[] = {{11, 17}, {16, 24}};

// ---- decision by decision -------------------------------------------------------

void check_against_model(uint8_t algorithm, const Layout& layout, uint64_t seed) {
    std::mt19937_64 rng(seed);
    const uint64_t window_ns = std::vector<uint64_t>{kMs, kSecond, 7 * kSecond + 3}[rng() % 3];
    const uint64_t limit = 3 + rng() % 30;  // every cost fits, so no word stays unwritten for long
    const bool sliding = algorithm == SLUICE_ALGORITHM_SLIDING_WINDOW;
    const auto l = window_limit(algorithm, window_ns, limit, layout.index_bits, layout.count_bits);
    WindowModel model{window_ns, limit, sliding, {}, 0};
    __u64 word = 0;
    size_t step = 0;
    for (uint64_t now : random_trace(rng, window_ns, 4000)) {
        const uint64_t cost = random_cost(rng, false);
        const bool expected = model.decide(now, cost);
        const bool admitted = sluice_window_admit(&l, &word, now, cost, nullptr);
        ASSERT_EQ(admitted, expected) << "seed " << seed << " step " << step << " now " << now << " cost " << cost
                                      << " window " << window_ns << " limit " << limit << " layout "
                                      << int(layout.index_bits) << "/" << int(layout.count_bits);
        step++;
    }
}

TEST(FixedWindow, MatchesItsModelDecisionByDecision) {
    for (const Layout& layout : kFixedLayouts)
        for (uint64_t seed = 1; seed <= 60; seed++)
            ASSERT_NO_FATAL_FAILURE(check_against_model(SLUICE_ALGORITHM_FIXED_WINDOW, layout, seed));
}

TEST(SlidingWindow, MatchesItsModelDecisionByDecision) {
    for (const Layout& layout : kSlidingLayouts)
        for (uint64_t seed = 1; seed <= 60; seed++)
            ASSERT_NO_FATAL_FAILURE(check_against_model(SLUICE_ALGORITHM_SLIDING_WINDOW, layout, seed));
}

TEST(SlidingLog, MatchesTheExactLogDecisionByDecision) {
    for (uint64_t seed = 1; seed <= 100; seed++) {
        std::mt19937_64 rng(seed);
        const uint64_t window_ns = std::vector<uint64_t>{kMs, kSecond, 60 * kSecond}[rng() % 3];
        const uint64_t limit = 1 + rng() % SLUICE_LOG_MAX;
        const auto l = window_limit(SLUICE_ALGORITHM_SLIDING_LOG, window_ns, limit, 0, 0);
        LogModel model{window_ns, limit, {}};
        sluice_log log{};
        size_t step = 0;
        for (uint64_t now : random_trace(rng, window_ns, 3000)) {
            ASSERT_EQ(sluice_log_step(&l, &log, now, nullptr), model.decide(now))
                << "seed " << seed << " step " << step << " limit " << limit;
            step++;
        }
    }
}

// ---- bounds over every window ---------------------------------------------------

// The most units admitted in any rolling window (t - W, t] of an admission list.
uint64_t most_in_rolling_window(const std::vector<std::pair<uint64_t, uint64_t>>& admitted, uint64_t window_ns) {
    uint64_t most = 0, sum = 0;
    size_t first = 0;
    for (size_t i = 0; i < admitted.size(); i++) {
        sum += admitted[i].second;
        while (admitted[i].first - admitted[first].first >= window_ns) sum -= admitted[first++].second;
        most = std::max(most, sum);
    }
    return most;
}

uint64_t most_in_aligned_window(const std::vector<std::pair<uint64_t, uint64_t>>& admitted, uint64_t window_ns) {
    std::map<uint64_t, uint64_t> per_window;
    for (const auto& [at, cost] : admitted) per_window[at / window_ns] += cost;
    uint64_t most = 0;
    for (const auto& [window, units] : per_window) most = std::max(most, units);
    return most;
}

TEST(WindowBounds, FixedAndSlidingWindowsNeverPassTheLimitInAnAlignedWindow) {
    for (uint8_t algorithm : {SLUICE_ALGORITHM_FIXED_WINDOW, SLUICE_ALGORITHM_SLIDING_WINDOW}) {
        for (uint64_t seed = 1; seed <= 40; seed++) {
            std::mt19937_64 rng(seed);
            const uint64_t window_ns = kSecond, limit = 1 + rng() % 50;
            const auto l = window_limit(algorithm, window_ns, limit, 16, 24);
            __u64 word = 0;
            uint64_t latest = 0;
            std::vector<std::pair<uint64_t, uint64_t>> admitted;
            for (uint64_t now : random_trace(rng, window_ns, 3000)) {
                const uint64_t cost = random_cost(rng, false);
                // A clock that went back is charged to the window in force: read it as the latest admission.
                if (sluice_window_admit(&l, &word, now, cost, nullptr)) {
                    latest = std::max(latest, now);
                    admitted.emplace_back(latest, cost);
                }
            }
            EXPECT_LE(most_in_aligned_window(admitted, window_ns), limit) << "seed " << seed;
        }
    }
}

TEST(WindowBounds, TheFixedWindowAdmitsTwiceItsLimitAcrossABoundary) {
    const uint64_t limit = 10;
    const auto l = window_limit(SLUICE_ALGORITHM_FIXED_WINDOW, kSecond, limit, 16, 29);
    const uint64_t boundary = kT0 + kSecond - kT0 % kSecond;
    __u64 word = 0;
    uint64_t admitted = 0;
    for (uint64_t i = 0; i < 3 * limit; i++) admitted += sluice_window_admit(&l, &word, boundary - 1, 1, nullptr);
    for (uint64_t i = 0; i < 3 * limit; i++) admitted += sluice_window_admit(&l, &word, boundary, 1, nullptr);
    EXPECT_EQ(admitted, 2 * limit) << "its known weakness: 2 x limit within 1 ns";
}

TEST(WindowBounds, TheSlidingLogNeverPassesTheLimitInAnyRollingWindow) {
    for (uint64_t seed = 1; seed <= 40; seed++) {
        std::mt19937_64 rng(seed);
        const uint64_t window_ns = kSecond, limit = 1 + rng() % SLUICE_LOG_MAX;
        const auto l = window_limit(SLUICE_ALGORITHM_SLIDING_LOG, window_ns, limit, 0, 0);
        sluice_log log{};
        std::vector<std::pair<uint64_t, uint64_t>> admitted;
        uint64_t latest = 0;
        for (uint64_t now : random_trace(rng, window_ns, 3000)) {
            if (sluice_log_step(&l, &log, now, nullptr)) {
                latest = std::max(latest, now);
                admitted.emplace_back(latest, 1);
            }
        }
        EXPECT_LE(most_in_rolling_window(admitted, window_ns), limit) << "seed " << seed;
    }
}

// ---- the sliding-window counter against the exact log ----------------------------

struct Disagreement {
    uint64_t decisions = 0, wrongly_admitted = 0, wrongly_refused = 0;
    double most_in_rolling_window = 0;          // in units of the limit
    uint64_t admitted = 0, exact_admitted = 0;  // the counter's; the exact log's on its own
    double rate() const { return double(wrongly_admitted + wrongly_refused) / double(decisions); }
};

// Offered load around the limit (Poisson arrivals at `load` x limit per
// window); each counter decision is compared with what the exact log would
// decide given the same admissions so far.
Disagreement counter_against_log(uint64_t seed, double load) {
    std::mt19937_64 rng(seed);
    const uint64_t window_ns = kSecond, limit = 20 + rng() % 200;
    const auto l = window_limit(SLUICE_ALGORITHM_SLIDING_WINDOW, window_ns, limit, 16, 24);
    std::exponential_distribution<double> gap(load * double(limit) / double(window_ns));
    std::deque<uint64_t> admitted;
    LogModel exact_alone{window_ns, limit, {}};
    __u64 word = 0;
    uint64_t now = kT0;
    Disagreement result;
    for (int i = 0; i < 20'000; i++) {
        now += static_cast<uint64_t>(gap(rng)) + 1;
        result.exact_admitted += exact_alone.decide(now);
        while (!admitted.empty() && now - admitted.front() >= window_ns) admitted.pop_front();
        const bool exact = admitted.size() < limit;
        const bool counter = sluice_window_admit(&l, &word, now, 1, nullptr);
        result.decisions++;
        if (counter && !exact) result.wrongly_admitted++;
        if (!counter && exact) result.wrongly_refused++;
        if (counter) admitted.push_back(now);
        result.admitted += counter;
        result.most_in_rolling_window =
            std::max(result.most_in_rolling_window, double(admitted.size()) / double(limit));
    }
    return result;
}

TEST(SlidingWindow, ItsErrorAgainstTheExactLogStaysWithinTheStatedBound) {
    for (double load : {0.5, 0.9, 1.1, 2.0, 5.0}) {
        double worst = 0, sum = 0, wrongly_admitted = 0, overshoot = 0, share = 0;
        const int runs = 25;
        for (uint64_t seed = 1; seed <= runs; seed++) {
            const Disagreement d = counter_against_log(seed, load);
            worst = std::max(worst, d.rate());
            sum += d.rate();
            wrongly_admitted += double(d.wrongly_admitted) / double(d.decisions);
            overshoot = std::max(overshoot, d.most_in_rolling_window);
            share += double(d.admitted) / double(d.exact_admitted) / runs;
        }
        std::cout << "sliding_window vs exact log at " << load << " x limit: " << 100 * sum / runs
                  << "% of decisions differ (" << 100 * wrongly_admitted / runs << "% wrongly admitted), worst trace "
                  << 100 * worst << "%; most in a rolling window " << overshoot << " x limit; admits " << share
                  << " x what the exact log admits on the same arrivals\n";
        EXPECT_LE(overshoot, 2.0) << "the bound a rolling window can see";
        if (load <= 0.5) {
            EXPECT_LT(sum / runs, 0.001) << "below the limit it nearly always agrees";
        }
    }
}

// ---- the quota ------------------------------------------------------------------

// A copy of the state a probe may change without touching the real one.
struct WindowState {
    sluice_window_limit l;
    __u64 word = 0;
    sluice_log log{};

    bool decide(uint64_t now, uint64_t cost, sluice_quota* quota = nullptr) {
        if (l.algorithm == SLUICE_ALGORITHM_SLIDING_LOG) return cost == 1 && sluice_log_step(&l, &log, now, quota);
        return sluice_window_admit(&l, &word, now, cost, quota);
    }
};

void check_quota(const WindowState& state, uint64_t now, const sluice_quota& quota, bool admitted, uint64_t cost,
                 const std::string& where) {
    // remaining: exactly that many more units are admitted at the same time.
    WindowState probe = state;
    uint64_t more = 0;
    while (more <= probe.l.limit && probe.decide(now, 1)) more++;
    ASSERT_EQ(more, quota.remaining) << where;

    // reset: from then on, as if nothing had been admitted.
    sluice_quota fresh{};
    probe = state;
    if (state.l.algorithm == SLUICE_ALGORITHM_SLIDING_LOG) {
        ASSERT_TRUE(probe.decide(now + quota.reset_ns, 1, &fresh)) << where;
        EXPECT_EQ(fresh.remaining + 1, state.l.limit) << where << ": reset " << quota.reset_ns;
    } else {
        (void)probe.decide(now + quota.reset_ns, state.l.limit + 1, &fresh);  // refused: writes nothing
        EXPECT_EQ(fresh.remaining, state.l.limit) << where << ": reset " << quota.reset_ns;
    }

    // retry_after: the earliest time the refused cost is admitted.
    if (admitted) {
        ASSERT_EQ(quota.retry_after_ns, 0u) << where;
        return;
    }
    ASSERT_NE(quota.retry_after_ns, SLUICE_NEVER) << where;
    ASSERT_GT(quota.retry_after_ns, 0u) << where;
    probe = state;
    EXPECT_FALSE(probe.decide(now + quota.retry_after_ns - 1, cost)) << where << ": retry " << quota.retry_after_ns;
    probe = state;
    EXPECT_TRUE(probe.decide(now + quota.retry_after_ns, cost)) << where << ": retry " << quota.retry_after_ns;
}

TEST(WindowQuota, RemainingRetryAfterAndResetHoldForEveryAlgorithm) {
    for (uint8_t algorithm :
         {SLUICE_ALGORITHM_FIXED_WINDOW, SLUICE_ALGORITHM_SLIDING_WINDOW, SLUICE_ALGORITHM_SLIDING_LOG}) {
        for (uint64_t seed = 1; seed <= 20; seed++) {
            std::mt19937_64 rng(seed);
            const uint64_t window_ns = std::vector<uint64_t>{kMs, kSecond, 7 * kSecond + 3}[rng() % 3];
            const uint64_t limit = 3 + rng() % 20;  // every cost fits
            WindowState state{window_limit(algorithm, window_ns, limit, 16, 24)};
            const bool units = algorithm == SLUICE_ALGORITHM_SLIDING_LOG;
            uint64_t latest = 0;
            size_t step = 0;
            for (uint64_t now : random_trace(rng, window_ns, 600)) {
                // The probes assume time as the state sees it: no clock regressions here.
                now = latest = std::max(latest, now);
                const uint64_t cost = random_cost(rng, units);
                const WindowState before = state;
                sluice_quota quota{};
                const bool admitted = state.decide(now, cost, &quota);
                const std::string where = "algorithm " + std::to_string(algorithm) + " seed " + std::to_string(seed) +
                                          " step " + std::to_string(step++);
                ASSERT_NO_FATAL_FAILURE(check_quota(state, now, quota, admitted, cost, where));
                if (!admitted) {
                    ASSERT_EQ(state.word, before.word) << where << ": a refusal writes nothing";
                }
            }
        }
    }
}

TEST(WindowQuota, ACostAboveTheLimitIsNeverAdmitted) {
    WindowState fixed{window_limit(SLUICE_ALGORITHM_FIXED_WINDOW, kSecond, 5, 16, 29)};
    sluice_quota quota{};
    EXPECT_FALSE(fixed.decide(kT0, 6, &quota));
    EXPECT_EQ(quota.retry_after_ns, SLUICE_NEVER);
    WindowState sliding{window_limit(SLUICE_ALGORITHM_SLIDING_WINDOW, kSecond, 5, 11, 17)};
    EXPECT_FALSE(sliding.decide(kT0, 6, &quota));
    EXPECT_EQ(quota.retry_after_ns, SLUICE_NEVER);
}

TEST(GcraQuota, AnswersFromTheDebt) {
    sluice_quota quota{};
    // 10 units of 100 ns each: a debt of 250 ns leaves 7 units; the bucket is full again in 250 ns.
    sluice_gcra_quota(250, 100, 1000, 100, 1, &quota);
    EXPECT_EQ(quota.remaining, 7u);
    EXPECT_EQ(quota.reset_ns, 250u);
    EXPECT_EQ(quota.retry_after_ns, 0u);
    // Refused at a debt of 950: a 100 ns cost fits again once 50 ns have passed.
    sluice_gcra_quota(950, 100, 1000, 100, 0, &quota);
    EXPECT_EQ(quota.remaining, 0u);
    EXPECT_EQ(quota.retry_after_ns, 50u);
    sluice_gcra_quota(0, 1001, 1000, 100, 0, &quota);
    EXPECT_EQ(quota.retry_after_ns, SLUICE_NEVER);
}

// ---- one atomic transition under real threads -----------------------------------

unsigned test_threads() { return std::max(2u, std::thread::hardware_concurrency()); }

// Every thread runs the same clock, unsynchronised with the others, so each
// also sees the word written from a later time: per window, the units admitted
// on all threads together never pass the limit. A read followed by an
// unguarded write would lose updates and admit more.
TEST(WindowConcurrency, NoUpdateIsLostAcrossThreads) {
    for (uint8_t algorithm : {SLUICE_ALGORITHM_FIXED_WINDOW, SLUICE_ALGORITHM_SLIDING_WINDOW}) {
        const uint64_t window_ns = 10 * kMs, limit = 1000;
        const auto l = window_limit(algorithm, window_ns, limit, 16, 24);
        alignas(64) __u64 word = 0;
        const unsigned threads = test_threads();
        std::vector<std::map<uint64_t, uint64_t>> per_window(threads);
        std::vector<std::thread> workers;
        std::atomic<bool> go{false};
        for (unsigned t = 0; t < threads; t++) {
            workers.emplace_back([&, t] {
                while (!go.load()) {
                }
                for (uint64_t step = 0; step < 200'000; step++) {
                    const uint64_t now = kT0 + step * (window_ns / 5000);
                    if (sluice_window_admit(&l, &word, now, 1, nullptr)) per_window[t][now / window_ns]++;
                }
            });
        }
        go.store(true);
        for (std::thread& worker : workers) worker.join();
        std::map<uint64_t, uint64_t> total;
        for (const auto& counts : per_window)
            for (const auto& [window, units] : counts) total[window] += units;
        uint64_t full_windows = 0;
        for (const auto& [window, units] : total) {
            ASSERT_LE(units, limit) << "algorithm " << int(algorithm) << " window " << window;
            full_windows += units == limit;
        }
        // 5000 steps per window on each thread: the fixed window fills every one.
        if (algorithm == SLUICE_ALGORITHM_FIXED_WINDOW) {
            EXPECT_EQ(full_windows, total.size());
        }
    }
}

TEST(WindowConcurrency, TheLogUnderItsLockAdmitsExactlyItsLimit) {
    const auto l = window_limit(SLUICE_ALGORITHM_SLIDING_LOG, kSecond, SLUICE_LOG_MAX, 0, 0);
    sluice_log log{};
    std::mutex lock;
    std::atomic<uint64_t> admitted{0};
    std::vector<std::thread> workers;
    for (unsigned t = 0; t < test_threads(); t++) {
        workers.emplace_back([&] {
            for (int i = 0; i < 10'000; i++) {
                std::lock_guard guard(lock);
                admitted += sluice_log_step(&l, &log, kT0 + static_cast<uint64_t>(i), nullptr);
            }
        });
    }
    for (std::thread& worker : workers) worker.join();
    EXPECT_EQ(admitted.load(), SLUICE_LOG_MAX);
}

// ---- a window level's state in full (the class aggregate's) ---------------------------

// As sluice_decide uses it: ask first (which must answer what the model
// would, and change nothing the model can see), then admit for real.
TEST(WindowState, AskThenAdmitMatchesTheModelsForEveryAlgorithm) {
    for (uint8_t algorithm :
         {SLUICE_ALGORITHM_FIXED_WINDOW, SLUICE_ALGORITHM_SLIDING_WINDOW, SLUICE_ALGORITHM_SLIDING_LOG}) {
        for (uint64_t seed = 1; seed <= 40; seed++) {
            std::mt19937_64 rng(seed);
            const bool log = algorithm == SLUICE_ALGORITHM_SLIDING_LOG;
            const uint64_t window_ns = std::vector<uint64_t>{kMs, kSecond, 7 * kSecond + 3}[rng() % 3];
            const uint64_t limit = log ? 1 + rng() % SLUICE_LOG_MAX : 3 + rng() % 1000;
            auto l = window_limit(algorithm, window_ns, limit, 64, 64);
            l.generation = 9;
            WindowModel windows{window_ns, limit, algorithm == SLUICE_ALGORITHM_SLIDING_WINDOW, {}, 0};
            LogModel times{window_ns, limit, {}};
            sluice_window_state state{};
            size_t step = 0;
            for (uint64_t now : random_trace(rng, window_ns, 2000)) {
                const uint64_t cost = log ? 1 : random_cost(rng, false);
                const bool expected = log ? times.decide(now) : windows.decide(now, cost);
                const int asked = sluice_window_state_decide(&l, &state, now, cost, 0, nullptr);
                const int admitted = sluice_window_state_decide(&l, &state, now, cost, 1, nullptr);
                ASSERT_EQ(asked, expected) << "algorithm " << int(algorithm) << " seed " << seed << " step " << step;
                ASSERT_EQ(admitted, expected) << "algorithm " << int(algorithm) << " seed " << seed << " step " << step;
                step++;
            }
        }
    }
}

// A refund after an admission leaves the state as if the packet had never
// come (sluice_decide takes the window's units back when the source refuses).
TEST(WindowState, ARefundUndoesTheAdmission) {
    for (uint8_t algorithm :
         {SLUICE_ALGORITHM_FIXED_WINDOW, SLUICE_ALGORITHM_SLIDING_WINDOW, SLUICE_ALGORITHM_SLIDING_LOG}) {
        const auto l = window_limit(algorithm, kSecond, 4, 64, 64);
        sluice_window_state state{};
        const uint64_t start = kT0 / kSecond * kSecond;
        for (uint64_t i = 0; i < 3; i++) ASSERT_TRUE(sluice_window_state_decide(&l, &state, start + i, 1, 1, nullptr));
        // Into the next window, for the sliding window's previous count too.
        const uint64_t later = algorithm == SLUICE_ALGORITHM_SLIDING_LOG ? start + 10 : start + kSecond + 10;
        const sluice_window_state before = state;
        ASSERT_TRUE(sluice_window_state_decide(&l, &state, later, 1, 1, nullptr)) << int(algorithm);
        sluice_window_state_refund(&l, &state, later, 1);
        if (algorithm == SLUICE_ALGORITHM_SLIDING_LOG) {
            EXPECT_EQ(state.log.used, before.log.used);
            EXPECT_EQ(state.log.head, before.log.head);
        } else {
            // The counts now describe the later window, without this packet.
            sluice_window_state replay = before;
            sluice_window_count next{};
            sluice_window_step(&l, &replay.count, later, 0, &next, nullptr);
            EXPECT_EQ(state.count.index, next.index) << int(algorithm);
            EXPECT_EQ(state.count.prev, next.prev) << int(algorithm);
            EXPECT_EQ(state.count.cur, next.cur) << int(algorithm);
        }
        // And the one unit is there to take again, no more.
        EXPECT_TRUE(sluice_window_state_decide(&l, &state, later, 1, 1, nullptr)) << int(algorithm);
    }
}

// State written under another generation (another algorithm, another
// window) counts nothing, and is the new generation's from then on.
TEST(WindowState, AnotherGenerationsStateReadsAsEmpty) {
    auto fixed = window_limit(SLUICE_ALGORITHM_FIXED_WINDOW, kSecond, 2, 64, 64);
    fixed.generation = 1;
    sluice_window_state state{};
    EXPECT_TRUE(sluice_window_state_decide(&fixed, &state, kT0, 2, 1, nullptr));
    EXPECT_FALSE(sluice_window_state_decide(&fixed, &state, kT0, 1, 0, nullptr));

    auto log = window_limit(SLUICE_ALGORITHM_SLIDING_LOG, kSecond, 2, 64, 64);
    log.generation = 2;
    EXPECT_TRUE(sluice_window_state_decide(&log, &state, kT0, 1, 1, nullptr));
    EXPECT_TRUE(sluice_window_state_decide(&log, &state, kT0, 1, 1, nullptr));
    EXPECT_FALSE(sluice_window_state_decide(&log, &state, kT0, 1, 1, nullptr));
    EXPECT_EQ(state.generation, 2u);

    // Back to the fixed window: its count of 2 is gone with its generation.
    fixed.generation = 3;
    EXPECT_TRUE(sluice_window_state_decide(&fixed, &state, kT0, 2, 1, nullptr));
    // A refund under a stale generation touches nothing.
    sluice_window_state_refund(&log, &state, kT0, 1);
    EXPECT_EQ(state.count.cur, 2u);
}

// A refusal is remembered until the state could admit one unit again, so a
// flood is refused without the lock; a refund, a new limit or a new
// generation ends it early.
TEST(WindowState, ARefusalIsRememberedUntilThereIsRoomAgain) {
    for (uint8_t algorithm :
         {SLUICE_ALGORITHM_FIXED_WINDOW, SLUICE_ALGORITHM_SLIDING_WINDOW, SLUICE_ALGORITHM_SLIDING_LOG}) {
        auto l = window_limit(algorithm, kSecond, 2, 64, 64);
        sluice_window_state state{};
        const uint64_t start = kT0 / kSecond * kSecond;
        ASSERT_TRUE(sluice_window_state_decide(&l, &state, start, 1, 1, nullptr));
        ASSERT_TRUE(sluice_window_state_decide(&l, &state, start, 1, 1, nullptr));
        EXPECT_FALSE(sluice_window_state_refusing(&l, &state, start)) << "nothing refused yet";
        ASSERT_FALSE(sluice_window_state_decide(&l, &state, start + 10, 1, 1, nullptr));
        EXPECT_TRUE(sluice_window_state_refusing(&l, &state, start + 10)) << int(algorithm);
        // Exactly until the state admits again: the sliding window's
        // previous count still weighs in the next window.
        const uint64_t room =
            algorithm == SLUICE_ALGORITHM_SLIDING_WINDOW ? start + kSecond + kSecond / 2 : start + kSecond;
        EXPECT_TRUE(sluice_window_state_refusing(&l, &state, room - 1)) << int(algorithm);
        EXPECT_FALSE(sluice_window_state_refusing(&l, &state, room)) << int(algorithm);
        sluice_window_state probe = state;
        EXPECT_TRUE(sluice_window_state_decide(&l, &probe, room, 1, 1, nullptr)) << int(algorithm);
        probe = state;
        EXPECT_FALSE(sluice_window_state_decide(&l, &probe, room - 1, 1, 1, nullptr)) << int(algorithm);

        auto raised = l;
        raised.limit = 3;
        EXPECT_FALSE(sluice_window_state_refusing(&raised, &state, start + 10)) << int(algorithm);
        auto next_generation = l;
        next_generation.generation = 1;
        EXPECT_FALSE(sluice_window_state_refusing(&next_generation, &state, start + 10)) << int(algorithm);
        sluice_window_state_refund(&l, &state, start, 1);
        EXPECT_FALSE(sluice_window_state_refusing(&l, &state, start + 10)) << int(algorithm);
    }
}

// ---- counts in a source-table entry's 45 bits --------------------------------------

// Each decision as the model's, and the table never frees an entry whose
// counts still matter (the model has admissions in now's window, or for the
// sliding window in the one before).
void check_entry_against_model(uint8_t algorithm, uint8_t count_bits, uint64_t seed) {
    std::mt19937_64 rng(seed);
    const bool sliding = algorithm == SLUICE_ALGORITHM_SLIDING_WINDOW;
    const uint64_t grain = 1ull << (sliding ? 2 * count_bits : count_bits);
    const uint64_t window_ns = std::vector<uint64_t>{2 * grain, kSecond, 7 * kSecond + 3}[rng() % 3];
    const uint64_t limit = 3 + rng() % 30;
    const auto l = window_limit(algorithm, window_ns, limit, 64, count_bits);
    WindowModel model{window_ns, limit, sliding, {}, 0};
    const uint64_t tag = 0x1234ull << SLUICE_ENTRY_TAG_SHIFT;
    uint64_t field = 0;
    size_t step = 0;
    for (uint64_t now : random_trace(rng, window_ns, 3000)) {
        const uint64_t cost = random_cost(rng, false);
        const bool expected = model.decide(now, cost);
        __u64 next = 0;
        const bool admitted = sluice_entry_window_step(&l, field, now, cost, &next, nullptr);
        ASSERT_EQ(admitted, expected) << "algorithm " << int(algorithm) << " seed " << seed << " step " << step
                                      << " window " << window_ns;
        if (admitted) field = next;
        ASSERT_EQ(field & ~SLUICE_ENTRY_TAT_MASK, 0u) << "the counts left the entry's 45 bits";
        const uint64_t window = std::max(now / window_ns, model.latest);
        const auto counted = [&](uint64_t w) {
            const auto found = model.admitted.find(w);
            return found != model.admitted.end() && found->second > 0;
        };
        if (counted(window) || (sliding && counted(window - 1))) {
            ASSERT_GT(sluice_entry_debt(tag | field, now), 0u)
                << "the table would free an entry whose counts matter: seed " << seed << " step " << step;
        }
        step++;
    }
}

TEST(WindowEntry, FixedAndSlidingWindowsInATableEntryMatchTheirModels) {
    for (uint64_t seed = 1; seed <= 60; seed++) {
        ASSERT_NO_FATAL_FAILURE(check_entry_against_model(SLUICE_ALGORITHM_FIXED_WINDOW, 20, seed));
        ASSERT_NO_FATAL_FAILURE(check_entry_against_model(SLUICE_ALGORITHM_SLIDING_WINDOW, 12, seed));
        ASSERT_NO_FATAL_FAILURE(check_entry_against_model(SLUICE_ALGORITHM_SLIDING_WINDOW, 6, seed));
    }
}

}  // namespace
}  // namespace sluice::test
