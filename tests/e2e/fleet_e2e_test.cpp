// SPDX-License-Identifier: Apache-2.0
// Fleet quotas end to end (issue #15): three nodes, each a world of its own
// (namespace with sl0 <-> sl1, its sluiced on sl0, its sluice-traffic flood
// from sl1), share one quota held in Redis. Redis runs in a "hub" namespace;
// each node reaches it over a veth link of its own (node 10.250.<i>.2/30, hub
// 10.250.<i>.1/30) at the hub's 10.250.0.1, where redis-server (or a
// three-master cluster) listens. Every node floods the same tenant prefix, so
// every admitted frame of the class was paid for from the one bucket.
//
// The tests check bounds only, never timings (the machine has 2 cores):
//   fleet-wide admitted over T  <=  burst + rate·(T + H) + N·rate·P/64
// with H = 0.2 s (a lease period of 100 ms plus one exchange, rounded up)
// and the last term the idle slivers (README.md, "Fleet quotas"),
// plus one burst when Redis restarts empty, plus each node's fallback_rate·T
// while it is in open fallback. T is taken generously for the upper bound
// (first flood's spawn to the last flood's exit: every frame was decided in
// it) and strictly for the lower one (the shortest sender's own duration:
// every node offered the quota during it).
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include "common/privilege.h"
#include "common/sanitized.h"
#include "e2e_fixture.h"
#include "fleet/redis_server.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

constexpr size_t kNodes = 3;
constexpr double kRate = 3000;                // the fleet quota, packets/s
constexpr double kBurst = 300;                // packets
constexpr double kFallback = 1000;            // each node's own rate in open fallback
constexpr double kSliver = kRate * 0.1 / 64;  // an idle node's lease: rate·P/64
constexpr double kH = 0.2;                    // lease period (0.1 s) + one exchange, rounded up
constexpr double kSeconds = 3;                // each measured flood
constexpr uint16_t kRedisPort = 6379;
constexpr int kMetricsPort = 9464;            // node i serves on kMetricsPort + i, in its own namespace
const std::string kRedisHost = "10.250.0.1";  // on the hub's loopback, routed from every node
const std::string kClass = "tenant";
const std::string kTenantSources = "10.7.0.0/28";  // every node floods the same 16 addresses

std::string secs(double seconds) {
    std::ostringstream out;
    out.precision(3);
    out << std::fixed << seconds;
    return out.str();
}

size_t count_of(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) n++;
    return n;
}

// The class under test: limited only by the fleet (the node's own limits
// still apply on top; it has none here but a per-source ceiling far above
// what a node offers).
std::string policy_text(const std::string& on_unavailable) {
    std::string fleet = "fleet = { rate = " + figure(kRate) + ", burst = " + figure(kBurst) +
                        ", unit = \"packets\", on_unavailable = \"" + on_unavailable + "\"";
    if (on_unavailable == "open") fleet += ", fallback_rate = " + figure(kFallback);
    fleet += " }\n";
    return "[defaults]\n"
           "unit = \"packets\"\n"
           "\n"
           "[[class]]\n"
           "name = \"default\"\n"
           "per_source = { rate = 100000, burst = 100000 }\n"
           "\n"
           "[[class]]\n"
           "name = \"" +
           kClass +
           "\"\n"
           "match = [\"10.7.0.0/16\"]\n"
           "per_source = { rate = 100000, burst = 100000 }\n" +
           fleet;
}

// What one concurrent flood on every node measured.
struct FleetRun {
    std::vector<std::optional<TrafficReport>> reports;  // by node
    std::vector<uint64_t> received;                     // by node, the tenant flow
    uint64_t admitted = 0;                              // sum over nodes
    double t_upper = 0;                                 // first spawn to last exit, s
    double t_lower = 0;                                 // shortest sender's duration, s
    int64_t first_spawn_ns = 0, last_exit_ns = 0;       // CLOCK_REALTIME
    bool ok = false;
};

class FleetE2E : public SluiceE2E {
  protected:
    void SetUp() override {
        SLUICE_REQUIRE_BPF();
        SLUICE_REQUIRE_REDIS();
    }

    void TearDown() override {
        const bool failed = HasFailure();
        for (size_t i = 0; i < nodes_.size(); ++i) nodes_[i]->teardown(failed, "node " + std::to_string(i));
        if (failed && redis_) std::cout << "---- redis log ----\n" << redis_->log() << "---- end ----" << std::endl;
        nodes_.clear();
        redis_.reset();
        cluster_.reset();
        hub_.reset();
        SluiceE2E::TearDown();
    }

