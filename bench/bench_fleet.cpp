// SPDX-License-Identifier: Apache-2.0
// sluice-bench fleet: what fleet quotas cost Redis, and how close the fleet
// stays to its quota. It starts its own redis-server (tests/fleet/
// redis_process.h: 127.0.0.1, a free port, a temp dir; killed and removed on
// every exit, and killed by the kernel if this process dies), then:
//   - For N = 1 .. --nodes local nodes, each a FleetLeaser with its own
//     credit cells, one quota shared by all of them on a fresh key (a full
//     bucket), and one traffic loop offering --offered % of the quota in
//     total, unit by unit, round-robin over the nodes (sluice_fleet_take, as
//     the packet path does), and --idle more quotas per node that get no
//     traffic (each its own key, shared by the nodes). Per N: Redis round trips per node per second,
//     EVALSHA calls per second at the server (INFO commandstats), lease
//     utilisation (units spent / units Redis granted, re-grants included),
//     admitted against fleet_leaser.h's bound burst + rate (T + H), with
//     H = P + the measured mean exchange time.
//   - What one Redis takes: K client threads (one connection each) making
//     exchanges back to back on distinct keys, for each K of --threads;
//     exchanges per second, Redis's CPU over the run (INFO cpu) and
//     exchanges per Redis CPU-second, the figure a load model needs (Redis
//     runs the scripts on one thread, so one core).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_subcommands.h"
#include "fleet/redis_process.h"
#include "fleet_bucket.h"
#include "fleet_leaser.h"
#include "sluice/fleet.h"

namespace sluice::bench {
namespace {

using Clock = std::chrono::steady_clock;
using fleet::RedisReply;
using fleet::RedisReplyType;

double seconds_since(Clock::time_point from) { return std::chrono::duration<double>(Clock::now() - from).count(); }

// A "name:value" field of an INFO reply, or "" when it is not there.
std::string info_field(const std::string& info, const std::string& name) {
    const std::string tag = name + ":";
    size_t at = info.find(tag);
    while (at != std::string::npos && at != 0 && info[at - 1] != '\n') at = info.find(tag, at + 1);
    if (at == std::string::npos) return {};
    const size_t from = at + tag.size();
    return info.substr(from, info.find_first_of("\r\n", from) - from);
}

// A number in a "k=v,k=v" list ("calls=12,usec=34,..."), or 0.
double stat_value(const std::string& list, const std::string& key) {
    const std::string tag = key + "=";
    size_t at = list.find(tag);
    while (at != std::string::npos && at != 0 && list[at - 1] != ',') at = list.find(tag, at + 1);
    return at == std::string::npos ? 0 : std::strtod(list.c_str() + at + tag.size(), nullptr);
}

// What the server says about itself at one moment.
struct RedisSample {
    double evalsha_calls = 0;
    double evalsha_usec = 0;  // server time in EVALSHA (the scripts), microseconds
    double cpu_s = 0;         // used_cpu_sys + used_cpu_user
};

Result<RedisSample> sample(const test::RedisServer& server) {
    const RedisReply info = server.call({"INFO", "all"});
    if (info.type != RedisReplyType::string) return Error{"redis INFO: " + info.str};
    const std::string evalsha = info_field(info.str, "cmdstat_evalsha");
    RedisSample s;
    s.evalsha_calls = stat_value(evalsha, "calls");
    s.evalsha_usec = stat_value(evalsha, "usec");
    s.cpu_s = std::strtod(info_field(info.str, "used_cpu_sys").c_str(), nullptr) +
              std::strtod(info_field(info.str, "used_cpu_user").c_str(), nullptr);
    return s;
}

struct NodesResult {
    uint32_t nodes = 0;
    double t = 0;                 // traffic seconds
    double offered = 0;           // units offered in total
    uint64_t admitted = 0;        // units taken from the busy quota's cells, all nodes
    uint64_t granted = 0;         // units Redis granted for the busy quota (re-grants included)
    uint64_t busy_exchanges = 0;  // of the busy quota, all nodes
    uint64_t exchanges = 0;       // successful exchanges, all nodes and quotas
    uint64_t failures = 0;        // failed exchanges, all nodes
    double exchange_s = 0;        // time in successful exchanges, all nodes
    double evalsha_per_s = 0;     // at the server, over the run
    double hold_s = 0;            // H = P + mean exchange time
    double bound = 0;             // burst + rate (T + H)
    std::vector<uint64_t> per_node_admitted;

