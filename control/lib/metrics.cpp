// SPDX-License-Identifier: Apache-2.0
#include "metrics.h"

#include <arpa/inet.h>

#include <prometheus/exposer.h>

#include <algorithm>
#include <exception>
#include <limits>
#include <utility>

#include "labels.h"

namespace sluice {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<ClientMetric::Label>;

constexpr std::string_view kSyscallOpLabels[] = {"load", "map_lookup", "map_update", "map_delete",
                                                 "link", "pin",        "ring_buffer"};
static_assert(std::size(kSyscallOpLabels) == static_cast<size_t>(SyscallOp::count), "one label per SyscallOp");

MetricFamily family(std::string name, std::string help, MetricType type) {
    return MetricFamily{std::move(name), std::move(help), type, {}};
}

void add(MetricFamily& family, Labels labels, double value) {
    ClientMetric metric;
    metric.label = std::move(labels);
    if (family.type == MetricType::Counter) {
        metric.counter.value = value;
    } else {
        metric.gauge.value = value;
    }
    family.metric.push_back(std::move(metric));
}

// Series that a class can have, so rate() has a zero to start from: class 0
// only sees frames that never reached classification and drops of banned
// sources (checked before classification); the others every
// limiting outcome (fleet and penalty only with a fleet quota, a penalty box),
// and a class in shadow each one also as would_drop.
bool possible(uint32_t class_id, bool shadow, bool fleet, bool penalty, uint32_t verdict, uint32_t reason) {
    // Unparsed frames are never shadowed: they pass or drop.
    if (class_id == 0)
        return (verdict != SLUICE_VERDICT_WOULD_DROP &&
                (reason == SLUICE_REASON_NON_IP || reason == SLUICE_REASON_MALFORMED)) ||
               (verdict == SLUICE_VERDICT_DROP && reason == SLUICE_REASON_BAN);
    if (verdict == SLUICE_VERDICT_WOULD_DROP)
        return shadow && possible(class_id, false, fleet, penalty, SLUICE_VERDICT_DROP, reason);
    switch (reason) {
        case SLUICE_REASON_ADMITTED:
        case SLUICE_REASON_ALLOWED:
            return verdict == SLUICE_VERDICT_PASS;
        case SLUICE_REASON_SOURCE:
        case SLUICE_REASON_CLASS:
        case SLUICE_REASON_GLOBAL:
        case SLUICE_REASON_DENY:
        case SLUICE_REASON_NEW_SOURCE:
            return verdict == SLUICE_VERDICT_DROP;
        case SLUICE_REASON_TABLE_FULL:
            return true;
        case SLUICE_REASON_FLEET:
            return fleet && verdict == SLUICE_VERDICT_DROP;
        case SLUICE_REASON_PENALTY:
            return penalty && verdict == SLUICE_VERDICT_DROP;
        default:
            return false;
    }
}

void add_decisions(const DaemonSnapshot& snapshot, const InterfaceSnapshot& interface, MetricFamily& packets,
                   MetricFamily& bytes, MetricFamily& table_full) {
    uint64_t table_full_by_verdict[SLUICE_VERDICT_COUNT] = {};
    for (uint32_t class_id = 0; class_id < SLUICE_MAX_CLASSES; class_id++) {
        const bool known = snapshot.class_names.count(class_id) > 0;
        const bool shadow = snapshot.shadow_classes.count(class_id) > 0;
        const bool penalty = snapshot.penalty_classes.count(class_id) > 0;
        const bool fleet = std::any_of(snapshot.fleet.begin(), snapshot.fleet.end(), [&](const auto& account) {
            return account.class_id == class_id && account.interface == interface.name;
        });
        for (uint32_t verdict = 0; verdict < SLUICE_VERDICT_COUNT; verdict++) {
            for (uint32_t reason = 0; reason < SLUICE_REASON_COUNT; reason++) {
                const uint32_t index = sluice_counter_index(class_id, verdict, reason);
                if (index >= interface.counters.size()) continue;
                const sluice_counter& counter = interface.counters[index];
                if (reason == SLUICE_REASON_TABLE_FULL) table_full_by_verdict[verdict] += counter.packets;
                if (counter.packets == 0 && !(known && possible(class_id, shadow, fleet, penalty, verdict, reason)))
                    continue;
                Labels labels{{"class", class_label(snapshot.class_names, class_id)},
                              {"interface", interface.name},
                              {"reason", std::string(reason_label(reason))},
                              {"verdict", std::string(verdict_label(verdict))}};
                add(packets, labels, static_cast<double>(counter.packets));
                add(bytes, std::move(labels), static_cast<double>(counter.bytes));
            }
        }
    }
    add(table_full, {{"decision", "open"}, {"interface", interface.name}},
        static_cast<double>(table_full_by_verdict[SLUICE_VERDICT_PASS]));
    add(table_full, {{"decision", "closed"}, {"interface", interface.name}},
        static_cast<double>(table_full_by_verdict[SLUICE_VERDICT_DROP] +
                            table_full_by_verdict[SLUICE_VERDICT_WOULD_DROP]));
    add(table_full, {{"decision", "evict"}, {"interface", interface.name}},
        static_cast<double>(interface.stats[SLUICE_STAT_SOURCE_EVICTIONS]));
}

}  // namespace

