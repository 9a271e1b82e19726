// SPDX-License-Identifier: Apache-2.0
// Layer: control/daemon. Sees control/lib and the core, never libbpf or
// DPDK: its interfaces come from an InterfaceHost (interface_host.h) that the
// program composing it provides, control/xdp's XdpHost in sluiced and
// FixedPortHost (fixed_ports.h) in sluice-dpdk, so sluicectl works the same
// against either.
// The daemon runs the loop: it owns the policy versions (PolicyService over
// the VersionStore), the control socket and /metrics, serves the verbs
// sluicectl uses (README.md, "Control protocol"; handlers in
// daemon_verbs.cpp) over the hosted EnforcementPoints, and samples them.
//
// Life cycle. start() listens first (so a second sluiced fails before it
// touches anything), adopts what the host already enforces on (XDP: pinned
// programs a previous sluiced left; links switch to the new program
// atomically, buckets and counters carry on), brings them to the current
// policy version, pushes policy_file if its content changed, and only then
// attaches configured interfaces that are not yet attached, so no interface
// ever runs without the current policy (before the first push there is none:
// interfaces pass everything under no_policy, and a warning says so). run() serves until asked to stop; on
// the way out live interfaces keep enforcing (fail-static) unless the config
// says detach_on_exit.
//
// Bans (bans.h). The BanStore is opened from state_dir before anything is
// adopted (a damaged bans.json stops the start); every interface gets the
// bans in force when it is adopted or attached, every change (ban, unban,
// expiry) reaches every interface before the verb answers, and the loop
// removes bans whose time has passed (it wakes at least every 250 ms). The
// drops each ban caused are counted as bans.h, "Drops", says.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bans.h"
#include "control_server.h"
#include "daemon_config.h"
#include "envoy_service.h"
#include "fixed_ports.h"
#include "fleet_leaser.h"
#include "hot_sources.h"
#include "http_service.h"
#include "interface_host.h"
#include "metrics.h"
#include "penalties.h"
#include "policy_service.h"
#include "request_gate.h"
#include "request_limiter.h"
#include "result.h"
#include "verbs.h"

namespace sluice {

// Set from signal handlers (lock-free atomics are async-signal-safe) or from
// another thread of the owner; run() looks at them at least every 250 ms.
struct DaemonSignals {
    std::atomic<bool> stop{false};
    std::atomic<bool> reload{false};
};

class Daemon {
  public:
    // sluiced: `host` (an XdpHost) attaches the configured interfaces
    // (life cycle above).
    static Result<std::unique_ptr<Daemon>> start(DaemonConfig config, std::unique_ptr<InterfaceHost> host);
    // sluice-dpdk: serves ports it was given (FixedPortHost); attach and
    // detach answer an `invalid` error saying the ports are fixed. `cpus` is
    // the number of workers the policy is compiled for (split shares are
    // rate/cpus). Ignores bpffs_dir and detach_on_exit; `interfaces` must be
    // empty. The daemon owns the ports' dataplanes: stop their workers before
    // destroying it.
    static Result<std::unique_ptr<Daemon>> start_fixed(DaemonConfig config, std::vector<FixedPort> ports,
                                                       uint32_t cpus);
    ~Daemon();
    Daemon(const Daemon&) = delete;
    Daemon& operator=(const Daemon&) = delete;

    // Serves until signals.stop; SIGHUP-style reloads on signals.reload.
    Status run(DaemonSignals& signals);

    // The port /metrics listens on (useful when metrics_address asked for
    // port 0); 0 when metrics are off.
    int metrics_port() const;

  private:
    using Clock = std::chrono::steady_clock;

    struct CounterSample {
        Clock::time_point at{};
        std::vector<sluice_counter> counters;
        std::array<uint64_t, SLUICE_STAT_COUNT> stats{};
        DecisionCost cost;
    };

    struct Interface {
        std::unique_ptr<HostedInterface> hosted;
        EnforcementPoint& dataplane() const { return hosted->dataplane(); }
        // The two latest periodic samples: rates are their difference.
        std::optional<CounterSample> previous, latest;
        HotSources hot_sources;
        // Sources in the penalty box, from the dataplane's penalty events.
        PenaltiesInForce penalties;
        // The source table as of its last count (every 10 s: a count scans it).
        SourceTableUsage sources{};
        // What the last periodic check found (every second); changes are logged.
        std::optional<InterfaceHealth> health;
        // Where this dataplane's ban counters stood when the daemon started
        // counting them, per slot (bans.h, "Drops").
        BanDropBaseline ban_baseline;
        // The last set_bans failed: the loop tries again every second, and
        // the failure and the recovery are logged once each.
        bool bans_failing = false;
    };

    Daemon(DaemonConfig config, std::unique_ptr<InterfaceHost> host, std::unique_ptr<PolicyService> policy,
           ControlServer server, BanStore bans);

    // state_dir, the control socket (listening, so a second daemon on it
    // fails before touching anything), the policy service and the handlers.
    static Result<std::unique_ptr<Daemon>> create(DaemonConfig config, std::unique_ptr<InterfaceHost> host);
    Status serve_metrics();
    // Brings every interface to the current version, then pushes policy_file.
    void bring_to_current_policy();
    void announce_ready();

