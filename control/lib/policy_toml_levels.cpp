// SPDX-License-Identifier: Apache-2.0
// The policy loader's reading of what one table sets, key by key: the class
// settings [defaults] and a class share, a bucket level (rate, burst, unit,
// accuracy, lease), a per-source level and a shape, each checked and compiled
// with rate_limits.h. Apart from policy_toml.cpp, which puts the tables
// together into a policy, because each of these reads one table on its own.
#include <algorithm>

#include "policy_toml_internal.h"

namespace sluice::policy_toml_internal {
namespace {

constexpr uint64_t kNsPerMs = 1'000'000;
constexpr int64_t kMaxLeaseTtlMs = kMaxLeaseTtlNs / kNsPerMs;
constexpr int64_t kMaxShapeDelayMs = SLUICE_SHAPE_MAX_DELAY_NS / kNsPerMs;

constexpr Choice<uint8_t> kTableFullChoices[] = {
    {"evict", SLUICE_TABLE_FULL_EVICT}, {"open", SLUICE_TABLE_FULL_OPEN}, {"closed", SLUICE_TABLE_FULL_CLOSED}};

constexpr std::string_view kLevelKeys[] = {"rate", "burst", "unit", "accuracy", "lease", "lease_ttl_ms"};
constexpr std::string_view kAggregateKeys[] = {"algorithm", "limit",    "window", "rate",        "burst",
                                               "unit",      "accuracy", "lease",  "lease_ttl_ms"};
// The keys that choose and set a window algorithm, and those only gcra (the
// token bucket) takes.
constexpr std::string_view kWindowKeys[] = {"algorithm", "limit", "window"};
constexpr std::string_view kGcraKeys[] = {"rate", "burst", "accuracy", "lease", "lease_ttl_ms"};
constexpr std::string_view kPerSourceKeys[] = {"algorithm", "limit", "window",    "rate",
                                               "burst",     "unit",  "prefix_v4", "prefix_v6"};
// Keys of a bucket level that the per-source level does without: it is exact
// across CPUs (one shared table), so there is nothing to split or lease.
constexpr std::string_view kNotPerSourceKeys[] = {"accuracy", "lease", "lease_ttl_ms"};
constexpr std::string_view kShapeKeys[] = {"queue", "max_delay_ms"};
constexpr std::string_view kPenaltyKeys[] = {"over", "within", "for"};
constexpr int64_t kMaxPenaltyOver = 1000000;
constexpr uint64_t kPenaltyWithinDefaultNs = SLUICE_NANO;
constexpr uint64_t kPenaltyWithinMaxNs = 60 * SLUICE_NANO;
constexpr std::string_view kFleetKeys[] = {"rate", "burst", "unit", "on_unavailable", "fallback_rate"};
// on_unavailable: whether the class fails open (true) while Redis cannot be reached.
constexpr Choice<bool> kUnavailableChoices[] = {{"open", true}, {"closed", false}};

// rate, burst and unit, the keys every limit has.
Result<HumanLimit> read_limit(const Fields& level, const ClassSettings& inherited) {
    auto rate = level.integer("rate", 0, kUnbounded);
    if (!rate) return rate.error();
    auto burst = level.integer("burst", 0, kUnbounded);
    if (!burst) return burst.error();
    auto unit = level.choice("unit", kUnits);
    if (!unit) return unit.error();
    if (!rate.value()) return level.here("rate is required (units per second)");
    if (!burst.value()) return level.here("burst is required (units)");
    HumanLimit limit;
    limit.rate_per_s = static_cast<uint64_t>(*rate.value());
    limit.burst = static_cast<uint64_t>(*burst.value());
    limit.unit = unit.value().value_or(inherited.unit);
    return limit;
}

// global and new_sources are token buckets: say so rather than "unknown key".
Status refuse_window_keys(const Fields& level) {
    const std::string& name = level.name();
    const std::string_view short_name = std::string_view(name).substr(name.rfind('.') + 1);
    for (std::string_view key : kWindowKeys)
        if (const toml::node* value = level.find(key))
            return level.at(*value, key,
                            "only a class's aggregate and per_source choose their algorithm; " +
                                std::string(short_name) + " is a token bucket (rate and burst)");
    return ok_status();
}

// The keys of the kind of algorithm not `chosen`: window keys with gcra, the
// token bucket's with a window algorithm. `windows` lists the level's window
// algorithms for the hint.
Status refuse_other_algorithm_keys(const Fields& level, Algorithm chosen, std::string_view windows) {
    if (chosen == Algorithm::gcra) {
        for (std::string_view key : {"limit", "window"})
            if (const toml::node* value = level.find(key))
                return level.at(
                    *value, key,
                    "needs algorithm = " + std::string(windows) + "; gcra (the default) takes rate and burst");
        return ok_status();
    }
    for (std::string_view key : kGcraKeys)
        if (const toml::node* value = level.find(key))
            return level.at(*value, key,
                            "belongs to algorithm = \"gcra\" (the token bucket); algorithm = " +
                                in_quotes(algorithm_name(static_cast<uint8_t>(chosen))) +
                                " counts limit units per window");
    return ok_status();
}

// limit, window and unit of a window algorithm; the first two are required.
Result<WindowSettings> read_window(const Fields& level, const ClassSettings& inherited, Algorithm chosen) {
    const std::string name = in_quotes(algorithm_name(static_cast<uint8_t>(chosen)));
    auto limit = level.integer("limit", 1, kUnbounded);
    if (!limit) return limit.error();
    auto window = level.duration("window", SLUICE_WINDOW_MIN_NS, SLUICE_WINDOW_MAX_NS);
    if (!window) return window.error();
    auto unit = level.choice("unit", kUnits);
    if (!unit) return unit.error();
    if (!limit.value()) return level.here("limit is required for algorithm = " + name + " (units per window)");
    if (!window.value())
        return level.here("window is required for algorithm = " + name + " (a duration such as \"1s\" or \"10m\")");
    WindowSettings settings;
    settings.algorithm = chosen;
    settings.limit = static_cast<uint64_t>(*limit.value());
    settings.window_ns = *window.value();
    settings.unit = unit.value().value_or(inherited.unit);
    settings.max_frame_bytes = inherited.max_frame_bytes;
    return settings;
}

Result<sluice_level_limit> read_bucket(const Fields& level, const ClassSettings& inherited, uint32_t cpus) {
    auto limit = read_limit(level, inherited);
    if (!limit) return limit.error();
    auto accuracy = level.choice("accuracy", kAccuracies);
    if (!accuracy) return accuracy.error();
    auto lease = level.integer("lease", 0, kUnbounded);
    if (!lease) return lease.error();
    auto lease_ttl_ms = level.integer("lease_ttl_ms", 1, kMaxLeaseTtlMs);
    if (!lease_ttl_ms) return lease_ttl_ms.error();

    LevelSettings settings;
    settings.limit = limit.value();
    settings.accuracy = accuracy.value().value_or(inherited.accuracy);
    settings.cpus = cpus;
    settings.max_frame_bytes = inherited.max_frame_bytes;
    if (settings.accuracy == Accuracy::split) {
        // A split limit takes no leases: a lease setting would silently do nothing.
        for (std::string_view key : {"lease", "lease_ttl_ms"})
            if (const toml::node* value = level.find(key))
                return level.at(*value, key, "applies only to accuracy = \"lease\"; this limit uses \"split\"");
    }
    settings.lease = static_cast<uint64_t>(lease.value().value_or(0));
    if (lease_ttl_ms.value()) settings.lease_ttl_ns = static_cast<uint64_t>(*lease_ttl_ms.value()) * kNsPerMs;

    auto compiled = compile_level(settings, level.name());
    if (!compiled) return level.limit_error(compiled.error());
    return compiled.value();
}

}  // namespace

Status read_class_settings(const Fields& fields, ClassSettings& settings) {
    auto unit = fields.choice("unit", kUnits);
    if (!unit) return unit.error();
    auto accuracy = fields.choice("accuracy", kAccuracies);
    if (!accuracy) return accuracy.error();
    auto table_full = fields.choice("on_table_full", kTableFullChoices);
    if (!table_full) return table_full.error();
    auto max_frame_bytes = fields.integer("max_frame_bytes", 1, SLUICE_COST_MAX);
    if (!max_frame_bytes) return max_frame_bytes.error();
    auto prefix_v4 = fields.integer("prefix_v4", 1, 32);
    if (!prefix_v4) return prefix_v4.error();
    auto prefix_v6 = fields.integer("prefix_v6", 1, 128);
    if (!prefix_v6) return prefix_v6.error();
    auto shadow = fields.boolean("shadow");
    if (!shadow) return shadow.error();

    settings.unit = unit.value().value_or(settings.unit);
    settings.accuracy = accuracy.value().value_or(settings.accuracy);
    settings.on_table_full = table_full.value().value_or(settings.on_table_full);
    settings.max_frame_bytes = static_cast<uint32_t>(max_frame_bytes.value().value_or(settings.max_frame_bytes));
    settings.prefix_v4 = static_cast<uint8_t>(prefix_v4.value().value_or(settings.prefix_v4));
    settings.prefix_v6 = static_cast<uint8_t>(prefix_v6.value().value_or(settings.prefix_v6));
    if (shadow.value()) {
        settings.shadow = *shadow.value();
        settings.shadow_where = fields.find("shadow")->source();
    }
    return ok_status();
}

Result<sluice_level_limit> read_level(const Fields& level, const ClassSettings& inherited, uint32_t cpus) {
    if (auto refused = refuse_window_keys(level); !refused) return refused.error();
    if (auto keys = level.only(kLevelKeys); !keys) return keys.error();
    return read_bucket(level, inherited, cpus);
}

Result<Aggregate> read_aggregate(const Fields& level, const ClassSettings& inherited, uint32_t cpus) {
    if (auto keys = level.only(kAggregateKeys); !keys) return keys.error();
    auto algorithm = level.choice("algorithm", kAlgorithms);
    if (!algorithm) return algorithm.error();
    const Algorithm chosen = algorithm.value().value_or(Algorithm::gcra);
    if (auto refused =
            refuse_other_algorithm_keys(level, chosen, R"("fixed_window", "sliding_window" or "sliding_log")");
        !refused)
        return refused.error();
    if (chosen == Algorithm::gcra) {
        auto bucket = read_bucket(level, inherited, cpus);
        if (!bucket) return bucket.error();
        return Aggregate{bucket.value(), {}};
    }

    auto settings = read_window(level, inherited, chosen);
    if (!settings) return settings.error();
    // A unit inherited from the class or [defaults] is not in this table:
    // point at the algorithm that cannot count it instead.
    if (chosen == Algorithm::sliding_log && settings.value().unit == Unit::bytes && !level.find("unit"))
        return level.at(*level.find("algorithm"), "algorithm",
                        "sliding_log counts admissions, not bytes, and this class's unit is \"bytes\" (from the "
                        "class or [defaults]); set unit = \"packets\" or \"tcp_syn\" here, or use fixed_window or "
                        "sliding_window for a limit in bytes");
    auto compiled = compile_window_level(settings.value(), level.name());
    if (!compiled) return level.limit_error(compiled.error());
    return Aggregate{compiled.value().level, compiled.value().window};
}

Result<sluice_source_limit> read_source_level(const Fields& level, const ClassSettings& inherited) {
    for (std::string_view key : kNotPerSourceKeys)
        if (const toml::node* value = level.find(key))
            return level.at(*value, key,
                            "per-source limits are exact across CPUs (one shared table), so they take no " +
                                std::string(key) + "; it applies to aggregate, new_sources and global");
    if (auto keys = level.only(kPerSourceKeys); !keys) return keys.error();
    auto algorithm = level.choice("algorithm", kAlgorithms);
    if (!algorithm) return algorithm.error();
    const Algorithm chosen = algorithm.value().value_or(Algorithm::gcra);
    if (chosen == Algorithm::sliding_log) {
        // Refused before its keys are read: no limit or window makes it fit.
        WindowSettings log;
        log.algorithm = chosen;
        return level.limit_error(compile_source_window(log, level.name()).error());
    }
    if (auto refused = refuse_other_algorithm_keys(level, chosen, R"("fixed_window" or "sliding_window")"); !refused)
        return refused.error();
    if (chosen == Algorithm::gcra) {
        auto limit = read_limit(level, inherited);
        if (!limit) return limit.error();
        auto compiled = compile_source_limit(limit.value(), inherited.max_frame_bytes, level.name());
        if (!compiled) return level.limit_error(compiled.error());
        return compiled.value();
    }
    auto settings = read_window(level, inherited, chosen);
    if (!settings) return settings.error();
    auto compiled = compile_source_window(settings.value(), level.name());
    if (!compiled) return level.limit_error(compiled.error());
    return compiled.value();
}

Result<sluice_shape> read_shape(const Fields& shape) {
    if (auto keys = shape.only(kShapeKeys); !keys) return keys.error();
    auto queue = shape.integer("queue", 1, SLUICE_SHAPE_QUEUE_MAX);
    if (!queue) return queue.error();
    auto max_delay_ms = shape.integer("max_delay_ms", 1, kMaxShapeDelayMs);
    if (!max_delay_ms) return max_delay_ms.error();
    // No defaults: a queue length or a delay bound picked for the operator
    // would decide how much latency the class takes on.
    if (!queue.value()) return shape.here("queue is required (packets)");
    if (!max_delay_ms.value()) return shape.here("max_delay_ms is required (milliseconds)");
    sluice_shape out{};
    out.queue_packets = static_cast<uint32_t>(*queue.value());
    out.max_delay_ns = static_cast<uint64_t>(*max_delay_ms.value()) * kNsPerMs;
    return out;
}

Result<sluice_penalty> read_penalty(const Fields& penalty, const sluice_source_limit& per_source) {
    if (auto keys = penalty.only(kPenaltyKeys); !keys) return keys.error();
    auto over = penalty.integer("over", 2, kMaxPenaltyOver);
    if (!over) return over.error();
    auto within = penalty.duration("within", SLUICE_WINDOW_MIN_NS, kPenaltyWithinMaxNs);
    if (!within) return within.error();
    auto for_ns = penalty.duration("for", SLUICE_PENALTY_FOR_MIN_NS, SLUICE_PENALTY_FOR_MAX_NS);
    if (!for_ns) return for_ns.error();
    // No defaults for these two: how far over its limit a source may go, and
    // how long it is then shut out, are the operator's decision.
    if (!over.value()) return penalty.here("over is required (how many times its per-source rate a source may send)");
    if (!for_ns.value()) return penalty.here("for is required (how long a penalised source is dropped, e.g. \"60s\")");
    auto compiled = compile_penalty(per_source, static_cast<uint64_t>(*over.value()),
                                    within.value().value_or(kPenaltyWithinDefaultNs), *for_ns.value(), penalty.name());
    if (!compiled) return penalty.limit_error(compiled.error());
    return compiled.value();
}

Result<FleetQuota> read_fleet(const Fields& fleet, const ClassSettings& inherited) {
    if (auto keys = fleet.only(kFleetKeys); !keys) return keys.error();
    auto rate = fleet.integer("rate", 1, static_cast<int64_t>(SLUICE_RATE_MAX));
    if (!rate) return rate.error();
    auto burst = fleet.integer("burst", 1, static_cast<int64_t>(SLUICE_BURST_MAX));
    if (!burst) return burst.error();
    auto unit = fleet.choice("unit", kUnits);
    if (!unit) return unit.error();
    auto on_unavailable = fleet.choice("on_unavailable", kUnavailableChoices);
    if (!on_unavailable) return on_unavailable.error();
    auto fallback_rate = fleet.integer("fallback_rate", 1, static_cast<int64_t>(SLUICE_RATE_MAX));
    if (!fallback_rate) return fallback_rate.error();
    if (!rate.value()) return fleet.here("rate is required (units per second, across the fleet)");
    // No default: whether the class admits or refuses while the quota cannot
    // be read decides what an outage of Redis does to its traffic.
    if (!on_unavailable.value())
        return fleet.here(
            "on_unavailable is required: \"open\" (admit up to fallback_rate on this node while Redis cannot be "
            "reached) or \"closed\" (admit only the credit this node already holds, then drop)");

    FleetQuota quota;
    quota.rate_per_s = static_cast<uint64_t>(*rate.value());
    // A tenth of a second of the fleet's rate unless stated.
    quota.burst = burst.value() ? static_cast<uint64_t>(*burst.value())
                                : std::min<uint64_t>(SLUICE_BURST_MAX, (quota.rate_per_s + 9) / 10);
    quota.unit = static_cast<uint8_t>(unit.value().value_or(inherited.unit));
    quota.fail_open = *on_unavailable.value();
    if (quota.fail_open && !fallback_rate.value())
        return fleet.here(
            "fallback_rate is required with on_unavailable = \"open\" (units per second this node admits while "
            "Redis cannot be reached)");
    if (!quota.fail_open && fallback_rate.value())
        return fleet.at(*fleet.find("fallback_rate"), "fallback_rate",
                        "applies only to on_unavailable = \"open\"; with \"closed\" the node admits only the credit "
                        "it already holds while Redis cannot be reached");
    quota.fallback_rate_per_s = static_cast<uint64_t>(fallback_rate.value().value_or(0));
    if (quota.fallback_rate_per_s > quota.rate_per_s)
        return fleet.at(*fleet.find("fallback_rate"), "fallback_rate",
                        std::to_string(quota.fallback_rate_per_s) + " exceeds the fleet's rate " +
                            std::to_string(quota.rate_per_s) +
                            ": one node alone would admit more than the whole fleet");
    // Credit is leased in at most a burst: a frame that costs more could never pass.
    if (quota.unit == SLUICE_UNIT_BYTES && quota.burst < inherited.max_frame_bytes) {
        const std::string what = "burst " + std::to_string(quota.burst) +
                                 " bytes is below the largest cost one packet is charged (max_frame_bytes " +
                                 std::to_string(inherited.max_frame_bytes) + "), so such packets could never pass";
        if (const toml::node* stated = fleet.find("burst")) return fleet.at(*stated, "burst", what);
        return fleet.here(what + " (burst defaults to a tenth of rate); set burst");
    }
    quota.definition_hash = fleet_definition_hash(quota.rate_per_s, quota.burst, quota.unit);
    return quota;
}

}  // namespace sluice::policy_toml_internal
