// SPDX-License-Identifier: Apache-2.0
// The request limiter on a simulated clock: matching, composition without
// double counting, weights, every algorithm's answer, shadow, fleet credit,
// the counter table's bound, versions; and the response fields and the gate.
#include <gtest/gtest.h>

#include "http_fields.h"
#include "request_class_builder.h"
#include "request_gate.h"
#include "request_limiter.h"
#include "sluice/fleet.h"

namespace sluice::request::request_limiter_test {
namespace {

constexpr uint64_t kMs = 1'000'000, kSecond = 1'000'000'000;

RequestClass gcra_class(uint32_t id, std::string name, std::vector<RequestKey> keys, uint64_t rate, uint64_t burst) {
    return gcra_request_class(id, std::move(name), "api", std::move(keys), rate, burst);
}

RequestClass window_class(uint32_t id, std::string name, std::vector<RequestKey> keys, Algorithm algorithm,
                          uint64_t limit, uint64_t window_ns) {
    return window_request_class(id, std::move(name), "api", std::move(keys), algorithm, limit, window_ns);
}

Query query(std::vector<Descriptor> descriptors, uint64_t hits = 0) {
    return Query{"api", std::move(descriptors), hits, {}};
}

struct RequestLimiterTest : ::testing::Test {
    uint64_t now = 1000 * kSecond;
    RequestLimiter limiter{LimiterOptions{1'000'000, 8, [this] { return now; }, {}}};

