// SPDX-License-Identifier: Apache-2.0
// Policy in the real XDP program: classification by longest prefix, class
// actions, the class aggregate and the global ceiling and how they compose,
// and what a new version keeps or refuses.
#include <gtest/gtest.h>

#include "xdp_fixture.h"

namespace sluice::test {
namespace {

// Lease mode with the whole burst on this CPU; the fake clock never moves,
// so nothing refills.
Limit packets(uint64_t burst) { return Limit{.rate = 1, .burst = burst}; }

class XdpPolicy : public XdpTest {};
// Own suite name: XdpModes is instantiated in other files too.
class XdpComposition : public XdpModes {};

// "No policy yet" exists only in a new dataplane.
class XdpNoPolicy : public XdpTest {
  protected:
    bool fresh_dataplane() const override { return true; }
};

TEST_F(XdpNoPolicy, PassesEverythingAndCountsIt) {
    auto version = dp_->active_version();
    SLUICE_ASSERT_OK(version);
    EXPECT_EQ(version.value(), 0u);
    EXPECT_EQ(run(udp_from("192.0.2.1"), 5), static_cast<uint32_t>(XDP_PASS));
    EXPECT_EQ(stat(SLUICE_STAT_NO_POLICY), 5u);
    EXPECT_EQ(counts().total(), 0u);
}

TEST_F(XdpPolicy, LongestPrefixPicksTheClass) {
    apply(policy()
              .add({.id = 1, .per_source = packets(2)})  // default
              .add({.id = 2, .action = SLUICE_ACTION_DROP})
              .add({.id = 3, .action = SLUICE_ACTION_PASS})
              .add({.id = 4, .per_source = packets(1)})
              .prefix("10.0.0.0/8", 2)
              .prefix("10.1.0.0/16", 3)
              .prefix("10.1.2.0/24", 4)
              .prefix("10.1.9.10/32", 2)
              .prefix("2001:db8::/32", 2)
              .prefix("2001:db8:5::/48", 3)
              .build());

    EXPECT_EQ(verdicts(udp_from("10.9.9.9"), 2), "DD");        // /8: drop
    EXPECT_EQ(run(udp_from("10.1.9.9"), 50), XDP_PASS);        // /16: pass, never limited
    EXPECT_EQ(verdicts(udp_from("10.1.9.10"), 1), "D");        // /32 inside the /16
    EXPECT_EQ(verdicts(udp_from("10.1.2.3"), 2), "PD");        // /24: limited to 1
    EXPECT_EQ(verdicts(udp_from("192.0.2.1"), 3), "PPD");      // no match: default
    EXPECT_EQ(verdicts(udp_from("2001:db8:5::1"), 3), "PPP");  // /48 pass
    EXPECT_EQ(verdicts(udp_from("2001:db8:6::1"), 1), "D");    // /32 drop
    EXPECT_EQ(verdicts(udp_from("2001:db9::1"), 3), "PPD");    // default

    const Counts c = counts();
    EXPECT_EQ(c.packets(2, kDrop, SLUICE_REASON_DENY), 4u);
    EXPECT_EQ(c.packets(3, kPass, SLUICE_REASON_ALLOWED), 53u);
    EXPECT_EQ(c.packets(4, kPass, SLUICE_REASON_ADMITTED), 1u);
    EXPECT_EQ(c.packets(4, kDrop, SLUICE_REASON_SOURCE), 1u);
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 4u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 2u);
    EXPECT_EQ(c.total(), 65u);
    // Pass and drop classes never touch a bucket: state for the three
    // limited sources only.
    EXPECT_EQ(stat(SLUICE_STAT_SOURCE_INSERTS), 3u);
    EXPECT_EQ(source_counts().first, 3u);
}

TEST_F(XdpPolicy, PassClassIsNeverLimitedEvenUnderAGlobalCeiling) {
    apply(policy().add({.id = 1, .action = SLUICE_ACTION_PASS}).global(packets(1)).build());
    EXPECT_EQ(run(udp_from("192.0.2.1"), 1000), XDP_PASS);
    const Counts c = counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ALLOWED), 1000u);
    EXPECT_EQ(c.total(), 1000u);
}

