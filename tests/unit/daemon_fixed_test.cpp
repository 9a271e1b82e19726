// SPDX-License-Identifier: Apache-2.0
// The daemon as sluice-dpdk embeds it (Daemon::start_fixed): a fake
// enforcement point on a temp socket and state dir, the daemon loop on its own
// thread, driven by sluicectl's own code (run_sluicectl), so the verbs are
// checked as an operator sees them against a dataplane that is not XDP.
#include <gtest/gtest.h>

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_run.h"
#include "clock.h"
#include "daemon.h"
#include "policy_texts.h"

namespace sluice::daemon_fixed_test {
namespace {

using json = nlohmann::json;

constexpr uint32_t kWorkers = 4;
constexpr uint64_t kSecondNs = 1'000'000'000;
constexpr uint64_t kFakeClockStartNs = 5 * kSecondNs;

using SteadyClock = std::chrono::steady_clock;

// Time the calling thread has been on a CPU or runnable waiting for one, ns
// (/proc/thread-self/schedstat): what the machine took of the daemon loop's
// time, beside what it spent waiting for work.
uint64_t thread_busy_ns() {
    std::ifstream in("/proc/thread-self/schedstat");
    uint64_t on_cpu = 0, runnable = 0;
    in >> on_cpu >> runnable;
    return on_cpu + runnable;
}

// When the daemon's loop called into the port, on both clocks, and how busy
// its thread had been by then.
struct LoopMark {
    SteadyClock::time_point at;
    uint64_t unix_ns = 0;
    uint64_t busy_ns = 0;
    size_t bans = 0;  // set_bans: how many it was given
    std::thread::id thread;
};

LoopMark loop_mark(size_t bans = 0) {
    return {SteadyClock::now(), unix_now_ns(), thread_busy_ns(), bans, std::this_thread::get_id()};
}

// What a gap between the loop's wakes may hold beyond its timeout and its
// thread's busy time: schedstat counts neither what the hypervisor steals
// from the guest's CPUs (2.5% of this machine's time, in 10 ms ticks) nor a
// page-in's wait, and a guest has seen 2.75 ms of such a gap go unaccounted
// (CI, the sanitizer build). A loop that misses a wake is a whole timeout
// late, so this still tells the two apart.
constexpr double kUnaccountedMs = 25;

double ms_between(const LoopMark& from, const LoopMark& to) {
    return std::chrono::duration<double, std::milli>(to.at - from.at).count();
}
double busy_ms_between(const LoopMark& from, const LoopMark& to) {
    return static_cast<double>(to.busy_ns - from.busy_ns) / 1e6;
}

// In memory: counters and events the test sets, policies apply() was given.
// The daemon's loop thread calls it while the test thread sets it, hence the
// lock. A test that waits on the loop polls the atomic counts instead: a
// waiting thread preempted while it held the lock would stall the loop, and
// the loop's timing is what those tests judge.
class FakePoint : public EnforcementPoint {
  public:
    Status apply(const CompiledPolicy& policy) override {
        std::lock_guard lock(mutex_);
        applied_.push_back(policy);
        return ok_status();
    }
    Result<uint64_t> active_version() override {
        std::lock_guard lock(mutex_);
        return applied_.empty() ? 0 : applied_.back().header.version;
    }
    Result<std::vector<sluice_counter>> counters() override {
        std::lock_guard lock(mutex_);
        samples_.push_back(loop_mark());  // once per sample, and per `stats`
        sample_count_.store(samples_.size());
        return counters_;
    }
    Result<std::array<uint64_t, SLUICE_STAT_COUNT>> stats() override {
        std::lock_guard lock(mutex_);
        return stats_;
    }
    sluice_fleet_credit* fleet_credits() override { return fleet_; }
    Result<size_t> drain_events(const std::function<void(const sluice_drop_event&)>& on_event) override {
        std::vector<sluice_drop_event> events;
        {
            std::lock_guard lock(mutex_);
            passes_.push_back(loop_mark());  // once per pass of the loop
            events.swap(events_);
        }
        for (const sluice_drop_event& event : events) on_event(event);
        return events.size();
    }
    // A clock of the test's own, as a DPDK port's test clock would be: far
    // from CLOCK_MONOTONIC, so a daemon that mixed the two would show it.
    uint64_t now_ns() const override { return now_ns_.load(std::memory_order_relaxed); }
    void set_now_ns(uint64_t now_ns) { now_ns_.store(now_ns, std::memory_order_relaxed); }
    Result<SourceTableUsage> source_table() override {
        return SourceTableUsage{.capacity = 1024, .in_debt = 3, .known = 5};
    }
    DecisionCost decision_cost() override { return {}; }
    bool decision_cost_enabled() const override { return true; }
    std::string kind() const override { return "dpdk"; }
    uint64_t window_restarts() const override { return 2; }  // as if applies had restarted two window counts
    Status set_bans(const std::vector<DataplaneBan>& bans) override {
        if (auto checked = check_bans(bans); !checked) return checked;
        std::lock_guard lock(mutex_);
        bans_ = bans;
        bans_in_force_.store(bans.size());
        ban_sets_++;
        ban_marks_.push_back(loop_mark(bans.size()));
        return ok_status();
    }
    Result<std::vector<sluice_counter>> ban_counters() override {
        std::lock_guard lock(mutex_);
        return ban_counters_;
    }

