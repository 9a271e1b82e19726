// SPDX-License-Identifier: Apache-2.0
// Metrics end to end (issue #5): the real sluiced serving /metrics on the
// loopback of a throwaway namespace while sluice-traffic sends real frames
// through sl1 -> sl0. The scraped counters are checked against the daemon's
// own counters (`sluicectl stats`), against what the sender sent and the
// receiver counted, and against the kernel's run counts; the text is linted
// with promtool; a real Prometheus server scrapes the daemon and answers a
// PromQL query for the drop rate; and `sluicectl top` ranks the flooding
// source first at about the rate the traffic measured.
#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>
#include <tuple>

#include "common/privilege.h"
#include "e2e_fixture.h"

namespace sluice::test::metrics_test {
namespace {

using namespace std::chrono_literals;

// The daemon's default metrics_address, on the namespace's own loopback.
constexpr int kMetricsPort = 9464;
constexpr int kPrometheusPort = 9090;
// The daemon snapshots its metrics once a second: after this long (on an
// unloaded machine) a scrape shows everything that happened before.
constexpr auto kSnapshotSettle = 1500ms;
constexpr double kLimit = 1000;       // pps per source, every class
constexpr uint64_t kFrameBytes = 64;  // sluice-traffic's default frame (FCS excluded)

const char* const kPrometheus = "/usr/bin/prometheus";
const char* const kPromtool = "/usr/bin/promtool";

const Flow kPolite{"polite", "10.1.0.1", 500};
const Flow kGreedy{"greedy", "10.2.0.1", 20000};
// Over its limit too, but dropped ten times less than greedy: the ranking
// in `top` has something to rank.
const Flow kMild{"mild", "10.4.0.1", 3000};

// The sources under test get classes of their own. The kernel also sends a
// few frames out of sl1 by itself (IPv6 neighbour/router solicitations and
// MLD reports from its fe80:: address); no prefix matches those, so they land
// in "default" and every check on "polite" and "greedy" can be exact.
std::string policy_text() {
    const std::string limit = "per_source = { rate = " + figure(kLimit) + ", burst = " + figure(kLimit) + " }\n";
    return "[defaults]\n"
           "unit = \"packets\"\n"
           "accuracy = \"lease\"\n"
           "\n"
           "[[class]]\n"
           "name = \"default\"\n" +
           limit +
           "\n"
           "[[class]]\n"
           "name = \"polite\"\n"
           "match = [\"10.1.0.0/16\"]\n" +
           limit +
           "\n"
           "[[class]]\n"
           "name = \"greedy\"\n"
           "match = [\"10.2.0.0/16\", \"10.4.0.0/16\"]\n" +
           limit;
}

// ---- Prometheus text exposition ---------------------------------------------------

using Labels = std::map<std::string, std::string>;

struct Series {
    std::string name;
    Labels labels;
    double value = 0;
};

// Parses `name{label="value",...} value [timestamp]` lines; comments skipped.
std::optional<std::vector<Series>> parse_exposition(const std::string& text, std::string& error) {
    std::vector<Series> out;
    std::istringstream lines(text);
    std::string line;
    int number = 0;
    while (std::getline(lines, line)) {
        number++;
        if (line.empty() || line[0] == '#') continue;
        const auto fail = [&](const std::string& why) {
            error = "line " + std::to_string(number) + ": " + why + ": " + line;
            return std::nullopt;
        };
        Series series;
        size_t at = line.find_first_of("{ ");
        if (at == std::string::npos || at == 0) return fail("no metric name");
        series.name = line.substr(0, at);
        if (line[at] == '{') {
            at++;
            while (at < line.size() && line[at] != '}') {
                const size_t eq = line.find('=', at);
                if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') return fail("bad label");
                const std::string key = line.substr(at, eq - at);
                std::string value;
                size_t i = eq + 2;
                for (; i < line.size() && line[i] != '"'; i++) {
                    if (line[i] == '\\' && i + 1 < line.size()) {
                        i++;
                        value += line[i] == 'n' ? '\n' : line[i];
                    } else {
                        value += line[i];
                    }
                }
                if (i >= line.size()) return fail("unterminated label value");
                series.labels[key] = value;
                at = i + 1;
                if (at < line.size() && line[at] == ',') at++;
            }
            if (at >= line.size()) return fail("unterminated label set");
            at++;
        }
        std::istringstream rest(line.substr(at));
        std::string value;
        if (!(rest >> value)) return fail("no value");
        char* end = nullptr;
        series.value = std::strtod(value.c_str(), &end);
        if (end == value.c_str() || *end != '\0') return fail("bad value");
        out.push_back(std::move(series));
    }
    return out;
}

struct Scrape {
    std::string text;
    std::vector<Series> series;

