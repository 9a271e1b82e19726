// SPDX-License-Identifier: Apache-2.0
#include "request_gate.h"

#include <algorithm>

#include "clock.h"
#include "hot_sources.h"

namespace sluice::request {

std::string_view to_string(Door door) { return door == Door::envoy ? "envoy" : "http"; }

std::string_view to_string(IdentityFailure failure) {
    switch (failure) {
        case IdentityFailure::unsigned_value:
            return "unsigned";
        case IdentityFailure::bad_signature:
            return "bad_signature";
        case IdentityFailure::expired:
            return "expired";
        case IdentityFailure::malformed:
            return "malformed";
    }
    return "unknown";
}

namespace {

// Decision latency buckets (seconds): from a microsecond (a decision is a few)
// to far past Envoy's 20 ms default RPC timeout.
const std::vector<double> kLatencyBounds = {1e-6,   2.5e-6, 5e-6,  1e-5,  2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4,
                                            0.001, 0.0025, 0.005, 0.01, 0.02,   0.05, 0.1,  0.5};

// A refused counter, as the hot keys rank it.
struct HotKeyId {
    std::string domain, class_name, value;
    bool operator==(const HotKeyId&) const = default;
};

}  // namespace

struct RequestGate::State {
    // The per-domain ceiling: a token bucket in nano-requests.
    struct DomainBucket {
        uint64_t tokens_nano = 0;
        uint64_t last_ns = 0;
        bool started = false;
    };

    mutable std::mutex mu;  // everything below
    GateStats stats;
    std::map<std::string, DomainBucket, std::less<>> buckets;
    DecayedTopK<HotKeyId> hot{HotSources::kDefaultCapacity, HotSources::kDefaultTauSeconds};
    std::atomic<uint32_t> in_flight{0};

    // Takes one request from `domain`'s ceiling at `now`; false: over it.
    bool take(const GateOptions& options, std::string_view domain, uint64_t now) {
        if (!options.domain_rate_per_s) return true;
        const uint64_t rate = options.domain_rate_per_s;
        const uint64_t capacity = (options.domain_burst ? options.domain_burst : rate) * 1'000'000'000ULL;
        auto it = buckets.find(domain);
        if (it == buckets.end()) it = buckets.emplace(std::string(domain), DomainBucket{}).first;
        DomainBucket& b = it->second;
        if (!b.started) {
            b = DomainBucket{capacity, now, true};
        } else if (now > b.last_ns) {
            // Capped so elapsed * rate cannot overflow: a full refill is all it can add.
            uint64_t elapsed = std::min<uint64_t>(now - b.last_ns, capacity / rate + 1);
            b.tokens_nano = std::min(capacity, b.tokens_nano + elapsed * rate);
            b.last_ns = now;
        }
        if (b.tokens_nano < 1'000'000'000ULL) return false;
        b.tokens_nano -= 1'000'000'000ULL;
        return true;
    }

    void observe(double seconds) {
        for (size_t i = 0; i < kLatencyBounds.size(); ++i)
            if (seconds <= kLatencyBounds[i]) ++stats.latency_counts[i];
        ++stats.latency_counts.back();  // +Inf
        stats.latency_sum_s += seconds;
        ++stats.latency_count;
    }
};

RequestGate::RequestGate(RequestLimiter& limiter, GateOptions options)
    : limiter_(limiter), options_(options), state_(std::make_unique<State>()) {
    state_->stats.latency_bounds = kLatencyBounds;
    state_->stats.latency_counts.assign(kLatencyBounds.size() + 1, 0);
}

RequestGate::~RequestGate() = default;

Result<Answer> RequestGate::decide(Door door, const Query& query) {
    (void)door;  // both doors are decided and counted alike
    State& s = *state_;
    if (s.in_flight.fetch_add(1) >= options_.max_in_flight) {
        s.in_flight.fetch_sub(1);
        std::lock_guard lock(s.mu);
        ++s.stats.overloaded;
        return Error{"sluiced is deciding " + std::to_string(options_.max_in_flight) +
                         " requests already (max_in_flight): try again",
                     "max_in_flight", ErrorCode::internal};
    }
    const uint64_t started = monotonic_ns();
    bool within_ceiling;
    {
        std::lock_guard lock(s.mu);
        within_ceiling = s.take(options_, query.domain, started);
    }
    Result<Answer> result = within_ceiling ? limiter_.decide(query) : Result<Answer>(Answer{});
    const uint64_t took = monotonic_ns() - started;
    s.in_flight.fetch_sub(1);

    std::lock_guard lock(s.mu);
    s.observe(static_cast<double>(took) / 1e9);
    if (took > static_cast<uint64_t>(options_.deadline.count()) * 1000) ++s.stats.late;
    if (!result) {
        ++s.stats.invalid;
        return result;
    }
    Answer& answer = result.value();
    RequestDomainCounts& counts = s.stats.domains[query.domain];
    if (!within_ceiling) {
        answer.overall = Code::over_limit;
        answer.refusal = Refusal::domain_ceiling;
        answer.statuses.resize(query.descriptors.size());
        ++counts.ceiling_refused;
        ++counts.refused;
        return result;
    }
    if (answer.overall == Code::ok)
        ++counts.allowed;
    else
        ++counts.refused;
    if (answer.refusal == Refusal::fleet) ++counts.fleet_refused;
    if (answer.refusal == Refusal::table_full) ++counts.table_full;
    if (answer.uncounted) ++counts.table_full_open;
    // Per class: every class the request met, under the outcome it had there;
    // a class that would have admitted a request another refused counts
    // nothing (it was not charged).
    std::vector<const RequestClass*> seen;
    for (const DescriptorStatus& status : answer.statuses) {
        if (!status.limit) continue;
        const RequestClass* cls = status.limit->cls;
        if (std::find(seen.begin(), seen.end(), cls) != seen.end()) continue;
        seen.push_back(cls);
        RequestClassCounts& c = counts.classes[cls->name];
        if (cls->shadow && status.limit->retry_after_ns)
            ++c.shadow_refused;
        else if (status.code == Code::over_limit)
            ++c.refused;
        else if (answer.overall == Code::ok)
            ++c.allowed;
    }
    if (seen.empty()) ++counts.classes[""].allowed;
    if (answer.refused_by)
        s.hot.add(HotKeyId{query.domain, answer.refused_by->name, answer.refused_key}, 1.0,
                  static_cast<double>(started) / 1e9);
    return result;
}

void RequestGate::count_identity_failure(std::string_view domain, IdentityFailure failure) {
    std::lock_guard lock(state_->mu);
    ++state_->stats.domains[std::string(domain)].identity_failures[std::string(to_string(failure))];
}

GateStats RequestGate::stats() const {
    std::lock_guard lock(state_->mu);
    GateStats out = state_->stats;
    out.in_flight = state_->in_flight.load();
    out.counters = limiter_.counters();
    return out;
}

std::vector<HotKey> RequestGate::hot_keys(size_t k) const {
    std::lock_guard lock(state_->mu);
    std::vector<HotKey> out;
    for (const auto& ranked : state_->hot.top(k, static_cast<double>(monotonic_ns()) / 1e9))
        out.push_back(
            HotKey{ranked.key.domain, ranked.key.class_name, ranked.key.value, ranked.per_second, ranked.share});
    return out;
}

}  // namespace sluice::request
