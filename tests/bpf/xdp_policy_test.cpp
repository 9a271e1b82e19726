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
