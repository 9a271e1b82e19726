// SPDX-License-Identifier: Apache-2.0
// What the command lines of sluiced, sluice-dpdk, sluice-bench and sluicectl
// share on top of CLI11: an option given twice keeps its last value, --version
// prints "<name> <version>", --log-level takes the logger's levels, and parsing
// says how the process should end, as the hand-written parsers before CLI11
// did: 0 after --help or --version (printed on stdout), 2 after a usage error
// (printed on stderr as "<name>: <what>" with a pointer to --help). sluicectl
// parses on its own (cli_args.cpp): its usage errors go out as --json too.
// A hidden --help-man prints the options (and subcommands) as Markdown for the
// man pages (packaging/man/), so a page and --help cannot drift apart.
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "logger.h"

namespace sluice {

// The exit status of a usage error (sluicectl's too: README, exit codes).
inline constexpr int kUsageErrorExit = 2;

// The hidden flag packaging/man/render_man.py runs each program with.
inline constexpr const char* kManPageFlag = "--help-man";

// Thrown by --help-man with the page's Markdown: parsing ends as after --help
// (exit status 0), before required options are checked.
class ManPageRequested : public CLI::Success {
  public:
    explicit ManPageRequested(std::string markdown)
        : CLI::Success("ManPageRequested", std::move(markdown), CLI::ExitCodes::Success) {}
};

namespace man_page {

// Text as --help prints it, with what Markdown would read as markup escaped;
// --help's line breaks become spaces (the man page wraps its own).
inline std::string plain(const std::string& text) {
    std::string out;
    for (const char c : text) {
        if (c == '\n') {
            out += ' ';
            continue;
        }
        if (std::string_view("\\`*_[]<>|#").find(c) != std::string_view::npos) out += '\\';
        out += c;
    }
    return out;
}

// One option or positional as a definition-list entry (go-md2man's .TP): its
// names and what follows them in --help (type, default, REQUIRED, Needs), then
// its description.
inline std::string entry(const CLI::Formatter& formatter, const CLI::Option& option, bool positional) {
    std::string names = formatter.make_option_name(&option, positional);
    for (std::size_t comma = names.find(','); comma != std::string::npos; comma = names.find(',', comma + 2))
        names.insert(comma + 1, " ");
    return "**" + plain(names) + "**" + plain(formatter.make_option_opts(&option)) +
           "\n:   " + plain(formatter.make_option_desc(&option)) + "\n\n";
}

// A command's positionals, then the options --help lists (those in a group);
// a subcommand's -h, --help is said once for all of them.
inline std::string arguments(const CLI::App& command) {
    static const CLI::Formatter cli11_formatter;
    const auto* own = dynamic_cast<const CLI::Formatter*>(command.get_formatter().get());
    const CLI::Formatter& formatter = own != nullptr ? *own : cli11_formatter;
    std::string text;
    for (const CLI::Option* option : command.get_options({}))
        if (option->get_positional() && !option->nonpositional()) text += entry(formatter, *option, true);
    for (const CLI::Option* option : command.get_options({})) {
        const bool listed = option->nonpositional() && !option->get_group().empty();
        const bool help = command.get_parent() != nullptr && option == command.get_help_ptr();
        if (listed && !help) text += entry(formatter, *option, false);
    }
    return text;
}

// Each command that takes no further command, under its full name ("policy
// push"), with its description and arguments.
inline void append_commands(const CLI::App& command, const std::string& path, std::string& text) {
    for (const CLI::App* sub : command.get_subcommands({})) {
        const std::string name = path.empty() ? sub->get_name() : path + " " + sub->get_name();
        if (!sub->get_subcommands({}).empty()) {
            append_commands(*sub, name, text);
            continue;
        }
        text += "### " + plain(name) + "\n\n" + plain(sub->get_description()) + "\n\n" + arguments(*sub);
    }
}

// The OPTIONS section and, for a program with subcommands, COMMANDS.
inline std::string markdown(const CLI::App& app) {
    std::string text = "# OPTIONS\n\n" + arguments(app);
    if (app.get_subcommands({}).empty()) return text;
    text += "# COMMANDS\n\nEach command also takes **-h**, **--help**: its own arguments and options.\n\n";
    append_commands(app, "", text);
    return text;
}

}  // namespace man_page

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
    // In no group: --help does not list it. Its callback runs once parsing is
    // done, when every option and subcommand has been declared.
    app.add_flag_callback(
           kManPageFlag, [&app] { throw ManPageRequested(man_page::markdown(app)); },
           "print the options as Markdown for the man page")
        ->group("")
        ->configurable(false);
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
        if (dynamic_cast<const ManPageRequested*>(&error) != nullptr) {
            std::fputs(error.what(), stdout);
            return 0;
        }
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
