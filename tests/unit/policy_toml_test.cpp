// SPDX-License-Identifier: Apache-2.0
// The policy file: what it compiles to, how class ids stay stable across
// versions, and that every refusal says file:line:column and which setting.
#include <gmock/gmock.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <tuple>

#include "policy_toml.h"
#include "rate_limits.h"
#include "version_store.h"

namespace sluice::test::policy_toml_test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

using Ids = std::map<std::string, uint32_t>;

Result<LoadedPolicy> load(std::string_view text, const Ids& previous = {}, uint32_t cpus = 4) {
    return load_policy_toml(text, "p.toml", previous, PolicyLoadOptions{cpus});
}

LoadedPolicy load_ok(std::string_view text, const Ids& previous = {}, uint32_t cpus = 4) {
    auto loaded = load(text, previous, cpus);
    if (!loaded) {
        ADD_FAILURE() << loaded.error().message;
        return LoadedPolicy{};
    }
    return loaded.value();
}

std::string error_of(std::string_view text, const Ids& previous = {}, uint32_t cpus = 4) {
    auto loaded = load(text, previous, cpus);
    EXPECT_FALSE(loaded.ok()) << "loaded although it should not";
    return loaded.ok() ? std::string() : loaded.error().message;
}

const sluice_class_entry& entry(const LoadedPolicy& policy, const std::string& name) {
    static const sluice_class_entry missing{};
    const auto id = policy.class_ids.find(name);
    if (id == policy.class_ids.end()) {
        ADD_FAILURE() << "no class " << name;
        return missing;
    }
    const sluice_class_entry* found = policy.compiled.find_class(id->second);
    EXPECT_NE(found, nullptr);
    return found ? *found : missing;
}

// A policy with `n` classes c0..c(n-1) and c0 as the default.
std::string many_classes(size_t n) {
    std::string text = "[defaults]\nclass = \"c0\"\n";
    for (size_t i = 0; i < n; i++) text += "[[class]]\nname = \"c" + std::to_string(i) + "\"\n";
    return text;
}

// One class matching `n` IPv4 addresses, one per line from line 4.
std::string many_prefixes(size_t n) {
    std::string text = "[[class]]\nname = \"default\"\nmatch = [\n";
    for (size_t i = 0; i < n; i++)
        text += "\"10." + std::to_string(i / 65536) + "." + std::to_string(i / 256 % 256) + "." +
                std::to_string(i % 256) + "\",\n";
    return text + "]\n";
}

constexpr std::string_view kMinimal = R"toml([[class]]
name = "default"
)toml";

TEST(PolicyToml, TheExampleFileLoads) {
    for (uint32_t cpus : {1u, 4u, 64u, 256u}) {
        auto loaded = load_policy_file(SLUICE_EXAMPLES_DIR "/policy.toml", {}, PolicyLoadOptions{cpus});
        ASSERT_TRUE(loaded.ok()) << "cpus " << cpus << ": " << loaded.error().message;
        const LoadedPolicy& policy = loaded.value();
        EXPECT_EQ(policy.version, 0u);  // the example leaves numbering to the daemon
        CompiledPolicy numbered = policy.compiled;
        numbered.header.version = 1;
        EXPECT_TRUE(validate(numbered).ok());
        EXPECT_EQ(policy.class_ids, (Ids{{"default", 1},
                                         {"web", 2},
                                         {"partner", 3},
                                         {"monitoring", 4},
                                         {"blocked", 5},
                                         {"admin", 6},
                                         {"mail", 7}}));
        EXPECT_EQ(policy.compiled.header.default_class_id, 1u);
        EXPECT_TRUE(policy.compiled.header.global.enabled);
        EXPECT_EQ(policy.compiled.prefixes.size(), 10u);
        EXPECT_EQ(entry(policy, "web").aggregate.unit, SLUICE_UNIT_BYTES);
        EXPECT_EQ(entry(policy, "partner").prefix_v4, 24);
        EXPECT_EQ(entry(policy, "partner").on_table_full, SLUICE_TABLE_FULL_CLOSED);
        EXPECT_TRUE(entry(policy, "default").new_sources.enabled);
        EXPECT_EQ(entry(policy, "monitoring").action, SLUICE_ACTION_PASS);
        EXPECT_EQ(entry(policy, "blocked").action, SLUICE_ACTION_DROP);
        const sluice_window_limit& admin = entry(policy, "admin").aggregate_window;
        EXPECT_EQ(admin.algorithm, SLUICE_ALGORITHM_SLIDING_LOG);
        EXPECT_EQ(admin.limit, 10u);
        EXPECT_EQ(admin.window_ns, 60 * SLUICE_NANO);
        EXPECT_EQ(entry(policy, "admin").aggregate.unit, SLUICE_UNIT_TCP_SYN);
        const sluice_source_limit& mail = entry(policy, "mail").per_source;
        EXPECT_EQ(mail.window.algorithm, SLUICE_ALGORITHM_SLIDING_WINDOW);
        EXPECT_EQ(mail.window.limit, 10u);
        EXPECT_EQ(mail.window.window_ns, 60 * SLUICE_NANO);
        EXPECT_EQ(mail.current.unit, SLUICE_UNIT_TCP_SYN);

        // The request-level tables at its end.
        ASSERT_EQ(policy.compiled.request_domains.size(), 1u);
        const RequestDomain& api = policy.compiled.request_domains[0];
        EXPECT_EQ(api.name, "api");
        EXPECT_EQ(api.headers.size(), 3u);
        EXPECT_EQ(api.signed_keys, std::vector<std::string>{"user"});
        EXPECT_EQ(api.cost_header, "X-Sluice-Cost");
        const std::vector<RequestClass>& requests = policy.compiled.requests;
        ASSERT_EQ(requests.size(), 3u);
        EXPECT_EQ(requests[0].name, "per-user");
        EXPECT_EQ(requests[0].id, 1u);
        EXPECT_EQ(requests[0].limit.algorithm, SLUICE_ALGORITHM_GCRA);
        EXPECT_EQ(requests[0].limit.burst, 20u);
        EXPECT_EQ(requests[0].max_cost, 5u);
        EXPECT_EQ(requests[1].name, "acme-users");
        EXPECT_EQ(requests[1].keys[0].value, std::optional<std::string>("acme"));
        EXPECT_EQ(requests[1].limit.window.algorithm, SLUICE_ALGORITHM_SLIDING_WINDOW);
        EXPECT_EQ(requests[2].name, "logins");
        EXPECT_EQ(requests[2].limit.window.algorithm, SLUICE_ALGORITHM_SLIDING_LOG);
        EXPECT_TRUE(requests[2].shadow);
    }
}

// The example's last block, a request class with a fleet quota, is commented
// out (it needs [fleet]); uncommented, it loads.
TEST(PolicyToml, TheExamplesCommentedFleetRequestClassLoads) {
    std::ifstream file(SLUICE_EXAMPLES_DIR "/policy.toml");
    ASSERT_TRUE(file);
    std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    const size_t block = text.rfind("# [[request_class]]");
    ASSERT_NE(block, std::string::npos);
    std::string uncommented;
    for (size_t at = block; at < text.size();) {
        const size_t end = std::min(text.find('\n', at), text.size());
        std::string_view line(text.data() + at, end - at);
        if (line.starts_with("# ")) line.remove_prefix(2);
        uncommented += std::string(line) + "\n";
        at = end + 1;
    }
    auto loaded = load(text.substr(0, block) + uncommented);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    const std::vector<RequestClass>& requests = loaded.value().compiled.requests;
    ASSERT_EQ(requests.size(), 4u);
    EXPECT_EQ(requests[3].name, "globex");
    ASSERT_TRUE(requests[3].fleet);
    EXPECT_EQ(requests[3].fleet->fallback_rate_per_s, 300u);
}

TEST(PolicyToml, AMinimalPolicyGetsEveryDefault) {
    const LoadedPolicy policy = load_ok(kMinimal);
    EXPECT_EQ(policy.version, 0u);
    const sluice_policy_header& h = policy.compiled.header;
    EXPECT_EQ(h.version, 0u);  // the daemon numbers it
    EXPECT_EQ(h.default_class_id, 1u);
    EXPECT_FALSE(h.global.enabled);
    EXPECT_EQ(h.non_ip_verdict, SLUICE_VERDICT_PASS);
    EXPECT_EQ(h.malformed_verdict, SLUICE_VERDICT_DROP);
    ASSERT_EQ(policy.compiled.classes.size(), 1u);
    const sluice_class_entry& cls = policy.compiled.classes[0];
    EXPECT_EQ(cls.class_id, 1u);
    EXPECT_EQ(cls.action, SLUICE_ACTION_LIMIT);
    EXPECT_EQ(cls.on_table_full, SLUICE_TABLE_FULL_EVICT);
    EXPECT_EQ(cls.prefix_v4, 32);
    EXPECT_EQ(cls.prefix_v6, 64);
    EXPECT_FALSE(cls.per_source.enabled);
    EXPECT_FALSE(cls.aggregate.enabled);
    EXPECT_TRUE(policy.compiled.prefixes.empty());
}

