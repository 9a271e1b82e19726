// SPDX-License-Identifier: Apache-2.0
// Shaping in sluice-dpdk: a shaped class holds what its aggregate bucket
// cannot pay for in a bounded FIFO and sends it at the class rate. On the
// test clock the pacing is exact; on the TSC it is checked against the
// token-bucket bound (never early) and a stated lateness tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "dpdk_fixture.h"

namespace sluice::test {
namespace {

constexpr uint64_t kUs = 1000;

// A class that shapes to `rate` packets per second, with a one-packet burst
// unless told otherwise.
ClassSpec shaped_class(uint64_t rate, uint32_t queue, uint64_t max_delay_ns, uint64_t burst = 1) {
    ClassSpec spec;
    spec.id = 1;
    spec.aggregate = Limit{.rate = rate, .burst = burst, .unit = Unit::packets, .accuracy = Accuracy::split};
    spec.shape_queue = queue;
    spec.shape_max_delay_ns = max_delay_ns;
    return spec;
}

class DpdkShaping : public DpdkTest {
  protected:
    // Receives every injected frame (bursts of 32) and returns what left.
    unsigned poll_until_received(unsigned frames) {
        unsigned sent = 0;
        for (unsigned received = 0; received < frames;) {
            const uint16_t n = dp_->worker(0).poll_once();
            received += n;
            sent += port_->drain_sent();
            EXPECT_LE(dp_->worker(0).queued(1), bound_) << "the queue grew past its bound";
            if (n == 0) break;
        }
        return sent;
    }

    uint32_t bound_ = ~0u;
};

TEST_F(DpdkShaping, QueuedFramesLeaveExactlyAtTheClassRate) {
    // 1000 packets/s: one frame per millisecond once the one-packet burst is spent.
    apply(policy().add(shaped_class(1000, 100, 1000 * kMs)).build());
    const Bytes frame = udp_from("192.0.2.1");
    ASSERT_EQ(port_->inject(frame, 50), 50u);

    EXPECT_EQ(poll_until_received(50), 1u);  // the burst goes at once, the rest waits
    EXPECT_EQ(dp_->worker(0).queued(1), 49u);
    for (uint64_t k = 1; k <= 49; k++) {
        set_clock(t0() + k * kMs - kUs);  // a microsecond early: nothing
        dp_->worker(0).poll_once();
        ASSERT_EQ(port_->drain_sent(), 0u) << "frame " << k << " left early";
        set_clock(t0() + k * kMs);  // on time: exactly one
        dp_->worker(0).poll_once();
        ASSERT_EQ(port_->drain_sent(), 1u) << "frame " << k;
    }
    EXPECT_EQ(dp_->worker(0).queued(1), 0u);
    const Counts c = counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 1u);
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_SHAPED), 49u);
    EXPECT_EQ(c.verdict(kDrop), 0u);
}

TEST_F(DpdkShaping, TheQueueNeverGrowsPastItsBound) {
    bound_ = 10;
    apply(policy().add(shaped_class(1000, bound_, 1000 * kMs)).build());
    ASSERT_EQ(port_->inject(udp_from("192.0.2.2"), 100), 100u);

    EXPECT_EQ(poll_until_received(100), 1u);
    EXPECT_EQ(dp_->worker(0).queued(1), 10u);
    Counts c = counts();
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_QUEUE_FULL), 89u);

    // Draining makes room again, one frame per millisecond (a one-frame
    // bucket never saves up more than one).
    for (uint64_t k = 1; k <= 10; k++) {
        set_clock(t0() + k * kMs);
        dp_->worker(0).poll_once();
        EXPECT_EQ(port_->drain_sent(), 1u) << "frame " << k;
    }
    ASSERT_EQ(port_->inject(udp_from("192.0.2.2"), 20), 20u);
    EXPECT_EQ(poll_until_received(20), 0u);
    EXPECT_EQ(dp_->worker(0).queued(1), 10u);
    c = counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_SHAPED), 10u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_QUEUE_FULL), 89u + 10u);
}

TEST_F(DpdkShaping, FramesThatWouldWaitPastTheDeadlineAreRefusedOnArrival) {
    // 100 packets/s is 10 ms a frame: with 50 ms allowed, five may wait.
    apply(policy().add(shaped_class(100, 1000, 50 * kMs)).build());
    ASSERT_EQ(port_->inject(udp_from("192.0.2.3"), 20), 20u);

    EXPECT_EQ(poll_until_received(20), 1u);
    EXPECT_EQ(dp_->worker(0).queued(1), 5u);
    for (uint64_t k = 1; k <= 5; k++) {
        set_clock(t0() + k * 10 * kMs);
        dp_->worker(0).poll_once();
        EXPECT_EQ(port_->drain_sent(), 1u) << "frame " << k;
    }
    const Counts c = counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 1u);
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_SHAPED), 5u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_DEADLINE), 14u);
}

