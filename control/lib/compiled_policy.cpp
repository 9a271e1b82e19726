// SPDX-License-Identifier: Apache-2.0
#include "compiled_policy.h"

#include <arpa/inet.h>

#include <algorithm>
#include <bitset>
#include <cstring>
#include <set>
#include <tuple>

#include "rate_limits.h"
#include "sluice/window.h"
#include "version_store.h"

namespace sluice {
namespace {

Error policy_error(const std::string& what) { return Error{"policy: " + what}; }

constexpr sluice_window_limit kNoWindow{};
constexpr sluice_penalty kNoPenalty{};

bool valid_level(const sluice_level_limit& level) {
    return level.unit <= SLUICE_UNIT_TCP_SYN && level.accuracy <= SLUICE_ACCURACY_LEASE;
}

// The source table holds a source at most SLUICE_DEBT_MAX_NS ahead of its
// schedule, and a full bucket must pay at least one packet.
bool valid_gcra(const sluice_gcra_limit& limit) {
    const uint64_t one = limit.interval_ns + (limit.interval_frac != 0);
    return limit.unit <= SLUICE_UNIT_TCP_SYN && one > 0 && limit.tolerance_ns >= one &&
           limit.tolerance_ns <= SLUICE_DEBT_MAX_NS;
}

// What the dataplane relies on in a class's penalty: a gcra per-source level
// to keep it in, a meter it can charge, and an end an entry can hold.
Status valid_penalty(const sluice_class_entry& cls, const std::string& name) {
    const sluice_penalty& p = cls.penalty;
    if (p.for_ns == 0) {
        if (std::memcmp(&p, &kNoPenalty, sizeof(p)) != 0) return policy_error(name + ": a penalty without for_ns");
        return ok_status();
    }
    if (!cls.per_source.enabled || cls.per_source.window.algorithm != SLUICE_ALGORITHM_GCRA)
        return policy_error(name + ": a penalty needs a gcra per-source limit");
    if (p.for_ns < SLUICE_PENALTY_FOR_MIN_NS || p.for_ns > SLUICE_PENALTY_FOR_MAX_NS ||
        cls.per_source.current.tolerance_ns + SLUICE_PENALTY_MARGIN_NS + p.for_ns > SLUICE_DEBT_MAX_NS)
        return policy_error(name + ": penalty for_ns out of range, or with the per-source burst past what an entry holds");
    if (!p.meter.enabled || p.meter.generation != 0 || p.meter.previous_tolerance_ns != 0 || p.meter.previous_fresh ||
        std::memcmp(&p.meter.window, &kNoWindow, sizeof(p.meter.window)) != 0 || !valid_gcra(p.meter.current) ||
        p.meter.current.unit != cls.per_source.current.unit)
        return policy_error(name + ": penalty meter is not a gcra limit in the per-source unit");
    return ok_status();
}

// What the dataplane relies on in a class's per-source limit.
Status valid_source_limit(const sluice_source_limit& limit, const std::string& name) {
    if (!limit.enabled) return ok_status();
    if (limit.generation > 3 || limit.previous_fresh > 1)
        return policy_error(name + ": per-source generation (0..3) or previous_fresh (0, 1) out of range");
    const sluice_window_limit& w = limit.window;
    if (w.algorithm == SLUICE_ALGORITHM_GCRA) {
        // A window limit beside GCRA would be one the dataplane silently ignores.
        if (std::memcmp(&w, &kNoWindow, sizeof(w)) != 0)
            return policy_error(name + ": a gcra per-source limit has a window limit set");
        if (!valid_gcra(limit.current) || limit.previous_tolerance_ns > SLUICE_DEBT_MAX_NS)
            return policy_error(name + ": per-source limit has an unknown unit, or a burst outside 1 packet.." +
                                std::to_string(SLUICE_DEBT_MAX_NS / SLUICE_NANO) + " s of its rate");
        return ok_status();
    }
    if (w.algorithm == SLUICE_ALGORITHM_SLIDING_LOG)
        return policy_error(name +
                            ": per-source algorithm sliding_log: a source-table entry is one 64-bit word and "
                            "cannot hold a log of admission times");
    if (w.algorithm >= SLUICE_ALGORITHM_COUNT)
        return policy_error(name + ": per-source algorithm " + std::to_string(w.algorithm) + " out of range");
    if (limit.current.unit > SLUICE_UNIT_TCP_SYN)
        return policy_error(name + ": per-source limit has an unknown unit " + std::to_string(limit.current.unit));
    // The counts live in the entry's time field: they must fit it.
    if (!sluice_entry_window_fits(&w))
        return policy_error(name + ": per-source " + algorithm_name(w.algorithm) + " limit " + std::to_string(w.limit) +
                            " per " + std::to_string(w.window_ns) + " ns (count_bits " + std::to_string(w.count_bits) +
                            ", index_bits " + std::to_string(w.index_bits) +
                            ") does not fit a source-table entry (sluice_entry_window_fits)");
    return ok_status();
}

// What the dataplane relies on in the class aggregate's window limit.
Status valid_aggregate_window(const sluice_class_entry& cls, const std::string& name) {
    const sluice_window_limit& w = cls.aggregate_window;
    if (w.algorithm >= SLUICE_ALGORITHM_COUNT)
        return policy_error(name + ": aggregate algorithm " + std::to_string(w.algorithm) + " out of range");
    if (w.algorithm == SLUICE_ALGORITHM_GCRA) {
        // Only the generation may be set: anything else would be a window
        // limit the token bucket silently ignores.
        sluice_window_limit zero{};
        zero.generation = w.generation;
        if (std::memcmp(&zero, &w, sizeof(w)) != 0)
            return policy_error(name + ": a gcra aggregate has a window limit set (only its generation may be)");
        return ok_status();
    }
    const std::string algorithm = algorithm_name(w.algorithm);
    if (!cls.aggregate.enabled) return policy_error(name + ": aggregate algorithm " + algorithm + " but not enabled");
    if (w.window_ns < SLUICE_WINDOW_MIN_NS || w.window_ns > SLUICE_WINDOW_MAX_NS)
        return policy_error(name + ": aggregate window " + std::to_string(w.window_ns) + " ns is outside " +
                            std::to_string(SLUICE_WINDOW_MIN_NS) + ".." + std::to_string(SLUICE_WINDOW_MAX_NS));
    if (w.limit < 1 || w.limit > kWindowLimitMax)
        return policy_error(name + ": aggregate limit " + std::to_string(w.limit) + " is outside 1.." +
                            std::to_string(kWindowLimitMax));
    if (w.index_bits != 64 || w.count_bits != 64)
        return policy_error(name + ": aggregate window state must be kept in full (index_bits = count_bits = 64)");
    if (w.algorithm == SLUICE_ALGORITHM_SLIDING_LOG) {
        if (w.limit > SLUICE_LOG_MAX)
            return policy_error(name + ": sliding_log limit " + std::to_string(w.limit) + " exceeds the log's " +
                                std::to_string(SLUICE_LOG_MAX) + " entries");
        if (cls.aggregate.unit == SLUICE_UNIT_BYTES)
            return policy_error(name + ": sliding_log counts admissions, not bytes");
    }
    if (cls.shape.queue_packets > 0)
        return policy_error(name + ": shaped, but its aggregate is " + algorithm +
                            ": the queue drains at a token-bucket rate");
    return ok_status();
}

// The policy's spelling of a unit.
std::string unit_text(uint8_t unit) {
    switch (unit) {
        case SLUICE_UNIT_PACKETS:
            return "packets";
        case SLUICE_UNIT_BYTES:
            return "bytes";
        case SLUICE_UNIT_TCP_SYN:
            return "tcp_syn";
        default:
            return "unit_" + std::to_string(unit);
    }
}

// The fleet quotas against the classes: one per class with fleet = 1, and
// none for any other.
Status valid_fleet(const CompiledPolicy& policy) {
    std::set<uint32_t> quotas;
    for (const FleetQuota& q : policy.fleet) {
        const std::string name = "class " + std::to_string(q.class_id) + ": fleet quota";
        const sluice_class_entry* cls = policy.find_class(q.class_id);
        if (!cls) return policy_error(name + " of a class that is not defined");
        if (!cls->fleet) return policy_error(name + " of a class whose entry has fleet = 0");
        if (!quotas.insert(q.class_id).second) return policy_error(name + " given twice");
        if (q.class_name.empty()) return policy_error(name + " has no class name (its Redis key needs one)");
        if (q.rate_per_s < 1 || q.rate_per_s > SLUICE_RATE_MAX)
            return policy_error(name + ": rate " + std::to_string(q.rate_per_s) + " is outside 1.." +
                                std::to_string(SLUICE_RATE_MAX));
        if (q.burst < 1 || q.burst > SLUICE_BURST_MAX)
            return policy_error(name + ": burst " + std::to_string(q.burst) + " is outside 1.." +
                                std::to_string(SLUICE_BURST_MAX));
        if (q.unit > SLUICE_UNIT_TCP_SYN || q.unit != cls->fleet_unit)
            return policy_error(name + ": unit " + unit_text(q.unit) + " is unknown or not the entry's fleet_unit " +
                                unit_text(cls->fleet_unit));
        if (q.fail_open && (q.fallback_rate_per_s < 1 || q.fallback_rate_per_s > q.rate_per_s))
            return policy_error(name + ": fallback rate " + std::to_string(q.fallback_rate_per_s) + " is outside 1.." +
                                std::to_string(q.rate_per_s) + " (the fleet's rate)");
        if (!q.fail_open && q.fallback_rate_per_s != 0)
            return policy_error(name + ": a fallback rate, but it fails closed");
        if (q.definition_hash != fleet_definition_hash(q.rate_per_s, q.burst, q.unit))
            return policy_error(name + ": definition_hash " + q.definition_hash + " is not that of " +
                                fleet_definition(q.rate_per_s, q.burst, q.unit));
    }
    for (const auto& cls : policy.classes)
        if (cls.fleet && !quotas.count(cls.class_id))
            return policy_error("class " + std::to_string(cls.class_id) + ": fleet = 1 but no fleet quota");
    return ok_status();
}

}  // namespace

std::string fleet_definition(uint64_t rate_per_s, uint64_t burst, uint8_t unit) {
    return "rate=" + std::to_string(rate_per_s) + ";burst=" + std::to_string(burst) + ";unit=" + unit_text(unit);
}

std::string fleet_definition_hash(uint64_t rate_per_s, uint64_t burst, uint8_t unit) {
    return sha256_hex(fleet_definition(rate_per_s, burst, unit)).substr(0, 16);
}

const sluice_class_entry* CompiledPolicy::find_class(uint32_t class_id) const {
    for (const auto& cls : classes)
        if (cls.class_id == class_id) return &cls;
    return nullptr;
}

Status validate(const CompiledPolicy& policy) {
    const sluice_policy_header& h = policy.header;
    if (h.version == 0) return policy_error("version 0 is reserved for \"no policy\"");
    // Unparsed frames have no class to be in shadow: they pass or drop.
    if (h.non_ip_verdict > SLUICE_VERDICT_DROP || h.malformed_verdict > SLUICE_VERDICT_DROP)
        return policy_error("non_ip/malformed verdict out of range (pass or drop)");
    if (!valid_level(h.global)) return policy_error("global limit has an unknown unit or accuracy");

    std::set<uint32_t> ids;
    for (const auto& cls : policy.classes) {
        const std::string name = "class " + std::to_string(cls.class_id);
        if (cls.class_id == SLUICE_CLASS_UNCLASSIFIED || cls.class_id >= SLUICE_MAX_CLASSES)
            return policy_error(name + ": id must be within 1.." + std::to_string(SLUICE_MAX_CLASSES - 1));
        if (!ids.insert(cls.class_id).second) return policy_error(name + ": id used twice");
        if (cls.action > SLUICE_ACTION_DROP || cls.on_table_full > SLUICE_TABLE_FULL_CLOSED)
            return policy_error(name + ": action or on_table_full out of range");
        if (cls.prefix_v4 < 1 || cls.prefix_v4 > 32 || cls.prefix_v6 < 1 || cls.prefix_v6 > 128)
            return policy_error(name + ": source prefix lengths must be 1..32 (IPv4) and 1..128 (IPv6)");
        if (!valid_level(cls.new_sources) || !valid_level(cls.aggregate))
            return policy_error(name + ": a limit has an unknown unit or accuracy");
        if (auto window = valid_aggregate_window(cls, name); !window) return window;
        if (auto source = valid_source_limit(cls.per_source, name); !source) return source;
        if (auto penalty = valid_penalty(cls, name); !penalty) return penalty;
        // Only the source table knows which sources are new.
        if (cls.new_sources.enabled && !cls.per_source.enabled)
            return policy_error(name + ": a new-source budget needs a per-source limit");
        if (cls.shadow > 1) return policy_error(name + ": shadow must be 0 or 1");
        // A shaped class holds packets in its queue; in shadow nothing may be held.
        if (cls.shadow && cls.shape.queue_packets > 0) return policy_error(name + ": shadow with a shape queue");
        if (cls.shape.queue_packets > SLUICE_SHAPE_QUEUE_MAX)
            return policy_error(name + ": shape queue must be 1.." + std::to_string(SLUICE_SHAPE_QUEUE_MAX) +
                                " packets (0: not shaped)");
        if (cls.shape.queue_packets > 0) {
            if (cls.shape.max_delay_ns < kMinShapeDelayNs || cls.shape.max_delay_ns > SLUICE_SHAPE_MAX_DELAY_NS)
                return policy_error(name + ": shape max_delay_ns must be " + std::to_string(kMinShapeDelayNs) + ".." +
                                    std::to_string(SLUICE_SHAPE_MAX_DELAY_NS));
            // The queue drains at the aggregate rate; without one it has no pace.
            if (!cls.aggregate.enabled) return policy_error(name + ": shaped but has no aggregate limit to drain at");
            if (cls.action != SLUICE_ACTION_LIMIT) return policy_error(name + ": shaped but its action is not limit");
        }
        if (cls.fleet > 1) return policy_error(name + ": fleet must be 0 or 1");
        if (cls.fleet_unit > SLUICE_UNIT_TCP_SYN)
            return policy_error(name + ": fleet_unit " + std::to_string(cls.fleet_unit) + " out of range");
        // A pass or drop class decides without any level: its credit would never be spent.
        if (cls.fleet && cls.action != SLUICE_ACTION_LIMIT)
            return policy_error(name + ": a fleet quota, but its action is not limit");
    }
    if (auto fleet = valid_fleet(policy); !fleet) return fleet;
    if (!ids.count(h.default_class_id))
        return policy_error("default class " + std::to_string(h.default_class_id) + " is not defined");

    // Checked per prefix, of which there may be millions: a bitset, not the set.
    std::bitset<SLUICE_MAX_CLASSES> defined;
    for (const uint32_t id : ids) defined.set(id);
    size_t v4 = 0, v6 = 0;
    for (size_t i = 0; i < policy.prefixes.size(); i++) {
        const PolicyPrefix& p = policy.prefixes[i];
        const unsigned bits = family_bits(p.family);
        if (p.family != SLUICE_FAMILY_IPV4 && p.family != SLUICE_FAMILY_IPV6)
            return policy_error("prefix with unknown family " + std::to_string(p.family));
        if (p.length > bits)
            return policy_error("prefix " + prefix_text(p) + ": length exceeds " + std::to_string(bits));
        if (!host_bits_clear(p))
            return policy_error("prefix " + prefix_text(p) + " has host bits set past /" + std::to_string(p.length));
        if (p.class_id >= SLUICE_MAX_CLASSES || !defined[p.class_id])
            return policy_error("prefix " + prefix_text(p) + " names undefined class " + std::to_string(p.class_id));
        if (i > 0) {
            const PolicyPrefix& before = policy.prefixes[i - 1];
            if (!prefix_less(before, p)) {
                if (!prefix_less(p, before)) return policy_error("prefix " + prefix_text(p) + " appears twice");
                return policy_error("prefix " + prefix_text(p) + " is out of order (use sort_prefixes)");
            }
        }
        (p.family == SLUICE_FAMILY_IPV4 ? v4 : v6)++;
    }
    if (h.has_prefixes_v4 != (v4 > 0) || h.has_prefixes_v6 != (v6 > 0))
        return policy_error("the header's prefix flags do not match its prefixes (use mark_prefix_families)");
    return validate_requests(policy);
}

std::string prefix_text(const PolicyPrefix& p) {
    char text[INET6_ADDRSTRLEN] = "?";
    inet_ntop(p.family == SLUICE_FAMILY_IPV4 ? AF_INET : AF_INET6, p.addr.data(), text, sizeof(text));
    return std::string(text) + "/" + std::to_string(p.length);
}

PolicyPrefix masked_prefix(PolicyPrefix p) {
    for (unsigned bit = p.length; bit < p.addr.size() * 8; bit++) p.addr[bit / 8] &= static_cast<uint8_t>(~(0x80u >> (bit % 8)));
    return p;
}

void sort_prefixes(std::vector<PolicyPrefix>& prefixes) { std::sort(prefixes.begin(), prefixes.end(), prefix_less); }

PrefixChanges prefix_changes(const std::vector<PolicyPrefix>& from, const std::vector<PolicyPrefix>& to) {
    PrefixChanges changes;
    size_t i = 0, j = 0;
    while (i < from.size() || j < to.size()) {
        if (j == to.size() || (i < from.size() && prefix_less(from[i], to[j]))) {
            changes.removed.push_back(from[i++]);
        } else if (i == from.size() || prefix_less(to[j], from[i])) {
            changes.written.push_back(to[j++]);
        } else {
            if (from[i].class_id != to[j].class_id) changes.written.push_back(to[j]);
            i++;
            j++;
        }
    }
    return changes;
}

PrefixCounts count_prefixes(const std::vector<PolicyPrefix>& prefixes) {
    PrefixCounts counts;
    for (const PolicyPrefix& p : prefixes) (p.family == SLUICE_FAMILY_IPV4 ? counts.v4 : counts.v6)++;
    return counts;
}

Status check_prefix_capacity(const CompiledPolicy& policy, uint64_t capacity, std::string_view setting) {
    const PrefixCounts counts = count_prefixes(policy.prefixes);
    for (const auto& [count, family] : {std::pair{counts.v4, "IPv4"}, std::pair{counts.v6, "IPv6"}})
        if (count > capacity)
            return Error{"the policy has " + std::to_string(count) + " " + family + " prefixes; the dataplane holds " +
                             std::to_string(capacity) + " per family (raise " + std::string(setting) +
                             ", at most " + std::to_string(SLUICE_PREFIX_CAPACITY_MAX) + ")",
                         std::string(setting), ErrorCode::invalid};
    return ok_status();
}

void mark_prefix_families(CompiledPolicy& policy) {
    policy.header.has_prefixes_v4 = 0;
    policy.header.has_prefixes_v6 = 0;
    for (const PolicyPrefix& p : policy.prefixes)
        (p.family == SLUICE_FAMILY_IPV4 ? policy.header.has_prefixes_v4 : policy.header.has_prefixes_v6) = 1;
}

namespace {

// Whether the entries `before` wrote still mean the same under `after` (both
// enabled): GCRA converts a debt across any change of its own limit; a
// window's counts carry on while its window, unit and count layout stay.
bool same_source_counts(const sluice_source_limit& before, const sluice_source_limit& after) {
    const sluice_window_limit& was = before.window;
    const sluice_window_limit& now = after.window;
    if (was.algorithm != now.algorithm) return false;
    if (now.algorithm == SLUICE_ALGORITHM_GCRA) return true;
    return was.window_ns == now.window_ns && was.count_bits == now.count_bits &&
           before.current.unit == after.current.unit;
}

// The per-source half of carry_previous_limits; `was` is the running class or
// nullptr. True when the class's sources' counts restart.
bool carry_source_limit(const sluice_class_entry* was, sluice_class_entry& cls) {
    __extension__ typedef unsigned __int128 uint128;
    sluice_source_limit& limit = cls.per_source;
    const sluice_source_limit* before = was ? &was->per_source : nullptr;
    limit.previous_tolerance_ns = 0;
    limit.previous_scale = 0;
    limit.previous_fresh = 0;
    limit.generation = before ? before->generation : 0;
    if (!limit.enabled || !before) return false;
    const bool windowed = limit.window.algorithm != SLUICE_ALGORITHM_GCRA;
    if (before->enabled && !same_source_counts(*before, limit)) {
        // Counted another way: what any other generation wrote reads as fresh.
        limit.generation = (before->generation + 1) & 3;
        limit.previous_fresh = 1;
        return true;
    }
    if (before->enabled && windowed) return false;  // the same counts, perhaps under a new limit
    if (before->enabled && std::memcmp(&before->current, &limit.current, sizeof(limit.current)) == 0) {
        // Unchanged: sources written under the limit before it still convert
        // (or still read as fresh).
        limit.previous_tolerance_ns = before->previous_tolerance_ns;
        limit.previous_scale = before->previous_scale;
        limit.previous_fresh = before->previous_fresh;
        return false;
    }
    // Changed (or newly set): a new generation; entries of the one before
    // convert their debt, those of any older one count as empty buckets (a
    // window: as fresh counts).
    limit.generation = (before->generation + 1) & 3;
    if (!before->enabled || windowed) return false;
    limit.previous_tolerance_ns = before->current.tolerance_ns;
    // Schedule per unit now over then; 1.0 across a change of unit, whose
    // tokens do not convert.
    const auto fixed = [](const sluice_gcra_limit& l) {
        return (static_cast<uint128>(l.interval_ns) << 32) + l.interval_frac;
    };
    const uint128 scale = limit.current.unit == before->current.unit
                              ? (fixed(limit.current) << 32) / fixed(before->current)
                              : static_cast<uint128>(1) << 32;
    limit.previous_scale = scale >> 63 ? ~0ULL >> 1 : static_cast<uint64_t>(scale);
    return false;
}

// A level that does not limit counts as gcra: it has no window state.
uint8_t aggregate_algorithm(const sluice_class_entry& cls) {
    return cls.aggregate.enabled ? cls.aggregate_window.algorithm : static_cast<uint8_t>(SLUICE_ALGORITHM_GCRA);
}

// Whether the window state `was` wrote still means the same in `cls`.
bool same_window_count(const sluice_class_entry& was, const sluice_class_entry& cls) {
    const sluice_window_limit& before = was.aggregate_window;
    const sluice_window_limit& after = cls.aggregate_window;
    if (aggregate_algorithm(was) != aggregate_algorithm(cls)) return false;
    if (aggregate_algorithm(cls) == SLUICE_ALGORITHM_GCRA) return true;
    if (before.window_ns != after.window_ns || was.aggregate.unit != cls.aggregate.unit) return false;
    // A log is a ring of `limit` slots: read under another limit its oldest
    // entry is not the oldest admission.
    return after.algorithm != SLUICE_ALGORITHM_SLIDING_LOG || before.limit == after.limit;
}

}  // namespace

std::string describe(const CountRestart& restart) {
    std::string change;
    const auto add = [&change](const std::string& what, const std::string& from, const std::string& to) {
        change += (change.empty() ? "" : ", ") + what + " " + from + " -> " + to;
    };
    const bool per_source = restart.level == SLUICE_LEVEL_SOURCE;
    const sluice_window_limit& before = restart.before;
    const sluice_window_limit& after = restart.after;
    const bool windows = before.algorithm != SLUICE_ALGORITHM_GCRA && after.algorithm != SLUICE_ALGORITHM_GCRA;
    if (before.algorithm != after.algorithm)
        add("algorithm", algorithm_name(before.algorithm), algorithm_name(after.algorithm));
    if (windows && before.window_ns != after.window_ns)
        add("window", format_duration(before.window_ns), format_duration(after.window_ns));
    if (restart.unit_before != restart.unit_after)
        add("unit", unit_text(restart.unit_before), unit_text(restart.unit_after));
    if (change.empty() && before.limit != after.limit)
        add(per_source ? "limit" : "sliding_log limit", std::to_string(before.limit), std::to_string(after.limit));
    // A per-source entry's counts are laid out by the bits the limit needs.
    if (per_source && windows && before.count_bits != after.count_bits)
        add("count width", std::to_string(before.count_bits), std::to_string(after.count_bits) + " bits");
    return "class " + std::to_string(restart.class_id) +
           (per_source ? ": per_source " + change + ": its sources' counts start from fresh state"
                       : ": aggregate " + change + ": its count starts from fresh state");
}

std::vector<CountRestart> carry_previous_limits(const std::vector<sluice_class_entry>& running, CompiledPolicy& next) {
    std::vector<CountRestart> restarts;
    for (sluice_class_entry& cls : next.classes) {
        const auto found = std::find_if(running.begin(), running.end(),
                                        [&](const sluice_class_entry& r) { return r.class_id == cls.class_id; });
        const sluice_class_entry* was = found != running.end() ? &*found : nullptr;
        if (carry_source_limit(was, cls)) {
            CountRestart restart;
            restart.class_id = cls.class_id;
            restart.level = SLUICE_LEVEL_SOURCE;
            restart.before = was->per_source.window;
            restart.after = cls.per_source.window;
            restart.unit_before = was->per_source.current.unit;
            restart.unit_after = cls.per_source.current.unit;
            restarts.push_back(restart);
        }

        if (was && same_window_count(*was, cls)) {
            cls.aggregate_window.generation = was->aggregate_window.generation;
            continue;
        }
        cls.aggregate_window.generation = static_cast<uint32_t>(next.header.version);
        // A class that counted nothing before (new, or without an aggregate)
        // loses nothing; one that becomes gcra keeps its token bucket.
        if (was && was->aggregate.enabled && aggregate_algorithm(cls) != SLUICE_ALGORITHM_GCRA) {
            CountRestart restart;
            restart.class_id = cls.class_id;
            restart.before = was->aggregate_window;
            restart.after = cls.aggregate_window;
            restart.unit_before = was->aggregate.unit;
            restart.unit_after = cls.aggregate.unit;
            restarts.push_back(restart);
        }
    }
    return restarts;
}

Result<PolicyPrefix> parse_prefix(const std::string& cidr, uint32_t class_id) {
    const auto slash = cidr.find('/');
    const std::string address = cidr.substr(0, slash);
    PolicyPrefix p;
    p.class_id = class_id;
    if (inet_pton(AF_INET, address.c_str(), p.addr.data()) == 1) {
        p.family = SLUICE_FAMILY_IPV4;
    } else if (inet_pton(AF_INET6, address.c_str(), p.addr.data()) == 1) {
        p.family = SLUICE_FAMILY_IPV6;
    } else {
        return Error{"\"" + cidr + "\" is not an IPv4 or IPv6 prefix"};
    }
    const unsigned bits = family_bits(p.family);
    p.length = static_cast<uint8_t>(bits);
    if (slash != std::string::npos) {
        const std::string len = cidr.substr(slash + 1);
        if (len.empty() || len.size() > 3 || len.find_first_not_of("0123456789") != std::string::npos ||
            std::stoul(len) > bits)
            return Error{"\"" + cidr + "\": prefix length must be 0.." + std::to_string(bits)};
        p.length = static_cast<uint8_t>(std::stoul(len));
    }
    for (unsigned bit = p.length; bit < bits; bit++)
        if (p.addr[bit / 8] & (0x80 >> (bit % 8)))
            return Error{"\"" + cidr + "\" has host bits set past /" + std::to_string(p.length)};
    return p;
}

}  // namespace sluice