    void set_counter(uint32_t class_id, uint32_t verdict, uint32_t reason, sluice_counter value) {
        std::lock_guard lock(mutex_);
        counters_[sluice_counter_index(class_id, verdict, reason)] = value;
    }
    void queue_event(const sluice_drop_event& event) {
        std::lock_guard lock(mutex_);
        events_.push_back(event);
    }
    std::vector<CompiledPolicy> applied() const {
        std::lock_guard lock(mutex_);
        return applied_;
    }
    // The bans the last set_bans made the ones in force, and how many sets it was given.
    std::vector<DataplaneBan> bans() const {
        std::lock_guard lock(mutex_);
        return bans_;
    }
    size_t bans_in_force() const { return bans_in_force_.load(); }
    size_t sample_count() const { return sample_count_.load(); }
    size_t ban_sets() const {
        std::lock_guard lock(mutex_);
        return ban_sets_;
    }
    std::vector<LoopMark> passes() const {
        std::lock_guard lock(mutex_);
        return passes_;
    }
    std::vector<LoopMark> samples() const {
        std::lock_guard lock(mutex_);
        return samples_;
    }
    std::vector<LoopMark> ban_marks() const {
        std::lock_guard lock(mutex_);
        return ban_marks_;
    }
    void set_ban_counter(uint32_t slot, sluice_counter value) {
        std::lock_guard lock(mutex_);
        ban_counters_[slot] = value;
    }

  private:
    mutable std::mutex mutex_;
    sluice_fleet_credit fleet_[SLUICE_MAX_CLASSES]{};
    std::vector<CompiledPolicy> applied_;
    std::vector<sluice_counter> counters_ = std::vector<sluice_counter>(SLUICE_COUNTER_SLOTS);
    std::array<uint64_t, SLUICE_STAT_COUNT> stats_{};
    std::vector<sluice_drop_event> events_;
    std::vector<DataplaneBan> bans_;
    size_t ban_sets_ = 0;
    std::vector<LoopMark> passes_, samples_, ban_marks_;
    std::vector<sluice_counter> ban_counters_ = std::vector<sluice_counter>(SLUICE_MAX_BANS);
    std::atomic<uint64_t> now_ns_{kFakeClockStartNs};
    std::atomic<size_t> bans_in_force_{0}, sample_count_{0};
};

std::vector<uint64_t> versions_of(const std::vector<CompiledPolicy>& policies) {
    std::vector<uint64_t> versions;
    for (const CompiledPolicy& policy : policies) versions.push_back(policy.header.version);
    return versions;
}

bool same_classes(const CompiledPolicy& a, const CompiledPolicy& b) {
    return a.classes.size() == b.classes.size() &&
           std::memcmp(a.classes.data(), b.classes.data(), a.classes.size() * sizeof(a.classes[0])) == 0;
}

struct CtlRun {
    int status = -1;
    std::string out, err;
};

class DaemonFixedTest : public ::testing::Test {
  protected:
    void SetUp() override {
        char pattern[] = "/tmp/sluice-daemon-fixed-XXXXXX";
        ASSERT_NE(::mkdtemp(pattern), nullptr);
        dir_ = pattern;
        socket_ = dir_ + "/sluice-dpdk.sock";
    }

    void TearDown() override {
        stop();
        std::error_code ignored;
        std::filesystem::remove_all(dir_, ignored);
    }

    DaemonConfig config() const {
        DaemonConfig config;
        config.socket = socket_;
        config.state_dir = dir_ + "/state";
        config.metrics_address = "";  // an HTTP server takes seconds to stop
        config.log_level = LogLevel::warn;
        config.max_bans = max_bans_;
        return config;
    }

    void start() {
        auto point = std::make_unique<FakePoint>();
        point_ = point.get();
        std::vector<FixedPort> ports;
        ports.push_back(FixedPort{"port0", std::move(point)});
        auto daemon = Daemon::start_fixed(config(), std::move(ports), kWorkers);
        ASSERT_TRUE(daemon.ok()) << daemon.error().message;
        daemon_ = std::move(daemon.value());
        signals_.stop.store(false);
        loop_ = std::thread([this] { loop_status_ = daemon_->run(signals_); });
    }

    void stop() {
        if (!loop_.joinable()) return;
        signals_.stop.store(true);
        loop_.join();
        EXPECT_TRUE(loop_status_.ok()) << loop_status_.error().message;
        daemon_.reset();
    }

    CtlRun ctl(std::vector<std::string> args) {
        args.insert(args.begin(), {"--socket", socket_});
        std::istringstream in;
        std::ostringstream out, err;
        CtlRun run;
        run.status = cli::run_sluicectl(args, nullptr, in, out, err);
        run.out = out.str();
        run.err = err.str();
        return run;
    }

    json ctl_json(std::vector<std::string> args) {
        args.insert(args.begin(), "--json");
        const CtlRun run = ctl(std::move(args));
        EXPECT_EQ(run.status, 0) << run.err << run.out;
        return json::parse(run.out, nullptr, false);
    }

