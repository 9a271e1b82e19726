// SPDX-License-Identifier: Apache-2.0
// Layer: dataplane/dpdk. Sees the core, control/lib and DPDK; never libbpf
// or control/xdp. Only sluice_dpdk.cpp, the program, includes the daemon.
// The DPDK dataplane behind sluice-dpdk: the same decision core as the XDP
// program (dataplane/include/sluice/), over tables a DPDK process owns.
//
// State. Sources live in one table all workers share (the core's
// source_table.h: GCRA, one compare-and-swap per admission, no lock), as the
// XDP program's sources live in one map all CPUs share. Each worker (one per
// lcore, each with its own RX queue) owns its class, new-source and global
// buckets, counters and shaping queues, cache-aligned and allocated on its
// socket; behind them sit shared buckets for lease accuracy, exactly as the
// XDP program's per-CPU and shared maps: same semantics, same bound.
//
// Policy versions. Two slots, as in XDP: apply() writes the inactive slot
// (header, class entries, and its rte_lpm/rte_lpm6 tries: only the prefixes
// that changed since that slot last held a version, or fresh tries when the
// new set does not fit), flips the active index, then waits on an RCU (QSBR)
// grace period: every worker reports a quiescent state after each burst, so
// once the wait returns no worker reads the old slot and it may be
// rewritten. A worker reads the active index once per burst, so one burst
// never mixes two versions.
//
// Time is read once per RX burst: the TSC scaled to nanoseconds (or, for
// tests, a clock they set).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compiled_policy.h"
#include "dataplane.h"
#include "drop_sampling.h"
#include "result.h"
#include "sluice/abi.h"

struct rte_lpm;
struct rte_lpm6;
struct rte_mbuf;
struct rte_rcu_qsbr;
struct rte_ring;

namespace sluice {

struct DpdkOptions {
    // Workers that will decide packets; policies are compiled for this many
    // (split accuracy gives each rate/workers and burst/workers).
    uint32_t workers = 1;
    // Entries in the source table all workers share, rounded up to a power
    // of two of 8-entry sets (SLUICE_SOURCE_CAPACITY_MIN .. _MAX; 8 bytes each).
    uint32_t source_capacity = SLUICE_SOURCE_CAPACITY_DEFAULT;
    // The least drop sampling period (a power of two): one drop in this many
    // becomes a drop event (hot sources) until a flood would overrun a
    // worker's event ring, when drain_events raises it
    // (control/lib/drop_sampling.h).
    uint32_t drop_sample_period = SLUICE_DROP_SAMPLE_PERIOD_DEFAULT;
    // Prefixes a policy may have per address family
    // (1..SLUICE_PREFIX_CAPACITY_MAX): apply() refuses more. Tables are
    // sized for the policy at hand, not for this.
    uint32_t prefix_capacity = SLUICE_PREFIX_CAPACITY_DEFAULT;
    // Read time from set_test_clock() instead of the TSC.
    bool test_clock = false;
    // NUMA socket for the tables (-1: any).
    int socket_id = -1;
    // Tests only: the source table's key instead of one drawn at random
    // (with it, anyone can tell which sources share a set).
    std::optional<sluice_hash_key> hash_key{};
};

// An ethdev queue a worker receives from or sends to.
struct PortQueue {
    uint16_t port = 0;
    uint16_t queue = 0;
};

class DpdkDataplane;
struct WorkerState;
struct BanTable;

// One lcore's worth of the dataplane. Only that lcore calls poll_once/run.
class Worker {
  public:
    // Receives one burst from `rx`, decides every frame, sends what passes
    // (and shaped frames that are due) to `tx` without copying them, and
    // frees the rest. Returns the frames received.
    uint16_t poll_once();
    // The lcore's loop: poll_once until `stop`, reporting a quiescent state
    // after every burst. Returns 0 (the lcore function's exit code).
    int run(const std::atomic<bool>& stop);

    void set_ports(PortQueue rx, PortQueue tx);
    uint32_t index() const;
    // Frames waiting in this worker's shaping queue of `class_id`.
    uint32_t queued(uint32_t class_id) const;

