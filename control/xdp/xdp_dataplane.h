// SPDX-License-Identifier: Apache-2.0
// Layer: control/xdp, the only layer that includes libbpf (in its .cpp
// files). Sees control/lib and the core.
// The XDP dataplane: owns the loaded ebpf/sluice.bpf.c (through its bpftool
// skeleton), writes policy versions into the inactive slot and flips, reads
// counters and drop events, attaches to interfaces through bpf_links, and
// pins everything so a restarted daemon re-adopts it without losing a
// bucket or a counter.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "compiled_policy.h"
#include "dataplane.h"
#include "drop_sampling.h"
#include "interface_host.h"  // XdpMode
#include "result.h"
#include "sluice/abi.h"
#include "unique_fd.h"

struct sluice_bpf;  // the bpftool skeleton (build/ebpf/sluice.skel.h)
struct ring_buffer;
struct bpf_map;

namespace sluice {

struct XdpOptions {
    // Read time from set_test_clock() instead of the kernel's clock.
    bool test_clock = false;
    // bpf_ktime_get_coarse_ns instead of bpf_ktime_get_ns.
    bool coarse_clock = false;
    // Entries in the source table, rounded up to a power of two of 8-entry
    // sets (SLUICE_SOURCE_CAPACITY_MIN .. _MAX; 8 bytes each, whatever the
    // number of CPUs).
    uint32_t source_capacity = SLUICE_SOURCE_CAPACITY_DEFAULT;
    // Prefixes a policy may have per address family (1..SLUICE_PREFIX_CAPACITY_MAX):
    // each family's trie holds this many per policy slot. Its nodes are
    // allocated as prefixes are written, so an unused capacity costs nothing.
    uint32_t prefix_capacity = SLUICE_PREFIX_CAPACITY_DEFAULT;
    // The least drop sampling period (a power of two): one drop in this many
    // becomes a ring buffer event until a flood would overrun the ring, when
    // drain_events raises it (control/lib/drop_sampling.h).
    uint32_t drop_sample_period = SLUICE_DROP_SAMPLE_PERIOD_DEFAULT;
    // bpffs directory for maps and links; empty pins nothing. Existing pins
    // there are re-adopted (and refused if their ABI differs).
    std::string pin_dir{};
    // The caller holds the kernel's BPF run-time statistics on
    // (BPF_ENABLE_STATS); without it decision_cost() reads 0.
    bool run_time_stats = false;
    // Tests only: a new source table's key instead of one drawn at random
    // (with it, anyone can tell which sources share a set).
    std::optional<sluice_hash_key> hash_key{};
};

class XdpDataplane : public EnforcementPoint {
  public:
    // Opens and loads the program; with a pin_dir, re-adopts pinned maps and
    // links (a re-adopted link is switched to the new program atomically).
    static Result<std::unique_ptr<XdpDataplane>> open(const XdpOptions& options);
    // Unpinned links detach here; pinned ones keep enforcing (fail-static).
    ~XdpDataplane() override;
    XdpDataplane(const XdpDataplane&) = delete;
    XdpDataplane& operator=(const XdpDataplane&) = delete;

    // Validates, writes the inactive slot, then flips. On error the running
    // policy is untouched.
    Status apply(const CompiledPolicy& policy) override;
    // The active slot's policy version (0 before the first apply).
    Result<uint64_t> active_version() override;
    Status settle() override;

    Result<std::vector<sluice_counter>> counters() override;
    Status set_bans(const std::vector<DataplaneBan>& bans) override;
    Result<std::vector<sluice_counter>> ban_counters() override;
    Result<std::array<uint64_t, SLUICE_STAT_COUNT>> stats() override;
    Result<size_t> drain_events(const std::function<void(const sluice_drop_event&)>& on_event) override;
    // Now on the program's clock: CLOCK_MONOTONIC, or the test clock.
    uint64_t now_ns() const override;
    // A scan of the source table (mapped into this process: no syscalls).
    Result<SourceTableUsage> source_table() override;
    // Empties the source table: every source starts over with a full bucket.
    // For tests and benchmarks that reuse one loaded program.
    void forget_sources();
    // The program's BPF run-time statistics (XdpOptions::run_time_stats).
    DecisionCost decision_cost() override;
    bool decision_cost_enabled() const override { return run_time_stats_; }
    std::string kind() const override { return "xdp"; }
    uint64_t window_restarts() const override { return window_restarts_.load(std::memory_order_relaxed); }
    // The sluice_fleet map, mapped into this process.
    sluice_fleet_credit* fleet_credits() override { return static_cast<sluice_fleet_credit*>(fleet_.address); }

    Status attach(int ifindex, XdpMode mode);
    Status detach(int ifindex);
    std::vector<int> attached_ifindexes() const;
    // The pins (the pin directory, each map's, each link's) no longer in
    // bpffs; empty when nothing is pinned.
    std::vector<std::string> missing_pins() const;

