// SPDX-License-Identifier: Apache-2.0
#include "e2e_fixture.h"

#include <bpf/libbpf.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <thread>

#include "control_client.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

constexpr auto kCtlTimeout = 30s;
// Loading the program is the verifier's work, seconds of CPU: on a busy
// 2-core machine it took over 20 s. Only a daemon that never gets ready
// fails here.
constexpr auto kReadyTimeout = 60s;
constexpr auto kStopTimeout = 10s;  // sluiced's exit path, after SIGTERM

}  // namespace

const FlowCount& TrafficReport::flow(const std::string& name) const {
    static const FlowCount none;
    const auto it = flows.find(name);
    return it == flows.end() ? none : it->second;
}

int64_t unix_now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::string figure(double value) {
    std::ostringstream out;
    out.precision(0);
    out << std::fixed << value;
    return out.str();
}

double metric(const std::string& text, const std::string& name, const std::map<std::string, std::string>& labels) {
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
        if (line.rfind(name + "{", 0) != 0 && line.rfind(name + " ", 0) != 0) continue;
        const bool all = std::all_of(labels.begin(), labels.end(), [&](const auto& label) {
            return line.find(label.first + "=\"" + label.second + "\"") != std::string::npos;
        });
        if (!all) continue;
        return std::stod(line.substr(line.rfind(' ') + 1));
    }
    return std::nan("");
}

SluiceWorld::~SluiceWorld() { teardown(); }

void SluiceE2E::figure_line(const std::string& key, const std::string& text) {
    std::string trimmed = text;
    while (!trimmed.empty() && (trimmed.back() == '\n' || trimmed.back() == ' ')) trimmed.pop_back();
    RecordProperty(key, trimmed);
    std::cout << "[figure] " << ::testing::UnitTest::GetInstance()->current_test_info()->name() << " " << key << ": "
              << trimmed << std::endl;
}

void SluiceE2E::expect_no_receiver_drops(const TrafficReport& report) {
    EXPECT_EQ(report.receiver_drops, 0u) << "the receiver lost " << report.receiver_drops
                                         << " frames: the per-source counts are meaningless (machine too busy?)";
}

void SluiceE2E::TearDown() { teardown(HasFailure()); }

// Order matters: the daemon goes first (it holds the pins and the links),
// then its pins (so the program comes off sl0), then the namespace (and the
// veth pair with it), then the files. The daemon is stopped with SIGTERM, so
// a sanitizer build runs its exit path (leak checks included); its log holds
// its stderr, where any sanitizer report went, of this run and earlier ones.
void SluiceWorld::teardown(bool print_log, const std::string& label) {
    if (torn_down_) return;
    torn_down_ = true;
    const std::string name = label.empty() ? std::string("sluiced") : label + "'s sluiced";
    if (daemon_running()) {
        const int code = terminate_child(daemon_pid_, kStopTimeout);
        daemon_pid_ = -1;
        if (code < 0) std::cout << name << " did not exit within 10 s of SIGTERM: killed" << std::endl;
    }
    std::string report;
    if (!dir_.empty()) {
        report = sanitizer_report(read_file(log_path()));
        EXPECT_EQ(report, "") << name << " reported a sanitizer error (its log follows)";
    }
    if ((print_log || !report.empty()) && !dir_.empty()) {
        std::cout << "---- " << name << " log (" << log_path() << ") ----\n"
                  << read_file(log_path()) << "---- end of " << name << " log ----" << std::endl;
    }
    // Background sluicectl or sluice-traffic runs a failed test left behind.
    for (const pid_t pid : running_) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
    }
    running_.clear();
    pins_.reset();
    netns_.reset();
    if (!dir_.empty()) {
        std::error_code ignored;
        std::filesystem::remove_all(dir_, ignored);
        dir_.clear();
    }
}

size_t SluiceWorld::log_count(const std::string& text) const {
    const std::string log = read_file(log_path());
    size_t count = 0;
    for (size_t at = log.find(text); at != std::string::npos; at = log.find(text, at + text.size())) count++;
    return count;
}

