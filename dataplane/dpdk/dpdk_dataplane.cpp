// SPDX-License-Identifier: Apache-2.0
#include "dpdk_dataplane.h"

#include <arpa/inet.h>
#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lpm.h>
#include <rte_lpm6.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "clock.h"
#include "eal.h"
#include "rate_limits.h"

#include "sluice/host_lock.h"
// (the lock above is what decide.h uses)
#include "sluice/decide.h"
#include "sluice/shape.h"

namespace sluice {
namespace {

constexpr uint16_t kBurst = 32;
// Shaped frames released per poll: with a burst of new frames, what one TX
// burst array holds.
constexpr uint16_t kReleaseMax = 32;
constexpr uint32_t kEventRingSize = 4096;

// TSC cycles to ns without overflow for centuries of uptime.
__extension__ typedef unsigned __int128 uint128;
uint64_t cycles_to_ns(uint64_t cycles, uint64_t hz) {
    return static_cast<uint64_t>(static_cast<uint128>(cycles) * 1'000'000'000u / hz);
}

std::string rte_error(const std::string& what) { return what + ": " + dpdk_error(rte_errno); }

// Each table gets a name no other in the process has: rte_* objects are
// registered by name, and a process may hold several dataplanes (tests do).
std::string table_name(const char* what) {
    static std::atomic<uint64_t> created{0};
    return std::string("sluice_") + what + "_" + std::to_string(created++);
}

}  // namespace

// One class's shaping queue on one worker: a FIFO ring of held frames with
// their deadlines, sized to the next power of two of the policy's bound and
// allocated the first time the class queues (policies rarely shape). Whether
// a frame may join and when it leaves is the core's (sluice/shape.h).
struct ShapedFrame {
    rte_mbuf* mbuf;
    uint64_t deadline_ns;
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
    uint64_t stats[SLUICE_STAT_COUNT];
    uint64_t decide_cycles, decisions;
    __u64 drops_seen;         // drives 1-in-N drop event sampling
    rte_ring* events;         // sampled drops, single producer (this worker), single consumer (control)
    sluice_drop_event event;  // a sampled drop, filled here and copied into `events`
    ShapeQueue queues[SLUICE_MAX_CLASSES];
    uint64_t queued_classes[SLUICE_MAX_CLASSES / 64];  // bit per class with a non-empty queue
};

// What the core's per-packet accounting (sluice/account.h) reaches on one
// worker for one burst.
struct Accounting {
    WorkerState* state;
    uint64_t now;          // the burst's time, which drop events carry
    uint32_t sample_mask;  // one drop in (mask + 1) becomes an event
};

}  // namespace sluice

#define SLUICE_ACCOUNT_CTX sluice::Accounting
#define SLUICE_COUNTER(ctx, index) (&(ctx)->state->counters[*(index)])
#define SLUICE_STAT_ADD(ctx, stat) ((ctx)->state->stats[stat]++)
#define SLUICE_DROP_COUNT(ctx) (&(ctx)->state->drops_seen)
#define SLUICE_DROP_SAMPLE_MASK(ctx) ((ctx)->sample_mask)
#define SLUICE_EVENT_RESERVE(ctx) (&(ctx)->state->event)
#define SLUICE_EVENT_SUBMIT(ctx, event) (rte_ring_sp_enqueue_elem((ctx)->state->events, (event), sizeof(*(event))) == 0)
#define SLUICE_EVENT_NOW(ctx) ((ctx)->now)
#include "sluice/account.h"

namespace sluice {

struct DpdkDataplane::Slot {
    sluice_policy_header header{};
    sluice_class_entry classes[SLUICE_MAX_CLASSES]{};
    sluice_shape_drain drains[SLUICE_MAX_CLASSES]{};  // by class id, for classes with an aggregate
    rte_lpm* lpm4 = nullptr;
    rte_lpm6* lpm6 = nullptr;
};

struct DpdkDataplane::Shared {
    // The source table: every worker's, as the XDP program's is every CPU's.
    sluice_source_set* sets = nullptr;
    uint32_t set_count = 0;  // a power of two
    sluice_hash_key hash_key{};
    sluice_shared_bucket* classes = nullptr;      // [SLUICE_MAX_CLASSES]
    sluice_shared_bucket* new_sources = nullptr;  // [SLUICE_MAX_CLASSES]
    sluice_shared_bucket* global = nullptr;       // [1]
};

// ---- the fast path -------------------------------------------------------------

// The parts of a frame's decision that need the tables; a friend of
// DpdkDataplane, so it reaches the slot and shared tables.
class WorkerPath {
  public:
    using Slot = DpdkDataplane::Slot;
    using Shared = DpdkDataplane::Shared;

