// SPDX-License-Identifier: Apache-2.0
#include "fleet_bucket.h"

#include <openssl/evp.h>

#include <cmath>
#include <cstdio>
#include <vector>

namespace sluice::fleet {
namespace {

// Doubles count exactly up to here; the script computes in Lua numbers.
constexpr double kExactLimit = 9007199254740992.0;  // 2^53

// KEYS[1] the bucket hash; ARGV rate_per_s, burst, request, returned, ttl margin (ms).
// Numbers go back to Redis as strings: a Lua number passed to redis.call is
// printed with 14 digits, and an integer reply truncates, so the fraction of
// `tokens` survives only in the stored string.
constexpr std::string_view kScript = R"lua(
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local request = tonumber(ARGV[3])
local returned = tonumber(ARGV[4])
local margin = tonumber(ARGV[5])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1])
local ts = tonumber(state[2])
if tokens == nil or ts == nil then
  tokens = burst
  ts = now
end
-- A clock that went back refills nothing and leaves ts where it was.
if now > ts then
  tokens = math.min(burst, tokens + (now - ts) * rate / 1000000)
  ts = now
end
tokens = math.min(burst, tokens + returned)
local grant = math.floor(math.min(request, math.max(tokens, 0)))
tokens = tokens - grant
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'ts', string.format('%.0f', ts))
-- Expire when full again: a missing key reads as a full bucket.
local ttl = math.min(math.ceil((burst - tokens) / rate * 1000) + margin, 70368744177664)
redis.call('PEXPIRE', KEYS[1], string.format('%.0f', ttl))
return {grant, math.floor(tokens), now}
)lua";

std::string sha1_hex(std::string_view text) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha1(), nullptr);
    static constexpr char kHex[] = "0123456789abcdef";
    std::string hex;
    for (unsigned int i = 0; i < size; ++i) {
        hex += kHex[digest[i] >> 4];
        hex += kHex[digest[i] & 0xF];
    }
    return hex;
}

std::string exact_double(double value) {
    char text[64];
    std::snprintf(text, sizeof(text), "%.17g", value);
    return text;
}

Error field_error(std::string message, std::string field) {
    return Error{.message = std::move(message), .setting = std::move(field), .code = ErrorCode::invalid};
}

}  // namespace

Status validate_fleet_bucket_spec(const FleetBucketSpec& spec) {
    if (!(spec.rate_per_s > 0) || !std::isfinite(spec.rate_per_s))
        return field_error("fleet bucket: rate_per_s must be a finite number > 0", "rate_per_s");
    if (spec.burst < 1 || static_cast<double>(spec.burst) > kExactLimit)
        return field_error("fleet bucket: burst must be in 1..2^53", "burst");
    return ok_status();
}

std::string fleet_bucket_key(std::string_view ns, std::string_view class_name, std::string_view definition_hash) {
    std::string key;
    key.reserve(ns.size() + class_name.size() + definition_hash.size() + 12);
    key.append(ns).append(":{").append(class_name).append(":").append(definition_hash).append("}:bucket");
    return key;
}

FleetBucketScript::FleetBucketScript(std::chrono::milliseconds ttl_margin)
    : sha1_(sha1_hex(kScript)), ttl_margin_(ttl_margin) {}

std::string_view FleetBucketScript::source() { return kScript; }

Result<FleetExchange> FleetBucketScript::exchange(RedisClient& client, const std::string& key,
                                                  const FleetBucketSpec& spec, uint64_t request,
                                                  int64_t returned) const {
    if (auto valid = validate_fleet_bucket_spec(spec); !valid) return valid.error();
    if (static_cast<double>(request) > kExactLimit) return field_error("fleet bucket: request over 2^53", "request");
    if (std::fabs(static_cast<double>(returned)) > kExactLimit)
        return field_error("fleet bucket: returned beyond +-2^53", "returned");
    if (ttl_margin_.count() < 1) return field_error("fleet bucket: the TTL margin must be >= 1 ms", "ttl_margin");

    const std::vector<std::string> argv{"EVALSHA",
                                        sha1_,
                                        "1",
                                        key,
                                        exact_double(spec.rate_per_s),
                                        std::to_string(spec.burst),
                                        std::to_string(request),
                                        std::to_string(returned),
                                        std::to_string(ttl_margin_.count())};
    auto reply = client.command(argv, key);
    if (!reply && client.last_error_code() == "NOSCRIPT") {
        // Script caches are per node and emptied by restarts and SCRIPT
        // FLUSH: load it where it was missing (the node that said NOSCRIPT,
        // which after an ASK is not the slot's owner) and retry once.
        const RedisEndpoint node = client.last_node();
        auto loaded = client.command_at(node, {"SCRIPT", "LOAD", std::string(kScript)});
        if (!loaded) return loaded.error();
        if (loaded.value().str != sha1_)
            return Error{"redis " + format_redis_endpoint(node) + ": SCRIPT LOAD returned sha " + loaded.value().str +
                             ", expected " + sha1_,
                         {},
                         ErrorCode::internal};
        reply = client.command(argv, key);
    }
    if (!reply) return reply.error();

    const RedisReply& r = reply.value();
    if (r.type != RedisReplyType::array || r.elements.size() != 3 || r.elements[0].type != RedisReplyType::integer ||
        r.elements[1].type != RedisReplyType::integer || r.elements[2].type != RedisReplyType::integer ||
        r.elements[0].integer < 0 || r.elements[2].integer < 0)
        return Error{"redis " + format_redis_endpoint(client.last_node()) +
                         ": the fleet bucket script returned an unexpected reply",
                     {},
                     ErrorCode::internal};
    // A grant beyond the request would be credit the bucket never gave out
    // (a wrong script under our sha, or not Redis at all): refuse it.
    if (static_cast<uint64_t>(r.elements[0].integer) > request)
        return Error{"redis " + format_redis_endpoint(client.last_node()) + ": the fleet bucket script granted " +
                         std::to_string(r.elements[0].integer) + " for a request of " + std::to_string(request),
                     {},
                     ErrorCode::internal};
    return FleetExchange{.granted = static_cast<uint64_t>(r.elements[0].integer),
                         .tokens_left = static_cast<int64_t>(r.elements[1].integer),
                         .redis_time_us = static_cast<uint64_t>(r.elements[2].integer)};
}

}  // namespace sluice::fleet
