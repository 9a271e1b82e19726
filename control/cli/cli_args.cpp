// SPDX-License-Identifier: Apache-2.0
#include "cli_args.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <utility>

#include "bans.h"
#include "command_line.h"
#include "control_protocol.h"
#include "rate_limits.h"

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "unknown"
#endif

namespace sluice::cli {
namespace {

using json = nlohmann::json;

// An upper bound that keeps milliseconds inside int for poll().
constexpr std::uint64_t kMaxTimeoutMs = 24ULL * 60 * 60 * 1000;

std::string in_quotes(std::string_view text) { return "\"" + std::string(text) + "\""; }

// CLI11 2.1 converts numbers with strtoull (base 0) and strtold: "010" would
// be 8, "0x10" 16, "-1" 2^64 - 1 and "1e400" infinity. sluicectl's numbers are
// plain decimal, so its options take their text and these convert it,
// returning what is wrong with it (empty when it is taken).
std::string parse_count(std::string_view text, std::uint64_t& value) {
    const char* text_end = text.data() + text.size();
    const auto [end, error] = std::from_chars(text.data(), text_end, value);
    if (text.empty() || end != text_end) return in_quotes(text) + " is not a number";
    if (error == std::errc::result_out_of_range) return in_quotes(text) + " is too large";
    return {};
}

// "0.1", "3600": a bound as the user would type it.
std::string seconds_text(double seconds) {
    char text[32];
    std::snprintf(text, sizeof(text), "%g", seconds);
    return text;
}

std::string parse_interval(std::string_view text, double& interval_s) {
    const char* text_end = text.data() + text.size();
    double seconds = 0;
    const auto [end, error] = std::from_chars(text.data(), text_end, seconds, std::chars_format::fixed);
    const std::string range = seconds_text(kMinWatchIntervalS) + ".." + seconds_text(kMaxWatchIntervalS);
    if (text.empty() || end != text_end || (error != std::errc() && error != std::errc::result_out_of_range) ||
        std::isnan(seconds)) {
        return in_quotes(text) + " is not a number of seconds (" + range + ")";
    }
    if (error == std::errc::result_out_of_range || !(seconds >= kMinWatchIntervalS && seconds <= kMaxWatchIntervalS)) {
        return std::string(text) + " is not in " + range + " seconds";
    }
    interval_s = seconds;
    return {};
}

// "policy push"; "" for the top command.
std::string command_path(const CLI::App& command) {
    std::string path;
    for (const CLI::App* at = &command; at->get_parent() != nullptr; at = at->get_parent())
        path = at->get_name() + (path.empty() ? "" : " ") + path;
    return path;
}

// "policy push: " for a command's arguments, "" for the global options: a
// usage error starts with the command it is about.
std::string command_prefix(const CLI::App& command) {
    const std::string path = command_path(command);
    return path.empty() ? path : path + ": ";
}

// What sluicectl refuses in an argument CLI11 took. Its message names the
// command and the argument ("top: -n: 0 is not in 1..1000"); describe() puts
// the command in front of CLI11's own errors.
class RefusedArgument : public CLI::ParseError {
  public:
    RefusedArgument(const std::string& argument, const std::string& problem)
        : CLI::ParseError("RefusedArgument", argument + ": " + problem, CLI::ExitCodes::ValidationError) {}
};

// Converts an argument's text into the invocation; returns what is wrong with
// it, empty when it is taken.
using TakeValue = std::function<std::string(const std::string& text)>;

// An option or positional whose value `take` converts. An option given twice
// keeps its last value (command_line.h) and only that one is converted.
CLI::Option* add_value(CLI::App& command, const std::string& name, const std::string& help, TakeValue take) {
    const std::string argument = command_prefix(command) + name;
    return command.add_option(
        name,
        [argument, take = std::move(take)](const CLI::results_t& values) {
            if (std::string problem = take(values.back()); !problem.empty()) throw RefusedArgument(argument, problem);
            return true;
        },
        help);
}

// A flag into `on`. CLI11 would take --dry-run=yes as true and --dry-run=no
// as false; a flag takes no value.
CLI::Option* add_switch(CLI::App& command, const std::string& name, bool& on, const std::string& help) {
    const std::string argument = command_prefix(command) + name;
    const CLI::Validator no_value(
        [argument](const std::string& value) -> std::string {
            // A flag given bare reads "true"; a RefusedArgument, unlike
            // CLI11's ValidationError, keeps the command in its message.
            if (value != "true") throw RefusedArgument(argument, "takes no value");
            return {};
        },
        "");
    return command.add_flag(name, on, help)->check(no_value);
}

// A version number into args[key].
TakeValue version_into(json& args, const char* key) {
    return [&args, key](const std::string& text) {
        std::uint64_t version = 0;
        std::string problem = parse_count(text, version);
        if (problem.empty()) args[key] = version;
        return problem;
    };
}

// A ban's PREFIX into args["prefix"], as typed: sluiced bans the canonical form.
void add_ban_prefix(CLI::App& command, json& args, const std::string& help) {
    add_value(command, "PREFIX", help, [&args](const std::string& text) {
        auto prefix = parse_ban_prefix(text);
        if (!prefix) return prefix.error().message;
        args["prefix"] = text;
        return std::string();
    })->required();
}

// How long a ban lasts, into args["for_s"]: whole seconds, as the protocol takes it.
std::string parse_ban_duration(const std::string& text, json& args) {
    auto ns = parse_duration(text, BanStore::kMinBanNs, BanStore::kMaxBanNs);
    if (!ns) return ns.error().message;
    if (ns.value() % SLUICE_NANO != 0) return in_quotes(text) + " is not a whole number of seconds";
    args["for_s"] = ns.value() / SLUICE_NANO;
    return {};
}

void add_interface(CLI::App& command, json& args, const std::string& help) {
    add_value(command, "IFNAME", help, [&args](const std::string& name) {
        args["interface"] = name;
        return std::string();
    })->required();
}

// --watch, --interval S and --count K of stats and top. --interval and
// --count alone would silently do nothing, so they need --watch.
void add_watch_options(CLI::App& command, Invocation& invocation) {
    CLI::Option* watch = add_switch(command, "--watch", invocation.watch,
                                    "ask again every S seconds until Ctrl-C, like top(1); the\n"
                                    "screen is cleared only on a terminal; with --json, one\n"
                                    "JSON document per line per refresh");
    const std::string range = seconds_text(kMinWatchIntervalS) + ".." + seconds_text(kMaxWatchIntervalS);
    add_value(command, "--interval",
              "seconds between refreshes (default " + seconds_text(kDefaultWatchIntervalS) + "; " + range + ")",
              [&invocation](const std::string& text) { return parse_interval(text, invocation.interval_s); })
        ->type_name("S")
        ->needs(watch);
    add_value(command, "--count", "stop after K refreshes (default: until Ctrl-C)",
              [&invocation](const std::string& text) {
                  std::string problem = parse_count(text, invocation.count);
                  if (problem.empty() && invocation.count == 0)
                      problem = "0 refreshes; give 1 or more (without --count: until Ctrl-C)";
                  return problem;
              })
        ->type_name("K")
        ->needs(watch);
}

// Declares `verb`'s positionals and options on its command; what they parse
// lands in `invocation`.
void add_arguments(Verb verb, CLI::App& command, Invocation& invocation) {
    json& args = invocation.args;
    switch (verb) {
        case Verb::status:
        case Verb::policy_history:
            return;
        case Verb::attach:
            add_interface(command, args, "the interface to enforce the policy on");
            add_value(command, "--mode", "how XDP attaches (default: native)", [&args](const std::string& mode) {
                if (mode != "native" && mode != "generic") return in_quotes(mode) + " is neither native nor generic";
                args["mode"] = mode;
                return std::string();
            })->type_name("native|generic");
            return;
        case Verb::detach:
            add_interface(command, args, "the interface to stop enforcing on");
            return;
        case Verb::policy_push:
            add_value(command, "FILE", "the policy (TOML); - reads stdin", [&invocation](const std::string& file) {
                invocation.policy_file = file;
                // The daemon names this path in policy errors: "<stdin>:3:7: ...".
                invocation.args["path"] = file == "-" ? "<stdin>" : file;
                return std::string();
            })->required();
            add_value(command, "--if-version", "apply only while N is the current version (else exit 5)",
                      version_into(args, "if_version"))
                ->type_name("N");
            add_switch(command, "--dry-run", invocation.dry_run, "validate and show the diff; apply nothing");
            return;
        case Verb::policy_show:
            add_value(command, "N", "the version (default: the current one)", version_into(args, "version"));
            add_switch(command, "--source", invocation.show_source, "the text as pushed, not the canonical form");
            return;
        case Verb::policy_rollback:
            add_value(command, "--to", "the version to apply again (default: the previous one)",
                      version_into(args, "to"))
                ->type_name("N");
            add_switch(command, "--dry-run", invocation.dry_run, "show the diff; apply nothing");
            return;
        case Verb::policy_diff:
            add_value(command, "A", "the version to compare from", version_into(args, "from"))->required();
            add_value(command, "B", "the version to compare to", version_into(args, "to"))->required();
            return;
        case Verb::stats:
            add_watch_options(command, invocation);
            return;
        case Verb::top:
            add_value(command, "-n",
                      "how many sources (1.." + std::to_string(kMaxTopSources) + "; default " +
                          std::to_string(kDefaultTopSources) + ")",
                      [&args](std::string text) {
                          // CLI11 2.1 hands "-n=5" over as "=5"; it meant 5 before CLI11.
                          if (text.starts_with('=')) text.erase(0, 1);
                          std::uint64_t n = 0;
                          if (std::string problem = parse_count(text, n); !problem.empty()) return problem;
                          if (n < 1 || n > kMaxTopSources)
                              return text + " is not in 1.." + std::to_string(kMaxTopSources);
                          args["n"] = n;
                          return std::string();
                      })
                ->type_name("N");
            add_watch_options(command, invocation);
            return;
        case Verb::ban:
            add_ban_prefix(command, args, "203.0.113.0/24, 2001:db8::/48, or one address");
            add_value(command, "--for", "how long (90s, 10m, 2h, 1d; 1s..30d); then it lifts by itself",
                      [&args](const std::string& text) { return parse_ban_duration(text, args); })
                ->type_name("TIME")
                ->required();
            add_value(
                command, "--reason",
                "why, for sluicectl bans and the log (<= " + std::to_string(BanStore::kMaxReasonBytes) + " bytes)",
                [&args](const std::string& text) {
                    if (auto checked = check_ban_reason(text); !checked) return checked.error().message;
                    args["reason"] = text;
                    return std::string();
                })
                ->type_name("TEXT");
            add_switch(command, "--force", invocation.force, "ban even what a pass class of the policy protects");
            return;
        case Verb::unban:
            add_ban_prefix(command, args, "the banned prefix, as sluicectl bans lists it");
            return;
        case Verb::bans:
            return;
    }
}

// What a request carries even when not given on the command line, so that
// what is asked for does not depend on sluiced's defaults.
void add_request_defaults(Invocation& invocation) {
    switch (invocation.command) {
        case Verb::policy_push:
        case Verb::policy_rollback:
            invocation.args["dry_run"] = invocation.dry_run;
            return;
        case Verb::top:
            if (!invocation.args.contains("n")) invocation.args["n"] = kDefaultTopSources;
            return;
        case Verb::ban:
            invocation.args["force"] = invocation.force;
            return;
        default:
            return;
    }
}

// The subcommand given after `app`'s arguments, if any. parsed() rather than
// get_subcommands(): CLI11 leaves `sluicectl -- status`'s out of the latter.
const CLI::App* chosen_command(const CLI::App& app) {
    const std::vector<const CLI::App*> chosen = app.get_subcommands([](const CLI::App* sub) { return sub->parsed(); });
    return chosen.empty() ? nullptr : chosen.front();
}

const CLI::App& deepest_command(const CLI::App& root) {
    const CLI::App* at = &root;
    while (const CLI::App* next = chosen_command(*at)) at = next;
    return *at;
}

bool takes_command(const CLI::App& app) { return !app.get_subcommands({}).empty(); }

// "commands: push, show, ...; sluicectl policy --help lists them".
std::string command_list(const CLI::App& app) {
    std::string names;
    for (const CLI::App* sub : app.get_subcommands({})) names += (names.empty() ? "" : ", ") + sub->get_name();
    const std::string path = command_path(app);
    return "commands: " + names + "; sluicectl " + (path.empty() ? "" : path + " ") + "--help lists them";
}

std::string missing_command(const CLI::App& app) {
    return command_prefix(app) + "missing command (" + command_list(app) + ")";
}

// An argument `app` did not take; CLI11 would say "The following argument was
// not expected".
std::string unexpected(const CLI::App& root, const CLI::App& app, const std::string& argument) {
    const std::string prefix = command_prefix(app);
    if (argument.size() > 1 && argument[0] == '-') {
        const std::string name = argument.substr(0, argument.find('='));
        // `sluicectl status --json`, the likeliest slip, says what to do.
        const bool global = &app != &root && root.get_option_no_throw(name) != nullptr;
        return prefix + "unknown option " + name + (global ? " (global options go before the command)" : "");
    }
    if (takes_command(app)) return prefix + "unknown command " + in_quotes(argument) + " (" + command_list(app) + ")";
    return prefix + "unexpected argument " + in_quotes(argument);
}

// The usage error for what CLI11 threw.
std::string describe(const CLI::App& root, const CLI::ParseError& error) {
    if (dynamic_cast<const RefusedArgument*>(&error) != nullptr) return error.what();
    // Arguments left over come first: CLI11 checks what is required before
    // them, and `policy apply` names an unknown command, not a missing one.
    for (const CLI::App* at = &root; at != nullptr; at = chosen_command(*at)) {
        for (const std::string& argument : at->remaining()) {
            if (argument != "--") return unexpected(root, *at, argument);
        }
    }
    const CLI::App& deepest = deepest_command(root);
    const bool required = dynamic_cast<const CLI::RequiredError*>(&error) != nullptr;
    if (required && takes_command(deepest) && chosen_command(deepest) == nullptr) return missing_command(deepest);
    return command_prefix(deepest) + error.what();
}

// `text` broken at spaces into lines of at most `width` characters, each
// ending in '\n'.
std::string wrapped(std::string_view text, std::size_t width) {
    std::string lines, line;
    for (std::size_t at = 0; at < text.size();) {
        const std::size_t space = std::min(text.find(' ', at), text.size());
        const std::string_view word = text.substr(at, space - at);
        if (!line.empty() && line.size() + 1 + word.size() > width) {
            lines += line + "\n";
            line.clear();
        }
        line += (line.empty() ? "" : " ") + std::string(word);
        at = space + 1;
    }
    return line.empty() ? lines : lines + line + "\n";
}

// The commands and their arguments as the top --help lists them, one line
// each from kVerbs (README.md copies it), and which change state.
std::string commands_help() {
    std::size_t width = 0;
    for (const VerbSpec& spec : kVerbs) width = std::max(width, spec.synopsis.size());
    std::string text = "Commands:\n";
    std::string changing;
    for (const VerbSpec& spec : kVerbs) {
        text += "  " + std::string(spec.synopsis) + std::string(width - spec.synopsis.size() + 2, ' ') +
                std::string(spec.help) + "\n";
        if (spec.changes_state) changing += (changing.empty() ? "" : ", ") + std::string(command_of(spec.verb));
    }
    return text + "\n" + wrapped("Changing what sluiced enforces (logged with your uid): " + changing + ".", 100);
}

// sluicectl's command line in CLI11: the global options, and a subcommand for
// each row of kVerbs with its own arguments ("policy push" is push under
// policy). What they parse lands in `invocation`.
class CommandLine {
  public:
    explicit CommandLine(Invocation& invocation) : invocation_(invocation) {
        prepare_command_line(app_, SLUICE_VERSION, "sluicectl [--socket PATH] [--json] [--timeout MS] COMMAND ...");
        app_.get_formatter()->label("SUBCOMMAND", "COMMAND");
        socket_option_ =
            app_.add_option("--socket", invocation.global.socket_path,
                            "control socket (default: $SLUICE_SOCKET,\nelse " + std::string(kDefaultSocketPath) + ")")
                ->type_name("PATH");
        json_option_ = add_switch(app_, "--json", invocation.global.json,
                                  "print the daemon's result as one JSON document;\nerrors as {\"error\": {...}}");
        add_value(app_, "--timeout",
                  "give up after MS milliseconds (default " + std::to_string(kDefaultTimeoutMs) + "; 0 waits forever)",
                  [&global = invocation.global](const std::string& text) {
                      std::uint64_t timeout_ms = 0;
                      if (std::string problem = parse_count(text, timeout_ms); !problem.empty()) return problem;
                      if (timeout_ms > kMaxTimeoutMs) {
                          return text + " ms is more than a day (" + std::to_string(kMaxTimeoutMs) +
                                 "); 0 waits forever";
                      }
                      global.timeout_ms = timeout_ms == 0 ? -1 : static_cast<int>(timeout_ms);
                      return std::string();
                  })
            ->type_name("MS");
        app_.require_subcommand(0, 1);
        for (const VerbSpec& spec : kVerbs) add_command(spec);
        // The top --help lists the commands with their arguments instead.
        for (CLI::App* command : app_.get_subcommands({})) command->group("");
        // After the subcommands, which would inherit it.
        app_.footer(commands_help() +
                    "`sluicectl COMMAND --help` describes a command's arguments and options.\n"
                    "\n"
                    "Exit status: 0 done (also a watch stopped by Ctrl-C or SIGTERM); 1 refused by sluiced (invalid\n"
                    "policy, internal error) or FILE unreadable; 2 usage error; 3 sluiced not reachable (not running,\n"
                    "no socket, timed out, or gone during a watch); 4 permission denied; 5 conflict (--if-version is\n"
                    "no longer the current version)");
    }

