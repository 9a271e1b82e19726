// SPDX-License-Identifier: Apache-2.0
#include "penalties.h"

#include <algorithm>
#include <cstring>

namespace sluice {

bool PenaltiesInForce::SourceOrder::operator()(const sluice_source_key& a, const sluice_source_key& b) const {
    if (a.class_id != b.class_id) return a.class_id < b.class_id;
    if (a.family != b.family) return a.family < b.family;
    return std::memcmp(a.addr, b.addr, sizeof(a.addr)) < 0;
}

PenaltiesInForce::PenaltiesInForce(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {}

void PenaltiesInForce::start(const sluice_source_key& source, uint64_t started_ns, uint64_t for_ns, uint64_t now_ns) {
    if (for_ns == 0) {
        untracked_++;
        return;
    }
    // Saturating: a stamp near the top of the clock must not wrap to an end long past.
    const uint64_t end = started_ns > UINT64_MAX - for_ns ? UINT64_MAX : started_ns + for_ns;
    if (end <= now_ns) return;  // over before the daemon heard of it
    expire(now_ns);
    const auto found = ends_.find(source);
    if (found != ends_.end()) {
        found->second = std::max(found->second, end);
        return;
    }
    if (ends_.size() >= capacity_) {
        untracked_++;
        return;
    }
    ends_.emplace(source, end);
    earliest_end_ = std::min(earliest_end_, end);
}

void PenaltiesInForce::expire(uint64_t now_ns) {
    if (now_ns < earliest_end_) return;
    uint64_t earliest = UINT64_MAX;
    for (auto it = ends_.begin(); it != ends_.end();) {
        if (it->second <= now_ns) {
            it = ends_.erase(it);
        } else {
            earliest = std::min(earliest, it->second);
            ++it;
        }
    }
    earliest_end_ = earliest;
}

std::optional<uint64_t> PenaltiesInForce::ends_at(const sluice_source_key& source, uint64_t now_ns) const {
    const auto found = ends_.find(source);
    if (found == ends_.end() || found->second <= now_ns) return std::nullopt;
    return found->second;
}

size_t PenaltiesInForce::active(uint64_t now_ns) const {
    return static_cast<size_t>(
        std::count_if(ends_.begin(), ends_.end(), [now_ns](const auto& entry) { return entry.second > now_ns; }));
}

std::map<uint32_t, uint64_t> PenaltiesInForce::active_by_class(uint64_t now_ns) const {
    std::map<uint32_t, uint64_t> by_class;
    for (const auto& [source, end] : ends_)
        if (end > now_ns) by_class[source.class_id]++;
    return by_class;
}

}  // namespace sluice
