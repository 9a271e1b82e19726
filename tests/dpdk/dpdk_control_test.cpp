// SPDX-License-Identifier: Apache-2.0
// sluice-dpdk's control plane end to end, in process: a worker runs its
// lcore loop on the second lcore over a ring port while a traffic thread
// keeps frames flowing, the daemon embeds the control socket
// (Daemon::start_fixed), and sluicectl's own code pushes and rolls back
// policy through that socket. A version change must take effect for every
// frame that arrives after the push returns, and every frame must be
// accounted exactly once across the flip.
#include <gtest/gtest.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "cli_run.h"
#include "common/http_get.h"
#include "daemon.h"
#include "dpdk_fixture.h"
#include "fleet/redis_server.h"

namespace sluice::test {
namespace {

using json = nlohmann::json;

// Sources of the traffic: the push blocks 192.0.2.64/28, so the frames sent
// once it returned come from .67 and must never leave; .100 is never blocked.
constexpr const char* kBlockedBefore = "192.0.2.66";
constexpr const char* kBlockedAfter = "192.0.2.67";
constexpr const char* kOther = "192.0.2.100";

constexpr std::string_view kOpenPolicy = R"(
[[class]]
name = "default"
per_source = { rate = 100_000_000, burst = 100_000_000 }
)";

constexpr std::string_view kBlockingPolicy = R"(
[[class]]
name = "default"
per_source = { rate = 100_000_000, burst = 100_000_000 }

[[class]]
name = "blocked"
match = ["192.0.2.64/28"]
action = "drop"
)";

// The IPv4 source of a frame built by udp_from().
std::string source_of(const Bytes& frame) {
    return std::to_string(frame[26]) + "." + std::to_string(frame[27]) + "." + std::to_string(frame[28]) + "." +
           std::to_string(frame[29]);
}

class DpdkControl : public ::testing::Test {
  protected:
    void SetUp() override {
        SLUICE_REQUIRE_DPDK();
        worker_lcore_ = rte_get_next_lcore(-1, 1, 0);
        ASSERT_LT(worker_lcore_, RTE_MAX_LCORE) << "the suite's EAL has no worker lcore";
        char pattern[] = "/tmp/sluice-dpdk-control-XXXXXX";
        ASSERT_NE(mkdtemp(pattern), nullptr);
        dir_ = pattern;

        port_ = RingPort::open();
        ASSERT_TRUE(port_);
        DpdkOptions options;
        options.source_capacity = kDpdkTestCapacity;
        auto dp = DpdkDataplane::create(options);
        ASSERT_TRUE(dp.ok()) << describe(dp);
        dp_ = dp.value().get();
        dp_->worker(0).set_ports({port_->id(), 0}, {port_->id(), 0});

        DaemonConfig config;
        config.socket = dir_ + "/sluice-dpdk.sock";
        config.state_dir = dir_ + "/state";
        config.metrics_address = "127.0.0.1:0";
        config.log_level = LogLevel::warn;
        ASSERT_NO_FATAL_FAILURE(configure(config));
        std::vector<FixedPort> ports;
        ports.push_back(FixedPort{"ring0", std::move(dp.value())});
        auto daemon = Daemon::start_fixed(std::move(config), std::move(ports), 1);
        ASSERT_TRUE(daemon.ok()) << daemon.error().message;
        daemon_ = std::move(daemon.value());
        loop_ = std::thread([this] { loop_status_ = daemon_->run(signals_); });

        ASSERT_EQ(rte_eal_remote_launch(&DpdkControl::worker_main, this, worker_lcore_), 0);
        worker_running_ = true;
    }

    void TearDown() override {
        stop_traffic();
        if (worker_running_) {
            worker_stop_.store(true);
            rte_eal_wait_lcore(worker_lcore_);
        }
        if (loop_.joinable()) {
            signals_.stop.store(true);
            loop_.join();
            EXPECT_TRUE(loop_status_.ok()) << loop_status_.error().message;
        }
        daemon_.reset();  // and with it the dataplane, before its port
        port_.reset();
        std::error_code ignored;
        if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
    }

    // What a test's fixture adds to the daemon's config before it starts.
    virtual void configure(DaemonConfig&) {}

