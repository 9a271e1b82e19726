// SPDX-License-Identifier: Apache-2.0
#include "control_server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Bytes read per connection per round, so one chatty client cannot starve the rest.
constexpr std::size_t kReadBudgetPerRound = 64 * 1024;
// A client that pipelines without reading: stop reading its requests until
// it has taken some of the responses.
constexpr std::size_t kMaxPendingOutputBytes = 4 * 1024 * 1024;
// Out of fds with no idle connection to close: how long the listener rests
// (it stays readable, so polling it would spin).
constexpr auto kAcceptPause = std::chrono::milliseconds(100);

constexpr std::string_view kUnknownVerbLabel = "<unknown>";
constexpr std::string_view kNoVerbLabel = "<none>";

// A socket file is stale when nothing accepts on it any more (the previous
// daemon died without unlinking it). Anything else at the path is left alone.
Status remove_stale_socket(const std::string& path, const sockaddr_un& address) {
    struct stat info {};
    if (::lstat(path.c_str(), &info) != 0) {
        if (errno == ENOENT) return ok_status();
        return Error{errno_message("cannot inspect control socket path " + path, errno)};
    }
    if (!S_ISSOCK(info.st_mode)) {
        return Error{"control socket path " + path + " exists and is not a socket; refusing to replace it"};
    }
    UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!probe.valid()) return Error{errno_message("socket() for probing " + path, errno)};
    if (::connect(probe.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0) {
        return Error{"another server is already listening on " + path + " (is sluiced running?)"};
    }
    if (errno != ECONNREFUSED) {
        return Error{errno_message("cannot tell whether " + path + " is in use", errno)};
    }
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
        return Error{errno_message("cannot remove stale control socket " + path, errno)};
    }
    return ok_status();
}

json error_response(const json& id, ErrorCode code, std::string_view message, std::string_view setting = {}) {
    json error = {{"code", control_error_code_name(code)}, {"message", message}};
    if (!setting.empty()) error["setting"] = setting;
    return {{"id", id}, {"ok", false}, {"error", std::move(error)}};
}

std::string to_line(const json& response) {
    // Handlers may return strings that are not UTF-8 (interface names,
    // paths); replace those bytes rather than throw.
    return response.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

// The peer's supplementary groups; empty when the kernel cannot say.
std::vector<gid_t> peer_groups(int fd) {
    std::vector<gid_t> groups(16);
    for (;;) {
        socklen_t length = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
        if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &length) == 0) {
            groups.resize(length / sizeof(gid_t));
            return groups;
        }
        // ERANGE: `length` now says how much room the list needs.
        if (errno != ERANGE || length / sizeof(gid_t) <= groups.size()) return {};
        groups.resize(length / sizeof(gid_t));
    }
}

}  // namespace

bool peer_may_connect(const Peer& peer, const std::optional<gid_t>& group) {
    if (peer.uid == 0 || peer.uid == ::geteuid()) return true;
    if (!group) return false;
    return peer.gid == *group || std::find(peer.groups.begin(), peer.groups.end(), *group) != peer.groups.end();
}

struct ControlServer::State {
    struct Connection {
        UniqueFd fd;
        Peer peer;
        std::string input;                                // bytes received, not yet a complete line
        std::string output;                               // responses not yet written
        std::optional<Clock::time_point> partial_since;   // when the pending half-request began
        std::optional<Clock::time_point> close_deadline;  // set once we decided to close after flushing
        bool broken = false;                              // peer gone or write failed: drop without flushing
        Clock::time_point last_active = Clock::now();     // accepted, or last read from or written to
        // A request whose attachments are still arriving.
        struct Awaiting {
            json request;
            std::vector<std::pair<std::string, std::size_t>> parts;  // name, bytes
            std::size_t total = 0;
        };
        std::optional<Awaiting> awaiting;
    };

    ControlServerOptions options;
    UniqueFd listener;
    UniqueFd wakeup;  // eventfd written by stop()
    dev_t socket_dev = 0;
    ino_t socket_ino = 0;
    std::map<std::string, Handler, std::less<>> handlers;
    std::vector<Connection> connections;
    RequestCounts counts;
    std::atomic<bool> stopping{false};
    std::optional<Clock::time_point> accept_paused_until;

    ~State() {
        connections.clear();
        listener.reset();
        // Unlink only our own socket: a successor may already have replaced it.
        struct stat info {};
        if (::lstat(options.socket_path.c_str(), &info) == 0 && info.st_dev == socket_dev &&
            info.st_ino == socket_ino) {
            ::unlink(options.socket_path.c_str());
        }
    }

