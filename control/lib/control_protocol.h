// SPDX-License-Identifier: Apache-2.0
// The control socket's wire format, shared by sluiced (ControlServer) and
// sluicectl (ControlClient): JSON lines over a Unix stream socket.
//
//   request:  {"id": <int|string>, "verb": "status", "args": {...}}
//   response: {"id": <same>, "ok": true, "result": {...}}
//         or  {"id": <same>, "ok": false, "error": {"code": "...", "message": "...", "setting": "..."}}
//
// A request may carry attachments, for content too large to be a JSON string
// (a policy's prefix lists): "attachments": [{"name": "...", "bytes": N}, ...]
// beside "verb", and the raw bytes of each, in that order, right after the
// request's newline. The handler finds them in args["attachments"] as
// {"<name>": "<bytes>"}. Together they may be at most the server's
// max_attachment_bytes; a request over it is answered too_large and the
// connection closed (its bytes cannot be skipped safely).
//
// "id" is echoed so a client can match responses; it is null when the server
// could not read one (garbled line, oversized line, timeout, denied peer).
// "setting" appears only when a handler's Error names the input key at fault.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "result.h"
#include "unique_fd.h"

namespace sluice {

// The wire names of the error codes (result.h). Clients switch on these
// strings, so they are part of the protocol: add, never rename.
inline constexpr std::pair<ErrorCode, std::string_view> kErrorCodeNames[] = {
    {ErrorCode::bad_request, "bad_request"},
    {ErrorCode::unknown_verb, "unknown_verb"},
    {ErrorCode::too_large, "too_large"},
    {ErrorCode::timeout, "timeout"},
    {ErrorCode::permission_denied, "permission_denied"},
    {ErrorCode::conflict, "conflict"},
    {ErrorCode::invalid, "invalid"},
    {ErrorCode::internal, "internal"},
    {ErrorCode::unreachable, "unreachable"},
};

inline std::string_view control_error_code_name(ErrorCode code) {
    for (const auto& [known, name] : kErrorCodeNames) {
        if (known == code) return name;
    }
    return "internal";
}

inline std::optional<ErrorCode> parse_control_error_code(std::string_view name) {
    for (const auto& [code, known] : kErrorCodeNames) {
        if (known == name) return code;
    }
    return std::nullopt;
}

// Where sluiced listens and sluicectl connects unless told otherwise.
inline constexpr std::string_view kDefaultSocketPath = "/run/sluice/sluiced.sock";
inline constexpr std::size_t kDefaultMaxRequestBytes = 1024 * 1024;
// A million IPv4 and a million IPv6 prefixes take about 60 MB as text.
inline constexpr std::size_t kDefaultMaxAttachmentBytes = std::size_t{256} << 20;

// The "top" verb's "n": how many hot sources a request may ask for.
inline constexpr std::size_t kDefaultTopSources = 20;
inline constexpr std::size_t kMaxTopSources = 1000;
inline constexpr std::chrono::milliseconds kDefaultIdleTimeout{5000};

// An error response's error: the code travels as its own field.
inline Error control_error(ErrorCode code, std::string message, std::string setting = {}) {
    return Error{std::move(message), std::move(setting), code};
}

// The address of the control socket at `path`, or why it cannot be one.
inline Result<sockaddr_un> unix_address(const std::string& path) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (path.empty() || path.size() >= sizeof(address.sun_path)) {
        return Error{"control socket path \"" + path + "\" must be 1 to " +
                     std::to_string(sizeof(address.sun_path) - 1) + " bytes long"};
    }
    path.copy(address.sun_path, path.size());
    return address;
}

// "what PATH: strerror (errno N)", so every system-call failure says where and why.
inline std::string errno_message(std::string_view what, int errnum) {
    return std::string(what) + ": " + std::strerror(errnum) + " (errno " + std::to_string(errnum) + ")";
}

}  // namespace sluice
