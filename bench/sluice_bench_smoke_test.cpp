// SPDX-License-Identifier: Apache-2.0
// Smoke runs of every sluice-bench subcommand, so the benchmark cannot rot
// silently: each must finish, write a JSON report holding figures, and leave
// no namespace or bpffs entry of its own behind. The figures' values are
// never checked: this machine's timings are noise, not a pass/fail signal.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "common/privilege.h"

namespace {

namespace fs = std::filesystem;

// Runs sluice-bench with the arguments; returns its exit status and output.
std::pair<int, std::string> run_bench(const std::string& args) {
    const char* bench = std::getenv("SLUICE_BENCH");
    if (bench == nullptr) return {-1, "SLUICE_BENCH (the sluice-bench binary) is not set"};
    const std::string command = std::string(bench) + " " + args + " 2>&1";
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) return {-1, "cannot run " + command};
    std::string output;
    std::array<char, 4096> buf{};
    while (size_t n = std::fread(buf.data(), 1, buf.size(), pipe)) output.append(buf.data(), n);
    const int status = pclose(pipe);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

// What the bench may create; none of it may outlive a run.
std::vector<std::string> leftovers() {
    std::vector<std::string> found;
    std::error_code ec;
    for (const char* dir : {"/var/run/netns", "/sys/fs/bpf", "/var/run/dpdk"})
        for (const auto& entry : fs::directory_iterator(dir, ec))
            if (entry.path().filename().string().rfind("sluice-bench-", 0) == 0) found.push_back(entry.path());
    return found;
}

// Whether this kernel runs XDP under BPF_PROG_TEST_RUN with live frames
// (some refuse it with EPERM, as root too): an XDP_DROP program, one frame.
// Asked here rather than of sluice-bench, whose own probe is under test.
bool kernel_runs_live_frames(std::string& why) {
    const bpf_insn drop[] = {
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .src_reg = 0, .off = 0, .imm = XDP_DROP},
        {.code = BPF_JMP | BPF_EXIT, .dst_reg = 0, .src_reg = 0, .off = 0, .imm = 0},
    };
    const int prog = bpf_prog_load(BPF_PROG_TYPE_XDP, "live_probe", "GPL", drop, 2, nullptr);
    if (prog < 0) {
        why = std::string("loading the probe: ") + std::strerror(errno);
        return false;
    }
    std::array<uint8_t, 64> frame{};
    LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(), .data_size_in = frame.size(), .repeat = 1,
                .flags = BPF_F_TEST_XDP_LIVE_FRAMES);
    const bool ran = bpf_prog_test_run_opts(prog, &opts) == 0;
    if (!ran) why = std::string("BPF_PROG_TEST_RUN with live frames: ") + std::strerror(errno);
    close(prog);
    return ran;
}

// The generators veth and soak are smoke-run with: both where the kernel
// allows live frames, so the packet generator (which only some kernels need)
// never goes untested; packet only, said so, where it does not.
std::vector<std::string> generators() {
    std::string why;
    if (kernel_runs_live_frames(why)) return {"live", "packet"};
    std::printf("live frames refused by this kernel (%s): veth and soak run with the packet generator only\n",
                why.c_str());
    return {"packet"};
}

class BenchSmoke : public ::testing::Test {
  protected:
    void SetUp() override {
        SLUICE_REQUIRE_BPF();
        dir_ = fs::temp_directory_path() / ("sluice-bench-smoke-" + std::to_string(getpid()));
        fs::create_directories(dir_);
    }
    void TearDown() override {
        std::error_code ignored;
        if (!dir_.empty()) fs::remove_all(dir_, ignored);
    }

    // Runs `command --smoke --json [args]`, checks the exit status, the
    // report's shape and that nothing was left behind; returns the report's
    // results (and its settings in *settings). The report is at
    // <dir>/<name>.json, name defaulting to the command.
    nlohmann::json smoke(const std::string& command, const std::string& args = "", std::string name = "",
                         nlohmann::json* settings = nullptr) {
        if (name.empty()) name = command;
        const fs::path json = dir_ / (name + ".json");
        const auto [status, output] = run_bench(command + " --smoke --json " + json.string() + " " + args);
        EXPECT_EQ(status, 0) << output;
        EXPECT_TRUE(leftovers().empty()) << "left behind: " << ::testing::PrintToString(leftovers());
        std::ifstream in(json);
        if (!in) {
            ADD_FAILURE() << "no report at " << json << "\n" << output;
            return {};
        }
        const auto report = nlohmann::json::parse(in, nullptr, false);
        EXPECT_FALSE(report.is_discarded()) << json << " is not JSON";
        EXPECT_EQ(report.value("subcommand", ""), command);
        EXPECT_TRUE(report.contains("machine"));
        if (settings) *settings = report.value("settings", nlohmann::json::object());
        return report.value("results", nlohmann::json{});
    }