    // Every series of `name` whose labels include `match`.
    std::vector<const Series*> find(const std::string& name, const Labels& match = {}) const {
        std::vector<const Series*> found;
        for (const Series& s : series) {
            if (s.name != name) continue;
            const bool all = std::all_of(match.begin(), match.end(), [&](const auto& kv) {
                const auto it = s.labels.find(kv.first);
                return it != s.labels.end() && it->second == kv.second;
            });
            if (all) found.push_back(&s);
        }
        return found;
    }
    double sum(const std::string& name, const Labels& match = {}) const {
        double total = 0;
        for (const Series* s : find(name, match)) total += s->value;
        return total;
    }
    // The value of the one series that matches; nothing if none or several do.
    std::optional<double> value(const std::string& name, const Labels& match = {}) const {
        const auto found = find(name, match);
        if (found.size() != 1) return std::nullopt;
        return found.front()->value;
    }
};

// Counters are whole numbers; the exposition carries them as doubles.
uint64_t whole(double value) { return static_cast<uint64_t>(std::llround(value)); }
uint64_t whole(const std::optional<double>& value) { return value ? whole(*value) : 0; }

// (class, verdict, reason) -> packets, non-zero entries only, on sl0.
using Decisions = std::map<std::tuple<std::string, std::string, std::string>, uint64_t>;

Decisions decisions_from_metrics(const Scrape& scrape) {
    Decisions out;
    for (const Series* s : scrape.find("sluice_packets_total", {{"interface", "sl0"}})) {
        if (whole(s->value) == 0) continue;
        out[{s->labels.at("class"), s->labels.at("verdict"), s->labels.at("reason")}] += whole(s->value);
    }
    return out;
}

std::string describe(const Decisions& d) {
    std::string text;
    for (const auto& [key, packets] : d)
        text += "  " + std::get<0>(key) + "/" + std::get<1>(key) + "/" + std::get<2>(key) + " = " +
                std::to_string(packets) + "\n";
    return text.empty() ? "  (none)\n" : text;
}

// ---- BPF run-time statistics ------------------------------------------------------

// kernel.bpf_stats_enabled reads what was last written to the sysctl, not
// whether statistics are on: an fd from BPF_ENABLE_STATS turns them on
// without changing it. So "held by fd, not left on" is shown by what the
// kernel counts: runs are counted while sluiced holds its fd, and not once
// it exited, while its pinned program keeps deciding (fail-static).
std::string bpf_stats_sysctl() {
    std::string text = read_file("/proc/sys/kernel/bpf_stats_enabled");
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    return text;
}

// Whether process `pid` holds a BPF_ENABLE_STATS file descriptor.
bool holds_bpf_stats_fd(pid_t pid) {
    std::error_code ec;
    for (const auto& fd : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
        std::error_code link_ec;
        if (std::filesystem::read_symlink(fd.path(), link_ec).string() == "anon_inode:bpf-stats") return true;
    }
    return false;
}

// Every process holding one ("none" if none); with `command_line_part`,
// only those whose command line holds it.
std::string bpf_stats_holders(const std::string& command_line_part = {}) {
    std::string holders;
    std::error_code ec;
    for (const auto& proc : std::filesystem::directory_iterator("/proc", ec)) {
        const std::string name = proc.path().filename();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        if (!holds_bpf_stats_fd(std::stoi(name))) continue;
        if (read_file(proc.path() / "cmdline").find(command_line_part) == std::string::npos) continue;
        std::string comm = read_file(proc.path() / "comm");
        if (!comm.empty() && comm.back() == '\n') comm.pop_back();
        holders += (holders.empty() ? "" : ", ") + name + " (" + comm + ")";
    }
    return holders.empty() ? "none" : holders;
}

struct RunStats {
    uint64_t run_cnt = 0, run_time_ns = 0;
};

// The kernel's statistics of the program attached through the XDP link
// pinned under `pin_dir` (sluiced names it xdp_link_<ifindex>); read without
// sluiced, so also after it exited.
std::optional<RunStats> pinned_program_stats(const std::string& pin_dir) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(pin_dir, ec)) {
        if (entry.path().filename().string().rfind("xdp_link_", 0) != 0) continue;
        const int link = bpf_obj_get(entry.path().c_str());
        if (link < 0) return std::nullopt;
        bpf_link_info link_info{};
        __u32 length = sizeof(link_info);
        const int got_link = bpf_obj_get_info_by_fd(link, &link_info, &length);
        close(link);
        if (got_link != 0) return std::nullopt;
        const int program = bpf_prog_get_fd_by_id(link_info.prog_id);
        if (program < 0) return std::nullopt;
        bpf_prog_info info{};
        length = sizeof(info);
        const int got_program = bpf_obj_get_info_by_fd(program, &info, &length);
        close(program);
        if (got_program != 0) return std::nullopt;
        return RunStats{info.run_cnt, info.run_time_ns};
    }
    return std::nullopt;
}

// ---- the fixture ------------------------------------------------------------------

