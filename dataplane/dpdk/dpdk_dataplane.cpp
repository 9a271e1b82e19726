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

#include <algorithm>
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

// rte_lpm6.c's RTE_LPM6_TBL8_MAX_NUM_GROUPS, which rte_lpm6.h does not export.
constexpr uint32_t kLpm6MaxGroups = 1u << 21;
// A family's trie is sized with a quarter more rules and tbl8 groups than the
// policy needs, and at least these, so that small edits fit in place. It costs
// 64 MiB of tbl24, 8 B (IPv4) or about 70 B (IPv6) a rule and 1 KiB a group:
// measured, 1M IPv4 prefixes of a realistic mix take 320 MiB a slot and 1M
// IPv6 /48s 0.9-1.5 GiB (README.md, The DPDK dataplane, Memory).
constexpr uint64_t kMinRules = 1024, kMinGroups = 256;
// Up to this many removed plus written prefixes (or as many as the new set
// has, if more) are edited in place; a larger change re-creates the trie,
// which costs one add per prefix instead of a delete or add per change.
constexpr size_t kMinInPlaceChanges = 1024;

uint32_t with_headroom(uint64_t need, uint64_t minimum, uint64_t maximum) {
    return static_cast<uint32_t>(std::min(maximum, std::max(minimum, need + need / 4)));
}

// The tbl8 groups a trie needs for `prefixes` (one family, sorted by
// prefix_less). Past the 24 bits of tbl24, each further byte a prefix covers
// takes a group of 256 entries, shared by every prefix with the same leading
// bytes: rte_lpm has one per /24 that holds a longer prefix; rte_lpm6 one per
// distinct first k bytes (k >= 3) of the prefixes longer than 8k bits. Sorted
// by address, prefixes with the same leading bytes are neighbours.
uint64_t groups_needed(const std::vector<PolicyPrefix>& prefixes, uint8_t family) {
    const size_t bytes = family == SLUICE_FAMILY_IPV4 ? 4 : 16;
    uint64_t groups = 0;
    for (size_t k = 3; k < bytes; k++) {
        const PolicyPrefix* previous = nullptr;
        for (const PolicyPrefix& p : prefixes) {
            if (p.length <= 8 * k) continue;
            if (previous == nullptr || std::memcmp(previous->addr.data(), p.addr.data(), k) != 0) groups++;
            previous = &p;
        }
    }
    return groups;
}

const char* family_name(uint8_t family) { return family == SLUICE_FAMILY_IPV4 ? "IPv4" : "IPv6"; }

uint32_t host_order_v4(const PolicyPrefix& p) {
    uint32_t addr;
    std::memcpy(&addr, p.addr.data(), 4);
    return ntohl(addr);
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
    if (options.hash_key)
        shared_->hash_key = *options.hash_key;
    else if (getrandom(&shared_->hash_key, sizeof(shared_->hash_key), 0) !=
             static_cast<ssize_t>(sizeof(shared_->hash_key)))
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
    delete bans_.load();
}

Status DpdkDataplane::recreate_table(Slot& slot, uint8_t family, const std::vector<PolicyPrefix>& to) {
    const bool v4 = family == SLUICE_FAMILY_IPV4;
    PrefixTableState& state = v4 ? slot.table4 : slot.table6;
    if (v4) {
        rte_lpm_free(slot.lpm4);
        slot.lpm4 = nullptr;
    } else {
        rte_lpm6_free(slot.lpm6);
        slot.lpm6 = nullptr;
    }
    state = PrefixTableState{};
    if (to.empty()) return ok_status();  // created again when a policy has prefixes of this family

    const uint64_t groups = groups_needed(to, family);
    const uint64_t max_groups = v4 ? RTE_LPM_MAX_TBL8_NUM_GROUPS : kLpm6MaxGroups;
    if (groups > max_groups)
        return Error{"the policy's " + std::string(family_name(family)) + " prefixes need " + std::to_string(groups) +
                     " tbl8 groups; the DPDK table holds at most " + std::to_string(max_groups)};
    const uint32_t rules = with_headroom(to.size(), kMinRules, options_.prefix_capacity);
    const uint32_t group_count = with_headroom(groups, kMinGroups, max_groups);
    const std::string name = table_name(v4 ? "lpm4" : "lpm6");
    const std::string what = std::string("the ") + family_name(family) + " prefix table (" + std::to_string(rules) +
                             " rules, " + std::to_string(group_count) + " tbl8 groups)";
    if (v4) {
        const rte_lpm_config config{rules, group_count, 0};
        slot.lpm4 = rte_lpm_create(name.c_str(), options_.socket_id, &config);
        if (slot.lpm4 == nullptr) return Error{rte_error("creating " + what) + " (raise the EAL's -m)"};
    } else {
        rte_lpm6_config config{rules, group_count, 0};
        slot.lpm6 = rte_lpm6_create(name.c_str(), options_.socket_id, &config);
        if (slot.lpm6 == nullptr) return Error{rte_error("creating " + what) + " (raise the EAL's -m)"};
    }
    for (const PolicyPrefix& p : to) {
        const int err = v4 ? rte_lpm_add(slot.lpm4, host_order_v4(p), p.length, p.class_id)
                           : rte_lpm6_add(slot.lpm6, p.addr.data(), p.length, p.class_id);
        if (err != 0) {
            // The trie holds part of the set; state.rules = 0 has the next write re-create it.
            return Error{"adding prefix of class " + std::to_string(p.class_id) + " to " + what + ": " +
                         rte_strerror(-err)};
        }
    }
    state.rules = rules;
    state.groups = group_count;
    state.prefixes = to;
    return ok_status();
}

