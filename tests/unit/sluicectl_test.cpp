// SPDX-License-Identifier: Apache-2.0
// sluicectl: human output, and the whole run (exit codes, stdout/stderr,
// --json) against a real ControlServer whose handlers stand in for sluiced.
// The command line alone: sluicectl_args_test.cpp.
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
              "policy: none (passing all under no_policy until the first sluicectl policy push FILE)\n"
              "interfaces: none attached (sluicectl attach IFNAME)\n");
}

TEST(SluicectlOutput, MissingOrMistypedFieldsPrintAsDashes) {
    EXPECT_EQ(format_status(json::object()),
              "daemon: pid -, version -, up 0s, socket -\n"
              "policy: none (passing all under no_policy until the first sluicectl policy push FILE)\n"
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

TEST(SluicectlOutput, StatsShowShadowFiguresBesideEnforcedOnes) {
    json stats = stats_result();
    stats["interfaces"].erase(1);
    json& web = stats["interfaces"][0]["classes"][1];
    web["shadow"] = true;
    web["would_drop_packets"] = 4321;
    web["would_drop_pps"] = 2500;
    web["would_drop_pps_by_reason"] = {{"source", 2000}, {"class", 500}};
    EXPECT_EQ(format_stats(stats),
              "sl0: policy version 7, 1.2M decisions/s, 104 ns/decision (rates over the last 1.0 s)\n"
              "CLASS         PASS/s  DROP/s  WOULD_DROP/s  DROP/s BY REASON                     WOULD_DROP/s BY "
              "REASON  PASS_PKTS  DROP_PKTS  WOULD_DROP_PKTS\n"
              "unclassified       0       0             0  -                                    -                     "
              "         12          0                -\n"
              "web (shadow)    1.2k    3.4M          2.5k  source 3M, class 399k, global 1k     source 2k, class 500  "
              "     123456    9876543             4321\n"
              "bulk             0.2   12.3k             0  global 12.3k, class 5, source 5, +1  -                     "
              "          5        700                -\n"
              "stats: no_policy=12 source_inserts=345\n");
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

TEST(SluicectlOutput, TopTellsShadowFromEnforcement) {
    json shadow = top_result();
    shadow["sources"][0]["verdict"] = "drop";
    shadow["sources"][1]["verdict"] = "would_drop";
    EXPECT_EQ(format_top(shadow),
              "drops 12.3k/s in total; rates decay over ~10 s; from sampled drop events\n"
              "RANK  SOURCE        CLASS   VERDICT     INTERFACE  DROP/s  SHARE\n"
              "   1  10.2.0.1      greedy  drop        sl0          9.8k  79.4%\n"
              "   2  2001:db8:1::  web     would_drop  sl1           120   1.0%\n"
              "would_drop: passed by a class in shadow, which would drop it when enforcing\n");
    // Only drops: as before.
    shadow["sources"][1]["verdict"] = "drop";
    EXPECT_EQ(format_top(shadow), format_top(top_result()));
}

TEST(SluicectlOutput, TopMarksSourcesInThePenaltyBox) {
    json boxed = top_result();
    boxed["penalties_active"] = 3;
    boxed["sources"][0]["restriction"] = {{"kind", "penalty"}, {"remaining_s", 41.2}, {"until_unix_s", 1796000042}};
    boxed["sources"][1]["restriction"] = nullptr;
    EXPECT_EQ(format_top(boxed),
              "drops 12.3k/s in total; rates decay over ~10 s; from sampled drop events\n"
              "3 sources in the penalty box\n"
              "RANK  SOURCE        CLASS   INTERFACE  DROP/s  SHARE  RESTRICTION\n"
              "   1  10.2.0.1      greedy  sl0          9.8k  79.4%  penalty 42s left\n"
              "   2  2001:db8:1::  web     sl1           120   1.0%  -\n"
              "penalty: in its class's penalty box, every packet dropped until the time left has passed\n");
    // The last part of a second still reads as time left; minutes as minutes.
    boxed["sources"][0]["restriction"]["remaining_s"] = 0.3;
    boxed["sources"][1]["restriction"] = {{"kind", "penalty"}, {"remaining_s", 303.0}};
    boxed["penalties_active"] = 1;
    const std::string text = format_top(boxed);
    EXPECT_NE(text.find("\n1 source in the penalty box\n"), std::string::npos) << text;
    EXPECT_NE(text.find("  penalty 1s left\n"), std::string::npos) << text;
    EXPECT_NE(text.find("  penalty 5m 3s left\n"), std::string::npos) << text;
}

TEST(SluicectlOutput, TopWithoutRestrictionsIsAsBefore) {
    json free = top_result();
    free["penalties_active"] = 0;
    free["sources"][0]["restriction"] = nullptr;
    free["sources"][1]["restriction"] = nullptr;
    EXPECT_EQ(format_top(free), format_top(top_result()));
    // Penalties in force whose sources rank below the top N: the count alone.
    free["penalties_active"] = 2;
    EXPECT_EQ(format_top(free).find("2 sources in the penalty box\n"), format_top(top_result()).find("RANK"));
    EXPECT_EQ(format_top(free).find("RESTRICTION"), std::string::npos);
}

TEST(SluicectlOutput, TopShowsAKindOfRestrictionItDoesNotKnow) {
    // A newer daemon's kind (without an end, say) still shows, by its name,
    // with no line of meaning under the table.
    json held = top_result();
    held["sources"][1]["restriction"] = {{"kind", "quarantine"}};
    const std::string text = format_top(held);
    EXPECT_NE(text.find("  RESTRICTION\n"), std::string::npos) << text;
    EXPECT_NE(text.find("   1.0%  quarantine\n"), std::string::npos) << text;
    EXPECT_EQ(text.substr(text.size() - std::string("quarantine\n").size()), "quarantine\n") << text;
}

TEST(SluicectlOutput, TopMarksBannedSourcesBesidePenalties) {
    json held = top_result();
    held["bans_active"] = 2;
    held["sources"][0]["restriction"] = {
        {"kind", "ban"}, {"prefix", "10.2.0.0/16"}, {"remaining_s", 539.4}, {"until_unix_s", 1796000540}};
    held["sources"][1]["restriction"] = {{"kind", "penalty"}, {"remaining_s", 41.2}};
    EXPECT_EQ(format_top(held),
              "drops 12.3k/s in total; rates decay over ~10 s; from sampled drop events\n"
              "2 bans in force (sluicectl bans)\n"
              "RANK  SOURCE        CLASS   INTERFACE  DROP/s  SHARE  RESTRICTION\n"
              "   1  10.2.0.1      greedy  sl0          9.8k  79.4%  ban 9m 0s left\n"
              "   2  2001:db8:1::  web     sl1           120   1.0%  penalty 42s left\n"
              "penalty: in its class's penalty box, every packet dropped until the time left has passed\n"
              "ban: in a banned prefix (sluicectl bans), every packet dropped until the time left has passed\n");
    held["bans_active"] = 1;
    EXPECT_NE(format_top(held).find("\n1 ban in force (sluicectl bans)\n"), std::string::npos);
}

json bans_result() {
    return json::parse(R"({"max_bans": 1024, "bans": [
      {"prefix": "203.0.113.0/24", "created_unix_s": 1796218000, "until_unix_s": 1796218554, "remaining_s": 599.2,
       "reason": "incident 42", "uid": 0, "user": "root", "forced": false, "slot": 0, "dropped_packets": 120345,
       "dropped_bytes": 7702080},
      {"prefix": "2001:db8::/48", "created_unix_s": 1796218000, "until_unix_s": 1796304954, "remaining_s": 86399.9,
       "reason": "", "uid": 1000, "user": null, "forced": true, "slot": 1, "dropped_packets": 0,
       "dropped_bytes": 0}]})");
}

TEST(SluicectlOutput, BansListPrefixExpiryReasonWhoAndDrops) {
    EXPECT_EQ(format_bans(bans_result()),
              "2 bans in force (max_bans 1024)\n"
              "PREFIX          EXPIRES                 LEFT  REASON       WHO           FORCED  DROPPED_PKTS\n"
              "203.0.113.0/24  2026-12-02T13:35:54Z  10m 0s  incident 42  root (uid 0)  no            120345\n"
              "2001:db8::/48   2026-12-03T13:35:54Z   1d 0h  -            uid 1000      yes                0\n");
    EXPECT_EQ(format_bans(json{{"max_bans", 8}, {"bans", json::array()}}),
              "no bans in force (max_bans 8; sluicectl ban PREFIX --for TIME)\n");
}

TEST(SluicectlOutput, BanAndUnbanSayWhatChanged) {
    json placed{{"ban", bans_result()["bans"][0]}, {"rebanned", false}, {"overrides", nullptr}};
    EXPECT_EQ(format_ban(placed), "banned 203.0.113.0/24 (10m 0s left, until 2026-12-02T13:35:54Z, slot 0)\n");
    placed["rebanned"] = true;
    EXPECT_EQ(format_ban(placed),
              "re-banned 203.0.113.0/24 (10m 0s left, until 2026-12-02T13:35:54Z): its end, reason and who "
              "replaced; its slot 0 and 120345 packets dropped kept\n");
    placed["rebanned"] = false;
    placed["overrides"] = "class \"trusted\" (action pass) matches 203.0.0.0/16, which holds 203.0.113.0/24";
    EXPECT_NE(format_ban(placed).find("\nforced over the running policy: class \"trusted\" (action pass) matches "
                                      "203.0.0.0/16, which holds 203.0.113.0/24\n"),
              std::string::npos);
    EXPECT_EQ(format_unban(json{{"ban", bans_result()["bans"][0]}}),
              "unbanned 203.0.113.0/24 (banned since 2026-12-02T13:26:40Z, 120345 packets dropped)\n");
}

TEST(SluicectlOutput, StatusCountsTheBansInForce) {
    json with_bans = status_result();
    with_bans["bans"] = {{"active", 2}, {"max_bans", 1024}, {"file", "/var/lib/sluice/bans.json"}};
    EXPECT_NE(format_status(with_bans).find("\nbans: 2 in force (max_bans 1024; sluicectl bans)\n"), std::string::npos)
        << format_status(with_bans);
}

// ---- what a client sent, on the operator's terminal --------------------------

// A tenant, key or reason as a hostile client (or a careless script) sends
// it: clear the screen, recolour, ring the bell, NUL, a carriage return to
// overwrite the line, a newline to forge a row, a byte that is not UTF-8, a
// C1 CSI and a right-to-left override.
constexpr char kHostileBytes[] = "evil\x1b[2J\x1b[31mRED\x07\0\r\n\xff\xc2\x9b\xe2\x80\xae";
const std::string kHostile(kHostileBytes, sizeof(kHostileBytes) - 1);
// kHostile as sluicectl prints it. (Through the control socket the 0xff
// arrives as U+FFFD, the JSON encoder's replacement, and prints as that.)
constexpr std::string_view kHostileShown = R"(evil\x1b[2J\x1b[31mRED\x07\x00\r\n\xff\u{009b}\u{202e})";

// Every string value of `value` with kHostile appended.
json tainted(json value) {
    if (value.is_string()) return value.get<std::string>() + kHostile;
    if (value.is_structured())
        for (auto& item : value) item = tainted(item);
    return value;
}

// Nothing in `text` that acts on a terminal: no C0 byte but the newline, no
// DEL, no C1 control, no bidi override, no byte that is not UTF-8.
void expect_terminal_safe(std::string_view text, std::string_view what) {
    for (size_t i = 0; i < text.size(); i++) {
        const auto byte = static_cast<unsigned char>(text[i]);
        const auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
        const bool raw = (byte < 0x20 && byte != '\n') || byte == 0x7F || byte == 0xFF ||
                         (byte == 0xC2 && next >= 0x80 && next <= 0x9F) || text.substr(i, 3) == "\xe2\x80\xae";
        ASSERT_FALSE(raw) << what << ": byte " << i << " (0x" << std::hex << int{byte} << ") reaches the terminal in\n"
                          << text;
    }
}

TEST(SluicectlOutput, WhatAClientSentIsPrintedEscaped) {
    json top = tainted(top_result());
    top["request_keys"] = tainted(json::parse(R"([{"domain": "api", "class": "per_tenant", "key": "tenant=",
                                                    "refusals_per_second": 12, "share": 0.5}])"));
    top["sources"][0]["restriction"] = tainted(json{{"kind", "penalty"}, {"remaining_s", 3}});
    json stats = tainted(stats_result());
    stats["interfaces"][0]["classes"][1]["drop_pps_by_reason"][kHostile] = 5000;
    stats["interfaces"][0]["stats"][kHostile] = 1;
    stats["requests"] = tainted(json::parse(R"({"decisions": 10, "domains": [{"domain": "api",
        "classes": [{"class": "per_tenant", "allowed": 1, "refused": 2}], "identity_failures": {"expired": 1}}]})"));
    stats["requests"]["domains"][0]["identity_failures"][kHostile] = 1;
    json ban{{"ban", tainted(bans_result()["bans"][0])}, {"rebanned", false}, {"overrides", "class " + kHostile}};

    const std::pair<std::string, std::string> outputs[] = {
        {"status", format_status(tainted(status_result()))},
        {"stats", format_stats(stats)},
        {"top", format_top(top)},
        {"bans", format_bans(tainted(bans_result()))},
        {"ban", format_ban(ban)},
        {"unban", format_unban(ban)},
        {"policy history", format_history(tainted(json::parse(R"({"current": 1, "versions": [
            {"version": 1, "sha256": "aaaa", "origin": "push", "applied_unix_s": 1796218000}]})")))},
        {"attach", format_attach(tainted(json{{"interface", "sl0"}, {"ifindex", 5}, {"mode", "native"}}))},
    };
    for (const auto& [verb, text] : outputs) {
        SCOPED_TRACE(verb);
        expect_terminal_safe(text, verb);
    }
    // Escaped where it stands, in one cell: the row is not broken or forged.
    const std::string top_text = format_top(top);
    EXPECT_NE(top_text.find(std::string("per_tenant") + std::string(kHostileShown)), std::string::npos) << top_text;
    EXPECT_NE(top_text.find("tenant=" + std::string(kHostileShown)), std::string::npos) << top_text;
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
        EXPECT_EQ(help.out, parse_command_line(args, nullptr).output);
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

TEST_F(SluicectlRun, EveryVerbPrintsWhatAClientSentEscaped) {
    answers_.emplace("stats", tainted(stats_result()));
    answers_.emplace("top", tainted(top_result()));
    answers_.emplace("bans", tainted(bans_result()));
    answers_.emplace("ban", json{{"ban", tainted(bans_result()["bans"][0])}, {"rebanned", false}});
    answers_.emplace("unban", control_error(ErrorCode::invalid, "no ban of " + kHostile));
    answers_.emplace("policy.diff", json{{"from", 1}, {"to", 2}, {"diff", "-x\n+" + kHostile + "\n"}});
    start();
    const std::vector<std::vector<std::string>> commands = {
        {"stats"}, {"top"}, {"bans"}, {"ban", "10.0.0.0/8", "--for", "10m"}, {"unban", "10.0.0.0/8"},
        {"policy", "diff", "1", "2"}, {"stats", "--watch", "--count", "1"}};
    for (const auto& command : commands) {
        SCOPED_TRACE(command.front());
        const Outcome human = run(command);
        expect_terminal_safe(human.out, "stdout");
        expect_terminal_safe(human.err, "stderr");
        EXPECT_NE((human.out + human.err).find("evil\\x1b[2J"), std::string::npos) << human.out << human.err;

        std::vector<std::string> with_json = command;
        with_json.insert(with_json.begin(), "--json");
        const Outcome as_json = run(with_json);
        EXPECT_TRUE(std::all_of(as_json.out.begin(), as_json.out.end(),
                                [](char c) { return c == '\n' || (c >= 0x20 && c < 0x7F); }))
            << "JSON output is plain ASCII: " << as_json.out;
        expect_terminal_safe(as_json.err, "stderr");
        EXPECT_TRUE(json::accept(as_json.out)) << as_json.out;
    }
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
