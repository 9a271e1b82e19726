// SPDX-License-Identifier: Apache-2.0
// The penalties in force on one dataplane (the penalty box: sluice/decide.h,
// "penalties"), as the daemon learns them from the dataplane's drop events
// flagged SLUICE_EVENT_PENALTY_STARTED: per source, when its penalty ends.
// /metrics counts them (sluice_penalties_active) and `sluicectl top` marks
// the ranked sources that are in the box.
//
// Times are on the dataplane's clock (EnforcementPoint::now_ns(), the clock
// that stamps its events), so a test clock, or a DPDK worker's clock scaled
// from the TSC, compares with them as the dataplane's own decisions do.
//
// What it holds is what the events said. A penalty whose event a full ring
// lost (drop_events_lost) is missing here although the dataplane enforces
// it; the dataplane's own count of penalties imposed is the `penalties`
// stat. The end is the event's time plus the class's `for` when the daemon
// reads the event (at most a drain interval later: a push in between that
// changed `for` is the only way the two can differ). A penalty the
// dataplane ended early (a change of the class's per-source algorithm
// starts its sources afresh) stays listed here until its end.
//
// Bounded: at most `capacity` penalties. When every one is still in force, a
// new penalty is turned away and counted in untracked(), as is one of a
// class that no longer has a penalty by the time its event is read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>

#include "sluice/abi.h"

namespace sluice {

class PenaltiesInForce {
  public:
    // 16384 penalties of one dataplane take about 1.3 MiB (a map node each);
    // a flood that puts more sources than that in the box at once shows in
    // untracked().
    static constexpr size_t kDefaultCapacity = 16384;

    explicit PenaltiesInForce(size_t capacity = kDefaultCapacity);

    // A penalty of `source` that started at `started_ns` and lasts `for_ns`
    // (0: the class has no penalty, so its end is unknown: counted as
    // untracked). A source already in the box keeps the later of the two
    // ends. `now_ns` first clears the penalties that are over, to make room.
    void start(const sluice_source_key& source, uint64_t started_ns, uint64_t for_ns, uint64_t now_ns);
    // Forgets the penalties that are over by `now_ns`.
    void expire(uint64_t now_ns);

    // When the penalty of `source` ends, if one is in force at `now_ns`.
    std::optional<uint64_t> ends_at(const sluice_source_key& source, uint64_t now_ns) const;
    // Penalties in force at `now_ns`.
    size_t active(uint64_t now_ns) const;
    // Penalties in force at `now_ns`, by the class id of their source.
    std::map<uint32_t, uint64_t> active_by_class(uint64_t now_ns) const;
    // Penalties turned away since this tracker was made (see above).
    uint64_t untracked() const { return untracked_; }
    size_t capacity() const { return capacity_; }

  private:
    // Orders sources by class, family and address: the key's own fields, so
    // its padding never matters.
    struct SourceOrder {
        bool operator()(const sluice_source_key& a, const sluice_source_key& b) const;
    };

    size_t capacity_;
    std::map<sluice_source_key, uint64_t, SourceOrder> ends_;  // source -> end, on the dataplane's clock
    // No penalty ends before this (it may be earlier than the earliest end):
    // until then expire() has nothing to look for, so a flood of penalties
    // into a full tracker costs a lookup each, not a scan.
    uint64_t earliest_end_ = UINT64_MAX;
    uint64_t untracked_ = 0;
};

}  // namespace sluice
