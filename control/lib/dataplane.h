// SPDX-License-Identifier: Apache-2.0
// Layer: control/lib, the control library. Includes the core and its own
// folder only (no libbpf, no DPDK, nothing of xdp/, daemon/ or cli/).
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
#include <vector>

#include "compiled_policy.h"
#include "result.h"
#include "sluice/abi.h"
#include "sluice/fleet.h"
#include "sluice/source_table.h"

namespace sluice {

class Dataplane {
  public:
    virtual ~Dataplane() = default;

    // Makes `policy` the running one. All-or-nothing from the caller's view:
    // on error the running policy is untouched.
    virtual Status apply(const CompiledPolicy& policy) = 0;
    // The running policy's version (0 before the first apply).
    virtual Result<uint64_t> active_version() = 0;
    // Work for after an apply's reply, which the control loop calls between
    // requests: bringing the slot just left up to the running version, so
    // that the next apply writes only its changes. Returns at once when
    // there is nothing to do; a failure costs the next apply a full write.
    virtual Status settle() { return ok_status(); }
};

// The source table at one moment. Entries free themselves (a source whose
// bucket is full again needs none), so `in_debt` is what the table holds;
// `known` also counts free entries that still carry their source's tag.
struct SourceTableUsage {
    uint64_t capacity = 0;  // entries (sets x SLUICE_SET_WAYS)
    uint64_t in_debt = 0;   // sources ahead of their schedule: the table's occupancy
    uint64_t known = 0;     // entries in use, in debt or not
};

// Counts the source table's `set_count` sets as of `now_ns`, on the clock its
// TATs are kept in, and empties each free entry unused for SLUICE_STALE_NS, as
// a new source's scan of its sets would: run every few seconds, it keeps an
// entry nobody touches from coming round (TAT modulo 2^45) to look in debt.
// The dataplane writes while this runs: each entry is read once, atomically,
// and emptied only by a compare-and-swap of what was read.
inline SourceTableUsage survey_source_table(sluice_source_set* sets, uint32_t set_count, uint64_t now_ns) {
    SourceTableUsage usage;
    usage.capacity = static_cast<uint64_t>(set_count) * SLUICE_SET_WAYS;
    for (uint32_t s = 0; s < set_count; s++) {
        for (__u64& entry : sets[s].entry) {
            __u64 word = __atomic_load_n(&entry, __ATOMIC_RELAXED);
            if (!(word & SLUICE_ENTRY_TAG_MASK)) continue;
            const bool in_debt = (word & SLUICE_ENTRY_PENDING) || sluice_entry_debt(word, now_ns);
            if (!in_debt && sluice_entry_free_for(word, now_ns) >= SLUICE_STALE_NS &&
                __atomic_compare_exchange_n(&entry, &word, 0, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
                continue;
            usage.known++;
            if (in_debt) usage.in_debt++;
        }
    }
    return usage;
}

// A ban as a dataplane enforces it (sluice/abi.h, "bans"): its prefix, when
// it ends on the dataplane's clock (EnforcementPoint::now_ns), and the slot of
// its drop counter. The daemon's BanStore (bans.h) decides what is banned.
struct DataplaneBan {
    PolicyPrefix prefix;  // class_id unused
    uint64_t until_ns = 0;
    uint32_t slot = 0;  // below SLUICE_MAX_BANS, one ban per slot
};

// What every dataplane refuses in a set of bans, before it changes anything:
// a slot out of range or used twice, a prefix twice, host bits set, more than
// SLUICE_BAN_LENGTHS_MAX prefix lengths in one family.
Status check_bans(const std::vector<DataplaneBan>& bans);

// The prefix lengths a set of bans uses per family, longest first: the
// probes a packet of that family makes.
struct BanLengths {
    std::vector<uint8_t> v4, v6;
};
BanLengths ban_lengths(const std::vector<DataplaneBan>& bans);

// Failed syscalls of a kernel dataplane (XDP), counted by what they were for.
enum class SyscallOp : uint8_t { load, map_lookup, map_update, map_delete, link, pin, ring_buffer, count };
using SyscallErrorCounts = std::array<uint64_t, static_cast<size_t>(SyscallOp::count)>;

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
    // Now on the clock the dataplane decides by and stamps its events with
    // (CLOCK_MONOTONIC, or a test clock): what an event's time_ns compares with.
    virtual uint64_t now_ns() const = 0;
    // The source table now: capacity and occupancy (a scan of the table,
    // which also empties entries unused for hours: survey_source_table).
    virtual Result<SourceTableUsage> source_table() = 0;
    // All zeros while decision_cost_enabled() is false.
    virtual DecisionCost decision_cost() = 0;
    virtual bool decision_cost_enabled() const = 0;
    // "xdp" or "dpdk": shown in status.
    virtual std::string kind() const = 0;
    // Class aggregates and per-source levels whose counts an apply started
    // from fresh state (carry_previous_limits), since this dataplane was opened.
    virtual uint64_t window_restarts() const = 0;
    // Makes `bans` the bans in force in place of the last set (check_bans;
    // on error nothing changes). The next packet sees them.
    virtual Status set_bans(const std::vector<DataplaneBan>& bans) = 0;
    // Packets and bytes each ban slot dropped since the dataplane's counters
    // were created, summed over CPUs (workers): SLUICE_MAX_BANS of them.
    virtual Result<std::vector<sluice_counter>> ban_counters() = 0;
    // The credit of fleet quotas, one cell per class id (SLUICE_MAX_CLASSES),
    // shared with the packet path, which spends it (sluice/fleet.h); the
    // fleet leaser grants into it. Valid for this dataplane's lifetime.
    virtual sluice_fleet_credit* fleet_credits() = 0;
};

}  // namespace sluice
