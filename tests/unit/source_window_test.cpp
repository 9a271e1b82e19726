// SPDX-License-Identifier: Apache-2.0
// The per-source level counting in windows, through the whole decision
// (sluice_decide over a source table): every source's verdicts are its own
// model's, decision by decision, with sources interleaved in one table; and
// one source offered from every CPU at once is admitted exactly its limit
// per window, never more (a lost compare-and-swap would show as more).
#include <atomic>
#include <iostream>
#include <thread>
#include <vector>

#include "window_models.h"

namespace sluice::test::source_window_test {
namespace {

sluice_source_limit source_window(uint8_t algorithm, uint64_t limit, uint64_t window_ns) {
    auto compiled = compile_source_window(
        {static_cast<Algorithm>(algorithm), limit, window_ns, Unit::packets, kDefaultMaxFrameBytes}, "test");
    EXPECT_TRUE(compiled.ok()) << (compiled.ok() ? "" : compiled.error().message);
    return compiled.ok() ? compiled.value() : sluice_source_limit{};
}

// Two sets of one class, and the levels of the source with `tag` in them.
struct Table {
    sluice_source_set sets[2] = {};
    sluice_source_limit limit{};

    sluice_levels levels(uint64_t tag) {
        sluice_levels l{};
        l.source.limit = &limit;
        l.source.home_index = 0;
        l.source.second_index = 1;
        l.source.home = &sets[0];
        l.source.second = &sets[1];
        l.source.tag = tag << SLUICE_ENTRY_TAG_SHIFT;
        l.source.on_table_full = SLUICE_TABLE_FULL_EVICT;
        return l;
    }
};

void check_sources_against_models(uint8_t algorithm, uint64_t seed) {
    constexpr uint64_t kSources = 5;  // fewer than the 16 entries: none is evicted
    std::mt19937_64 rng(seed);
    const uint64_t window_ns = std::vector<uint64_t>{kMs, kSecond, 7 * kSecond + 3}[rng() % 3];
    const uint64_t limit = 3 + rng() % 28;
    Table t;
    t.limit = source_window(algorithm, limit, window_ns);
    ASSERT_TRUE(sluice_entry_window_fits(&t.limit.window));
    std::vector<WindowModel> models(kSources,
                                    WindowModel{window_ns, limit, algorithm == SLUICE_ALGORITHM_SLIDING_WINDOW, {}, 0});
    size_t step = 0;
    for (uint64_t now : random_trace(rng, window_ns, 4000)) {
        const uint64_t source = rng() % kSources;
        const sluice_levels l = t.levels(source + 1);
        const sluice_decision d = sluice_decide(&l, 64, 0, now);
        ASSERT_NE(d.table, SLUICE_TABLE_EVICTED);
        ASSERT_EQ(d.verdict == SLUICE_VERDICT_PASS, models[source].decide(now, 1))
            << algorithm_name(algorithm) << " seed " << seed << " step " << step << " source " << source << " window "
            << window_ns << " limit " << limit;
        if (d.verdict != SLUICE_VERDICT_PASS) {
            ASSERT_EQ(d.reason, SLUICE_REASON_SOURCE);
        }
        step++;
    }
}

// After a change from gcra to a window (the window's limit has the next
// generation, previous_fresh): the replaced limit's entry counts nothing; an
// entry of the generation after it (what the limit replacing this one wrote,
// met by a decision still on this one) counts as a full window while busy.
TEST(SourceWindows, OnlyTheLimitReplacedReadsAsFreshCounts) {
    Table t;
    sluice_source_limit gcra{};
    {
        auto compiled = compile_source_limit({10, 2, Unit::packets}, kDefaultMaxFrameBytes, "test");
        ASSERT_TRUE(compiled.ok());
        gcra = compiled.value();
    }
    t.limit = source_window(SLUICE_ALGORITHM_FIXED_WINDOW, 3, kSecond);
    t.limit.generation = 1;
    t.limit.previous_fresh = 1;
    const uint64_t now = 100 * kSecond;
    auto offer = [&](const sluice_source_limit& limit, uint64_t at) {
        sluice_levels l = t.levels(7);
        l.source.limit = &limit;
        return sluice_decide(&l, 64, 0, at).verdict == SLUICE_VERDICT_PASS;
    };
    // The replaced gcra limit (generation 0) left the source empty: fresh counts.
    gcra.generation = 0;
    ASSERT_TRUE(offer(gcra, now));
    ASSERT_TRUE(offer(gcra, now));
    ASSERT_FALSE(offer(gcra, now));
    for (int i = 0; i < 3; i++) EXPECT_TRUE(offer(t.limit, now)) << i;
    EXPECT_FALSE(offer(t.limit, now));

    // The next limit (generation 2) wrote it, in debt: a full window, nothing written.
    gcra.generation = 2;
    t.sets[0] = {};
    t.sets[1] = {};
    ASSERT_TRUE(offer(gcra, now));
    const uint64_t written = t.sets[0].entry[0] | t.sets[1].entry[0];
    EXPECT_FALSE(offer(t.limit, now));
    EXPECT_EQ(t.sets[0].entry[0] | t.sets[1].entry[0], written);
    // Once it is free (100 ms later, at 10/s), it counts nothing.
    EXPECT_TRUE(offer(t.limit, now + 100 * kMs));
}

TEST(SourceWindows, EachSourceDecidesAsItsOwnModel) {
    for (uint64_t seed = 1; seed <= 40; seed++) {
        ASSERT_NO_FATAL_FAILURE(check_sources_against_models(SLUICE_ALGORITHM_FIXED_WINDOW, seed));
        ASSERT_NO_FATAL_FAILURE(check_sources_against_models(SLUICE_ALGORITHM_SLIDING_WINDOW, seed));
    }
}

// Every thread offers one source packets at the same moment of a window,
// round after round, the clock a window further each round: each round
// admits at most the limit, and (contended offers apart) exactly it.
void offer_one_source_from_every_thread(uint8_t algorithm) {
    const unsigned threads = std::max(2u, std::thread::hardware_concurrency());
    constexpr int kRounds = 2000, kOffersPerThread = 8;
    constexpr uint64_t kLimit = 5, kWindow = kSecond;
    Table t;
    t.limit = source_window(algorithm, kLimit, kWindow);
    std::atomic<int> ready{0}, round_started{-1};
    std::atomic<uint64_t> admitted{0};
    std::vector<uint64_t> admitted_per_round(kRounds);
    std::vector<std::thread> workers;
    for (unsigned w = 0; w < threads; w++) {
        workers.emplace_back([&] {
            for (int round = 0; round < kRounds; round++) {
                while (round_started.load(std::memory_order_acquire) < round) std::this_thread::yield();
                // Two windows a round: the sliding window's previous count weighs nothing.
                const uint64_t now = (kT0 / kWindow + 2 * static_cast<uint64_t>(round)) * kWindow;
                const sluice_levels l = t.levels(7);
                for (int i = 0; i < kOffersPerThread; i++)
                    admitted += sluice_decide(&l, 64, 0, now).verdict == SLUICE_VERDICT_PASS;
                ready.fetch_add(1);
            }
        });
    }
    uint64_t before = 0;
    for (int round = 0; round < kRounds; round++) {
        round_started.store(round, std::memory_order_release);
        while (ready.load() < static_cast<int>(threads) * (round + 1)) std::this_thread::yield();
        admitted_per_round[round] = admitted.load() - before;
        before += admitted_per_round[round];
    }
    for (auto& w : workers) w.join();
    uint64_t short_rounds = 0;
    for (int round = 0; round < kRounds; round++) {
        ASSERT_LE(admitted_per_round[round], kLimit) << algorithm_name(algorithm) << " round " << round;
        short_rounds += admitted_per_round[round] < kLimit;
    }
    std::cout << "[ threads  ] " << algorithm_name(algorithm) << " per source, " << threads << " threads x " << kRounds
              << " rounds: " << short_rounds << " rounds under the limit\n";
    EXPECT_LE(short_rounds, static_cast<uint64_t>(kRounds / 20));
}

TEST(SourceWindowThreads, OneSourceFromEveryThreadIsAdmittedItsLimitPerWindow) {
    offer_one_source_from_every_thread(SLUICE_ALGORITHM_FIXED_WINDOW);
    offer_one_source_from_every_thread(SLUICE_ALGORITHM_SLIDING_WINDOW);
}

}  // namespace
}  // namespace sluice::test::source_window_test
