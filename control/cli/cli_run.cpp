// SPDX-License-Identifier: Apache-2.0
#include "cli_run.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <istream>
#include <iterator>
#include <optional>
#include <ostream>
#include <string_view>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

#include "cli_args.h"
#include "cli_output.h"
#include "control_client.h"
#include "policy_toml.h"
#include "printable.h"
#include "result.h"
#include "unique_fd.h"

namespace sluice::cli {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Cursor home, then erase the screen: what top(1) and watch(1) do.
constexpr std::string_view kClearScreen = "\x1b[H\x1b[2J";

// Far above any real policy (sluiced refuses request lines over 1 MiB by
// default; prefix lists travel apart): only keeps `policy push /dev/zero`
// from eating memory.
constexpr std::size_t kMaxPolicyFileBytes = 64 * 1024 * 1024;

// What went wrong, for both the stderr line and the --json error object.
struct Failure {
    ExitStatus status;
    std::string code;  // a protocol code, or "usage" / "unreachable" for what never reached sluiced
    std::string message;
    std::string setting;
};

int report(const Failure& failure, bool as_json, std::ostream& out, std::ostream& err) {
    err << "sluicectl: " << printable_text(failure.message) << "\n";
    if (as_json) {
        const json error = {
            {"error", {{"code", failure.code}, {"message", failure.message}, {"setting", failure.setting}}}};
        out << error.dump(-1, ' ', true, json::error_handler_t::replace) << "\n";
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

// A server error carries its code; anything else never got an answer from
// sluiced: timeout, hang-up, garbage.
Failure classify_call_error(const Error& error) {
    if (error.code == ErrorCode::unreachable) return {kExitUnreachable, "unreachable", error.message, ""};
    return {exit_status_for(error.code), std::string(control_error_code_name(error.code)), error.message,
            error.setting};
}

Failure connect_failure(const Error& error, int connect_errno) {
    const bool denied = connect_errno == EACCES || connect_errno == EPERM;
    return {denied ? kExitPermissionDenied : kExitUnreachable, denied ? "permission_denied" : "unreachable",
            error.message, ""};
}

// One answer from sluiced, as printed: a JSON line or the human text.
struct Answer {
    std::string text;
    std::optional<Failure> failure;  // set when there is nothing to print
};

Answer ask(const Invocation& invocation, ControlClient& client) {
    const Result<json> result = client.call(invocation.verb, invocation.args, invocation.attachments);
    if (!result.ok()) return {{}, classify_call_error(result.error())};
    if (invocation.global.json) return {result.value().dump(-1, ' ', true, json::error_handler_t::replace) + "\n", {}};
    Result<std::string> text = format_result(invocation, result.value());
    if (!text.ok()) return {{}, Failure{kExitRefused, "internal", text.error().message, ""}};
    return {std::move(text.value()), {}};
}

// Sleeps until `until`; true when `stop_fd` turned readable (or hung up) first.
bool stop_requested_before(int stop_fd, Clock::time_point until) {
    for (;;) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
        if (left <= 0) return false;
        pollfd stop{stop_fd, POLLIN, 0};
        // With stop_fd -1 poll() ignores the entry and just sleeps.
        const int ready = ::poll(&stop, 1, static_cast<int>(left));
        if (ready > 0) return true;
        if (ready < 0 && errno != EINTR) {
            // Cannot wait on the fd: still keep the pace, just without early stops.
            std::this_thread::sleep_until(until);
            return false;
        }
    }
}

// The daemon stopped answering mid-watch. When it cannot be reached afresh
// either, that error is the one a new sluicectl would print ("sluiced is not
// running ...; start it with ..."), so it is reported instead.
Failure gone(const Invocation& invocation, Failure failure) {
    int connect_errno = 0;
    const Result<ControlClient> again =
        ControlClient::connect(invocation.global.socket_path, invocation.global.timeout_ms, &connect_errno);
    return again.ok() ? failure : connect_failure(again.error(), connect_errno);
}

// "refreshing every 1 s (Ctrl-C to stop), 2026-12-02T14:02:03Z": on a terminal
// only, so a piped watch stays bare tables.
std::string watch_banner(double interval_s) {
    char interval[32];
    std::snprintf(interval, sizeof(interval), "%g", interval_s);
    return "refreshing every " + std::string(interval) + " s (Ctrl-C to stop), " +
           utc_time(static_cast<std::int64_t>(std::time(nullptr))) + "\n\n";
}

// stats/top --watch over one connection: ask, print, wait, at a fixed pace (a
// slow answer does not push later refreshes back; missed ones are skipped).
int watch(const Invocation& invocation, ControlClient& client, const WatchHooks& hooks, std::ostream& out,
          std::ostream& err) {
    const bool as_json = invocation.global.json;
    const int stop_fd = hooks.begin ? hooks.begin() : -1;
    const auto interval =
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(invocation.interval_s));
    Clock::time_point next = Clock::now();
    for (std::uint64_t refresh = 1;; ++refresh) {
        Answer answer = ask(invocation, client);
        if (answer.failure) {
            const Failure& failure = *answer.failure;
            return report(failure.status == kExitUnreachable ? gone(invocation, failure) : failure, as_json, out, err);
        }
        if (as_json) {
            out << answer.text;  // JSON lines: one document per refresh, never a blank line or escape
        } else if (hooks.terminal) {
            out << kClearScreen << watch_banner(invocation.interval_s) << printable_text(answer.text);
        } else {
            out << (refresh > 1 ? "\n" : "") << printable_text(answer.text);
        }
        // Flushed each time, or a pipe would see nothing until the buffer fills.
        out.flush();
        if (!out) return kExitRefused;  // stdout is gone (the reader of a pipe quit): nothing left to show
        if (invocation.count > 0 && refresh >= invocation.count) return kExitOk;
        next += interval;
        if (const auto now = Clock::now(); next < now) next = now;
        if (stop_requested_before(stop_fd, next)) return kExitOk;
    }
}

}  // namespace

