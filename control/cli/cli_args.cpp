// SPDX-License-Identifier: Apache-2.0
#include "cli_args.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <optional>
#include <span>
#include <utility>

#include "control_protocol.h"

namespace sluice::cli {
namespace {

using json = nlohmann::json;

constexpr std::string_view kGlobalOptionList = "--socket PATH, --json, --timeout MS, --help, --version";
// An upper bound that keeps milliseconds inside int for poll().
constexpr std::uint64_t kMaxTimeoutMs = 24ULL * 60 * 60 * 1000;

std::string in_quotes(std::string_view text) { return "\"" + std::string(text) + "\""; }

// `what` names the option or argument: `--if-version: "x" is not a number`.
std::optional<std::string> parse_number(std::string_view what, std::string_view text, std::uint64_t* value) {
    const char* text_end = text.data() + text.size();
    const auto [end, error] = std::from_chars(text.data(), text_end, *value);
    if (text.empty() || end != text_end) return std::string(what) + ": " + in_quotes(text) + " is not a number";
    if (error == std::errc::result_out_of_range) return std::string(what) + ": " + in_quotes(text) + " is too large";
    return std::nullopt;
}

bool is_global_option(std::string_view name) {
    return name == "--socket" || name == "--json" || name == "--timeout" || name == "--version";
}

struct OptionSpec {
    std::string_view name;  // "--mode"
    bool takes_value;
};

// A command's arguments split into positionals and options (later repeats
// win). Options may come before, between or after positionals; "--" ends
// them and a lone "-" is a positional (stdin).
struct CommandArgs {
    std::vector<std::string> positionals;
    std::map<std::string, std::string, std::less<>> options;
    bool help = false;
    std::string error;

