// SPDX-License-Identifier: Apache-2.0
// The fleet level of sluice_decide (sluice/fleet.h): checked last, it admits
// only what the class's credit holds, is taken nothing by a frame an earlier
// level refuses, gets its credit back from a frame a later step refuses, and
// never lets racing CPUs take more than was granted.

// Every fleet take and give-back of sluice_decide goes through here (decide.h's
// SLUICE_FLEET_LEVEL), so a test can act as another CPU between a frame's
// fleet take and the charge to its source that follows.
struct sluice_fleet_ref;
int sluice_test_fleet_level(const sluice_fleet_ref* ref, unsigned frame_len, unsigned char tcp_syn, int refund);
#define SLUICE_FLEET_LEVEL(ref, frame_len, tcp_syn, refund) \
    sluice_test_fleet_level((ref), (frame_len), (tcp_syn), (refund))

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include "core_support.h"

namespace sluice::test::fleet_decide_test {
namespace {

// Run once, right after the next fleet take that succeeds.
std::function<void()> after_fleet_take;
// Give-backs the fleet level saw.
uint64_t fleet_refunds = 0;

}  // namespace
}  // namespace sluice::test::fleet_decide_test

int sluice_test_fleet_level(const sluice_fleet_ref* ref, unsigned frame_len, unsigned char tcp_syn, int refund) {
    using namespace sluice::test::fleet_decide_test;
    const int admitted = sluice_fleet_level(ref->credit, ref->unit, frame_len, tcp_syn, refund);
    if (refund && ref->credit) fleet_refunds++;
    if (!refund && admitted && ref->credit && after_fleet_take) {
        const std::function<void()> hook = std::move(after_fleet_take);
        after_fleet_take = nullptr;
        hook();
    }
    return admitted;
}

namespace sluice::test::fleet_decide_test {
namespace {

enum Bucket { kAggregate, kGlobal, kBuckets };

// One CPU's view of a class with a fleet quota: a per-source level (a table
// of two sets), the class aggregate and global ceiling, and the class's credit.
struct FleetLevels {
    std::vector<sluice_source_set> table = std::vector<sluice_source_set>(2);
    sluice_source_limit source{};
    sluice_level_limit limit[kBuckets]{};
    sluice_window_limit window{};  // the aggregate's, when it counts by window
    sluice_cpu_bucket cpu[kBuckets]{};
    sluice_shared_bucket shared[kBuckets]{};
    sluice_fleet_credit credit{};
    uint8_t fleet_unit = SLUICE_UNIT_PACKETS;

