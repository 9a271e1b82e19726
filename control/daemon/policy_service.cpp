// SPDX-License-Identifier: Apache-2.0
#include "policy_service.h"

#include <algorithm>
#include <chrono>

namespace sluice {
namespace {

// The "before" side of a diff when nothing has been committed yet.
const PolicyVersion kNoVersion{};

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

PolicyService::PolicyService(VersionStore store, PolicyLoadOptions options)
    : store_(std::move(store)), options_(options) {}

Status PolicyService::add_target(std::string name, Dataplane* dataplane) {
    if (dataplane == nullptr) return Error{"target \"" + name + "\": no dataplane given"};
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Target& target : targets_)
        if (target.name == name) return Error{"target \"" + name + "\" is already added"};
    targets_.push_back(Target{std::move(name), dataplane});
    return ok_status();
}

Status PolicyService::remove_target(std::string_view name) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto found =
        std::find_if(targets_.begin(), targets_.end(), [&](const Target& target) { return target.name == name; });
    if (found == targets_.end()) return Error{"no target \"" + std::string(name) + "\" to remove"};
    // Staleness stays: if the same interface is added again, it is still stale.
    targets_.erase(found);
    return ok_status();
}

std::vector<std::string> PolicyService::target_names() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::string> names;
    for (const Target& target : targets_) names.push_back(target.name);
    return names;
}

Result<PushOutcome> PolicyService::push(std::string_view text, std::string_view path,
                                        std::optional<uint64_t> if_version, bool dry_run, std::string origin,
                                        PrefixLists lists) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto start = Clock::now();
    auto prepared = store_.prepare(text, path, if_version, std::move(origin), options_, std::move(lists));
    if (!prepared) return prepared.error();
    const double compile_ms = ms_since(start);
    auto outcome = push_prepared(std::move(prepared.value()), dry_run);
    if (outcome) outcome.value().compile_ms = compile_ms;
    return outcome;
}

Result<PushOutcome> PolicyService::rollback(std::optional<uint64_t> to, bool dry_run) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto prepared = store_.prepare_rollback(to, options_);
    if (!prepared) return prepared.error();
    return push_prepared(std::move(prepared.value()), dry_run);
}

Result<bool> PolicyService::reload_if_changed(std::string_view text, std::string_view path, PrefixLists lists) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (store_.same_as_current(text, lists)) return false;
    auto prepared = store_.prepare(text, path, std::nullopt, "reload", options_, std::move(lists));
    if (!prepared) return prepared.error();
    auto pushed = push_prepared(std::move(prepared.value()), false);
    if (!pushed) return pushed.error();
    return true;
}

Result<PushOutcome> PolicyService::push_prepared(PreparedPolicy prepared, bool dry_run) {
    const std::optional<PolicyVersion> previous = store_.current();
    PushOutcome outcome;
    outcome.diff = diff_policies(previous ? *previous : kNoVersion, prepared.version);
    if (dry_run) {
        outcome.version = std::move(prepared.version);
        return outcome;
    }

    const std::string version_text = "version " + std::to_string(prepared.version.version);
    const auto apply_start = Clock::now();
    for (size_t k = 0; k < targets_.size(); k++) {
        if (auto applied = targets_[k].dataplane->apply(prepared.loaded.compiled); !applied) {
            return Error{version_text + " not applied: " + describe(k) + " refused it: " + applied.error().message +
                             restore_targets(k),
                         applied.error().setting};
        }
    }
    outcome.dataplane_ms = ms_since(apply_start);
    const auto store_start = Clock::now();
    if (auto committed = store_.commit(prepared.version, prepared.lists); !committed)
        return Error{version_text + " not committed: " + committed.error().message + restore_targets(targets_.size())};
    outcome.store_ms = ms_since(store_start);
    remember_facts(prepared.version, prepared.loaded.compiled);

    // Every target now runs a committed version, so none is stale any more;
    // removed targets were not touched and stay stale.
    for (const Target& target : targets_) stale_.erase(target.name);
    outcome.version = std::move(prepared.version);
    outcome.applied = true;
    return outcome;
}

std::string PolicyService::restore_targets(size_t count) {
    if (count == 0) return "; no target had applied it";
    const std::optional<PolicyVersion> current = store_.current();
    if (!current) {
        for (size_t k = 0; k < count; k++) stale_.insert(targets_[k].name);
        std::string names;
        for (size_t k = 0; k < count; k++) names += (k ? ", " : "") + describe(k);
        return "; no committed version to put back, so " + names + " keep running it until the next push";
    }
    const std::string current_text = "version " + std::to_string(current->version);
    auto compiled = compile_current();
    if (!compiled) {
        for (size_t k = 0; k < count; k++) stale_.insert(targets_[k].name);
        return "; cannot put " + current_text + " back: " + compiled.error().message;
    }
    std::string restored, failed;
    for (size_t k = 0; k < count; k++) {
        if (auto applied = targets_[k].dataplane->apply(compiled.value()); applied) {
            restored += (restored.empty() ? "" : ", ") + describe(k);
        } else {
            stale_.insert(targets_[k].name);
            failed +=
                "; putting " + current_text + " back on " + describe(k) + " failed too: " + applied.error().message;
        }
    }
    return (restored.empty() ? "" : "; " + restored + " put back on " + current_text) + failed;
}

