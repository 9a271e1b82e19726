// SPDX-License-Identifier: Apache-2.0
// What both front doors (envoy_service.h, http_service.h) go through to ask
// the RequestLimiter: the node's own hard ceilings, the deadline and the
// counts /metrics and sluicectl show.
//
// Ceilings protect sluiced itself, whatever the policy or Redis do:
//  - max_in_flight decisions at once: one more is answered at once with an
//    overload error (is_overload(); gRPC RESOURCE_EXHAUSTED, HTTP 503), counted;
//  - domain_rate requests per second per domain on this node (a token bucket,
//    domain_burst deep): over it, over_limit with refusal domain_ceiling.
// A decision that took longer than `deadline` (Envoy's default RPC timeout is
// 20 ms) is counted late: the proxy may have given up on it already.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "request_limiter.h"
#include "request_stats.h"
#include "result.h"

namespace sluice::request {

enum class Door : uint8_t { envoy, http };
std::string_view to_string(Door door);  // "envoy", "http"

struct GateOptions {
    uint32_t max_in_flight = 1024;
    uint64_t domain_rate_per_s = 0;  // 0: no per-domain ceiling
    uint64_t domain_burst = 0;       // 0: a second's worth
    std::chrono::microseconds deadline{20'000};
};

// Why an identity was not trusted (identity.h); counted per domain.
enum class IdentityFailure : uint8_t { unsigned_value, bad_signature, expired, malformed };
std::string_view to_string(IdentityFailure failure);  // "unsigned", "bad_signature", "expired", "malformed"

using GateStats = sluice::RequestGateStats;
using HotKey = sluice::RequestHotKey;

// Whether decide() refused for max_in_flight (not the caller's fault: retry).
inline bool is_overload(const Error& error) {
    return error.code == ErrorCode::internal && error.setting == "max_in_flight";
}

class RequestGate {
  public:
    RequestGate(RequestLimiter& limiter, GateOptions options);
    ~RequestGate();
    RequestGate(const RequestGate&) = delete;
    RequestGate& operator=(const RequestGate&) = delete;

    // Decides through the ceilings and counts the outcome; `door` says which
    // front door asked (both are decided and counted alike).
    Result<Answer> decide(Door door, const Query& query);
    // An identity header a door could not trust (counted; the door then uses
    // the domain's anonymous value).
    void count_identity_failure(std::string_view domain, IdentityFailure failure);

    RequestLimiter& limiter() { return limiter_; }
    GateStats stats() const;
    std::vector<HotKey> hot_keys(size_t k) const;

  private:
    struct State;
    RequestLimiter& limiter_;
    GateOptions options_;
    std::unique_ptr<State> state_;
};

}  // namespace sluice::request