    // ---- the topology ------------------------------------------------------------------

    void make_hub() {
        hub_ = std::make_unique<NetNamespace>("sluice-hub-" + unique_suffix());
        ASSERT_TRUE(hub_->ok()) << "could not create the hub namespace";
        ASSERT_EQ(shell("ip -n " + hub_->name() + " addr add " + kRedisHost + "/32 dev lo"), 0);
    }

    RedisServerOptions hub_redis_options() const {
        return RedisServerOptions{.cluster = false,
                                  .requirepass = {},
                                  .netns = hub_->name(),
                                  .bind = "0.0.0.0",
                                  .host = kRedisHost,
                                  .port = kRedisPort};
    }

    void start_redis() {
        redis_ = std::make_unique<RedisServer>(hub_redis_options());
        ASSERT_EQ(redis_->error(), "");
    }

    void start_cluster() {
        cluster_ = std::make_unique<RedisCluster>(hub_redis_options());
        ASSERT_EQ(cluster_->error(), "");
    }

    std::vector<std::string> servers() const {
        std::vector<std::string> all;
        if (cluster_) {
            for (const auto& e : cluster_->endpoints()) all.push_back(e.host + ":" + std::to_string(e.port));
        } else {
            all.push_back(kRedisHost + ":" + std::to_string(kRedisPort));
        }
        return all;
    }

    // Node i's world with a link to the hub; `wrapper` runs its sluiced
    // (e.g. under libfaketime). Starts the daemon and pushes the policy.
    void start_node(size_t i, const std::string& on_unavailable, const std::vector<std::string>& wrapper = {}) {
        std::string list;
        for (const auto& s : servers()) list += (list.empty() ? "\"" : ", \"") + s + "\"";
        const std::string config = "metrics_address = \"127.0.0.1:" + std::to_string(kMetricsPort + i) +
                                   "\"\n"
                                   "\n[fleet]\n"
                                   "servers = [" +
                                   list +
                                   "]\n"
                                   "namespace = \"sluice\"\n"
                                   "lease_period_ms = 100\n"
                                   "timeout_ms = 50\n"
                                   "unavailable_after_ms = 300\n";
        auto node = std::make_unique<SluiceWorld>();
        SluiceWorld& world = *node;
        nodes_.push_back(std::move(node));
        ASSERT_NO_FATAL_FAILURE(world.make_world(config));
        const std::string n = std::to_string(i + 1);
        const std::string hub_side = "hub" + n;
        ASSERT_EQ(shell("ip -n " + hub_->name() + " link add " + hub_side + " type veth peer name fleet0 netns " +
                        world.netns_name()),
                  0);
        ASSERT_EQ(shell("ip -n " + hub_->name() + " addr add 10.250." + n + ".1/30 dev " + hub_side), 0);
        ASSERT_EQ(shell("ip -n " + hub_->name() + " link set " + hub_side + " up"), 0);
        ASSERT_EQ(shell("ip -n " + world.netns_name() + " addr add 10.250." + n + ".2/30 dev fleet0"), 0);
        ASSERT_EQ(shell("ip -n " + world.netns_name() + " link set fleet0 up"), 0);
        ASSERT_EQ(shell("ip -n " + world.netns_name() + " route add " + kRedisHost + "/32 via 10.250." + n + ".1"), 0);
        // The plumbing before the daemon: every server answers from the node.
        for (const auto& server : servers()) {
            const auto colon = server.rfind(':');
            ASSERT_EQ(shell("ip netns exec " + world.netns_name() + " redis-cli -h " + server.substr(0, colon) +
                            " -p " + server.substr(colon + 1) + " PING | grep -q PONG"),
                      0)
                << "node " << i << " cannot reach Redis at " << server;
        }
        world.set_daemon_wrapper(wrapper);
        ASSERT_NO_FATAL_FAILURE(world.start_daemon());
        ASSERT_TRUE(world.push_policy("policy.toml", policy_text(on_unavailable)));
    }

