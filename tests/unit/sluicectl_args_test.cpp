// SPDX-License-Identifier: Apache-2.0
// sluicectl's command line: what each accepted one asks sluiced for, the usage
// error of each mistake, and the help of the top command and of each command.
#include <gtest/gtest.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_args.h"

namespace sluice::cli::sluicectl_args_test {
namespace {

using json = nlohmann::json;

Invocation parse(std::vector<std::string> args, const char* socket_env = nullptr) {
    return parse_command_line(args, socket_env);
}

// ---- command line ----------------------------------------------------------

TEST(SluicectlArgs, GlobalDefaultsAndEnvironment) {
    const Invocation plain = parse({"status"});
    ASSERT_TRUE(plain.ok()) << plain.usage_error;
    EXPECT_EQ(plain.global.socket_path, "/run/sluice/sluiced.sock");
    EXPECT_FALSE(plain.global.json);
    EXPECT_EQ(plain.global.timeout_ms, 10000);
    EXPECT_EQ(plain.verb, "status");
    EXPECT_EQ(plain.args, json::object());

    EXPECT_EQ(parse({"status"}, "/tmp/env.sock").global.socket_path, "/tmp/env.sock");
    EXPECT_EQ(parse({"status"}, "").global.socket_path, "/run/sluice/sluiced.sock");
    const Invocation given = parse({"--socket", "/tmp/a.sock", "--json", "--timeout=250", "stats"}, "/tmp/env.sock");
    ASSERT_TRUE(given.ok()) << given.usage_error;
    EXPECT_EQ(given.global.socket_path, "/tmp/a.sock");
    EXPECT_TRUE(given.global.json);
    EXPECT_EQ(given.global.timeout_ms, 250);
    EXPECT_EQ(given.verb, "stats");
    EXPECT_EQ(parse({"--timeout", "0", "status"}).global.timeout_ms, -1);  // waits forever
}

TEST(SluicectlArgs, EachCommandBuildsItsRequest) {
    struct Case {
        std::vector<std::string> args;
        std::string verb;
        json request_args;
    };
    const Case cases[] = {
        {{"attach", "sl0"}, "attach", {{"interface", "sl0"}}},
        {{"attach", "--mode", "generic", "sl0"}, "attach", {{"interface", "sl0"}, {"mode", "generic"}}},
        {{"attach", "sl0", "--mode=native"}, "attach", {{"interface", "sl0"}, {"mode", "native"}}},
        {{"detach", "sl0"}, "detach", {{"interface", "sl0"}}},
        {{"policy", "push", "p.toml"}, "policy.push", {{"path", "p.toml"}, {"dry_run", false}}},
        {{"policy", "push", "--dry-run", "--if-version", "6", "p.toml"},
         "policy.push",
         {{"path", "p.toml"}, {"dry_run", true}, {"if_version", 6}}},
        {{"policy", "push", "-"}, "policy.push", {{"path", "<stdin>"}, {"dry_run", false}}},
        {{"policy", "push", "--", "-odd.toml"}, "policy.push", {{"path", "-odd.toml"}, {"dry_run", false}}},
        {{"policy", "show"}, "policy.show", json::object()},
        {{"policy", "show", "3", "--source"}, "policy.show", {{"version", 3}}},
        {{"policy", "history"}, "policy.history", json::object()},
        {{"policy", "rollback"}, "policy.rollback", {{"dry_run", false}}},
        {{"policy", "rollback", "--to", "2", "--dry-run"}, "policy.rollback", {{"to", 2}, {"dry_run", true}}},
        {{"policy", "diff", "1", "4"}, "policy.diff", {{"from", 1}, {"to", 4}}},
        {{"stats"}, "stats", json::object()},
        {{"stats", "--watch"}, "stats", json::object()},
        {{"top"}, "top", {{"n", 20}}},  // the default is sent, not left to sluiced
        {{"top", "-n", "5"}, "top", {{"n", 5}}},
        {{"top", "--watch", "-n=1000"}, "top", {{"n", 1000}}},
        {{"ban", "203.0.113.0/24", "--for", "10m"},
         "ban",
         {{"prefix", "203.0.113.0/24"}, {"for_s", 600}, {"force", false}}},
        {{"ban", "--for=1d", "2001:db8::/48", "--reason", "incident 42: SYN flood", "--force"},
         "ban",
         {{"prefix", "2001:db8::/48"}, {"for_s", 86400}, {"reason", "incident 42: SYN flood"}, {"force", true}}},
        {{"ban", "203.0.113.7", "--for", "90s"}, "ban", {{"prefix", "203.0.113.7"}, {"for_s", 90}, {"force", false}}},
        {{"ban", "203.0.113.0/24", "--for", "2000ms"},
         "ban",
         {{"prefix", "203.0.113.0/24"}, {"for_s", 2}, {"force", false}}},
        {{"unban", "203.0.113.0/24"}, "unban", {{"prefix", "203.0.113.0/24"}}},
        {{"bans"}, "bans", json::object()},
    };
    for (const Case& test : cases) {
        const Invocation invocation = parse(test.args);
        ASSERT_TRUE(invocation.ok()) << test.args[0] << ": " << invocation.usage_error;
        EXPECT_EQ(invocation.verb, test.verb);
        EXPECT_EQ(invocation.args, test.request_args) << invocation.args.dump();
    }
    EXPECT_EQ(parse({"policy", "push", "-"}).policy_file, "-");
    EXPECT_TRUE(parse({"policy", "show", "--source"}).show_source);
    EXPECT_TRUE(parse({"policy", "rollback", "--dry-run"}).dry_run);
}

TEST(SluicectlArgs, UsageErrorsSayWhatIsWrong) {
    const std::pair<std::vector<std::string>, std::string> cases[] = {
        {{},
         "missing command (commands: status, attach, detach, policy, stats, top, ban, unban, bans; sluicectl --help "
         "lists them)"},
        {{"frobnicate"},
         "unknown command \"frobnicate\" (commands: status, attach, detach, policy, stats, top, ban, unban, bans; "
         "sluicectl --help lists them)"},
        {{"policy", "push"}, "policy push: FILE is required"},
        {{"policy", "push", "p.toml", "--if-version", "x"}, "policy push: --if-version: \"x\" is not a number"},
        {{"policy", "push", "p.toml", "--if-version", "-1"}, "policy push: --if-version: \"-1\" is not a number"},
        {{"policy", "push", "p.toml", "--if-version"}, "policy push: --if-version: 1 required N missing"},
        {{"policy", "push", "p.toml", "--if-version", "99999999999999999999"},
         "policy push: --if-version: \"99999999999999999999\" is too large"},
        {{"policy", "push", "a.toml", "b.toml"}, "policy push: unexpected argument \"b.toml\""},
        {{"policy", "push", "p.toml", "--dry-run=yes"}, "policy push: --dry-run: takes no value"},
        {{"policy"},
         "policy: missing command (commands: push, show, history, rollback, diff; sluicectl policy --help lists "
         "them)"},
        {{"policy", "apply"},
         "policy: unknown command \"apply\" (commands: push, show, history, rollback, diff; sluicectl policy --help "
         "lists them)"},
        {{"policy", "show", "latest"}, "policy show: N: \"latest\" is not a number"},
        {{"policy", "diff", "1"}, "policy diff: B is required"},
        {{"policy", "diff"}, "policy diff: A is required"},
        {{"policy", "diff", "1", "x"}, "policy diff: B: \"x\" is not a number"},
        {{"policy", "rollback", "--to", "two"}, "policy rollback: --to: \"two\" is not a number"},
        {{"attach"}, "attach: IFNAME is required"},
        {{"attach", "sl0", "--mode", "fast"}, "attach: --mode: \"fast\" is neither native nor generic"},
        {{"detach", "sl0", "sl1"}, "detach: unexpected argument \"sl1\""},
        {{"status", "--json"}, "status: unknown option --json (global options go before the command)"},
        {{"status", "now"}, "status: unexpected argument \"now\""},
        {{"--timeout", "soon", "status"}, "--timeout: \"soon\" is not a number"},
        {{"--timeout", "100000000", "status"},
         "--timeout: 100000000 ms is more than a day (86400000); 0 waits forever"},
        {{"--socket"}, "--socket: 1 required PATH missing"},
        {{"--verbose", "status"}, "unknown option --verbose"},
    };
    for (const auto& [args, expected] : cases) {
        const Invocation invocation = parse(args);
        EXPECT_EQ(invocation.usage_error, expected) << (args.empty() ? "" : args[0]);
    }
    const Invocation overlong = parse({"--socket", std::string(200, 'x'), "status"});
    EXPECT_NE(overlong.usage_error.find("--socket: control socket path"), std::string::npos) << overlong.usage_error;
    const Invocation overlong_env = parse({"status"}, std::string(200, 'x').c_str());
    EXPECT_EQ(overlong_env.usage_error.rfind("$SLUICE_SOCKET: ", 0), 0U) << overlong_env.usage_error;
    // --json before the error still shapes it.
    EXPECT_TRUE(parse({"--json", "nonsense"}).global.json);
}

TEST(SluicectlArgs, BanRefusesWhatSluicedWould) {
    EXPECT_TRUE(parse({"ban", "203.0.113.0/24", "--for", "30d"}).ok());
    EXPECT_TRUE(parse({"ban", "203.0.113.0/24", "--for", "1s", "--reason", "caf\u00e9 \"x\""}).ok());
    EXPECT_EQ(parse({"ban", "203.0.113.0/24", "--for", "1s", "--reason", ""}).args["reason"], "");
    const std::pair<std::vector<std::string>, std::string> cases[] = {
        {{"ban"}, "ban: PREFIX is required"},
        {{"ban", "203.0.113.0/24"}, "ban: --for is required"},
        {{"ban", "203.0.113.5/24", "--for", "10m"}, "ban: PREFIX: \"203.0.113.5/24\" has host bits set past /24"},
        {{"ban", "example.org", "--for", "10m"}, "ban: PREFIX: \"example.org\" is not an IPv4 or IPv6 prefix"},
        {{"ban", "0.0.0.0/0", "--for", "10m"},
         "ban: PREFIX: \"0.0.0.0/0\" is every address of its family; a ban is for a prefix (a class with action = "
         "\"drop\" drops everything)"},
        {{"ban", "203.0.113.0/24", "--for", "10"},
         "ban: --for: expected a duration such as \"1s\", \"10m\" or \"500ms\" (an integer followed by ms, s, m, h or "
         "d), got \"10\""},
        {{"ban", "203.0.113.0/24", "--for", "31d"}, "ban: --for: \"31d\" is outside 1s..30d"},
        {{"ban", "203.0.113.0/24", "--for", "0s"}, "ban: --for: \"0s\" is outside 1s..30d"},
        {{"ban", "203.0.113.0/24", "--for", "1500ms"}, "ban: --for: \"1500ms\" is not a whole number of seconds"},
        {{"ban", "203.0.113.0/24", "--for", "1m", "--reason", "two\nlines"},
         "ban: --reason: reason has a control character (U+000A at byte 3); give it on one line, printable"},
        {{"ban", "203.0.113.0/24", "--for", "1m", "--reason", std::string(201, 'x')},
         "ban: --reason: reason is 201 bytes; at most 200"},
        {{"ban", "203.0.113.0/24", "--for", "1m", "--reason", "\xff"},
         "ban: --reason: reason is not UTF-8 (at byte 0)"},
        {{"ban", "203.0.113.0/24", "--for", "1m", "--force=yes"}, "ban: --force: takes no value"},
        {{"unban"}, "unban: PREFIX is required"},
        {{"unban", "203.0.113.0/24", "--for", "1m"}, "unban: unknown option --for"},
        {{"unban", "10.0.0.1/8"}, "unban: PREFIX: \"10.0.0.1/8\" has host bits set past /8"},
        {{"bans", "203.0.113.0/24"}, "bans: unexpected argument \"203.0.113.0/24\""},
    };
    for (const auto& [args, expected] : cases) EXPECT_EQ(parse(args).usage_error, expected) << args.back();
}

TEST(SluicectlArgs, TopTakesOneToAThousandSources) {
    EXPECT_EQ(parse({"top", "-n", "1"}).args, (json{{"n", 1}}));
    EXPECT_EQ(parse({"top", "-n", "1000"}).args, (json{{"n", 1000}}));
    EXPECT_EQ(parse({"top"}).command, Verb::top);
    const std::pair<std::vector<std::string>, std::string> cases[] = {
        {{"top", "-n", "0"}, "top: -n: 0 is not in 1..1000"},
        {{"top", "-n", "1001"}, "top: -n: 1001 is not in 1..1000"},
        {{"top", "-n", "-3"}, "top: -n: \"-3\" is not a number"},
        {{"top", "-n", "ten"}, "top: -n: \"ten\" is not a number"},
        {{"top", "-n"}, "top: -n: 1 required N missing"},
        {{"top", "10.2.0.1"}, "top: unexpected argument \"10.2.0.1\""},
        {{"stats", "-n", "5"}, "stats: unknown option -n"},
    };
    for (const auto& [args, expected] : cases) EXPECT_EQ(parse(args).usage_error, expected) << args.back();
}

TEST(SluicectlArgs, WatchIntervalAndCount) {
    for (const char* command : {"stats", "top"}) {
        const Invocation once = parse({command});
        ASSERT_TRUE(once.ok()) << once.usage_error;
        EXPECT_FALSE(once.watch);
        EXPECT_EQ(once.interval_s, 1.0);
        EXPECT_EQ(once.count, 0U);

        const Invocation watching = parse({command, "--watch"});
        ASSERT_TRUE(watching.ok()) << watching.usage_error;
        EXPECT_TRUE(watching.watch);
        EXPECT_EQ(watching.interval_s, 1.0);
        EXPECT_EQ(watching.count, 0U) << "until stopped";

        const Invocation paced = parse({command, "--watch", "--interval", "0.5", "--count=3"});
        ASSERT_TRUE(paced.ok()) << paced.usage_error;
        EXPECT_EQ(paced.interval_s, 0.5);
        EXPECT_EQ(paced.count, 3U);
        EXPECT_EQ(parse({command, "--interval=0.1", "--watch"}).interval_s, 0.1);
        EXPECT_EQ(parse({command, "--watch", "--interval", "3600"}).interval_s, 3600.0);
    }
    const std::pair<std::vector<std::string>, std::string> cases[] = {
        {{"stats", "--interval", "2"}, "stats: --interval requires --watch"},
        {{"top", "--count", "2"}, "top: --count requires --watch"},
        {{"stats", "--watch", "--interval", "0.05"}, "stats: --interval: 0.05 is not in 0.1..3600 seconds"},
        {{"stats", "--watch", "--interval", "0"}, "stats: --interval: 0 is not in 0.1..3600 seconds"},
        {{"stats", "--watch", "--interval", "3601"}, "stats: --interval: 3601 is not in 0.1..3600 seconds"},
        {{"stats", "--watch", "--interval", "-1"}, "stats: --interval: -1 is not in 0.1..3600 seconds"},
        {{"stats", "--watch", "--interval", "1e400"},
         "stats: --interval: \"1e400\" is not a number of seconds (0.1..3600)"},
        {{"top", "--watch", "--interval", "1s"}, "top: --interval: \"1s\" is not a number of seconds (0.1..3600)"},
        {{"top", "--watch", "--interval", "nan"}, "top: --interval: \"nan\" is not a number of seconds (0.1..3600)"},
        {{"top", "--watch", "--interval", "inf"}, "top: --interval: inf is not in 0.1..3600 seconds"},
        {{"top", "--watch", "--interval="}, "top: --interval: 1 required S missing"},
        {{"top", "--watch", "--interval"}, "top: --interval: 1 required S missing"},
        {{"top", "--watch", "--count", "0"},
         "top: --count: 0 refreshes; give 1 or more (without --count: until Ctrl-C)"},
        {{"top", "--watch", "--count", "two"}, "top: --count: \"two\" is not a number"},
        {{"stats", "--watch=yes"}, "stats: --watch: takes no value"},
        {{"status", "--watch"}, "status: unknown option --watch"},
        {{"--watch", "stats"}, "unknown option --watch"},
    };
    for (const auto& [args, expected] : cases) {
        EXPECT_EQ(parse(args).usage_error, expected) << args.back();
    }
}

TEST(SluicectlArgs, HelpAndVersionWinAnywhere) {
    EXPECT_EQ(parse({"--help"}).action, Invocation::Action::help);
    EXPECT_EQ(parse({"-h", "nonsense"}).action, Invocation::Action::help);
    EXPECT_EQ(parse({"policy", "push", "--help"}).action, Invocation::Action::help);
    EXPECT_EQ(parse({"policy", "--help"}).action, Invocation::Action::help);
    EXPECT_EQ(parse({"top", "--watch", "-h"}).action, Invocation::Action::help);
    EXPECT_EQ(parse({"--version"}).action, Invocation::Action::version);
    // Also after a mistake: CLI11 checks values before it looks at --help.
    EXPECT_EQ(parse({"nonsense", "-h"}).action, Invocation::Action::help);
    EXPECT_EQ(parse({"top", "-n", "0", "--help"}).action, Invocation::Action::help);
    EXPECT_EQ(parse({"policy", "show", "latest", "-h"}).action, Invocation::Action::help);
    EXPECT_EQ(parse({"--version", "frobnicate"}).action, Invocation::Action::version);
    EXPECT_EQ(parse({"--version"}).output.rfind("sluicectl ", 0), 0U);
}

// `sluicectl COMMAND --help` is the command's own: its usage line, its
// arguments and options, each with what it does.
TEST(SluicectlArgs, EachCommandHasItsOwnHelp) {
    for (const VerbSpec& spec : kVerbs) {
        std::vector<std::string> args;
        const std::string command(command_of(spec.verb));
        for (std::size_t at = 0, space = 0; space != std::string::npos; at = space + 1) {
            space = command.find(' ', at);
            args.push_back(command.substr(at, space - at));
        }
        args.push_back("--help");
        const Invocation help = parse(args);
        EXPECT_EQ(help.action, Invocation::Action::help) << command;
        EXPECT_EQ(help.output.rfind(std::string(spec.help) + "\nUsage: sluicectl " + command + " [OPTIONS]", 0), 0U)
            << help.output;
    }
    const std::string push = parse({"policy", "push", "-h"}).output;
    for (const char* line : {"Usage: sluicectl policy push [OPTIONS] FILE\n", "\n  FILE REQUIRED ",
                             "\n  --if-version N ", "\n  --dry-run "}) {
        EXPECT_NE(push.find(line), std::string::npos) << line << " in\n" << push;
    }
    const std::string top = parse({"top", "--help"}).output;
    for (const char* line : {"\n  -n N ", "(1..1000; default 20)", "\n  --watch ", "\n  --interval S Needs: --watch ",
                             "(default 1; 0.1..3600)", "\n  --count K Needs: --watch "}) {
        EXPECT_NE(top.find(line), std::string::npos) << line << " in\n" << top;
    }
    const std::string policy = parse({"policy", "--help"}).output;
    EXPECT_NE(policy.find("Usage: sluicectl policy [OPTIONS] COMMAND\n"), std::string::npos) << policy;
    for (const VerbSpec& spec : kVerbs) {
        const std::string_view command = command_of(spec.verb);
        if (!command.starts_with("policy ")) continue;
        EXPECT_NE(policy.find("\n  " + std::string(command.substr(7)) + " "), std::string::npos) << command;
    }
}

// The hidden --help-man (command_line.h) is what the man page's OPTIONS and
// COMMANDS are rendered from: the definitions --help prints, as Markdown,
// every command with its arguments. --help does not list it.
TEST(SluicectlArgs, HelpManGivesTheManPagesOptionsAndCommands) {
    const Invocation man = parse({"--help-man"});
    ASSERT_EQ(man.action, Invocation::Action::help) << man.usage_error;
    EXPECT_TRUE(man.ok()) << man.usage_error;
    EXPECT_EQ(man.output.rfind("# OPTIONS\n\n**-h, --help**\n:   ", 0), 0U) << man.output;
    for (const char* entry :
         {"\n**--socket** PATH\n:   control socket (default: $SLUICE\\_SOCKET, else /run/sluice/sluiced.sock)\n",
          "\n**--timeout** MS\n:   give up after MS milliseconds", "\n# COMMANDS\n",
          "\n### policy push\n\nvalidate and apply a policy (- reads stdin)\n\n**FILE** REQUIRED\n:   the policy",
          "\n**--interval** S Needs: --watch\n:   seconds between refreshes (default 1; 0.1..3600)\n"}) {
        EXPECT_NE(man.output.find(entry), std::string::npos) << entry << " in\n" << man.output;
    }
    for (const VerbSpec& spec : kVerbs)
        EXPECT_NE(man.output.find("\n### " + std::string(command_of(spec.verb)) + "\n\n"), std::string::npos)
            << command_of(spec.verb);
    EXPECT_EQ(parse({"--help"}).output.find("--help-man"), std::string::npos);
}

// CLI11's own number conversion takes "010" as octal, "0x10" as hex and "-1"
// as 2^64 - 1; sluicectl's numbers stay decimal.
TEST(SluicectlArgs, NumbersAreDecimal) {
    EXPECT_EQ(parse({"top", "-n", "010"}).args, (json{{"n", 10}}));
    EXPECT_EQ(parse({"policy", "diff", "010", "0"}).args, (json{{"from", 10}, {"to", 0}}));
    EXPECT_EQ(parse({"--timeout", "0100", "status"}).global.timeout_ms, 100);
    EXPECT_EQ(parse({"top", "-n", "0x10"}).usage_error, "top: -n: \"0x10\" is not a number");
    EXPECT_EQ(parse({"policy", "show", "+3"}).usage_error, "policy show: N: \"+3\" is not a number");
    EXPECT_EQ(parse({"policy", "show", " 3"}).usage_error, "policy show: N: \" 3\" is not a number");
    EXPECT_EQ(parse({"stats", "--watch", "--interval", "0x1p-1"}).usage_error,
              "stats: --interval: \"0x1p-1\" is not a number of seconds (0.1..3600)");
}

// An option given twice keeps its last value, and only that one is checked,
// as before CLI11.
TEST(SluicectlArgs, TheLastOfARepeatedOptionCounts) {
    const Invocation top = parse({"top", "-n", "0", "--watch", "-n=7", "--count", "x", "--count", "2"});
    ASSERT_TRUE(top.ok()) << top.usage_error;
    EXPECT_EQ(top.args, (json{{"n", 7}}));
    EXPECT_EQ(top.count, 2U);
    EXPECT_EQ(parse({"--socket", "/tmp/a.sock", "--socket=/tmp/b.sock", "status"}).global.socket_path, "/tmp/b.sock");
    EXPECT_EQ(parse({"attach", "sl0", "--mode", "fast", "--mode", "generic"}).args,
              (json{{"interface", "sl0"}, {"mode", "generic"}}));
}

// verbs.h declares every verb once; sluicectl knows each by its command and
// sends it under its wire name.
TEST(SluicectlArgs, EveryDeclaredVerbIsACommand) {
    for (const VerbSpec& spec : kVerbs) {
        EXPECT_EQ(verb_named(spec.wire), spec.verb) << spec.wire;
        const std::string command(command_of(spec.verb));
        std::vector<std::string> args;
        for (std::size_t at = 0, space = 0; space != std::string::npos; at = space + 1) {
            space = command.find(' ', at);
            args.push_back(command.substr(at, space - at));
        }
        const Invocation parsed = parse(args);
        EXPECT_EQ(parsed.usage_error.find("unknown"), std::string::npos) << command << ": " << parsed.usage_error;
        EXPECT_EQ(parsed.command, spec.verb) << command;
        EXPECT_EQ(parsed.verb, spec.wire) << command;
    }
}

TEST(SluicectlArgs, UsageListsEveryCommandOnOneLine) {
    const std::string usage = usage_text();
    for (const char* synopsis :
         {"\n  status ", "\n  attach IFNAME [--mode native|generic] ", "\n  detach IFNAME ",
          "\n  policy push FILE|- [--if-version N] [--dry-run] ", "\n  policy show [N] [--source] ",
          "\n  policy history ", "\n  policy rollback [--to N] [--dry-run] ", "\n  policy diff A B ",
          "\n  stats [--watch] [--interval S] [--count K] ", "\n  top [-n N] [--watch] [--interval S] [--count K] ",
          "\n  ban PREFIX --for TIME [--reason TEXT] [--force] ", "\n  unban PREFIX ", "\n  bans "}) {
        EXPECT_NE(usage.find(synopsis), std::string::npos) << synopsis;
    }
    for (const char* option : {"\n  --socket PATH ", "\n  --json ", "\n  --timeout MS ", "\n  -h,--help ",
                               "\n  --version ", "$SLUICE_SOCKET", "\nExit status: "}) {
        EXPECT_NE(usage.find(option), std::string::npos) << option;
    }
    EXPECT_NE(usage.find("policy rollback,\nban, unban.\n"), std::string::npos) << "the changing verbs, wrapped";
    for (const std::string& help : {usage, parse({"top", "--help"}).output, parse({"policy", "push", "-h"}).output,
                                    parse({"ban", "--help"}).output}) {
        std::istringstream lines(help);
        for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 100U) << line;
    }
}

// README.md's sluicectl block is a copy of --help's synopsis and command
// lines; this keeps the two from drifting.
TEST(SluicectlArgs, ReadmeListsTheCommandsAsHelpDoes) {
    const std::filesystem::path readme = std::filesystem::path(SLUICE_EXAMPLES_DIR).parent_path() / "README.md";
    std::ifstream file(readme);
    ASSERT_TRUE(file) << readme;
    const std::string text{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
    std::istringstream usage(usage_text());
    std::string line;
    // CLI11 prints the description first, then the usage line.
    do {
        ASSERT_TRUE(std::getline(usage, line)) << "no usage line";
    } while (line.rfind("Usage: ", 0) != 0);
    const std::string synopsis = line.substr(std::string("Usage: ").size());
    std::string expected = "```\n" + synopsis + "\n";
    bool in_commands = false;
    while (std::getline(usage, line)) {
        if (in_commands && line.empty()) break;
        if (in_commands) expected += line + "\n";
        in_commands = in_commands || line == "Commands:";
    }
    expected += "```\n";
    EXPECT_NE(text.find(expected), std::string::npos) << "README.md should hold, verbatim:\n" << expected;
}

}  // namespace
}  // namespace sluice::cli::sluicectl_args_test
