// SPDX-License-Identifier: Apache-2.0
// Verdicts of the real XDP program for one source, packet by packet, on a
// test clock: bursts, refills, clock regressions, address families, VLAN
// tags, fragments, and frames that do not parse.
#include <gtest/gtest.h>

#include "xdp_fixture.h"

namespace sluice::test {
namespace {

// ---- bucket sequences -------------------------------------------------------------

// The per-source limit a test states for this CPU: split mode gets rate/N and
// burst/N, so the policy scales both by N; lease mode uses the whole bucket.
Limit source_limit(Accuracy accuracy, uint64_t n, uint64_t rate, uint64_t burst, Unit unit = Unit::packets,
                   uint32_t max_frame_bytes = kDefaultMaxFrameBytes) {
    return Limit{
        .rate = rate * n, .burst = burst * n, .unit = unit, .accuracy = accuracy, .max_frame_bytes = max_frame_bytes};
}

// Own suite name: XdpModes is instantiated in other files too.
class XdpBuckets : public XdpModes {};

TEST_P(XdpBuckets, PacketBurstThenRefillOnePacketAtATime) {
    // 3 packets of burst, 10 packets/s: one packet every 100 ms.
    apply(policy().add({.id = 1, .per_source = source_limit(GetParam(), per_cpu(GetParam()), 10, 3)}).build());
    const Bytes frame = udp_from("192.0.2.1");

    EXPECT_EQ(verdicts(frame, 5), "PPPDD");
    set_clock(t0_ + 99 * kMs);  // 0.99 of a packet
    EXPECT_EQ(verdicts(frame, 1), "D");
    set_clock(t0_ + 100 * kMs);  // exactly one
    EXPECT_EQ(verdicts(frame, 2), "PD");
    set_clock(t0_ + 300 * kMs);  // two more
    EXPECT_EQ(verdicts(frame, 3), "PPD");
    set_clock(t0_ + 10 * kSec);  // long idle: capped at the burst
    EXPECT_EQ(verdicts(frame, 4), "PPPD");

    const Counts c = counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 9u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 6u);
    EXPECT_EQ(c.bytes(1, kDrop, SLUICE_REASON_SOURCE), 6u * frame.size());
    EXPECT_EQ(c.total(), 15u);
    EXPECT_EQ(stat(SLUICE_STAT_SOURCE_INSERTS), 1u);
}

TEST_P(XdpBuckets, ByteBurstIsTwoFramesAndRefillsByLength) {
    // 100-byte frames; burst 200 bytes, 1000 bytes/s: 100 bytes every 100 ms.
    const Bytes big = udp_from("192.0.2.2", 58);
    const Bytes small = udp_from("192.0.2.2", 18);
    ASSERT_EQ(big.size(), 100u);
    ASSERT_EQ(small.size(), 60u);
    apply(policy()
              .add({.id = 1, .per_source = source_limit(GetParam(), per_cpu(GetParam()), 1000, 200, Unit::bytes, 100)})
              .build());

    EXPECT_EQ(verdicts(big, 4), "PPDD");
    EXPECT_EQ(verdicts(small, 1), "D");  // the bucket is empty, not just short of 100
    set_clock(t0_ + 60 * kMs);           // 60 bytes: too few for 100, enough for 60
    EXPECT_EQ(verdicts(big, 1), "D");
    EXPECT_EQ(verdicts(small, 2), "PD");
    set_clock(t0_ + 160 * kMs);  // 100 more bytes
    EXPECT_EQ(verdicts(big, 2), "PD");

    const Counts c = counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 4u);
    EXPECT_EQ(c.bytes(1, kPass, SLUICE_REASON_ADMITTED), 3u * 100 + 60);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 6u);
}

TEST_P(XdpBuckets, ClockRegressionRefillsNothing) {
    apply(policy().add({.id = 1, .per_source = source_limit(GetParam(), per_cpu(GetParam()), 10, 3)}).build());
    const Bytes frame = udp_from("192.0.2.3");

    EXPECT_EQ(verdicts(frame, 4), "PPPD");
    set_clock(t0_ + 100 * kMs);
    EXPECT_EQ(verdicts(frame, 2), "PD");  // high-water mark now t0_ + 100 ms

    // Backwards, even far: nothing refills.
    set_clock(t0_);
    EXPECT_EQ(verdicts(frame, 1), "D");
    set_clock(t0_ - 5 * kSec);
    EXPECT_EQ(verdicts(frame, 1), "D");

    // Forward again: only time past the high-water mark counts. Had the
    // regression moved the mark back, 150 ms would hold 1.5 packets.
    set_clock(t0_ + 150 * kMs);
    EXPECT_EQ(verdicts(frame, 1), "D");
    set_clock(t0_ + 200 * kMs);
    EXPECT_EQ(verdicts(frame, 2), "PD");

    EXPECT_EQ(counts().packets(1, kPass, SLUICE_REASON_ADMITTED), 5u);
}

