// SPDX-License-Identifier: Apache-2.0
// Human limits to the core's precomputed form: what is accepted, what is
// refused, and that every refusal names the field and the value.
#include <gmock/gmock.h>

#include <bit>
#include <cstring>

#include "core_support.h"
#include "sluice/window.h"

namespace sluice::test::rate_limits_test {
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

WindowSettings window(Algorithm algorithm, uint64_t limit, uint64_t window_ns, Unit unit = Unit::packets) {
    return window_settings(algorithm, limit, window_ns, unit);
}

TEST(WindowLevel, CompilesToAFullStateWindowAndAnEnabledLevel) {
    auto compiled = compile_window_level(window(Algorithm::sliding_window, 100'000, 250'000'000, Unit::bytes), "f");
    ASSERT_TRUE(compiled.ok()) << compiled.error().message;
    const sluice_window_limit& w = compiled.value().window;
    EXPECT_EQ(w.window_ns, 250'000'000u);
    EXPECT_EQ(w.limit, 100'000u);
    EXPECT_EQ(w.algorithm, SLUICE_ALGORITHM_SLIDING_WINDOW);
    EXPECT_EQ(w.index_bits, 64);
    EXPECT_EQ(w.count_bits, 64);
    EXPECT_EQ(w.generation, 0u);
    sluice_level_limit expected{};
    expected.enabled = 1;
    expected.unit = SLUICE_UNIT_BYTES;
    EXPECT_EQ(std::memcmp(&compiled.value().level, &expected, sizeof(expected)), 0);

    // The bounds themselves are accepted.
    EXPECT_TRUE(compile_window_level(window(Algorithm::fixed_window, kWindowLimitMax, SLUICE_WINDOW_MAX_NS), "f").ok());
    EXPECT_TRUE(compile_window_level(window(Algorithm::sliding_log, SLUICE_LOG_MAX, SLUICE_WINDOW_MIN_NS), "f").ok());
    EXPECT_EQ(kWindowLimitMax, (1ULL << 47) - 1);
}

TEST(WindowLevel, EachRefusalNamesItsSetting) {
    struct Case {
        WindowSettings settings;
        std::string setting, message;
    };
    WindowSettings big_frame = window(Algorithm::fixed_window, 100, SLUICE_NANO, Unit::bytes);
    big_frame.max_frame_bytes = SLUICE_COST_MAX + 1;
    const Case cases[] = {
        {window(Algorithm::gcra, 10, SLUICE_NANO), "algorithm",
         "class \"ssh\".aggregate: algorithm \"gcra\" does not count by window"},
        {window(Algorithm::fixed_window, 10, SLUICE_WINDOW_MIN_NS - 1), "window",
         "class \"ssh\".aggregate: window 999999ns is outside 1ms..1d"},
        {window(Algorithm::fixed_window, 10, SLUICE_WINDOW_MAX_NS + SLUICE_NANO), "window",
         "class \"ssh\".aggregate: window 86401s is outside 1ms..1d"},
        {window(Algorithm::fixed_window, 0, SLUICE_NANO), "limit",
         "class \"ssh\".aggregate: limit is 0; it must be at least 1 packets per window (use action = \"drop\" to "
         "refuse everything)"},
        {window(Algorithm::sliding_window, kWindowLimitMax + 1, SLUICE_NANO), "limit",
         "class \"ssh\".aggregate: limit 140737488355328 exceeds the maximum of 140737488355327 packets per window "
         "(2^47 - 1)"},
        {window(Algorithm::sliding_log, SLUICE_LOG_MAX + 1, SLUICE_NANO, Unit::tcp_syn), "limit",
         "class \"ssh\".aggregate: limit 33 is more than a sliding_log holds: the log keeps one time per admission, "
         "at most 32 per class; use sliding_window (approximate) or fixed_window for larger limits"},
        {window(Algorithm::sliding_log, 10, SLUICE_NANO, Unit::bytes), "unit",
         "class \"ssh\".aggregate: sliding_log counts admissions (unit \"packets\" or \"tcp_syn\"), not bytes; use "
         "fixed_window or sliding_window for a limit in bytes"},
        {window(Algorithm::fixed_window, 1517, SLUICE_NANO, Unit::bytes), "limit",
         "class \"ssh\".aggregate: limit 1517 bytes is below the largest cost one packet is charged (1518 bytes), so "
         "such packets could never pass; raise limit to at least 1518"},
        {big_frame, "max_frame_bytes", "class \"ssh\".aggregate: largest frame 65536 bytes is outside 1..65535"},
    };
    for (const Case& c : cases) {
        auto compiled = compile_window_level(c.settings, "class \"ssh\".aggregate");
        ASSERT_FALSE(compiled.ok()) << c.message;
        EXPECT_EQ(compiled.error().message, c.message);
        EXPECT_EQ(compiled.error().setting, c.setting) << c.message;
    }
}

TEST(WindowLevel, DurationsAndLimitsReadAsThePolicyWritesThem) {
    EXPECT_EQ(format_duration(1'000'000), "1ms");
    EXPECT_EQ(format_duration(1'500'000'000), "1500ms");
    EXPECT_EQ(format_duration(90 * SLUICE_NANO), "90s");
    EXPECT_EQ(format_duration(600 * SLUICE_NANO), "10m");
    EXPECT_EQ(format_duration(7'200 * SLUICE_NANO), "2h");
    EXPECT_EQ(format_duration(SLUICE_WINDOW_MAX_NS), "1d");
    EXPECT_EQ(format_duration(1'500), "1500ns");
    EXPECT_EQ(format_duration(0), "0ns");
    EXPECT_EQ(algorithm_name(SLUICE_ALGORITHM_SLIDING_LOG), "sliding_log");
    EXPECT_EQ(algorithm_name(9), "algorithm_9");
    auto ssh = compile_window_level(window(Algorithm::sliding_log, 10, 60 * SLUICE_NANO, Unit::tcp_syn), "f");
    ASSERT_TRUE(ssh.ok());
    EXPECT_EQ(describe_window(ssh.value().window, ssh.value().level.unit), "10 TCP SYNs per 1m");
}

TEST(SourceWindow, CompilesToAnEntryWindowAndTheUnit) {
    struct Case {
        WindowSettings settings;
        uint8_t count_bits;
    };
    const Case cases[] = {
        {window(Algorithm::fixed_window, 10, 60 * SLUICE_NANO, Unit::tcp_syn), 4},
        {window(Algorithm::sliding_window, 16, SLUICE_NANO), 5},  // 16 < 2^5
        {window(Algorithm::fixed_window, 1, SLUICE_WINDOW_MIN_NS), 1},
        {window(Algorithm::sliding_window, 100'000, 35 * SLUICE_NANO, Unit::bytes), 17},
    };
    for (const Case& c : cases) {
        auto compiled = compile_source_window(c.settings, "f");
        ASSERT_TRUE(compiled.ok()) << compiled.error().message;
        sluice_source_limit expected{};
        expected.enabled = 1;
        expected.current.unit = static_cast<uint8_t>(c.settings.unit);
        expected.window.window_ns = c.settings.window_ns;
        expected.window.limit = c.settings.limit;
        expected.window.algorithm = static_cast<uint8_t>(c.settings.algorithm);
        expected.window.index_bits = 64;
        expected.window.count_bits = c.count_bits;
        EXPECT_EQ(std::memcmp(&compiled.value(), &expected, sizeof(expected)), 0) << c.settings.limit;
        EXPECT_TRUE(sluice_entry_window_fits(&compiled.value().window));
    }
}

TEST(SourceWindow, EachRefusalNamesItsSettingAndWhatWouldFit) {
    struct Case {
        WindowSettings settings;
        std::string setting, message;
    };
    WindowSettings big_frame = window(Algorithm::fixed_window, 100, SLUICE_NANO, Unit::bytes);
    big_frame.max_frame_bytes = SLUICE_COST_MAX + 1;
    const std::string f = "class \"ssh\".per_source: ";
    const Case cases[] = {
        {window(Algorithm::sliding_log, 10, SLUICE_NANO), "algorithm",
         f + "sliding_log keeps each admission's time, and a per-source entry is one 64-bit word; use sliding_window "
             "per source (approximate, see README \"Choosing an algorithm\"), or sliding_log on a class's aggregate"},
        {window(Algorithm::gcra, 10, SLUICE_NANO), "algorithm", f + "algorithm \"gcra\" does not count by window"},
        {window(static_cast<Algorithm>(9), 10, SLUICE_NANO), "algorithm",
         f + "algorithm \"algorithm_9\" does not count by window"},
        {window(Algorithm::fixed_window, 10, SLUICE_WINDOW_MIN_NS - 1), "window",
         f + "window 999999ns is outside 1ms..1d"},
        {window(Algorithm::fixed_window, 0, SLUICE_NANO), "limit",
         f + "limit is 0; it must be at least 1 packets per window (use action = \"drop\" to refuse everything)"},
        {window(Algorithm::fixed_window, 1517, SLUICE_NANO, Unit::bytes), "limit",
         f + "limit 1517 bytes is below the largest cost one packet is charged (1518 bytes), so such packets could "
             "never pass; raise limit to at least 1518"},
        {big_frame, "max_frame_bytes", f + "largest frame 65536 bytes is outside 1..65535"},
        // Too many bits for the window: the shortest that holds them, or the
        // largest limit this window holds.
        {window(Algorithm::sliding_window, 100'000, SLUICE_NANO), "limit",
         f + "sliding_window with limit 100000 per source needs window >= 35s: both counts share the entry's 45-bit "
             "time field; lower limit to at most 16383 for window 1s, lengthen window or use fixed_window"},
        {window(Algorithm::sliding_window, 1'000, SLUICE_WINDOW_MIN_NS), "limit",
         f + "sliding_window with limit 1000 per source needs window >= 3ms: both counts share the entry's 45-bit "
             "time field; lower limit to at most 511 for window 1ms, lengthen window or use fixed_window"},
        {window(Algorithm::fixed_window, 1ULL << 31, SLUICE_NANO), "limit",
         f + "fixed_window with limit 2147483648 per source needs window >= 9s: the count shares the entry's 45-bit "
             "time field; lower limit to at most 268435455 for window 1s, lengthen window"},
        // More than any window holds.
        {window(Algorithm::sliding_window, 1ULL << 19, SLUICE_WINDOW_MAX_NS), "limit",
         f + "sliding_window with limit 524288 per source does not fit a source-table entry at any window: both "
             "counts share the entry's 45-bit time field, at most 524287 per window; lower limit or use fixed_window"},
        {window(Algorithm::fixed_window, 1ULL << 32, SLUICE_NANO), "limit",
         f + "fixed_window with limit 4294967296 per source does not fit a source-table entry at any window: the "
             "count shares the entry's 45-bit time field, at most 4294967295 per window; lower limit"},
        // Longer than an entry can time.
        {window(Algorithm::fixed_window, 10, 2 * 3'600 * SLUICE_NANO), "window",
         f + "window 2h is longer than a source-table entry can time: fixed_window with limit 10 per source allows at "
             "most 4398s (about 73m); shorten window"},
        {window(Algorithm::sliding_window, 1, 3'600 * SLUICE_NANO), "window",
         f + "window 1h is longer than a source-table entry can time: sliding_window with limit 1 per source allows "
             "at most 2199s (about 36m); shorten window, or use fixed_window, which allows up to 4398s (about 73m)"},
    };
    for (const Case& c : cases) {
        auto compiled = compile_source_window(c.settings, "class \"ssh\".per_source");
        ASSERT_FALSE(compiled.ok()) << c.message;
        EXPECT_EQ(compiled.error().message, c.message);
        EXPECT_EQ(compiled.error().setting, c.setting) << c.message;
    }
}

// The bounds the refusals state are sluice_entry_window_fits' own: at each
// count width, the shortest and longest window fit and a nanosecond past
// either does not, and the compiler agrees with the dataplane's test.
TEST(SourceWindow, FitsExactlyWhereAnEntryHoldsTheCounts) {
    for (Algorithm algorithm : {Algorithm::fixed_window, Algorithm::sliding_window}) {
        const bool sliding = algorithm == Algorithm::sliding_window;
        for (uint32_t bits = 1; bits <= 33; bits++) {
            const uint64_t limit = (1ULL << bits) - 1;
            const uint32_t counts = sliding ? 2 * bits : bits;  // C'
            if (counts > 40) continue;
            const uint64_t shortest = std::max<uint64_t>(SLUICE_WINDOW_MIN_NS, 2ULL << counts);
            const uint64_t longest = (SLUICE_DEBT_MAX_NS - (1ULL << counts)) / (sliding ? 2 : 1);
            for (uint64_t window_ns : {shortest - 1, shortest, longest, longest + 1}) {
                auto compiled = compile_source_window(window(algorithm, limit, window_ns), "f");
                sluice_window_limit w{};
                w.algorithm = static_cast<uint8_t>(algorithm);
                w.limit = limit;
                w.window_ns = window_ns;
                w.index_bits = 64;
                w.count_bits = static_cast<uint8_t>(bits);
                const bool fits = sluice_entry_window_fits(&w);
                EXPECT_EQ(compiled.ok(), fits) << algorithm_name(w.algorithm) << " limit " << limit << " window "
                                               << window_ns << (compiled.ok() ? "" : ": " + compiled.error().message);
                const bool inside = shortest <= longest && window_ns >= shortest && window_ns <= longest;
                EXPECT_EQ(fits, inside && bits <= 32) << algorithm_name(w.algorithm) << " limit " << limit;
            }
        }
    }
    // The largest limits: 2^32 - 1 counted by fixed window, 2^19 - 1 by sliding (two counts of 19 bits).
    EXPECT_TRUE(compile_source_window(window(Algorithm::fixed_window, (1ULL << 32) - 1, 9 * SLUICE_NANO), "f").ok());
    EXPECT_TRUE(
        compile_source_window(window(Algorithm::sliding_window, (1ULL << 19) - 1, 550 * SLUICE_NANO), "f").ok());
    EXPECT_FALSE(
        compile_source_window(window(Algorithm::sliding_window, (1ULL << 19) - 1, 549 * SLUICE_NANO), "f").ok());
    // The stated maxima fit, a second more does not.
    EXPECT_TRUE(compile_source_window(window(Algorithm::fixed_window, 10, 4398 * SLUICE_NANO), "f").ok());
    EXPECT_FALSE(compile_source_window(window(Algorithm::fixed_window, 10, 4399 * SLUICE_NANO), "f").ok());
    EXPECT_TRUE(compile_source_window(window(Algorithm::sliding_window, 1, 2199 * SLUICE_NANO), "f").ok());
    EXPECT_FALSE(compile_source_window(window(Algorithm::sliding_window, 1, 2200 * SLUICE_NANO), "f").ok());
}

}  // namespace
}  // namespace sluice::test::rate_limits_test
