// SPDX-License-Identifier: Apache-2.0
// The XDP program's verdict expectations, run unchanged against the DPDK
// dataplane: every scenario of tests/common/verdict_scenarios.h, with frames
// going in through a ring port's RX and coming out (or not) at its TX.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

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
TEST_F(DpdkBuckets, EveryKindOfPerSourceChangeReadsTheEntryAsTheRuleSays) {
    scenarios::every_kind_of_per_source_change_reads_the_entry_as_the_rule_says(*this);
}
TEST_F(DpdkBuckets, ADecisionOnAReplacedLimitReadsANewerEntryAsSpent) {
    scenarios::a_decision_on_a_replaced_limit_reads_a_newer_entry_as_spent(*this);
}
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

// Both workers flood one source, each from its own queue, for `length`.
struct WorkersFlood {
    uint64_t offered = 0;
    uint64_t begin_ns = 0, end_ns = 0;                  // on the dataplane's clock, around every decision
    uint64_t flooded_begin_ns = 0, flooded_end_ns = 0;  // both workers deciding throughout
    // Per worker, the bursts that returned in each millisecond of the
    // dataplane's clock, from first_ms on.
    uint64_t first_ms = 0;
    std::vector<uint64_t> polls_per_ms[2];

    // Decisions surely made inside [from_ns, to_ns), whole milliseconds: a
    // burst's frames were decided after the worker's previous burst
    // returned, so those of every burst that returned in it but its first.
    uint64_t decisions_within(uint64_t from_ns, uint64_t to_ns, unsigned burst) const {
        uint64_t decided = 0;
        for (const auto& polls : polls_per_ms) {
            uint64_t returned = 0;
            for (uint64_t ms = from_ns / 1'000'000; ms < to_ns / 1'000'000; ms++)
                if (ms >= first_ms && ms - first_ms < polls.size()) returned += polls[ms - first_ms];
            decided += returned > 0 ? (returned - 1) * burst : 0;
        }
        return decided;
    }
};

// What the case's level admits at least in what was flooded, from what each
// window got (as XdpRealClockWindows): in each aligned window every worker
// flooded throughout, `limit` or the decisions made in it if fewer (fixed
// and sliding windows); `limit` per link of a chain of refusals W apart
// through the milliseconds holding more than `limit` decisions (the log: a
// refusal at t means `limit` admissions in (t - W, t]).
uint64_t measured_floor(const WorkersFlood& f, const scenarios::WindowCase& c, unsigned burst) {
    constexpr uint64_t kMs = 1'000'000;
    if (c.algorithm == SLUICE_ALGORITHM_SLIDING_LOG) {
        uint64_t links = 0;
        for (uint64_t ms = f.flooded_end_ns / kMs; ms-- > f.flooded_begin_ns / kMs + 1;)
            if (f.decisions_within(ms * kMs, (ms + 1) * kMs, burst) > c.limit) {
                links++;
                ms -= std::min(ms, c.window_ns / kMs);  // the next refusal ends W before this millisecond
            }
        return links * c.limit;
    }
    uint64_t floor = 0;
    for (uint64_t from = (f.flooded_begin_ns / c.window_ns + 1) * c.window_ns; from + c.window_ns <= f.flooded_end_ns;
         from += c.window_ns)
        floor += std::min(c.limit, f.decisions_within(from, from + c.window_ns, burst));
    return floor;
}

// The case's limit, or kCalibrationMargin below what the workers were offered
// in a window if that is less: the flood then exceeds the limit by that
// margin whatever the machine's (or the sanitizer build's) speed. A flood
// that offered less than kSaturation times its bound (a window level costs
// more than a pass, and the other build's suites run beside this one) is
// calibrated again on its own rate and flooded again, from a new source,
// up to kFloods times in all.
constexpr double kCalibrationMargin = 20;
constexpr double kSaturation = 5;
constexpr int kFloods = 3;