    Status adopt_interfaces();
    Status attach_configured_interfaces();
    // Only over a host that can attach: the verbs and run() check can_attach().
    Status attach_interface(const std::string& name, XdpMode mode);
    Status detach_interface(const std::string& name);
    void reload_policy_file();
    // Hands the leaser the current version's fleet quotas when the version changed.
    void sync_fleet_quotas();
    // [request]: the limiter takes the current version's request classes, and
    // the doors start serving (on the current version: none before it).
    Status start_request_service();
    // Hands the request limiter (and its leaser) the current version's request
    // classes when the version changed.
    void sync_request_policy();
    // Both of the above, before a push or rollback answers: the packet
    // dataplanes run the new version when the caller hears "applied", so the
    // request limiter (a proxy's next request) and the leasers must too.
    void sync_pushed_version();
    // Dataplane::settle() on every interface, after the replies are out.
    void settle_dataplanes();
    nlohmann::json request_status_json() const;  // null without [request]
    nlohmann::json request_stats_json() const;   // null without [request]
    // The leaser takes (and gives back) fleet credit of an interface's dataplane.
    void lease_for(const std::string& name, EnforcementPoint& dataplane);
    void stop_leasing_for(EnforcementPoint& dataplane);
    void sample_counters();
    // Every second: logs an interface deleted, or pins removed, behind the
    // daemon's back (and when that is over); status reports it too.
    void check_interfaces();
    // At attach and adoption: says that `name` passes everything until the
    // first policy is pushed (README, "Order").
    void log_if_no_policy(const std::string& name);
    // Sampled drops to the hot sources, penalties started to the penalties in force.
    void drain_drop_events();
    // An interface taken on (adopted or attached): its ban counters as they
    // stand become its baseline, and it gets the bans in force.
    Status take_on_bans(const std::string& name, Interface& interface);
    // The bans in force to one interface, or to every one; the error names
    // each interface that refused them.
    Status apply_bans(const std::string& name, Interface& interface);
    Status apply_bans_everywhere();
    // Before the set giving `slot` to a new ban is applied: every interface's
    // baseline of that slot.
    void start_counting_ban(uint32_t slot);
    // Removes the bans whose time has passed (each logged) and applies the
    // rest; tries again on interfaces whose last set_bans failed (every second).
    void expire_bans();
    // What each ban slot dropped since its baselines, summed over every interface.
    Result<std::map<uint32_t, sluice_counter>> ban_drops();
    // Adds what the interfaces (or `only` one) counted to the bans'
    // dropped_before and stores it, then counts afresh from there: at a clean
    // stop, and before an interface is detached.
    void keep_ban_drops(const Interface* only = nullptr);
    // A ban as the verbs show it, with the drops `since` adds to it.
    nlohmann::json ban_json(const Ban& ban, const std::map<uint32_t, sluice_counter>& since) const;
    void publish_metrics();
    void count_push(bool accepted);
    void count_sources();
    // Serves `verb` (verbs.h) with `handler`; a verb that changes state is
    // logged with the peer first.
    void serve(Verb verb, Handler handler);
    // Every verb of kVerbs, or an error naming the one without a handler.
    Status register_handlers();
    // ban, unban and bans (daemon_bans.cpp).
    void register_ban_handlers();

    Result<nlohmann::json> status_json();
    Result<nlohmann::json> stats_json();
    Result<nlohmann::json> top_json(const nlohmann::json& args);
    std::map<uint32_t, std::string> class_names() const;

    DaemonConfig config_;
    std::unique_ptr<InterfaceHost> host_;
    std::unique_ptr<PolicyService> policy_;  // not movable: it holds a mutex
    ControlServer server_;
    BanStore bans_;
    bool ban_store_failing_ = false;  // the last expiry could not be stored; logged once
    std::map<std::string, std::unique_ptr<Interface>> interfaces_;
    Clock::time_point started_ = Clock::now();
    int64_t started_unix_s_ = 0;
    Clock::time_point last_sample_{}, last_count_{}, last_ban_retry_{};
    std::unique_ptr<MetricsEndpoint> metrics_;
    uint64_t pushes_accepted_ = 0, pushes_rejected_ = 0;
    std::array<bool, kVerbCount> served_{};
    // Leases fleet quotas' credit ([fleet] configured); declared last so it
    // stops, and returns what it holds, before the interfaces go.
    std::unique_ptr<fleet::FleetLeaser> fleet_;
    uint64_t fleet_version_ = 0;  // the policy version fleet_ has the quotas of
    // Request-level decisions ([request] configured). Declared so that the
    // doors stop first, then the leaser returns the request classes' credit,
    // and the limiter, whose cells it leases into, goes last.
    std::unique_ptr<request::RequestLimiter> request_limiter_;
    std::unique_ptr<request::RequestGate> request_gate_;
    std::unique_ptr<fleet::FleetLeaser> request_fleet_;
    std::unique_ptr<request::HttpService> request_http_;
    std::unique_ptr<request::EnvoyService> request_envoy_;
    uint64_t request_version_ = 0;  // the policy version the limiter has the classes of
};

// Routes SIGTERM and SIGINT to signals.stop and SIGHUP to signals.reload,
// and ignores SIGPIPE (a client that hangs up must not kill the daemon).
// Once per process; `signals` must live until it exits.
void install_signal_handlers(DaemonSignals& signals);

// Sends a state line ("READY=1", "STOPPING=1") to systemd when it started us
// with Type=notify ($NOTIFY_SOCKET); does nothing otherwise.
void notify_systemd(const std::string& state);

}  // namespace sluice
