// SPDX-License-Identifier: Apache-2.0
// sluicectl: command-line parsing and usage errors, human output, and the
// whole run (exit codes, stdout/stderr, --json) against a real ControlServer
// whose handlers stand in for sluiced.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_args.h"
#include "cli_output.h"
#include "cli_run.h"
#include "control_server.h"

namespace sluice::cli {
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
        {{}, "missing command (commands: status, attach, detach, policy, stats, top; sluicectl --help lists them)"},
        {{"frobnicate"},
         "unknown command \"frobnicate\" (commands: status, attach, detach, policy, stats, top; sluicectl --help "
         "lists them)"},
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
          "\n  stats [--watch] [--interval S] [--count K] ", "\n  top [-n N] [--watch] [--interval S] [--count K] "}) {
        EXPECT_NE(usage.find(synopsis), std::string::npos) << synopsis;
    }
    for (const char* option : {"\n  --socket PATH ", "\n  --json ", "\n  --timeout MS ", "\n  -h,--help ",
                               "\n  --version ", "$SLUICE_SOCKET", "\nExit status: "}) {
        EXPECT_NE(usage.find(option), std::string::npos) << option;
    }
    for (const std::string& help : {usage, parse({"top", "--help"}).output, parse({"policy", "push", "-h"}).output}) {
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

// ---- human output ----------------------------------------------------------

TEST(SluicectlOutput, RatesAreShortAndNeverShowFourDigitsBeforeASuffix) {
    const std::pair<double, const char*> cases[] = {
        {0, "0"},
        {0.44, "0.4"},
        {3, "3"},
        {9.96, "10"},
        {950, "950"},
        {999.4, "999"},
        {999.6, "1k"},
        {1200, "1.2k"},
        {34'000, "34k"},
        {99'960, "100k"},
        {123'456, "123k"},
        {3'400'000, "3.4M"},
        {999'700'000, "1G"},
        {1.2e14, "120T"},
        {-1, "-"},
    };
    for (const auto& [rate, expected] : cases) EXPECT_EQ(human_rate(rate), expected) << rate;
}

TEST(SluicectlOutput, TimesAndDurations) {
    EXPECT_EQ(utc_time(0), "1970-01-01T00:00:00Z");
    EXPECT_EQ(utc_time(1796218554), "2026-12-02T13:35:54Z");
    EXPECT_EQ(human_duration(12.7), "12s");
    EXPECT_EQ(human_duration(303), "5m 3s");
    EXPECT_EQ(human_duration(7500), "2h 5m");
    EXPECT_EQ(human_duration(3 * 86400 + 4 * 3600 + 59), "3d 4h");
}

TEST(SluicectlOutput, TableAlignsColumnsAndTrimsTrailingBlanks) {
    Table table({"NAME", "COUNT", "NOTE"}, {Table::Align::left, Table::Align::right});
    table.add_row({"a", "5", ""});
    table.add_row({"longer", "12345", "x"});
    EXPECT_EQ(table.render(),
              "NAME    COUNT  NOTE\n"
              "a           5\n"
              "longer  12345  x\n");
}

json status_result() {
    return json::parse(R"({
      "daemon": {"pid": 4242, "version": "0.1.0", "started_unix_s": 1796210000, "uptime_s": 7500.4,
                 "socket": "/run/sluice/sluiced.sock", "state_dir": "/var/lib/sluice", "bpffs_dir": "/sys/fs/bpf/sluice"},
      "policy": {"version": 7, "sha256": "0123456789abcdef0123", "origin": "push", "applied_unix_s": 1796218554},
      "interfaces": [
        {"name": "sl0", "ifindex": 5, "mode": "native", "active_version": 7, "pin_dir": "/sys/fs/bpf/sluice/sl0",
         "sources": {"capacity": 1048576, "in_debt": 12, "known": 300, "occupancy": 0.0000114}},
        {"name": "uplink1", "ifindex": 6, "mode": "generic", "active_version": 0, "pin_dir": "/sys/fs/bpf/sluice/uplink1",
         "sources": {"capacity": 1048576, "in_debt": 0, "known": 0, "occupancy": 0}}],
      "unprotected": ["eth0", "eth1"]})");
}

TEST(SluicectlOutput, Status) {
    EXPECT_EQ(format_status(status_result()),
              "daemon: pid 4242, version 0.1.0, up 2h 5m, socket /run/sluice/sluiced.sock\n"
              "policy: version 7, sha256 0123456789ab, origin push, applied 2026-12-02T13:35:54Z\n"
              "\n"
              "NAME     MODE     VERSION  SOURCES(in debt/known)/CAPACITY  PIN\n"
              "sl0      native   7        12/300/1048576                   /sys/fs/bpf/sluice/sl0\n"
              "uplink1  generic  -        0/0/1048576                      /sys/fs/bpf/sluice/uplink1\n"
              "unprotected: eth0, eth1 (UP without Sluice)\n");

    json bare = status_result();
    bare["policy"] = nullptr;
    bare["interfaces"] = json::array();
    bare["unprotected"] = json::array();
    EXPECT_EQ(format_status(bare),
              "daemon: pid 4242, version 0.1.0, up 2h 5m, socket /run/sluice/sluiced.sock\n"
              "policy: none yet (sluicectl policy push FILE)\n"
              "interfaces: none attached (sluicectl attach IFNAME)\n");
}

TEST(SluicectlOutput, MissingOrMistypedFieldsPrintAsDashes) {
    EXPECT_EQ(format_status(json::object()),
              "daemon: pid -, version -, up 0s, socket -\n"
              "policy: none yet (sluicectl policy push FILE)\n"
              "interfaces: none attached (sluicectl attach IFNAME)\n");
    EXPECT_EQ(format_attach(json{{"interface", "sl0"}, {"ifindex", "five"}}),
              "attached sl0 (ifindex five, - mode, policy version -)\n");
    EXPECT_EQ(format_stats(json::array()), "no interfaces attached (sluicectl attach IFNAME)\n");
    EXPECT_EQ(format_stats(json{{"interfaces", {{{"name", "sl0"}, {"active_version", 2}}}}}),
              "sl0: policy version 2, rates not sampled yet\n"
              "CLASS  PASS/s  DROP/s  DROP/s BY REASON  PASS_PKTS  DROP_PKTS\n");
    EXPECT_EQ(format_top(json::object()), "drops 0/s in total; from sampled drop events\nno source is being dropped\n");
    EXPECT_EQ(format_top(json{{"sources", {{{"source", "10.2.0.1"}, {"share", "most"}}}}}),
              "drops 0/s in total; from sampled drop events\n"
              "RANK  SOURCE    CLASS  INTERFACE  DROP/s  SHARE\n"
              "   1  10.2.0.1  -      -               0      -\n");
}

TEST(SluicectlOutput, HistoryMarksTheCurrentVersion) {
    const json history = json::parse(R"({"current": 2, "versions": [
        {"version": 1, "sha256": "aaaaaaaaaaaaaaaaaaaa", "origin": "push", "applied_unix_s": 1796218000},
        {"version": 2, "sha256": "bbbbbbbbbbbbbbbbbbbb", "origin": "rollback of 1", "applied_unix_s": 1796218554},
        {"version": 10, "sha256": "cccccccccccccccccccc", "origin": "reload", "applied_unix_s": 1796218600}]})");
    EXPECT_EQ(format_history(history),
              "  VERSION  APPLIED               SHA256        ORIGIN\n"
              "  1        2026-12-02T13:26:40Z  aaaaaaaaaaaa  push\n"
              "* 2        2026-12-02T13:35:54Z  bbbbbbbbbbbb  rollback of 1\n"
              "  10       2026-12-02T13:36:40Z  cccccccccccc  reload\n");
    EXPECT_EQ(format_history(json{{"current", nullptr}, {"versions", json::array()}}),
              "no policy versions yet (sluicectl policy push FILE)\n");
}

TEST(SluicectlOutput, PushRollbackAndDryRun) {
    json outcome = {{"version", 8},
                    {"sha256", "fedcba9876543210"},
                    {"origin", "push"},
                    {"applied", true},
                    {"diff", "--- version 7\n+++ version 8\n-a = 1\n+a = 2"}};
    EXPECT_EQ(format_push(outcome, false),
              "applied version 8 (sha256 fedcba987654)\n--- version 7\n+++ version 8\n-a = 1\n+a = 2\n");
    outcome["applied"] = false;
    EXPECT_EQ(format_push(outcome, true),
              "dry run: would apply version 8 (sha256 fedcba987654)\n--- version 7\n+++ version 8\n-a = 1\n+a = 2\n");
    outcome["diff"] = "";
    EXPECT_EQ(format_push(outcome, true), "dry run: would apply version 8 (sha256 fedcba987654)\nno change\n");
}

TEST(SluicectlOutput, ShowPrintsThePolicyTextItself) {
    const json shown = {{"version", 3}, {"canonical", "[defaults]\nunit = \"packets\"\n"}, {"source", "# mine\n"}};
    EXPECT_EQ(format_policy_show(shown, false).value(), "[defaults]\nunit = \"packets\"\n");
    EXPECT_EQ(format_policy_show(shown, true).value(), "# mine\n");
    EXPECT_FALSE(format_policy_show(json::object(), false).ok());
}

TEST(SluicectlOutput, DiffOrNoDifference) {
    EXPECT_EQ(format_diff(json{{"from", 1}, {"to", 2}, {"diff", "-x\n+y\n"}}), "-x\n+y\n");
    EXPECT_EQ(format_diff(json{{"from", 1}, {"to", 2}, {"diff", ""}}),
              "no difference between version 1 and version 2\n");
}

json stats_result() {
    return json::parse(R"({"interval_s": 1.002, "interfaces": [
      {"name": "sl0", "active_version": 7, "decision_ns": 104.4, "decisions_per_second": 1234567,
       "classes": [
         {"id": 0, "name": "unclassified", "pass_packets": 12, "drop_packets": 0, "pass_pps": 0, "drop_pps": 0,
          "drops_by_reason": {"source": 0, "malformed": 0}, "drop_pps_by_reason": {"malformed": 0}},
         {"id": 1, "name": "web", "pass_packets": 123456, "drop_packets": 9876543, "pass_pps": 1234.5,
          "drop_pps": 3400000, "drops_by_reason": {"source": 9000000, "class": 876543, "global": 0},
          "drop_pps_by_reason": {"source": 3000000, "class": 399000, "global": 1000}},
         {"id": 2, "name": "bulk", "pass_packets": 5, "drop_packets": 700, "pass_pps": 0.2, "drop_pps": 12311,
          "drop_pps_by_reason": {"table_full": 0.01, "deny": 1, "source": 5, "class": 5, "global": 12300}}],
       "stats": {"no_policy": 12, "source_inserts": 345, "drop_events_lost": 0}},
      {"name": "sl1", "active_version": 7, "decision_ns": 0, "decisions_per_second": 0, "classes": [], "stats": {}}]})");
}

