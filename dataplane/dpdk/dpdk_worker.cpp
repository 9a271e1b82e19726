// SPDX-License-Identifier: Apache-2.0
// The DPDK dataplane's per-packet path: what one worker does with one RX
// burst (parse, classify, decide through the core, shape, send or free) and
// its lcore loop, plus the clock it reads once per burst. Apart from
// dpdk_dataplane.cpp, the control side, because this is the only code that
// runs on the workers' lcores and the only code whose cost is per frame.
#include <arpa/inet.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lpm.h>
#include <rte_lpm6.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>
#include <rte_rcu_qsbr.h>

#include <algorithm>
#include <cstring>

#include "dpdk_dataplane_internal.h"

namespace sluice {
namespace {

constexpr uint16_t kBurst = 32;
// Shaped frames released per poll: with a burst of new frames, what one TX
// burst array holds.
constexpr uint16_t kReleaseMax = 32;

}  // namespace

const sluice_ban* BanTable::find(const sluice_packet& pkt, uint64_t now) const {
    for (const Length& group : pkt.family == SLUICE_FAMILY_IPV4 ? v4 : v6) {
        sluice_ban_key key;
        sluice_ban_key_make(&key, &pkt, static_cast<uint8_t>(group.length));
        uint64_t hi, lo;
        std::memcpy(&hi, key.addr, 8);
        std::memcpy(&lo, key.addr + 8, 8);
        const auto at = std::lower_bound(group.entries.begin(), group.entries.end(), std::pair{hi, lo},
                                         [](const Entry& e, const std::pair<uint64_t, uint64_t>& addr) {
                                             return std::pair{e.hi, e.lo} < addr;
                                         });
        if (at != group.entries.end() && at->hi == hi && at->lo == lo && sluice_ban_applies(&at->ban, now))
            return &at->ban;
    }
    return nullptr;
}

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
        const BanTable* bans;  // nullptr: none in force
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
        if (d.verdict == SLUICE_VERDICT_DROP)
            ctx.dropped[ctx.drops++] = m;
        else
            ctx.forward[ctx.forwarded++] = m;
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
        levels->new_sources = {&cls.new_sources, &state->new_source_buckets[id], &shared->new_sources[id], nullptr};
        levels->penalty = {&cls.penalty, &key, &shared->hash_key, shared->sets, shared->set_count - 1};
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
        levels->aggregate = {&cls.aggregate, &state->class_buckets[id], &shared->classes[id], &cls.aggregate_window};
        levels->global = {&slot.header.global, &state->global_bucket, shared->global, nullptr};
        levels->fleet = {cls.fleet ? &shared->fleet[id] : nullptr, cls.fleet_unit};
    }

    static sluice_decision decide(BurstContext& ctx, const sluice_levels& levels, uint32_t frame_len, uint8_t tcp_syn) {
        return sluice_decide_counted(&ctx, &levels, frame_len, tcp_syn, ctx.now);
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
                      const sluice_levels& levels, const sluice_source_key& key, uint32_t frame_len, uint8_t tcp_syn) {
        WorkerState* state = ctx.state;
        const uint32_t id = sluice_class_slot(cls.class_id);
        ShapeQueue& q = state->queues[id];

        if (q.held.count == 0) {
            const sluice_decision d = decide(ctx, levels, frame_len, tcp_syn);
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
                &levels.source, sluice_source_cost(levels.source.limit, frame_len, tcp_syn), ctx.now, &look, &d);
            if (verdict <= 0) {
                if (verdict < 0) d = sluice_contended();
                sluice_count_table_event(&ctx, d.table);
                finish(ctx, m, cls.class_id, d, frame_len, &key);
                return;
            }
        }

        const uint64_t cost = sluice_level_cost_nano(levels.aggregate.limit, frame_len, tcp_syn);
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
        lower.fleet = sluice_fleet_ref{};
        const sluice_decision paid = decide(ctx, lower, frame_len, tcp_syn);
        if (paid.verdict != SLUICE_VERDICT_PASS) {
            finish(ctx, m, cls.class_id, paid, frame_len, &key);
            return;
        }
        q.ring[(q.head + q.held.count) & (q.capacity - 1)] = {m, admission.deadline_ns, tcp_syn};
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
            if (!sluice_shape_release(still_shaped, &levels, frame_len, frame.tcp_syn, frame.deadline_ns, ctx.now, &d))
                return;  // not yet: the class bucket refills at its rate
            finish(ctx, frame.mbuf, id, d, frame_len, nullptr);
            q.head = (q.head + 1) & (q.capacity - 1);
            sluice_shape_queue_pop(&q.held,
                                   still_shaped ? sluice_level_cost_nano(&cls.aggregate, frame_len, frame.tcp_syn) : 0);
        }
        if (q.held.count == 0) state->queued_classes[id / 64] &= ~(1ull << (id % 64));
    }

    // Parses a frame and, if it parsed, finds the ban in force that covers
    // its source (nullptr: none). The parser checks IP lengths against the
    // whole frame: one spread over segments is parsed from a copy in one piece.
    static const sluice_ban* parse_and_find_ban(BurstContext& ctx, rte_mbuf* m, sluice_packet* pkt) {
        WorkerState* state = ctx.state;
        const uint8_t* data = rte_pktmbuf_mtod(m, const uint8_t*);
        uint32_t length = m->data_len;
        if (m->nb_segs > 1) {
            length = m->pkt_len;
            data = length <= sizeof state->frame_copy
                       ? static_cast<const uint8_t*>(rte_pktmbuf_read(m, 0, length, state->frame_copy))
                       : nullptr;
            if (data == nullptr) {
                // Longer than any IP packet can be: nothing to check it against.
                *pkt = sluice_packet{};
                pkt->status = SLUICE_PARSE_TRUNCATED_IPV4;
                pkt->frame_len = m->pkt_len;
                return nullptr;
            }
        }
        sluice_parse(data, data + length, pkt);
        // Before classification: a ban beats every class, `pass` too.
        if (pkt->status != SLUICE_PARSE_OK || ctx.bans == nullptr) return nullptr;
        return ctx.bans->find(*pkt, ctx.now);
    }

    static void drop_banned(BurstContext& ctx, rte_mbuf* m, const sluice_ban* ban, const sluice_packet& pkt) {
        sluice_source_key key;
        sluice_account_ban(&ctx, ban, &pkt, &key);
        ctx.dropped[ctx.drops++] = m;
    }

    // Before the first policy everything passes, as on XDP, but for what a
    // ban catches.
    static void pass_all_but_bans(BurstContext& ctx, rte_mbuf** pkts, uint16_t n) {
        for (uint16_t i = 0; i < n; i++) {
            sluice_packet pkt;
            if (const sluice_ban* ban = ctx.bans ? parse_and_find_ban(ctx, pkts[i], &pkt) : nullptr) {
                drop_banned(ctx, pkts[i], ban, pkt);
                continue;
            }
            ctx.state->stats[SLUICE_STAT_NO_POLICY]++;
            ctx.forward[ctx.forwarded++] = pkts[i];
        }
    }

    // Decides a burst in two passes, as DPDK's own table lookups do: the
    // first parses, classifies and hashes every frame and prefetches both of
    // its source's sets; by the second, which decides, they are in cache.
    static void decide_burst(BurstContext& ctx, const Slot& slot, rte_mbuf** pkts, uint16_t n) {
        WorkerState* state = ctx.state;
        Shared* shared = ctx.shared;
        sluice_packet parsed[kBurst];
        const sluice_ban* banned[kBurst];
        const sluice_class_entry* classes[kBurst];
        sluice_source_key keys[kBurst];
        sluice_levels levels[kBurst];

        for (uint16_t i = 0; i < n; i++) {
            classes[i] = nullptr;
            banned[i] = parse_and_find_ban(ctx, pkts[i], &parsed[i]);
            if (parsed[i].status != SLUICE_PARSE_OK || banned[i] != nullptr) continue;
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
            if (banned[i] != nullptr) {
                drop_banned(ctx, m, banned[i], parsed[i]);
                continue;
            }
            if (classes[i] == nullptr) {
                finish(ctx, m, SLUICE_CLASS_UNCLASSIFIED, sluice_decide_unparsed(&slot.header, parsed[i].status),
                       frame_len, nullptr);
                continue;
            }
            const sluice_class_entry& cls = *classes[i];
            sluice_decision d;
            if (sluice_decide_action(&cls, &d)) {
                finish(ctx, m, cls.class_id, sluice_shadowed(&cls, d), frame_len, &keys[i]);
                continue;
            }
            if (cls.shape.queue_packets != 0 && cls.aggregate.enabled) {
                shape(ctx, m, cls, slot.drains[sluice_class_slot(cls.class_id)], levels[i], keys[i], frame_len,
                      parsed[i].tcp_syn);
                continue;
            }
            finish(ctx, m, cls.class_id, sluice_shadowed(&cls, decide(ctx, levels[i], frame_len, parsed[i].tcp_syn)),
                   frame_len, &keys[i]);
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
    WorkerPath::BurstContext ctx{{state, sluice_stamp(now)},
                                 dp->shared_.get(),
                                 dp->bans_.load(std::memory_order_acquire),
                                 forward,
                                 0,
                                 dropped,
                                 0};

    const uint64_t start = rte_rdtsc();
    if (slot.header.version == 0) {
        WorkerPath::pass_all_but_bans(ctx, pkts, received);
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

uint64_t DpdkDataplane::now_ns() const {
    if (options_.test_clock) return test_now_ns_.load(std::memory_order_relaxed);
    const uint64_t cycles = rte_rdtsc() - tsc_base_;
    return ns_base_ + cycles_to_ns(cycles, tsc_hz_);
}

void DpdkDataplane::set_test_clock(uint64_t now_ns) { test_now_ns_.store(now_ns, std::memory_order_relaxed); }

void DpdkDataplane::flip_active_slot_for_test() {
    active_.store((active_.load(std::memory_order_relaxed) + 1) % SLUICE_POLICY_SLOTS, std::memory_order_release);
}

const sluice_hash_key& DpdkDataplane::hash_key() const { return shared_->hash_key; }

}  // namespace sluice
