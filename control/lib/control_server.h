// SPDX-License-Identifier: Apache-2.0
// The daemon's control socket: a Unix stream socket speaking JSON lines (see
// control_protocol.h). One thread drives it through run_once(); every fd is
// non-blocking and every connection has its own buffers, so a slow, half-sent
// or garbled client never holds up the others. Out of file descriptors, it
// closes the connection idle the longest (nothing half-sent or unanswered) to
// accept the next, so clients that connect and never send cannot lock the
// others out.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "control_protocol.h"
#include "result.h"

namespace sluice {

// Who is on the other end of a connection, from SO_PEERCRED and
// SO_PEERGROUPS at accept time.
struct Peer {
    pid_t pid = 0;
    uid_t uid = 0;
    gid_t gid = 0;              // primary group
    std::vector<gid_t> groups;  // supplementary groups (`adduser NAME sluice` adds one)
};

// The default peer check: root, the server's own euid, or a member of
// `group` (primary or supplementary).
bool peer_may_connect(const Peer& peer, const std::optional<gid_t>& group);

struct ControlServerOptions {
    std::string socket_path;
    mode_t mode = 0600;
    // When set, the socket is chowned to this group and made group-writable
    // (mode | 0060), and peers in this group (primary or supplementary) are
    // allowed.
    std::optional<gid_t> group;
    std::size_t max_request_bytes = kDefaultMaxRequestBytes;
    // What a request's attachments (control_protocol.h) may add up to.
    std::size_t max_attachment_bytes = kDefaultMaxAttachmentBytes;
    // How long a request may stay half-sent, and how long a client that is
    // being closed gets to read its last response.
    std::chrono::milliseconds idle_timeout = kDefaultIdleTimeout;
    // Replaces the default peer check (uid 0, the server's euid, or the
    // configured group); tests use it to deny without changing uid.
    std::function<bool(const Peer&)> authorize;
};

// A handler's Error becomes an error response with the Error's code
// ("invalid" unless the handler set another).
using Handler = std::function<Result<nlohmann::json>(const nlohmann::json& args, const Peer& peer)>;

// Requests seen, by verb and then by outcome ("ok" or an error code). Verbs
// no handler knows count under "<unknown>" and unreadable requests under
// "<none>", so a client cannot grow the map without bound.
using RequestCounts = std::map<std::string, std::map<std::string, std::uint64_t>>;

class ControlServer {
  public:
    // Binds and listens. A leftover socket file nobody listens on is
    // replaced; a live one (another sluiced) is an error, as is a path that
    // exists but is not a socket.
    static Result<ControlServer> listen(const ControlServerOptions& options);

    ControlServer(ControlServer&&) noexcept;
    ControlServer& operator=(ControlServer&&) noexcept;
    ~ControlServer();  // closes every connection and unlinks the socket file if it is still ours

    // Registers (or replaces) the handler for a verb. Not thread-safe: call
    // before run_once() runs on another thread, or from that thread.
    void handle(std::string verb, Handler handler);

    // Waits up to timeout_ms for activity (-1: no limit), then accepts,
    // reads, answers, writes and expires what is ready. Returns at once after
    // stop(). Errors only when poll() itself fails.
    Status run_once(int timeout_ms);

    // Thread-safe: wakes a run_once() blocked in poll() and makes every later
    // call return at once.
    void stop();
    bool stopped() const;

    const RequestCounts& counts() const;
    const std::string& socket_path() const;
    std::size_t connection_count() const;

  private:
    struct State;
    explicit ControlServer(std::unique_ptr<State> state);
    std::unique_ptr<State> state_;
};

}  // namespace sluice