bool SluiceWorld::wait_for_log(const std::string& text, size_t count, std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (log_count(text) < count) {
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
}

std::string SluiceWorld::pin_root() const { return pins_ ? pins_->path() : std::string(); }
std::string SluiceWorld::netns_path() const { return netns_ ? netns_->path() : std::string(); }
std::string SluiceWorld::netns_name() const { return netns_ ? netns_->name() : std::string(); }

void SluiceWorld::make_world(const std::string& extra_config) {
    suffix_ = unique_suffix();
    const std::string name = "sluice-e2e-" + suffix_;

    char templ[] = "/tmp/sluice-e2e-XXXXXX";
    ASSERT_NE(mkdtemp(templ), nullptr) << "mkdtemp: " << std::strerror(errno);
    dir_ = templ;

    pins_ = std::make_unique<PinDir>("/sys/fs/bpf/" + name);
    netns_ = std::make_unique<VethNamespace>(name);
    ASSERT_TRUE(netns_->ok()) << "could not create namespace " << name << " with veth pair sl0/sl1";
    // lo up: the daemon may listen on 127.0.0.1 (metrics) inside the namespace.
    ASSERT_EQ(shell("ip -n " + name + " link set lo up"), 0);

    // A source table for the few thousand sources a test has at most (the
    // default holds 2^20); a test may ask for another in extra_config.
    const std::string config =
        "socket = \"" + socket_path() + "\"\n" +                                                          //
        "state_dir = \"" + dir_ + "/state\"\n" +                                                          //
        "bpffs_dir = \"" + pins_->path() + "\"\n" +                                                       //
        (extra_config.find("source_capacity") == std::string::npos ? "source_capacity = 16384\n" : "") +  //
        std::regex_replace(extra_config, std::regex("@DIR@"), dir_) +                                     //
        "\n[[interface]]\nname = \"sl0\"\nmode = \"native\"\n";
    write_file(config_path(), config);
}

void SluiceWorld::start_world(const std::string& extra_config) {
    ASSERT_NO_FATAL_FAILURE(make_world(extra_config));
    ASSERT_NO_FATAL_FAILURE(start_daemon());
}

void SluiceWorld::spawn_daemon() {
    ASSERT_FALSE(daemon_running()) << "sluiced is already running";
    std::vector<std::string> argv = daemon_wrapper_;
    for (const auto& arg : {binary_from_env("SLUICED"), std::string("--config"), config_path()}) argv.push_back(arg);
    write_file(log_path(), read_file(log_path()) + "---- " + join_argv(argv) + "\n");
    daemon_started_unix_ns_ = unix_now_ns();
    daemon_pid_ = spawn(argv, SpawnOptions{.stdout_path = scratch("sluiced.stdout"),
                                           .stderr_path = log_path(),
                                           .netns_path = netns_path(),
                                           .append = true});
    ASSERT_GT(daemon_pid_, 0) << "fork: " << std::strerror(errno);
}

int SluiceWorld::run_daemon_to_exit(std::chrono::milliseconds timeout) {
    spawn_daemon();
    return wait_daemon_exit(timeout);
}

void SluiceWorld::start_daemon() {
    ASSERT_NO_FATAL_FAILURE(spawn_daemon());

    // Ready when the socket answers `status`; asking the socket directly
    // keeps this independent of sluicectl.
    const auto deadline = std::chrono::steady_clock::now() + kReadyTimeout;
    std::string last_error = "no attempt";
    while (std::chrono::steady_clock::now() < deadline) {
        int code = 0;
        if (exited(daemon_pid_, &code)) {
            daemon_pid_ = -1;
            FAIL() << "sluiced exited with " << code << " before answering `status`; its log:\n"
                   << read_file(log_path());
        }
        auto client = ControlClient::connect(socket_path(), 1000);
        if (client.ok()) {
            auto answer = client.value().call("status");
            if (answer.ok()) return;
            last_error = answer.error().message;
        } else {
            last_error = client.error().message;
        }
        std::this_thread::sleep_for(50ms);
    }
    FAIL() << "sluiced did not answer `status` on " << socket_path() << " within "
           << std::chrono::duration_cast<std::chrono::seconds>(kReadyTimeout).count() << " s (last: " << last_error
           << "); its log:\n"
           << read_file(log_path());
}

void SluiceWorld::signal_daemon(int sig) {
    if (daemon_pid_ <= 0) return;
    kill(daemon_pid_, sig);
    if (sig == SIGKILL) {
        waitpid(daemon_pid_, nullptr, 0);
        daemon_pid_ = -1;
    }
}

int SluiceWorld::wait_daemon_exit(std::chrono::milliseconds timeout) {
    if (daemon_pid_ <= 0) return -1;
    const int code = wait_exit(daemon_pid_, timeout);
    daemon_pid_ = -1;
    return code;
}

// ---- sluicectl ------------------------------------------------------------------------

ProcResult SluiceWorld::ctl(const std::vector<std::string>& args) {
    const std::string name = "ctl-" + std::to_string(ctl_runs_++);
    return finish_ctl(start_ctl(args, name), name);
}

pid_t SluiceWorld::start_ctl(const std::vector<std::string>& args, const std::string& scratch_name) {
    std::vector<std::string> argv = {binary_from_env("SLUICECTL"), "--socket", socket_path()};
    argv.insert(argv.end(), args.begin(), args.end());
    write_file(scratch(scratch_name + ".cmd"), join_argv(argv));
    const pid_t pid = spawn(argv, SpawnOptions{.stdout_path = scratch(scratch_name + ".out"),
                                               .stderr_path = scratch(scratch_name + ".err"),
                                               .netns_path = {},
                                               .append = false});
    if (pid > 0) running_.insert(pid);
    return pid;
}

ProcResult SluiceWorld::finish_ctl(pid_t pid, const std::string& scratch_name) {
    ProcResult result;
    if (pid > 0) {
        result.code = wait_exit(pid, kCtlTimeout);
        running_.erase(pid);
    }
    result.out = read_file(scratch(scratch_name + ".out"));
    result.err = read_file(scratch(scratch_name + ".err"));
    return result;
}

std::optional<json> SluiceWorld::ctl_json(const std::vector<std::string>& args) {
    std::vector<std::string> with_json = {"--json"};
    with_json.insert(with_json.end(), args.begin(), args.end());
    const ProcResult r = ctl(with_json);
    const std::string command = "sluicectl " + join_argv(with_json);
    if (r.code != 0) {
        ADD_FAILURE() << command << " exited " << r.code << "\nstdout: " << r.out << "\nstderr: " << r.err;
        return std::nullopt;
    }
    try {
        return json::parse(r.out);
    } catch (const json::exception& e) {
        ADD_FAILURE() << command << " printed no JSON (" << e.what() << "):\n" << r.out;
        return std::nullopt;
    }
}

std::string SluiceWorld::write_policy(const std::string& name, const std::string& text) {
    const std::string path = scratch(name);
    write_file(path, text);
    return path;
}

std::optional<json> SluiceWorld::push_policy(const std::string& name, const std::string& text) {
    return ctl_json({"policy", "push", write_policy(name, text)});
}

// ---- status and stats -----------------------------------------------------------------

json SluiceWorld::interface_stats(const json& stats, const std::string& ifname) {
    for (const auto& entry : stats.value("interfaces", json::array()))
        if (entry.value("name", "") == ifname) return entry;
    return nullptr;
}

uint64_t SluiceWorld::class_counter(const json& stats, const std::string& class_name, const std::string& field) {
    const json sl0 = interface_stats(stats, "sl0");
    if (!sl0.is_object()) return 0;
    for (const auto& c : sl0.value("classes", json::array()))
        if (c.value("name", "") == class_name) return c.value(field, uint64_t{0});
    return 0;
}

uint64_t SluiceWorld::stat_counter(const json& stats, const std::string& stat) {
    const json sl0 = interface_stats(stats, "sl0");
    if (!sl0.is_object() || !sl0.contains("stats")) return 0;
    return sl0["stats"].value(stat, uint64_t{0});
}

// ---- the daemon's own account of time ---------------------------------------------------

int64_t SluiceWorld::logged_at_ns(const std::string& text) const {
    std::istringstream log(read_file(log_path()));
    for (std::string line; std::getline(log, line);) {
        if (line.find(text) == std::string::npos) continue;
        std::tm utc{};
        int ms = 0;
        if (std::sscanf(line.c_str(), "ts=%d-%d-%dT%d:%d:%d.%dZ", &utc.tm_year, &utc.tm_mon, &utc.tm_mday,
                        &utc.tm_hour, &utc.tm_min, &utc.tm_sec, &ms) != 7)
            return -1;
        utc.tm_year -= 1900;
        utc.tm_mon -= 1;
        return static_cast<int64_t>(::timegm(&utc)) * 1'000'000'000 + int64_t{ms} * 1'000'000;
    }
    return -1;
}

uint64_t SluiceWorld::daemon_busy_ns() const {
    std::ifstream in("/proc/" + std::to_string(daemon_pid_) + "/schedstat");
    uint64_t on_cpu = 0, runnable = 0;
    in >> on_cpu >> runnable;
    return on_cpu + runnable;
}

// ---- other processes and HTTP inside the namespace ----------------------------------

pid_t SluiceWorld::start_in_netns(const std::vector<std::string>& argv, const std::string& scratch_name) {
    write_file(scratch(scratch_name + ".cmd"), join_argv(argv));
    const pid_t pid = spawn(argv, SpawnOptions{.stdout_path = scratch(scratch_name + ".out"),
                                               .stderr_path = scratch(scratch_name + ".err"),
                                               .netns_path = netns_path(),
                                               .append = false});
    if (pid > 0) running_.insert(pid);
    return pid;
}

int SluiceWorld::stop_child(pid_t pid, int sig, std::chrono::milliseconds timeout) {
    if (pid <= 0) return -1;
    kill(pid, sig);
    const int code = wait_exit(pid, timeout);
    running_.erase(pid);
    return code;
}

SluiceWorld::HttpResponse SluiceWorld::http_get(int port, const std::string& target,
                                                std::chrono::milliseconds timeout) {
    HttpResponse response;
    const std::string ns = netns_name();
    // Only the socket has to be made inside the namespace; a thread of its
    // own keeps the test's main thread (which forks the children) where it is.
    std::thread worker([&] {
        const EnterNamespace inside(ns);
        if (!inside.ok()) {
            response.error = "cannot enter network namespace " + ns + ": " + std::strerror(errno);
            return;
        }
        response = http_get_loopback(port, target, timeout);
    });
    worker.join();
    return response;
}

// ---- traffic --------------------------------------------------------------------------

std::vector<std::string> SluiceWorld::traffic_argv(const std::vector<Flow>& flows, double seconds,
                                                   std::optional<uint64_t> frames) const {
    // Frames leave sl1 and arrive on sl0, where sluiced attached the program;
    // packet taps on sl0 see only what it passed.
    std::vector<std::string> argv = {
        binary_from_env("SLUICE_TRAFFIC"), "--tx-dev", "sl1", "--rx-dev", "sl0", "--duration",
        std::to_string(seconds),           "--json",   "-"};
    for (const auto& f : flows) {
        argv.push_back("--flow");
        argv.push_back(f.name + ":" + f.source + ":" + figure(f.pps));
    }
    if (frames) {
        argv.push_back("--count");
        argv.push_back(std::to_string(*frames));
    }
    return argv;
}

std::optional<TrafficReport> SluiceWorld::traffic(const std::vector<Flow>& flows, double seconds) {
    const std::string name = "traffic-" + std::to_string(ctl_runs_++);
    return finish_traffic(start_traffic(flows, seconds, name), seconds, name);
}

std::optional<TrafficReport> SluiceWorld::traffic_count(const std::vector<Flow>& flows, uint64_t frames,
                                                        double seconds) {
    const std::string name = "traffic-" + std::to_string(ctl_runs_++);
    return finish_traffic(spawn_traffic(traffic_argv(flows, seconds, frames), name), seconds, name);
}

pid_t SluiceWorld::start_traffic(const std::vector<Flow>& flows, double seconds, const std::string& scratch_name) {
    return spawn_traffic(traffic_argv(flows, seconds), scratch_name);
}

pid_t SluiceWorld::spawn_traffic(const std::vector<std::string>& argv, const std::string& scratch_name) {
    write_file(scratch(scratch_name + ".cmd"), join_argv(argv));
    const int64_t spawned = unix_now_ns();
    const pid_t pid = spawn(argv, SpawnOptions{.stdout_path = scratch(scratch_name + ".out"),
                                               .stderr_path = scratch(scratch_name + ".err"),
                                               .netns_path = netns_path(),
                                               .append = false});
    if (pid > 0) running_.insert(pid);
    traffic_spawned_[pid] = spawned;
    return pid;
}

std::optional<TrafficReport> SluiceWorld::finish_traffic(pid_t pid, double seconds, const std::string& scratch_name) {
    ProcResult r;
    if (pid > 0) {
        r.code = wait_exit(pid, std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)) + 30s);
        running_.erase(pid);
    }
    const int64_t exited_at = unix_now_ns();
    r.out = read_file(scratch(scratch_name + ".out"));
    r.err = read_file(scratch(scratch_name + ".err"));
    auto report = parse_traffic(r, read_file(scratch(scratch_name + ".cmd")));
    if (report) {
        report->spawned_unix_ns = traffic_spawned_[pid];
        report->exited_unix_ns = exited_at;
    }
    return report;
}

