// SPDX-License-Identifier: Apache-2.0
// The nginx auth_request front door (packaging/nginx-sluice.conf): an HTTP
// endpoint nginx asks, in a subrequest, whether the request it is about to
// serve is within the policy's request classes.
//
//   GET|POST /v1/decide/<domain>
//
// The request's headers are the original request's (nginx forwards them to
// the subrequest). The domain's RequestDomain (request_classes.h) maps them to
// descriptor entries: each `headers` key takes the value of its header (several
// lines of one header joined with ','); a key of `signed_keys` must carry a
// signed value (identity.h) and is replaced by the domain's `anonymous` when
// its header is missing or its value is unsigned, badly signed, expired or
// malformed (each but the missing header counted, by
// RequestGate::count_identity_failure; a missing header is not a failure,
// but still anonymous, so that dropping it does not escape a per-user class);
// `remote_address` is always the client's address behind the trusted proxies
// (identity.h), whatever the headers say. The weight is the decimal value of
// the domain's `cost_header` when the request has it (a positive integer).
//
// Answers, each with X-Sluice-Decision and the fields of rate_limit_fields():
//   200 allowed (X-Sluice-Decision: allow, or shadow when only classes in
//       shadow refused), empty body;
//   403 refused (X-Sluice-Decision: refuse; Retry-After when a wait helps).
//       nginx passes 401 and 403 from an auth subrequest on and treats any
//       other status as an error (500), so the snippet turns 403 into 429;
//   400 invalid: a bad weight header (naming it) or a weight above a class's
//       max_cost (the limiter's message);
//   404 a domain the current policy does not name;
//   503 over the gate's ceiling on decisions in flight.
//
// Threads: `threads` workers serve connections; at most `max_queued`
// accepted connections wait for one, after which the acceptor waits (and new
// connections wait in the kernel's listen backlog). A connection holds its
// worker while it is kept alive (at most 2 s idle, 100 requests). The listen
// backlog is 1024 (httplib's own 5 drops SYNs under a burst of nginx
// subrequests, each a new connection, and nginx then waits a second).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "request_gate.h"
#include "result.h"

namespace sluice::request {

struct HttpServiceOptions {
    std::string address = "127.0.0.1:9466";                 // host:port, [v6]:port; port 0 picks one (see port())
    std::vector<std::string> trusted_proxies;               // CIDR prefixes or single addresses
    std::string client_address_header = "X-Forwarded-For";  // or "Forwarded" (RFC 7239)
    std::string identity_key_file;                          // empty: signed keys can never verify -> anonymous
    int threads = 8;
    int max_queued = 256;  // accepted connections waiting for a worker
};

class HttpService {
  public:
    // Binds and starts serving; an Error for a bad option (naming it) or an
    // address it cannot bind.
    static Result<std::unique_ptr<HttpService>> start(RequestGate& gate, HttpServiceOptions options);
    ~HttpService();  // stop()
    HttpService(const HttpService&) = delete;
    HttpService& operator=(const HttpService&) = delete;

    int port() const;
    // Stops accepting, finishes the requests being served; idempotent.
    void stop();

  private:
    struct Impl;
    explicit HttpService(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::request