TEST(PolicyToml, DefaultsApplyToEveryClass) {
    const LoadedPolicy policy = load_ok(R"toml(version = 3
[defaults]
unit = "bytes"
accuracy = "split"
on_table_full = "closed"
non_ip = "drop"
malformed = "pass"
max_frame_bytes = 1518
prefix_v4 = 24
prefix_v6 = 56
[[class]]
name = "default"
per_source = { rate = 1_000_000, burst = 100_000 }
aggregate = { rate = 8_000_000, burst = 800_000 }
)toml");
    EXPECT_EQ(policy.version, 3u);
    EXPECT_EQ(policy.compiled.header.version, 3u);
    EXPECT_EQ(policy.compiled.header.non_ip_verdict, SLUICE_VERDICT_DROP);
    EXPECT_EQ(policy.compiled.header.malformed_verdict, SLUICE_VERDICT_PASS);
    const sluice_class_entry& cls = entry(policy, "default");
    EXPECT_EQ(cls.on_table_full, SLUICE_TABLE_FULL_CLOSED);
    EXPECT_EQ(cls.prefix_v4, 24);
    EXPECT_EQ(cls.prefix_v6, 56);
    EXPECT_TRUE(cls.per_source.enabled);
    EXPECT_EQ(cls.per_source.current.unit, SLUICE_UNIT_BYTES);
    EXPECT_TRUE(cls.aggregate.enabled);
    EXPECT_EQ(cls.aggregate.unit, SLUICE_UNIT_BYTES);
    EXPECT_EQ(cls.aggregate.accuracy, SLUICE_ACCURACY_SPLIT);
    // 800_000 / 4 CPUs = 200_000 bytes per CPU; 1 µs of schedule per byte per source.
    EXPECT_EQ(cls.aggregate.share.burst_nano, 200'000 * SLUICE_NANO);
    EXPECT_EQ(cls.per_source.current.interval_ns, 1000u);
    EXPECT_EQ(cls.per_source.current.tolerance_ns, 100'000'000u);
}

TEST(PolicyToml, TcpSynCountsConnectionAttemptsAtAnyLevel) {
    const LoadedPolicy policy = load_ok(R"toml([global]
rate = 100_000
burst = 10_000
unit = "tcp_syn"
[[class]]
name = "default"
per_source = { rate = 1, burst = 10, unit = "tcp_syn" }
aggregate = { rate = 1_000, burst = 100, unit = "tcp_syn" }
)toml");
    const sluice_class_entry& cls = entry(policy, "default");
    EXPECT_EQ(cls.per_source.current.unit, SLUICE_UNIT_TCP_SYN);
    EXPECT_EQ(cls.per_source.current.tolerance_ns, 10 * SLUICE_NANO);  // 10 attempts of 1 s each
    EXPECT_EQ(cls.aggregate.unit, SLUICE_UNIT_TCP_SYN);
    EXPECT_EQ(policy.compiled.header.global.unit, SLUICE_UNIT_TCP_SYN);
    EXPECT_THAT(error_of("[[class]]\nname = \"default\"\nper_source = { rate = 1, burst = 1, unit = \"syn\" }\n"),
                HasSubstr("expected one of \"packets\", \"bytes\", \"tcp_syn\""));
}

TEST(PolicyToml, ClassesOverrideDefaultsAndPerSourceOverridesTheClass) {
    const LoadedPolicy policy = load_ok(R"toml([defaults]
unit = "bytes"
prefix_v4 = 24
[[class]]
name = "default"
unit = "packets"
on_table_full = "closed"
prefix_v6 = 48
per_source = { rate = 10, burst = 20 }
aggregate = { rate = 1_000_000, burst = 100_000, unit = "bytes" }
[[class]]
name = "other"
per_source = { rate = 1_000_000, burst = 100_000, prefix_v4 = 16 }
)toml");
    const sluice_class_entry& cls = entry(policy, "default");
    EXPECT_EQ(cls.per_source.current.unit, SLUICE_UNIT_PACKETS);
    EXPECT_EQ(cls.aggregate.unit, SLUICE_UNIT_BYTES);
    EXPECT_EQ(cls.on_table_full, SLUICE_TABLE_FULL_CLOSED);
    EXPECT_EQ(cls.prefix_v4, 24);
    EXPECT_EQ(cls.prefix_v6, 48);
    const sluice_class_entry& other = entry(policy, "other");
    EXPECT_EQ(other.per_source.current.unit, SLUICE_UNIT_BYTES);
    EXPECT_EQ(other.on_table_full, SLUICE_TABLE_FULL_EVICT);
    EXPECT_EQ(other.prefix_v4, 16);
    EXPECT_EQ(other.prefix_v6, 64);
}

TEST(PolicyToml, ByteBurstsMustHoldTheLargestFrame) {
    const std::string e = error_of(R"toml([[class]]
name = "default"
unit = "bytes"
[class.per_source]
rate = 1_000_000
burst = 1500
)toml");
    EXPECT_THAT(e, StartsWith("p.toml:6:9: class \"default\".per_source.burst: burst 1500 bytes is below"));
    EXPECT_THAT(e, HasSubstr("at least 9216"));

    const LoadedPolicy policy = load_ok(R"toml([[class]]
name = "default"
unit = "bytes"
max_frame_bytes = 1500
per_source = { rate = 1_000_000, burst = 1500 }
)toml");
    // 1 µs per byte: a full bucket is 1500 µs ahead of schedule.
    EXPECT_EQ(entry(policy, "default").per_source.current.tolerance_ns, 1500u * 1000);
}

TEST(PolicyToml, PerSourceLimitsAreExactSoTakeNoAccuracyOrLease) {
    for (const char* key : {"accuracy = \"split\"", "lease = 10", "lease_ttl_ms = 5"}) {
        const std::string e = error_of(
            std::string("[[class]]\nname = \"default\"\nper_source = { rate = 1000, burst = 2000, ") + key + " }\n");
        EXPECT_THAT(e, StartsWith("p.toml:3:"));
        EXPECT_THAT(e, HasSubstr("per-source limits are exact across CPUs"));
    }
}

TEST(PolicyToml, APerSourceBurstTakesAtMostSeventyThreeMinutesToRefill) {
    const std::string e = error_of("[[class]]\nname = \"default\"\nper_source = { rate = 1, burst = 5000 }\n");
    EXPECT_THAT(e,
                StartsWith("p.toml:3:34: class \"default\".per_source.burst: burst 5000 packets at 1/s takes 5000 s"));
    EXPECT_THAT(e, HasSubstr("lower burst to at most 4398 or raise rate"));
    EXPECT_TRUE(load("[[class]]\nname = \"default\"\nper_source = { rate = 1, burst = 4398 }\n").ok());
}

TEST(PolicyToml, NewSourcesIsABucketLevelThatNeedsAPerSourceLimit) {
    const LoadedPolicy policy = load_ok(R"toml([[class]]
name = "default"
per_source = { rate = 100, burst = 200 }
new_sources = { rate = 5_000, burst = 500, accuracy = "split" }
aggregate = { rate = 50_000, burst = 5_000 }
)toml",
                                        {}, 2);
    const sluice_class_entry& cls = entry(policy, "default");
    EXPECT_TRUE(cls.new_sources.enabled);
    EXPECT_EQ(cls.new_sources.accuracy, SLUICE_ACCURACY_SPLIT);
    EXPECT_EQ(cls.new_sources.share.rate_per_s, 2'500u);
    EXPECT_THAT(error_of("[[class]]\nname = \"default\"\nnew_sources = { rate = 10, burst = 10 }\n"),
                StartsWith("p.toml:3:15: class \"default\".new_sources: needs a per_source limit"));
}

TEST(PolicyToml, SplitGivesEachCpuAShareLeaseSizesLeases) {
    const LoadedPolicy policy = load_ok(R"toml([[class]]
name = "default"
new_sources = { rate = 1000, burst = 2000, accuracy = "split" }
per_source = { rate = 10, burst = 20 }
aggregate = { rate = 100_000, burst = 64_000 }
[[class]]
name = "tuned"
aggregate = { rate = 100_000, burst = 64_000, lease = 500, lease_ttl_ms = 250 }
)toml",
                                        {}, 8);
    const sluice_class_entry& cls = entry(policy, "default");
    EXPECT_EQ(cls.new_sources.accuracy, SLUICE_ACCURACY_SPLIT);
    EXPECT_EQ(cls.new_sources.share.rate_per_s, 125u);
    EXPECT_EQ(cls.new_sources.share.burst_nano, 250 * SLUICE_NANO);
    EXPECT_EQ(cls.new_sources.lease_nano, 0u);
    EXPECT_EQ(cls.aggregate.accuracy, SLUICE_ACCURACY_LEASE);
    EXPECT_EQ(cls.aggregate.lease_nano, 64'000 * SLUICE_NANO / (kLeaseBurstDivisor * 8));
    EXPECT_EQ(cls.aggregate.lease_ttl_ns, kDefaultLeaseTtlNs);
    EXPECT_EQ(cls.aggregate.share.rate_per_s, 0u);
    const sluice_class_entry& tuned = entry(policy, "tuned");
    EXPECT_EQ(tuned.aggregate.lease_nano, 500 * SLUICE_NANO);
    EXPECT_EQ(tuned.aggregate.lease_ttl_ns, 250'000'000u);
}

TEST(PolicyToml, SplitSharesTooSmallForTheCpuCountAreRefused) {
    const std::string e = error_of(R"toml([[class]]
name = "default"
aggregate = { rate = 10, burst = 100, accuracy = "split" }
)toml",
                                   {}, 16);
    EXPECT_THAT(e, StartsWith("p.toml:3:22: class \"default\".aggregate.rate: split accuracy gives each of 16 CPUs"));
}

TEST(PolicyToml, LeaseSettingsOnASplitLimitAreRefused) {
    const std::string e = error_of(R"toml([defaults]
accuracy = "split"
[[class]]
name = "default"
aggregate = { rate = 1000, burst = 2000, lease_ttl_ms = 5 }
)toml");
    EXPECT_THAT(e, StartsWith("p.toml:5:57: class \"default\".aggregate.lease_ttl_ms: applies only to accuracy"));
}

TEST(PolicyToml, TheDefaultClassIsTheOneNamedDefaultOrDefaultsClass) {
    const LoadedPolicy named = load_ok(R"toml([[class]]
name = "web"
match = ["192.0.2.0/24"]
[[class]]
name = "default"
)toml");
    EXPECT_EQ(named.compiled.header.default_class_id, named.class_ids.at("default"));
    EXPECT_EQ(named.compiled.header.default_class_id, 2u);

    const LoadedPolicy chosen = load_ok(R"toml([defaults]
class = "rest"
[[class]]
name = "default"
[[class]]
name = "rest"
)toml");
    EXPECT_EQ(chosen.compiled.header.default_class_id, chosen.class_ids.at("rest"));
}

TEST(PolicyToml, AMissingDefaultClassIsRefused) {
    EXPECT_THAT(error_of("[[class]]\nname = \"web\"\n"),
                StartsWith("p.toml:1:1: defaults.class: not set, and no [[class]] is named \"default\""));
    EXPECT_THAT(error_of("[defaults]\nclass = \"nope\"\n[[class]]\nname = \"default\"\n"),
                StartsWith("p.toml:2:9: defaults.class: no [[class]] is named \"nope\""));
    EXPECT_THAT(error_of("version = 1\n"), StartsWith("p.toml:1:1: class: at least one [[class]] is required"));
}

TEST(PolicyToml, ClassesKeepTheirIdsAcrossVersions) {
    const std::string text = R"toml([[class]]
name = "new-a"
[[class]]
name = "web"
[[class]]
name = "default"
[[class]]
name = "new-b"
)toml";
    // "gone" was removed in this version: its id 1 stays unused while the caller still remembers it.
    const LoadedPolicy policy = load_ok(text, Ids{{"default", 3}, {"web", 200}, {"gone", 1}});
    EXPECT_EQ(policy.class_ids, (Ids{{"new-a", 2}, {"web", 200}, {"default", 3}, {"new-b", 4}}));
    EXPECT_EQ(policy.compiled.header.default_class_id, 3u);
    ASSERT_EQ(policy.compiled.classes.size(), 4u);
    EXPECT_EQ(policy.compiled.classes[1].class_id, 200u);  // file order, ids from history

    // Loading the result again as history changes nothing.
    EXPECT_EQ(load_ok(text, policy.class_ids).class_ids, policy.class_ids);
}