std::string source_address(const sluice_source_key& key) {
    char text[INET6_ADDRSTRLEN] = {};
    const int family = key.family == SLUICE_FAMILY_IPV6 ? AF_INET6 : AF_INET;
    if (inet_ntop(family, key.addr, text, sizeof(text)) == nullptr) return "invalid";
    return text;
}

std::string class_label(const std::map<uint32_t, std::string>& names, uint32_t class_id) {
    const auto found = names.find(class_id);
    return found != names.end() ? found->second : "class_" + std::to_string(class_id);
}

namespace {

// Request-level decisions (control/request/request_gate.h).
void add_request_families(const RequestGateStats& stats, const std::vector<RequestHotKey>& hot_keys,
                          std::vector<MetricFamily>& families) {
    auto decisions = family("sluice_request_decisions_total",
                            "Request-level decisions by domain, request class and outcome (allowed, refused, or "
                            "shadow_refused: a class in shadow would have refused); class \"\" for requests no "
                            "class limited.",
                            MetricType::Counter);
    auto requests =
        family("sluice_request_answers_total", "Requests answered, by domain and overall result (allowed or refused).",
               MetricType::Counter);
    auto refusals = family("sluice_request_refusals_total",
                           "Refused requests by domain and why beyond a class limit: domain_ceiling (this node's "
                           "per-domain rate), fleet (no fleet credit: Redis refused or unavailable and closed), "
                           "table_full (no room for a new counter).",
                           MetricType::Counter);
    auto uncounted = family("sluice_request_uncounted_total",
                            "Requests admitted without a counter: the counter table was full and every class they "
                            "needed a new counter of is open when full (on_table_full = \"open\").",
                            MetricType::Counter);
    auto identity = family("sluice_request_identity_failures_total",
                           "Signed descriptor values that failed verification and fell to the domain's anonymous "
                           "value, by domain and reason.",
                           MetricType::Counter);
    auto errors = family("sluice_request_errors_total",
                         "Requests not decided: invalid (a weight above max_cost, a malformed request) or "
                         "overloaded (max_in_flight decisions already running).",
                         MetricType::Counter);
    auto late = family("sluice_request_late_total",
                       "Decisions that took longer than request.deadline_ms (the proxy may have given up).",
                       MetricType::Counter);
    auto in_flight = family("sluice_request_in_flight", "Decisions running now.", MetricType::Gauge);
    auto counters = family("sluice_request_counters", "Request counters held (one per request class and key values).",
                           MetricType::Gauge);
    auto latency =
        family("sluice_request_decision_seconds", "Time to decide one request, in sluiced.", MetricType::Histogram);
    auto hot = family("sluice_request_hot_key_refusal_rate",
                      "Refusals per second of the request counters refused most (top 20, decayed over ~10 s).",
                      MetricType::Gauge);
    for (const auto& [domain, counts] : stats.domains) {
        for (const auto& [cls, c] : counts.classes) {
            add(decisions, {{"class", cls}, {"domain", domain}, {"outcome", "allowed"}},
                static_cast<double>(c.allowed));
            add(decisions, {{"class", cls}, {"domain", domain}, {"outcome", "refused"}},
                static_cast<double>(c.refused));
            add(decisions, {{"class", cls}, {"domain", domain}, {"outcome", "shadow_refused"}},
                static_cast<double>(c.shadow_refused));
        }
        add(requests, {{"domain", domain}, {"result", "allowed"}}, static_cast<double>(counts.allowed));
        add(requests, {{"domain", domain}, {"result", "refused"}}, static_cast<double>(counts.refused));
        add(refusals, {{"domain", domain}, {"reason", "domain_ceiling"}}, static_cast<double>(counts.ceiling_refused));
        add(refusals, {{"domain", domain}, {"reason", "fleet"}}, static_cast<double>(counts.fleet_refused));
        add(refusals, {{"domain", domain}, {"reason", "table_full"}}, static_cast<double>(counts.table_full));
        add(uncounted, {{"domain", domain}}, static_cast<double>(counts.table_full_open));
        for (const auto& [reason, count] : counts.identity_failures)
            add(identity, {{"domain", domain}, {"reason", reason}}, static_cast<double>(count));
    }
    add(errors, {{"kind", "invalid"}}, static_cast<double>(stats.invalid));
    add(errors, {{"kind", "overloaded"}}, static_cast<double>(stats.overloaded));
    add(late, {}, static_cast<double>(stats.late));
    add(in_flight, {}, static_cast<double>(stats.in_flight));
    add(counters, {}, static_cast<double>(stats.counters));
    ClientMetric histogram;
    histogram.histogram.sample_count = stats.latency_count;
    histogram.histogram.sample_sum = stats.latency_sum_s;
    for (size_t i = 0; i < stats.latency_bounds.size() && i < stats.latency_counts.size(); ++i)
        histogram.histogram.bucket.push_back({stats.latency_counts[i], stats.latency_bounds[i]});
    if (!stats.latency_counts.empty())
        histogram.histogram.bucket.push_back({stats.latency_counts.back(), std::numeric_limits<double>::infinity()});
    latency.metric.push_back(std::move(histogram));
    for (const RequestHotKey& key : hot_keys)
        add(hot, {{"class", key.class_name}, {"domain", key.domain}, {"key", key.value}}, key.refusals_per_second);
    for (MetricFamily* f :
         {&decisions, &requests, &refusals, &uncounted, &identity, &errors, &late, &in_flight, &counters, &latency, &hot})
        families.push_back(std::move(*f));
}

}  // namespace

