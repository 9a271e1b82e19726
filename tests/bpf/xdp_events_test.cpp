// SPDX-License-Identifier: Apache-2.0
// Sampled drop events from the real program: about one drop in `period`
// becomes a ring buffer event that names the source and stands for the drops
// up to the next one sampled (sluice/account.h); in
// a flood at the program's full rate the period adapts so that each source's
// weights stay within the sampling error of its drops.
#include <gtest/gtest.h>

#include <functional>

#include "common/flood_sampling.h"
#include "common/verdict_scenarios.h"
#include "xdp_fixture.h"

namespace sluice::test {
namespace {

constexpr uint32_t kPeriod = 16;

class XdpDropEvents : public XdpTest {
  protected:
    XdpOptions options() const override {
        return XdpOptions{
            .test_clock = true, .source_capacity = kTestCapacity, .drop_sample_period = kPeriod, .pin_dir = {}};
    }
    // The per-CPU sampler starts at 0 only in a new dataplane.
    bool fresh_dataplane() const override { return true; }
};

TEST_F(XdpDropEvents, FloodPastTheBurstSendsEventsWhoseWeightsAddUpToTheDrops) {
    apply(policy().add({.id = 5, .per_source = Limit{.rate = 1, .burst = 3}}).build());
    const Bytes frame = udp_from("192.0.2.99");
    EXPECT_EQ(run(frame, 1000), static_cast<uint32_t>(XDP_DROP));
    const uint64_t drops = counts().packets(5, kDrop, SLUICE_REASON_SOURCE);
    ASSERT_EQ(drops, 997u);

    const auto events = drain_events();
    // On one CPU the first drop is sampled, and each event stands for itself
    // and the gap to the next, drawn from [period / 2, period * 3 / 2): the
    // weights cover the drops and at most the rest of the last gap.
    uint64_t weights = 0;
    for (const auto& e : events) {
        EXPECT_GE(e.weight, kPeriod / 2);
        EXPECT_LT(e.weight, kPeriod * 3 / 2);
        weights += e.weight;
    }
    EXPECT_GE(weights, drops);
    EXPECT_LT(weights, drops + kPeriod * 3 / 2);
    EXPECT_EQ(stat(SLUICE_STAT_DROP_EVENTS_SENT), events.size());
    EXPECT_EQ(stat(SLUICE_STAT_DROP_EVENTS_LOST), 0u);

    const auto addr = PacketBuilder::address("192.0.2.99");
    for (const auto& e : events) {
        EXPECT_EQ(e.source.class_id, 5u);
        EXPECT_EQ(e.source.family, SLUICE_FAMILY_IPV4);
        EXPECT_EQ(std::memcmp(e.source.addr, addr.data(), sizeof(e.source.addr)), 0);
        EXPECT_EQ(e.reason, SLUICE_REASON_SOURCE);
        EXPECT_EQ(e.verdict, SLUICE_VERDICT_DROP);
        EXPECT_EQ(e.frame_len, frame.size());
        EXPECT_EQ(e.time_ns, t0_);
    }
    // Drained: nothing left.
    EXPECT_TRUE(drain_events().empty());
}

// Period 1: every drop is an event of weight 1.
class XdpEveryDropEvents : public XdpDropEvents {
  protected:
    XdpOptions options() const override {
        return XdpOptions{.test_clock = true, .source_capacity = kTestCapacity, .drop_sample_period = 1, .pin_dir = {}};
    }
};

TEST_F(XdpEveryDropEvents, EventsCarryTheReasonAndTheAggregatedSource) {
    apply(policy()
              .add({.id = 1, .per_source = Limit{.rate = 1, .burst = 1}})
              .add({.id = 2, .action = SLUICE_ACTION_DROP})
              .prefix("2001:db8:bad::/48", 2)
              .build());
    EXPECT_EQ(verdicts(udp_from("2001:db8:bad:1:2:3:4:5"), 1), "D");
    EXPECT_EQ(verdicts(udp_from("2001:db8:1:2:aaaa:bbbb:cccc:dddd"), 2), "PD");

    const auto events = drain_events();
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[0].reason, SLUICE_REASON_DENY);
    EXPECT_EQ(events[0].source.class_id, 2u);
    EXPECT_EQ(events[1].reason, SLUICE_REASON_SOURCE);
    EXPECT_EQ(events[1].source.class_id, 1u);
    EXPECT_EQ(events[1].source.family, SLUICE_FAMILY_IPV6);
    // The key is the /64 the bucket belongs to, not the full address.
    const auto slash64 = PacketBuilder::address("2001:db8:1:2::");
    EXPECT_EQ(std::memcmp(events[1].source.addr, slash64.data(), 16), 0);
    for (const auto& e : events) EXPECT_EQ(e.weight, 1u);
}

// A class in shadow samples what it would drop like a drop, with its
// verdict, so hot-source detection can tell shadow from enforcement.
TEST_F(XdpEveryDropEvents, AClassInShadowSamplesWouldDropsWithTheirVerdict) {
    apply(policy().add({.id = 3, .per_source = Limit{.rate = 1, .burst = 1}, .shadow = true}).build());
    EXPECT_EQ(run(udp_from("192.0.2.7"), 2), static_cast<uint32_t>(XDP_PASS));
    EXPECT_EQ(counts().packets(3, SLUICE_VERDICT_WOULD_DROP, SLUICE_REASON_SOURCE), 1u);
    const auto events = drain_events();
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].verdict, SLUICE_VERDICT_WOULD_DROP);
    EXPECT_EQ(events[0].reason, SLUICE_REASON_SOURCE);
    EXPECT_EQ(events[0].source.class_id, 3u);
    EXPECT_EQ(events[0].weight, 1u);
}

