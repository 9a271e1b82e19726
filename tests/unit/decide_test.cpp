// SPDX-License-Identifier: Apache-2.0
// Composition of the source, new-source, class and global levels:
// check-then-commit, the refusing level, the table-full choice, decisions
// that need no bucket, and source keys.
#include <arpa/inet.h>

#include <cstring>
#include <set>
#include <string>

#include "core_support.h"
#include "labels.h"

namespace sluice::test::decide_test {
namespace {

// The bucket levels, by their place in Levels.
enum Bucket { kNewSources, kAggregate, kGlobal, kBuckets };

// One CPU's view of every level: a source table of `sets` sets for the
// per-source level (GCRA) and the three bucket levels in either accuracy mode.
struct Levels {
    std::vector<sluice_source_set> table;
    sluice_source_limit source{};
    uint8_t on_table_full = SLUICE_TABLE_FULL_EVICT;
    sluice_level_limit limit[kBuckets]{};
    sluice_cpu_bucket cpu[kBuckets]{};
    sluice_shared_bucket shared[kBuckets]{};

    explicit Levels(uint32_t sets = 2) : table(sets) {}

    // The per-source level of source `n`: its own tag, and two sets of the table.
    sluice_source_ref source_ref(uint32_t n) {
        sluice_source_ref ref{};
        ref.limit = &source;
        ref.home_index = n % table.size();
        ref.second_index = (n + 1) % table.size();
        ref.home = &table[ref.home_index];
        ref.second = &table[ref.second_index];
        ref.tag = static_cast<uint64_t>(n + 1) << SLUICE_ENTRY_TAG_SHIFT;
        ref.on_table_full = on_table_full;
        return ref;
    }
    sluice_decision offer(uint32_t frame_len, uint64_t now, uint32_t source_n = 0) {
        sluice_levels l{};
        l.source = source_ref(source_n);
        l.new_sources = {&limit[kNewSources], &cpu[kNewSources], &shared[kNewSources], nullptr};
        l.aggregate = {&limit[kAggregate], &cpu[kAggregate], &shared[kAggregate], nullptr};
        l.global = {&limit[kGlobal], &cpu[kGlobal], &shared[kGlobal], nullptr};
        return sluice_decide(&l, frame_len, 0, now);
    }
    // Tokens a bucket level holds on this CPU and behind it: leases move
    // tokens between the two, spending changes the sum.
    uint64_t held(Bucket b) const { return cpu[b].tokens_nano + shared[b].tokens_nano; }
    // How far source n is ahead of its schedule (0: no entry, or a full bucket).
    uint64_t debt(uint64_t now, uint32_t source_n = 0) {
        sluice_source_ref ref = source_ref(source_n);
        sluice_source_look look{};
        sluice_source_find(&ref, now, &look);
        return look.found ? look.debt : 0;
    }
};

sluice_source_limit source_limit(uint64_t rate, uint64_t burst, Unit unit = Unit::packets) {
    auto compiled = compile_source_limit({rate, burst, unit}, 1518, "test");
    EXPECT_TRUE(compiled.ok()) << (compiled.ok() ? "" : compiled.error().message);
    return compiled.ok() ? compiled.value() : sluice_source_limit{};
}

// 1 packet/s everywhere, so one packet is 1 s of a source's schedule.
Levels four_levels(uint64_t source_burst, uint64_t new_burst, uint64_t class_burst, uint64_t global_burst,
                   Accuracy accuracy) {
    Levels l;
    l.source = source_limit(1, source_burst);
    l.limit[kNewSources] = make_level(1, new_burst, Unit::packets, accuracy);
    l.limit[kAggregate] = make_level(1, class_burst, Unit::packets, accuracy);
    l.limit[kGlobal] = make_level(1, global_burst, Unit::packets, accuracy);
    return l;
}

class Composition : public ::testing::TestWithParam<Accuracy> {};

TEST_P(Composition, AdmittedPacketSpendsAtEveryLevel) {
    Levels l = four_levels(5, 5, 5, 5, GetParam());
    ASSERT_EQ(l.offer(64, kT0).verdict, SLUICE_VERDICT_PASS);
    EXPECT_EQ(l.debt(kT0), kSecond);
    for (Bucket b : {kNewSources, kAggregate, kGlobal}) EXPECT_EQ(l.held(b), 4 * SLUICE_NANO) << b;
    // Known now: the next packet does not pay the new-source budget.
    ASSERT_EQ(l.offer(64, kT0).verdict, SLUICE_VERDICT_PASS);
    EXPECT_EQ(l.held(kNewSources), 4 * SLUICE_NANO);
    EXPECT_EQ(l.held(kAggregate), 3 * SLUICE_NANO);
}

TEST_P(Composition, EachLevelRefusesAndIsReported) {
    struct Case {
        uint64_t src, fresh, cls, glb;
        bool new_sources;  // three new sources rather than one three times
        uint8_t reason, level;
    } cases[] = {
        {2, 9, 9, 9, false, SLUICE_REASON_SOURCE, SLUICE_LEVEL_SOURCE},
        {9, 2, 9, 9, true, SLUICE_REASON_NEW_SOURCE, SLUICE_LEVEL_NEW_SOURCE},
        {9, 9, 2, 9, false, SLUICE_REASON_CLASS, SLUICE_LEVEL_CLASS},
        {9, 9, 9, 2, false, SLUICE_REASON_GLOBAL, SLUICE_LEVEL_GLOBAL},
    };
    for (const Case& c : cases) {
        Levels l = four_levels(c.src, c.fresh, c.cls, c.glb, GetParam());
        ASSERT_EQ(l.offer(64, kT0, 0).verdict, SLUICE_VERDICT_PASS);
        ASSERT_EQ(l.offer(64, kT0, c.new_sources ? 1 : 0).verdict, SLUICE_VERDICT_PASS);
        const sluice_decision d = l.offer(64, kT0, c.new_sources ? 2 : 0);
        EXPECT_EQ(d.verdict, SLUICE_VERDICT_DROP);
        EXPECT_EQ(d.reason, c.reason);
        EXPECT_EQ(d.level, c.level);
    }
}

TEST_P(Composition, RefusedPacketSpendsNothingAnywhere) {
    // The global ceiling is the tightest: once it refuses, the source and
    // class levels must keep every token they had.
    Levels l = four_levels(100, 100, 100, 3, GetParam());
    for (int i = 0; i < 3; i++) ASSERT_EQ(l.offer(64, kT0).verdict, SLUICE_VERDICT_PASS);
    const uint64_t debt_before = l.debt(kT0), class_before = l.held(kAggregate);
    for (int i = 0; i < 1000; i++) {
        const sluice_decision d = l.offer(64, kT0);
        ASSERT_EQ(d.reason, SLUICE_REASON_GLOBAL);
    }
    EXPECT_EQ(l.debt(kT0), debt_before);
    EXPECT_EQ(l.held(kAggregate), class_before);
    EXPECT_EQ(l.held(kGlobal), 0u);
    // A refused new source spends nothing at its budget either.
    const uint64_t new_before = l.held(kNewSources);
    EXPECT_EQ(l.offer(64, kT0, 1).reason, SLUICE_REASON_GLOBAL);
    EXPECT_EQ(l.held(kNewSources), new_before);
    EXPECT_EQ(l.debt(kT0, 1), 0u);
}

TEST_P(Composition, SourceRefusalLeavesLaterLevelsUntouched) {
    Levels l = four_levels(1, 10, 10, 10, GetParam());
    ASSERT_EQ(l.offer(64, kT0).verdict, SLUICE_VERDICT_PASS);
    const Levels before = l;
    ASSERT_EQ(l.offer(64, kT0 + 5).reason, SLUICE_REASON_SOURCE);
    for (Bucket b : {kNewSources, kAggregate, kGlobal}) {
        EXPECT_EQ(std::memcmp(&l.cpu[b], &before.cpu[b], sizeof(sluice_cpu_bucket)), 0);
        EXPECT_EQ(std::memcmp(&l.shared[b], &before.shared[b], sizeof(sluice_shared_bucket)), 0);
    }
    EXPECT_EQ(std::memcmp(l.table.data(), before.table.data(), l.table.size() * sizeof(sluice_source_set)), 0);
}

TEST_P(Composition, RandomisedRefusalsNeverSpend) {
    // Many sources share one class and one ceiling; whatever refuses, the
    // sum of tokens spent at each level equals what was admitted.
    const Accuracy accuracy = GetParam();
    Levels l(8);
    l.source = source_limit(2, 4);
    l.limit[kAggregate] = make_level(1, 50, Unit::packets, accuracy);
    l.limit[kGlobal] = make_level(1, 30, Unit::packets, accuracy);
    uint64_t admitted = 0;  // the clock is frozen: nothing refills, every token is accounted
    const uint64_t class_start = 50 * SLUICE_NANO, global_start = 30 * SLUICE_NANO;
    for (int i = 0; i < 400; i++) admitted += l.offer(64, kT0, i % 20).verdict == SLUICE_VERDICT_PASS;
    EXPECT_EQ(admitted, 30u);
    EXPECT_EQ(class_start - l.held(kAggregate), admitted * SLUICE_NANO);
    EXPECT_EQ(global_start - l.held(kGlobal), admitted * SLUICE_NANO);
    uint64_t charged_ns = 0;
    for (uint32_t s = 0; s < 20; s++) charged_ns += l.debt(kT0, s);
    EXPECT_EQ(charged_ns, admitted * l.source.current.interval_ns);
}

INSTANTIATE_TEST_SUITE_P(Accuracy, Composition, ::testing::Values(Accuracy::split, Accuracy::lease),
                         [](const auto& info) { return info.param == Accuracy::split ? "split" : "lease"; });

TEST(Decide, DisabledOrMissingLevelsAdmit) {
    sluice_level_limit off{};
    sluice_cpu_bucket cpu{};
    sluice_source_limit no_source{};
    sluice_levels l{};
    l.source.limit = &no_source;
    l.aggregate = {&off, &cpu, nullptr, nullptr};
    for (int i = 0; i < 100; i++) EXPECT_EQ(sluice_decide(&l, 1500, 0, kT0).reason, SLUICE_REASON_ADMITTED);
}

TEST(Decide, EachLevelChargesInItsOwnUnit) {
    Levels l;
    l.source = source_limit(1, 100, Unit::packets);
    l.limit[kAggregate] = make_level(1, 100, Unit::packets);
    l.limit[kGlobal] = make_level(1, 10'000, Unit::bytes);  // 6 frames of 1500
    int admitted = 0;
    for (int i = 0; i < 10; i++) admitted += l.offer(1500, kT0).verdict == SLUICE_VERDICT_PASS;
    EXPECT_EQ(admitted, 6);
    EXPECT_EQ(l.held(kGlobal), (10'000 - 6 * 1500) * SLUICE_NANO);
    EXPECT_EQ(l.debt(kT0), 6 * kSecond);
}

// The table-full decision, in a table of two sets filled by 16 sources.
class TableFull : public ::testing::TestWithParam<uint8_t> {};

TEST_P(TableFull, SeventeenthSourceFollowsTheClassChoice) {
    Levels l;
    l.source = source_limit(1, 3);
    l.on_table_full = GetParam();
    for (uint32_t s = 0; s < 2 * SLUICE_SET_WAYS; s++) ASSERT_EQ(l.offer(64, kT0, s).verdict, SLUICE_VERDICT_PASS);
    ASSERT_EQ(l.offer(64, kT0, 0).verdict, SLUICE_VERDICT_PASS);  // source 0 deepest in debt
    const sluice_decision d = l.offer(64, kT0, 99);
    switch (GetParam()) {
        case SLUICE_TABLE_FULL_EVICT:
            EXPECT_EQ(d.verdict, SLUICE_VERDICT_PASS);
            EXPECT_EQ(d.table, SLUICE_TABLE_EVICTED);
            EXPECT_EQ(l.debt(kT0, 0), 2 * kSecond);  // never the deepest
            break;
        case SLUICE_TABLE_FULL_OPEN:
            EXPECT_EQ(d.verdict, SLUICE_VERDICT_PASS);
            EXPECT_EQ(d.reason, SLUICE_REASON_TABLE_FULL);
            EXPECT_EQ(d.table, SLUICE_TABLE_FULL);
            break;
        default:
            EXPECT_EQ(d.verdict, SLUICE_VERDICT_DROP);
            EXPECT_EQ(d.reason, SLUICE_REASON_TABLE_FULL);
            EXPECT_EQ(d.table, SLUICE_TABLE_FULL);
    }
}

INSTANTIATE_TEST_SUITE_P(OnTableFull, TableFull,
                         ::testing::Values(SLUICE_TABLE_FULL_EVICT, SLUICE_TABLE_FULL_OPEN, SLUICE_TABLE_FULL_CLOSED));

TEST(Decide, UnparsedFramesGetTheConfiguredVerdict) {
    sluice_policy_header policy{};
    policy.non_ip_verdict = SLUICE_VERDICT_PASS;
    policy.malformed_verdict = SLUICE_VERDICT_DROP;
    sluice_decision d = sluice_decide_unparsed(&policy, SLUICE_PARSE_NON_IP);
    EXPECT_EQ(d.verdict, SLUICE_VERDICT_PASS);
    EXPECT_EQ(d.reason, SLUICE_REASON_NON_IP);
    for (uint8_t status = SLUICE_PARSE_NON_IP + 1; status < SLUICE_PARSE_STATUS_COUNT; status++) {
        d = sluice_decide_unparsed(&policy, status);
        EXPECT_EQ(d.verdict, SLUICE_VERDICT_DROP) << parse_status_label(status);
        EXPECT_EQ(d.reason, SLUICE_REASON_MALFORMED) << parse_status_label(status);
    }
}

TEST(Decide, ClassActionsBypassBuckets) {
    sluice_class_entry cls{};
    sluice_decision d{};
    cls.action = SLUICE_ACTION_PASS;
    ASSERT_TRUE(sluice_decide_action(&cls, &d));
    EXPECT_EQ(d.verdict, SLUICE_VERDICT_PASS);
    EXPECT_EQ(d.reason, SLUICE_REASON_ALLOWED);
    cls.action = SLUICE_ACTION_DROP;
    ASSERT_TRUE(sluice_decide_action(&cls, &d));
    EXPECT_EQ(d.verdict, SLUICE_VERDICT_DROP);
    EXPECT_EQ(d.reason, SLUICE_REASON_DENY);
    cls.action = SLUICE_ACTION_LIMIT;
    EXPECT_FALSE(sluice_decide_action(&cls, &d));
}

sluice_packet packet_from(const char* address) {
    sluice_packet pkt{};
    if (std::strchr(address, ':')) {
        pkt.family = SLUICE_FAMILY_IPV6;
        EXPECT_EQ(inet_pton(AF_INET6, address, pkt.src), 1);
    } else {
        pkt.family = SLUICE_FAMILY_IPV4;
        EXPECT_EQ(inet_pton(AF_INET, address, pkt.src), 1);
    }
    return pkt;
}

sluice_source_key key_for(const char* address, uint8_t prefix_v4, uint8_t prefix_v6) {
    sluice_class_entry cls{};
    cls.class_id = 7;
    cls.prefix_v4 = prefix_v4;
    cls.prefix_v6 = prefix_v6;
    const sluice_packet pkt = packet_from(address);
    sluice_source_key key;
    std::memset(&key, 0xa5, sizeof(key));  // padding must come out zero
    sluice_source_key_make(&key, &pkt, &cls);
    return key;
}

bool same_key(const sluice_source_key& a, const sluice_source_key& b) { return std::memcmp(&a, &b, sizeof(a)) == 0; }

TEST(SourceKey, Ipv6SlashSixtyFourSharesOneKey) {
    EXPECT_TRUE(same_key(key_for("2001:db8:1:2::1", 32, 64), key_for("2001:db8:1:2:ffff:1:2:3", 32, 64)));
    EXPECT_FALSE(same_key(key_for("2001:db8:1:2::1", 32, 64), key_for("2001:db8:1:3::1", 32, 64)));
    EXPECT_FALSE(same_key(key_for("2001:db8:1:2::1", 32, 128), key_for("2001:db8:1:2::2", 32, 128)));
}

TEST(SourceKey, Ipv4KeepsItsPrefixAndZeroesTheRest) {
    const sluice_source_key k = key_for("192.0.2.77", 24, 64);
    const sluice_packet expect = packet_from("192.0.2.0");
    EXPECT_EQ(k.class_id, 7u);
    EXPECT_EQ(k.family, SLUICE_FAMILY_IPV4);
    EXPECT_EQ(std::memcmp(k.addr, expect.src, 16), 0);
    EXPECT_EQ(k._pad[0] | k._pad[1] | k._pad[2], 0);
    EXPECT_FALSE(same_key(key_for("192.0.2.77", 32, 64), key_for("192.0.2.78", 32, 64)));
}

TEST(SourceKey, OddPrefixLengthsCutInsideAByte) {
    EXPECT_TRUE(same_key(key_for("2001:db8::", 32, 63), key_for("2001:db8:0:1::", 32, 63)));
    EXPECT_FALSE(same_key(key_for("2001:db8::", 32, 63), key_for("2001:db8:0:2::", 32, 63)));
    EXPECT_TRUE(same_key(key_for("10.0.0.1", 0, 64), key_for("203.0.113.9", 0, 64)));
    EXPECT_TRUE(same_key(key_for("10.0.0.1", 31, 64), key_for("10.0.0.0", 31, 64)));
}

TEST(Abi, CounterIndexCoversEveryClassVerdictReasonOnce) {
    std::vector<int> seen(SLUICE_COUNTER_SLOTS, 0);
    for (uint32_t c = 0; c < SLUICE_MAX_CLASSES; c++)
        for (uint32_t v = 0; v < SLUICE_VERDICT_COUNT; v++)
            for (uint32_t r = 0; r < SLUICE_REASON_COUNT; r++) seen.at(sluice_counter_index(c, v, r))++;
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<long>(SLUICE_COUNTER_SLOTS));
}

TEST(Abi, EveryVerdictAndReasonHasADistinctName) {
    std::set<std::string> names;
    for (uint32_t r = 0; r < SLUICE_REASON_COUNT; r++) names.insert(std::string(reason_label(r)));
    EXPECT_EQ(names.size(), static_cast<size_t>(SLUICE_REASON_COUNT));
    EXPECT_EQ(names.count("unknown"), 0u);
    EXPECT_EQ(verdict_label(SLUICE_VERDICT_PASS), "pass");
    EXPECT_EQ(verdict_label(SLUICE_VERDICT_DROP), "drop");
    EXPECT_EQ(verdict_label(SLUICE_VERDICT_WOULD_DROP), "would_drop");
}

}  // namespace
}  // namespace sluice::test::decide_test
