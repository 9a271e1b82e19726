// SPDX-License-Identifier: Apache-2.0
// The hot-source tracker: rates from decayed counts, bounded memory, heavy
// hitters found among many small sources, and fading of old attackers.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "hot_sources.h"

namespace sluice {
namespace {

sluice_source_key ipv4(uint32_t host, uint32_t class_id = 1) {
    sluice_source_key key{};
    key.class_id = class_id;
    key.family = SLUICE_FAMILY_IPV4;
    key.addr[0] = 10;
    key.addr[1] = static_cast<uint8_t>(host >> 16);
    key.addr[2] = static_cast<uint8_t>(host >> 8);
    key.addr[3] = static_cast<uint8_t>(host);
    return key;
}

// `per_second` events of weight `weight` from `host`, spread evenly over [from, to).
void feed(HotSources& hot, uint32_t host, double per_second, double weight, double from, double to) {
    const double step = 1.0 / per_second;
    for (double t = from; t < to; t += step) hot.add(ipv4(host), weight, t);
}

TEST(HotSources, SteadyDropRateIsRecovered) {
    HotSources hot(16, 10.0);
    // 100 sampled events per second, each standing for 64 drops: 6400 drops/s.
    feed(hot, 1, 100, 64, 0, 100);  // 10 tau: the estimate has converged
    const auto top = hot.top(5, 100);
    ASSERT_EQ(top.size(), 1u);
    EXPECT_NEAR(top[0].drops_per_second, 6400, 6400 * 0.01);
    EXPECT_NEAR(top[0].share, 1.0, 1e-9);
    EXPECT_NEAR(hot.total_drops_per_second(100), 6400, 64);
}

TEST(HotSources, ANewFloodReadsAtItsRateWithinSeconds) {
    HotSources hot(16, 10.0);
    feed(hot, 1, 10, 64, 0, 60);  // an old, small source: 640 drops/s
    for (int step = 0; step < 300; step++) {
        const double t = 60 + step * 0.01;
        hot.add(ipv4(2), 64, t);  // a flood that began 3 s ago: 6400 drops/s
        if (step % 10 == 0) hot.add(ipv4(1), 64, t);
    }
    const auto top = hot.top(5, 63);
    ASSERT_EQ(top.size(), 2u);
    EXPECT_EQ(top[0].key.addr[3], 2);
    EXPECT_NEAR(top[0].drops_per_second, 6400, 6400 * 0.05);
    EXPECT_NEAR(top[1].drops_per_second, 640, 640 * 0.05);
}

TEST(HotSources, OrdersByRateWithShares) {
    HotSources hot(16, 10.0);
    for (double t = 0; t < 60; t += 0.01) {
        hot.add(ipv4(1), 3, t);
        hot.add(ipv4(2), 1, t);
    }
    const auto top = hot.top(5, 60);
    ASSERT_EQ(top.size(), 2u);
    EXPECT_EQ(top[0].key.addr[3], 1);
    EXPECT_NEAR(top[0].share, 0.75, 0.01);
    EXPECT_NEAR(top[1].share, 0.25, 0.01);
    EXPECT_NEAR(top[0].drops_per_second / top[1].drops_per_second, 3.0, 0.01);
}

TEST(HotSources, YesterdaysAttackerFades) {
    HotSources hot(16, 10.0);
    feed(hot, 1, 1000, 64, 0, 30);  // a big flood, then silence
    feed(hot, 2, 10, 64, 30, 130);  // a small steady one afterwards
    const auto top = hot.top(5, 130);
    ASSERT_FALSE(top.empty());
    EXPECT_EQ(top[0].key.addr[3], 2) << "the old flood should have decayed below the current source";
    // 100 s = 10 tau after it stopped, the flood is at e^-10 of its rate.
    for (const HotSource& source : top) {
        if (source.key.addr[3] == 1) {
            EXPECT_LT(source.drops_per_second, 64000 * 1e-4);
        }
    }
}

TEST(HotSources, MemoryIsBoundedAndHeavyHittersAreFoundAmongNoise) {
    HotSources hot(32, 10.0);
    std::mt19937 random(7);
    std::uniform_int_distribution<uint32_t> noise_host(1000, 1000 + 100000);
    // One heavy source with 20% of the drops among 100k sources that each drop rarely.
    for (int i = 0; i < 200000; i++) {
        const double t = i * 1e-4;
        hot.add(ipv4(i % 5 == 0 ? 7 : noise_host(random)), 1, t);
    }
    EXPECT_LE(hot.tracked(), 32u);
    const auto top = hot.top(1, 20);
    ASSERT_EQ(top.size(), 1u);
    EXPECT_EQ(top[0].key.addr[3], 7);
    EXPECT_GT(top[0].share, 0.15);
    EXPECT_LT(top[0].share, 0.25);
}

TEST(HotSources, ManyEqualSourcesReportNoneAsHot) {
    HotSources hot(8, 10.0);
    for (int i = 0; i < 100000; i++) hot.add(ipv4(static_cast<uint32_t>(i % 1000)), 1, i * 1e-4);
    EXPECT_TRUE(hot.top(5, 10).empty()) << "1000 equal sources in 8 counters: every count is mostly inherited";
    EXPECT_NEAR(hot.total_drops_per_second(10), 10000, 100);
}

TEST(HotSources, ASourceBackFromSilenceReadsAtItsNewRate) {
    HotSources hot(8, 10.0);
    feed(hot, 1, 100, 1, 0, 10);     // 100/s
    feed(hot, 1, 100, 1, 300, 303);  // back after 290 s of silence, 100/s again
    const auto top = hot.top(1, 303);
    ASSERT_EQ(top.size(), 1u);
    EXPECT_NEAR(top[0].drops_per_second, 100, 5);
}

TEST(HotSources, ClassIsPartOfTheKey) {
    HotSources hot(8, 10.0);
    hot.add(ipv4(1, 1), 10, 0);
    hot.add(ipv4(1, 2), 10, 0);
    EXPECT_EQ(hot.top(5, 0).size(), 2u);
}

TEST(HotSources, AWouldDropCountsApartFromADrop) {
    // One source, first in shadow then enforced: shadow never reads as enforcement.
    HotSources hot(8, 10.0);
    hot.add(ipv4(1), 10, 0, SLUICE_VERDICT_WOULD_DROP);
    hot.add(ipv4(1), 30, 0);
    const auto top = hot.top(5, 0);
    ASSERT_EQ(top.size(), 2u);
    EXPECT_EQ(top[0].verdict, SLUICE_VERDICT_DROP);
    EXPECT_EQ(top[1].verdict, SLUICE_VERDICT_WOULD_DROP);
    EXPECT_NEAR(top[1].decayed_drops, 10, 1e-9);
}

TEST(HotSources, AWeightOfZeroTakesNoCounterAndDisplacesNoSource) {
    // A penalty-started event weighs 0: it must not take the smallest
    // counter from a source that drops, nor hide it as "displaced".
    HotSources hot(2, 10.0);
    hot.add(ipv4(1), 100, 0);
    hot.add(ipv4(2), 50, 0);
    hot.add(ipv4(3), 0, 1, SLUICE_VERDICT_DROP);
    hot.add(ipv4(2), 0, 1, SLUICE_VERDICT_DROP);
    EXPECT_EQ(hot.tracked(), 2u);
    const auto top = hot.top(5, 1);
    ASSERT_EQ(top.size(), 2u);
    EXPECT_EQ(top[0].key.addr[3], 1);
    EXPECT_EQ(top[1].key.addr[3], 2);
    EXPECT_NEAR(top[1].decayed_drops, 50 * std::exp(-0.1), 1e-9);
    EXPECT_EQ(top[1].error_per_second, 0);
    EXPECT_NEAR(hot.decayed_drops_total(1), 150 * std::exp(-0.1), 1e-9);
}

TEST(HotSources, AWeightOfZeroFirstDoesNotStartTheWindow) {
    // The rate of a flood that starts at 100 s is over the time since 100 s,
    // not since a weightless event at 0.
    HotSources hot(8, 10.0);
    hot.add(ipv4(3), 0, 0);
    feed(hot, 1, 100, 1, 100, 101);
    EXPECT_NEAR(hot.total_drops_per_second(101), 100, 10);
    EXPECT_TRUE(hot.top(5, 101).size() == 1 && hot.top(5, 101)[0].key.addr[3] == 1);
}

TEST(HotSources, LongRunsRescaleWithoutLosingPrecision) {
    HotSources hot(8, 1.0);
    // 1e4 tau: e^(t/tau) would overflow a double without the rescale.
    for (double t = 0; t < 10000; t += 0.5) hot.add(ipv4(1), 1, t);
    const auto top = hot.top(1, 10000);
    ASSERT_EQ(top.size(), 1u);
    EXPECT_TRUE(std::isfinite(top[0].drops_per_second));
    EXPECT_NEAR(top[0].drops_per_second, 2.0, 0.6);  // 2 drops/s, sampled every 0.5 s at tau = 1 s
}

TEST(HotSources, EmptyTrackerReportsNothing) {
    HotSources hot;
    EXPECT_TRUE(hot.top(20, 5).empty());
    EXPECT_EQ(hot.total_drops_per_second(5), 0.0);
}

}  // namespace
}  // namespace sluice