TEST(SluicectlOutput, StatsShowDecisionCostAndDropRatesByReason) {
    // Reasons highest first, equal ones by name, a "+N" past three; rates that
    // round to 0 are left out.
    EXPECT_EQ(format_stats(stats_result()),
              "sl0: policy version 7, 1.2M decisions/s, 104 ns/decision (rates over the last 1.0 s)\n"
              "CLASS         PASS/s  DROP/s  DROP/s BY REASON                     PASS_PKTS  DROP_PKTS\n"
              "unclassified       0       0  -                                           12          0\n"
              "web             1.2k    3.4M  source 3M, class 399k, global 1k        123456    9876543\n"
              "bulk             0.2   12.3k  global 12.3k, class 5, source 5, +1          5        700\n"
              "stats: no_policy=12 source_inserts=345\n"
              "\n"
              "sl1: policy version 7, 0 decisions/s (rates over the last 1.0 s)\n"
              "CLASS  PASS/s  DROP/s  DROP/s BY REASON  PASS_PKTS  DROP_PKTS\n");
}

TEST(SluicectlOutput, StatsSayWhenTheDecisionCostIsUnknown) {
    json stats = stats_result();
    stats["interfaces"].erase(1);
    // Packets flowed but the program's run count did not move: the kernel is
    // not counting (BPF run-time stats off), which is not "0 decisions/s".
    const auto first_line = [](const json& result) {
        const std::string text = format_stats(result);
        return text.substr(0, text.find('\n'));
    };
    stats["interfaces"][0]["decisions_per_second"] = 0;
    stats["interfaces"][0]["decision_ns"] = 0;
    EXPECT_EQ(first_line(stats),
              "sl0: policy version 7, decision cost not measured: BPF run-time stats are off (rates over the last 1.0 "
              "s)");
    // A daemon from before decision costs.
    stats["interfaces"][0].erase("decisions_per_second");
    EXPECT_EQ(first_line(stats), "sl0: policy version 7, decision cost - (rates over the last 1.0 s)");
    stats["interval_s"] = 0;
    EXPECT_EQ(first_line(stats), "sl0: policy version 7, rates not sampled yet");
}

