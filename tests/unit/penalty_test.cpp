// SPDX-License-Identifier: Apache-2.0
// The penalty box on a simulated clock: the threshold exact at its edge, a
// penalty that lasts exactly its `for`, policy changes while one is in
// force, and a clock that goes backwards. One source of a class, decided by
// the core (sluice_decide, then sluice_penalty_after) over a real table.
#include <cstring>

#include "compiled_policy.h"
#include "core_support.h"

namespace sluice::test::penalty_test {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kUs = 1'000;

// One class with a per-source limit and a penalty, its source table, and
// one source of it.
struct Box {
    std::vector<sluice_source_set> table = std::vector<sluice_source_set>(64);
    sluice_hash_key hash_key{{1, 2, 3, 4, 5, 6}};
    sluice_class_entry cls{};
    sluice_source_key key{};

    Box(uint64_t rate, uint64_t burst, uint64_t over, uint64_t within_ns, uint64_t for_ns) {
        cls.class_id = 1;
        set(rate, burst, over, within_ns, for_ns);
        key.class_id = 1;
        key.family = SLUICE_FAMILY_IPV4;
        key.addr[0] = 192;
        key.addr[3] = 7;
    }

    // The class as a new version states it, carried over from the running
    // one as the control plane does (a changed limit bumps its generation).
    void set(uint64_t rate, uint64_t burst, uint64_t over, uint64_t within_ns, uint64_t for_ns) {
        CompiledPolicy next;
        sluice_class_entry entry{};
        entry.class_id = cls.class_id;
        auto source = compile_source_limit({rate, burst, Unit::packets}, 1518, "test");
        ASSERT_TRUE(source.ok()) << source.error().message;
        entry.per_source = source.value();
        if (for_ns != 0) {
            auto penalty = compile_penalty(entry.per_source, over, within_ns, for_ns, "test");
            ASSERT_TRUE(penalty.ok()) << penalty.error().message;
            entry.penalty = penalty.value();
        }
        next.classes.push_back(entry);
        if (cls.per_source.enabled) carry_previous_limits({cls}, next);
        cls = next.classes[0];
    }

