// SPDX-License-Identifier: Apache-2.0
// A small synchronous Redis client over hiredis for fleet quotas: one Redis or
// a Redis Cluster, found out by the client itself. Debian ships no cluster
// client, so the cluster part (slot map, MOVED, ASK) is written here, kept to
// what the fleet bucket needs:
//   - Mode: the first command sends CLUSTER SLOTS to the configured servers in
//     order. A slot table means cluster mode; "ERR This instance has cluster
//     support disabled" (or an unknown CLUSTER command) means single mode,
//     served by that server alone.
//   - Routing: a command goes to the master that owns the slot of its routing
//     key (redis_key_slot). MOVED updates the slot, refreshes the whole map
//     from CLUSTER SLOTS and retries at the new node; ASK sends ASKING and the
//     command to the named node once, leaving the map alone. At most
//     kMaxRedirections redirections per command, then an error.
//   - Connections: opened lazily, one per node, and kept; one that fails or
//     times out is dropped, so the next command reconnects (and, in cluster
//     mode, refreshes the slot map first: the node may have failed over).
// No hiredis type appears here; replies are copied into RedisReply.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "result.h"

namespace sluice::fleet {

struct RedisEndpoint {
    std::string host;  // a name or an address; IPv6 without brackets
    uint16_t port = 0;

    bool operator==(const RedisEndpoint&) const = default;
};

// "host:port", or "[v6-address]:port". Errors name what is wrong.
Result<RedisEndpoint> parse_redis_endpoint(std::string_view text);
// The inverse: "host:port", brackets around an IPv6 address.
std::string format_redis_endpoint(const RedisEndpoint& endpoint);

struct RedisOptions {
    std::vector<RedisEndpoint> servers;  // one Redis, or seed nodes of a cluster
    std::chrono::milliseconds connect_timeout{50};
    std::chrono::milliseconds command_timeout{50};
    // AUTH on every new connection: password alone, or username + password (ACL).
    std::string username;
    std::string password;
};

enum class RedisReplyType { nil, status, string, integer, array, error };

// A reply as plain data. Error replies normally come back as an Error from
// RedisClient; the type is here for nested errors (inside arrays).
struct RedisReply {
    RedisReplyType type = RedisReplyType::nil;
    long long integer = 0;
    std::string str;  // string, status and error replies
    std::vector<RedisReply> elements;
};

// The cluster slot of a key: CRC16 (XMODEM) of the key, or of its hash tag
// (between the first '{' and the next '}', when that is not empty), mod 16384.
uint16_t redis_key_slot(std::string_view key);
// CRC16/XMODEM, as Redis Cluster uses it; exposed for tests.
uint16_t redis_crc16(std::string_view bytes);

struct RedisClientStats {
    uint64_t connects = 0;            // connections opened (and authenticated)
    uint64_t moved = 0;               // MOVED redirections followed
    uint64_t asks = 0;                // ASK redirections followed
    uint64_t slot_map_refreshes = 0;  // CLUSTER SLOTS loaded
};

// Movable (a moved-from client may only be assigned to or destroyed), not
// thread-safe: one per thread. Connect timeouts bound the TCP connect, not
// name resolution: give addresses where that matters.
class RedisClient {
  public:
    static constexpr int kMaxRedirections = 5;

    explicit RedisClient(RedisOptions options);
    ~RedisClient();
    RedisClient(RedisClient&&) noexcept;
    RedisClient& operator=(RedisClient&&) noexcept;
    RedisClient(const RedisClient&) = delete;
    RedisClient& operator=(const RedisClient&) = delete;

    // Sends argv (binary-safe) to the node serving routing_key's slot (in
    // single mode the key is ignored; a keyless command may pass ""). Errors:
    //   ErrorCode::unreachable        connect, I/O or timeout; the connection is dropped
    //   ErrorCode::permission_denied  AUTH refused
    //   ErrorCode::internal           a Redis error reply (also TRYAGAIN, CLUSTERDOWN), or
    //                                 more than kMaxRedirections redirections
    //   ErrorCode::invalid            an empty argv
    // Messages name the server ("redis 127.0.0.1:6379: ...") and carry Redis's text.
    Result<RedisReply> command(const std::vector<std::string>& argv, std::string_view routing_key);

    // Sends argv to one node as it is: no routing, no redirections followed
    // (a MOVED comes back as an error). For per-node commands (SCRIPT LOAD).
    Result<RedisReply> command_at(const RedisEndpoint& node, const std::vector<std::string>& argv);

    // The node that answered (or failed) the last command.
    const RedisEndpoint& last_node() const;
    // The first word of the last command's Redis error reply ("NOSCRIPT",
    // "ERR", ...), or "" when it did not end in one.
    const std::string& last_error_code() const;
    // Whether the first command found a cluster (false before it).
    bool cluster_mode() const;
    const RedisClientStats& stats() const;

  private:
    struct State;
    std::unique_ptr<State> state_;
};

}  // namespace sluice::fleet