    fs::path dir_;
};

// A figure, whatever its value: the ns figures are differences of CPU times
// and may come out at or below zero on a busy machine in a smoke-sized run.
bool is_figure(const nlohmann::json& value) { return value.is_number() && std::isfinite(value.get<double>()); }

TEST_F(BenchSmoke, DecideReportsNsPerDecisionAndRatios) {
    const auto results = smoke("decide");
    ASSERT_TRUE(results.is_array());
    std::map<std::string, int> rows;  // by algorithm, and level if not gcra
    int prefix_rows = 0, refusal_rows = 0;
    for (const auto& row : results) {
        if (row.value("table", "") == "prefixes") {
            prefix_rows++;
            for (const char* key : {"few_prefixes_ns_per_decision", "many_prefixes_ns_per_decision", "many_to_few"})
                EXPECT_TRUE(is_figure(row.value(key, nlohmann::json{}))) << key << " in " << row.dump();
            continue;
        }
        if (row.value("table", "") == "refusals") {
            refusal_rows++;
            for (const char* key : {"refused_ns_per_decision", "penalised_ns_per_decision", "penalised_to_refused",
                                    "banned_ns_per_decision", "banned_to_refused", "admitted_ns_per_decision",
                                    "admitted_past_bans_ns_per_decision"})
                EXPECT_TRUE(is_figure(row.value(key, nlohmann::json{}))) << key << " in " << row.dump();
            continue;
        }
        const std::string algorithm = row.value("algorithm", "");
        rows[algorithm == "gcra" ? algorithm : row.value("level", "") + " " + algorithm]++;
        const std::vector<const char*> keys =
            algorithm == "gcra" ? std::vector<const char*>{"baseline_ns_per_decision", "split_ns_per_decision",
                                                           "lease_ns_per_decision", "split_ratio", "lease_ratio"}
                                : std::vector<const char*>{"ns_per_decision", "baseline_ns_per_decision", "ratio"};
        for (const char* key : keys)
            EXPECT_TRUE(is_figure(row.value(key, nlohmann::json{}))) << key << " in " << row.dump();
    }
    // hot IPv4, hot IPv6, many sources: each with every algorithm
    EXPECT_GE(rows["gcra"], 3);
    for (const char* algorithm : {"aggregate fixed_window", "aggregate sliding_window", "aggregate sliding_log",
                                  "per_source fixed_window", "per_source sliding_window"})
        EXPECT_EQ(rows[algorithm], rows["gcra"]) << algorithm;
    EXPECT_EQ(prefix_rows, 2);   // hot IPv4, hot IPv6
    EXPECT_EQ(refusal_rows, 2);  // the same
}

TEST_F(BenchSmoke, MemoryReportsBytesPerSourceForBothFamilies) {
    const auto results = smoke("memory");
    ASSERT_TRUE(results.is_array());
    ASSERT_EQ(results.size(), 6u);  // IPv4, IPv6, then one row per class-aggregate algorithm
    std::set<std::string> algorithms;
    for (size_t i = 2; i < results.size(); i++) {
        algorithms.insert(results[i].value("algorithm", ""));
        EXPECT_TRUE(is_figure(results[i].value("class_state_bytes", nlohmann::json{}))) << results[i].dump();
    }
    EXPECT_EQ(algorithms, (std::set<std::string>{"gcra", "fixed_window", "sliding_window", "sliding_log"}));
    for (const auto& fill : {results[0], results[1]}) {
        for (const char* key : {"bytes_per_source", "table_bytes", "memlock_bytes", "held_at_limit"})
            EXPECT_TRUE(is_figure(fill.value(key, nlohmann::json{}))) << key << " in " << fill.dump();
        EXPECT_FALSE(fill.value("steps", nlohmann::json::array()).empty());
    }
}

TEST_F(BenchSmoke, VethReportsPpsForEveryReceiverAndAPlot) {
    for (const std::string& generator : generators()) {
        SCOPED_TRACE("--generator " + generator);
        nlohmann::json settings = nlohmann::json::object();  // stays empty if there is no report
        const auto results = smoke("veth", "--generator " + generator, "veth-" + generator, &settings);
        EXPECT_EQ(settings.value("generator", ""), generator);
        ASSERT_TRUE(results.is_array());
        ASSERT_FALSE(results.empty());
        std::set<std::string> receivers;
        for (const auto& row : results) {
            receivers.insert(row.value("receiver", ""));
            EXPECT_EQ(row.value("generator", ""), generator) << row.dump();
            EXPECT_TRUE(is_figure(row.value("offered_pps", nlohmann::json{}))) << row.dump();
            EXPECT_TRUE(is_figure(row.value("decided_pps", nlohmann::json{}))) << row.dump();
            EXPECT_TRUE(row.contains("admitted_pps")) << row.dump();
        }
        EXPECT_EQ(receivers, (std::set<std::string>{"baseline", "sluice", "nftables", "iptables"}));
        EXPECT_TRUE(fs::exists(dir_ / ("veth-" + generator + ".png"))) << "no plot next to the JSON";
    }
}