    sluice_decision offer(uint64_t now) {
        sluice_levels l{};
        const uint32_t mask = static_cast<uint32_t>(table.size() - 1);
        sluice_source_ref_make(&l.source, &cls, &key, &hash_key, mask);
        l.source.home = &table[l.source.home_index];
        l.source.second = &table[l.source.second_index];
        l.penalty = {&cls.penalty, &key, &hash_key, table.data(), mask};
        return sluice_penalty_after(&l, sluice_decide(&l, 64, 0, now), 64, 0, now);
    }
};

struct FloodResult {
    uint64_t penalised_at = 0;  // the decision that put the source in the box; 0: none
    uint64_t penalty_drops = 0;
    uint64_t last_penalty_drop = 0;
    uint64_t first_after = 0;  // the first decision after the penalty that is not one
    sluice_decision first_after_decision{};
};

// A packet every `gap_ns` from `from` until `until`.
FloodResult flood(Box& box, uint64_t from, uint64_t until, uint64_t gap_ns) {
    FloodResult r;
    for (uint64_t now = from; now < until; now += gap_ns) {
        const sluice_decision d = box.offer(now);
        if (d.table == SLUICE_TABLE_PENALISED) {
            EXPECT_EQ(r.penalised_at, 0u) << "penalised twice, at " << now;
            r.penalised_at = now;
        }
        if (d.reason == SLUICE_REASON_PENALTY) {
            r.penalty_drops++;
            r.last_penalty_drop = now;
            EXPECT_EQ(d.verdict, SLUICE_VERDICT_DROP);
        } else if (r.penalised_at != 0 && r.first_after == 0) {
            r.first_after = now;
            r.first_after_decision = d;
        }
    }
    return r;
}

// 1000/s, burst 10, over 10 within 1 ms for 60 s: the meter drains 9000
// refused packets a second and holds 9 at once. So small a `within` makes
// the edge sharp: a meter that charged a refused packet even 1 ns more than
// 1/9000 s would fill within the first test's 300 s.
Box thousand_per_second() { return Box(1000, 10, 10, 1 * kMs, 60 * kSecond); }

TEST(Penalty, ASourceAtExactlyOverTimesItsLimitIsNeverPenalised) {
    Box box = thousand_per_second();
    // 10,000/s for 300 s: 9,000 refused a second, what the meter drains.
    const FloodResult r = flood(box, kT0, kT0 + 300 * kSecond, 100 * kUs);
    EXPECT_EQ(r.penalised_at, 0u);
    EXPECT_EQ(r.penalty_drops, 0u);
}

TEST(Penalty, ASourceJustOverIsPenalisedForExactlyItsTime) {
    Box box = thousand_per_second();
    // 10,101/s: 101 refused a second more than the meter drains (11 us of
    // its schedule each millisecond); its 1 ms fills in about 90 ms. The
    // flood stops 100 ms after a minute, before the meter, empty again once
    // the penalty ends, fills a second time.
    const FloodResult r = flood(box, kT0, kT0 + 60 * kSecond + 100 * kMs, 99 * kUs);
    ASSERT_NE(r.penalised_at, 0u);
    EXPECT_GT(r.penalised_at, kT0 + 10 * kMs);
    EXPECT_LT(r.penalised_at, kT0 + 100 * kMs);
    // Every packet from then on is a penalty drop until exactly `for` later.
    EXPECT_LT(r.last_penalty_drop, r.penalised_at + 60 * kSecond);
    EXPECT_GE(r.last_penalty_drop, r.penalised_at + 60 * kSecond - 99 * kUs);
    EXPECT_EQ(r.penalty_drops, (60 * kSecond - 1) / (99 * kUs) + 1);
    EXPECT_GE(r.first_after, r.penalised_at + 60 * kSecond);
    // Then limited again, not admitted wholesale: an empty bucket.
    EXPECT_EQ(r.first_after_decision.reason, SLUICE_REASON_SOURCE);
}

// Puts the box's source in the penalty box at `now`, at once: its burst,
// then enough refusals at one instant to fill the meter.
uint64_t penalise(Box& box, uint64_t now) {
    for (int i = 0; i < 2000; i++)
        if (box.offer(now).table == SLUICE_TABLE_PENALISED) return now;
    ADD_FAILURE() << "2000 packets at one instant did not fill the meter";
    return now;
}

TEST(Penalty, ItEndsByItselfAndTheSourceComesOutWithAnEmptyBucket) {
    Box box = thousand_per_second();
    const uint64_t at = penalise(box, kT0);
    EXPECT_EQ(box.offer(at + 60 * kSecond - 1).reason, SLUICE_REASON_PENALTY);
    const sluice_decision after = box.offer(at + 60 * kSecond);
    EXPECT_EQ(after.reason, SLUICE_REASON_SOURCE);
    EXPECT_EQ(after.verdict, SLUICE_VERDICT_DROP);
    // The margin, then one packet's time (1 ms at 1000/s): one packet, not a burst.
    const uint64_t refilled = at + 60 * kSecond + SLUICE_PENALTY_MARGIN_NS + 1 * kMs;
    EXPECT_EQ(box.offer(refilled).verdict, SLUICE_VERDICT_PASS);
    EXPECT_EQ(box.offer(refilled).reason, SLUICE_REASON_SOURCE);
}

TEST(Penalty, APenaltyInForceKeepsItsEndThroughPolicyChanges) {
    Box box = thousand_per_second();
    const uint64_t at = penalise(box, kT0);
    // A shorter `for` applies to penalties that start after it.
    box.set(1000, 10, 10, 100 * kMs, 5 * kSecond);
    EXPECT_EQ(box.offer(at + 30 * kSecond).reason, SLUICE_REASON_PENALTY);
    // A new per-source limit (a new generation) converts the debt, not the box.
    box.set(500, 20, 10, 100 * kMs, 5 * kSecond);
    ASSERT_EQ(box.cls.per_source.generation, 1u);
    EXPECT_EQ(box.offer(at + 59 * kSecond).reason, SLUICE_REASON_PENALTY);
    EXPECT_EQ(box.offer(at + 60 * kSecond - 1).reason, SLUICE_REASON_PENALTY);
    // Out at the same time, with the new limit's empty bucket (40 ms of 20).
    EXPECT_EQ(box.offer(at + 60 * kSecond).reason, SLUICE_REASON_SOURCE);
    EXPECT_EQ(box.offer(at + 60 * kSecond + SLUICE_PENALTY_MARGIN_NS + 2 * kMs).verdict, SLUICE_VERDICT_PASS);
    // The next penalty lasts the new `for`.
    const uint64_t again = penalise(box, at + 61 * kSecond);
    EXPECT_EQ(box.offer(again + 5 * kSecond - 1).reason, SLUICE_REASON_PENALTY);
    EXPECT_EQ(box.offer(again + 5 * kSecond).reason, SLUICE_REASON_SOURCE);
}

TEST(Penalty, ARemovedPenaltyStillRunsToItsEnd) {
    Box box = thousand_per_second();
    const uint64_t at = penalise(box, kT0);
    box.set(1000, 10, 0, 0, 0);
    ASSERT_EQ(box.cls.penalty.for_ns, 0u);
    EXPECT_EQ(box.offer(at + 59 * kSecond).reason, SLUICE_REASON_PENALTY);
    EXPECT_EQ(box.offer(at + 60 * kSecond).reason, SLUICE_REASON_SOURCE);
    // And no new one starts: the class has no meter any more.
    for (int i = 0; i < 5000; i++) EXPECT_NE(box.offer(at + 61 * kSecond).reason, SLUICE_REASON_PENALTY);
}

TEST(Penalty, AClockThatGoesBackNeitherStartsNorMovesAPenalty) {
    Box box = thousand_per_second();
    const uint64_t at = penalise(box, kT0 + 10 * kSecond);
    // Back 10 s, mid-penalty: still in it, and nothing is written.
    const sluice_decision back = box.offer(at - 10 * kSecond);
    EXPECT_EQ(back.reason, SLUICE_REASON_PENALTY);
    EXPECT_EQ(back.table, SLUICE_TABLE_NONE);
    EXPECT_EQ(box.offer(at + 60 * kSecond - 1).reason, SLUICE_REASON_PENALTY);
    EXPECT_EQ(box.offer(at + 60 * kSecond).reason, SLUICE_REASON_SOURCE);

    // A source at its limit whose clock goes back is refused, as any
    // refusal, but not boxed: only its meter decides that.
    Box other = thousand_per_second();
    for (int i = 0; i < 10; i++) EXPECT_EQ(other.offer(kT0).verdict, SLUICE_VERDICT_PASS);
    for (uint64_t back_ns : {100 * kUs, 500 * kUs})
        EXPECT_EQ(other.offer(kT0 - back_ns).table, SLUICE_TABLE_NONE) << back_ns;
    EXPECT_EQ(other.offer(kT0 + 1 * kMs).verdict, SLUICE_VERDICT_PASS);
}

TEST(Penalty, ABurstWithinTheBurstNeverTouchesTheMeter) {
    Box box = thousand_per_second();
    // Ten packets at once, then one a millisecond: never refused, and so
    // never metered, over ten minutes.
    for (int i = 0; i < 10; i++) EXPECT_EQ(box.offer(kT0).verdict, SLUICE_VERDICT_PASS);
    for (uint64_t now = kT0 + 1 * kMs; now < kT0 + 600 * kSecond; now += 1 * kMs)
        ASSERT_EQ(box.offer(now).verdict, SLUICE_VERDICT_PASS) << (now - kT0) / kMs << " ms";
    size_t used = 0;
    for (const sluice_source_set& set : box.table)
        for (uint64_t entry : set.entry) used += entry != 0;
    EXPECT_EQ(used, 1u) << "only the source's own entry: no meter";
}

TEST(Penalty, CompileRefusesWhatCannotWork) {
    auto source = compile_source_limit({1, 1, Unit::packets}, 1518, "test");
    ASSERT_TRUE(source.ok());
    // One refused packet at (2 - 1) x 1/s costs 1 s of the meter: a 1 ms
    // window could never hold it.
    auto short_window = compile_penalty(source.value(), 2, 1 * kMs, 60 * kSecond, "class \"c\".penalty");
    ASSERT_FALSE(short_window.ok());
    EXPECT_NE(short_window.error().message.find("within = \"1ms\" is shorter than one refused unit"),
              std::string::npos)
        << short_window.error().message;
    EXPECT_EQ(short_window.error().setting, "within");
    auto too_long = compile_penalty(source.value(), 2, kSecond, 2 * 3600 * kSecond, "class \"c\".penalty");
    ASSERT_FALSE(too_long.ok());
    EXPECT_EQ(too_long.error().setting, "for");
    auto once = compile_penalty(source.value(), 1, kSecond, 60 * kSecond, "class \"c\".penalty");
    ASSERT_FALSE(once.ok());
    EXPECT_EQ(once.error().setting, "over");
}

}  // namespace
}  // namespace sluice::test::penalty_test
