// SPDX-License-Identifier: Apache-2.0
// Layer: control/request. Request-level decisions: is this request (a domain
// and its descriptors, as an HTTP proxy describes it) within the policy's
// request classes (request_classes.h)? The two front doors, Envoy's rate
// limit service (envoy_service.h) and nginx auth_request (http_service.h),
// both ask a RequestLimiter.
//
// Matching. A descriptor (ordered key/value entries) matches a class of its
// domain whose keys are the same, in the same order, and whose fixed values
// it has; of several, the one with the most fixed values wins (the loader
// refuses two classes that could tie). It is charged on the class's counter
// for its values of the class's unfixed keys ("per user": one counter per
// user). A descriptor no class matches is not limited (code ok, no limit).
//
// Composition: check, then commit. A request's descriptors name counters;
// a counter named twice in one request is charged once. Every counter is
// checked first, under its shard's lock (all the request's shards locked in
// ascending order, so two requests never deadlock), then the fleet credit of
// classes with a fleet quota is taken, and only if all of that admits are the
// counters charged. So a request refused at one level spends nothing at any
// other: the double counting envoyproxy/ratelimit's issue 1060 describes
// cannot happen here.
//
// State: per counter, what the core keeps for its algorithm (a GCRA TAT,
// window counts, a sliding log), in `shards` hash maps, at most `max_counters`
// in all. A counter whose state is back to "nothing admitted" is dropped by
// the sweep, which changes no decision. When the table is full, a request
// that needs a new counter first reclaims idle ones it finds in a bounded look
// (kReclaimLook per shard it touches, resuming where the last look stopped:
// a full table costs a request that much, not a scan); if none, it is refused
// (reason table_full, counted), or admitted uncounted when every class it
// needs a counter of is open when full (on_table_full = "open").
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiled_policy.h"
#include "request_classes.h"
#include "result.h"
#include "sluice/abi.h"

namespace sluice::request {

struct DescriptorEntry {
    std::string key, value;
    bool operator==(const DescriptorEntry&) const = default;
};
using Descriptor = std::vector<DescriptorEntry>;

// One request as a proxy asks about it.
struct Query {
    std::string domain;
    std::vector<Descriptor> descriptors;
    // The request's weight: 0 means each class's own `cost`. Above a matched
    // class's max_cost the query is refused as invalid (an Error), never clamped.
    uint64_t hits = 0;
    // Per descriptor (Envoy's RateLimitDescriptor.hits_addend): when present
    // and non-zero, that descriptor's weight instead of `hits`.
    std::vector<uint64_t> descriptor_hits;
};

enum class Code : uint8_t { ok, over_limit };
std::string_view to_string(Code code);  // "ok", "over_limit"

// Why a query was refused (or, in shadow, would have been).
enum class Refusal : uint8_t { none, limit, fleet, table_full, domain_ceiling };
std::string_view to_string(Refusal refusal);  // "none", "limit", "fleet", "table_full", "domain_ceiling"

// What the limit that answers for a descriptor says, for the RateLimit
// fields and Envoy's DescriptorStatus.
struct LimitAnswer {
    const RequestClass* cls = nullptr;  // valid while the version it came from is current
    uint64_t quota = 0;                 // units per window (gcra: the burst)
    uint64_t window_ns = 0;             // gcra: burst / rate, the time to refill a whole burst
    uint64_t remaining = 0;             // units still admitted now (after this request)
    uint64_t reset_ns = 0;              // until the counter is as if nothing had been admitted
    uint64_t retry_after_ns = 0;        // 0 admitted; SLUICE_NEVER: no wait helps (cost > limit)
};

struct DescriptorStatus {
    Code code = Code::ok;
    std::optional<LimitAnswer> limit;  // absent: no class matched
};

struct Answer {
    Code overall = Code::ok;
    Refusal refusal = Refusal::none;
    bool shadowed = false;                   // refused only by classes in shadow: overall stays ok
    std::vector<DescriptorStatus> statuses;  // one per query descriptor, in order
    // The retry point of the whole request: the latest of its refused
    // counters' (each must have room again), absent when allowed or when no
    // wait helps.
    std::optional<uint64_t> retry_after_ns;
    uint64_t policy_version = 0;
    // Keeps the version the class pointers above point into alive.
    std::shared_ptr<const void> pinned;
    // Admitted without a counter for its new key (or keys): the table was
    // full, none idle could make room, and every such class is open when full.
    bool uncounted = false;
    // The class that refused (the first refused descriptor's) and that
    // counter's values ("tenant=acme,user=bob"), for metrics and hot keys.
    const RequestClass* refused_by = nullptr;
    std::string refused_key;
};

struct LimiterOptions {
    size_t max_counters = 1'000'000;
    size_t shards = 64;
    std::function<uint64_t()> clock;              // ns, monotonic; default CLOCK_MONOTONIC
    std::function<void(const std::string&)> log;  // one line per class whose counts restart
};

class RequestLimiter {
  public:
    explicit RequestLimiter(LimiterOptions options = {});
    ~RequestLimiter();
    RequestLimiter(const RequestLimiter&) = delete;
    RequestLimiter& operator=(const RequestLimiter&) = delete;

    // Takes the request classes of `policy` (a new version). A class that
    // keeps its domain, name and algorithm (and window, for a window
    // algorithm) keeps its counters; any other change starts it fresh.
    void apply(uint64_t version, const std::vector<RequestClass>& classes, const std::vector<RequestDomain>& domains);

    // Decides one query. An Error (invalid) for a weight above a matched
    // class's max_cost, naming the class and its max_cost; nothing is charged.
    Result<Answer> decide(const Query& query);

    // The descriptors an HTTP request with these entries (key -> value, from
    // its headers and address) names in `domain`: one per class of the domain
    // whose keys all have a value here (fixed values must match), in the
    // class's key order; duplicates once. So every class a request can be
    // counted in is charged, all or nothing, in one decide().
    std::vector<Descriptor> descriptors_for(std::string_view domain,
                                            const std::map<std::string, std::string>& entries) const;

    // The domain's HTTP mapping, if the policy names the domain.
    std::optional<RequestDomain> domain(std::string_view name) const;
    uint64_t version() const;

    // Fleet credit cells, by request class id (SLUICE_MAX_CLASSES), for the
    // daemon's request-class FleetLeaser. Stable for the limiter's life.
    sluice_fleet_credit* fleet_credits();

    size_t counters() const;  // counters held now
    // Drops counters whose state is back to nothing admitted; returns how many.
    size_t sweep();

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::request