std::optional<TrafficReport> SluiceWorld::parse_traffic(const ProcResult& r, const std::string& command) {
    if (r.code != 0) {
        ADD_FAILURE() << command << " exited " << r.code << "\nstdout: " << r.out << "\nstderr: " << r.err;
        return std::nullopt;
    }
    TrafficReport report;
    try {
        report.raw = json::parse(r.out);
        const json& j = report.raw;
        report.duration_s = j.at("duration_s").get<double>();
        report.receiver_drops = j.at("receiver_drops").get<uint64_t>();
        report.send_busy = j.at("send_busy").get<uint64_t>();
        if (j.at("interrupted").get<bool>()) {
            ADD_FAILURE() << command << " was interrupted";
            return std::nullopt;
        }
        for (const auto& f : j.at("flows")) {
            FlowCount count;
            count.sent = f.at("sent").get<uint64_t>();
            count.received = f.at("received").get<uint64_t>();
            count.skipped = f.at("skipped").get<uint64_t>();
            count.first_received_unix_ns = f.at("first_received_unix_ns").get<int64_t>();
            count.last_received_unix_ns = f.at("last_received_unix_ns").get<int64_t>();
            for (const auto& s : f.at("per_source")) {
                count.sources[s.at("src").get<std::string>()] =
                    SourceCount{s.at("sent").get<uint64_t>(), s.at("received").get<uint64_t>()};
            }
            report.flows[f.at("name").get<std::string>()] = std::move(count);
        }
    } catch (const json::exception& e) {
        ADD_FAILURE() << command << ": unexpected report (" << e.what() << "):\n" << r.out << "\nstderr: " << r.err;
        return std::nullopt;
    }
    return report;
}

double cpus() { return std::max(1.0, static_cast<double>(libbpf_num_possible_cpus())); }

double upper_bound(double rate, double burst, double seconds) { return burst + rate * seconds + rate * 0.05; }

double leased_upper_bound(double rate, double burst, double seconds) {
    const double lease = std::max(1.0, std::floor(burst / (8 * cpus())));
    return upper_bound(rate, burst, seconds) + cpus() * lease;
}

double lower_bound(double rate, double seconds, double held_at_start) {
    return 0.95 * (held_at_start + rate * seconds);
}

}  // namespace sluice::test
