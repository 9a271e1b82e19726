// SPDX-License-Identifier: Apache-2.0
// The real program on several CPUs: one source entry for every CPU, how split
// and lease mode divide a class aggregate, policy flips while every CPU is
// deciding, and the admitted rate against the bound on the real clock.
#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <list>
#include <thread>

#include "common/verdict_scenarios.h"
#include "xdp_fixture.h"

namespace sluice::test {
namespace {

// Floods from every CPU, one thread per CPU and frame, until stopped.
class Floods {
  public:
    Floods(int prog_fd, const std::vector<Bytes>& frames, uint32_t cpus, uint32_t repeat) {
        for (uint32_t cpu = 0; cpu < cpus; cpu++)
            for (const Bytes& frame : frames) floods_.emplace_back(prog_fd, frame, cpu, repeat);
    }
    ~Floods() { stop(); }

    void start() {
        for (auto& f : floods_) threads_.emplace_back([&f, this] { f(stop_); });
    }
    void stop() {
        stop_ = true;
        for (auto& t : threads_) t.join();
        threads_.clear();
    }
    uint64_t sent() const {
        uint64_t sum = 0;
        for (const auto& f : floods_) sum += f.sent();
        return sum;
    }
    // The first error of any thread, 0 if none.
    int error() const {
        for (const auto& f : floods_)
            if (f.error()) return f.error();
        return 0;
    }
    const std::list<Flood>& each() const { return floods_; }

  private:
    std::list<Flood> floods_;  // Flood holds an atomic: neither copied nor moved
    std::vector<std::thread> threads_;
    std::atomic<bool> stop_{false};
};

class XdpCpus : public XdpTest {
  protected:
    void SetUp() override {
        ASSERT_NO_FATAL_FAILURE(XdpTest::SetUp());
        if (IsSkipped()) return;
        SLUICE_SKIP_UNLESS(cpus_ >= 2, "needs at least 2 possible CPUs, have " + std::to_string(cpus_));
    }
};

// ---- how a bucket is divided ----------------------------------------------------------

TEST_F(XdpCpus, SourceIsOneBucketAcrossCpus) { scenarios::source_is_one_bucket_across_cpus(*this); }

TEST_F(XdpCpus, SplitModeGivesEachCpuItsShare) { scenarios::split_mode_gives_each_cpu_its_share(*this); }

TEST_F(XdpCpus, LeaseModeSharesOneBucketAcrossCpus) { scenarios::lease_mode_shares_one_bucket_across_cpus(*this); }

TEST_F(XdpCpus, ExpiredLeaseGoesBackToTheSharedBucket) {
    scenarios::expired_lease_goes_back_to_the_shared_bucket(*this);
}

// ---- policy flips under load ------------------------------------------------------------

TEST_F(XdpCpus, FlipsNeverMixTwoVersions) {
    // In A the prefix puts the source in class 1 (pass) and class 2 drops;
    // in B the prefix puts it in class 2 (pass) and class 1 drops. A packet
    // that took one version's LPM and the other's class entries is a DENY.
    auto version = [&](uint64_t v, bool a) {
        return policy(v)
            .add({.id = 3, .action = SLUICE_ACTION_PASS})  // default, unused
            .add({.id = 1, .action = uint8_t(a ? SLUICE_ACTION_PASS : SLUICE_ACTION_DROP)})
            .add({.id = 2, .action = uint8_t(a ? SLUICE_ACTION_DROP : SLUICE_ACTION_PASS)})
            .prefix("10.0.0.0/8", a ? 1 : 2)
            .build();
    };
    CompiledPolicy a = version(1, true), b = version(2, false);
    apply(a);

    unpin();  // the floods take every CPU; the flipping thread may run anywhere
    // One run per call. With repeat > 1, BPF_PROG_TEST_RUN registers the
    // program with the kernel's XDP dispatcher for the call and unregisters
    // it after, each an RCU grace period when no other call holds it; apply
    // waits out one grace period per flip too, so the runs lock in step with
    // the flips (measured: every run landed right after a grace period, all
    // in the same version) and never straddle one. Single runs (~1.5 us)
    // keep every CPU deciding through every flip.
    Floods floods(dp_->program_fd(), {udp_from("10.1.2.3")}, cpus_, 1);
    floods.start();
    // Each apply waits out a grace period: 200 flips take a few seconds, longer
    // while both CPUs flood; the deadline only stops a hang.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    uint64_t flips = 0;
    while (flips < 200 && std::chrono::steady_clock::now() < deadline) {
        CompiledPolicy& next = flips % 2 == 0 ? b : a;
        next.header.version = flips + 2;
        const Status applied = dp_->apply(next);
        ASSERT_TRUE(applied.ok()) << describe(applied);
        flips++;
    }
    floods.stop();
    ASSERT_EQ(floods.error(), 0) << std::strerror(floods.error());
    for (const auto& f : floods.each()) EXPECT_GT(f.sent(), 0u) << "a flood thread never ran";

    const Counts c = counts();
    EXPECT_EQ(c.reason(SLUICE_REASON_DENY), 0u);
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ALLOWED) + c.packets(2, kPass, SLUICE_REASON_ALLOWED), floods.sent());
    EXPECT_EQ(c.total(), floods.sent());
    EXPECT_GT(c.packets(1, kPass, SLUICE_REASON_ALLOWED), 0u);
    EXPECT_GT(c.packets(2, kPass, SLUICE_REASON_ALLOWED), 0u);
    EXPECT_EQ(flips, 200u) << "the flips did not finish within a minute";
    RecordProperty("flips", static_cast<int>(flips));
    RecordProperty("packets", std::to_string(floods.sent()));
    std::cout << "[ flips    ] " << flips << " flips while " << cpus_ << " CPUs decided " << floods.sent()
              << " packets (" << c.packets(1, kPass, SLUICE_REASON_ALLOWED) << " in version A, "
              << c.packets(2, kPass, SLUICE_REASON_ALLOWED) << " in B); DENY " << c.reason(SLUICE_REASON_DENY) << "\n";
    auto active = dp_->active_version();
    SLUICE_ASSERT_OK(active);
    EXPECT_EQ(active.value(), flips + 1);
}