    bool has(std::string_view name) const { return options.find(name) != options.end(); }
};

CommandArgs split_command_args(std::string_view command, std::span<const std::string> args,
                               std::span<const OptionSpec> known) {
    CommandArgs split;
    bool options_ended = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& arg = args[i];
        if (options_ended || arg.size() < 2 || arg[0] != '-') {
            split.positionals.push_back(arg);
            continue;
        }
        if (arg == "--") {
            options_ended = true;
            continue;
        }
        const std::size_t equals = arg.find('=');
        const std::string name = arg.substr(0, equals);
        if (name == "-h" || name == "--help") {
            split.help = true;
            return split;
        }
        const OptionSpec* spec = nullptr;
        for (const OptionSpec& candidate : known) {
            if (candidate.name == name) spec = &candidate;
        }
        if (spec == nullptr) {
            split.error = std::string(command) + ": unknown option " + name;
            if (is_global_option(name)) split.error += " (global options go before the command)";
            return split;
        }
        if (!spec->takes_value) {
            if (equals != std::string::npos) {
                split.error = std::string(command) + ": " + name + " takes no value";
                return split;
            }
            split.options[name] = "";
            continue;
        }
        if (equals != std::string::npos) {
            split.options[name] = arg.substr(equals + 1);
        } else if (i + 1 < args.size()) {
            split.options[name] = args[++i];
        } else {
            split.error = std::string(command) + ": " + name + " needs a value";
            return split;
        }
    }
    return split;
}

// Checks the number of positionals: `names` are the required ones, then up
// to `optional_count` more.
std::string check_positionals(std::string_view command, const CommandArgs& split,
                              std::initializer_list<std::string_view> names, std::size_t optional_count = 0) {
    const std::size_t given = split.positionals.size();
    if (given < names.size()) {
        std::string missing;
        for (auto name = names.begin() + static_cast<std::ptrdiff_t>(given); name != names.end(); ++name) {
            missing += (missing.empty() ? "" : " and ") + std::string(*name);
        }
        return std::string(command) + ": missing " + missing;
    }
    if (given > names.size() + optional_count) {
        return std::string(command) + ": unexpected argument " +
               in_quotes(split.positionals[names.size() + optional_count]);
    }
    return {};
}

// The options each command takes; the rest take none.
std::vector<OptionSpec> options_of(std::string_view command) {
    if (command == "attach") return {{"--mode", true}};
    if (command == "policy push") return {{"--if-version", true}, {"--dry-run", false}};
    if (command == "policy show") return {{"--source", false}};
    if (command == "policy rollback") return {{"--to", true}, {"--dry-run", false}};
    if (command == "stats") return {{"--watch", false}, {"--interval", true}, {"--count", true}};
    if (command == "top") return {{"-n", true}, {"--watch", false}, {"--interval", true}, {"--count", true}};
    return {};
}

// "0.1", "3600": a bound as the user would type it.
std::string seconds_text(double seconds) {
    char text[32];
    std::snprintf(text, sizeof(text), "%g", seconds);
    return text;
}

// --watch, --interval S and --count K of stats and top; returns the usage
// error. --interval and --count alone would silently do nothing, so they are
// refused without --watch.
std::string watch_options(std::string_view command, const CommandArgs& split, Invocation& invocation) {
    invocation.watch = split.has("--watch");
    for (const std::string_view option : {"--interval", "--count"}) {
        if (split.has(option) && !invocation.watch)
            return std::string(command) + ": " + std::string(option) + " needs --watch";
    }
    if (const auto interval = split.options.find("--interval"); interval != split.options.end()) {
        const std::string& text = interval->second;
        const char* text_end = text.data() + text.size();
        double seconds = 0;
        const auto [end, error] = std::from_chars(text.data(), text_end, seconds, std::chars_format::fixed);
        const std::string range = seconds_text(kMinWatchIntervalS) + ".." + seconds_text(kMaxWatchIntervalS);
        if (text.empty() || end != text_end || (error != std::errc() && error != std::errc::result_out_of_range) ||
            std::isnan(seconds)) {
            return "--interval: " + in_quotes(text) + " is not a number of seconds (" + range + ")";
        }
        if (error == std::errc::result_out_of_range ||
            !(seconds >= kMinWatchIntervalS && seconds <= kMaxWatchIntervalS)) {
            return "--interval: " + text + " is not in " + range + " seconds";
        }
        invocation.interval_s = seconds;
    }
    if (const auto count = split.options.find("--count"); count != split.options.end()) {
        if (auto error = parse_number("--count", count->second, &invocation.count)) return *error;
        if (invocation.count == 0) return "--count: 0 refreshes; give 1 or more (without --count: until Ctrl-C)";
    }
    return {};
}

// Parses `text` as a version number into args[key]; returns the usage error.
std::string version_arg(std::string_view what, std::string_view text, const char* key, Invocation& invocation) {
    std::uint64_t version = 0;
    if (auto error = parse_number(what, text, &version)) return *error;
    invocation.args[key] = version;
    return {};
}

// Fills `invocation` for one verb's command line; returns the usage error, if
// any.
std::string parse_known_command(Verb verb, std::span<const std::string> rest, Invocation& invocation) {
    const std::string_view command = command_of(verb);
    invocation.command = verb;
    invocation.verb = std::string(spec_of(verb).wire);
    const CommandArgs split = split_command_args(command, rest, options_of(command));
    if (split.help) {
        invocation.action = Invocation::Action::help;
        return {};
    }
    if (!split.error.empty()) return split.error;
    const std::vector<std::string>& positionals = split.positionals;

    if (verb == Verb::status || verb == Verb::policy_history) {
        return check_positionals(command, split, {});
    }
    if (verb == Verb::stats || verb == Verb::top) {
        if (auto error = check_positionals(command, split, {}); !error.empty()) return error;
        if (auto error = watch_options(command, split, invocation); !error.empty()) return error;
        if (verb == Verb::stats) return {};
        // Always sent, so what is asked for does not depend on sluiced's default.
        std::uint64_t n = kDefaultTopSources;
        if (const auto given = split.options.find("-n"); given != split.options.end()) {
            if (auto error = parse_number("-n", given->second, &n)) return *error;
            if (n < 1 || n > static_cast<std::uint64_t>(kMaxTopSources)) {
                return "-n: " + given->second + " is not in 1.." + std::to_string(kMaxTopSources);
            }
        }
        invocation.args["n"] = n;
        return {};
    }
    if (verb == Verb::attach || verb == Verb::detach) {
        if (auto error = check_positionals(command, split, {"IFNAME"}); !error.empty()) return error;
        invocation.args["interface"] = positionals[0];
        if (const auto mode = split.options.find("--mode"); mode != split.options.end()) {
            if (mode->second != "native" && mode->second != "generic") {
                return "attach: --mode: " + in_quotes(mode->second) + " is neither native nor generic";
            }
            invocation.args["mode"] = mode->second;
        }
        return {};
    }
    if (verb == Verb::policy_push) {
        if (auto error = check_positionals(command, split, {"FILE"}); !error.empty()) return error;
        invocation.policy_file = positionals[0];
        invocation.dry_run = split.has("--dry-run");
        // The daemon names this path in policy errors: "<stdin>:3:7: ...".
        invocation.args["path"] = invocation.policy_file == "-" ? "<stdin>" : invocation.policy_file;
        invocation.args["dry_run"] = invocation.dry_run;
        const auto if_version = split.options.find("--if-version");
        if (if_version == split.options.end()) return {};
        return version_arg("--if-version", if_version->second, "if_version", invocation);
    }
    if (verb == Verb::policy_show) {
        invocation.show_source = split.has("--source");
        if (auto error = check_positionals(command, split, {}, 1); !error.empty()) return error;
        if (positionals.empty()) return {};
        return version_arg("policy show: N", positionals[0], "version", invocation);
    }
    if (verb == Verb::policy_rollback) {
        if (auto error = check_positionals(command, split, {}); !error.empty()) return error;
        invocation.dry_run = split.has("--dry-run");
        invocation.args["dry_run"] = invocation.dry_run;
        const auto to = split.options.find("--to");
        if (to == split.options.end()) return {};
        return version_arg("--to", to->second, "to", invocation);
    }
    // policy diff, the last one.
    if (auto error = check_positionals(command, split, {"A", "B"}); !error.empty()) return error;
    if (auto error = version_arg("policy diff: A", positionals[0], "from", invocation); !error.empty()) return error;
    return version_arg("policy diff: B", positionals[1], "to", invocation);
}

// "status, attach, detach, policy, stats, top": the first word of every
// command, and "push, show, ...": the second word of policy's.
std::string command_words(std::string_view first_word = {}) {
    std::string list;
    for (const VerbSpec& spec : kVerbs) {
        std::string_view command = command_of(spec.verb);
        const std::size_t space = command.find(' ');
        std::string_view word = command.substr(0, space);
        if (!first_word.empty()) {
            if (word != first_word || space == std::string_view::npos) continue;
            word = command.substr(space + 1);
        }
        if (list.find(word) == std::string::npos) list += (list.empty() ? "" : ", ") + std::string(word);
    }
    return list;
}

std::optional<Verb> verb_of_command(std::string_view command) {
    for (const VerbSpec& spec : kVerbs)
        if (command_of(spec.verb) == command) return spec.verb;
    return std::nullopt;
}

// Dispatches COMMAND (and policy's verb) so that only real names reach
// parse_known_command: "policy push" is two arguments, never one.
std::string parse_command(std::string_view command, std::span<const std::string> rest, Invocation& invocation) {
    if (command != "policy") {
        if (const auto verb = verb_of_command(command)) return parse_known_command(*verb, rest, invocation);
        return "unknown command " + in_quotes(command) + " (commands: " + command_words() +
               "; sluicectl --help lists them)";
    }
    if (rest.empty()) return "policy: missing what to do (" + command_words("policy") + ")";
    const std::string_view verb = rest[0];
    if (verb == "-h" || verb == "--help") {
        invocation.action = Invocation::Action::help;
        return {};
    }
    if (const auto known = verb_of_command("policy " + rest[0]))
        return parse_known_command(*known, rest.subspan(1), invocation);
    return "policy: unknown verb " + in_quotes(verb) + " (" + command_words("policy") + ")";
}

}  // namespace

