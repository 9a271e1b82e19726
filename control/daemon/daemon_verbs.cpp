// SPDX-License-Identifier: Apache-2.0
// The daemon's verbs (verbs.h): each handler, and the JSON of status, stats
// and top. The loop and the interfaces' life cycle are in daemon.cpp.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "clock.h"
#include "daemon.h"
#include "labels.h"
#include "logger.h"
#include "verb_args.h"

namespace sluice {
namespace {

using json = nlohmann::json;

// The source table in status and stats: occupancy is the share in debt.
json sources_json(const SourceTableUsage& usage) {
    return json{
        {"capacity", usage.capacity},
        {"in_debt", usage.in_debt},
        {"known", usage.known},
        {"occupancy", usage.capacity ? static_cast<double>(usage.in_debt) / static_cast<double>(usage.capacity) : 0.0}};
}

// What holds a ranked source back beyond its limits, for `top`: null, a
// ban of a prefix that holds it (the dataplanes check bans first, so a ban
// is what drops it), or the penalty box; with the time left. An object with
// a `kind`, so that another kind can stand in its place.
json restriction_json(const BanStore& bans, const PenaltiesInForce& penalties, const sluice_source_key& source,
                      uint64_t dataplane_now_ns, uint64_t unix_now_ns) {
    const double unix_now_s = static_cast<double>(unix_now_ns) / 1e9;
    if (const Ban* ban = bans.covering(source.family, source.addr, unix_now_ns)) {
        return json{{"kind", "ban"},
                    {"prefix", prefix_text(ban->prefix)},
                    {"remaining_s", static_cast<double>(ban->until_unix_ns - unix_now_ns) / 1e9},
                    {"until_unix_s", static_cast<int64_t>(std::ceil(static_cast<double>(ban->until_unix_ns) / 1e9))}};
    }
    const std::optional<uint64_t> ends = penalties.ends_at(source, dataplane_now_ns);
    if (!ends) return nullptr;
    const double remaining_s = static_cast<double>(*ends - dataplane_now_ns) / 1e9;
    return json{{"kind", "penalty"},
                {"remaining_s", remaining_s},
                {"until_unix_s", static_cast<int64_t>(std::ceil(unix_now_s + remaining_s))}};
}

json version_summary(const PolicyVersion& version) {
    return {{"version", version.version},
            {"sha256", version.sha256},
            {"origin", version.origin},
            {"applied_unix_s", version.applied_unix_s}};
}

json push_json(const PushOutcome& outcome) {
    json result = version_summary(outcome.version);
    result["applied"] = outcome.applied;
    result["diff"] = outcome.diff;
    return result;
}

// A push's prefix lists, sent as attachments: parsed, or why not.
Result<PrefixLists> attached_lists(const json& args) {
    const auto attachments = args.find("attachments");
    if (attachments == args.end()) return PrefixLists{};
    PrefixLists lists;
    for (const auto& [name, bytes] : attachments->items()) {
        if (!bytes.is_string()) return control_error(ErrorCode::bad_request, "attachment " + name + " is not bytes");
        auto list = parse_prefix_list(bytes.get_ref<const std::string&>(), name);
        if (!list) return list.error();
        lists.emplace(name, std::move(list.value()));
    }
    return lists;
}

// A host whose interfaces are fixed (sluice-dpdk's ports): `why` says so.
Error not_available(const std::string& verb, Error why) {
    why.message = verb + " is not available here: " + why.message;
    return why;
}

}  // namespace

Result<json> Daemon::status_json() {
    json interfaces = json::array();
    std::vector<std::string> hosted_names;
    for (const auto& [name, interface] : interfaces_) {
        auto version = interface->dataplane().active_version();
        auto sources = interface->dataplane().source_table();  // counted afresh: status is asked for by hand
        if (!version) return as_internal(version.error());
        if (!sources) return as_internal(sources.error());
        json entry{{"name", name},
                   {"kind", interface->dataplane().kind()},
                   {"active_version", version.value()},
                   {"sources", sources_json(sources.value())}};
        if (const auto placement = interface->hosted->xdp()) {
            entry["ifindex"] = placement->ifindex;
            entry["mode"] = xdp_mode_name(placement->mode);
            entry["pin_dir"] = placement->pin_dir;
        }
        if (const auto health = interface->hosted->health()) {
            entry["interface_state"] = health->interface_present ? "present" : "missing";
            entry["pins"] = health->missing_pins.empty() ? "ok" : "missing";
            entry["missing_pins"] = health->missing_pins;
        }
        interfaces.push_back(std::move(entry));
        hosted_names.push_back(name);
    }
    const auto current = policy_->current();
    const double uptime = std::chrono::duration<double>(Clock::now() - started_).count();
    json fleet = nullptr;  // no [fleet] configured
    if (fleet_) {
        json accounts = json::array();
        std::vector<fleet::FleetClassStatus> statuses = fleet_->status();
        if (request_fleet_) {  // the request classes' quotas, on interface "requests"
            std::vector<fleet::FleetClassStatus> requests = request_fleet_->status();
            statuses.insert(statuses.end(), requests.begin(), requests.end());
        }
        for (const fleet::FleetClassStatus& account : statuses)
            accounts.push_back({{"interface", account.dataplane},
                                {"class", account.class_name},
                                {"key", account.key},
                                {"policy_version", account.policy_version},
                                {"state", fleet::to_string(account.state)},
                                {"on_unavailable", account.fail_open ? "open" : "closed"},
                                {"credit", account.credit_available},
                                {"last_lease", account.last_lease},
                                {"redis_granted", account.redis_granted_total},
                                {"fallback_granted", account.fallback_granted_total},
                                {"exchanges", account.exchanges},
                                {"failures", account.failures},
                                {"fallbacks", account.fallbacks}});
        json servers = json::array();
        for (const fleet::RedisEndpoint& server : config_.fleet.servers)
            servers.push_back(fleet::format_redis_endpoint(server));
        fleet = {{"servers", std::move(servers)}, {"namespace", config_.fleet.key_namespace}, {"quotas", accounts}};
    }
    return json{
        {"daemon",
         {{"pid", getpid()},
          {"version", SLUICE_VERSION},
          {"started_unix_s", started_unix_s_},
          {"uptime_s", uptime},
          {"socket", config_.socket},
          {"state_dir", config_.state_dir},
          {"bpffs_dir", host_->pin_root() ? json(*host_->pin_root()) : json(nullptr)}}},
        {"policy", current ? version_summary(*current) : json(nullptr)},
        {"bans", {{"active", bans_.active(unix_now_ns())}, {"max_bans", bans_.max_bans()}, {"file", bans_.path()}}},
        {"interfaces", std::move(interfaces)},
        {"fleet", std::move(fleet)},
        {"requests", request_status_json()},
        {"unprotected", host_->unprotected(hosted_names)}};
}

json Daemon::request_status_json() const {
    if (!request_limiter_) return nullptr;  // no [request] configured
    return json{{"http_port", request_http_ ? json(request_http_->port()) : json(nullptr)},
                {"grpc_port", request_envoy_ ? json(request_envoy_->port()) : json(nullptr)},
                {"policy_version", request_limiter_->version()},
                {"counters", request_limiter_->counters()}};
}

json Daemon::request_stats_json() const {
    if (!request_gate_) return nullptr;
    const RequestGateStats stats = request_gate_->stats();
    json domains = json::array();
    for (const auto& [domain, counts] : stats.domains) {
        json classes = json::array();
        for (const auto& [name, c] : counts.classes)
            classes.push_back({{"class", name},
                               {"allowed", c.allowed},
                               {"refused", c.refused},
                               {"shadow_refused", c.shadow_refused}});
        domains.push_back({{"domain", domain},
                           {"allowed", counts.allowed},
                           {"refused", counts.refused},
                           {"domain_ceiling", counts.ceiling_refused},
                           {"fleet", counts.fleet_refused},
                           {"table_full", counts.table_full},
                           {"table_full_open", counts.table_full_open},
                           {"identity_failures", counts.identity_failures},
                           {"classes", std::move(classes)}});
    }
    // Quantiles from the histogram: the upper bound of the bucket that holds them.
    auto quantile = [&](double q) -> json {
        if (!stats.latency_count) return nullptr;
        const double rank = q * static_cast<double>(stats.latency_count);
        for (size_t i = 0; i < stats.latency_bounds.size(); ++i)
            if (static_cast<double>(stats.latency_counts[i]) >= rank) return stats.latency_bounds[i];
        return "+Inf";
    };
    return json{
        {"domains", std::move(domains)},
        {"invalid", stats.invalid},
        {"overloaded", stats.overloaded},
        {"late", stats.late},
        {"in_flight", stats.in_flight},
        {"counters", stats.counters},
        {"decisions", stats.latency_count},
        {"latency_mean_s", stats.latency_count ? stats.latency_sum_s / static_cast<double>(stats.latency_count) : 0.0},
        {"latency_p50_le_s", quantile(0.5)},
        {"latency_p99_le_s", quantile(0.99)}};
}

Result<json> Daemon::stats_json() {
    const auto names = class_names();
    const auto shadow = policy_->shadow_classes();
    json interfaces = json::array();
    double interval_s = 0;
    for (const auto& [name, interface] : interfaces_) {
        // Totals are read now; rates come from the two latest periodic samples.
        auto counters = interface->dataplane().counters();
        auto stats = interface->dataplane().stats();
        auto version = interface->dataplane().active_version();
        if (!counters) return as_internal(counters.error());
        if (!stats) return as_internal(stats.error());
        if (!version) return as_internal(version.error());
        const bool have_rates = interface->previous && interface->latest;
        const double dt =
            have_rates ? std::chrono::duration<double>(interface->latest->at - interface->previous->at).count() : 0.0;
        interval_s = std::max(interval_s, dt);
        // A named reference: clang 14 cannot capture a structured binding.
        const auto& sampled = *interface;
        auto rate = [&](uint32_t index, bool bytes) {
            if (!have_rates || dt <= 0) return 0.0;
            const sluice_counter& now = sampled.latest->counters[index];
            const sluice_counter& then = sampled.previous->counters[index];
            const uint64_t delta = bytes ? now.bytes - then.bytes : now.packets - then.packets;
            return static_cast<double>(delta) / dt;
        };

        json classes = json::array();
        for (uint32_t id = 0; id < SLUICE_MAX_CLASSES; id++) {
            json entry{{"id", id}};
            uint64_t packets[SLUICE_VERDICT_COUNT] = {}, bytes[SLUICE_VERDICT_COUNT] = {};
            double pps[SLUICE_VERDICT_COUNT] = {}, bps[SLUICE_VERDICT_COUNT] = {};
            json by_reason[SLUICE_VERDICT_COUNT];
            for (json& reasons : by_reason) reasons = json::object();
            json pps_by_reason[SLUICE_VERDICT_COUNT];  // drop and would_drop only
            for (json& reasons : pps_by_reason) reasons = json::object();
            for (uint32_t verdict = 0; verdict < SLUICE_VERDICT_COUNT; verdict++) {
                for (uint32_t reason = 0; reason < SLUICE_REASON_COUNT; reason++) {
                    const uint32_t index = sluice_counter_index(id, verdict, reason);
                    const sluice_counter& counter = counters.value()[index];
                    if (counter.packets == 0) continue;
                    packets[verdict] += counter.packets;
                    bytes[verdict] += counter.bytes;
                    by_reason[verdict][std::string(reason_label(reason))] = counter.packets;
                    pps[verdict] += rate(index, false);
                    bps[verdict] += rate(index, true);
                    if (verdict != SLUICE_VERDICT_PASS)
                        pps_by_reason[verdict][std::string(reason_label(reason))] = rate(index, false);
                }
            }
            const auto named = names.find(id);
            if (named == names.end() && packets[SLUICE_VERDICT_PASS] == 0 && packets[SLUICE_VERDICT_DROP] == 0 &&
                packets[SLUICE_VERDICT_WOULD_DROP] == 0)
                continue;
            entry["name"] = named != names.end() ? named->second : "class " + std::to_string(id) + " (removed)";
            entry["pass_packets"] = packets[SLUICE_VERDICT_PASS];
            entry["pass_bytes"] = bytes[SLUICE_VERDICT_PASS];
            entry["drop_packets"] = packets[SLUICE_VERDICT_DROP];
            entry["drop_bytes"] = bytes[SLUICE_VERDICT_DROP];
            entry["pass_pps"] = pps[SLUICE_VERDICT_PASS];
            entry["drop_pps"] = pps[SLUICE_VERDICT_DROP];
            entry["pass_bps"] = bps[SLUICE_VERDICT_PASS];
            entry["drop_bps"] = bps[SLUICE_VERDICT_DROP];
            entry["passes_by_reason"] = std::move(by_reason[SLUICE_VERDICT_PASS]);
            entry["drops_by_reason"] = std::move(by_reason[SLUICE_VERDICT_DROP]);
            entry["drop_pps_by_reason"] = std::move(pps_by_reason[SLUICE_VERDICT_DROP]);
            // Shadow beside enforcement: what classes in shadow passed but
            // would have dropped, and whether the class is in shadow now.
            entry["shadow"] = named != names.end() && shadow.count(id) > 0;
            entry["would_drop_packets"] = packets[SLUICE_VERDICT_WOULD_DROP];
            entry["would_drop_bytes"] = bytes[SLUICE_VERDICT_WOULD_DROP];
            entry["would_drop_pps"] = pps[SLUICE_VERDICT_WOULD_DROP];
            entry["would_drop_bps"] = bps[SLUICE_VERDICT_WOULD_DROP];
            entry["would_drops_by_reason"] = std::move(by_reason[SLUICE_VERDICT_WOULD_DROP]);
            entry["would_drop_pps_by_reason"] = std::move(pps_by_reason[SLUICE_VERDICT_WOULD_DROP]);
            classes.push_back(std::move(entry));
        }
        json health = json::object();
        for (uint32_t stat = 0; stat < SLUICE_STAT_COUNT; stat++)
            health[std::string(stat_label(stat))] = stats.value()[stat];
        // Kept by the control side of the dataplane, not by the program, but a health figure all the same.
        health["window_restarts"] = interface->dataplane().window_restarts();
        double decision_ns = 0, decisions_per_second = 0;
        if (have_rates && dt > 0) {
            const uint64_t runs = interface->latest->cost.decisions - interface->previous->cost.decisions;
            const uint64_t spent = interface->latest->cost.time_ns - interface->previous->cost.time_ns;
            decisions_per_second = static_cast<double>(runs) / dt;
            if (runs > 0) decision_ns = static_cast<double>(spent) / static_cast<double>(runs);
        }
        const bool cost_enabled = interface->dataplane().decision_cost_enabled();
        interfaces.push_back({{"name", name},
                              {"kind", interface->dataplane().kind()},
                              {"active_version", version.value()},
                              {"decision_cost_enabled", cost_enabled},
                              {"bpf_stats_enabled", cost_enabled},  // its name before DPDK; kept for clients
                              {"decision_ns", decision_ns},
                              {"decisions_per_second", decisions_per_second},
                              {"classes", std::move(classes)},
                              {"sources", sources_json(interface->sources)},
                              {"stats", std::move(health)}});
    }
    return json{{"interval_s", interval_s}, {"interfaces", std::move(interfaces)}, {"requests", request_stats_json()}};
}

Result<json> Daemon::top_json(const json& args) {
    auto wanted = uint_arg(args, "n");
    if (!wanted) return wanted.error();
    const size_t n = wanted.value() ? static_cast<size_t>(*wanted.value()) : kDefaultTopSources;
    if (n == 0 || n > kMaxTopSources)
        return control_error(ErrorCode::bad_request, "argument \"n\" must be in 1.." + std::to_string(kMaxTopSources),
                             "n");
    const auto names = class_names();
    const double now = static_cast<double>(monotonic_ns()) / 1e9;
    const uint64_t unix_now = unix_now_ns();
    double total_rate = 0, total_decayed = 0;
    uint64_t penalties_active = 0;
    std::vector<std::pair<double, json>> ranked;  // by decayed drops, as each interface ranks
    for (const auto& [name, interface] : interfaces_) {
        total_rate += interface->hot_sources.total_drops_per_second(now);
        total_decayed += interface->hot_sources.decayed_drops_total(now);
        const uint64_t dataplane_now = interface->dataplane().now_ns();
        penalties_active += interface->penalties.active(dataplane_now);
        for (const HotSource& source : interface->hot_sources.top(n, now)) {
            ranked.emplace_back(source.decayed_drops,
                                json{{"interface", name},
                                     {"source", source_address(source.key)},
                                     {"class", class_label(names, source.key.class_id)},
                                     {"class_id", source.key.class_id},
                                     {"verdict", std::string(verdict_label(source.verdict))},
                                     {"drops_per_second", source.drops_per_second},
                                     {"error_per_second", source.error_per_second},
                                     {"restriction", restriction_json(bans_, interface->penalties, source.key,
                                                                      dataplane_now, unix_now)}});
        }
    }
    std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    json sources = json::array();
    for (auto& [decayed, entry] : ranked) {
        if (sources.size() == n) break;
        // The share of all (decayed) drops on every interface, not only the entry's own.
        entry["share"] = total_decayed > 0 ? decayed / total_decayed : 0.0;
        sources.push_back(std::move(entry));
    }
    json request_keys = nullptr;  // no [request] configured
    if (request_gate_) {
        request_keys = json::array();
        for (const RequestHotKey& key : request_gate_->hot_keys(n))
            request_keys.push_back({{"domain", key.domain},
                                    {"class", key.class_name},
                                    {"key", key.value},
                                    {"refusals_per_second", key.refusals_per_second},
                                    {"share", key.share}});
    }
    return json{{"total_drops_per_second", total_rate}, {"tau_s", HotSources::kDefaultTauSeconds},
                {"penalties_active", penalties_active}, {"bans_active", bans_.active(unix_now)},
                {"sources", std::move(sources)},        {"request_keys", std::move(request_keys)}};
}

void Daemon::serve(Verb verb, Handler handler) {
    const VerbSpec& spec = spec_of(verb);
    served_[static_cast<size_t>(verb)] = true;
    if (!spec.changes_state) {
        server_.handle(std::string(spec.wire), std::move(handler));
        return;
    }
    // Who changed what the daemon enforces, in the log, whatever the outcome.
    server_.handle(std::string(spec.wire), [&spec, handler = std::move(handler)](const json& args, const Peer& peer) {
        // Not the policy's text (it is in the version store), nor its prefix
        // lists (megabytes: their sizes only).
        json shown = json::object();
        for (const auto& [key, value] : args.items()) {
            if (key == "text") continue;
            if (key == "attachments" && value.is_object()) {
                for (const auto& [name, bytes] : value.items())
                    shown["attachment_bytes"][name] = bytes.is_string() ? bytes.get_ref<const std::string&>().size() : 0;
                continue;
            }
            shown[key] = value;
        }
        log(LogLevel::info, std::string(spec.wire) + " requested",
            {{"peer_uid", std::to_string(peer.uid)},
             {"peer_pid", std::to_string(peer.pid)},
             {"args", shown.dump(-1, ' ', false, json::error_handler_t::replace)}});
        return handler(args, peer);
    });
}

Status Daemon::register_handlers() {
    serve(Verb::top, [this](const json& args, const Peer&) { return top_json(args); });
    serve(Verb::status, [this](const json&, const Peer&) { return status_json(); });
    serve(Verb::stats, [this](const json&, const Peer&) { return stats_json(); });

    serve(Verb::attach, [this](const json& args, const Peer&) -> Result<json> {
        if (auto fixed = host_->can_attach(); !fixed) return not_available("attach", fixed.error());
        auto name = string_arg(args, "interface");
        auto mode_name = string_arg(args, "mode", std::string("native"));
        if (!name) return name.error();
        if (!mode_name) return mode_name.error();
        auto mode = parse_xdp_mode(mode_name.value());
        if (!mode) return mode.error();
        if (auto status = attach_interface(name.value(), mode.value()); !status) return status.error();
        const Interface& interface = *interfaces_.at(name.value());
        auto version = interface.dataplane().active_version();
        const auto placement = interface.hosted->xdp();
        return json{{"interface", name.value()},
                    {"ifindex", placement ? placement->ifindex : 0},
                    {"mode", xdp_mode_name(placement ? placement->mode : mode.value())},
                    {"active_version", version ? version.value() : 0}};
    });

    serve(Verb::detach, [this](const json& args, const Peer&) -> Result<json> {
        if (auto fixed = host_->can_attach(); !fixed) return not_available("detach", fixed.error());
        auto name = string_arg(args, "interface");
        if (!name) return name.error();
        if (auto status = detach_interface(name.value()); !status) return status.error();
        return json{{"interface", name.value()}};
    });

    serve(Verb::policy_push, [this](const json& args, const Peer& peer) -> Result<json> {
        auto text = string_arg(args, "text");
        auto path = string_arg(args, "path", std::string("<pushed policy>"));
        auto if_version = uint_arg(args, "if_version");
        auto dry_run = bool_arg(args, "dry_run");
        if (!text) return text.error();
        if (!path) return path.error();
        if (!if_version) return if_version.error();
        if (!dry_run) return dry_run.error();
        // The control loop is the only writer, so this check and the push
        // below cannot be separated by another push.
        if (if_version.value()) {
            const auto current = policy_->current();
            const uint64_t current_version = current ? current->version : 0;
            if (*if_version.value() != current_version) {
                if (!dry_run.value()) count_push(false);
                return control_error(ErrorCode::conflict,
                                     "the current policy version is " + std::to_string(current_version) + ", not " +
                                         std::to_string(*if_version.value()) +
                                         " (another push came first; review it and retry)",
                                     "if_version");
            }
        }
        const auto start = std::chrono::steady_clock::now();
        const auto ms_since = [](std::chrono::steady_clock::time_point from) {
            return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - from).count();
        };
        auto lists = attached_lists(args);
        if (!lists) {
            if (!dry_run.value()) count_push(false);
            log(LogLevel::warn, "policy push refused", {{"error", lists.error().message}});
            return lists.error();
        }
        const double lists_ms = ms_since(start);
        auto pushed = policy_->push(text.value(), path.value(), if_version.value(), dry_run.value(),
                                    "push by uid " + std::to_string(peer.uid), std::move(lists.value()));
        if (!dry_run.value()) count_push(pushed.ok());
        if (!pushed) {
            log(LogLevel::warn, "policy push refused", {{"error", pushed.error().message}});
            return pushed.error();
        }
        if (pushed.value().applied) {
            log(LogLevel::info, "policy pushed",
                {{"version", std::to_string(pushed.value().version.version)},
                 {"sha256", pushed.value().version.sha256}});
            sync_pushed_version();
        }
        json result = push_json(pushed.value());
        result["timing_ms"] = {{"lists", lists_ms},
                               {"compile", pushed.value().compile_ms},
                               {"dataplane", pushed.value().dataplane_ms},
                               {"store", pushed.value().store_ms},
                               {"total", ms_since(start)}};
        return result;
    });