    static int worker_main(void* self) {
        auto* test = static_cast<DpdkControl*>(self);
        return test->dp_->worker(0).run(test->worker_stop_);
    }

    // sluicectl, as its main() runs it, against this daemon's socket.
    int ctl(std::vector<std::string> args, std::string* out = nullptr) {
        args.insert(args.begin(), {"--socket", dir_ + "/sluice-dpdk.sock"});
        std::istringstream in;
        std::ostringstream o, e;
        const int status = cli::run_sluicectl(args, nullptr, in, o, e);
        EXPECT_EQ(status, 0) << e.str() << o.str();
        if (out) *out = o.str();
        return status;
    }
    json ctl_json(std::vector<std::string> args) {
        std::string out;
        args.insert(args.begin(), "--json");
        ctl(std::move(args), &out);
        return json::parse(out, nullptr, false);
    }
    std::string write_policy(std::string_view text, const std::string& name) {
        const std::string path = dir_ + "/" + name;
        std::ofstream(path) << text;
        return path;
    }

    // Keeps frames flowing from a blocked source (.66 until `blocked_after_`
    // is set, then .67) and from kOther; counts what went in and what left.
    void start_traffic() {
        traffic_ = std::thread([this] {
            const Bytes before = udp_from(kBlockedBefore), after = udp_from(kBlockedAfter), other = udp_from(kOther);
            while (!traffic_stop_.load()) {
                const bool switched = blocked_after_.load();
                injected_blocked_ += port_->inject(switched ? after : before, 8);
                injected_other_ += port_->inject(other, 8);
                collect_sent();
            }
        });
    }
    void stop_traffic() {
        if (!traffic_.joinable()) return;
        traffic_stop_.store(true);
        traffic_.join();
        // Let the worker finish what is still queued on the RX ring.
        for (int i = 0; i < 100; i++) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            collect_sent();
        }
    }
    void collect_sent() {
        for (const Bytes& frame : port_->sent()) sent_by_source_[source_of(frame)]++;
    }

    unsigned worker_lcore_ = RTE_MAX_LCORE;
    std::string dir_;
    std::unique_ptr<RingPort> port_;
    DpdkDataplane* dp_ = nullptr;  // owned by daemon_
    std::unique_ptr<Daemon> daemon_;
    DaemonSignals signals_;
    std::thread loop_;
    Status loop_status_ = ok_status();
    std::atomic<bool> worker_stop_{false};
    bool worker_running_ = false;

    std::thread traffic_;
    std::atomic<bool> traffic_stop_{false}, blocked_after_{false};
    uint64_t injected_blocked_ = 0, injected_other_ = 0;  // traffic thread, then the test after join
    std::map<std::string, uint64_t> sent_by_source_;
};

