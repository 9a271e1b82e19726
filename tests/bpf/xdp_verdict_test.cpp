// SPDX-License-Identifier: Apache-2.0
// Verdicts of the real XDP program for one source, packet by packet, on a
// test clock: GCRA bursts, refills, byte costs, clock regressions, policy
// changes, address families, VLAN tags, fragments, and frames that do not
// parse. The scenarios themselves are
// in tests/common/verdict_scenarios.h, shared with the DPDK dataplane.
#include <gtest/gtest.h>

#include "common/verdict_scenarios.h"
#include "xdp_fixture.h"

namespace sluice::test {
namespace {

// ---- per-source GCRA sequences ---------------------------------------------------------

class XdpBuckets : public XdpTest {};

TEST_F(XdpBuckets, PacketBurstThenRefillOnePacketAtATime) {
    scenarios::packet_burst_then_refill_one_packet_at_a_time(*this);
}

TEST_F(XdpBuckets, ByteBurstIsTwoFramesAndRefillsByLength) {
    scenarios::byte_burst_is_two_frames_and_refills_by_length(*this);
}

TEST_F(XdpBuckets, TcpSynCountsConnectionAttemptsAndPassesTheRest) {
    scenarios::tcp_syn_counts_connection_attempts_and_passes_the_rest(*this);
}

TEST_F(XdpBuckets, FixedWindowAdmitsItsLimitPerAlignedWindow) {
    scenarios::fixed_window_admits_its_limit_per_aligned_window(*this);
}

TEST_F(XdpBuckets, SlidingWindowWeighsThePreviousWindow) {
    scenarios::sliding_window_weighs_the_previous_window(*this);
}

TEST_F(XdpBuckets, SlidingLogAdmitsItsLimitInEveryRollingWindow) {
    scenarios::sliding_log_admits_its_limit_in_every_rolling_window(*this);
}

TEST_F(XdpBuckets, SlidingLogOfTcpSynsPassesEstablishedTraffic) {
    scenarios::sliding_log_of_tcp_syns_passes_established_traffic(*this);
}

TEST_F(XdpBuckets, WindowAggregateComposesCheckThenCommit) {
    scenarios::window_aggregate_composes_check_then_commit(*this);
}

TEST_F(XdpBuckets, ChangingTheAlgorithmStartsTheCountAfresh) {
    scenarios::changing_the_algorithm_starts_the_count_afresh(*this);
}

TEST_F(XdpBuckets, PerSourceFixedWindowCountsEachSourceApart) {
    scenarios::per_source_fixed_window_counts_each_source_apart(*this);
}

TEST_F(XdpBuckets, PerSourceSlidingWindowWeighsThePreviousWindow) {
    scenarios::per_source_sliding_window_weighs_the_previous_window(*this);
}

TEST_F(XdpBuckets, PerSourceWindowOfTcpSynsPassesEstablishedTraffic) {
    scenarios::per_source_window_of_tcp_syns_passes_established_traffic(*this);
}

TEST_F(XdpBuckets, PerSourceWindowComposesCheckThenCommit) {
    scenarios::per_source_window_composes_check_then_commit(*this);
}

TEST_F(XdpBuckets, ChangingThePerSourceAlgorithmStartsSourcesAfresh) {
    scenarios::changing_the_per_source_algorithm_starts_sources_afresh(*this);
}

TEST_F(XdpBuckets, ShadowClassPassesWhatItWouldDrop) { scenarios::shadow_class_passes_what_it_would_drop(*this); }

TEST_F(XdpBuckets, ByteCostsRoundUpAndABurstStillHoldsItsFrames) {
    scenarios::byte_costs_round_up_and_a_burst_still_holds_its_frames(*this);
}

TEST_F(XdpBuckets, ClockRegressionRefillsNothing) { scenarios::clock_regression_refills_nothing(*this); }

TEST_F(XdpBuckets, PolicyChangeKeepsASourcesDebt) { scenarios::policy_change_keeps_a_sources_debt(*this); }
TEST_F(XdpBuckets, EveryKindOfPerSourceChangeReadsTheEntryAsTheRuleSays) {
    scenarios::every_kind_of_per_source_change_reads_the_entry_as_the_rule_says(*this);
}
TEST_F(XdpBuckets, ADecisionOnAReplacedLimitReadsANewerEntryAsSpent) {
    scenarios::a_decision_on_a_replaced_limit_reads_a_newer_entry_as_spent(*this);
}
TEST_F(XdpBuckets, PenaltyBoxHoldsAFloodForItsTimeAndSparesAPoliteSource) {
    scenarios::penalty_box_holds_a_flood_for_its_time_and_spares_a_polite_source(*this);
}
TEST_F(XdpBuckets, PenaltyThresholdIsOverTimesTheLimit) { scenarios::penalty_threshold_is_over_times_the_limit(*this); }
TEST_F(XdpBuckets, BanDropsItsPrefixUntilItsTimeEvenInAPassClass) {
    scenarios::ban_drops_its_prefix_until_its_time_even_in_a_pass_class(*this);
}
TEST_F(XdpBuckets, BansAreReplacedAtOnceAndABadSetChangesNothing) {
    scenarios::bans_are_replaced_at_once_and_a_bad_set_changes_nothing(*this);
}
TEST_F(XdpBuckets, ANinthBanLengthIsRefused) { scenarios::a_ninth_ban_length_is_refused(*this); }
TEST_F(XdpBuckets, LowerRateGrantsNothing) { scenarios::lower_rate_grants_nothing(*this); }

TEST_F(XdpBuckets, EntriesFreeThemselves) { scenarios::entries_free_themselves(*this); }

// ---- address families, tags and fragments -----------------------------------------

class XdpFleet : public XdpTest {};

TEST_F(XdpFleet, CreditAdmitsExactlyWhatWasGranted) { scenarios::fleet_credit_admits_exactly_what_was_granted(*this); }

TEST_F(XdpFleet, LocalLimitsHoldWhateverTheCredit) { scenarios::local_limits_hold_whatever_the_fleet_credit(*this); }

TEST_F(XdpFleet, AClassWithoutAFleetQuotaIgnoresTheCells) {
    scenarios::class_without_a_fleet_quota_ignores_the_cells(*this);
}

class XdpSources : public XdpTest {};

TEST_F(XdpSources, Ipv4SourcesHaveTheirOwnBuckets) { scenarios::ipv4_sources_have_their_own_buckets(*this); }

TEST_F(XdpSources, Ipv4PrefixAggregation) { scenarios::ipv4_prefix_aggregation(*this); }

TEST_F(XdpSources, Ipv6SourcesShareTheirSlash64) { scenarios::ipv6_sources_share_their_slash64(*this); }

TEST_F(XdpSources, Ipv6Prefix128KeepsAddressesApart) { scenarios::ipv6_prefix128_keeps_addresses_apart(*this); }

TEST_F(XdpSources, VlanAndQinqFramesAreLimitedByTheirInnerSource) {
    scenarios::vlan_and_qinq_frames_are_limited_by_their_inner_source(*this);
}

TEST_F(XdpSources, Ipv4FragmentsCountAgainstTheirSource) {
    scenarios::ipv4_fragments_count_against_their_source(*this);
}

TEST_F(XdpSources, Ipv6FragmentsCountAgainstTheirSource) {
    scenarios::ipv6_fragments_count_against_their_source(*this);
}

// ---- frames that do not parse -------------------------------------------------------

using scenarios::UnparsedVerdicts;

class XdpUnparsed : public XdpTest, public ::testing::WithParamInterface<UnparsedVerdicts> {};

TEST_P(XdpUnparsed, MalformedFramesGetTheMalformedVerdictUnderClassZero) {
    scenarios::malformed_frames_get_the_malformed_verdict_under_class_zero(*this, GetParam());
    // No source key, so no drop events either.
    EXPECT_EQ(stat(SLUICE_STAT_DROP_EVENTS_SENT), 0u);
    EXPECT_TRUE(drain_events().empty());
}

TEST_P(XdpUnparsed, FramesShorterThanEthernetNeverReachTheProgram) {
    // The kernel's XDP BPF_PROG_TEST_RUN refuses data below ETH_HLEN (14)
    // with EINVAL, so the parser's truncated-Ethernet branch cannot be driven
    // from here (tests/unit/parse_test.cpp covers it). Assert that refusal,
    // and that it counted nothing.
    scenarios::apply_unparsed_policy(*this, GetParam());
    const Bytes frame = PacketBuilder().eth().ethertype(0x0800).truncate(13).build();
    ASSERT_EQ(frame.size(), 13u);
    uint32_t action = 0;
    EXPECT_EQ(test_run(dp_->program_fd(), frame, 1, &action), EINVAL);
    EXPECT_EQ(counts().total(), 0u);
}

TEST_P(XdpUnparsed, NonIpFramesGetTheNonIpVerdict) {
    scenarios::non_ip_frames_get_the_non_ip_verdict(*this, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Verdicts, XdpUnparsed,
                         ::testing::Values(UnparsedVerdicts{kDrop, kPass}, UnparsedVerdicts{kPass, kDrop}),
                         scenarios::unparsed_case_name);

}  // namespace
}  // namespace sluice::test
