// SPDX-License-Identifier: Apache-2.0
// Envoy's rate limit service (envoy.service.ratelimit.v3.RateLimitService,
// ShouldRateLimit), served by sluiced over gRPC, so Envoy's ratelimit filter
// (or any proxy that speaks the protocol) asks sluiced about each request.
// The protos in proto/ carry Envoy's package and field numbers: a real Envoy
// uses this service unchanged.
//
// A request becomes one Query through the RequestGate (Door::envoy), never
// the limiter directly, so the node's ceilings and counts apply:
//  - domain, and each descriptor's entries in order;
//  - hits_addend: the request's weight, 0 (unset) meaning 1 as Envoy's docs
//    say (so a class's own `cost` never applies to Envoy requests); a
//    descriptor's own hits_addend, when set and non-zero, is its weight;
//  - a descriptor's `limit` override is ignored: the policy decides, and a
//    proxy cannot raise its own limit.
// The Answer becomes the response: overall_code, one DescriptorStatus per
// descriptor (current_limit only when a class matched: the class name, and
// gcra as its rate per SECOND; a window of exactly 1 s/1 min/1 h/1 day as
// its quota per that unit; any other window UNKNOWN with requests_per_unit
// its quota), limit_remaining (saturated to uint32), duration_until_reset,
// and response_headers_to_add from rate_limit_fields (Retry-After,
// RateLimit-Policy, RateLimit) on OK and OVER_LIMIT alike.
//
// Errors are gRPC statuses, which Envoy's filter treats as "the service
// failed" (its failure_mode_deny decides): an invalid query (a weight above a
// class's max_cost, an empty domain or descriptor list) INVALID_ARGUMENT with
// the message, the gate's overload (max_in_flight) RESOURCE_EXHAUSTED,
// anything else INTERNAL. A refused request is never an error: it is
// OVER_LIMIT.
//
// What protobuf itself reports (a string that is not UTF-8 fails to parse,
// and protobuf says so on stderr) goes through sluiced's logger instead, at
// most one line a second, the lines held back counted in the next.
//
// gRPC's synchronous server runs decisions on its own thread pool; the gate
// and limiter are thread-safe, so nothing here locks.
#pragma once

#include <memory>
#include <string>

#include "request_gate.h"
#include "result.h"

namespace envoy::service::ratelimit::v3 {
class RateLimitRequest;
class RateLimitResponse;
}  // namespace envoy::service::ratelimit::v3

namespace sluice::request {

struct EnvoyServiceOptions {
    std::string address = "127.0.0.1:8081";  // host:port; port 0 picks a free one (port())
    // A larger request is refused (RESOURCE_EXHAUSTED) before it is parsed;
    // gRPC's own default is 4 MiB.
    int max_message_bytes = 64 * 1024;
};

class EnvoyService {
  public:
    EnvoyService(RequestGate& gate, EnvoyServiceOptions options);
    ~EnvoyService();  // stops
    EnvoyService(const EnvoyService&) = delete;
    EnvoyService& operator=(const EnvoyService&) = delete;

    // Binds and starts serving; an Error (internal) when the address cannot
    // be bound. Once only.
    Status start();
    // The bound port (after start; 0 before).
    int port() const;
    // Stops accepting, lets calls in progress finish; idempotent.
    void stop();

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// The two mappings the service is made of, for tests.
// An Error (invalid) for an empty domain or no descriptors.
Result<Query> query_from(const envoy::service::ratelimit::v3::RateLimitRequest& request);
void fill_response(const Answer& answer, envoy::service::ratelimit::v3::RateLimitResponse& response);

}  // namespace sluice::request
