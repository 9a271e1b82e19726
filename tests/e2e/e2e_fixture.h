// SPDX-License-Identifier: Apache-2.0
// The end-to-end fixture: one throwaway world per test, made of
//   - a network namespace sluice-e2e-<pid>-<n> holding a veth pair sl0 <-> sl1,
//   - a temp dir with sluiced.toml, the daemon's socket, state dir and log,
//   - the bpffs dir /sys/fs/bpf/sluice-e2e-<pid>-<n> (sluiced pins under it),
//   - sluiced itself, started in the namespace's network namespace only,
// and helpers that run the real binaries: sluicectl (output and exit code,
// --json parsed) and sluice-traffic (sends from sl1 into sl0, where the
// program runs, and counts what sl0 lets through, per source).
//
// Everything is torn down in TearDown and again in the destructor (both are
// idempotent), also when an assertion fails: daemon stopped (SIGTERM, and a
// sanitizer report in its log fails the test), pins removed,
// namespace deleted, temp dir removed. When a test failed, the daemon's log
// is printed. The binaries come from $SLUICED, $SLUICECTL, $SLUICE_TRAFFIC
// (set by meson).
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/binary_from_env.h"
#include "common/http_get.h"
#include "common/netns.h"
#include "process.h"

namespace sluice::test {

using json = nlohmann::json;

// One flow of offered traffic: `pps` spread evenly over the addresses of
// `source` (an address or a CIDR).
struct Flow {
    std::string name;
    std::string source;
    double pps = 0;
};

struct SourceCount {
    uint64_t sent = 0;
    uint64_t received = 0;
};

struct FlowCount {
    uint64_t sent = 0;
    uint64_t received = 0;
    uint64_t skipped = 0;                        // frames the sender fell too far behind to send
    // CLOCK_REALTIME (ns) when the receiver read its first and last frame (0: none).
    int64_t first_received_unix_ns = 0;
    int64_t last_received_unix_ns = 0;
    std::map<std::string, SourceCount> sources;  // by address
};

// What one sluice-traffic run reported.
struct TrafficReport {
    double duration_s = 0;  // the sender's, from its start to its last frame
    // CLOCK_REALTIME (ns) when the fixture started sluice-traffic and when it
    // had exited. Sending started between spawned and exited - duration_s -
    // the tool's 0.2 s drain; tests split a run at a push with these.
    int64_t spawned_unix_ns = 0;
    int64_t exited_unix_ns = 0;
    uint64_t receiver_drops = 0;             // frames the counter's socket lost: counts are meaningless then
    uint64_t send_busy = 0;                  // sendmmsg calls the veth refused for lack of room
    std::map<std::string, FlowCount> flows;  // by flow name
    json raw;

    const FlowCount& flow(const std::string& name) const;
};

int64_t unix_now_ns();

// One world: the namespace with its veth pair, the temp dir, the bpffs dir
// and sluiced. A test fixture is one (SluiceE2E); a test that needs several
// (the fleet tests: one per node) holds more. The destructor tears it down.
class SluiceWorld {
  public:
    SluiceWorld() = default;
    virtual ~SluiceWorld();
    SluiceWorld(const SluiceWorld&) = delete;
    SluiceWorld& operator=(const SluiceWorld&) = delete;

    // Kills what runs, removes the pins, the namespace and the temp dir;
    // idempotent. With `print_log`, prints sluiced's log first under `label`.
    void teardown(bool print_log = false, const std::string& label = {});

    // ---- the world ------------------------------------------------------------------

