// SPDX-License-Identifier: Apache-2.0
// Shared by the tests that load the real ebpf/sluice.bpf.c into the running
// kernel through XdpDataplane and drive it with BPF_PROG_TEST_RUN: a fixture
// that opens the dataplane on a test clock with the thread pinned to CPU 0
// (sharing one loaded program between tests, reset between them) and a
// thread that floods the program from one CPU. The policy builder, frame
// shorthands and counter sums that every dataplane's tests share are in
// tests/common/policy_builder.h; the fixture is a target of the scenarios in
// tests/common/verdict_scenarios.h.
#pragma once

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "clock.h"
#include "common/hash_key_from_env.h"
#include "common/packet_builder.h"
#include "common/policy_builder.h"
#include "common/privilege.h"
#include "compiled_policy.h"
#include "rate_limits.h"
#include "sluice/abi.h"
#include "unique_fd.h"
#include "xdp_dataplane.h"

namespace sluice::test {

// Source table size for tests: small enough to clear between tests at no cost.
inline constexpr uint32_t kTestCapacity = 4096;

inline uint32_t possible_cpus() { return static_cast<uint32_t>(libbpf_num_possible_cpus()); }

inline bool pin_thread_to_cpu(uint32_t cpu) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return sched_setaffinity(0, sizeof(one), &one) == 0;
}

// ---- running the program --------------------------------------------------------

// One BPF_PROG_TEST_RUN of `frame`, `repeat` times on this CPU. Returns 0 or
// the errno; *action gets the XDP action of the last run.
inline int test_run(int prog_fd, const Bytes& frame, uint32_t repeat, uint32_t* action) {
    LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(), .data_size_in = static_cast<uint32_t>(frame.size()),
                .repeat = static_cast<int>(repeat));
    if (bpf_prog_test_run_opts(prog_fd, &opts) != 0) return errno;
    if (action) *action = opts.retval;
    return 0;
}

// An fd of the map named `name` that the program uses (invalid if none):
// tests reach maps XdpDataplane keeps to itself.
inline UniqueFd program_map(int prog_fd, const char* name) {
    bpf_prog_info info{};
    uint32_t length = sizeof(info);
    if (bpf_obj_get_info_by_fd(prog_fd, &info, &length) != 0) return {};
    std::vector<uint32_t> ids(info.nr_map_ids);
    info = {};
    info.nr_map_ids = static_cast<uint32_t>(ids.size());
    info.map_ids = reinterpret_cast<uintptr_t>(ids.data());
    length = sizeof(info);
    if (bpf_obj_get_info_by_fd(prog_fd, &info, &length) != 0) return {};
    for (uint32_t id : ids) {
        UniqueFd map(bpf_map_get_fd_by_id(id));
        bpf_map_info map_info{};
        uint32_t map_length = sizeof(map_info);
        if (map.valid() && bpf_obj_get_info_by_fd(map.get(), &map_info, &map_length) == 0 &&
            std::strcmp(map_info.name, name) == 0)
            return map;
    }
    return {};
}

// Floods the program with one frame from one CPU until told to stop.
class Flood {
  public:
    Flood(int prog_fd, Bytes frame, uint32_t cpu, uint32_t repeat)
        : prog_fd_(prog_fd), frame_(std::move(frame)), cpu_(cpu), repeat_(repeat) {}

    // The thread body: pin, then run until `stop`.
    void operator()(const std::atomic<bool>& stop) {
        if (!pin_thread_to_cpu(cpu_)) {
            error_ = errno;
            return;
        }
        uint64_t before_last = 0, last = monotonic_ns();  // when the two calls before returned
        while (!stop.load(std::memory_order_relaxed)) {
            const int err = test_run(prog_fd_, frame_, repeat_, nullptr);
            if (err) {
                error_ = err;
                return;
            }
            const uint64_t now = monotonic_ns();
            if (sent_ == 0) first_return_ns_ = now;
            // The last two calls decided inside [before_last, now], so any
            // stretch without a decision of this thread lies in such a span.
            if (before_last != 0 && now - before_last > kStallRecordNs) stalls_.push_back({before_last, now});
            if (returns_per_ms_.empty()) first_ms_ = now / 1'000'000;
            const uint64_t ms = now / 1'000'000 - first_ms_;
            if (ms >= returns_per_ms_.size()) returns_per_ms_.resize(ms + 1);
            returns_per_ms_[ms]++;
            before_last = last;
            last = now;
            sent_ += repeat_;
        }
    }

