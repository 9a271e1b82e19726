// SPDX-License-Identifier: Apache-2.0
// The DPDK dataplane's state, shared by its two halves and not part of its
// interface (dpdk_dataplane.h is): dpdk_worker.cpp, the per-packet path each
// worker runs on its own lcore, and dpdk_dataplane.cpp, the control side that
// allocates the tables, writes policy slots and reads counters. Both see each
// worker's state, the policy slots and the shared tables laid out here, and
// the core's per-packet accounting (sluice/account.h) bound to a worker.
#pragma once

#include <rte_common.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include <cstdint>
#include <vector>

#include "dpdk_dataplane.h"

#include "sluice/host_lock.h"
// (the lock above is what decide.h uses)
#include "sluice/decide.h"
#include "sluice/shape.h"

namespace sluice {

// TSC cycles to ns without overflow for centuries of uptime.
__extension__ typedef unsigned __int128 uint128;
inline uint64_t cycles_to_ns(uint64_t cycles, uint64_t hz) {
    return static_cast<uint64_t>(static_cast<uint128>(cycles) * 1'000'000'000u / hz);
}

// One class's shaping queue on one worker: a FIFO ring of held frames with
// their deadlines, sized to the next power of two of the policy's bound and
// allocated the first time the class queues (policies rarely shape). Whether
// a frame may join and when it leaves is the core's (sluice/shape.h).
struct ShapedFrame {
    rte_mbuf* mbuf;
    uint64_t deadline_ns;
    uint8_t tcp_syn;  // as parsed on arrival: what it costs at a tcp_syn level
};

struct ShapeQueue {
    ShapedFrame* ring = nullptr;
    uint32_t capacity = 0;  // a power of two, 0 until first used
    uint32_t head = 0;
    sluice_shape_queue held{};  // frames waiting and their cost at the class aggregate
};

struct alignas(RTE_CACHE_LINE_SIZE) WorkerState {
    uint32_t index;
    PortQueue rx, tx;
    alignas(RTE_CACHE_LINE_SIZE) sluice_cpu_bucket class_buckets[SLUICE_MAX_CLASSES];
    sluice_cpu_bucket new_source_buckets[SLUICE_MAX_CLASSES];
    sluice_cpu_bucket global_bucket;
    // Written by this worker only; the control thread reads them relaxed.
    alignas(RTE_CACHE_LINE_SIZE) sluice_counter counters[SLUICE_COUNTER_SLOTS];
    sluice_counter ban_counters[SLUICE_MAX_BANS];  // by ban slot
    uint64_t stats[SLUICE_STAT_COUNT];
    uint64_t decide_cycles, decisions;
    sluice_drop_sampler sampler;  // where this worker's drop sampling stands
    uint32_t sample_period;       // set by the control thread after each drain
    uint32_t sample_random;       // xorshift32 state for the sampler's gaps; never 0
    rte_ring* events;             // sampled drops, single producer (this worker), single consumer (control)
    sluice_drop_event event;      // a sampled drop, filled here and copied into `events`
    ShapeQueue queues[SLUICE_MAX_CLASSES];
    uint64_t queued_classes[SLUICE_MAX_CLASSES / 64];  // bit per class with a non-empty queue
    // A frame spread over several mbufs (a jumbo frame in 2 KB buffers) is
    // parsed from a copy here: the parser needs the whole frame in one piece
    // to check IP lengths against it. The chain itself is forwarded.
    uint8_t frame_copy[UINT16_MAX + 1];
};

// The next of a worker's sampling gap draws (xorshift32: only sampled drops
// ask, so a few instructions of statistical quality are plenty).
inline uint32_t next_sample_random(uint32_t* state) {
    uint32_t x = *state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *state = x;
}

// What the core's per-packet accounting (sluice/account.h) reaches on one
// worker for one burst.
struct Accounting {
    WorkerState* state;
    uint64_t now;  // the burst's time, which drop events carry
};

}  // namespace sluice

#define SLUICE_ACCOUNT_CTX sluice::Accounting
#define SLUICE_COUNTER(ctx, index) (&(ctx)->state->counters[*(index)])
#define SLUICE_STAT_ADD(ctx, stat) ((ctx)->state->stats[stat]++)
#define SLUICE_DROP_SAMPLER(ctx) (&(ctx)->state->sampler)
#define SLUICE_DROP_SAMPLE_PERIOD(ctx) __atomic_load_n(&(ctx)->state->sample_period, __ATOMIC_RELAXED)
#define SLUICE_DROP_RANDOM(ctx) sluice::next_sample_random(&(ctx)->state->sample_random)
#define SLUICE_EVENT_RESERVE(ctx) (&(ctx)->state->event)
#define SLUICE_EVENT_SUBMIT(ctx, event) (rte_ring_sp_enqueue_elem((ctx)->state->events, (event), sizeof(*(event))) == 0)
#define SLUICE_EVENT_NOW(ctx) ((ctx)->now)
#define SLUICE_BAN_COUNTER(ctx, slot) (&(ctx)->state->ban_counters[*(slot)])
#include "sluice/account.h"

namespace sluice {

// What one family's trie in a slot was created for and holds now (the
// control side's record: workers never read it).
struct PrefixTableState {
    uint32_t rules = 0;                 // rules it was created for
    uint32_t groups = 0;                // tbl8 groups it was created for
    std::vector<PolicyPrefix> prefixes;  // what it holds, sorted by prefix_less
};

// The bans in force as the workers look them up: per family, a sorted array
// per prefix length, longest first, probed as the XDP program probes its
// hash (at most SLUICE_BAN_LENGTHS_MAX lengths).
// Built whole by set_bans and never changed after: a new set is a new table,
// swapped in under the RCU. Bans are few (max_bans), so this costs a binary
// search per length in use, where an rte_lpm would cost 64 MiB of tbl24.
struct BanTable {
    struct Entry {
        uint64_t hi, lo;  // the prefix's address, masked, as the core's source keys hold it
        sluice_ban ban;
    };
    struct Length {
        int length;
        std::vector<Entry> entries;  // sorted by (hi, lo)
    };
    std::vector<Length> v4, v6;  // longest first

