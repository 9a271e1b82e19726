// SPDX-License-Identifier: Apache-2.0
// Throwaway Redis servers: redis-server (from $PATH) on 127.0.0.1 at a free
// port, in its own temp dir, no persistence, in the foreground; and a cluster
// of three such masters joined by `redis-cli --cluster create`. Destructors
// kill the processes and remove the dirs, also when a test (or a benchmark)
// failed half-way; the processes also get SIGKILL if their parent dies.
// call() uses its own hiredis connection, so the tests check RedisClient
// against something independent. No gtest here: sluice-bench fleet uses it
// too; the fleet tests' skip rule is in redis_server.h.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "redis_client.h"

namespace sluice::test {

// The full path of `name` in $PATH, or "" when it is not there.
std::string find_in_path(const std::string& name);

// Why the Redis tests cannot run here, or nothing when they can.
std::optional<std::string> missing_redis();

struct RedisServerOptions {
    bool cluster = false;
    std::string requirepass;  // empty: no AUTH
    // Where it runs and listens: a network namespace by name (empty: the
    // caller's own), the address it binds, the address clients (and the other
    // cluster nodes) reach it at, and its port (0: a free one is picked).
    // call() always talks to it over the namespace's loopback.
    std::string netns = {};
    std::string bind = "127.0.0.1";
    std::string host = "127.0.0.1";
    uint16_t port = 0;
};

class RedisServer {
  public:
    explicit RedisServer(RedisServerOptions options = {});
    ~RedisServer();
    RedisServer(const RedisServer&) = delete;
    RedisServer& operator=(const RedisServer&) = delete;

    // Empty when the server started and answers PING; else why not (with its log).
    const std::string& error() const { return error_; }
    uint16_t port() const { return port_; }
    fleet::RedisEndpoint endpoint() const { return {options_.host, port_}; }
    const std::string& dir() const { return dir_; }

    // One command on a fresh connection (AUTH first when the server has a
    // password). A connection failure comes back as an error reply
    // "CONNECTION ...".
    fleet::RedisReply call(const std::vector<std::string>& argv) const;

    void kill();    // SIGKILL and reap; idempotent
    void pause();   // SIGSTOP: the port accepts, nothing answers
    void resume();  // SIGCONT
    std::string log() const;

  private:
    bool start_once();

    RedisServerOptions options_;
    std::string dir_;
    uint16_t port_ = 0;
    pid_t pid_ = -1;
    std::string error_;
};

// Three masters, all 16384 slots assigned, cluster_state:ok everywhere;
// each started with `options` (cluster set, port picked).
class RedisCluster {
  public:
    explicit RedisCluster(RedisServerOptions options = {});
    const std::string& error() const { return error_; }

    size_t size() const { return nodes_.size(); }
    RedisServer& node(size_t i) { return *nodes_[i]; }
    std::vector<fleet::RedisEndpoint> endpoints() const;
    std::string node_id(size_t i) const;
    // The index of the master that owns `slot`, per node 0's CLUSTER SLOTS.
    std::optional<size_t> owner(uint16_t slot) const;

  private:
    std::vector<std::unique_ptr<RedisServer>> nodes_;
    std::string error_;
};

}  // namespace sluice::test
