// SPDX-License-Identifier: Apache-2.0
// What the command lines of sluiced, sluice-dpdk, sluice-bench and sluicectl
// share on top of CLI11: an option given twice keeps its last value, --version
// prints "<name> <version>", --log-level takes the logger's levels, and parsing
// says how the process should end, as the hand-written parsers before CLI11
// did: 0 after --help or --version (printed on stdout), 2 after a usage error
// (printed on stderr as "<name>: <what>" with a pointer to --help). sluicectl
// parses on its own (cli_args.cpp): its usage errors go out as --json too.
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "logger.h"

namespace sluice {

// The exit status of a usage error (sluicectl's too: README, exit codes).
inline constexpr int kUsageErrorExit = 2;

// Call before declaring options. An empty `version` adds no --version. The
// usage line is CLI11's ("Usage: NAME [OPTIONS] ...") unless `usage`
// replaces what follows "Usage: " (in the top command's help only).
inline void prepare_command_line(CLI::App& app, const std::string& version, std::string usage = {}) {
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    if (!version.empty()) app.set_version_flag("--version", app.get_name() + " " + version);
    class Formatter : public CLI::Formatter {
      public:
        explicit Formatter(std::string usage) : usage_(std::move(usage)) { column_width(34); }
        std::string make_usage(const CLI::App* app, std::string name) const override {
            // Subcommands share the formatter and keep CLI11's usage line.
            if (usage_.empty() || app->get_parent() != nullptr) return CLI::Formatter::make_usage(app, std::move(name));
            return "Usage: " + usage_ + "\n";
        }

      private:
        std::string usage_;
    };
    app.formatter(std::make_shared<Formatter>(std::move(usage)));
}

// Prints a usage error the way parse_command_line does; returns its status.
inline int usage_error(const std::string& name, const std::string& problem) {
    std::fprintf(stderr, "%s: %s\nRun with --help for more information.\n", name.c_str(), problem.c_str());
    return kUsageErrorExit;
}

// Parses `args` (the program name left out). std::nullopt: go on; otherwise
// the status to exit with. A value of the wrong type or out of range exits
// with `bad_value_exit` (sluice-bench's is 1, as its checks at run time were).
inline std::optional<int> parse_command_line(CLI::App& app, std::vector<std::string> args,
                                             int bad_value_exit = kUsageErrorExit) {
    std::reverse(args.begin(), args.end());  // CLI11 takes them last first
    try {
        app.parse(args);
    } catch (const CLI::ParseError& error) {
        if (error.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(error);
        std::string name = app.get_name();
        for (const CLI::App* sub = &app; !sub->get_subcommands().empty();) {
            sub = sub->get_subcommands().front();
            name += " " + sub->get_name();
        }
        const int status = usage_error(name, error.what());
        const bool bad_value = dynamic_cast<const CLI::ConversionError*>(&error) != nullptr ||
                               dynamic_cast<const CLI::ValidationError*>(&error) != nullptr;
        return bad_value ? bad_value_exit : status;
    }
    return std::nullopt;
}

inline std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv,
                                             int bad_value_exit = kUsageErrorExit) {
    return parse_command_line(app, std::vector<std::string>(argv + std::min(argc, 1), argv + argc), bad_value_exit);
}

// --log-level LEVEL into `level`; the option's count() says whether it was given.
inline CLI::Option* add_log_level_option(CLI::App& app, LogLevel& level, const std::string& help) {
    std::vector<std::string> names;
    for (const LogLevel known : {LogLevel::debug, LogLevel::info, LogLevel::warn, LogLevel::error})
        names.emplace_back(log_level_name(known));
    return app
        .add_option_function<std::string>(
            "--log-level", [&level](const std::string& name) { level = parse_log_level(name).value_or(level); }, help)
        ->type_name("LEVEL")
        ->check(CLI::IsMember(names));
}

}  // namespace sluice
