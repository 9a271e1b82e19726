// SPDX-License-Identifier: Apache-2.0
// Shared by the tests of every dataplane (tests/bpf for XDP, tests/dpdk for
// sluice-dpdk): the fake clock's units and start, verdict shorthands, a
// policy builder over compile_level and parse_prefix, frame shorthands and
// sums over the class x verdict x reason counters. Nothing here knows which
// dataplane runs the policy; tests/common/verdict_scenarios.h builds on it.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/packet_builder.h"
#include "compiled_policy.h"
#include "rate_limits.h"
#include "sluice/abi.h"

namespace sluice::test {

using Bytes = PacketBuilder::Bytes;

inline constexpr uint64_t kMs = 1'000'000;
inline constexpr uint64_t kSec = 1'000'000'000;
// Where the fake clock starts: far from 0, which a bucket reads as "new".
// A fixture may give each test its own time zero (the XDP one does: see
// SharedDataplane in tests/bpf/xdp_fixture.h); scenarios ask the target's t0().
inline constexpr uint64_t kT0 = 1000 * kSec;

inline constexpr uint8_t kPass = SLUICE_VERDICT_PASS;
inline constexpr uint8_t kDrop = SLUICE_VERDICT_DROP;

template <class T>
std::string describe(const Result<T>& r) {
    return r.ok() ? std::string("ok") : r.error().message;
}

#define SLUICE_ASSERT_OK(expr)                                                                       \
    do {                                                                                             \
        const auto& sluice_result = (expr);                                                          \
        ASSERT_TRUE(sluice_result.ok()) << #expr << ": " << ::sluice::test::describe(sluice_result); \
    } while (0)
#define SLUICE_EXPECT_OK(expr)                                                                       \
    do {                                                                                             \
        const auto& sluice_result = (expr);                                                          \
        EXPECT_TRUE(sluice_result.ok()) << #expr << ": " << ::sluice::test::describe(sluice_result); \
    } while (0)

// ---- frames -------------------------------------------------------------------

// A UDP datagram from `source` (IPv4 or IPv6); 60 bytes for IPv4 by default.
inline Bytes udp_from(const std::string& source, size_t payload = 18) {
    PacketBuilder b;
    b.eth();
    if (source.find(':') == std::string::npos)
        b.ipv4(source, "198.51.100.1");
    else
        b.ipv6(source, "2001:db8:ffff::1");
    return b.udp(1000, 53).payload(payload).build();
}

// A TCP segment from `source` to port 22 with these flags (0x02: SYN).
inline Bytes tcp_from(const std::string& source, uint8_t flags) {
    return PacketBuilder().eth().ipv4(source, "198.51.100.1").tcp(40000, 22, flags).build();
}

// ---- policies -------------------------------------------------------------------

// One human limit, as a policy file would state it. A per-source limit uses
// rate, burst, unit and max_frame_bytes only (it is exact across CPUs).
struct Limit {
    uint64_t rate = 0;
    uint64_t burst = 0;
    Unit unit = Unit::packets;
    Accuracy accuracy = Accuracy::lease;
    uint32_t max_frame_bytes = kDefaultMaxFrameBytes;
    uint64_t lease = 0;  // 0: compile_level's default
    uint64_t lease_ttl_ns = kDefaultLeaseTtlNs;
};

inline sluice_level_limit compile(const Limit& limit, uint32_t cpus) {
    LevelSettings settings;
    settings.limit = {limit.rate, limit.burst, limit.unit};
    settings.accuracy = limit.accuracy;
    settings.cpus = cpus;
    settings.max_frame_bytes = limit.max_frame_bytes;
    settings.lease = limit.lease;
    settings.lease_ttl_ns = limit.lease_ttl_ns;
    auto level = compile_level(settings, "test");
    EXPECT_TRUE(level.ok()) << describe(level);
    return level.ok() ? level.value() : sluice_level_limit{};
}

// A per-source limit takes no accuracy or lease: it is exact on every CPU.
inline sluice_source_limit compile_source(const Limit& limit) {
    EXPECT_TRUE(limit.accuracy == Accuracy::lease && limit.lease == 0 && limit.lease_ttl_ns == kDefaultLeaseTtlNs)
        << "a per-source Limit sets accuracy or lease, which per-source limits do not have";
    auto compiled = compile_source_limit({limit.rate, limit.burst, limit.unit}, limit.max_frame_bytes, "test");
    EXPECT_TRUE(compiled.ok()) << describe(compiled);
    return compiled.ok() ? compiled.value() : sluice_source_limit{};
}

// A window algorithm's limit for a class aggregate or its sources: `limit`
// units per `window_ns`.
struct WindowLimit {
    uint8_t algorithm = SLUICE_ALGORITHM_FIXED_WINDOW;
    uint64_t limit = 0;
    uint64_t window_ns = 0;
    Unit unit = Unit::packets;
};

// A class's penalty box as a policy states it (its `penalty` table); needs a
// gcra per-source limit in the same ClassSpec.
struct PenaltyLimit {
    uint64_t over = 0;
    uint64_t within_ns = 1'000'000'000;
    uint64_t for_ns = 0;
};

// A class's fleet quota as a policy states it (its `fleet` table). The
// dataplane sees only the class entry's fleet and fleet_unit, and spends the
// credit the test grants into the target's fleet_credits().
struct FleetLimit {
    uint64_t rate = 1'000'000;
    uint64_t burst = 100'000;
    Unit unit = Unit::packets;
    bool fail_open = false;      // on_unavailable = "open"
    uint64_t fallback_rate = 0;  // open only
};

struct ClassSpec {
    uint32_t id = 1;
    uint8_t action = SLUICE_ACTION_LIMIT;
    std::optional<Limit> per_source = std::nullopt;
    std::optional<WindowLimit> per_source_window = std::nullopt;  // instead of `per_source`
    std::optional<Limit> new_sources = std::nullopt;
    std::optional<Limit> aggregate = std::nullopt;
    std::optional<WindowLimit> aggregate_window = std::nullopt;  // instead of `aggregate`
    bool shadow = false;                                         // decide and count, pass what it would drop
    uint8_t on_table_full = SLUICE_TABLE_FULL_EVICT;
    uint8_t prefix_v4 = 32;
    uint8_t prefix_v6 = 64;
    // Shaping (sluice-dpdk only; XDP ignores it): 0 packets is "not shaped".
    uint32_t shape_queue = 0;
    uint64_t shape_max_delay_ns = 0;
    std::optional<FleetLimit> fleet = std::nullopt;  // held to a fleet quota too
    std::optional<PenaltyLimit> penalty = std::nullopt;
};

// A policy in a few lines. The first class added is the default class unless
// default_class() says otherwise.
class PolicyBuilder {
  public:
    explicit PolicyBuilder(uint32_t cpus, uint64_t version = 1) : cpus_(cpus) {
        policy_.header.version = version;
        policy_.header.non_ip_verdict = SLUICE_VERDICT_PASS;
        policy_.header.malformed_verdict = SLUICE_VERDICT_DROP;
    }