    void count(std::string_view verb, std::string_view outcome) { ++counts[std::string(verb)][std::string(outcome)]; }

    void accept_all() {
        for (;;) {
            UniqueFd fd(::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
            if (!fd.valid()) {
                if (errno == EINTR || errno == ECONNABORTED) continue;
                // Out of fds: close the connection idle the longest to make
                // room, so clients that connect and never send cannot lock
                // everyone else out; with none idle, rest the listener.
                if (errno == EMFILE || errno == ENFILE) {
                    if (evict_idlest()) continue;
                    accept_paused_until = Clock::now() + kAcceptPause;
                }
                return;  // EAGAIN: all taken.
            }
            Connection connection;
            connection.fd = std::move(fd);
            ucred credentials{};
            socklen_t length = sizeof(credentials);
            const bool known = ::getsockopt(connection.fd.get(), SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0;
            connection.peer = {credentials.pid, credentials.uid, credentials.gid, peer_groups(connection.fd.get())};
            const bool allowed = known && (options.authorize ? options.authorize(connection.peer)
                                                             : peer_may_connect(connection.peer, options.group));
            if (!allowed) {
                count(kNoVerbLabel, control_error_code_name(ErrorCode::permission_denied));
                connection.output = to_line(error_response(
                    nullptr, ErrorCode::permission_denied,
                    known ? "uid " + std::to_string(connection.peer.uid) + " may not use " + options.socket_path +
                                ": run as root or as a member of the socket's group"
                          : errno_message("cannot read peer credentials", errno)));
                close_after_flush(connection);
            }
            connections.push_back(std::move(connection));
        }
    }

    // Closes the connection with nothing half-sent and nothing to answer that
    // has been quiet the longest; false when there is none.
    bool evict_idlest() {
        Connection* idlest = nullptr;
        for (Connection& connection : connections) {
            if (connection.broken || !connection.fd.valid() || !connection.input.empty() ||
                !connection.output.empty() || connection.close_deadline)
                continue;
            if (!idlest || connection.last_active < idlest->last_active) idlest = &connection;
        }
        if (!idlest) return false;
        idlest->fd.reset();
        idlest->broken = true;
        count(kNoVerbLabel, "evicted");
        return true;
    }

    void close_after_flush(Connection& connection) {
        if (!connection.close_deadline) connection.close_deadline = Clock::now() + options.idle_timeout;
        connection.input.clear();
        connection.partial_since.reset();
    }

    // The attachments `request` announces, or why they cannot be read (then
    // the bytes that follow cannot be framed, and the connection must close).
    Result<Connection::Awaiting> announced_attachments(const json& request) const {
        Connection::Awaiting awaiting;
        const json& list = request["attachments"];
        if (!list.is_array()) return Error{"\"attachments\" must be an array", "", ErrorCode::bad_request};
        for (const json& part : list) {
            const auto name = part.find("name");
            const auto bytes = part.find("bytes");
            if (!part.is_object() || name == part.end() || !name->is_string() || bytes == part.end() ||
                !bytes->is_number_unsigned())
                return Error{"each attachment must be {\"name\": <string>, \"bytes\": <unsigned>}", "",
                             ErrorCode::bad_request};
            const auto size = bytes->get<std::uint64_t>();
            if (size > options.max_attachment_bytes - awaiting.total)
                return Error{"attachments exceed " + std::to_string(options.max_attachment_bytes) +
                                 " bytes (max_push_bytes); closing the connection",
                             "", ErrorCode::too_large};
            awaiting.total += static_cast<std::size_t>(size);
            awaiting.parts.emplace_back(name->get<std::string>(), static_cast<std::size_t>(size));
        }
        awaiting.request = request;
        return awaiting;
    }

    // Answers a request whose attachments have all arrived: they are `bytes`.
    json dispatch_with_attachments(Connection::Awaiting awaiting, std::string_view bytes, Peer peer) {
        json attachments = json::object();
        std::size_t at = 0;
        for (const auto& [name, size] : awaiting.parts) {
            attachments[name] = std::string(bytes.substr(at, size));
            at += size;
        }
        json& request = awaiting.request;
        request.erase("attachments");
        if (!request.contains("args") || request["args"].is_null()) request["args"] = json::object();
        if (request["args"].is_object()) request["args"]["attachments"] = std::move(attachments);
        return dispatch(request, peer);
    }

    json dispatch(const json& request, Peer peer) {
        if (request.is_discarded() || !request.is_object()) {
            count(kNoVerbLabel, control_error_code_name(ErrorCode::bad_request));
            return error_response(
                nullptr, ErrorCode::bad_request,
                request.is_discarded() ? "request is not valid JSON" : "request must be a JSON object");
        }
        json id = nullptr;
        if (auto found = request.find("id"); found != request.end()) {
            if (!found->is_number_integer() && !found->is_string() && !found->is_null()) {
                count(kNoVerbLabel, control_error_code_name(ErrorCode::bad_request));
                return error_response(nullptr, ErrorCode::bad_request, "\"id\" must be an integer or a string");
            }
            id = *found;
        }
        const auto verb_field = request.find("verb");
        if (verb_field == request.end() || !verb_field->is_string()) {
            count(kNoVerbLabel, control_error_code_name(ErrorCode::bad_request));
            return error_response(id, ErrorCode::bad_request, "request needs \"verb\" (a string)");
        }
        const std::string& verb = verb_field->get_ref<const std::string&>();
        const auto handler = handlers.find(verb);
        if (handler == handlers.end()) {
            count(kUnknownVerbLabel, control_error_code_name(ErrorCode::unknown_verb));
            std::string known;
            for (const auto& [name, unused] : handlers) known += (known.empty() ? "" : ", ") + name;
            return error_response(id, ErrorCode::unknown_verb,
                                  "unknown verb \"" + verb + "\"; known verbs: " + (known.empty() ? "none" : known));
        }
        // By reference: a push's args carry megabytes of attachments.
        static const json kNoArgs = json::object();
        const json* args = &kNoArgs;
        if (auto found = request.find("args"); found != request.end() && !found->is_null()) {
            if (!found->is_object()) {
                count(verb, control_error_code_name(ErrorCode::bad_request));
                return error_response(id, ErrorCode::bad_request, "\"args\" must be a JSON object");
            }
            args = &*found;
        }
        // Handlers read args with nlohmann accessors, which throw on a wrong
        // type: that is the client's mistake. Anything else is ours.
        try {
            Result<json> result = handler->second(*args, peer);
            if (result.ok()) {
                count(verb, "ok");
                return {{"id", id}, {"ok", true}, {"result", std::move(result.value())}};
            }
            const Error& error = result.error();
            count(verb, control_error_code_name(error.code));
            return error_response(id, error.code, error.message, error.setting);
        } catch (const json::exception& e) {
            count(verb, control_error_code_name(ErrorCode::bad_request));
            return error_response(id, ErrorCode::bad_request, "bad args for \"" + verb + "\": " + e.what());
        } catch (const std::exception& e) {
            count(verb, control_error_code_name(ErrorCode::internal));
            return error_response(id, ErrorCode::internal, "\"" + verb + "\" failed: " + e.what());
        }
    }

    // Answers every complete line in the input buffer, in order.
    void process_lines(Connection& connection) {
        std::size_t start = 0;
        while (!connection.close_deadline && connection.output.size() < kMaxPendingOutputBytes) {
            if (connection.awaiting) {
                if (connection.input.size() - start < connection.awaiting->total) break;
                const std::string_view bytes(connection.input.data() + start, connection.awaiting->total);
                start += connection.awaiting->total;
                Connection::Awaiting awaiting = std::move(*connection.awaiting);
                connection.awaiting.reset();
                connection.output += to_line(dispatch_with_attachments(std::move(awaiting), bytes, connection.peer));
                continue;
            }
            const std::size_t newline = connection.input.find('\n', start);
            if (newline == std::string::npos) break;
            std::string_view line(connection.input.data() + start, newline - start);
            start = newline + 1;
            if (line.size() > options.max_request_bytes) {
                reject_too_large(connection);
                return;
            }
            if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
            if (line.find_first_not_of(" \t") == std::string_view::npos) continue;  // blank lines are harmless
            const json request = json::parse(line, nullptr, /*allow_exceptions=*/false);
            if (request.is_object() && request.contains("attachments")) {
                auto announced = announced_attachments(request);
                if (!announced) {
                    count(kNoVerbLabel, control_error_code_name(announced.error().code));
                    const auto id = request.find("id");
                    connection.output += to_line(error_response(
                        id != request.end() && (id->is_number_integer() || id->is_string()) ? *id : json(nullptr),
                        announced.error().code, announced.error().message));
                    close_after_flush(connection);
                    return;
                }
                connection.awaiting = std::move(announced.value());
                continue;
            }
            connection.output += to_line(dispatch(request, connection.peer));
        }
        connection.input.erase(0, start);
        if (connection.awaiting) {
            // Attachments are counted, not scanned for a newline.
        } else if (connection.input.size() > options.max_request_bytes &&
                   connection.input.find('\n') == std::string::npos) {
            reject_too_large(connection);
            return;
        }
        if (connection.input.empty()) {
            connection.partial_since.reset();
        } else if (!connection.partial_since) {
            connection.partial_since = Clock::now();
        }
    }

    void reject_too_large(Connection& connection) {
        count(kNoVerbLabel, control_error_code_name(ErrorCode::too_large));
        connection.output += to_line(error_response(
            nullptr, ErrorCode::too_large,
            "request line exceeds " + std::to_string(options.max_request_bytes) + " bytes; closing the connection"));
        close_after_flush(connection);
    }

    void read_from(Connection& connection) {
        char buffer[16 * 1024];
        // Attachments come in megabytes: take more of them per round.
        std::size_t budget = connection.awaiting ? kReadBudgetPerRound * 16 : kReadBudgetPerRound;
        while (budget > 0 && !connection.close_deadline) {
            const ssize_t got = ::recv(connection.fd.get(), buffer, std::min(sizeof(buffer), budget), 0);
            if (got > 0) {
                connection.last_active = Clock::now();
                connection.input.append(buffer, static_cast<std::size_t>(got));
                budget -= static_cast<std::size_t>(got);
                // Check as we go, so a client streaming without newlines costs
                // at most the limit plus one read.
                if (!connection.awaiting && connection.input.size() > options.max_request_bytes &&
                    connection.input.find('\n') == std::string::npos) {
                    break;
                }
                continue;
            }
            if (got == 0) {
                // The peer finished sending: answer what is complete, drop a
                // half line, and close once the answers are out.
                process_lines(connection);
                close_after_flush(connection);
                return;
            }
            if (errno == EINTR) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) connection.broken = true;
            break;
        }
        process_lines(connection);
    }

    void write_to(Connection& connection) {
        while (!connection.output.empty()) {
            const ssize_t sent =
                ::send(connection.fd.get(), connection.output.data(), connection.output.size(), MSG_NOSIGNAL);
            if (sent > 0) {
                connection.last_active = Clock::now();
                connection.output.erase(0, static_cast<std::size_t>(sent));
                continue;
            }
            if (sent < 0 && errno == EINTR) continue;
            if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
            connection.broken = true;  // EPIPE, ECONNRESET: the client left
            return;
        }
    }

    void expire(Clock::time_point now) {
        for (Connection& connection : connections) {
            if (connection.partial_since && !connection.close_deadline &&
                now - *connection.partial_since >= options.idle_timeout) {
                count(kNoVerbLabel, control_error_code_name(ErrorCode::timeout));
                connection.output += to_line(error_response(nullptr, ErrorCode::timeout,
                                                            "request not completed within " +
                                                                std::to_string(options.idle_timeout.count()) +
                                                                " ms; closing the connection"));
                close_after_flush(connection);
                write_to(connection);
            }
        }
    }

    int poll_timeout(int timeout_ms, Clock::time_point now) const {
        std::optional<Clock::time_point> nearest;
        for (const Connection& connection : connections) {
            for (const auto& deadline :
                 {connection.partial_since ? std::optional(*connection.partial_since + options.idle_timeout)
                                           : std::nullopt,
                  connection.close_deadline}) {
                if (deadline && (!nearest || *deadline < *nearest)) nearest = deadline;
            }
        }
        if (!nearest) return timeout_ms;
        const auto until = std::chrono::ceil<std::chrono::milliseconds>(*nearest - now).count();
        const int wait = static_cast<int>(std::clamp<long long>(until, 0, 60'000));
        return timeout_ms < 0 ? wait : std::min(timeout_ms, wait);
    }

    void drop_finished(Clock::time_point now) {
        std::erase_if(connections, [now](const Connection& connection) {
            if (connection.broken) return true;
            if (!connection.close_deadline) return false;
            return connection.output.empty() || now >= *connection.close_deadline;
        });
    }
};

ControlServer::ControlServer(std::unique_ptr<State> state) : state_(std::move(state)) {}
ControlServer::ControlServer(ControlServer&&) noexcept = default;
ControlServer& ControlServer::operator=(ControlServer&&) noexcept = default;
ControlServer::~ControlServer() = default;

Result<ControlServer> ControlServer::listen(const ControlServerOptions& options) {
    const Result<sockaddr_un> address = unix_address(options.socket_path);
    if (!address.ok()) return address.error();
    const std::string& path = options.socket_path;

    if (Status removed = remove_stale_socket(path, address.value()); !removed.ok()) return removed.error();

    auto state = std::make_unique<State>();
    state->options = options;
    state->listener = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!state->listener.valid()) return Error{errno_message("socket() for " + path, errno)};
    if (::bind(state->listener.get(), reinterpret_cast<const sockaddr*>(&address.value()), sizeof(sockaddr_un)) != 0) {
        return Error{errno_message("cannot bind control socket " + path, errno)};
    }
    // From here the file is ours: the State destructor unlinks it on failure.
    struct stat info {};
    if (::lstat(path.c_str(), &info) != 0) return Error{errno_message("cannot inspect " + path, errno)};
    state->socket_dev = info.st_dev;
    state->socket_ino = info.st_ino;

    // Permissions are set before listen(): until then every connect() is
    // refused, so there is no window with the umask's looser mode.
    if (options.group && ::chown(path.c_str(), static_cast<uid_t>(-1), *options.group) != 0) {
        return Error{errno_message("cannot chown " + path + " to group " + std::to_string(*options.group), errno)};
    }
    const mode_t mode = options.group ? (options.mode | 0060) : options.mode;
    if (::chmod(path.c_str(), mode) != 0) return Error{errno_message("cannot chmod " + path, errno)};
    if (::listen(state->listener.get(), SOMAXCONN) != 0) {
        return Error{errno_message("cannot listen on " + path, errno)};
    }
    state->wakeup = UniqueFd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!state->wakeup.valid()) return Error{errno_message("eventfd() for the control server", errno)};
    return ControlServer(std::move(state));
}

void ControlServer::handle(std::string verb, Handler handler) {
    state_->handlers[std::move(verb)] = std::move(handler);
}

Status ControlServer::run_once(int timeout_ms) {
    State& state = *state_;
    if (state.stopping.load()) return ok_status();

    std::vector<pollfd> fds;
    fds.reserve(state.connections.size() + 2);
    Clock::time_point now = Clock::now();
    if (state.accept_paused_until && now >= *state.accept_paused_until) state.accept_paused_until.reset();
    fds.push_back({state.listener.get(), static_cast<short>(state.accept_paused_until ? 0 : POLLIN), 0});
    fds.push_back({state.wakeup.get(), POLLIN, 0});
    for (const State::Connection& connection : state.connections) {
        short events = 0;
        if (!connection.close_deadline && connection.output.size() < kMaxPendingOutputBytes) events |= POLLIN;
        if (!connection.output.empty()) events |= POLLOUT;
        fds.push_back({connection.fd.get(), events, 0});
    }

    int timeout = state.poll_timeout(timeout_ms, now);
    if (state.accept_paused_until) {
        const auto rest = std::chrono::ceil<std::chrono::milliseconds>(*state.accept_paused_until - now).count();
        const int until = static_cast<int>(std::clamp<long long>(rest, 0, kAcceptPause.count()));
        timeout = timeout < 0 ? until : std::min(timeout, until);
    }
    const int ready = ::poll(fds.data(), fds.size(), timeout);
    if (ready < 0) {
        if (errno == EINTR) return ok_status();
        return Error{errno_message("poll() on the control socket", errno)};
    }
    if (state.stopping.load()) return ok_status();

    // Connections first: accept_all() appends, which would shift the indices.
    const std::size_t polled = state.connections.size();
    for (std::size_t i = 0; i < polled; ++i) {
        State::Connection& connection = state.connections[i];
        const short revents = fds[i + 2].revents;
        if (revents & POLLNVAL) {
            connection.broken = true;
            continue;
        }
        if (revents & (POLLIN | POLLHUP | POLLERR)) state.read_from(connection);
        if (!connection.broken && !connection.output.empty()) state.write_to(connection);
        // Lines held back while the client was not reading its answers.
        if (!connection.broken && !connection.close_deadline && connection.input.find('\n') != std::string::npos &&
            connection.output.size() < kMaxPendingOutputBytes) {
            state.process_lines(connection);
            state.write_to(connection);
        }
    }
    if (fds[0].revents & POLLIN) state.accept_all();
    // Denied peers get their answer right away.
    for (std::size_t i = polled; i < state.connections.size(); ++i) state.write_to(state.connections[i]);

    now = Clock::now();
    state.expire(now);
    state.drop_finished(now);
    return ok_status();
}

void ControlServer::stop() {
    state_->stopping.store(true);
    const std::uint64_t one = 1;
    // Best effort: if the eventfd is somehow full, poll() already sees it readable.
    [[maybe_unused]] const ssize_t written = ::write(state_->wakeup.get(), &one, sizeof(one));
}

bool ControlServer::stopped() const { return state_->stopping.load(); }
const RequestCounts& ControlServer::counts() const { return state_->counts; }
const std::string& ControlServer::socket_path() const { return state_->options.socket_path; }
std::size_t ControlServer::connection_count() const { return state_->connections.size(); }

}  // namespace sluice