// ---- admitted rate on the real clock ------------------------------------------------------

constexpr uint64_t kRate = 100'000;  // packets per second
// Half a second of rate: a bucket only loses refill while no CPU floods for
// longer than burst/rate, and on a loaded machine both flood threads can be
// preempted for 100 ms and more (with 0.1 s here, 0.86 of the bound was seen).
constexpr uint64_t kBurst = 50'000;
constexpr auto kWindow = std::chrono::milliseconds(1500);

class XdpRealClock : public XdpCpus {
  protected:
    XdpOptions options() const override {
        return XdpOptions{.test_clock = false, .source_capacity = kTestCapacity, .pin_dir = {}};
    }

    struct Window {
        Counts counts;
        uint64_t offered = 0;
        // T: from before the first call to after the last, on the clock the
        // program reads. Every admitted packet was decided inside it.
        double seconds = 0;
        // From when every thread's first call had returned to the stop
        // signal: every CPU was flooding throughout.
        double flooded_seconds = 0;
        uint64_t begin_ns = 0, end_ns = 0;                  // T, on the program's clock
        uint64_t flooded_begin_ns = 0, flooded_end_ns = 0;  // every CPU flooding

        uint64_t admitted(uint32_t class_id = 1) const {
            return counts.packets(class_id, kPass, SLUICE_REASON_ADMITTED);
        }
    };