TEST_F(DpdkControl, APushThroughTheSocketTakesEffectWhileTrafficFlows) {
    ASSERT_EQ(ctl({"policy", "push", write_policy(kOpenPolicy, "open.toml")}), 0);
    const json status = ctl_json({"status"});
    ASSERT_EQ(status["interfaces"].size(), 1u);
    EXPECT_EQ(status["interfaces"][0]["kind"], "dpdk");
    EXPECT_EQ(status["interfaces"][0]["active_version"], 1);

    start_traffic();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ASSERT_EQ(ctl({"policy", "push", write_policy(kBlockingPolicy, "blocking.toml")}), 0);
    blocked_after_.store(true);  // the push returned: the new version decides from here on
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    stop_traffic();

    EXPECT_GT(sent_by_source_[kBlockedBefore], 0u) << "traffic did not flow before the push";
    EXPECT_EQ(sent_by_source_[kBlockedAfter], 0u) << "frames sent after the push returned were forwarded";

    // Every frame is counted once: passes of both versions plus the new
    // class's drops add up to what was injected, and what passed left
    // unless the TX ring had no room (counted as tx_full).
    const json stats = ctl_json({"stats"});
    ASSERT_EQ(stats["interfaces"].size(), 1u);
    uint64_t passed = 0, denied = 0;
    for (const json& cls : stats["interfaces"][0]["classes"]) {
        passed += cls["pass_packets"].get<uint64_t>();
        if (cls["name"] == "blocked") denied = cls["drops_by_reason"].value("deny", uint64_t{0});
    }
    const uint64_t tx_full = stats["interfaces"][0]["stats"]["tx_full"].get<uint64_t>();
    EXPECT_EQ(passed, sent_by_source_[kBlockedBefore] + sent_by_source_[kOther] + tx_full);
    EXPECT_EQ(passed + denied, injected_blocked_ + injected_other_);
    EXPECT_LE(injected_other_ - sent_by_source_[kOther], tx_full) << "the unblocked source lost frames";
    EXPECT_GT(denied, 0u);

    // /metrics (the control library's, as sluiced serves it) says the same,
    // once its once-a-second snapshot has caught up.
    const std::string series =
        "sluice_packets_total{class=\"blocked\",interface=\"ring0\",reason=\"deny\",verdict=\"drop\"} " +
        std::to_string(denied) + "\n";
    HttpResponse scrape;
    for (int i = 0; i < 40; i++) {
        scrape = http_get_loopback(daemon_->metrics_port(), "/metrics");
        if (scrape.body.find(series) != std::string::npos) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_EQ(scrape.status, 200) << scrape.error;
    EXPECT_NE(scrape.body.find(series), std::string::npos) << "no line " << series;

    // Hot sources come from the workers' sampled drops.
    json sources;
    for (int i = 0; i < 40 && sources.empty(); i++) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        sources = ctl_json({"top", "-n", "5"})["sources"];
    }
    ASSERT_FALSE(sources.empty());
    EXPECT_EQ(sources[0]["class"], "blocked");
}

// Each version is checked by traffic: frames of kOther (never blocked) must
// leave before a count is read, so a worker that never ran cannot pass, and
// the blocked source is judged against them.
TEST_F(DpdkControl, RollbackThroughTheSocketBlocksAgain) {
    // The next `n` frames of each source sent after injecting them, waiting
    // until kOther's have all left (or 5 s).
    auto offer = [this](unsigned n) {
        sent_by_source_.clear();
        EXPECT_EQ(port_->inject(udp_from(kBlockedAfter), n), n);
        EXPECT_EQ(port_->inject(udp_from(kOther), n), n);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (sent_by_source_[kOther] < n && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            collect_sent();
        }
        EXPECT_EQ(sent_by_source_[kOther], n) << "the worker did not forward the never-blocked source";
        return sent_by_source_[kBlockedAfter];
    };
    ASSERT_EQ(ctl({"policy", "push", write_policy(kBlockingPolicy, "blocking.toml")}), 0);
    EXPECT_EQ(offer(10), 0u) << "version 1 blocks 192.0.2.64/28";

    ASSERT_EQ(ctl({"policy", "push", write_policy(kOpenPolicy, "open.toml")}), 0);
    EXPECT_EQ(ctl_json({"status"})["interfaces"][0]["active_version"], 2);
    EXPECT_EQ(offer(10), 10u) << "version 2 is open";

    ASSERT_EQ(ctl({"policy", "rollback"}), 0);  // back to the blocking content, as version 3
    EXPECT_EQ(ctl_json({"status"})["interfaces"][0]["active_version"], 3);
    EXPECT_EQ(offer(10), 0u) << "version 3 (the rollback) blocks again";
}

// sluice-dpdk leases a fleet quota through the same control-library code as
// sluiced (the daemon's FleetLeaser over the dataplane's credit cells): a
// flood far above the quota forwards what Redis granted, no more, and when
// Redis dies a closed quota falls back once, counted, and admits only what
// it held.
class DpdkFleetControl : public DpdkControl {
  protected:
    void SetUp() override {
        SLUICE_REQUIRE_REDIS();
        redis_ = std::make_unique<RedisServer>();
        ASSERT_TRUE(redis_->error().empty()) << redis_->error();
        DpdkControl::SetUp();
    }
    void TearDown() override {
        DpdkControl::TearDown();  // the daemon returns its leases while Redis still runs
        redis_.reset();
    }
    void configure(DaemonConfig& config) override {
        config.fleet.servers = {redis_->endpoint()};
        config.fleet.lease_period_ms = kLeasePeriodMs;
        config.fleet.unavailable_after_ms = 300;
    }
    // Frames of kOther forwarded so far.
    uint64_t forwarded() {
        collect_sent();
        return sent_by_source_[kOther];
    }
    // The daemon's only fleet account, from `status`.
    json fleet_account() {
        const json status = ctl_json({"status"});
        const json& quotas = status["fleet"]["quotas"];
        return quotas.size() == 1 ? quotas[0] : json();
    }