TEST(PolicyToml, PrefixesCarryTheirClassId) {
    const LoadedPolicy policy = load_ok(R"toml([[class]]
name = "default"
[[class]]
name = "web"
match = ["198.51.100.0/24", "2001:db8::/32"]
)toml",
                                        Ids{{"web", 9}});
    ASSERT_EQ(policy.compiled.prefixes.size(), 2u);
    EXPECT_EQ(policy.compiled.prefixes[0].family, SLUICE_FAMILY_IPV4);
    EXPECT_EQ(policy.compiled.prefixes[0].length, 24);
    EXPECT_EQ(policy.compiled.prefixes[0].class_id, 9u);
    EXPECT_EQ(policy.compiled.prefixes[1].family, SLUICE_FAMILY_IPV6);
    EXPECT_EQ(policy.compiled.prefixes[1].class_id, 9u);
}

TEST(PolicyToml, RemovedIdsAreReusedOnlyWhenNoOtherIsLeft) {
    Ids previous;
    for (uint32_t id = 1; id < SLUICE_MAX_CLASSES; id++) previous["c" + std::to_string(id - 1)] = id;
    // c1 (id 2) is renamed: every id is remembered, so the new name must take a removed one.
    std::string text = many_classes(255);
    text.replace(text.find("\"c1\""), 4, "\"renamed\"");
    const LoadedPolicy policy = load_ok(text, previous);
    EXPECT_EQ(policy.class_ids.at("renamed"), 2u);
    EXPECT_EQ(policy.class_ids.at("c254"), 255u);
}

TEST(PolicyToml, BadPreviousIdsAreRefused) {
    EXPECT_THAT(error_of(kMinimal, Ids{{"default", 0}}),
                StartsWith("p.toml: class \"default\": its previous id 0 is outside 1..255"));
    EXPECT_THAT(error_of("[[class]]\nname = \"default\"\n[[class]]\nname = \"b\"\n", Ids{{"default", 4}, {"b", 4}}),
                HasSubstr("its previous id 4 also belonged to another class"));
}

TEST(PolicyToml, PassAndDropClassesTakeNoLimits) {
    const LoadedPolicy policy = load_ok(R"toml([[class]]
name = "default"
action = "drop"
[[class]]
name = "trusted"
action = "pass"
match = ["10.0.0.0/8"]
)toml");
    EXPECT_EQ(entry(policy, "default").action, SLUICE_ACTION_DROP);
    EXPECT_EQ(entry(policy, "trusted").action, SLUICE_ACTION_PASS);

    EXPECT_THAT(error_of(R"toml([[class]]
name = "default"
action = "pass"
aggregate = { rate = 1, burst = 1 }
)toml"),
                StartsWith("p.toml:4:13: class \"default\".aggregate: never applies: action = \"pass\""));
    EXPECT_THAT(error_of(R"toml([[class]]
name = "default"
action = "drop"
[class.per_source]
rate = 1
burst = 1
)toml"),
                StartsWith("p.toml:4:1: class \"default\".per_source: never applies: action = \"drop\""));
}

// A default class and "bulk" with `lines` (line 4 onwards).
std::string bulk_class(std::string_view lines) {
    return "[[class]]\nname = \"default\"\n[[class]]\n" + std::string(lines);
}