    // Queues a sampled drop of 198.51.100.7 in `class_id` with `verdict`, and
    // returns `sluicectl top` once the daemon has drained it (it drains
    // events after each poll of its socket, at most 250 ms).
    json top_after_event(uint32_t class_id, uint8_t verdict) {
        sluice_drop_event event{};
        event.source.class_id = class_id;
        event.source.family = SLUICE_FAMILY_IPV4;
        event.source.addr[0] = 198, event.source.addr[1] = 51, event.source.addr[2] = 100, event.source.addr[3] = 7;
        event.reason = SLUICE_REASON_SOURCE;
        event.verdict = verdict;
        event.weight = 64;
        point_->queue_event(event);
        json sources;
        for (int attempt = 0; attempt < 20 && sources.empty(); attempt++) {
            sources = ctl_json({"top", "-n", "5"})["sources"];
            if (sources.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        return sources;
    }

    std::string write_policy(std::string_view text, const std::string& name) {
        const std::string path = dir_ + "/" + name;
        std::ofstream(path) << text;
        return path;
    }

    std::string dir_, socket_;
    uint32_t max_bans_ = BanStore::kDefaultMaxBans;
    FakePoint* point_ = nullptr;  // owned by daemon_
    std::unique_ptr<Daemon> daemon_;
    DaemonSignals signals_;
    std::thread loop_;
    Status loop_status_ = ok_status();
};

TEST_F(DaemonFixedTest, StatusShowsTheDpdkPortWithoutXdpFacts) {
    ASSERT_NO_FATAL_FAILURE(start());
    const json status = ctl_json({"status"});
    ASSERT_EQ(status["interfaces"].size(), 1u) << status.dump();
    const json& port = status["interfaces"][0];
    EXPECT_EQ(port["name"], "port0");
    EXPECT_EQ(port["kind"], "dpdk");
    EXPECT_EQ(port["active_version"], 0);
    EXPECT_EQ(port["sources"]["in_debt"], 3);
    EXPECT_EQ(port["sources"]["known"], 5);
    EXPECT_EQ(port["sources"]["capacity"], 1024);
    for (const char* xdp_only : {"ifindex", "mode", "pin_dir"}) EXPECT_FALSE(port.contains(xdp_only)) << xdp_only;
    EXPECT_TRUE(status["daemon"]["bpffs_dir"].is_null());
    EXPECT_EQ(status["daemon"]["socket"], socket_);
    EXPECT_EQ(status["unprotected"], json::array());

    const CtlRun human = ctl({"status"});
    EXPECT_EQ(human.status, 0) << human.err;
    EXPECT_NE(human.out.find("\nport0  dpdk  -        3/5/1024                         -\n"), std::string::npos)
        << human.out;
}

TEST_F(DaemonFixedTest, PushReachesThePortCompiledForTheWorkers) {
    ASSERT_NO_FATAL_FAILURE(start());
    const CtlRun pushed = ctl({"policy", "push", write_policy(test::kTwoClasses, "p.toml")});
    ASSERT_EQ(pushed.status, 0) << pushed.err;
    EXPECT_EQ(pushed.out.rfind("applied version 1 ", 0), 0u) << pushed.out;

    const std::vector<CompiledPolicy> applied = point_->applied();
    ASSERT_EQ(versions_of(applied), std::vector<uint64_t>{1});
    auto expected = load_policy_toml(test::kTwoClasses, "p.toml", {}, PolicyLoadOptions{kWorkers});
    ASSERT_TRUE(expected.ok()) << expected.error().message;
    EXPECT_TRUE(same_classes(applied[0], expected.value().compiled)) << "split shares are rate/" << kWorkers;
    EXPECT_EQ(ctl_json({"status"})["interfaces"][0]["active_version"], 1);
    EXPECT_EQ(ctl_json({"policy", "show"})["version"], 1);
}

TEST_F(DaemonFixedTest, StatsReportThePortsCountersByClass) {
    ASSERT_NO_FATAL_FAILURE(start());
    ASSERT_EQ(ctl({"policy", "push", write_policy(test::kTwoClasses, "p.toml")}).status, 0);
    const uint32_t web = ctl_json({"policy", "show"})["classes"]["web"].get<uint32_t>();
    point_->set_counter(web, SLUICE_VERDICT_PASS, SLUICE_REASON_ADMITTED, {100, 6400});
    point_->set_counter(web, SLUICE_VERDICT_DROP, SLUICE_REASON_SOURCE, {7, 448});

    const json stats = ctl_json({"stats"});
    ASSERT_EQ(stats["interfaces"].size(), 1u) << stats.dump();
    const json& port = stats["interfaces"][0];
    EXPECT_EQ(port["name"], "port0");
    EXPECT_EQ(port["kind"], "dpdk");
    EXPECT_EQ(port["decision_cost_enabled"], true);
    const auto& classes = port["classes"];
    const auto found = std::find_if(classes.begin(), classes.end(), [](const json& c) { return c["name"] == "web"; });
    ASSERT_NE(found, classes.end()) << stats.dump();
    EXPECT_EQ((*found)["pass_packets"], 100);
    EXPECT_EQ((*found)["pass_bytes"], 6400);
    EXPECT_EQ((*found)["drop_packets"], 7);
    EXPECT_EQ((*found)["drops_by_reason"], (json{{"source", 7}}));
    EXPECT_EQ(port["stats"]["window_restarts"], 2) << stats.dump();

    const CtlRun human = ctl({"stats"});
    EXPECT_EQ(human.status, 0) << human.err;
    EXPECT_EQ(human.out.rfind("port0: policy version 1, ", 0), 0u) << human.out;
    EXPECT_NE(human.out.find(" window_restarts=2"), std::string::npos) << human.out;
}

TEST_F(DaemonFixedTest, DropEventsFeedTop) {
    ASSERT_NO_FATAL_FAILURE(start());
    ASSERT_EQ(ctl({"policy", "push", write_policy(test::kTwoClasses, "p.toml")}).status, 0);
    const json sources =
        top_after_event(ctl_json({"policy", "show"})["classes"]["web"].get<uint32_t>(), SLUICE_VERDICT_DROP);
    ASSERT_EQ(sources.size(), 1u);
    EXPECT_EQ(sources[0]["source"], "198.51.100.7");
    EXPECT_EQ(sources[0]["class"], "web");
    EXPECT_EQ(sources[0]["interface"], "port0");
    EXPECT_EQ(sources[0]["verdict"], "drop");
}

TEST_F(DaemonFixedTest, ShadowFiguresStandBesideEnforcedOnesInStatsAndTop) {
    ASSERT_NO_FATAL_FAILURE(start());
    ASSERT_EQ(ctl({"policy", "push", write_policy(test::kWebInShadow, "p.toml")}).status, 0);
    const uint32_t web = ctl_json({"policy", "show"})["classes"]["web"].get<uint32_t>();
    point_->set_counter(web, SLUICE_VERDICT_PASS, SLUICE_REASON_ADMITTED, {100, 6400});
    point_->set_counter(web, SLUICE_VERDICT_WOULD_DROP, SLUICE_REASON_SOURCE, {7, 448});

    const json stats = ctl_json({"stats"});
    const auto& classes = stats["interfaces"][0]["classes"];
    const auto class_named = [&](const std::string& name) {
        const auto found =
            std::find_if(classes.begin(), classes.end(), [&](const json& c) { return c["name"] == name; });
        return found != classes.end() ? *found : json();
    };
    const json found = class_named("web");
    ASSERT_FALSE(found.is_null()) << stats.dump();
    EXPECT_EQ(found["shadow"], true);
    EXPECT_EQ(found["pass_packets"], 100);
    EXPECT_EQ(found["drop_packets"], 0);
    EXPECT_EQ(found["would_drop_packets"], 7);
    EXPECT_EQ(found["would_drop_bytes"], 448);
    EXPECT_EQ(found["would_drops_by_reason"], (json{{"source", 7}}));
    EXPECT_EQ(found["drops_by_reason"], json::object());
    EXPECT_EQ(class_named("default")["shadow"], false);
    const CtlRun human = ctl({"stats"});
    EXPECT_NE(human.out.find("WOULD_DROP_PKTS"), std::string::npos) << human.out;
    EXPECT_NE(human.out.find("\nweb (shadow) "), std::string::npos) << human.out;

    const json sources = top_after_event(web, SLUICE_VERDICT_WOULD_DROP);
    ASSERT_EQ(sources.size(), 1u);
    EXPECT_EQ(sources[0]["verdict"], "would_drop");

    // Promoting is one new version without shadow.
    ASSERT_EQ(ctl({"policy", "push", write_policy(test::kTwoClasses, "q.toml")}).status, 0);
    EXPECT_EQ(point_->applied().back().find_class(web)->shadow, 0);
    const json promoted = ctl_json({"stats"})["interfaces"][0]["classes"];
    for (const json& c : promoted)
        if (c["name"] == "web") {
            EXPECT_EQ(c["shadow"], false);
        }
}

TEST_F(DaemonFixedTest, APenaltyMarksItsSourceInTopUntilItEnds) {
    ASSERT_NO_FATAL_FAILURE(start());
    ASSERT_EQ(ctl({"policy", "push", write_policy(test::kWebWithPenalty, "p.toml")}).status, 0);
    const uint32_t web = ctl_json({"policy", "show"})["classes"]["web"].get<uint32_t>();
    // The penalty started 1 s before the port's clock reads now, as an event
    // drained a moment late would have.
    sluice_drop_event started{};
    started.time_ns = kFakeClockStartNs - kSecondNs;
    started.source.class_id = web;
    started.source.family = SLUICE_FAMILY_IPV4;
    started.source.addr[0] = 198, started.source.addr[1] = 51, started.source.addr[2] = 100, started.source.addr[3] = 7;
    started.reason = SLUICE_REASON_PENALTY;
    started.verdict = SLUICE_VERDICT_DROP;
    started.flags = SLUICE_EVENT_PENALTY_STARTED;
    started.weight = 0;
    point_->queue_event(started);
    const json sources = top_after_event(web, SLUICE_VERDICT_DROP);
    ASSERT_EQ(sources.size(), 1u) << sources.dump();
    const json& restriction = sources[0]["restriction"];
    ASSERT_TRUE(restriction.is_object()) << sources.dump();
    EXPECT_EQ(restriction["kind"], "penalty");
    EXPECT_NEAR(restriction["remaining_s"].get<double>(), 59.0, 1e-6);  // 60 s from the event, on the port's clock
    const auto unix_now =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    EXPECT_GE(restriction["until_unix_s"].get<int64_t>(), unix_now + 58);
    EXPECT_LE(restriction["until_unix_s"].get<int64_t>(), unix_now + 60);
    EXPECT_EQ(ctl_json({"top"})["penalties_active"], 1);
    const CtlRun human = ctl({"top"});
    EXPECT_EQ(human.status, 0) << human.err;
    EXPECT_NE(human.out.find("\n1 source in the penalty box\n"), std::string::npos) << human.out;
    EXPECT_NE(human.out.find("  penalty 59s left\n"), std::string::npos) << human.out;

    // Once `for` has passed on the port's clock, the source is out of the box.
    point_->set_now_ns(kFakeClockStartNs + 59 * kSecondNs);
    const json after = ctl_json({"top"});
    EXPECT_EQ(after["penalties_active"], 0) << after.dump();
    ASSERT_EQ(after["sources"].size(), 1u) << after.dump();
    EXPECT_TRUE(after["sources"][0]["restriction"].is_null()) << after.dump();
}

TEST_F(DaemonFixedTest, APenaltyEventDisplacesNoRankedSource) {
    ASSERT_NO_FATAL_FAILURE(start());
    ASSERT_EQ(ctl({"policy", "push", write_policy(test::kWebWithPenalty, "p.toml")}).status, 0);
    const uint32_t web = ctl_json({"policy", "show"})["classes"]["web"].get<uint32_t>();
    auto event_from = [&](uint8_t host) {
        sluice_drop_event event{};
        event.time_ns = kFakeClockStartNs;
        event.source.class_id = web;
        event.source.family = SLUICE_FAMILY_IPV4;
        event.source.addr[0] = 198, event.source.addr[1] = 51, event.source.addr[2] = 100, event.source.addr[3] = host;
        event.verdict = SLUICE_VERDICT_DROP;
        return event;
    };
    // As many dropped sources as the hot-source tracker has counters...
    for (size_t host = 1; host <= HotSources::kDefaultCapacity; host++) {
        sluice_drop_event sampled = event_from(static_cast<uint8_t>(host));
        sampled.reason = SLUICE_REASON_SOURCE;
        sampled.weight = 64;
        point_->queue_event(sampled);
    }
    // ...then the penalty of one more: it weighs nothing, so it takes no counter.
    sluice_drop_event started = event_from(200);
    started.reason = SLUICE_REASON_PENALTY;
    started.flags = SLUICE_EVENT_PENALTY_STARTED;
    point_->queue_event(started);
    json top;
    for (int attempt = 0; attempt < 20; attempt++) {
        top = ctl_json({"top", "-n", "1000"});
        if (top["penalties_active"] == 1) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_EQ(top["penalties_active"], 1) << top.dump();
    EXPECT_EQ(top["sources"].size(), HotSources::kDefaultCapacity);
    for (const json& source : top["sources"]) {
        EXPECT_NE(source["source"], "198.51.100.200");
        EXPECT_EQ(source["error_per_second"], 0.0) << source.dump();
    }
}

TEST_F(DaemonFixedTest, APenaltyOfAClassWithoutOneIsNotShown) {
    ASSERT_NO_FATAL_FAILURE(start());
    ASSERT_EQ(ctl({"policy", "push", write_policy(test::kTwoClasses, "p.toml")}).status, 0);
    const uint32_t web = ctl_json({"policy", "show"})["classes"]["web"].get<uint32_t>();
    sluice_drop_event started{};
    started.time_ns = kFakeClockStartNs;
    started.source.class_id = web;
    started.source.family = SLUICE_FAMILY_IPV4;
    started.source.addr[0] = 198, started.source.addr[1] = 51, started.source.addr[2] = 100, started.source.addr[3] = 7;
    started.reason = SLUICE_REASON_PENALTY;
    started.flags = SLUICE_EVENT_PENALTY_STARTED;
    point_->queue_event(started);
    // Drained with the sampled drop that follows it, in order.
    const json sources = top_after_event(web, SLUICE_VERDICT_DROP);
    ASSERT_EQ(sources.size(), 1u) << sources.dump();
    EXPECT_TRUE(sources[0]["restriction"].is_null()) << sources.dump();
    EXPECT_EQ(ctl_json({"top"})["penalties_active"], 0);
}

TEST_F(DaemonFixedTest, ABanReachesThePortAndUnbanLiftsIt) {
    ASSERT_NO_FATAL_FAILURE(start());
    EXPECT_GE(point_->ban_sets(), 1u) << "the port got the bans in force (none) when it was taken on";
    EXPECT_TRUE(point_->bans().empty());
    const CtlRun banned = ctl({"ban", "203.0.113.0/24", "--for", "10m", "--reason", "incident 42"});
    ASSERT_EQ(banned.status, 0) << banned.err;
    EXPECT_EQ(banned.out.rfind("banned 203.0.113.0/24 (10m 0s left, until ", 0), 0u) << banned.out;
    EXPECT_NE(banned.out.find(", slot 0)\n"), std::string::npos) << banned.out;

    // In force on the port when the command returns, ending 10 minutes on from the port's own clock.
    const std::vector<DataplaneBan> bans = point_->bans();
    ASSERT_EQ(bans.size(), 1u);
    EXPECT_EQ(prefix_text(bans[0].prefix), "203.0.113.0/24");
    EXPECT_EQ(bans[0].slot, 0u);
    EXPECT_NEAR(static_cast<double>(bans[0].until_ns), static_cast<double>(kFakeClockStartNs + 600 * kSecondNs),
                2.0 * kSecondNs);

    point_->set_ban_counter(0, {7, 448});
    const json listed = ctl_json({"bans"});
    EXPECT_EQ(listed["max_bans"], BanStore::kDefaultMaxBans);
    ASSERT_EQ(listed["bans"].size(), 1u) << listed.dump();
    const json& ban = listed["bans"][0];
    EXPECT_EQ(ban["prefix"], "203.0.113.0/24");
    EXPECT_EQ(ban["reason"], "incident 42");
    EXPECT_EQ(ban["uid"], ::getuid());
    EXPECT_EQ(ban["forced"], false);
    EXPECT_EQ(ban["slot"], 0);
    EXPECT_EQ(ban["dropped_packets"], 7);
    EXPECT_EQ(ban["dropped_bytes"], 448);
    EXPECT_NEAR(ban["remaining_s"].get<double>(), 600, 2);
    const auto unix_now =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    EXPECT_NEAR(ban["until_unix_s"].get<double>(), static_cast<double>(unix_now + 600), 2);
    EXPECT_EQ(ban["until_unix_s"].get<uint64_t>(), (ban["until_unix_ns"].get<uint64_t>() + kSecondNs - 1) / kSecondNs);
    const CtlRun human = ctl({"bans"});
    EXPECT_EQ(human.out.rfind("1 ban in force (max_bans 1024)\nPREFIX ", 0), 0u) << human.out;
    EXPECT_NE(human.out.find("\n203.0.113.0/24  "), std::string::npos) << human.out;
    EXPECT_NE(human.out.find("  incident 42  "), std::string::npos) << human.out;
    EXPECT_EQ(ctl_json({"status"})["bans"]["active"], 1);

    const CtlRun lifted = ctl({"unban", "203.0.113.0/24"});
    ASSERT_EQ(lifted.status, 0) << lifted.err;
    EXPECT_EQ(lifted.out.rfind("unbanned 203.0.113.0/24 (banned since ", 0), 0u) << lifted.out;
    EXPECT_NE(lifted.out.find(", 7 packets dropped)\n"), std::string::npos) << lifted.out;
    EXPECT_TRUE(point_->bans().empty());
    EXPECT_EQ(ctl_json({"bans"})["bans"], json::array());
    const CtlRun again = ctl({"unban", "203.0.113.0/24"});
    EXPECT_EQ(again.status, cli::kExitRefused);
    EXPECT_NE(again.err.find("203.0.113.0/24 is not banned"), std::string::npos) << again.err;
}

TEST_F(DaemonFixedTest, ABanOfWhatAPassClassProtectsNeedsForce) {
    ASSERT_NO_FATAL_FAILURE(start());
    ASSERT_EQ(ctl({"policy", "push", write_policy(test::kWebPasses, "p.toml")}).status, 0);
    const CtlRun refused = ctl({"ban", "198.51.100.0/25", "--for", "10m"});
    EXPECT_EQ(refused.status, cli::kExitRefused);
    EXPECT_NE(refused.err.find("198.51.100.0/25 is protected by the running policy: class \"web\" (action pass) "
                               "matches 198.51.100.0/24, which holds 198.51.100.0/25"),
              std::string::npos)
        << refused.err;
    EXPECT_NE(refused.err.find("--force bans it all the same"), std::string::npos) << refused.err;
    EXPECT_TRUE(point_->bans().empty());
    EXPECT_EQ(ctl_json({"bans"})["bans"], json::array());

    const CtlRun forced = ctl({"ban", "198.51.100.0/25", "--for", "10m", "--force"});
    ASSERT_EQ(forced.status, 0) << forced.err;
    EXPECT_NE(forced.out.find("\nforced over the running policy: class \"web\" (action pass) matches "
                              "198.51.100.0/24, which holds 198.51.100.0/25\n"),
              std::string::npos)
        << forced.out;
    EXPECT_EQ(point_->bans().size(), 1u);
    EXPECT_EQ(ctl_json({"bans"})["bans"][0]["forced"], true);
}

// README: a ban ends by itself, and sluiced removes it within 250 ms. The
// loop removes ended bans each time it wakes, and waits at most 250 ms for
// work; on a loaded machine it also waits for the CPU. So: the removal comes
// at the first pass of the loop after the ban's end, never before it, and
// no pass follows another by more than 250 ms plus what the machine took of
// the loop thread's time between them (its CPU time and run-queue wait).
TEST_F(DaemonFixedTest, ABanEndsByItselfAtTheLoopsFirstWakeAfterItsEnd) {
    ASSERT_NO_FATAL_FAILURE(start());
    ASSERT_EQ(ctl({"ban", "203.0.113.0/24", "--for", "1s"}).status, 0);
    ASSERT_EQ(point_->bans().size(), 1u);
    const auto until = ctl_json({"bans"})["bans"][0]["until_unix_ns"].get<uint64_t>();
    const auto deadline = SteadyClock::now() + std::chrono::seconds(30);
    while (point_->bans_in_force() != 0 && SteadyClock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_TRUE(point_->bans().empty()) << "still in force 29 s after a 1 s ban";
    EXPECT_EQ(ctl_json({"bans"})["bans"], json::array());
    EXPECT_EQ(ctl_json({"status"})["bans"]["active"], 0);

    const std::vector<LoopMark> sets = point_->ban_marks();
    ASSERT_GE(sets.size(), 2u);  // the ban, its removal (and any set at start-up)
    const LoopMark& removed = sets.back();
    EXPECT_EQ(removed.bans, 0u);
    EXPECT_GE(removed.unix_ns, until) << "removed before its end";
    // Passes that began after the end and before the removal: the removal's own, if any.
    const std::vector<LoopMark> passes = point_->passes();
    size_t passes_after_end = 0;
    for (const LoopMark& pass : passes) passes_after_end += pass.unix_ns >= until && pass.at <= removed.at;
    EXPECT_LE(passes_after_end, 1u) << "passes of the loop went by without removing the ended ban";

    // Gaps between passes, but those in which the bans were stored (a
    // durable write, whose wait on the disk is not the loop's to bound).
    double worst_over_ms = -250, worst_gap_ms = 0;
    size_t gaps = 0;
    for (size_t i = 1; i < passes.size(); i++) {
        if (passes[i].at > removed.at) break;
        const bool stored = std::any_of(sets.begin(), sets.end(), [&](const LoopMark& set) {
            return set.at > passes[i - 1].at && set.at < passes[i].at;
        });
        if (stored) continue;
        const double gap = ms_between(passes[i - 1], passes[i]), busy = busy_ms_between(passes[i - 1], passes[i]);
        EXPECT_LE(gap, 250 + busy + kUnaccountedMs) << "pass " << i << ": " << gap << " ms after the last, " << busy
                                       << " ms of it on or waiting for a CPU";
        worst_over_ms = std::max(worst_over_ms, gap - busy - 250);
        worst_gap_ms = std::max(worst_gap_ms, gap);
        gaps++;
    }
    EXPECT_GE(gaps, 3u) << "a 1 s ban and too few passes to judge";
    std::cout << "[ ban end ] removed " << static_cast<double>(removed.unix_ns - until) / 1e6
              << " ms after its end; longest gap between passes " << worst_gap_ms << " ms of " << gaps
              << ", at most " << worst_over_ms << " ms over 250 ms plus the loop's busy time\n";
}

// README ("Metrics"): the control loop snapshots every figure once a second,
// so a scrape reads numbers at most a second old. Each sample reads the
// port's counters; the loop wakes when the next is due, on a one-second
// grid, so samples are a second apart plus what the machine took of the
// loop thread's time between them, and never more often.
TEST_F(DaemonFixedTest, FiguresAreSnapshotOnceASecond) {
    ASSERT_NO_FATAL_FAILURE(start());
    constexpr size_t kSamples = 7;  // the one at start-up, then the loop's six
    const auto deadline = SteadyClock::now() + std::chrono::seconds(60);
    while (point_->sample_count() < kSamples && SteadyClock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::vector<LoopMark> samples = point_->samples();
    ASSERT_GE(samples.size(), kSamples) << "in 60 s";
    // The loop's own: start-up samples once more before it, on this thread.
    std::erase_if(samples, [&](const LoopMark& mark) { return mark.thread != loop_.get_id(); });
    ASSERT_GE(samples.size(), kSamples - 1);
    double worst_gap_ms = 0;
    for (size_t i = 1; i < samples.size(); i++) {
        const double gap = ms_between(samples[i - 1], samples[i]), busy = busy_ms_between(samples[i - 1], samples[i]);
        EXPECT_LE(gap, 1000 + busy + kUnaccountedMs) << "sample " << i << ": " << gap << " ms after the last, " << busy
                                        << " ms of it on or waiting for a CPU";
        worst_gap_ms = std::max(worst_gap_ms, gap);
    }
    // The first sets the grid, at the time its pass read before sampling
    // (after draining the port's events): the n-th after it is due n
    // seconds later.
    const std::vector<LoopMark> passes = point_->passes();
    const auto first_pass = std::find_if(passes.rbegin(), passes.rend(),
                                         [&](const LoopMark& pass) { return pass.at <= samples.front().at; });
    ASSERT_NE(first_pass, passes.rend());
    const double span = ms_between(*first_pass, samples.back());
    EXPECT_GE(span, 1000.0 * static_cast<double>(samples.size() - 1)) << "samples more often than once a second";
    std::cout << "[ samples ] " << samples.size() << " loop samples, longest gap " << worst_gap_ms << " ms\n";
}

TEST_F(DaemonFixedTest, BansAndTheirDropsSurviveARestart) {
    ASSERT_NO_FATAL_FAILURE(start());
    ASSERT_EQ(ctl({"ban", "203.0.113.0/24", "--for", "10m"}).status, 0);
    ASSERT_EQ(ctl({"ban", "2001:db8::/48", "--for", "1h", "--reason", "scanner"}).status, 0);
    point_->set_ban_counter(1, {5, 500});
    stop();
    EXPECT_TRUE(std::filesystem::exists(dir_ + "/state/bans.json"));

    // A restarted appliance: a fresh port, whose counters start at zero.
    ASSERT_NO_FATAL_FAILURE(start());
    std::vector<DataplaneBan> bans = point_->bans();
    ASSERT_EQ(bans.size(), 2u);
    std::sort(bans.begin(), bans.end(), [](const auto& a, const auto& b) { return a.slot < b.slot; });
    EXPECT_EQ(prefix_text(bans[0].prefix), "203.0.113.0/24");
    EXPECT_EQ(prefix_text(bans[1].prefix), "2001:db8::/48");
    EXPECT_EQ(bans[1].slot, 1u);
    point_->set_ban_counter(1, {2, 200});
    const json listed = ctl_json({"bans"});
    ASSERT_EQ(listed["bans"].size(), 2u) << listed.dump();
    const json& v6 = listed["bans"][1];
    EXPECT_EQ(v6["prefix"], "2001:db8::/48");
    EXPECT_EQ(v6["reason"], "scanner");
    EXPECT_EQ(v6["dropped_packets"], 7) << "5 kept at the stop, 2 since";
    EXPECT_EQ(v6["dropped_bytes"], 700);
    EXPECT_EQ(listed["bans"][0]["dropped_packets"], 0);
}

TEST_F(DaemonFixedTest, ABannedSourceIsMarkedInTop) {
    ASSERT_NO_FATAL_FAILURE(start());
    ASSERT_EQ(ctl({"ban", "198.51.100.0/24", "--for", "10m"}).status, 0);
    const json sources = top_after_event(SLUICE_CLASS_UNCLASSIFIED, SLUICE_VERDICT_DROP);
    ASSERT_EQ(sources.size(), 1u) << sources.dump();
    const json& restriction = sources[0]["restriction"];
    ASSERT_TRUE(restriction.is_object()) << sources.dump();
    EXPECT_EQ(restriction["kind"], "ban");
    EXPECT_EQ(restriction["prefix"], "198.51.100.0/24");
    EXPECT_NEAR(restriction["remaining_s"].get<double>(), 600, 2);
    EXPECT_EQ(ctl_json({"top"})["bans_active"], 1);
    const CtlRun human = ctl({"top"});
    EXPECT_NE(human.out.find("\n1 ban in force (sluicectl bans)\n"), std::string::npos) << human.out;
    EXPECT_NE(human.out.find("  ban 10m 0s left\n"), std::string::npos) << human.out;
    EXPECT_NE(human.out.find("\nban: in a banned prefix"), std::string::npos) << human.out;

    ASSERT_EQ(ctl({"unban", "198.51.100.0/24"}).status, 0);
    EXPECT_TRUE(ctl_json({"top"})["sources"][0]["restriction"].is_null());
}

TEST_F(DaemonFixedTest, BansPastMaxBansAreRefused) {
    max_bans_ = 1;
    ASSERT_NO_FATAL_FAILURE(start());
    ASSERT_EQ(ctl({"ban", "203.0.113.0/24", "--for", "10m"}).status, 0);
    const CtlRun refused = ctl({"ban", "198.51.100.0/24", "--for", "10m"});
    EXPECT_EQ(refused.status, cli::kExitRefused);
    EXPECT_NE(refused.err.find("cannot ban 198.51.100.0/24: 1 ban is in force, as many as max_bans allows"),
              std::string::npos)
        << refused.err;
    EXPECT_EQ(point_->bans().size(), 1u);
    const CtlRun rebanned = ctl({"ban", "203.0.113.0/24", "--for", "1h", "--reason", "longer"});
    ASSERT_EQ(rebanned.status, 0) << rebanned.err;
    EXPECT_EQ(rebanned.out.rfind("re-banned 203.0.113.0/24 (1h 0m left, until ", 0), 0u) << rebanned.out;
    EXPECT_NE(rebanned.out.find("its slot 0 and 0 packets dropped kept"), std::string::npos) << rebanned.out;
    EXPECT_NEAR(static_cast<double>(point_->bans()[0].until_ns),
                static_cast<double>(kFakeClockStartNs + 3600 * kSecondNs), 2.0 * kSecondNs);
}

TEST_F(DaemonFixedTest, AttachAndDetachAreRefusedBecauseThePortsAreFixed) {
    ASSERT_NO_FATAL_FAILURE(start());
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"attach", "eth0"}, std::vector<std::string>{"detach", "port0"}}) {
        const CtlRun refused = ctl(args);
        EXPECT_EQ(refused.status, cli::kExitRefused) << args[0];
        EXPECT_NE(refused.err.find(args[0] + " is not available here: sluice-dpdk's ports are fixed when the "
                                             "appliance starts"),
                  std::string::npos)
            << refused.err;
    }
    const CtlRun as_json = ctl({"--json", "attach", "eth0"});
    EXPECT_EQ(json::parse(as_json.out, nullptr, false)["error"]["code"], "invalid") << as_json.out;
    EXPECT_EQ(ctl_json({"status"})["interfaces"].size(), 1u) << "the port stays";
}

TEST_F(DaemonFixedTest, RollbackAppliesThePreviousContentAsANewVersion) {
    ASSERT_NO_FATAL_FAILURE(start());
    ASSERT_EQ(ctl({"policy", "push", write_policy(test::kTwoClasses, "a.toml")}).status, 0);
    ASSERT_EQ(ctl({"policy", "push", write_policy(test::kWebFaster, "b.toml")}).status, 0);
    const CtlRun rolled = ctl({"policy", "rollback"});
    ASSERT_EQ(rolled.status, 0) << rolled.err;
    EXPECT_EQ(rolled.out.rfind("applied version 3 ", 0), 0u) << rolled.out;

    const std::vector<CompiledPolicy> applied = point_->applied();
    ASSERT_EQ(versions_of(applied), (std::vector<uint64_t>{1, 2, 3}));
    EXPECT_TRUE(same_classes(applied[2], applied[0]));
    EXPECT_FALSE(same_classes(applied[1], applied[0]));
    const json history = ctl_json({"policy", "history"});
    EXPECT_EQ(history["current"], 3);
    EXPECT_EQ(history["versions"].size(), 3u);
    EXPECT_FALSE(ctl_json({"policy", "diff", "1", "2"})["diff"].get<std::string>().empty());
}

TEST_F(DaemonFixedTest, KeepsThePolicyAcrossARestart) {
    ASSERT_NO_FATAL_FAILURE(start());
    ASSERT_EQ(ctl({"policy", "push", write_policy(test::kTwoClasses, "p.toml")}).status, 0);
    stop();
    // A fresh port (a restarted appliance) is brought to the stored version.
    ASSERT_NO_FATAL_FAILURE(start());
    EXPECT_EQ(versions_of(point_->applied()), std::vector<uint64_t>{1});
    EXPECT_EQ(ctl_json({"status"})["policy"]["version"], 1);
}

TEST_F(DaemonFixedTest, ConfiguredInterfacesAreRefused) {
    DaemonConfig with_interfaces = config();
    with_interfaces.interfaces.push_back(InterfaceConfig{"eth0", XdpMode::native});
    auto daemon = Daemon::start_fixed(std::move(with_interfaces), {}, kWorkers);
    ASSERT_FALSE(daemon.ok());
    EXPECT_NE(daemon.error().message.find("sluice-dpdk takes its ports on the command line"), std::string::npos)
        << daemon.error().message;
    EXPECT_FALSE(std::filesystem::exists(socket_)) << "refused before listening";
}

TEST_F(DaemonFixedTest, PortsGivenTwiceOrWithoutADataplaneAreRefused) {
    std::vector<FixedPort> twice;
    twice.push_back(FixedPort{"port0", std::make_unique<FakePoint>()});
    twice.push_back(FixedPort{"port0", std::make_unique<FakePoint>()});
    auto daemon = Daemon::start_fixed(config(), std::move(twice), kWorkers);
    ASSERT_FALSE(daemon.ok());
    EXPECT_EQ(daemon.error().message, "port port0 is given twice");

    std::vector<FixedPort> empty;
    empty.push_back(FixedPort{"port1", nullptr});
    daemon = Daemon::start_fixed(config(), std::move(empty), kWorkers);
    ASSERT_FALSE(daemon.ok());
    EXPECT_EQ(daemon.error().message, "port port1 has no dataplane");
}

}  // namespace
}  // namespace sluice::daemon_fixed_test
