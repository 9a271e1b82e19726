// SPDX-License-Identifier: Apache-2.0
// Timed bans (sluicectl ban): prefixes whose every packet the dataplanes drop
// until a time, checked before classification (sluice/abi.h, "bans"). The
// daemon owns one BanStore and hands its set to every EnforcementPoint it
// hosts (dataplane_bans); this file decides what is banned, never how a
// dataplane enforces it.
//
// Times are Unix time (CLOCK_REALTIME, unix_now_ns in clock.h): a ban
// outlives the daemon, the dataplane's clock and a reboot. A dataplane gets
// each ban's end converted to its own clock when the set is handed over.
//
// Durable: <state_dir>/bans.json holds the bans in force; every change is
// written (durable_file.h) before it takes effect in memory, so a change
// that could not be stored is refused and changes nothing. A restarted
// daemon opens the file and applies the bans that have not ended.
//
// Bounded: at most max_bans (sluiced.toml, 1..SLUICE_MAX_BANS) at once; a
// ban past the cap is refused and counted. Each ban has a slot, its drop
// counter in every dataplane; a re-ban of a banned prefix keeps its slot.
//
// Drops. A dataplane counts per slot since its counters were created (XDP:
// pinned, so across daemon runs; DPDK: since the process started). What a
// ban dropped is `dropped_before` (what earlier daemon runs counted, stored
// with it) plus, on each dataplane the daemon hosts, its slot's counter minus
// the baseline (BanDropBaseline) taken when the dataplane was taken on or the
// slot given to the ban. On a clean stop (and when an interface is detached)
// the daemon adds what it counted to dropped_before. What is dropped while no
// daemon runs (XDP enforces on, fail-static), or after the last clean stop
// of a daemon that crashed, is not counted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiled_policy.h"
#include "dataplane.h"
#include "result.h"
#include "sluice/abi.h"

namespace sluice {

struct Ban {
    PolicyPrefix prefix;              // host bits clear; class_id unused (0)
    uint64_t created_unix_ns = 0;     // when it was first placed (a re-ban keeps it)
    uint64_t until_unix_ns = 0;       // dropped until then
    std::string reason;               // check_ban_reason(); may be empty
    uint32_t uid = 0;                 // who placed it (SO_PEERCRED): the last re-ban's
    bool forced = false;              // placed with --force (over a pass class, if one protected it)
    uint32_t slot = 0;                // its drop counter in every dataplane, < SLUICE_MAX_BANS
    sluice_counter dropped_before{};  // what earlier daemon runs counted it dropping (above)
};

struct BanRequest {
    PolicyPrefix prefix;  // parse_ban_prefix()
    uint64_t for_ns = 0;  // kMinBanNs..kMaxBanNs
    std::string reason;
    uint32_t uid = 0;
    bool force = false;
};

struct BanOutcome {
    Ban ban;
    // The prefix was banned already: its end, reason, who and forced were
    // replaced; its slot, creation time and drop count kept.
    bool rebanned = false;
    // With force: what protected the prefix (pass_conflict's words), "" when nothing did.
    std::string overridden;
};

// What the running policy lets through untouched, for refusing a ban of
// something it protects. A ban is checked before classification, so it
// would beat a `pass` class; unless forced, a ban is refused when
//  - a prefix of a class whose action is pass overlaps it (either holds the
//    other), or
//  - the default class passes and the ban is not wholly inside a prefix of a
//    class that limits or drops (some of its addresses may reach the default).
// Cautious by design: a ban inside a limiting prefix that is itself inside a
// pass prefix is refused too, though classification would not pass it;
// --force places it. Built once per policy version; a ban placed before a
// version that protects its prefix stays.
struct PassProtection {
    std::vector<PolicyPrefix> pass_prefixes;     // of classes with action pass, class_id set
    std::optional<uint32_t> default_pass_class;  // the default class's id, when it passes
    // Prefixes of the classes that limit or drop, held only when the default
    // class passes (otherwise no question is asked of them).
    std::vector<PolicyPrefix> limited_prefixes;
    std::map<uint32_t, std::string> class_names;  // id -> name, for the error
};

// `class_ids`: the version's name -> id (PolicyVersion::class_ids).
PassProtection pass_protection(const CompiledPolicy& policy, const std::map<std::string, uint32_t>& class_ids);

// Why banning `prefix` would drop what `protection` lets through
// ("class \"trusted\" (action pass) matches 10.0.0.0/8, which holds
// 10.1.0.0/16"), or nullopt when nothing protects it.
std::optional<std::string> pass_conflict(const PassProtection& protection, const PolicyPrefix& prefix);

// Whether `outer` holds `inner` (the same family, no longer, and the same
// bits up to its length).
bool prefix_holds(const PolicyPrefix& outer, const PolicyPrefix& inner);

// "203.0.113.0/24", "2001:db8::/48", or an address alone ("203.0.113.7":
// that host). Host bits past the length and /0 (every address of a family:
// a policy class with action = "drop" says that) are refused.
Result<PolicyPrefix> parse_ban_prefix(std::string_view text);

// At most kMaxReasonBytes of UTF-8 without control characters (C0, DEL, C1):
// it is printed in tables and logs as it is.
Status check_ban_reason(std::string_view reason);

// Each ban slot's drop counter on one dataplane when the daemon started
// counting from it (above, "Drops").
class BanDropBaseline {
  public:
    // Every slot, when the daemon takes the dataplane on: what it counted
    // before is in the bans' dropped_before, or was never the daemon's to count.
    void reset_all(const std::vector<sluice_counter>& counters);
    // One slot, before the set that gives it to a new ban is applied (a slot
    // without a ban counts nothing, so no drop of the new ban is missed).
    void reset_slot(uint32_t slot, const std::vector<sluice_counter>& counters);
    // What `slot` dropped since its baseline; 0 if the counter went back.
    sluice_counter since(uint32_t slot, const std::vector<sluice_counter>& counters) const;

