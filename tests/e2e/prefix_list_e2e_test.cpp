// SPDX-License-Identifier: Apache-2.0
// A class matched through a prefix-list file (issue #19), end to end: the
// real sluiced reads policy_file and its 100,000-prefix match_files list,
// real frames from listed and unlisted sources cross the veth, the file is
// edited and SIGHUP'd, and a rollback restores the earlier list although the
// file has changed since.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "e2e_fixture.h"

namespace sluice::test::prefix_list_e2e_test {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t kListed = 100'000;
constexpr double kSeconds = 2.5;
// metered: one source that spends its whole burst in the first run; its
// bucket refills at 1/s, so a reset bucket (a fresh burst) would show.
constexpr double kMeteredRate = 1, kMeteredBurst = 1000;

// 100,000 /32s from 10.64.0.0 on, one per line, with a comment header as the
// public lists have; `except` is left out and `extra` added.
std::string drop_list(uint32_t except, const std::string& extra) {
    std::ostringstream out;
    out << "; sluice e2e drop list\n";
    for (uint32_t i = 0; i < kListed; i++) {
        if (i == except) continue;
        out << "10." << 64 + (i >> 16) << "." << ((i >> 8) & 0xff) << "." << (i & 0xff) << "/32 ; SBL" << i << "\n";
    }
    out << extra;
    return out.str();
}

constexpr std::string_view kPolicy = R"toml([defaults]
unit = "packets"
accuracy = "lease"

[[class]]
name = "default"
per_source = { rate = 1000, burst = 1000 }

[[class]]
name = "listed"
action = "drop"
match_files = ["drop.txt"]

[[class]]
name = "metered"
match = ["10.2.0.0/24"]
per_source = { rate = 1, burst = 1000 }
)toml";

const Flow kListedSource{"listed", "10.64.0.5", 500};  // line 7 of the first list
const Flow kAddedLater{"added", "10.70.0.9", 500};     // in 10.70.0.0/24, added by the edit
const Flow kUnlisted{"unlisted", "10.10.0.1", 500};
const Flow kMetered{"metered", "10.2.0.1", 20000};

class PrefixListE2E : public SluiceE2E {
  protected:
    std::optional<uint64_t> current_version() {
        auto s = status();
        if (!s || !(*s)["policy"].is_object()) return std::nullopt;
        return (*s)["policy"]["version"].get<uint64_t>();
    }

    // Waits up to 20 s for the current version to pass `version`.
    std::optional<uint64_t> wait_for_version_after(uint64_t version) {
        const auto deadline = std::chrono::steady_clock::now() + 20s;
        for (;;) {
            const auto now = current_version();
            if (now && *now > version) return now;
            if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
            std::this_thread::sleep_for(100ms);
        }
    }

    // The daemon's "policy slot written" lines for `version`: written, removed.
    std::vector<std::pair<uint64_t, uint64_t>> slot_writes(uint64_t version) {
        std::ifstream log(log_path());
        const std::regex line("policy slot written.* version=" + std::to_string(version) +
                              " .*prefixes_written=([0-9]+) prefixes_removed=([0-9]+)");
        std::vector<std::pair<uint64_t, uint64_t>> writes;
        std::smatch found;
        for (std::string text; std::getline(log, text);)
            if (std::regex_search(text, found, line))
                writes.emplace_back(std::stoull(found[1].str()), std::stoull(found[2].str()));
        return writes;
    }

    // Every frame of `name` got through (allowing 2% for the path), or none did.
    void expect_passed(const TrafficReport& r, const std::string& name) {
        const FlowCount& f = r.flow(name);
        figure_line(name, "sent " + std::to_string(f.sent) + " received " + std::to_string(f.received));
        EXPECT_GT(f.sent, 0u);
        EXPECT_GE(static_cast<double>(f.received), 0.98 * static_cast<double>(f.sent)) << name << " was limited";
    }
    void expect_dropped(const TrafficReport& r, const std::string& name) {
        const FlowCount& f = r.flow(name);
        figure_line(name, "sent " + std::to_string(f.sent) + " received " + std::to_string(f.received));
        EXPECT_GT(f.sent, 0u);
        EXPECT_EQ(f.received, 0u) << name << " got through the listed class's drop";
    }
};