    // What one worker decides one burst with: the clock read once for the
    // burst (in Accounting), and where the frames go.
    struct BurstContext : Accounting {
        Shared* shared;
        rte_mbuf** forward;
        uint16_t forwarded;
        rte_mbuf** dropped;
        uint16_t drops;

        // Release stops when the burst's arrays hold this many frames, so
        // a full burst of new ones still fits.
        bool release_room() const { return forwarded + drops < kReleaseMax; }
    };

    // Counts a decision (and samples it if it dropped a known source) and
    // routes the frame by it.
    static void finish(BurstContext& ctx, rte_mbuf* m, uint32_t class_id, sluice_decision d, uint32_t frame_len,
                       const sluice_source_key* key) {
        sluice_account(&ctx, class_id, d, frame_len, key);
        if (d.verdict == SLUICE_VERDICT_PASS)
            ctx.forward[ctx.forwarded++] = m;
        else
            ctx.dropped[ctx.drops++] = m;
    }

    static uint32_t classify(const Slot& slot, const sluice_packet& pkt) {
        uint32_t class_id = 0;
        const bool ipv4 = pkt.family == SLUICE_FAMILY_IPV4;
        if (!(ipv4 ? slot.header.has_prefixes_v4 : slot.header.has_prefixes_v6)) return slot.header.default_class_id;
        if (ipv4) {
            uint32_t addr;
            std::memcpy(&addr, pkt.src, 4);
            if (rte_lpm_lookup(slot.lpm4, ntohl(addr), &class_id) == 0) return class_id;
        } else if (rte_lpm6_lookup(slot.lpm6, pkt.src, &class_id) == 0) {
            return class_id;
        }
        return slot.header.default_class_id;
    }

    // Every level of `cls` on this worker but the source's two sets, which
    // decide_burst finds (and prefetches) for the whole burst first.
    static void levels_of(sluice_levels* levels, const Slot& slot, const sluice_class_entry& cls,
                          const sluice_source_key& key, WorkerState* state, Shared* shared) {
        const uint32_t id = sluice_class_slot(cls.class_id);
        // Field by field: zeroing the whole struct first compiles to a
        // `rep stos`, which cost more per frame than the rest of this.
        if (cls.per_source.enabled)
            sluice_source_ref_make(&levels->source, &cls, &key, &shared->hash_key, shared->set_count - 1);
        else
            levels->source = sluice_source_ref{};
        levels->new_sources = {&cls.new_sources, &state->new_source_buckets[id], &shared->new_sources[id]};
        set_upper_levels(levels, slot, cls, state, shared);
    }

    // The class aggregate and global ceiling of `cls` on this worker; no
    // source level (what a shaped frame leaves its queue through).
    static void upper_levels(sluice_levels* levels, const Slot& slot, const sluice_class_entry& cls, WorkerState* state,
                             Shared* shared) {
        *levels = sluice_levels{};
        set_upper_levels(levels, slot, cls, state, shared);
    }

    static void set_upper_levels(sluice_levels* levels, const Slot& slot, const sluice_class_entry& cls,
                                 WorkerState* state, Shared* shared) {
        const uint32_t id = sluice_class_slot(cls.class_id);
        levels->aggregate = {&cls.aggregate, &state->class_buckets[id], &shared->classes[id]};
        levels->global = {&slot.header.global, &state->global_bucket, shared->global};
    }