    serve(Verb::policy_rollback, [this](const json& args, const Peer&) -> Result<json> {
        auto to = uint_arg(args, "to");
        auto dry_run = bool_arg(args, "dry_run");
        if (!to) return to.error();
        if (!dry_run) return dry_run.error();
        auto pushed = policy_->rollback(to.value(), dry_run.value());
        if (!dry_run.value()) count_push(pushed.ok());
        if (!pushed) return pushed.error();
        if (pushed.value().applied) {
            log(LogLevel::info, "policy rolled back",
                {{"version", std::to_string(pushed.value().version.version)},
                 {"origin", pushed.value().version.origin}});
            sync_pushed_version();
        }
        return push_json(pushed.value());
    });

    serve(Verb::policy_show, [this](const json& args, const Peer&) -> Result<json> {
        auto wanted = uint_arg(args, "version");
        if (!wanted) return wanted.error();
        PolicyVersion version;
        if (wanted.value()) {
            auto found = policy_->get(*wanted.value());
            if (!found) return found.error();
            version = std::move(found.value());
        } else {
            auto current = policy_->current();
            if (!current) return control_error(ErrorCode::invalid, "no policy has been pushed yet");
            version = std::move(*current);
        }
        json result = version_summary(version);
        result["canonical"] = version.canonical;
        result["source"] = version.source;
        result["classes"] = version.class_ids;
        return result;
    });

