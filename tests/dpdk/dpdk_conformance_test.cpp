// SPDX-License-Identifier: Apache-2.0
// The XDP program's verdict expectations, run unchanged against the DPDK
// dataplane: every scenario of tests/common/verdict_scenarios.h, with frames
// going in through a ring port's RX and coming out (or not) at its TX.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "common/flood_sampling.h"
#include "common/verdict_scenarios.h"
#include "dpdk_fixture.h"

namespace sluice::test {
namespace {

using scenarios::UnparsedVerdicts;

using DpdkBuckets = DpdkTest;
TEST_F(DpdkBuckets, PacketBurstThenRefillOnePacketAtATime) {
    scenarios::packet_burst_then_refill_one_packet_at_a_time(*this);
}
TEST_F(DpdkBuckets, ByteBurstIsTwoFramesAndRefillsByLength) {
    scenarios::byte_burst_is_two_frames_and_refills_by_length(*this);
}
TEST_F(DpdkBuckets, TcpSynCountsConnectionAttemptsAndPassesTheRest) {
    scenarios::tcp_syn_counts_connection_attempts_and_passes_the_rest(*this);
}
TEST_F(DpdkBuckets, FixedWindowAdmitsItsLimitPerAlignedWindow) {
    scenarios::fixed_window_admits_its_limit_per_aligned_window(*this);
}
TEST_F(DpdkBuckets, SlidingWindowWeighsThePreviousWindow) {
    scenarios::sliding_window_weighs_the_previous_window(*this);
}
TEST_F(DpdkBuckets, SlidingLogAdmitsItsLimitInEveryRollingWindow) {
    scenarios::sliding_log_admits_its_limit_in_every_rolling_window(*this);
}
TEST_F(DpdkBuckets, SlidingLogOfTcpSynsPassesEstablishedTraffic) {
    scenarios::sliding_log_of_tcp_syns_passes_established_traffic(*this);
}
TEST_F(DpdkBuckets, WindowAggregateComposesCheckThenCommit) {
    scenarios::window_aggregate_composes_check_then_commit(*this);
}
TEST_F(DpdkBuckets, ChangingTheAlgorithmStartsTheCountAfresh) {
    scenarios::changing_the_algorithm_starts_the_count_afresh(*this);
}
TEST_F(DpdkBuckets, PerSourceFixedWindowCountsEachSourceApart) {
    scenarios::per_source_fixed_window_counts_each_source_apart(*this);
}
TEST_F(DpdkBuckets, PerSourceSlidingWindowWeighsThePreviousWindow) {
    scenarios::per_source_sliding_window_weighs_the_previous_window(*this);
}
TEST_F(DpdkBuckets, PerSourceWindowOfTcpSynsPassesEstablishedTraffic) {
    scenarios::per_source_window_of_tcp_syns_passes_established_traffic(*this);
}
TEST_F(DpdkBuckets, PerSourceWindowComposesCheckThenCommit) {
    scenarios::per_source_window_composes_check_then_commit(*this);
}
TEST_F(DpdkBuckets, ChangingThePerSourceAlgorithmStartsSourcesAfresh) {
    scenarios::changing_the_per_source_algorithm_starts_sources_afresh(*this);
}
TEST_F(DpdkBuckets, ShadowClassPassesWhatItWouldDrop) { scenarios::shadow_class_passes_what_it_would_drop(*this); }
TEST_F(DpdkBuckets, ByteCostsRoundUpAndABurstStillHoldsItsFrames) {
    scenarios::byte_costs_round_up_and_a_burst_still_holds_its_frames(*this);
}
TEST_F(DpdkBuckets, ClockRegressionRefillsNothing) { scenarios::clock_regression_refills_nothing(*this); }
TEST_F(DpdkBuckets, PolicyChangeKeepsASourcesDebt) { scenarios::policy_change_keeps_a_sources_debt(*this); }
TEST_F(DpdkBuckets, PenaltyBoxHoldsAFloodForItsTimeAndSparesAPoliteSource) {
    scenarios::penalty_box_holds_a_flood_for_its_time_and_spares_a_polite_source(*this);
}
TEST_F(DpdkBuckets, PenaltyThresholdIsOverTimesTheLimit) { scenarios::penalty_threshold_is_over_times_the_limit(*this); }
TEST_F(DpdkBuckets, BanDropsItsPrefixUntilItsTimeEvenInAPassClass) {
    scenarios::ban_drops_its_prefix_until_its_time_even_in_a_pass_class(*this);
}
TEST_F(DpdkBuckets, BansAreReplacedAtOnceAndABadSetChangesNothing) {
    scenarios::bans_are_replaced_at_once_and_a_bad_set_changes_nothing(*this);
}
TEST_F(DpdkBuckets, ANinthBanLengthIsRefused) { scenarios::a_ninth_ban_length_is_refused(*this); }
TEST_F(DpdkBuckets, ABanHoldsBeforeTheFirstPolicy) { scenarios::a_ban_holds_before_the_first_policy(*this); }
TEST_F(DpdkBuckets, LowerRateGrantsNothing) { scenarios::lower_rate_grants_nothing(*this); }
TEST_F(DpdkBuckets, EntriesFreeThemselves) { scenarios::entries_free_themselves(*this); }

using DpdkFleet = DpdkTest;
TEST_F(DpdkFleet, CreditAdmitsExactlyWhatWasGranted) { scenarios::fleet_credit_admits_exactly_what_was_granted(*this); }
TEST_F(DpdkFleet, LocalLimitsHoldWhateverTheCredit) { scenarios::local_limits_hold_whatever_the_fleet_credit(*this); }
TEST_F(DpdkFleet, AClassWithoutAFleetQuotaIgnoresTheCells) {
    scenarios::class_without_a_fleet_quota_ignores_the_cells(*this);
}

// The accuracy is the bucket levels' (global, aggregate, new sources).
class DpdkComposition : public DpdkTest, public ::testing::WithParamInterface<Accuracy> {};
TEST_P(DpdkComposition, GlobalRefusalsSpendNoSourceTokens) {
    scenarios::global_refusals_spend_no_source_tokens(*this, GetParam());
}
TEST_P(DpdkComposition, ClassRefusalsSpendNoSourceTokens) {
    scenarios::class_refusals_spend_no_source_tokens(*this, GetParam());
}
TEST_P(DpdkComposition, NewSourcesPayTheirOwnBudget) { scenarios::new_sources_pay_their_own_budget(*this, GetParam()); }
INSTANTIATE_TEST_SUITE_P(Accuracy, DpdkComposition, ::testing::Values(Accuracy::split, Accuracy::lease), accuracy_name);

using DpdkSources = DpdkTest;
TEST_F(DpdkSources, Ipv4SourcesHaveTheirOwnBuckets) { scenarios::ipv4_sources_have_their_own_buckets(*this); }
TEST_F(DpdkSources, Ipv4PrefixAggregation) { scenarios::ipv4_prefix_aggregation(*this); }
TEST_F(DpdkSources, Ipv6SourcesShareTheirSlash64) { scenarios::ipv6_sources_share_their_slash64(*this); }
TEST_F(DpdkSources, Ipv6Prefix128KeepsAddressesApart) { scenarios::ipv6_prefix128_keeps_addresses_apart(*this); }
TEST_F(DpdkSources, VlanAndQinqFramesAreLimitedByTheirInnerSource) {
    scenarios::vlan_and_qinq_frames_are_limited_by_their_inner_source(*this);
}
TEST_F(DpdkSources, Ipv4FragmentsCountAgainstTheirSource) {
    scenarios::ipv4_fragments_count_against_their_source(*this);
}
TEST_F(DpdkSources, Ipv6FragmentsCountAgainstTheirSource) {
    scenarios::ipv6_fragments_count_against_their_source(*this);
}

using DpdkPolicy = DpdkTest;
TEST_F(DpdkPolicy, LongestPrefixPicksTheClass) { scenarios::longest_prefix_picks_the_class(*this); }
TEST_F(DpdkPolicy, PassClassIsNeverLimitedEvenUnderAGlobalCeiling) {
    scenarios::pass_class_is_never_limited_even_under_a_global_ceiling(*this);
}
TEST_F(DpdkPolicy, GlobalCeilingAcrossSources) { scenarios::global_ceiling_across_sources(*this); }
TEST_F(DpdkPolicy, ClassAggregateIsSharedWithinTheClassOnly) {
    scenarios::class_aggregate_is_shared_within_the_class_only(*this);
}
TEST_F(DpdkPolicy, DefaultClassActionApplies) { scenarios::default_class_action_applies(*this); }
TEST_F(DpdkPolicy, NewVersionKeepsBucketsOfItsClasses) {
    scenarios::new_version_keeps_buckets_of_its_classes(*this);
    EXPECT_EQ(dp_->active_version().value(), 3u);
}
TEST_F(DpdkPolicy, NewVersionCanMoveASourceToAnotherClass) {
    scenarios::new_version_can_move_a_source_to_another_class(*this);
}
TEST_F(DpdkPolicy, StalePrefixesOfAnOlderVersionAreGone) {
    scenarios::stale_prefixes_of_an_older_version_are_gone(*this);
}

class DpdkUnparsed : public DpdkTest, public ::testing::WithParamInterface<UnparsedVerdicts> {};
TEST_P(DpdkUnparsed, MalformedFramesGetTheMalformedVerdictUnderClassZero) {
    scenarios::malformed_frames_get_the_malformed_verdict_under_class_zero(*this, GetParam());
    EXPECT_EQ(stat(SLUICE_STAT_DROP_EVENTS_SENT), 0u);
}
TEST_P(DpdkUnparsed, NonIpFramesGetTheNonIpVerdict) {
    scenarios::non_ip_frames_get_the_non_ip_verdict(*this, GetParam());
}
INSTANTIATE_TEST_SUITE_P(Verdicts, DpdkUnparsed,
                         ::testing::Values(UnparsedVerdicts{kDrop, kPass}, UnparsedVerdicts{kPass, kDrop}),
                         scenarios::unparsed_case_name);

// The same source table as the XDP program's: when both of a source's sets
// are in debt, the class's on_table_full decides.
class DpdkFullTableOpen : public DpdkTest {
  protected:
    DpdkOptions options() const override {
        DpdkOptions o = DpdkTest::options();
        o.source_capacity = scenarios::kTableFullCapacity;
        return o;
    }
};
class DpdkFullTable : public DpdkFullTableOpen, public ::testing::WithParamInterface<uint8_t> {};
TEST_P(DpdkFullTable, SeventeenthSourceMeetsOnTableFull) {
    scenarios::seventeenth_source_meets_on_table_full(*this, GetParam());
}
TEST_F(DpdkFullTableOpen, UntrackedSourcesStillMeetTheLevelsAbove) {
    scenarios::untracked_sources_still_meet_the_levels_above(*this);
}
INSTANTIATE_TEST_SUITE_P(OnTableFull, DpdkFullTable,
                         ::testing::Values(SLUICE_TABLE_FULL_EVICT, SLUICE_TABLE_FULL_OPEN, SLUICE_TABLE_FULL_CLOSED),
                         scenarios::table_full_case_name);

// Two workers, each on its own queue of the port: one source table for both,
// split shares and leases from the shared bucket, as the XDP program's CPUs.
class DpdkWorkers : public DpdkTest {
  protected:
    DpdkOptions options() const override {
        DpdkOptions o = DpdkTest::options();
        o.workers = 2;
        return o;
    }
};
TEST_F(DpdkWorkers, SourceIsOneBucketAcrossWorkers) { scenarios::source_is_one_bucket_across_cpus(*this); }
TEST_F(DpdkWorkers, SplitModeGivesEachWorkerItsShare) { scenarios::split_mode_gives_each_cpu_its_share(*this); }
TEST_F(DpdkWorkers, LeaseModeSharesOneBucketAcrossWorkers) {
    scenarios::lease_mode_shares_one_bucket_across_cpus(*this);
}
TEST_F(DpdkWorkers, ExpiredLeaseGoesBackToTheSharedBucket) {
    scenarios::expired_lease_goes_back_to_the_shared_bucket(*this);
}

// The same on the TSC: both workers flood one class from their own queues at
// once (sluice_xdp's CPUs, XdpRealClockWindows), each admission one
// transition of the class's state under its lock.
class DpdkWorkersRealClock : public DpdkWorkers, public ::testing::WithParamInterface<scenarios::WindowCase> {
  protected:
    DpdkOptions options() const override {
        DpdkOptions o = DpdkWorkers::options();
        o.test_clock = false;
        return o;
    }
};

TEST_P(DpdkWorkersRealClock, OneFloodedLevelNeverPassesItsAlgorithmsBound) {
    const scenarios::WindowCase c = GetParam();
    apply(policy().add(scenarios::window_case_class(c)).build());
    constexpr unsigned kBurst = 32;
    std::vector<rte_mbuf*> frames[2];
    for (auto& queue_frames : frames)
        for (unsigned i = 0; i < kBurst; i++) {
            queue_frames.push_back(make_mbuf(udp_from("192.0.2.1")));
            ASSERT_NE(queue_frames.back(), nullptr);
        }
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> offered{0};
    std::atomic<uint64_t> flooding{0};  // workers that have decided a burst
    const auto flood = [&](uint16_t queue) {
        bool counted = false;
        while (!stop.load(std::memory_order_relaxed)) {
            offered += port_->inject_again(frames[queue].data(), kBurst, queue);
            dp_->worker(queue).poll_once();
            port_->drain_sent(queue);
            if (!counted) flooding++, counted = true;
        }
    };
    const uint64_t begin = dp_->now_ns();
    std::thread first(flood, 0), second(flood, 1);
    while (flooding.load() < 2) std::this_thread::yield();
    const uint64_t flooded_begin = dp_->now_ns();
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    const uint64_t flooded_end = dp_->now_ns();
    stop = true;
    first.join();
    second.join();
    const uint64_t end = dp_->now_ns();
    for (auto& queue_frames : frames) rte_pktmbuf_free_bulk(queue_frames.data(), kBurst);

    const Counts counts_now = counts();
    const uint64_t admitted = counts_now.packets(1, kPass, SLUICE_REASON_ADMITTED);
    const uint64_t bound = scenarios::window_bound(c.algorithm, c.limit, c.window_ns, begin, end);
    const uint64_t floor = scenarios::window_floor(c.algorithm, c.limit, c.window_ns, flooded_begin, flooded_end);
    std::cout << "[ window   ] " << scenarios::window_case_name({c, 0}) << " workers=2 offered=" << offered.load()
              << " admitted=" << admitted << " bound=" << bound
              << " admitted/bound=" << static_cast<double>(admitted) / bound
              << " (windows flooded throughout: " << floor << ")\n";
    // Demand a quarter above the bound keeps the limiter refusing throughout;
    // the ASan build floods at about 1.6x the bound, the plain build at 3-4x.
    EXPECT_GT(offered.load(), bound + bound / 4) << "the flood never saturated the limit";
    EXPECT_LE(admitted, bound);
    EXPECT_GE(static_cast<double>(admitted), 0.8 * static_cast<double>(floor));
    EXPECT_EQ(counts_now.total(), offered.load());
}

INSTANTIATE_TEST_SUITE_P(Algorithms, DpdkWorkersRealClock, ::testing::ValuesIn(scenarios::kWindowCases),
                         scenarios::window_case_name);

// A flood at the worker's full rate from three sources dropping 16 : 10 : 6
// of every burst, drained after each ring's worth of drops as the daemon's
// loop drains every 250 ms (tests/common/flood_sampling.h).
class DpdkFloodSampling : public DpdkTest {
  protected:
    DpdkOptions options() const override {
        DpdkOptions o = DpdkTest::options();
        o.drop_sample_period = 1;
        return o;
    }
};

TEST_F(DpdkFloodSampling, EachSourcesWeightsStayWithinTheSamplingErrorOfItsDropsAtFullRate) {
    apply(policy().add({.id = 1, .per_source = Limit{.rate = 1, .burst = 1}}).build());
    std::vector<scenarios::SampledSource> sources = {{"192.0.2.16"}, {"192.0.2.10"}, {"192.0.2.6"}};
    const unsigned per_burst[] = {16, 10, 6};
    std::vector<rte_mbuf*> burst;
    for (size_t i = 0; i < sources.size(); i++)
        for (unsigned n = 0; n < per_burst[i]; n++) {
            burst.push_back(make_mbuf(udp_from(sources[i].addr)));
            ASSERT_NE(burst.back(), nullptr);
        }
    const auto flood_round = [&] {
        ASSERT_EQ(port_->inject_again(burst.data(), static_cast<unsigned>(burst.size())), burst.size());
        dp_->worker(0).poll_once();
        port_->drain_sent();
        for (size_t i = 0; i < sources.size(); i++) sources[i].sent += per_burst[i];
    };
    const auto drain = [&](const std::function<void(const sluice_drop_event&)>& on_event) {
        auto drained = dp_->drain_events(on_event);
        ASSERT_TRUE(drained.ok()) << describe(drained);
    };
    scenarios::flood_sampling_stays_within_the_sampling_error(*this, sources, dp_->drop_event_ring_events(0),
                                                              flood_round, drain,
                                                              [&] { return dp_->drop_sample_period(0); });
    rte_pktmbuf_free_bulk(burst.data(), static_cast<unsigned>(burst.size()));
}

}  // namespace
}  // namespace sluice::test