TEST(SluicectlOutput, DpdkPortsShowTheirKindAndNoBpf) {
    json status = status_result();
    status["interfaces"] = json::parse(R"([{"name": "port0", "kind": "dpdk", "active_version": 7,
        "sources": {"capacity": 1024, "in_debt": 4, "known": 7, "occupancy": 0.004}}])");
    status["unprotected"] = json::array();
    const std::string text = format_status(status);
    EXPECT_NE(text.find("\nNAME   MODE  VERSION  SOURCES(in debt/known)/CAPACITY  PIN\n"
                        "port0  dpdk  7        4/7/1024                         -\n"),
              std::string::npos)
        << text;

    json stats = stats_result();
    stats["interfaces"].erase(1);
    stats["interfaces"][0]["kind"] = "dpdk";
    stats["interfaces"][0]["decisions_per_second"] = 0;
    const std::string stats_text = format_stats(stats);
    EXPECT_EQ(stats_text.substr(0, stats_text.find('\n')),
              "sl0: policy version 7, decision cost not measured (rates over the last 1.0 s)");
}

json top_result() {
    return json::parse(R"({"total_drops_per_second": 12345.6, "tau_s": 10, "sources": [
      {"interface": "sl0", "source": "10.2.0.1", "class": "greedy", "class_id": 2, "drops_per_second": 9800.4,
       "share": 0.7938, "error_per_second": 0},
      {"interface": "sl1", "source": "2001:db8:1::", "class": "web", "class_id": 1, "drops_per_second": 120.2,
       "share": 0.00974, "error_per_second": 3.5}]})");
}