Status PolicyService::reconcile() {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::optional<PolicyVersion> current = store_.current();
    if (!current) return ok_status();
    const std::string current_text = "version " + std::to_string(current->version);
    std::optional<CompiledPolicy> compiled;  // compiled only if some target needs it
    std::string errors;
    for (size_t k = 0; k < targets_.size(); k++) {
        const Target& target = targets_[k];
        auto active = target.dataplane->active_version();
        if (!active) {
            errors += "; " + describe(k) + ": cannot read its active version: " + active.error().message;
            continue;
        }
        if (active.value() == current->version && !stale_.count(target.name)) continue;
        if (!compiled) {
            auto loaded = compile_current();
            if (!loaded) return Error{"cannot reconcile to " + current_text + ": " + loaded.error().message};
            compiled = std::move(loaded.value());
        }
        if (auto applied = target.dataplane->apply(*compiled); !applied) {
            errors += "; " + describe(k) + " (running version " + std::to_string(active.value()) +
                      ") refused it: " + applied.error().message;
            continue;
        }
        stale_.erase(target.name);
    }
    if (!errors.empty()) return Error{"not every target runs " + current_text + errors};
    return ok_status();
}

Result<CompiledPolicy> PolicyService::compile_current() const {
    const std::optional<PolicyVersion> current = store_.current();
    if (!current) return Error{"no committed policy version"};
    const std::string where = "version " + std::to_string(current->version);
    auto lists = store_.lists_of(*current);
    if (!lists) return lists.error();
    auto loaded = load_policy_toml(current->canonical, where, current->class_ids, options_, lists.value());
    if (!loaded) return loaded.error();
    // Its own ids are the only ones offered, so the loader must hand them all
    // back; anything else would move buckets between classes.
    if (loaded.value().class_ids != current->class_ids)
        return Error{where + ": its class ids do not come back the same when it is loaded again"};
    CompiledPolicy compiled = std::move(loaded.value().compiled);
    compiled.header.version = current->version;
    return compiled;
}

std::string PolicyService::describe(size_t index) const {
    return "target \"" + targets_[index].name + "\" (" + std::to_string(index + 1) + " of " +
           std::to_string(targets_.size()) + ")";
}

std::optional<PolicyVersion> PolicyService::current() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return store_.current();
}

void PolicyService::remember_facts(const PolicyVersion& version, const CompiledPolicy& compiled) const {
    facts_ = CurrentFacts{};
    facts_.version = version.version;
    for (const sluice_class_entry& cls : compiled.classes) {
        if (cls.shadow) facts_.shadow.insert(cls.class_id);
        if (cls.penalty.for_ns) facts_.penalty_for_ns[cls.class_id] = cls.penalty.for_ns;
    }
    facts_.fleet = compiled.fleet;
    facts_.requests = compiled.requests;
    facts_.request_domains = compiled.request_domains;
    facts_.pass = sluice::pass_protection(compiled, version.class_ids);
}

const PolicyService::CurrentFacts& PolicyService::current_facts() const {
    const std::optional<PolicyVersion> current = store_.current();
    const uint64_t version = current ? current->version : 0;
    if (facts_.version != version) {
        facts_ = CurrentFacts{};
        facts_.version = version;
        // Committed, so it compiled before; if it no longer does, it has no
        // class in shadow and no fleet quota.
        if (current)
            if (auto compiled = compile_current()) remember_facts(*current, compiled.value());
    }
    return facts_;
}

std::set<uint32_t> PolicyService::shadow_classes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return current_facts().shadow;
}

std::map<uint32_t, uint64_t> PolicyService::penalty_durations() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return current_facts().penalty_for_ns;
}

std::pair<uint64_t, std::vector<FleetQuota>> PolicyService::fleet_quotas() const {
    std::lock_guard<std::mutex> lock(mutex_);
    const CurrentFacts& facts = current_facts();
    return {facts.version, facts.fleet};
}

PolicyService::RequestPolicy PolicyService::request_policy() const {
    std::lock_guard<std::mutex> lock(mutex_);
    const CurrentFacts& facts = current_facts();
    return {facts.version, facts.requests, facts.request_domains};
}

std::vector<PolicyVersion> PolicyService::history() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return store_.history();
}

Result<PolicyVersion> PolicyService::get(uint64_t version) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return store_.get(version);
}

}  // namespace sluice
