// SPDX-License-Identifier: Apache-2.0
// The real program on several CPUs: one source entry for every CPU, how split
// and lease mode divide a class aggregate, policy flips while every CPU is
// deciding, and the admitted rate against the bound on the real clock.
#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <limits>
#include <list>
#include <memory>
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

// The rate the real-clock tests limit at when the machine floods fast enough
// (idle, every CPU offers about 2M/s), and the share of the offered rate they
// limit at when it does not (beside builds it offered under 100k/s): the flood
// then exceeds the limit by that margin whatever the machine's speed, and the
// saturation checked after it (kSaturation) holds unless the machine slows
// down fourfold between calibration and flood.
constexpr uint64_t kMaxRate = 100'000;  // packets per second
constexpr double kCalibrationMargin = 20;
constexpr double kSaturation = 5;
constexpr auto kCalibration = std::chrono::milliseconds(300);
constexpr auto kWindow = std::chrono::milliseconds(1500);

class XdpRealClock : public XdpCpus {
  protected:
    XdpOptions options() const override {
        return XdpOptions{.test_clock = false, .source_capacity = kTestCapacity, .pin_dir = {}};
    }

    struct Window {
        Counts counts;
        uint64_t offered = 0;
        std::vector<uint64_t> offered_per_source;  // in the order saturate() was given them
        // T: from before the first call to after the last, on the clock the
        // program reads. Every admitted packet was decided inside it.
        double seconds = 0;
        // From when every thread's first call had returned to the stop
        // signal: every CPU was flooding throughout.
        double flooded_seconds = 0;
        uint64_t begin_ns = 0, end_ns = 0;                  // T, on the program's clock
        uint64_t flooded_begin_ns = 0, flooded_end_ns = 0;  // every CPU flooding
        // Per source, the stalls of each thread flooding it (Flood::stalls).
        std::vector<std::vector<std::vector<Flood::Stall>>> stalls;
        std::shared_ptr<Floods> floods;  // stopped: what each thread did

        uint64_t admitted(uint32_t class_id = 1) const {
            return counts.packets(class_id, kPass, SLUICE_REASON_ADMITTED);
        }
    };

