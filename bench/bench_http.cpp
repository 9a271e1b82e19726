// SPDX-License-Identifier: Apache-2.0
// sluice-bench http: what sluiced's nginx door costs a request, through a
// real nginx. It starts (tests/e2e/nginx_front.h: a temp dir, free loopback
// ports, everything stopped and removed on every exit):
//   - sluiced with no interfaces and `[request] http_address` on 127.0.0.1,
//     a policy with two request classes in one domain: "per-user" (GCRA,
//     --rate per second, --burst deep, one counter per X-User) inside
//     "domain" (the whole domain on one counter, never refusing), so each
//     decision checks and charges two counters;
//   - nginx (/usr/sbin/nginx, --nginx-workers workers) with two front
//     servers to one upstream server block that answers 200 "ok": "bare"
//     (straight through) and "sluice" (packaging/nginx-sluice.conf included
//     as shipped: auth_request, a new connection to sluiced per decision);
// and runs wrk (-t --threads -c --connections -d --seconds --latency) against
// each, bare first, with a Lua script that spreads X-User over --users users
// (fresh names per run) and counts, per user, the 200s (the upstream echoes
// X-User back). It prints wrk's requests/s and latency percentiles (client
// side, through nginx) for both and their ratio; sluiced's own decisions per
// second (`sluicectl stats --json` requests.decisions, before and after) and
// decision latency (the run's delta of /metrics'
// sluice_request_decision_seconds histogram: mean, and p50/p99 as the upper
// bound of the bucket that holds them); and the correctness check: every
// user's admitted count <= burst + rate * T, T the wall time wrk ran (every
// decision falls inside it), failing the command when one exceeds it.
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench_subcommands.h"
#include "common/http_get.h"
#include "e2e/nginx_front.h"
#include "e2e/process.h"

namespace sluice::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Per thread: statuses and, per user, the 200s; done() merges the threads
// and prints one line of JSON.
constexpr const char* kWrkScript = R"lua(
local threads = {}
function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end
function init(args)
  users = tonumber(args[1])
  prefix = args[2]
  n = tid * 7919
  admitted = {}
  statuses = {}
end
function request()
  n = n + 1
  return wrk.format("GET", "/", { ["X-User"] = prefix .. (n % users) })
end
function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
  if status == 200 then
    local u = headers["X-Bench-User"]
    if u then admitted[u] = (admitted[u] or 0) + 1 end
  end
end
function done(summary, latency, requests)
  local admitted_all, statuses_all = {}, {}
  for _, t in ipairs(threads) do
    for u, c in pairs(t:get("admitted")) do admitted_all[u] = (admitted_all[u] or 0) + c end
    for s, c in pairs(t:get("statuses")) do statuses_all[s] = (statuses_all[s] or 0) + c end
  end
  local function object(t)
    local parts = {}
    for k, v in pairs(t) do parts[#parts + 1] = string.format('"%s":%d', tostring(k), v) end
    return "{" .. table.concat(parts, ",") .. "}"
  end
  local e = summary.errors
  io.write(string.format(
    'SLUICE_BENCH_WRK {"requests":%d,"duration_us":%d,"errors":{"connect":%d,"read":%d,"write":%d,' ..
    '"status":%d,"timeout":%d},"latency_us":{"p50":%d,"p90":%d,"p99":%d,"max":%d,"mean":%.1f},' ..
    '"statuses":%s,"admitted":%s}\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean,
    object(statuses_all), object(admitted_all)))
end
)lua";

struct WrkRun {
    std::string name;
    Json raw;
    double wall_s = 0;  // the wrk process, spawn to exit
    double requests_per_s() const {
        const double us = raw.value("duration_us", 0.0);
        return us > 0 ? raw.value("requests", 0.0) / (us / 1e6) : 0;
    }
    double latency_ms(const char* p) const { return raw["latency_us"].value(p, 0.0) / 1e3; }
    uint64_t status(const char* code) const { return raw["statuses"].value(code, uint64_t{0}); }
    uint64_t errors() const {
        uint64_t n = 0;
        for (const char* kind : {"connect", "read", "write", "timeout"}) n += raw["errors"].value(kind, uint64_t{0});
        return n;
    }
};