    serve(Verb::policy_history, [this](const json&, const Peer&) -> Result<json> {
        json versions = json::array();
        for (const PolicyVersion& version : policy_->history()) versions.push_back(version_summary(version));
        const auto current = policy_->current();
        return json{{"current", current ? json(current->version) : json(nullptr)}, {"versions", std::move(versions)}};
    });

    serve(Verb::policy_diff, [this](const json& args, const Peer&) -> Result<json> {
        auto from = uint_arg(args, "from");
        auto to = uint_arg(args, "to");
        if (!from) return from.error();
        if (!to) return to.error();
        if (!from.value() || !to.value())
            return control_error(ErrorCode::bad_request, "policy.diff needs \"from\" and \"to\" versions");
        auto a = policy_->get(*from.value());
        auto b = policy_->get(*to.value());
        if (!a) return a.error();
        if (!b) return b.error();
        return json{{"from", *from.value()}, {"to", *to.value()}, {"diff", diff_policies(a.value(), b.value())}};
    });
    register_ban_handlers();
    for (const VerbSpec& spec : kVerbs)
        if (!served_[static_cast<size_t>(spec.verb)])
            return Error{
                "internal: sluiced has no handler for the verb " + std::string(spec.wire), {}, ErrorCode::internal};
    return ok_status();
}

}  // namespace sluice