    static sluice_decision decide(BurstContext& ctx, const sluice_levels& levels, uint32_t frame_len) {
        return sluice_decide_counted(&ctx, &levels, frame_len, ctx.now);
    }

    static bool grow_queue(ShapeQueue& q, uint32_t bound, int socket) {
        uint32_t capacity = 1;
        while (capacity < bound) capacity <<= 1;
        auto* ring = static_cast<ShapedFrame*>(
            rte_malloc_socket("sluice_shape", sizeof(ShapedFrame) * capacity, RTE_CACHE_LINE_SIZE, socket));
        if (ring == nullptr) return false;
        for (uint32_t i = 0; i < q.held.count; i++) ring[i] = q.ring[(q.head + i) & (q.capacity - 1)];
        rte_free(q.ring);
        q.ring = ring;
        q.capacity = capacity;
        q.head = 0;
        return true;
    }

    // A frame of a shaped class: sent now if the class (and everything else)
    // admits it and nothing waits ahead of it; otherwise held in the class's
    // queue if the core admits it there; otherwise refused, by reason.
    static void shape(BurstContext& ctx, rte_mbuf* m, const sluice_class_entry& cls, const sluice_shape_drain& drain,
                      const sluice_levels& levels, const sluice_source_key& key, uint32_t frame_len) {
        WorkerState* state = ctx.state;
        const uint32_t id = sluice_class_slot(cls.class_id);
        ShapeQueue& q = state->queues[id];

        if (q.held.count == 0) {
            const sluice_decision d = decide(ctx, levels, frame_len);
            if (!sluice_shape_may_wait(d)) {
                finish(ctx, m, cls.class_id, d, frame_len, &key);
                return;
            }
            // Only the class refused, so far nothing is spent.
        } else if (sluice_source_active(&levels.source)) {
            // Frames wait: this one's source is checked before the queue.
            sluice_source_look look{};
            sluice_decision d{};
            const int verdict = sluice_source_settle(
                &levels.source, sluice_source_cost_ns(&levels.source.limit->current, frame_len), ctx.now, &look, &d);
            if (verdict <= 0) {
                if (verdict < 0) d = sluice_contended();
                sluice_count_table_event(&ctx, d.table);
                finish(ctx, m, cls.class_id, d, frame_len, &key);
                return;
            }
        }

        const uint64_t cost = sluice_level_cost_nano(levels.aggregate.limit, frame_len);
        sluice_shape_admission admission =
            sluice_shape_admit(&cls.shape, &drain, &q.held, &levels.aggregate, cost, ctx.now);
        if (admission.reason == SLUICE_REASON_SHAPED && q.capacity < cls.shape.queue_packets &&
            !grow_queue(q, std::min(cls.shape.queue_packets, SLUICE_SHAPE_QUEUE_MAX),
                        static_cast<int>(rte_socket_id())))
            admission.reason = SLUICE_REASON_QUEUE_FULL;  // no memory for the queue: as good as full
        if (admission.reason != SLUICE_REASON_SHAPED) {
            finish(ctx, m, cls.class_id,
                   sluice_decision_make(SLUICE_VERDICT_DROP, admission.reason, SLUICE_LEVEL_CLASS), frame_len, &key);
            return;
        }
        // Joining the queue pays the levels below the aggregate (the source
        // and the new-source budget); leaving it pays the rest.
        sluice_levels lower = levels;
        lower.aggregate = sluice_level_ref{};
        lower.global = sluice_level_ref{};
        const sluice_decision paid = decide(ctx, lower, frame_len);
        if (paid.verdict != SLUICE_VERDICT_PASS) {
            finish(ctx, m, cls.class_id, paid, frame_len, &key);
            return;
        }
        q.ring[(q.head + q.held.count) & (q.capacity - 1)] = {m, admission.deadline_ns};
        sluice_shape_queue_push(&q.held, cost);
        state->queued_classes[id / 64] |= 1ull << (id % 64);
    }

