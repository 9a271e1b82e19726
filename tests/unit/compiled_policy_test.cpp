// SPDX-License-Identifier: Apache-2.0
// What the dataplane relies on in a policy version, refused with a reason
// before anything is written.
#include <gmock/gmock.h>

#include "compiled_policy.h"
#include "core_support.h"

namespace sluice::test::compiled_policy_test {
namespace {

using ::testing::HasSubstr;

CompiledPolicy two_classes() {
    CompiledPolicy p;
    p.header.version = 3;
    p.header.default_class_id = 1;
    for (uint32_t id : {1u, 2u}) {
        sluice_class_entry cls{};
        cls.class_id = id;
        cls.prefix_v4 = 32;
        cls.prefix_v6 = 64;
        cls.per_source = compile_source_limit({100, 10, Unit::packets}, 1518, "test").value();
        p.classes.push_back(cls);
    }
    p.prefixes.push_back(parse_prefix("198.51.100.0/24", 2).value());
    p.prefixes.push_back(parse_prefix("2001:db8::/32", 2).value());
    mark_prefix_families(p);
    return p;
}

std::string error_of(const CompiledPolicy& p) {
    auto status = validate(p);
    EXPECT_FALSE(status.ok());
    return status.ok() ? std::string() : status.error().message;
}

TEST(CompiledPolicy, AValidPolicyPasses) {
    auto status = validate(two_classes());
    EXPECT_TRUE(status.ok()) << status.error().message;
}

TEST(CompiledPolicy, VersionZeroIsReserved) {
    CompiledPolicy p = two_classes();
    p.header.version = 0;
    EXPECT_THAT(error_of(p), HasSubstr("version 0 is reserved"));
}

TEST(CompiledPolicy, ClassIdsAreUniqueAndInRange) {
    CompiledPolicy p = two_classes();
    p.classes[1].class_id = 1;
    EXPECT_THAT(error_of(p), HasSubstr("class 1: id used twice"));
    p = two_classes();
    p.classes[1].class_id = SLUICE_MAX_CLASSES;
    EXPECT_THAT(error_of(p), HasSubstr("id must be within 1..255"));
    p.classes[1].class_id = SLUICE_CLASS_UNCLASSIFIED;
    EXPECT_THAT(error_of(p), HasSubstr("id must be within 1..255"));
}

TEST(CompiledPolicy, DefaultAndPrefixClassesMustExist) {
    CompiledPolicy p = two_classes();
    p.header.default_class_id = 9;
    EXPECT_THAT(error_of(p), HasSubstr("default class 9 is not defined"));
    p = two_classes();
    p.prefixes[0].class_id = 7;
    EXPECT_THAT(error_of(p), HasSubstr("prefix 198.51.100.0/24 names undefined class 7"));
}

TEST(CompiledPolicy, DuplicatePrefixesAreRefused) {
    CompiledPolicy p = two_classes();
    p.prefixes.insert(p.prefixes.begin(), parse_prefix("198.51.100.0/24", 1).value());
    EXPECT_THAT(error_of(p), HasSubstr("prefix 198.51.100.0/24 appears twice"));
}

TEST(CompiledPolicy, SourcePrefixLengthsAreBounded) {
    CompiledPolicy p = two_classes();
    p.classes[0].prefix_v6 = 0;
    EXPECT_THAT(error_of(p), HasSubstr("source prefix lengths"));
    p.classes[0].prefix_v6 = 129;
    EXPECT_THAT(error_of(p), HasSubstr("source prefix lengths"));
}

TEST(CompiledPolicy, OutOfRangeEnumsAreRefused) {
    CompiledPolicy p = two_classes();
    p.classes[0].action = 3;
    EXPECT_THAT(error_of(p), HasSubstr("action"));
    p = two_classes();
    p.header.malformed_verdict = 3;
    EXPECT_THAT(error_of(p), HasSubstr("verdict out of range"));
    // Unparsed frames have no class to be in shadow: pass or drop only.
    p = two_classes();
    p.header.non_ip_verdict = SLUICE_VERDICT_WOULD_DROP;
    EXPECT_THAT(error_of(p), HasSubstr("non_ip/malformed verdict out of range (pass or drop)"));
    p = two_classes();
    p.header.malformed_verdict = SLUICE_VERDICT_WOULD_DROP;
    EXPECT_THAT(error_of(p), HasSubstr("non_ip/malformed verdict out of range (pass or drop)"));
    p = two_classes();
    p.classes[1].aggregate.accuracy = 7;
    EXPECT_THAT(error_of(p), HasSubstr("unknown unit or accuracy"));
}

TEST(CompiledPolicy, ShadowIsAFlagAndNeverWithAShapeQueue) {
    CompiledPolicy p = two_classes();
    p.classes[0].shadow = 1;
    p.classes[1].action = SLUICE_ACTION_DROP;  // an action is shadowed too
    p.classes[1].shadow = 1;
    auto status = validate(p);
    EXPECT_TRUE(status.ok()) << status.error().message;
    p.classes[0].shadow = 2;
    EXPECT_THAT(error_of(p), HasSubstr("class 1: shadow must be 0 or 1"));

    // A shaped class holds packets; one in shadow must not.
    p = two_classes();
    p.classes[1].aggregate = make_level(1000, 100);
    p.classes[1].shape.queue_packets = 16;
    p.classes[1].shape.max_delay_ns = 50'000'000;
    status = validate(p);
    EXPECT_TRUE(status.ok()) << status.error().message;
    p.classes[1].shadow = 1;
    EXPECT_THAT(error_of(p), HasSubstr("class 2: shadow with a shape queue"));
}

// Class 2 of two_classes() held to a fleet quota of 1000 packets/s, burst 100,
// failing open at 300/s.
CompiledPolicy with_fleet() {
    CompiledPolicy p = two_classes();
    p.classes[1].fleet = 1;
    p.classes[1].fleet_unit = SLUICE_UNIT_PACKETS;
    FleetQuota q;
    q.class_id = 2;
    q.class_name = "bulk";
    q.rate_per_s = 1000;
    q.burst = 100;
    q.unit = SLUICE_UNIT_PACKETS;
    q.fail_open = true;
    q.fallback_rate_per_s = 300;
    q.definition_hash = fleet_definition_hash(1000, 100, SLUICE_UNIT_PACKETS);
    p.fleet.push_back(q);
    return p;
}

TEST(CompiledPolicy, FleetQuotasMatchTheirClassesAndAreInRange) {
    auto status = validate(with_fleet());
    EXPECT_TRUE(status.ok()) << status.error().message;

    CompiledPolicy p = with_fleet();
    p.classes[1].fleet = 2;
    EXPECT_THAT(error_of(p), HasSubstr("class 2: fleet must be 0 or 1"));
    p = with_fleet();
    p.classes[1].fleet_unit = SLUICE_UNIT_TCP_SYN + 1;
    EXPECT_THAT(error_of(p), HasSubstr("class 2: fleet_unit 3 out of range"));
    for (uint8_t action : {SLUICE_ACTION_PASS, SLUICE_ACTION_DROP}) {
        p = with_fleet();
        p.classes[1].action = action;
        EXPECT_THAT(error_of(p), HasSubstr("class 2: a fleet quota, but its action is not limit"));
    }
    // Quota and entry agree, both ways.
    p = with_fleet();
    p.fleet.clear();
    EXPECT_THAT(error_of(p), HasSubstr("class 2: fleet = 1 but no fleet quota"));
    p = with_fleet();
    p.classes[1].fleet = 0;
    EXPECT_THAT(error_of(p), HasSubstr("class 2: fleet quota of a class whose entry has fleet = 0"));
    p = with_fleet();
    p.fleet[0].class_id = 9;
    EXPECT_THAT(error_of(p), HasSubstr("class 9: fleet quota of a class that is not defined"));
    p = with_fleet();
    p.fleet.push_back(p.fleet[0]);
    EXPECT_THAT(error_of(p), HasSubstr("class 2: fleet quota given twice"));
    p = with_fleet();
    p.fleet[0].class_name.clear();
    EXPECT_THAT(error_of(p), HasSubstr("has no class name"));
    p = with_fleet();
    p.classes[1].fleet_unit = SLUICE_UNIT_BYTES;
    EXPECT_THAT(error_of(p), HasSubstr("unit packets is unknown or not the entry's fleet_unit bytes"));
    // Rates and burst.
    for (uint64_t rate : {uint64_t{0}, uint64_t{SLUICE_RATE_MAX + 1}}) {
        p = with_fleet();
        p.fleet[0].rate_per_s = rate;
        EXPECT_THAT(error_of(p), HasSubstr("class 2: fleet quota: rate " + std::to_string(rate) + " is outside 1.."));
    }
    for (uint64_t burst : {uint64_t{0}, uint64_t{SLUICE_BURST_MAX + 1}}) {
        p = with_fleet();
        p.fleet[0].burst = burst;
        EXPECT_THAT(error_of(p), HasSubstr("class 2: fleet quota: burst " + std::to_string(burst) + " is outside 1.."));
    }
    for (uint64_t fallback : {uint64_t{0}, uint64_t{1001}}) {
        p = with_fleet();
        p.fleet[0].fallback_rate_per_s = fallback;
        EXPECT_THAT(error_of(p), HasSubstr("fallback rate " + std::to_string(fallback) + " is outside 1..1000"));
    }
    p = with_fleet();
    p.fleet[0].fail_open = false;
    EXPECT_THAT(error_of(p), HasSubstr("a fallback rate, but it fails closed"));
    p.fleet[0].fallback_rate_per_s = 0;
    status = validate(p);
    EXPECT_TRUE(status.ok()) << status.error().message;
    // The hash is of what the quota says.
    p = with_fleet();
    p.fleet[0].rate_per_s = 2000;
    EXPECT_THAT(error_of(p), HasSubstr("is not that of rate=2000;burst=100;unit=packets"));
}

TEST(CompiledPolicy, ShapedClassesAreBoundedAndDrainAtAnAggregateRate) {
    CompiledPolicy p = two_classes();
    p.classes[1].aggregate = make_level(1000, 100);
    p.classes[1].shape.queue_packets = SLUICE_SHAPE_QUEUE_MAX;
    p.classes[1].shape.max_delay_ns = 50'000'000;
    auto status = validate(p);
    EXPECT_TRUE(status.ok()) << status.error().message;

    CompiledPolicy bad = p;
    bad.classes[1].shape.queue_packets = SLUICE_SHAPE_QUEUE_MAX + 1;
    EXPECT_THAT(error_of(bad), HasSubstr("class 2: shape queue must be 1..65536 packets"));
    for (uint64_t delay : {uint64_t{0}, kMinShapeDelayNs - 1, uint64_t{SLUICE_SHAPE_MAX_DELAY_NS + 1}}) {
        bad = p;
        bad.classes[1].shape.max_delay_ns = delay;
        EXPECT_THAT(error_of(bad), HasSubstr("class 2: shape max_delay_ns must be 1000000..60000000000"));
    }
    bad = p;
    bad.classes[1].aggregate.enabled = 0;
    EXPECT_THAT(error_of(bad), HasSubstr("class 2: shaped but has no aggregate limit to drain at"));
    bad = p;
    bad.classes[1].action = SLUICE_ACTION_PASS;
    EXPECT_THAT(error_of(bad), HasSubstr("class 2: shaped but its action is not limit"));

    // Queue 0 means not shaped: nothing else about shaping is checked.
    bad = two_classes();
    bad.classes[0].shape.max_delay_ns = 7;
    EXPECT_TRUE(validate(bad).ok());
}

TEST(CompiledPolicy, PrefixCapacityIsCheckedPerFamilyWithBothNumbers) {
    CompiledPolicy p = two_classes();
    for (uint32_t i = 0; i < 5; i++) {
        PolicyPrefix prefix;
        prefix.family = i < 3 ? SLUICE_FAMILY_IPV4 : SLUICE_FAMILY_IPV6;
        prefix.length = 32;
        prefix.addr[0] = 10;
        prefix.addr[3] = static_cast<uint8_t>(i);
        prefix.class_id = 1;
        p.prefixes.push_back(prefix);
    }
    sort_prefixes(p.prefixes);
    mark_prefix_families(p);
    ASSERT_TRUE(validate(p).ok()) << error_of(p);
    EXPECT_TRUE(check_prefix_capacity(p, 4, "prefix_capacity").ok());  // with two_classes()' 198.51.100.0/24
    const Status refused = check_prefix_capacity(p, 3, "prefix_capacity");
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().message,
              "the policy has 4 IPv4 prefixes; the dataplane holds 3 per family (raise prefix_capacity, at most " +
                  std::to_string(SLUICE_PREFIX_CAPACITY_MAX) + ")");
    EXPECT_EQ(refused.error().setting, "prefix_capacity");
}

TEST(CompiledPolicy, PrefixesMustBeSortedAndUnique) {
    CompiledPolicy p = two_classes();
    p.prefixes.clear();
    for (const uint8_t last : {2, 1}) {
        PolicyPrefix prefix;
        prefix.length = 32;
        prefix.addr[0] = 10;
        prefix.addr[3] = last;
        prefix.class_id = 1;
        p.prefixes.push_back(prefix);
    }
    mark_prefix_families(p);
    EXPECT_THAT(error_of(p), HasSubstr("10.0.0.1/32 is out of order"));  // after 10.0.0.2/32
    sort_prefixes(p.prefixes);
    EXPECT_TRUE(validate(p).ok());
    p.prefixes.push_back(p.prefixes.back());
    EXPECT_THAT(error_of(p), HasSubstr("10.0.0.2/32 appears twice"));
}

TEST(CompiledPolicy, PrefixChangesAreTheRemovedAndTheNewOrMoved) {
    const auto prefix = [](uint8_t last, uint32_t class_id) {
        PolicyPrefix p;
        p.length = 32;
        p.addr[0] = 10;
        p.addr[3] = last;
        p.class_id = class_id;
        return p;
    };
    const std::vector<PolicyPrefix> from = {prefix(1, 1), prefix(2, 1), prefix(3, 1)};
    const std::vector<PolicyPrefix> to = {prefix(2, 1), prefix(3, 2), prefix(4, 1)};
    const PrefixChanges changes = prefix_changes(from, to);
    ASSERT_EQ(changes.removed.size(), 1u);
    EXPECT_EQ(changes.removed[0].addr[3], 1);
    ASSERT_EQ(changes.written.size(), 2u);
    EXPECT_EQ(changes.written[0].addr[3], 3);
    EXPECT_EQ(changes.written[0].class_id, 2u);
    EXPECT_EQ(changes.written[1].addr[3], 4);
    EXPECT_TRUE(prefix_changes(to, to).removed.empty());
    EXPECT_TRUE(prefix_changes(to, to).written.empty());
    EXPECT_EQ(prefix_changes({}, to).written.size(), 3u);
    EXPECT_EQ(prefix_changes(to, {}).removed.size(), 3u);
}

TEST(CompiledPolicy, PrefixFamilyFlagsMustMatchThePrefixes) {
    CompiledPolicy p = two_classes();
    p.header.has_prefixes_v6 = 0;  // the trie would never be asked for 2001:db8::/32
    EXPECT_THAT(error_of(p), HasSubstr("prefix flags do not match"));
    p.prefixes.pop_back();
    EXPECT_TRUE(validate(p).ok());
}

TEST(CompiledPolicy, PerSourceLimitsAreBoundedAndNewSourcesNeedOne) {
    CompiledPolicy p = two_classes();
    p.classes[0].per_source.current.tolerance_ns = SLUICE_DEBT_MAX_NS + 1;
    EXPECT_THAT(error_of(p), HasSubstr("per-source limit has an unknown unit, or a burst outside"));
    p = two_classes();
    p.classes[0].per_source.generation = 4;
    EXPECT_FALSE(validate(p).ok());
    p = two_classes();
    p.classes[0].per_source = sluice_source_limit{};
    p.classes[0].new_sources = make_level(10, 10);
    EXPECT_THAT(error_of(p), HasSubstr("a new-source budget needs a per-source limit"));
    p = two_classes();
    p.classes[0].on_table_full = 3;
    EXPECT_THAT(error_of(p), HasSubstr("on_table_full out of range"));
}

// A changed per-source limit gets the next generation and what its sources'
// debts convert with; an unchanged one keeps both.
TEST(CarryPreviousLimits, ChangedLimitsGetTheNextGenerationAndAScale) {
    const CompiledPolicy running = two_classes();  // 100/s, burst 10: 10 ms a packet
    CompiledPolicy next = two_classes();
    next.classes[1].per_source = compile_source_limit({25, 10, Unit::packets}, 1518, "t").value();  // 40 ms
    carry_previous_limits(running.classes, next);
    EXPECT_EQ(next.classes[0].per_source.generation, 0);
    EXPECT_EQ(next.classes[0].per_source.previous_tolerance_ns, 0u);
    EXPECT_EQ(next.classes[1].per_source.generation, 1);
    EXPECT_EQ(next.classes[1].per_source.previous_tolerance_ns, 100'000'000u);
    EXPECT_EQ(next.classes[1].per_source.previous_scale, 4ULL << 32);  // 40 ms over 10 ms
    EXPECT_TRUE(validate(next).ok());

    // Applied again unchanged: the same generation, still converting.
    CompiledPolicy again = next;
    carry_previous_limits(next.classes, again);
    EXPECT_EQ(again.classes[1].per_source.generation, 1);
    EXPECT_EQ(again.classes[1].per_source.previous_scale, 4ULL << 32);
    // Four changes later the generation has come round.
    for (uint64_t rate : {20, 30, 40, 50}) {
        CompiledPolicy changed = again;
        changed.classes[1].per_source = compile_source_limit({rate, 10, Unit::packets}, 1518, "t").value();
        carry_previous_limits(again.classes, changed);
        again = changed;
    }
    EXPECT_EQ(again.classes[1].per_source.generation, 1);
}

// Makes class `index` of `p` count `limit` per `window_ns` by `algorithm`.
void set_window(CompiledPolicy& p, size_t index, Algorithm algorithm, uint64_t limit, uint64_t window_ns,
                Unit unit = Unit::packets) {
    auto compiled = compile_window_level(window_settings(algorithm, limit, window_ns, unit), "t");
    ASSERT_TRUE(compiled.ok()) << compiled.error().message;
    p.classes[index].aggregate = compiled.value().level;
    p.classes[index].aggregate_window = compiled.value().window;
}

TEST(CompiledPolicy, WindowAggregatesAreCheckedForWhatTheDataplaneRelies) {
    CompiledPolicy p = two_classes();
    set_window(p, 1, Algorithm::sliding_log, SLUICE_LOG_MAX, SLUICE_NANO, Unit::tcp_syn);
    set_window(p, 0, Algorithm::fixed_window, kWindowLimitMax, SLUICE_WINDOW_MAX_NS, Unit::bytes);
    auto status = validate(p);
    ASSERT_TRUE(status.ok()) << status.error().message;

    const auto refused = [&](auto change, std::string_view what) {
        CompiledPolicy bad = p;
        change(bad.classes[1]);
        EXPECT_THAT(error_of(bad), HasSubstr(std::string(what)));
    };
    refused([](sluice_class_entry& c) { c.aggregate_window.algorithm = SLUICE_ALGORITHM_COUNT; },
            "class 2: aggregate algorithm 4 out of range");
    refused([](sluice_class_entry& c) { c.aggregate_window.window_ns = SLUICE_WINDOW_MIN_NS - 1; },
            "class 2: aggregate window 999999 ns is outside 1000000..86400000000000");
    refused([](sluice_class_entry& c) { c.aggregate_window.window_ns = SLUICE_WINDOW_MAX_NS + 1; },
            "class 2: aggregate window 86400000000001 ns is outside");
    refused([](sluice_class_entry& c) { c.aggregate_window.limit = 0; },
            "class 2: aggregate limit 0 is outside 1..140737488355327");
    refused(
        [](sluice_class_entry& c) {
            c.aggregate_window.algorithm = SLUICE_ALGORITHM_FIXED_WINDOW;
            c.aggregate_window.limit = kWindowLimitMax + 1;
        },
        "class 2: aggregate limit 140737488355328 is outside");
    refused([](sluice_class_entry& c) { c.aggregate_window.index_bits = 32; },
            "class 2: aggregate window state must be kept in full (index_bits = count_bits = 64)");
    refused([](sluice_class_entry& c) { c.aggregate_window.count_bits = 32; }, "kept in full");
    refused([](sluice_class_entry& c) { c.aggregate_window.limit = SLUICE_LOG_MAX + 1; },
            "class 2: sliding_log limit 33 exceeds the log's 32 entries");
    refused([](sluice_class_entry& c) { c.aggregate.unit = SLUICE_UNIT_BYTES; },
            "class 2: sliding_log counts admissions, not bytes");
    refused([](sluice_class_entry& c) { c.aggregate.enabled = 0; },
            "class 2: aggregate algorithm sliding_log but not enabled");
    refused(
        [](sluice_class_entry& c) {
            c.shape.queue_packets = 10;
            c.shape.max_delay_ns = 50'000'000;
        },
        "class 2: shaped, but its aggregate is sliding_log: the queue drains at a token-bucket rate");

    // gcra: only the generation may be set.
    CompiledPolicy gcra = two_classes();
    gcra.classes[1].aggregate = make_level(1000, 100);
    gcra.classes[1].aggregate_window.generation = 9;
    status = validate(gcra);
    EXPECT_TRUE(status.ok()) << status.error().message;
    gcra.classes[1].aggregate_window.limit = 5;
    EXPECT_THAT(error_of(gcra), HasSubstr("class 2: a gcra aggregate has a window limit set"));
    gcra.classes[1].aggregate_window.limit = 0;
    gcra.classes[1].aggregate_window.index_bits = 64;
    EXPECT_THAT(error_of(gcra), HasSubstr("class 2: a gcra aggregate has a window limit set"));
}

// A new version of class 2's limit, and the line its restart logs.
struct RestartCase {
    std::string name;
    Algorithm algorithm;
    uint64_t limit, window_ns;
    Unit unit;
    std::string logged;
};

// The window generation: kept while the count still means the same, the
// version's otherwise, and each restart of an existing count reported.
TEST(CarryPreviousLimits, AWindowCountRestartsOnlyWhenItsMeaningChanges) {
    CompiledPolicy running = two_classes();
    running.header.version = 5;
    set_window(running, 1, Algorithm::fixed_window, 100, SLUICE_NANO);
    running.classes[0].aggregate = make_level(1000, 100);
    // The first version: every class is new, nothing restarts.
    EXPECT_TRUE(carry_previous_limits({}, running).empty());
    EXPECT_EQ(running.classes[0].aggregate_window.generation, 5u);
    EXPECT_EQ(running.classes[1].aggregate_window.generation, 5u);
    ASSERT_TRUE(validate(running).ok());

    const auto next_of = [&](auto change) {
        CompiledPolicy next = two_classes();
        next.header.version = 8;
        set_window(next, 1, Algorithm::fixed_window, 100, SLUICE_NANO);
        next.classes[0].aggregate = make_level(2000, 100);  // gcra, its rate changed: no window state either way
        change(next);
        return next;
    };

    // Unchanged, or only the limit changed: the counts still mean units in that window.
    for (uint64_t limit : {100u, 7u}) {
        CompiledPolicy next =
            next_of([&](CompiledPolicy& n) { set_window(n, 1, Algorithm::fixed_window, limit, SLUICE_NANO); });
        EXPECT_TRUE(carry_previous_limits(running.classes, next).empty()) << limit;
        EXPECT_EQ(next.classes[1].aggregate_window.generation, 5u) << limit;
        EXPECT_EQ(next.classes[0].aggregate_window.generation, 5u) << "gcra stays gcra";
        EXPECT_TRUE(validate(next).ok());
    }

    const RestartCase cases[] = {
        {"algorithm", Algorithm::sliding_window, 100, SLUICE_NANO, Unit::packets,
         "class 2: aggregate algorithm fixed_window -> sliding_window: its count starts from fresh state"},
        {"window", Algorithm::fixed_window, 100, 10 * SLUICE_NANO, Unit::packets,
         "class 2: aggregate window 1s -> 10s: its count starts from fresh state"},
        {"unit", Algorithm::fixed_window, 100, SLUICE_NANO, Unit::tcp_syn,
         "class 2: aggregate unit packets -> tcp_syn: its count starts from fresh state"},
        {"both", Algorithm::sliding_log, 10, 60 * SLUICE_NANO, Unit::packets,
         "class 2: aggregate algorithm fixed_window -> sliding_log, window 1s -> 1m: its count starts from fresh "
         "state"},
    };
    for (const RestartCase& c : cases) {
        CompiledPolicy next =
            next_of([&](CompiledPolicy& n) { set_window(n, 1, c.algorithm, c.limit, c.window_ns, c.unit); });
        const auto restarts = carry_previous_limits(running.classes, next);
        ASSERT_EQ(restarts.size(), 1u) << c.name;
        EXPECT_EQ(restarts[0].class_id, 2u);
        EXPECT_EQ(restarts[0].before.algorithm, SLUICE_ALGORITHM_FIXED_WINDOW);
        EXPECT_EQ(restarts[0].after.algorithm, static_cast<uint8_t>(c.algorithm));
        EXPECT_EQ(describe(restarts[0]), c.logged);
        EXPECT_EQ(next.classes[1].aggregate_window.generation, 8u) << c.name;
        EXPECT_EQ(next.classes[0].aggregate_window.generation, 5u) << c.name;
    }

    // A log is laid out by its limit: a new limit restarts it.
    CompiledPolicy log = two_classes();
    log.header.version = 9;
    set_window(log, 1, Algorithm::sliding_log, 10, SLUICE_NANO);
    carry_previous_limits(running.classes, log);
    CompiledPolicy smaller = log;
    smaller.header.version = 10;
    set_window(smaller, 1, Algorithm::sliding_log, 5, SLUICE_NANO);
    auto restarts = carry_previous_limits(log.classes, smaller);
    ASSERT_EQ(restarts.size(), 1u);
    EXPECT_EQ(describe(restarts[0]), "class 2: aggregate sliding_log limit 10 -> 5: its count starts from fresh state");
    EXPECT_EQ(smaller.classes[1].aggregate_window.generation, 10u);

    // gcra -> window restarts (reported); window -> gcra takes a new
    // generation but is no restart: the token bucket carries on.
    CompiledPolicy to_window = next_of([](CompiledPolicy&) {});
    set_window(to_window, 0, Algorithm::sliding_window, 50, SLUICE_NANO);
    CompiledPolicy to_gcra = to_window;
    to_gcra.classes[1].aggregate = make_level(1000, 100);
    to_gcra.classes[1].aggregate_window = sluice_window_limit{};
    restarts = carry_previous_limits(running.classes, to_gcra);
    ASSERT_EQ(restarts.size(), 1u);
    EXPECT_EQ(restarts[0].class_id, 1u);
    EXPECT_EQ(describe(restarts[0]),
              "class 1: aggregate algorithm gcra -> sliding_window: its count starts from fresh state");
    EXPECT_EQ(to_gcra.classes[0].aggregate_window.generation, 8u);
    EXPECT_EQ(to_gcra.classes[1].aggregate_window.generation, 8u);
    EXPECT_TRUE(validate(to_gcra).ok());

    // A class without an aggregate before, or a new one, had no count to lose.
    CompiledPolicy bare = two_classes();
    CompiledPolicy with = next_of([](CompiledPolicy&) {});
    with.classes.push_back(with.classes[1]);
    with.classes.back().class_id = 3;
    restarts = carry_previous_limits(bare.classes, with);
    EXPECT_TRUE(restarts.empty());
    EXPECT_EQ(with.classes[1].aggregate_window.generation, 8u);
    EXPECT_EQ(with.classes[2].aggregate_window.generation, 8u);
}

// Makes class `index` of `p` count `limit` per `window_ns` per source.
void set_source_window(CompiledPolicy& p, size_t index, Algorithm algorithm, uint64_t limit, uint64_t window_ns,
                       Unit unit = Unit::packets) {
    auto compiled = compile_source_window(window_settings(algorithm, limit, window_ns, unit), "t");
    ASSERT_TRUE(compiled.ok()) << compiled.error().message;
    p.classes[index].per_source = compiled.value();
}

TEST(CompiledPolicy, PerSourceWindowsMustFitAnEntry) {
    CompiledPolicy p = two_classes();
    set_source_window(p, 0, Algorithm::fixed_window, 10, 60 * SLUICE_NANO, Unit::tcp_syn);
    set_source_window(p, 1, Algorithm::sliding_window, 100'000, 35 * SLUICE_NANO, Unit::bytes);
    auto status = validate(p);
    ASSERT_TRUE(status.ok()) << status.error().message;

    const auto refused = [&](auto change, std::string_view what) {
        CompiledPolicy bad = p;
        change(bad.classes[1].per_source);
        EXPECT_THAT(error_of(bad), HasSubstr(std::string(what)));
    };
    const std::string unfit = "class 2: per-source sliding_window limit ";
    refused([](sluice_source_limit& l) { l.window.window_ns = 34 * SLUICE_NANO; },
            unfit + "100000 per 34000000000 ns (count_bits 17, index_bits 64) does not fit a source-table entry");
    refused([](sluice_source_limit& l) { l.window.count_bits = 16; }, "(count_bits 16, index_bits 64) does not fit");
    refused([](sluice_source_limit& l) { l.window.window_ns = SLUICE_DEBT_MAX_NS / 2; }, "does not fit");
    refused([](sluice_source_limit& l) { l.window.limit = 0; }, "limit 0 per");
    refused([](sluice_source_limit& l) { l.window.index_bits = 32; }, "(count_bits 17, index_bits 32) does not fit");
    refused([](sluice_source_limit& l) { l.window.algorithm = SLUICE_ALGORITHM_SLIDING_LOG; },
            "class 2: per-source algorithm sliding_log: a source-table entry is one 64-bit word and cannot hold a log "
            "of admission times");
    refused([](sluice_source_limit& l) { l.window.algorithm = SLUICE_ALGORITHM_COUNT; },
            "class 2: per-source algorithm 4 out of range");
    refused([](sluice_source_limit& l) { l.current.unit = 3; }, "class 2: per-source limit has an unknown unit 3");
    refused([](sluice_source_limit& l) { l.previous_fresh = 2; },
            "class 2: per-source generation (0..3) or previous_fresh (0, 1) out of range");
    refused([](sluice_source_limit& l) { l.generation = 4; }, "out of range");

    // gcra: no window may be set beside it, and its bucket is checked as before.
    CompiledPolicy gcra = two_classes();
    gcra.classes[1].per_source.previous_fresh = 1;
    status = validate(gcra);
    EXPECT_TRUE(status.ok()) << status.error().message;
    gcra.classes[1].per_source.window.limit = 5;
    EXPECT_THAT(error_of(gcra), HasSubstr("class 2: a gcra per-source limit has a window limit set"));
    gcra = two_classes();
    gcra.classes[1].per_source.window.count_bits = 7;
    EXPECT_THAT(error_of(gcra), HasSubstr("class 2: a gcra per-source limit has a window limit set"));
    // A limit that does not limit is not looked at.
    gcra = two_classes();
    gcra.classes[1].per_source = sluice_source_limit{};
    gcra.classes[1].per_source.window.algorithm = SLUICE_ALGORITHM_SLIDING_LOG;
    EXPECT_TRUE(validate(gcra).ok());
}

// A per-source change of algorithm, or of a window's window, unit or count
// width, restarts the class's sources: the next generation, previous_fresh,
// nothing to convert, and a restart to log and count. A window's limit alone
// keeps the counts.
TEST(CarryPreviousLimits, APerSourceCountRestartsWhenItsLayoutChanges) {
    CompiledPolicy running = two_classes();  // both gcra 100/s burst 10
    set_source_window(running, 1, Algorithm::fixed_window, 10, 60 * SLUICE_NANO);
    running.classes[1].per_source.generation = 2;
    ASSERT_TRUE(carry_previous_limits({}, running).empty());  // new classes: generation 0
    running.classes[1].per_source.generation = 2;
    ASSERT_TRUE(validate(running).ok());

    const RestartCase cases[] = {
        {"algorithm", Algorithm::sliding_window, 10, 60 * SLUICE_NANO, Unit::packets,
         "class 2: per_source algorithm fixed_window -> sliding_window: its sources' counts start from fresh state"},
        {"window", Algorithm::fixed_window, 10, 600 * SLUICE_NANO, Unit::packets,
         "class 2: per_source window 1m -> 10m: its sources' counts start from fresh state"},
        {"unit", Algorithm::fixed_window, 10, 60 * SLUICE_NANO, Unit::tcp_syn,
         "class 2: per_source unit packets -> tcp_syn: its sources' counts start from fresh state"},
        {"count width", Algorithm::fixed_window, 16, 60 * SLUICE_NANO, Unit::packets,
         "class 2: per_source limit 10 -> 16, count width 4 -> 5 bits: its sources' counts start from fresh state"},
    };
    for (const RestartCase& c : cases) {
        CompiledPolicy next = two_classes();
        set_source_window(next, 1, c.algorithm, c.limit, c.window_ns, c.unit);
        const auto restarts = carry_previous_limits(running.classes, next);
        ASSERT_EQ(restarts.size(), 1u) << c.name;
        EXPECT_EQ(restarts[0].class_id, 2u);
        EXPECT_EQ(restarts[0].level, SLUICE_LEVEL_SOURCE);
        EXPECT_EQ(describe(restarts[0]), c.logged);
        const sluice_source_limit& limit = next.classes[1].per_source;
        EXPECT_EQ(limit.generation, 3) << c.name;
        EXPECT_EQ(limit.previous_fresh, 1) << c.name;
        EXPECT_EQ(limit.previous_tolerance_ns, 0u) << c.name;
        EXPECT_EQ(limit.previous_scale, 0u) << c.name;
        EXPECT_EQ(next.classes[0].per_source.generation, 0) << "unchanged gcra";
        EXPECT_EQ(next.classes[0].per_source.previous_fresh, 0);
        EXPECT_TRUE(validate(next).ok()) << c.name;
    }

    // The limit alone, within the same count width: the counts carry on.
    for (uint64_t limit : {10u, 15u, 8u}) {
        CompiledPolicy next = two_classes();
        set_source_window(next, 1, Algorithm::fixed_window, limit, 60 * SLUICE_NANO);
        next.classes[1].per_source.previous_fresh = 1;  // whatever the compiler left
        EXPECT_TRUE(carry_previous_limits(running.classes, next).empty()) << limit;
        EXPECT_EQ(next.classes[1].per_source.generation, 2) << limit;
        EXPECT_EQ(next.classes[1].per_source.previous_fresh, 0) << limit;
    }

    // Back to gcra: a restart too, its sources read as fresh rather than
    // converted; the generation comes round from 3 to 0.
    CompiledPolicy sliding = two_classes();
    set_source_window(sliding, 1, Algorithm::sliding_window, 10, 60 * SLUICE_NANO);
    carry_previous_limits(running.classes, sliding);
    ASSERT_EQ(sliding.classes[1].per_source.generation, 3);
    CompiledPolicy gcra = two_classes();
    auto restarts = carry_previous_limits(sliding.classes, gcra);
    ASSERT_EQ(restarts.size(), 1u);
    EXPECT_EQ(describe(restarts[0]),
              "class 2: per_source algorithm sliding_window -> gcra: its sources' counts start from fresh state");
    EXPECT_EQ(gcra.classes[1].per_source.generation, 0);
    EXPECT_EQ(gcra.classes[1].per_source.previous_fresh, 1);
    EXPECT_EQ(gcra.classes[1].per_source.previous_tolerance_ns, 0u);
    EXPECT_TRUE(validate(gcra).ok());
    // Applied again unchanged, the window's entries still read as fresh.
    CompiledPolicy again = two_classes();
    EXPECT_TRUE(carry_previous_limits(gcra.classes, again).empty());
    EXPECT_EQ(again.classes[1].per_source.generation, 0);
    EXPECT_EQ(again.classes[1].per_source.previous_fresh, 1);
    // A new gcra limit then converts what the gcra before it wrote, as always.
    CompiledPolicy slower = two_classes();
    slower.classes[1].per_source = compile_source_limit({25, 10, Unit::packets}, 1518, "t").value();
    EXPECT_TRUE(carry_previous_limits(again.classes, slower).empty());
    EXPECT_EQ(slower.classes[1].per_source.generation, 1);
    EXPECT_EQ(slower.classes[1].per_source.previous_fresh, 0);
    EXPECT_EQ(slower.classes[1].per_source.previous_tolerance_ns, 100'000'000u);

    // gcra to a window: from the first class too, beside an aggregate restart.
    CompiledPolicy both = two_classes();
    set_window(running, 0, Algorithm::fixed_window, 100, SLUICE_NANO);
    set_window(both, 0, Algorithm::sliding_window, 100, SLUICE_NANO);
    set_source_window(both, 0, Algorithm::fixed_window, 10, 60 * SLUICE_NANO);
    set_source_window(both, 1, Algorithm::fixed_window, 10, 60 * SLUICE_NANO);
    restarts = carry_previous_limits(running.classes, both);
    ASSERT_EQ(restarts.size(), 2u);
    EXPECT_EQ(describe(restarts[0]),
              "class 1: per_source algorithm gcra -> fixed_window: its sources' counts start from fresh state");
    EXPECT_EQ(describe(restarts[1]),
              "class 1: aggregate algorithm fixed_window -> sliding_window: its count starts from fresh state");
    EXPECT_EQ(both.classes[0].per_source.generation, 1);
    EXPECT_EQ(both.classes[0].per_source.previous_fresh, 1);
    EXPECT_EQ(both.classes[1].per_source.generation, 2) << "class 2 kept its window";

    // A per-source limit newly set (a new class, or one without it before)
    // had no counts: a new generation, no restart.
    CompiledPolicy bare = two_classes();
    bare.classes[1].per_source = sluice_source_limit{};
    bare.classes[1].per_source.generation = 1;
    CompiledPolicy window = two_classes();
    set_source_window(window, 1, Algorithm::sliding_window, 10, 60 * SLUICE_NANO);
    EXPECT_TRUE(carry_previous_limits(bare.classes, window).empty());
    EXPECT_EQ(window.classes[1].per_source.generation, 2);
    EXPECT_EQ(window.classes[1].per_source.previous_fresh, 0);
}

// A per-source bucket that takes too long to refill is refused with the
// largest burst that does fit, and that burst fits, in both units.
TEST(CompileSourceLimit, ATooLongRefillSuggestsTheLargestBurstThatFits) {
    for (const Unit unit : {Unit::packets, Unit::bytes}) {
        for (uint64_t rate : {1ull, 7ull, 1000ull, 300'007ull, 900'001ull}) {
            const uint64_t burst = 4'000'000'000;
            auto refused = compile_source_limit({rate, burst, unit}, 64, "t");
            ASSERT_FALSE(refused.ok()) << rate;
            const std::string& message = refused.error().message;
            const auto at = message.find("lower burst to at most ");
            ASSERT_NE(at, std::string::npos) << message;
            const uint64_t suggested = std::stoull(message.substr(at + 23));
            EXPECT_TRUE(compile_source_limit({rate, suggested, unit}, 64, "t").ok()) << message;
            EXPECT_FALSE(compile_source_limit({rate, suggested + 1, unit}, 64, "t").ok()) << message;
        }
    }
}

TEST(ParsePrefix, AcceptsBothFamiliesAndBareAddresses) {
    auto v4 = parse_prefix("192.0.2.0/24", 1);
    ASSERT_TRUE(v4.ok());
    EXPECT_EQ(v4.value().family, SLUICE_FAMILY_IPV4);
    EXPECT_EQ(v4.value().length, 24);
    EXPECT_EQ(v4.value().addr[0], 192);
    auto host = parse_prefix("2001:db8::1", 1);
    ASSERT_TRUE(host.ok());
    EXPECT_EQ(host.value().family, SLUICE_FAMILY_IPV6);
    EXPECT_EQ(host.value().length, 128);
    auto all = parse_prefix("0.0.0.0/0", 1);
    ASSERT_TRUE(all.ok());
    EXPECT_EQ(all.value().length, 0);
}

TEST(ParsePrefix, RefusesWhatIsNotAPrefix) {
    for (const char* bad : {"", "198.51.100.0/", "198.51.100.0/33", "2001:db8::/129", "198.51.100.0/-1",
                            "198.51.100.0/2x", "300.1.1.1/8", "example.com/24", "198.51.100.0/0024"}) {
        EXPECT_FALSE(parse_prefix(bad, 1).ok()) << bad;
    }
    auto host_bits = parse_prefix("198.51.100.1/24", 1);
    ASSERT_FALSE(host_bits.ok());
    EXPECT_THAT(host_bits.error().message, HasSubstr("host bits set past /24"));
}

}  // namespace
}  // namespace sluice::test::compiled_policy_test
