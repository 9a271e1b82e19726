// SPDX-License-Identifier: Apache-2.0
// sluiced's own configuration file (packaging/sluiced.toml is the documented
// example). Strict like the policy loader: an unknown key, a wrong type or a
// bad value is an error naming file:line:column and the key, and the daemon
// does not start.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bans.h"
#include "control_protocol.h"
#include "interface_host.h"
#include "logger.h"
#include "redis_client.h"
#include "result.h"
#include "sluice/abi.h"

namespace sluice {

struct InterfaceConfig {
    std::string name;
    XdpMode mode = XdpMode::native;
};

// [fleet]: where this node leases fleet quotas' credit (control/fleet/).
// Without servers, a policy with a fleet quota is refused.
struct FleetConfig {
    std::vector<fleet::RedisEndpoint> servers;  // one Redis, or seed nodes of a cluster
    std::string key_namespace = "sluice";       // first part of every bucket key
    uint32_t lease_period_ms = 100;             // how often leases are exchanged
    uint32_t timeout_ms = 50;                   // connect and command timeout
    uint32_t unavailable_after_ms = 300;        // no answer for this long: the classes' failure policy
    uint32_t idle_hold_ms = 1000;               // an idle class exchanges this seldom (0: every period)
    std::string username, password;             // AUTH (no TLS: Debian's hiredis 0.14 has none)
};

// [request]: request-level decisions for HTTP proxies (control/request/).
// Without the table sluiced serves neither front door; a policy's request
// classes still load and are versioned.
struct RequestConfig {
    bool enabled = false;                                   // the table is there
    std::string http_address;                               // nginx auth_request endpoint; empty: off
    std::string grpc_address;                               // Envoy's rate limit service; empty: off
    std::vector<std::string> trusted_proxies;               // CIDRs whose X-Forwarded-For / Forwarded is believed
    std::string client_address_header = "X-Forwarded-For";  // or "Forwarded"
    std::string identity_key_file;                          // HMAC key for signed descriptor values
    uint32_t http_threads = 8;
    uint32_t max_in_flight = 1024;      // decisions at once; more are answered "overloaded"
    uint64_t domain_rate = 0;           // requests per second per domain on this node; 0: no ceiling
    uint64_t domain_burst = 0;          // 0: a second's worth of domain_rate
    uint32_t deadline_ms = 20;          // a slower decision is counted late (Envoy's default RPC timeout)
    uint32_t max_counters = 1'000'000;  // request counters held at once (one per class and key values)
    uint32_t grpc_max_message_bytes = 64 * 1024;  // a larger gRPC request is refused unread
};

struct DaemonConfig {
    std::string socket = std::string(kDefaultSocketPath);
    std::string socket_group;  // empty: root (and sluiced's own user) only, mode 0600
    std::string state_dir = "/var/lib/sluice";
    std::string bpffs_dir = "/sys/fs/bpf/sluice";
    std::string policy_file;  // empty: policy comes only from pushes
    std::string metrics_address = "127.0.0.1:9464";
    LogLevel log_level = LogLevel::info;
    bool detach_on_exit = false;
    uint32_t source_capacity = SLUICE_SOURCE_CAPACITY_DEFAULT;  // source table entries (8 bytes each)
    // One drop in this many becomes a hot-source event until a flood would
    // overrun the ring, which raises it (a power of two; 1 samples every drop).
    uint32_t drop_sample_period = SLUICE_DROP_SAMPLE_PERIOD_DEFAULT;
    // Prefixes a policy may have per address family: what the tries hold.
    uint32_t prefix_capacity = SLUICE_PREFIX_CAPACITY_DEFAULT;
    // What one push's prefix lists may add up to on the control socket.
    uint64_t max_push_bytes = kDefaultMaxAttachmentBytes;
    // Timed bans in force at once (bans.h), 1..SLUICE_MAX_BANS.
    uint32_t max_bans = BanStore::kDefaultMaxBans;
    std::vector<InterfaceConfig> interfaces;
    FleetConfig fleet;
    RequestConfig request;
};

Result<DaemonConfig> parse_daemon_config(std::string_view text, std::string_view path);
Result<DaemonConfig> load_daemon_config(const std::string& path);
// sluice-dpdk's --fleet FILE: a file holding only a [fleet] table, read as sluiced.toml's.
Result<FleetConfig> parse_fleet_config(std::string_view text, std::string_view path);
Result<FleetConfig> load_fleet_config(const std::string& path);

}  // namespace sluice