    // Fills the invocation from `args` (the program name left out);
    // `socket_env` is $SLUICE_SOCKET or null.
    void parse(std::vector<std::string> args, const char* socket_env) {
        const bool socket_from_env = socket_env != nullptr && *socket_env != '\0';
        if (socket_from_env) invocation_.global.socket_path = socket_env;
        std::reverse(args.begin(), args.end());  // CLI11 takes them last first
        try {
            app_.parse(args);
        } catch (const ManPageRequested& man_page) {
            // --help-man (command_line.h): the man page's options, printed as help is.
            invocation_.action = Invocation::Action::help;
            invocation_.output = man_page.what();
            return;
        } catch (const CLI::ParseError& error) {
            // Help and version (exit code 0) are handled below.
            if (error.get_exit_code() != static_cast<int>(CLI::ExitCodes::Success))
                invocation_.usage_error = describe(app_, error);
        }
        // --help and --version win over any error on the same line: CLI11
        // checks the values of options before it looks at them.
        if (help_asked()) {
            invocation_.action = Invocation::Action::help;
            invocation_.output = app_.help();
            invocation_.usage_error.clear();
        } else if (app_.get_version_ptr()->count() > 0) {
            invocation_.action = Invocation::Action::version;
            invocation_.output = app_.get_name() + " " + SLUICE_VERSION + "\n";
            invocation_.usage_error.clear();
        }
        // Also after an error, which CLI11 may raise before storing --json:
        // the report of the error takes the shape --json asks for.
        invocation_.global.json = json_option_->count() > 0;
        const CLI::App& deepest = deepest_command(app_);
        for (const auto& [verb, command] : commands_) {
            if (command != &deepest) continue;
            invocation_.command = verb;
            invocation_.verb = std::string(spec_of(verb).wire);
        }
        if (invocation_.action != Invocation::Action::run || !invocation_.ok()) return;
        if (takes_command(deepest)) {
            invocation_.usage_error = missing_command(deepest);
            return;
        }
        if (const Result<sockaddr_un> address = unix_address(invocation_.global.socket_path); !address.ok()) {
            const std::string source = socket_option_->count() > 0 ? "--socket"
                                       : socket_from_env           ? "$SLUICE_SOCKET"
                                                                   : "socket";
            invocation_.usage_error = source + ": " + address.error().message;
            return;
        }
        add_request_defaults(invocation_);
    }

