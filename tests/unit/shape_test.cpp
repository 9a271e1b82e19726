// SPDX-License-Identifier: Apache-2.0
// Shaping's queue admission and release (sluice/shape.h) on a fake clock:
// the drain's wait without division, the queue bound, deadlines on arrival
// and in the queue, and the send schedule at the drain rate.
#include <deque>
#include <random>
#include <vector>

#include "core_support.h"
// (core_support.h defines the lock that decide.h, and so shape.h, uses)
#include "sluice/shape.h"

namespace sluice::test {
namespace {

constexpr uint64_t kMs = 1'000'000;

TEST(ShapeDrain, TheWaitIsExactlyTheQuotient) {
    std::mt19937_64 rng(13);
    std::vector<uint64_t> rates = {1, 2, 3, 7, 1000, 999'999'937, 4'294'967'296, 4'294'967'297, SLUICE_RATE_MAX};
    for (int i = 0; i < 40; i++) rates.push_back(std::uniform_int_distribution<uint64_t>(1, SLUICE_RATE_MAX)(rng));
    for (const uint64_t rate : rates) {
        const sluice_shape_drain drain{rate, UINT64_MAX / rate};
        std::vector<uint64_t> backlogs = {0,
                                          1,
                                          rate - 1,
                                          rate,
                                          rate + 1,
                                          3 * rate - 1,
                                          3 * rate,
                                          UINT64_MAX - 1,
                                          UINT64_MAX,
                                          UINT64_MAX / rate * rate,
                                          UINT64_MAX / rate * rate - 1};
        for (int i = 0; i < 400; i++) {
            backlogs.push_back(rng());
            backlogs.push_back(rng() >> std::uniform_int_distribution<int>(1, 63)(rng));
        }
        for (const uint64_t backlog : backlogs)
            ASSERT_EQ(sluice_shape_drain_ns(&drain, backlog), backlog / rate)
                << "rate " << rate << " backlog " << backlog;
    }
}

TEST(ShapeDrain, CompiledForOneWorkersPartOfTheAggregate) {
    // Split: the worker's share; lease: the aggregate over the workers; at
    // least one unit per second either way.
    EXPECT_EQ(compile_shape_drain(make_level(1000, 100, Unit::packets, Accuracy::split, 4), 4).rate_per_s, 250u);
    EXPECT_EQ(compile_shape_drain(make_level(1000, 100, Unit::packets, Accuracy::lease, 4), 4).rate_per_s, 250u);
    EXPECT_EQ(compile_shape_drain(make_level(1000, 100, Unit::packets, Accuracy::lease, 4), 3).rate_per_s, 333u);
    EXPECT_EQ(compile_shape_drain(make_level(3, 100, Unit::packets, Accuracy::lease, 4), 4).rate_per_s, 1u);
    const sluice_shape_drain drain = compile_shape_drain(make_level(1'250'000, 9216, Unit::bytes), 1);
    EXPECT_EQ(drain.rate_per_s, 1'250'000u);
    EXPECT_EQ(drain.inverse, UINT64_MAX / 1'250'000u);
}

TEST(ShapeTokens, SplitIsTheBucketRefilledToNow) {
    const sluice_level_limit level = make_level(1000, 10);
    sluice_cpu_bucket cpu{};
    const sluice_level_ref ref{&level, &cpu, nullptr, nullptr};
    EXPECT_EQ(sluice_level_tokens(&ref, kT0), 10 * SLUICE_NANO) << "a new bucket is full";
    cpu = {2 * SLUICE_NANO, kT0};
    EXPECT_EQ(sluice_level_tokens(&ref, kT0 + 3 * kMs), 5 * SLUICE_NANO);
    EXPECT_EQ(sluice_level_tokens(&ref, kT0 + kSecond), 10 * SLUICE_NANO) << "never past the burst";
    EXPECT_EQ(cpu.tokens_nano, 2 * SLUICE_NANO) << "reading changes nothing";
}

TEST(ShapeTokens, LeaseIsTheUnexpiredLeaseAndThePoolRefilledToNow) {
    const sluice_level_limit level = make_level(1000, 100, Unit::packets, Accuracy::lease);
    sluice_cpu_bucket lease{};
    sluice_shared_bucket pool{};
    const sluice_level_ref ref{&level, &lease, &pool, nullptr};
    EXPECT_EQ(sluice_level_tokens(&ref, kT0), 100 * SLUICE_NANO) << "a new pool is full";
    lease = {5 * SLUICE_NANO, kT0 + 10 * kMs};
    pool.tokens_nano = 20 * SLUICE_NANO;
    pool.last_ns = kT0 - kMs;
    EXPECT_EQ(sluice_level_tokens(&ref, kT0), 26 * SLUICE_NANO);
    EXPECT_EQ(sluice_level_tokens(&ref, kT0 + 10 * kMs), 31 * SLUICE_NANO) << "an expired lease counts nothing";
}

TEST(ShapeQueue, ItsCostNeverGoesBelowZero) {
    sluice_shape_queue q{};
    sluice_shape_queue_push(&q, 5);
    sluice_shape_queue_push(&q, 7);
    sluice_shape_queue_pop(&q, 9);  // left under a policy that charges more
    EXPECT_EQ(q.count, 1u);
    EXPECT_EQ(q.cost_nano, 3u);
    sluice_shape_queue_push(&q, 4);
    sluice_shape_queue_pop(&q, 8);
    EXPECT_EQ(q.cost_nano, 0u);
    sluice_shape_queue_pop(&q, 0);
    EXPECT_EQ(q.count, 0u);
    EXPECT_EQ(q.cost_nano, 0u) << "an empty queue costs nothing";
}

// One shaped class on one worker, as sluice-dpdk runs it: a frame the
// class aggregate alone refuses may wait; each poll releases what the class
// aggregate and the global ceiling admit.
class Shaper {
  public:
    struct Departure {
        uint64_t time_ns;
        uint32_t frame_len;
        uint8_t reason;      // SHAPED (sent after waiting) or DEADLINE (dropped)
        uint64_t predicted;  // send_ns on arrival
    };

