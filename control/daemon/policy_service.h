// SPDX-License-Identifier: Apache-2.0
// The push/rollback workflow: validate and number a policy through the
// VersionStore, apply it to every dataplane target, and only then commit it,
// so the store never records a version some interface refused.
//
// When target k refuses a version, targets 0..k-1 already run it; they are
// put back on the current committed version so no interface is left on an
// uncommitted one. Without a committed version (the first push ever), or when
// putting one back fails too, that cannot be done: such targets are marked
// stale, and reconcile() re-applies the current version to them even if their
// active version number matches (an uncommitted version's number is reused by
// the next push, with possibly different content).
//
// Thread-safe: one mutex serialises every call, so the control loop and a
// signal-driven reload cannot interleave. Targets are not owned.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bans.h"
#include "dataplane.h"
#include "policy_toml.h"
#include "result.h"
#include "version_store.h"

namespace sluice {

struct PushOutcome {
    PolicyVersion version;  // the committed version, or with dry_run the one it would be
    std::string diff;       // diff_policies(current before the push, version); empty if equal
    bool applied = false;   // false for a dry run
    // Where the push's time went, in ms: validating and compiling, applying
    // to every target (the dataplane part), storing the version.
    double compile_ms = 0;
    double dataplane_ms = 0;
    double store_ms = 0;
};

class PolicyService {
  public:
    // `options` must match the targets (their possible CPUs), since a policy
    // compiles differently per CPU count.
    PolicyService(VersionStore store, PolicyLoadOptions options);

    // Targets are applied in the order they were added. `name` (an interface
    // name, say) appears in errors. Adding does not apply anything: call
    // reconcile() to bring the new target to the current version.
    Status add_target(std::string name, Dataplane* dataplane);
    Status remove_target(std::string_view name);
    std::vector<std::string> target_names() const;

    // Validates and numbers `text` (`path` only appears in errors; `if_version`
    // is compare-and-swap against the current version, 0 meaning none yet).
    // With dry_run, returns what would be pushed and changes nothing.
    // Otherwise applies to every target, then commits; on failure nothing is
    // committed and the error names the target that refused.
    // `lists`: the prefix lists its match_files name (parse_prefix_lists).
    Result<PushOutcome> push(std::string_view text, std::string_view path, std::optional<uint64_t> if_version,
                             bool dry_run, std::string origin, PrefixLists lists = PrefixLists{});

    // Pushes the content of version `to` (default: the one before current) as
    // a new version; same flow as push().
    Result<PushOutcome> rollback(std::optional<uint64_t> to, bool dry_run);

    // Makes every target run the current version: applies it to each target
    // whose active version differs (or that a failed push left stale). Tries
    // every target; the error names each one that failed. Nothing to do
    // without a current version.
    Status reconcile();

    // For SIGHUP: pushes `text` with origin "reload" unless its canonical
    // content equals the current version's. Returns whether a version was made.
    Result<bool> reload_if_changed(std::string_view text, std::string_view path, PrefixLists lists = PrefixLists{});

    std::optional<PolicyVersion> current() const;
    std::vector<PolicyVersion> history() const;  // oldest first
    // The ids of the current version's classes in shadow (empty without one);
    // the version is compiled once and its answer kept until the next.
    std::set<uint32_t> shadow_classes() const;
    // How long the current version's penalties last, in ns, by class id (the
    // classes with a penalty; empty without a version), compiled as shadow_classes().
    std::map<uint32_t, uint64_t> penalty_durations() const;
    // The current version (0: none) and its fleet quotas, compiled as shadow_classes().
    std::pair<uint64_t, std::vector<FleetQuota>> fleet_quotas() const;
    // The current version (0: none) and its request classes and domains, compiled as shadow_classes().
    struct RequestPolicy {
        uint64_t version = 0;
        std::vector<RequestClass> classes;
        std::vector<RequestDomain> domains;
    };
    RequestPolicy request_policy() const;
    // Calls fn with what the current version's pass classes protect from a
    // ban (bans.h; nothing without a version), under the service's lock, and
    // returns what it returns. A callback, not a copy: with a default class
    // that passes, it holds every prefix of the classes that limit or drop.
    template <class Fn>
    auto with_pass_protection(Fn&& fn) const {
        std::lock_guard<std::mutex> lock(mutex_);
        return fn(current_facts().pass);
    }
    Result<PolicyVersion> get(uint64_t version) const;

  private:
    struct Target {
        std::string name;
        Dataplane* dataplane;
    };

    Result<PushOutcome> push_prepared(PreparedPolicy prepared, bool dry_run);
    // Sets facts_ for the version just committed from its compiled form, so
    // a policy of a million prefixes is not compiled again to answer them.
    void remember_facts(const PolicyVersion& version, const CompiledPolicy& compiled) const;
    // The current version compiled as the targets run it: its canonical text
    // loaded with its own class ids and numbered as itself.
    Result<CompiledPolicy> compile_current() const;
    // After a failed push: puts targets [0, count) back on the current
    // version. Returns a sentence for the error saying what was done.
    std::string restore_targets(size_t count);
    std::string describe(size_t index) const;

    mutable std::mutex mutex_;
    VersionStore store_;
    PolicyLoadOptions options_;
    std::vector<Target> targets_;
    std::set<std::string> stale_;  // target names that may run an uncommitted policy
    // What the current version's compiled form says, kept until the next version.
    struct CurrentFacts {
        uint64_t version = 0;  // 0: not computed yet, or no version
        std::set<uint32_t> shadow;
        std::map<uint32_t, uint64_t> penalty_for_ns;  // class id -> penalty.for_ns, where it has one
        std::vector<FleetQuota> fleet;
        std::vector<RequestClass> requests;
        std::vector<RequestDomain> request_domains;
        PassProtection pass;
    };
    const CurrentFacts& current_facts() const;  // with mutex_ held
    mutable CurrentFacts facts_;
};

}  // namespace sluice
