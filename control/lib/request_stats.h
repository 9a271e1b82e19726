// SPDX-License-Identifier: Apache-2.0
// What control/request's gate counts (request_gate.h), as plain data: /metrics
// (metrics.h) and the daemon's stats and top answers read it without seeing
// the request layer.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace sluice {

// Counts since start, for /metrics and `sluicectl stats`.
struct RequestClassCounts {
    // allowed: requests admitted (and charged here); refused: requests this
    // class refused; shadow_refused: requests it would have refused, in shadow.
    uint64_t allowed = 0, refused = 0, shadow_refused = 0;
};
struct RequestDomainCounts {
    std::map<std::string, RequestClassCounts> classes;  // by class name; "" for requests no class limited
    uint64_t allowed = 0, refused = 0;
    uint64_t ceiling_refused = 0;                       // refusal domain_ceiling
    uint64_t fleet_refused = 0;                         // refusal fleet
    uint64_t table_full = 0;                            // refusal table_full
    uint64_t table_full_open = 0;                       // admitted uncounted: table full, on_table_full open
    std::map<std::string, uint64_t> identity_failures;  // by IdentityFailure name
};
struct RequestGateStats {
    std::map<std::string, RequestDomainCounts> domains;
    uint64_t invalid = 0;     // refused as invalid input (weight above max_cost, ...)
    uint64_t overloaded = 0;  // over max_in_flight
    uint64_t late = 0;        // decisions longer than the deadline
    uint64_t in_flight = 0;   // now
    uint64_t counters = 0;    // the limiter's counters now (each a key's state)
    // Decision latency: bucket upper bounds in seconds and cumulative counts
    // (Prometheus histogram layout), sum in seconds.
    std::vector<double> latency_bounds;
    std::vector<uint64_t> latency_counts;
    double latency_sum_s = 0;
    uint64_t latency_count = 0;
};

// A request counter refused most, by the Space-Saving top-K over decayed
// counts (hot_sources.h's DecayedTopK).
struct RequestHotKey {
    std::string domain, class_name, value;  // value: the counter's key values, "k=v,k=v"
    double refusals_per_second = 0;
    double share = 0;
};

}  // namespace sluice
