// SPDX-License-Identifier: Apache-2.0
// validate_requests(): what control/request/ relies on in a policy's request
// classes and domains (request_classes.h), and the naming rules the loader
// shares with it. Apart from compiled_policy.cpp because the packet
// dataplanes never see any of it.
#include <algorithm>
#include <cstring>
#include <set>

#include "compiled_policy.h"
#include "rate_limits.h"

namespace sluice {
namespace {

Error request_policy_error(const std::string& what) { return Error{"policy: " + what}; }

bool lower_or_digit(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// A request's weight in ns of a gcra limit: the tolerance must hold one
// request, and no more than the debt a counter may carry.
bool valid_request_gcra(const sluice_gcra_limit& limit) {
    const uint64_t one = limit.interval_ns + (limit.interval_frac != 0);
    return limit.unit == SLUICE_UNIT_PACKETS && one > 0 && limit.tolerance_ns >= one &&
           limit.tolerance_ns <= SLUICE_DEBT_MAX_NS;
}

Status valid_request_limit(const RequestLimit& limit, const std::string& name) {
    static constexpr sluice_window_limit kNoWindow{};
    static constexpr sluice_gcra_limit kNoGcra{};
    if (limit.algorithm >= SLUICE_ALGORITHM_COUNT)
        return request_policy_error(name + ": algorithm " + std::to_string(limit.algorithm) + " out of range");
    if (limit.algorithm == SLUICE_ALGORITHM_GCRA) {
        if (std::memcmp(&limit.window, &kNoWindow, sizeof(kNoWindow)) != 0)
            return request_policy_error(name + ": a gcra limit has a window limit set");
        if (limit.rate_per_s < 1 || limit.rate_per_s > SLUICE_RATE_MAX)
            return request_policy_error(name + ": rate " + std::to_string(limit.rate_per_s) + " is outside 1.." +
                                        std::to_string(SLUICE_RATE_MAX));
        if (limit.burst < 1 || limit.burst > SLUICE_BURST_MAX)
            return request_policy_error(name + ": burst " + std::to_string(limit.burst) + " is outside 1.." +
                                        std::to_string(SLUICE_BURST_MAX));
        if (!valid_request_gcra(limit.gcra))
            return request_policy_error(name +
                                        ": its gcra limit is not in packets, or its burst is outside 1 request.." +
                                        std::to_string(SLUICE_DEBT_MAX_NS / SLUICE_NANO) + " s of its rate");
        return ok_status();
    }
    if (std::memcmp(&limit.gcra, &kNoGcra, sizeof(kNoGcra)) != 0 || limit.rate_per_s != 0 || limit.burst != 0)
        return request_policy_error(name + ": a " + algorithm_name(limit.algorithm) +
                                    " limit has a gcra rate or burst set");
    const sluice_window_limit& w = limit.window;
    if (w.algorithm != limit.algorithm)
        return request_policy_error(name + ": its window's algorithm " + algorithm_name(w.algorithm) +
                                    " is not its own " + algorithm_name(limit.algorithm));
    if (w.window_ns < SLUICE_WINDOW_MIN_NS || w.window_ns > SLUICE_WINDOW_MAX_NS)
        return request_policy_error(name + ": window " + std::to_string(w.window_ns) + " ns is outside " +
                                    std::to_string(SLUICE_WINDOW_MIN_NS) + ".." + std::to_string(SLUICE_WINDOW_MAX_NS));
    if (w.limit < 1 || w.limit > kWindowLimitMax)
        return request_policy_error(name + ": limit " + std::to_string(w.limit) + " is outside 1.." +
                                    std::to_string(kWindowLimitMax));
    if (w.index_bits != 64 || w.count_bits != 64)
        return request_policy_error(name + ": window state must be kept in full (index_bits = count_bits = 64)");
    if (w.algorithm == SLUICE_ALGORITHM_SLIDING_LOG && w.limit > SLUICE_LOG_MAX)
        return request_policy_error(name + ": sliding_log limit " + std::to_string(w.limit) + " exceeds the log's " +
                                    std::to_string(SLUICE_LOG_MAX) + " entries");
    return ok_status();
}

Status valid_request_fleet(const RequestClass& cls, const std::string& name) {
    const RequestFleet& f = *cls.fleet;
    for (const RequestKey& key : cls.keys)
        if (!key.value)
            return request_policy_error(name + ": a fleet quota, but key " + key.key +
                                        " has no fixed value (the quota is one bucket for the whole class)");
    if (f.rate_per_s < 1 || f.rate_per_s > SLUICE_RATE_MAX)
        return request_policy_error(name + ": fleet rate " + std::to_string(f.rate_per_s) + " is outside 1.." +
                                    std::to_string(SLUICE_RATE_MAX));
    if (f.burst < 1 || f.burst > SLUICE_BURST_MAX)
        return request_policy_error(name + ": fleet burst " + std::to_string(f.burst) + " is outside 1.." +
                                    std::to_string(SLUICE_BURST_MAX));
    if (f.burst < cls.max_cost)
        return request_policy_error(name + ": fleet burst " + std::to_string(f.burst) + " is below max_cost " +
                                    std::to_string(cls.max_cost));
    if (f.fail_open && (f.fallback_rate_per_s < 1 || f.fallback_rate_per_s > f.rate_per_s))
        return request_policy_error(name + ": fleet fallback rate " + std::to_string(f.fallback_rate_per_s) +
                                    " is outside 1.." + std::to_string(f.rate_per_s) + " (the fleet's rate)");
    if (!f.fail_open && f.fallback_rate_per_s != 0)
        return request_policy_error(name + ": a fleet fallback rate, but it fails closed");
    if (f.definition_hash != fleet_definition_hash(f.rate_per_s, f.burst, SLUICE_UNIT_PACKETS))
        return request_policy_error(name + ": fleet definition_hash " + f.definition_hash + " is not that of " +
                                    fleet_definition(f.rate_per_s, f.burst, SLUICE_UNIT_PACKETS));
    return ok_status();
}

Status valid_request_class(const RequestClass& cls, const std::string& name) {
    if (!valid_request_class_name(cls.name)) return request_policy_error(name + ": not a valid class name");
    if (!valid_request_domain(cls.domain)) return request_policy_error(name + ": domain is not a valid domain name");
    if (cls.keys.size() > kMaxRequestKeys)
        return request_policy_error(name + ": " + std::to_string(cls.keys.size()) + " descriptor keys, more than " +
                                    std::to_string(kMaxRequestKeys));
    std::set<std::string> keys;
    for (const RequestKey& key : cls.keys) {
        if (!valid_descriptor_key(key.key))
            return request_policy_error(name + ": descriptor key \"" + key.key + "\" invalid");
        if (!keys.insert(key.key).second)
            return request_policy_error(name + ": descriptor key " + key.key + " given twice");
        if (key.value && !valid_descriptor_value(*key.value))
            return request_policy_error(name + ": the fixed value of " + key.key + " is invalid");
    }
    if (auto limit = valid_request_limit(cls.limit, name); !limit) return limit;
    if (cls.cost < 1 || cls.max_cost < cls.cost)
        return request_policy_error(name + ": cost " + std::to_string(cls.cost) + " and max_cost " +
                                    std::to_string(cls.max_cost) + " must satisfy 1 <= cost <= max_cost");
    if (cls.max_cost > request_capacity(cls.limit))
        return request_policy_error(name + ": max_cost " + std::to_string(cls.max_cost) +
                                    " exceeds what its limit holds (" + std::to_string(request_capacity(cls.limit)) +
                                    ")");
    if (cls.limit.algorithm == SLUICE_ALGORITHM_SLIDING_LOG && cls.max_cost != 1)
        return request_policy_error(name + ": sliding_log counts admissions, so cost and max_cost must be 1");
    if (cls.fleet)
        if (auto fleet = valid_request_fleet(cls, name); !fleet) return fleet;
    return ok_status();
}

Status valid_request_domain_entry(const RequestDomain& domain) {
    const std::string name = "request domain \"" + domain.name + "\"";
    if (!valid_request_domain(domain.name)) return request_policy_error(name + ": not a valid domain name");
    std::set<std::string> keys;
    for (const auto& [key, header] : domain.headers) {
        if (!valid_descriptor_key(key) || key == kRemoteAddressKey)
            return request_policy_error(name + ": header key \"" + key + "\" is invalid or remote_address");
        if (!keys.insert(key).second) return request_policy_error(name + ": header key " + key + " given twice");
        if (!valid_http_token(header))
            return request_policy_error(name + ": header of " + key + " is not an HTTP token");
    }
    std::set<std::string> signed_keys;
    for (const std::string& key : domain.signed_keys) {
        if (!keys.count(key)) return request_policy_error(name + ": signed key \"" + key + "\" has no header");
        if (!signed_keys.insert(key).second) return request_policy_error(name + ": signed key " + key + " given twice");
    }
    if (!valid_descriptor_value(domain.anonymous))
        return request_policy_error(name + ": anonymous is not a valid value");
    if (!domain.cost_header.empty() && !valid_http_token(domain.cost_header))
        return request_policy_error(name + ": cost_header is not an HTTP token");
    return ok_status();
}

}  // namespace

bool valid_request_class_name(std::string_view name) {
    if (name.empty() || name.size() > 63 || name[0] < 'a' || name[0] > 'z') return false;
    return std::all_of(name.begin(), name.end(), [](char c) { return lower_or_digit(c) || c == '_' || c == '-'; });
}

bool valid_request_domain(std::string_view name) {
    if (name.empty() || name.size() > kMaxRequestDomainLength) return false;
    return std::all_of(name.begin(), name.end(), [](char c) { return c > ' ' && c < 0x7f && c != '"' && c != '\''; });
}

bool valid_descriptor_key(std::string_view key) {
    if (key.empty() || key.size() > kMaxRequestKeyLength) return false;
    return std::all_of(key.begin(), key.end(),
                       [](char c) { return lower_or_digit(c) || c == '_' || c == '-' || c == '.'; });
}

bool valid_descriptor_value(std::string_view value) {
    if (value.empty() || value.size() > kMaxRequestValueBytes) return false;
    return std::none_of(value.begin(), value.end(), [](char c) {
        const auto byte = static_cast<unsigned char>(c);
        return byte < 0x20 || byte == 0x7f;
    });
}

bool valid_http_token(std::string_view name) {
    static constexpr std::string_view kPunctuation = "!#$%&'*+-.^_`|~";
    if (name.empty()) return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               kPunctuation.find(c) != std::string_view::npos;
    });
}