    // Creates the namespace and the temp dir and writes sluiced.toml with
    // `extra_config` appended to the top-level keys ("@DIR@" in it becomes
    // the temp dir). Use with
    // ASSERT_NO_FATAL_FAILURE.
    void make_world(const std::string& extra_config = {});
    // make_world() + start_daemon().
    void start_world(const std::string& extra_config = {});
    // Starts sluiced and waits until `status` answers (10 s), failing with
    // its log otherwise.
    void start_daemon();
    // Starts sluiced and waits for it to exit, for a daemon that must refuse
    // to start; its exit code, or -1 (then killed) after `timeout`.
    int run_daemon_to_exit(std::chrono::milliseconds timeout);
    // Sends `sig` to the daemon; with SIGKILL also reaps it.
    void signal_daemon(int sig);
    // Waits for the daemon to exit; its exit code, or -1 on timeout (then it
    // is killed).
    int wait_daemon_exit(std::chrono::milliseconds timeout);
    bool daemon_running() const { return daemon_pid_ > 0; }
    // How many times the daemon's log holds `text`, and a wait until it holds
    // it `count` times (false after `timeout`): a test waits on what the
    // daemon said it did, not on a sleep long enough on this machine.
    size_t log_count(const std::string& text) const;
    bool wait_for_log(const std::string& text, size_t count, std::chrono::milliseconds timeout) const;
    // Runs sluiced as `wrapper... sluiced --config ...` from the next
    // start_daemon() on (e.g. /usr/bin/env with LD_PRELOAD: it must exec, so
    // the pid stays sluiced's).
    void set_daemon_wrapper(std::vector<std::string> wrapper) { daemon_wrapper_ = std::move(wrapper); }

    pid_t daemon_pid() const { return daemon_pid_; }
    // CLOCK_REALTIME (ns) just before the last start_daemon() spawned it.
    int64_t daemon_started_unix_ns() const { return daemon_started_unix_ns_; }

    const std::string& dir() const { return dir_; }
    std::string socket_path() const { return dir_ + "/sluiced.sock"; }
    std::string config_path() const { return dir_ + "/sluiced.toml"; }
    std::string log_path() const { return dir_ + "/sluiced.log"; }
    std::string pin_root() const;  // bpffs_dir
    std::string netns_path() const;
    std::string netns_name() const;

    // ---- sluicectl ----------------------------------------------------------------

    // Runs `sluicectl --socket <ours> args...` (30 s timeout).
    ProcResult ctl(const std::vector<std::string>& args);
    // Runs `sluicectl --socket <ours> --json args...`, expects exit 0 and a
    // JSON document on stdout; nothing (after a test failure) otherwise.
    std::optional<json> ctl_json(const std::vector<std::string>& args);
    // Starts sluicectl without waiting; finish with finish_ctl().
    pid_t start_ctl(const std::vector<std::string>& args, const std::string& scratch_name);
    ProcResult finish_ctl(pid_t pid, const std::string& scratch_name);

    // Writes `text` to <dir>/<name> and returns the path.
    std::string write_policy(const std::string& name, const std::string& text);
    // `policy push FILE`, expecting success; returns the --json result.
    std::optional<json> push_policy(const std::string& name, const std::string& text);

    // ---- status and stats -----------------------------------------------------------

    std::optional<json> status() { return ctl_json({"status"}); }
    std::optional<json> stats() { return ctl_json({"stats"}); }
    // From `stats --json`: the interface sl0's entry, or null.
    static json interface_stats(const json& stats, const std::string& ifname);
    // pass/drop packets of one class on sl0 (0 when absent).
    static uint64_t class_counter(const json& stats, const std::string& class_name, const std::string& field);
    static uint64_t stat_counter(const json& stats, const std::string& stat);

    // ---- the daemon's own account of time ----------------------------------------------

    // When sluiced logged the first line holding `text`, by the line's own
    // ts= (whole ms, rounded down), in unix ns; -1 if there is none.
    int64_t logged_at_ns(const std::string& text) const;
    // Time sluiced's loop (its main thread) has been on a CPU or runnable
    // waiting for one, ns (/proc/PID/schedstat): what the machine took of
    // its time, beside what it spent waiting for work.
    uint64_t daemon_busy_ns() const;

    // ---- traffic -------------------------------------------------------------------

    // Runs sluice-traffic in the namespace: sends `flows` out of sl1 for
    // `seconds` and counts per source on sl0. Frames are small UDP datagrams.
    std::optional<TrafficReport> traffic(const std::vector<Flow>& flows, double seconds);
    // The same, but each flow sends exactly `frames` (none skipped; the run
    // ends when all have, `seconds` being only a deadline).
    std::optional<TrafficReport> traffic_count(const std::vector<Flow>& flows, uint64_t frames, double seconds);
    // The same in the background: start, do things, finish.
    pid_t start_traffic(const std::vector<Flow>& flows, double seconds, const std::string& scratch_name);
    std::optional<TrafficReport> finish_traffic(pid_t pid, double seconds, const std::string& scratch_name);