    // Hub, Redis (a single server unless `cluster`), three nodes, all leasing.
    void start_fleet(const std::string& on_unavailable, bool cluster = false,
                     const std::vector<std::string>& node0_wrapper = {}) {
        ASSERT_NO_FATAL_FAILURE(make_hub());
        if (cluster) {
            ASSERT_NO_FATAL_FAILURE(start_cluster());
        } else {
            ASSERT_NO_FATAL_FAILURE(start_redis());
        }
        for (size_t i = 0; i < kNodes; ++i)
            ASSERT_NO_FATAL_FAILURE(start_node(i, on_unavailable, i == 0 ? node0_wrapper : std::vector<std::string>{}));
        for (size_t i = 0; i < kNodes; ++i) ASSERT_TRUE(wait_state(i, "leasing", 10s)) << "node " << i;
    }

    SluiceWorld& node(size_t i) { return *nodes_.at(i); }

    // ---- status and metrics ------------------------------------------------------------

    // The tenant quota's entry in node i's `status --json` ({} when missing).
    json quota(size_t i) {
        const auto s = node(i).status();
        if (!s) return json::object();
        const json fleet = s->value("fleet", json());
        if (!fleet.is_object()) return json::object();  // null: no [fleet] configured
        for (const auto& q : fleet.value("quotas", json::array()))
            if (q.value("class", "") == kClass && q.value("interface", "") == "sl0") return q;
        return json::object();
    }