    static BanTable build(const std::vector<DataplaneBan>& bans);
    bool empty() const { return v4.empty() && v6.empty(); }
    // The longest ban in force at `now` covering the packet's source, or nullptr.
    const sluice_ban* find(const sluice_packet& pkt, uint64_t now) const;
};

struct DpdkDataplane::Slot {
    sluice_policy_header header{};
    sluice_class_entry classes[SLUICE_MAX_CLASSES]{};
    sluice_shape_drain drains[SLUICE_MAX_CLASSES]{};  // by class id, for classes with an aggregate
    // Created the first time a policy has prefixes of the family (workers
    // look only when the header's has_prefixes_v4/v6 says so) and kept across
    // versions: freeing one costs a write of all its memory (see write_slot).
    rte_lpm* lpm4 = nullptr;
    rte_lpm6* lpm6 = nullptr;
    PrefixTableState table4, table6;
};

struct DpdkDataplane::Shared {
    // The source table: every worker's, as the XDP program's is every CPU's.
    sluice_source_set* sets = nullptr;
    uint32_t set_count = 0;  // a power of two
    sluice_hash_key hash_key{};
    sluice_shared_bucket* classes = nullptr;      // [SLUICE_MAX_CLASSES]
    sluice_shared_bucket* new_sources = nullptr;  // [SLUICE_MAX_CLASSES]
    sluice_shared_bucket* global = nullptr;       // [1]
    sluice_fleet_credit* fleet = nullptr;         // [SLUICE_MAX_CLASSES]: credit leased for fleet quotas
};

}  // namespace sluice