TEST(SluicectlOutput, TopRanksSourcesWithTheirShareOfAllDrops) {
    EXPECT_EQ(format_top(top_result()),
              "drops 12.3k/s in total; rates decay over ~10 s; from sampled drop events\n"
              "RANK  SOURCE        CLASS   INTERFACE  DROP/s  SHARE\n"
              "   1  10.2.0.1      greedy  sl0          9.8k  79.4%\n"
              "   2  2001:db8:1::  web     sl1           120   1.0%\n");
    json rough = top_result();
    rough["sources"][1]["error_per_second"] = 12.1;  // just over a tenth of 120.2
    EXPECT_EQ(format_top(rough),
              "drops 12.3k/s in total; rates decay over ~10 s; from sampled drop events\n"
              "RANK  SOURCE        CLASS   INTERFACE  DROP/s  SHARE\n"
              "   1  10.2.0.1      greedy  sl0          9.8k  79.4%\n"
              "   2  2001:db8:1::  web     sl1          120*   1.0%\n"
              "* at most: part of it may be other sources' drops (more sources drop than are tracked)\n");
    json quiet = top_result();
    quiet["sources"] = json::array();
    quiet["total_drops_per_second"] = 0;
    EXPECT_EQ(format_top(quiet),
              "drops 0/s in total; rates decay over ~10 s; from sampled drop events\n"
              "no source is being dropped\n");
}

// ---- end to end against a control socket -----------------------------------

TEST(SluicectlExit, CodesFollowTheSpec) {
    EXPECT_EQ(exit_status_for(ErrorCode::invalid), 1);
    EXPECT_EQ(exit_status_for(ErrorCode::internal), 1);
    EXPECT_EQ(exit_status_for(ErrorCode::unknown_verb), 1);
    EXPECT_EQ(exit_status_for(ErrorCode::too_large), 1);
    EXPECT_EQ(exit_status_for(ErrorCode::timeout), 3);
    EXPECT_EQ(exit_status_for(ErrorCode::permission_denied), 4);
    EXPECT_EQ(exit_status_for(ErrorCode::conflict), 5);
}

class SluicectlRun : public ::testing::Test {
  protected:
    void SetUp() override {
        char pattern[] = "/tmp/sluicectl-test-XXXXXX";
        ASSERT_NE(::mkdtemp(pattern), nullptr);
        dir_ = pattern;
        socket_ = dir_ + "/sluiced.sock";
    }