INSTANTIATE_TEST_SUITE_P(Accuracy, XdpBuckets, ::testing::Values(Accuracy::split, Accuracy::lease), accuracy_name);

// ---- address families, tags and fragments -----------------------------------------

class XdpSources : public XdpTest {
  protected:
    // Lease mode: the whole burst of 3 on this CPU; the clock never moves.
    ClassSpec limited(uint32_t id, uint8_t prefix_v4 = 32, uint8_t prefix_v6 = 64) const {
        return {.id = id, .per_source = Limit{.rate = 1, .burst = 3}, .prefix_v4 = prefix_v4, .prefix_v6 = prefix_v6};
    }

    // A first fragment, a later one (no L4 header) and a whole datagram from
    // one source share one bucket of 3, and none of them is malformed.
    void expect_fragments_share_one_bucket(const Bytes& first, const Bytes& later, const Bytes& whole) {
        EXPECT_EQ(verdicts(first, 1), "P");
        EXPECT_EQ(verdicts(later, 1), "P");
        EXPECT_EQ(verdicts(whole, 1), "P");
        EXPECT_EQ(verdicts(later, 1), "D");
        EXPECT_EQ(verdicts(first, 1), "D");
        EXPECT_EQ(stat(SLUICE_STAT_SOURCE_INSERTS), 1u);
        EXPECT_EQ(counts().reason(SLUICE_REASON_MALFORMED), 0u);
    }
};

TEST_F(XdpSources, Ipv4SourcesHaveTheirOwnBuckets) {
    apply(policy().add(limited(1)).build());
    EXPECT_EQ(verdicts(udp_from("192.0.2.1"), 4), "PPPD");
    EXPECT_EQ(verdicts(udp_from("192.0.2.2"), 4), "PPPD");
    EXPECT_EQ(stat(SLUICE_STAT_SOURCE_INSERTS), 2u);
}

TEST_F(XdpSources, Ipv4PrefixAggregation) {
    // prefix_v4 = 24: every address of a /24 is one source.
    apply(policy().add(limited(1, 24)).build());
    EXPECT_EQ(verdicts(udp_from("192.0.2.1"), 2), "PP");
    EXPECT_EQ(verdicts(udp_from("192.0.2.200"), 2), "PD");
    EXPECT_EQ(verdicts(udp_from("192.0.3.1"), 1), "P");
}

TEST_F(XdpSources, Ipv6SourcesShareTheirSlash64) {
    apply(policy().add(limited(1)).build());
    EXPECT_EQ(verdicts(udp_from("2001:db8:1:2::1"), 2), "PP");
    // Same /64, other interface id: the same bucket.
    EXPECT_EQ(verdicts(udp_from("2001:db8:1:2:ffff:eeee:dddd:5"), 2), "PD");
    // The next /64 has its own.
    EXPECT_EQ(verdicts(udp_from("2001:db8:1:3::1"), 4), "PPPD");

    const Counts c = counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 6u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 2u);
    EXPECT_EQ(stat(SLUICE_STAT_SOURCE_INSERTS), 2u);
}

TEST_F(XdpSources, Ipv6Prefix128KeepsAddressesApart) {
    apply(policy().add(limited(1, 32, 128)).build());
    EXPECT_EQ(verdicts(udp_from("2001:db8:1:2::1"), 4), "PPPD");
    EXPECT_EQ(verdicts(udp_from("2001:db8:1:2::2"), 4), "PPPD");
    EXPECT_EQ(stat(SLUICE_STAT_SOURCE_INSERTS), 2u);
}

