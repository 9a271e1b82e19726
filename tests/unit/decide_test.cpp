// SPDX-License-Identifier: Apache-2.0
// Composition of source, class and global levels: check-then-commit, the
// refusing level, decisions that need no bucket, and source keys.
#include <arpa/inet.h>

#include <cstring>
#include <set>
#include <string>

#include "core_support.h"
#include "labels.h"

namespace sluice::test {
namespace {

// One CPU's view of the three levels, in either accuracy mode.
struct Levels {
    sluice_level_limit limit[SLUICE_LEVEL_COUNT];
    sluice_cpu_bucket cpu[SLUICE_LEVEL_COUNT]{};
    sluice_shared_bucket shared[SLUICE_LEVEL_COUNT]{};

    sluice_decision offer(uint32_t frame_len, uint64_t now) {
        sluice_level_ref refs[SLUICE_LEVEL_COUNT];
        for (int i = 0; i < SLUICE_LEVEL_COUNT; i++) refs[i] = {&limit[i], &cpu[i], &shared[i]};
        return sluice_decide(refs, frame_len, now);
    }
    // Tokens a level holds on this CPU and behind it: leases move tokens
    // between the two, spending changes the sum.
    uint64_t held(int level) const { return cpu[level].tokens_nano + shared[level].tokens_nano; }
};

Levels three_levels(uint64_t source_burst, uint64_t class_burst, uint64_t global_burst, Accuracy accuracy) {
    Levels l;
    l.limit[SLUICE_LEVEL_SOURCE] = make_level(1, source_burst, Unit::packets, accuracy);
    l.limit[SLUICE_LEVEL_CLASS] = make_level(1, class_burst, Unit::packets, accuracy);
    l.limit[SLUICE_LEVEL_GLOBAL] = make_level(1, global_burst, Unit::packets, accuracy);
    return l;
}

class Composition : public ::testing::TestWithParam<Accuracy> {};

TEST_P(Composition, AdmittedPacketSpendsAtEveryLevel) {
    Levels l = three_levels(5, 5, 5, GetParam());
    ASSERT_EQ(l.offer(64, kT0).verdict, SLUICE_VERDICT_PASS);
    for (int level = 0; level < SLUICE_LEVEL_COUNT; level++) EXPECT_EQ(l.held(level), 4 * SLUICE_NANO) << level;
}

TEST_P(Composition, EachLevelRefusesAndIsReported) {
    struct Case {
        uint64_t src, cls, glb;
        uint8_t reason, level;
    } cases[] = {
        {2, 9, 9, SLUICE_REASON_SOURCE, SLUICE_LEVEL_SOURCE},
        {9, 2, 9, SLUICE_REASON_CLASS, SLUICE_LEVEL_CLASS},
        {9, 9, 2, SLUICE_REASON_GLOBAL, SLUICE_LEVEL_GLOBAL},
    };
    for (const Case& c : cases) {
        Levels l = three_levels(c.src, c.cls, c.glb, GetParam());
        ASSERT_EQ(l.offer(64, kT0).verdict, SLUICE_VERDICT_PASS);
        ASSERT_EQ(l.offer(64, kT0).verdict, SLUICE_VERDICT_PASS);
        const sluice_decision d = l.offer(64, kT0);
        EXPECT_EQ(d.verdict, SLUICE_VERDICT_DROP);
        EXPECT_EQ(d.reason, c.reason);
        EXPECT_EQ(d.level, c.level);
    }
}

TEST_P(Composition, RefusedPacketSpendsNothingAnywhere) {
    // The global ceiling is the tightest: once it refuses, the source and
    // class levels must keep every token they had.
    Levels l = three_levels(100, 100, 3, GetParam());
    for (int i = 0; i < 3; i++) ASSERT_EQ(l.offer(64, kT0).verdict, SLUICE_VERDICT_PASS);
    const uint64_t source_before = l.held(SLUICE_LEVEL_SOURCE), class_before = l.held(SLUICE_LEVEL_CLASS);
    for (int i = 0; i < 1000; i++) {
        const sluice_decision d = l.offer(64, kT0);
        ASSERT_EQ(d.reason, SLUICE_REASON_GLOBAL);
    }
    EXPECT_EQ(l.held(SLUICE_LEVEL_SOURCE), source_before);
    EXPECT_EQ(l.held(SLUICE_LEVEL_CLASS), class_before);
    EXPECT_EQ(l.held(SLUICE_LEVEL_GLOBAL), 0u);
}

TEST_P(Composition, SourceRefusalLeavesLaterLevelsUntouched) {
    Levels l = three_levels(1, 10, 10, GetParam());
    ASSERT_EQ(l.offer(64, kT0).verdict, SLUICE_VERDICT_PASS);
    const Levels before = l;
    ASSERT_EQ(l.offer(64, kT0 + 5).reason, SLUICE_REASON_SOURCE);
    for (int level : {SLUICE_LEVEL_CLASS, SLUICE_LEVEL_GLOBAL}) {
        EXPECT_EQ(std::memcmp(&l.cpu[level], &before.cpu[level], sizeof(sluice_cpu_bucket)), 0);
        EXPECT_EQ(std::memcmp(&l.shared[level], &before.shared[level], sizeof(sluice_shared_bucket)), 0);
    }
}

TEST_P(Composition, RandomisedRefusalsNeverSpend) {
    // Many sources share one class and one ceiling; whatever refuses, the
    // sum of tokens spent at each level equals what was admitted.
    const Accuracy accuracy = GetParam();
    Levels shared_levels = three_levels(1, 50, 30, accuracy);
    std::vector<sluice_cpu_bucket> src_cpu(20);
    std::vector<sluice_shared_bucket> src_shared(20);
    sluice_level_limit src_limit = make_level(2, 4, Unit::packets, accuracy);
    uint64_t admitted = 0;  // the clock is frozen: nothing refills, every token is accounted
    const uint64_t class_start = 50 * SLUICE_NANO, global_start = 30 * SLUICE_NANO;
    for (int i = 0; i < 400; i++) {
        const int s = i % 20;
        sluice_level_ref refs[SLUICE_LEVEL_COUNT] = {
            {&src_limit, &src_cpu[s], &src_shared[s]},
            {&shared_levels.limit[1], &shared_levels.cpu[1], &shared_levels.shared[1]},
            {&shared_levels.limit[2], &shared_levels.cpu[2], &shared_levels.shared[2]},
        };
        admitted += sluice_decide(refs, 64, kT0).verdict == SLUICE_VERDICT_PASS;
    }
    EXPECT_EQ(admitted, 30u);
    EXPECT_EQ(class_start - shared_levels.held(SLUICE_LEVEL_CLASS), admitted * SLUICE_NANO);
    EXPECT_EQ(global_start - shared_levels.held(SLUICE_LEVEL_GLOBAL), admitted * SLUICE_NANO);
}

INSTANTIATE_TEST_SUITE_P(Accuracy, Composition, ::testing::Values(Accuracy::split, Accuracy::lease),
                         [](const auto& info) { return info.param == Accuracy::split ? "split" : "lease"; });

TEST(Decide, DisabledOrMissingLevelsAdmit) {
    sluice_level_limit off{};
    sluice_cpu_bucket cpu{};
    sluice_level_ref refs[SLUICE_LEVEL_COUNT] = {{nullptr, nullptr, nullptr}, {&off, &cpu, nullptr}, {}};
    for (int i = 0; i < 100; i++) EXPECT_EQ(sluice_decide(refs, 1500, kT0).reason, SLUICE_REASON_ADMITTED);
}

TEST(Decide, EachLevelChargesInItsOwnUnit) {
    Levels l;
    l.limit[SLUICE_LEVEL_SOURCE] = make_level(1, 100, Unit::packets);
    l.limit[SLUICE_LEVEL_CLASS] = make_level(1, 100, Unit::packets);
    l.limit[SLUICE_LEVEL_GLOBAL] = make_level(1, 10'000, Unit::bytes);  // 6 frames of 1500
    int admitted = 0;
    for (int i = 0; i < 10; i++) admitted += l.offer(1500, kT0).verdict == SLUICE_VERDICT_PASS;
    EXPECT_EQ(admitted, 6);
    EXPECT_EQ(l.held(SLUICE_LEVEL_GLOBAL), (10'000 - 6 * 1500) * SLUICE_NANO);
    EXPECT_EQ(l.held(SLUICE_LEVEL_SOURCE), 94 * SLUICE_NANO);
}

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

TEST(Decide, TableFullFollowsTheClassChoice) {
    sluice_class_entry cls{};
    cls.table_full_verdict = SLUICE_VERDICT_PASS;  // on_table_full = "open"
    EXPECT_EQ(sluice_decide_table_full(&cls).verdict, SLUICE_VERDICT_PASS);
    cls.table_full_verdict = SLUICE_VERDICT_DROP;  // "closed"
    const sluice_decision d = sluice_decide_table_full(&cls);
    EXPECT_EQ(d.verdict, SLUICE_VERDICT_DROP);
    EXPECT_EQ(d.reason, SLUICE_REASON_TABLE_FULL);
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
}

}  // namespace
}  // namespace sluice::test