    bool wait_state(size_t i, const std::string& state, std::chrono::milliseconds timeout) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        json last;
        while (std::chrono::steady_clock::now() < deadline) {
            last = quota(i);
            if (last.value("state", "") == state) return true;
            std::this_thread::sleep_for(50ms);
        }
        ADD_FAILURE() << "node " << i << " not in state " << state << " after " << timeout.count()
                      << " ms; its quota: " << last.dump();
        return false;
    }

    // Node i leases now and goes on exchanging with Redis (an idle class
    // exchanges about once per idle hold, 1 s: 3 s allowed).
    void expect_still_leasing(size_t i) {
        const json before = quota(i);
        EXPECT_EQ(before.value("state", ""), "leasing") << "node " << i;
        const auto deadline = std::chrono::steady_clock::now() + 3s;
        uint64_t now = 0;
        do {
            std::this_thread::sleep_for(100ms);
            now = quota(i).value("exchanges", uint64_t{0});
        } while (now <= before.value("exchanges", uint64_t{0}) && std::chrono::steady_clock::now() < deadline);
        EXPECT_GT(now, before.value("exchanges", uint64_t{0})) << "node " << i << " stopped exchanging";
    }

    std::string scrape(size_t i) {
        const auto r = node(i).http_get(kMetricsPort + static_cast<int>(i), "/metrics");
        EXPECT_EQ(r.status, 200) << "node " << i << " /metrics: " << r.error;
        return r.body;
    }

    // The node's /metrics once its snapshot (about once a second) shows what
    // happened: retried until `ready` says so, 5 s at most.
    std::string scrape_when(size_t i, const std::function<bool(const std::string&)>& ready) {
        const auto deadline = std::chrono::steady_clock::now() + 5s;
        std::string text = scrape(i);
        while (!ready(text) && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(200ms);
            text = scrape(i);
        }
        return text;
    }

    // The first "ts=YYYY-MM-DDTHH:MM:SS.mmmZ" of node i's log, Unix seconds (0 if none).
    double log_start_unix_s(size_t i) {
        const std::string log = read_file(node(i).log_path());
        const size_t at = log.find("ts=");
        if (at == std::string::npos) return 0;
        std::tm tm{};
        const char* rest = strptime(log.c_str() + at + 3, "%Y-%m-%dT%H:%M:%S", &tm);
        if (rest == nullptr) return 0;
        return static_cast<double>(timegm(&tm)) + (*rest == '.' ? std::strtod(rest, nullptr) : 0.0);
    }

    size_t log_count(size_t i, const std::string& what) { return count_of(read_file(node(i).log_path()), what); }

    // ---- floods -------------------------------------------------------------------------

    // Floods the tenant prefix from every node at once, node i at pps[i]
    // (0: not at all); `during` runs after `during_after` while they send.
    FleetRun flood(const std::vector<double>& pps, double seconds, const std::function<void()>& during = {},
                   std::chrono::milliseconds during_after = 0ms) {
        FleetRun run;
        std::vector<pid_t> pids(nodes_.size(), -1);
        for (size_t i = 0; i < nodes_.size(); ++i)
            if (pps.at(i) > 0)
                pids[i] = node(i).start_traffic({Flow{kClass, kTenantSources, pps[i]}}, seconds, "flood");
        if (during) {
            std::this_thread::sleep_for(during_after);
            during();
        }
        int64_t first_spawn = INT64_MAX, last_exit = 0;
        run.t_lower = 1e9;
        run.ok = true;
        for (size_t i = 0; i < nodes_.size(); ++i) {
            run.reports.push_back(pids[i] > 0 ? node(i).finish_traffic(pids[i], seconds, "flood") : std::nullopt);
            const auto& r = run.reports.back();
            run.received.push_back(r ? r->flow(kClass).received : 0);
            run.admitted += run.received.back();
            if (pids[i] <= 0) continue;
            if (!r) {
                run.ok = false;
                continue;
            }
            expect_no_receiver_drops(*r);
            first_spawn = std::min(first_spawn, r->spawned_unix_ns);
            last_exit = std::max(last_exit, r->exited_unix_ns);
            run.t_lower = std::min(run.t_lower, r->duration_s);
        }
        run.t_upper = static_cast<double>(last_exit - first_spawn) / 1e9;
        run.first_spawn_ns = first_spawn;
        run.last_exit_ns = last_exit;
        return run;
    }

    // "node 0 sent a received b, ...; admitted X over T s"
    void figure_run(const std::string& key, const FleetRun& run, double bound, const std::string& extra = {}) {
        std::string text;
        for (size_t i = 0; i < run.reports.size(); ++i) {
            if (!run.reports[i]) continue;
            text += "node " + std::to_string(i) + " sent " + std::to_string(run.reports[i]->flow(kClass).sent) +
                    " received " + std::to_string(run.received[i]) + "; ";
        }
        text += "admitted " + std::to_string(run.admitted) + " bound " + figure(bound) + " (T upper " +
                secs(run.t_upper) + " s, lower " + secs(run.t_lower) + " s)";
        if (!extra.empty()) text += "; " + extra;
        figure_line(key, text);
    }

    // The fleet-wide bound over the run, `extra_bursts` for Redis restarted
    // empty: burst + rate·(T + H) + N·rate·P/64, the last term the sliver
    // each idle node may hold for up to the idle hold and spend later.
    static double bound(const FleetRun& run, int extra_bursts = 0) {
        return kBurst * (1 + extra_bursts) + kRate * (run.t_upper + kH) + kNodes * kSliver;
    }

    // Every node's pass count of the class at about one instant: the `stats`
    // of all nodes run at once; `at_s` is the middle of the time they took,
    // `spread_s` that time.
    struct Sample {
        uint64_t pass = 0;  // summed over nodes
        double at_s = 0;
        double spread_s = 0;
    };
    Sample sample() {
        const auto started = std::chrono::steady_clock::now();
        std::vector<pid_t> pids;
        for (size_t i = 0; i < nodes_.size(); ++i) pids.push_back(node(i).start_ctl({"--json", "stats"}, "sample"));
        Sample out;
        for (size_t i = 0; i < nodes_.size(); ++i) {
            const ProcResult r = node(i).finish_ctl(pids[i], "sample");
            EXPECT_EQ(r.code, 0) << "node " << i << " stats: " << r.err;
            if (r.code == 0) out.pass += class_counter(json::parse(r.out, nullptr, false), kClass, "pass_packets");
        }
        const auto done = std::chrono::steady_clock::now();
        const auto seconds = [](auto t) { return std::chrono::duration<double>(t.time_since_epoch()).count(); };
        out.at_s = (seconds(started) + seconds(done)) / 2;
        out.spread_s = seconds(done) - seconds(started);
        return out;
    }

    // Every node offering about the quota for 4 s: the fleet admits at most
    // the bound over the run, and at least 95% of the rate once the leases
    // have grown (between 1.0 s and 3.5 s into the flood, from the daemons'
    // counters). The whole
    // run's share of rate·T is printed: each node's lease starts at
    // min_lease and doubles per round, so the first ~0.3 s lose part of the
    // quota, which the initial burst does not make up.
    void check_share(const std::string& key) {
        Sample first, second;
        const FleetRun run = flood(
            std::vector<double>(kNodes, kRate), 4,
            [&] {
                first = sample();
                std::this_thread::sleep_for(2500ms -
                                            std::chrono::milliseconds(static_cast<int>(first.spread_s * 1000)));
                second = sample();
            },
            1000ms);
        ASSERT_TRUE(run.ok);
        const double upper = bound(run);
        // Each node's counter was read within its sample's spread: the
        // window between the midpoints is off by at most half of both spreads
        // (printed), either way.
        const double window = second.at_s - first.at_s;
        const double steady = static_cast<double>(second.pass - first.pass) / window;
        figure_run(key, run, upper,
                   figure(100.0 * static_cast<double>(run.admitted) / (kRate * run.t_lower)) +
                       "% of rate·T over the whole run; steady " + figure(steady) +
                       "/s = " + figure(100 * steady / kRate) + "% of the rate over " + secs(window) +
                       " s (samples took " + secs(first.spread_s) + " and " + secs(second.spread_s) + " s)");
        EXPECT_LE(static_cast<double>(run.admitted), upper) << "the fleet admitted more than its quota";
        // At least 95% of the rate over the shortest the window can have been.
        const double shortest = window - (first.spread_s + second.spread_s) / 2;
        EXPECT_GE(static_cast<double>(second.pass - first.pass), 0.95 * kRate * shortest)
            << "the fleet admitted less than 95% of its quota once leasing (over at least " << shortest << " s)";
        for (size_t i = 0; i < kNodes; ++i) {
            EXPECT_GT(run.received[i], 0u) << "node " << i << " got no share";
            ASSERT_TRUE(run.reports[i]);
            // Every frame of the class was decided: passed, or dropped for
            // want of fleet credit (the node's own per-source limit is far off).
            const auto stats = node(i).stats();
            ASSERT_TRUE(stats);
            json drops = json::object();
            for (const auto& c : interface_stats(*stats, "sl0").value("classes", json::array()))
                if (c.value("name", "") == kClass) drops = c.value("drops_by_reason", json::object());
            figure_line("node" + std::to_string(i) + "-drops", drops.dump());
            EXPECT_EQ(class_counter(*stats, kClass, "pass_packets"), run.received[i]) << "node " << i;
            EXPECT_EQ(drops.value("fleet", uint64_t{0}), run.reports[i]->flow(kClass).sent - run.received[i])
                << "node " << i;
            EXPECT_EQ(drops.size(), 1u) << "node " << i << " dropped for other reasons: " << drops.dump();
        }
    }

    // Drops every packet node i sends to the hub (Redis stays up).
    void partition(size_t i) {
        const std::string rules = node(i).dir() + "/partition.nft";
        write_file(rules,
                   "table inet sluice_partition {\n"
                   "  chain out { type filter hook output priority 0; policy accept; ip daddr 10.250.0.0/16 drop; }\n"
                   "}\n");
        ASSERT_EQ(shell("ip netns exec " + node(i).netns_name() + " nft -f " + rules), 0);
    }
    void heal(size_t i) {
        ASSERT_EQ(shell("ip netns exec " + node(i).netns_name() + " nft delete table inet sluice_partition"), 0);
    }

    std::unique_ptr<NetNamespace> hub_;
    std::unique_ptr<RedisServer> redis_;
    std::unique_ptr<RedisCluster> cluster_;
    std::vector<std::unique_ptr<SluiceWorld>> nodes_;
};

