// SPDX-License-Identifier: Apache-2.0
// Policy in the real XDP program: classification by longest prefix, class
// actions, the class aggregate and the global ceiling and how they compose,
// and what a new version keeps or refuses. Most scenarios are in
// tests/common/verdict_scenarios.h, shared with the DPDK dataplane.
#include <gtest/gtest.h>

#include "common/verdict_scenarios.h"
#include "xdp_fixture.h"

namespace sluice::test {
namespace {

using scenarios::packets;

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

TEST_F(XdpPolicy, LongestPrefixPicksTheClass) { scenarios::longest_prefix_picks_the_class(*this); }

TEST_F(XdpPolicy, PassClassIsNeverLimitedEvenUnderAGlobalCeiling) {
    scenarios::pass_class_is_never_limited_even_under_a_global_ceiling(*this);
}

TEST_F(XdpPolicy, GlobalCeilingAcrossSources) { scenarios::global_ceiling_across_sources(*this); }

TEST_F(XdpPolicy, ClassAggregateIsSharedWithinTheClassOnly) {
    scenarios::class_aggregate_is_shared_within_the_class_only(*this);
}

TEST_F(XdpPolicy, DefaultClassActionApplies) { scenarios::default_class_action_applies(*this); }

TEST_P(XdpComposition, GlobalRefusalsSpendNoSourceTokens) {
    scenarios::global_refusals_spend_no_source_tokens(*this, GetParam());
}

TEST_P(XdpComposition, ClassRefusalsSpendNoSourceTokens) {
    scenarios::class_refusals_spend_no_source_tokens(*this, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Accuracy, XdpComposition, ::testing::Values(Accuracy::split, Accuracy::lease), accuracy_name);

TEST_F(XdpPolicy, NewVersionKeepsBucketsOfItsClasses) {
    scenarios::new_version_keeps_buckets_of_its_classes(*this);
    auto version = dp_->active_version();
    SLUICE_ASSERT_OK(version);
    EXPECT_EQ(version.value(), 3u);
}

TEST_F(XdpPolicy, NewVersionCanMoveASourceToAnotherClass) {
    scenarios::new_version_can_move_a_source_to_another_class(*this);
}

TEST_F(XdpPolicy, StalePrefixesOfAnOlderVersionAreGone) {
    scenarios::stale_prefixes_of_an_older_version_are_gone(*this);
}

TEST_F(XdpPolicy, PrefixChangesClassifyAsAFreshTableWould) {
    scenarios::prefix_changes_classify_as_a_fresh_table_would(*this);
}

// Tries sized for two prefixes per family.
class XdpSmallPrefixCapacity : public XdpTest {
  protected:
    XdpOptions options() const override {
        XdpOptions opts = XdpTest::options();
        opts.prefix_capacity = 2;
        return opts;
    }
};

TEST_F(XdpSmallPrefixCapacity, APolicyOverTheCapacityIsRefusedWithTheNumbersAndTheRunningOneKept) {
    const auto policy = [&](uint64_t version, int v4_prefixes) {
        auto builder = this->policy(version);
        builder.add({.id = 1, .action = SLUICE_ACTION_PASS}).add({.id = 2, .action = SLUICE_ACTION_DROP});
        for (int i = 0; i < v4_prefixes; i++) builder.prefix("10.0." + std::to_string(i) + ".0/24", 2);
        return builder.prefix("2001:db8::/32", 2).prefix("2001:db9::/32", 2).build();
    };
    apply(policy(1, 2));
    const Status refused = dp_->apply(policy(2, 3));
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().message,
              "the policy has 3 IPv4 prefixes; the dataplane holds 2 per family (raise prefix_capacity, at most " +
                  std::to_string(SLUICE_PREFIX_CAPACITY_MAX) + ")");
    EXPECT_EQ(dp_->active_version().value(), 1u);
    EXPECT_EQ(verdicts(udp_from("10.0.1.1"), 1), "D");
    EXPECT_EQ(verdicts(udp_from("10.0.2.1"), 1), "P");
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
