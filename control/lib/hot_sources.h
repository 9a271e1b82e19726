// SPDX-License-Identifier: Apache-2.0
// The keys counted most (the sources dropped most, from the dataplane's
// sampled drop events; the request counters refused most), in bounded
// memory: Space-Saving (Metwally et al.) over exponentially decayed counts,
// so a source that stopped an hour ago fades out instead of holding its
// place forever.
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

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sluice/abi.h"

namespace sluice {

// The method above over any Key with ==: the engine of HotSources, and of the
// request gate's hot keys (control/request/request_gate.h).
template <class Key>
class DecayedTopK {
  public:
    struct Ranked {
        Key key;
        double per_second = 0;        // decayed count / decayed window since first seen
        double decayed = 0;           // the count top() ranks by: weights, each by e^(-age / tau)
        double share = 0;             // decayed / decayed_total(): 0..1, summing to at most 1
        double error_per_second = 0;  // how much of per_second may belong to keys it displaced
    };

    DecayedTopK(size_t capacity, double tau_seconds)
        : capacity_(std::max<size_t>(capacity, 1)), tau_(tau_seconds > 0 ? tau_seconds : 10.0) {
        entries_.reserve(capacity_);
    }

    // `now_s` must not go backwards (a monotonic clock in seconds). A weight
    // that is not positive counts nothing and changes nothing: taking a
    // counter for it would displace a key that does count.
    void add(const Key& key, double weight, double now_s) {
        if (!(weight > 0)) return;
        if (!started_) {
            landmark_ = now_s;
            start_ = now_s;
            started_ = true;
        }
        if ((now_s - landmark_) / tau_ > kMaxExponent) rescale(now_s);
        const double scaled = weight * boost(now_s);
        total_ += scaled;
        for (Entry& entry : entries_) {
            if (!(entry.key == key)) continue;
            // A key back after a silence long enough (about 4.6 tau) to decay
            // below 1% of this event starts afresh, so its rate is not diluted
            // by the silent window since it was first seen.
            if (entry.count < scaled * 0.01) entry = Entry{key, 0, 0, now_s};
            entry.count += scaled;
            return;
        }
        if (entries_.size() < capacity_) {
            entries_.push_back(Entry{key, scaled, 0, now_s});
            return;
        }
        auto smallest = std::min_element(entries_.begin(), entries_.end(),
                                         [](const Entry& a, const Entry& b) { return a.count < b.count; });
        *smallest = Entry{key, smallest->count + scaled, smallest->count, now_s};
    }

    // The k keys with the most decayed counts, most first. Left out: keys
    // whose rate decayed below `min_rate`, and counters more than half of
    // which may belong to displaced keys (many equal keys: none stands out).
    std::vector<Ranked> top(size_t k, double now_s, double min_rate = 0.01) const {
        if (!started_) return {};
        // Ranked by decayed count, as Space-Saving guarantees; the rate divides
        // by the window the count covers: since first seen, or since the start
        // for an entry that inherited a displaced key's count.
        std::vector<const Entry*> order;
        order.reserve(entries_.size());
        for (const Entry& entry : entries_) order.push_back(&entry);
        std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) { return a->count > b->count; });
        const double decay = 1.0 / boost(now_s);
        const double total = decayed_total(now_s);
        std::vector<Ranked> out;
        for (const Entry* entry : order) {
            if (out.size() == k) break;
            const double span = window(entry->error > 0 ? start_ : entry->first_seen, now_s);
            const double rate = entry->count * decay / span;
            if (rate < min_rate || entry->error * 2 > entry->count) continue;
            out.push_back(Ranked{entry->key, rate, entry->count * decay,
                                 total > 0 ? std::min(entry->count * decay / total, 1.0) : 0,
                                 entry->error * decay / span});
        }
        return out;
    }

    // Decayed weight per second over every key, tracked or not.
    double total_per_second(double now_s) const {
        return started_ ? total_ / boost(now_s) / window(start_, now_s) : 0.0;
    }
    // Decayed weight over every key, tracked or not.
    double decayed_total(double now_s) const { return started_ ? total_ / boost(now_s) : 0.0; }
    size_t tracked() const { return entries_.size(); }

  private:
    // Rescale before e^x loses precision or overflows a double (e^700 is near the limit).
    static constexpr double kMaxExponent = 200.0;
    // A key seen once should not read as an infinite rate.
    static constexpr double kMinWindowSeconds = 1.0;

    struct Entry {
        Key key;
        double count;       // forward-decayed
        double error;       // forward-decayed
        double first_seen;  // when this entry started counting
    };

    double boost(double now_s) const { return std::exp((now_s - landmark_) / tau_); }  // e^((now - landmark) / tau)
    // The decayed length of [since, now]: what a steady rate of 1 would count.
    double window(double since_s, double now_s) const {
        return tau_ * -std::expm1(-std::max(now_s - since_s, kMinWindowSeconds) / tau_);
    }
    void rescale(double now_s) {
        const double factor = 1.0 / boost(now_s);
        for (Entry& entry : entries_) {
            entry.count *= factor;
            entry.error *= factor;
        }
        total_ *= factor;
        landmark_ = now_s;
    }

    size_t capacity_;
    double tau_;
    double landmark_ = 0;
    double start_ = 0;  // the first add()
    bool started_ = false;
    double total_ = 0;  // forward-decayed
    std::vector<Entry> entries_;
};

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

    explicit HotSources(size_t capacity = kDefaultCapacity, double tau_seconds = kDefaultTauSeconds)
        : top_(capacity, tau_seconds) {}

    // `now_s` must not go backwards (a monotonic clock in seconds).
    // `verdict` is the drop event's: DROP, or WOULD_DROP from a class in shadow.
    // A weight of 0 (a penalty-started event: the drop it reports is in a
    // sampled event's weight) is ignored.
    void add(const sluice_source_key& key, double weight, double now_s, uint8_t verdict = SLUICE_VERDICT_DROP);
    // The k sources with the most decayed drops, most first (DecayedTopK::top).
    std::vector<HotSource> top(size_t k, double now_s, double min_rate = 0.01) const;
    // Decayed drops per second over every source, tracked or not.
    double total_drops_per_second(double now_s) const { return top_.total_per_second(now_s); }
    // Decayed drops over every source, tracked or not.
    double decayed_drops_total(double now_s) const { return top_.decayed_total(now_s); }
    size_t tracked() const { return top_.tracked(); }

  private:
    struct SourceVerdict {
        sluice_source_key key;
        uint8_t verdict;
        bool operator==(const SourceVerdict& other) const;
    };
    DecayedTopK<SourceVerdict> top_;
};

}  // namespace sluice
