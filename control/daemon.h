// SPDX-License-Identifier: Apache-2.0
// sluiced: owns one XdpDataplane per attached interface (pinned under
// <bpffs_dir>/<ifname>/), the policy versions (PolicyService over the
// VersionStore) and the control socket, and serves the verbs sluicectl uses
// (README.md, "Control protocol").
//
// Life cycle. start() listens first (so a second sluiced fails before it
// touches anything), re-adopts every pinned interface (links switch to the
// new program atomically; buckets and counters carry on), brings them to the
// current policy version, pushes policy_file if its content changed, and only
// then attaches configured interfaces that are not yet attached, so no
// interface ever runs without the current policy. run() serves until asked to
// stop; on the way out pinned programs keep enforcing (fail-static) unless
// the config says detach_on_exit.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "control_server.h"
#include "daemon_config.h"
#include "hot_sources.h"
#include "metrics.h"
#include "policy_service.h"
#include "result.h"
#include "xdp_dataplane.h"

namespace sluice {

// Set from signal handlers (lock-free atomics are async-signal-safe).
struct DaemonSignals {
    std::atomic<bool> stop{false};
    std::atomic<bool> reload{false};
};

class Daemon {
  public:
    static Result<std::unique_ptr<Daemon>> start(DaemonConfig config);
    ~Daemon();
    Daemon(const Daemon&) = delete;
    Daemon& operator=(const Daemon&) = delete;

    // Serves until signals.stop; SIGHUP-style reloads on signals.reload.
    Status run(DaemonSignals& signals);

  private:
    using Clock = std::chrono::steady_clock;

    struct CounterSample {
        Clock::time_point at{};
        std::vector<sluice_counter> counters;
        std::array<uint64_t, SLUICE_STAT_COUNT> stats{};
        uint64_t run_time_ns = 0, run_count = 0;  // BPF run-time statistics of the program
    };

    struct Interface {
        std::string name;
        int ifindex = 0;
        XdpMode mode = XdpMode::native;
        std::string pin_dir;
        std::unique_ptr<XdpDataplane> dataplane;
        // The two latest periodic samples: rates are their difference.
        std::optional<CounterSample> previous, latest;
        HotSources hot_sources;
        // (per-CPU, shared) source entries as of the last idle collection.
        std::pair<size_t, size_t> source_counts{};
    };

    Daemon(DaemonConfig config, std::unique_ptr<PolicyService> policy, ControlServer server);

    Status adopt_pinned_interfaces();
    Status attach_configured_interfaces();
    Result<std::unique_ptr<XdpDataplane>> open_dataplane(const std::string& pin_dir) const;
    Status attach_interface(const std::string& name, XdpMode mode);
    Status detach_interface(const std::string& name);
    void reload_policy_file();
    void sample_counters();
    void drain_drop_events();
    void publish_metrics();
    void count_push(bool accepted);
    void collect_idle_sources();
    void register_handlers();

    Result<nlohmann::json> status_json();
    Result<nlohmann::json> stats_json();
    Result<nlohmann::json> top_json(const nlohmann::json& args);
    std::vector<std::string> unprotected_interfaces() const;
    std::map<uint32_t, std::string> class_names() const;

    DaemonConfig config_;
    std::unique_ptr<PolicyService> policy_;  // not movable: it holds a mutex
    ControlServer server_;
    std::map<std::string, std::unique_ptr<Interface>> interfaces_;
    Clock::time_point started_ = Clock::now();
    int64_t started_unix_s_ = 0;
    Clock::time_point last_sample_{}, last_collect_{};
    // Keeps the kernel's BPF run-time statistics on while sluiced runs; they
    // go off again when it closes, so nothing is left behind.
    UniqueFd bpf_stats_;
    std::unique_ptr<MetricsEndpoint> metrics_;
    uint64_t pushes_accepted_ = 0, pushes_rejected_ = 0;
};

// Sends a state line ("READY=1", "STOPPING=1") to systemd when it started us
// with Type=notify ($NOTIFY_SOCKET); does nothing otherwise.
void notify_systemd(const std::string& state);

// Makes sure `dir` is on a bpf filesystem: mounts bpffs on /sys/fs/bpf when
// `dir` is under it and nothing is mounted there, then creates `dir`.
Status prepare_bpffs_dir(const std::string& dir);

}  // namespace sluice
