// SPDX-License-Identifier: Apache-2.0
// sluicectl's command line: global options, then a command and its own
// arguments, turned into the control request to send. Parsed with CLI11, each
// command a subcommand built from kVerbs (verbs.h). Pure (no I/O), so every
// usage error is unit-tested.
//
//   sluicectl [--socket PATH] [--json] [--timeout MS] COMMAND ...
//
// stats and top also take --watch [--interval S] [--count K] (cli_run.h
// repeats the request).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "control_protocol.h"
#include "verbs.h"

namespace sluice::cli {

inline constexpr int kDefaultTimeoutMs = 10000;
// --watch: seconds between refreshes by default, and the range --interval takes.
inline constexpr double kDefaultWatchIntervalS = 1.0;
inline constexpr double kMinWatchIntervalS = 0.1;
inline constexpr double kMaxWatchIntervalS = 3600.0;

// What `sluicectl --help` prints: the global options, every command with
// one line each, and the exit codes. `sluicectl COMMAND --help` prints the
// command's own arguments and options.
std::string usage_text();

struct GlobalOptions {
    std::string socket_path{kDefaultSocketPath};  // else $SLUICE_SOCKET, else --socket
    bool json = false;
    int timeout_ms = kDefaultTimeoutMs;  // -1: no limit (--timeout 0)
};

struct Invocation {
    enum class Action { run, help, version };

    GlobalOptions global;
    Action action = Action::run;
    // help and version: what to print on stdout (the help of the command
    // asked about, or "sluicectl VERSION").
    std::string output;
    // What went wrong when the command line is unusable (exit 2); the fields
    // below are then incomplete, but `global` holds what was parsed, so
    // --json still shapes the error.
    std::string usage_error;

    Verb command = Verb::status;
    std::string verb;                                // the protocol verb, "policy.push"...
    nlohmann::json args = nlohmann::json::object();  // its args; policy push adds "text" after reading
    std::string policy_file;                         // policy push: FILE as given, "-" for stdin
    // policy push: the prefix lists FILE's match_files name, by that name,
    // sent as attachments
    std::map<std::string, std::string> attachments;
    bool show_source = false;                        // policy show --source
    bool dry_run = false;                            // push/rollback --dry-run
    bool force = false;                              // ban --force
    // stats and top --watch: ask again every interval_s until stopped, or
    // `count` times when count > 0.
    bool watch = false;
    double interval_s = kDefaultWatchIntervalS;
    std::uint64_t count = 0;

    bool ok() const { return usage_error.empty(); }
};

// `args` excludes the program name. `socket_env` is $SLUICE_SOCKET (null or
// empty when unset).
Invocation parse_command_line(const std::vector<std::string>& args, const char* socket_env);

}  // namespace sluice::cli