std::string url_encode(const std::string& text) {
    static const char* hex = "0123456789ABCDEF";
    std::string out;
    for (const unsigned char c : text) {
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}

class Metrics : public SluiceE2E {
  protected:
    // GET /metrics from the daemon, parsed; nothing (and a failure) if that fails.
    std::optional<Scrape> scrape() {
        const HttpResponse r = http_get(kMetricsPort, "/metrics");
        if (r.status != 200) {
            ADD_FAILURE() << "GET http://127.0.0.1:" << kMetricsPort << "/metrics in " << netns_name() << ": status "
                          << r.status << " " << r.error << "\n"
                          << r.body;
            return std::nullopt;
        }
        Scrape s;
        s.text = r.body;
        std::string error;
        auto parsed = parse_exposition(s.text, error);
        if (!parsed) {
            ADD_FAILURE() << "unparsable exposition, " << error;
            return std::nullopt;
        }
        s.series = std::move(*parsed);
        return s;
    }

    // Scrapes until `ready` holds (5 s).
    template <typename Ready>
    std::optional<Scrape> scrape_until(Ready ready, const std::string& what) {
        const auto deadline = std::chrono::steady_clock::now() + 5s;
        std::optional<Scrape> last;
        while (std::chrono::steady_clock::now() < deadline) {
            last = scrape();
            if (!last) return std::nullopt;
            if (ready(*last)) return last;
            std::this_thread::sleep_for(200ms);
        }
        ADD_FAILURE() << "the metrics never showed " << what << " within 5 s; last scrape:\n" << last->text;
        return std::nullopt;
    }

    // An instant PromQL query against the test's Prometheus: the single
    // value of the result vector, 0 for an empty one, nothing on error.
    // With `at` (Unix seconds), evaluated at that time instead of now.
    std::optional<double> promql(const std::string& query, std::string* raw = nullptr,
                                 std::optional<double> at = std::nullopt) {
        std::string target = "/api/v1/query?query=" + url_encode(query);
        if (at) {
            std::ostringstream time;
            time.precision(3);
            time << std::fixed << *at;
            target += "&time=" + time.str();
        }
        const HttpResponse r = http_get(kPrometheusPort, target);
        if (raw != nullptr) *raw = r.body;
        if (r.status != 200) return std::nullopt;
        try {
            const json answer = json::parse(r.body);
            if (answer.value("status", "") != "success") return std::nullopt;
            const json& result = answer.at("data").at("result");
            if (result.empty()) return 0.0;
            return std::stod(result.at(0).at("value").at(1).get<std::string>());
        } catch (const std::exception&) {
            return std::nullopt;
        }
    }

    // The samples Prometheus holds of one series over `range` (PromQL, e.g.
    // "2m") up to now: (scrape time in Unix seconds, value), oldest first;
    // nothing on error or if the selector matches other than one series.
    std::optional<std::vector<std::pair<double, double>>> prometheus_samples(const std::string& selector,
                                                                             const std::string& range,
                                                                             std::string* raw = nullptr) {
        const HttpResponse r = http_get(kPrometheusPort, "/api/v1/query?query=" + url_encode(selector + "[" + range + "]"));
        if (raw != nullptr) *raw = r.body;
        if (r.status != 200) return std::nullopt;
        try {
            const json answer = json::parse(r.body);
            const json& result = answer.at("data").at("result");
            if (answer.value("status", "") != "success" || result.size() != 1) return std::nullopt;
            std::vector<std::pair<double, double>> samples;
            for (const json& v : result.at(0).at("values"))
                samples.emplace_back(v.at(0).get<double>(), std::stod(v.at(1).get<std::string>()));
            return samples;
        } catch (const std::exception&) {
            return std::nullopt;
        }
    }

    // The same from `sluicectl stats --json`.
    static Decisions decisions_from_stats(const json& stats) {
        Decisions out;
        const json sl0 = interface_stats(stats, "sl0");
        if (!sl0.is_object()) return out;
        for (const auto& c : sl0.value("classes", json::array())) {
            for (const auto& [field, verdict] :
                 {std::pair{"passes_by_reason", "pass"}, std::pair{"drops_by_reason", "drop"}}) {
                const json by_reason = c.value(field, json::object());  // items() must not outlive it
                for (const auto& [reason, packets] : by_reason.items())
                    if (packets.get<uint64_t>() != 0)
                        out[{c.value("name", ""), verdict, reason}] = packets.get<uint64_t>();
            }
        }
        return out;
    }
};

// ---- 1. the scraped counters are the daemon's and the traffic's --------------------

TEST_F(Metrics, CountersAgreeWithTheDaemonTheSenderAndTheReceiver) {
    SLUICE_REQUIRE_BPF();
    ASSERT_NO_FATAL_FAILURE(start_world());
    const auto pushed = push_policy("policy.toml", policy_text());
    ASSERT_TRUE(pushed);
    const uint64_t version = (*pushed)["version"].get<uint64_t>();

    // Run-time statistics held on by sluiced's own fd, not by the sysctl
    // (checked to count below, and to stop counting once sluiced exits).
    const std::string sysctl_at_start = bpf_stats_sysctl();
    EXPECT_EQ(sysctl_at_start, "0") << "kernel.bpf_stats_enabled was set by someone: the test cannot tell who "
                                       "turned statistics on";
    EXPECT_TRUE(holds_bpf_stats_fd(daemon_pid()))
        << "sluiced holds no BPF_ENABLE_STATS fd; holders: " << bpf_stats_holders();

    // A snapshot taken after the push: the baseline of every delta below.
    const auto before = scrape_until(
        [&](const Scrape& s) { return whole(s.value("sluice_policy_version")) == version; }, "the pushed version");
    ASSERT_TRUE(before);
    EXPECT_EQ(whole(before->value("sluice_bpf_stats_enabled")), 1u);

    // A bad push: refused, counted.
    const ProcResult bad = ctl({"policy", "push", write_policy("bad.toml", "[defaults]\nunit = \"furlongs\"\n")});
    EXPECT_EQ(bad.code, 1) << bad.err;

    const auto r = traffic({kPolite, kGreedy}, 2.5);
    ASSERT_TRUE(r);
    ASSERT_NO_FATAL_FAILURE(expect_no_receiver_drops(*r));
    const FlowCount& greedy = r->flow("greedy");
    const FlowCount& polite = r->flow("polite");
    ASSERT_GT(greedy.sent, 0u);
    ASSERT_GT(polite.sent, 0u);
    std::this_thread::sleep_for(kSnapshotSettle);

    // The counters must not move between the `stats` read and the snapshot
    // the scrape shows, nor between the daemon's reads of the run count and
    // of the packet counters within one snapshot, or "equal" would be luck
    // (a stray kernel frame decided between two reads). So: read stats; take
    // the snapshot the daemon serves now and wait for the next one (a new
    // sluice_uptime_seconds); read stats again. When neither the run count
    // nor the packets moved between the two snapshots, and the two stats
    // reads agree, nothing was in flight across any of the reads: retry
    // otherwise, until a deadline.
    const auto quiet_between = [](const Scrape& a, const Scrape& b) {
        const Labels prog{{"interface", "sl0"}, {"program", "sluice_xdp"}};
        return a.value("sluice_bpf_run_count_total", prog) == b.value("sluice_bpf_run_count_total", prog) &&
               a.sum("sluice_packets_total", {{"interface", "sl0"}}) ==
                   b.sum("sluice_packets_total", {{"interface", "sl0"}});
    };
    std::optional<Scrape> after;
    json stats_json, status_json;
    int stats_calls = 0, status_calls = 0;
    const auto quiet_deadline = std::chrono::steady_clock::now() + 20s;
    for (int attempt = 1;; attempt++) {
        ASSERT_LT(std::chrono::steady_clock::now(), quiet_deadline)
            << "the counters never stayed still across two snapshots in 20 s (" << attempt - 1 << " attempts)";
        const auto s1 = stats();
        const auto st = status();
        stats_calls++, status_calls++;
        ASSERT_TRUE(s1 && st);
        const auto earlier = scrape();
        ASSERT_TRUE(earlier);
        const auto earlier_uptime = earlier->value("sluice_uptime_seconds");
        after = scrape_until([&](const Scrape& x) { return x.value("sluice_uptime_seconds") != earlier_uptime; },
                             "a new snapshot");
        ASSERT_TRUE(after);
        const auto s2 = stats();
        ASSERT_TRUE(s2);
        stats_json = *s1;
        status_json = *st;
        if (decisions_from_stats(*s1) == decisions_from_stats(*s2) && quiet_between(*earlier, *after)) break;
        stats_calls++;  // s2 came after the scrape's snapshot: count it in the next round
        std::cout << "counters moved between two reads (a kernel frame?); again" << std::endl;
    }

    // Every (class, verdict, reason) series equals the daemon's own counter.
    const Decisions from_metrics = decisions_from_metrics(*after);
    const Decisions from_stats = decisions_from_stats(stats_json);
    EXPECT_EQ(from_metrics, from_stats) << "sluice_packets_total on sl0:\n"
                                        << describe(from_metrics) << "sluicectl stats:\n"
                                        << describe(from_stats);
    figure_line("decisions", "\n" + describe(from_metrics));

    // ... and with the traffic: each source's class decided exactly every
    // frame sent, passed exactly what the receiver counted.
    const auto packets = [&](const std::string& cls, const std::string& verdict) {
        return whole(after->sum("sluice_packets_total", {{"interface", "sl0"}, {"class", cls}, {"verdict", verdict}}));
    };
    const auto bytes = [&](const std::string& cls, const std::string& verdict) {
        return whole(after->sum("sluice_bytes_total", {{"interface", "sl0"}, {"class", cls}, {"verdict", verdict}}));
    };
    EXPECT_EQ(packets("greedy", "pass"), greedy.received);
    EXPECT_EQ(packets("greedy", "pass") + packets("greedy", "drop"), greedy.sent);
    EXPECT_EQ(
        whole(after->value("sluice_packets_total",
                           {{"interface", "sl0"}, {"class", "greedy"}, {"verdict", "drop"}, {"reason", "source"}})),
        greedy.sent - greedy.received)
        << "greedy's drops are not all per-source drops";
    EXPECT_EQ(packets("polite", "pass"), polite.received);
    EXPECT_EQ(packets("polite", "drop"), 0u) << "a source under its limit was dropped";
    EXPECT_EQ(polite.received, polite.sent);
    EXPECT_EQ(bytes("greedy", "pass"), kFrameBytes * greedy.received);
    EXPECT_EQ(bytes("greedy", "drop"), kFrameBytes * (greedy.sent - greedy.received));
    EXPECT_EQ(bytes("greedy", "pass"), class_counter(stats_json, "greedy", "pass_bytes"));
    EXPECT_EQ(bytes("greedy", "drop"), class_counter(stats_json, "greedy", "drop_bytes"));
    // What the kernel sent on its own: passed in "default", nothing dropped.
    const uint64_t kernel_frames =
        packets("default", "pass") -
        whole(before->sum("sluice_packets_total", {{"interface", "sl0"}, {"class", "default"}, {"verdict", "pass"}}));
    EXPECT_EQ(packets("default", "drop"), 0u);
    EXPECT_LT(kernel_frames, 100u) << "more than a few stray frames in the default class";
    figure_line("traffic", "greedy sent " + std::to_string(greedy.sent) + " received " +
                               std::to_string(greedy.received) + ", polite sent " + std::to_string(polite.sent) +
                               " received " + std::to_string(polite.received) + ", kernel frames in default " +
                               std::to_string(kernel_frames) + " (over " + figure(r->duration_s * 1000) + " ms)");

    // Run counts: one run per frame decided. Every run with a policy applied
    // lands in exactly one counter, so the two grow alike.
    const Labels prog{{"interface", "sl0"}, {"program", "sluice_xdp"}};
    const auto run_count_before = before->value("sluice_bpf_run_count_total", prog);
    const auto run_count_after = after->value("sluice_bpf_run_count_total", prog);
    const auto run_time_before = before->value("sluice_bpf_run_time_seconds_total", prog);
    const auto run_time_after = after->value("sluice_bpf_run_time_seconds_total", prog);
    ASSERT_TRUE(run_count_before && run_count_after && run_time_before && run_time_after) << after->text;
    const uint64_t runs = whole(*run_count_after) - whole(*run_count_before);
    const uint64_t decided = whole(after->sum("sluice_packets_total", {{"interface", "sl0"}})) -
                             whole(before->sum("sluice_packets_total", {{"interface", "sl0"}}));
    EXPECT_GE(runs, greedy.sent + polite.sent);
    EXPECT_EQ(runs, decided) << "runs of the program and decisions counted differ";
    EXPECT_GT(*run_time_after, 0.0);
    const double spent_s = *run_time_after - *run_time_before;
    EXPECT_GT(spent_s, 0.0);
    const double decision_ns = runs > 0 ? spent_s / static_cast<double>(runs) * 1e9 : 0;
    EXPECT_GT(decision_ns, 0.0);
    // A decision takes a few hundred ns in generic XDP on this kind of VM
    // (bench/README.md); 5 us is a tenfold regression or a unit error.
    EXPECT_LT(decision_ns, 5'000.0) << "a decision costs far more than it should";
    std::ostringstream cost;
    cost.precision(1);
    cost << std::fixed << decision_ns << " ns per decision (" << spent_s * 1e3 << " ms over " << runs << " runs)";
    figure_line("decision cost", cost.str());

    // Policy: version and info as `status` says; the bad push counted.
    const json& policy = status_json["policy"];
    ASSERT_TRUE(policy.is_object()) << status_json.dump();
    EXPECT_EQ(whole(after->value("sluice_policy_version")), policy["version"].get<uint64_t>());
    EXPECT_EQ(whole(after->value("sluice_interface_policy_version", {{"interface", "sl0"}})),
              policy["version"].get<uint64_t>());
    const auto info = after->find("sluice_policy_info");
    ASSERT_EQ(info.size(), 1u) << after->text;
    EXPECT_EQ(info[0]->labels.at("version"), std::to_string(policy["version"].get<uint64_t>()));
    EXPECT_EQ(info[0]->labels.at("sha256"), policy["sha256"].get<std::string>());
    EXPECT_EQ(info[0]->value, 1.0);
    const auto delta = [&](const std::string& name, const Labels& labels) {
        return static_cast<int64_t>(whole(after->sum(name, labels))) -
               static_cast<int64_t>(whole(before->sum(name, labels)));
    };
    EXPECT_EQ(delta("sluice_policy_pushes_total", {{"result", "rejected"}}), 1);
    EXPECT_EQ(delta("sluice_policy_pushes_total", {{"result", "accepted"}}), 0);

    // Control requests: exactly the ones this test made since the baseline.
    EXPECT_EQ(delta("sluice_control_requests_total", {{"verb", "policy.push"}, {"result", "invalid"}}), 1);
    EXPECT_EQ(delta("sluice_control_requests_total", {{"verb", "policy.push"}, {"result", "ok"}}), 0);
    EXPECT_EQ(delta("sluice_control_requests_total", {{"verb", "stats"}, {"result", "ok"}}), stats_calls);
    EXPECT_EQ(delta("sluice_control_requests_total", {{"verb", "status"}, {"result", "ok"}}), status_calls);
    EXPECT_GE(whole(after->value("sluice_control_requests_total", {{"verb", "policy.push"}, {"result", "ok"}})), 1u);

    // Stopping sluiced closes its fd, and the statistics go off with it:
    // its pinned program keeps deciding frames, and the kernel no longer
    // counts them. The switch is system-wide: while another process (a
    // benchmark, say) holds its own fd, the kernel counts every run of every
    // program. With sluiced gone and the sysctl at 0, the kernel must count
    // runs exactly when someone else holds an fd: none without a holder,
    // every frame with one. The holders are read before and after the
    // orphan flood; if they changed meanwhile, it is flooded again.
    const std::string sysctl_running = bpf_stats_sysctl();
    signal_daemon(SIGTERM);
    ASSERT_EQ(wait_daemon_exit(10s), 0);
    std::optional<RunStats> stopped, later;
    std::optional<TrafficReport> orphan;
    std::string holders;
    for (int attempt = 0;; attempt++) {
        ASSERT_LT(attempt, 5) << "the holders of BPF run-time statistics kept changing: " << holders;
        const std::string holders_before = bpf_stats_holders();
        stopped = pinned_program_stats(pin_root() + "/sl0");
        ASSERT_TRUE(stopped) << "no pinned XDP link under " << pin_root() << "/sl0";
        orphan = traffic({kGreedy}, 0.5);
        ASSERT_TRUE(orphan);
        later = pinned_program_stats(pin_root() + "/sl0");
        ASSERT_TRUE(later);
        holders = bpf_stats_holders();
        if (holders == holders_before) break;
        std::cout << "holders of BPF run-time statistics changed during the flood (" << holders_before << " -> "
                  << holders << "); again" << std::endl;
    }
    const uint64_t orphan_sent = orphan->flow("greedy").sent;
    const uint64_t counted = later->run_cnt - stopped->run_cnt;
    EXPECT_GT(orphan_sent, 0u);
    EXPECT_LT(orphan->flow("greedy").received, orphan_sent) << "the pinned program stopped limiting";
    const std::string sysctl_after = bpf_stats_sysctl();
    figure_line("bpf stats", "kernel.bpf_stats_enabled " + sysctl_at_start + " before, " + sysctl_running +
                                 " while sluiced ran (its fd held them on: runs counted), " + sysctl_after +
                                 " after; runs counted after exit: " + std::to_string(counted) + " of " +
                                 std::to_string(orphan_sent) +
                                 " frames the pinned program decided; other holders of a BPF_ENABLE_STATS fd: " +
                                 holders);
    EXPECT_EQ(sysctl_after, "0");
    // Other tests' daemons may hold theirs; none started with this test's
    // config (sluiced or anything it forked) may.
    EXPECT_EQ(bpf_stats_holders(config_path()), "none") << "this test's sluiced still holds statistics on";
    if (holders == "none") {
        EXPECT_EQ(counted, 0u) << "the kernel still counts runs after sluiced exited and nobody holds a "
                                  "BPF_ENABLE_STATS fd: statistics were left on";
    } else {
        // Each frame sent runs the program once; the kernel's own frames
        // (fewer than 100, as above) run it too.
        EXPECT_GE(counted, orphan_sent) << holders << " hold(s) statistics on, yet the kernel did not count "
                                        << "every run of the pinned program";
        EXPECT_LT(counted, orphan_sent + 100) << "more runs counted than frames decided";
    }
}

// ---- 2. promtool finds nothing to complain about -----------------------------------

TEST_F(Metrics, ScrapedTextPassesPromtool) {
    SLUICE_REQUIRE_BPF();
    ASSERT_TRUE(std::filesystem::exists(kPromtool))
        << kPromtool << " is missing: install Debian's prometheus package (scripts/install-deps.sh does)";
    ASSERT_NO_FATAL_FAILURE(start_world());
    ASSERT_TRUE(push_policy("policy.toml", policy_text()));

    // Scraped mid-flood, so every family has series, hot sources included.
    const pid_t sender = start_traffic({kPolite, kGreedy, kMild}, 2.0, "lint-traffic");
    ASSERT_GT(sender, 0);
    const auto s = scrape_until([](const Scrape& x) { return x.find("sluice_hot_source_drop_rate").size() >= 2; },
                                "two hot sources");
    const auto r = finish_traffic(sender, 2.0, "lint-traffic");
    ASSERT_TRUE(s);
    ASSERT_TRUE(r);

    const std::string text_path = dir() + "/metrics.txt";
    write_file(text_path, s->text);
    const ProcResult lint = run({"/bin/sh", "-c", std::string("exec ") + kPromtool + " check metrics < " + text_path},
                                dir() + "/promtool", 30s);
    figure_line("promtool", "exit " + std::to_string(lint.code) + ", " + std::to_string(s->series.size()) +
                                " series linted, output: '" + lint.out + lint.err + "'");
    EXPECT_EQ(lint.code, 0) << lint.out << lint.err;
    EXPECT_EQ(lint.out + lint.err, "") << "promtool reported problems";
}

// ---- 3. a real Prometheus scrapes the daemon ----------------------------------------

TEST_F(Metrics, PrometheusScrapesTheDropRateOfAFlood) {
    SLUICE_REQUIRE_BPF();
    ASSERT_TRUE(std::filesystem::exists(kPrometheus))
        << kPrometheus << " is missing: install Debian's prometheus package (scripts/install-deps.sh does)";
    ASSERT_NO_FATAL_FAILURE(make_world());

    // Prometheus starts (TSDB, web) while sluiced loads its program. Only the
    // network namespace is entered, as for sluiced (not `ip netns exec`,
    // which also remounts /sys); its data dir is inside the test's temp dir,
    // so teardown removes it after killing the server.
    const std::string config = dir() + "/prometheus.yml";
    write_file(config,
               "global:\n"
               "  scrape_interval: 1s\n"
               "  scrape_timeout: 1s\n"
               "  evaluation_interval: 1s\n"
               "scrape_configs:\n"
               "  - job_name: sluiced\n"
               "    static_configs:\n"
               "      - targets: ['127.0.0.1:" +
                   std::to_string(kMetricsPort) + "']\n");
    const pid_t prometheus =
        start_in_netns({kPrometheus, "--config.file=" + config, "--storage.tsdb.path=" + dir() + "/prometheus-data",
                        "--web.listen-address=127.0.0.1:" + std::to_string(kPrometheusPort)},
                       "prometheus");
    ASSERT_GT(prometheus, 0);
    const auto prometheus_log = [&] { return "---- prometheus log ----\n" + read_file(dir() + "/prometheus.err"); };

    ASSERT_NO_FATAL_FAILURE(start_daemon());
    ASSERT_TRUE(push_policy("policy.toml", policy_text()));

    const auto ready_deadline = std::chrono::steady_clock::now() + 20s;
    HttpResponse ready;
    while (std::chrono::steady_clock::now() < ready_deadline) {
        ready = http_get(kPrometheusPort, "/-/ready");
        if (ready.status == 200) break;
        int code = 0;
        ASSERT_FALSE(exited(prometheus, &code)) << "prometheus exited " << code << "\n" << prometheus_log();
        std::this_thread::sleep_for(200ms);
    }
    ASSERT_EQ(ready.status, 200) << "prometheus not ready within 20 s: " << ready.error << "\n" << prometheus_log();
    // Prometheus 2.42 applies discovered targets on a fixed 5 s tick, so the
    // first scrape comes about 5 s after start: flood only once it scraped.
    std::optional<double> up;
    while (std::chrono::steady_clock::now() < ready_deadline) {
        up = promql("up{job=\"sluiced\"}");
        if (up && *up == 1) break;
        std::this_thread::sleep_for(200ms);
    }
    ASSERT_TRUE(up && *up == 1) << "prometheus never scraped sluiced successfully: "
                                << http_get(kPrometheusPort, "/api/v1/targets").body << "\n"
                                << prometheus_log();

    // One source floods. Afterwards the rate is taken over the flood itself:
    // over the samples Prometheus scraped between kSnapshotSettle after the
    // flood's first frame (the snapshot a scrape shows is then one taken
    // during it) and its last frame, evaluated at the last of them, so
    // rate() neither reaches outside the flood nor extrapolates.
    constexpr double kFloodSeconds = 12.0;
    const auto r = traffic({kGreedy}, kFloodSeconds);
    ASSERT_TRUE(r);
    const FlowCount& greedy = r->flow("greedy");
    ASSERT_GT(greedy.received, 0u);
    const double flood_begin_s = static_cast<double>(greedy.first_received_unix_ns) / 1e9;
    const double flood_end_s = static_cast<double>(greedy.last_received_unix_ns) / 1e9;
    // A scrape after the flood, so every sample of it is stored. Prometheus
    // keeps running until the queries below are answered (teardown kills it
    // if one of the assertions in between fails).
    const auto flood_stored = std::chrono::steady_clock::now() + 5s;
    std::optional<double> scrapes_since;
    while (std::chrono::steady_clock::now() < flood_stored) {
        scrapes_since = promql("count_over_time(up{job=\"sluiced\"}[" +
                               std::to_string(static_cast<int>((unix_now_ns() / 1e9 - flood_end_s) * 1000)) + "ms])");
        if (scrapes_since && *scrapes_since >= 1) break;
        std::this_thread::sleep_for(200ms);
    }
    const std::string series =
        "sluice_packets_total{interface=\"sl0\",class=\"greedy\",verdict=\"drop\",reason=\"source\"}";
    const std::string uptime_series = "sluice_uptime_seconds";
    std::string raw, uptime_raw;
    const auto drops = prometheus_samples(series, "2m", &raw);
    const auto uptimes = prometheus_samples(uptime_series, "2m", &uptime_raw);
    up = promql("up{job=\"sluiced\"}");
    const std::string targets = http_get(kPrometheusPort, "/api/v1/targets").body;
    ASSERT_TRUE(drops) << series << ": " << raw;
    ASSERT_TRUE(uptimes) << uptime_series << ": " << uptime_raw;

    // The first and the last sample inside the flood; the snapshot each
    // shows is dated by sluice_uptime_seconds of the same scrape.
    std::optional<size_t> first, last;
    for (size_t i = 0; i < drops->size(); i++) {
        const double at = (*drops)[i].first;
        if (at < flood_begin_s + std::chrono::duration<double>(kSnapshotSettle).count() || at > flood_end_s) continue;
        if (!first) first = i;
        last = i;
    }
    std::string samples_text;
    for (const auto& [at, value] : *drops) samples_text += " " + figure((at - flood_begin_s) * 1000) + "ms=" + figure(value);
    // A scrape shows a snapshot up to about 1.25 s old (the daemon
    // snapshots about once a second, its loop polls every 250 ms): over a
    // window of 6.25 s or more that moves rate() by 20% at most. A 12 s
    // flood leaves about 9.5 s, scraped every second.
    ASSERT_TRUE(first && last && (*drops)[*last].first - (*drops)[*first].first >= 6.25)
        << "Prometheus did not scrape 6.25 s of the flood (" << figure((flood_end_s - flood_begin_s) * 1000)
        << " ms long); samples (ms from its first frame):" << samples_text << "\ntargets: " << targets << "\n"
        << prometheus_log();
    const auto uptime_at = [&](double at) -> std::optional<double> {
        for (const auto& [t, value] : *uptimes)
            if (t == at) return value;
        return std::nullopt;
    };
    const auto [t_a, v_a] = (*drops)[*first];
    const auto [t_b, v_b] = (*drops)[*last];
    const auto u_a = uptime_at(t_a), u_b = uptime_at(t_b);
    ASSERT_TRUE(u_a && u_b && *u_b > *u_a) << uptime_raw;
    const double window_s = t_b - t_a;
    const std::string rate_query =
        "rate(" + series + "[" + std::to_string(std::llround(window_s * 1000)) + "ms])";
    const auto rate = promql(rate_query, &raw, t_b);
    const std::string hot_query = "sluice_hot_source_drop_rate{source=\"10.2.0.1\"}";
    const auto hot = promql(hot_query, nullptr, t_b);
    EXPECT_EQ(stop_child(prometheus, SIGTERM, 10s), 0) << prometheus_log();
    ASSERT_TRUE(rate) << "query " << rate_query << " failed: " << raw;

    // What the samples say: the drops between the two scrapes over the time
    // between them (what rate() must answer), and over the time between the
    // two snapshots they show (the daemon's own drop rate, without the lag
    // of a scrape behind its snapshot).
    const double from_samples = (v_b - v_a) / window_s;
    const double between_snapshots = (v_b - v_a) / (*u_b - *u_a);
    const double measured = static_cast<double>(greedy.sent - greedy.received) / r->duration_s;
    figure_line("promql", rate_query + " at the flood's last scrape = " + figure(*rate) + " over " +
                              std::to_string(*last - *first + 1) + " scrapes in " + figure(window_s * 1000) +
                              " ms of a " + figure((flood_end_s - flood_begin_s) * 1000) +
                              " ms flood; from those samples " + figure(from_samples) + "/s, between their snapshots " +
                              figure(between_snapshots) + "/s; " + hot_query + " = " + figure(hot.value_or(-1)) +
                              "; measured drop rate (sent-received)/T " + figure(measured) + "/s; up " +
                              figure(up.value_or(-1)));
    // rate() over a window whose first and last samples are its edges is
    // their slope, nothing extrapolated.
    EXPECT_NEAR(*rate, from_samples, 1e-6 * from_samples) << raw;
    // The flood is steady: between two snapshots of it the counters grow at
    // its drop rate, and so do the samples showing them. The slack, 20% each
    // way, is for the lag of the snapshots behind the scrapes (above) and
    // for the measured rate being the run's average, whose first 50 ms (the
    // burst) drop nothing.
    EXPECT_GT(between_snapshots, 0.8 * measured);
    EXPECT_LT(between_snapshots, 1.2 * measured);
    EXPECT_GT(*rate, 0.8 * measured) << raw;
    EXPECT_LT(*rate, 1.2 * measured) << "more drops per second than the flood had: " << raw;
}

// ---- 4. the flooding source tops `sluicectl top` -----------------------------------

TEST_F(Metrics, FloodingSourceTopsSluicectlTop) {
    SLUICE_REQUIRE_BPF();
    ASSERT_NO_FATAL_FAILURE(start_world());
    ASSERT_TRUE(push_policy("policy.toml", policy_text()));

    constexpr double kSeconds = 3.0;
    const pid_t sender = start_traffic({kPolite, kGreedy, kMild}, kSeconds, "top-traffic");
    ASSERT_GT(sender, 0);
    std::this_thread::sleep_for(2500ms);
    const auto top = ctl_json({"top", "-n", "5"});
    const auto r = finish_traffic(sender, kSeconds, "top-traffic");
    ASSERT_TRUE(top);
    ASSERT_TRUE(r);
    ASSERT_NO_FATAL_FAILURE(expect_no_receiver_drops(*r));

    const json sources = top->value("sources", json::array());
    ASSERT_GE(sources.size(), 2u) << top->dump();
    EXPECT_EQ(sources[0].value("source", ""), "10.2.0.1") << top->dump();
    EXPECT_EQ(sources[0].value("class", ""), "greedy") << top->dump();
    EXPECT_EQ(sources[1].value("source", ""), "10.4.0.1") << top->dump();
    for (const auto& s : sources) EXPECT_NE(s.value("source", ""), "10.1.0.1") << "polite was never dropped";

    const FlowCount& g = r->flow("greedy");
    const double measured = static_cast<double>(g.sent - g.received) / r->duration_s;
    const double reported = sources[0].value("drops_per_second", 0.0);
    figure_line("top", "10.2.0.1 drops_per_second " + figure(reported) + " (share " +
                           figure(100 * sources[0].value("share", 0.0)) + "%), measured (sent-received)/T " +
                           figure(measured) + "; next " + sources[1].value("source", "") + " at " +
                           figure(sources[1].value("drops_per_second", 0.0)));
    // top's rate comes from sampled drop events (one in 64 is recorded and
    // counts 64): ~900 samples by now, about 3% noise at one sigma; the
    // measured rate is the run's average, whose first 50 ms (the burst) drop
    // nothing. 25% each way is over 5 sigma; seen: +4% and +12%.
    EXPECT_GT(reported, 0.75 * measured) << top->dump();
    EXPECT_LT(reported, 1.25 * measured) << top->dump();
}

}  // namespace
}  // namespace sluice::test::metrics_test
