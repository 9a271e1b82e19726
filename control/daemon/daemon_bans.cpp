// SPDX-License-Identifier: Apache-2.0
// Timed bans in the daemon (bans.h): the ban, unban and bans verbs, handing
// the set in force to every interface, expiry, and the drops each ban
// caused. The BanStore decides what is banned; this file makes every
// dataplane enforce it.
#include <pwd.h>

#include <cmath>
#include <vector>

#include "clock.h"
#include "daemon.h"
#include "logger.h"
#include "rate_limits.h"
#include "verb_args.h"

namespace sluice {
namespace {

using json = nlohmann::json;

// The user name of `uid` on this host, or null.
json user_name(uid_t uid) {
    passwd entry{};
    passwd* found = nullptr;
    std::vector<char> buffer(16384);
    if (getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) return nullptr;
    return std::string(found->pw_name);
}

// Adds what `dataplane` dropped per ban slot since `baseline` to `dropped`;
// returns the counters it read.
Result<std::vector<sluice_counter>> count_ban_drops(EnforcementPoint& dataplane, const BanDropBaseline& baseline,
                                                    const std::vector<Ban>& bans,
                                                    std::map<uint32_t, sluice_counter>& dropped) {
    auto counters = dataplane.ban_counters();
    if (!counters) return counters.error();
    for (const Ban& ban : bans) {
        const sluice_counter since = baseline.since(ban.slot, counters.value());
        dropped[ban.slot].packets += since.packets;
        dropped[ban.slot].bytes += since.bytes;
    }
    return counters;
}

// When a ban ends, for the log: to the second, down, so an expiry is never
// logged before the time it names.
std::string ban_until_text(const Ban& ban) { return utc_time(static_cast<int64_t>(ban.until_unix_ns / SLUICE_NANO)); }

}  // namespace

json Daemon::ban_json(const Ban& ban, const std::map<uint32_t, sluice_counter>& since) const {
    sluice_counter dropped = ban.dropped_before;
    if (const auto found = since.find(ban.slot); found != since.end()) {
        dropped.packets += found->second.packets;
        dropped.bytes += found->second.bytes;
    }
    const uint64_t now = unix_now_ns();
    const uint64_t left_ns = ban.until_unix_ns > now ? ban.until_unix_ns - now : 0;
    return json{{"prefix", prefix_text(ban.prefix)},
                {"created_unix_s", ban.created_unix_ns / SLUICE_NANO},
                {"until_unix_s", static_cast<int64_t>(std::ceil(static_cast<double>(ban.until_unix_ns) / 1e9))},
                {"until_unix_ns", ban.until_unix_ns},  // to the ns, for whoever times its end
                {"remaining_s", static_cast<double>(left_ns) / 1e9},
                {"reason", ban.reason},
                {"uid", ban.uid},
                {"user", user_name(ban.uid)},
                {"forced", ban.forced},
                {"slot", ban.slot},
                {"dropped_packets", dropped.packets},
                {"dropped_bytes", dropped.bytes}};
}

Status Daemon::take_on_bans(const std::string& name, Interface& interface) {
    auto counters = interface.dataplane().ban_counters();
    if (counters) {
        interface.ban_baseline.reset_all(counters.value());
    } else {
        // Counted from zero: at worst the drops of earlier runs count twice.
        log(LogLevel::warn, "cannot read the ban counters; bans' drops are counted from zero",
            {{"interface", name}, {"error", counters.error().message}});
    }
    return apply_bans(name, interface);
}

Status Daemon::apply_bans(const std::string& name, Interface& interface) {
    EnforcementPoint& dataplane = interface.dataplane();
    Status applied = dataplane.set_bans(bans_.dataplane_bans(unix_now_ns(), dataplane.now_ns()));
    if (!applied) {
        if (!interface.bans_failing)
            log(LogLevel::error,
                "cannot apply the bans; it keeps the bans it had, and sluiced tries again every second",
                {{"interface", name}, {"error", applied.error().message}});
        interface.bans_failing = true;
        return Error{"interface " + name + " refused the bans: " + applied.error().message, {}, ErrorCode::internal};
    }
    if (interface.bans_failing) log(LogLevel::info, "bans applied again", {{"interface", name}});
    interface.bans_failing = false;
    return applied;
}

Status Daemon::apply_bans_everywhere() {
    std::string errors;
    for (auto& [name, interface] : interfaces_)
        if (auto applied = apply_bans(name, *interface); !applied)
            errors += (errors.empty() ? "" : "; ") + applied.error().message;
    if (!errors.empty()) return Error{errors, {}, ErrorCode::internal};
    return ok_status();
}

void Daemon::start_counting_ban(uint32_t slot) {
    for (auto& [name, interface] : interfaces_) {
        auto counters = interface->dataplane().ban_counters();
        if (!counters) {
            log(LogLevel::warn, "cannot read the ban counters; the new ban's drops may include an earlier ban's",
                {{"interface", name}, {"slot", std::to_string(slot)}, {"error", counters.error().message}});
            continue;
        }
        interface->ban_baseline.reset_slot(slot, counters.value());
    }
}

void Daemon::expire_bans() {
    const auto now = Clock::now();
    auto ended = bans_.expire(unix_now_ns());
    if (!ended) {
        if (!ban_store_failing_)
            log(LogLevel::error, "cannot store the bans without those that ended; the dataplanes drop for them no more",
                {{"error", ended.error().message}});
        ban_store_failing_ = true;
    } else {
        ban_store_failing_ = false;
        for (const Ban& ban : ended.value())
            log(LogLevel::info, "ban expired",
                {{"prefix", prefix_text(ban.prefix)},
                 {"until", ban_until_text(ban)},
                 {"reason", ban.reason},
                 {"uid", std::to_string(ban.uid)}});
    }
    const bool changed = ended && !ended.value().empty();
    const bool retry = now - last_ban_retry_ >= std::chrono::seconds(1);
    for (auto& [name, interface] : interfaces_)
        if (changed || (retry && interface->bans_failing)) (void)apply_bans(name, *interface);
    if (retry) last_ban_retry_ = now;
}

Result<std::map<uint32_t, sluice_counter>> Daemon::ban_drops() {
    std::map<uint32_t, sluice_counter> dropped;
    for (const auto& [name, interface] : interfaces_) {
        auto read = count_ban_drops(interface->dataplane(), interface->ban_baseline, bans_.bans(), dropped);
        if (!read) return Error{"interface " + name + ": cannot read the ban counters: " + read.error().message};
    }
    return dropped;
}

void Daemon::keep_ban_drops(const Interface* only) {
    if (bans_.bans().empty()) return;
    std::map<uint32_t, sluice_counter> dropped;
    for (auto& [name, interface] : interfaces_) {
        if (only != nullptr && interface.get() != only) continue;
        auto read = count_ban_drops(interface->dataplane(), interface->ban_baseline, bans_.bans(), dropped);
        if (!read) {
            log(LogLevel::warn, "cannot read the ban counters; what the bans dropped there is not kept",
                {{"interface", name}, {"error", read.error().message}});
            continue;
        }
        // What is kept now counts from here: a later detach or stop adds only what follows.
        interface->ban_baseline.reset_all(read.value());
    }
    if (auto kept = bans_.add_drops(dropped); !kept)
        log(LogLevel::warn, "cannot store what the bans dropped; `sluicectl bans` will count from here",
            {{"error", kept.error().message}});
}

void Daemon::register_ban_handlers() {
    serve(Verb::ban, [this](const json& args, const Peer& peer) -> Result<json> {
        auto text = string_arg(args, "prefix");
        auto for_s = uint_arg(args, "for_s");
        auto reason = string_arg(args, "reason", std::string());
        auto force = bool_arg(args, "force");
        if (!text) return text.error();
        if (!for_s) return for_s.error();
        if (!reason) return reason.error();
        if (!force) return force.error();
        if (!for_s.value())
            return control_error(ErrorCode::bad_request, "missing argument \"for_s\" (how long, in seconds)", "for_s");
        auto prefix = parse_ban_prefix(text.value());
        if (!prefix) return prefix.error();
        const uint64_t seconds = *for_s.value();
        BanRequest request{.prefix = prefix.value(),
                           // Saturating: an absurd for_s is refused for its size, not wrapped into range.
                           .for_ns = seconds > UINT64_MAX / SLUICE_NANO ? UINT64_MAX : seconds * SLUICE_NANO,
                           .reason = reason.value(),
                           .uid = peer.uid,
                           .force = force.value()};
        auto placed = policy_->with_pass_protection(
            [&](const PassProtection& protection) { return bans_.ban(request, unix_now_ns(), protection); });
        if (!placed) {
            log(LogLevel::warn, "ban refused",
                {{"prefix", text.value()}, {"peer_uid", std::to_string(peer.uid)}, {"error", placed.error().message}});
            return placed.error();
        }
        const BanOutcome& outcome = placed.value();
        const Ban& ban = outcome.ban;
        if (!outcome.rebanned) start_counting_ban(ban.slot);
        const Status applied = apply_bans_everywhere();
        log(LogLevel::info, outcome.rebanned ? "re-banned" : "banned",
            {{"prefix", prefix_text(ban.prefix)},
             {"until", ban_until_text(ban)},
             {"for", format_duration(request.for_ns)},
             {"reason", ban.reason},
             {"peer_uid", std::to_string(peer.uid)},
             {"slot", std::to_string(ban.slot)},
             {"forced", ban.forced ? "true" : "false"},
             {"overrides", outcome.overridden}});
        if (!applied)
            return Error{"the ban of " + prefix_text(ban.prefix) + " is stored, but not in force everywhere yet: " +
                             applied.error().message + " (sluiced tries again every second)",
                         {},
                         ErrorCode::internal};
        auto dropped = ban_drops();
        if (!dropped) return as_internal(dropped.error());
        return json{{"ban", ban_json(ban, dropped.value())},
                    {"rebanned", outcome.rebanned},
                    {"overrides", outcome.overridden.empty() ? json(nullptr) : json(outcome.overridden)}};
    });

    serve(Verb::unban, [this](const json& args, const Peer& peer) -> Result<json> {
        auto text = string_arg(args, "prefix");
        if (!text) return text.error();
        auto prefix = parse_ban_prefix(text.value());
        if (!prefix) return prefix.error();
        // Counted before the ban goes, so the reply says what it dropped.
        auto dropped = ban_drops();
        if (!dropped) return as_internal(dropped.error());
        auto lifted = bans_.unban(prefix.value());
        if (!lifted) return lifted.error();
        const Status applied = apply_bans_everywhere();
        log(LogLevel::info, "unbanned",
            {{"prefix", prefix_text(lifted.value().prefix)},
             {"until", ban_until_text(lifted.value())},
             {"reason", lifted.value().reason},
             {"peer_uid", std::to_string(peer.uid)}});
        if (!applied)
            return Error{"the ban of " + prefix_text(lifted.value().prefix) +
                             " is lifted from the store, but not yet everywhere: " + applied.error().message +
                             " (sluiced tries again every second)",
                         {},
                         ErrorCode::internal};
        return json{{"ban", ban_json(lifted.value(), dropped.value())}};
    });

    serve(Verb::bans, [this](const json&, const Peer&) -> Result<json> {
        auto dropped = ban_drops();
        if (!dropped) return as_internal(dropped.error());
        const uint64_t now = unix_now_ns();
        json list = json::array();
        for (const Ban& ban : bans_.bans())
            if (ban.until_unix_ns > now) list.push_back(ban_json(ban, dropped.value()));
        return json{{"max_bans", bans_.max_bans()}, {"bans", std::move(list)}};
    });
}

}  // namespace sluice
