// SPDX-License-Identifier: Apache-2.0
#include "cli_run.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <istream>
#include <iterator>
#include <ostream>
#include <utility>

#include <nlohmann/json.hpp>

#include "cli_args.h"
#include "cli_output.h"
#include "control_client.h"
#include "result.h"
#include "unique_fd.h"

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "unknown"
#endif

namespace sluice::cli {
namespace {

using json = nlohmann::json;

// Far above any real policy (sluiced refuses requests over 1 MiB by
// default): only keeps `policy push /dev/zero` from eating memory.
constexpr std::size_t kMaxPolicyFileBytes = 64 * 1024 * 1024;

// What went wrong, for both the stderr line and the --json error object.
struct Failure {
    ExitStatus status;
    std::string code;  // a protocol code, or "usage" / "unreachable" for what never reached sluiced
    std::string message;
    std::string setting;
};

int report(const Failure& failure, bool as_json, std::ostream& out, std::ostream& err) {
    err << "sluicectl: " << failure.message << "\n";
    if (as_json) {
        const json error = {
            {"error", {{"code", failure.code}, {"message", failure.message}, {"setting", failure.setting}}}};
        out << error.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
    }
    return failure.status;
}

Result<std::string> read_all(int fd, const std::string& what) {
    std::string text;
    char buffer[64 * 1024];
    for (;;) {
        const ssize_t got = ::read(fd, buffer, sizeof(buffer));
        if (got == 0) return text;
        if (got < 0) {
            if (errno == EINTR) continue;
            return Error{errno_message("cannot read " + what, errno)};
        }
        text.append(buffer, static_cast<std::size_t>(got));
        if (text.size() > kMaxPolicyFileBytes) {
            return Error{"cannot read " + what + ": larger than " + std::to_string(kMaxPolicyFileBytes >> 20) +
                         " MiB, which is no policy"};
        }
    }
}

// FILE as given, or `in` for "-".
Result<std::string> read_policy(const std::string& file, std::istream& in) {
    if (file == "-") {
        std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
        if (in.bad()) return Error{"cannot read the policy from stdin"};
        return text;
    }
    const UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return Error{errno_message("cannot read policy file " + file, errno)};
    return read_all(fd.get(), "policy file " + file);
}

// A server error arrives as "code: message" (ControlClient::call); anything
// else never got an answer from sluiced: timeout, hang-up, garbage.
Failure classify_call_error(const Error& error) {
    const std::string& message = error.message;
    if (const auto colon = message.find(": "); colon != std::string::npos) {
        if (const auto code = parse_control_error_code(std::string_view(message).substr(0, colon))) {
            return {exit_status_for(*code), std::string(control_error_code_name(*code)), message.substr(colon + 2),
                    error.setting};
        }
    }
    return {kExitUnreachable, "unreachable", message, ""};
}

}  // namespace

ExitStatus exit_status_for(ControlErrorCode code) {
    switch (code) {
        case ControlErrorCode::conflict:
            return kExitConflict;
        case ControlErrorCode::permission_denied:
            return kExitPermissionDenied;
        // The server gave up on a request this client left half-sent.
        case ControlErrorCode::timeout:
            return kExitUnreachable;
        case ControlErrorCode::bad_request:
        case ControlErrorCode::unknown_verb:
        case ControlErrorCode::too_large:
        case ControlErrorCode::invalid:
        case ControlErrorCode::internal:
            return kExitRefused;
    }
    return kExitRefused;
}

int run_sluicectl(const std::vector<std::string>& args, const char* socket_env, std::istream& in, std::ostream& out,
                  std::ostream& err) {
    Invocation invocation = parse_command_line(args, socket_env);
    const bool as_json = invocation.global.json;
    switch (invocation.action) {
        case Invocation::Action::help:
            out << usage_text();
            return kExitOk;
        case Invocation::Action::version:
            out << "sluicectl " << SLUICE_VERSION << "\n";
            return kExitOk;
        case Invocation::Action::run:
            break;
    }
    if (!invocation.ok()) return report({kExitUsage, "usage", invocation.usage_error, ""}, as_json, out, err);

    if (invocation.command == Command::policy_push) {
        Result<std::string> text = read_policy(invocation.policy_file, in);
        if (!text.ok()) return report({kExitRefused, "invalid", text.error().message, ""}, as_json, out, err);
        invocation.args["text"] = std::move(text.value());
    }

    int connect_errno = 0;
    Result<ControlClient> client =
        ControlClient::connect(invocation.global.socket_path, invocation.global.timeout_ms, &connect_errno);
    if (!client.ok()) {
        const bool denied = connect_errno == EACCES || connect_errno == EPERM;
        return report({denied ? kExitPermissionDenied : kExitUnreachable, denied ? "permission_denied" : "unreachable",
                       client.error().message, ""},
                      as_json, out, err);
    }
    const Result<json> result = client.value().call(invocation.verb, invocation.args);
    if (!result.ok()) return report(classify_call_error(result.error()), as_json, out, err);

    if (as_json) {
        out << result.value().dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
        return kExitOk;
    }
    const Result<std::string> text = format_result(invocation, result.value());
    if (!text.ok()) return report({kExitRefused, "internal", text.error().message, ""}, as_json, out, err);
    out << text.value();
    return kExitOk;
}

}  // namespace sluice::cli