    // Applies `p`, then every CPU floods each of `sources` (a thread per CPU
    // and source) for kWindow.
    Window saturate(const CompiledPolicy& p, const std::vector<std::string>& sources) {
        Window w;
        const Status applied = dp_->apply(p);
        EXPECT_TRUE(applied.ok()) << describe(applied);
        if (!applied.ok()) return w;
        std::vector<Bytes> frames;
        for (const std::string& source : sources) frames.push_back(udp_from(source));
        unpin();
        // One run per call: with repeat > 1 each call registers the program
        // with the XDP dispatcher and unregisters it after, waiting out RCU
        // grace periods, and a flood that stops in such a wait (up to 50 ms
        // seen) loses the end of its window. Single runs offer without gaps.
        Floods floods(dp_->program_fd(), frames, cpus_, 1);
        const uint64_t begin = monotonic_ns();
        floods.start();
        std::this_thread::sleep_for(kWindow);
        const uint64_t stop_signal = monotonic_ns();
        floods.stop();
        const uint64_t end = monotonic_ns();
        EXPECT_EQ(floods.error(), 0) << std::strerror(floods.error());
        uint64_t all_flooding = begin;
        for (const auto& f : floods.each()) {
            EXPECT_NE(f.first_return_ns(), 0u) << "a flood thread never completed a call";
            all_flooding = std::max(all_flooding, f.first_return_ns());
        }
        w.counts = counts();
        w.offered = floods.sent();
        w.seconds = static_cast<double>(end - begin) / 1e9;
        w.flooded_seconds = static_cast<double>(stop_signal - std::min(all_flooding, stop_signal)) / 1e9;
        w.begin_ns = begin;
        w.end_ns = end;
        w.flooded_begin_ns = std::min(all_flooding, stop_signal);
        w.flooded_end_ns = stop_signal;
        EXPECT_EQ(w.counts.total(), w.offered);
        return w;
    }

    static double ideal(double seconds) { return static_cast<double>(kBurst) + static_cast<double>(kRate) * seconds; }

    // The flood offered well over what the limit lets through, so the limit
    // was what held admissions down. How far over depends on how busy the
    // machine is (3x with two builds running beside, 15x idle); the bounds
    // checked after this do not.
    static void expect_saturated(const Window& w) {
        EXPECT_GT(static_cast<double>(w.offered), 2 * ideal(w.seconds)) << "the flood never saturated the limit";
    }

    void report(const char* name, const Window& w, uint64_t admitted, double bound) {
        const double ratio = admitted / ideal(w.seconds);
        const double flooded_ratio = admitted / ideal(w.flooded_seconds);
        std::cout << "[ " << name << " ] N=" << cpus_ << " T=" << w.seconds << " s (all CPUs flooding for "
                  << w.flooded_seconds << " s) offered=" << w.offered << " admitted=" << admitted
                  << " burst+rate*T=" << ideal(w.seconds) << " bound=" << bound << " admitted/(burst+rate*T)=" << ratio
                  << " admitted/(burst+rate*T_flooded)=" << flooded_ratio << "\n";
        RecordProperty(std::string(name) + "_ratio", std::to_string(ratio));
        RecordProperty(std::string(name) + "_flooded_ratio", std::to_string(flooded_ratio));
    }
};

// One source flooded from every CPU: its entry is one word all CPUs swap, so
// the bound has no N*L term, and a saturated source gets all of it.
TEST_F(XdpRealClock, SourceAdmitsExactlyBurstPlusRateTimesT) {
    const Window w =
        saturate(policy().add({.id = 1, .per_source = Limit{.rate = kRate, .burst = kBurst}}).build(), {"192.0.2.1"});
    const uint64_t admitted = w.admitted();
    report("gcra", w, admitted, ideal(w.seconds));
    expect_saturated(w);
    EXPECT_LE(static_cast<double>(admitted), ideal(w.seconds));
    EXPECT_GE(static_cast<double>(admitted), 0.99 * ideal(w.flooded_seconds));
}

// README, the XDP dataplane: XdpOptions::coarse_clock reads
// bpf_ktime_get_coarse_ns, so refills arrive in ticks and the bound becomes
// burst + rate·(T + tick). The tick is CLOCK_MONOTONIC_COARSE's resolution
// (what that helper reads), 4 ms at HZ=250.
class XdpCoarseClock : public XdpRealClock {
  protected:
    XdpOptions options() const override {
        return XdpOptions{.test_clock = false, .coarse_clock = true, .source_capacity = kTestCapacity, .pin_dir = {}};
    }
};