    Answer ask(const Query& q) {
        auto answer = limiter.decide(q);
        EXPECT_TRUE(answer.ok()) << (answer.ok() ? "" : answer.error().message);
        return answer.ok() ? answer.value() : Answer{};
    }
    int admitted(const Query& q, int tries) {
        int n = 0;
        for (int i = 0; i < tries; ++i) n += ask(q).overall == Code::ok;
        return n;
    }
};

const Descriptor kTenantA = {{"tenant", "a"}};
const Descriptor kUserA1 = {{"tenant", "a"}, {"user", "1"}};
const Descriptor kUserA2 = {{"tenant", "a"}, {"user", "2"}};

TEST_F(RequestLimiterTest, GcraAdmitsItsBurstThenTellsWhenToComeBack) {
    limiter.apply(1, {gcra_class(1, "user", {{"user", {}}}, 10, 5)}, {});
    const Descriptor d = {{"user", "1"}};
    EXPECT_EQ(admitted(query({d}), 5), 5);
    Answer refused = ask(query({d}));
    ASSERT_EQ(refused.overall, Code::over_limit);
    EXPECT_EQ(refused.refusal, Refusal::limit);
    ASSERT_TRUE(refused.retry_after_ns);
    EXPECT_EQ(*refused.retry_after_ns, 100 * kMs);  // one request's schedule at 10/s
    EXPECT_EQ(refused.statuses[0].limit->remaining, 0u);
    EXPECT_EQ(refused.statuses[0].limit->reset_ns, 500 * kMs);
    now += *refused.retry_after_ns - 1;
    EXPECT_EQ(ask(query({d})).overall, Code::over_limit) << "one ns before the retry point";
    now += 1;
    EXPECT_EQ(ask(query({d})).overall, Code::ok) << "at the retry point";
}

TEST_F(RequestLimiterTest, FixedWindowRetryPointIsTheWindowsEnd) {
    limiter.apply(1, {window_class(1, "route", {{"route", {}}}, Algorithm::fixed_window, 3, 10 * kSecond)}, {});
    now = 1000 * kSecond + 4 * kSecond;  // 4 s into a window [1000 s, 1010 s)
    const Descriptor d = {{"route", "/x"}};
    Answer first = ask(query({d}));
    EXPECT_EQ(first.statuses[0].limit->remaining, 2u);
    EXPECT_EQ(first.statuses[0].limit->reset_ns, 6 * kSecond);
    EXPECT_EQ(first.statuses[0].limit->quota, 3u);
    EXPECT_EQ(first.statuses[0].limit->window_ns, 10 * kSecond);
    EXPECT_EQ(admitted(query({d}), 5), 2);
    Answer refused = ask(query({d}));
    EXPECT_EQ(*refused.retry_after_ns, 6 * kSecond);
    now += 6 * kSecond;
    EXPECT_EQ(ask(query({d})).overall, Code::ok);
}

TEST_F(RequestLimiterTest, SlidingLogIsExactInEveryRollingWindow) {
    limiter.apply(1, {window_class(1, "login", {{"user", {}}}, Algorithm::sliding_log, 3, kSecond)}, {});
    const Descriptor d = {{"user", "1"}};
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(ask(query({d})).overall, Code::ok);
        now += 100 * kMs;
    }
    Answer refused = ask(query({d}));  // at +300 ms; the first left at +1000 ms
    ASSERT_EQ(refused.overall, Code::over_limit);
    EXPECT_EQ(*refused.retry_after_ns, 700 * kMs);
    now += 700 * kMs - 1;
    EXPECT_EQ(ask(query({d})).overall, Code::over_limit);
    now += 1;
    EXPECT_EQ(ask(query({d})).overall, Code::ok);
}

TEST_F(RequestLimiterTest, EachValueOfAnUnfixedKeyHasItsOwnCounter) {
    limiter.apply(1, {gcra_class(1, "user", {{"tenant", {}}, {"user", {}}}, 1, 2)}, {});
    EXPECT_EQ(admitted(query({kUserA1}), 5), 2);
    EXPECT_EQ(admitted(query({kUserA2}), 5), 2);
}

// A value longer than a counter keeps is counted under a keyed hash of it:
// still one counter per value, and the shown key cut to a line.
TEST_F(RequestLimiterTest, AValueOfAMegabyteIsOneCounterOfBoundedSize) {
    limiter.apply(1, {gcra_class(1, "user", {{"user", {}}}, 1, 1)}, {});
    const std::string one(1 << 20, 'a');
    std::string other = one;
    other.back() = 'b';  // differs only past everything a counter keeps of it
    const std::string short_value(64, 'a');
    EXPECT_EQ(ask(query({{{"user", one}}})).overall, Code::ok);
    EXPECT_EQ(ask(query({{{"user", other}}})).overall, Code::ok) << "another value: another counter";
    EXPECT_EQ(ask(query({{{"user", short_value}}})).overall, Code::ok) << "a kept value never meets a hashed one";
    EXPECT_EQ(limiter.counters(), 3u);
    const Answer again = ask(query({{{"user", one}}}));
    EXPECT_EQ(again.overall, Code::over_limit) << "the same value: the same counter";
    EXPECT_EQ(again.refused_key, "user=" + std::string(48, 'a') + "...(1048576 bytes)");
    EXPECT_EQ(ask(query({{{"user", short_value}}})).refused_key, "user=" + short_value) << "64 bytes are kept whole";
}

// envoyproxy/ratelimit's issue 1060: a request over one descriptor's limit
// still spent the others'. Here a refusal at one level spends nothing at any.
TEST_F(RequestLimiterTest, RefusedAtTheUserLevelLeavesTheTenantUntouched) {
    limiter.apply(
        1,
        {gcra_class(1, "tenant", {{"tenant", {}}}, 1, 10), gcra_class(2, "user", {{"tenant", {}}, {"user", {}}}, 1, 2)},
        {});
    EXPECT_EQ(admitted(query({kTenantA, kUserA1}), 50), 2);  // user 1's burst
    // The tenant paid only for the two admitted: 8 left for user 2 and others.
    Answer answer = ask(query({kTenantA}));
    EXPECT_EQ(answer.statuses[0].limit->remaining, 7u);
    EXPECT_EQ(admitted(query({kTenantA, kUserA2}), 50), 2);
    EXPECT_EQ(ask(query({kTenantA})).statuses[0].limit->remaining, 4u);
}

TEST_F(RequestLimiterTest, RefusedAtTheTenantLevelLeavesTheUserUntouched) {
    limiter.apply(
        1,
        {gcra_class(1, "tenant", {{"tenant", {}}}, 1, 3), gcra_class(2, "user", {{"tenant", {}}, {"user", {}}}, 1, 10)},
        {});
    EXPECT_EQ(admitted(query({kTenantA}), 3), 3);  // the tenant spent by others
    Answer refused = ask(query({kTenantA, kUserA1}));
    ASSERT_EQ(refused.overall, Code::over_limit);
    EXPECT_EQ(refused.statuses[0].code, Code::over_limit);
    EXPECT_EQ(refused.statuses[1].code, Code::ok);
    EXPECT_EQ(refused.statuses[1].limit->remaining, 10u) << "the user's bucket is as full as before";
    EXPECT_EQ(refused.refused_by->name, "tenant");
    EXPECT_EQ(refused.refused_key, "tenant=a");
}

TEST_F(RequestLimiterTest, ACounterNamedTwiceInOneRequestIsChargedOnce) {
    limiter.apply(1, {gcra_class(1, "tenant", {{"tenant", {}}}, 1, 4)}, {});
    EXPECT_EQ(admitted(query({kTenantA, kTenantA}), 10), 4);
}

TEST_F(RequestLimiterTest, TheMostSpecificClassWins) {
    RequestClass acme = gcra_class(2, "acme", {{"tenant", std::string("acme")}}, 1, 100);
    limiter.apply(1, {gcra_class(1, "tenant", {{"tenant", {}}}, 1, 2), acme}, {});
    EXPECT_EQ(admitted(query({{{"tenant", "acme"}}}), 10), 10);
    EXPECT_EQ(admitted(query({{{"tenant", "other"}}}), 10), 2);
    Answer unmatched = ask(query({{{"route", "/"}}}));
    EXPECT_EQ(unmatched.overall, Code::ok);
    EXPECT_FALSE(unmatched.statuses[0].limit);
    EXPECT_EQ(ask(Query{"other-domain", {kTenantA}, 0, {}}).overall, Code::ok);
}

TEST_F(RequestLimiterTest, AWeightAboveMaxCostIsRefusedAndChargesNothing) {
    RequestClass tenant = gcra_class(1, "tenant", {{"tenant", {}}}, 1, 10);
    tenant.max_cost = 5;
    limiter.apply(1, {tenant}, {});
    auto refused = limiter.decide(query({kTenantA}, 6));
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().code, ErrorCode::invalid);
    EXPECT_NE(refused.error().message.find("request_class \"tenant\".max_cost = 5"), std::string::npos)
        << refused.error().message;
    EXPECT_EQ(ask(query({kTenantA}, 5)).statuses[0].limit->remaining, 5u);
    Query per_descriptor = query({kTenantA});
    per_descriptor.descriptor_hits = {9};
    EXPECT_FALSE(limiter.decide(per_descriptor).ok());
}