    PolicyBuilder& version(uint64_t v) {
        policy_.header.version = v;
        return *this;
    }
    PolicyBuilder& global(const Limit& limit) {
        policy_.header.global = compile(limit, cpus_);
        return *this;
    }
    PolicyBuilder& add(const ClassSpec& spec) {
        sluice_class_entry cls{};
        cls.class_id = spec.id;
        cls.action = spec.action;
        cls.on_table_full = spec.on_table_full;
        cls.prefix_v4 = spec.prefix_v4;
        cls.prefix_v6 = spec.prefix_v6;
        cls.shape.queue_packets = spec.shape_queue;
        cls.shape.max_delay_ns = spec.shape_max_delay_ns;
        cls.shadow = spec.shadow;
        if (spec.per_source) cls.per_source = compile_source(*spec.per_source);
        if (spec.per_source_window) {
            const WindowLimit& w = *spec.per_source_window;
            auto limit = compile_source_window(
                {static_cast<Algorithm>(w.algorithm), w.limit, w.window_ns, w.unit, kDefaultMaxFrameBytes}, "test");
            EXPECT_TRUE(limit.ok()) << describe(limit);
            if (limit.ok()) cls.per_source = limit.value();
        }
        if (spec.penalty) {
            auto penalty =
                compile_penalty(cls.per_source, spec.penalty->over, spec.penalty->within_ns, spec.penalty->for_ns, "test");
            EXPECT_TRUE(penalty.ok()) << describe(penalty);
            if (penalty.ok()) cls.penalty = penalty.value();
        }
        if (spec.new_sources) cls.new_sources = compile(*spec.new_sources, cpus_);
        if (spec.aggregate) cls.aggregate = compile(*spec.aggregate, cpus_);
        if (spec.aggregate_window) {
            const WindowLimit& w = *spec.aggregate_window;
            auto level = compile_window_level(
                {static_cast<Algorithm>(w.algorithm), w.limit, w.window_ns, w.unit, kDefaultMaxFrameBytes}, "test");
            EXPECT_TRUE(level.ok()) << describe(level);
            if (level.ok()) {
                cls.aggregate = level.value().level;
                cls.aggregate_window = level.value().window;
            }
        }
        if (spec.fleet) {
            const FleetLimit& f = *spec.fleet;
            cls.fleet = 1;
            cls.fleet_unit = static_cast<uint8_t>(f.unit);
            FleetQuota quota;
            quota.class_id = spec.id;
            quota.class_name = "class" + std::to_string(spec.id);
            quota.rate_per_s = f.rate;
            quota.burst = f.burst;
            quota.unit = cls.fleet_unit;
            quota.fail_open = f.fail_open;
            quota.fallback_rate_per_s = f.fallback_rate;
            quota.definition_hash = fleet_definition_hash(f.rate, f.burst, quota.unit);
            policy_.fleet.push_back(quota);
        }
        if (policy_.classes.empty() && !default_set_) policy_.header.default_class_id = spec.id;
        policy_.classes.push_back(cls);
        return *this;
    }
    PolicyBuilder& default_class(uint32_t id) {
        policy_.header.default_class_id = id;
        default_set_ = true;
        return *this;
    }
    PolicyBuilder& prefix(const std::string& cidr, uint32_t class_id) {
        auto p = parse_prefix(cidr, class_id);
        EXPECT_TRUE(p.ok()) << describe(p);
        if (p.ok()) policy_.prefixes.push_back(p.value());
        return *this;
    }
    PolicyBuilder& non_ip(uint8_t verdict) {
        policy_.header.non_ip_verdict = verdict;
        return *this;
    }
    PolicyBuilder& malformed(uint8_t verdict) {
        policy_.header.malformed_verdict = verdict;
        return *this;
    }
    CompiledPolicy build() const {
        CompiledPolicy policy = policy_;
        sort_prefixes(policy.prefixes);
        mark_prefix_families(policy);
        const Status valid = validate(policy);
        EXPECT_TRUE(valid.ok()) << describe(valid);
        return policy;
    }