TEST(PolicyToml, AShapedClassCompilesItsQueueAndDelay) {
    const LoadedPolicy policy = load_ok(bulk_class(R"toml(name = "bulk"
match = ["198.18.0.0/15"]
aggregate = { rate = 10_000, burst = 100 }
shape = { queue = 1024, max_delay_ms = 50 }
)toml"));
    const sluice_class_entry& bulk = entry(policy, "bulk");
    EXPECT_EQ(bulk.shape.queue_packets, 1024u);
    EXPECT_EQ(bulk.shape.max_delay_ns, 50'000'000u);
    EXPECT_TRUE(bulk.aggregate.enabled);
    EXPECT_EQ(bulk.action, SLUICE_ACTION_LIMIT);
    EXPECT_EQ(entry(policy, "default").shape.queue_packets, 0u);  // not shaped
    EXPECT_EQ(entry(policy, "default").shape.max_delay_ns, 0u);

    // The bounds themselves are accepted, as a standard table too.
    const LoadedPolicy edges = load_ok(bulk_class(R"toml(name = "bulk"
action = "limit"
aggregate = { rate = 10_000, burst = 100 }
[class.shape]
queue = 65536
max_delay_ms = 60_000
)toml"));
    EXPECT_EQ(entry(edges, "bulk").shape.queue_packets, 65536u);
    EXPECT_EQ(entry(edges, "bulk").shape.max_delay_ns, 60'000'000'000u);
    EXPECT_EQ(load_ok(bulk_class("name = \"bulk\"\naggregate = { rate = 1, burst = 1 }\n"
                                 "shape = { queue = 1, max_delay_ms = 1 }\n"))
                  .compiled.classes[1]
                  .shape.max_delay_ns,
              1'000'000u);
}

TEST(PolicyToml, ShapeKeysAreRequiredKnownAndInRange) {
    const auto shaped = [](std::string_view shape) {
        return bulk_class("name = \"bulk\"\naggregate = { rate = 10_000, burst = 100 }\nshape = " + std::string(shape) +
                          "\n");
    };
    EXPECT_THAT(error_of(shaped("{ max_delay_ms = 50 }")),
                StartsWith("p.toml:6:9: class \"bulk\".shape: queue is required (packets)"));
    EXPECT_THAT(error_of(shaped("{ queue = 1024 }")),
                StartsWith("p.toml:6:9: class \"bulk\".shape: max_delay_ms is required (milliseconds)"));
    EXPECT_THAT(error_of(shaped("{ queue = 1024, max_delay_ms = 50, burst = 10 }")),
                StartsWith("p.toml:6:44: class \"bulk\".shape.burst: unknown key; allowed here: queue, max_delay_ms"));
    EXPECT_THAT(error_of(shaped("{ queue = 0, max_delay_ms = 50 }")),
                StartsWith("p.toml:6:19: class \"bulk\".shape.queue: expected an integer in 1..65536, got 0"));
    EXPECT_THAT(error_of(shaped("{ queue = 65537, max_delay_ms = 50 }")),
                StartsWith("p.toml:6:19: class \"bulk\".shape.queue: expected an integer in 1..65536, got 65537"));
    EXPECT_THAT(error_of(shaped("{ queue = 1024, max_delay_ms = 0 }")),
                StartsWith("p.toml:6:40: class \"bulk\".shape.max_delay_ms: expected an integer in 1..60000, got 0"));
    EXPECT_THAT(
        error_of(shaped("{ queue = 1024, max_delay_ms = 60001 }")),
        StartsWith("p.toml:6:40: class \"bulk\".shape.max_delay_ms: expected an integer in 1..60000, got 60001"));
    EXPECT_THAT(error_of(shaped("{ queue = 1024, max_delay_ms = 0.5 }")),
                HasSubstr("class \"bulk\".shape.max_delay_ms: expected an integer in 1..60000, got a float (0.5)"));
    EXPECT_THAT(error_of(shaped("1024")),
                StartsWith("p.toml:6:9: class \"bulk\".shape: expected a table, got an integer (1024)"));
}

TEST(PolicyToml, ShadowIsOffByDefaultSetForAVersionInDefaultsAndPerClass) {
    const LoadedPolicy none = load_ok(bulk_class("name = \"bulk\"\n"));
    EXPECT_EQ(entry(none, "default").shadow, 0);
    EXPECT_EQ(entry(none, "bulk").shadow, 0);

    // [defaults] puts the whole version in shadow; a class may override it.
    const LoadedPolicy version =
        load_ok("[defaults]\nshadow = true\n" + bulk_class("name = \"bulk\"\nshadow = false\n"));
    EXPECT_EQ(entry(version, "default").shadow, 1);
    EXPECT_EQ(entry(version, "bulk").shadow, 0);
    const LoadedPolicy one = load_ok(bulk_class(R"toml(name = "bulk"
shadow = true
action = "drop"
)toml"));
    EXPECT_EQ(entry(one, "default").shadow, 0);
    EXPECT_EQ(entry(one, "bulk").shadow, 1);
    EXPECT_EQ(entry(one, "bulk").action, SLUICE_ACTION_DROP);  // a shadowed action passes what it would drop
    EXPECT_EQ(entry(load_ok("[defaults]\nshadow = false\n" + std::string(kMinimal)), "default").shadow, 0);
}

TEST(PolicyToml, ShadowIsABooleanAndNeverWithShape) {
    EXPECT_THAT(error_of("[defaults]\nshadow = 1\n" + std::string(kMinimal)),
                StartsWith("p.toml:2:10: defaults.shadow: expected true or false, got an integer (1)"));
    EXPECT_THAT(error_of("[[class]]\nname = \"default\"\nshadow = \"yes\"\n"),
                StartsWith("p.toml:3:10: class \"default\".shadow: expected true or false, got a string (\"yes\")"));
    // The shape queue holds packets; a class in shadow holds none.
    EXPECT_THAT(error_of(bulk_class(R"toml(name = "bulk"
aggregate = { rate = 10_000, burst = 100 }
shape = { queue = 1024, max_delay_ms = 50 }
shadow = true
)toml")),
                StartsWith("p.toml:7:10: class \"bulk\".shadow: cannot be true with shape (p.toml:6:9): the shape "
                           "queue holds packets, and a class in shadow holds none"));
    // From [defaults], the refusal points there and names the shaped class.
    EXPECT_THAT(error_of("[defaults]\nshadow = true\n" + bulk_class(R"toml(name = "bulk"
aggregate = { rate = 10_000, burst = 100 }
shape = { queue = 1024, max_delay_ms = 50 }
)toml")),
                StartsWith("p.toml:2:10: defaults.shadow: true applies to class \"bulk\", whose shape (p.toml:8:9) "
                           "holds packets, and a class in shadow holds none; set shadow = false on that class"));
    // ... which is how a shaped class stays enforcing in a version in shadow.
    const LoadedPolicy kept = load_ok("[defaults]\nshadow = true\n" + bulk_class(R"toml(name = "bulk"
shadow = false
aggregate = { rate = 10_000, burst = 100 }
shape = { queue = 1024, max_delay_ms = 50 }
)toml"));
    EXPECT_EQ(entry(kept, "default").shadow, 1);
    EXPECT_EQ(entry(kept, "bulk").shadow, 0);
}

// "bulk" with `<level> = <table>` on line 5, after `before`.
std::string level_class(std::string_view level, std::string_view table, std::string_view before) {
    return bulk_class("name = \"bulk\"\n" + std::string(before) + std::string(level) + " = " + std::string(table) +
                      "\n");
}

// ... its aggregate (column 13 opens the table).
std::string window_class(std::string_view aggregate, std::string_view before = "") {
    return level_class("aggregate", aggregate, before);
}

TEST(PolicyToml, AWindowAggregateCompilesToItsLimitAndWindow) {
    struct Case {
        std::string aggregate;
        uint8_t algorithm;
        uint64_t limit, window_ns;
        uint8_t unit;
    };
    const Case cases[] = {
        {R"({ algorithm = "fixed_window", limit = 100, window = "1s" })", SLUICE_ALGORITHM_FIXED_WINDOW, 100,
         SLUICE_NANO, SLUICE_UNIT_PACKETS},
        {R"({ algorithm = "sliding_window", limit = 140737488355327, window = "500ms", unit = "bytes" })",
         SLUICE_ALGORITHM_SLIDING_WINDOW, (1ULL << 47) - 1, 500'000'000, SLUICE_UNIT_BYTES},
        {R"({ algorithm = "sliding_log", limit = 32, window = "10m", unit = "tcp_syn" })", SLUICE_ALGORITHM_SLIDING_LOG,
         32, 600 * SLUICE_NANO, SLUICE_UNIT_TCP_SYN},
        {R"({ algorithm = "sliding_log", limit = 1, window = "1ms" })", SLUICE_ALGORITHM_SLIDING_LOG, 1, 1'000'000,
         SLUICE_UNIT_PACKETS},
        {R"({ algorithm = "fixed_window", limit = 9216, window = "1d", unit = "bytes" })",
         SLUICE_ALGORITHM_FIXED_WINDOW, 9216, 86'400 * SLUICE_NANO, SLUICE_UNIT_BYTES},
        {R"({ algorithm = "fixed_window", limit = 5, window = "2h" })", SLUICE_ALGORITHM_FIXED_WINDOW, 5,
         7'200 * SLUICE_NANO, SLUICE_UNIT_PACKETS},
        {R"({ algorithm = "fixed_window", limit = 5, window = "86400000ms" })", SLUICE_ALGORITHM_FIXED_WINDOW, 5,
         86'400 * SLUICE_NANO, SLUICE_UNIT_PACKETS},
    };
    for (const Case& c : cases) {
        const LoadedPolicy policy = load_ok(window_class(c.aggregate));
        const sluice_class_entry& bulk = entry(policy, "bulk");
        const sluice_window_limit& w = bulk.aggregate_window;
        EXPECT_EQ(w.algorithm, c.algorithm) << c.aggregate;
        EXPECT_EQ(w.limit, c.limit) << c.aggregate;
        EXPECT_EQ(w.window_ns, c.window_ns) << c.aggregate;
        EXPECT_EQ(w.index_bits, 64) << c.aggregate;
        EXPECT_EQ(w.count_bits, 64) << c.aggregate;
        EXPECT_EQ(w.generation, 0u) << "carry_previous_limits sets it";
        EXPECT_EQ(bulk.aggregate.enabled, 1);
        EXPECT_EQ(bulk.aggregate.unit, c.unit) << c.aggregate;
        // Nothing of the token bucket is set.
        sluice_level_limit expected{};
        expected.enabled = 1;
        expected.unit = c.unit;
        EXPECT_EQ(std::memcmp(&bulk.aggregate, &expected, sizeof(expected)), 0) << c.aggregate;
    }

    // The unit comes from the class (or [defaults]) unless the aggregate says it.
    const LoadedPolicy inherited =
        load_ok(window_class(R"({ algorithm = "fixed_window", limit = 100, window = "1s" })", "unit = \"tcp_syn\"\n"));
    EXPECT_EQ(entry(inherited, "bulk").aggregate.unit, SLUICE_UNIT_TCP_SYN);

    // gcra, said or not, is today's token bucket with no window.
    for (std::string_view aggregate :
         {"{ rate = 1000, burst = 100 }", R"({ algorithm = "gcra", rate = 1000, burst = 100 })"}) {
        const LoadedPolicy loaded = load_ok(window_class(aggregate));
        const sluice_class_entry& bulk = entry(loaded, "bulk");
        EXPECT_EQ(bulk.aggregate.full.rate_per_s, 1000u);
        const sluice_window_limit zero{};
        EXPECT_EQ(std::memcmp(&bulk.aggregate_window, &zero, sizeof(zero)), 0) << aggregate;
    }
}

TEST(PolicyToml, WindowKeysAreRefusedWhereTheyDoNotApply) {
    // Window algorithms take no token-bucket keys.
    const std::string fixed = R"(algorithm = "fixed_window", limit = 10, window = "1s")";
    EXPECT_THAT(error_of(window_class("{ " + fixed + ", rate = 5 }")),
                StartsWith("p.toml:5:77: class \"bulk\".aggregate.rate: belongs to algorithm = \"gcra\" (the token "
                           "bucket); algorithm = \"fixed_window\" counts limit units per window"));
    for (std::string_view key : {"burst = 5", "accuracy = \"split\"", "lease = 5", "lease_ttl_ms = 5"}) {
        // The key starts at column 70; the error points at its value.
        const std::string column = std::to_string(70 + key.find('=') + 2);
        EXPECT_THAT(error_of(window_class("{ " + fixed + ", " + std::string(key) + " }")),
                    StartsWith("p.toml:5:" + column + ": class \"bulk\".aggregate." +
                               std::string(key.substr(0, key.find(' '))) + ": belongs to algorithm = \"gcra\""));
    }
    // ...and need both of theirs.
    EXPECT_THAT(error_of(window_class(R"({ algorithm = "sliding_window", window = "1s" })")),
                StartsWith("p.toml:5:13: class \"bulk\".aggregate: limit is required for algorithm = "
                           "\"sliding_window\" (units per window)"));
    EXPECT_THAT(error_of(window_class(R"({ algorithm = "sliding_log", limit = 3 })")),
                StartsWith("p.toml:5:13: class \"bulk\".aggregate: window is required for algorithm = "
                           "\"sliding_log\" (a duration such as \"1s\" or \"10m\")"));
    // gcra takes no window keys.
    EXPECT_THAT(error_of(window_class("{ rate = 5, burst = 5, limit = 10 }")),
                StartsWith("p.toml:5:44: class \"bulk\".aggregate.limit: needs algorithm = \"fixed_window\", "
                           "\"sliding_window\" or \"sliding_log\"; gcra (the default) takes rate and burst"));
    EXPECT_THAT(error_of(window_class(R"({ algorithm = "gcra", rate = 5, burst = 5, window = "1s" })")),
                StartsWith("p.toml:5:65: class \"bulk\".aggregate.window: needs algorithm = \"fixed_window\""));
    EXPECT_THAT(error_of(window_class(R"({ algorithm = "leaky_bucket", rate = 5, burst = 5 })")),
                StartsWith("p.toml:5:27: class \"bulk\".aggregate.algorithm: expected one of \"gcra\", "
                           "\"fixed_window\", \"sliding_window\", \"sliding_log\", got a string (\"leaky_bucket\")"));

    // Only the class aggregate and per_source choose an algorithm.
    EXPECT_THAT(error_of(bulk_class("name = \"bulk\"\nper_source = { rate = 5, burst = 5 }\n"
                                    "new_sources = { limit = 5, rate = 5, burst = 5 }\n")),
                StartsWith("p.toml:6:25: class \"bulk\".new_sources.limit: only a class's aggregate and per_source "
                           "choose their algorithm; new_sources is a token bucket (rate and burst)"));
    EXPECT_THAT(error_of("[global]\nrate = 5\nburst = 5\nwindow = \"1s\"\n[[class]]\nname = \"default\"\n"),
                StartsWith("p.toml:4:10: global.window: only a class's aggregate and per_source choose their "
                           "algorithm; global is a token bucket (rate and burst)"));
    EXPECT_THAT(error_of("[defaults]\nalgorithm = \"fixed_window\"\n[[class]]\nname = \"default\"\n"),
                StartsWith("p.toml:2:13: defaults.algorithm: goes in the class's aggregate or per_source table "
                           "([class.aggregate], [class.per_source]): each of those two levels chooses its own "
                           "algorithm"));
    EXPECT_THAT(error_of(bulk_class("name = \"bulk\"\nlimit = 5\n")),
                StartsWith("p.toml:5:9: class \"bulk\".limit: goes in the class's aggregate or per_source table"));
}

// ... its per_source (column 14 opens the table).
std::string source_class(std::string_view per_source, std::string_view before = "") {
    return level_class("per_source", per_source, before);
}

TEST(PolicyToml, AWindowPerSourceCompilesToItsLimitWindowAndCountWidth) {
    struct Case {
        std::string per_source;
        uint8_t algorithm;
        uint64_t limit, window_ns;
        uint8_t unit, count_bits;
    };
    const Case cases[] = {
        {R"({ algorithm = "fixed_window", limit = 10, window = "1m", unit = "tcp_syn" })",
         SLUICE_ALGORITHM_FIXED_WINDOW, 10, 60 * SLUICE_NANO, SLUICE_UNIT_TCP_SYN, 4},
        {R"({ algorithm = "sliding_window", limit = 100, window = "1s" })", SLUICE_ALGORITHM_SLIDING_WINDOW, 100,
         SLUICE_NANO, SLUICE_UNIT_PACKETS, 7},
        {R"({ algorithm = "sliding_window", limit = 100_000, window = "35s", unit = "bytes" })",
         SLUICE_ALGORITHM_SLIDING_WINDOW, 100'000, 35 * SLUICE_NANO, SLUICE_UNIT_BYTES, 17},
        {R"({ algorithm = "fixed_window", limit = 1, window = "1ms", prefix_v4 = 24 })", SLUICE_ALGORITHM_FIXED_WINDOW,
         1, SLUICE_WINDOW_MIN_NS, SLUICE_UNIT_PACKETS, 1},
        {R"({ algorithm = "fixed_window", limit = 4294967295, window = "9s" })", SLUICE_ALGORITHM_FIXED_WINDOW,
         4'294'967'295, 9 * SLUICE_NANO, SLUICE_UNIT_PACKETS, 32},
    };
    for (const Case& c : cases) {
        const LoadedPolicy loaded = load_ok(source_class(c.per_source));
        const sluice_class_entry& bulk = entry(loaded, "bulk");
        // Enabled, the unit, the window; nothing of GCRA, and generation and
        // previous_fresh left for carry_previous_limits.
        sluice_source_limit expected{};
        expected.enabled = 1;
        expected.current.unit = c.unit;
        expected.window.algorithm = c.algorithm;
        expected.window.limit = c.limit;
        expected.window.window_ns = c.window_ns;
        expected.window.index_bits = 64;
        expected.window.count_bits = c.count_bits;
        EXPECT_EQ(std::memcmp(&bulk.per_source, &expected, sizeof(expected)), 0) << c.per_source;
        EXPECT_EQ(bulk.per_source.window.count_bits, c.count_bits) << c.per_source;
    }

    // The unit comes from the class (or [defaults]) unless per_source says it.
    const LoadedPolicy inherited =
        load_ok(source_class(R"({ algorithm = "fixed_window", limit = 10, window = "1m" })", "unit = \"tcp_syn\"\n"));
    EXPECT_EQ(entry(inherited, "bulk").per_source.current.unit, SLUICE_UNIT_TCP_SYN);

    // gcra, said or not, is the per-source GCRA, with no window.
    const sluice_source_limit gcra = compile_source_limit({5, 5, Unit::packets}, kDefaultMaxFrameBytes, "t").value();
    for (std::string_view per_source : {"{ rate = 5, burst = 5 }", R"({ algorithm = "gcra", rate = 5, burst = 5 })"})
        EXPECT_EQ(std::memcmp(&entry(load_ok(source_class(per_source)), "bulk").per_source, &gcra, sizeof(gcra)), 0)
            << per_source;
}

TEST(PolicyToml, AWindowPerSourceRefusesWhatItCannotCount) {
    // No log fits a source's entry.
    EXPECT_THAT(error_of(source_class(R"({ algorithm = "sliding_log", limit = 10, window = "1m" })")),
                StartsWith("p.toml:5:28: class \"bulk\".per_source.algorithm: sliding_log keeps each admission's "
                           "time, and a per-source entry is one 64-bit word; use sliding_window per source "
                           "(approximate, see README \"Choosing an algorithm\"), or sliding_log on a class's "
                           "aggregate"));
    EXPECT_THAT(error_of(source_class(R"({ algorithm = "sliding_log" })")),
                StartsWith("p.toml:5:28: class \"bulk\".per_source.algorithm: sliding_log keeps each"));

    // Window algorithms take no token-bucket keys, gcra no window keys.
    const std::string fixed = R"(algorithm = "fixed_window", limit = 10, window = "1s")";
    EXPECT_THAT(error_of(source_class("{ " + fixed + ", rate = 5 }")),
                StartsWith("p.toml:5:78: class \"bulk\".per_source.rate: belongs to algorithm = \"gcra\" (the "
                           "token bucket); algorithm = \"fixed_window\" counts limit units per window"));
    EXPECT_THAT(error_of(source_class("{ " + fixed + ", burst = 5 }")),
                StartsWith("p.toml:5:79: class \"bulk\".per_source.burst: belongs to algorithm = \"gcra\""));
    EXPECT_THAT(error_of(source_class("{ rate = 5, burst = 5, limit = 10 }")),
                StartsWith("p.toml:5:45: class \"bulk\".per_source.limit: needs algorithm = \"fixed_window\" or "
                           "\"sliding_window\"; gcra (the default) takes rate and burst"));
    EXPECT_THAT(error_of(source_class(R"({ algorithm = "gcra", rate = 5, burst = 5, window = "1s" })")),
                StartsWith("p.toml:5:66: class \"bulk\".per_source.window: needs algorithm = \"fixed_window\" or "
                           "\"sliding_window\""));
    // Per-source limits take no accuracy or lease, whatever the algorithm.
    EXPECT_THAT(error_of(source_class("{ " + fixed + ", accuracy = \"split\" }")),
                StartsWith("p.toml:5:82: class \"bulk\".per_source.accuracy: per-source limits are exact across "
                           "CPUs (one shared table), so they take no accuracy"));
    // Both window keys are required.
    EXPECT_THAT(error_of(source_class(R"({ algorithm = "sliding_window", window = "1s" })")),
                StartsWith("p.toml:5:14: class \"bulk\".per_source: limit is required for algorithm = "
                           "\"sliding_window\" (units per window)"));
    EXPECT_THAT(error_of(source_class(R"({ algorithm = "fixed_window", limit = 3 })")),
                StartsWith("p.toml:5:14: class \"bulk\".per_source: window is required for algorithm = "
                           "\"fixed_window\" (a duration such as \"1s\" or \"10m\")"));
    EXPECT_THAT(error_of(source_class(R"({ algorithm = "fixed_window", limit = 0, window = "1s" })")),
                StartsWith("p.toml:5:52: class \"bulk\".per_source.limit: expected an integer of at least 1, got 0"));
    EXPECT_THAT(error_of(source_class(R"({ algorithm = "fixed_window", limit = 10, window = "2d" })")),
                StartsWith("p.toml:5:65: class \"bulk\".per_source.window: \"2d\" is outside 1ms..1d"));
    // In bytes, a largest frame must fit in the limit.
    EXPECT_THAT(error_of(source_class(R"({ algorithm = "fixed_window", limit = 1517, window = "1s", unit = "bytes" })",
                                      "max_frame_bytes = 1518\n")),
                StartsWith("p.toml:6:52: class \"bulk\".per_source.limit: limit 1517 bytes is below the largest cost "
                           "one packet is charged (1518 bytes), so such packets could never pass; raise limit to at "
                           "least 1518"));
}

// The counts live in the entry's 45-bit time field: the limit's bits bound
// the window from below, the entry's reach from above. Each edge, both sides.
TEST(PolicyToml, AWindowPerSourceFitsAnEntryOrSaysWhatWould) {
    const auto with = [](std::string_view algorithm, std::string_view limit, std::string_view window) {
        return source_class("{ algorithm = \"" + std::string(algorithm) + "\", limit = " + std::string(limit) +
                            ", window = \"" + std::string(window) + "\" }");
    };
    EXPECT_TRUE(load(with("sliding_window", "100_000", "35s")).ok());
    EXPECT_THAT(error_of(with("sliding_window", "100_000", "34s")),
                StartsWith("p.toml:5:54: class \"bulk\".per_source.limit: sliding_window with limit 100000 per "
                           "source needs window >= 35s: both counts share the entry's 45-bit time field; lower limit "
                           "to at most 65535 for window 34s, lengthen window or use fixed_window"));
    EXPECT_TRUE(load(with("fixed_window", "100_000", "1ms")).ok());  // 2^18 ns < 1ms
    EXPECT_TRUE(load(with("fixed_window", "10", "4398s")).ok());
    EXPECT_THAT(error_of(with("fixed_window", "10", "4399s")),
                StartsWith("p.toml:5:65: class \"bulk\".per_source.window: window 4399s is longer than a "
                           "source-table entry can time: fixed_window with limit 10 per source allows at most 4398s "
                           "(about 73m); shorten window"));
    EXPECT_TRUE(load(with("sliding_window", "10", "36m")).ok());
    EXPECT_THAT(error_of(with("sliding_window", "10", "37m")),
                StartsWith("p.toml:5:67: class \"bulk\".per_source.window: window 37m is longer than a source-table "
                           "entry can time: sliding_window with limit 10 per source allows at most 2199s (about 36m); "
                           "shorten window, or use fixed_window, which allows up to 4398s (about 73m)"));
    EXPECT_TRUE(load(with("sliding_window", "524_287", "550s")).ok());
    EXPECT_THAT(error_of(with("sliding_window", "524_288", "1000s")),
                StartsWith("p.toml:5:54: class \"bulk\".per_source.limit: sliding_window with limit 524288 per "
                           "source does not fit a source-table entry at any window: both counts share the entry's "
                           "45-bit time field, at most 524287 per window; lower limit or use fixed_window"));
}

TEST(PolicyToml, AWindowMustBeADurationWithinADay) {
    const auto with_window = [](std::string_view window) {
        return window_class(R"({ algorithm = "fixed_window", limit = 10, window = )" + std::string(window) + " }");
    };
    // column 64: the window's value
    for (std::string_view bad :
         {"\"1.5s\"", "\"1 s\"", "\"s\"", "\"\"", "\"10\"", "\"1w\"", "\"-1s\"", "\"1S\"", "\"1sec\"", "\" 1s\""})
        EXPECT_THAT(error_of(with_window(bad)),
                    StartsWith("p.toml:5:64: class \"bulk\".aggregate.window: expected a duration such as \"1s\", "
                               "\"10m\" or \"500ms\" (an integer followed by ms, s, m, h or d), got " +
                               std::string(bad)));
    EXPECT_THAT(error_of(with_window("1")),
                StartsWith("p.toml:5:64: class \"bulk\".aggregate.window: expected a duration such as \"1s\", "
                           "\"10m\" or \"500ms\", got an integer (1)"));
    for (std::string_view bad : {"\"0ms\"", "\"0s\"", "\"2d\"", "\"86401s\"", "\"1441m\"", "\"99999999999999999999s\""})
        EXPECT_THAT(
            error_of(with_window(bad)),
            StartsWith("p.toml:5:64: class \"bulk\".aggregate.window: " + std::string(bad) + " is outside 1ms..1d"));
}

TEST(PolicyToml, WindowLimitsAreBoundedByWhatTheAlgorithmCanHold) {
    EXPECT_THAT(error_of(window_class(R"({ algorithm = "fixed_window", limit = 0, window = "1s" })")),
                StartsWith("p.toml:5:51: class \"bulk\".aggregate.limit: expected an integer of at least 1, got 0"));
    EXPECT_THAT(error_of(window_class(R"({ algorithm = "fixed_window", limit = 140737488355328, window = "1s" })")),
                StartsWith("p.toml:5:51: class \"bulk\".aggregate.limit: limit 140737488355328 exceeds the maximum of "
                           "140737488355327 packets per window (2^47 - 1)"));
    EXPECT_THAT(error_of(window_class(R"({ algorithm = "sliding_log", limit = 33, window = "1s" })")),
                StartsWith("p.toml:5:50: class \"bulk\".aggregate.limit: limit 33 is more than a sliding_log holds: "
                           "the log keeps one time per admission, at most 32 per class; use sliding_window "
                           "(approximate) or fixed_window for larger limits"));
    EXPECT_THAT(error_of(window_class(R"({ algorithm = "sliding_log", limit = 3, window = "1s", unit = "bytes" })")),
                StartsWith("p.toml:5:75: class \"bulk\".aggregate.unit: sliding_log counts admissions (unit "
                           "\"packets\" or \"tcp_syn\"), not bytes; use fixed_window or sliding_window for a limit "
                           "in bytes"));
    // A unit of bytes from the class: the algorithm is what cannot count it.
    EXPECT_THAT(
        error_of(window_class(R"({ algorithm = "sliding_log", limit = 3, window = "1s" })", "unit = \"bytes\"\n")),
        StartsWith("p.toml:6:27: class \"bulk\".aggregate.algorithm: sliding_log counts admissions, not "
                   "bytes, and this class's unit is \"bytes\" (from the class or [defaults])"));
    // In bytes, a largest frame must fit in the limit, as it must in a burst.
    EXPECT_THAT(error_of(window_class(R"({ algorithm = "fixed_window", limit = 1517, window = "1s", unit = "bytes" })",
                                      "max_frame_bytes = 1518\n")),
                StartsWith("p.toml:6:51: class \"bulk\".aggregate.limit: limit 1517 bytes is below the largest cost "
                           "one packet is charged (1518 bytes), so such packets could never pass; raise limit to at "
                           "least 1518"));
    EXPECT_TRUE(load(window_class(R"({ algorithm = "sliding_window", limit = 1518, window = "1s", unit = "bytes" })",
                                  "max_frame_bytes = 1518\n"))
                    .ok());
}

TEST(PolicyToml, AShapedClassNeedsAGcraAggregate) {
    EXPECT_THAT(error_of(bulk_class(R"toml(name = "bulk"
aggregate = { algorithm = "fixed_window", limit = 100, window = "1s" }
shape = { queue = 1024, max_delay_ms = 50 }
)toml")),
                StartsWith("p.toml:6:9: class \"bulk\": shape needs aggregate algorithm = \"gcra\": the queue drains "
                           "at the aggregate's token-bucket rate, and algorithm = \"fixed_window\" has none"));
}

TEST(PolicyToml, ShapeNeedsAnAggregateLimitAndActionLimit) {
    EXPECT_THAT(error_of(bulk_class(R"toml(name = "bulk"
per_source = { rate = 100, burst = 10 }
shape = { queue = 1024, max_delay_ms = 50 }
)toml")),
                StartsWith("p.toml:6:9: class \"bulk\": shape needs an aggregate limit (the queue drains at the "
                           "aggregate rate)"));
    for (std::string_view action : {"pass", "drop"}) {
        // Named for shape even when an aggregate is also there to be refused.
        for (std::string_view aggregate : {"", "aggregate = { rate = 10_000, burst = 100 }\n"}) {
            const std::string e =
                error_of(bulk_class("name = \"bulk\"\naction = \"" + std::string(action) + "\"\n" +
                                    std::string(aggregate) + "shape = { queue = 1024, max_delay_ms = 50 }\n"));
            EXPECT_THAT(e, StartsWith("p.toml:" + std::string(aggregate.empty() ? "6" : "7") +
                                      ":9: class \"bulk\": shape needs action = \"limit\": action = \"" +
                                      std::string(action) + "\""));
        }
    }
    auto loaded = load(bulk_class("name = \"bulk\"\nshape = { queue = 1024, max_delay_ms = 50 }\n"));
    ASSERT_FALSE(loaded.ok());
    EXPECT_EQ(loaded.error().setting, "class \"bulk\".shape");
}

// ---- the penalty box -------------------------------------------------------------------

TEST(PolicyToml, APenaltyCompilesItsMeterAndTime) {
    const LoadedPolicy policy = load_ok(bulk_class(R"toml(name = "bulk"
per_source = { rate = 1000, burst = 10 }
penalty = { over = 10, within = "500ms", for = "2m" }
)toml"));
    const sluice_class_entry& bulk = entry(policy, "bulk");
    EXPECT_EQ(bulk.penalty.for_ns, 120'000'000'000u);
    // (10 - 1) x 1000/s: 1/9000 s of the meter's schedule per refused packet.
    EXPECT_EQ(bulk.penalty.meter.current.interval_ns, 111'111u);
    EXPECT_EQ(bulk.penalty.meter.current.tolerance_ns, 500'000'000u);
    EXPECT_EQ(bulk.penalty.meter.current.unit, SLUICE_UNIT_PACKETS);
    EXPECT_EQ(entry(policy, "default").penalty.for_ns, 0u);
    // within defaults to a second.
    const LoadedPolicy plain = load_ok(bulk_class(R"toml(name = "bulk"
per_source = { rate = 1000, burst = 10 }
penalty = { over = 4, for = "10s" }
)toml"));
    EXPECT_EQ(entry(plain, "bulk").penalty.meter.current.tolerance_ns, 1'000'000'000u);
}

TEST(PolicyToml, APenaltyNeedsAGcraPerSourceLimitAndSaysWhatIsWrong) {
    EXPECT_THAT(error_of(bulk_class("name = \"bulk\"\npenalty = { over = 10, for = \"1m\" }\n")),
                StartsWith("p.toml:5:11: class \"bulk\".penalty: needs a per_source limit"));
    EXPECT_THAT(error_of(bulk_class(R"toml(name = "bulk"
per_source = { algorithm = "fixed_window", limit = 100, window = "1s" }
penalty = { over = 10, for = "1m" }
)toml")),
                StartsWith("p.toml:6:11: class \"bulk\".penalty: needs per_source algorithm = \"gcra\""));
    EXPECT_THAT(error_of(bulk_class("name = \"bulk\"\naction = \"drop\"\npenalty = { over = 10, for = \"1m\" }\n")),
                StartsWith("p.toml:6:11: class \"bulk\".penalty: never applies: action = \"drop\""));
    struct Case {
        std::string penalty, error;
    };
    for (const Case& c : std::vector<Case>{
             {R"({ for = "1m" })", "over is required"},
             {R"({ over = 10 })", "for is required"},
             {R"({ over = 1, for = "1m" })", "over"},
             {R"({ over = 10, for = "2h" })", "for"},
             {R"({ over = 10, for = "500ms" })", "for"},
             {R"({ over = 10, for = "1m", within = "2m" })", "within"},
             {R"({ over = 10, for = "1m", block_time = "1m" })", "block_time"},
             // One refused packet at (2 - 1) x 1/s is a second of the meter.
             {R"({ over = 2, for = "1m", within = "10ms" })", "within = \"10ms\" is shorter than one refused unit"},
         }) {
        const std::string text = bulk_class("name = \"bulk\"\nper_source = { rate = 1, burst = 1 }\npenalty = " +
                                            c.penalty + "\n");
        EXPECT_THAT(error_of(text), HasSubstr(c.error)) << c.penalty;
    }
}

// ---- fleet quotas ---------------------------------------------------------------------

// "bulk" with `fleet = <table>` on line 5 (column 9 opens the table), after `before`.
std::string fleet_class(std::string_view table, std::string_view before = "") {
    return level_class("fleet", table, before);
}

constexpr std::string_view kFleetOpen =
    R"({ rate = 2_000_000, burst = 100_000, unit = "packets", on_unavailable = "open", fallback_rate = 700_000 })";

const FleetQuota* quota_of(const LoadedPolicy& policy, const std::string& name) {
    for (const FleetQuota& q : policy.compiled.fleet)
        if (q.class_name == name) return &q;
    return nullptr;
}

TEST(PolicyToml, AFleetTableCompilesToAQuotaAndTheClassEntry) {
    const LoadedPolicy policy = load_ok(fleet_class(kFleetOpen));
    const sluice_class_entry& bulk = entry(policy, "bulk");
    EXPECT_EQ(bulk.fleet, 1);
    EXPECT_EQ(bulk.fleet_unit, SLUICE_UNIT_PACKETS);
    EXPECT_EQ(entry(policy, "default").fleet, 0);
    ASSERT_EQ(policy.compiled.fleet.size(), 1u);
    const FleetQuota& q = policy.compiled.fleet[0];
    EXPECT_EQ(q.class_id, policy.class_ids.at("bulk"));
    EXPECT_EQ(q.class_name, "bulk");
    EXPECT_EQ(q.rate_per_s, 2'000'000u);
    EXPECT_EQ(q.burst, 100'000u);
    EXPECT_EQ(q.unit, SLUICE_UNIT_PACKETS);
    EXPECT_TRUE(q.fail_open);
    EXPECT_EQ(q.fallback_rate_per_s, 700'000u);
    // The first 16 hex digits of SHA-256("rate=2000000;burst=100000;unit=packets").
    EXPECT_EQ(q.definition_hash, "ad89995ec349ed67");
    EXPECT_EQ(q.definition_hash, sha256_hex("rate=2000000;burst=100000;unit=packets").substr(0, 16));

    // Closed: no fallback. burst defaults to a tenth of rate (rounded up),
    // unit to the class's (here from [defaults]).
    const LoadedPolicy closed =
        load_ok("[defaults]\nunit = \"tcp_syn\"\n" + fleet_class(R"({ rate = 15, on_unavailable = "closed" })"));
    const FleetQuota* c = quota_of(closed, "bulk");
    ASSERT_NE(c, nullptr);
    EXPECT_FALSE(c->fail_open);
    EXPECT_EQ(c->fallback_rate_per_s, 0u);
    EXPECT_EQ(c->burst, 2u);
    EXPECT_EQ(c->unit, SLUICE_UNIT_TCP_SYN);
    EXPECT_EQ(entry(closed, "bulk").fleet_unit, SLUICE_UNIT_TCP_SYN);
    // The class's own unit; the fleet's may differ from the class's levels'.
    const LoadedPolicy bytes = load_ok(fleet_class(R"({ rate = 1_000_000, on_unavailable = "closed" })",
                                                   "unit = \"bytes\"\naggregate = { rate = 10, burst = 10, "
                                                   "unit = \"packets\" }\n"));
    EXPECT_EQ(quota_of(bytes, "bulk")->unit, SLUICE_UNIT_BYTES);
    EXPECT_EQ(quota_of(bytes, "bulk")->burst, 100'000u);
    // A burst past SLUICE_BURST_MAX by default is capped there.
    EXPECT_EQ(quota_of(load_ok(fleet_class(R"({ rate = 100_000_000_000, on_unavailable = "closed" })")), "bulk")->burst,
              SLUICE_BURST_MAX);

    // As a standard table, with the bounds themselves.
    const LoadedPolicy edges = load_ok(bulk_class(R"toml(name = "bulk"
[class.fleet]
rate = 100_000_000_000
burst = 4_000_000_000
on_unavailable = "open"
fallback_rate = 100_000_000_000
)toml"));
    EXPECT_EQ(quota_of(edges, "bulk")->rate_per_s, SLUICE_RATE_MAX);
    EXPECT_EQ(quota_of(edges, "bulk")->burst, SLUICE_BURST_MAX);
    EXPECT_EQ(quota_of(edges, "bulk")->fallback_rate_per_s, SLUICE_RATE_MAX);

    // Several: by class id, each with its own.
    const LoadedPolicy two = load_ok(R"toml([[class]]
name = "default"
fleet = { rate = 10, burst = 5, on_unavailable = "closed" }
[[class]]
name = "bulk"
match = ["10.0.0.0/8"]
fleet = { rate = 20, burst = 5, on_unavailable = "closed" }
)toml",
                                     Ids{{"bulk", 7}, {"default", 3}});
    ASSERT_EQ(two.compiled.fleet.size(), 2u);
    EXPECT_EQ(two.compiled.fleet[0].class_name, "default");
    EXPECT_EQ(two.compiled.fleet[0].class_id, 3u);
    EXPECT_EQ(two.compiled.fleet[1].class_name, "bulk");
    EXPECT_EQ(two.compiled.fleet[1].class_id, 7u);
    EXPECT_NE(two.compiled.fleet[0].definition_hash, two.compiled.fleet[1].definition_hash);
}

TEST(PolicyToml, AFleetTableNeedsADaemonThatLeases) {
    auto loaded =
        load_policy_toml(fleet_class(kFleetOpen), "p.toml", {}, PolicyLoadOptions{.cpus = 4, .fleet_leasing = false});
    ASSERT_FALSE(loaded.ok());
    EXPECT_THAT(loaded.error().message,
                StartsWith("p.toml:5:9: class \"bulk\".fleet: this daemon has no [fleet] servers in its config"));
}

TEST(PolicyToml, FleetRefusalsNameTheKeyAndWhere) {
    // The failure policy must be explicit.
    EXPECT_THAT(error_of(fleet_class(R"({ rate = 10, burst = 5 })")),
                StartsWith("p.toml:5:9: class \"bulk\".fleet: on_unavailable is required: \"open\""));
    EXPECT_THAT(error_of(fleet_class(R"({ rate = 10, on_unavailable = "closed", fallback_rate = 5 })")),
                StartsWith("p.toml:5:65: class \"bulk\".fleet.fallback_rate: applies only to on_unavailable = "
                           "\"open\""));
    EXPECT_THAT(error_of(fleet_class(R"({ rate = 10, on_unavailable = "open" })")),
                StartsWith("p.toml:5:9: class \"bulk\".fleet: fallback_rate is required with on_unavailable = "
                           "\"open\""));
    EXPECT_THAT(error_of(fleet_class(R"({ rate = 10, on_unavailable = "maybe" })")),
                StartsWith("p.toml:5:39: class \"bulk\".fleet.on_unavailable: expected one of \"open\", \"closed\", "
                           "got a string (\"maybe\")"));
    EXPECT_THAT(error_of(fleet_class(R"({ rate = 10, on_unavailable = "open", fallback_rate = 11 })")),
                StartsWith("p.toml:5:63: class \"bulk\".fleet.fallback_rate: 11 exceeds the fleet's rate 10"));
    EXPECT_THAT(error_of(fleet_class(R"({ rate = 10, on_unavailable = "open", fallback_rate = 0 })")),
                StartsWith("p.toml:5:63: class \"bulk\".fleet.fallback_rate: expected an integer in 1..100000000000"));
    // Unit, rate and burst.
    EXPECT_THAT(error_of(fleet_class(R"({ rate = 10, unit = "frames", on_unavailable = "closed" })")),
                StartsWith("p.toml:5:29: class \"bulk\".fleet.unit: expected one of \"packets\", \"bytes\", "
                           "\"tcp_syn\", got a string (\"frames\")"));
    EXPECT_THAT(error_of(fleet_class(R"({ burst = 10, on_unavailable = "closed" })")),
                StartsWith("p.toml:5:9: class \"bulk\".fleet: rate is required"));
    EXPECT_THAT(error_of(fleet_class(R"({ rate = 0, on_unavailable = "closed" })")),
                StartsWith("p.toml:5:18: class \"bulk\".fleet.rate: expected an integer in 1..100000000000, got 0"));
    EXPECT_THAT(error_of(fleet_class(R"({ rate = 10, burst = 4_000_000_001, on_unavailable = "closed" })")),
                StartsWith("p.toml:5:30: class \"bulk\".fleet.burst: expected an integer in 1..4000000000"));
    EXPECT_THAT(error_of(fleet_class(R"({ rate = 10, unit = "bytes", burst = 1500, on_unavailable = "closed" })")),
                StartsWith("p.toml:5:46: class \"bulk\".fleet.burst: burst 1500 bytes is below the largest cost one "
                           "packet is charged (max_frame_bytes 9216)"));
    EXPECT_THAT(error_of(fleet_class(R"({ rate = 10_000, unit = "bytes", on_unavailable = "closed" })")),
                StartsWith("p.toml:5:9: class \"bulk\".fleet: burst 1000 bytes is below the largest cost"));
    // Unknown keys inside the table, and a table it must be.
    EXPECT_THAT(error_of(fleet_class(R"({ rate = 10, on_unavailable = "closed", lease = 5 })")),
                StartsWith("p.toml:5:49: class \"bulk\".fleet.lease: unknown key; allowed here: rate, burst, unit, "
                           "on_unavailable, fallback_rate"));
    EXPECT_THAT(error_of(fleet_class("2000000")),
                StartsWith("p.toml:5:9: class \"bulk\".fleet: expected a table, got an integer (2000000)"));
    // Only a class that limits spends credit.
    for (std::string_view action : {"pass", "drop"})
        EXPECT_THAT(error_of(fleet_class(kFleetOpen, "action = \"" + std::string(action) + "\"\n")),
                    StartsWith("p.toml:6:9: class \"bulk\".fleet: never applies: action = \"" + std::string(action) +
                               "\" limits nothing; remove fleet or use action = \"limit\""));
}

TEST(PolicyToml, TheFleetDefinitionHashIsWhatTheSharedBucketMeans) {
    const auto hash = [](std::string_view table) {
        const LoadedPolicy policy = load_ok(fleet_class(table));
        const FleetQuota* q = quota_of(policy, "bulk");
        return q ? q->definition_hash : std::string();
    };
    const std::string base = hash(R"({ rate = 100, burst = 10, on_unavailable = "closed" })");
    ASSERT_EQ(base.size(), 16u);
    EXPECT_EQ(base.find_first_not_of("0123456789abcdef"), std::string::npos);
    // Stable: however it is written, and whatever this node does without Redis.
    EXPECT_EQ(hash(R"({ rate = 100, burst = 10, on_unavailable = "closed" })"), base);
    EXPECT_EQ(hash(R"({ on_unavailable = "closed", burst = 0xa, unit = "packets", rate = 1_00 })"), base);
    EXPECT_EQ(hash(R"({ rate = 100, burst = 10, on_unavailable = "open", fallback_rate = 50 })"), base);
    EXPECT_EQ(hash(R"({ rate = 100, burst = 10, on_unavailable = "open", fallback_rate = 1 })"), base);
    EXPECT_EQ(hash(R"({ rate = 100, on_unavailable = "closed" })"), base);  // burst's default is rate / 10
    // Changed by what the bucket means.
    EXPECT_NE(hash(R"({ rate = 101, burst = 10, on_unavailable = "closed" })"), base);
    EXPECT_NE(hash(R"({ rate = 100, burst = 11, on_unavailable = "closed" })"), base);
    EXPECT_NE(hash(R"({ rate = 100, burst = 10, unit = "tcp_syn", on_unavailable = "closed" })"), base);
    EXPECT_EQ(base, fleet_definition_hash(100, 10, SLUICE_UNIT_PACKETS));
    EXPECT_EQ(fleet_definition(100, 10, SLUICE_UNIT_TCP_SYN), "rate=100;burst=10;unit=tcp_syn");
}

TEST(PolicyToml, AFleetTableSurvivesTheCanonicalText) {
    const std::string text = fleet_class(kFleetOpen);
    auto canonical = canonical_policy_text(text, "p.toml");
    ASSERT_TRUE(canonical.ok()) << canonical.error().message;
    EXPECT_THAT(canonical.value(), HasSubstr("[class.fleet]"));
    EXPECT_THAT(canonical.value(), HasSubstr("on_unavailable = \"open\""));
    EXPECT_THAT(canonical.value(), HasSubstr("fallback_rate = 700000"));
    const LoadedPolicy before = load_ok(text), after = load_ok(canonical.value());
    const FleetQuota *a = quota_of(before, "bulk"), *b = quota_of(after, "bulk");
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(std::tie(a->class_id, a->class_name, a->rate_per_s, a->burst, a->unit, a->fail_open,
                       a->fallback_rate_per_s, a->definition_hash),
              std::tie(b->class_id, b->class_name, b->rate_per_s, b->burst, b->unit, b->fail_open,
                       b->fallback_rate_per_s, b->definition_hash));
    EXPECT_EQ(std::memcmp(&entry(before, "bulk"), &entry(after, "bulk"), sizeof(sluice_class_entry)), 0);
}

TEST(PolicyToml, GlobalCeilingIsEnabledOnlyWhenPresent) {
    EXPECT_FALSE(load_ok(kMinimal).compiled.header.global.enabled);
    const LoadedPolicy policy = load_ok(R"toml([defaults]
unit = "bytes"
[global]
rate = 2_000_000
burst = 200_000
unit = "packets"
accuracy = "split"
[[class]]
name = "default"
)toml");
    const sluice_level_limit& global = policy.compiled.header.global;
    EXPECT_TRUE(global.enabled);
    EXPECT_EQ(global.unit, SLUICE_UNIT_PACKETS);
    EXPECT_EQ(global.accuracy, SLUICE_ACCURACY_SPLIT);
    EXPECT_EQ(global.full.rate_per_s, 2'000'000u);
    EXPECT_EQ(global.share.rate_per_s, 500'000u);
}

TEST(PolicyToml, SyntaxErrorsCarryTheirPosition) {
    const std::string e = error_of("version = 1\n[defaults\nunit = \"bytes\"\n");
    EXPECT_THAT(e, StartsWith("p.toml:2:10: TOML syntax: "));
    EXPECT_THAT(error_of("[[class]]\nname = \"default\n"), StartsWith("p.toml:2:"));
}

TEST(PolicyToml, UnknownKeysAreRefusedEverywhere) {
    const std::string top = error_of("version = 1\n\n\n\ncolour = \"blue\"\n[[class]]\nname = \"default\"\n");
    EXPECT_THAT(top, StartsWith("p.toml:5:1: colour: unknown key; allowed here: version, defaults, global, class"));
    EXPECT_THAT(error_of("[defaults]\nunits = \"bytes\"\n[[class]]\nname = \"default\"\n"),
                StartsWith("p.toml:2:1: defaults.units: unknown key; allowed here: unit, accuracy,"));
    EXPECT_THAT(error_of("[global]\nrate = 1\nburst = 1\nceiling = 3\n[[class]]\nname = \"default\"\n"),
                StartsWith("p.toml:4:1: global.ceiling: unknown key; allowed here: rate, burst,"));
    EXPECT_THAT(error_of("[[class]]\nname = \"default\"\n  matches = [\"10.0.0.0/8\"]\n"),
                StartsWith("p.toml:3:3: class \"default\".matches: unknown key; allowed here: name, match,"));
    EXPECT_THAT(error_of("[[class]]\nname = \"default\"\nper_source = { rate = 1, burst = 1, prefix = 24 }\n"),
                StartsWith("p.toml:3:37: class \"default\".per_source.prefix: unknown key; allowed here: algorithm, "
                           "limit, window, rate, burst, unit, prefix_v4, prefix_v6"));
    // prefix_v4 is a per_source key, not an aggregate one.
    EXPECT_THAT(error_of("[[class]]\nname = \"default\"\naggregate = { rate = 1, burst = 1, prefix_v4 = 24 }\n"),
                StartsWith("p.toml:3:36: class \"default\".aggregate.prefix_v4: unknown key; allowed here: "
                           "algorithm, limit, window, rate, burst, unit, accuracy, lease, lease_ttl_ms"));
}

TEST(PolicyToml, TheFirstUnknownKeyInTheFileIsReported) {
    // Tables iterate in key order; the error must still be the first in the file.
    EXPECT_THAT(error_of("[[class]]\nname = \"default\"\nzzz = 1\naaa = 2\n"),
                StartsWith("p.toml:3:1: class \"default\".zzz: unknown key"));
}

TEST(PolicyToml, WrongTypesNameTheExpectedType) {
    EXPECT_THAT(error_of("[defaults]\nprefix_v4 = \"24\"\n[[class]]\nname = \"default\"\n"),
                StartsWith("p.toml:2:13: defaults.prefix_v4: expected an integer in 1..32, got a string (\"24\")"));
    EXPECT_THAT(error_of("version = true\n[[class]]\nname = \"default\"\n"),
                StartsWith("p.toml:1:11: version: expected an integer of at least 1, got a boolean (true)"));
    EXPECT_THAT(error_of("[[class]]\nname = \"default\"\nmatch = \"10.0.0.0/8\"\n"),
                StartsWith("p.toml:3:9: class \"default\".match: expected an array of CIDR strings, got a string"));
    EXPECT_THAT(error_of("[[class]]\nname = \"default\"\nper_source = 5\n"),
                StartsWith("p.toml:3:14: class \"default\".per_source: expected a table, got an integer (5)"));
    EXPECT_THAT(error_of("[class]\nname = \"default\"\n"),
                StartsWith("p.toml:1:1: class: expected an array of tables ([[class]]), got a table"));
    EXPECT_THAT(error_of("[[class]]\nname = 5\n"),
                StartsWith("p.toml:2:8: class #1.name: expected a string, got an integer (5)"));
}

TEST(PolicyToml, NegativeRateIsRefused) {
    EXPECT_THAT(error_of("[[class]]\nname = \"default\"\nper_source = { rate = -5, burst = 10 }\n"),
                StartsWith("p.toml:3:23: class \"default\".per_source.rate: expected a non-negative integer, got -5"));
}

TEST(PolicyToml, FloatBurstIsRefused) {
    EXPECT_THAT(error_of("[global]\nrate = 100\nburst = 1.5\n[[class]]\nname = \"default\"\n"),
                StartsWith("p.toml:3:9: global.burst: expected a non-negative integer, got a float (1.5)"));
}

TEST(PolicyToml, MissingRateOrBurstIsRefused) {
    EXPECT_THAT(error_of("[[class]]\nname = \"default\"\nper_source = { burst = 10 }\n"),
                StartsWith("p.toml:3:14: class \"default\".per_source: rate is required"));
    EXPECT_THAT(error_of("[global]\nrate = 10\n[[class]]\nname = \"default\"\n"),
                StartsWith("p.toml:1:1: global: burst is required"));
}

TEST(PolicyToml, LimitsOutOfRangeComeFromCompileLevel) {
    EXPECT_THAT(error_of("[[class]]\nname = \"default\"\naggregate = { rate = 0, burst = 10 }\n"),
                StartsWith("p.toml:3:22: class \"default\".aggregate.rate: rate is 0"));
    EXPECT_THAT(error_of("[[class]]\nname = \"default\"\naggregate = { rate = 10, burst = 4_000_000_001 }\n"),
                StartsWith("p.toml:3:34: class \"default\".aggregate.burst: burst 4000000001 exceeds the maximum"));
    EXPECT_THAT(error_of("[[class]]\nname = \"default\"\naggregate = { rate = 10, burst = 10, lease = 11 }\n"),
                StartsWith("p.toml:3:46: class \"default\".aggregate.lease: lease 11 packets is outside 1..10"));
}

TEST(PolicyToml, LeaseTtlOutOfRangeIsRefused) {
    for (const char* ttl : {"0", "1001"})
        EXPECT_THAT(
            error_of(std::string("[global]\nrate = 10\nburst = 10\nlease_ttl_ms = ") + ttl +
                     "\n[[class]]\nname = \"default\"\n"),
            StartsWith(std::string("p.toml:4:16: global.lease_ttl_ms: expected an integer in 1..1000, got ") + ttl));
}

TEST(PolicyToml, UnknownEnumStringsListTheChoices) {
    EXPECT_THAT(error_of("[[class]]\nname = \"default\"\naction = \"block\"\n"),
                StartsWith("p.toml:3:10: class \"default\".action: expected one of \"limit\", \"pass\", \"drop\", got "
                           "a string (\"block\")"));
    EXPECT_THAT(error_of("[defaults]\non_table_full = \"pass\"\n[[class]]\nname = \"default\"\n"),
                StartsWith("p.toml:2:17: defaults.on_table_full: expected one of \"evict\", \"open\", \"closed\""));
}

TEST(PolicyToml, ClassNamesAreValidAndUnique) {
    EXPECT_THAT(error_of("[[class]]\nname = \"default\"\n[[class]]\nname = \"default\"\n"),
                StartsWith("p.toml:4:8: class \"default\".name: \"default\" is already the name of the class at "
                           "p.toml:2:8"));
    EXPECT_THAT(error_of("[[class]]\nname = \"Web\"\n"),
                StartsWith("p.toml:2:8: class \"Web\".name: \"Web\" is not a valid class name"));
    EXPECT_THAT(error_of("[[class]]\nname = \"" + std::string(64, 'a') + "\"\n"), HasSubstr("is not a valid class"));
    EXPECT_TRUE(load("[[class]]\nname = \"default\"\n[[class]]\nname = \"" + std::string(63, 'a') + "\"\n").ok());
    EXPECT_THAT(error_of("[[class]]\nmatch = []\n"), StartsWith("p.toml:1:1: class #1: name is required"));
}

TEST(PolicyToml, BadPrefixesAreRefused) {
    EXPECT_THAT(error_of("[[class]]\nname = \"default\"\nmatch = [\"10.0.0.0/8\", \"10.0.0.1/8\"]\n"),
                StartsWith("p.toml:3:24: class \"default\".match[1]: \"10.0.0.1/8\" has host bits set past /8"));
    EXPECT_THAT(error_of("[[class]]\nname = \"default\"\nmatch = [\"example.com\"]\n"),
                StartsWith("p.toml:3:10: class \"default\".match[0]: \"example.com\" is not an IPv4 or IPv6 prefix"));
    EXPECT_THAT(error_of("[[class]]\nname = \"default\"\nmatch = [24]\n"),
                StartsWith("p.toml:3:10: class \"default\".match[0]: expected a CIDR string"));
}

TEST(PolicyToml, OnePrefixBelongsToOneClass) {
    const std::string e = error_of(R"toml([[class]]
name = "default"
match = ["2001:db8::/32"]
[[class]]
name = "web"
match = ["2001:0db8:0::/32"]
)toml");
    EXPECT_THAT(e, StartsWith("p.toml:6:10: class \"web\".match[0]: \"2001:0db8:0::/32\" conflicts with class "
                              "\"default\" (p.toml:3:10)"));
    EXPECT_THAT(error_of("[[class]]\nname = \"default\"\nmatch = [\"10.0.0.0/8\", \"10.0.0.0/8\"]\n"),
                StartsWith("p.toml:3:24: class \"default\".match[1]: \"10.0.0.0/8\" is listed twice in class "
                           "\"default\" (also at p.toml:3:10)"));
}

TEST(PolicyToml, AtMost255Classes) {
    EXPECT_TRUE(load(many_classes(255)).ok());
    EXPECT_THAT(error_of(many_classes(256)),
                StartsWith("p.toml:513:1: class #256: a policy holds at most 255 classes (ids 1..255)"));
}

TEST(PolicyToml, PrefixesBeyondTheCapacityAreRefusedWithTheNumbers) {
    PolicyLoadOptions options{4};
    options.prefix_capacity = 300;
    EXPECT_TRUE(load_policy_toml(many_prefixes(300), "p.toml", {}, options).ok());
    auto refused = load_policy_toml(many_prefixes(301), "p.toml", {}, options);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().message,
              "p.toml: the policy has 301 IPv4 prefixes; the dataplane holds 300 per family (raise prefix_capacity, "
              "at most 16777216)");
    EXPECT_EQ(refused.error().setting, "prefix_capacity");
}

TEST(PolicyToml, SourcePrefixSetTwiceMustAgree) {
    EXPECT_THAT(error_of(R"toml([[class]]
name = "default"
prefix_v4 = 24
per_source = { rate = 1, burst = 1, prefix_v4 = 16 }
)toml"),
                StartsWith("p.toml:4:49: class \"default\".per_source.prefix_v4: /16 contradicts class "
                           "\"default\".prefix_v4 = 24 (p.toml:3:13)"));
    EXPECT_TRUE(load("[[class]]\nname = \"default\"\nprefix_v6 = 48\nper_source = { rate = 1, burst = 1, "
                     "prefix_v6 = 48 }\n")
                    .ok());
}

TEST(PolicyToml, VersionMustBePositive) {
    EXPECT_THAT(error_of("version = 0\n[[class]]\nname = \"default\"\n"),
                StartsWith("p.toml:1:11: version: expected an integer of at least 1, got 0"));
}

TEST(PolicyToml, FilesThatCannotBeReadAreNamed) {
    auto missing = load_policy_file("/nonexistent/policy.toml", {}, PolicyLoadOptions{4});
    ASSERT_FALSE(missing.ok());
    EXPECT_THAT(missing.error().message, StartsWith("/nonexistent/policy.toml: cannot open: "));
    auto directory = load_policy_file(SLUICE_EXAMPLES_DIR, {}, PolicyLoadOptions{4});
    ASSERT_FALSE(directory.ok());
    EXPECT_THAT(directory.error().message, StartsWith(SLUICE_EXAMPLES_DIR ": cannot read: "));
}

TEST(PolicyToml, GarbageNeverThrows) {
    for (std::string_view text : {std::string_view("\xff\xfe\x00garbage", 10), std::string_view("[[[["),
                                  std::string_view("= = ="), std::string_view("")}) {
        auto loaded = load(text);
        EXPECT_FALSE(loaded.ok());
    }
}

}  // namespace
}  // namespace sluice::test::policy_toml_test