    Shaper(sluice_level_limit aggregate, uint32_t queue, uint64_t max_delay_ns,
           sluice_level_limit global = sluice_level_limit{})
        : aggregate_(aggregate), global_(global) {
        shape_.queue_packets = queue;
        shape_.max_delay_ns = max_delay_ns;
        drain_ = compile_shape_drain(aggregate_, 1);
    }

    // What became of a frame on arrival: ADMITTED (sent at once), SHAPED
    // (waits) or the reason it was refused.
    uint8_t arrive(uint32_t frame_len, uint64_t now) {
        const sluice_levels all = upper();
        if (queue_.count == 0) {
            const sluice_decision d = sluice_decide(&all, frame_len, 0, now);
            if (!sluice_shape_may_wait(d)) return d.reason;
        }
        const uint64_t cost = sluice_level_cost_nano(&aggregate_, frame_len, 0);
        const sluice_shape_admission a = sluice_shape_admit(&shape_, &drain_, &queue_, &all.aggregate, cost, now);
        if (a.reason == SLUICE_REASON_SHAPED) {
            frames_.push_back({frame_len, a.deadline_ns, a.send_ns});
            sluice_shape_queue_push(&queue_, cost);
        }
        return a.reason;
    }

    // One poll at `now`: what left, in order.
    std::vector<Departure> poll(uint64_t now, bool shaped = true) {
        std::vector<Departure> left;
        const sluice_levels all = upper();
        while (!frames_.empty()) {
            const Held& head = frames_.front();
            sluice_decision d;
            if (!sluice_shape_release(shaped, &all, head.frame_len, 0, head.deadline_ns, now, &d)) break;
            left.push_back({now, head.frame_len, d.reason, head.send_ns});
            sluice_shape_queue_pop(&queue_, shaped ? sluice_level_cost_nano(&aggregate_, head.frame_len, 0) : 0);
            frames_.pop_front();
        }
        return left;
    }