    // [from, to] on CLOCK_MONOTONIC, spanning two calls of this thread and so
    // holding every stretch in which it decided nothing longer than
    // kStallRecordNs (each such stretch lies in at least one of these).
    struct Stall {
        uint64_t from_ns, to_ns;
    };
    static constexpr uint64_t kStallRecordNs = 10'000'000;
    // Read after the thread has been joined.
    const std::vector<Stall>& stalls() const { return stalls_; }

    // Decisions this thread made surely inside [from_ns, to_ns), both whole
    // milliseconds of CLOCK_MONOTONIC: those of each call that returned in
    // it, less the first call's (which may have decided before from_ns).
    uint64_t decisions_within(uint64_t from_ns, uint64_t to_ns) const {
        uint64_t returns = 0;
        for (uint64_t ms = from_ns / 1'000'000; ms < to_ns / 1'000'000; ms++)
            if (ms >= first_ms_ && ms - first_ms_ < returns_per_ms_.size()) returns += returns_per_ms_[ms - first_ms_];
        return returns > 0 ? (returns - 1) * repeat_ : 0;
    }

    uint64_t sent() const { return sent_; }
    int error() const { return error_; }
    // CLOCK_MONOTONIC when the first call returned, 0 before that.
    uint64_t first_return_ns() const { return first_return_ns_; }

  private:
    int prog_fd_;
    Bytes frame_;
    uint32_t cpu_;
    uint32_t repeat_;
    uint64_t sent_ = 0;
    int error_ = 0;
    std::atomic<uint64_t> first_return_ns_{0};
    std::vector<Stall> stalls_;
    uint64_t first_ms_ = 0;
    std::vector<uint32_t> returns_per_ms_;  // from first_ms_ on
};

// ---- the fixture ----------------------------------------------------------------

// Loading the program costs about a second of verifier time, so tests on the
// fake clock share one loaded dataplane per set of options instead of loading
// it for each test. Between tests it is brought back to the equivalent of a
// fresh one: the clock jumps to a new epoch far past every test limit's fill
// time (so every class and global bucket is full again, and every lease has
// expired), a policy without per-source limits is applied (so none carries
// over into the test's first policy), the source table is emptied, queued
// events are drained, and counters and stats are read relative to what they
// were at the start.
// What cannot be reset is the per-CPU drop sampler: tests that count events
// exactly, or need "no policy yet", ask for a fresh dataplane.
inline constexpr uint64_t kEpochStep = 10'000 * kSec;

struct SharedDataplane {
    std::unique_ptr<XdpDataplane> dp;
    XdpOptions options;
    uint64_t next_epoch = kT0;
};

inline SharedDataplane& shared_dataplane() {
    static SharedDataplane shared;
    return shared;
}

inline bool same_options(const XdpOptions& a, const XdpOptions& b) {
    return a.test_clock == b.test_clock && a.coarse_clock == b.coarse_clock && a.source_capacity == b.source_capacity &&
           a.drop_sample_period == b.drop_sample_period && a.prefix_capacity == b.prefix_capacity &&
           a.pin_dir == b.pin_dir;
}

class XdpTest : public ::testing::Test {
  protected:
    void SetUp() override {
        SLUICE_REQUIRE_BPF();
        // Split mode keeps a bucket per CPU and sampling counts per CPU:
        // stay on one CPU so every count is exact.
        ASSERT_NO_FATAL_FAILURE(pin_to_cpu(0));
        if (!open_in_setup()) return;
        const XdpOptions opts = options();
        if (!fresh_dataplane() && opts.test_clock && opts.pin_dir.empty() && take_shared(opts)) return;
        ASSERT_NO_FATAL_FAILURE(open(opts));
        shareable_ = !fresh_dataplane() && opts.test_clock && opts.pin_dir.empty();
    }

    void TearDown() override {
        if (dp_) print_hash_key_if_failed(dp_->hash_key());
        if (dp_ && shareable_) {
            SharedDataplane& shared = shared_dataplane();
            shared.dp = std::move(dp_);
            shared.options = options();
        }
        dp_.reset();
        if (affinity_saved_) sched_setaffinity(0, sizeof(saved_affinity_), &saved_affinity_);
    }

    // Fixtures override these to open differently, or not at all. (pin_dir
    // has no default member initializer, so designated initializers name it
    // to keep -Wmissing-field-initializers quiet.)
    virtual XdpOptions options() const {
        return XdpOptions{.test_clock = true, .source_capacity = kTestCapacity, .pin_dir = {}};
    }
    virtual bool open_in_setup() const { return true; }
    // A dataplane no other test has used (see SharedDataplane).
    virtual bool fresh_dataplane() const { return false; }

