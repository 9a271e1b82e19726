// SPDX-License-Identifier: Apache-2.0
// Human limits to the core's precomputed form: what is accepted, what is
// refused, and that every refusal names the field and the value.
#include <gmock/gmock.h>

#include "core_support.h"

namespace sluice::test {
namespace {

using ::testing::HasSubstr;

LevelSettings settings(uint64_t rate, uint64_t burst, Unit unit = Unit::packets, Accuracy accuracy = Accuracy::lease,
                       uint32_t cpus = 4) {
    LevelSettings s;
    s.limit = {rate, burst, unit};
    s.accuracy = accuracy;
    s.cpus = cpus;
    return s;
}

std::string error_of(const LevelSettings& s) {
    auto level = compile_level(s, "class \"web\".per_source");
    EXPECT_FALSE(level.ok());
    return level.ok() ? std::string() : level.error().message;
}

TEST(Limits, PrecomputesFillTimeAndNanoUnits) {
    auto limit = compile_limit({1000, 2000, Unit::packets}, 1, "f");
    ASSERT_TRUE(limit.ok()) << limit.error().message;
    EXPECT_EQ(limit.value().rate_per_s, 1000u);
    EXPECT_EQ(limit.value().burst_nano, 2000 * SLUICE_NANO);
    EXPECT_EQ(limit.value().fill_ns, 2 * SLUICE_NANO);
    auto odd = compile_limit({3, 1, Unit::packets}, 1, "f");
    ASSERT_TRUE(odd.ok());
    EXPECT_EQ(odd.value().fill_ns, 333'333'334u);  // rounded up: full after fill_ns
}

TEST(Limits, ZeroRateIsRefusedWithAHint) {
    const std::string e = error_of(settings(0, 10));
    EXPECT_THAT(e, HasSubstr("class \"web\".per_source"));
    EXPECT_THAT(e, HasSubstr("rate is 0"));
    EXPECT_THAT(e, HasSubstr("action = \"drop\""));
}

TEST(Limits, ZeroBurstIsRefused) { EXPECT_THAT(error_of(settings(10, 0)), HasSubstr("burst is 0")); }

TEST(Limits, ValuesPastTheMaximaAreRefused) {
    EXPECT_THAT(error_of(settings(SLUICE_RATE_MAX + 1, 10)), HasSubstr("exceeds the maximum of 100000000000"));
    EXPECT_THAT(error_of(settings(10, SLUICE_BURST_MAX + 1)), HasSubstr("exceeds the maximum of 4000000000"));
    EXPECT_TRUE(compile_level(settings(SLUICE_RATE_MAX, SLUICE_BURST_MAX), "f").ok());
}

TEST(Limits, ByteBurstBelowTheLargestFrameIsRefused) {
    LevelSettings s = settings(1'000'000, 1500, Unit::bytes);
    s.max_frame_bytes = 1518;
    const std::string e = error_of(s);
    EXPECT_THAT(e, HasSubstr("burst 1500 bytes is below the largest cost"));
    EXPECT_THAT(e, HasSubstr("at least 1518"));
    s.limit.burst = 1518;
    EXPECT_TRUE(compile_level(s, "f").ok());
}

TEST(Limits, LargestFrameMustBeChargeable) {
    LevelSettings s = settings(1'000'000, 100'000, Unit::bytes);
    s.max_frame_bytes = 0;
    EXPECT_THAT(error_of(s), HasSubstr("largest frame 0 bytes"));
    s.max_frame_bytes = SLUICE_COST_MAX + 1;
    EXPECT_THAT(error_of(s), HasSubstr("outside 1..65535"));
}

TEST(Limits, SplitSharesThatCannotAdmitArePointedOut) {
    EXPECT_THAT(error_of(settings(3, 100, Unit::packets, Accuracy::split, 4)),
                HasSubstr("rate of 3/4 = 0 packets per second; raise rate to at least 4"));
    EXPECT_THAT(error_of(settings(100, 3, Unit::packets, Accuracy::split, 4)), HasSubstr("raise burst to at least 4"));
}

TEST(Limits, SplitDividesRateAndBurstPerCpu) {
    auto level = compile_level(settings(1000, 2000, Unit::packets, Accuracy::split, 3), "f");
    ASSERT_TRUE(level.ok());
    EXPECT_EQ(level.value().share.rate_per_s, 333u);
    EXPECT_EQ(level.value().share.burst_nano, 666 * SLUICE_NANO);
    EXPECT_EQ(level.value().full.rate_per_s, 1000u);
    EXPECT_EQ(level.value().accuracy, SLUICE_ACCURACY_SPLIT);
}

TEST(Limits, DefaultLeaseIsAnEighthOfBurstAcrossCpus) {
    auto level = compile_level(settings(1000, 8000, Unit::packets, Accuracy::lease, 4), "f");
    ASSERT_TRUE(level.ok());
    EXPECT_EQ(level.value().lease_nano, 250 * SLUICE_NANO);
    EXPECT_DOUBLE_EQ(lease_excess_fraction(level.value(), 4), 0.125);
}

TEST(Limits, LeaseModeKnowsTheSmallestCost) {
    auto packets = compile_level(settings(1000, 8000), "f");
    ASSERT_TRUE(packets.ok());
    EXPECT_EQ(packets.value().min_cost_nano, SLUICE_NANO);
    auto bytes = compile_level(settings(64'000, 100'000, Unit::bytes), "f");
    ASSERT_TRUE(bytes.ok());
    EXPECT_EQ(bytes.value().min_cost_nano, kMinFrameBytes * SLUICE_NANO);
}

TEST(Limits, DefaultLeaseIsNeverBelowOneCost) {
    LevelSettings s = settings(1'000'000, 10'000, Unit::bytes, Accuracy::lease, 64);
    s.max_frame_bytes = 1518;
    auto level = compile_level(s, "f");
    ASSERT_TRUE(level.ok());
    EXPECT_EQ(level.value().lease_nano, 1518 * SLUICE_NANO);
}

TEST(Limits, ExplicitLeaseOutsideCostAndBurstIsRefused) {
    LevelSettings s = settings(1000, 100);
    s.lease = 101;
    EXPECT_THAT(error_of(s), HasSubstr("lease 101 packets is outside 1..100"));
    s = settings(1'000'000, 100'000, Unit::bytes);
    s.max_frame_bytes = 1518;
    s.lease = 1000;
    EXPECT_THAT(error_of(s), HasSubstr("lease 1000 bytes is outside 1518..100000"));
}

TEST(Limits, LeaseLifetimeMustBeBounded) {
    LevelSettings s = settings(1000, 100);
    s.lease_ttl_ns = 0;
    EXPECT_THAT(error_of(s), HasSubstr("lease lifetime 0 ns"));
    s.lease_ttl_ns = kMaxLeaseTtlNs + 1;
    EXPECT_THAT(error_of(s), HasSubstr("lease lifetime 1000000001 ns"));
}

TEST(Limits, ErrorsNameTheSettingAtFault) {
    auto setting_of = [](const LevelSettings& s) {
        auto level = compile_level(s, "f");
        return level.ok() ? std::string("(accepted)") : level.error().setting;
    };
    EXPECT_EQ(setting_of(settings(0, 10)), "rate");
    EXPECT_EQ(setting_of(settings(10, 0)), "burst");
    EXPECT_EQ(setting_of(settings(3, 100, Unit::packets, Accuracy::split, 4)), "rate");
    EXPECT_EQ(setting_of(settings(100, 3, Unit::packets, Accuracy::split, 4)), "burst");
    LevelSettings s = settings(1000, 100);
    s.lease = 101;
    EXPECT_EQ(setting_of(s), "lease");
    s.lease = 0;
    s.lease_ttl_ns = 0;
    EXPECT_EQ(setting_of(s), "lease_ttl");
}

TEST(Limits, ZeroCpusIsRefused) {
    EXPECT_THAT(error_of(settings(10, 10, Unit::packets, Accuracy::split, 0)), HasSubstr("CPU count is 0"));
}

}  // namespace
}  // namespace sluice::test
