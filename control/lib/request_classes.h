// SPDX-License-Identifier: Apache-2.0
// Request classes: the policy's `[[request_class]]` tables, compiled. A
// request class limits requests that HTTP proxies ask sluiced about (nginx
// auth_request, Envoy's rate limit service), keyed by descriptors: ordered
// key/value pairs such as tenant, user, route, remote_address. The packet
// dataplanes never see them; control/request/ decides with them, on the same
// core algorithms (sluice/window.h) the dataplanes use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sluice/abi.h"

namespace sluice {

// One key of a request class's descriptor: the key, and the value it must
// have, or none when every distinct value is counted apart ("per user").
struct RequestKey {
    std::string key;
    std::optional<std::string> value;
};

// How a request class counts. algorithm gcra: `gcra` (rate, burst in
// requests); a window algorithm: `window` in full (index_bits = count_bits =
// 64), sliding_log at most SLUICE_LOG_MAX per window.
struct RequestLimit {
    uint8_t algorithm = SLUICE_ALGORITHM_GCRA;  // enum sluice_algorithm
    sluice_gcra_limit gcra{};                   // gcra only
    uint64_t rate_per_s = 0, burst = 0;         // gcra only, as the policy says them
    sluice_window_limit window{};               // window algorithms only
};

struct RequestFleet {
    uint64_t rate_per_s = 0;
    uint64_t burst = 0;
    bool fail_open = false;
    uint64_t fallback_rate_per_s = 0;
    std::string definition_hash;  // fleet_definition_hash(rate, burst, packets)
};

struct RequestClass {
    uint32_t id = 0;  // 1..SLUICE_MAX_CLASSES-1, unique among request classes
    std::string name;
    std::string domain;
    std::vector<RequestKey> keys;  // in the order a descriptor lists them
    RequestLimit limit;
    uint64_t cost = 1;      // what one request costs when the caller names no weight
    uint64_t max_cost = 1;  // the largest weight a caller may name; more is refused
    bool shadow = false;    // decide and count, never refuse
    // A request that needs a new counter of this class when the table is
    // full and none idle could make room: refused (reason table_full), or,
    // with open, admitted without a counter (and counted).
    bool open_when_table_full = false;
    // A quota the fleet shares (Redis): only on a class whose every key has
    // a fixed value, since the quota is one bucket for the whole class.
    std::optional<RequestFleet> fleet;
};

// How a domain's HTTP requests become descriptor entries (the nginx
// auth_request endpoint; Envoy sends its descriptors itself).
struct RequestDomain {
    std::string name;
    // descriptor key -> the HTTP request header that carries its value.
    // remote_address needs no header: it is the client's address
    // (control/request/identity.h). route comes from the header named here
    // (nginx: X-Original-URI).
    std::vector<std::pair<std::string, std::string>> headers;
    // Keys whose header value must carry a valid signature (identity.h);
    // others are taken as sent.
    std::vector<std::string> signed_keys;
    // What a key whose signature is missing, bad or expired reads as, so such
    // requests fall to the class that matches this value.
    std::string anonymous = "anonymous";
    // The request header a caller names a request's weight in (a decimal
    // integer); empty: requests cost their class's `cost`.
    std::string cost_header;
};

}  // namespace sluice