    // Opens a new dataplane (never shared); the test clock starts at t0_.
    void open(const XdpOptions& opts) {
        dp_.reset();
        shareable_ = false;
        baseline_counters_.clear();
        baseline_ban_counters_.clear();
        baseline_stats_ = {};
        XdpOptions keyed = opts;
        if (!keyed.hash_key) keyed.hash_key = hash_key_from_env();
        auto dp = XdpDataplane::open(keyed);
        ASSERT_TRUE(dp.ok()) << "XdpDataplane::open: " << describe(dp);
        dp_ = std::move(dp.value());
        cpus_ = dp_->possible_cpus();
        ASSERT_EQ(cpus_, possible_cpus());
        if (opts.test_clock) {
            t0_ = shared_dataplane().next_epoch;
            shared_dataplane().next_epoch += kEpochStep;
            dp_->set_test_clock(t0_);
        }
    }

    void pin_to_cpu(uint32_t cpu) {
        if (!affinity_saved_) {
            ASSERT_EQ(sched_getaffinity(0, sizeof(saved_affinity_), &saved_affinity_), 0);
            affinity_saved_ = true;
        }
        ASSERT_TRUE(pin_thread_to_cpu(cpu)) << "CPU " << cpu << ": " << std::strerror(errno);
    }

    // Lets the thread run anywhere again (tests that start their own threads).
    void unpin() {
        if (affinity_saved_) sched_setaffinity(0, sizeof(saved_affinity_), &saved_affinity_);
    }

  public:
    // ---- the target of tests/common/verdict_scenarios.h (and helpers) ----
    PolicyBuilder policy(uint64_t version = 1) const { return PolicyBuilder(cpus_, version); }

    void apply(const CompiledPolicy& policy) { SLUICE_ASSERT_OK(dp_->apply(policy)); }

    void set_clock(uint64_t now_ns) { dp_->set_test_clock(now_ns); }

    // This test's time zero on the fake clock.
    uint64_t t0() const { return t0_; }

    // Split mode divides a level among the CPUs: multiplying by this gives
    // this CPU a share equal to what lease mode gives the whole bucket.
    uint64_t per_cpu(Accuracy accuracy) const { return accuracy == Accuracy::split ? cpus_ : 1; }
    uint32_t cpus() const { return cpus_; }
    // The thread runs BPF_PROG_TEST_RUN on the CPU it is pinned to.
    void use_cpu(uint32_t cpu) { pin_to_cpu(cpu); }

    // The XDP action of one run of `frame` (repeat times).
    uint32_t run(const Bytes& frame, uint32_t repeat = 1) {
        uint32_t action = ~0u;
        const int err = test_run(dp_->program_fd(), frame, repeat, &action);
        EXPECT_EQ(err, 0) << "BPF_PROG_TEST_RUN: " << std::strerror(err);
        return action;
    }

    // n runs of `frame`, one letter each: P(ass), D(rop), ? otherwise.
    std::string verdicts(const Bytes& frame, int n) {
        std::string out;
        for (int i = 0; i < n; i++) {
            const uint32_t action = run(frame);
            out += action == XDP_PASS ? 'P' : action == XDP_DROP ? 'D' : '?';
        }
        return out;
    }

    // n runs of `frame` decided as by packets that read the active policy
    // slot just before the last apply() flipped it and are still running:
    // the slot is flipped back for them, then forward again.
    std::string verdicts_on_the_replaced_policy(const Bytes& frame, int n) {
        const UniqueFd active = program_map(dp_->program_fd(), "sluice_active");
        const uint32_t zero = 0;
        sluice_active now{};
        EXPECT_TRUE(active.valid()) << "the program has no map sluice_active";
        if (!active.valid() || bpf_map_lookup_elem(active.get(), &zero, &now) != 0) {
            ADD_FAILURE() << "reading sluice_active: " << std::strerror(errno);
            return {};
        }
        sluice_active replaced = now;
        replaced.slot ^= 1;
        EXPECT_EQ(bpf_map_update_elem(active.get(), &zero, &replaced, BPF_ANY), 0) << std::strerror(errno);
        std::string out = verdicts(frame, n);
        EXPECT_EQ(bpf_map_update_elem(active.get(), &zero, &now, BPF_ANY), 0) << std::strerror(errno);
        return out;
    }

    // Counters since this test started.
    Counts counts() {
        Counts out{raw_counters()};
        for (size_t i = 0; i < baseline_counters_.size() && i < out.slots.size(); i++) {
            out.slots[i].packets -= baseline_counters_[i].packets;
            out.slots[i].bytes -= baseline_counters_[i].bytes;
        }
        return out;
    }