    std::string help() const { return app_.help(); }

  private:
    // -h or --help, before the command or after any part of it.
    bool help_asked() const {
        for (const CLI::App* at = &app_; at != nullptr; at = chosen_command(*at))
            if (at->get_help_ptr()->count() > 0) return true;
        return false;
    }

    // The verb's subcommand, under its group's ("policy") when its command is
    // two words.
    void add_command(const VerbSpec& spec) {
        const std::string_view command = command_of(spec.verb);
        const std::size_t space = command.find(' ');
        CLI::App* parent = &app_;
        if (space != std::string_view::npos) parent = &group_command(std::string(command.substr(0, space)));
        const std::string name(space == std::string_view::npos ? command : command.substr(space + 1));
        CLI::App* added = parent->add_subcommand(name, std::string(spec.help));
        added->group("Commands");
        add_arguments(spec.verb, *added, invocation_);
        commands_.emplace_back(spec.verb, added);
    }

    CLI::App& group_command(const std::string& name) {
        for (CLI::App* command : app_.get_subcommands({}))
            if (command->get_name() == name) return *command;
        return *app_.add_subcommand(name, "the " + name + " commands")->require_subcommand(1);
    }

    Invocation& invocation_;
    CLI::App app_{"Controls sluiced, the Sluice daemon, over its control socket.", "sluicectl"};
    CLI::Option* socket_option_ = nullptr;
    CLI::Option* json_option_ = nullptr;
    std::vector<std::pair<Verb, const CLI::App*>> commands_;
};

}  // namespace

std::string usage_text() {
    Invocation unused;
    return CommandLine(unused).help();
}

Invocation parse_command_line(const std::vector<std::string>& args, const char* socket_env) {
    Invocation invocation;
    CommandLine(invocation).parse(args, socket_env);
    return invocation;
}

}  // namespace sluice::cli