  private:
    uint32_t cpus_;
    bool default_set_ = false;
    CompiledPolicy policy_;
};

// ---- counters -------------------------------------------------------------------

// One read of the class x verdict x reason counters.
struct Counts {
    std::vector<sluice_counter> slots;

    const sluice_counter& at(uint32_t class_id, uint32_t verdict, uint32_t reason) const {
        return slots.at(sluice_counter_index(class_id, verdict, reason));
    }
    uint64_t packets(uint32_t class_id, uint32_t verdict, uint32_t reason) const {
        return at(class_id, verdict, reason).packets;
    }
    uint64_t bytes(uint32_t class_id, uint32_t verdict, uint32_t reason) const {
        return at(class_id, verdict, reason).bytes;
    }
    // Packets with this reason in every class and verdict.
    uint64_t reason(uint32_t reason) const {
        uint64_t sum = 0;
        for (uint32_t c = 0; c < SLUICE_MAX_CLASSES; c++)
            for (uint32_t v = 0; v < SLUICE_VERDICT_COUNT; v++) sum += packets(c, v, reason);
        return sum;
    }
    uint64_t verdict(uint32_t verdict) const {
        uint64_t sum = 0;
        for (uint32_t c = 0; c < SLUICE_MAX_CLASSES; c++)
            for (uint32_t r = 0; r < SLUICE_REASON_COUNT; r++) sum += packets(c, verdict, r);
        return sum;
    }
    uint64_t total() const {
        uint64_t sum = 0;
        for (const auto& c : slots) sum += c.packets;
        return sum;
    }
};

// Test names for suites run once per accuracy mode.
inline std::string accuracy_name(const ::testing::TestParamInfo<Accuracy>& info) {
    return info.param == Accuracy::split ? "split" : "lease";
}

}  // namespace sluice::test