    // A dataplane health counter since this test started.
    uint64_t stat(uint32_t which) {
        auto s = dp_->stats();
        EXPECT_TRUE(s.ok()) << describe(s);
        return s.ok() ? s.value().at(which) - baseline_stats_.at(which) : ~0ull;
    }

    // The sluice_fleet map, mapped into this process (zero when a test begins).
    sluice_fleet_credit* fleet_credits() { return dp_->fleet_credits(); }
    Status set_bans(const std::vector<DataplaneBan>& bans) { return dp_->set_bans(bans); }
    std::vector<sluice_counter> ban_counters() {
        auto c = dp_->ban_counters();
        EXPECT_TRUE(c.ok()) << describe(c);
        std::vector<sluice_counter> out = c.ok() ? c.value() : std::vector<sluice_counter>(SLUICE_MAX_BANS);
        for (size_t i = 0; i < baseline_ban_counters_.size() && i < out.size(); i++) {
            out[i].packets -= baseline_ban_counters_[i].packets;
            out[i].bytes -= baseline_ban_counters_[i].bytes;
        }
        return out;
    }

    SourceTableUsage source_table() {
        auto s = dp_->source_table();
        EXPECT_TRUE(s.ok()) << describe(s);
        return s.ok() ? s.value() : SourceTableUsage{};
    }

    std::vector<sluice_drop_event> drain_events() {
        std::vector<sluice_drop_event> events;
        auto n = dp_->drain_events([&](const sluice_drop_event& e) { events.push_back(e); });
        EXPECT_TRUE(n.ok()) << describe(n);
        if (n.ok()) {
            EXPECT_EQ(n.value(), events.size());
        }
        return events;
    }

  protected:
    std::unique_ptr<XdpDataplane> dp_;
    uint32_t cpus_ = 0;
    // This test's time zero on the fake clock.
    uint64_t t0_ = kT0;

  private:
    std::vector<sluice_counter> raw_counters() {
        auto c = dp_->counters();
        EXPECT_TRUE(c.ok()) << describe(c);
        std::vector<sluice_counter> out;
        if (c.ok()) out = c.value();
        EXPECT_EQ(out.size(), SLUICE_COUNTER_SLOTS);
        out.resize(SLUICE_COUNTER_SLOTS);
        return out;
    }

    // Adopts the shared dataplane if it was opened with these options, and
    // resets it; false means open a new one.
    bool take_shared(const XdpOptions& opts) {
        SharedDataplane& shared = shared_dataplane();
        if (!shared.dp || !same_options(shared.options, opts)) {
            shared.dp.reset();
            return false;
        }
        dp_ = std::move(shared.dp);
        cpus_ = dp_->possible_cpus();
        t0_ = shared.next_epoch;
        shared.next_epoch += kEpochStep;
        dp_->set_test_clock(t0_);
        // No per-source limit for the next test's first policy to carry over
        // (a class's changed limit keeps judging for one of its old bursts).
        auto reset = dp_->apply(PolicyBuilder(cpus_).add({.id = 1, .action = SLUICE_ACTION_PASS}).build());
        auto unbanned = dp_->set_bans({});
        auto ban_counters = dp_->ban_counters();
        dp_->forget_sources();
        // Nothing decides now: the credit an earlier test granted goes.
        std::memset(dp_->fleet_credits(), 0, sizeof(sluice_fleet_credit) * SLUICE_MAX_CLASSES);
        auto sources = dp_->source_table();
        auto stats = dp_->stats();
        auto drained = dp_->drain_events([](const sluice_drop_event&) {});
        if (!reset.ok() || !unbanned.ok() || !ban_counters.ok() || !sources.ok() || sources.value().known != 0 ||
            !stats.ok() || !drained.ok()) {
            dp_.reset();
            return false;
        }
        baseline_stats_ = stats.value();
        baseline_counters_ = raw_counters();
        baseline_ban_counters_ = ban_counters.value();
        shareable_ = true;
        return true;
    }

    std::vector<sluice_counter> baseline_counters_;
    std::vector<sluice_counter> baseline_ban_counters_;
    std::array<uint64_t, SLUICE_STAT_COUNT> baseline_stats_{};
    bool shareable_ = false;
    cpu_set_t saved_affinity_{};
    bool affinity_saved_ = false;
};

// Base of the fixtures run once per accuracy mode (of the bucket levels).
// Each file derives its own suite from it: one suite instantiated in two
// files would run twice.
class XdpModes : public XdpTest, public ::testing::WithParamInterface<Accuracy> {};

}  // namespace sluice::test