    static constexpr uint32_t kLeasePeriodMs = 100;
    std::unique_ptr<RedisServer> redis_;
};

constexpr std::string_view kFleetPolicy = R"(
[[class]]
name = "default"
per_source = { rate = 100_000_000, burst = 100_000_000 }

[[class]]
name = "tenant"
match = ["192.0.2.0/24"]
fleet = { rate = 2000, burst = 400, on_unavailable = "closed" }
)";

TEST_F(DpdkFleetControl, AFloodForwardsWhatRedisGrantedAndAClosedQuotaStopsWithoutIt) {
    ASSERT_EQ(ctl({"policy", "push", write_policy(kFleetPolicy, "fleet.toml")}), 0);
    start_traffic();  // kOther alone is counted: one source of the tenant, flooding
    const auto begin = std::chrono::steady_clock::now();
    const uint64_t at_begin = forwarded();
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    const uint64_t leased = forwarded() - at_begin;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();

    const json account = fleet_account();
    ASSERT_TRUE(account.is_object()) << ctl_json({"status"}).dump();
    EXPECT_EQ(account["state"], "leasing");
    EXPECT_EQ(account["class"], "tenant");
    EXPECT_EQ(account["interface"], "ring0");
    EXPECT_EQ(account["policy_version"], 1);
    EXPECT_EQ(account["key"].get<std::string>().rfind("sluice:{tenant:", 0), 0u) << account.dump();

    // Both traffic sources are in the tenant: the quota is shared between
    // them, so the bound applies to their sum: burst + rate (T + H) + one
    // idle sliver (rate P / 64), H a lease period plus a round's exchanges.
    collect_sent();
    const uint64_t tenant = sent_by_source_[kOther] + sent_by_source_[kBlockedBefore];
    const double bound = 400 + 2000 * (seconds + 2 * kLeasePeriodMs / 1000.0) + 2000 * kLeasePeriodMs / 1000.0 / 64;
    std::printf("[figure] dpdk fleet: %llu frames forwarded in %.2f s (bound %.0f, rate x T %.0f)\n",
                static_cast<unsigned long long>(tenant), seconds, bound, 2000 * seconds);
    EXPECT_LE(static_cast<double>(tenant), bound);
    EXPECT_GT(leased, 0u);

    const json stats = ctl_json({"stats"});
    uint64_t fleet_drops = 0;
    for (const json& cls : stats["interfaces"][0]["classes"])
        if (cls["name"] == "tenant") fleet_drops = cls["drops_by_reason"].value("fleet", uint64_t{0});
    EXPECT_GT(fleet_drops, 0u) << "a flood above the quota was never refused for want of credit";

    redis_->kill();
    json fallen;
    for (int i = 0; i < 50; i++) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        fallen = fleet_account();
        if (fallen.value("state", "") == "fallback") break;
    }
    EXPECT_EQ(fallen["state"], "fallback") << fallen.dump();
    EXPECT_EQ(fallen["fallbacks"], 1);
    // Closed: whatever it still held is spent within a moment, then nothing passes.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    collect_sent();
    const uint64_t settled = sent_by_source_[kOther] + sent_by_source_[kBlockedBefore];
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    collect_sent();
    const uint64_t later = sent_by_source_[kOther] + sent_by_source_[kBlockedBefore];
    std::printf("[figure] dpdk fleet closed fallback: %llu frames forwarded in the 0.7 s after fallback\n",
                static_cast<unsigned long long>(later - settled));
    EXPECT_EQ(later, settled) << "a closed quota admitted without a lease";
    EXPECT_EQ(fleet_account()["fallbacks"], 1) << "fallback counted more than once";
}

}  // namespace
}  // namespace sluice::test