  private:
    friend class DpdkDataplane;
    Worker(DpdkDataplane* dataplane, WorkerState* state) : dataplane_(dataplane), state_(state) {}
    DpdkDataplane* dataplane_;
    WorkerState* state_;
};

class DpdkDataplane final : public EnforcementPoint {
  public:
    // Needs an initialised EAL. Allocates every table up front.
    static Result<std::unique_ptr<DpdkDataplane>> create(const DpdkOptions& options);
    ~DpdkDataplane() override;
    DpdkDataplane(const DpdkDataplane&) = delete;
    DpdkDataplane& operator=(const DpdkDataplane&) = delete;

    // Validates, writes the inactive slot, flips, waits for the workers to
    // leave the old slot. On error the running policy is untouched.
    Status apply(const CompiledPolicy& policy) override;
    Result<uint64_t> active_version() override;
    Result<std::vector<sluice_counter>> counters() override;
    // A new ban table, swapped in; the old one freed once no worker reads it.
    Status set_bans(const std::vector<DataplaneBan>& bans) override;
    Result<std::vector<sluice_counter>> ban_counters() override;
    Result<std::array<uint64_t, SLUICE_STAT_COUNT>> stats() override;
    Result<size_t> drain_events(const std::function<void(const sluice_drop_event&)>& on_event) override;
    Result<SourceTableUsage> source_table() override;
    DecisionCost decision_cost() override;
    bool decision_cost_enabled() const override { return true; }
    std::string kind() const override { return "dpdk"; }
    uint64_t window_restarts() const override { return window_restarts_.load(std::memory_order_relaxed); }
    sluice_fleet_credit* fleet_credits() override;

    uint32_t worker_count() const { return static_cast<uint32_t>(workers_.size()); }
    // The source table's key.
    const sluice_hash_key& hash_key() const;
    // The drop sampling period a worker uses now (raised by drain_events
    // while a flood would overrun its event ring).
    uint32_t drop_sample_period(uint32_t worker) const { return sampling_.at(worker).period(); }
    // How many drop events a worker's ring holds.
    uint64_t drop_event_ring_events(uint32_t worker) const { return sampling_.at(worker).ring_events(); }
    Worker& worker(uint32_t index) { return workers_.at(index); }

    // The time every worker reads at its next burst (DpdkOptions::test_clock).
    void set_test_clock(uint64_t now_ns);
    // Tests: flips the active index without an apply, so the next bursts
    // read the slot the last apply() replaced, as a burst that read the
    // index just before that flip and is still running does; called again,
    // flips it forward. Only while no worker runs.
    void flip_active_slot_for_test();
    // The workers' clock: CLOCK_MONOTONIC scaled from the TSC, or the test clock.
    uint64_t now_ns() const override;

  private:
    friend class Worker;
    friend class WorkerPath;
    struct Slot;
    struct Shared;

    DpdkDataplane() = default;
    Status allocate(const DpdkOptions& options);
    Status write_slot(Slot& slot, const CompiledPolicy& policy);
    Status write_prefixes(Slot& slot, uint8_t family, const std::vector<PolicyPrefix>& to);
    Status recreate_table(Slot& slot, uint8_t family, const std::vector<PolicyPrefix>& to);

    DpdkOptions options_;
    std::vector<WorkerState*> states_;  // rte_zmalloc'd, cache-aligned; freed in the destructor
    std::vector<DropSampling> sampling_;  // by worker: the control thread's side of each event ring
    std::vector<Worker> workers_;
    std::unique_ptr<Slot[]> slots_;
    std::atomic<uint32_t> active_{0};
    // The bans in force (nullptr: none), read once per burst; owned here.
    std::atomic<const BanTable*> bans_{nullptr};
    std::unique_ptr<Shared> shared_;
    rte_rcu_qsbr* qsbr_ = nullptr;
    uint64_t tsc_hz_ = 0, tsc_base_ = 0, ns_base_ = 0;
    std::atomic<uint64_t> test_now_ns_{0};
    std::atomic<uint64_t> window_restarts_{0};
    std::mutex apply_mutex_;
};

}  // namespace sluice