TEST_F(XdpDropEvents, UnparsedDropsSendNoEvents) {
    apply(policy().add({.id = 1, .per_source = Limit{.rate = 1, .burst = 1}}).malformed(kDrop).non_ip(kDrop).build());
    EXPECT_EQ(run(PacketBuilder().eth().ipv4("192.0.2.1", "198.51.100.1").ihl(3).build(), 100),
              static_cast<uint32_t>(XDP_DROP));
    EXPECT_EQ(run(PacketBuilder().eth().ethertype(0x0806).payload(28).build(), 100), static_cast<uint32_t>(XDP_DROP));
    EXPECT_TRUE(drain_events().empty());
    EXPECT_EQ(stat(SLUICE_STAT_DROP_EVENTS_SENT), 0u);
}

// A closed table's refusals are drops of a known source, sampled like any.
class XdpTableFullEvents : public XdpTest {
  protected:
    XdpOptions options() const override {
        return XdpOptions{.test_clock = true, .source_capacity = scenarios::kTableFullCapacity, .pin_dir = {}};
    }
    bool fresh_dataplane() const override { return true; }
};

TEST_F(XdpTableFullEvents, TableFullDropsAreSampledWithTheirReason) {
    apply(policy()
              .add({.id = 1, .per_source = Limit{.rate = 1, .burst = 1}, .on_table_full = SLUICE_TABLE_FULL_CLOSED})
              .build());
    for (int i = 1; i <= static_cast<int>(scenarios::kTableFullCapacity); i++)
        EXPECT_EQ(verdicts(udp_from(scenarios::table_source(i)), 1), "P");
    // Default period 64: the first drop on this CPU is sampled, and the
    // next no sooner than 32 drops later.
    const std::string newcomer = scenarios::table_source(99);
    EXPECT_EQ(verdicts(udp_from(newcomer), 3), "DDD");
    EXPECT_EQ(verdicts(udp_from(scenarios::table_source(1)), 1), "D");
    const auto events = drain_events();
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].reason, SLUICE_REASON_TABLE_FULL);
    EXPECT_EQ(events[0].source.class_id, 1u);
    EXPECT_EQ(std::memcmp(events[0].source.addr, PacketBuilder::address(newcomer).data(), 16), 0);
    EXPECT_GE(events[0].weight, 32u);
    EXPECT_LT(events[0].weight, 96u);
    EXPECT_EQ(counts().packets(1, kDrop, SLUICE_REASON_TABLE_FULL), 3u);
}

// A flood at the program's full rate (BPF_PROG_TEST_RUN on one CPU) from
// three sources dropping 5 : 3 : 2, drained after each ring's worth of drops
// as sluiced's loop drains every 250 ms (tests/common/flood_sampling.h).
class XdpFloodSampling : public XdpTest {
  protected:
    XdpOptions options() const override {
        return XdpOptions{.test_clock = true, .source_capacity = kTestCapacity, .drop_sample_period = 1, .pin_dir = {}};
    }
    bool fresh_dataplane() const override { return true; }
};

TEST_F(XdpFloodSampling, EachSourcesWeightsStayWithinTheSamplingErrorOfItsDropsAtFullRate) {
    apply(policy().add({.id = 1, .per_source = Limit{.rate = 1, .burst = 1}}).build());
    std::vector<scenarios::SampledSource> sources = {{"192.0.2.50"}, {"192.0.2.30"}, {"192.0.2.20"}};
    const uint32_t blocks[] = {500, 300, 200};  // frames per test run
    std::vector<Bytes> frames;
    for (const auto& s : sources) frames.push_back(udp_from(s.addr));
    const auto flood_round = [&] {
        for (size_t i = 0; i < sources.size(); i++) {
            ASSERT_EQ(run(frames[i], blocks[i]), static_cast<uint32_t>(XDP_DROP));
            sources[i].sent += blocks[i];
        }
    };
    const auto drain = [&](const std::function<void(const sluice_drop_event&)>& on_event) {
        auto drained = dp_->drain_events(on_event);
        ASSERT_TRUE(drained.ok()) << describe(drained);
    };
    scenarios::flood_sampling_stays_within_the_sampling_error(*this, sources, dp_->drop_event_ring_events(),
                                                              flood_round, drain,
                                                              [&] { return dp_->drop_sample_period(); });
}

}  // namespace
}  // namespace sluice::test
