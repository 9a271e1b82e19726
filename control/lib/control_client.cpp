// SPDX-License-Identifier: Apache-2.0
#include "control_client.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>
#include <utility>

namespace sluice {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

class Deadline {
  public:
    explicit Deadline(int timeout_ms) {
        if (timeout_ms >= 0) at_ = Clock::now() + std::chrono::milliseconds(timeout_ms);
    }
    // Milliseconds left for poll(): -1 when unlimited, 0 when expired.
    int remaining_ms() const {
        if (!at_) return -1;
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(*at_ - Clock::now()).count();
        return static_cast<int>(std::max<long long>(left, 0));
    }
    bool expired() const { return at_ && Clock::now() >= *at_; }

  private:
    std::optional<Clock::time_point> at_;
};

std::string not_running_message(const std::string& path) {
    return "sluiced is not running (no socket at " + path +
           "); start it with: sluiced --config /etc/sluice/sluiced.toml";
}

// A failure before any answer from sluiced: the request may not have run.
Error unanswered(Error error) {
    error.code = ErrorCode::unreachable;
    return error;
}

}  // namespace

Result<ControlClient> ControlClient::connect(const std::string& path, int timeout_ms, int* failed_errno) {
    int ignored_errno = 0;
    if (failed_errno == nullptr) failed_errno = &ignored_errno;
    *failed_errno = 0;
    const Result<sockaddr_un> address_or = unix_address(path);
    if (!address_or) return address_or.error();
    const sockaddr_un address = address_or.value();

    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return Error{errno_message("socket() for " + path, errno)};

    // A Unix socket connects at once or fails; EAGAIN means the server's
    // backlog is full, so retry until the deadline.
    const Deadline deadline(timeout_ms);
    for (;;) {
        if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0) break;
        const int err = errno;
        if (err == EINTR) continue;
        *failed_errno = err;
        if (err == ENOENT || err == ECONNREFUSED) return Error{not_running_message(path)};
        if (err == EACCES || err == EPERM) {
            return Error{"permission denied on " + path + ": run as root or as a member of the socket's group"};
        }
        if (err == EAGAIN && !deadline.expired()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            continue;
        }
        if (err == EAGAIN) return Error{"sluiced at " + path + " is not accepting connections (backlog full)"};
        return Error{errno_message("cannot connect to " + path, err)};
    }
    return ControlClient(std::move(fd), path, timeout_ms);
}

Status ControlClient::send_all(const std::string& bytes, int* failed_errno) {
    const Deadline deadline(timeout_ms_);
    std::size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t sent = ::send(fd_.get(), bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
        if (sent > 0) {
            done += static_cast<std::size_t>(sent);
            continue;
        }
        if (sent < 0 && errno == EINTR) continue;
        if (sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            *failed_errno = errno;
            return Error{errno_message("cannot send to sluiced at " + path_, errno)};
        }
        pollfd writable{fd_.get(), POLLOUT, 0};
        const int ready = ::poll(&writable, 1, deadline.remaining_ms());
        if (ready < 0 && errno != EINTR) return Error{errno_message("poll() on " + path_, errno)};
        if (ready == 0) return Error{"timed out sending to sluiced at " + path_};
    }
    return ok_status();
}

Result<std::string> ControlClient::read_line() {
    const Deadline deadline(timeout_ms_);
    for (;;) {
        if (const auto newline = pending_.find('\n'); newline != std::string::npos) {
            std::string line = pending_.substr(0, newline);
            pending_.erase(0, newline + 1);
            return line;
        }
        char buffer[16 * 1024];
        const ssize_t got = ::recv(fd_.get(), buffer, sizeof(buffer), 0);
        if (got > 0) {
            pending_.append(buffer, static_cast<std::size_t>(got));
            continue;
        }
        if (got == 0) return Error{"sluiced closed the connection on " + path_ + " without answering"};
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            return Error{errno_message("cannot read from sluiced at " + path_, errno)};
        }
        pollfd readable{fd_.get(), POLLIN, 0};
        const int ready = ::poll(&readable, 1, deadline.remaining_ms());
        if (ready < 0 && errno != EINTR) return Error{errno_message("poll() on " + path_, errno)};
        if (ready == 0) {
            return Error{"timed out after " + std::to_string(timeout_ms_) + " ms waiting for sluiced at " + path_};
        }
    }
}

Result<json> ControlClient::call(const std::string& verb, const json& args,
                                 const std::map<std::string, std::string>& attachments) {
    const std::int64_t id = next_id_++;
    json request = {{"id", id}, {"verb", verb}, {"args", args}};
    if (!attachments.empty()) {
        request["attachments"] = json::array();
        for (const auto& [name, bytes] : attachments) request["attachments"].push_back({{"name", name}, {"bytes", bytes.size()}});
    }
    int send_errno = 0;
    const std::string line = request.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    Status sent = send_all(line, &send_errno);
    for (auto part = attachments.begin(); sent.ok() && part != attachments.end(); ++part)
        sent = send_all(part->second, &send_errno);
    if (!sent.ok()) {
        // The server may have answered and hung up before reading anything
        // (permission denied): its answer says more than EPIPE does. With the
        // peer gone this read does not wait.
        if (send_errno == EPIPE || send_errno == ECONNRESET) {
            bool answered = false;
            Result<json> answer = read_response(id, &answered);
            if (answered) return answer;
        }
        return unanswered(sent.error());
    }
    bool answered = false;
    Result<json> answer = read_response(id, &answered);
    if (!answer.ok() && !answered) return unanswered(answer.error());
    return answer;
}

Result<json> ControlClient::read_response(std::int64_t id, bool* answered) {
    for (;;) {
        Result<std::string> line = read_line();
        if (!line.ok()) return line.error();
        const json response = json::parse(line.value(), nullptr, /*allow_exceptions=*/false);
        if (response.is_discarded() || !response.is_object()) {
            return Error{"sluiced at " + path_ + " sent a response that is not a JSON object"};
        }
        // A null id answers whatever was pending: the server could not read
        // ours (too large, timeout, permission denied).
        const auto response_id = response.find("id");
        const bool ours = response_id == response.end() || response_id->is_null() ||
                          (response_id->is_number_integer() && response_id->get<std::int64_t>() == id);
        if (!ours) continue;  // a late answer to an earlier, timed-out call
        *answered = true;

        const auto ok = response.find("ok");
        if (ok != response.end() && ok->is_boolean() && ok->get<bool>()) {
            const auto result = response.find("result");
            return result == response.end() ? json(nullptr) : *result;
        }
        const json error = response.value("error", json::object());
        const json code = error.is_object() ? error.value("code", json("internal")) : json("internal");
        const json message = error.is_object() ? error.value("message", json("")) : json("");
        const json setting = error.is_object() ? error.value("setting", json("")) : json("");
        // A code this build does not know (a newer sluiced) is still the server's refusal.
        return Error{message.is_string() ? message.get<std::string>() : "",
                     setting.is_string() ? setting.get<std::string>() : "",
                     code.is_string() ? parse_control_error_code(code.get<std::string>()).value_or(ErrorCode::internal)
                                      : ErrorCode::internal};
    }
}

}  // namespace sluice