// ---- sharing ----------------------------------------------------------------------------

TEST_F(FleetE2E, ThreeNodesShareOneQuota) {
    ASSERT_NO_FATAL_FAILURE(start_fleet("closed"));
    ASSERT_NO_FATAL_FAILURE(check_share("share"));
    for (size_t i = 0; i < kNodes; ++i) {
        const json q = quota(i);
        figure_line("node" + std::to_string(i), q.dump());
        EXPECT_EQ(q.value("state", ""), "leasing");
        EXPECT_GT(q.value("exchanges", uint64_t{0}), 0u);
        EXPECT_EQ(q.value("fallbacks", uint64_t{1}), 0u);
        EXPECT_EQ(q.value("fallback_granted", uint64_t{1}), 0u);
    }
}

TEST_F(FleetE2E, UnevenDemand90_5_5) {
    ASSERT_NO_FATAL_FAILURE(start_fleet("closed"));
    // 1.2 × the quota offered, split 90/5/5: the quiet nodes are served in
    // full, which leaves the busy one 88% of what the fleet admits.
    const double offered = 1.2 * kRate;
    // 4 s like the share tests: the busy node's lease ramp weighs less.
    const FleetRun run = flood({0.9 * offered, 0.05 * offered, 0.05 * offered}, 4);
    ASSERT_TRUE(run.ok);
    const double share =
        static_cast<double>(run.received[0]) / static_cast<double>(std::max<uint64_t>(1, run.admitted));
    figure_run("uneven", run, bound(run), "busy node's share " + figure(100 * share) + "% (ideal 88%)");
    EXPECT_LE(static_cast<double>(run.admitted), bound(run));
    EXPECT_GE(share, 0.85) << "the busy node got less than 85% of what the fleet admitted";
}