    // Sends what the class rate allows from every non-empty queue, oldest
    // first; drops frames whose deadline passed while they waited (the global
    // ceiling can hold a queue back longer than predicted).
    static void release(BurstContext& ctx, const Slot& slot) {
        WorkerState* state = ctx.state;
        for (uint32_t word = 0; word < SLUICE_MAX_CLASSES / 64; word++) {
            uint64_t bits = state->queued_classes[word];
            while (bits != 0 && ctx.release_room()) {
                const uint32_t id = word * 64 + static_cast<uint32_t>(__builtin_ctzll(bits));
                bits &= bits - 1;
                release_class(ctx, slot, id);
            }
        }
    }

    static void release_class(BurstContext& ctx, const Slot& slot, uint32_t id) {
        WorkerState* state = ctx.state;
        ShapeQueue& q = state->queues[id];
        const sluice_class_entry& cls = slot.classes[id];
        // A new version may have stopped shaping the class: what it held was
        // admitted to the queue, so it goes out now.
        const bool still_shaped = cls.action == SLUICE_ACTION_LIMIT && cls.shape.queue_packets != 0;
        sluice_levels levels;
        upper_levels(&levels, slot, cls, state, ctx.shared);
        while (q.held.count > 0 && ctx.release_room()) {
            const ShapedFrame frame = q.ring[q.head];
            const uint32_t frame_len = frame.mbuf->pkt_len;
            sluice_decision d;
            if (!sluice_shape_release(still_shaped, &levels, frame_len, frame.deadline_ns, ctx.now, &d))
                return;  // not yet: the class bucket refills at its rate
            finish(ctx, frame.mbuf, id, d, frame_len, nullptr);
            q.head = (q.head + 1) & (q.capacity - 1);
            sluice_shape_queue_pop(&q.held, still_shaped ? sluice_level_cost_nano(&cls.aggregate, frame_len) : 0);
        }
        if (q.held.count == 0) state->queued_classes[id / 64] &= ~(1ull << (id % 64));
    }