TEST_F(PrefixListE2E, AListedClassIsEnforcedReloadedByDifferenceAndRolledBackToItsOwnList) {
    SLUICE_REQUIRE_BPF();
    ASSERT_NO_FATAL_FAILURE(make_world("policy_file = \"@DIR@/policy.toml\"\n"));
    const std::string list = dir() + "/drop.txt";
    write_file(list, drop_list(kListed, ""));
    write_policy("policy.toml", std::string(kPolicy));
    ASSERT_NO_FATAL_FAILURE(start_daemon());
    const auto first = current_version();
    ASSERT_TRUE(first) << "the policy_file was not applied at start";

    // 1. Listed: the class's drop; unlisted: the default's limit, far above its rate.
    auto r = traffic({kListedSource, kUnlisted, kMetered}, kSeconds);
    ASSERT_TRUE(r);
    ASSERT_NO_FATAL_FAILURE(expect_no_receiver_drops(*r));
    expect_dropped(*r, "listed");
    expect_passed(*r, "unlisted");
    const FlowCount& metered = r->flow("metered");
    figure_line("metered, first run", "received " + std::to_string(metered.received));
    EXPECT_GE(static_cast<double>(metered.received), 0.95 * kMeteredBurst) << "metered did not get its burst";
    EXPECT_LE(static_cast<double>(metered.received), upper_bound(kMeteredRate, kMeteredBurst, r->duration_s));
    const auto run_one_end = std::chrono::steady_clock::now();
    const auto stats_before = stats();
    ASSERT_TRUE(stats_before);
    const uint64_t listed_drops_before = class_counter(*stats_before, "listed", "drop_packets");

    // 2. One prefix out, one in, SIGHUP: a new version that writes just those two.
    write_file(list, drop_list(5, "10.70.0.0/24 ; added\n"));
    signal_daemon(SIGHUP);
    const auto second = wait_for_version_after(*first);
    ASSERT_TRUE(second) << "the edited list made no new version";
    // The new version's slot, and (once the reply is out) the standby slot
    // brought up to it: each the same two writes.
    const auto writes = slot_writes(*second);
    ASSERT_FALSE(writes.empty()) << "no slot write logged for version " << *second;
    figure_line("reload", "version " + std::to_string(*second) + " wrote " + std::to_string(writes[0].first) +
                              " and removed " + std::to_string(writes[0].second) + " prefixes of " +
                              std::to_string(kListed));
    for (const auto& write : writes) EXPECT_EQ(write, std::make_pair(uint64_t{1}, uint64_t{1}));

    r = traffic({kListedSource, kAddedLater, kMetered}, kSeconds);
    ASSERT_TRUE(r);
    ASSERT_NO_FATAL_FAILURE(expect_no_receiver_drops(*r));
    expect_passed(*r, "listed");  // no longer listed: the default class
    expect_dropped(*r, "added");
    // metered's bucket carried on: only what refilled since the first run, not a new burst.
    const double since_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_one_end).count();
    figure_line("metered, after reload", "received " + std::to_string(r->flow("metered").received) + " in " +
                                             std::to_string(since_s) + " s since the first run");
    EXPECT_LE(static_cast<double>(r->flow("metered").received), kMeteredRate * since_s + 2)
        << "metered's bucket was reset by the reload";
    const auto stats_after = stats();
    ASSERT_TRUE(stats_after);
    EXPECT_GE(class_counter(*stats_after, "listed", "drop_packets"),
              listed_drops_before + r->flow("added").sent * 98 / 100)
        << "the listed class's counters restarted";

    // 3. Roll back to the first version while the file keeps its edit.
    const ProcResult rolled = ctl({"policy", "rollback", "--to", std::to_string(*first)});
    ASSERT_EQ(rolled.code, 0) << rolled.err;
    const auto third = current_version();
    ASSERT_TRUE(third);
    EXPECT_GT(*third, *second);
    r = traffic({kListedSource, kAddedLater}, kSeconds);
    ASSERT_TRUE(r);
    ASSERT_NO_FATAL_FAILURE(expect_no_receiver_drops(*r));
    expect_dropped(*r, "listed");
    expect_passed(*r, "added");
}

}  // namespace
}  // namespace sluice::test::prefix_list_e2e_test