std::string usage_text() {
    std::size_t width = 0;
    for (const VerbSpec& spec : kVerbs) width = std::max(width, spec.synopsis.size());
    std::string text =
        "usage: sluicectl [--socket PATH] [--json] [--timeout MS] COMMAND ...\n"
        "\n"
        "Controls sluiced, the Sluice daemon, over its control socket.\n"
        "\n"
        "commands:\n";
    std::string changing;
    for (const VerbSpec& spec : kVerbs) {
        text += "  " + std::string(spec.synopsis) + std::string(width - spec.synopsis.size() + 2, ' ') +
                std::string(spec.help) + "\n";
        if (spec.changes_state) changing += (changing.empty() ? "" : ", ") + std::string(command_of(spec.verb));
    }
    text += "\nchanging what sluiced enforces (logged with your uid): " + changing + "\n";
    text +=
        "\n"
        "options (before COMMAND):\n"
        "  --socket PATH  control socket (default: $SLUICE_SOCKET, else /run/sluice/sluiced.sock)\n"
        "  --json         print the daemon's result as one JSON document; errors as {\"error\": {...}}\n"
        "  --timeout MS   give up after MS milliseconds (default 10000; 0 waits forever)\n"
        "  -h, --help     print this help\n"
        "  --version      print sluicectl's version\n"
        "\n"
        "watching (stats, top):\n"
        "  --watch        ask again every S seconds until Ctrl-C, like top(1); the screen is cleared\n"
        "                 only on a terminal; with --json, one JSON document per line per refresh\n"
        "  --interval S   seconds between refreshes (default 1; 0.1..3600)\n"
        "  --count K      stop after K refreshes\n"
        "\n"
        "exit status: 0 done (also a watch stopped by Ctrl-C or SIGTERM); 1 refused by sluiced (invalid\n"
        "policy, internal error) or FILE unreadable; 2 usage error; 3 sluiced not reachable (not running,\n"
        "no socket, timed out, or gone during a watch); 4 permission denied; 5 conflict (--if-version is\n"
        "no longer the current version)\n";
    return text;
}