Status DpdkDataplane::write_prefixes(Slot& slot, uint8_t family, const std::vector<PolicyPrefix>& to) {
    const bool v4 = family == SLUICE_FAMILY_IPV4;
    PrefixTableState& state = v4 ? slot.table4 : slot.table6;
    const bool exists = v4 ? slot.lpm4 != nullptr : slot.lpm6 != nullptr;
    if (!exists || state.rules == 0 || to.size() > state.rules || groups_needed(to, family) > state.groups)
        return recreate_table(slot, family, to);
    const PrefixChanges changes = prefix_changes(state.prefixes, to);
    if (changes.removed.size() + changes.written.size() > std::max(to.size(), kMinInPlaceChanges))
        return recreate_table(slot, family, to);
    // Removed first, so that their rules and groups are free for the new ones.
    for (const PolicyPrefix& p : changes.removed) {
        const int err = v4 ? rte_lpm_delete(slot.lpm4, host_order_v4(p), p.length)
                           : rte_lpm6_delete(slot.lpm6, p.addr.data(), p.length);
        if (err != 0) return recreate_table(slot, family, to);
    }
    // A prefix already there with another class is rewritten in place.
    for (const PolicyPrefix& p : changes.written) {
        const int err = v4 ? rte_lpm_add(slot.lpm4, host_order_v4(p), p.length, p.class_id)
                           : rte_lpm6_add(slot.lpm6, p.addr.data(), p.length, p.class_id);
        if (err != 0) return recreate_table(slot, family, to);  // -ENOSPC, should the counts above be short
    }
    state.prefixes = to;
    return ok_status();
}

Status DpdkDataplane::write_slot(Slot& slot, const CompiledPolicy& policy) {
    // Nobody reads this slot (a grace period passed after it was last
    // active). Its tries are edited, not freed and re-created: rte_free
    // zeroes the whole block it frees (so that rte_zmalloc need not), and a
    // trie's tbl24 is 64 MiB (rte_lpm6's too) that lookups mostly never
    // wrote. Without hugepages that memory is faulted in page by page on its
    // first write, so freeing each slot's tries the first time took 0.5-1.7 s.
    std::vector<PolicyPrefix> v4, v6;
    for (const PolicyPrefix& p : policy.prefixes) (p.family == SLUICE_FAMILY_IPV4 ? v4 : v6).push_back(p);
    if (auto status = write_prefixes(slot, SLUICE_FAMILY_IPV4, v4); !status) return status;
    if (auto status = write_prefixes(slot, SLUICE_FAMILY_IPV6, v6); !status) return status;

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

namespace {

// One array of counters summed over the workers (each writes its own; read relaxed).
template <size_t Slots>
std::vector<sluice_counter> sum_over_workers(const std::vector<WorkerState*>& states,
                                             sluice_counter (WorkerState::*counters)[Slots]) {
    std::vector<sluice_counter> sums(Slots);
    for (const WorkerState* state : states) {
        for (size_t i = 0; i < Slots; i++) {
            sums[i].packets += __atomic_load_n(&(state->*counters)[i].packets, __ATOMIC_RELAXED);
            sums[i].bytes += __atomic_load_n(&(state->*counters)[i].bytes, __ATOMIC_RELAXED);
        }
    }
    return sums;
}

}  // namespace

Result<std::vector<sluice_counter>> DpdkDataplane::counters() {
    return sum_over_workers(states_, &WorkerState::counters);
}

Result<std::vector<sluice_counter>> DpdkDataplane::ban_counters() {
    return sum_over_workers(states_, &WorkerState::ban_counters);
}

BanTable BanTable::build(const std::vector<DataplaneBan>& bans) {
    BanTable table;
    for (const DataplaneBan& ban : bans) {
        std::vector<Length>& family = ban.prefix.family == SLUICE_FAMILY_IPV4 ? table.v4 : table.v6;
        auto group = std::find_if(family.begin(), family.end(), [&](const Length& g) { return g.length == ban.prefix.length; });
        if (group == family.end()) group = family.insert(family.end(), Length{ban.prefix.length, {}});
        Entry entry{0, 0, {ban.until_ns, ban.slot, 0}};
        std::memcpy(&entry.hi, ban.prefix.addr.data(), 8);
        std::memcpy(&entry.lo, ban.prefix.addr.data() + 8, 8);
        group->entries.push_back(entry);
    }
    for (std::vector<Length>* family : {&table.v4, &table.v6}) {
        std::sort(family->begin(), family->end(), [](const Length& a, const Length& b) { return a.length > b.length; });
        for (Length& group : *family)
            std::sort(group.entries.begin(), group.entries.end(),
                      [](const Entry& a, const Entry& b) { return std::pair{a.hi, a.lo} < std::pair{b.hi, b.lo}; });
    }
    return table;
}

Status DpdkDataplane::set_bans(const std::vector<DataplaneBan>& bans) {
    if (auto status = check_bans(bans); !status) return status;
    auto table = bans.empty() ? nullptr : std::make_unique<const BanTable>(BanTable::build(bans));
    std::lock_guard lock(apply_mutex_);
    const BanTable* old = bans_.exchange(table.release(), std::memory_order_acq_rel);
    // Once every online worker has passed a quiescent state, none reads the old table.
    rte_rcu_qsbr_synchronize(qsbr_, RTE_QSBR_THRID_INVALID);
    delete old;
    return ok_status();
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
