// SPDX-License-Identifier: Apache-2.0
// The drop sampling period user space sets after each drain
// (control/lib/drop_sampling.h): raised by powers of two while a drain
// interval's events would overrun the ring, lowered again when drops slow,
// never below the configured period or above the maximum.
#include <gtest/gtest.h>

#include <algorithm>

#include "drop_sampling.h"

namespace sluice {
namespace {

constexpr uint64_t kRing = 4096;

TEST(DropSampling, AQuietRingKeepsTheLeastPeriod) {
    DropSampling sampling(64, kRing, 0);
    EXPECT_EQ(sampling.after_drain(0, 0), 64u);
    EXPECT_EQ(sampling.after_drain(kRing / 2, 0), 64u) << "half the ring is still room";
    EXPECT_EQ(sampling.after_drain(10, 0), 64u) << "never below the least period";
}

TEST(DropSampling, AFloodBringsAnIntervalsEventsToAQuarterOfTheRing) {
    DropSampling sampling(1, kRing, 0);
    // 4095 read and 100,000 lost: demand 104,095 events at period 1, about
    // 102 quarter-rings, so the period rises to the next power of two, 128.
    EXPECT_EQ(sampling.after_drain(kRing - 1, 100'000), 128u);
    // The same flood at period 128 asks for about 813 events per interval:
    // between a sixteenth and a half of the ring, so the period holds.
    EXPECT_EQ(sampling.after_drain(813, 100'000), 128u);
    // The flood doubles: 1626 events is still under half the ring.
    EXPECT_EQ(sampling.after_drain(1626, 100'000), 128u);
    // It doubles again past half: back to a quarter.
    EXPECT_EQ(sampling.after_drain(3252, 100'000), 512u);
}

TEST(DropSampling, OnlyLossesSinceTheStartOrTheLastDrainCount) {
    // A pinned counter from an earlier daemon: not this ring's news.
    DropSampling sampling(1, kRing, 5'000'000);
    EXPECT_EQ(sampling.after_drain(0, 5'000'000), 1u);
    EXPECT_EQ(sampling.after_drain(96, 5'004'000), 4u) << "4096 events asked for: four quarter-rings";
}

TEST(DropSampling, ASlowerFloodLowersThePeriodAndTheEndOfItReturnsToTheLeast) {
    DropSampling sampling(8, kRing, 0);
    // 1,004,095 events asked for: 981 quarter-rings, so 1024 times the period.
    EXPECT_EQ(sampling.after_drain(kRing - 1, 1'000'000), 8192u);
    // A sixteenth of the ring is the floor of the steady band: 200 events is
    // under it, so the period falls to bring them back up to about a quarter.
    EXPECT_EQ(sampling.after_drain(200, 1'000'000), 2048u);
    EXPECT_EQ(sampling.after_drain(0, 1'000'000), 8u);
}

TEST(DropSampling, ThePeriodStopsAtTheMaximum) {
    DropSampling sampling(1, kRing, 0);
    EXPECT_EQ(sampling.after_drain(0, uint64_t{1} << 50), SLUICE_DROP_SAMPLE_PERIOD_MAX);
    EXPECT_EQ(sampling.after_drain(kRing - 1, uint64_t{1} << 51), SLUICE_DROP_SAMPLE_PERIOD_MAX);
}

// A steady flood of any rate, drained at a steady pace: the period depends
// on the drops between two drains only, so the drain interval is counted in
// drops and the ring is simulated. From period 1 the first drain sets a
// period at which every later interval fits the ring, asks for a sixteenth
// to a half of it and leaves the period where it is.
TEST(DropSampling, ASteadyFloodOfAnyRateLosesNothingAfterTheFirstDrain) {
    for (uint64_t drops = 1; drops <= uint64_t{1} << 34; drops = drops * 3 + 1) {
        DropSampling sampling(1, kRing, 0);
        uint64_t lost_total = 0;
        uint32_t settled = 0;
        for (int interval = 0; interval < 6; interval++) {
            const uint64_t asked = drops / sampling.period();
            const uint64_t read = std::min(asked, kRing);
            lost_total += asked - read;
            if (interval >= 1) {
                EXPECT_EQ(asked, read) << drops << " drops per interval, interval " << interval;
                EXPECT_TRUE(asked <= kRing / 2 && (asked >= kRing / 16 || sampling.period() == 1))
                    << drops << " drops per interval ask for " << asked << " events at period " << sampling.period();
            }
            const uint32_t period = sampling.after_drain(read, lost_total);
            if (interval == 1) settled = period;
            if (interval > 1) {
                EXPECT_EQ(period, settled) << drops << " drops per interval: the period flaps";
            }
        }
    }
}

}  // namespace
}  // namespace sluice
