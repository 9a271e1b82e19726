// SPDX-License-Identifier: Apache-2.0
// One token bucket under a fake clock: the b + r*T bound over every window of
// randomised arrivals, clock regressions, huge jumps and 64-bit extremes.
#include <cmath>
#include <random>

#include "core_support.h"

namespace sluice::test::bucket_test {
namespace {

struct Scenario {
    uint64_t rate;
    uint64_t burst;
    Unit unit;
    uint64_t max_cost;
};

// Rates 1/s .. 1e8/s and bursts 1 .. 1e9, log-uniform; byte mode charges
// costs up to 9000, so its burst is at least that.
Scenario random_scenario(std::mt19937_64& rng, Unit unit) {
    std::uniform_real_distribution<double> log_rate(0.0, 8.0), log_burst(0.0, 9.0);
    Scenario s{};
    s.unit = unit;
    s.rate = static_cast<uint64_t>(std::pow(10.0, log_rate(rng)));
    s.burst = static_cast<uint64_t>(std::pow(10.0, log_burst(rng)));
    s.max_cost = unit == Unit::bytes ? std::uniform_int_distribution<uint64_t>(1, 9000)(rng) : 1;
    s.burst = std::max(s.burst, s.max_cost);
    return s;
}

// Mean time for the bucket to earn one packet of the largest cost.
uint64_t earn_ns(const Scenario& s) { return std::max<uint64_t>(1, s.max_cost * kSecond / s.rate); }

struct ArrivalLog {
    std::vector<Admission> admitted;
    uint64_t first_ns = 0, last_ns = 0;
    uint64_t admitted_units = 0;
};

// Arrivals in bursts, steady streams and idle gaps, sized relative to the
// bucket so every regime (full, draining, empty) is visited.
ArrivalLog run_random_arrivals(std::mt19937_64& rng, const Scenario& s, size_t packets, double load) {
    sluice_level_limit level = make_level(s.rate, s.burst, s.unit, Accuracy::split, 1, s.max_cost);
    sluice_cpu_bucket bucket{};
    std::uniform_int_distribution<uint64_t> cost(1, s.max_cost);
    std::exponential_distribution<double> gap(load);  // mean 1/load earn-times
    std::bernoulli_distribution back_to_back(0.2);
    ArrivalLog run;
    uint64_t now = kT0;
    run.first_ns = now;
    for (size_t i = 0; i < packets; i++) {
        if (!back_to_back(rng)) now += static_cast<uint64_t>(gap(rng) * static_cast<double>(earn_ns(s)));
        const uint64_t c = cost(rng);
        if (sluice_bucket_consume(&bucket, &level.share, c * SLUICE_NANO, now)) {
            run.admitted.push_back({now, c});
            run.admitted_units += c;
        }
        EXPECT_LE(bucket.tokens_nano, level.share.burst_nano);
    }
    run.last_ns = now;
    return run;
}

class RandomArrivals : public ::testing::TestWithParam<std::tuple<Unit, int>> {};

TEST_P(RandomArrivals, AdmittedNeverExceedsBurstPlusRateTimesWindow) {
    const auto [unit, seed] = GetParam();
    std::mt19937_64 rng(seed);
    for (int round = 0; round < 20; round++) {
        const Scenario s = random_scenario(rng, unit);
        const double load = std::uniform_real_distribution<double>(0.2, 5.0)(rng);
        const ArrivalLog run = run_random_arrivals(rng, s, 2000, load);
        const int128 excess = worst_window_excess(run.admitted, s.rate, s.burst);
        ASSERT_LE(excess, 0) << "rate=" << s.rate << " burst=" << s.burst << " max_cost=" << s.max_cost
                             << " excess_nano=" << describe(excess);
    }
}

TEST_P(RandomArrivals, SaturatingSenderGetsAtLeast99PercentOfBound) {
    const auto [unit, seed] = GetParam();
    std::mt19937_64 rng(seed + 1000);
    for (int round = 0; round < 5; round++) {
        Scenario s = random_scenario(rng, unit);
        // Long window: rate*T dwarfs one packet's rounding. Arrivals 200x
        // denser than the largest packet is earned: a bucket no larger than
        // one packet wastes at most one arrival gap per admission (0.5%).
        // A burst of two packets at least: with room for exactly one, each
        // refill past the cap (up to rate * 1 ns) is lost, which at 10^7/s
        // alone is 1%.
        s.burst = std::max<uint64_t>(2 * s.max_cost, std::min<uint64_t>(s.burst, 100 * s.max_cost));
        sluice_level_limit level = make_level(s.rate, s.burst, s.unit, Accuracy::split, 1, s.max_cost);
        sluice_cpu_bucket bucket{};
        const uint64_t interval = std::max<uint64_t>(1, earn_ns(s) / 200);
        const uint64_t window = std::max<uint64_t>(400 * earn_ns(s), s.burst * kSecond / s.rate);
        std::uniform_int_distribution<uint64_t> cost(1, s.max_cost);
        uint64_t admitted = 0;
        uint64_t now = kT0;
        for (; now <= kT0 + window; now += interval) {
            const uint64_t c = cost(rng);
            if (sluice_bucket_consume(&bucket, &level.share, c * SLUICE_NANO, now)) admitted += c;
        }
        const double bound = static_cast<double>(s.burst) +
                             static_cast<double>(s.rate) * static_cast<double>(now - interval - kT0) / 1e9;
        EXPECT_LE(static_cast<double>(admitted), bound + 1e-6);
        EXPECT_GE(static_cast<double>(admitted), 0.99 * bound)
            << "rate=" << s.rate << " burst=" << s.burst << " max_cost=" << s.max_cost;
    }
}

INSTANTIATE_TEST_SUITE_P(Seeds, RandomArrivals,
                         ::testing::Combine(::testing::Values(Unit::packets, Unit::bytes), ::testing::Range(1, 9)),
                         [](const auto& info) {
                             return std::string(std::get<0>(info.param) == Unit::bytes ? "bytes" : "packets") +
                                    "_seed" + std::to_string(std::get<1>(info.param));
                         });

TEST(Bucket, NewBucketStartsFull) {
    sluice_level_limit level = make_level(10, 5);
    sluice_cpu_bucket bucket{};
    for (int i = 0; i < 5; i++) EXPECT_TRUE(sluice_bucket_consume(&bucket, &level.share, SLUICE_NANO, kT0)) << i;
    EXPECT_FALSE(sluice_bucket_consume(&bucket, &level.share, SLUICE_NANO, kT0));
}

TEST(Bucket, RefillsExactlyRateTimesElapsed) {
    sluice_level_limit level = make_level(1000, 10);  // one packet per ms
    sluice_cpu_bucket bucket{};
    sluice_bucket_refill(&bucket, &level.share, kT0);
    bucket.tokens_nano = 0;
    sluice_bucket_refill(&bucket, &level.share, kT0 + 1);  // 1 ns earns 1000 nano-units
    EXPECT_EQ(bucket.tokens_nano, 1000u);
    EXPECT_FALSE(sluice_bucket_consume(&bucket, &level.share, SLUICE_NANO, kT0 + 999'999));
    EXPECT_TRUE(sluice_bucket_consume(&bucket, &level.share, SLUICE_NANO, kT0 + 1'000'000));
    EXPECT_EQ(bucket.tokens_nano, 0u);
}

TEST(Bucket, ClockRegressionMintsNothingAndKeepsLast) {
    sluice_level_limit level = make_level(1000, 10);
    sluice_cpu_bucket bucket{};
    const uint64_t t = kT0 + 100 * kSecond;
    sluice_bucket_refill(&bucket, &level.share, t);
    bucket.tokens_nano = 0;
    sluice_bucket_refill(&bucket, &level.share, t - 50 * kSecond);
    EXPECT_EQ(bucket.tokens_nano, 0u);
    EXPECT_EQ(bucket.stamp_ns, t);
    // Back to t + 1 ms: exactly one packet was earned since t, not since t - 50 s.
    EXPECT_TRUE(sluice_bucket_consume(&bucket, &level.share, SLUICE_NANO, t + 1'000'000));
    EXPECT_FALSE(sluice_bucket_consume(&bucket, &level.share, SLUICE_NANO, t + 1'000'000));
}

TEST(Bucket, ClockOscillationNeverExceedsBound) {
    sluice_level_limit level = make_level(1000, 3);
    sluice_cpu_bucket bucket{};
    uint64_t admitted = 0, high = kT0;
    std::mt19937_64 rng(7);
    std::uniform_int_distribution<int64_t> step(-5'000'000, 1'000'000);  // mostly backwards
    uint64_t now = kT0;
    for (int i = 0; i < 100'000; i++) {
        now = static_cast<uint64_t>(static_cast<int64_t>(now) + step(rng));
        high = std::max(high, now);
        admitted += sluice_bucket_consume(&bucket, &level.share, SLUICE_NANO, now);
    }
    // Only forward progress of the clock's high-water mark ever earns tokens.
    EXPECT_LE(admitted, 3 + (high - kT0) * 1000 / kSecond);
}

TEST(Bucket, HugeForwardJumpFillsExactlyToBurst) {
    sluice_level_limit level = make_level(SLUICE_RATE_MAX, SLUICE_BURST_MAX);
    sluice_cpu_bucket bucket{};
    sluice_bucket_refill(&bucket, &level.share, kT0);
    bucket.tokens_nano = 0;
    sluice_bucket_refill(&bucket, &level.share, UINT64_MAX);
    EXPECT_EQ(bucket.tokens_nano, level.share.burst_nano);
    EXPECT_EQ(bucket.stamp_ns, UINT64_MAX);
}

TEST(Bucket, YearsOfElapsedTimeAtSlowestRateDoNotOverflow) {
    sluice_level_limit level = make_level(1, SLUICE_BURST_MAX);  // fill time: 126 years
    sluice_cpu_bucket bucket{};
    sluice_bucket_refill(&bucket, &level.share, kT0);
    bucket.tokens_nano = 0;
    const uint64_t ten_years = 10ull * 365 * 24 * 3600 * kSecond;
    sluice_bucket_refill(&bucket, &level.share, kT0 + ten_years);
    EXPECT_EQ(bucket.tokens_nano, ten_years);  // 1 unit/s == 1 nano-unit/ns
    sluice_bucket_refill(&bucket, &level.share, kT0 + 20 * ten_years);
    EXPECT_EQ(bucket.tokens_nano, level.share.burst_nano);
}

TEST(Bucket, LargestRateTimesBurstFillTimeIsExact) {
    for (uint64_t rate : {1ull, 3ull, 7ull, 999'999'937ull, SLUICE_RATE_MAX}) {
        for (uint64_t burst : {1ull, 9000ull, 1'000'000'007ull, SLUICE_BURST_MAX}) {
            sluice_level_limit level = make_level(rate, burst);
            const sluice_limit& l = level.full;
            // fill_ns is the first whole ns after which the bucket is full.
            EXPECT_GE(static_cast<int128>(l.fill_ns) * rate, static_cast<int128>(l.burst_nano));
            EXPECT_LT(static_cast<int128>(l.fill_ns - 1) * rate, static_cast<int128>(l.burst_nano));
            // Saved tokens at burst plus a maximal refill stay inside 64 bits.
            EXPECT_LT(static_cast<int128>(l.burst_nano) + static_cast<int128>(l.fill_ns) * rate,
                      static_cast<int128>(UINT64_MAX));
            EXPECT_EQ(sluice_refilled_tokens(l.burst_nano, 0, &l, UINT64_MAX), l.burst_nano);
        }
    }
}

TEST(Bucket, LoweredBurstClampsSavedTokens) {
    sluice_level_limit big = make_level(10, 100), small = make_level(10, 4);
    sluice_cpu_bucket bucket{};
    sluice_bucket_refill(&bucket, &big.share, kT0);
    EXPECT_EQ(bucket.tokens_nano, 100 * SLUICE_NANO);
    int admitted = 0;
    while (sluice_bucket_consume(&bucket, &small.share, SLUICE_NANO, kT0)) admitted++;
    EXPECT_EQ(admitted, 4);
}

TEST(Bucket, ZeroClockStillCreatesOneBucketNotAFreshOneEachTime) {
    sluice_level_limit level = make_level(1, 2);
    sluice_cpu_bucket bucket{};
    EXPECT_TRUE(sluice_bucket_consume(&bucket, &level.share, SLUICE_NANO, 0));
    EXPECT_TRUE(sluice_bucket_consume(&bucket, &level.share, SLUICE_NANO, 0));
    EXPECT_FALSE(sluice_bucket_consume(&bucket, &level.share, SLUICE_NANO, 0));
}

}  // namespace
}  // namespace sluice::test::bucket_test