TEST_F(DpdkShaping, FramesHeldPastTheirDeadlineByTheGlobalCeilingAreDropped) {
    // The class would send a frame a millisecond, but the global ceiling
    // (2 frames, then 10/s) holds the queue back past its 20 ms deadline.
    apply(policy()
              .global(Limit{.rate = 10, .burst = 2, .unit = Unit::packets, .accuracy = Accuracy::split})
              .add(shaped_class(1000, 100, 20 * kMs))
              .build());
    ASSERT_EQ(port_->inject(udp_from("192.0.2.4"), 10), 10u);
    EXPECT_EQ(poll_until_received(10), 1u);
    EXPECT_EQ(dp_->worker(0).queued(1), 9u);

    set_clock(t0() + 1 * kMs);
    dp_->worker(0).poll_once();
    EXPECT_EQ(port_->drain_sent(), 1u);  // the global burst's second frame
    set_clock(t0() + 2 * kMs);
    dp_->worker(0).poll_once();
    EXPECT_EQ(port_->drain_sent(), 0u);  // global ceiling empty: the queue waits
    set_clock(t0() + 21 * kMs);
    dp_->worker(0).poll_once();
    EXPECT_EQ(port_->drain_sent(), 0u);
    EXPECT_EQ(dp_->worker(0).queued(1), 0u);

    const Counts c = counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_SHAPED), 1u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_DEADLINE), 8u);
}

TEST_F(DpdkShaping, AVersionWithoutShapingSendsWhatWasQueued) {
    apply(policy().add(shaped_class(1000, 100, 1000 * kMs)).build());
    ASSERT_EQ(port_->inject(udp_from("192.0.2.5"), 10), 10u);
    EXPECT_EQ(poll_until_received(10), 1u);
    EXPECT_EQ(dp_->worker(0).queued(1), 9u);

    apply(policy(2).add({.id = 1}).build());
    dp_->worker(0).poll_once();
    EXPECT_EQ(port_->drain_sent(), 9u);
    EXPECT_EQ(counts().packets(1, kPass, SLUICE_REASON_SHAPED), 9u);
}

TEST_F(DpdkShaping, SourceLimitsStillApplyToAShapedClass) {
    ClassSpec spec = shaped_class(1000, 100, 1000 * kMs);
    spec.per_source = Limit{.rate = 1, .burst = 3, .unit = Unit::packets};
    apply(policy().add(spec).build());
    ASSERT_EQ(port_->inject(udp_from("192.0.2.6"), 10), 10u);

    EXPECT_EQ(poll_until_received(10), 1u);
    EXPECT_EQ(dp_->worker(0).queued(1), 2u);
    const Counts c = counts();
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 7u);
}

// On the TSC: a real clock, so a stated tolerance.
class DpdkShapingRealClock : public DpdkTest {
  protected:
    DpdkOptions options() const override {
        DpdkOptions o = DpdkTest::options();
        o.test_clock = false;
        return o;
    }
};

TEST_F(DpdkShapingRealClock, PacingNeverRunsAheadOfTheRateAndFinishesWithinTolerance) {
    // 2000 frames/s with a 20-frame burst: the burst leaves at once, the
    // other 380 frames take 190 ms. The burst is also what lets the queue
    // catch up after the thread was descheduled for up to 10 ms; a shaper
    // never sends more than burst + rate * T in any window T.
    constexpr uint64_t kRate = 2000;
    constexpr uint64_t kBurst = 20;
    constexpr unsigned kFrames = 400;
    apply(policy().add(shaped_class(kRate, 1000, 1000 * kMs, kBurst)).build());
    ASSERT_EQ(port_->inject(udp_from("192.0.2.7"), kFrames), kFrames);

    std::vector<uint64_t> departures;
    const uint64_t start = dp_->now_ns();
    // Time this thread was not polling (descheduled on a busy machine): the
    // queue cannot leave then, so lateness up to it is the machine's.
    uint64_t unpolled_ns = 0;
    for (uint64_t last = start; departures.size() < kFrames && dp_->now_ns() - start < 2000 * kMs;) {
        dp_->worker(0).poll_once();
        const uint64_t now = dp_->now_ns();
        if (now - last > kMs) unpolled_ns += now - last - kMs;
        last = now;
        for (unsigned n = port_->drain_sent(); n > 0; n--) departures.push_back(now);
    }
    ASSERT_EQ(departures.size(), kFrames);

    // Never early: in any window, at most burst + rate * T frames left
    // (timestamps are taken after each poll, so a window can only look longer).
    for (size_t i = 0; i < departures.size(); i += 10) {
        for (size_t j = i + 1; j < departures.size(); j++) {
            const double window_s = static_cast<double>(departures[j] - departures[i]) / 1e9;
            ASSERT_LE(static_cast<double>(j - i + 1), kBurst + static_cast<double>(kRate) * window_s + 1.0)
                << "frames " << i << ".." << j << " left faster than the class rate";
        }
    }
    // Never much late: the queue drained within 10% (plus 20 ms) of the
    // ideal 190 ms, besides the time the thread was kept from polling.
    const double drained_ms = static_cast<double>(departures.back() - departures.front()) / 1e6;
    const double ideal_ms = (kFrames - kBurst) * 1000.0 / kRate;
    const double unpolled_ms = static_cast<double>(unpolled_ns) / 1e6;
    EXPECT_GE(drained_ms, ideal_ms - 1.0);
    EXPECT_LE(drained_ms, ideal_ms * 1.10 + 20.0 + unpolled_ms) << unpolled_ms << " ms without a poll";
    const Counts c = counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED) + c.packets(1, kPass, SLUICE_REASON_SHAPED), kFrames);
    EXPECT_EQ(c.verdict(kDrop), 0u);
}

}  // namespace
}  // namespace sluice::test
