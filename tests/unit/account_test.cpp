// SPDX-License-Identifier: Apache-2.0
// The per-packet glue both dataplanes share (sluice/account.h), over a fake
// backend of arrays: the counter slot and its clamps, drop sampling with a
// period that may move, the event it fills and its weight, lost events and
// their weight, and the table events' stats.
#include <array>
#include <cstring>
#include <vector>

#include "core_support.h"

namespace sluice::test {

// A backend: counters, stats, a drop sampler with the period user space set
// and an event ring that holds `room` events before it refuses more.
struct FakeBackend {
    std::vector<sluice_counter> counters = std::vector<sluice_counter>(SLUICE_COUNTER_SLOTS);
    std::vector<sluice_counter> ban_counters = std::vector<sluice_counter>(SLUICE_MAX_BANS);
    std::array<uint64_t, SLUICE_STAT_COUNT> stats{};
    sluice_drop_sampler sampler{};
    uint32_t sample_period = 4;
    uint32_t random = 0;  // 0: every gap is the period
    uint64_t now = kT0;
    bool reserve_fails = false;
    size_t room = ~size_t{0};
    std::vector<sluice_drop_event> sent;
    sluice_drop_event scratch{};
    uint64_t clock_reads = 0;

    sluice_drop_event* reserve() {
        if (reserve_fails) return nullptr;
        std::memset(&scratch, 0xa5, sizeof(scratch));  // what a ring's stale memory may hold
        return &scratch;
    }
    bool submit(const sluice_drop_event* event) {
        if (sent.size() >= room) return false;
        sent.push_back(*event);
        return true;
    }
    uint64_t read_clock() {
        clock_reads++;
        return now;
    }
};

}  // namespace sluice::test

#define SLUICE_ACCOUNT_CTX sluice::test::FakeBackend
#define SLUICE_COUNTER(ctx, index) (&(ctx)->counters.at(*(index)))
#define SLUICE_STAT_ADD(ctx, stat) ((ctx)->stats.at(stat)++)
#define SLUICE_DROP_SAMPLER(ctx) (&(ctx)->sampler)
#define SLUICE_DROP_SAMPLE_PERIOD(ctx) ((ctx)->sample_period)
#define SLUICE_DROP_RANDOM(ctx) ((ctx)->random)
#define SLUICE_EVENT_RESERVE(ctx) ((ctx)->reserve())
#define SLUICE_EVENT_SUBMIT(ctx, event) ((ctx)->submit(event))
#define SLUICE_EVENT_NOW(ctx) ((ctx)->read_clock())
#define SLUICE_BAN_COUNTER(ctx, slot) (&(ctx)->ban_counters.at(*(slot)))
#include "sluice/account.h"

