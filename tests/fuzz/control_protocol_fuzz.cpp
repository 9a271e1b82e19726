// SPDX-License-Identifier: Apache-2.0
// The control socket: the input is the bytes one client sends over a real
// Unix socket to a real ControlServer before it shuts its side; the server
// is driven on this thread until it closes the connection. Asserted: every
// complete non-blank line gets exactly one reply, in order, a JSON object
// carrying the request's id when it had a readable one; a line (or an
// unfinished tail) longer than the limit gets one too_large reply and ends
// the connection; an unfinished tail within the limit gets none. The limit is
// small here (512 bytes) so oversized lines are as easy to reach as any.
// A request with "attachments" is answered once the bytes it announces have
// come (none if the client stops short); announcing more than 256 bytes, or
// attachments that are not [{"name", "bytes"}...], gets one error reply and
// ends the connection.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "control_server.h"
#include "fuzz_support.h"
#include "unique_fd.h"

namespace {

using nlohmann::json;
using sluice::fuzz::require;
constexpr std::size_t kMaxRequestBytes = 512;
constexpr std::size_t kMaxAttachmentBytes = 256;

sluice::ControlServer& server() {
    static sluice::ControlServer* instance = [] {
        char dir[] = "/tmp/sluice-fuzz-control-XXXXXX";
        require(::mkdtemp(dir) != nullptr, "a directory for the socket");
        sluice::ControlServerOptions options;
        options.socket_path = std::string(dir) + "/s.sock";
        options.max_request_bytes = kMaxRequestBytes;
        options.max_attachment_bytes = kMaxAttachmentBytes;
        options.idle_timeout = std::chrono::seconds(30);  // the harness closes its side; no input waits
        options.authorize = [](const sluice::Peer&) { return true; };
        auto listening = sluice::ControlServer::listen(options);
        require(listening.ok(), "the server listens", listening.ok() ? "" : listening.error().message);
        auto* s = new sluice::ControlServer(std::move(listening.value()));
        s->handle("status", [](const json&, const sluice::Peer&) -> sluice::Result<json> { return json{{"up", 1}}; });
        s->handle("echo", [](const json& args, const sluice::Peer&) -> sluice::Result<json> { return args; });
        s->handle("refuse", [](const json&, const sluice::Peer&) -> sluice::Result<json> {
            return sluice::Error{"refused", "rate"};
        });
        // nlohmann accessors throw on a wrong type: a client mistake, answered as bad_request.
        s->handle("typed", [](const json& args, const sluice::Peer&) -> sluice::Result<json> {
            return json{{"n", args.at("n").get<int>() + 1}};
        });
        return s;
    }();
    return *instance;
}

// What the server must answer: for each reply, the request line's id when
// the line is a JSON object with an integer or string id (nullopt: null or
// not readable), and whether it is the too_large refusal.
struct Expected {
    std::optional<json> id;
    bool too_large = false;
};

std::vector<Expected> expected_replies(std::string_view input) {
    std::vector<Expected> out;
    std::size_t start = 0;
    for (;;) {
        const std::size_t newline = input.find('\n', start);
        if (newline == std::string_view::npos) break;
        std::string_view line = input.substr(start, newline - start);
        start = newline + 1;
        if (line.size() > kMaxRequestBytes) {
            out.push_back({std::nullopt, true});
            return out;
        }
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
        Expected e;
        const json request = json::parse(line, nullptr, false);
        if (request.is_object()) {
            const auto id = request.find("id");
            if (id != request.end() && (id->is_number_integer() || id->is_string())) e.id = *id;
        }
        if (request.is_object() && request.contains("attachments")) {
            // The bytes announced, or nullopt when the announcement is refused.
            std::optional<std::size_t> total = 0;
            const json& parts = request["attachments"];
            if (!parts.is_array()) total.reset();
            for (const json& part : parts.is_array() ? parts : json::array()) {
                const bool valid = part.is_object() && part.contains("name") && part["name"].is_string() &&
                                   part.contains("bytes") && part["bytes"].is_number_unsigned();
                if (!valid || part["bytes"].get<std::uint64_t>() > kMaxAttachmentBytes - *total) {
                    total.reset();
                    break;
                }
                *total += part["bytes"].get<std::size_t>();
            }
            if (!total) {
                out.push_back(e);  // one error reply, then the server closes
                return out;
            }
            if (input.size() - start < *total) return out;  // never complete: no reply
            start += *total;
        }
        out.push_back(e);
    }
    if (input.size() - start > kMaxRequestBytes) out.push_back({std::nullopt, true});
    return out;
}

std::string exchange(std::string_view input) {
    sluice::UniqueFd client(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    require(client.get() >= 0, "a client socket");
    auto address = sluice::unix_address(server().socket_path());
    require(address.ok(), "the socket path fits");
    require(::connect(client.get(), reinterpret_cast<const sockaddr*>(&address.value()), sizeof(sockaddr_un)) == 0,
            "the client connects");
    std::size_t sent = 0;
    bool shut = false;
    std::string replies;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
        require(std::chrono::steady_clock::now() < deadline, "the server ends the exchange within 10 s");
        while (sent < input.size()) {
            const ssize_t n = ::send(client.get(), input.data() + sent, input.size() - sent, MSG_NOSIGNAL);
            if (n <= 0) break;  // full (EAGAIN), or the server closed after too_large (EPIPE)
            sent += static_cast<std::size_t>(n);
        }
        if (sent == input.size() && !shut) {
            ::shutdown(client.get(), SHUT_WR);
            shut = true;
        }
        require(server().run_once(0).ok(), "the server polls");  // both ends are on this thread: never wait
        char buffer[16 * 1024];
        for (;;) {
            const ssize_t n = ::recv(client.get(), buffer, sizeof buffer, 0);
            if (n > 0) {
                replies.append(buffer, static_cast<std::size_t>(n));
                continue;
            }
            if (n == 0 || (errno != EAGAIN && errno != EINTR)) return replies;  // closed by the server
            break;
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const std::vector<Expected> expected = expected_replies(input);
    const std::string replies = exchange(input);
    std::vector<std::string_view> lines;
    for (std::size_t start = 0; start < replies.size();) {
        const std::size_t newline = replies.find('\n', start);
        require(newline != std::string::npos, "every reply ends with a newline", replies);
        lines.push_back(std::string_view(replies).substr(start, newline - start));
        start = newline + 1;
    }
    require(lines.size() == expected.size(), "one reply per complete line",
            std::to_string(lines.size()) + " replies, " + std::to_string(expected.size()) + " expected\n" + replies);
    for (std::size_t i = 0; i < lines.size(); i++) {
        const json reply = json::parse(lines[i], nullptr, false);
        require(reply.is_object() && reply.contains("id") && reply.contains("ok") && reply["ok"].is_boolean(),
                "a reply is an object with id and ok", lines[i]);
        if (expected[i].too_large) {
            require(!reply["ok"].get<bool>() && reply["error"]["code"] == "too_large", "an oversized line: too_large",
                    lines[i]);
            continue;
        }
        if (expected[i].id) require(reply["id"] == *expected[i].id, "the reply carries the request's id", lines[i]);
        if (reply["ok"].get<bool>()) {
            require(reply.contains("result"), "an ok reply has a result", lines[i]);
        } else {
            require(reply["error"].is_object() && reply["error"]["code"].is_string() &&
                        reply["error"]["message"].is_string(),
                    "an error reply has a code and a message", lines[i]);
        }
    }
    return 0;
}