uint64_t request_capacity(const RequestLimit& limit) {
    return limit.algorithm == SLUICE_ALGORITHM_GCRA ? limit.burst : limit.window.limit;
}

bool request_classes_could_tie(const RequestClass& a, const RequestClass& b) {
    if (a.domain != b.domain || a.keys.size() != b.keys.size()) return false;
    size_t fixed_a = 0, fixed_b = 0;
    for (size_t i = 0; i < a.keys.size(); i++) {
        if (a.keys[i].key != b.keys[i].key) return false;
        if (a.keys[i].value && b.keys[i].value && *a.keys[i].value != *b.keys[i].value) return false;
        fixed_a += a.keys[i].value.has_value();
        fixed_b += b.keys[i].value.has_value();
    }
    return fixed_a == fixed_b;
}

Status validate_requests(const CompiledPolicy& policy) {
    if (policy.requests.size() > SLUICE_MAX_CLASSES - 1)
        return request_policy_error(std::to_string(policy.requests.size()) + " request classes, more than " +
                                    std::to_string(SLUICE_MAX_CLASSES - 1));
    std::set<uint32_t> ids;
    std::set<std::string> names;
    for (size_t i = 0; i < policy.requests.size(); i++) {
        const RequestClass& cls = policy.requests[i];
        const std::string name = "request class " + std::to_string(cls.id) + " \"" + cls.name + "\"";
        if (cls.id == 0 || cls.id >= SLUICE_MAX_CLASSES)
            return request_policy_error(name + ": id must be within 1.." + std::to_string(SLUICE_MAX_CLASSES - 1));
        if (!ids.insert(cls.id).second) return request_policy_error(name + ": id used twice");
        if (!names.insert(cls.name).second) return request_policy_error(name + ": name used twice");
        if (auto valid = valid_request_class(cls, name); !valid) return valid;
        for (size_t j = 0; j < i; j++)
            if (request_classes_could_tie(policy.requests[j], cls))
                return request_policy_error(name + " could tie with request class \"" + policy.requests[j].name +
                                            "\": a descriptor could match both with equally many fixed values");
    }
    std::set<std::string> domains;
    for (const RequestDomain& domain : policy.request_domains) {
        if (!domains.insert(domain.name).second)
            return request_policy_error("request domain \"" + domain.name + "\" given twice");
        if (auto valid = valid_request_domain_entry(domain); !valid) return valid;
    }
    return ok_status();
}

}  // namespace sluice