TEST_F(XdpSources, VlanAndQinqFramesAreLimitedByTheirInnerSource) {
    apply(policy().add(limited(1)).add(limited(2)).prefix("2001:db8:7::/48", 2).build());
    const auto plain = udp_from("192.0.2.9");
    const auto dot1q = PacketBuilder().eth().vlan(0x8100, 10).ipv4("192.0.2.9", "198.51.100.1").udp(1, 2).build();
    const auto qinq =
        PacketBuilder().eth().vlan(0x88a8, 100).vlan(0x8100, 20).ipv4("192.0.2.9", "198.51.100.1").udp(1, 2).build();
    // One bucket whatever the tags: three packets in all, then drops.
    EXPECT_EQ(verdicts(plain, 1), "P");
    EXPECT_EQ(verdicts(dot1q, 1), "P");
    EXPECT_EQ(verdicts(qinq, 1), "P");
    EXPECT_EQ(verdicts(plain, 1), "D");
    EXPECT_EQ(verdicts(dot1q, 1), "D");
    EXPECT_EQ(verdicts(qinq, 1), "D");

    // The inner source also classifies: a QinQ IPv6 frame of class 2.
    const auto qinq6 =
        PacketBuilder().eth().vlan(0x88a8, 100).vlan(0x8100, 20).ipv6("2001:db8:7::1", "2001:db8::1").udp(1, 2).build();
    EXPECT_EQ(verdicts(qinq6, 4), "PPPD");

    const Counts c = counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 3u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 3u);
    EXPECT_EQ(c.packets(2, kPass, SLUICE_REASON_ADMITTED), 3u);
    EXPECT_EQ(c.packets(2, kDrop, SLUICE_REASON_SOURCE), 1u);
    EXPECT_EQ(c.reason(SLUICE_REASON_MALFORMED), 0u);
}

TEST_F(XdpSources, Ipv4FragmentsCountAgainstTheirSource) {
    apply(policy().add(limited(1)).build());
    expect_fragments_share_one_bucket(
        PacketBuilder().eth().ipv4("192.0.2.77", "198.51.100.1").fragment(0, true).udp(1, 2).payload(32).build(),
        PacketBuilder().eth().ipv4("192.0.2.77", "198.51.100.1").fragment(5, false).payload(24).build(),
        udp_from("192.0.2.77"));
}

TEST_F(XdpSources, Ipv6FragmentsCountAgainstTheirSource) {
    apply(policy().add(limited(1)).build());
    expect_fragments_share_one_bucket(
        PacketBuilder().eth().ipv6("2001:db8:1::77", "2001:db8::1").fragment(0, true).udp(1, 2).payload(32).build(),
        PacketBuilder().eth().ipv6("2001:db8:1::77", "2001:db8::1").fragment(5, false).payload(24).build(),
        udp_from("2001:db8:1::77"));
}

// ---- frames that do not parse -------------------------------------------------------

struct UnparsedVerdicts {
    uint8_t malformed;
    uint8_t non_ip;
};

class XdpUnparsed : public XdpTest, public ::testing::WithParamInterface<UnparsedVerdicts> {
  protected:
    void SetUp() override {
        ASSERT_NO_FATAL_FAILURE(XdpTest::SetUp());
        if (IsSkipped()) return;
        // A limited default class: a frame that reached it would make state.
        apply(policy()
                  .add({.id = 1, .per_source = Limit{.rate = 1, .burst = 1}})
                  .malformed(GetParam().malformed)
                  .non_ip(GetParam().non_ip)
                  .build());
    }

    static uint32_t action_of(uint8_t verdict) { return verdict == kPass ? XDP_PASS : XDP_DROP; }
};

std::vector<std::pair<std::string, Bytes>> malformed_frames() {
    const std::string s = "192.0.2.1", d = "198.51.100.1", s6 = "2001:db8::1", d6 = "2001:db8::2";
    return {
        {"ethernet header only, EtherType IPv4", PacketBuilder().eth().ethertype(0x0800).build()},
        {"truncated VLAN tag", PacketBuilder().eth().vlan(0x8100, 10).ipv4(s, d).udp(1, 2).truncate(16).build()},
        {"truncated second VLAN tag",
         PacketBuilder().eth().vlan(0x88a8, 10).vlan(0x8100, 20).ipv4(s, d).udp(1, 2).truncate(20).build()},
        {"three VLAN tags",
         PacketBuilder().eth().vlan(0x88a8, 1).vlan(0x8100, 2).vlan(0x8100, 3).ipv4(s, d).udp(1, 2).build()},
        {"IPv4 header cut at 19 bytes", PacketBuilder().eth().ipv4(s, d).udp(1, 2).truncate(14 + 19).build()},
        {"IPv4 IHL 4", PacketBuilder().eth().ipv4(s, d).ihl(4).udp(1, 2).build()},
        {"IPv4 IHL 0", PacketBuilder().eth().ipv4(s, d).ihl(0).udp(1, 2).build()},
        {"IPv4 options cut", PacketBuilder().eth().ipv4(s, d).ipv4_options(8).truncate(14 + 24).build()},
        {"IPv4 total length below header", PacketBuilder().eth().ipv4(s, d).total_length(19).udp(1, 2).build()},
        {"IPv4 total length past frame",
         PacketBuilder().eth().ipv4(s, d).total_length(200).udp(1, 2).payload(10).build()},
        {"IPv4 version 6 under EtherType IPv4", PacketBuilder().eth().ipv4(s, d).version(6).udp(1, 2).build()},
        {"IPv6 header cut at 39 bytes", PacketBuilder().eth().ipv6(s6, d6).udp(1, 2).truncate(14 + 39).build()},
        {"IPv6 version 4 under EtherType IPv6", PacketBuilder().eth().ipv6(s6, d6).version(4).udp(1, 2).build()},
        {"IPv6 payload length past frame", PacketBuilder().eth().ipv6(s6, d6).payload_length(100).udp(1, 2).build()},
        {"tagged IPv6 header cut",
         PacketBuilder().eth().vlan(0x8100, 5).ipv6(s6, d6).udp(1, 2).truncate(18 + 20).build()},
    };
}

