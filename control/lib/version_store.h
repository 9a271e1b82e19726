// SPDX-License-Identifier: Apache-2.0
// The daemon's policy versions: every applied policy, kept on disk so history,
// rollback and compare-and-swap pushes survive restarts.
//
// Versions are integers that only grow. Applying is two steps so the store
// never records a policy the dataplane refused: prepare() validates and numbers
// a candidate without storing anything, the caller applies it, then commit()
// stores it durably. A rollback is a new version with old content, so history
// is append-only and "what ran when" stays answerable.
//
// Canonical text: the policy parsed by TOML++, its `version` key dropped and
// re-serialised with fixed formatter flags (keys sorted, every table written as
// a standard table, integers in decimal, strings as basic strings). So texts
// that differ only in comments, whitespace, key order, number formatting
// (1_000, 1000, 0x3e8), quoting or inline-vs-standard tables have the same
// canonical text and SHA-256; pushing the same content twice (with or without
// a `version`) hashes equal, which is how a SIGHUP reload of an unchanged file
// is recognised.
//
// A policy whose classes name prefix-list files (match_files) has one more
// line per list at the end of its canonical text, a TOML comment with the
// list's name, the SHA-256 of its canonical text (prefix_list.h) and its
// prefix count; the lists themselves are kept once each, by that SHA-256, in
// <state_dir>/policies/lists/<sha256>.txt. So a change to a list is a new
// version, `policy diff` shows which list changed, and a rollback uses the
// list as it was, whatever the file holds now.
//
// On disk, under <state_dir>/policies/, each version N (12 digits, zero-padded)
// has three files, each written to "<name>.tmp", fsynced, renamed and the
// directory fsynced:
//   N.toml    the canonical text
//   N.source  the text as pushed
//   N.meta    a JSON object, written last, so a version exists iff its meta
//             does: {"version": N, "sha256": "...", "origin": "...",
//             "applied_unix_s": S, "class_ids": {"<name>": <id>, ...}}.
//             Keys it does not know are ignored.
// Before JSON, N.meta was key=value lines (version=, sha256=, origin=,
// applied_unix_s=, one "class=<id> <name>" per class; '\\' and newline
// escaped as "\\\\" and "\\n"). open() still reads that format and rewrites
// each such meta as JSON (durably, as a commit does), so a daemon upgraded
// over an old state directory keeps its history and reads the old format
// once; if the rewrite fails, warnings() says so and the old meta is read as
// it is. A daemon older than JSON metas cannot read them.
// A commit that fails (a full disk, say) removes what it wrote, so nothing
// of it is left to load or to take space. open() removes what a crash can
// leave behind (*.tmp files, .toml/.source without a .meta) and says so in
// warnings(); a committed version whose files
// are unreadable, inconsistent (hash mismatch) or malformed fails open(), naming
// the file, because silently losing history would break rollback.
//
// History is not pruned: each version costs a few KiB, plus each list it
// changed (about 17 bytes per IPv4 prefix, up to 44 per IPv6 one). Not thread-safe: the
// daemon serialises pushes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy_toml.h"
#include "result.h"

namespace sluice {

struct PolicyVersion {
    uint64_t version = 0;
    std::string sha256;     // lowercase hex of SHA-256 over `canonical`
    std::string canonical;  // canonical TOML text (see above), without `version`
    std::string source;     // the text as pushed
    std::string origin;     // "push", "rollback of N", "reload"... free text from the caller
    int64_t applied_unix_s = 0;
    std::map<std::string, uint32_t> class_ids;  // the ids this version used
};

// A validated candidate: what to store (`version`) and what to apply (`loaded`,
// whose version and header.version are already the assigned number).
struct PreparedPolicy {
    PolicyVersion version;
    LoadedPolicy loaded;
    PrefixLists lists;  // the prefix lists it names, stored when it is committed
};

// The canonical text of a policy (see above); errors carry path:line:column.
Result<std::string> canonical_policy_text(std::string_view text, std::string_view path_for_errors);

// Lowercase hex SHA-256 (OpenSSL EVP).
std::string sha256_hex(std::string_view bytes);

class VersionStore {
  public:
    // Creates <state_dir>/policies if missing and loads the history in it.
    static Result<VersionStore> open(const std::string& state_dir);

    // Validates `text` (class ids: the union of all ids in history, so an id
    // is not reused for another name while history remembers it), numbers it
    // (its `version` if present and greater than the current one, else current
    // + 1), and enforces `if_version` (compare-and-swap against the current
    // version, 0 meaning "no version yet"). Stores nothing.
    // `lists` are the prefix lists its match_files name (parse_prefix_lists),
    // no more: the canonical text ends with one line per list (list_trailer),
    // so the SHA-256 covers their content.
    Result<PreparedPolicy> prepare(std::string_view text, std::string_view path_for_errors,
                                   std::optional<uint64_t> if_version, std::string origin,
                                   const PolicyLoadOptions& options, PrefixLists lists = PrefixLists{}) const;

    // The content of version `to` (default: the one before current), its
    // prefix lists as stored with it, prepared as a new version with origin
    // "rollback of <to>". Stores nothing.
    Result<PreparedPolicy> prepare_rollback(std::optional<uint64_t> to, const PolicyLoadOptions& options) const;

    // Stores a prepared version durably and makes it current. Refuses a
    // version not greater than the current one (another commit got there
    // first) or whose sha256 does not match its canonical text.
    // `lists` supplies the prefix lists the version names that the store
    // does not hold yet.
    Status commit(const PolicyVersion& version, const PrefixLists& lists = PrefixLists{});

    // The prefix lists a stored version names, read back from the store.
    Result<PrefixLists> lists_of(const PolicyVersion& version) const;

    std::optional<PolicyVersion> current() const;
    std::vector<PolicyVersion> history() const;  // oldest first
    Result<PolicyVersion> get(uint64_t version) const;

    // True when `text` has the current version's canonical hash; false when
    // there is no current version or `text` does not parse.
    bool same_as_current(std::string_view text, const PrefixLists& lists = PrefixLists{}) const;

    // What open() skipped and why, one line each, naming the file.
    const std::vector<std::string>& warnings() const { return warnings_; }

    const std::string& policies_dir() const { return policies_dir_; }

  private:
    explicit VersionStore(std::string policies_dir) : policies_dir_(std::move(policies_dir)) {}

    // Name -> id over all of history, later versions winning.
    std::map<std::string, uint32_t> all_class_ids() const;
    Result<PreparedPolicy> prepare_loaded(std::string_view text, std::string_view path_for_errors,
                                          std::optional<uint64_t> if_version, std::string origin,
                                          const PolicyLoadOptions& options, PrefixLists lists) const;

    std::string policies_dir_;
    std::map<uint64_t, PolicyVersion> versions_;
    std::vector<std::string> warnings_;
};

// A unified-style line diff of the canonical texts (3 lines of context),
// headed "--- version N" / "+++ version M"; empty when they are equal.
std::string diff_policies(const PolicyVersion& from, const PolicyVersion& to);

}  // namespace sluice