  private:
    std::vector<sluice_counter> baseline_ = std::vector<sluice_counter>(SLUICE_MAX_BANS);
};

class BanStore {
  public:
    static constexpr uint64_t kMinBanNs = SLUICE_NANO;                   // 1s
    static constexpr uint64_t kMaxBanNs = 30 * 86'400ULL * SLUICE_NANO;  // 30d
    static constexpr size_t kMaxReasonBytes = 200;
    static constexpr uint32_t kDefaultMaxBans = 1024;
    static constexpr std::string_view kFileName = "bans.json";

    // Reads <state_dir>/bans.json (missing: no bans). A file that cannot be
    // read, is malformed, or holds bans no dataplane would take
    // (check_bans) is an error naming it and what is wrong: the
    // daemon refuses to start rather than drop bans silently. Bans that have
    // ended by `now_unix_ns` are left out (the next change rewrites the file
    // without them). More bans than max_bans (the setting was lowered) are
    // all kept; new ones are refused until fewer are in force.
    static Result<BanStore> open(const std::string& state_dir, uint32_t max_bans, uint64_t now_unix_ns);

    // Bans request.prefix until now + for_ns, in the lowest free slot, or
    // re-bans a banned prefix (BanOutcome::rebanned). Refuses a duration out
    // of range, a bad reason, a new ban while max_bans are held (counted in
    // refused_at_cap), a new ban the dataplanes would refuse (check_bans: a
    // prefix length past SLUICE_BAN_LENGTHS_MAX in its family), and, unless
    // forced, a prefix `protection` protects (counted in refused_protected).
    // Stored before it is reported done.
    Result<BanOutcome> ban(const BanRequest& request, uint64_t now_unix_ns, const PassProtection& protection);
    // Lifts the ban of exactly `prefix` (an error names it when there is
    // none); returns the ban as it was. Stored before it is reported done.
    Result<Ban> unban(const PolicyPrefix& prefix);
    // Removes the bans that have ended by `now_unix_ns` and returns them.
    // If the file cannot be written they stay (the dataplanes no longer drop
    // for them: their end has passed) and the error says why.
    Result<std::vector<Ban>> expire(uint64_t now_unix_ns);
    // Adds what the daemon counted each slot dropping to its ban's
    // dropped_before, and stores it (slots without a ban are ignored).
    Status add_drops(const std::map<uint32_t, sluice_counter>& dropped_by_slot);

    // Every ban held, in prefix order (prefix_less); some may have ended
    // since the last expire().
    const std::vector<Ban>& bans() const { return bans_; }
    // The ban in force at `now_unix_ns` with the longest prefix that holds
    // the address (`addr` in network order, 4 or 16 bytes), or nullptr.
    const Ban* covering(uint8_t family, const uint8_t* addr, uint64_t now_unix_ns) const;
    // The bans in force, as a dataplane whose clock reads `dataplane_now_ns`
    // enforces them.
    std::vector<DataplaneBan> dataplane_bans(uint64_t now_unix_ns, uint64_t dataplane_now_ns) const;
    // Bans in force at `now_unix_ns`.
    size_t active(uint64_t now_unix_ns) const;

    uint32_t max_bans() const { return max_bans_; }
    uint64_t refused_at_cap() const { return refused_at_cap_; }
    uint64_t refused_protected() const { return refused_protected_; }
    // <state_dir>/bans.json
    std::string path() const;

  private:
    BanStore(std::string dir, uint32_t max_bans) : dir_(std::move(dir)), max_bans_(max_bans) {}

    // Writes `bans` as the file; bans_ becomes them only if that worked.
    Status store(std::vector<Ban> bans);
    uint32_t lowest_free_slot() const;

    std::string dir_;
    uint32_t max_bans_;
    std::vector<Ban> bans_;  // sorted by prefix_less, one per prefix, slots unique
    uint64_t refused_at_cap_ = 0, refused_protected_ = 0;
};

}  // namespace sluice