Invocation parse_command_line(const std::vector<std::string>& args, const char* socket_env) {
    Invocation invocation;
    const bool socket_from_env = socket_env != nullptr && *socket_env != '\0';
    invocation.global.socket_path = socket_from_env ? socket_env : std::string(kDefaultSocketPath);
    bool socket_given = false;

    std::size_t next = 0;
    for (; next < args.size(); ++next) {
        const std::string& arg = args[next];
        if (arg == "--") {
            ++next;
            break;
        }
        if (arg.size() < 2 || arg[0] != '-') break;
        const std::size_t equals = arg.find('=');
        const std::string name = arg.substr(0, equals);
        const bool takes_value = name == "--socket" || name == "--timeout";
        if (name == "-h" || name == "--help" || name == "--version" || name == "--json") {
            if (equals != std::string::npos) {
                invocation.usage_error = name + " takes no value";
                return invocation;
            }
            if (name == "--json") {
                invocation.global.json = true;
                continue;
            }
            invocation.action = name == "--version" ? Invocation::Action::version : Invocation::Action::help;
            return invocation;
        }
        if (!takes_value) {
            invocation.usage_error =
                "unknown option " + name + " (options before the command: " + std::string(kGlobalOptionList) + ")";
            return invocation;
        }
        std::string value;
        if (equals != std::string::npos) {
            value = arg.substr(equals + 1);
        } else if (next + 1 < args.size()) {
            value = args[++next];
        } else {
            invocation.usage_error = name + (name == "--socket" ? " needs a PATH" : " needs a number of milliseconds");
            return invocation;
        }
        if (name == "--socket") {
            invocation.global.socket_path = value;
            socket_given = true;
            continue;
        }
        std::uint64_t timeout_ms = 0;
        if (auto error = parse_number("--timeout", value, &timeout_ms)) {
            invocation.usage_error = *error;
            return invocation;
        }
        if (timeout_ms > kMaxTimeoutMs) {
            invocation.usage_error = "--timeout: " + value + " ms is more than a day (" +
                                     std::to_string(kMaxTimeoutMs) + "); 0 waits forever";
            return invocation;
        }
        invocation.global.timeout_ms = timeout_ms == 0 ? -1 : static_cast<int>(timeout_ms);
    }

    if (const Result<sockaddr_un> address = unix_address(invocation.global.socket_path); !address.ok()) {
        const std::string source = socket_given ? "--socket" : socket_from_env ? "$SLUICE_SOCKET" : "socket";
        invocation.usage_error = source + ": " + address.error().message;
        return invocation;
    }
    if (next == args.size()) {
        invocation.usage_error = "missing command (commands: " + command_words() + "; sluicectl --help lists them)";
        return invocation;
    }
    const std::span<const std::string> rest(args.data() + next + 1, args.size() - next - 1);
    invocation.usage_error = parse_command(args[next], rest, invocation);
    return invocation;
}

}  // namespace sluice::cli
