// SPDX-License-Identifier: Apache-2.0
// Shared by the tests that load the real ebpf/sluice.bpf.c into the running
// kernel through XdpDataplane and drive it with BPF_PROG_TEST_RUN: a fixture
// that opens the dataplane on a test clock with the thread pinned to CPU 0
// (sharing one loaded program between tests, reset between them), a policy
// builder over compile_level and parse_prefix, frame shorthands, counter
// sums and a thread that floods the program from one CPU.
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

#include "common/packet_builder.h"
#include "common/privilege.h"
#include "compiled_policy.h"
#include "rate_limits.h"
#include "sluice/abi.h"
#include "xdp_dataplane.h"

namespace sluice::test {

using Bytes = PacketBuilder::Bytes;

inline constexpr uint64_t kMs = 1'000'000;
inline constexpr uint64_t kSec = 1'000'000'000;
// Source table size for tests: the default (2^18 entries per CPU) takes a
// third of a second to allocate and more to free, for every test.
inline constexpr uint32_t kTestCapacity = 4096;
// Where the fake clock starts: far from 0, which a bucket reads as "new".
// Each test has its own time zero, t0_ in the fixture (see SharedDataplane).
inline constexpr uint64_t kT0 = 1000 * kSec;

inline constexpr uint8_t kPass = SLUICE_VERDICT_PASS;
inline constexpr uint8_t kDrop = SLUICE_VERDICT_DROP;

template <class T>
std::string describe(const Result<T>& r) {
    return r.ok() ? std::string("ok") : r.error().message;
}

#define SLUICE_ASSERT_OK(expr)                                                                       \
    do {                                                                                             \
        const auto& sluice_result = (expr);                                                          \
        ASSERT_TRUE(sluice_result.ok()) << #expr << ": " << ::sluice::test::describe(sluice_result); \
    } while (0)
#define SLUICE_EXPECT_OK(expr)                                                                       \
    do {                                                                                             \
        const auto& sluice_result = (expr);                                                          \
        EXPECT_TRUE(sluice_result.ok()) << #expr << ": " << ::sluice::test::describe(sluice_result); \
    } while (0)

inline uint32_t possible_cpus() { return static_cast<uint32_t>(libbpf_num_possible_cpus()); }

// CLOCK_MONOTONIC, the clock bpf_ktime_get_ns reads.
inline uint64_t monotonic_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * kSec + static_cast<uint64_t>(ts.tv_nsec);
}

inline bool pin_thread_to_cpu(uint32_t cpu) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return sched_setaffinity(0, sizeof(one), &one) == 0;
}

// ---- frames -------------------------------------------------------------------

// A UDP datagram from `source` (IPv4 or IPv6); 60 bytes for IPv4 by default.
inline Bytes udp_from(const std::string& source, size_t payload = 18) {
    PacketBuilder b;
    b.eth();
    if (source.find(':') == std::string::npos)
        b.ipv4(source, "198.51.100.1");
    else
        b.ipv6(source, "2001:db8:ffff::1");
    return b.udp(1000, 53).payload(payload).build();
}

// ---- policies -------------------------------------------------------------------

// One human limit, as a policy file would state it.
struct Limit {
    uint64_t rate = 0;
    uint64_t burst = 0;
    Unit unit = Unit::packets;
    Accuracy accuracy = Accuracy::lease;
    uint32_t max_frame_bytes = kDefaultMaxFrameBytes;
    uint64_t lease = 0;  // 0: compile_level's default
    uint64_t lease_ttl_ns = kDefaultLeaseTtlNs;
};

inline sluice_level_limit compile(const Limit& limit, uint32_t cpus) {
    LevelSettings settings;
    settings.limit = {limit.rate, limit.burst, limit.unit};
    settings.accuracy = limit.accuracy;
    settings.cpus = cpus;
    settings.max_frame_bytes = limit.max_frame_bytes;
    settings.lease = limit.lease;
    settings.lease_ttl_ns = limit.lease_ttl_ns;
    auto level = compile_level(settings, "test");
    EXPECT_TRUE(level.ok()) << describe(level);
    return level.ok() ? level.value() : sluice_level_limit{};
}

struct ClassSpec {
    uint32_t id = 1;
    uint8_t action = SLUICE_ACTION_LIMIT;
    std::optional<Limit> per_source = std::nullopt;
    std::optional<Limit> aggregate = std::nullopt;
    uint8_t table_full_verdict = SLUICE_VERDICT_PASS;
    uint8_t prefix_v4 = 32;
    uint8_t prefix_v6 = 64;
};

// A policy in a few lines. The first class added is the default class unless
// default_class() says otherwise.
class PolicyBuilder {
  public:
    explicit PolicyBuilder(uint32_t cpus, uint64_t version = 1) : cpus_(cpus) {
        policy_.header.version = version;
        policy_.header.non_ip_verdict = SLUICE_VERDICT_PASS;
        policy_.header.malformed_verdict = SLUICE_VERDICT_DROP;
    }