// ---- faults -----------------------------------------------------------------------------

TEST_F(FleetE2E, RedisKilledOpenFallsBackToFallbackRate) {
    ASSERT_NO_FATAL_FAILURE(start_fleet("open"));
    const double offered = 2 * kFallback;
    // Redis dies a second into the flood.
    int64_t kill_start = 0, kill_end = 0;
    const FleetRun during = flood(
        std::vector<double>(kNodes, offered), kSeconds,
        [&] {
            kill_start = unix_now_ns();
            redis_->kill();
            kill_end = unix_now_ns();
        },
        1000ms);
    ASSERT_TRUE(during.ok);
    // Redis-granted credit: the fleet's bound up to the kill; then each
    // node's fallback_rate·(T' + 2P) over what is left of the run (its cell
    // holds at most 2·fallback_rate·P of local credit; 2P = H).
    const double before_kill = static_cast<double>(kill_end - during.first_spawn_ns) / 1e9;
    const double after_kill = static_cast<double>(during.last_exit_ns - kill_start) / 1e9;
    const double during_bound =
        kBurst + kRate * (before_kill + kH) + kNodes * kSliver + kNodes * kFallback * (after_kill + kH);
    figure_run("during-kill", during, during_bound,
               "killed " + secs(before_kill) + " s into the run, " + secs(after_kill) + " s before its end");
    EXPECT_LE(static_cast<double>(during.admitted), during_bound);

    for (size_t i = 0; i < kNodes; ++i) ASSERT_TRUE(wait_state(i, "fallback", 3s));
    const FleetRun after = flood(std::vector<double>(kNodes, offered), kSeconds);
    ASSERT_TRUE(after.ok);
    figure_run("in-fallback", after, kNodes * (kFallback * (after.t_upper + kH) + kBurst));
    for (size_t i = 0; i < kNodes; ++i) {
        const double received = static_cast<double>(after.received[i]);
        // One node alone: its fallback rate (plus what one lease period and
        // a burst's worth of credit can hold), at least 90% of it.
        EXPECT_LE(received, kFallback * (after.t_upper + kH) + kBurst) << "node " << i;
        EXPECT_GE(received, 0.9 * kFallback * after.t_lower) << "node " << i;

        const std::map<std::string, std::string> labels{{"class", kClass}, {"interface", "sl0"}};
        const std::string text =
            scrape_when(i, [&](const std::string& t) { return metric(t, "sluice_fleet_fallback_total", labels) >= 1; });
        auto with = [&](const std::string& k, const std::string& v) {
            auto l = labels;
            l[k] = v;
            return l;
        };
        const double fallbacks = metric(text, "sluice_fleet_fallback_total", labels);
        const double in_fallback = metric(text, "sluice_fleet_state", with("state", "fallback"));
        const double leasing = metric(text, "sluice_fleet_state", with("state", "leasing"));
        const double granted = metric(text, "sluice_fleet_granted_units_total", with("from", "fallback"));
        const double failed = metric(text, "sluice_fleet_exchanges_total", with("result", "failed"));
        const size_t logged = log_count(i, "Redis unavailable");
        figure_line("node" + std::to_string(i), "received " + figure(received) + " (fallback_rate·T " +
                                                    figure(kFallback * after.t_lower) + "), fallback_total " +
                                                    figure(fallbacks) + ", state fallback " + figure(in_fallback) +
                                                    " leasing " + figure(leasing) + ", fallback granted " +
                                                    figure(granted) + ", failed exchanges " + figure(failed) +
                                                    ", 'Redis unavailable' logged " + std::to_string(logged) + "x");
        EXPECT_EQ(fallbacks, 1);
        EXPECT_EQ(in_fallback, 1);
        EXPECT_EQ(leasing, 0);
        EXPECT_GT(granted, 0);
        EXPECT_EQ(logged, 1u);
    }
}