    uint32_t queued() const { return queue_.count; }

  private:
    struct Held {
        uint32_t frame_len;
        uint64_t deadline_ns, send_ns;
    };

    sluice_levels upper() {
        sluice_levels l{};
        l.aggregate = {&aggregate_, &aggregate_bucket_, nullptr, nullptr};
        if (global_.enabled) l.global = {&global_, &global_bucket_, nullptr, nullptr};
        return l;
    }

    sluice_level_limit aggregate_, global_;
    sluice_cpu_bucket aggregate_bucket_{}, global_bucket_{};
    sluice_shape shape_{};
    sluice_shape_drain drain_{};
    sluice_shape_queue queue_{};
    std::deque<Held> frames_;
};

TEST(Shaping, QueuedFramesLeaveAtTheDrainRateWhenPredicted) {
    // 1000 packets/s with a one-packet burst: one frame a millisecond.
    Shaper s(make_level(1000, 1), 100, 1000 * kMs);
    EXPECT_EQ(s.arrive(100, kT0), SLUICE_REASON_ADMITTED);
    for (int i = 0; i < 49; i++) ASSERT_EQ(s.arrive(100, kT0), SLUICE_REASON_SHAPED);
    for (uint64_t k = 1; k <= 49; k++) {
        ASSERT_TRUE(s.poll(kT0 + k * kMs - 1).empty()) << "frame " << k << " left early";
        const auto left = s.poll(kT0 + k * kMs);
        ASSERT_EQ(left.size(), 1u) << "frame " << k;
        EXPECT_EQ(left[0].reason, SLUICE_REASON_SHAPED);
        EXPECT_EQ(left[0].predicted, kT0 + k * kMs) << "frame " << k;
    }
    EXPECT_EQ(s.queued(), 0u);
}

TEST(Shaping, ByteModeFramesLeaveWhenPredictedAndNeverFasterThanTheRate) {
    // 1 MB/s with a burst of one large frame, frames of every size arriving
    // faster than that, a worker polling every microsecond: each queued
    // frame leaves at the first poll at or after the time predicted on its
    // arrival, and what leaves stays within burst + rate * T.
    constexpr uint64_t kRate = 1'000'000, kBurst = 1500, kPoll = 1000;
    Shaper s(make_level(kRate, kBurst, Unit::bytes, Accuracy::split, 1, 1500), 1000, 10'000 * kMs);
    std::mt19937_64 rng(7);
    std::vector<Admission> sent;
    unsigned arrivals = 0, shaped = 0;
    uint64_t next_arrival = kT0;
    for (uint64_t now = kT0; arrivals < 300 || s.queued() > 0; now += kPoll) {
        for (const auto& d : s.poll(now)) {
            ASSERT_EQ(d.reason, SLUICE_REASON_SHAPED);
            ASSERT_GE(d.time_ns, d.predicted) << "left before the drain had paid for it";
            ASSERT_LT(d.time_ns, d.predicted + kPoll) << "left later than the first poll after it was due";
            sent.push_back({d.time_ns, d.frame_len});
        }
        for (; arrivals < 300 && next_arrival <= now; arrivals++) {
            const uint32_t len = std::uniform_int_distribution<uint32_t>(60, 1500)(rng);
            const uint8_t reason = s.arrive(len, now);
            ASSERT_TRUE(reason == SLUICE_REASON_ADMITTED || reason == SLUICE_REASON_SHAPED) << int{reason};
            if (reason == SLUICE_REASON_ADMITTED) sent.push_back({now, len});
            shaped += reason == SLUICE_REASON_SHAPED;
            next_arrival += std::uniform_int_distribution<uint64_t>(0, 1'000'000)(rng);  // 780 bytes a ms, on average
        }
    }
    EXPECT_GT(shaped, 200u);
    EXPECT_EQ(sent.size(), 300u);
    EXPECT_LE(worst_window_excess(sent, kRate, kBurst), 0);
}

TEST(Shaping, TheQueueNeverGrowsPastItsBound) {
    Shaper s(make_level(1000, 1), 10, 1000 * kMs);
    EXPECT_EQ(s.arrive(64, kT0), SLUICE_REASON_ADMITTED);
    unsigned shaped = 0, full = 0;
    for (int i = 0; i < 99; i++) {
        const uint8_t reason = s.arrive(64, kT0);
        shaped += reason == SLUICE_REASON_SHAPED;
        full += reason == SLUICE_REASON_QUEUE_FULL;
        ASSERT_LE(s.queued(), 10u);
    }
    EXPECT_EQ(shaped, 10u);
    EXPECT_EQ(full, 89u);
    // One leaves, one more may wait.
    EXPECT_EQ(s.poll(kT0 + kMs).size(), 1u);
    EXPECT_EQ(s.arrive(64, kT0 + kMs), SLUICE_REASON_SHAPED);
    EXPECT_EQ(s.arrive(64, kT0 + kMs), SLUICE_REASON_QUEUE_FULL);
}

TEST(Shaping, FramesThatWouldWaitPastTheDeadlineAreRefusedOnArrival) {
    // 100 packets/s is 10 ms a frame: with 50 ms allowed, five may wait (the
    // fifth exactly 50 ms).
    Shaper s(make_level(100, 1), 1000, 50 * kMs);
    EXPECT_EQ(s.arrive(64, kT0), SLUICE_REASON_ADMITTED);
    for (int i = 0; i < 5; i++) EXPECT_EQ(s.arrive(64, kT0), SLUICE_REASON_SHAPED) << i;
    for (int i = 0; i < 14; i++) EXPECT_EQ(s.arrive(64, kT0), SLUICE_REASON_DEADLINE) << i;
    // Time passing makes room for a later frame: at 10 ms the first has left.
    EXPECT_EQ(s.poll(kT0 + 10 * kMs).size(), 1u);
    EXPECT_EQ(s.arrive(64, kT0 + 10 * kMs), SLUICE_REASON_SHAPED);
    EXPECT_EQ(s.arrive(64, kT0 + 10 * kMs), SLUICE_REASON_DEADLINE);
}

TEST(Shaping, FramesHeldPastTheirDeadlineByTheGlobalCeilingAreDropped) {
    // The class would send a frame a millisecond, but the global ceiling (2
    // frames, then 10/s) holds the queue past its 20 ms deadline.
    Shaper s(make_level(1000, 1), 100, 20 * kMs, make_level(10, 2));
    EXPECT_EQ(s.arrive(64, kT0), SLUICE_REASON_ADMITTED);
    for (int i = 0; i < 9; i++) ASSERT_EQ(s.arrive(64, kT0), SLUICE_REASON_SHAPED);
    EXPECT_EQ(s.poll(kT0 + kMs).size(), 1u);  // the global burst's second frame
    EXPECT_TRUE(s.poll(kT0 + 2 * kMs).empty());
    EXPECT_TRUE(s.poll(kT0 + 20 * kMs).empty()) << "at its deadline a frame may still leave";
    const auto left = s.poll(kT0 + 20 * kMs + 1);
    ASSERT_EQ(left.size(), 8u);
    for (const auto& d : left) EXPECT_EQ(d.reason, SLUICE_REASON_DEADLINE);
}

TEST(Shaping, AClassNoLongerShapedSendsWhatItHeldAtOnce) {
    Shaper s(make_level(1000, 1), 100, 1000 * kMs);
    EXPECT_EQ(s.arrive(64, kT0), SLUICE_REASON_ADMITTED);
    for (int i = 0; i < 9; i++) ASSERT_EQ(s.arrive(64, kT0), SLUICE_REASON_SHAPED);
    const auto left = s.poll(kT0, /*shaped=*/false);
    ASSERT_EQ(left.size(), 9u);
    for (const auto& d : left) EXPECT_EQ(d.reason, SLUICE_REASON_SHAPED);
}

}  // namespace
}  // namespace sluice::test