TEST_F(XdpPolicy, GlobalCeilingAcrossSources) {
    apply(policy().add({.id = 1, .per_source = packets(3)}).global(packets(4)).build());
    EXPECT_EQ(verdicts(udp_from("192.0.2.1"), 3), "PPP");
    EXPECT_EQ(verdicts(udp_from("192.0.2.2"), 3), "PDD");
    // The first source's own bucket is empty: it refuses before the ceiling.
    EXPECT_EQ(verdicts(udp_from("192.0.2.1"), 1), "D");

    const Counts c = counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 4u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_GLOBAL), 2u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 1u);
}

TEST_F(XdpPolicy, ClassAggregateIsSharedWithinTheClassOnly) {
    apply(policy()
              .add({.id = 1, .per_source = packets(3)})  // default
              .add({.id = 2, .per_source = packets(3), .aggregate = packets(4)})
              .prefix("10.0.0.0/8", 2)
              .build());
    EXPECT_EQ(verdicts(udp_from("10.0.0.1"), 3), "PPP");
    EXPECT_EQ(verdicts(udp_from("10.0.0.2"), 3), "PDD");
    // Another class is unaffected by class 2's empty aggregate.
    EXPECT_EQ(verdicts(udp_from("192.0.2.1"), 4), "PPPD");

    const Counts c = counts();
    EXPECT_EQ(c.packets(2, kPass, SLUICE_REASON_ADMITTED), 4u);
    EXPECT_EQ(c.packets(2, kDrop, SLUICE_REASON_CLASS), 2u);
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 3u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 1u);
    EXPECT_EQ(c.reason(SLUICE_REASON_CLASS), 2u);
}

TEST_F(XdpPolicy, DefaultClassActionApplies) {
    apply(policy()
              .add({.id = 1, .per_source = packets(3)})
              .add({.id = 7, .action = SLUICE_ACTION_DROP})
              .default_class(7)
              .prefix("192.0.2.0/24", 1)
              .build());
    EXPECT_EQ(verdicts(udp_from("198.18.0.1"), 2), "DD");
    EXPECT_EQ(verdicts(udp_from("2001:db8::1"), 1), "D");
    EXPECT_EQ(verdicts(udp_from("192.0.2.1"), 1), "P");
    EXPECT_EQ(counts().packets(7, kDrop, SLUICE_REASON_DENY), 3u);
}

// Composition is check-then-commit: a packet refused by the global ceiling
// spends nothing from its source bucket.
TEST_P(XdpComposition, GlobalRefusalsSpendNoSourceTokens) {
    const uint64_t n = per_cpu(GetParam());
    const ClassSpec cls{.id = 1, .per_source = Limit{.rate = n, .burst = 5 * n, .accuracy = GetParam()}};
    apply(policy(1).add(cls).global(Limit{.rate = n, .burst = 2 * n, .accuracy = GetParam()}).build());
    const Bytes frame = udp_from("192.0.2.20");
    EXPECT_EQ(verdicts(frame, 10), "PPDDDDDDDD");
    EXPECT_EQ(counts().packets(1, kDrop, SLUICE_REASON_GLOBAL), 8u);

    // Lift the ceiling with a new version: the source still holds 5 - 2.
    CompiledPolicy lifted = policy(2).add(cls).build();
    ASSERT_EQ(lifted.header.global.enabled, 0);
    apply(lifted);
    EXPECT_EQ(verdicts(frame, 5), "PPPDD");

    const Counts c = counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 5u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_GLOBAL), 8u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 2u);
}

// Same for the class aggregate: its refusals leave the source's tokens.
TEST_P(XdpComposition, ClassRefusalsSpendNoSourceTokens) {
    const uint64_t n = per_cpu(GetParam());
    const Limit source{.rate = n, .burst = 5 * n, .accuracy = GetParam()};
    apply(
        policy(1)
            .add({.id = 1, .per_source = source, .aggregate = Limit{.rate = n, .burst = 2 * n, .accuracy = GetParam()}})
            .build());
    const Bytes frame = udp_from("192.0.2.21");
    EXPECT_EQ(verdicts(frame, 6), "PPDDDD");
    apply(policy(2).add({.id = 1, .per_source = source}).build());
    EXPECT_EQ(verdicts(frame, 4), "PPPD");
    EXPECT_EQ(counts().packets(1, kDrop, SLUICE_REASON_CLASS), 4u);
}

INSTANTIATE_TEST_SUITE_P(Accuracy, XdpComposition, ::testing::Values(Accuracy::split, Accuracy::lease), accuracy_name);