    void TearDown() override {
        stop();
        std::error_code ignored;
        std::filesystem::remove_all(dir_, ignored);
    }

    // A server answering like sluiced; every request's args are recorded.
    void start(std::function<bool(const Peer&)> authorize = nullptr) {
        ControlServerOptions options;
        options.socket_path = socket_;
        options.authorize = std::move(authorize);
        Result<ControlServer> listening = ControlServer::listen(options);
        ASSERT_TRUE(listening.ok()) << listening.error().message;
        server_ = std::make_unique<ControlServer>(std::move(listening.value()));
        const auto recorded = [this](std::string verb, Result<json> answer) {
            return [this, verb, answer](const json& args, const Peer&) -> Result<json> {
                const std::lock_guard lock(mutex_);
                requests_.push_back({{"verb", verb}, {"args", args}});
                return answer;
            };
        };
        server_->handle("status", recorded("status", status_result()));
        for (const auto& [verb, answer] : answers_) server_->handle(verb, recorded(verb, answer));
        server_->handle("policy.push", [this](const json& args, const Peer&) -> Result<json> {
            {
                const std::lock_guard lock(mutex_);
                requests_.push_back({{"verb", "policy.push"}, {"args", args}});
            }
            const std::string text = args.value("text", "");
            if (text.find("rate = -1") != std::string::npos) {
                return control_error(
                    ErrorCode::invalid,
                    args.value("path", "") + ":3:8: class \"web\".per_source.rate: rate must be at least 1",
                    "class \"web\".per_source.rate");
            }
            if (args.contains("if_version") && args["if_version"] != 7) {
                return control_error(ErrorCode::conflict, "current version is 7, not " + args["if_version"].dump());
            }
            return json{{"version", 8},
                        {"sha256", "fedcba9876543210"},
                        {"origin", "push"},
                        {"applied", !args.value("dry_run", false)},
                        {"diff", "-a\n+b\n"}};
        });
        server_->handle("policy.show", recorded("policy.show", control_error(ErrorCode::internal,
                                                                             "cannot read version 3: disk on fire")));
        thread_ = std::thread([server = server_.get()] {
            while (!server->stopped()) {
                if (!server->run_once(1000).ok()) return;
            }
        });
    }

    void stop() {
        if (server_) server_->stop();
        if (thread_.joinable()) thread_.join();
        server_.reset();
    }

    struct Outcome {
        int status;
        std::string out;
        std::string err;
    };

    Outcome run(std::vector<std::string> args, const std::string& stdin_text = "", const WatchHooks& hooks = {}) {
        std::istringstream in(stdin_text);
        std::ostringstream out, err;
        const int status = run_sluicectl(args, socket_.c_str(), in, out, err, hooks);
        return {status, out.str(), err.str()};
    }

    json requests() {
        const std::lock_guard lock(mutex_);
        return requests_;
    }

    std::string write_file(const std::string& name, const std::string& text) {
        const std::string path = dir_ + "/" + name;
        std::ofstream(path) << text;
        return path;
    }

    std::string dir_;
    std::string socket_;
    std::unique_ptr<ControlServer> server_;
    std::thread thread_;
    std::mutex mutex_;
    json requests_ = json::array();
    // More verbs to answer, always the same way; set before start().
    std::map<std::string, Result<json>> answers_;
};

TEST_F(SluicectlRun, StatusHumanAndJson) {
    start();
    const Outcome human = run({"status"});
    EXPECT_EQ(human.status, 0) << human.err;
    EXPECT_EQ(human.out, format_status(status_result()));
    EXPECT_EQ(human.err, "");

    const Outcome as_json = run({"--json", "status"});
    EXPECT_EQ(as_json.status, 0) << as_json.err;
    EXPECT_EQ(json::parse(as_json.out), status_result());
    EXPECT_EQ(std::count(as_json.out.begin(), as_json.out.end(), '\n'), 1) << "one document, one line";
}