TEST_F(FleetE2E, RedisKilledClosedAdmitsNothingOnceTheLeaseIsSpent) {
    ASSERT_NO_FATAL_FAILURE(start_fleet("closed"));
    const FleetRun during = flood(
        std::vector<double>(kNodes, kRate), kSeconds, [&] { redis_->kill(); }, 1000ms);
    ASSERT_TRUE(during.ok);
    figure_run("during-kill", during, bound(during));
    EXPECT_LE(static_cast<double>(during.admitted), bound(during));

    for (size_t i = 0; i < kNodes; ++i) ASSERT_TRUE(wait_state(i, "fallback", 3s));
    std::vector<uint64_t> held;
    // The credit each node still holds (negative: an overdraft it owes).
    for (size_t i = 0; i < kNodes; ++i)
        held.push_back(static_cast<uint64_t>(std::max<int64_t>(0, quota(i).value("credit", int64_t{0}))));
    const FleetRun after = flood(std::vector<double>(kNodes, kRate), 2);
    ASSERT_TRUE(after.ok);
    std::string credits;
    for (size_t i = 0; i < kNodes; ++i) credits += (i ? ", " : "") + std::to_string(held[i]);
    figure_run("after", after, static_cast<double>(held[0] + held[1] + held[2]), "credit held before: " + credits);
    for (size_t i = 0; i < kNodes; ++i) {
        EXPECT_LE(after.received[i], held[i]) << "node " << i << " admitted past its held credit";
        EXPECT_EQ(log_count(i, "Redis unavailable"), 1u) << "node " << i;
    }
}

TEST_F(FleetE2E, RedisRestartedEmptyResumesLeasingWithinOneExtraBurst) {
    ASSERT_NO_FATAL_FAILURE(start_fleet("closed"));
    std::string restart_error;
    const FleetRun run = flood(
        std::vector<double>(kNodes, kRate), 4,
        [&] {
            redis_->kill();
            redis_ = std::make_unique<RedisServer>(hub_redis_options());
            restart_error = redis_->error();
        },
        1200ms);
    ASSERT_EQ(restart_error, "");
    ASSERT_TRUE(run.ok);
    const double upper = bound(run, 1);
    figure_run("restart", run, upper,
               figure(100.0 * static_cast<double>(run.admitted) / (kRate * run.t_lower)) + "% of rate·T");
    EXPECT_LE(static_cast<double>(run.admitted), upper);
    for (size_t i = 0; i < kNodes; ++i) {
        ASSERT_TRUE(wait_state(i, "leasing", 5s)) << "node " << i << " did not resume leasing";
        expect_still_leasing(i);
    }
}

TEST_F(FleetE2E, PartitionedNodeFallsBackOthersKeepLeasing) {
    if (find_in_path("nft").empty()) {
        if (privileged_suites_required()) FAIL() << "needs nft (Debian: nftables)";
        GTEST_SKIP() << "skipped: needs nft (Debian: nftables)";
    }
    ASSERT_NO_FATAL_FAILURE(start_fleet("open"));
    ASSERT_NO_FATAL_FAILURE(partition(0));
    // Idle, node 0 may skip its exchanges for the idle hold (1 s) first.
    ASSERT_TRUE(wait_state(0, "fallback", 5s));
    const FleetRun run = flood(std::vector<double>(kNodes, kRate), kSeconds);
    ASSERT_TRUE(run.ok);
    const double node0_bound = kFallback * (run.t_upper + kH) + kBurst;
    const double upper = bound(run) + node0_bound;
    const double others = static_cast<double>(run.received[1] + run.received[2]);
    figure_run("partition", run, upper,
               "node 0 (partitioned) bound " + figure(node0_bound) + ", nodes 1+2 " + figure(others) + " = " +
                   figure(100 * others / (kRate * run.t_lower)) + "% of rate·T");
    EXPECT_LE(static_cast<double>(run.admitted), upper);
    EXPECT_LE(static_cast<double>(run.received[0]), node0_bound);
    EXPECT_GE(static_cast<double>(run.received[0]), 0.9 * kFallback * run.t_lower);
    EXPECT_LE(others, bound(run));
    EXPECT_EQ(quota(0).value("state", ""), "fallback");
    for (size_t i = 1; i < kNodes; ++i) {
        const json q = quota(i);
        EXPECT_EQ(q.value("state", ""), "leasing") << "node " << i;
        EXPECT_EQ(q.value("fallbacks", uint64_t{1}), 0u) << "node " << i;
        EXPECT_EQ(log_count(i, "Redis unavailable"), 0u) << "node " << i;
    }
    EXPECT_EQ(log_count(0, "Redis unavailable"), 1u);

    ASSERT_NO_FATAL_FAILURE(heal(0));
    EXPECT_TRUE(wait_state(0, "leasing", 5s));
    EXPECT_EQ(log_count(0, "reachable again"), 1u);
    figure_line("node0-after-heal", quota(0).dump());
}