    // Decides a burst in two passes, as DPDK's own table lookups do: the
    // first parses, classifies and hashes every frame and prefetches both of
    // its source's sets; by the second, which decides, they are in cache.
    static void decide_burst(BurstContext& ctx, const Slot& slot, rte_mbuf** pkts, uint16_t n) {
        WorkerState* state = ctx.state;
        Shared* shared = ctx.shared;
        sluice_packet parsed[kBurst];
        const sluice_class_entry* classes[kBurst];
        sluice_source_key keys[kBurst];
        sluice_levels levels[kBurst];

        for (uint16_t i = 0; i < n; i++) {
            rte_mbuf* m = pkts[i];
            classes[i] = nullptr;
            // The parser checks IP lengths against the frame: a frame split
            // over segments must be one piece first.
            if (m->nb_segs > 1 && rte_pktmbuf_linearize(m) != 0) {
                // Too long for one mbuf: its lengths cannot be checked, so
                // it gets the malformed verdict (README: --mbuf-size).
                parsed[i] = sluice_packet{};
                parsed[i].status = SLUICE_PARSE_TRUNCATED_IPV4;
                parsed[i].frame_len = m->pkt_len;
                continue;
            }
            const uint8_t* data = rte_pktmbuf_mtod(m, const uint8_t*);
            sluice_parse(data, data + m->data_len, &parsed[i]);
            if (parsed[i].status != SLUICE_PARSE_OK) continue;
            const sluice_class_entry& cls = slot.classes[sluice_class_slot(classify(slot, parsed[i]))];
            classes[i] = &cls;
            sluice_source_key_make(&keys[i], &parsed[i], &cls);
            if (cls.action != SLUICE_ACTION_LIMIT) continue;
            levels_of(&levels[i], slot, cls, keys[i], state, shared);
            if (!cls.per_source.enabled) continue;
            levels[i].source.home = &shared->sets[levels[i].source.home_index];
            levels[i].source.second = &shared->sets[levels[i].source.second_index];
            rte_prefetch0(levels[i].source.home);
            rte_prefetch0(levels[i].source.second);
        }

        for (uint16_t i = 0; i < n; i++) {
            rte_mbuf* m = pkts[i];
            const uint32_t frame_len = parsed[i].frame_len;
            if (classes[i] == nullptr) {
                finish(ctx, m, SLUICE_CLASS_UNCLASSIFIED, sluice_decide_unparsed(&slot.header, parsed[i].status),
                       frame_len, nullptr);
                continue;
            }
            const sluice_class_entry& cls = *classes[i];
            sluice_decision d;
            if (sluice_decide_action(&cls, &d)) {
                finish(ctx, m, cls.class_id, d, frame_len, &keys[i]);
                continue;
            }
            if (cls.shape.queue_packets != 0 && cls.aggregate.enabled) {
                shape(ctx, m, cls, slot.drains[sluice_class_slot(cls.class_id)], levels[i], keys[i], frame_len);
                continue;
            }
            finish(ctx, m, cls.class_id, decide(ctx, levels[i], frame_len), frame_len, &keys[i]);
        }
    }
};

uint16_t Worker::poll_once() {
    WorkerState* state = state_;
    DpdkDataplane* dp = dataplane_;
    rte_mbuf* pkts[kBurst];
    rte_mbuf* forward[kBurst + kReleaseMax];
    rte_mbuf* dropped[kBurst + kReleaseMax];

    const uint16_t received = rte_eth_rx_burst(state->rx.port, state->rx.queue, pkts, kBurst);
    const uint64_t now = dp->now_ns();
    // The one read of the active slot for this burst.
    const DpdkDataplane::Slot& slot = dp->slots_[dp->active_.load(std::memory_order_acquire)];
    WorkerPath::BurstContext ctx{
        {state, sluice_stamp(now), dp->options_.drop_sample_period - 1}, dp->shared_.get(), forward, 0, dropped, 0};

    const uint64_t start = rte_rdtsc();
    if (slot.header.version == 0) {
        // No policy yet: pass everything, as the XDP program does.
        state->stats[SLUICE_STAT_NO_POLICY] += received;
        std::copy(pkts, pkts + received, forward);
        ctx.forwarded = received;
    } else {
        // Frames already waiting go first: they are older than this burst.
        WorkerPath::release(ctx, slot);
        if (received > 0) WorkerPath::decide_burst(ctx, slot, pkts, received);
    }
    if (received > 0) {
        state->decide_cycles += rte_rdtsc() - start;
        state->decisions += received;
    }

    if (ctx.drops > 0) rte_pktmbuf_free_bulk(ctx.dropped, ctx.drops);
    if (ctx.forwarded > 0) {
        const uint16_t sent = rte_eth_tx_burst(state->tx.port, state->tx.queue, ctx.forward, ctx.forwarded);
        if (sent < ctx.forwarded) {
            state->stats[SLUICE_STAT_TX_FULL] += ctx.forwarded - sent;
            rte_pktmbuf_free_bulk(ctx.forward + sent, ctx.forwarded - sent);
        }
    }
    return received;
}

int Worker::run(const std::atomic<bool>& stop) {
    rte_rcu_qsbr* qsbr = dataplane_->qsbr_;
    const uint32_t id = state_->index;
    rte_rcu_qsbr_thread_online(qsbr, id);
    while (!stop.load(std::memory_order_relaxed)) {
        poll_once();
        rte_rcu_qsbr_quiescent(qsbr, id);
    }
    rte_rcu_qsbr_thread_offline(qsbr, id);
    return 0;
}

void Worker::set_ports(PortQueue rx, PortQueue tx) {
    state_->rx = rx;
    state_->tx = tx;
}

uint32_t Worker::index() const { return state_->index; }

uint32_t Worker::queued(uint32_t class_id) const { return state_->queues[sluice_class_slot(class_id)].held.count; }

// ---- the control side -------------------------------------------------------------

Result<std::unique_ptr<DpdkDataplane>> DpdkDataplane::create(const DpdkOptions& options) {
    if (options.workers == 0 || options.workers > RTE_MAX_LCORE)
        return Error{"workers must be in 1.." + std::to_string(RTE_MAX_LCORE)};
    if (options.source_capacity < SLUICE_SOURCE_CAPACITY_MIN || options.source_capacity > SLUICE_SOURCE_CAPACITY_MAX)
        return Error{"source_capacity must be in " + std::to_string(SLUICE_SOURCE_CAPACITY_MIN) + ".." +
                     std::to_string(SLUICE_SOURCE_CAPACITY_MAX)};
    if (options.drop_sample_period == 0 || (options.drop_sample_period & (options.drop_sample_period - 1)) != 0)
        return Error{"drop_sample_period must be a power of two"};
    std::unique_ptr<DpdkDataplane> dataplane(new DpdkDataplane());
    if (auto status = dataplane->allocate(options); !status) return status.error();
    return dataplane;
}

Status DpdkDataplane::allocate(const DpdkOptions& options) {
    options_ = options;
    const int socket = options.socket_id;
    slots_ = std::make_unique<Slot[]>(SLUICE_POLICY_SLOTS);
    shared_ = std::make_unique<Shared>();

    const size_t qsbr_size = rte_rcu_qsbr_get_memsize(options.workers);
    qsbr_ = static_cast<rte_rcu_qsbr*>(rte_zmalloc_socket("sluice_qsbr", qsbr_size, RTE_CACHE_LINE_SIZE, socket));
    if (qsbr_ == nullptr || rte_rcu_qsbr_init(qsbr_, options.workers) != 0)
        return Error{rte_error("allocating the RCU state of " + std::to_string(options.workers) + " workers")};

    // The source table: a power of two of sets, chosen by a key nobody
    // outside this process knows.
    shared_->set_count = SLUICE_SOURCE_SETS_MIN;
    while (uint64_t{shared_->set_count} * SLUICE_SET_WAYS < options.source_capacity) shared_->set_count *= 2;
    if (getrandom(&shared_->hash_key, sizeof(shared_->hash_key), 0) != static_cast<ssize_t>(sizeof(shared_->hash_key)))
        return Error{std::string("drawing the source table's hash key: ") + std::strerror(errno)};
    shared_->sets = static_cast<sluice_source_set*>(rte_zmalloc_socket(
        "sluice_sources", sizeof(sluice_source_set) * shared_->set_count, RTE_CACHE_LINE_SIZE, socket));
    shared_->classes = static_cast<sluice_shared_bucket*>(rte_zmalloc_socket(
        "sluice_shared_classes", sizeof(sluice_shared_bucket) * SLUICE_MAX_CLASSES, RTE_CACHE_LINE_SIZE, socket));
    shared_->new_sources = static_cast<sluice_shared_bucket*>(rte_zmalloc_socket(
        "sluice_shared_new_sources", sizeof(sluice_shared_bucket) * SLUICE_MAX_CLASSES, RTE_CACHE_LINE_SIZE, socket));
    shared_->global = static_cast<sluice_shared_bucket*>(
        rte_zmalloc_socket("sluice_shared_global", sizeof(sluice_shared_bucket), RTE_CACHE_LINE_SIZE, socket));
    if (!shared_->sets || !shared_->classes || !shared_->new_sources || !shared_->global)
        return Error{"out of DPDK memory for the source table (" +
                     std::to_string(uint64_t{shared_->set_count} * SLUICE_SET_WAYS) +
                     " entries) and shared buckets: raise the EAL's -m"};

    for (uint32_t i = 0; i < options.workers; i++) {
        auto* state = static_cast<WorkerState*>(
            rte_zmalloc_socket("sluice_worker", sizeof(WorkerState), RTE_CACHE_LINE_SIZE, socket));
        if (state == nullptr)
            return Error{"out of DPDK memory for worker " + std::to_string(i) + ": raise the EAL's -m"};
        states_.push_back(state);
        state->index = i;
        const std::string ring = table_name("events");
        state->events = rte_ring_create_elem(ring.c_str(), sizeof(sluice_drop_event), kEventRingSize, socket,
                                             RING_F_SP_ENQ | RING_F_SC_DEQ);
        if (state->events == nullptr)
            return Error{rte_error("creating the drop event ring of worker " + std::to_string(i))};
        if (rte_rcu_qsbr_thread_register(qsbr_, i) != 0)
            return Error{"registering worker " + std::to_string(i) + " for RCU"};
        workers_.push_back(Worker(this, state));
    }

    tsc_hz_ = rte_get_tsc_hz();
    if (tsc_hz_ == 0) return Error{"the EAL does not know the TSC frequency"};
    tsc_base_ = rte_rdtsc();
    ns_base_ = monotonic_ns();
    return ok_status();
}

DpdkDataplane::~DpdkDataplane() {
    for (WorkerState* state : states_) {
        for (ShapeQueue& q : state->queues) {
            for (uint32_t i = 0; i < q.held.count; i++) rte_pktmbuf_free(q.ring[(q.head + i) & (q.capacity - 1)].mbuf);
            rte_free(q.ring);
        }
        rte_ring_free(state->events);
        rte_free(state);
    }
    if (slots_) {
        for (uint32_t s = 0; s < SLUICE_POLICY_SLOTS; s++) {
            rte_lpm_free(slots_[s].lpm4);
            rte_lpm6_free(slots_[s].lpm6);
        }
    }
    if (shared_) {
        rte_free(shared_->sets);
        rte_free(shared_->classes);
        rte_free(shared_->new_sources);
        rte_free(shared_->global);
    }
    rte_free(qsbr_);
}

uint64_t DpdkDataplane::now_ns() const {
    if (options_.test_clock) return test_now_ns_.load(std::memory_order_relaxed);
    const uint64_t cycles = rte_rdtsc() - tsc_base_;
    return ns_base_ + cycles_to_ns(cycles, tsc_hz_);
}

void DpdkDataplane::set_test_clock(uint64_t now_ns) { test_now_ns_.store(now_ns, std::memory_order_relaxed); }

Status DpdkDataplane::write_slot(Slot& slot, const CompiledPolicy& policy) {
    // Nobody reads this slot (a grace period passed after it was last
    // active), so its old tries can go.
    rte_lpm_free(slot.lpm4);
    rte_lpm6_free(slot.lpm6);
    slot.lpm4 = nullptr;
    slot.lpm6 = nullptr;

    // Size the tries for this policy: a prefix longer than /24 needs a tbl8
    // group per further byte.
    uint32_t v4_rules = 1, v4_groups = 1, v6_rules = 1, v6_groups = 1;
    for (const PolicyPrefix& p : policy.prefixes) {
        const uint32_t groups = p.length > 24 ? (p.length - 24 + 7) / 8 : 0;
        if (p.family == SLUICE_FAMILY_IPV4) {
            v4_rules++;
            v4_groups += groups;
        } else {
            v6_rules++;
            v6_groups += groups;
        }
    }
    const std::string name4 = table_name("lpm4");
    const std::string name6 = table_name("lpm6");
    const rte_lpm_config config4{v4_rules, v4_groups, 0};
    rte_lpm6_config config6{v6_rules, v6_groups, 0};
    slot.lpm4 = rte_lpm_create(name4.c_str(), options_.socket_id, &config4);
    if (slot.lpm4 == nullptr) return Error{rte_error("creating the IPv4 prefix table")};
    slot.lpm6 = rte_lpm6_create(name6.c_str(), options_.socket_id, &config6);
    if (slot.lpm6 == nullptr) return Error{rte_error("creating the IPv6 prefix table")};
    for (const PolicyPrefix& p : policy.prefixes) {
        int err;
        if (p.family == SLUICE_FAMILY_IPV4) {
            uint32_t addr;
            std::memcpy(&addr, p.addr.data(), 4);
            err = rte_lpm_add(slot.lpm4, ntohl(addr), p.length, p.class_id);
        } else {
            err = rte_lpm6_add(slot.lpm6, p.addr.data(), p.length, p.class_id);
        }
        if (err != 0) return Error{"adding prefix of class " + std::to_string(p.class_id) + ": " + rte_strerror(-err)};
    }

    slot.header = policy.header;
    std::memset(slot.classes, 0, sizeof(slot.classes));
    std::memset(slot.drains, 0, sizeof(slot.drains));
    for (const sluice_class_entry& cls : policy.classes) {
        const uint32_t id = sluice_class_slot(cls.class_id);
        slot.classes[id] = cls;
        // Shaping predicts waits at this worker's part of the aggregate rate.
        if (cls.aggregate.enabled) slot.drains[id] = compile_shape_drain(cls.aggregate, worker_count());
    }
    return ok_status();
}

Status DpdkDataplane::apply(const CompiledPolicy& policy) {
    if (auto status = validate(policy); !status) return status;
    std::lock_guard lock(apply_mutex_);
    const Slot& running = slots_[active_.load(std::memory_order_relaxed)];
    std::vector<sluice_class_entry> running_classes;
    for (const sluice_class_entry& cls : running.classes)
        if (cls.class_id != SLUICE_CLASS_UNCLASSIFIED) running_classes.push_back(cls);
    CompiledPolicy carried = policy;
    carry_previous_source_limits(running_classes, carried);
    const uint32_t next = (active_.load(std::memory_order_relaxed) + 1) % SLUICE_POLICY_SLOTS;
    if (auto status = write_slot(slots_[next], carried); !status) return status;
    active_.store(next, std::memory_order_release);
    // Once every online worker has passed a quiescent state, none reads the
    // old slot: the next apply may rewrite it.
    rte_rcu_qsbr_synchronize(qsbr_, RTE_QSBR_THRID_INVALID);
    return ok_status();
}

Result<uint64_t> DpdkDataplane::active_version() {
    return slots_[active_.load(std::memory_order_acquire)].header.version;
}

Result<std::vector<sluice_counter>> DpdkDataplane::counters() {
    std::vector<sluice_counter> sums(SLUICE_COUNTER_SLOTS);
    for (const WorkerState* state : states_) {
        for (uint32_t i = 0; i < SLUICE_COUNTER_SLOTS; i++) {
            sums[i].packets += __atomic_load_n(&state->counters[i].packets, __ATOMIC_RELAXED);
            sums[i].bytes += __atomic_load_n(&state->counters[i].bytes, __ATOMIC_RELAXED);
        }
    }
    return sums;
}

Result<std::array<uint64_t, SLUICE_STAT_COUNT>> DpdkDataplane::stats() {
    std::array<uint64_t, SLUICE_STAT_COUNT> sums{};
    for (const WorkerState* state : states_) {
        for (uint32_t i = 0; i < SLUICE_STAT_COUNT; i++) sums[i] += __atomic_load_n(&state->stats[i], __ATOMIC_RELAXED);
    }
    return sums;
}

Result<size_t> DpdkDataplane::drain_events(const std::function<void(const sluice_drop_event&)>& on_event) {
    size_t drained = 0;
    sluice_drop_event events[64];
    for (WorkerState* state : states_) {
        unsigned n;
        while ((n = rte_ring_sc_dequeue_burst_elem(state->events, events, sizeof(sluice_drop_event), 64, nullptr)) >
               0) {
            for (unsigned i = 0; i < n; i++) on_event(events[i]);
            drained += n;
        }
    }
    return drained;
}

Result<SourceTableUsage> DpdkDataplane::source_table() {
    return survey_source_table(shared_->sets, shared_->set_count, now_ns());
}

DecisionCost DpdkDataplane::decision_cost() {
    uint64_t cycles = 0, decisions = 0;
    for (const WorkerState* state : states_) {
        cycles += __atomic_load_n(&state->decide_cycles, __ATOMIC_RELAXED);
        decisions += __atomic_load_n(&state->decisions, __ATOMIC_RELAXED);
    }
    return {cycles_to_ns(cycles, tsc_hz_), decisions};
}

}  // namespace sluice