namespace sluice::test {
namespace {

sluice_decision drop(uint8_t reason) { return sluice_decision_make(SLUICE_VERDICT_DROP, reason, SLUICE_LEVEL_SOURCE); }
sluice_decision pass() { return sluice_decision_make(SLUICE_VERDICT_PASS, SLUICE_REASON_ADMITTED, SLUICE_LEVEL_NONE); }

sluice_source_key key_of(uint32_t class_id, uint8_t last) {
    sluice_source_key key{};
    key.class_id = class_id;
    key.family = SLUICE_FAMILY_IPV4;
    key.addr[0] = 192;
    key.addr[1] = 0;
    key.addr[2] = 2;
    key.addr[3] = last;
    return key;
}

TEST(Account, CountsPacketsAndBytesInTheDecisionsSlot) {
    FakeBackend b;
    sluice_account(&b, 7, pass(), 100, nullptr);
    sluice_account(&b, 7, pass(), 60, nullptr);
    sluice_account(&b, 7, drop(SLUICE_REASON_CLASS), 1500, nullptr);
    const sluice_counter& passed = b.counters[sluice_counter_index(7, SLUICE_VERDICT_PASS, SLUICE_REASON_ADMITTED)];
    const sluice_counter& dropped = b.counters[sluice_counter_index(7, SLUICE_VERDICT_DROP, SLUICE_REASON_CLASS)];
    EXPECT_EQ(passed.packets, 2u);
    EXPECT_EQ(passed.bytes, 160u);
    EXPECT_EQ(dropped.packets, 1u);
    EXPECT_EQ(dropped.bytes, 1500u);
}

TEST(Account, ABannedPacketCountsInItsBanSlotAndUnderClassZeroAndIsSampledByItsWholeAddress) {
    FakeBackend b;
    b.sample_period = 1;
    sluice_packet pkt{};
    pkt.frame_len = 90;
    pkt.family = SLUICE_FAMILY_IPV4;
    const uint8_t addr[4] = {203, 0, 113, 77};
    std::memcpy(pkt.src, addr, sizeof(addr));
    sluice_ban ban{};
    ban.until_ns = kT0 + 1;
    ban.slot = SLUICE_MAX_BANS + 3;  // clamped into the slots, never past them
    ASSERT_TRUE(sluice_ban_applies(&ban, kT0));
    sluice_source_key key;
    std::memset(&key, 0xa5, sizeof(key));
    sluice_account_ban(&b, &ban, &pkt, &key);
    sluice_account_ban(&b, &ban, &pkt, &key);

    EXPECT_EQ(b.ban_counters[3].packets, 2u);
    EXPECT_EQ(b.ban_counters[3].bytes, 180u);
    EXPECT_EQ(b.counters[sluice_counter_index(SLUICE_CLASS_UNCLASSIFIED, SLUICE_VERDICT_DROP, SLUICE_REASON_BAN)].packets,
              2u);
    ASSERT_EQ(b.sent.size(), 2u);
    EXPECT_EQ(b.sent[0].reason, SLUICE_REASON_BAN);
    EXPECT_EQ(b.sent[0].source.class_id, uint32_t{SLUICE_CLASS_UNCLASSIFIED});
    EXPECT_EQ(b.sent[0].source.family, SLUICE_FAMILY_IPV4);
    EXPECT_EQ(std::memcmp(b.sent[0].source.addr, addr, sizeof(addr)), 0);
    EXPECT_EQ(b.sent[0].source.addr[4], 0u);  // the rest of the key zeroed, not 0xa5
    EXPECT_EQ(b.sent[0].source._pad[0], 0u);
}

TEST(Account, ABanEndsAtItsTimeAndNoBanAppliesToNothing) {
    sluice_ban ban{};
    ban.until_ns = kT0 + 100;
    EXPECT_TRUE(sluice_ban_applies(&ban, kT0 + 99));
    EXPECT_FALSE(sluice_ban_applies(&ban, kT0 + 100));
    EXPECT_FALSE(sluice_ban_applies(nullptr, kT0));
}

TEST(Account, ASlotOutOfRangeIsClampedIntoTheCounters) {
    // Class ids wrap to the class table, an unknown verdict counts as drop,
    // and an unknown reason as reason 0: never outside the counters.
    EXPECT_EQ(sluice_class_slot(SLUICE_MAX_CLASSES + 5), 5u);
    EXPECT_EQ(sluice_decision_counter(SLUICE_MAX_CLASSES + 5, pass()),
              sluice_counter_index(5, SLUICE_VERDICT_PASS, SLUICE_REASON_ADMITTED));
    sluice_decision odd = pass();
    odd.verdict = 3;
    odd.reason = 200;
    EXPECT_EQ(sluice_decision_counter(~0u, odd), sluice_counter_index(SLUICE_MAX_CLASSES - 1, 1, 0));
    EXPECT_LT(sluice_decision_counter(~0u, odd), SLUICE_COUNTER_SLOTS);
}

TEST(Account, OneDropOfAKnownSourceInEveryPeriodIsSentWithItsWeight) {
    FakeBackend b;  // period 4
    const sluice_source_key key = key_of(2, 9);
    for (int i = 0; i < 12; i++) sluice_account(&b, 2, drop(SLUICE_REASON_SOURCE), 64, &key);
    ASSERT_EQ(b.sent.size(), 3u);
    EXPECT_EQ(b.stats[SLUICE_STAT_DROP_EVENTS_SENT], 3u);
    EXPECT_EQ(b.stats[SLUICE_STAT_DROP_EVENTS_LOST], 0u);
    EXPECT_EQ(b.clock_reads, 3u) << "only sampled drops read the clock";
    const sluice_drop_event& e = b.sent[0];
    EXPECT_EQ(e.time_ns, kT0);
    EXPECT_EQ(std::memcmp(&e.source, &key, sizeof(key)), 0);
    EXPECT_EQ(e.frame_len, 64u);
    EXPECT_EQ(e.reason, SLUICE_REASON_SOURCE);
    EXPECT_EQ(e.verdict, SLUICE_VERDICT_DROP);
    EXPECT_EQ(e.weight, 4u);
    EXPECT_EQ(e.flags, 0u) << "a sampled drop starts no penalty";
    EXPECT_EQ(e._pad, 0u) << "padding leaves zeroed, whatever the ring held";
}

TEST(Account, AWouldDropIsCountedApartAndSampledWithItsVerdict) {
    FakeBackend b;
    b.sample_period = 1;
    const sluice_source_key key = key_of(3, 7);
    sluice_decision would = drop(SLUICE_REASON_SOURCE);
    would.verdict = SLUICE_VERDICT_WOULD_DROP;
    sluice_account(&b, 3, would, 80, &key);
    sluice_account(&b, 3, drop(SLUICE_REASON_SOURCE), 90, &key);
    EXPECT_EQ(b.counters[sluice_counter_index(3, SLUICE_VERDICT_WOULD_DROP, SLUICE_REASON_SOURCE)].bytes, 80u);
    EXPECT_EQ(b.counters[sluice_counter_index(3, SLUICE_VERDICT_DROP, SLUICE_REASON_SOURCE)].bytes, 90u);
    // Hot-source detection sees both, and can tell shadow from enforcement.
    ASSERT_EQ(b.sent.size(), 2u);
    EXPECT_EQ(b.sent[0].verdict, SLUICE_VERDICT_WOULD_DROP);
    EXPECT_EQ(b.sent[1].verdict, SLUICE_VERDICT_DROP);
}

TEST(Account, PassesAndDropsWithoutASourceAreNeverSampled) {
    FakeBackend b;
    b.sample_period = 1;  // every drop would be sent
    const sluice_source_key key = key_of(1, 1);
    for (int i = 0; i < 5; i++) sluice_account(&b, 1, pass(), 64, &key);
    for (int i = 0; i < 5; i++) sluice_account(&b, 0, drop(SLUICE_REASON_MALFORMED), 64, nullptr);
    EXPECT_TRUE(b.sent.empty());
    EXPECT_EQ(b.sampler.countdown, 0u) << "they do not advance the sampler either";
    EXPECT_EQ(b.clock_reads, 0u);
}

TEST(Account, EventsTheBackendCannotTakeAreCountedLost) {
    FakeBackend b;
    b.sample_period = 1;
    const sluice_source_key key = key_of(1, 2);
    b.reserve_fails = true;
    sluice_account(&b, 1, drop(SLUICE_REASON_CLASS), 64, &key);
    b.reserve_fails = false;
    b.room = 1;
    sluice_account(&b, 1, drop(SLUICE_REASON_CLASS), 64, &key);
    sluice_account(&b, 1, drop(SLUICE_REASON_CLASS), 64, &key);
    EXPECT_EQ(b.sent.size(), 1u);
    EXPECT_EQ(b.stats[SLUICE_STAT_DROP_EVENTS_SENT], 1u);
    EXPECT_EQ(b.stats[SLUICE_STAT_DROP_EVENTS_LOST], 2u);
    EXPECT_EQ(b.sent[0].weight, 2u) << "the event sent carries the lost one's weight";
    EXPECT_EQ(b.sampler.carried, 1u) << "the last lost event's weight waits for the next one sent";
}

TEST(Account, TheWeightsAddUpToTheDropsHoweverThePeriodMovesAndEventsAreLost) {
    // Every sampled drop stands for the drops up to the next sampled one, so
    // after any drop the weights sent and carried cover the drops so far and
    // the rest of the current gap exactly. A period of 0 counts as 1, one
    // above the maximum as the maximum.
    FakeBackend b;
    const sluice_source_key key = key_of(4, 4);
    const uint32_t periods[] = {1, 2, 8, 64, 3, 0};
    uint64_t drops = 0;
    for (int round = 0; round <= 60; round++) {
        b.sample_period = round < 60 ? periods[round % std::size(periods)] : SLUICE_DROP_SAMPLE_PERIOD_MAX + 1u;
        b.reserve_fails = round % 5 == 4;
        b.random = round < 60 ? static_cast<uint32_t>(round) * 2654435761u : 0;
        for (int i = 0; i < 37 + round; i++) {
            sluice_account(&b, 4, drop(SLUICE_REASON_SOURCE), 64, &key);
            drops++;
            uint64_t weights = b.sampler.carried;
            for (const sluice_drop_event& e : b.sent) weights += e.weight;
            ASSERT_EQ(weights - drops + 1, uint64_t{b.sampler.countdown}) << "round " << round << " drop " << i;
        }
    }
    EXPECT_GT(b.sampler.countdown, SLUICE_DROP_SAMPLE_PERIOD_MAX - 97) << "sampled at the maximum in the last round";
    EXPECT_GT(b.stats[SLUICE_STAT_DROP_EVENTS_LOST], 0u);
}

TEST(Account, SampleGapsSpreadAroundThePeriodSoRepeatingTrafficIsNotAliased) {
    EXPECT_EQ(sluice_drop_sample_gap(0, 12345), 1u);
    EXPECT_EQ(sluice_drop_sample_gap(1, 12345), 1u);
    EXPECT_EQ(sluice_drop_sample_gap(64, 0), 64u);
    // Every draw of the low bits once: gaps 32..95, each once, mean 63.5.
    uint64_t sum = 0;
    std::vector<int> seen(96);
    for (uint32_t random = 0; random < 64; random++) {
        const uint32_t gap = sluice_drop_sample_gap(64, random | 0xabcd0000u);
        ASSERT_GE(gap, 32u);
        ASSERT_LT(gap, 96u);
        seen[gap]++;
        sum += gap;
    }
    EXPECT_EQ(sum, 63u * 64 + 32);
    for (uint32_t gap = 32; gap < 96; gap++) EXPECT_EQ(seen[gap], 1) << gap;
    EXPECT_EQ(sluice_drop_sample_gap(~0u, 0), SLUICE_DROP_SAMPLE_PERIOD_MAX) << "above the maximum: the maximum";
}

TEST(Account, EveryTableEventCountsItsStats) {
    FakeBackend b;
    sluice_count_table_event(&b, SLUICE_TABLE_NONE);
    EXPECT_EQ(b.stats, (std::array<uint64_t, SLUICE_STAT_COUNT>{}));
    sluice_count_table_event(&b, SLUICE_TABLE_INSERTED);
    sluice_count_table_event(&b, SLUICE_TABLE_EVICTED);
    sluice_count_table_event(&b, SLUICE_TABLE_FULL);
    sluice_count_table_event(&b, SLUICE_TABLE_CONTENDED);
    sluice_count_table_event(&b, SLUICE_TABLE_CONTENDED);
    EXPECT_EQ(b.stats[SLUICE_STAT_SOURCE_INSERTS], 2u) << "an eviction inserts too";
    EXPECT_EQ(b.stats[SLUICE_STAT_SOURCE_EVICTIONS], 1u);
    EXPECT_EQ(b.stats[SLUICE_STAT_SOURCE_TABLE_FULL], 1u);
    EXPECT_EQ(b.stats[SLUICE_STAT_SOURCE_CONTENDED], 2u);
}

TEST(Account, ADecisionThatInsertsASourceCountsTheInsert) {
    // A per-source level over a two-set table: the first packet of a source
    // takes an entry, the second finds it.
    FakeBackend b;
    std::vector<sluice_source_set> table(2);
    auto limit = compile_source_limit({.rate_per_s = 10, .burst = 5, .unit = Unit::packets}, 1518, "test");
    ASSERT_TRUE(limit);
    sluice_levels levels{};
    levels.source.limit = &limit.value();
    levels.source.home = &table[0];
    levels.source.second = &table[1];
    levels.source.home_index = 0;
    levels.source.second_index = 1;
    levels.source.tag = uint64_t{1} << SLUICE_ENTRY_TAG_SHIFT;
    EXPECT_EQ(sluice_decide_counted(&b, &levels, 64, 0, kT0).verdict, SLUICE_VERDICT_PASS);
    EXPECT_EQ(sluice_decide_counted(&b, &levels, 64, 0, kT0).verdict, SLUICE_VERDICT_PASS);
    EXPECT_EQ(b.stats[SLUICE_STAT_SOURCE_INSERTS], 1u);
}

}  // namespace
}  // namespace sluice::test