TEST_F(RequestLimiterTest, AClassInShadowCountsButNeverRefuses) {
    RequestClass tenant = gcra_class(1, "tenant", {{"tenant", {}}}, 1, 2);
    tenant.shadow = true;
    limiter.apply(1, {tenant}, {});
    EXPECT_EQ(admitted(query({kTenantA}), 5), 5);
    Answer answer = ask(query({kTenantA}));
    EXPECT_TRUE(answer.shadowed);
    EXPECT_EQ(answer.overall, Code::ok);
}

TEST_F(RequestLimiterTest, AFleetClassSpendsItsCreditOnlyWhenEveryLevelAdmits) {
    RequestClass tenant = gcra_class(1, "acme", {{"tenant", std::string("a")}}, 1, 100);
    tenant.fleet = RequestFleet{100, 10, false, 0, "x"};
    RequestClass user = gcra_class(2, "user", {{"tenant", {}}, {"user", {}}}, 1, 1);
    limiter.apply(1, {tenant, user}, {});
    sluice_fleet_credit& credit = limiter.fleet_credits()[1];
    Answer none = ask(query({kTenantA}));
    EXPECT_EQ(none.refusal, Refusal::fleet);
    EXPECT_FALSE(none.retry_after_ns);
    sluice_fleet_grant(&credit, 3);
    EXPECT_EQ(ask(query({kTenantA, kUserA1})).overall, Code::ok);
    EXPECT_EQ(ask(query({kTenantA, kUserA1})).refusal, Refusal::limit) << "the user's level refuses first";
    EXPECT_EQ(sluice_fleet_available(&credit), 2) << "a refused request took no credit";
    EXPECT_EQ(admitted(query({kTenantA}), 5), 2);
    EXPECT_EQ(ask(query({kTenantA})).statuses[0].limit->remaining, 97u) << "fleet refusals charge the class nothing";
}