Result<WrkRun> run_wrk(const HttpBenchOptions& options, const std::string& dir, const std::string& name, int port,
                       const std::string& prefix) {
    const std::vector<std::string> argv = {options.wrk,
                                           "-t" + std::to_string(options.threads),
                                           "-c" + std::to_string(options.connections),
                                           "-d" + std::to_string(options.seconds) + "s",
                                           "--latency",
                                           "-s",
                                           dir + "/users.lua",
                                           "http://127.0.0.1:" + std::to_string(port) + "/",
                                           "--",
                                           std::to_string(options.users),
                                           prefix};
    const auto started = Clock::now();
    const auto result = test::run(argv, dir + "/wrk-" + name, std::chrono::seconds(options.seconds + 60));
    WrkRun run{name, {}, std::chrono::duration<double>(Clock::now() - started).count()};
    const size_t at = result.out.find("SLUICE_BENCH_WRK ");
    if (result.code != 0 || at == std::string::npos)
        return Error{test::join_argv(argv) + " exited " + std::to_string(result.code) + ": " + result.err + result.out};
    const size_t from = at + std::strlen("SLUICE_BENCH_WRK ");
    run.raw = Json::parse(result.out.substr(from, result.out.find('\n', from) - from), nullptr, false);
    if (run.raw.is_discarded()) return Error{"wrk's script printed no JSON: " + result.out};
    return run;
}

// sluice_request_decision_seconds from /metrics: bucket bound -> cumulative count, sum, count.
struct Histogram {
    std::map<double, double> buckets;
    double sum = 0, count = 0;
};

Result<Histogram> scrape_latency(int port) {
    const auto response = test::http_get_loopback(port, "/metrics");
    if (response.status != 200) return Error{"GET /metrics: " + std::to_string(response.status) + " " + response.error};
    Histogram h;
    size_t line_start = 0;
    const std::string& text = response.body;
    while (line_start < text.size()) {
        size_t end = text.find('\n', line_start);
        if (end == std::string::npos) end = text.size();
        const std::string line = text.substr(line_start, end - line_start);
        line_start = end + 1;
        const std::string name = "sluice_request_decision_seconds";
        if (line.rfind(name, 0) != 0) continue;
        const double value = std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr);
        if (line.rfind(name + "_bucket", 0) == 0) {
            const size_t le = line.find("le=\"");
            if (le == std::string::npos) continue;
            const std::string bound = line.substr(le + 4, line.find('"', le + 4) - le - 4);
            h.buckets[bound == "+Inf" ? INFINITY : std::strtod(bound.c_str(), nullptr)] = value;
        } else if (line.rfind(name + "_sum", 0) == 0) {
            h.sum = value;
        } else if (line.rfind(name + "_count", 0) == 0) {
            h.count = value;
        }
    }
    if (h.buckets.empty()) return Error{"/metrics has no sluice_request_decision_seconds histogram"};
    return h;
}

// The upper bound of the bucket that holds quantile q of after - before.
double quantile_bound(const Histogram& before, const Histogram& after, double q) {
    const double total = after.count - before.count;
    if (total <= 0) return NAN;
    for (const auto& [bound, cumulative] : after.buckets) {
        const auto was = before.buckets.find(bound);
        const double delta = cumulative - (was == before.buckets.end() ? 0 : was->second);
        if (delta >= q * total) return bound;
    }
    return INFINITY;
}

std::string us_bound(double seconds) {
    if (std::isnan(seconds)) return "-";
    if (std::isinf(seconds)) return "> 500 ms";
    return "<= " + fixed(seconds * 1e6, 0) + " us";
}

Result<uint64_t> decisions(test::NginxFront& front) {
    std::string error;
    const auto out = front.ctl_json({"stats"}, &error);
    if (!out) return Error{error};
    const auto doc = Json::parse(*out, nullptr, false);
    if (doc.is_discarded() || !doc["requests"].is_object()) return Error{"stats --json has no requests: " + *out};
    return doc["requests"].value("decisions", uint64_t{0});
}

