// SPDX-License-Identifier: Apache-2.0
// The response fields a request-level answer carries, for both front doors:
//  - Retry-After (RFC 9110 §10.2.3) in delay-seconds, rounded up so it never
//    names a point earlier than the one the algorithm computed; sent only on
//    a refusal whose retry point is known (not when no wait helps);
//  - RateLimit-Policy and RateLimit, as draft-ietf-httpapi-ratelimit-headers-10
//    spells them (a draft: interoperability, not a standard): one list member
//    per limit the request met, named by its class,
//      RateLimit-Policy: "user";q=10;w=60, "tenant";q=1000;w=60
//      RateLimit: "user";r=0;t=42, "tenant";r=977;t=3
//    q the quota (gcra: the burst), w its window in seconds (gcra: the time a
//    whole burst takes to refill), r what remains, t seconds until it resets.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "request_limiter.h"

namespace sluice::request {

struct HeaderField {
    std::string name, value;
    bool operator==(const HeaderField&) const = default;
};

// ceil(ns / 1 s) as decimal seconds; at least 1 for any ns > 0.
std::string delay_seconds(uint64_t ns);

// The fields for `answer`, in the order Retry-After (when sent),
// RateLimit-Policy, RateLimit (when any limit matched).
std::vector<HeaderField> rate_limit_fields(const Answer& answer);

}  // namespace sluice::request
