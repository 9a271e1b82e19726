// SPDX-License-Identifier: Apache-2.0
// What the control plane drives: one enforcement point (XDP or DPDK) that
// runs one policy version at a time. PolicyService works through Dataplane so
// its push/rollback logic is the same for every dataplane and can be tested
// against a fake; the daemon serves and observes EnforcementPoints.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "compiled_policy.h"
#include "result.h"
#include "sluice/abi.h"

namespace sluice {

class Dataplane {
  public:
    virtual ~Dataplane() = default;

    // Makes `policy` the running one. All-or-nothing from the caller's view:
    // on error the running policy is untouched.
    virtual Status apply(const CompiledPolicy& policy) = 0;
    // The running policy's version (0 before the first apply).
    virtual Result<uint64_t> active_version() = 0;
};

// Cumulative time spent deciding and decisions made (XDP: the kernel's BPF run-time statistics).
struct DecisionCost {
    uint64_t time_ns = 0;
    uint64_t decisions = 0;
};

// What the daemon serves and observes: a Dataplane that also reports what it
// decided. The daemon's control loop is the only caller.
class EnforcementPoint : public Dataplane {
  public:
    // class x verdict x reason, summed over CPUs (lcores); index with sluice_counter_index.
    virtual Result<std::vector<sluice_counter>> counters() = 0;
    virtual Result<std::array<uint64_t, SLUICE_STAT_COUNT>> stats() = 0;
    // Calls on_event for every queued sampled drop; never blocks.
    virtual Result<size_t> drain_events(const std::function<void(const sluice_drop_event&)>& on_event) = 0;
    // Sources in the tables: (per-CPU or per-lcore tables, shared table).
    virtual Result<std::pair<size_t, size_t>> source_counts() = 0;
    // Deletes source entries idle long enough that a fresh bucket is the same
    // as theirs; `now_ns` is CLOCK_MONOTONIC. Returns how many were deleted.
    virtual Result<size_t> collect_idle_sources(uint64_t now_ns) = 0;
    // All zeros while decision_cost_enabled() is false.
    virtual DecisionCost decision_cost() = 0;
    virtual bool decision_cost_enabled() const = 0;
    // "xdp" or "dpdk": shown in status.
    virtual std::string kind() const = 0;
};

}  // namespace sluice
