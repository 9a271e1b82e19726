// SPDX-License-Identifier: Apache-2.0
// Drop sampling under a flood at a dataplane's full rate, the same check for
// XDP (tests/bpf/xdp_events_test.cpp) and sluice-dpdk
// (tests/dpdk/dpdk_conformance_test.cpp): from period 1 the first interval
// asks for more events than half the ring holds, or overruns it (the lost
// events' weight rides on the next event sent); each drain raises the period
// until an interval's events fill about a quarter of the ring; from then on
// nothing is lost and each source's summed weights are its drops within the
// sampling error.
//
// The period adapts to the drops between two drains, not to the time they
// took (control/lib/drop_sampling.h), so the intervals are sized in drops:
// each floods three quarters of a ring's worth, which is what the checks
// need whatever the machine's speed. The first one also lasts at least the
// daemon's 250 ms, so a fast dataplane still shows its real full-rate
// overrun.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "packet_builder.h"
#include "policy_builder.h"
#include "sluice/abi.h"

namespace sluice::test::scenarios {

struct SampledSource {
    std::string addr;
    uint64_t sent = 0;    // frames flooded (all dropped: class 1 refuses all but the first)
    uint64_t weight = 0;  // the summed weights of its drop events
};

// `t` has stat() and counts(); `ring_events`: how many events the ring holds;
// `flood_round` floods one round at full rate (a few frames from each
// source), adding to each source's `sent`; `drain` drains the events into
// its callback; `period` is the sampling period now.
template <class Fixture>
void flood_sampling_stays_within_the_sampling_error(
    Fixture& t, std::vector<SampledSource>& sources, uint64_t ring_events, const std::function<void()>& flood_round,
    const std::function<void(const std::function<void(const sluice_drop_event&)>&)>& drain,
    const std::function<uint32_t()>& period) {
    uint64_t events = 0;
    const auto drain_into_sources = [&] {
        drain([&](const sluice_drop_event& e) {
            events++;
            for (SampledSource& s : sources)
                if (std::memcmp(e.source.addr, PacketBuilder::address(s.addr).data(), 16) == 0) s.weight += e.weight;
        });
    };
    const auto sent_so_far = [&] {
        uint64_t sent = 0;
        for (const SampledSource& s : sources) sent += s.sent;
        return sent;
    };
    // Floods `interval_drops`, and for at least `at_least`, then drains. At
    // period 1 that asks for more than half the ring; at the period the
    // drains settle on, between a sixteenth and a half of it (4 from period
    // 1: 3/16), so the period holds and each interval has a sixteenth or more.
    const uint64_t interval_drops = ring_events * 3 / 4;
    const auto one_interval = [&](std::chrono::milliseconds at_least) {
        const uint64_t from = sent_so_far();
        const auto end = std::chrono::steady_clock::now() + at_least;
        while (sent_so_far() - from < interval_drops || std::chrono::steady_clock::now() < end)
            ASSERT_NO_FATAL_FAILURE(flood_round());
        ASSERT_NO_FATAL_FAILURE(drain_into_sources());
    };

    // At period 1 the first interval asks for more than half the ring: the
    // period rises at least fourfold. In 250 ms a fast dataplane asks for
    // more and overruns the ring (not always under ASan).
    const auto onset_begin = std::chrono::steady_clock::now();
    ASSERT_NO_FATAL_FAILURE(one_interval(std::chrono::milliseconds(250)));
    const double onset_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - onset_begin).count();
    const uint64_t onset_drops = sent_so_far();
    const uint64_t onset_lost = t.stat(SLUICE_STAT_DROP_EVENTS_LOST);
    const uint32_t onset_period = period();
    EXPECT_GT(onset_period, 1u) << "period 1 asked for " << onset_drops << " events of a ring of " << ring_events
                                << ": more than half of it";
    // Settled once an interval loses nothing: no weight is carried then.
    int settling = 0;
    for (uint64_t lost = onset_lost;; settling++) {
        ASSERT_LT(settling, 8) << "the period never settled";
        ASSERT_NO_FATAL_FAILURE(one_interval(std::chrono::milliseconds(0)));
        const uint64_t now_lost = t.stat(SLUICE_STAT_DROP_EVENTS_LOST);
        if (now_lost == lost) break;
        lost = now_lost;
    }

    const uint64_t lost_before = t.stat(SLUICE_STAT_DROP_EVENTS_LOST);
    const uint64_t drops_before = t.counts().packets(1, kDrop, SLUICE_REASON_SOURCE);
    for (SampledSource& s : sources) s.sent = s.weight = 0;
    events = 0;
    const auto begin = std::chrono::steady_clock::now();
    // Enough events for a 4-sigma bound under 5% on a 20% source (40K), and
    // at least 8 intervals. A settled interval asks for at least a sixteenth
    // of the ring (drop_sampling.h lowers the period below that), which
    // bounds how many it takes.
    constexpr uint64_t kEvents = 40'000;
    const uint64_t most_intervals = 8 + kEvents / (ring_events / 16) + 1;
    for (uint64_t i = 0; i < 8 || events < kEvents; i++) {
        ASSERT_LT(i, most_intervals) << events << " events in " << i << " intervals of " << interval_drops << " drops";
        ASSERT_NO_FATAL_FAILURE(one_interval(std::chrono::milliseconds(0)));
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    uint64_t sent = 0;
    for (const SampledSource& s : sources) sent += s.sent;
    EXPECT_EQ(t.counts().packets(1, kDrop, SLUICE_REASON_SOURCE) - drops_before, sent) << "every frame measured dropped";
    EXPECT_EQ(t.stat(SLUICE_STAT_DROP_EVENTS_LOST), lost_before) << "a settled period loses no events";
    std::cout << "[ sampling ] onset: " << onset_drops << " drops in " << onset_seconds * 1e3 << " ms ("
              << onset_drops / onset_seconds / 1e6 << " M drops/s), ring of " << ring_events << " events, "
              << onset_lost << " lost, period " << onset_period << " after it\n"
              << "[ sampling ] " << sent / seconds / 1e6 << " M drops/s; period " << period() << " settled (after "
              << settling + 1 << " more intervals), " << events << " events\n";
    for (const SampledSource& s : sources) {
        // A sampled drop is this source's with probability `share`: over
        // `events` samples its figure's relative error has a standard
        // deviation of sqrt((1 - share) / (events * share)). Allowed: four of
        // them, and the two ends' partial gaps.
        const double sent_d = static_cast<double>(s.sent);
        const double share = sent_d / static_cast<double>(sent);
        const double sigma = std::sqrt((1 - share) / (static_cast<double>(events) * share));
        const double bound = 4 * sigma + 3.0 * period() / sent_d;
        const double error = (static_cast<double>(s.weight) - sent_d) / sent_d;
        std::cout << "[ sampling ] " << s.addr << " drops " << s.sent << " weights " << s.weight << " error "
                  << error * 100 << "% (bound " << bound * 100 << "%)\n";
        EXPECT_LE(std::abs(error), bound) << s.addr;
        EXPECT_LE(bound, 0.05) << s.addr << ": too few events to state an error";
    }
}

}  // namespace sluice::test::scenarios
