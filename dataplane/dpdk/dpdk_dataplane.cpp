// SPDX-License-Identifier: Apache-2.0
// The DPDK dataplane's control side: the tables allocated up front and freed
// at the end, policy versions written into the inactive slot and flipped
// under RCU, and the counters, stats, drop events and source table the
// daemon reads. The workers' per-packet path is dpdk_worker.cpp.
#include "dpdk_dataplane.h"

#include <arpa/inet.h>
#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_lpm.h>
#include <rte_lpm6.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_random.h>
#include <rte_rcu_qsbr.h>

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "clock.h"
#include "dpdk_dataplane_internal.h"
#include "eal.h"
#include "logger.h"
#include "rate_limits.h"

namespace sluice {
namespace {

// Each worker's drop events (3 MiB of 48-byte events): the period aims an
// interval's events at a quarter of it, 16K per drain, so a source with a
// share s of the drops is sampled about 64K·s times a second and its figure's
// relative error is about 1 / sqrt(that count) (4096 gave a quarter of it).
constexpr uint32_t kEventRingSize = 65536;

std::string rte_error(const std::string& what) { return what + ": " + dpdk_error(rte_errno); }

// Each table gets a name no other in the process has: rte_* objects are
// registered by name, and a process may hold several dataplanes (tests do).
std::string table_name(const char* what) {
    static std::atomic<uint64_t> created{0};
    return std::string("sluice_") + what + "_" + std::to_string(created++);
}

}  // namespace

Result<std::unique_ptr<DpdkDataplane>> DpdkDataplane::create(const DpdkOptions& options) {
    if (options.workers == 0 || options.workers > RTE_MAX_LCORE)
        return Error{"workers must be in 1.." + std::to_string(RTE_MAX_LCORE)};
    if (options.source_capacity < SLUICE_SOURCE_CAPACITY_MIN || options.source_capacity > SLUICE_SOURCE_CAPACITY_MAX)
        return Error{"source_capacity must be in " + std::to_string(SLUICE_SOURCE_CAPACITY_MIN) + ".." +
                     std::to_string(SLUICE_SOURCE_CAPACITY_MAX)};
    if (options.drop_sample_period == 0 || (options.drop_sample_period & (options.drop_sample_period - 1)) != 0)
        return Error{"drop_sample_period must be a power of two"};
    if (options.prefix_capacity < 1 || options.prefix_capacity > SLUICE_PREFIX_CAPACITY_MAX)
        return Error{"prefix_capacity must be in 1.." + std::to_string(SLUICE_PREFIX_CAPACITY_MAX)};
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
    shared_->fleet = static_cast<sluice_fleet_credit*>(rte_zmalloc_socket(
        "sluice_fleet", sizeof(sluice_fleet_credit) * SLUICE_MAX_CLASSES, RTE_CACHE_LINE_SIZE, socket));
    if (!shared_->sets || !shared_->classes || !shared_->new_sources || !shared_->global || !shared_->fleet)
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
        state->sample_period = options.drop_sample_period;
        state->sample_random = static_cast<uint32_t>(rte_rand()) | 1;
        sampling_.emplace_back(options.drop_sample_period, kEventRingSize - 1, 0);
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

sluice_fleet_credit* DpdkDataplane::fleet_credits() { return shared_->fleet; }

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
        rte_free(shared_->fleet);
    }
    rte_free(qsbr_);
}

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
    if (auto status = check_prefix_capacity(policy, options_.prefix_capacity, "--prefix-capacity"); !status)
        return status;
    std::lock_guard lock(apply_mutex_);
    const Slot& running = slots_[active_.load(std::memory_order_relaxed)];
    std::vector<sluice_class_entry> running_classes;
    for (const sluice_class_entry& cls : running.classes)
        if (cls.class_id != SLUICE_CLASS_UNCLASSIFIED) running_classes.push_back(cls);
    CompiledPolicy carried = policy;
    const std::vector<CountRestart> restarts = carry_previous_limits(running_classes, carried);
    const uint32_t next = (active_.load(std::memory_order_relaxed) + 1) % SLUICE_POLICY_SLOTS;
    if (auto status = write_slot(slots_[next], carried); !status) return status;
    active_.store(next, std::memory_order_release);
    // Once every online worker has passed a quiescent state, none reads the
    // old slot: the next apply may rewrite it.
    rte_rcu_qsbr_synchronize(qsbr_, RTE_QSBR_THRID_INVALID);
    for (const CountRestart& restart : restarts)
        log(LogLevel::info, describe(restart), {{"version", std::to_string(policy.header.version)}});
    window_restarts_.fetch_add(restarts.size(), std::memory_order_relaxed);
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
    for (size_t w = 0; w < states_.size(); w++) {
        WorkerState* state = states_[w];
        size_t from_worker = 0;
        unsigned n;
        while ((n = rte_ring_sc_dequeue_burst_elem(state->events, events, sizeof(sluice_drop_event), 64, nullptr)) >
               0) {
            for (unsigned i = 0; i < n; i++) on_event(events[i]);
            from_worker += n;
        }
        const uint64_t lost = __atomic_load_n(&state->stats[SLUICE_STAT_DROP_EVENTS_LOST], __ATOMIC_RELAXED);
        __atomic_store_n(&state->sample_period, sampling_[w].after_drain(from_worker, lost), __ATOMIC_RELAXED);
        drained += from_worker;
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