// A soak of seconds (--smoke): the figures exist, and what it asserts
// besides any value: every call answered, sluiced exited 0 and left no pin.
TEST_F(BenchSmoke, SoakReportsStartAndEndFiguresAndNothingFailed) {
    for (const std::string& generator : generators()) {
        SCOPED_TRACE("--generator " + generator);
        nlohmann::json settings = nlohmann::json::object();  // stays empty if there is no report
        const auto results = smoke("soak", "--generator " + generator, "soak-" + generator, &settings);
        EXPECT_EQ(settings.value("generator", ""), generator);
        ASSERT_TRUE(results.is_object());
        for (const char* when : {"start", "end"})
            for (const char* key : {"rss_kib", "fds", "pins", "decisions"})
                EXPECT_TRUE(is_figure(results[when].value(key, nlohmann::json{}))) << when << "." << key;
        EXPECT_GT(results["end"].value("decisions", 0u), results["start"].value("decisions", 0u)) << results.dump();
        for (const auto& [kind, calls] : results["calls"].items()) {
            EXPECT_GT(calls.value("ok", 0u), 0u) << kind;
            EXPECT_EQ(calls.value("failed", 1u), 0u) << kind;
        }
        EXPECT_EQ(results.value("sluiced_exit", -1), 0);
        EXPECT_EQ(results.value("pins_after_exit", 1u), 0u);
    }
}

// fleet needs redis-server, not BPF: its own fixture.
class FleetBenchSmoke : public BenchSmoke {
  protected:
    void SetUp() override {
        if (std::system("command -v redis-server >/dev/null 2>&1") != 0) {
            if (sluice::test::privileged_suites_required())
                FAIL() << "SLUICE_REQUIRE_PRIVILEGED is set but redis-server is not in PATH";
            GTEST_SKIP() << "skipped: needs redis-server in PATH";
        }
        dir_ = fs::temp_directory_path() / ("sluice-bench-smoke-" + std::to_string(getpid()));
        fs::create_directories(dir_);
    }
};

// Whether something accepts TCP connections on 127.0.0.1:port.
bool listening(uint16_t port) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool connected = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    return connected;
}

TEST_F(FleetBenchSmoke, FleetReportsRoundTripsBoundAndRedisCapacity) {
    const fs::path json = dir_ / "fleet.json";
    const auto [status, output] = run_bench("fleet --smoke --json " + json.string());
    ASSERT_EQ(status, 0) << output;
    std::ifstream in(json);
    ASSERT_TRUE(in) << "no report at " << json << "\n" << output;
    const auto report = nlohmann::json::parse(in, nullptr, false);
    ASSERT_FALSE(report.is_discarded()) << json << " is not JSON";
    EXPECT_EQ(report.value("subcommand", ""), "fleet");
    // Its redis-server is gone, and so is its directory.
    const auto redis = report["settings"].value("redis", nlohmann::json{});
    const auto port = redis.value("port", 0u);
    ASSERT_NE(port, 0u) << report["settings"].dump();
    EXPECT_FALSE(listening(static_cast<uint16_t>(port))) << "redis-server still answers on " << port;
    const std::string redis_dir = redis.value("dir", "");
    ASSERT_FALSE(redis_dir.empty());
    EXPECT_FALSE(fs::exists(redis_dir)) << redis_dir << " left behind";

    const auto results = report.value("results", nlohmann::json{});
    const auto nodes = results.value("nodes", nlohmann::json::array());
    ASSERT_EQ(nodes.size(), 2u);  // --smoke: 1 and 2 nodes
    for (const auto& row : nodes) {
        for (const char* key : {"exchanges_per_node_per_s", "redis_evalsha_per_s", "mean_exchange_ms",
                                "lease_utilisation", "bound", "admitted_over_bound", "admitted_over_rate_t"})
            EXPECT_TRUE(is_figure(row.value(key, nlohmann::json{}))) << key << " in " << row.dump();
        EXPECT_GT(row.value("exchanges", 0u), 0u) << row.dump();
        EXPECT_GT(row.value("admitted", 0u), 0u) << row.dump();
    }
    const auto capacity = results.value("capacity", nlohmann::json::array());
    ASSERT_EQ(capacity.size(), 2u);  // --smoke: 1 and 4 clients
    for (const auto& row : capacity) {
        for (const char* key : {"exchanges_per_s", "exchanges_per_redis_cpu_s", "script_usec_per_call"})
            EXPECT_TRUE(is_figure(row.value(key, nlohmann::json{}))) << key << " in " << row.dump();
        EXPECT_GT(row.value("exchanges", 0u), 0u) << row.dump();
    }
}