TEST_F(XdpCoarseClock, SourceAdmitsAtMostBurstPlusRateTimesTPlusATick) {
    timespec resolution{};
    ASSERT_EQ(clock_getres(CLOCK_MONOTONIC_COARSE, &resolution), 0) << std::strerror(errno);
    const double tick = static_cast<double>(resolution.tv_sec) + static_cast<double>(resolution.tv_nsec) / 1e9;
    ASSERT_GT(tick, 0.0);
    const Window w =
        saturate(policy().add({.id = 1, .per_source = Limit{.rate = kRate, .burst = kBurst}}).build(), {"192.0.2.1"});
    const uint64_t admitted = w.admitted();
    // T is measured on the fine clock around the flood; every decision read a
    // coarse time in (t - tick, t], so the times the program saw span at most
    // T + tick.
    const double bound = ideal(w.seconds + tick);
    report("coarse", w, admitted, bound);
    std::cout << "[ coarse   ] tick=" << tick * 1e3 << " ms\n";
    expect_saturated(w);
    EXPECT_LE(static_cast<double>(admitted), bound);
    // The clock moved: past its burst the source got refills, at least half of
    // what the flood's time (less a tick) is worth. Only that: a rate floor
    // would measure the machine (flood threads preempted under load cost
    // refill; 0.956 of the ideal seen beside another long run), and a clock that
    // never advanced would admit the burst alone.
    EXPECT_GE(static_cast<double>(admitted),
              static_cast<double>(kBurst) + 0.5 * static_cast<double>(kRate) * (w.flooded_seconds - tick));
}

// Two sources in the same set, both flooded from every CPU: their entries are
// two words of one cache line, each swapped by every CPU, and neither can
// charge the other's.
TEST_F(XdpRealClock, TwoSourcesSharingASetEachGetExactlyTheirBound) {
    // One source in class 1, one in class 2 (so the counters tell them
    // apart), with the same home set under this load's key and different
    // tags (sources whose tags collide are one source to the table).
    const sluice_hash_key& key = dp_->hash_key();
    const uint32_t mask = dp_->source_sets() - 1;
    auto hash_of = [&](const std::string& address, uint32_t class_id) {
        sluice_source_key k{};
        k.class_id = class_id;
        k.family = SLUICE_FAMILY_IPV4;
        const auto bytes = PacketBuilder::address(address);
        std::memcpy(k.addr, bytes.data(), 4);
        return sluice_source_hash(&k, &key);
    };
    const std::string second = "192.0.2.7";
    const uint64_t second_hash = hash_of(second, 2);
    std::string first;
    for (uint32_t i = 1; first.empty(); i++) {
        const std::string candidate = "10.0." + std::to_string(i / 256) + "." + std::to_string(i % 256);
        const uint64_t hash = hash_of(candidate, 1);
        if (sluice_source_home(hash, mask) == sluice_source_home(second_hash, mask) &&
            sluice_source_tag(hash) != sluice_source_tag(second_hash))
            first = candidate;
    }
    const Window w = saturate(policy()
                                  .add({.id = 1, .per_source = Limit{.rate = kRate, .burst = kBurst}})
                                  .add({.id = 2, .per_source = Limit{.rate = kRate, .burst = kBurst}})
                                  .prefix("192.0.2.0/24", 2)
                                  .build(),
                              {first, second});
    for (uint32_t class_id : {1u, 2u}) {
        const uint64_t admitted = w.admitted(class_id);
        report(class_id == 1 ? "set 1/2" : "set 2/2", w, admitted, ideal(w.seconds));
        EXPECT_LE(static_cast<double>(admitted), ideal(w.seconds)) << "class " << class_id;
        EXPECT_GE(static_cast<double>(admitted), 0.99 * ideal(w.flooded_seconds)) << "class " << class_id;
    }
    // Drops of a source whose swap lost to another CPU's SLUICE_SOURCE_ATTEMPTS
    // times in a row: counted, never admitted twice; only printed here.
    std::cout << "[ set      ] contended drops: " << stat(SLUICE_STAT_SOURCE_CONTENDED) << "\n";
}

