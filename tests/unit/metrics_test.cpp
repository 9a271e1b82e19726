// SPDX-License-Identifier: Apache-2.0
// The metric families built from a daemon snapshot: names, labels, values,
// the zero series a known class starts with, and text exposition.
#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "metrics.h"

namespace sluice {
namespace {

using prometheus::MetricFamily;

const MetricFamily* find(const std::vector<MetricFamily>& families, const std::string& name) {
    for (const MetricFamily& family : families) {
        if (family.name == name) return &family;
    }
    return nullptr;
}

// The value of the one series of `name` whose labels include every pair in `want`.
std::optional<double> value(const std::vector<MetricFamily>& families, const std::string& name,
                            const std::map<std::string, std::string>& want) {
    const MetricFamily* family = find(families, name);
    if (family == nullptr) return std::nullopt;
    std::optional<double> found;
    for (const auto& metric : family->metric) {
        const bool match = std::all_of(want.begin(), want.end(), [&](const auto& pair) {
            return std::any_of(metric.label.begin(), metric.label.end(), [&](const auto& label) {
                return label.name == pair.first && label.value == pair.second;
            });
        });
        if (!match) continue;
        if (found) ADD_FAILURE() << name << ": more than one series matches";
        found = family->type == prometheus::MetricType::Counter ? metric.counter.value : metric.gauge.value;
    }
    return found;
}

DaemonSnapshot snapshot_with_traffic() {
    DaemonSnapshot snapshot;
    snapshot.version = "0.1.0";
    snapshot.policy_version = 3;
    snapshot.policy_sha256 = "abc";
    snapshot.pushes_accepted = 3;
    snapshot.pushes_rejected = 1;
    snapshot.class_names = {{0, "unclassified"}, {1, "default"}, {2, "web"}};
    snapshot.requests["status"]["ok"] = 5;
    InterfaceSnapshot sl0;
    sl0.name = "sl0";
    sl0.active_version = 3;
    sl0.counters.resize(SLUICE_COUNTER_SLOTS);
    sl0.counters[sluice_counter_index(1, SLUICE_VERDICT_PASS, SLUICE_REASON_ADMITTED)] = {100, 6400};
    sl0.counters[sluice_counter_index(1, SLUICE_VERDICT_DROP, SLUICE_REASON_SOURCE)] = {900, 57600};
    sl0.counters[sluice_counter_index(2, SLUICE_VERDICT_DROP, SLUICE_REASON_TABLE_FULL)] = {7, 448};
    sl0.counters[sluice_counter_index(9, SLUICE_VERDICT_PASS, SLUICE_REASON_ADMITTED)] = {1, 64};  // a removed class
    sl0.stats[SLUICE_STAT_SOURCE_INSERTS] = 12;
    sl0.stats[SLUICE_STAT_SOURCE_EVICTIONS] = 4;
    sl0.stats[SLUICE_STAT_SOURCE_CONTENDED] = 1;
    sl0.sources = SourceTableUsage{.capacity = 1024, .in_debt = 9, .known = 30};
    sl0.stats[SLUICE_STAT_STATE_LOOKUP_FAILED] = 2;
    sl0.syscall_errors.emplace();
    (*sl0.syscall_errors)[static_cast<size_t>(SyscallOp::map_lookup)] = 4;
    sl0.decision_cost = {2'000'000'000, 10'000'000};
    sl0.window_restarts = 5;
    sluice_source_key key{};
    key.class_id = 1;
    key.family = SLUICE_FAMILY_IPV4;
    key.addr[0] = 10, key.addr[1] = 2, key.addr[3] = 1;
    sl0.hot_sources.push_back(HotSource{key, 1234.5, 12345, 0.9, 0});
    snapshot.interfaces.push_back(sl0);
    return snapshot;
}

TEST(Metrics, DecisionsByInterfaceClassVerdictAndReason) {
    const auto families = build_metric_families(snapshot_with_traffic());
    EXPECT_EQ(value(families, "sluice_packets_total",
                    {{"interface", "sl0"}, {"class", "default"}, {"verdict", "drop"}, {"reason", "source"}}),
              900);
    EXPECT_EQ(value(families, "sluice_bytes_total",
                    {{"interface", "sl0"}, {"class", "default"}, {"verdict", "pass"}, {"reason", "admitted"}}),
              6400);
    // A known class starts every series it can have at zero, so rate() works from the first packet.
    EXPECT_EQ(value(families, "sluice_packets_total", {{"class", "web"}, {"verdict", "drop"}, {"reason", "global"}}),
              0);
    // ...but not impossible ones, and class 0 only has parse outcomes and bans' drops.
    EXPECT_FALSE(
        value(families, "sluice_packets_total", {{"class", "web"}, {"verdict", "pass"}, {"reason", "source"}}));
    EXPECT_FALSE(value(families, "sluice_packets_total", {{"class", "unclassified"}, {"reason", "admitted"}}));
    EXPECT_EQ(value(families, "sluice_packets_total",
                    {{"class", "unclassified"}, {"verdict", "drop"}, {"reason", "malformed"}}),
              0);
    // A class the policy no longer names still shows its traffic.
    EXPECT_EQ(value(families, "sluice_packets_total", {{"class", "class_9"}, {"reason", "admitted"}}), 1);
    EXPECT_EQ(value(families, "sluice_table_full_decisions_total", {{"decision", "closed"}}), 7);
    EXPECT_EQ(value(families, "sluice_table_full_decisions_total", {{"decision", "open"}}), 0);
    EXPECT_EQ(value(families, "sluice_table_full_decisions_total", {{"decision", "evict"}}), 4);
}

TEST(Metrics, ShadowFiguresStandBesideEnforcedOnes) {
    DaemonSnapshot snapshot = snapshot_with_traffic();
    snapshot.shadow_classes = {2};
    InterfaceSnapshot& sl0 = snapshot.interfaces[0];
    sl0.counters[sluice_counter_index(2, SLUICE_VERDICT_WOULD_DROP, SLUICE_REASON_SOURCE)] = {40, 2560};
    sl0.counters[sluice_counter_index(2, SLUICE_VERDICT_WOULD_DROP, SLUICE_REASON_TABLE_FULL)] = {3, 192};
    sluice_source_key key = sl0.hot_sources[0].key;
    key.class_id = 2;
    sl0.hot_sources.push_back(HotSource{key, 55, 550, 0.05, 0, SLUICE_VERDICT_WOULD_DROP});
    const auto families = build_metric_families(snapshot);
    const std::map<std::string, std::string> web_source{{"class", "web"}, {"reason", "source"}};
    auto with = [](std::map<std::string, std::string> labels, std::string verdict) {
        labels["verdict"] = std::move(verdict);
        return labels;
    };
    EXPECT_EQ(value(families, "sluice_packets_total", with(web_source, "would_drop")), 40);
    EXPECT_EQ(value(families, "sluice_bytes_total", with(web_source, "would_drop")), 2560);
    EXPECT_EQ(value(families, "sluice_packets_total", with(web_source, "drop")), 0);  // side by side
    // A class in shadow starts its would_drop series at zero; one enforcing has none.
    EXPECT_EQ(
        value(families, "sluice_packets_total", {{"class", "web"}, {"verdict", "would_drop"}, {"reason", "class"}}), 0);
    EXPECT_FALSE(value(families, "sluice_packets_total", {{"class", "default"}, {"verdict", "would_drop"}}));
    EXPECT_FALSE(
        value(families, "sluice_packets_total", {{"class", "web"}, {"verdict", "would_drop"}, {"reason", "admitted"}}));
    EXPECT_FALSE(value(families, "sluice_packets_total", {{"class", "unclassified"}, {"verdict", "would_drop"}}));
    // The table closed on them too, whether it dropped them or not.
    EXPECT_EQ(value(families, "sluice_table_full_decisions_total", {{"decision", "closed"}}), 10);
    EXPECT_EQ(value(families, "sluice_class_shadow", {{"class", "web"}}), 1);
    EXPECT_EQ(value(families, "sluice_class_shadow", {{"class", "default"}}), 0);
    EXPECT_FALSE(value(families, "sluice_class_shadow", {{"class", "unclassified"}}));
    EXPECT_EQ(value(families, "sluice_hot_source_drop_rate", {{"class", "web"}, {"verdict", "would_drop"}}), 55);
    EXPECT_EQ(value(families, "sluice_hot_source_drop_rate", {{"class", "default"}, {"verdict", "drop"}}), 1234.5);
}

TEST(Metrics, PenaltiesInForceImposedAndUntracked) {
    DaemonSnapshot snapshot = snapshot_with_traffic();
    snapshot.penalty_classes = {2};
    InterfaceSnapshot& sl0 = snapshot.interfaces[0];
    sl0.penalties_active = {{2, 3}, {9, 1}};  // class 9: removed while one of its penalties runs
    sl0.penalties_untracked = 4;
    sl0.stats[SLUICE_STAT_PENALTIES] = 11;
    sl0.counters[sluice_counter_index(2, SLUICE_VERDICT_DROP, SLUICE_REASON_PENALTY)] = {250, 16000};
    const auto families = build_metric_families(snapshot);
    EXPECT_EQ(value(families, "sluice_penalties_active", {{"interface", "sl0"}, {"class", "web"}}), 3);
    EXPECT_EQ(value(families, "sluice_penalties_active", {{"interface", "sl0"}, {"class", "class_9"}}), 1);
    // A class without a penalty box has no series.
    EXPECT_FALSE(value(families, "sluice_penalties_active", {{"class", "default"}}));
    EXPECT_EQ(value(families, "sluice_penalties_total", {{"interface", "sl0"}}), 11);
    EXPECT_EQ(value(families, "sluice_penalties_untracked_total", {{"interface", "sl0"}}), 4);
    // Drops by reason penalty are the per-reason counters' own.
    EXPECT_EQ(value(families, "sluice_packets_total",
                    {{"interface", "sl0"}, {"class", "web"}, {"verdict", "drop"}, {"reason", "penalty"}}),
              250);
    EXPECT_EQ(value(families, "sluice_bytes_total", {{"class", "web"}, {"verdict", "drop"}, {"reason", "penalty"}}),
              16000);
    EXPECT_FALSE(value(families, "sluice_packets_total", {{"class", "default"}, {"reason", "penalty"}}));
}

TEST(Metrics, AClassWithAPenaltyStartsItsSeriesAtZero) {
    DaemonSnapshot snapshot = snapshot_with_traffic();
    snapshot.penalty_classes = {2};
    snapshot.shadow_classes = {2};
    const auto families = build_metric_families(snapshot);
    EXPECT_EQ(value(families, "sluice_penalties_active", {{"interface", "sl0"}, {"class", "web"}}), 0);
    EXPECT_EQ(value(families, "sluice_penalties_total", {{"interface", "sl0"}}), 0);
    EXPECT_EQ(value(families, "sluice_penalties_untracked_total", {{"interface", "sl0"}}), 0);
    EXPECT_EQ(value(families, "sluice_packets_total", {{"class", "web"}, {"verdict", "drop"}, {"reason", "penalty"}}),
              0);
    // In shadow, the penalty box passes what it would drop.
    EXPECT_EQ(
        value(families, "sluice_packets_total", {{"class", "web"}, {"verdict", "would_drop"}, {"reason", "penalty"}}),
        0);
    EXPECT_FALSE(
        value(families, "sluice_packets_total", {{"class", "web"}, {"verdict", "pass"}, {"reason", "penalty"}}));
    const std::string text = prometheus::TextSerializer().Serialize(families);
    EXPECT_NE(text.find("# HELP sluice_penalties_active Sources in the penalty box now"), std::string::npos) << text;
    EXPECT_NE(text.find("# TYPE sluice_penalties_active gauge"), std::string::npos);
    EXPECT_NE(text.find("# TYPE sluice_penalties_total counter"), std::string::npos);
    EXPECT_NE(text.find("sluice_penalties_active{class=\"web\",interface=\"sl0\"} 0"), std::string::npos) << text;
}

TEST(Metrics, BansInForceTheCapAndRefusals) {
    DaemonSnapshot snapshot = snapshot_with_traffic();
    snapshot.bans_active = 3;
    snapshot.max_bans = 1024;
    snapshot.bans_refused_cap = 2;
    snapshot.bans_refused_protected = 5;
    InterfaceSnapshot& sl0 = snapshot.interfaces[0];
    sl0.counters[sluice_counter_index(SLUICE_CLASS_UNCLASSIFIED, SLUICE_VERDICT_DROP, SLUICE_REASON_BAN)] = {42, 2688};
    const auto families = build_metric_families(snapshot);
    EXPECT_EQ(value(families, "sluice_bans_active", {}), 3);
    EXPECT_EQ(value(families, "sluice_bans_max", {}), 1024);
    EXPECT_EQ(value(families, "sluice_bans_refused_total", {{"why", "cap"}}), 2);
    EXPECT_EQ(value(families, "sluice_bans_refused_total", {{"why", "protected"}}), 5);
    // Bans are checked before classification: their drops are class 0's.
    EXPECT_EQ(value(families, "sluice_packets_total",
                    {{"interface", "sl0"}, {"class", "unclassified"}, {"verdict", "drop"}, {"reason", "ban"}}),
              42);
    EXPECT_EQ(value(families, "sluice_bytes_total", {{"class", "unclassified"}, {"reason", "ban"}}), 2688);
    const std::string text = prometheus::TextSerializer().Serialize(families);
    EXPECT_NE(text.find("# TYPE sluice_bans_active gauge\nsluice_bans_active 3"), std::string::npos) << text;
    EXPECT_NE(text.find("sluice_bans_refused_total{why=\"cap\"} 2"), std::string::npos) << text;
}

TEST(Metrics, BansDropsStartAtZeroAndOnlyForClassZero) {
    const auto families = build_metric_families(snapshot_with_traffic());
    EXPECT_EQ(value(families, "sluice_bans_active", {}), 0);
    EXPECT_EQ(value(families, "sluice_bans_refused_total", {{"why", "cap"}}), 0);
    EXPECT_EQ(
        value(families, "sluice_packets_total", {{"class", "unclassified"}, {"verdict", "drop"}, {"reason", "ban"}}),
        0);
    EXPECT_FALSE(
        value(families, "sluice_packets_total", {{"class", "unclassified"}, {"verdict", "pass"}, {"reason", "ban"}}));
    EXPECT_FALSE(value(families, "sluice_packets_total", {{"class", "default"}, {"reason", "ban"}}));
}

TEST(Metrics, CostStateAndPolicy) {
    const auto families = build_metric_families(snapshot_with_traffic());
    EXPECT_EQ(value(families, "sluice_bpf_run_time_seconds_total", {{"interface", "sl0"}}), 2.0);
    EXPECT_EQ(value(families, "sluice_bpf_run_count_total", {{"interface", "sl0"}}), 1e7);
    EXPECT_EQ(value(families, "sluice_dataplane_errors_total", {{"operation", "map_lookup"}}), 4);
    EXPECT_EQ(value(families, "sluice_dataplane_errors_total", {{"operation", "state_lookup"}}), 2);
    EXPECT_EQ(value(families, "sluice_source_inserts_total", {{"interface", "sl0"}}), 12);
    EXPECT_EQ(value(families, "sluice_source_contended_total", {{"interface", "sl0"}}), 1);
    EXPECT_EQ(value(families, "sluice_sources", {{"state", "in_debt"}}), 9);
    EXPECT_EQ(value(families, "sluice_sources", {{"state", "known"}}), 30);
    EXPECT_EQ(value(families, "sluice_source_capacity", {{"interface", "sl0"}}), 1024);
    EXPECT_EQ(value(families, "sluice_policy_version", {}), 3);
    EXPECT_EQ(value(families, "sluice_policy_info", {{"version", "3"}, {"sha256", "abc"}}), 1);
    EXPECT_EQ(value(families, "sluice_policy_pushes_total", {{"result", "rejected"}}), 1);
    EXPECT_EQ(value(families, "sluice_interface_policy_version", {{"interface", "sl0"}}), 3);
    EXPECT_EQ(value(families, "sluice_window_restarts_total", {{"interface", "sl0"}}), 5);
    EXPECT_EQ(value(families, "sluice_control_requests_total", {{"verb", "status"}, {"result", "ok"}}), 5);
    EXPECT_EQ(value(families, "sluice_hot_source_drop_rate", {{"source", "10.2.0.1"}, {"class", "default"}}), 1234.5);
}

TEST(Metrics, DpdkPortsHaveNoSyscallsAndNameTheirProgram) {
    DaemonSnapshot snapshot = snapshot_with_traffic();
    InterfaceSnapshot& port = snapshot.interfaces[0];
    port.kind = "dpdk";
    port.syscall_errors.reset();
    const auto families = build_metric_families(snapshot);
    EXPECT_EQ(value(families, "sluice_bpf_run_count_total", {{"interface", "sl0"}, {"program", "sluice_dpdk"}}), 1e7);
    EXPECT_FALSE(value(families, "sluice_bpf_run_count_total", {{"program", "sluice_xdp"}}));
    EXPECT_FALSE(value(families, "sluice_dataplane_errors_total", {{"operation", "map_lookup"}}));
    EXPECT_EQ(value(families, "sluice_dataplane_errors_total", {{"operation", "state_lookup"}}), 2);
}

TEST(Metrics, NamesFollowPrometheusConventions) {
    for (const MetricFamily& family : build_metric_families(snapshot_with_traffic())) {
        EXPECT_EQ(family.name.rfind("sluice_", 0), 0u) << family.name;
        const bool total = family.name.size() > 6 && family.name.substr(family.name.size() - 6) == "_total";
        EXPECT_EQ(total, family.type == prometheus::MetricType::Counter) << family.name;
        EXPECT_FALSE(family.help.empty()) << family.name;
    }
}

TEST(Metrics, TextExpositionHasTypeLines) {
    const std::string text = prometheus::TextSerializer().Serialize(build_metric_families(snapshot_with_traffic()));
    EXPECT_NE(text.find("# TYPE sluice_packets_total counter"), std::string::npos);
    EXPECT_NE(text.find("# TYPE sluice_sources gauge"), std::string::npos);
}

// Every sluice_* name a panel of packaging/grafana-dashboard.json queries is
// one sluiced exports (a histogram's by its _bucket, _sum or _count series).
TEST(Metrics, TheGrafanaDashboardQueriesExportedMetrics) {
    std::ifstream file(std::filesystem::path(SLUICE_PACKAGING_DIR) / "grafana-dashboard.json");
    ASSERT_TRUE(file);
    const nlohmann::json dashboard = nlohmann::json::parse(file, nullptr, false);
    ASSERT_FALSE(dashboard.is_discarded()) << "grafana-dashboard.json is not valid JSON";
    std::vector<std::string> queries;
    const std::function<void(const nlohmann::json&)> collect = [&](const nlohmann::json& node) {
        if (node.is_object()) {
            for (const auto& [key, child] : node.items()) {
                const bool query = key == "expr" || key == "query" || key == "definition";  // panels, variables
                if (query && child.is_string()) queries.push_back(child.get<std::string>());
                collect(child);
            }
        } else if (node.is_array()) {
            for (const nlohmann::json& child : node) collect(child);
        }
    };
    collect(dashboard);
    ASSERT_FALSE(queries.empty());

    DaemonSnapshot snapshot = snapshot_with_traffic();
    snapshot.request = RequestGateStats{};  // the request families exist only with [request]
    std::set<std::string> exported;
    for (const MetricFamily& family : build_metric_families(snapshot)) {
        exported.insert(family.name);
        if (family.type == prometheus::MetricType::Histogram)
            for (const char* suffix : {"_bucket", "_sum", "_count"}) exported.insert(family.name + suffix);
    }
    const std::regex metric_name("sluice_[a-z0-9_]+");
    std::set<std::string> queried;
    for (const std::string& query : queries)
        for (auto it = std::sregex_iterator(query.begin(), query.end(), metric_name); it != std::sregex_iterator();
             ++it)
            queried.insert(it->str());
    for (const std::string& name : queried)
        EXPECT_TRUE(exported.count(name)) << name << " is not a metric sluiced exports";
    // The penalty box has its panel: in force now, and the drops it causes.
    EXPECT_TRUE(queried.count("sluice_penalties_active"));
    EXPECT_TRUE(std::any_of(queries.begin(), queries.end(), [](const std::string& query) {
        return query.find("sluice_packets_total") != std::string::npos &&
               query.find("reason=\"penalty\"") != std::string::npos;
    }));
    // So do bans.
    EXPECT_TRUE(queried.count("sluice_bans_active"));
    EXPECT_TRUE(queried.count("sluice_bans_refused_total"));
    EXPECT_TRUE(std::any_of(queries.begin(), queries.end(), [](const std::string& query) {
        return query.find("sluice_packets_total") != std::string::npos &&
               query.find("reason=\"ban\"") != std::string::npos;
    }));
}

TEST(Metrics, SourceAddresses) {
    sluice_source_key v6{};
    v6.family = SLUICE_FAMILY_IPV6;
    v6.addr[0] = 0x20, v6.addr[1] = 0x01, v6.addr[2] = 0x0d, v6.addr[3] = 0xb8;
    EXPECT_EQ(source_address(v6), "2001:db8::");
    sluice_source_key v4{};
    v4.family = SLUICE_FAMILY_IPV4;
    v4.addr[0] = 192, v4.addr[1] = 0, v4.addr[2] = 2, v4.addr[3] = 7;
    EXPECT_EQ(source_address(v4), "192.0.2.7");
}

}  // namespace
}  // namespace sluice