    PolicyBuilder& version(uint64_t v) {
        policy_.header.version = v;
        return *this;
    }
    PolicyBuilder& global(const Limit& limit) {
        policy_.header.global = compile(limit, cpus_);
        return *this;
    }
    PolicyBuilder& add(const ClassSpec& spec) {
        sluice_class_entry cls{};
        cls.class_id = spec.id;
        cls.action = spec.action;
        cls.table_full_verdict = spec.table_full_verdict;
        cls.prefix_v4 = spec.prefix_v4;
        cls.prefix_v6 = spec.prefix_v6;
        if (spec.per_source) cls.per_source = compile(*spec.per_source, cpus_);
        if (spec.aggregate) cls.aggregate = compile(*spec.aggregate, cpus_);
        if (policy_.classes.empty() && !default_set_) policy_.header.default_class_id = spec.id;
        policy_.classes.push_back(cls);
        return *this;
    }
    PolicyBuilder& default_class(uint32_t id) {
        policy_.header.default_class_id = id;
        default_set_ = true;
        return *this;
    }
    PolicyBuilder& prefix(const std::string& cidr, uint32_t class_id) {
        auto p = parse_prefix(cidr, class_id);
        EXPECT_TRUE(p.ok()) << describe(p);
        if (p.ok()) policy_.prefixes.push_back(p.value());
        return *this;
    }
    PolicyBuilder& non_ip(uint8_t verdict) {
        policy_.header.non_ip_verdict = verdict;
        return *this;
    }
    PolicyBuilder& malformed(uint8_t verdict) {
        policy_.header.malformed_verdict = verdict;
        return *this;
    }
    CompiledPolicy build() const {
        const Status valid = validate(policy_);
        EXPECT_TRUE(valid.ok()) << describe(valid);
        return policy_;
    }

  private:
    uint32_t cpus_;
    bool default_set_ = false;
    CompiledPolicy policy_;
};

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
        while (!stop.load(std::memory_order_relaxed)) {
            const int err = test_run(prog_fd_, frame_, repeat_, nullptr);
            if (err) {
                error_ = err;
                return;
            }
            if (sent_ == 0) first_return_ns_ = monotonic_ns();
            sent_ += repeat_;
        }
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
};

// ---- counters -------------------------------------------------------------------

// One read of the class x verdict x reason counters.
struct Counts {
    std::vector<sluice_counter> slots;

    const sluice_counter& at(uint32_t class_id, uint32_t verdict, uint32_t reason) const {
        return slots.at(sluice_counter_index(class_id, verdict, reason));
    }
    uint64_t packets(uint32_t class_id, uint32_t verdict, uint32_t reason) const {
        return at(class_id, verdict, reason).packets;
    }
    uint64_t bytes(uint32_t class_id, uint32_t verdict, uint32_t reason) const {
        return at(class_id, verdict, reason).bytes;
    }
    // Packets with this reason in every class and verdict.
    uint64_t reason(uint32_t reason) const {
        uint64_t sum = 0;
        for (uint32_t c = 0; c < SLUICE_MAX_CLASSES; c++)
            for (uint32_t v = 0; v < SLUICE_VERDICT_COUNT; v++) sum += packets(c, v, reason);
        return sum;
    }
    uint64_t verdict(uint32_t verdict) const {
        uint64_t sum = 0;
        for (uint32_t c = 0; c < SLUICE_MAX_CLASSES; c++)
            for (uint32_t r = 0; r < SLUICE_REASON_COUNT; r++) sum += packets(c, verdict, r);
        return sum;
    }
    uint64_t total() const {
        uint64_t sum = 0;
        for (const auto& c : slots) sum += c.packets;
        return sum;
    }
};

// ---- the fixture ----------------------------------------------------------------

// Loading the program costs about a second of verifier time, so tests on the
// fake clock share one loaded dataplane per set of options instead of loading
// it for each test. Between tests it is brought back to the equivalent of a
// fresh one: the clock jumps to a new epoch far past every test limit's fill
// time (so every class and global bucket is full again, and every lease has
// expired), all source entries are collected, queued events are drained, and
// counters and stats are read relative to what they were at the start.
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
           a.source_lru == b.source_lru && a.drop_sample_period == b.drop_sample_period && a.pin_dir == b.pin_dir;
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
        baseline_stats_ = {};
        auto dp = XdpDataplane::open(opts);
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

    PolicyBuilder policy(uint64_t version = 1) const { return PolicyBuilder(cpus_, version); }

    void apply(const CompiledPolicy& policy) { SLUICE_ASSERT_OK(dp_->apply(policy)); }

    void set_clock(uint64_t now_ns) { dp_->set_test_clock(now_ns); }

    // Split mode divides a level among the CPUs: multiplying by this gives
    // this CPU a share equal to what lease mode gives the whole bucket.
    uint64_t per_cpu(Accuracy accuracy) const { return accuracy == Accuracy::split ? cpus_ : 1; }

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

    std::pair<size_t, size_t> source_counts() {
        auto s = dp_->source_counts();
        EXPECT_TRUE(s.ok()) << describe(s);
        return s.ok() ? s.value() : std::pair<size_t, size_t>{~size_t{0}, ~size_t{0}};
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
        auto collected = dp_->collect_idle_sources(~0ull);
        auto sources = dp_->source_counts();
        auto stats = dp_->stats();
        auto drained = dp_->drain_events([](const sluice_drop_event&) {});
        if (!collected.ok() || !sources.ok() || sources.value() != std::pair<size_t, size_t>{0, 0} || !stats.ok() ||
            !drained.ok()) {
            dp_.reset();
            return false;
        }
        baseline_stats_ = stats.value();
        baseline_counters_ = raw_counters();
        shareable_ = true;
        return true;
    }

    std::vector<sluice_counter> baseline_counters_;
    std::array<uint64_t, SLUICE_STAT_COUNT> baseline_stats_{};
    bool shareable_ = false;
    cpu_set_t saved_affinity_{};
    bool affinity_saved_ = false;
};

// Base of the fixtures run once per accuracy mode. Each file derives its
// own suite from it: one suite instantiated in two files would run twice.
class XdpModes : public XdpTest, public ::testing::WithParamInterface<Accuracy> {};

inline std::string accuracy_name(const ::testing::TestParamInfo<Accuracy>& info) {
    return info.param == Accuracy::split ? "split" : "lease";
}

}  // namespace sluice::test
