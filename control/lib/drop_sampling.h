// SPDX-License-Identifier: Apache-2.0
// The drop sampling period a dataplane sets after each drain of an event
// ring, so that what one drain interval samples fits the ring at any drop
// rate: hot-source figures then come from events spread over the whole
// interval instead of its first milliseconds, and lost events are rare.
//
// The sampler (sluice/account.h) weights each event by the drops it stands
// for, so a period that moves changes the sample's density, never its sum.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

#include "sluice/abi.h"

namespace sluice {

class DropSampling {
  public:
    // `least_period`: the dataplane's option (a power of two); `ring_events`:
    // how many events the ring holds; `lost_total`: the lost-event counter
    // now (pinned maps keep an earlier daemon's, which is not news).
    DropSampling(uint32_t least_period, uint64_t ring_events, uint64_t lost_total)
        : least_(least_period),
          period_(least_period),
          ring_events_(std::max<uint64_t>(ring_events, 16)),
          lost_seen_(lost_total) {}

    // After a drain that read `drained` events, with the ring's lost-event
    // counter at `lost_total` (it only grows): the period from now on. The
    // interval's demand (read + lost) is brought to about a quarter of the
    // ring; between a sixteenth and a half it is left alone, so the period
    // does not flap.
    uint32_t after_drain(uint64_t drained, uint64_t lost_total) {
        const uint64_t lost = lost_total >= lost_seen_ ? lost_total - lost_seen_ : 0;
        lost_seen_ = lost_total;
        const uint64_t demand = drained + lost;
        const uint64_t target = ring_events_ / 4;
        uint64_t period = period_;
        if (demand > ring_events_ / 2) {
            const uint64_t quarters = demand / target + (demand % target != 0);
            period *= std::bit_ceil(std::min<uint64_t>(quarters, SLUICE_DROP_SAMPLE_PERIOD_MAX));
        } else if (demand < ring_events_ / 16) {
            period /= std::bit_floor(target / std::max<uint64_t>(demand, 1));
        }
        period_ = static_cast<uint32_t>(std::clamp<uint64_t>(period, least_, SLUICE_DROP_SAMPLE_PERIOD_MAX));
        return period_;
    }

    uint32_t period() const { return period_; }
    uint32_t least_period() const { return least_; }
    uint64_t ring_events() const { return ring_events_; }

  private:
    uint32_t least_;
    uint32_t period_;
    uint64_t ring_events_;
    uint64_t lost_seen_;
};

}  // namespace sluice
