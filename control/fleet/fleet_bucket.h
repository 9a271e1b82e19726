// SPDX-License-Identifier: Apache-2.0
// The fleet token bucket: one rate limit shared by many nodes, kept in Redis
// as a hash {tokens, ts} and changed only by one Lua script, so every
// exchange (refill, credit what a node returns, grant what it asks for) is
// atomic and timed by the Redis clock alone, never a node's.
//
// Invariant: every unit a node admitted was taken from the bucket. A node
// that spent units it had already returned reports them as a negative
// return; the bucket then goes into debt, which the refill pays off first.
// The key always has an expiry: the time to refill to full plus a margin, so
// an expired key means exactly "full bucket".
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "redis_client.h"
#include "result.h"

namespace sluice::fleet {

// Units are whatever the quota counts (packets, bytes, SYNs); the script does not care.
struct FleetBucketSpec {
    double rate_per_s = 0;  // > 0
    uint64_t burst = 0;     // >= 1, <= 2^53 (the script counts in doubles)
};

struct FleetExchange {
    uint64_t granted = 0;
    int64_t tokens_left = 0;     // floor of the bucket after the grant; negative while in debt
    uint64_t redis_time_us = 0;  // Redis TIME when the script ran
};

// Errors name the field ("rate_per_s", "burst").
Status validate_fleet_bucket_spec(const FleetBucketSpec& spec);

// "<ns>:{<class_name>:<definition_hash>}:bucket": the hash tag puts one
// quota's keys in one cluster slot. Class names are [A-Za-z0-9_.-], so none
// holds a brace that would move the tag.
std::string fleet_bucket_key(std::string_view ns, std::string_view class_name, std::string_view definition_hash);

class FleetBucketScript {
  public:
    // ttl_margin: how long past "full again" a key lives.
    explicit FleetBucketScript(std::chrono::milliseconds ttl_margin = std::chrono::milliseconds{1000});

    // One atomic exchange on the bucket at `key`: refill by Redis time, credit
    // `returned` (negative: units spent after returning them), grant up to
    // `request`. Runs EVALSHA; on NOSCRIPT it loads the script on the node
    // that said so and retries once. |returned| and request are <= 2^53.
    Result<FleetExchange> exchange(RedisClient& client, const std::string& key, const FleetBucketSpec& spec,
                                   uint64_t request, int64_t returned) const;

    const std::string& sha1() const { return sha1_; }
    static std::string_view source();

  private:
    std::string sha1_;  // hex, as EVALSHA and SCRIPT LOAD spell it
    std::chrono::milliseconds ttl_margin_;
};

}  // namespace sluice::fleet