TEST_F(SluicectlRun, PushSendsTheFileAsGivenAndPrintsTheDiff) {
    start();
    const std::string file = write_file("p.toml", "[defaults]\nunit = \"packets\"\n");
    const Outcome pushed = run({"policy", "push", "--if-version", "7", file});
    EXPECT_EQ(pushed.status, 0) << pushed.err;
    EXPECT_EQ(pushed.out, "applied version 8 (sha256 fedcba987654)\n-a\n+b\n");
    const json sent = requests().back();
    EXPECT_EQ(sent["verb"], "policy.push");
    EXPECT_EQ(
        sent["args"],
        (json{{"text", "[defaults]\nunit = \"packets\"\n"}, {"path", file}, {"if_version", 7}, {"dry_run", false}}));

    const Outcome dry = run({"policy", "push", "--dry-run", "-"}, "from stdin\n");
    EXPECT_EQ(dry.status, 0) << dry.err;
    EXPECT_EQ(dry.out, "dry run: would apply version 8 (sha256 fedcba987654)\n-a\n+b\n");
    EXPECT_EQ(requests().back()["args"], (json{{"text", "from stdin\n"}, {"path", "<stdin>"}, {"dry_run", true}}));
}

TEST_F(SluicectlRun, PolicyErrorIsPrintedVerbatimAndExitsOne) {
    start();
    const std::string file = write_file("bad.toml", "[[class]]\nname = \"web\"\nrate = -1\n");
    const Outcome refused = run({"policy", "push", file});
    EXPECT_EQ(refused.status, 1);
    EXPECT_EQ(refused.out, "");
    EXPECT_EQ(refused.err, "sluicectl: " + file + ":3:8: class \"web\".per_source.rate: rate must be at least 1\n");

    const Outcome as_json = run({"--json", "policy", "push", file});
    EXPECT_EQ(as_json.status, 1);
    EXPECT_EQ(json::parse(as_json.out),
              (json{{"error",
                     {{"code", "invalid"},
                      {"message", file + ":3:8: class \"web\".per_source.rate: rate must be at least 1"},
                      {"setting", "class \"web\".per_source.rate"}}}}));
    EXPECT_EQ(as_json.err, refused.err);
}

TEST_F(SluicectlRun, ConflictExitsFive) {
    start();
    const std::string file = write_file("p.toml", "x = 1\n");
    const Outcome lost = run({"policy", "push", "--if-version", "6", file});
    EXPECT_EQ(lost.status, 5);
    EXPECT_EQ(lost.err, "sluicectl: current version is 7, not 6\n");
}

TEST_F(SluicectlRun, InternalErrorExitsOne) {
    start();
    const Outcome failed = run({"--json", "policy", "show", "3"});
    EXPECT_EQ(failed.status, 1);
    EXPECT_EQ(json::parse(failed.out)["error"]["code"], "internal");
    EXPECT_EQ(failed.err, "sluicectl: cannot read version 3: disk on fire\n");
}

TEST_F(SluicectlRun, UnknownVerbFromAnOlderDaemonExitsOne) {
    start();
    const Outcome old = run({"stats"});
    EXPECT_EQ(old.status, 1);
    EXPECT_NE(old.err.find("stats"), std::string::npos) << old.err;
}

TEST_F(SluicectlRun, MissingFileIsALocalErrorNamingIt) {
    start();
    const std::string missing = dir_ + "/nope.toml";
    const Outcome outcome = run({"policy", "push", missing});
    EXPECT_EQ(outcome.status, 1);
    EXPECT_EQ(outcome.err, "sluicectl: cannot read policy file " + missing + ": No such file or directory (errno 2)\n");
    EXPECT_TRUE(requests().empty()) << "nothing is sent";
}

TEST_F(SluicectlRun, NotRunningExitsThreeAndSaysHowToStart) {
    const Outcome outcome = run({"--json", "status"});
    EXPECT_EQ(outcome.status, 3);
    EXPECT_NE(outcome.err.find("sluiced is not running"), std::string::npos) << outcome.err;
    EXPECT_NE(outcome.err.find("sluiced --config"), std::string::npos) << outcome.err;
    EXPECT_EQ(json::parse(outcome.out)["error"]["code"], "unreachable");
}

TEST_F(SluicectlRun, DaemonThatDoesNotAnswerTimesOutWithThree) {
    // Listening but never driven: the connect succeeds, the answer never comes.
    ControlServerOptions options;
    options.socket_path = socket_;
    Result<ControlServer> idle = ControlServer::listen(options);
    ASSERT_TRUE(idle.ok()) << idle.error().message;
    const Outcome outcome = run({"--timeout", "100", "status"});
    EXPECT_EQ(outcome.status, 3);
    EXPECT_NE(outcome.err.find("timed out after 100 ms"), std::string::npos) << outcome.err;
}