    // Floods `sources` from every CPU for kCalibration under a policy that
    // passes everything, and sets limit_ to kCalibrationMargin below what
    // each source was offered (at most kMaxRate), with half a second of it
    // as the burst: a bucket only loses refill while no CPU floods its
    // source for longer than burst/rate, and on a loaded machine both flood
    // threads can be preempted for 100 ms and more (with 0.1 s, 0.86 of the
    // bound was seen).
    void calibrate(const std::vector<std::string>& sources) {
        SLUICE_ASSERT_OK(dp_->apply(policy().add({.id = 1, .action = SLUICE_ACTION_PASS}).build()));
        std::vector<Bytes> frames;
        for (const std::string& source : sources) frames.push_back(udp_from(source));
        unpin();
        Floods floods(dp_->program_fd(), frames, cpus_, 1);
        const uint64_t begin = monotonic_ns();
        floods.start();
        std::this_thread::sleep_for(kCalibration);
        floods.stop();
        const double seconds = static_cast<double>(monotonic_ns() - begin) / 1e9;
        ASSERT_EQ(floods.error(), 0) << std::strerror(floods.error());
        calibrated_per_second_ = static_cast<double>(floods.sent()) / static_cast<double>(sources.size()) / seconds;
        const uint64_t rate =
            std::clamp<uint64_t>(static_cast<uint64_t>(calibrated_per_second_ / kCalibrationMargin), 1'000, kMaxRate);
        limit_ = Limit{.rate = rate, .burst = rate / 2};
        std::cout << "[ calibrate] " << sources.size() << " source(s) offered " << calibrated_per_second_
                  << "/s each from " << cpus_ << " CPUs: limit " << limit_.rate << "/s, burst " << limit_.burst << "\n";
        RecordProperty("calibrated_per_second", std::to_string(calibrated_per_second_));
    }

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
        const Counts before = counts();  // the calibration's
        // One run per call: with repeat > 1 each call registers the program
        // with the XDP dispatcher and unregisters it after, waiting out RCU
        // grace periods, and a flood that stops in such a wait (up to 50 ms
        // seen) loses the end of its window. Single runs offer without gaps.
        w.floods = std::make_shared<Floods>(dp_->program_fd(), frames, cpus_, 1);
        Floods& floods = *w.floods;
        const uint64_t begin = monotonic_ns();
        floods.start();
        std::this_thread::sleep_for(kWindow);
        const uint64_t stop_signal = monotonic_ns();
        floods.stop();
        const uint64_t end = monotonic_ns();
        EXPECT_EQ(floods.error(), 0) << std::strerror(floods.error());
        uint64_t all_flooding = begin;
        w.offered_per_source.resize(sources.size());
        w.stalls.resize(sources.size());
        size_t i = 0;  // Floods holds a flood per CPU and frame, frames innermost
        for (const auto& f : floods.each()) {
            EXPECT_NE(f.first_return_ns(), 0u) << "a flood thread never completed a call";
            all_flooding = std::max(all_flooding, f.first_return_ns());
            w.offered_per_source[i % sources.size()] += f.sent();
            w.stalls[i % sources.size()].push_back(f.stalls());
            i++;
        }
        w.counts = counts();
        for (size_t slot = 0; slot < w.counts.slots.size(); slot++) {
            w.counts.slots[slot].packets -= before.slots[slot].packets;
            w.counts.slots[slot].bytes -= before.slots[slot].bytes;
        }
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

    double ideal(double seconds) const {
        return static_cast<double>(limit_.burst) + static_cast<double>(limit_.rate) * seconds;
    }

    // The refill a saturated bucket of limit_ on `source` can have lost
    // while every CPU flooded: only while no thread flooding it decided for
    // longer than burst/rate, which happens inside a stall of each of those
    // threads; at most what the stalls of the thread that stalled least
    // are worth past the burst (a loss of a longer stall is at least the
    // sum of its parts'). Zero unless some stall of every thread lasted
    // burst/rate.
    double lost_refill(const Window& w, size_t source = 0) const {
        double least = std::numeric_limits<double>::infinity();
        for (const auto& thread : w.stalls.at(source)) {
            double lost = 0;
            for (const Flood::Stall& s : thread) {
                const uint64_t from = std::max(s.from_ns, w.flooded_begin_ns), to = std::min(s.to_ns, w.flooded_end_ns);
                if (to <= from) continue;
                lost += std::max(0.0, static_cast<double>(limit_.rate) * static_cast<double>(to - from) / 1e9 -
                                          static_cast<double>(limit_.burst));
            }
            least = std::min(least, lost);
        }
        return std::isinf(least) ? 0 : least;
    }

    // The flood offered each source well over what the limit lets through,
    // so the limit was what held admissions down: a property calibrate()
    // gave it by limiting at kCalibrationMargin below what the machine
    // offered, not one of the machine's speed.
    void expect_saturated(const Window& w) const {
        for (size_t source = 0; source < w.offered_per_source.size(); source++)
            EXPECT_GT(static_cast<double>(w.offered_per_source[source]), kSaturation * ideal(w.seconds))
                << "source " << source << ": the flood never saturated the limit (calibrated at "
                << calibrated_per_second_ << "/s per source)";
    }

    void report(const char* name, const Window& w, uint64_t admitted, double bound, double floor) {
        const double ratio = admitted / ideal(w.seconds);
        const double flooded_ratio = admitted / ideal(w.flooded_seconds);
        std::cout << "[ " << name << " ] N=" << cpus_ << " rate=" << limit_.rate << " burst=" << limit_.burst
                  << " T=" << w.seconds << " s (all CPUs flooding for " << w.flooded_seconds
                  << " s) offered=" << w.offered << " (" << w.offered / ideal(w.seconds)
                  << "x burst+rate*T) admitted=" << admitted << " burst+rate*T=" << ideal(w.seconds)
                  << " bound=" << bound << " floor=" << floor << " admitted/(burst+rate*T)=" << ratio
                  << " admitted/(burst+rate*T_flooded)=" << flooded_ratio << "\n";
        RecordProperty(std::string(name) + "_ratio", std::to_string(ratio));
        RecordProperty(std::string(name) + "_flooded_ratio", std::to_string(flooded_ratio));
    }

    Limit limit_{};
    double calibrated_per_second_ = 0;
};

// One source flooded from every CPU: its entry is one word all CPUs swap, so
// the bound has no N*L term, and a saturated source gets all of it.
TEST_F(XdpRealClock, SourceAdmitsExactlyBurstPlusRateTimesT) {
    ASSERT_NO_FATAL_FAILURE(calibrate({"192.0.2.1"}));
    const Window w = saturate(policy().add({.id = 1, .per_source = limit_}).build(), {"192.0.2.1"});
    const uint64_t admitted = w.admitted();
    // A saturated bucket admits burst + rate·T_flooded while every CPU floods,
    // less only the refill lost in stalls of every thread longer than
    // burst/rate (lost_refill, measured).
    const double floor = 0.99 * (ideal(w.flooded_seconds) - lost_refill(w));
    report("gcra", w, admitted, ideal(w.seconds), floor);
    expect_saturated(w);
    EXPECT_LE(static_cast<double>(admitted), ideal(w.seconds));
    EXPECT_GE(static_cast<double>(admitted), floor);
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
    ASSERT_NO_FATAL_FAILURE(calibrate({"192.0.2.1"}));
    const Window w = saturate(policy().add({.id = 1, .per_source = limit_}).build(), {"192.0.2.1"});
    const uint64_t admitted = w.admitted();
    // T is measured on the fine clock around the flood; every decision read a
    // coarse time in (t - tick, t], so the times the program saw span at most
    // T + tick.
    const double bound = ideal(w.seconds + tick);
    // And while every CPU flooded they spanned at least T_flooded - tick: the
    // fine clock's floor, a tick shorter (a clock that never advanced would
    // admit the burst alone).
    const double floor = 0.99 * (ideal(w.flooded_seconds - tick) - lost_refill(w));
    report("coarse", w, admitted, bound, floor);
    std::cout << "[ coarse   ] tick=" << tick * 1e3 << " ms\n";
    expect_saturated(w);
    EXPECT_LE(static_cast<double>(admitted), bound);
    EXPECT_GE(static_cast<double>(admitted), floor);
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
    ASSERT_NO_FATAL_FAILURE(calibrate({first, second}));
    const Window w = saturate(policy()
                                  .add({.id = 1, .per_source = limit_})
                                  .add({.id = 2, .per_source = limit_})
                                  .prefix("192.0.2.0/24", 2)
                                  .build(),
                              {first, second});
    expect_saturated(w);
    for (uint32_t class_id : {1u, 2u}) {
        const uint64_t admitted = w.admitted(class_id);
        const double floor = 0.99 * (ideal(w.flooded_seconds) - lost_refill(w, class_id - 1));
        report(class_id == 1 ? "set 1/2" : "set 2/2", w, admitted, ideal(w.seconds), floor);
        EXPECT_LE(static_cast<double>(admitted), ideal(w.seconds)) << "class " << class_id;
        EXPECT_GE(static_cast<double>(admitted), floor) << "class " << class_id;
    }
    // Drops of a source whose swap lost to another CPU's SLUICE_SOURCE_ATTEMPTS
    // times in a row: counted, never admitted twice; only printed here.
    std::cout << "[ set      ] contended drops: " << stat(SLUICE_STAT_SOURCE_CONTENDED) << "\n";
}

TEST_F(XdpRealClock, LeasedAggregateAdmitsBurstPlusRateTimesTPlusAtMostNLeases) {
    ASSERT_NO_FATAL_FAILURE(calibrate({"192.0.2.1"}));
    const sluice_level_limit level = compile(limit_, cpus_);
    const double lease = static_cast<double>(level.lease_nano) / 1e9;
    const Window w = saturate(policy().add({.id = 1, .aggregate = limit_}).build(), {"192.0.2.1"});
    const uint64_t admitted = w.admitted();
    const double bound = ideal(w.seconds) + cpus_ * lease;
    const double floor = 0.99 * (ideal(w.flooded_seconds) - lost_refill(w));
    report("lease", w, admitted, bound, floor);
    expect_saturated(w);
    EXPECT_LE(static_cast<double>(admitted), bound);
    EXPECT_GE(static_cast<double>(admitted), floor);
}

TEST_F(XdpRealClock, SplitAggregateAdmitsBurstPlusRateTimesTAndNoMore) {
    ASSERT_NO_FATAL_FAILURE(calibrate({"192.0.2.1"}));
    Limit split = limit_;
    split.accuracy = Accuracy::split;
    const Window w = saturate(policy().add({.id = 1, .aggregate = split}).build(), {"192.0.2.1"});
    const uint64_t admitted = w.admitted();
    report("split", w, admitted, ideal(w.seconds), 0.95 * ideal(w.flooded_seconds));
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
// cover T. What they admit at least is measured (measured_floor): a window
// whose flood threads were all preempted is not made up later, unlike a
// bucket's burst, and on a loaded machine a 10 ms window can be.
class XdpRealClockWindows : public XdpRealClock, public ::testing::WithParamInterface<scenarios::WindowCase> {
  protected:
    static uint64_t decisions_within(const Window& w, uint64_t from_ns, uint64_t to_ns) {
        uint64_t decided = 0;
        for (const Flood& f : w.floods->each()) decided += f.decisions_within(from_ns, to_ns);
        return decided;
    }

    // Fixed and sliding windows: in each aligned window every CPU flooded
    // throughout, `limit` or the decisions made in it if fewer. The log: a
    // refusal at t means `limit` admissions in (t - W, t], so `limit` for
    // each link of a chain of refusals W apart, walked back from the end
    // through the milliseconds holding more than `limit` decisions (of
    // which one was refused: no W holds more than `limit` admissions).
    static uint64_t measured_floor(const Window& w, const scenarios::WindowCase& c) {
        if (c.algorithm == SLUICE_ALGORITHM_SLIDING_LOG) {
            constexpr uint64_t kMs = 1'000'000;
            uint64_t links = 0;
            for (uint64_t ms = w.flooded_end_ns / kMs; ms-- > w.flooded_begin_ns / kMs + 1;)
                if (decisions_within(w, ms * kMs, (ms + 1) * kMs) > c.limit) {
                    links++;
                    ms -= std::min(ms, c.window_ns / kMs);  // the next refusal ends W before this millisecond
                }
            return links * c.limit;
        }
        uint64_t floor = 0;
        for (uint64_t from = (w.flooded_begin_ns / c.window_ns + 1) * c.window_ns;
             from + c.window_ns <= w.flooded_end_ns; from += c.window_ns) {
            floor += std::min(c.limit, decisions_within(w, from, from + c.window_ns));
        }
        return floor;
    }
};

TEST_P(XdpRealClockWindows, OneFloodedLevelNeverPassesItsAlgorithmsBound) {
    ASSERT_NO_FATAL_FAILURE(calibrate({"192.0.2.1"}));
    // The case's limit, or kCalibrationMargin below what the machine offers
    // in a window if that is less.
    scenarios::WindowCase c = GetParam();
    c.limit = std::clamp<uint64_t>(
        static_cast<uint64_t>(calibrated_per_second_ * static_cast<double>(c.window_ns) / 1e9 / kCalibrationMargin), 1,
        c.limit);
    const Window w = saturate(policy().add(scenarios::window_case_class(c)).build(), {"192.0.2.1"});
    const uint64_t admitted = w.admitted();
    const uint64_t bound = scenarios::window_bound(c.algorithm, c.limit, c.window_ns, w.begin_ns, w.end_ns);
    const uint64_t whole_windows =
        scenarios::window_floor(c.algorithm, c.limit, c.window_ns, w.flooded_begin_ns, w.flooded_end_ns);
    // A source entry's swap that lost to another CPU's SLUICE_SOURCE_ATTEMPTS
    // times in a row drops its packet: not a decision of the window's.
    const uint64_t contended = stat(SLUICE_STAT_SOURCE_CONTENDED);
    const uint64_t floor = measured_floor(w, c) - std::min(measured_floor(w, c), contended);
    std::cout << "[ window   ] " << scenarios::window_case_name({c, 0}) << " N=" << cpus_ << " limit=" << c.limit
              << " T=" << w.seconds << " s offered=" << w.offered << " (" << static_cast<double>(w.offered) / bound
              << "x bound) admitted=" << admitted << " bound=" << bound
              << " admitted/bound=" << static_cast<double>(admitted) / bound << " floor=" << floor << " (contended "
              << contended << "; limit in every window flooded throughout: " << whole_windows << ")\n";
    EXPECT_GT(static_cast<double>(w.offered), kSaturation * static_cast<double>(bound))
        << "the flood never saturated the limit (calibrated at " << calibrated_per_second_ << "/s)";
    EXPECT_LE(admitted, bound);
    // A fixed window admits every decision in it up to its limit, and the
    // log's chain is exact; a sliding window weighs its previous one, so it
    // may leave part of an aligned window's limit to the next.
    const double share = c.algorithm == SLUICE_ALGORITHM_SLIDING_WINDOW ? 0.8 : 1.0;
    EXPECT_GE(static_cast<double>(admitted), share * static_cast<double>(floor));
    EXPECT_EQ(w.counts.packets(1, kDrop, scenarios::window_case_reason(c)), w.offered - admitted);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, XdpRealClockWindows, ::testing::ValuesIn(scenarios::kWindowCases),
                         scenarios::window_case_name);

}  // namespace
}  // namespace sluice::test