std::string policy(const HttpBenchOptions& options) {
    return "[[class]]\nname = \"default\"\nper_source = { rate = 1000, burst = 2000 }\n\n"
           "[[request_domain]]\nname = \"bench\"\nheaders = { user = \"X-User\" }\n\n"
           "[[request_class]]\nname = \"per-user\"\ndomain = \"bench\"\ndescriptor = [\"user\"]\n"
           "limit = { rate = " +
           std::to_string(options.rate) + ", burst = " + std::to_string(options.burst) +
           " }\n\n"
           "[[request_class]]\nname = \"domain\"\ndomain = \"bench\"\ndescriptor = []\n"
           "limit = { rate = 1000000000, burst = 1000000000 }\n";
}

}  // namespace

Status run_http(const CommonOptions& common, const HttpBenchOptions& options, Json& report) {
    (void)common;
    for (const auto& [what, path] : {std::pair{"nginx", options.nginx}, std::pair{"wrk", options.wrk},
                                     std::pair{"sluiced", options.sluiced}, std::pair{"sluicectl", options.sluicectl}})
        if (access(path.c_str(), X_OK) != 0)
            return Error{std::string(what) + " (" + path + ") is not an executable: see --" + what};
    if (access(options.snippet.c_str(), R_OK) != 0) return Error{"cannot read the snippet " + options.snippet};

    test::NginxFrontOptions front_options;
    front_options.sluiced = options.sluiced;
    front_options.sluicectl = options.sluicectl;
    front_options.nginx = options.nginx;
    front_options.snippet = options.snippet;
    front_options.nginx_workers = static_cast<int>(options.nginx_workers);
    front_options.dir_prefix = "/tmp/sluice-bench-http-";
    test::NginxFront front(front_options);
    for (auto step : {&test::NginxFront::make_dir, &test::NginxFront::start_sluiced})
        if (auto error = (front.*step)(); !error.empty()) return Error{error};
    if (auto error = front.push_policy(policy(options)); !error.empty()) return Error{error};
    std::vector<test::NginxSite> sites(2);  // bare, then through sluiced
    sites[0].limited = false;
    sites[1].domain = "bench";
    if (auto error = front.start_nginx(sites); !error.empty()) return Error{error};
    test::write_file(front.dir() + "/users.lua", kWrkScript);
    if (auto status = check_interrupted(); !status) return status;

    const std::string run_id = std::to_string(getpid()) + "-";
    auto bare = run_wrk(options, front.dir(), "bare", sites[0].port, "bare-" + run_id);
    if (!bare) return bare.error();
    if (auto status = check_interrupted(); !status) return status;

    auto decided_before = decisions(front);
    if (!decided_before) return decided_before.error();
    auto latency_before = scrape_latency(front.metrics_port());
    if (!latency_before) return latency_before.error();
    auto limited = run_wrk(options, front.dir(), "sluice", sites[1].port, "user-" + run_id);
    if (!limited) return limited.error();
    auto decided_after = decisions(front);
    if (!decided_after) return decided_after.error();
    auto latency_after = scrape_latency(front.metrics_port());
    if (!latency_after) return latency_after.error();

    const WrkRun& b = bare.value();
    const WrkRun& s = limited.value();
    const double t = s.wall_s;
    const uint64_t decided = decided_after.value() - decided_before.value();
    const Histogram& h0 = latency_before.value();
    const Histogram& h1 = latency_after.value();
    const double decision_mean_s = h1.count > h0.count ? (h1.sum - h0.sum) / (h1.count - h0.count) : NAN;
    const double p50 = quantile_bound(h0, h1, 0.5), p99 = quantile_bound(h0, h1, 0.99);

    Table clients{
        "http: wrk -t" + std::to_string(options.threads) + " -c" + std::to_string(options.connections) + " -d" +
            std::to_string(options.seconds) + "s through nginx (" + std::to_string(options.nginx_workers) +
            " worker(s)) to an upstream that answers 200; X-User over " + std::to_string(options.users) + " users",
        {"front", "requests/s", "ratio", "p50 ms", "p90 ms", "p99 ms", "max ms", "200", "429", "other",
         "socket errors"},
        {}};
    Json rows = Json::array();
    for (const WrkRun* r : {&b, &s}) {
        const uint64_t other = r->raw.value("requests", uint64_t{0}) - r->status("200") - r->status("429");
        const double ratio = r->requests_per_s() / b.requests_per_s();
        clients.rows.push_back({r->name, fixed(r->requests_per_s(), 0), fixed(ratio, 3), fixed(r->latency_ms("p50"), 2),
                                fixed(r->latency_ms("p90"), 2), fixed(r->latency_ms("p99"), 2),
                                fixed(r->latency_ms("max"), 2), std::to_string(r->status("200")),
                                std::to_string(r->status("429")), std::to_string(other), std::to_string(r->errors())});
        rows.push_back({{"front", r->name},
                        {"requests_per_s", r->requests_per_s()},
                        {"ratio_to_bare", ratio},
                        {"latency_ms",
                         {{"p50", r->latency_ms("p50")},
                          {"p90", r->latency_ms("p90")},
                          {"p99", r->latency_ms("p99")},
                          {"max", r->latency_ms("max")}}},
                        {"ok", r->status("200")},
                        {"too_many", r->status("429")},
                        {"other", other},
                        {"socket_errors", r->errors()},
                        {"wall_s", r->wall_s},
                        {"wrk", r->raw}});
    }
    clients.print();

    Table server{
        "http: sluiced's own decisions over the sluice run (stats --json requests.decisions; latency from "
        "/metrics sluice_request_decision_seconds, the run's delta: p50/p99 as the bucket bound)",
        {"decisions", "decisions/s", "mean us", "p50", "p99"},
        {{std::to_string(decided), fixed(static_cast<double>(decided) / t, 0), fixed(decision_mean_s * 1e6, 1),
          us_bound(p50), us_bound(p99)}}};
    server.print();

    // Every user's admissions against GCRA's bound over the run.
    const double bound = static_cast<double>(options.burst) + static_cast<double>(options.rate) * t;
    uint64_t max_admitted = 0, admitted_total = 0, over = 0;
    std::string max_user;
    for (const auto& [user, count] : s.raw["admitted"].items()) {
        const auto n = count.get<uint64_t>();
        admitted_total += n;
        if (n > max_admitted) max_admitted = n, max_user = user;
        if (static_cast<double>(n) > bound) over++;
    }
    const size_t users_seen = s.raw["admitted"].size();
    Table check{
        "http: correctness: admitted per user <= burst + rate * T (GCRA), T = " + fixed(t, 3) + " s (wrk's wall time)",
        {"users admitted", "most admitted", "bound", "most/bound", "users over", "sum admitted", "users * bound"},
        {{std::to_string(users_seen), std::to_string(max_admitted) + " (" + max_user + ")", fixed(bound, 1),
          fixed(static_cast<double>(max_admitted) / bound, 3), std::to_string(over), std::to_string(admitted_total),
          fixed(bound * static_cast<double>(options.users), 0)}}};
    check.print();

    report["settings"] = {{"seconds", options.seconds},
                          {"threads", options.threads},
                          {"connections", options.connections},
                          {"users", options.users},
                          {"rate", options.rate},
                          {"burst", options.burst},
                          {"nginx_workers", options.nginx_workers}};
    report["results"] = {{"clients", rows},
                         {"sluiced",
                          {{"decisions", decided},
                           {"decisions_per_s", static_cast<double>(decided) / t},
                           {"decision_mean_us", decision_mean_s * 1e6},
                           {"decision_p50_le_us", std::isfinite(p50) ? Json(p50 * 1e6) : Json(nullptr)},
                           {"decision_p99_le_us", std::isfinite(p99) ? Json(p99 * 1e6) : Json(nullptr)}}},
                         {"check",
                          {{"seconds", t},
                           {"bound_per_user", bound},
                           {"max_admitted_per_user", max_admitted},
                           {"users_admitted", users_seen},
                           {"users_over_bound", over},
                           {"admitted", admitted_total}}}};
    if (over > 0)
        return Error{std::to_string(over) + " user(s) admitted more than burst + rate * T = " + fixed(bound, 1) +
                     " (most: " + max_user + " with " + std::to_string(max_admitted) + ")"};
    if (s.status("200") == 0 || s.status("429") == 0)
        std::printf("note: the sluice run had %s: raise --connections or lower --rate to see both\n",
                    s.status("200") == 0 ? "no 200s" : "no 429s");
    return ok_status();
}

}  // namespace sluice::bench