TEST_F(SluicectlRun, PeerRefusedByTheDaemonExitsFour) {
    start([](const Peer&) { return false; });
    const Outcome outcome = run({"status"});
    EXPECT_EQ(outcome.status, 4) << outcome.err;
}

TEST_F(SluicectlRun, UsageErrorExitsTwoAndIsJsonWithJson) {
    const Outcome outcome = run({"--json", "policy", "push"});
    EXPECT_EQ(outcome.status, 2);
    EXPECT_EQ(outcome.err, "sluicectl: policy push: FILE is required\n");
    EXPECT_EQ(json::parse(outcome.out),
              (json{{"error", {{"code", "usage"}, {"message", "policy push: FILE is required"}, {"setting", ""}}}}));
}

TEST_F(SluicectlRun, UnknownCommandExitsTwoAndSendsNothing) {
    start();
    for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
             {"frobnicate"}, {"policy", "apply"}, {"--json", "stauts"}, {"status", "--json"}}) {
        const Outcome outcome = run(args);
        EXPECT_EQ(outcome.status, 2) << args.back();
        EXPECT_EQ(outcome.err.rfind("sluicectl: ", 0), 0U) << outcome.err;
        EXPECT_NE(outcome.err.find("unknown"), std::string::npos) << outcome.err;
    }
    EXPECT_TRUE(requests().empty());
}

TEST_F(SluicectlRun, CommandHelpExitsZeroAndSendsNothing) {
    start();
    for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
             {"policy", "push", "--help"}, {"top", "-h"}, {"policy", "--help"}, {"attach", "--mode", "x", "-h"}}) {
        const Outcome help = run(args);
        EXPECT_EQ(help.status, 0) << args.front();
        EXPECT_EQ(help.out, parse(args).output);
        EXPECT_NE(help.out.find("Usage: sluicectl " + args.front()), std::string::npos) << help.out;
        EXPECT_EQ(help.err, "");
    }
    EXPECT_TRUE(requests().empty());
}

TEST_F(SluicectlRun, HelpAndVersionPrintToStdout) {
    const Outcome help = run({"--help"});
    EXPECT_EQ(help.status, 0);
    EXPECT_EQ(help.out, usage_text());
    const Outcome version = run({"--version"});
    EXPECT_EQ(version.status, 0);
    EXPECT_EQ(version.out.rfind("sluicectl ", 0), 0U) << version.out;
}

// ---- top and --watch ---------------------------------------------------------

std::size_t occurrences(const std::string& text, const std::string& what) {
    std::size_t count = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++count;
    return count;
}

TEST_F(SluicectlRun, TopJsonPrintsTheResultAndSendsN) {
    answers_.emplace("top", top_result());
    start();
    const Outcome as_json = run({"--json", "top", "-n", "2"});
    EXPECT_EQ(as_json.status, 0) << as_json.err;
    EXPECT_EQ(json::parse(as_json.out), top_result());
    EXPECT_EQ(std::count(as_json.out.begin(), as_json.out.end(), '\n'), 1) << "one document, one line";
    EXPECT_EQ(requests().back(), (json{{"verb", "top"}, {"args", {{"n", 2}}}}));

    const Outcome human = run({"top"});
    EXPECT_EQ(human.status, 0) << human.err;
    EXPECT_EQ(human.out, format_top(top_result()));
    EXPECT_EQ(requests().back()["args"], (json{{"n", 20}}));
}

TEST_F(SluicectlRun, StatsWatchCountTwoPrintsTwoTablesAPaceApart) {
    answers_.emplace("stats", stats_result());
    start();
    const auto started = std::chrono::steady_clock::now();
    const Outcome watched = run({"stats", "--watch", "--count", "2"});
    const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    EXPECT_EQ(watched.status, 0) << watched.err;
    EXPECT_EQ(watched.err, "");
    // Not a terminal: no escapes, successive tables a blank line apart.
    EXPECT_EQ(watched.out, format_stats(stats_result()) + "\n" + format_stats(stats_result()));
    EXPECT_EQ(requests().size(), 2U);
    EXPECT_GE(elapsed_s, 0.9) << "the default interval is 1 s";
    EXPECT_LT(elapsed_s, 5.0);
}