TEST_F(RequestLimiterTest, AFullTableRefusesNewCountersUntilOldOnesAreIdle) {
    RequestLimiter small{LimiterOptions{2, 1, [this] { return now; }, {}}};
    small.apply(1, {gcra_class(1, "user", {{"user", {}}}, 1, 1)}, {});
    EXPECT_EQ(small.decide(query({{{"user", "1"}}})).value().overall, Code::ok);
    EXPECT_EQ(small.decide(query({{{"user", "2"}}})).value().overall, Code::ok);
    EXPECT_EQ(small.decide(query({{{"user", "3"}}})).value().refusal, Refusal::table_full);
    EXPECT_EQ(small.counters(), 2u);
    now += kSecond;  // both back to a full bucket: idle, so they make room
    EXPECT_EQ(small.decide(query({{{"user", "3"}}})).value().overall, Code::ok);
    now += kSecond;
    EXPECT_EQ(small.sweep(), 1u) << "user 3's counter, idle a second later";
    EXPECT_EQ(small.counters(), 0u);
}

// A full table, none idle: a class open when full admits its new keys
// uncounted, a closed one refuses them; a request that needs a counter of
// both is refused. The gate counts each.
TEST_F(RequestLimiterTest, AFullTableAdmitsAnOpenClassUncountedAndRefusesAClosedOne) {
    RequestLimiter small{LimiterOptions{2, 1, [this] { return now; }, {}}};
    RequestClass open = gcra_class(2, "signed", {{"uid", {}}}, 1, 2);
    open.open_when_table_full = true;
    small.apply(1, {gcra_class(1, "anonymous", {{"user", {}}}, 1, 2), open}, {});
    RequestGate gate(small, {});
    auto decide = [&](std::vector<Descriptor> d) {
        auto answer = gate.decide(Door::envoy, query(std::move(d)));
        EXPECT_TRUE(answer.ok());
        return answer.ok() ? answer.value() : Answer{};
    };
    EXPECT_EQ(decide({{{"user", "1"}}}).overall, Code::ok);
    EXPECT_EQ(decide({{{"user", "2"}}}).overall, Code::ok);  // full; both half spent: none idle
    EXPECT_EQ(decide({{{"user", "3"}}}).refusal, Refusal::table_full);
    for (int i = 0; i < 5; i++) {
        const Answer signed_in = decide({{{"uid", "7"}}});
        EXPECT_EQ(signed_in.overall, Code::ok) << "request " << i;
        EXPECT_TRUE(signed_in.uncounted);
    }
    EXPECT_EQ(decide({{{"uid", "8"}}, {{"user", "3"}}}).refusal, Refusal::table_full) << "needs a closed class's too";
    EXPECT_EQ(small.counters(), 2u);
    EXPECT_EQ(decide({{{"user", "1"}}}).overall, Code::ok) << "a counter already held is charged as ever";
    EXPECT_EQ(decide({{{"user", "1"}}}).overall, Code::over_limit);
    const RequestDomainCounts counts = gate.stats().domains.at("api");
    EXPECT_EQ(counts.table_full, 2u);
    EXPECT_EQ(counts.table_full_open, 5u);
}