    // With XdpOptions::test_clock: the time every decision sees from now on.
    void set_test_clock(uint64_t now_ns);
    int program_fd() const;
    // The key the source table's sets are chosen under (new at each load
    // unless adopted with the pinned table).
    const sluice_hash_key& hash_key() const { return hash_key_; }
    uint32_t source_sets() const { return source_sets_; }
    uint32_t possible_cpus() const { return cpus_; }
    const SyscallErrorCounts& syscall_errors() const { return errors_; }
    // The drop sampling period the program uses now.
    uint32_t drop_sample_period() const { return sampling_.period(); }
    // How many drop events the ring holds.
    uint64_t drop_event_ring_events() const { return sampling_.ring_events(); }

  private:
    XdpDataplane() = default;
    Status load(const XdpOptions& options);
    // Opens the map pinned at `path` and reads its info; leaves `fd` empty
    // when nothing is pinned there.
    Status open_pinned_map(const std::string& path, UniqueFd& fd, bpf_map_info& info);
    Status read_pinned_meta();
    std::string remove_hint() const;
    Error abi_mismatch(uint32_t pinned_version) const;
    Status check_pinned_maps();
    Status adopt_or_stamp_meta();
    Status adopt_pinned_links();
    Status wait_for_readers();
    // Writes `policy`'s header and classes and `prefixes` into `slot`.
    Status write_slot(uint32_t slot, const CompiledPolicy& policy, const std::vector<PolicyPrefix>& prefixes);
    // Makes `slot`'s trie entries `prefixes`, writing only the difference
    // from what it holds when that is known.
    Status write_slot_prefixes(uint32_t slot, const std::vector<PolicyPrefix>& prefixes, uint64_t version);
    template <class LpmKey>
    Status change_lpm_slot(int map_fd, uint32_t slot, uint8_t family, const PrefixChanges& changes);
    // The class entries a slot holds (those of defined classes).
    Result<std::vector<sluice_class_entry>> read_classes(uint32_t slot);
    template <class LpmKey>
    Status clear_lpm_slot(int map_fd, uint32_t slot);
    Result<sluice_active> read_active();
    Status write_active(const sluice_active& active, const char* what);
    // A per-CPU array of `slots` counters, summed over the CPUs.
    Result<std::vector<sluice_counter>> sum_counters(int fd, uint32_t slots, const char* what);
    static int on_ring_event(void* ctx, void* data, size_t size);
    // One health stat summed over the CPUs.
    Result<uint64_t> stat_sum(uint32_t index);
    Status write_sample_period(uint32_t period);
    Error syscall_error(SyscallOp op, const std::string& what, int err);
    std::string link_pin_path(int ifindex) const;

    struct SkeletonDeleter {
        void operator()(struct ::sluice_bpf* skel) const;
    };
    struct RingBufferDeleter {
        void operator()(struct ::ring_buffer* rb) const;
    };
    // A map's memory, mapped shared with the kernel.
    struct Mapping {
        void* address = nullptr;
        size_t length = 0;
        Mapping() = default;
        Mapping(const Mapping&) = delete;
        Mapping& operator=(const Mapping&) = delete;
        ~Mapping();
    };
    // Maps `bytes` of the BPF_F_MMAPABLE `map` shared with the kernel.
    Status map_shared(struct ::bpf_map* map, size_t bytes, const char* what, Mapping& mapping);

    std::unique_ptr<struct ::sluice_bpf, SkeletonDeleter> skel_;
    std::unique_ptr<struct ::ring_buffer, RingBufferDeleter> events_;
    // An ARRAY_OF_MAPS whose update makes the kernel wait for every running
    // BPF program: the grace period between a flip and reuse of the old slot.
    UniqueFd grace_outer_, grace_inner_;
    std::map<int, UniqueFd> links_;  // by ifindex
    std::string pin_dir_;
    uint32_t cpus_ = 0;
    uint32_t source_sets_ = 0;
    uint32_t prefix_capacity_ = SLUICE_PREFIX_CAPACITY_DEFAULT;  // per family and slot
    // The prefixes each slot's trie entries hold, once this process wrote
    // them. `known` apart from the vector, so that a write reuses its memory:
    // copying a million prefixes into fresh pages cost 180 ms.
    struct SlotPrefixes {
        bool known = false;
        std::vector<PolicyPrefix> prefixes;
    };
    std::array<SlotPrefixes, SLUICE_POLICY_SLOTS> slot_prefixes_;
    // An apply flipped slots since settle() last brought the standby slot's
    // prefixes up to the running ones.
    bool standby_behind_ = false;
    // The bans the map holds, ordered by prefix_less, once this process
    // wrote them (an adopted map is listed at the first set_bans).
    std::vector<DataplaneBan> bans_held_;
    bool bans_known_ = false;
    sluice_hash_key hash_key_{};
    bool adopted_meta_ = false;  // hash_key_ came from pinned maps
    bool test_clock_ = false;
    Mapping sources_;  // the source table
    Mapping fleet_;    // fleet quotas' credit, by class id
    bool run_time_stats_ = false;
    const std::function<void(const sluice_drop_event&)>* event_sink_ = nullptr;  // during drain_events
    DropSampling sampling_{SLUICE_DROP_SAMPLE_PERIOD_DEFAULT, 1, 0};              // set up by load()
    std::mutex apply_mutex_;
    std::atomic<uint64_t> window_restarts_{0};
    SyscallErrorCounts errors_{};
};

}  // namespace sluice
