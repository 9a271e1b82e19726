// SPDX-License-Identifier: Apache-2.0
#include "hot_sources.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace sluice {
namespace {

// Rescale before e^x loses precision or overflows a double (e^700 is near the limit).
constexpr double kMaxExponent = 200.0;
// A source seen once should not read as an infinite rate.
constexpr double kMinWindowSeconds = 1.0;

bool same_key(const sluice_source_key& a, const sluice_source_key& b) {
    return a.class_id == b.class_id && a.family == b.family && std::memcmp(a.addr, b.addr, sizeof(a.addr)) == 0;
}

}  // namespace

HotSources::HotSources(size_t capacity, double tau_seconds)
    : capacity_(std::max<size_t>(capacity, 1)), tau_(tau_seconds > 0 ? tau_seconds : kDefaultTauSeconds) {
    entries_.reserve(capacity_);
}

double HotSources::boost(double now_s) const { return std::exp((now_s - landmark_) / tau_); }

double HotSources::window(double since_s, double now_s) const {
    return tau_ * -std::expm1(-std::max(now_s - since_s, kMinWindowSeconds) / tau_);
}

void HotSources::rescale(double now_s) {
    const double factor = 1.0 / boost(now_s);
    for (Entry& entry : entries_) {
        entry.count *= factor;
        entry.error *= factor;
    }
    total_ *= factor;
    landmark_ = now_s;
}

void HotSources::add(const sluice_source_key& key, double weight, double now_s, uint8_t verdict) {
    if (!started_) {
        landmark_ = now_s;
        start_ = now_s;
        started_ = true;
    }
    if ((now_s - landmark_) / tau_ > kMaxExponent) rescale(now_s);
    const double scaled = weight * boost(now_s);
    total_ += scaled;
    for (Entry& entry : entries_) {
        if (!same_key(entry.key, key) || entry.verdict != verdict) continue;
        // A source back after a silence long enough (about 4.6 tau) to decay
        // below 1% of this event starts afresh, so its rate is not diluted by
        // the silent window since it was first seen.
        if (entry.count < scaled * 0.01) entry = Entry{key, verdict, 0, 0, now_s};
        entry.count += scaled;
        return;
    }
    if (entries_.size() < capacity_) {
        entries_.push_back(Entry{key, verdict, scaled, 0, now_s});
        return;
    }
    auto smallest = std::min_element(entries_.begin(), entries_.end(),
                                     [](const Entry& a, const Entry& b) { return a.count < b.count; });
    *smallest = Entry{key, verdict, smallest->count + scaled, smallest->count, now_s};
}

std::vector<HotSource> HotSources::top(size_t k, double now_s, double min_rate) const {
    if (!started_) return {};
    // Ranked by decayed count, as Space-Saving guarantees; the rate divides
    // by the window the count covers: since first seen, or since the start
    // for an entry that inherited a displaced source's count.
    std::vector<const Entry*> order;
    order.reserve(entries_.size());
    for (const Entry& entry : entries_) order.push_back(&entry);
    std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) { return a->count > b->count; });
    const double decay = 1.0 / boost(now_s);
    const double total = decayed_drops_total(now_s);
    std::vector<HotSource> out;
    for (const Entry* entry : order) {
        if (out.size() == k) break;
        const double span = window(entry->error > 0 ? start_ : entry->first_seen, now_s);
        const double rate = entry->count * decay / span;
        // Mostly inherited from displaced sources: nothing says it stands out.
        if (rate < min_rate || entry->error * 2 > entry->count) continue;
        out.push_back(HotSource{entry->key, rate, entry->count * decay,
                                total > 0 ? std::min(entry->count * decay / total, 1.0) : 0,
                                entry->error * decay / span, entry->verdict});
    }
    return out;
}

double HotSources::decayed_drops_total(double now_s) const { return started_ ? total_ / boost(now_s) : 0.0; }

double HotSources::total_drops_per_second(double now_s) const {
    return started_ ? total_ / boost(now_s) / window(start_, now_s) : 0.0;
}

}  // namespace sluice