TEST_F(BenchSmoke, PushReportsApplyAndEndToEndTimes) {
    const auto results = smoke("push");
    ASSERT_TRUE(results.is_array());
    std::map<std::string, std::vector<std::string>> steps;  // by part
    for (const auto& row : results) {
        steps[row.value("part", "")].push_back(row.value("step", ""));
        EXPECT_TRUE(is_figure(row.value("ms", nlohmann::json{}))) << row.dump();
    }
    // --smoke: sizes 10 and 1000 (load, again), then two changes to the 1000.
    const std::vector<std::string> expected = {"load", "again", "load", "again", "change", "change"};
    EXPECT_EQ(steps["dataplane"], expected);
    EXPECT_EQ(steps["daemon"], expected);
    // The daemon's temp dirs (config, policy, prefix files) are gone.
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator("/tmp", ec))
        EXPECT_NE(entry.path().filename().string().rfind("sluice-bench-push-", 0), 0u) << entry.path();
}

// http needs nginx and wrk, not BPF: its own fixture.
class HttpBenchSmoke : public BenchSmoke {
  protected:
    void SetUp() override {
        for (const char* tool : {"/usr/sbin/nginx", "/usr/bin/wrk"}) {
            if (access(tool, X_OK) == 0) continue;
            if (sluice::test::privileged_suites_required())
                FAIL() << "SLUICE_REQUIRE_PRIVILEGED is set but " << tool << " is missing";
            GTEST_SKIP() << "skipped: needs " << tool;
        }
        dir_ = fs::temp_directory_path() / ("sluice-bench-smoke-" + std::to_string(getpid()));
        fs::create_directories(dir_);
    }
};

TEST_F(HttpBenchSmoke, HttpReportsBothFrontsDecisionsAndTheBound) {
    const auto results = smoke("http");
    ASSERT_TRUE(results.is_object());
    const auto clients = results.value("clients", nlohmann::json::array());
    ASSERT_EQ(clients.size(), 2u);  // bare, then through sluiced
    EXPECT_EQ(clients[0].value("front", ""), "bare");
    EXPECT_EQ(clients[1].value("front", ""), "sluice");
    for (const auto& row : clients) {
        for (const char* key : {"requests_per_s", "ratio_to_bare"})
            EXPECT_TRUE(is_figure(row.value(key, nlohmann::json{}))) << key << " in " << row.dump();
        EXPECT_GT(row.value("ok", 0u), 0u) << row.dump();
    }
    const auto sluiced = results.value("sluiced", nlohmann::json{});
    EXPECT_GT(sluiced.value("decisions", 0u), 0u) << sluiced.dump();
    EXPECT_TRUE(is_figure(sluiced.value("decision_mean_us", nlohmann::json{}))) << sluiced.dump();
    const auto check = results.value("check", nlohmann::json{});
    EXPECT_EQ(check.value("users_over_bound", 1u), 0u) << check.dump();
    // Its temp dir (nginx, sluiced) is gone.
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator("/tmp", ec))
        EXPECT_NE(entry.path().filename().string().rfind("sluice-bench-http-", 0), 0u) << entry.path();
}

#ifdef SLUICE_BENCH_DPDK  // sluice-bench has `dpdk` only when built with DPDK
TEST_F(BenchSmoke, DpdkReportsMppsForPassThroughAndSluice) {
    const auto results = smoke("dpdk");
    ASSERT_TRUE(results.is_array());
    ASSERT_EQ(results.size(), 3u);  // pass-through, sluice 1 source, sluice many sources
    EXPECT_EQ(results[0].value("loop", ""), "pass-through");
    for (const auto& row : results) {
        for (const char* key : {"mpps", "mpps_per_cpu_second", "ns_per_frame", "ratio_to_pass_through"})
            EXPECT_TRUE(is_figure(row.value(key, nlohmann::json{}))) << key << " in " << row.dump();
        EXPECT_GT(row.value("frames", 0u), 0u) << row.dump();
    }
    // The policy admits everything: the comparison is only fair if nothing was dropped.
    for (size_t i = 1; i < results.size(); ++i) {
        EXPECT_EQ(results[i].value("dropped", 1u), 0u) << results[i].dump();
        EXPECT_GT(results[i].value("passed", 0u), 0u) << results[i].dump();
    }
}
#endif

}  // namespace