TEST_P(DpdkWorkersRealClock, OneFloodedLevelNeverPassesItsAlgorithmsBound) {
    scenarios::WindowCase c = GetParam();
    constexpr unsigned kBurst = 32;
    std::vector<rte_mbuf*> frames[2];
    const auto make_frames = [&](const std::string& source) {
        for (auto& queue_frames : frames) {
            rte_pktmbuf_free_bulk(queue_frames.data(), static_cast<unsigned>(queue_frames.size()));
            queue_frames.clear();
            for (unsigned i = 0; i < kBurst; i++) {
                queue_frames.push_back(make_mbuf(udp_from(source)));
                ASSERT_NE(queue_frames.back(), nullptr);
            }
        }
    };
    ASSERT_NO_FATAL_FAILURE(make_frames("192.0.2.1"));
    const auto flood_for = [&](std::chrono::milliseconds length) {
        std::atomic<bool> stop{false};
        std::atomic<uint64_t> offered{0};
        std::atomic<uint64_t> flooding{0};  // workers that have decided a burst
        WorkersFlood f;
        const auto flood = [&](uint16_t queue) {
            bool counted = false;
            std::vector<uint64_t>& polls = f.polls_per_ms[queue];
            polls.reserve(2 * static_cast<size_t>(length.count()) + 1000);
            while (!stop.load(std::memory_order_relaxed)) {
                offered += port_->inject_again(frames[queue].data(), kBurst, queue);
                dp_->worker(queue).poll_once();
                const uint64_t ms = dp_->now_ns() / 1'000'000;
                if (ms >= f.first_ms) {
                    if (ms - f.first_ms >= polls.size()) polls.resize(ms - f.first_ms + 1);
                    polls[ms - f.first_ms]++;
                }
                port_->drain_sent(queue);
                if (!counted) flooding++, counted = true;
            }
        };
        f.begin_ns = dp_->now_ns();
        f.first_ms = f.begin_ns / 1'000'000;
        std::thread first(flood, 0), second(flood, 1);
        while (flooding.load() < 2) std::this_thread::yield();
        f.flooded_begin_ns = dp_->now_ns();
        std::this_thread::sleep_for(length);
        f.flooded_end_ns = dp_->now_ns();
        stop = true;
        first.join();
        second.join();
        f.end_ns = dp_->now_ns();
        f.offered = offered.load();
        return f;
    };

    const auto rate_of = [](const WorkersFlood& f) {
        return static_cast<double>(f.offered) * 1e9 / static_cast<double>(f.end_ns - f.begin_ns);
    };
    apply(policy().add({.id = 1, .action = SLUICE_ACTION_PASS}).build());
    double offered_per_second = rate_of(flood_for(std::chrono::milliseconds(300)));
    const uint64_t case_limit = c.limit;
    WorkersFlood w;
    Counts before;
    uint64_t bound = 0;
    for (int flood = 1;; flood++) {
        c.limit = std::clamp<uint64_t>(
            static_cast<uint64_t>(offered_per_second * static_cast<double>(c.window_ns) / 1e9 / kCalibrationMargin), 1,
            case_limit);
        before = counts();  // the calibration's, and any flood's before
        apply(policy(static_cast<uint64_t>(flood) + 1).add(scenarios::window_case_class(c)).build());
        w = flood_for(std::chrono::milliseconds(1000));
        bound = scenarios::window_bound(c.algorithm, c.limit, c.window_ns, w.begin_ns, w.end_ns);
        if (static_cast<double>(w.offered) > kSaturation * static_cast<double>(bound) || flood == kFloods) break;
        std::cout << "[ window   ] flood " << flood << " offered " << w.offered << " against a bound of " << bound
                  << ": calibrated again at its rate, " << rate_of(w) << "/s, from a new source\n";
        offered_per_second = rate_of(w);
        ASSERT_NO_FATAL_FAILURE(make_frames("192.0.2." + std::to_string(flood + 1)));
    }
    for (auto& queue_frames : frames) rte_pktmbuf_free_bulk(queue_frames.data(), kBurst);

    Counts counts_now = counts();
    for (size_t slot = 0; slot < counts_now.slots.size(); slot++) {
        counts_now.slots[slot].packets -= before.slots[slot].packets;
        counts_now.slots[slot].bytes -= before.slots[slot].bytes;
    }
    const uint64_t admitted = counts_now.packets(1, kPass, SLUICE_REASON_ADMITTED);
    const uint64_t whole_windows =
        scenarios::window_floor(c.algorithm, c.limit, c.window_ns, w.flooded_begin_ns, w.flooded_end_ns);
    const uint64_t floor = measured_floor(w, c, kBurst);
    std::cout << "[ window   ] " << scenarios::window_case_name({c, 0}) << " workers=2 calibrated at "
              << offered_per_second << "/s: limit=" << c.limit << " offered=" << w.offered << " ("
              << static_cast<double>(w.offered) / bound << "x bound) admitted=" << admitted << " bound=" << bound
              << " admitted/bound=" << static_cast<double>(admitted) / bound << " floor=" << floor
              << " (limit in every window flooded throughout: " << whole_windows << ")\n";
    EXPECT_GT(static_cast<double>(w.offered), kSaturation * static_cast<double>(bound))
        << "the flood never saturated the limit (calibrated at " << offered_per_second << "/s)";
    EXPECT_LE(admitted, bound);
    // A fixed window admits every decision in it up to its limit, and the
    // log's chain is exact; a sliding window weighs its previous one, so it
    // may leave part of an aligned window's limit to the next.
    const double share = c.algorithm == SLUICE_ALGORITHM_SLIDING_WINDOW ? 0.8 : 1.0;
    EXPECT_GE(static_cast<double>(admitted), share * static_cast<double>(floor));
    EXPECT_EQ(counts_now.total(), w.offered);
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
