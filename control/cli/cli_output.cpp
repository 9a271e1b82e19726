// SPDX-License-Identifier: Apache-2.0
#include "cli_output.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <optional>
#include <utility>

#include "printable.h"

namespace sluice::cli {
namespace {

using json = nlohmann::json;

constexpr std::string_view kMissing = "-";
constexpr std::size_t kShortShaLength = 12;

// The member `key` of `object`, or null when `object` is not an object or
// lacks it.
const json& member(const json& object, std::string_view key) {
    static const json null_value;
    if (!object.is_object()) return null_value;
    const auto found = object.find(key);
    return found == object.end() ? null_value : *found;
}

std::string text_of(const json& value) {
    if (value.is_string()) return printable_line(value.get<std::string>());
    if (value.is_number_unsigned()) return std::to_string(value.get<std::uint64_t>());
    if (value.is_number_integer()) return std::to_string(value.get<std::int64_t>());
    if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
    if (value.is_number_float()) {
        char digits[32];
        std::snprintf(digits, sizeof(digits), "%g", value.get<double>());
        return digits;
    }
    return std::string(kMissing);
}

std::string text_of(const json& object, std::string_view key) { return text_of(member(object, key)); }

std::optional<std::int64_t> integer_of(const json& object, std::string_view key) {
    const json& value = member(object, key);
    if (value.is_number_unsigned()) {
        const auto unsigned_value = value.get<std::uint64_t>();
        return unsigned_value > static_cast<std::uint64_t>(INT64_MAX) ? INT64_MAX
                                                                      : static_cast<std::int64_t>(unsigned_value);
    }
    if (value.is_number_integer()) return value.get<std::int64_t>();
    if (value.is_number_float()) return static_cast<std::int64_t>(value.get<double>());
    return std::nullopt;
}

double number_of(const json& object, std::string_view key) {
    const json& value = member(object, key);
    return value.is_number() ? value.get<double>() : 0.0;
}

std::string short_sha(const json& object) {
    const json& sha = member(object, "sha256");
    return sha.is_string() ? printable_line(sha.get<std::string>().substr(0, kShortShaLength)) : std::string(kMissing);
}

std::string time_of(const json& object, std::string_view key) {
    const auto unix_s = integer_of(object, key);
    return unix_s ? utc_time(*unix_s) : std::string(kMissing);
}

// A version number, "-" for none (0 means no policy on an interface).
std::string version_of(const json& object, std::string_view key) {
    const auto version = integer_of(object, key);
    return version && *version > 0 ? std::to_string(*version) : std::string(kMissing);
}

std::string with_newline(std::string text) {
    if (!text.empty() && text.back() != '\n') text += '\n';
    return text;
}

std::string joined(const json& list, std::string_view separator) {
    std::string text;
    if (!list.is_array()) return text;
    for (const json& item : list) text += (text.empty() ? "" : std::string(separator)) + text_of(item);
    return text;
}

// How many reasons the stats table names per class before "+N".
constexpr std::size_t kDropReasonsShown = 3;

// "source 12.3k, global 1.1k": the drop rate by reason, highest first, from
// the last sample; reasons whose rate shows as "0" are left out, and "-" when
// nothing is being dropped. `key` is drop_pps_by_reason, or
// would_drop_pps_by_reason for what classes in shadow would drop.
std::string drop_rates_by_reason(const json& klass, std::string_view key = "drop_pps_by_reason") {
    std::vector<std::pair<double, std::string>> rates;
    const json& reasons = member(klass, key);
    if (reasons.is_object()) {
        for (const auto& [reason, pps] : reasons.items()) {
            if (pps.is_number() && human_rate(pps.get<double>()) != "0")
                rates.emplace_back(pps.get<double>(), printable_line(reason));
        }
    }
    if (rates.empty()) return std::string(kMissing);
    // Highest first; equal rates by name, so a refresh does not shuffle them.
    std::sort(rates.begin(), rates.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    std::string text;
    for (std::size_t i = 0; i < rates.size() && i < kDropReasonsShown; ++i) {
        text += (text.empty() ? "" : ", ") + rates[i].second + " " + human_rate(rates[i].first);
    }
    if (rates.size() > kDropReasonsShown) text += ", +" + std::to_string(rates.size() - kDropReasonsShown);
    return text;
}

// "1.2M decisions/s, 104 ns/decision" from the kernel's BPF run-time
// statistics over the last sample.
std::string decision_cost(const json& interface, double packets_per_second) {
    const json& per_second = member(interface, "decisions_per_second");
    const json& ns = member(interface, "decision_ns");
    if (!per_second.is_number() || !ns.is_number()) return "decision cost -";  // a daemon without the fields
    const double decisions = per_second.get<double>();
    // Every packet counted is one run of the program, so runs that stand still
    // while packets flow mean the kernel is not counting (BPF_ENABLE_STATS off).
    // Only XDP has BPF run-time stats; a daemon without "kind" is sluiced.
    if (decisions <= 0 && packets_per_second > 0) {
        const json& kind = member(interface, "kind");
        if (kind.is_string() && kind.get<std::string>() != "xdp") return "decision cost not measured";
        return "decision cost not measured: BPF run-time stats are off";
    }
    if (decisions <= 0) return "0 decisions/s";
    char cost[32];
    std::snprintf(cost, sizeof(cost), "%.0f", ns.get<double>());
    return human_rate(decisions) + " decisions/s, " + cost + " ns/decision";
}

std::string stats_footer(const json& stats) {
    std::string footer;
    if (!stats.is_object()) return footer;
    for (const auto& [name, value] : stats.items()) {
        if (value.is_number() && value.get<double>() != 0) footer += " " + printable_line(name) + "=" + text_of(value);
    }
    return footer.empty() ? footer : "stats:" + footer + "\n";
}

// "sources: 1.2k in debt of 1M entries (0.1%), 35k known"
std::string sources_line(const json& sources) {
    if (!sources.is_object()) return "";
    char occupancy[32];
    std::snprintf(occupancy, sizeof(occupancy), "%.1f%%", 100 * number_of(sources, "occupancy"));
    return "sources: " + human_rate(number_of(sources, "in_debt")) + " in debt of " +
           human_rate(number_of(sources, "capacity")) + " entries (" + occupancy + "), " +
           human_rate(number_of(sources, "known")) + " known\n";
}

bool in_shadow(const json& klass) {
    const json& shadow = member(klass, "shadow");
    return shadow.is_boolean() && shadow.get<bool>();
}

std::string format_interface_stats(const json& interface, double interval_s) {
    using Align = Table::Align;
    const json& classes = member(interface, "classes");
    // Shadow figures stand beside the enforced ones, once a class is in
    // shadow or has been: otherwise the table is as it always was.
    bool shadow_shown = false;
    if (classes.is_array())
        for (const json& klass : classes)
            shadow_shown = shadow_shown || in_shadow(klass) || number_of(klass, "would_drop_packets") > 0;
    std::vector<std::string> headers{"CLASS", "PASS/s", "DROP/s", "DROP/s BY REASON", "PASS_PKTS", "DROP_PKTS"};
    std::vector<Align> align{Align::left, Align::right, Align::right, Align::left, Align::right, Align::right};
    if (shadow_shown) {
        headers = {"CLASS",        "PASS/s",           "DROP/s",
                   "WOULD_DROP/s", "DROP/s BY REASON", "WOULD_DROP/s BY REASON",
                   "PASS_PKTS",    "DROP_PKTS",        "WOULD_DROP_PKTS"};
        align = {Align::left, Align::right, Align::right, Align::right, Align::left,
                 Align::left, Align::right, Align::right, Align::right};
    }
    Table table(headers, align);
    double packets_per_second = 0;
    if (classes.is_array()) {
        for (const json& klass : classes) {
            packets_per_second +=
                number_of(klass, "pass_pps") + number_of(klass, "drop_pps") + number_of(klass, "would_drop_pps");
            if (!shadow_shown) {
                table.add_row({text_of(klass, "name"), human_rate(number_of(klass, "pass_pps")),
                               human_rate(number_of(klass, "drop_pps")), drop_rates_by_reason(klass),
                               text_of(klass, "pass_packets"), text_of(klass, "drop_packets")});
                continue;
            }
            table.add_row({text_of(klass, "name") + (in_shadow(klass) ? " (shadow)" : ""),
                           human_rate(number_of(klass, "pass_pps")), human_rate(number_of(klass, "drop_pps")),
                           human_rate(number_of(klass, "would_drop_pps")), drop_rates_by_reason(klass),
                           drop_rates_by_reason(klass, "would_drop_pps_by_reason"), text_of(klass, "pass_packets"),
                           text_of(klass, "drop_packets"), text_of(klass, "would_drop_packets")});
        }
    }

    std::string text = text_of(interface, "name") + ": policy version " + version_of(interface, "active_version");
    if (interval_s > 0) {
        char interval[32];
        std::snprintf(interval, sizeof(interval), "%.1f", interval_s);
        text += ", " + decision_cost(interface, packets_per_second) + " (rates over the last " + interval + " s)";
    } else {
        text += ", rates not sampled yet";  // sluiced needs two samples, about a second apart
    }
    return text + "\n" + table.render() + sources_line(member(interface, "sources")) +
           stats_footer(member(interface, "stats"));
}

}  // namespace

std::string human_rate(double per_second) {
    if (!std::isfinite(per_second) || per_second < 0) return std::string(kMissing);
    if (per_second == 0) return "0";
    static constexpr std::array<std::string_view, 5> kSuffixes = {"", "k", "M", "G", "T"};
    double value = per_second;
    std::size_t scale = 0;
    // 999.5 would round to "1000": show it as "1k" instead.
    while (value >= 999.5 && scale + 1 < kSuffixes.size()) {
        value /= 1000;
        ++scale;
    }
    char digits[32];
    if (value < 9.95) {
        std::snprintf(digits, sizeof(digits), "%.1f", value);
    } else if (scale > 0 && value < 99.95) {
        std::snprintf(digits, sizeof(digits), "%.1f", value);
    } else {
        std::snprintf(digits, sizeof(digits), "%.0f", value);
    }
    std::string text = digits;
    if (text.size() > 2 && text.compare(text.size() - 2, 2, ".0") == 0) text.resize(text.size() - 2);
    return text + std::string(kSuffixes[scale]);
}

std::string human_duration(double seconds) {
    if (!std::isfinite(seconds) || seconds < 0) return std::string(kMissing);
    const auto total = static_cast<std::uint64_t>(seconds);
    const std::uint64_t days = total / 86400, hours = total / 3600 % 24, minutes = total / 60 % 60, secs = total % 60;
    if (days > 0) return std::to_string(days) + "d " + std::to_string(hours) + "h";
    if (hours > 0) return std::to_string(hours) + "h " + std::to_string(minutes) + "m";
    if (minutes > 0) return std::to_string(minutes) + "m " + std::to_string(secs) + "s";
    return std::to_string(secs) + "s";
}

Table::Table(std::vector<std::string> headers, std::vector<Align> align)
    : headers_(std::move(headers)), align_(std::move(align)) {
    align_.resize(headers_.size(), Align::left);
}

void Table::add_row(std::vector<std::string> cells) {
    cells.resize(headers_.size());
    rows_.push_back(std::move(cells));
}

std::vector<std::string> Table::lines() const {
    std::vector<std::size_t> widths(headers_.size());
    for (std::size_t column = 0; column < headers_.size(); ++column) {
        widths[column] = headers_[column].size();
        for (const auto& row : rows_) widths[column] = std::max(widths[column], row[column].size());
    }
    const auto render_row = [&](const std::vector<std::string>& cells) {
        std::string line;
        for (std::size_t column = 0; column < cells.size(); ++column) {
            if (column > 0) line += "  ";
            const std::string padding(widths[column] - cells[column].size(), ' ');
            line += align_[column] == Align::right ? padding + cells[column] : cells[column] + padding;
        }
        line.erase(line.find_last_not_of(' ') + 1);
        return line + "\n";
    };
    std::vector<std::string> lines{render_row(headers_)};
    for (const auto& row : rows_) lines.push_back(render_row(row));
    return lines;
}

std::string Table::render() const {
    std::string text;
    for (const std::string& line : lines()) text += line;
    return text;
}

std::string format_status(const json& result) {
    const json& daemon = member(result, "daemon");
    std::string text = "daemon: pid " + text_of(daemon, "pid") + ", version " + text_of(daemon, "version") + ", up " +
                       human_duration(number_of(daemon, "uptime_s")) + ", socket " + text_of(daemon, "socket") + "\n";

    const json& policy = member(result, "policy");
    if (policy.is_object()) {
        text += "policy: version " + version_of(policy, "version") + ", sha256 " + short_sha(policy) + ", origin " +
                text_of(policy, "origin") + ", applied " + time_of(policy, "applied_unix_s") + "\n";
    } else {
        text += "policy: none (passing all under no_policy until the first sluicectl policy push FILE)\n";
    }

    const json& bans = member(result, "bans");
    if (bans.is_object())
        text += "bans: " + text_of(bans, "active") + " in force (max_bans " + text_of(bans, "max_bans") +
                "; sluicectl bans)\n";

    const json& interfaces = member(result, "interfaces");
    if (interfaces.is_array() && !interfaces.empty()) {
        Table table({"NAME", "MODE", "VERSION", "SOURCES(in debt/known)/CAPACITY", "PIN"});
        for (const json& interface : interfaces) {
            // A DPDK port has no XDP mode: its kind says what it is.
            const json& mode = member(interface, "mode");
            table.add_row({text_of(interface, "name"), text_of(mode.is_null() ? member(interface, "kind") : mode),
                           version_of(interface, "active_version"),
                           text_of(member(interface, "sources"), "in_debt") + "/" +
                               text_of(member(interface, "sources"), "known") + "/" +
                               text_of(member(interface, "sources"), "capacity"),
                           text_of(interface, "pin_dir")});
        }
        text += "\n" + table.render();
        // What the daemon's periodic check found wrong (XDP only).
        for (const json& interface : interfaces) {
            const std::string name = text_of(interface, "name");
            if (text_of(interface, "interface_state") == "missing")
                text += name +
                        ": interface missing (deleted behind sluiced's back; the program no longer runs there: "
                        "sluicectl detach " +
                        name + ")\n";
            if (text_of(interface, "pins") == "missing")
                text += name + ": pins missing (" + joined(member(interface, "missing_pins"), ", ") +
                        "; it enforces while sluiced runs, but comes off if sluiced stops: detach and attach to "
                        "re-pin)\n";
        }
    } else {
        text += "interfaces: none attached (sluicectl attach IFNAME)\n";
    }

    const json& fleet = member(result, "fleet");
    if (fleet.is_object()) {
        text += "\nfleet: redis " + joined(member(fleet, "servers"), ", ") + ", namespace " +
                text_of(fleet, "namespace") + "\n";
        const json& quotas = member(fleet, "quotas");
        if (quotas.is_array() && !quotas.empty()) {
            Table table({"INTERFACE", "CLASS", "STATE", "ON_UNAVAILABLE", "CREDIT", "VERSION", "KEY"});
            for (const json& quota : quotas)
                table.add_row({text_of(quota, "interface"), text_of(quota, "class"), text_of(quota, "state"),
                               text_of(quota, "on_unavailable"), text_of(quota, "credit"),
                               version_of(quota, "policy_version"), text_of(quota, "key")});
            text += table.render();
        }
    }

    const json& requests = member(result, "requests");
    if (requests.is_object()) {
        text +=
            "\nrequests: nginx auth_request " +
            (member(requests, "http_port").is_null() ? std::string("off") : "port " + text_of(requests, "http_port")) +
            ", envoy rate limit service " +
            (member(requests, "grpc_port").is_null() ? std::string("off") : "port " + text_of(requests, "grpc_port")) +
            ", policy version " + version_of(requests, "policy_version") + ", " + text_of(requests, "counters") +
            " counters\n";
    }

    const json& unprotected = member(result, "unprotected");
    if (unprotected.is_array() && !unprotected.empty()) {
        text += "unprotected: " + joined(unprotected, ", ") + " (UP without Sluice)\n";
    }
    return text;
}

std::string format_attach(const json& result) {
    return "attached " + text_of(result, "interface") + " (ifindex " + text_of(result, "ifindex") + ", " +
           text_of(result, "mode") + " mode, policy version " + version_of(result, "active_version") + ")\n";
}

std::string format_detach(const json& result) {
    return "detached " + text_of(result, "interface") + " (program and pins removed)\n";
}

std::string format_push(const json& result, bool dry_run) {
    const std::string version = version_of(result, "version");
    const std::string sha = " (sha256 " + short_sha(result) + ")\n";
    const json& applied = member(result, "applied");
    std::string text;
    if (applied.is_boolean() && applied.get<bool>()) {
        text = "applied version " + version + sha;
    } else if (dry_run) {
        text = "dry run: would apply version " + version + sha;
    } else {
        text = "not applied: version " + version + sha;
    }
    const json& diff = member(result, "diff");
    const bool changed = diff.is_string() && !diff.get<std::string>().empty();
    return text + (changed ? with_newline(diff.get<std::string>()) : "no change\n");
}

Result<std::string> format_policy_show(const json& result, bool source) {
    const char* key = source ? "source" : "canonical";
    const json& text = member(result, key);
    if (!text.is_string()) {
        return Error{std::string("sluiced's answer to policy.show has no \"") + key + "\" text"};
    }
    return with_newline(text.get<std::string>());
}

std::string format_history(const json& result) {
    const json& versions = member(result, "versions");
    if (!versions.is_array() || versions.empty()) return "no policy versions yet (sluicectl policy push FILE)\n";
    const auto current = integer_of(result, "current");
    Table table({"VERSION", "APPLIED", "SHA256", "ORIGIN"});
    std::vector<bool> is_current;
    for (const json& version : versions) {
        table.add_row({version_of(version, "version"), time_of(version, "applied_unix_s"), short_sha(version),
                       text_of(version, "origin")});
        is_current.push_back(current && integer_of(version, "version") == current);
    }
    // A marker column in front, so '*' stands out at the left edge.
    const std::vector<std::string> lines = table.lines();
    std::string text = "  " + lines[0];
    for (std::size_t row = 0; row < is_current.size(); ++row) text += (is_current[row] ? "* " : "  ") + lines[row + 1];
    return text;
}

std::string format_diff(const json& result) {
    const json& diff = member(result, "diff");
    if (diff.is_string() && !diff.get<std::string>().empty()) return with_newline(diff.get<std::string>());
    return "no difference between version " + version_of(result, "from") + " and version " + version_of(result, "to") +
           "\n";
}

namespace {

// A latency bound in seconds as "0.5ms", "+Inf" as "> 0.5s".
std::string latency_text(const json& bound) {
    if (!bound.is_number()) return bound.is_string() ? "> 0.5s" : std::string(kMissing);
    char text[32];
    const double seconds = bound.get<double>();
    if (seconds < 1e-3)
        std::snprintf(text, sizeof(text), "%gus", seconds * 1e6);
    else
        std::snprintf(text, sizeof(text), "%gms", seconds * 1e3);
    return text;
}

// The request-level decisions of `stats` (the gate's counts since start).
std::string format_request_stats(const json& requests) {
    std::string text = "requests: " + text_of(requests, "decisions") +
                       " decided, p50 <= " + latency_text(member(requests, "latency_p50_le_s")) +
                       ", p99 <= " + latency_text(member(requests, "latency_p99_le_s")) + "; late " +
                       text_of(requests, "late") + ", overloaded " + text_of(requests, "overloaded") + ", invalid " +
                       text_of(requests, "invalid") + ", counters " + text_of(requests, "counters") + "\n";
    const json& domains = member(requests, "domains");
    if (!domains.is_array() || domains.empty()) return text;
    using Align = Table::Align;
    Table table({"DOMAIN", "CLASS", "ALLOWED", "REFUSED", "SHADOW_REFUSED"},
                {Align::left, Align::left, Align::right, Align::right, Align::right});
    for (const json& domain : domains) {
        for (const json& klass : member(domain, "classes")) {
            const std::string name = text_of(klass, "class");
            table.add_row({text_of(domain, "domain"), name.empty() ? "(no class)" : name, text_of(klass, "allowed"),
                           text_of(klass, "refused"), text_of(klass, "shadow_refused")});
        }
    }
    text += table.render();
    for (const json& domain : domains) {
        std::string also;
        for (const char* reason : {"domain_ceiling", "fleet", "table_full"})
            if (integer_of(domain, reason).value_or(0) > 0)
                also += std::string(also.empty() ? "" : ", ") + reason + " " + text_of(domain, reason);
        const json& identity = member(domain, "identity_failures");
        if (identity.is_object())
            for (const auto& [reason, count] : identity.items())
                also += std::string(also.empty() ? "" : ", ") + "identity " + printable_line(reason) + " " +
                        text_of(count);
        if (!also.empty()) text += "domain " + text_of(domain, "domain") + " also refused: " + also + "\n";
        if (integer_of(domain, "table_full_open").value_or(0) > 0)
            text += "domain " + text_of(domain, "domain") + " admitted " + text_of(domain, "table_full_open") +
                    " uncounted: the counter table was full (on_table_full = \"open\")\n";
    }
    return text;
}

}  // namespace

std::string format_stats(const json& result) {
    const json& interfaces = member(result, "interfaces");
    const json& requests = member(result, "requests");
    std::string text;
    if (!interfaces.is_array() || interfaces.empty()) {
        text = "no interfaces attached (sluicectl attach IFNAME)\n";
    } else {
        const double interval_s = number_of(result, "interval_s");
        for (const json& interface : interfaces) {
            if (!text.empty()) text += "\n";
            text += format_interface_stats(interface, interval_s);
        }
    }
    if (requests.is_object()) text += "\n" + format_request_stats(requests);
    return text;
}

namespace {

// The request counters refused most, when sluiced decides requests.
std::string format_request_keys(const json& keys) {
    if (!keys.is_array()) return "";
    if (keys.empty()) return "\nno request counter is being refused\n";
    using Align = Table::Align;
    Table table({"RANK", "DOMAIN", "CLASS", "KEY", "REFUSED/s", "SHARE"},
                {Align::right, Align::left, Align::left, Align::left, Align::right, Align::right});
    std::size_t rank = 0;
    for (const json& key : keys) {
        char percent[32];
        std::snprintf(percent, sizeof(percent), "%.1f%%", number_of(key, "share") * 100);
        table.add_row({std::to_string(++rank), text_of(key, "domain"), text_of(key, "class"), text_of(key, "key"),
                       human_rate(number_of(key, "refusals_per_second")), percent});
    }
    return "\nrequest counters refused most:\n" + table.render();
}

std::string format_source_top(const json& result);

// What each kind of restriction means, for the line under the table.
struct RestrictionKind {
    std::string_view kind;
    std::string_view meaning;
};
constexpr RestrictionKind kRestrictionKinds[] = {
    {"penalty", "penalty: in its class's penalty box, every packet dropped until the time left has passed"},
    {"ban", "ban: in a banned prefix (sluicectl bans), every packet dropped until the time left has passed"},
};

// "penalty 41s left" for a source's `restriction` (the daemon's top), "-"
// for none; a kind without an end shows as the kind alone.
std::string restriction_text(const json& restriction) {
    const json& kind = member(restriction, "kind");
    if (!kind.is_string()) return std::string(kMissing);
    const json& remaining = member(restriction, "remaining_s");
    if (!remaining.is_number()) return printable_line(kind.get<std::string>());
    // Up, so that the last part of a second reads "1s left", not "0s left".
    return printable_line(kind.get<std::string>()) + " " + human_duration(std::ceil(remaining.get<double>())) + " left";
}

}  // namespace

std::string format_top(const json& result) {
    return format_source_top(result) + format_request_keys(member(result, "request_keys"));
}

namespace {

std::string format_source_top(const json& result) {
    std::string text = "drops " + human_rate(number_of(result, "total_drops_per_second")) + "/s in total; ";
    const double tau_s = number_of(result, "tau_s");
    if (tau_s > 0) {
        char tau[32];
        std::snprintf(tau, sizeof(tau), "%g", tau_s);
        text += "rates decay over ~" + std::string(tau) + " s; ";
    }
    text += "from sampled drop events\n";
    const auto in_box = integer_of(result, "penalties_active");
    if (in_box && *in_box > 0)
        text += std::to_string(*in_box) + (*in_box == 1 ? " source" : " sources") + " in the penalty box\n";
    const auto banned = integer_of(result, "bans_active");
    if (banned && *banned > 0)
        text += std::to_string(*banned) + (*banned == 1 ? " ban" : " bans") + " in force (sluicectl bans)\n";
    const json& sources = member(result, "sources");
    if (!sources.is_array() || sources.empty()) return text + "no source is being dropped\n";

    using Align = Table::Align;
    // A source a class in shadow would drop is shown as such, in a column of
    // its own once there is one: it was passed, not dropped.
    bool shadow = false;
    for (const json& source : sources) shadow = shadow || text_of(source, "verdict") == "would_drop";
    // Likewise a source held back beyond its limits (the penalty box): the
    // kinds shown, for their meaning under the table.
    std::vector<std::string> restrictions;
    for (const json& source : sources) {
        const json& kind = member(member(source, "restriction"), "kind");
        if (kind.is_string() &&
            std::find(restrictions.begin(), restrictions.end(), text_of(kind)) == restrictions.end())
            restrictions.push_back(text_of(kind));
    }
    std::vector<std::string> headers{"RANK", "SOURCE", "CLASS", "INTERFACE", "DROP/s", "SHARE"};
    std::vector<Align> align{Align::right, Align::left, Align::left, Align::left, Align::right, Align::right};
    if (shadow) {
        headers.insert(headers.begin() + 3, "VERDICT");
        align.insert(align.begin() + 3, Align::left);
    }
    if (!restrictions.empty()) {
        headers.push_back("RESTRICTION");
        align.push_back(Align::left);
    }
    Table table(headers, align);
    std::size_t rank = 0;
    bool estimated = false;
    for (const json& source : sources) {
        // Space-Saving: a source that took over a displaced source's counter
        // counts up to error_per_second too many; flag the ones where that is
        // more than a tenth, as when a flood spreads over many addresses.
        const double drops = number_of(source, "drops_per_second");
        const bool rough = number_of(source, "error_per_second") > 0.1 * drops;
        estimated = estimated || rough;
        const json& share = member(source, "share");
        std::string share_text(kMissing);
        if (share.is_number()) {
            char percent[32];
            std::snprintf(percent, sizeof(percent), "%.1f%%", share.get<double>() * 100);
            share_text = percent;
        }
        std::vector<std::string> row{std::to_string(++rank),
                                     text_of(source, "source"),
                                     text_of(source, "class"),
                                     text_of(source, "interface"),
                                     human_rate(drops) + (rough ? "*" : ""),
                                     share_text};
        if (shadow) row.insert(row.begin() + 3, text_of(source, "verdict"));
        if (!restrictions.empty()) row.push_back(restriction_text(member(source, "restriction")));
        table.add_row(std::move(row));
    }
    text += table.render();
    if (shadow) text += "would_drop: passed by a class in shadow, which would drop it when enforcing\n";
    for (const RestrictionKind& known : kRestrictionKinds)
        if (std::find(restrictions.begin(), restrictions.end(), known.kind) != restrictions.end())
            text += std::string(known.meaning) + "\n";
    if (estimated) {
        text += "* at most: part of it may be other sources' drops (more sources drop than are tracked)\n";
    }
    return text;
}

}  // namespace

namespace {

// "root (uid 0)", or "uid 1000" for a uid without a name on sluiced's host.
std::string who_of(const json& ban) {
    const json& user = member(ban, "user");
    return user.is_string() ? text_of(user) + " (uid " + text_of(ban, "uid") + ")"
                            : "uid " + text_of(ban, "uid");
}

// "10m 0s left, until 2026-12-02T13:35:54Z"
std::string ban_end(const json& ban) {
    // Up, as in top: the last part of a second reads "1s left".
    return human_duration(std::ceil(number_of(ban, "remaining_s"))) + " left, until " + time_of(ban, "until_unix_s");
}

}  // namespace

std::string format_ban(const json& result) {
    const json& ban = member(result, "ban");
    const json& rebanned = member(result, "rebanned");
    std::string text;
    if (rebanned.is_boolean() && rebanned.get<bool>()) {
        text = "re-banned " + text_of(ban, "prefix") + " (" + ban_end(ban) +
               "): its end, reason and who replaced; its slot " + text_of(ban, "slot") + " and " +
               text_of(ban, "dropped_packets") + " packets dropped kept\n";
    } else {
        text = "banned " + text_of(ban, "prefix") + " (" + ban_end(ban) + ", slot " + text_of(ban, "slot") + ")\n";
    }
    const json& overrides = member(result, "overrides");
    if (overrides.is_string()) text += "forced over the running policy: " + text_of(overrides) + "\n";
    return text;
}

std::string format_unban(const json& result) {
    const json& ban = member(result, "ban");
    return "unbanned " + text_of(ban, "prefix") + " (banned since " + time_of(ban, "created_unix_s") + ", " +
           text_of(ban, "dropped_packets") + " packets dropped)\n";
}

std::string format_bans(const json& result) {
    const json& bans = member(result, "bans");
    const std::string cap = "max_bans " + text_of(result, "max_bans");
    if (!bans.is_array() || bans.empty()) return "no bans in force (" + cap + "; sluicectl ban PREFIX --for TIME)\n";
    using Align = Table::Align;
    Table table({"PREFIX", "EXPIRES", "LEFT", "REASON", "WHO", "FORCED", "DROPPED_PKTS"},
                {Align::left, Align::left, Align::right, Align::left, Align::left, Align::left, Align::right});
    for (const json& ban : bans) {
        const json& forced = member(ban, "forced");
        const std::string reason = text_of(ban, "reason");
        table.add_row({text_of(ban, "prefix"), time_of(ban, "until_unix_s"),
                       human_duration(std::ceil(number_of(ban, "remaining_s"))), reason.empty() ? "-" : reason,
                       who_of(ban), forced.is_boolean() && forced.get<bool>() ? "yes" : "no",
                       text_of(ban, "dropped_packets")});
    }
    return std::to_string(bans.size()) + (bans.size() == 1 ? " ban" : " bans") + " in force (" + cap + ")\n" +
           table.render();
}

// One formatter per verb: the switch has no default, so the build (-Wswitch,
// an error) names a verb added to kVerbs without one.
Result<std::string> format_result(const Invocation& invocation, const json& result) {
    switch (invocation.command) {
        case Verb::status:
            return format_status(result);
        case Verb::attach:
            return format_attach(result);
        case Verb::detach:
            return format_detach(result);
        case Verb::policy_push:
        case Verb::policy_rollback:
            return format_push(result, invocation.dry_run);
        case Verb::policy_show:
            return format_policy_show(result, invocation.show_source);
        case Verb::policy_history:
            return format_history(result);
        case Verb::policy_diff:
            return format_diff(result);
        case Verb::stats:
            return format_stats(result);
        case Verb::top:
            return format_top(result);
        case Verb::ban:
            return format_ban(result);
        case Verb::unban:
            return format_unban(result);
        case Verb::bans:
            return format_bans(result);
    }
    return Error{"no output format for verb " + invocation.verb};
}

}  // namespace sluice::cli