    sluice_levels levels(uint32_t source_n, bool fleet) {
        sluice_levels l{};
        sluice_source_ref& ref = l.source;
        ref.limit = &source;
        ref.home_index = source_n % table.size();
        ref.second_index = (source_n + 1) % table.size();
        ref.home = &table[ref.home_index];
        ref.second = &table[ref.second_index];
        ref.tag = static_cast<uint64_t>(source_n + 1) << SLUICE_ENTRY_TAG_SHIFT;
        ref.on_table_full = SLUICE_TABLE_FULL_EVICT;
        l.aggregate = {&limit[kAggregate], &cpu[kAggregate], &shared[kAggregate], &window};
        l.global = {&limit[kGlobal], &cpu[kGlobal], &shared[kGlobal], nullptr};
        l.fleet = {fleet ? &credit : nullptr, fleet_unit};
        return l;
    }
    sluice_decision offer(uint32_t frame_len = 64, uint32_t source_n = 0, uint8_t tcp_syn = 0, bool fleet = true) {
        const sluice_levels l = levels(source_n, fleet);
        return sluice_decide(&l, frame_len, tcp_syn, kT0);
    }
    // One letter per frame: P admitted, D refused.
    std::string letters(int n, uint32_t frame_len = 64, uint32_t source_n = 0) {
        std::string out;
        for (int i = 0; i < n; i++) out += offer(frame_len, source_n).verdict == SLUICE_VERDICT_PASS ? 'P' : 'D';
        return out;
    }
};

sluice_source_limit source_limit(uint64_t rate, uint64_t burst) {
    auto compiled = compile_source_limit({rate, burst, Unit::packets}, 1518, "test");
    EXPECT_TRUE(compiled.ok()) << (compiled.ok() ? "" : compiled.error().message);
    return compiled.ok() ? compiled.value() : sluice_source_limit{};
}

TEST(FleetDecide, AdmitsOnlyWhatTheCreditHolds) {
    FleetLevels l;
    EXPECT_EQ(l.letters(2), "DD");  // nothing granted yet
    sluice_fleet_grant(&l.credit, 3);
    EXPECT_EQ(l.letters(5), "PPPDD");
    const sluice_decision d = l.offer();
    EXPECT_EQ(d.verdict, SLUICE_VERDICT_DROP);
    EXPECT_EQ(d.reason, SLUICE_REASON_FLEET);
    EXPECT_EQ(d.level, SLUICE_LEVEL_FLEET);
    EXPECT_EQ(l.credit.taken, 3u);
    EXPECT_EQ(sluice_fleet_available(&l.credit), 0);
    // More credit admits more, exactly as much.
    sluice_fleet_grant(&l.credit, 2);
    EXPECT_EQ(l.letters(3), "PPD");
    EXPECT_EQ(l.credit.granted, 5u);
    EXPECT_EQ(l.credit.taken, 5u);
    // Credit revoked below what was taken: nothing until granted again.
    sluice_fleet_grant(&l.credit, -1);
    EXPECT_EQ(sluice_fleet_available(&l.credit), -1);
    EXPECT_EQ(l.letters(1), "D");
    // A class without a fleet quota never looks at the credit.
    EXPECT_EQ(l.offer(64, 0, 0, false).verdict, SLUICE_VERDICT_PASS);
    EXPECT_EQ(l.credit.taken, 5u);
}

TEST(FleetDecide, EachUnitCostsWhatItCounts) {
    FleetLevels bytes;
    bytes.fleet_unit = SLUICE_UNIT_BYTES;
    sluice_fleet_grant(&bytes.credit, 3500);
    EXPECT_EQ(bytes.letters(3, 1500), "PPD");  // 500 left: not enough for 1500
    EXPECT_EQ(bytes.credit.taken, 3000u);
    EXPECT_EQ(bytes.letters(1, 501), "D");
    EXPECT_EQ(bytes.letters(2, 500), "PD");
    EXPECT_EQ(bytes.credit.taken, 3500u);

    // tcp_syn: a SYN costs one, anything else nothing, even without credit.
    FleetLevels syn;
    syn.fleet_unit = SLUICE_UNIT_TCP_SYN;
    sluice_fleet_grant(&syn.credit, 1);
    EXPECT_EQ(syn.offer(64, 0, 1).verdict, SLUICE_VERDICT_PASS);
    EXPECT_EQ(syn.offer(64, 0, 1).reason, SLUICE_REASON_FLEET);
    for (int i = 0; i < 5; i++) EXPECT_EQ(syn.offer(64, 0, 0).verdict, SLUICE_VERDICT_PASS);
    EXPECT_EQ(syn.credit.taken, 1u);
}

TEST(FleetDecide, AFrameAnEarlierLevelRefusesTakesNoCredit) {
    struct Case {
        uint64_t src, cls, glb;
        uint8_t reason, level;
    } cases[] = {
        {2, 100, 100, SLUICE_REASON_SOURCE, SLUICE_LEVEL_SOURCE},
        {100, 2, 100, SLUICE_REASON_CLASS, SLUICE_LEVEL_CLASS},
        {100, 100, 2, SLUICE_REASON_GLOBAL, SLUICE_LEVEL_GLOBAL},
    };
    for (const Case& c : cases) {
        FleetLevels l;
        l.source = source_limit(1, c.src);
        l.limit[kAggregate] = make_level(1, c.cls);
        l.limit[kGlobal] = make_level(1, c.glb);
        sluice_fleet_grant(&l.credit, 100);
        EXPECT_EQ(l.letters(2), "PP");
        for (int i = 0; i < 10; i++) {
            const sluice_decision d = l.offer();
            EXPECT_EQ(d.reason, c.reason);
            EXPECT_EQ(d.level, c.level);
        }
        EXPECT_EQ(l.credit.taken, 2u) << "refused at level " << int{c.level};
    }
}

TEST(FleetDecide, AWindowAggregateGetsItsCountBackWhenTheFleetRefuses) {
    FleetLevels l;
    auto compiled = compile_window_level(window_settings(Algorithm::fixed_window, 5, 100 * kSecond), "test");
    ASSERT_TRUE(compiled.ok()) << compiled.error().message;
    l.limit[kAggregate] = compiled.value().level;
    l.window = compiled.value().window;
    sluice_fleet_grant(&l.credit, 2);
    EXPECT_EQ(l.letters(4), "PPDD");  // the fleet refuses: the window counted 2, not 4
    sluice_fleet_grant(&l.credit, 10);
    EXPECT_EQ(l.letters(4), "PPPD");  // the window's 5 in all
    EXPECT_EQ(l.offer().reason, SLUICE_REASON_CLASS);
    EXPECT_EQ(l.credit.taken, 5u);
}

TEST(FleetDecide, AFrameRefusedAfterItsFleetTakeGivesTheCreditBack) {
    // 3 packets per source. The first frame makes the source known; then,
    // between the second frame's fleet take and its charge to the source,
    // "another CPU" spends the source's last two packets (on a class without
    // a fleet quota, so the credit is this frame's alone). The charge then
    // finds the entry changed, checks again and refuses: the credit the frame
    // took goes back.
    FleetLevels l;
    l.source = source_limit(1, 3);
    sluice_fleet_grant(&l.credit, 10);
    ASSERT_EQ(l.letters(1), "P");
    fleet_refunds = 0;
    after_fleet_take = [&l] {
        EXPECT_EQ(l.credit.taken, 2u);  // taken for the frame being decided
        for (int i = 0; i < 2; i++) EXPECT_EQ(l.offer(64, 0, 0, false).verdict, SLUICE_VERDICT_PASS);
    };
    const sluice_decision d = l.offer();
    EXPECT_FALSE(after_fleet_take);  // it ran
    EXPECT_EQ(d.verdict, SLUICE_VERDICT_DROP);
    EXPECT_EQ(d.reason, SLUICE_REASON_SOURCE);
    EXPECT_EQ(fleet_refunds, 1u);
    EXPECT_EQ(l.credit.taken, 1u);
    EXPECT_EQ(sluice_fleet_available(&l.credit), 9);
}

TEST(FleetDecide, RacingTakesNeverAdmitMoreThanWasGranted) {
    // Two threads hammer one credit line well past what it holds; costs of
    // 1..3 units make the last units a race for different amounts.
    constexpr uint64_t kGranted = 200'000;
    for (bool mixed_costs : {false, true}) {
        alignas(64) sluice_fleet_credit credit{};
        sluice_fleet_grant(&credit, kGranted);
        std::atomic<bool> go{false};
        uint64_t units[2] = {0, 0}, admitted[2] = {0, 0};
        std::vector<std::thread> threads;
        for (int t = 0; t < 2; t++)
            threads.emplace_back([&, t] {
                while (!go.load()) {
                }
                for (uint64_t i = 0; i < kGranted; i++) {
                    const uint64_t cost = mixed_costs ? 1 + (i + t) % 3 : 1;
                    if (sluice_fleet_take(&credit, cost)) {
                        units[t] += cost;
                        admitted[t]++;
                    }
                }
            });
        go = true;
        for (auto& thread : threads) thread.join();
        const uint64_t total = units[0] + units[1];
        EXPECT_LE(total, kGranted);
        EXPECT_EQ(credit.taken, total);  // a lost race took its units back
        // Twice as many attempts as units: every unit went, or (costs of 1..3)
        // all but at most 2, too few for the attempts still to come.
        if (mixed_costs) {
            EXPECT_GE(total, kGranted - 2);
        } else {
            EXPECT_EQ(total, kGranted);
        }
        EXPECT_GT(admitted[0] + admitted[1], 0u);
    }
}

}  // namespace
}  // namespace sluice::test::fleet_decide_test
