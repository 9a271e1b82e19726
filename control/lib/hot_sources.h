// SPDX-License-Identifier: Apache-2.0
// The sources dropped most, from the dataplane's sampled drop events, in
// bounded memory: Space-Saving (Metwally et al.) over exponentially decayed
// counts, so a source that stopped an hour ago fades out instead of holding
// its place forever.
//
// Space-Saving keeps `capacity` counters. A tracked source adds its weight; an
// untracked one takes over the smallest counter and adds to it, so its count
// is over-estimated by at most that minimum (kept as `error`). Any source
// whose true share of the decayed total exceeds 1/capacity is guaranteed to be
// tracked; with capacity 128 and a top 20 that is far more than needed.
//
// Decay uses forward decay (Cormode et al.): a weight w arriving at time t is
// stored as w * e^((t - landmark) / tau), so stored values of different ages
// compare directly and nothing is touched when time passes; reading divides by
// e^((now - landmark) / tau). For a source dropping steadily at r per second
// since time s, the decayed count is r * tau * (1 - e^(-(now - s) / tau)), so
// dividing by that window gives r at once for a new flood, and for a source
// that stopped the rate then decays with time constant tau.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sluice/abi.h"

namespace sluice {

struct HotSource {
    sluice_source_key key{};
    double drops_per_second = 0;  // decayed count / decayed window since first seen
    double decayed_drops = 0;     // the count top() ranks by: drops, each weighted by e^(-age / tau)
    double share = 0;             // decayed_drops / decayed_drops_total(): 0..1, summing to at most 1
    double error_per_second = 0;  // how much of drops_per_second may belong to sources it displaced
    // SLUICE_VERDICT_DROP, or WOULD_DROP: what a class in shadow passed. A
    // source counts apart under each, so shadow never reads as enforcement.
    uint8_t verdict = SLUICE_VERDICT_DROP;
};

class HotSources {
  public:
    static constexpr size_t kDefaultCapacity = 128;
    static constexpr double kDefaultTauSeconds = 10.0;

    explicit HotSources(size_t capacity = kDefaultCapacity, double tau_seconds = kDefaultTauSeconds);

    // `now_s` must not go backwards (a monotonic clock in seconds).
    // `verdict` is the drop event's: DROP, or WOULD_DROP from a class in shadow.
    void add(const sluice_source_key& key, double weight, double now_s, uint8_t verdict = SLUICE_VERDICT_DROP);
    // The k sources with the most decayed drops, most first. Left out: sources
    // whose rate decayed below `min_rate`, and counters more than half of
    // which may belong to displaced sources (many equal sources: none stands out).
    std::vector<HotSource> top(size_t k, double now_s, double min_rate = 0.01) const;
    // Decayed drops per second over every source, tracked or not.
    double total_drops_per_second(double now_s) const;
    // Decayed drops over every source, tracked or not.
    double decayed_drops_total(double now_s) const;
    size_t tracked() const { return entries_.size(); }

  private:
    struct Entry {
        sluice_source_key key;
        uint8_t verdict;
        double count;       // forward-decayed
        double error;       // forward-decayed
        double first_seen;  // when this entry started counting
    };

    double boost(double now_s) const;  // e^((now - landmark) / tau)
    // The decayed length of [since, now]: what a steady rate of 1 would count.
    double window(double since_s, double now_s) const;
    void rescale(double now_s);

    size_t capacity_;
    double tau_;
    double landmark_ = 0;
    double start_ = 0;  // the first add()
    bool started_ = false;
    double total_ = 0;  // forward-decayed
    std::vector<Entry> entries_;
};

}  // namespace sluice