TEST_P(XdpUnparsed, MalformedFramesGetTheMalformedVerdictUnderClassZero) {
    uint64_t frames = 0, bytes = 0;
    for (const auto& [name, frame] : malformed_frames()) {
        SCOPED_TRACE(name);
        EXPECT_EQ(run(frame), action_of(GetParam().malformed));
        frames++;
        bytes += frame.size();
    }
    const Counts c = counts();
    EXPECT_EQ(c.packets(SLUICE_CLASS_UNCLASSIFIED, GetParam().malformed, SLUICE_REASON_MALFORMED), frames);
    EXPECT_EQ(c.bytes(SLUICE_CLASS_UNCLASSIFIED, GetParam().malformed, SLUICE_REASON_MALFORMED), bytes);
    EXPECT_EQ(c.total(), frames);
    // Nothing reached a class: no source state, no drop events (no source key).
    EXPECT_EQ(stat(SLUICE_STAT_SOURCE_INSERTS), 0u);
    EXPECT_EQ(stat(SLUICE_STAT_DROP_EVENTS_SENT), 0u);
    EXPECT_TRUE(drain_events().empty());
}

TEST_P(XdpUnparsed, FramesShorterThanEthernetNeverReachTheProgram) {
    // The kernel's XDP BPF_PROG_TEST_RUN refuses data below ETH_HLEN (14)
    // with EINVAL, so the parser's truncated-Ethernet branch cannot be driven
    // from here (tests/unit/parse_test.cpp covers it). Assert that refusal,
    // and that it counted nothing.
    const Bytes frame = PacketBuilder().eth().ethertype(0x0800).truncate(13).build();
    ASSERT_EQ(frame.size(), 13u);
    uint32_t action = 0;
    EXPECT_EQ(test_run(dp_->program_fd(), frame, 1, &action), EINVAL);
    EXPECT_EQ(counts().total(), 0u);
}

TEST_P(XdpUnparsed, NonIpFramesGetTheNonIpVerdict) {
    const std::vector<std::pair<std::string, Bytes>> frames = {
        {"ARP", PacketBuilder().eth().ethertype(0x0806).payload(28).build()},
        {"tagged ARP", PacketBuilder().eth().vlan(0x8100, 7).ethertype(0x0806).payload(28).build()},
        {"QinQ ARP", PacketBuilder().eth().vlan(0x88a8, 7).vlan(0x8100, 8).ethertype(0x0806).payload(28).build()},
        {"802.3 length field", PacketBuilder().eth().ethertype(46).payload(46).build()},
        {"bare Ethernet header", PacketBuilder().eth().ethertype(0x88b5).build()},
    };
    uint64_t bytes = 0;
    for (const auto& [name, frame] : frames) {
        SCOPED_TRACE(name);
        EXPECT_EQ(run(frame), action_of(GetParam().non_ip));
        bytes += frame.size();
    }
    const Counts c = counts();
    EXPECT_EQ(c.packets(SLUICE_CLASS_UNCLASSIFIED, GetParam().non_ip, SLUICE_REASON_NON_IP), frames.size());
    EXPECT_EQ(c.bytes(SLUICE_CLASS_UNCLASSIFIED, GetParam().non_ip, SLUICE_REASON_NON_IP), bytes);
    EXPECT_EQ(c.total(), frames.size());
    EXPECT_EQ(stat(SLUICE_STAT_SOURCE_INSERTS), 0u);
}

INSTANTIATE_TEST_SUITE_P(Verdicts, XdpUnparsed,
                         ::testing::Values(UnparsedVerdicts{kDrop, kPass}, UnparsedVerdicts{kPass, kDrop}),
                         [](const auto& info) {
                             return info.param.malformed == kDrop ? "malformed_drop_non_ip_pass"
                                                                  : "malformed_pass_non_ip_drop";
                         });

}  // namespace
}  // namespace sluice::test