// A request that finds the table full looks at a bounded number of counters
// for idle ones, not at all of them (a scan of all cost 1.7 s per 5,000 new
// keys at 200,000); later requests look further on.
TEST_F(RequestLimiterTest, AFullTableCostsANewKeyABoundedLook) {
    constexpr size_t kCounters = 2000;
    RequestLimiter full{LimiterOptions{kCounters, 1, [this] { return now; }, {}}};
    full.apply(1, {gcra_class(1, "user", {{"user", {}}}, 1, 1)}, {});
    for (size_t i = 0; i < kCounters; i++)
        ASSERT_EQ(full.decide(query({{{"user", std::to_string(i)}}})).value().overall, Code::ok);
    now += 10 * kSecond;  // every counter idle
    EXPECT_EQ(full.decide(query({{{"user", "new"}}})).value().overall, Code::ok);
    const size_t after_one = full.counters();
    EXPECT_GE(after_one, kCounters - 200) << "one request looked at no more than about 64 counters";
    EXPECT_LT(after_one, kCounters) << "and reclaimed the idle ones it saw";
    for (size_t i = 0; i < kCounters / 4; i++)
        ASSERT_EQ(full.decide(query({{{"user", "n" + std::to_string(i)}}})).value().overall, Code::ok)
            << "new key " << i << ": the looks go on finding idle counters";
}

TEST_F(RequestLimiterTest, ANewVersionKeepsCountsOfAnUnchangedAlgorithmOnly) {
    limiter.apply(1, {gcra_class(1, "tenant", {{"tenant", {}}}, 1, 3)}, {});
    EXPECT_EQ(admitted(query({kTenantA}), 3), 3);
    limiter.apply(2, {gcra_class(1, "tenant", {{"tenant", {}}}, 1, 4)}, {});
    EXPECT_EQ(admitted(query({kTenantA}), 3), 1) << "a larger burst: one more";
    EXPECT_EQ(ask(query({kTenantA})).policy_version, 2u);
    limiter.apply(3, {window_class(1, "tenant", {{"tenant", {}}}, Algorithm::fixed_window, 2, kSecond)}, {});
    EXPECT_EQ(admitted(query({kTenantA}), 3), 2) << "another algorithm starts fresh";
}

TEST_F(RequestLimiterTest, AnHttpRequestNamesEveryClassItsEntriesComplete) {
    RequestClass global = gcra_class(1, "global", {}, 100, 100);
    RequestClass acme = gcra_class(4, "acme", {{"tenant", std::string("acme")}}, 1, 100);
    limiter.apply(1,
                  {global, gcra_class(2, "tenant", {{"tenant", {}}}, 1, 10),
                   gcra_class(3, "user", {{"tenant", {}}, {"user", {}}}, 1, 2), acme},
                  {});
    auto descriptors = limiter.descriptors_for("api", {{"tenant", "a"}, {"user", "1"}, {"route", "/"}});
    ASSERT_EQ(descriptors.size(), 3u);
    EXPECT_TRUE(descriptors[0].empty());
    EXPECT_EQ(descriptors[1], kTenantA);
    EXPECT_EQ(descriptors[2], kUserA1);
    // tenant=acme is one descriptor, which the more specific acme class answers.
    EXPECT_EQ(limiter.descriptors_for("api", {{"tenant", "acme"}}).size(), 2u);
    EXPECT_EQ(admitted(query(limiter.descriptors_for("api", {{"tenant", "acme"}})), 20), 20);
    EXPECT_TRUE(limiter.descriptors_for("nope", {{"tenant", "a"}}).empty());
}

