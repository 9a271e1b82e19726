// SPDX-License-Identifier: Apache-2.0
// The policy file's request-level tables ([[request_domain]],
// [[request_class]]): what they compile to, their defaults, that every
// refusal says file:line:column and which setting, that two classes that
// could tie are refused, and that the canonical text a version keeps carries
// them through history and rollback.
#include <gmock/gmock.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "compiled_policy.h"
#include "policy_toml.h"
#include "version_store.h"

namespace sluice::test::request_policy_test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Lines 1-2: the packet class every policy needs; request tables start on line 3.
constexpr std::string_view kPacketClass = "[[class]]\nname = \"default\"\n";

Result<LoadedPolicy> load(std::string_view requests, bool fleet_leasing = true) {
    return load_policy_toml(std::string(kPacketClass) + std::string(requests), "p.toml", {},
                            PolicyLoadOptions{.cpus = 4, .fleet_leasing = fleet_leasing});
}

LoadedPolicy load_ok(std::string_view requests) {
    auto loaded = load(requests);
    if (!loaded) {
        ADD_FAILURE() << loaded.error().message;
        return LoadedPolicy{};
    }
    return loaded.value();
}

std::string error_of(std::string_view requests, bool fleet_leasing = true) {
    auto loaded = load(requests, fleet_leasing);
    EXPECT_FALSE(loaded.ok()) << "loaded although it should not";
    return loaded.ok() ? std::string() : loaded.error().message;
}

// A request class "per-user" on lines 3-7 (limit on line 7, its table opening
// at column 9), then `extra` from line 8.
std::string per_user(std::string_view extra = "", std::string_view limit = "{ rate = 10, burst = 20 }",
                     std::string_view descriptor = R"(["tenant", "user"])") {
    return "[[request_class]]\nname = \"per-user\"\ndomain = \"api\"\ndescriptor = " + std::string(descriptor) +
           "\nlimit = " + std::string(limit) + "\n" + std::string(extra);
}

constexpr std::string_view kFull = R"toml(
[[request_domain]]
name = "api"
headers = { tenant = "X-Tenant", user = "X-User", route = "X-Original-URI" }
signed = ["user"]
anonymous = "nobody"
cost_header = "X-Sluice-Cost"

[[request_domain]]
name = "edge.v2"

[[request_class]]
name = "per-user"
domain = "api"
descriptor = ["tenant", "user"]
limit = { algorithm = "gcra", rate = 10, burst = 20 }
cost = 2
max_cost = 5
shadow = true
on_table_full = "open"

[[request_class]]
name = "acme"
domain = "api"
descriptor = ["tenant", "user"]
match = { tenant = "acme" }
limit = { algorithm = "sliding_window", limit = 600, window = "1m" }

[[request_class]]
name = "acme-tenant"
domain = "api"
descriptor = ["tenant"]
match = { tenant = "acme" }
limit = { algorithm = "fixed_window", limit = 100_000, window = "1h" }
fleet = { rate = 1000, burst = 100, on_unavailable = "open", fallback_rate = 300 }

[[request_class]]
name = "logins"
domain = "edge.v2"
descriptor = ["remote_address", "route"]
match = { route = "/login" }
limit = { algorithm = "sliding_log", limit = 5, window = "1m" }

[[request_class]]
name = "default"
domain = "edge.v2"
descriptor = []
limit = { rate = 5000, burst = 10000 }
fleet = { rate = 20000, on_unavailable = "closed" }
)toml";

