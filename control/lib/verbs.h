// SPDX-License-Identifier: Apache-2.0
// The control protocol's verbs, declared once. sluiced serves a handler for
// each (Daemon::register_handlers refuses to start with one missing),
// sluicectl parses a command line into each and prints each result
// (cli_args.cpp, cli_output.cpp), and both take name, help and whether the
// verb changes state from this table. Adding a verb means a row here, a
// handler and a formatter; the compiler and the daemon's start say which is
// missing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string_view>

namespace sluice {

enum class Verb : std::uint8_t {
    status,
    attach,
    detach,
    policy_push,
    policy_show,
    policy_history,
    policy_rollback,
    policy_diff,
    stats,
    top,
    ban,
    unban,
    bans,
};

struct VerbSpec {
    Verb verb;
    std::string_view wire;      // the request's "verb": "policy.push"
    std::string_view synopsis;  // sluicectl's command line for it
    std::string_view help;      // one line for sluicectl --help
    // Changes what the daemon enforces or stores: logged with the peer's uid,
    // marked in --help.
    bool changes_state;
};

inline constexpr VerbSpec kVerbs[] = {
    {Verb::status, "status", "status", "daemon, policy, interfaces, unprotected UP links", false},
    {Verb::attach, "attach", "attach IFNAME [--mode native|generic]", "enforce the policy on IFNAME (default: native)",
     true},
    {Verb::detach, "detach", "detach IFNAME", "stop enforcing on IFNAME and remove its pins", true},
    {Verb::policy_push, "policy.push", "policy push FILE|- [--if-version N] [--dry-run]",
     "validate and apply a policy (- reads stdin)", true},
    {Verb::policy_show, "policy.show", "policy show [N] [--source]", "current or N, canonical; --source: as pushed",
     false},
    {Verb::policy_history, "policy.history", "policy history", "every version, oldest first; * marks the current",
     false},
    {Verb::policy_rollback, "policy.rollback", "policy rollback [--to N] [--dry-run]",
     "apply version N again (default: the previous one)", true},
    {Verb::policy_diff, "policy.diff", "policy diff A B", "what changed from version A to version B", false},
    {Verb::stats, "stats", "stats [--watch] [--interval S] [--count K]",
     "pass/drop rates by interface, class; ns/decision", false},
    {Verb::top, "top", "top [-n N] [--watch] [--interval S] [--count K]", "the N sources dropped most (default 20)",
     false},
    {Verb::ban, "ban", "ban PREFIX --for TIME [--reason TEXT] [--force]", "drop every packet of PREFIX for TIME (10m)",
     true},
    {Verb::unban, "unban", "unban PREFIX", "lift the ban of PREFIX now", true},
    {Verb::bans, "bans", "bans", "bans in force: expiry, reason, who, drops", false},
};
inline constexpr std::size_t kVerbCount = std::size(kVerbs);

constexpr bool verbs_in_enum_order() {
    for (std::size_t i = 0; i < kVerbCount; ++i)
        if (static_cast<std::size_t>(kVerbs[i].verb) != i) return false;
    return true;
}
static_assert(verbs_in_enum_order(), "kVerbs lists every Verb once, in enum order");
static_assert(static_cast<std::size_t>(Verb::bans) + 1 == kVerbCount, "a Verb without a row in kVerbs");

constexpr const VerbSpec& spec_of(Verb verb) { return kVerbs[static_cast<std::size_t>(verb)]; }

// sluicectl's command for a verb: the wire name with '.' as ' ' is the
// synopsis's first one or two words.
constexpr std::string_view command_of(Verb verb) {
    const std::string_view synopsis = spec_of(verb).synopsis;
    const std::size_t words = spec_of(verb).wire.find('.') == std::string_view::npos ? 1 : 2;
    std::size_t end = 0;
    for (std::size_t word = 0; word < words; ++word) {
        end = synopsis.find(' ', end + (word ? 1 : 0));
        if (end == std::string_view::npos) return synopsis;
    }
    return synopsis.substr(0, end);
}

inline std::optional<Verb> verb_named(std::string_view wire) {
    for (const VerbSpec& spec : kVerbs)
        if (spec.wire == wire) return spec.verb;
    return std::nullopt;
}

}  // namespace sluice