    // ---- other processes and HTTP inside the namespace ------------------------------

    // Starts argv (argv[0] a path) in the namespace with stdout/stderr to
    // <dir>/<scratch_name>.out/.err. Teardown kills it if it still runs.
    pid_t start_in_netns(const std::vector<std::string>& argv, const std::string& scratch_name);
    // Sends `sig`, waits up to `timeout` (then SIGKILL); the exit code as wait_exit.
    int stop_child(pid_t pid, int sig, std::chrono::milliseconds timeout);

    using HttpResponse = ::sluice::test::HttpResponse;
    // HTTP/1.0 GET http://127.0.0.1:<port><target> from inside the namespace
    // (the daemon's metrics and the test's Prometheus listen on its loopback).
    HttpResponse http_get(int port, const std::string& target,
                          std::chrono::milliseconds timeout = std::chrono::seconds(5));

  private:
    std::string scratch(const std::string& name) const { return dir_ + "/" + name; }
    std::vector<std::string> traffic_argv(const std::vector<Flow>& flows, double seconds,
                                          std::optional<uint64_t> frames = std::nullopt) const;
    pid_t spawn_traffic(const std::vector<std::string>& argv, const std::string& scratch_name);
    std::optional<TrafficReport> parse_traffic(const ProcResult& run, const std::string& command);
    void spawn_daemon();

    std::map<pid_t, int64_t> traffic_spawned_;  // pid -> CLOCK_REALTIME ns at spawn
    std::set<pid_t> running_;                   // children started and not yet waited for
    std::string suffix_;
    std::unique_ptr<VethNamespace> netns_;
    std::unique_ptr<PinDir> pins_;
    std::string dir_;  // temp dir, removed in teardown
    std::vector<std::string> daemon_wrapper_;
    pid_t daemon_pid_ = -1;
    int64_t daemon_started_unix_ns_ = 0;
    int ctl_runs_ = 0;
    bool torn_down_ = false;
};

class SluiceE2E : public ::testing::Test, public SluiceWorld {
  protected:
    void TearDown() override;

    // Prints "[figure] <test> <key>: <text>" and records it, so figures can be quoted.
    void figure_line(const std::string& key, const std::string& text);
    // The per-source counts are only meaningful if the counter saw every
    // frame sl0 let through.
    static void expect_no_receiver_drops(const TrafficReport& report);
};

// Whole-number figures for messages and RecordProperty.
std::string figure(double value);

// The value of the first sample of `name` carrying every label in `labels`
// (Prometheus text; label order does not matter), or NaN.
double metric(const std::string& text, const std::string& name, const std::map<std::string, std::string>& labels);

// ---- the bounds the core promises, on a run's counts ------------------------------------

// The CPUs a lease can be outstanding on: possible CPUs, as the loader counts.
double cpus();

// The most one source may be admitted over a run of `seconds` that started
// with its bucket full:
//   burst + rate·T     the core's bound, exact across CPUs at the source level;
//   + rate·0.05 s      T is the sender's first-to-last frame; frames still in
//                      the veth queue are decided a little later.
double upper_bound(double rate, double burst, double seconds);

// The same for a bucket level in lease mode (a class aggregate, the global
// ceiling): + N·L, each of the N CPUs may hold one lease of L = max(1,
// burst / 8N) tokens taken from the shared bucket before the window (README,
// "Two accuracy modes").
double leased_upper_bound(double rate, double burst, double seconds);

// The least a saturated source may be admitted: what its bucket held at the
// start (the burst when it was full) + rate·T, less 5%: T is the sender's
// first-to-last frame of the whole flow (a source of a spread flood sends over
// up to 1/39 s less of it) and frames are decided up to 50 ms after they are
// sent. A limiter refilling at 90% of its rate, or starting without its
// burst, falls below it.
double lower_bound(double rate, double seconds, double held_at_start);

}  // namespace sluice::test