TEST_F(XdpRealClock, LeasedAggregateAdmitsBurstPlusRateTimesTPlusAtMostNLeases) {
    const Limit limit{.rate = kRate, .burst = kBurst};
    const sluice_level_limit level = compile(limit, cpus_);
    const double lease = static_cast<double>(level.lease_nano) / 1e9;
    const Window w = saturate(policy().add({.id = 1, .aggregate = limit}).build(), {"192.0.2.1"});
    const uint64_t admitted = w.admitted();
    const double bound = ideal(w.seconds) + cpus_ * lease;
    report("lease", w, admitted, bound);
    expect_saturated(w);
    EXPECT_LE(static_cast<double>(admitted), bound);
    EXPECT_GE(static_cast<double>(admitted), 0.99 * ideal(w.flooded_seconds));
}

TEST_F(XdpRealClock, SplitAggregateAdmitsBurstPlusRateTimesTAndNoMore) {
    const Window w =
        saturate(policy()
                     .add({.id = 1, .aggregate = Limit{.rate = kRate, .burst = kBurst, .accuracy = Accuracy::split}})
                     .build(),
                 {"192.0.2.1"});
    const uint64_t admitted = w.admitted();
    report("split", w, admitted, ideal(w.seconds));
    expect_saturated(w);
    // Split mode never over-admits: each CPU spends at most its share.
    EXPECT_LE(static_cast<double>(admitted), ideal(w.seconds));
    // And it under-admits only what a CPU left unspent: each floods its own
    // share throughout, but a share is spent only by its CPU, so a flood
    // thread descheduled now and then (the other's softirq, the test) costs
    // that CPU's refill past its half-second bucket. Seen 0.984 to 0.99999 of
    // the ideal; 5% below it is a share refilling too slowly.
    EXPECT_GE(static_cast<double>(admitted), 0.95 * ideal(w.flooded_seconds));
}

// A class aggregate counting in windows, one source flooded from every CPU:
// every admission is one transition of the class's state under its lock, so
// no CPU's update is lost and the algorithm's own bound holds. Fixed and
// sliding windows admit at most `limit` in each aligned window T touches;
// the log at most `limit` in each of the ceil(T / W) rolling windows that
// cover T. At least 0.8 of it in the windows every CPU flooded throughout
// (a window lost to a preempted flood is not made up later, unlike a
// bucket's burst).
class XdpRealClockWindows : public XdpRealClock, public ::testing::WithParamInterface<scenarios::WindowCase> {};

TEST_P(XdpRealClockWindows, OneFloodedLevelNeverPassesItsAlgorithmsBound) {
    const scenarios::WindowCase c = GetParam();
    const Window w = saturate(policy().add(scenarios::window_case_class(c)).build(), {"192.0.2.1"});
    const uint64_t admitted = w.admitted();
    const uint64_t bound = scenarios::window_bound(c.algorithm, c.limit, c.window_ns, w.begin_ns, w.end_ns);
    const uint64_t floor =
        scenarios::window_floor(c.algorithm, c.limit, c.window_ns, w.flooded_begin_ns, w.flooded_end_ns);
    std::cout << "[ window   ] " << scenarios::window_case_name({c, 0}) << " N=" << cpus_ << " T=" << w.seconds
              << " s offered=" << w.offered << " admitted=" << admitted << " bound=" << bound
              << " admitted/bound=" << static_cast<double>(admitted) / bound
              << " (windows flooded throughout: " << floor << ")\n";
    EXPECT_GT(w.offered, 2 * bound) << "the flood never saturated the limit";
    EXPECT_LE(admitted, bound);
    EXPECT_GE(static_cast<double>(admitted), 0.8 * static_cast<double>(floor));
    EXPECT_EQ(w.counts.packets(1, kDrop, scenarios::window_case_reason(c)), w.offered - admitted);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, XdpRealClockWindows, ::testing::ValuesIn(scenarios::kWindowCases),
                         scenarios::window_case_name);

}  // namespace
}  // namespace sluice::test