// Not in the sanitizer build: libfaketime's clock_gettime and ASan's runtime
// start-up call each other, and the sanitized sluiced then sometimes never
// opens its socket ("libfaketime: Unexpected recursive calls to
// clock_gettime()"). The main build runs it.
#if !SLUICE_TEST_SANITIZED
TEST_F(FleetE2E, NodeClockFiveSecondsAheadStillSharesTheQuota) {
    const std::string lib = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
    if (!std::filesystem::exists(lib)) {
        if (privileged_suites_required()) FAIL() << "needs libfaketime (Debian: faketime)";
        GTEST_SKIP() << "skipped: needs " << lib << " (Debian: faketime)";
    }
    // Only the wall clock moves: the kernel's monotonic clock, which the
    // program and the daemon's timers share, stays as it is.
    ASSERT_NO_FATAL_FAILURE(start_fleet(
        "closed", false, {"/usr/bin/env", "LD_PRELOAD=" + lib, "FAKETIME=+5s", "FAKETIME_DONT_FAKE_MONOTONIC=1"}));
    // Node 0's log stamps its wall clock: its first line, written as it
    // started, reads about 5 s past the real time it was started at.
    const double ahead = log_start_unix_s(0) - static_cast<double>(node(0).daemon_started_unix_ns()) / 1e9;
    figure_line("clock", "node 0's first log stamp is " + secs(ahead) + " s past the real time it was started");
    EXPECT_GT(ahead, 4.5) << "node 0's sluiced does not run 5 s ahead";
    EXPECT_LT(ahead, 7.0) << "node 0's sluiced runs more than 5 s ahead";
    ASSERT_NO_FATAL_FAILURE(check_share("clock-ahead"));
    figure_line("node0", quota(0).dump());
}
#endif  // !SLUICE_TEST_SANITIZED

TEST_F(FleetE2E, NodeKilledHoldingALeaseOthersKeepLeasing) {
    ASSERT_NO_FATAL_FAILURE(start_fleet("closed"));
    const FleetRun run = flood(
        std::vector<double>(kNodes, kRate), 4, [&] { node(0).signal_daemon(SIGKILL); }, 1200ms);
    ASSERT_TRUE(run.ok);
    figure_run("kill-9", run, bound(run),
               figure(100.0 * static_cast<double>(run.admitted) / (kRate * run.t_lower)) + "% of rate·T");
    EXPECT_LE(static_cast<double>(run.admitted), bound(run));
    for (size_t i = 1; i < kNodes; ++i) expect_still_leasing(i);
}

// README: while sluiced itself is stopped nobody leases: a fleet class spends
// what it holds and then drops. Node 0's sluiced is killed while its class
// is idle, holding its idle lease (an idle exchange gives back what it takes,
// so the credit `status` shows is what the kill leaves); its XDP program
// stays pinned and goes on deciding. A flood of the class then gets exactly
// that credit and nothing more, even under on_unavailable = "open": fallback
// credit is the daemon's to grant too.
TEST_F(FleetE2E, StoppedNodeSpendsWhatItHoldsThenDrops) {
    ASSERT_NO_FATAL_FAILURE(start_fleet("open"));
    const json before = quota(0);
    const int64_t held = before.value("credit", int64_t{-1});
    ASSERT_GT(held, 0) << before.dump();
    node(0).signal_daemon(SIGKILL);
    const FleetRun run = flood({kRate, 0, 0}, 2);
    ASSERT_TRUE(run.ok);
    ASSERT_TRUE(run.reports[0]);
    figure_run("stopped", run, static_cast<double>(held), "credit held at the kill: " + std::to_string(held));
    EXPECT_EQ(run.received[0], static_cast<uint64_t>(held)) << "node 0 did not spend exactly what it held";
    EXPECT_GT(run.reports[0]->flow(kClass).sent, run.received[0] + static_cast<uint64_t>(kRate))
        << "the flood says nothing about dropping";
    for (size_t i = 1; i < kNodes; ++i) expect_still_leasing(i);
}

// ---- Redis Cluster ------------------------------------------------------------------------

TEST_F(FleetE2E, ThreeNodesShareOneQuotaOnACluster) {
    ASSERT_NO_FATAL_FAILURE(start_fleet("closed", true));
    ASSERT_NO_FATAL_FAILURE(check_share("cluster-share"));
}

}  // namespace
}  // namespace sluice::test
