// SPDX-License-Identifier: Apache-2.0
// Prometheus metrics of sluiced and sluice-dpdk (README.md, "Metrics"): what the dataplanes
// decided, what deciding costs, table pressure, hot sources, policy versions
// and the daemon itself.
//
// The daemon's control loop is the only thread that touches the dataplanes,
// so it builds a snapshot of every metric once a second and hands it to
// MetricsEndpoint; the HTTP server thread only copies the latest snapshot.
// A scrape therefore sees figures at most a second old, and a slow scraper
// can never stall enforcement or the control socket.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include "control_server.h"
#include "dataplane.h"
#include "hot_sources.h"
#include "request_stats.h"
#include "result.h"
#include "sluice/abi.h"

namespace prometheus {
class Exposer;
}

namespace sluice {

struct InterfaceSnapshot {
    std::string name;
    std::string kind = "xdp";  // EnforcementPoint::kind(): names the program in the decision cost series
    uint64_t active_version = 0;
    std::vector<sluice_counter> counters;  // class x verdict x reason
    std::array<uint64_t, SLUICE_STAT_COUNT> stats{};
    // XDP only: failed syscalls by what they were for (a DPDK port makes none).
    std::optional<SyscallErrorCounts> syscall_errors;
    SourceTableUsage sources;      // as of the daemon's last count
    DecisionCost decision_cost;    // XDP: the kernel's BPF run-time statistics
    uint64_t window_restarts = 0;  // EnforcementPoint::window_restarts()
    std::vector<HotSource> hot_sources;
    // Sources in the penalty box now, by class id (PenaltiesInForce::active_by_class),
    // and the penalties the daemon could not track (PenaltiesInForce::untracked).
    std::map<uint32_t, uint64_t> penalties_active;
    uint64_t penalties_untracked = 0;
};

// One fleet quota's account on one interface (control/fleet/fleet_leaser.h).
struct FleetAccountSnapshot {
    std::string interface;
    uint32_t class_id = 0;
    std::string class_name;  // a request class's leaser names its quota; empty: the packet class of class_id
    bool fallback = false;   // leasing otherwise
    int64_t credit = 0;      // units the dataplane may still admit; negative: overdrawn
    uint64_t redis_granted = 0, fallback_granted = 0;     // units granted, by where from
    uint64_t exchanges = 0, failures = 0, fallbacks = 0;  // exchanges that succeeded, that failed
};

struct DaemonSnapshot {
    std::string version;
    double start_time_s = 0;  // Unix time
    double uptime_s = 0;
    uint64_t policy_version = 0;  // 0: none yet
    std::string policy_sha256;
    uint64_t pushes_accepted = 0, pushes_rejected = 0;
    // Every interface measures its decision cost (sluiced: BPF_ENABLE_STATS is held).
    bool decision_cost_enabled = false;
    RequestCounts requests;
    std::map<uint32_t, std::string> class_names;  // id -> name in the current policy
    std::set<uint32_t> shadow_classes;            // ids of the current policy's classes in shadow
    std::set<uint32_t> penalty_classes;           // ids of the current policy's classes with a penalty
    std::vector<InterfaceSnapshot> interfaces;
    // Timed bans (bans.h): in force now, max_bans, and bans refused because
    // max_bans were in force or a pass class protected the prefix.
    uint64_t bans_active = 0;
    uint32_t max_bans = 0;
    uint64_t bans_refused_cap = 0, bans_refused_protected = 0;
    std::vector<FleetAccountSnapshot> fleet;
    // Request-level decisions ([request] configured; control/request/).
    std::optional<RequestGateStats> request;
    std::vector<RequestHotKey> request_hot_keys;
};

// How many hot sources per interface are exported.
inline constexpr size_t kHotSourcesExported = 20;

std::vector<prometheus::MetricFamily> build_metric_families(const DaemonSnapshot& snapshot);

// "10.2.0.1" or "2001:db8::" (the source prefix's address, as the bucket keys it).
std::string source_address(const sluice_source_key& key);

// The class label for `class_id`: its name, or "class_<id>" for a class the
// current policy no longer has.
std::string class_label(const std::map<uint32_t, std::string>& names, uint32_t class_id);

class MetricsEndpoint {
  public:
    // Serves GET /metrics on `address` ("127.0.0.1:9464", "[::1]:9464").
    static Result<std::unique_ptr<MetricsEndpoint>> serve(const std::string& address);
    ~MetricsEndpoint();

    void publish(std::vector<prometheus::MetricFamily> families);
    // The port actually bound (useful when the address asked for port 0).
    int port() const;

  private:
    class Latest : public prometheus::Collectable {
      public:
        std::vector<prometheus::MetricFamily> Collect() const override;
        void set(std::vector<prometheus::MetricFamily> families);

      private:
        mutable std::mutex mutex_;
        std::vector<prometheus::MetricFamily> families_;
    };

    MetricsEndpoint() = default;
    std::shared_ptr<Latest> latest_ = std::make_shared<Latest>();
    std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace sluice