TEST_F(XdpPolicy, NewVersionKeepsBucketsOfItsClasses) {
    apply(policy(1).add({.id = 1, .per_source = packets(3)}).build());
    const Bytes frame = udp_from("192.0.2.30");
    EXPECT_EQ(verdicts(frame, 4), "PPPD");

    // Version 2 adds a class and a prefix: class 1's buckets stay spent.
    apply(policy(2)
              .add({.id = 1, .per_source = packets(3)})
              .add({.id = 2, .per_source = packets(3)})
              .prefix("10.0.0.0/8", 2)
              .build());
    EXPECT_EQ(verdicts(frame, 1), "D");
    // A larger burst is not a free refill: no time has passed.
    apply(policy(3).add({.id = 1, .per_source = packets(10)}).build());
    EXPECT_EQ(verdicts(frame, 1), "D");
    auto version = dp_->active_version();
    SLUICE_ASSERT_OK(version);
    EXPECT_EQ(version.value(), 3u);
    EXPECT_EQ(stat(SLUICE_STAT_SOURCE_INSERTS), 1u);
}

TEST_F(XdpPolicy, NewVersionCanMoveASourceToAnotherClass) {
    apply(policy(1).add({.id = 1, .per_source = packets(1)}).add({.id = 2, .action = SLUICE_ACTION_DROP}).build());
    const Bytes frame = udp_from("192.0.2.40");
    EXPECT_EQ(verdicts(frame, 2), "PD");
    apply(policy(2)
              .add({.id = 1, .per_source = packets(1)})
              .add({.id = 2, .action = SLUICE_ACTION_DROP})
              .prefix("192.0.2.40/32", 2)
              .build());
    EXPECT_EQ(verdicts(frame, 1), "D");
    // And back: the prefix is gone from the slot version 3 is written to.
    apply(policy(3).add({.id = 1, .per_source = packets(1)}).add({.id = 2, .action = SLUICE_ACTION_DROP}).build());
    EXPECT_EQ(verdicts(frame, 1), "D");
    const Counts c = counts();
    EXPECT_EQ(c.packets(2, kDrop, SLUICE_REASON_DENY), 1u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 2u);
}

TEST_F(XdpPolicy, StalePrefixesOfAnOlderVersionAreGone) {
    // Version 1 (slot a) and 2 (slot b) both classify 10/8; version 3 reuses
    // slot a without the prefix: nothing of version 1 may linger there.
    auto with_prefix = [&](uint64_t v) {
        return policy(v)
            .add({.id = 1, .action = SLUICE_ACTION_PASS})
            .add({.id = 2, .action = SLUICE_ACTION_DROP})
            .prefix("10.0.0.0/8", 2)
            .build();
    };
    apply(with_prefix(1));
    apply(with_prefix(2));
    EXPECT_EQ(verdicts(udp_from("10.0.0.1"), 1), "D");
    apply(policy(3).add({.id = 1, .action = SLUICE_ACTION_PASS}).add({.id = 2, .action = SLUICE_ACTION_DROP}).build());
    EXPECT_EQ(verdicts(udp_from("10.0.0.1"), 1), "P");
    apply(policy(4).add({.id = 1, .action = SLUICE_ACTION_PASS}).add({.id = 2, .action = SLUICE_ACTION_DROP}).build());
    EXPECT_EQ(verdicts(udp_from("10.0.0.1"), 1), "P");
}

TEST_F(XdpPolicy, InvalidPolicyIsRefusedAndTheRunningOneKept) {
    apply(policy(1).add({.id = 1, .per_source = packets(2)}).build());
    const Bytes frame = udp_from("192.0.2.50");
    EXPECT_EQ(verdicts(frame, 1), "P");

    CompiledPolicy bad = policy(2).add({.id = 1, .action = SLUICE_ACTION_DROP}).build();
    bad.header.default_class_id = 9;  // undefined
    EXPECT_FALSE(dp_->apply(bad).ok());
    CompiledPolicy zero = policy(2).add({.id = 1, .action = SLUICE_ACTION_DROP}).build();
    zero.header.version = 0;
    EXPECT_FALSE(dp_->apply(zero).ok());

    auto version = dp_->active_version();
    SLUICE_ASSERT_OK(version);
    EXPECT_EQ(version.value(), 1u);
    EXPECT_EQ(verdicts(frame, 2), "PD");
    EXPECT_EQ(counts().reason(SLUICE_REASON_DENY), 0u);
}

}  // namespace
}  // namespace sluice::test
