// SPDX-License-Identifier: Apache-2.0
// The source table in the real XDP program: both of a source's sets full
// meets the class's on_table_full (a table of two sets, and a set pair of a
// large table filled on purpose through the hash key); the key is new at
// every load and kept with pinned maps; a source deep in debt survives churn
// of many times the table's size; entries unused for hours are emptied.
// The small-table scenario is in tests/common/verdict_scenarios.h, shared
// with the DPDK dataplane.
#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <vector>

#include "common/verdict_scenarios.h"
#include "sluice/source_table.h"
#include "xdp_fixture.h"

namespace sluice::test {
namespace {

using scenarios::kTableFullCapacity;

// ---- a table of two sets --------------------------------------------------------------

class XdpFullTable : public XdpTest, public ::testing::WithParamInterface<uint8_t> {
  protected:
    XdpOptions options() const override {
        return XdpOptions{.test_clock = true, .source_capacity = kTableFullCapacity, .pin_dir = {}};
    }
};

class XdpFullTableOpen : public XdpTest {
  protected:
    XdpOptions options() const override {
        return XdpOptions{.test_clock = true, .source_capacity = kTableFullCapacity, .pin_dir = {}};
    }
};

TEST_P(XdpFullTable, SeventeenthSourceMeetsOnTableFull) {
    scenarios::seventeenth_source_meets_on_table_full(*this, GetParam());
}

TEST_F(XdpFullTableOpen, UntrackedSourcesStillMeetTheLevelsAbove) {
    scenarios::untracked_sources_still_meet_the_levels_above(*this);
}

INSTANTIATE_TEST_SUITE_P(OnTableFull, XdpFullTable,
                         ::testing::Values(SLUICE_TABLE_FULL_EVICT, SLUICE_TABLE_FULL_OPEN, SLUICE_TABLE_FULL_CLOSED),
                         scenarios::table_full_case_name);

// ---- the keyed hash ------------------------------------------------------------------

// Where `address` lives in class `class_id` of a table with this key: the
// hash the program computes, computed here from the key the loader drew.
struct Placement {
    uint32_t home, second;
    uint64_t tag;
};

Placement place(const std::string& address, uint32_t class_id, const sluice_hash_key& key, uint32_t sets) {
    sluice_source_key source{};
    source.class_id = class_id;
    source.family = SLUICE_FAMILY_IPV4;
    EXPECT_EQ(inet_pton(AF_INET, address.c_str(), source.addr), 1) << address;
    const uint64_t hash = sluice_source_hash(&source, &key);
    return {sluice_source_home(hash, sets - 1), sluice_source_second(hash, sets - 1), sluice_source_tag(hash)};
}

std::string address_of(uint32_t n) {
    char text[INET_ADDRSTRLEN];
    const uint32_t be = htonl(0x0a000000u + n);  // 10.0.0.0/8
    inet_ntop(AF_INET, &be, text, sizeof(text));
    return text;
}

// The first `count` addresses from 10.0.0.0 up whose home set is `home`.
std::vector<std::string> homed_at(uint32_t home, size_t count, uint32_t class_id, const sluice_hash_key& key,
                                  uint32_t sets, uint32_t& next) {
    std::vector<std::string> found;
    while (found.size() < count) {
        const std::string address = address_of(next++);
        if (place(address, class_id, key, sets).home == home) found.push_back(address);
    }
    return found;
}

class XdpHashKey : public XdpTest {
  protected:
    bool open_in_setup() const override { return false; }
};

TEST_F(XdpHashKey, DiffersBetweenTwoLoads) {
    const XdpOptions options{.test_clock = true, .source_capacity = kTestCapacity, .pin_dir = {}};
    auto first = XdpDataplane::open(options);
    auto second = XdpDataplane::open(options);
    SLUICE_ASSERT_OK(first);
    SLUICE_ASSERT_OK(second);
    const sluice_hash_key a = first.value()->hash_key(), b = second.value()->hash_key();
    EXPECT_NE(std::memcmp(&a, &b, sizeof(a)), 0);
    // And so sources land elsewhere: of 64 sources, hardly any keep both sets.
    const uint32_t sets = first.value()->source_sets();
    int same = 0;
    for (uint32_t i = 0; i < 64; i++) {
        const Placement pa = place(address_of(i), 1, a, sets), pb = place(address_of(i), 1, b, sets);
        same += pa.home == pb.home && pa.second == pb.second;
    }
    EXPECT_LE(same, 2);
}

// A set pair of a large table filled on purpose: eight sources homed in a
// victim's home set and eight in its second, all in debt; the victim then
// meets on_table_full though the table is nearly empty.
class XdpSetFilledOnPurpose : public XdpTest, public ::testing::WithParamInterface<uint8_t> {};

TEST_P(XdpSetFilledOnPurpose, VictimMeetsOnTableFull) {
    const uint8_t choice = GetParam();
    apply(policy().add({.id = 1, .per_source = Limit{.rate = 10, .burst = 3}, .on_table_full = choice}).build());
    const sluice_hash_key& key = dp_->hash_key();
    const uint32_t sets = dp_->source_sets();
    const std::string victim = address_of(1'000'000);
    const Placement v = place(victim, 1, key, sets);
    uint32_t next = 0;
    const auto home = homed_at(v.home, SLUICE_SET_WAYS, 1, key, sets, next);
    const auto second = homed_at(v.second, SLUICE_SET_WAYS, 1, key, sets, next);
    // The deepest in debt (3 packets) is the first of the home set; the others take one.
    EXPECT_EQ(verdicts(udp_from(home[0]), 3), "PPP");
    for (size_t i = 1; i < home.size(); i++) EXPECT_EQ(verdicts(udp_from(home[i]), 1), "P") << home[i];
    for (const std::string& s : second) EXPECT_EQ(verdicts(udp_from(s), 1), "P") << s;
    EXPECT_EQ(source_table().in_debt, 2u * SLUICE_SET_WAYS);

    const std::string expected = choice == SLUICE_TABLE_FULL_EVICT  ? "PPPD"
                                 : choice == SLUICE_TABLE_FULL_OPEN ? "PPPP"
                                                                    : "DDDD";
    EXPECT_EQ(verdicts(udp_from(victim), 4), expected);
    EXPECT_EQ(verdicts(udp_from(home[0]), 1), "D");  // never the one deepest in debt
    const Counts c = counts();
    EXPECT_EQ(stat(SLUICE_STAT_SOURCE_EVICTIONS), choice == SLUICE_TABLE_FULL_EVICT ? 1u : 0u);
    EXPECT_EQ(stat(SLUICE_STAT_SOURCE_TABLE_FULL), choice == SLUICE_TABLE_FULL_EVICT ? 0u : 4u);
    EXPECT_EQ(c.reason(SLUICE_REASON_TABLE_FULL), choice == SLUICE_TABLE_FULL_EVICT ? 0u : 4u);
    // Every other source in the table was left alone.
    EXPECT_EQ(source_table().in_debt, 2u * SLUICE_SET_WAYS);
}

INSTANTIATE_TEST_SUITE_P(OnTableFull, XdpSetFilledOnPurpose,
                         ::testing::Values(SLUICE_TABLE_FULL_EVICT, SLUICE_TABLE_FULL_OPEN, SLUICE_TABLE_FULL_CLOSED),
                         scenarios::table_full_case_name);

// ---- churn ------------------------------------------------------------------------------

// An attacker's pulses with random-source churn between them, five times the
// table's size: in a table that forgot it (an LRU, say) the pulsing source
// would come back with a full bucket each time. Here it is the deepest in
// debt of its sets, so evict never takes it and it passes exactly its bound.
class XdpChurn : public XdpTest {
  protected:
    XdpOptions options() const override {
        return XdpOptions{.test_clock = true, .source_capacity = 1024, .pin_dir = {}};
    }
};

TEST_F(XdpChurn, PulsingSourceNeverPassesMoreThanItsBound) {
    // 10/s, burst 20: a pulse of 40 passes 20, then 10 per second.
    apply(policy().add({.id = 1, .per_source = Limit{.rate = 10, .burst = 20}}).build());
    const Bytes pulser = udp_from("192.0.2.66");
    constexpr int kPulses = 8;
    constexpr uint64_t kGap = 1 * kSec;
    const uint32_t churn = 5 * static_cast<uint32_t>(source_table().capacity);
    uint64_t admitted = 0, churn_dropped = 0;
    uint32_t next = 0;
    for (int pulse = 0; pulse < kPulses; pulse++) {
        set_clock(t0_ + pulse * kGap);
        const std::string got = verdicts(pulser, 40);
        admitted += static_cast<uint64_t>(std::count(got.begin(), got.end(), 'P'));
        // Churn in the 50 ms after the pulse: every churn source is new,
        // passes once and is 100 ms in debt, so the table overflows.
        for (uint32_t i = 0; i < churn; i++) {
            set_clock(t0_ + pulse * kGap + (i + 1) * (50 * kMs / churn));
            churn_dropped += run(udp_from(address_of(next++))) != static_cast<uint32_t>(XDP_PASS);
        }
    }
    // The window from the first pulse to the last: burst + rate * T.
    const uint64_t bound = 20 + 10 * (kPulses - 1) * kGap / kSec;
    std::cout << "[ churn    ] " << kPulses << " pulses of 40 with " << churn
              << " new sources between each: " << admitted << " admitted, bound " << bound << ", "
              << stat(SLUICE_STAT_SOURCE_EVICTIONS) << " evictions\n";
    EXPECT_LE(admitted, bound);
    // Exactly the bound, unless a churn source's 16-bit tag matched the
    // pulser's in a set they share (README, "Tags can collide"; about one
    // run in fifty): then the two share the pulser's entry, and the churn
    // source is refused, or spends one of the pulser's packets.
    EXPECT_GE(admitted + 2, bound);
    EXPECT_LE(churn_dropped, 2u);
    EXPECT_GT(stat(SLUICE_STAT_SOURCE_EVICTIONS), 0u) << "the table was never full: the test proves nothing";
}

// ---- stale entries -------------------------------------------------------------------------

// An entry nobody charges for hours is emptied the next time a new source
// scans its sets, long before its 45-bit TAT could come round to look in
// debt again.
TEST_F(XdpChurn, EntriesUnusedForHoursAreEmptiedWhenScanned) {
    apply(policy().add({.id = 1, .per_source = Limit{.rate = 10, .burst = 3}}).build());
    const sluice_hash_key& key = dp_->hash_key();
    const uint32_t sets = dp_->source_sets();
    uint32_t next = 0;
    const auto same_home = homed_at(place(address_of(0), 1, key, sets).home, 2, 1, key, sets, next);
    EXPECT_EQ(verdicts(udp_from(same_home[0]), 1), "P");
    EXPECT_EQ(source_table().known, 1u);

    // 4.9 hours later. The newcomer would take an empty entry over a free
    // one, so two known entries would mean the old one was left alone.
    set_clock(t0_ + (1ULL << 44) + kSec);
    EXPECT_EQ(verdicts(udp_from(same_home[1]), 1), "P");
    EXPECT_EQ(source_table().known, 1u);
}

// Known sources' own lookups never empty anything, so the daemon's periodic
// survey of the table (source_table()) empties stale entries too.
TEST_F(XdpChurn, TheSurveyEmptiesEntriesUnusedForHours) {
    apply(policy().add({.id = 1, .per_source = Limit{.rate = 10, .burst = 3}}).build());
    EXPECT_EQ(verdicts(udp_from("192.0.2.1"), 1), "P");
    set_clock(t0_ + SLUICE_STALE_NS - kSec);
    EXPECT_EQ(source_table().known, 1u);  // free, still known
    set_clock(t0_ + SLUICE_STALE_NS + kSec);
    EXPECT_EQ(source_table().known, 0u);
    // The source comes back as new, with a full bucket.
    EXPECT_EQ(verdicts(udp_from("192.0.2.1"), 4), "PPPD");
    EXPECT_EQ(stat(SLUICE_STAT_SOURCE_INSERTS), 2u);
}

}  // namespace
}  // namespace sluice::test