std::vector<MetricFamily> build_metric_families(const DaemonSnapshot& snapshot) {
    auto packets = family("sluice_packets_total", "Packets decided, by interface, class, verdict and reason.",
                          MetricType::Counter);
    auto bytes = family("sluice_bytes_total", "Bytes of the packets decided (Ethernet header included, FCS not).",
                        MetricType::Counter);
    auto table_full =
        family("sluice_table_full_decisions_total",
               "Packets of new sources that found both of their sets in debt, by the on_table_full decision "
               "(evict: the packet took the entry closest to free; open: passed untracked; closed: dropped, or "
               "passed as would_drop by a class in shadow).",
               MetricType::Counter);
    auto run_time =
        family("sluice_bpf_run_time_seconds_total",
               "Time spent deciding: the XDP program's BPF run-time statistics (sluiced), the workers' own TSC "
               "measure (sluice-dpdk, program=\"sluice_dpdk\").",
               MetricType::Counter);
    auto run_count =
        family("sluice_bpf_run_count_total",
               "Decisions made (runs of the XDP program, or frames a sluice-dpdk worker decided), one per packet; "
               "run time / run count is the decision cost.",
               MetricType::Counter);
    auto errors = family("sluice_dataplane_errors_total",
                         "Failed dataplane operations: syscalls by what they were for, and state_lookup (class or "
                         "global state missing in the program; the packet passed).",
                         MetricType::Counter);
    auto sources = family("sluice_sources",
                          "Source table entries, counted every 10 s: in_debt (the table's occupancy: sources ahead of "
                          "their schedule) and known (entries in use, free ones that keep their tag included).",
                          MetricType::Gauge);
    auto capacity = family("sluice_source_capacity", "Entries the source table holds.", MetricType::Gauge);
    auto inserts = family("sluice_source_inserts_total", "Source entries created.", MetricType::Counter);
    auto contended = family("sluice_source_contended_total",
                            "Packets dropped because another CPU kept their source's entry busy (being created).",
                            MetricType::Counter);
    auto events = family("sluice_drop_events_total",
                         "Sampled drop events for hot-source tracking: sent, or lost to a full ring buffer.",
                         MetricType::Counter);
    auto no_policy = family("sluice_no_policy_packets_total", "Packets passed because no policy had been applied yet.",
                            MetricType::Counter);
    auto window_restarts =
        family("sluice_window_restarts_total",
               "Class aggregates and per-source levels whose counts a policy version started from fresh state "
               "(the algorithm, window or unit changed; an aggregate sliding_log: also its limit; a per-source "
               "window: also the bits its limit needs).",
               MetricType::Counter);
    auto interface_version = family("sluice_interface_policy_version",
                                    "The policy version the interface's program runs.", MetricType::Gauge);
    auto hot = family("sluice_hot_source_drop_rate",
                      "Drops per second of the most-dropped sources (top 20 per interface, decayed over ~10 s), "
                      "from sampled drop events; verdict would_drop: a class in shadow passed them.",
                      MetricType::Gauge);
    auto penalties_active =
        family("sluice_penalties_active",
               "Sources in the penalty box now, by interface and class: penalties the dataplane reported starting "
               "(one event each) whose duration (the class's penalty.for) has not yet passed.",
               MetricType::Gauge);
    auto penalties =
        family("sluice_penalties_total", "Sources put in the penalty box by the dataplane (penalties imposed).",
               MetricType::Counter);
    auto penalties_untracked =
        family("sluice_penalties_untracked_total",
               "Penalties started that sluice_penalties_active and sluicectl top leave out: too many in force to "
               "track, or the class no longer had a penalty when its event was read (the dataplane enforces them "
               "all the same; a penalty event lost to a full ring counts in sluice_drop_events_total instead).",
               MetricType::Counter);
    auto bans_active = family("sluice_bans_active",
                              "Bans in force now (sluicectl ban): prefixes every dataplane of the daemon drops before "
                              "classification; their drops are sluice_packets_total{reason=\"ban\"}.",
                              MetricType::Gauge);
    add(bans_active, {}, static_cast<double>(snapshot.bans_active));
    auto bans_max = family("sluice_bans_max", "max_bans: how many bans may be in force at once.", MetricType::Gauge);
    add(bans_max, {}, static_cast<double>(snapshot.max_bans));
    auto bans_refused =
        family("sluice_bans_refused_total",
               "Bans refused: why=\"cap\" (max_bans were in force), why=\"protected\" (a pass class of the running "
               "policy protected the prefix and the ban was not forced).",
               MetricType::Counter);
    add(bans_refused, {{"why", "cap"}}, static_cast<double>(snapshot.bans_refused_cap));
    add(bans_refused, {{"why", "protected"}}, static_cast<double>(snapshot.bans_refused_protected));
    auto shadow = family("sluice_class_shadow",
                         "1 for a class of the current policy in shadow: it counts as would_drop what it would drop, "
                         "and passes it.",
                         MetricType::Gauge);
    for (const auto& [id, name] : snapshot.class_names)
        if (id != SLUICE_CLASS_UNCLASSIFIED) add(shadow, {{"class", name}}, snapshot.shadow_classes.count(id) ? 1 : 0);

    for (const InterfaceSnapshot& interface : snapshot.interfaces) {
        const std::string& name = interface.name;
        add_decisions(snapshot, interface, packets, bytes, table_full);
        const std::string program = "sluice_" + interface.kind;
        add(run_time, {{"interface", name}, {"program", program}},
            static_cast<double>(interface.decision_cost.time_ns) / 1e9);
        add(run_count, {{"interface", name}, {"program", program}},
            static_cast<double>(interface.decision_cost.decisions));
        if (interface.syscall_errors) {
            for (size_t op = 0; op < interface.syscall_errors->size(); op++)
                add(errors, {{"interface", name}, {"operation", std::string(kSyscallOpLabels[op])}},
                    static_cast<double>((*interface.syscall_errors)[op]));
        }
        add(errors, {{"interface", name}, {"operation", "state_lookup"}},
            static_cast<double>(interface.stats[SLUICE_STAT_STATE_LOOKUP_FAILED]));
        add(sources, {{"interface", name}, {"state", "in_debt"}}, static_cast<double>(interface.sources.in_debt));
        add(sources, {{"interface", name}, {"state", "known"}}, static_cast<double>(interface.sources.known));
        add(capacity, {{"interface", name}}, static_cast<double>(interface.sources.capacity));
        add(inserts, {{"interface", name}}, static_cast<double>(interface.stats[SLUICE_STAT_SOURCE_INSERTS]));
        add(contended, {{"interface", name}}, static_cast<double>(interface.stats[SLUICE_STAT_SOURCE_CONTENDED]));
        add(events, {{"interface", name}, {"result", "sent"}},
            static_cast<double>(interface.stats[SLUICE_STAT_DROP_EVENTS_SENT]));
        add(events, {{"interface", name}, {"result", "lost"}},
            static_cast<double>(interface.stats[SLUICE_STAT_DROP_EVENTS_LOST]));
        add(no_policy, {{"interface", name}}, static_cast<double>(interface.stats[SLUICE_STAT_NO_POLICY]));
        add(interface_version, {{"interface", name}}, static_cast<double>(interface.active_version));
        add(window_restarts, {{"interface", name}}, static_cast<double>(interface.window_restarts));
        // A class with a penalty box starts at zero; a class that has since
        // lost it (or the policy) shows until its last penalty ends.
        std::map<uint32_t, uint64_t> in_box = interface.penalties_active;
        for (const uint32_t class_id : snapshot.penalty_classes) in_box.try_emplace(class_id, 0);
        for (const auto& [class_id, count] : in_box)
            add(penalties_active, {{"class", class_label(snapshot.class_names, class_id)}, {"interface", name}},
                static_cast<double>(count));
        add(penalties, {{"interface", name}}, static_cast<double>(interface.stats[SLUICE_STAT_PENALTIES]));
        add(penalties_untracked, {{"interface", name}}, static_cast<double>(interface.penalties_untracked));
        for (const HotSource& source : interface.hot_sources)
            add(hot,
                {{"class", class_label(snapshot.class_names, source.key.class_id)},
                 {"interface", name},
                 {"source", source_address(source.key)},
                 {"verdict", std::string(verdict_label(source.verdict))}},
                source.drops_per_second);
    }

    auto fleet_state = family("sluice_fleet_state",
                              "1 for the state a fleet quota's lease is in on an interface: leasing (from Redis) or "
                              "fallback (Redis unavailable: the class's on_unavailable applies), 0 for the other.",
                              MetricType::Gauge);
    auto fleet_fallbacks = family("sluice_fleet_fallback_total",
                                  "Times a fleet quota fell back because Redis did not answer for unavailable_after.",
                                  MetricType::Counter);
    auto fleet_credit = family("sluice_fleet_credit_units",
                               "Units a fleet quota's dataplane may still admit on its lease (negative: overdrawn).",
                               MetricType::Gauge);
    auto fleet_granted =
        family("sluice_fleet_granted_units_total",
               "Units granted to a fleet quota on an interface: from=redis (leases) or from=fallback (fail-open "
               "local share while Redis was unavailable).",
               MetricType::Counter);
    auto fleet_exchanges =
        family("sluice_fleet_exchanges_total",
               "Lease exchanges with Redis for a fleet quota, by result (ok or failed).", MetricType::Counter);
    for (const FleetAccountSnapshot& account : snapshot.fleet) {
        const std::string cls =
            account.class_name.empty() ? class_label(snapshot.class_names, account.class_id) : account.class_name;
        const Labels labels{{"class", cls}, {"interface", account.interface}};
        add(fleet_state, {{"class", cls}, {"interface", account.interface}, {"state", "leasing"}},
            account.fallback ? 0 : 1);
        add(fleet_state, {{"class", cls}, {"interface", account.interface}, {"state", "fallback"}},
            account.fallback ? 1 : 0);
        add(fleet_fallbacks, labels, static_cast<double>(account.fallbacks));
        add(fleet_credit, labels, static_cast<double>(account.credit));
        add(fleet_granted, {{"class", cls}, {"from", "redis"}, {"interface", account.interface}},
            static_cast<double>(account.redis_granted));
        add(fleet_granted, {{"class", cls}, {"from", "fallback"}, {"interface", account.interface}},
            static_cast<double>(account.fallback_granted));
        add(fleet_exchanges, {{"class", cls}, {"interface", account.interface}, {"result", "ok"}},
            static_cast<double>(account.exchanges));
        add(fleet_exchanges, {{"class", cls}, {"interface", account.interface}, {"result", "failed"}},
            static_cast<double>(account.failures));
    }

    auto version =
        family("sluice_policy_version", "The current committed policy version (0: none yet).", MetricType::Gauge);
    add(version, {}, static_cast<double>(snapshot.policy_version));
    auto info =
        family("sluice_policy_info", "The current policy version and its SHA-256; always 1.", MetricType::Gauge);
    if (snapshot.policy_version != 0)
        add(info, {{"sha256", snapshot.policy_sha256}, {"version", std::to_string(snapshot.policy_version)}}, 1);
    auto pushes =
        family("sluice_policy_pushes_total", "Policy pushes, rollbacks and reloads, by result (dry runs not counted).",
               MetricType::Counter);
    add(pushes, {{"result", "accepted"}}, static_cast<double>(snapshot.pushes_accepted));
    add(pushes, {{"result", "rejected"}}, static_cast<double>(snapshot.pushes_rejected));
    auto stats_enabled =
        family("sluice_bpf_stats_enabled",
               "1 while the decision cost is measured (sluiced: while it holds BPF_ENABLE_STATS; sluice-dpdk: always).",
               MetricType::Gauge);
    add(stats_enabled, {}, snapshot.decision_cost_enabled ? 1 : 0);
    auto build = family("sluice_build_info", "The sluiced build; always 1.", MetricType::Gauge);
    add(build, {{"version", snapshot.version}, {"abi", std::to_string(SLUICE_ABI_VERSION)}}, 1);
    auto start = family("sluice_start_time_seconds", "When sluiced started, in Unix time.", MetricType::Gauge);
    add(start, {}, snapshot.start_time_s);
    auto uptime = family("sluice_uptime_seconds", "Seconds since sluiced started.", MetricType::Gauge);
    add(uptime, {}, snapshot.uptime_s);
    auto requests =
        family("sluice_control_requests_total", "Control socket requests, by verb and result.", MetricType::Counter);
    for (const auto& [verb, results] : snapshot.requests) {
        for (const auto& [result, count] : results)
            add(requests, {{"result", result}, {"verb", verb}}, static_cast<double>(count));
    }

    std::vector<MetricFamily> families;
    for (MetricFamily* f : {&packets,
                            &bytes,
                            &table_full,
                            &run_time,
                            &run_count,
                            &errors,
                            &sources,
                            &capacity,
                            &inserts,
                            &contended,
                            &events,
                            &no_policy,
                            &window_restarts,
                            &interface_version,
                            &hot,
                            &penalties_active,
                            &penalties,
                            &penalties_untracked,
                            &bans_active,
                            &bans_max,
                            &bans_refused,
                            &shadow,
                            &version,
                            &info,
                            &pushes,
                            &stats_enabled,
                            &build,
                            &start,
                            &uptime,
                            &requests,
                            &fleet_state,
                            &fleet_fallbacks,
                            &fleet_credit,
                            &fleet_granted,
                            &fleet_exchanges})
        families.push_back(std::move(*f));
    if (snapshot.request) add_request_families(*snapshot.request, snapshot.request_hot_keys, families);
    return families;
}

std::vector<MetricFamily> MetricsEndpoint::Latest::Collect() const {
    std::lock_guard lock(mutex_);
    return families_;
}

void MetricsEndpoint::Latest::set(std::vector<MetricFamily> families) {
    std::lock_guard lock(mutex_);
    families_ = std::move(families);
}

Result<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::serve(const std::string& address) {
    std::unique_ptr<MetricsEndpoint> endpoint(new MetricsEndpoint());
    try {
        // One thread: scrapes only copy a snapshot.
        endpoint->exposer_ = std::make_unique<prometheus::Exposer>(address, 1);
    } catch (const std::exception& error) {
        return Error{"cannot serve metrics on metrics_address \"" + address + "\": " + error.what() +
                         " (is the port in use, or the address not on this host?)",
                     "metrics_address"};
    }
    endpoint->exposer_->RegisterCollectable(endpoint->latest_);
    return endpoint;
}

MetricsEndpoint::~MetricsEndpoint() = default;

void MetricsEndpoint::publish(std::vector<MetricFamily> families) { latest_->set(std::move(families)); }

int MetricsEndpoint::port() const {
    const auto ports = exposer_->GetListeningPorts();
    return ports.empty() ? 0 : ports.front();
}

}  // namespace sluice