    double exchanges_per_node_s() const { return static_cast<double>(exchanges) / nodes / t; }
    double busy_exchanges_per_node_s() const { return static_cast<double>(busy_exchanges) / nodes / t; }
    double mean_exchange_ms() const { return exchanges ? 1e3 * exchange_s / static_cast<double>(exchanges) : NAN; }
    double utilisation() const { return granted ? static_cast<double>(admitted) / static_cast<double>(granted) : NAN; }
};

Result<NodesResult> run_nodes(const test::RedisServer& server, const FleetBenchOptions& options, uint32_t n) {
    const std::chrono::milliseconds period{options.period_ms};
    FleetQuota quota;
    quota.class_id = 1;
    quota.class_name = "bench";
    quota.rate_per_s = options.rate;
    quota.burst = options.burst;
    // A key of its own per node count: each run starts from a full bucket.
    quota.definition_hash = "nodes" + std::to_string(n);

    std::vector<FleetQuota> quotas{quota};
    for (uint32_t i = 0; i < options.idle; ++i) {
        FleetQuota idle = quota;
        idle.class_id = 2 + i;
        idle.class_name = "idle" + std::to_string(i);
        quotas.push_back(idle);
    }

    std::vector<std::unique_ptr<sluice_fleet_credit[]>> cells;
    std::vector<std::unique_ptr<fleet::FleetLeaser>> leasers;
    for (uint32_t i = 0; i < n; ++i) {
        cells.push_back(std::make_unique<sluice_fleet_credit[]>(SLUICE_MAX_CLASSES));
        fleet::FleetLeaserOptions o;
        o.redis.servers = {server.endpoint()};
        o.key_namespace = "sluice-bench";
        o.lease_period = period;
        leasers.push_back(std::make_unique<fleet::FleetLeaser>(o));
        leasers.back()->set_quotas(1, quotas);
        leasers.back()->attach("node" + std::to_string(i), cells.back().get());
    }

    auto before = sample(server);
    if (!before) return before.error();
    NodesResult r;
    r.nodes = n;
    r.per_node_admitted.assign(n, 0);
    const double offered_rate = static_cast<double>(options.rate) * static_cast<double>(options.offered_percent) / 100;
    const double duration = static_cast<double>(options.seconds);

    const auto start = Clock::now();
    for (auto& leaser : leasers) leaser->start();
    // One loop for all nodes (2 cores: a thread per node would measure the
    // scheduler): every millisecond, the units due so far, round-robin.
    uint64_t offered = 0;
    while (!g_interrupted) {
        const double elapsed = seconds_since(start);
        if (elapsed >= duration) break;
        const auto due = static_cast<uint64_t>(offered_rate * elapsed);
        for (; offered < due; ++offered) {
            const uint32_t node = static_cast<uint32_t>(offered % n);
            if (sluice_fleet_take(&cells[node][quota.class_id], 1)) ++r.per_node_admitted[node];
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    r.t = seconds_since(start);
    for (auto& leaser : leasers) leaser->stop();
    const double ops_t = seconds_since(start);
    auto after = sample(server);
    if (!after) return after.error();
    if (auto status = check_interrupted(); !status) return status.error();

    r.offered = static_cast<double>(offered);
    for (const uint64_t a : r.per_node_admitted) r.admitted += a;
    uint64_t exchange_ns = 0;
    for (auto& leaser : leasers) {
        for (const auto& s : leaser->status()) {
            if (s.class_id == quota.class_id) {
                r.granted += s.redis_granted_total;
                r.busy_exchanges += s.exchanges;
            }
            r.exchanges += s.exchanges;
            r.failures += s.failures;
            exchange_ns += s.exchange_ns;
        }
    }
    r.exchange_s = static_cast<double>(exchange_ns) * 1e-9;
    r.evalsha_per_s = (after.value().evalsha_calls - before.value().evalsha_calls) / ops_t;
    const double mean_exchange_s = r.exchanges ? r.exchange_s / static_cast<double>(r.exchanges) : 0;
    r.hold_s = static_cast<double>(options.period_ms) / 1e3 + mean_exchange_s;
    r.bound = static_cast<double>(options.burst) + static_cast<double>(options.rate) * (r.t + r.hold_s);
    leasers.clear();  // returns what the nodes hold: after the figures
    return r;
}

struct CapacityResult {
    uint32_t threads = 0;
    double t = 0;
    uint64_t exchanges = 0, errors = 0;
    double evalsha_calls = 0, evalsha_usec = 0, cpu_s = 0;

    double per_s() const { return static_cast<double>(exchanges) / t; }
    double cpu_share() const { return cpu_s / t; }
    double per_cpu_s() const { return cpu_s > 0 ? evalsha_calls / cpu_s : NAN; }
    double usec_per_call() const { return evalsha_calls > 0 ? evalsha_usec / evalsha_calls : NAN; }
    double mean_rtt_ms() const { return exchanges ? 1e3 * t * threads / static_cast<double>(exchanges) : NAN; }
};

Result<CapacityResult> run_capacity(const test::RedisServer& server, uint32_t k, uint64_t ms) {
    // A quota that never runs dry: every exchange grants what it asks and
    // takes back the last grant, as a busy node's exchange does.
    const fleet::FleetBucketSpec spec{.rate_per_s = 1e12, .burst = uint64_t{1} << 40};
    constexpr uint64_t kRequest = 100;
    const fleet::FleetBucketScript script;
    std::atomic<bool> go{false}, stop{false};
    std::atomic<uint32_t> ready{0};
    std::vector<uint64_t> done(k, 0), errors(k, 0);
    std::vector<std::string> first_error(k);
    std::vector<std::thread> threads;
    for (uint32_t i = 0; i < k; ++i) {
        threads.emplace_back([&, i] {
            fleet::RedisOptions o;
            o.servers = {server.endpoint()};
            o.connect_timeout = std::chrono::milliseconds(1000);
            o.command_timeout = std::chrono::milliseconds(1000);
            fleet::RedisClient client(o);
            const std::string key =
                fleet::fleet_bucket_key("sluice-bench", "capacity" + std::to_string(i), "k" + std::to_string(k));
            // The first exchange connects and loads the script: not timed.
            auto warm = script.exchange(client, key, spec, kRequest, 0);
            if (!warm) first_error[i] = warm.error().message;
            ready.fetch_add(1);
            while (!go.load()) std::this_thread::yield();
            while (!stop.load(std::memory_order_relaxed)) {
                if (auto e = script.exchange(client, key, spec, kRequest, kRequest); e) {
                    ++done[i];
                } else {
                    ++errors[i];
                    if (first_error[i].empty()) first_error[i] = e.error().message;
                }
            }
        });
    }
    while (ready.load() < k) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    auto before = sample(server);
    const auto start = Clock::now();
    go = true;
    while (!g_interrupted && seconds_since(start) * 1e3 < static_cast<double>(ms))
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    stop = true;
    for (auto& t : threads) t.join();
    CapacityResult r;
    r.threads = k;
    r.t = seconds_since(start);
    auto after = sample(server);
    if (!before) return before.error();
    if (!after) return after.error();
    if (auto status = check_interrupted(); !status) return status.error();
    for (uint32_t i = 0; i < k; ++i) {
        r.exchanges += done[i];
        r.errors += errors[i];
    }
    if (r.exchanges == 0) {
        for (const auto& e : first_error)
            if (!e.empty()) return Error{"capacity, " + std::to_string(k) + " clients: " + e};
    }
    r.evalsha_calls = after.value().evalsha_calls - before.value().evalsha_calls;
    r.evalsha_usec = after.value().evalsha_usec - before.value().evalsha_usec;
    r.cpu_s = after.value().cpu_s - before.value().cpu_s;
    return r;
}

}  // namespace

Status run_fleet(const CommonOptions& /*common*/, const FleetBenchOptions& options, Json& report) {
    if (auto missing = test::missing_redis()) return Error{"sluice-bench fleet " + *missing};
    const test::RedisServer server;
    if (!server.error().empty()) return Error{"starting redis-server: " + server.error()};
    const RedisReply version = server.call({"INFO", "server"});
    const std::string redis_version = info_field(version.str, "redis_version");

    std::vector<NodesResult> nodes;
    for (uint32_t n = 1; n <= options.nodes; ++n) {
        auto r = run_nodes(server, options, n);
        if (!r) return r.error();
        nodes.push_back(r.value());
    }
    std::vector<CapacityResult> capacity;
    for (const uint64_t k : options.threads) {
        auto r = run_capacity(server, static_cast<uint32_t>(k), options.capacity_ms);
        if (!r) return r.error();
        capacity.push_back(r.value());
    }

    const auto rate = static_cast<double>(options.rate);
    Table table{"fleet: N nodes share one quota of " + std::to_string(options.rate) + "/s, burst " +
                    std::to_string(options.burst) + ", P " + std::to_string(options.period_ms) + " ms; " +
                    std::to_string(options.offered_percent) + "% of it offered, split evenly; " +
                    std::to_string(options.idle) + " idle quotas per node",
                {"nodes", "T s", "busy exch/s/node", "all exch/s/node", "Redis ops/s", "mean exch ms", "H ms",
                 "utilisation", "admitted", "bound", "adm/bound", "adm/(rate T)", "failures"},
                {}};
    Json node_rows = Json::array();
    for (const NodesResult& r : nodes) {
        table.rows.push_back({std::to_string(r.nodes), fixed(r.t, 2), fixed(r.busy_exchanges_per_node_s(), 1),
                              fixed(r.exchanges_per_node_s(), 1), fixed(r.evalsha_per_s, 1),
                              fixed(r.mean_exchange_ms(), 3), fixed(1e3 * r.hold_s, 1), fixed(r.utilisation(), 3),
                              std::to_string(r.admitted), fixed(r.bound, 0),
                              fixed(static_cast<double>(r.admitted) / r.bound, 3),
                              fixed(static_cast<double>(r.admitted) / (rate * r.t), 3), std::to_string(r.failures)});
        node_rows.push_back({{"nodes", r.nodes},
                             {"seconds", r.t},
                             {"offered", r.offered},
                             {"admitted", r.admitted},
                             {"admitted_per_node", r.per_node_admitted},
                             {"redis_granted", r.granted},
                             {"exchanges", r.exchanges},
                             {"failures", r.failures},
                             {"busy_exchanges", r.busy_exchanges},
                             {"busy_exchanges_per_node_per_s", r.busy_exchanges_per_node_s()},
                             {"exchanges_per_node_per_s", r.exchanges_per_node_s()},
                             {"redis_evalsha_per_s", r.evalsha_per_s},
                             {"mean_exchange_ms", r.mean_exchange_ms()},
                             {"hold_ms", 1e3 * r.hold_s},
                             {"lease_utilisation", r.utilisation()},
                             {"bound", r.bound},
                             {"admitted_over_bound", static_cast<double>(r.admitted) / r.bound},
                             {"admitted_over_rate_t", static_cast<double>(r.admitted) / (rate * r.t)}});
    }
    table.print();

    Table cap{
        "fleet: what one Redis takes: K clients (a connection and a thread each) exchanging back to back "
        "on distinct keys",
        {"clients", "exchanges/s", "Redis CPU", "exch per Redis CPU-s", "script us/call", "mean RTT ms", "errors"},
        {}};
    Json cap_rows = Json::array();
    for (const CapacityResult& r : capacity) {
        cap.rows.push_back({std::to_string(r.threads), fixed(r.per_s(), 0), fixed(100 * r.cpu_share(), 0) + "%",
                            fixed(r.per_cpu_s(), 0), fixed(r.usec_per_call(), 2), fixed(r.mean_rtt_ms(), 3),
                            std::to_string(r.errors)});
        cap_rows.push_back({{"clients", r.threads},
                            {"seconds", r.t},
                            {"exchanges", r.exchanges},
                            {"errors", r.errors},
                            {"exchanges_per_s", r.per_s()},
                            {"redis_cpu_share", r.cpu_share()},
                            {"exchanges_per_redis_cpu_s", r.per_cpu_s()},
                            {"script_usec_per_call", r.usec_per_call()},
                            {"mean_rtt_ms", r.mean_rtt_ms()}});
    }
    cap.print();

    report["settings"] = {{"seconds", options.seconds},
                          {"rate", options.rate},
                          {"burst", options.burst},
                          {"period_ms", options.period_ms},
                          {"nodes", options.nodes},
                          {"offered_percent", options.offered_percent},
                          {"idle", options.idle},
                          {"threads", options.threads},
                          {"capacity_ms", options.capacity_ms},
                          {"redis", {{"version", redis_version}, {"port", server.port()}, {"dir", server.dir()}}}};
    report["results"] = {{"nodes", node_rows}, {"capacity", cap_rows}};
    return ok_status();
}

}  // namespace sluice::bench