ExitStatus exit_status_for(ErrorCode code) {
    switch (code) {
        case ErrorCode::conflict:
            return kExitConflict;
        case ErrorCode::permission_denied:
            return kExitPermissionDenied;
        // The server gave up on a request this client left half-sent.
        case ErrorCode::timeout:
        case ErrorCode::unreachable:
            return kExitUnreachable;
        case ErrorCode::bad_request:
        case ErrorCode::unknown_verb:
        case ErrorCode::too_large:
        case ErrorCode::invalid:
        case ErrorCode::internal:
            return kExitRefused;
    }
    return kExitRefused;
}

int run_sluicectl(const std::vector<std::string>& args, const char* socket_env, std::istream& in, std::ostream& out,
                  std::ostream& err, const WatchHooks& hooks) {
    Invocation invocation = parse_command_line(args, socket_env);
    const bool as_json = invocation.global.json;
    if (invocation.action != Invocation::Action::run) {
        out << invocation.output;
        return kExitOk;
    }
    if (!invocation.ok()) return report({kExitUsage, "usage", invocation.usage_error, ""}, as_json, out, err);

    if (invocation.command == Verb::policy_push) {
        Result<std::string> text = read_policy(invocation.policy_file, in);
        if (!text.ok()) return report({kExitRefused, "invalid", text.error().message, ""}, as_json, out, err);
        // The lists are read here, with the user's permissions and working
        // directory, and sent along: sluiced never opens a path a client names.
        auto lists = read_match_files(text.value(), invocation.policy_file == "-" ? "" : invocation.policy_file);
        if (!lists.ok()) return report({kExitRefused, "invalid", lists.error().message, ""}, as_json, out, err);
        invocation.attachments = std::move(lists.value());
        invocation.args["text"] = std::move(text.value());
    }

    int connect_errno = 0;
    Result<ControlClient> client =
        ControlClient::connect(invocation.global.socket_path, invocation.global.timeout_ms, &connect_errno);
    if (!client.ok()) return report(connect_failure(client.error(), connect_errno), as_json, out, err);
    if (invocation.watch) return watch(invocation, client.value(), hooks, out, err);

    const Answer answer = ask(invocation, client.value());
    if (answer.failure) return report(*answer.failure, as_json, out, err);
    out << printable_text(answer.text);
    return kExitOk;
}

}  // namespace sluice::cli