TEST_F(SluicectlRun, WatchWithJsonPrintsJsonLines) {
    answers_.emplace("top", top_result());
    start();
    const Outcome watched = run({"--json", "top", "-n", "5", "--watch", "--interval", "0.1", "--count", "3"});
    EXPECT_EQ(watched.status, 0) << watched.err;
    std::istringstream lines(watched.out);
    std::size_t documents = 0;
    for (std::string line; std::getline(lines, line); ++documents) EXPECT_EQ(json::parse(line), top_result()) << line;
    EXPECT_EQ(documents, 3U);
    EXPECT_EQ(requests().size(), 3U);
    for (const json& request : requests()) EXPECT_EQ(request["args"], (json{{"n", 5}}));
}

TEST_F(SluicectlRun, WatchOnATerminalClearsTheScreenEachRefresh) {
    answers_.emplace("top", top_result());
    start();
    WatchHooks terminal;
    terminal.terminal = true;
    const Outcome watched = run({"top", "--watch", "--interval", "0.1", "--count", "2"}, "", terminal);
    EXPECT_EQ(watched.status, 0) << watched.err;
    EXPECT_EQ(watched.out.rfind("\x1b[H\x1b[2J", 0), 0U) << watched.out;
    EXPECT_EQ(occurrences(watched.out, "\x1b[H\x1b[2J"), 2U);
    EXPECT_EQ(occurrences(watched.out, "refreshing every 0.1 s (Ctrl-C to stop), "), 2U);
    EXPECT_EQ(occurrences(watched.out, format_top(top_result())), 2U);

    // --json never clears: its lines are for programs.
    const Outcome as_json = run({"--json", "top", "--watch", "--interval", "0.1", "--count", "2"}, "", terminal);
    EXPECT_EQ(as_json.out.find('\x1b'), std::string::npos);
}

TEST_F(SluicectlRun, WatchStopsCleanlyWhenAskedTo) {
    answers_.emplace("stats", stats_result());
    start();
    int stop[2];
    ASSERT_EQ(::pipe2(stop, O_CLOEXEC), 0);
    ASSERT_EQ(::write(stop[1], "x", 1), 1);  // as sluicectl's SIGINT handler does
    WatchHooks hooks;
    bool began = false;
    hooks.begin = [&] {
        began = true;
        return stop[0];
    };
    const Outcome watched = run({"stats", "--watch", "--interval", "60"}, "", hooks);
    EXPECT_TRUE(began);
    EXPECT_EQ(watched.status, 0) << watched.err;
    EXPECT_EQ(watched.out, format_stats(stats_result())) << "the refresh in flight, then no more";
    EXPECT_EQ(watched.err, "");
    ::close(stop[0]);
    ::close(stop[1]);

    // Only a watch asks for the stop fd (sluicectl installs its handlers then).
    began = false;
    EXPECT_EQ(run({"stats"}, "", hooks).status, 0);
    EXPECT_FALSE(began);
}

TEST_F(SluicectlRun, WatchEndsWithThreeWhenTheDaemonGoesAway) {
    answers_.emplace("stats", stats_result());
    start();
    Outcome watched{};
    std::thread watcher([&] { watched = run({"stats", "--watch", "--interval", "0.5", "--count", "100"}); });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (requests().empty() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    stop();  // closes the connection and removes the socket while the watch waits for its next refresh
    watcher.join();
    EXPECT_EQ(watched.status, 3) << watched.err;
    EXPECT_EQ(watched.out, format_stats(stats_result()));
    EXPECT_NE(watched.err.find("sluiced is not running (no socket at " + socket_ + ")"), std::string::npos)
        << watched.err;
}

TEST_F(SluicectlRun, WatchStopsAtTheFirstRefusal) {
    answers_.emplace("top", control_error(ErrorCode::bad_request, "argument \"n\" must be in 1..1000", "n"));
    start();
    const Outcome refused = run({"--json", "top", "--watch", "--interval", "0.1"});
    EXPECT_EQ(refused.status, 1);
    EXPECT_EQ(refused.err, "sluicectl: argument \"n\" must be in 1..1000\n");
    EXPECT_EQ(json::parse(refused.out)["error"]["code"], "bad_request");
    EXPECT_EQ(requests().size(), 1U);
}

}  // namespace
}  // namespace sluice::cli
