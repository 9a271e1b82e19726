// SPDX-License-Identifier: Apache-2.0
// Drop sampling under a flood at a dataplane's full rate, the same check for
// XDP (tests/bpf/xdp_events_test.cpp) and sluice-dpdk
// (tests/dpdk/dpdk_conformance_test.cpp): from period 1 the first 250 ms
// interval asks for more events than half the ring holds, or overruns it (the
// lost events' weight rides on the next event sent); each drain raises the period until an interval's events fill
// about a quarter of the ring; from then on nothing is lost and each source's
// summed weights are its drops within the sampling error.
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

// `t` has stat() and counts(); `flood_one_interval` floods for 250 ms at full
// rate, adding to each source's `sent`; `drain` drains the events into its
// callback; `period` is the sampling period now.
template <class Fixture>
void flood_sampling_stays_within_the_sampling_error(
    Fixture& t, std::vector<SampledSource>& sources, const std::function<void()>& flood_one_interval,
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
    const auto one_interval = [&] {
        ASSERT_NO_FATAL_FAILURE(flood_one_interval());
        ASSERT_NO_FATAL_FAILURE(drain_into_sources());
    };

    // At full rate period 1 asks for more than half the ring in one interval
    // (and overruns it where the dataplane is fast enough: not always under ASan).
    ASSERT_NO_FATAL_FAILURE(one_interval());
    const uint32_t onset_period = period();
    EXPECT_GT(onset_period, 1u) << "period 1 at full rate asks for more than half the ring";
    // Settled once an interval loses nothing: no weight is carried then.
    int settling = 0;
    for (uint64_t lost = t.stat(SLUICE_STAT_DROP_EVENTS_LOST);; settling++) {
        ASSERT_LT(settling, 8) << "the period never settled";
        ASSERT_NO_FATAL_FAILURE(one_interval());
        const uint64_t now_lost = t.stat(SLUICE_STAT_DROP_EVENTS_LOST);
        if (now_lost == lost) break;
        lost = now_lost;
    }

    const uint64_t lost_before = t.stat(SLUICE_STAT_DROP_EVENTS_LOST);
    const uint64_t drops_before = t.counts().packets(1, kDrop, SLUICE_REASON_SOURCE);
    for (SampledSource& s : sources) s.sent = s.weight = 0;
    events = 0;
    const auto begin = std::chrono::steady_clock::now();
    // At least 2 s, and enough events for a 4-sigma bound under 5% on a 20%
    // source (40K): a slow machine's interval holds fewer at the least period.
    for (int i = 0; i < 8 || (events < 40'000 && i < 40); i++) ASSERT_NO_FATAL_FAILURE(one_interval());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    uint64_t sent = 0;
    for (const SampledSource& s : sources) sent += s.sent;
    EXPECT_EQ(t.counts().packets(1, kDrop, SLUICE_REASON_SOURCE) - drops_before, sent) << "every frame measured dropped";
    EXPECT_EQ(t.stat(SLUICE_STAT_DROP_EVENTS_LOST), lost_before) << "a settled period loses no events";
    std::cout << "[ sampling ] " << sent / seconds / 1e6 << " M drops/s; period " << onset_period
              << " after the onset, " << period() << " settled (after " << settling + 1 << " more intervals), "
              << events << " events\n";
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
