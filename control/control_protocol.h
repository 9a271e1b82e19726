// SPDX-License-Identifier: Apache-2.0
// The control socket's wire format, shared by sluiced (ControlServer) and
// sluicectl (ControlClient): JSON lines over a Unix stream socket.
//
//   request:  {"id": <int|string>, "verb": "status", "args": {...}}
//   response: {"id": <same>, "ok": true, "result": {...}}
//         or  {"id": <same>, "ok": false, "error": {"code": "...", "message": "...", "setting": "..."}}
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

// Every error code a response can carry. Clients switch on these strings, so
// they are part of the protocol: add, never rename.
enum class ControlErrorCode {
    bad_request,        // not JSON, not an object, or a missing/ill-typed id, verb or args
    unknown_verb,       // no handler for the verb
    too_large,          // a line over the request size limit; the server then closes the connection
    timeout,            // a request left half-sent past the idle timeout; the server then closes
    permission_denied,  // the peer failed the SO_PEERCRED check; the server then closes
    conflict,           // a compare-and-swap lost (handlers)
    invalid,            // well-formed request, unacceptable input such as a policy error (handlers)
    internal,           // the server failed; not the client's fault
};

inline constexpr std::pair<ControlErrorCode, std::string_view> kControlErrorCodeNames[] = {
    {ControlErrorCode::bad_request, "bad_request"},
    {ControlErrorCode::unknown_verb, "unknown_verb"},
    {ControlErrorCode::too_large, "too_large"},
    {ControlErrorCode::timeout, "timeout"},
    {ControlErrorCode::permission_denied, "permission_denied"},
    {ControlErrorCode::conflict, "conflict"},
    {ControlErrorCode::invalid, "invalid"},
    {ControlErrorCode::internal, "internal"},
};

inline std::string_view control_error_code_name(ControlErrorCode code) {
    for (const auto& [known, name] : kControlErrorCodeNames) {
        if (known == code) return name;
    }
    return "internal";
}

inline std::optional<ControlErrorCode> parse_control_error_code(std::string_view name) {
    for (const auto& [code, known] : kControlErrorCodeNames) {
        if (known == name) return code;
    }
    return std::nullopt;
}

inline constexpr std::size_t kDefaultMaxRequestBytes = 1024 * 1024;

// The "top" verb's "n": how many hot sources a request may ask for.
inline constexpr std::size_t kDefaultTopSources = 20;
inline constexpr std::size_t kMaxTopSources = 1000;
inline constexpr std::chrono::milliseconds kDefaultIdleTimeout{5000};

// Error carries no code field, so handlers put the code in front of the
// message: "conflict: generation is 7, not 6". The server splits it off again;
// an Error without a known code prefix is reported as "invalid".
inline Error control_error(ControlErrorCode code, std::string message, std::string setting = {}) {
    return Error{std::string(control_error_code_name(code)) + ": " + message, std::move(setting)};
}

struct CodedError {
    ControlErrorCode code;
    std::string message;  // without the code prefix
};

inline CodedError split_control_error(const Error& error) {
    const std::string_view message = error.message;
    if (const auto colon = message.find(": "); colon != std::string_view::npos) {
        if (auto code = parse_control_error_code(message.substr(0, colon))) {
            return {*code, std::string(message.substr(colon + 2))};
        }
    }
    return {ControlErrorCode::invalid, error.message};
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