TEST(RequestPolicy, AFullFileCompilesEveryTable) {
    const LoadedPolicy policy = load_ok(kFull);
    const CompiledPolicy& compiled = policy.compiled;
    ASSERT_EQ(compiled.request_domains.size(), 2u);
    const RequestDomain& api = compiled.request_domains[0];
    EXPECT_EQ(api.name, "api");
    // In key order: a TOML table keeps no other.
    EXPECT_EQ(api.headers, (std::vector<std::pair<std::string, std::string>>{
                               {"route", "X-Original-URI"}, {"tenant", "X-Tenant"}, {"user", "X-User"}}));
    EXPECT_EQ(api.signed_keys, std::vector<std::string>{"user"});
    EXPECT_EQ(api.anonymous, "nobody");
    EXPECT_EQ(api.cost_header, "X-Sluice-Cost");
    const RequestDomain& edge = compiled.request_domains[1];
    EXPECT_EQ(edge.name, "edge.v2");
    EXPECT_TRUE(edge.headers.empty());
    EXPECT_EQ(edge.anonymous, "anonymous");
    EXPECT_EQ(edge.cost_header, "");

    // Ids 1..N in file order; a request class may share a packet class's name.
    ASSERT_EQ(compiled.requests.size(), 5u);
    for (uint32_t i = 0; i < 5; i++) EXPECT_EQ(compiled.requests[i].id, i + 1);
    EXPECT_EQ(policy.class_ids, (std::map<std::string, uint32_t>{{"default", 1}}));

    const RequestClass& user = compiled.requests[0];
    EXPECT_EQ(user.name, "per-user");
    EXPECT_EQ(user.domain, "api");
    ASSERT_EQ(user.keys.size(), 2u);
    EXPECT_EQ(user.keys[0].key, "tenant");
    EXPECT_FALSE(user.keys[0].value);
    EXPECT_EQ(user.keys[1].key, "user");
    EXPECT_EQ(user.limit.algorithm, SLUICE_ALGORITHM_GCRA);
    EXPECT_EQ(user.limit.rate_per_s, 10u);
    EXPECT_EQ(user.limit.burst, 20u);
    EXPECT_EQ(user.limit.gcra.unit, SLUICE_UNIT_PACKETS);
    EXPECT_EQ(user.limit.gcra.interval_ns, 100'000'000u);
    EXPECT_EQ(user.limit.gcra.tolerance_ns, 20 * 100'000'000u);
    EXPECT_EQ(user.limit.window.limit, 0u);
    EXPECT_EQ(user.cost, 2u);
    EXPECT_EQ(user.max_cost, 5u);
    EXPECT_TRUE(user.shadow);
    EXPECT_TRUE(user.open_when_table_full);
    EXPECT_FALSE(user.fleet);

    const RequestClass& acme = compiled.requests[1];
    ASSERT_EQ(acme.keys.size(), 2u);
    EXPECT_EQ(acme.keys[0].value, std::optional<std::string>("acme"));
    EXPECT_FALSE(acme.keys[1].value);
    EXPECT_EQ(acme.limit.algorithm, SLUICE_ALGORITHM_SLIDING_WINDOW);
    EXPECT_EQ(acme.limit.window.algorithm, SLUICE_ALGORITHM_SLIDING_WINDOW);
    EXPECT_EQ(acme.limit.window.limit, 600u);
    EXPECT_EQ(acme.limit.window.window_ns, 60 * SLUICE_NANO);
    EXPECT_EQ(acme.limit.window.index_bits, 64);
    EXPECT_EQ(acme.limit.window.count_bits, 64);
    EXPECT_EQ(acme.limit.rate_per_s, 0u);
    EXPECT_EQ(acme.limit.gcra.interval_ns, 0u);

    const RequestClass& tenant = compiled.requests[2];
    EXPECT_EQ(tenant.limit.algorithm, SLUICE_ALGORITHM_FIXED_WINDOW);
    EXPECT_EQ(tenant.limit.window.limit, 100'000u);
    ASSERT_TRUE(tenant.fleet);
    EXPECT_EQ(tenant.fleet->rate_per_s, 1000u);
    EXPECT_EQ(tenant.fleet->burst, 100u);
    EXPECT_TRUE(tenant.fleet->fail_open);
    EXPECT_EQ(tenant.fleet->fallback_rate_per_s, 300u);
    EXPECT_EQ(tenant.fleet->definition_hash, fleet_definition_hash(1000, 100, SLUICE_UNIT_PACKETS));

    const RequestClass& logins = compiled.requests[3];
    EXPECT_EQ(logins.limit.algorithm, SLUICE_ALGORITHM_SLIDING_LOG);
    EXPECT_EQ(logins.keys[0].key, "remote_address");
    EXPECT_EQ(logins.keys[1].value, std::optional<std::string>("/login"));
    EXPECT_EQ(logins.cost, 1u);
    EXPECT_EQ(logins.max_cost, 1u);

    const RequestClass& whole = compiled.requests[4];
    EXPECT_TRUE(whole.keys.empty());
    ASSERT_TRUE(whole.fleet);  // [] fixes every key it has
    EXPECT_FALSE(whole.fleet->fail_open);
    EXPECT_EQ(whole.fleet->burst, 2000u);  // a tenth of rate
    EXPECT_EQ(whole.fleet->fallback_rate_per_s, 0u);

    CompiledPolicy numbered = compiled;
    numbered.header.version = 1;
    EXPECT_TRUE(validate(numbered).ok()) << validate(numbered).error().message;
}

TEST(RequestPolicy, DefaultsAndNoRequestTablesAtAll) {
    EXPECT_TRUE(load_ok("").compiled.requests.empty());
    EXPECT_TRUE(load_ok("").compiled.request_domains.empty());

    const LoadedPolicy policy = load_ok(per_user());
    ASSERT_EQ(policy.compiled.requests.size(), 1u);
    const RequestClass& cls = policy.compiled.requests[0];
    EXPECT_EQ(cls.id, 1u);
    EXPECT_EQ(cls.limit.algorithm, SLUICE_ALGORITHM_GCRA);  // the default algorithm
    EXPECT_EQ(cls.cost, 1u);
    EXPECT_EQ(cls.max_cost, 1u);
    EXPECT_FALSE(cls.shadow);
    EXPECT_FALSE(cls.open_when_table_full) << "closed, as before on_table_full was a key";
    EXPECT_FALSE(cls.fleet);
    EXPECT_TRUE(policy.compiled.request_domains.empty());  // a class needs no [[request_domain]]

    // max_cost defaults to cost.
    EXPECT_EQ(load_ok(per_user("cost = 3\n")).compiled.requests[0].max_cost, 3u);
    // A domain with only a name.
    const LoadedPolicy domain = load_ok("[[request_domain]]\nname = \"api\"\n");
    ASSERT_EQ(domain.compiled.request_domains.size(), 1u);
    EXPECT_EQ(domain.compiled.request_domains[0].anonymous, "anonymous");
    EXPECT_TRUE(domain.compiled.request_domains[0].signed_keys.empty());
}

struct Refusal {
    std::string text;  // from line 3
    std::string error;
};

TEST(RequestPolicy, EveryRefusalNamesLineColumnAndField) {
    const std::vector<Refusal> refusals = {
        // [[request_domain]]
        {"[[request_domain]]\nheaders = {}\n", "p.toml:3:1: request_domain #1: name is required"},
        {"[[request_domain]]\nname = \"api\"\ncolour = 1\n",
         "p.toml:5:1: request_domain \"api\".colour: unknown key; allowed here: name, headers, signed, anonymous, "
         "cost_header"},
        {"[[request_domain]]\nname = \"my api\"\n",
         "p.toml:4:8: request_domain \"my api\".name: \"my api\" is not a valid domain name: use 1-128 characters of "
         "printable ASCII without spaces or quotes"},
        {"[[request_domain]]\nname = \"" + std::string(129, 'a') + "\"\n",
         "p.toml:4:8: request_domain \"" + std::string(129, 'a') + "\".name: \""},
        {"[[request_domain]]\nname = \"api\"\n[[request_domain]]\nname = \"api\"\n",
         "p.toml:6:8: request_domain \"api\".name: \"api\" is already the name of the request_domain at p.toml:4:8"},
        {"[[request_domain]]\nname = \"api\"\nheaders = { Tenant = \"X-Tenant\" }\n",
         "p.toml:5:13: request_domain \"api\".headers.Tenant: \"Tenant\" is not a valid descriptor key: use 1-63 "
         "characters of a-z, 0-9, _, - and ."},
        {"[[request_domain]]\nname = \"api\"\nheaders = { remote_address = \"X-Forwarded-For\" }\n",
         "p.toml:5:13: request_domain \"api\".headers.remote_address: remote_address is the client's address"},
        {"[[request_domain]]\nname = \"api\"\nheaders = { user = \"X User\" }\n",
         "p.toml:5:20: request_domain \"api\".headers.user: \"X User\" is not an HTTP header name (an HTTP token"},
        {"[[request_domain]]\nname = \"api\"\nheaders = { user = 1 }\n",
         "p.toml:5:20: request_domain \"api\".headers.user: expected a header name (a string), got an integer (1)"},
        {"[[request_domain]]\nname = \"api\"\nheaders = { user = \"X-User\" }\nsigned = [\"tenant\"]\n",
         "p.toml:6:11: request_domain \"api\".signed[0]: \"tenant\" is not a key of headers"},
        {"[[request_domain]]\nname = \"api\"\nheaders = { user = \"X-User\" }\nsigned = [\"user\", \"user\"]\n",
         "p.toml:6:19: request_domain \"api\".signed[1]: \"user\" is listed twice"},
        {"[[request_domain]]\nname = \"api\"\nanonymous = \"\"\n",
         "p.toml:5:13: request_domain \"api\".anonymous: \"\" is not a descriptor value: a value is 1..256 bytes "
         "without control characters"},
        {"[[request_domain]]\nname = \"api\"\ncost_header = \"X:Cost\"\n",
         "p.toml:5:15: request_domain \"api\".cost_header: \"X:Cost\" is not an HTTP header name"},
        // [[request_class]]: names and keys.
        {"[[request_class]]\ndomain = \"api\"\n", "p.toml:3:1: request_class #1: name is required"},
        {per_user("colour = 1\n"),
         "p.toml:8:1: request_class \"per-user\".colour: unknown key; allowed here: name, domain, descriptor, match, "
         "limit, cost, max_cost, shadow, on_table_full, fleet"},
        {"[[request_class]]\nname = \"Per User\"\n",
         "p.toml:4:8: request_class \"Per User\".name: \"Per User\" is not a valid class name: use 1-63 characters "
         "of a-z, 0-9, _ and -, starting with a letter"},
        {per_user() + per_user(),
         "p.toml:9:8: request_class \"per-user\".name: \"per-user\" is already the name of the request_class at "
         "p.toml:4:8; request class names must be unique"},
        {"[[request_class]]\nname = \"a\"\n", "p.toml:3:1: request_class \"a\": domain is required"},
        {"[[request_class]]\nname = \"a\"\ndomain = \"my api\"\n",
         "p.toml:5:10: request_class \"a\".domain: \"my api\" is not a valid domain name"},
        {"[[request_class]]\nname = \"a\"\ndomain = \"api\"\nlimit = { rate = 1, burst = 1 }\n",
         "p.toml:3:1: request_class \"a\": descriptor is required"},
        {per_user("", "{ rate = 10, burst = 20 }", "\"user\""),
         "p.toml:6:14: request_class \"per-user\".descriptor: expected an array of descriptor keys, got a string"},
        {per_user("", "{ rate = 10, burst = 20 }", R"(["a", "b", "c", "d", "e", "f", "g", "h", "i"])"),
         "p.toml:6:55: request_class \"per-user\".descriptor[8]: a descriptor has at most 8 keys"},
        {per_user("", "{ rate = 10, burst = 20 }", R"(["user", "User"])"),
         "p.toml:6:23: request_class \"per-user\".descriptor[1]: \"User\" is not a valid descriptor key"},
        {per_user("", "{ rate = 10, burst = 20 }", R"(["user", "user"])"),
         "p.toml:6:23: request_class \"per-user\".descriptor[1]: \"user\" is listed twice (also descriptor[0])"},
        {per_user("match = { route = \"/\" }\n"),
         "p.toml:8:11: request_class \"per-user\".match.route: \"route\" is not in descriptor [tenant, user]: a fixed "
         "value is for one of the class's keys"},
        {per_user("match = { user = \"\" }\n"),
         "p.toml:8:18: request_class \"per-user\".match.user: \"\" is not a descriptor value: a value is 1..256 bytes "
         "without control characters"},
        {per_user("match = { user = \"a\\tb\" }\n"),
         "p.toml:8:18: request_class \"per-user\".match.user: \"a\tb\" is not a descriptor value"},
        {per_user("match = { user = \"" + std::string(257, 'x') + "\" }\n"),
         "p.toml:8:18: request_class \"per-user\".match.user: \"" + std::string(257, 'x') + "\" is not"},
        {per_user("match = { user = 7 }\n"),
         "p.toml:8:18: request_class \"per-user\".match.user: expected a fixed value (a string), got an integer (7)"},
        // Limits.
        {"[[request_class]]\nname = \"a\"\ndomain = \"api\"\ndescriptor = []\n",
         "p.toml:3:1: request_class \"a\": limit is required"},
        {per_user("", "{ rate = 10 }"), "p.toml:7:9: request_class \"per-user\".limit: burst is required (requests)"},
        {per_user("", "{ burst = 10 }"),
         "p.toml:7:9: request_class \"per-user\".limit: rate is required (requests per second)"},
        {per_user("", "{ rate = 0, burst = 10 }"),
         "p.toml:7:18: request_class \"per-user\".limit.rate: expected an integer in 1..100000000000, got 0"},
        {per_user("", "{ rate = 10, burst = 10, unit = \"bytes\" }"),
         "p.toml:7:34: request_class \"per-user\".limit.unit: unknown key; allowed here: algorithm, rate, burst, "
         "limit, window"},
        {per_user("", "{ rate = 10, burst = 10, window = \"1s\" }"),
         "p.toml:7:43: request_class \"per-user\".limit.window: needs algorithm = \"fixed_window\", "
         "\"sliding_window\" or \"sliding_log\"; gcra (the default) takes rate and burst"},
        {per_user("", "{ algorithm = \"fixed_window\", limit = 10, window = \"1s\", burst = 5 }"),
         "p.toml:7:74: request_class \"per-user\".limit.burst: belongs to algorithm = \"gcra\" (the token bucket); "
         "algorithm = \"fixed_window\" counts limit requests per window"},
        {per_user("", "{ algorithm = \"fixed_window\", window = \"1s\" }"),
         "p.toml:7:9: request_class \"per-user\".limit: limit is required for algorithm = \"fixed_window\""},
        {per_user("", "{ algorithm = \"sliding_window\", limit = 10 }"),
         "p.toml:7:9: request_class \"per-user\".limit: window is required for algorithm = \"sliding_window\""},
        {per_user("", "{ algorithm = \"fixed_window\", limit = 10, window = \"2d\" }"),
         "p.toml:7:60: request_class \"per-user\".limit.window: \"2d\" is outside 1ms..1d"},
        {per_user("", "{ algorithm = \"leaky\", limit = 10, window = \"1s\" }"),
         "p.toml:7:23: request_class \"per-user\".limit.algorithm: expected one of \"gcra\", \"fixed_window\""},
        {per_user("", "{ algorithm = \"sliding_log\", limit = 33, window = \"1s\" }"),
         "p.toml:7:46: request_class \"per-user\".limit.limit: limit 33 is more than a sliding_log holds"},
        // GCRA's burst must drain within the debt a counter can carry.
        {per_user("", "{ rate = 1, burst = 5000 }"),
         "p.toml:7:29: request_class \"per-user\".limit.burst: burst 5000 packets at 1/s takes 5000 s"},
        // Costs.
        {per_user("cost = 0\n"),
         "p.toml:8:8: request_class \"per-user\".cost: expected an integer of at least 1, got 0"},
        {per_user("cost = 3\nmax_cost = 2\n"), "p.toml:9:12: request_class \"per-user\".max_cost: 2 is below cost 3"},
        {per_user("max_cost = 21\n"),
         "p.toml:8:12: request_class \"per-user\".max_cost: 21 exceeds the limit's burst 20 (request_class "
         "\"per-user\".limit.burst, p.toml:7:30): a request that costs more than the limit holds could never pass"},
        {per_user("cost = 30\n"),
         "p.toml:8:8: request_class \"per-user\".cost: 30 exceeds the limit's burst 20 (request_class "
         "\"per-user\".limit.burst, p.toml:7:30): a request that costs more than the limit holds could never pass "
         "(max_cost defaults to cost)"},
        {per_user("max_cost = 101\n", "{ algorithm = \"fixed_window\", limit = 100, window = \"1m\" }"),
         "p.toml:8:12: request_class \"per-user\".max_cost: 101 exceeds the limit's limit 100 per window "
         "(request_class \"per-user\".limit.limit, p.toml:7:47)"},
        {per_user("shadow = \"yes\"\n"), "p.toml:8:10: request_class \"per-user\".shadow: expected true or false"},
        {per_user("on_table_full = \"evict\"\n"),
         "p.toml:8:17: request_class \"per-user\".on_table_full: expected one of \"closed\", \"open\""},
    };
    for (const Refusal& refusal : refusals) {
        SCOPED_TRACE(refusal.text);
        EXPECT_THAT(error_of(refusal.text), StartsWith(refusal.error));
    }
}

TEST(RequestPolicy, TheTopLevelKeysAreArraysOfTables) {
    // Before any [[class]]: after one, a key belongs to that class.
    const auto error = [](std::string_view text) {
        auto loaded =
            load_policy_toml(std::string(text) + std::string(kPacketClass), "p.toml", {}, PolicyLoadOptions{4});
        EXPECT_FALSE(loaded.ok());
        return loaded.ok() ? std::string() : loaded.error().message;
    };
    EXPECT_THAT(error("request_class = 3\n"),
                StartsWith("p.toml:1:17: request_class: expected an array of tables ([[request_class]]), got an "
                           "integer (3)"));
    EXPECT_THAT(error("request_domain = [1]\n"),
                StartsWith("p.toml:1:19: request_domain #1: expected a table, got an integer (1)"));
    EXPECT_THAT(error("request_classes = []\n"), StartsWith("p.toml:1:1: request_classes: unknown key; allowed here: "
                                                            "version, defaults, global, class, request_domain, "
                                                            "request_class"));
}

TEST(RequestPolicy, ASlidingLogCountsEachRequestOnce) {
    constexpr std::string_view kLog = R"({ algorithm = "sliding_log", limit = 10, window = "1m" })";
    EXPECT_EQ(load_ok(per_user("cost = 1\nmax_cost = 1\n", kLog)).compiled.requests[0].max_cost, 1u);
    EXPECT_THAT(error_of(per_user("cost = 2\n", kLog)),
                StartsWith("p.toml:8:8: request_class \"per-user\".cost: must be 1 with a sliding_log limit: the log "
                           "keeps one time per admitted request"));
    EXPECT_THAT(error_of(per_user("max_cost = 2\n", kLog)),
                StartsWith("p.toml:8:12: request_class \"per-user\".max_cost: must be 1 with a sliding_log limit"));
    // The other window algorithms weigh requests.
    const LoadedPolicy window = load_ok(
        per_user("cost = 2\nmax_cost = 10\n", R"({ algorithm = "sliding_window", limit = 10, window = "1m" })"));
    EXPECT_EQ(window.compiled.requests[0].cost, 2u);
    EXPECT_EQ(window.compiled.requests[0].max_cost, 10u);
}

TEST(RequestPolicy, AFleetQuotaNeedsEveryKeyFixed) {
    constexpr std::string_view kFleet = "fleet = { rate = 100, burst = 50, on_unavailable = \"closed\" }\n";
    EXPECT_THAT(error_of(per_user("match = { tenant = \"acme\" }\n" + std::string(kFleet))),
                StartsWith("p.toml:9:9: request_class \"per-user\".fleet: needs every descriptor key fixed in match "
                           "(the fleet's quota is one bucket for the whole class), and \"user\" has no fixed value"));
    const LoadedPolicy fixed =
        load_ok(per_user("match = { tenant = \"acme\", user = \"bob\" }\n" + std::string(kFleet)));
    ASSERT_TRUE(fixed.compiled.requests[0].fleet);
    EXPECT_EQ(fixed.compiled.requests[0].fleet->burst, 50u);

    const std::string both = "match = { tenant = \"acme\", user = \"bob\" }\n";
    EXPECT_THAT(error_of(per_user(both + kFleet.data()), /*fleet_leasing=*/false),
                StartsWith("p.toml:9:9: request_class \"per-user\".fleet: this daemon has no [fleet] servers"));
    EXPECT_THAT(error_of(per_user(both + "fleet = { rate = 100, on_unavailable = \"closed\", unit = \"bytes\" }\n")),
                StartsWith("p.toml:9:50: request_class \"per-user\".fleet.unit: unknown key; allowed here: rate, "
                           "burst, on_unavailable, fallback_rate"));
    EXPECT_THAT(error_of(per_user(both + "fleet = { rate = 100 }\n")),
                StartsWith("p.toml:9:9: request_class \"per-user\".fleet: on_unavailable is required"));
    EXPECT_THAT(error_of(per_user(both + "fleet = { rate = 100, on_unavailable = \"open\" }\n")),
                StartsWith("p.toml:9:9: request_class \"per-user\".fleet: fallback_rate is required with "
                           "on_unavailable = \"open\""));
    EXPECT_THAT(error_of(per_user(both + "fleet = { rate = 100, on_unavailable = \"closed\", fallback_rate = 5 }\n")),
                StartsWith("p.toml:9:66: request_class \"per-user\".fleet.fallback_rate: applies only to "
                           "on_unavailable = \"open\""));
    // Credit is leased in at most a burst.
    EXPECT_THAT(
        error_of(per_user(both + "max_cost = 10\nfleet = { rate = 100, burst = 5, on_unavailable = \"closed\" }\n")),
        StartsWith("p.toml:10:31: request_class \"per-user\".fleet.burst: burst 5 is below max_cost 10"));
    EXPECT_THAT(error_of(per_user(both + "max_cost = 10\nfleet = { rate = 10, on_unavailable = \"closed\" }\n")),
                StartsWith("p.toml:10:9: request_class \"per-user\".fleet: burst 1 is below max_cost 10"));
}

// Class "b" from line 9, after "a" on lines 3-8; both in domain "api".
std::string two_classes(std::string_view a_descriptor, std::string_view a_match, std::string_view b_descriptor,
                        std::string_view b_match, std::string_view b_domain = "api") {
    return "[[request_class]]\nname = \"a\"\ndomain = \"api\"\ndescriptor = " + std::string(a_descriptor) +
           "\nmatch = " + std::string(a_match) + "\nlimit = { rate = 1, burst = 1 }\n" +
           "[[request_class]]\nname = \"b\"\ndomain = \"" + std::string(b_domain) +
           "\"\ndescriptor = " + std::string(b_descriptor) + "\nmatch = " + std::string(b_match) +
           "\nlimit = { rate = 1, burst = 1 }\n";
}

TEST(RequestPolicy, TwoClassesThatCouldTieAreRefused) {
    constexpr std::string_view kKeys = R"(["tenant", "user"])";
    // The same fixed values.
    EXPECT_THAT(error_of(two_classes(kKeys, R"({ tenant = "acme" })", kKeys, R"({ tenant = "acme" })")),
                StartsWith("p.toml:13:9: request_class \"b\".match: could tie with request_class \"a\" "
                           "(request_class \"a\".match, p.toml:7:9): both count domain \"api\" by descriptor "
                           "[tenant, user], each with 1 fixed value, and fix no key to different values"));
    // One fixes tenant, the other user: tenant=acme, user=bob matches both.
    EXPECT_THAT(error_of(two_classes(kKeys, R"({ tenant = "acme" })", kKeys, R"({ user = "bob" })")),
                StartsWith("p.toml:13:9: request_class \"b\".match: could tie with request_class \"a\""));
    // Nothing fixed at all: the same class twice; pointed at by descriptor.
    EXPECT_THAT(error_of("[[request_class]]\nname = \"a\"\ndomain = \"api\"\ndescriptor = []\nlimit = { rate = 1, "
                         "burst = 1 }\n[[request_class]]\nname = \"b\"\ndomain = \"api\"\ndescriptor = []\nlimit = { "
                         "rate = 1, burst = 1 }\n"),
                StartsWith("p.toml:11:14: request_class \"b\".descriptor: could tie with request_class \"a\" "
                           "(request_class \"a\".descriptor, p.toml:6:14): both count domain \"api\" by descriptor [], "
                           "each with 0 fixed values"));

    // No tie: different values on a key both fix; more fixed values on one;
    // another domain; the same keys in another order.
    const LoadedPolicy apart = load_ok(two_classes(kKeys, R"({ tenant = "acme" })", kKeys, R"({ tenant = "globex" })"));
    EXPECT_EQ(apart.compiled.requests.size(), 2u);
    load_ok(two_classes(kKeys, R"({ tenant = "acme" })", kKeys, R"({ tenant = "acme", user = "bob" })"));
    load_ok(two_classes(kKeys, R"({ tenant = "acme" })", kKeys, R"({ tenant = "acme" })", "other"));
    load_ok(two_classes(kKeys, R"({ tenant = "acme" })", R"(["user", "tenant"])", R"({ tenant = "acme" })"));
    load_ok(two_classes(kKeys, R"({ tenant = "acme" })", R"(["tenant"])", R"({ tenant = "acme" })"));
}

TEST(RequestPolicy, AtMost255RequestClasses) {
    std::string text;
    for (int i = 0; i < 256; i++)
        text += "[[request_class]]\nname = \"c" + std::to_string(i) + "\"\ndomain = \"api\"\ndescriptor = [\"k\"]\n" +
                "match = { k = \"" + std::to_string(i) + "\" }\nlimit = { rate = 1, burst = 1 }\n";
    EXPECT_THAT(error_of(text), HasSubstr("request_class #256: a policy holds at most 255 [[request_class]] tables "
                                          "(ids 1..255)"));
    const std::string fits = text.substr(0, text.rfind("[[request_class]]"));
    const LoadedPolicy policy = load_ok(fits);
    ASSERT_EQ(policy.compiled.requests.size(), 255u);
    EXPECT_EQ(policy.compiled.requests.back().id, 255u);
}

// validate() refuses what the loader never produces.
TEST(RequestPolicy, ValidateChecksWhatTheLimiterReliesOn) {
    const LoadedPolicy loaded = load_ok(kFull);
    CompiledPolicy good = loaded.compiled;
    good.header.version = 1;
    ASSERT_TRUE(validate(good).ok());
    const auto refused = [&](auto change, std::string_view what) {
        CompiledPolicy policy = good;
        change(policy);
        const Status status = validate(policy);
        ASSERT_FALSE(status.ok()) << what;
        EXPECT_THAT(status.error().message, HasSubstr(what));
    };
    refused([](CompiledPolicy& p) { p.requests[1].id = 1; }, "id used twice");
    refused([](CompiledPolicy& p) { p.requests[0].id = 0; }, "id must be within 1..255");
    refused([](CompiledPolicy& p) { p.requests[1].name = "per-user"; }, "name used twice");
    refused([](CompiledPolicy& p) { p.requests[0].name = "Per"; }, "not a valid class name");
    refused([](CompiledPolicy& p) { p.requests[0].keys.push_back({"tenant", std::nullopt}); }, "given twice");
    refused([](CompiledPolicy& p) { p.requests[0].max_cost = 21; }, "max_cost 21 exceeds what its limit holds (20)");
    refused([](CompiledPolicy& p) { p.requests[0].cost = 6; }, "1 <= cost <= max_cost");
    refused([](CompiledPolicy& p) { p.requests[3].max_cost = 2; }, "sliding_log counts admissions");
    refused([](CompiledPolicy& p) { p.requests[2].keys[0].value.reset(); }, "key tenant has no fixed value");
    refused([](CompiledPolicy& p) { p.requests[2].fleet->definition_hash = "x"; }, "definition_hash");
    refused([](CompiledPolicy& p) { p.requests[1].keys[0].value.reset(); },
            "could tie with request class \"per-user\"");
    refused([](CompiledPolicy& p) { p.requests[0].limit.window.limit = 5; }, "a gcra limit has a window limit set");
    refused([](CompiledPolicy& p) { p.requests[1].limit.window.count_bits = 10; }, "kept in full");
    refused([](CompiledPolicy& p) { p.request_domains[1].name = "api"; }, "request domain \"api\" given twice");
    refused(
        [](CompiledPolicy& p) {
            p.request_domains[0].headers.push_back({"remote_address", "X-Ip"});
        },
        "invalid or remote_address");
    refused([](CompiledPolicy& p) { p.request_domains[0].signed_keys.push_back("nope"); }, "has no header");
    refused([](CompiledPolicy& p) { p.request_domains[0].cost_header = "X Cost"; }, "not an HTTP token");
}

// ---- versions --------------------------------------------------------------------------

const std::string kWithRequests = std::string(kPacketClass) + std::string(kFull);

TEST(RequestPolicy, TheCanonicalTextKeepsTheRequestTables) {
    auto canonical = canonical_policy_text(kWithRequests, "p.toml");
    ASSERT_TRUE(canonical.ok()) << canonical.error().message;
    EXPECT_THAT(canonical.value(), HasSubstr("[[request_domain]]"));
    EXPECT_THAT(canonical.value(), HasSubstr("[[request_class]]"));
    EXPECT_THAT(canonical.value(), HasSubstr("[request_class.fleet]"));

    // What a version keeps loads back to the same request classes and domains.
    auto original = load_policy_toml(kWithRequests, "p.toml", {}, PolicyLoadOptions{4});
    auto reloaded = load_policy_toml(canonical.value(), "canonical", {}, PolicyLoadOptions{4});
    ASSERT_TRUE(original.ok() && reloaded.ok()) << (reloaded.ok() ? "" : reloaded.error().message);
    const CompiledPolicy& a = original.value().compiled;
    const CompiledPolicy& b = reloaded.value().compiled;
    ASSERT_EQ(a.request_domains.size(), b.request_domains.size());
    for (size_t i = 0; i < a.request_domains.size(); i++) {
        EXPECT_EQ(a.request_domains[i].name, b.request_domains[i].name);
        EXPECT_EQ(a.request_domains[i].headers, b.request_domains[i].headers);
        EXPECT_EQ(a.request_domains[i].signed_keys, b.request_domains[i].signed_keys);
        EXPECT_EQ(a.request_domains[i].anonymous, b.request_domains[i].anonymous);
        EXPECT_EQ(a.request_domains[i].cost_header, b.request_domains[i].cost_header);
    }
    ASSERT_EQ(a.requests.size(), b.requests.size());
    for (size_t i = 0; i < a.requests.size(); i++) {
        const RequestClass& x = a.requests[i];
        const RequestClass& y = b.requests[i];
        SCOPED_TRACE(x.name);
        EXPECT_EQ(x.id, y.id);
        EXPECT_EQ(x.name, y.name);
        EXPECT_EQ(x.domain, y.domain);
        ASSERT_EQ(x.keys.size(), y.keys.size());
        for (size_t k = 0; k < x.keys.size(); k++) {
            EXPECT_EQ(x.keys[k].key, y.keys[k].key);
            EXPECT_EQ(x.keys[k].value, y.keys[k].value);
        }
        EXPECT_EQ(x.limit.algorithm, y.limit.algorithm);
        EXPECT_EQ(0, std::memcmp(&x.limit.gcra, &y.limit.gcra, sizeof(x.limit.gcra)));
        EXPECT_EQ(0, std::memcmp(&x.limit.window, &y.limit.window, sizeof(x.limit.window)));
        EXPECT_EQ(x.limit.rate_per_s, y.limit.rate_per_s);
        EXPECT_EQ(x.limit.burst, y.limit.burst);
        EXPECT_EQ(x.cost, y.cost);
        EXPECT_EQ(x.max_cost, y.max_cost);
        EXPECT_EQ(x.shadow, y.shadow);
        EXPECT_EQ(x.open_when_table_full, y.open_when_table_full);
        ASSERT_EQ(x.fleet.has_value(), y.fleet.has_value());
        if (x.fleet) {
            EXPECT_EQ(x.fleet->rate_per_s, y.fleet->rate_per_s);
            EXPECT_EQ(x.fleet->burst, y.fleet->burst);
            EXPECT_EQ(x.fleet->fail_open, y.fleet->fail_open);
            EXPECT_EQ(x.fleet->fallback_rate_per_s, y.fleet->fallback_rate_per_s);
            EXPECT_EQ(x.fleet->definition_hash, y.fleet->definition_hash);
        }
    }

    // A change to a request class alone is a different version.
    std::string faster = kWithRequests;
    faster.replace(faster.find("rate = 10, burst = 20"), 21, "rate = 11, burst = 20");
    auto changed = canonical_policy_text(faster, "p.toml");
    ASSERT_TRUE(changed.ok());
    EXPECT_NE(sha256_hex(canonical.value()), sha256_hex(changed.value()));
}

class RequestVersionTest : public ::testing::Test {
  protected:
    void SetUp() override {
        char pattern[] = "/tmp/sluice-request-versions-XXXXXX";
        ASSERT_NE(mkdtemp(pattern), nullptr);
        dir_ = pattern;
    }
    void TearDown() override {
        std::error_code ignored;
        std::filesystem::remove_all(dir_, ignored);
    }
    std::string dir_;
};

TEST_F(RequestVersionTest, HistoryDiffAndRollbackCarryTheRequestTables) {
    auto opened = VersionStore::open(dir_);
    ASSERT_TRUE(opened.ok()) << opened.error().message;
    VersionStore store = std::move(opened.value());
    const PolicyLoadOptions options{4};
    const auto push = [&](std::string_view text) {
        auto prepared = store.prepare(text, "p.toml", std::nullopt, "push", options);
        EXPECT_TRUE(prepared.ok()) << prepared.error().message;
        if (!prepared) return PolicyVersion{};
        EXPECT_TRUE(store.commit(prepared.value().version).ok());
        return prepared.value().version;
    };
    const PolicyVersion with = push(kWithRequests);
    const PolicyVersion without = push(kPacketClass);
    EXPECT_NE(with.sha256, without.sha256);
    const std::string diff = diff_policies(with, without);
    EXPECT_THAT(diff, HasSubstr("-[[request_class]]"));
    EXPECT_THAT(diff, HasSubstr("-name = \"per-user\""));

    // Reopened from disk, then rolled back: the request classes come back.
    auto reopened = VersionStore::open(dir_);
    ASSERT_TRUE(reopened.ok());
    auto rollback = reopened.value().prepare_rollback(with.version, options);
    ASSERT_TRUE(rollback.ok()) << rollback.error().message;
    const CompiledPolicy& compiled = rollback.value().loaded.compiled;
    ASSERT_EQ(compiled.requests.size(), 5u);
    EXPECT_EQ(compiled.requests[0].name, "per-user");
    EXPECT_EQ(compiled.requests[0].max_cost, 5u);
    ASSERT_EQ(compiled.request_domains.size(), 2u);
    EXPECT_EQ(compiled.request_domains[0].signed_keys, std::vector<std::string>{"user"});
    EXPECT_EQ(rollback.value().version.sha256, with.sha256);
}

}  // namespace
}  // namespace sluice::test::request_policy_test