TEST(HttpFields, RetryAfterRoundsUpAndTheDraftFieldsListEveryLimit) {
    EXPECT_EQ(delay_seconds(0), "0");
    EXPECT_EQ(delay_seconds(1), "1");
    EXPECT_EQ(delay_seconds(kSecond), "1");
    EXPECT_EQ(delay_seconds(kSecond + 1), "2");
    RequestClass user, tenant;
    user.name = "user";
    tenant.name = "tenant";
    Answer answer;
    answer.overall = Code::over_limit;
    answer.retry_after_ns = 2 * kSecond + 1;
    answer.statuses.push_back({Code::over_limit, LimitAnswer{&user, 10, 60 * kSecond, 0, 41 * kSecond + 5, 0}});
    answer.statuses.push_back({Code::ok, LimitAnswer{&tenant, 1000, 60 * kSecond, 977, 3 * kSecond, 0}});
    answer.statuses.push_back({Code::ok, std::nullopt});
    std::vector<HeaderField> expected = {{"Retry-After", "3"},
                                         {"RateLimit-Policy", "\"user\";q=10;w=60, \"tenant\";q=1000;w=60"},
                                         {"RateLimit", "\"user\";r=0;t=42, \"tenant\";r=977;t=3"}};
    EXPECT_EQ(rate_limit_fields(answer), expected);
    answer.retry_after_ns.reset();  // no wait helps: no Retry-After
    EXPECT_EQ(rate_limit_fields(answer).front().name, "RateLimit-Policy");
    answer.overall = Code::ok;
    answer.statuses.clear();
    EXPECT_TRUE(rate_limit_fields(answer).empty());
}

TEST_F(RequestLimiterTest, TheGateHoldsEachDomainToItsCeilingAndCountsPerClass) {
    limiter.apply(1, {gcra_class(1, "tenant", {{"tenant", {}}}, 1000, 1000)}, {});
    RequestGate gate(limiter, GateOptions{16, 10, 3, std::chrono::microseconds(20'000)});
    int allowed = 0;
    for (int i = 0; i < 10; ++i) allowed += gate.decide(Door::http, query({kTenantA})).value().overall == Code::ok;
    EXPECT_EQ(allowed, 3) << "the domain's burst of 3 within a few microseconds";
    GateStats stats = gate.stats();
    EXPECT_EQ(stats.domains["api"].allowed, 3u);
    EXPECT_EQ(stats.domains["api"].ceiling_refused, 7u);
    EXPECT_EQ(stats.domains["api"].classes["tenant"].allowed, 3u);
    EXPECT_EQ(stats.latency_count, 10u);

    RequestGate closed(limiter, GateOptions{0, 0, 0, std::chrono::microseconds(20'000)});
    auto overloaded = closed.decide(Door::envoy, query({kTenantA}));
    ASSERT_FALSE(overloaded.ok());
    EXPECT_TRUE(is_overload(overloaded.error()));
    EXPECT_EQ(closed.stats().overloaded, 1u);
}

TEST_F(RequestLimiterTest, TheGateRanksTheCountersRefusedMost) {
    limiter.apply(1, {gcra_class(1, "user", {{"tenant", {}}, {"user", {}}}, 1, 1)}, {});
    RequestGate gate(limiter, GateOptions{});
    for (int i = 0; i < 20; ++i) (void)gate.decide(Door::envoy, query({kUserA1}));
    (void)gate.decide(Door::envoy, query({kUserA2}));
    (void)gate.decide(Door::envoy, query({kUserA2}));
    std::vector<HotKey> hot = gate.hot_keys(5);
    ASSERT_FALSE(hot.empty());
    EXPECT_EQ(hot[0].class_name, "user");
    EXPECT_EQ(hot[0].value, "tenant=a,user=1");
    EXPECT_EQ(gate.stats().domains["api"].classes["user"].refused, 20u);
}

}  // namespace
}  // namespace sluice::request::request_limiter_test
