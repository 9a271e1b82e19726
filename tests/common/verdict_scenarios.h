// SPDX-License-Identifier: Apache-2.0
// The verdict scenarios every dataplane must pass with the same results:
// one function template per scenario, written against a Target the XDP
// fixture (tests/bpf/xdp_fixture.h, XdpTest) and the DPDK fixture
// (tests/dpdk/dpdk_fixture.h, DpdkTest) both are. Each expectation here
// (forward/drop sequence, counters, stats, table sizes) is the single
// statement of what the policy means; a test file only names the scenario,
// e.g.
//
//   TEST_P(XdpBuckets, PacketBurstThenRefillOnePacketAtATime) {
//       scenarios::packet_burst_then_refill_one_packet_at_a_time(*this, GetParam());
//   }
//
// and adds after it what only its dataplane has (ring-buffer events, the
// active version, ...).
//
// ---- the Target interface (all public) -------------------------------------------
//
//   PolicyBuilder policy(uint64_t version = 1) const;
//       A builder whose limits are compiled for the target's CPUs/workers.
//   void apply(const CompiledPolicy& policy);
//       Applies it; a refusal is a test failure.
//   void set_clock(uint64_t now_ns);
//       Sets the dataplane's test clock.
//   uint64_t t0() const;
//       The clock when the test began; no scenario moves it before t0() - 5 s.
//   std::string verdicts(const Bytes& frame, int n);
//       Runs `frame` n times, one after the other, on one CPU/worker; one
//       letter per frame: 'P' forwarded, 'D' dropped (anything else: '?').
//   std::string verdicts_on_the_replaced_policy(const Bytes& frame, int n);
//       As verdicts(), decided on the policy version the last apply()
//       replaced, as by decisions that read the active slot just before it
//       flipped and are still running (XDP: a packet; DPDK: a burst).
//   Counts counts();
//       The class x verdict x reason counters since the test began.
//   uint64_t stat(uint32_t which);
//       A dataplane stat (enum sluice_stat) since the test began. Scenarios
//       read SOURCE_INSERTS, SOURCE_EVICTIONS and SOURCE_TABLE_FULL.
//   uint64_t per_cpu(Accuracy accuracy) const;
//       The factor that gives the CPU/worker running verdicts() a share of a
//       bucket level (new sources, aggregate, global) equal to its stated
//       size: the CPU/worker count in split mode (a level is divided among
//       them), 1 in lease mode. The per-source level is one GCRA entry for
//       every CPU and takes no accuracy.
//   SourceTableUsage source_table();
//       The source table now (capacity, entries in debt, entries known).
//   uint32_t cpus() const;  void use_cpu(uint32_t index);
//       How many CPUs/workers decide, and which one runs verdicts() from now
//       on (the first until told otherwise).
//   sluice_fleet_credit* fleet_credits();
//       The dataplane's fleet credit, one cell per class id
//       (EnforcementPoint::fleet_credits), all zero when the test begins.
//   Status set_bans(const std::vector<DataplaneBan>& bans);
//       EnforcementPoint::set_bans; no ban is in force when the test begins.
//   std::vector<sluice_counter> ban_counters();
//       Each ban slot's drops since the test began (SLUICE_MAX_BANS).
//
// Preconditions: every scenario expects a target where no policy has been
// applied during this test, whose source table is empty and holds at least
// 64 sources, unless its comment states otherwise (the table-full scenarios
// need a table of exactly kTableFullCapacity entries, two sets; the
// scenarios across CPUs need at least two).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/packet_builder.h"
#include "common/policy_builder.h"
#include "compiled_policy.h"
#include "dataplane.h"
#include "rate_limits.h"
#include "sluice/abi.h"
#include "sluice/fleet.h"

namespace sluice::test::scenarios {

// ---- shorthands ------------------------------------------------------------------

// The letter Target::verdicts gives a frame with this verdict.
inline std::string letter(uint8_t verdict) { return verdict == kPass ? "P" : "D"; }

// A limit of `burst` packets that never refills unless a scenario moves the
// fake clock far (1 packet per second). At a bucket level in lease mode the
// whole burst is on this CPU.
inline Limit packets(uint64_t burst) { return Limit{.rate = 1, .burst = burst}; }

// ---- per-source GCRA sequences on the fake clock --------------------------------------

template <class Target>
void packet_burst_then_refill_one_packet_at_a_time(Target& t) {
    // 3 packets of burst, 10 packets/s: one packet every 100 ms.
    t.apply(t.policy().add({.id = 1, .per_source = Limit{.rate = 10, .burst = 3}}).build());
    const Bytes frame = udp_from("192.0.2.1");

    EXPECT_EQ(t.verdicts(frame, 5), "PPPDD");
    t.set_clock(t.t0() + 99 * kMs);  // 0.99 of a packet
    EXPECT_EQ(t.verdicts(frame, 1), "D");
    t.set_clock(t.t0() + 100 * kMs);  // exactly one
    EXPECT_EQ(t.verdicts(frame, 2), "PD");
    t.set_clock(t.t0() + 300 * kMs);  // two more
    EXPECT_EQ(t.verdicts(frame, 3), "PPD");
    t.set_clock(t.t0() + 10 * kSec);  // long idle: capped at the burst
    EXPECT_EQ(t.verdicts(frame, 4), "PPPD");

    const Counts c = t.counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 9u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 6u);
    EXPECT_EQ(c.bytes(1, kDrop, SLUICE_REASON_SOURCE), 6u * frame.size());
    EXPECT_EQ(c.total(), 15u);
    EXPECT_EQ(t.stat(SLUICE_STAT_SOURCE_INSERTS), 1u);
}

template <class Target>
void byte_burst_is_two_frames_and_refills_by_length(Target& t) {
    // 100-byte frames; burst 200 bytes, 1000 bytes/s: 100 bytes every 100 ms.
    const Bytes big = udp_from("192.0.2.2", 58);
    const Bytes small = udp_from("192.0.2.2", 18);
    ASSERT_EQ(big.size(), 100u);
    ASSERT_EQ(small.size(), 60u);
    t.apply(t.policy()
                .add({.id = 1,
                      .per_source = Limit{.rate = 1000, .burst = 200, .unit = Unit::bytes, .max_frame_bytes = 100}})
                .build());

    EXPECT_EQ(t.verdicts(big, 4), "PPDD");
    EXPECT_EQ(t.verdicts(small, 1), "D");  // the bucket is empty, not just short of 100
    t.set_clock(t.t0() + 60 * kMs);        // 60 bytes: too few for 100, enough for 60
    EXPECT_EQ(t.verdicts(big, 1), "D");
    EXPECT_EQ(t.verdicts(small, 2), "PD");
    t.set_clock(t.t0() + 160 * kMs);  // 100 more bytes
    EXPECT_EQ(t.verdicts(big, 2), "PD");

    const Counts c = t.counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 4u);
    EXPECT_EQ(c.bytes(1, kPass, SLUICE_REASON_ADMITTED), 3u * 100 + 60);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 6u);
}

template <class Target>
void tcp_syn_counts_connection_attempts_and_passes_the_rest(Target& t) {
    // 3 connection attempts per source, then one a second.
    t.apply(t.policy().add({.id = 1, .per_source = Limit{.rate = 1, .burst = 3, .unit = Unit::tcp_syn}}).build());
    const Bytes syn = tcp_from("192.0.2.7", 0x02), syn_ack = tcp_from("192.0.2.7", 0x12);
    const Bytes ack = tcp_from("192.0.2.7", 0x10), other_ack = tcp_from("192.0.2.8", 0x10);

    EXPECT_EQ(t.verdicts(syn, 5), "PPPDD");
    // Established traffic and answers pass the level uncharged, even from a
    // source out of attempts.
    EXPECT_EQ(t.verdicts(ack, 4), "PPPP");
    EXPECT_EQ(t.verdicts(syn_ack, 2), "PP");
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.7"), 2), "PP");
    // A source that opens nothing takes no entry in the source table.
    EXPECT_EQ(t.verdicts(other_ack, 3), "PPP");
    EXPECT_EQ(t.stat(SLUICE_STAT_SOURCE_INSERTS), 1u);
    EXPECT_EQ(t.source_table().known, 1u);
    t.set_clock(t.t0() + kSec);
    EXPECT_EQ(t.verdicts(syn, 2), "PD");

    const Counts c = t.counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 3u + 4 + 2 + 2 + 3 + 1);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 3u);
}

template <class Target>
void clock_regression_refills_nothing(Target& t) {
    t.apply(t.policy().add({.id = 1, .per_source = Limit{.rate = 10, .burst = 3}}).build());
    const Bytes frame = udp_from("192.0.2.3");

    EXPECT_EQ(t.verdicts(frame, 4), "PPPD");
    t.set_clock(t.t0() + 100 * kMs);
    EXPECT_EQ(t.verdicts(frame, 2), "PD");  // high-water mark now t0 + 100 ms

    // Backwards, even far: nothing refills.
    t.set_clock(t.t0());
    EXPECT_EQ(t.verdicts(frame, 1), "D");
    t.set_clock(t.t0() - 5 * kSec);
    EXPECT_EQ(t.verdicts(frame, 1), "D");

    // Forward again: only time past the high-water mark counts. Had the
    // regression moved the mark back, 150 ms would hold 1.5 packets.
    t.set_clock(t.t0() + 150 * kMs);
    EXPECT_EQ(t.verdicts(frame, 1), "D");
    t.set_clock(t.t0() + 200 * kMs);
    EXPECT_EQ(t.verdicts(frame, 2), "PD");

    EXPECT_EQ(t.counts().packets(1, kPass, SLUICE_REASON_ADMITTED), 5u);
}

// A policy change keeps what a source has left: its debt, kept in time, is
// converted to the same tokens under the new limit when the source is next
// seen (tokens that accrue before its next packet accrue at the old rate),
// clamped to the new burst. A larger burst is no refill, a lower rate no gift.
template <class Target>
void policy_change_keeps_a_sources_debt(Target& t) {
    const Bytes frame = udp_from("192.0.2.4");
    auto at = [&](uint64_t ms) { t.set_clock(t.t0() + ms * kMs); };
    // 10/s, burst 3: spent.
    t.apply(t.policy(1).add({.id = 1, .per_source = Limit{.rate = 10, .burst = 3}}).build());
    EXPECT_EQ(t.verdicts(frame, 4), "PPPD");
    // A higher rate: still no token until one accrues (100 ms at the old rate).
    t.apply(t.policy(2).add({.id = 1, .per_source = Limit{.rate = 20, .burst = 3}}).build());
    EXPECT_EQ(t.verdicts(frame, 1), "D");
    at(99);
    EXPECT_EQ(t.verdicts(frame, 1), "D");
    at(100);
    EXPECT_EQ(t.verdicts(frame, 2), "PD");
    // A smaller burst (1 at 20/s): what the source had left is clamped to it.
    t.apply(t.policy(3).add({.id = 1, .per_source = Limit{.rate = 20, .burst = 1}}).build());
    EXPECT_EQ(t.verdicts(frame, 1), "D");
    at(249);  // 2.98 tokens at 20/s, clamped to 1
    EXPECT_EQ(t.verdicts(frame, 2), "PD");
    // A larger burst (4) is no refill: empty stays empty ...
    t.apply(t.policy(4).add({.id = 1, .per_source = Limit{.rate = 20, .burst = 4}}).build());
    EXPECT_EQ(t.verdicts(frame, 1), "D");
    at(299);  // ... until the bucket is full again, now of 4
    EXPECT_EQ(t.verdicts(frame, 5), "PPPPD");
    // A lower rate (10/s) is no gift either.
    t.apply(t.policy(5).add({.id = 1, .per_source = Limit{.rate = 10, .burst = 4}}).build());
    EXPECT_EQ(t.verdicts(frame, 1), "D");
    at(349);  // one token at the old 20/s
    EXPECT_EQ(t.verdicts(frame, 2), "PD");

    const Counts c = t.counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 10u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 10u);
    EXPECT_EQ(t.stat(SLUICE_STAT_SOURCE_INSERTS), 1u);
}

// Every kind of change to a class's per-source limit, one after the other,
// on a source whose entry each leaves behind (README, "Policy changes keep
// debt"; the rule is sluice_source_debt_now's and sluice_source_window_step's):
// a change that keeps the limit keeps its debt (a penalty added); one that
// counts another way (algorithm, a window's length or count width) starts it
// fresh, once; a window's limit alone within its count width carries its
// counts on; a change of unit converts a debt with no refill. The clock
// stands still, and no limit refills within it.
template <class Target>
void every_kind_of_per_source_change_reads_the_entry_as_the_rule_says(Target& t) {
    const Bytes frame = udp_from("192.0.2.4");
    uint64_t version = 0;
    auto push = [&](ClassSpec spec) { t.apply(t.policy(++version).add(spec).build()); };
    auto window = [](uint8_t algorithm, uint64_t limit, uint64_t window_ns) {
        return WindowLimit{.algorithm = algorithm, .limit = limit, .window_ns = window_ns};
    };
    push({.id = 1, .per_source = Limit{.rate = 1, .burst = 3}});
    EXPECT_EQ(t.verdicts(frame, 4), "PPPD") << "gcra";
    push({.id = 1,
          .per_source = Limit{.rate = 1, .burst = 3},
          .penalty = PenaltyLimit{.over = 4, .within_ns = kSec, .for_ns = 10 * kSec}});
    EXPECT_EQ(t.verdicts(frame, 1), "D") << "the same limit, a penalty added: its debt kept";
    push({.id = 1, .per_source_window = window(SLUICE_ALGORITHM_FIXED_WINDOW, 2, 100 * kSec)});
    EXPECT_EQ(t.verdicts(frame, 3), "PPD") << "gcra -> fixed_window: fresh";
    push({.id = 1, .per_source_window = window(SLUICE_ALGORITHM_FIXED_WINDOW, 3, 100 * kSec)});
    EXPECT_EQ(t.verdicts(frame, 2), "PD") << "a limit of 3 in the same 2 bits: its 2 counted carry on";
    push({.id = 1, .per_source_window = window(SLUICE_ALGORITHM_FIXED_WINDOW, 4, 100 * kSec)});
    EXPECT_EQ(t.verdicts(frame, 5), "PPPPD") << "a limit of 4 needs 3 bits: fresh";
    push({.id = 1, .per_source_window = window(SLUICE_ALGORITHM_SLIDING_WINDOW, 4, 100 * kSec)});
    EXPECT_EQ(t.verdicts(frame, 5), "PPPPD") << "fixed_window -> sliding_window: fresh";
    push({.id = 1, .per_source_window = window(SLUICE_ALGORITHM_SLIDING_WINDOW, 4, 200 * kSec)});
    EXPECT_EQ(t.verdicts(frame, 5), "PPPPD") << "another window: fresh";
    push({.id = 1, .per_source = Limit{.rate = 1, .burst = 2}});
    EXPECT_EQ(t.verdicts(frame, 3), "PPD") << "sliding_window -> gcra: fresh";
    push({.id = 1, .per_source = Limit{.rate = 10000, .burst = 20000, .unit = Unit::bytes}});
    EXPECT_EQ(t.verdicts(frame, 1), "D") << "packets -> bytes: an empty bucket stays empty";
    push({.id = 1, .per_source = Limit{.rate = 1, .burst = 3}});
    EXPECT_EQ(t.verdicts(frame, 1), "D") << "bytes -> packets: an empty bucket stays empty";
    EXPECT_EQ(t.stat(SLUICE_STAT_SOURCE_INSERTS), 1u) << "one entry all along";
}

// A decision that read the active slot before an apply flipped it may still
// be running after decisions on the new version wrote the source's entry. It
// reads what the newer limit wrote as an empty bucket or a full window, never
// as fresh, even when its own limit reads the generation before it as fresh
// (README, "Policy changes keep debt"). The sequences are the control
// plane's own: sliding_window -> gcra -> another rate, and gcra ->
// sliding_window -> another window.
template <class Target>
void a_decision_on_a_replaced_limit_reads_a_newer_entry_as_spent(Target& t) {
    const Bytes frame = udp_from("192.0.2.5");
    uint64_t version = 0;
    auto push = [&](ClassSpec spec) { t.apply(t.policy(++version).add(spec).build()); };
    const WindowLimit sliding{.algorithm = SLUICE_ALGORITHM_SLIDING_WINDOW, .limit = 2, .window_ns = 100 * kSec};
    push({.id = 1, .per_source_window = sliding});
    EXPECT_EQ(t.verdicts(frame, 3), "PPD");
    push({.id = 1, .per_source = Limit{.rate = 1, .burst = 3}});
    EXPECT_EQ(t.verdicts(frame, 4), "PPPD") << "sliding_window -> gcra: fresh";
    push({.id = 1, .per_source = Limit{.rate = 2, .burst = 3}});
    EXPECT_EQ(t.verdicts(frame, 1), "D") << "another rate: its debt kept";
    t.set_clock(t.t0() + kSec);  // one token at the old rate, taken under the new one
    EXPECT_EQ(t.verdicts(frame, 2), "PD");
    EXPECT_EQ(t.verdicts_on_the_replaced_policy(frame, 2), "DD") << "the replaced rate: what the new one wrote is spent";
    EXPECT_EQ(t.verdicts(frame, 1), "D");

    push({.id = 1, .per_source_window = sliding});
    EXPECT_EQ(t.verdicts(frame, 3), "PPD") << "gcra -> sliding_window: fresh";
    push({.id = 1, .per_source_window = WindowLimit{.algorithm = SLUICE_ALGORITHM_SLIDING_WINDOW,
                                                    .limit = 2,
                                                    .window_ns = 200 * kSec}});
    EXPECT_EQ(t.verdicts(frame, 3), "PPD") << "another window: fresh";
    EXPECT_EQ(t.verdicts_on_the_replaced_policy(frame, 2), "DD")
        << "the replaced window: what the new one counted is a full window";
    EXPECT_EQ(t.verdicts(frame, 1), "D");
    EXPECT_EQ(t.stat(SLUICE_STAT_SOURCE_INSERTS), 1u) << "one entry all along";
}

// ---- the penalty box --------------------------------------------------------------

// 10/s, burst 5, penalty over 4 within 1 s for 10 s: the meter holds
// (4 - 1) x 10/s x 1 s = 30 refused packets, so at one instant a flood gets
// its burst of 5, 30 refusals, and the next refusal puts it in the box.
inline ClassSpec penalised_class(uint32_t id) {
    return {.id = id,
            .per_source = Limit{.rate = 10, .burst = 5},
            .penalty = PenaltyLimit{.over = 4, .within_ns = kSec, .for_ns = 10 * kSec}};
}

template <class Target>
void penalty_box_holds_a_flood_for_its_time_and_spares_a_polite_source(Target& t) {
    t.apply(t.policy().add(penalised_class(1)).build());
    const Bytes flood = udp_from("192.0.2.30"), polite = udp_from("192.0.2.31");

    EXPECT_EQ(t.verdicts(flood, 36), std::string(5, 'P') + std::string(31, 'D'));
    EXPECT_EQ(t.stat(SLUICE_STAT_PENALTIES), 1u);
    // In the box: refused at once, whatever refills, until exactly t0 + 10 s.
    for (uint64_t ms : {1ull, 500ull, 5000ull, 9999ull}) {
        t.set_clock(t.t0() + ms * kMs);
        EXPECT_EQ(t.verdicts(flood, 3), "DDD") << ms << " ms";
        // Its neighbour in the class keeps to its limit and stays out of it.
        EXPECT_EQ(t.verdicts(polite, ms == 1 ? 5 : 1), ms == 1 ? "PPPPP" : "P") << ms << " ms";
    }
    const Counts in_box = t.counts();
    EXPECT_EQ(in_box.packets(1, kDrop, SLUICE_REASON_PENALTY), 1u + 4 * 3);
    EXPECT_EQ(in_box.packets(1, kDrop, SLUICE_REASON_SOURCE), 30u);
    // Out of it with an empty bucket: refused for the margin and one
    // packet's time (100 ms), then limited to its rate again.
    t.set_clock(t.t0() + 10 * kSec);
    EXPECT_EQ(t.verdicts(flood, 1), "D");
    t.set_clock(t.t0() + 10 * kSec + kMs + 100 * kMs);
    EXPECT_EQ(t.verdicts(flood, 2), "PD");

    const Counts c = t.counts();
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_PENALTY), 13u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 32u);
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 5u + 5 + 3 + 1);
    EXPECT_EQ(t.stat(SLUICE_STAT_PENALTIES), 1u);
}

// A source refused at exactly (over - 1) x its rate sends `over` times its
// limit and is never penalised; a little more, and it is.
template <class Target>
void penalty_threshold_is_over_times_the_limit(Target& t) {
    t.apply(t.policy().add(penalised_class(1)).build());
    const Bytes at_edge = udp_from("192.0.2.32"), over_edge = udp_from("192.0.2.33");

    // 40/s against 10/s: one every 25 ms for 20 s, never boxed.
    for (uint64_t ms = 0; ms < 20'000; ms += 25) {
        t.set_clock(t.t0() + ms * kMs);
        t.verdicts(at_edge, 1);
    }
    EXPECT_EQ(t.counts().packets(1, kDrop, SLUICE_REASON_PENALTY), 0u);
    EXPECT_EQ(t.stat(SLUICE_STAT_PENALTIES), 0u);
    // 50/s: one every 20 ms; 40 refused a second fill the meter at 10 a
    // second net, boxed within its 1 s + 30 refusals' worth (a few seconds).
    uint64_t boxed_at_ms = 0;
    for (uint64_t ms = 20'000; ms < 40'000 && boxed_at_ms == 0; ms += 20) {
        t.set_clock(t.t0() + ms * kMs);
        t.verdicts(over_edge, 1);
        if (t.stat(SLUICE_STAT_PENALTIES) == 1) boxed_at_ms = ms;
    }
    EXPECT_GT(boxed_at_ms, 20'000u);
    EXPECT_LT(boxed_at_ms, 25'000u);
}

// ---- timed bans -------------------------------------------------------------------

inline DataplaneBan ban_of(const std::string& cidr, uint64_t until_ns, uint32_t slot) {
    auto prefix = parse_prefix(cidr, 0);
    EXPECT_TRUE(prefix.ok()) << describe(prefix);
    return {prefix.ok() ? prefix.value() : PolicyPrefix{}, until_ns, slot};
}

// A ban drops its prefix before classification, so even a `pass` class's
// sources, of either family, counted under class 0 and in the ban's slot,
// and ends at its time without anyone removing it.
template <class Target>
void ban_drops_its_prefix_until_its_time_even_in_a_pass_class(Target& t) {
    t.apply(t.policy()
                .add({.id = 1, .per_source = Limit{.rate = 1, .burst = 100}})
                .add({.id = 2, .action = SLUICE_ACTION_PASS})
                .prefix("192.0.2.0/24", 2)
                .build());
    SLUICE_ASSERT_OK(t.set_bans({ban_of("192.0.2.0/25", t.t0() + 10 * kSec, 7),
                                 ban_of("2001:db8::/32", t.t0() + 10 * kSec, 9)}));
    const Bytes banned = udp_from("192.0.2.10"), spared = udp_from("192.0.2.200");
    const Bytes banned6 = udp_from("2001:db8::1"), spared6 = udp_from("2001:db9::1");

    EXPECT_EQ(t.verdicts(banned, 3), "DDD");
    EXPECT_EQ(t.verdicts(spared, 3), "PPP");
    EXPECT_EQ(t.verdicts(banned6, 2), "DD");
    EXPECT_EQ(t.verdicts(spared6, 2), "PP");
    t.set_clock(t.t0() + 10 * kSec - 1);
    EXPECT_EQ(t.verdicts(banned, 1), "D");
    t.set_clock(t.t0() + 10 * kSec);
    EXPECT_EQ(t.verdicts(banned, 1), "P");
    EXPECT_EQ(t.verdicts(banned6, 1), "P");

    const Counts c = t.counts();
    EXPECT_EQ(c.packets(SLUICE_CLASS_UNCLASSIFIED, kDrop, SLUICE_REASON_BAN), 6u);
    EXPECT_EQ(c.packets(2, kPass, SLUICE_REASON_ALLOWED), 4u);
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 3u);
    const std::vector<sluice_counter> slots = t.ban_counters();
    ASSERT_EQ(slots.size(), size_t{SLUICE_MAX_BANS});
    EXPECT_EQ(slots[7].packets, 4u);
    EXPECT_EQ(slots[7].bytes, 4 * banned.size());
    EXPECT_EQ(slots[9].packets, 2u);
    EXPECT_EQ(slots[9].bytes, 2 * banned6.size());
}

// Before any policy everything passes (stat no_policy), but for what a ban
// catches. Precondition: no policy was ever applied to the target.
template <class Target>
void a_ban_holds_before_the_first_policy(Target& t) {
    SLUICE_ASSERT_OK(t.set_bans({ban_of("192.0.2.0/24", t.t0() + kSec, 3)}));
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.1"), 2), "DD");
    EXPECT_EQ(t.verdicts(udp_from("198.51.100.1"), 1), "P");
    EXPECT_EQ(t.stat(SLUICE_STAT_NO_POLICY), 1u);
    EXPECT_EQ(t.ban_counters()[3].packets, 2u);
    EXPECT_EQ(t.counts().packets(SLUICE_CLASS_UNCLASSIFIED, kDrop, SLUICE_REASON_BAN), 2u);
}

// The longest ban in force covering a source decides, and one that ended
// does not hide a shorter one; a new set replaces the old at once (an unban
// lifts it before the next packet), and a set a dataplane refuses changes
// nothing.
template <class Target>
void bans_are_replaced_at_once_and_a_bad_set_changes_nothing(Target& t) {
    t.apply(t.policy().add({.id = 1, .per_source = Limit{.rate = 1, .burst = 100}}).build());
    const uint64_t later = t.t0() + 60 * kSec;
    SLUICE_ASSERT_OK(t.set_bans({ban_of("10.0.0.0/8", later, 1), ban_of("10.1.0.0/16", t.t0() + kSec, 2)}));
    const Bytes inner = udp_from("10.1.2.3"), outer = udp_from("10.2.0.1"), elsewhere = udp_from("192.0.2.1");
    EXPECT_EQ(t.verdicts(inner, 2), "DD");
    EXPECT_EQ(t.verdicts(outer, 1), "D");
    EXPECT_EQ(t.verdicts(elsewhere, 1), "P");
    EXPECT_EQ(t.ban_counters()[2].packets, 2u);
    EXPECT_EQ(t.ban_counters()[1].packets, 1u);

    // Slot 1 twice: refused, and both bans stay.
    EXPECT_FALSE(t.set_bans({ban_of("10.0.0.0/8", later, 1), ban_of("10.9.0.0/16", later, 1)}).ok());
    EXPECT_EQ(t.verdicts(inner, 1), "D");
    EXPECT_EQ(t.ban_counters()[2].packets, 3u);

    // The /16 ended: its sources fall to the /8.
    t.set_clock(t.t0() + 2 * kSec);
    EXPECT_EQ(t.verdicts(inner, 1), "D");
    EXPECT_EQ(t.ban_counters()[1].packets, 2u);
    EXPECT_EQ(t.ban_counters()[2].packets, 3u);
    // Everything lifted.
    SLUICE_ASSERT_OK(t.set_bans({}));
    EXPECT_EQ(t.verdicts(inner, 1), "P");
    EXPECT_EQ(t.verdicts(outer, 1), "P");
    EXPECT_EQ(t.counts().packets(SLUICE_CLASS_UNCLASSIFIED, kDrop, SLUICE_REASON_BAN), 5u);
}

// Each prefix length a family's bans use is a probe for every packet of it:
// a ninth is refused, naming the bound, and the set in force stays.
template <class Target>
void a_ninth_ban_length_is_refused(Target& t) {
    t.apply(t.policy().add({.id = 1, .per_source = Limit{.rate = 1, .burst = 100}}).build());
    const uint64_t later = t.t0() + 60 * kSec;
    std::vector<DataplaneBan> bans;
    for (uint32_t length = 24; length < 24 + SLUICE_BAN_LENGTHS_MAX; length++)
        bans.push_back(ban_of("10.0.0.0/" + std::to_string(length), later, length));
    SLUICE_ASSERT_OK(t.set_bans(bans));
    bans.push_back(ban_of("10.0.0.0/8", later, 8));
    const Status refused = t.set_bans(bans);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().message.find("at most 8"), std::string::npos) << refused.error().message;
    EXPECT_EQ(t.verdicts(udp_from("10.0.0.1"), 1), "D");    // the /31 (slot 31)
    EXPECT_EQ(t.verdicts(udp_from("10.0.0.200"), 1), "D");  // the /24
    EXPECT_EQ(t.verdicts(udp_from("10.0.1.1"), 1), "P");    // not the refused /8
    EXPECT_EQ(t.ban_counters()[31].packets, 1u);
    EXPECT_EQ(t.ban_counters()[24].packets, 1u);
}

// Lowering a rate under a flood must not hand every throttled source the
// difference: the debt kept in time is worth five times the packets at a
// fifth of the rate, unless it is converted.
template <class Target>
void lower_rate_grants_nothing(Target& t) {
    // 1000/s, burst 20 (20 ms); then 200/s, burst 20 (100 ms).
    t.apply(t.policy(1).add({.id = 1, .per_source = Limit{.rate = 1000, .burst = 20}}).build());
    const Bytes frame = udp_from("192.0.2.6");
    EXPECT_EQ(t.verdicts(frame, 21), std::string(20, 'P') + "D");  // 20 ms ahead
    t.apply(t.policy(2).add({.id = 1, .per_source = Limit{.rate = 200, .burst = 20}}).build());
    EXPECT_EQ(t.verdicts(frame, 1), "D");
    // One old packet's worth later, one packet, charged at the new rate (5 ms).
    t.set_clock(t.t0() + 1 * kMs);
    EXPECT_EQ(t.verdicts(frame, 2), "PD");
    t.set_clock(t.t0() + 5 * kMs);
    EXPECT_EQ(t.verdicts(frame, 1), "D");
    t.set_clock(t.t0() + 6 * kMs);
    EXPECT_EQ(t.verdicts(frame, 2), "PD");
}

// Byte mode charges each frame its own length in whole ns of schedule,
// rounded up: at 3 bytes/s a byte is 333,333,333.3 ns and a 60-byte frame
// costs 20 s and 1 ns. The burst gets the rounding back, so a full bucket of
// 120 bytes still holds two such frames.
template <class Target>
void byte_costs_round_up_and_a_burst_still_holds_its_frames(Target& t) {
    t.apply(
        t.policy()
            .add({.id = 1, .per_source = Limit{.rate = 3, .burst = 120, .unit = Unit::bytes, .max_frame_bytes = 60}})
            .build());
    const Bytes frame = udp_from("192.0.2.5");
    ASSERT_EQ(frame.size(), 60u);
    EXPECT_EQ(t.verdicts(frame, 3), "PPD");
    t.set_clock(t.t0() + 19'900 * kMs);  // 59.7 bytes refilled
    EXPECT_EQ(t.verdicts(frame, 1), "D");
    t.set_clock(t.t0() + 20 * kSec);  // 60
    EXPECT_EQ(t.verdicts(frame, 2), "PD");
}

// ---- address families, tags and fragments -----------------------------------------

// 3 packets of burst; the clock never moves.
inline ClassSpec limited(uint32_t id, uint8_t prefix_v4 = 32, uint8_t prefix_v6 = 64) {
    return {.id = id, .per_source = Limit{.rate = 1, .burst = 3}, .prefix_v4 = prefix_v4, .prefix_v6 = prefix_v6};
}

template <class Target>
void ipv4_sources_have_their_own_buckets(Target& t) {
    t.apply(t.policy().add(limited(1)).build());
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.1"), 4), "PPPD");
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.2"), 4), "PPPD");
    EXPECT_EQ(t.stat(SLUICE_STAT_SOURCE_INSERTS), 2u);
}

template <class Target>
void ipv4_prefix_aggregation(Target& t) {
    // prefix_v4 = 24: every address of a /24 is one source.
    t.apply(t.policy().add(limited(1, 24)).build());
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.1"), 2), "PP");
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.200"), 2), "PD");
    EXPECT_EQ(t.verdicts(udp_from("192.0.3.1"), 1), "P");
}

template <class Target>
void ipv6_sources_share_their_slash64(Target& t) {
    t.apply(t.policy().add(limited(1)).build());
    EXPECT_EQ(t.verdicts(udp_from("2001:db8:1:2::1"), 2), "PP");
    // Same /64, other interface id: the same bucket.
    EXPECT_EQ(t.verdicts(udp_from("2001:db8:1:2:ffff:eeee:dddd:5"), 2), "PD");
    // The next /64 has its own.
    EXPECT_EQ(t.verdicts(udp_from("2001:db8:1:3::1"), 4), "PPPD");

    const Counts c = t.counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 6u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 2u);
    EXPECT_EQ(t.stat(SLUICE_STAT_SOURCE_INSERTS), 2u);
}

template <class Target>
void ipv6_prefix128_keeps_addresses_apart(Target& t) {
    t.apply(t.policy().add(limited(1, 32, 128)).build());
    EXPECT_EQ(t.verdicts(udp_from("2001:db8:1:2::1"), 4), "PPPD");
    EXPECT_EQ(t.verdicts(udp_from("2001:db8:1:2::2"), 4), "PPPD");
    EXPECT_EQ(t.stat(SLUICE_STAT_SOURCE_INSERTS), 2u);
}

template <class Target>
void vlan_and_qinq_frames_are_limited_by_their_inner_source(Target& t) {
    t.apply(t.policy().add(limited(1)).add(limited(2)).prefix("2001:db8:7::/48", 2).build());
    const auto plain = udp_from("192.0.2.9");
    const auto dot1q = PacketBuilder().eth().vlan(0x8100, 10).ipv4("192.0.2.9", "198.51.100.1").udp(1, 2).build();
    const auto qinq =
        PacketBuilder().eth().vlan(0x88a8, 100).vlan(0x8100, 20).ipv4("192.0.2.9", "198.51.100.1").udp(1, 2).build();
    // One bucket whatever the tags: three packets in all, then drops.
    EXPECT_EQ(t.verdicts(plain, 1), "P");
    EXPECT_EQ(t.verdicts(dot1q, 1), "P");
    EXPECT_EQ(t.verdicts(qinq, 1), "P");
    EXPECT_EQ(t.verdicts(plain, 1), "D");
    EXPECT_EQ(t.verdicts(dot1q, 1), "D");
    EXPECT_EQ(t.verdicts(qinq, 1), "D");

    // The inner source also classifies: a QinQ IPv6 frame of class 2.
    const auto qinq6 =
        PacketBuilder().eth().vlan(0x88a8, 100).vlan(0x8100, 20).ipv6("2001:db8:7::1", "2001:db8::1").udp(1, 2).build();
    EXPECT_EQ(t.verdicts(qinq6, 4), "PPPD");

    const Counts c = t.counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 3u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 3u);
    EXPECT_EQ(c.packets(2, kPass, SLUICE_REASON_ADMITTED), 3u);
    EXPECT_EQ(c.packets(2, kDrop, SLUICE_REASON_SOURCE), 1u);
    EXPECT_EQ(c.reason(SLUICE_REASON_MALFORMED), 0u);
}

// A first fragment, a later one (no L4 header) and a whole datagram from one
// source share one bucket of 3, and none of them is malformed.
template <class Target>
void fragments_share_one_bucket(Target& t, const Bytes& first, const Bytes& later, const Bytes& whole) {
    t.apply(t.policy().add(limited(1)).build());
    EXPECT_EQ(t.verdicts(first, 1), "P");
    EXPECT_EQ(t.verdicts(later, 1), "P");
    EXPECT_EQ(t.verdicts(whole, 1), "P");
    EXPECT_EQ(t.verdicts(later, 1), "D");
    EXPECT_EQ(t.verdicts(first, 1), "D");
    EXPECT_EQ(t.stat(SLUICE_STAT_SOURCE_INSERTS), 1u);
    EXPECT_EQ(t.counts().reason(SLUICE_REASON_MALFORMED), 0u);
}

template <class Target>
void ipv4_fragments_count_against_their_source(Target& t) {
    fragments_share_one_bucket(
        t, PacketBuilder().eth().ipv4("192.0.2.77", "198.51.100.1").fragment(0, true).udp(1, 2).payload(32).build(),
        PacketBuilder().eth().ipv4("192.0.2.77", "198.51.100.1").fragment(5, false).payload(24).build(),
        udp_from("192.0.2.77"));
}

template <class Target>
void ipv6_fragments_count_against_their_source(Target& t) {
    fragments_share_one_bucket(
        t, PacketBuilder().eth().ipv6("2001:db8:1::77", "2001:db8::1").fragment(0, true).udp(1, 2).payload(32).build(),
        PacketBuilder().eth().ipv6("2001:db8:1::77", "2001:db8::1").fragment(5, false).payload(24).build(),
        udp_from("2001:db8:1::77"));
}

// ---- frames that do not parse (run once per pair of verdicts) -----------------------

struct UnparsedVerdicts {
    uint8_t malformed;
    uint8_t non_ip;
};

// Test names for suites run once per pair of verdicts.
inline std::string unparsed_case_name(const ::testing::TestParamInfo<UnparsedVerdicts>& info) {
    return info.param.malformed == kDrop ? "malformed_drop_non_ip_pass" : "malformed_pass_non_ip_drop";
}

// The policy of the unparsed-frame scenarios: a limited default class (a
// frame that reached it would make source state) and the given verdicts.
template <class Target>
void apply_unparsed_policy(Target& t, UnparsedVerdicts v) {
    t.apply(t.policy()
                .add({.id = 1, .per_source = Limit{.rate = 1, .burst = 1}})
                .malformed(v.malformed)
                .non_ip(v.non_ip)
                .build());
}

// Frames of at least an Ethernet header that the parser must refuse.
inline std::vector<std::pair<std::string, Bytes>> malformed_frames() {
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

template <class Target>
void malformed_frames_get_the_malformed_verdict_under_class_zero(Target& t, UnparsedVerdicts v) {
    apply_unparsed_policy(t, v);
    uint64_t frames = 0, bytes = 0;
    for (const auto& [name, frame] : malformed_frames()) {
        SCOPED_TRACE(name);
        EXPECT_EQ(t.verdicts(frame, 1), letter(v.malformed));
        frames++;
        bytes += frame.size();
    }
    const Counts c = t.counts();
    EXPECT_EQ(c.packets(SLUICE_CLASS_UNCLASSIFIED, v.malformed, SLUICE_REASON_MALFORMED), frames);
    EXPECT_EQ(c.bytes(SLUICE_CLASS_UNCLASSIFIED, v.malformed, SLUICE_REASON_MALFORMED), bytes);
    EXPECT_EQ(c.total(), frames);
    // Nothing reached a class: no source state.
    EXPECT_EQ(t.stat(SLUICE_STAT_SOURCE_INSERTS), 0u);
}

template <class Target>
void non_ip_frames_get_the_non_ip_verdict(Target& t, UnparsedVerdicts v) {
    apply_unparsed_policy(t, v);
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
        EXPECT_EQ(t.verdicts(frame, 1), letter(v.non_ip));
        bytes += frame.size();
    }
    const Counts c = t.counts();
    EXPECT_EQ(c.packets(SLUICE_CLASS_UNCLASSIFIED, v.non_ip, SLUICE_REASON_NON_IP), frames.size());
    EXPECT_EQ(c.bytes(SLUICE_CLASS_UNCLASSIFIED, v.non_ip, SLUICE_REASON_NON_IP), bytes);
    EXPECT_EQ(c.total(), frames.size());
    EXPECT_EQ(t.stat(SLUICE_STAT_SOURCE_INSERTS), 0u);
}

// ---- classification, class actions and levels ---------------------------------------

template <class Target>
void longest_prefix_picks_the_class(Target& t) {
    t.apply(t.policy()
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

    EXPECT_EQ(t.verdicts(udp_from("10.9.9.9"), 2), "DD");                   // /8: drop
    EXPECT_EQ(t.verdicts(udp_from("10.1.9.9"), 50), std::string(50, 'P'));  // /16: pass, never limited
    EXPECT_EQ(t.verdicts(udp_from("10.1.9.10"), 1), "D");                   // /32 inside the /16
    EXPECT_EQ(t.verdicts(udp_from("10.1.2.3"), 2), "PD");                   // /24: limited to 1
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.1"), 3), "PPD");                 // no match: default
    EXPECT_EQ(t.verdicts(udp_from("2001:db8:5::1"), 3), "PPP");             // /48 pass
    EXPECT_EQ(t.verdicts(udp_from("2001:db8:6::1"), 1), "D");               // /32 drop
    EXPECT_EQ(t.verdicts(udp_from("2001:db9::1"), 3), "PPD");               // default

    const Counts c = t.counts();
    EXPECT_EQ(c.packets(2, kDrop, SLUICE_REASON_DENY), 4u);
    EXPECT_EQ(c.packets(3, kPass, SLUICE_REASON_ALLOWED), 53u);
    EXPECT_EQ(c.packets(4, kPass, SLUICE_REASON_ADMITTED), 1u);
    EXPECT_EQ(c.packets(4, kDrop, SLUICE_REASON_SOURCE), 1u);
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 4u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 2u);
    EXPECT_EQ(c.total(), 65u);
    // Pass and drop classes never touch a bucket: state for the three
    // limited sources only, all in debt (the clock never moved).
    EXPECT_EQ(t.stat(SLUICE_STAT_SOURCE_INSERTS), 3u);
    EXPECT_EQ(t.source_table().in_debt, 3u);
    EXPECT_EQ(t.source_table().known, 3u);
}

template <class Target>
void pass_class_is_never_limited_even_under_a_global_ceiling(Target& t) {
    t.apply(t.policy().add({.id = 1, .action = SLUICE_ACTION_PASS}).global(packets(1)).build());
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.1"), 1000), std::string(1000, 'P'));
    const Counts c = t.counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ALLOWED), 1000u);
    EXPECT_EQ(c.total(), 1000u);
}

template <class Target>
void global_ceiling_across_sources(Target& t) {
    t.apply(t.policy().add({.id = 1, .per_source = packets(3)}).global(packets(4)).build());
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.1"), 3), "PPP");
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.2"), 3), "PDD");
    // The first source's own bucket is empty: it refuses before the ceiling.
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.1"), 1), "D");

    const Counts c = t.counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 4u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_GLOBAL), 2u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 1u);
}

template <class Target>
void class_aggregate_is_shared_within_the_class_only(Target& t) {
    t.apply(t.policy()
                .add({.id = 1, .per_source = packets(3)})  // default
                .add({.id = 2, .per_source = packets(3), .aggregate = packets(4)})
                .prefix("10.0.0.0/8", 2)
                .build());
    EXPECT_EQ(t.verdicts(udp_from("10.0.0.1"), 3), "PPP");
    EXPECT_EQ(t.verdicts(udp_from("10.0.0.2"), 3), "PDD");
    // Another class is unaffected by class 2's empty aggregate.
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.1"), 4), "PPPD");

    const Counts c = t.counts();
    EXPECT_EQ(c.packets(2, kPass, SLUICE_REASON_ADMITTED), 4u);
    EXPECT_EQ(c.packets(2, kDrop, SLUICE_REASON_CLASS), 2u);
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 3u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 1u);
    EXPECT_EQ(c.reason(SLUICE_REASON_CLASS), 2u);
}

template <class Target>
void default_class_action_applies(Target& t) {
    t.apply(t.policy()
                .add({.id = 1, .per_source = packets(3)})
                .add({.id = 7, .action = SLUICE_ACTION_DROP})
                .default_class(7)
                .prefix("192.0.2.0/24", 1)
                .build());
    EXPECT_EQ(t.verdicts(udp_from("198.18.0.1"), 2), "DD");
    EXPECT_EQ(t.verdicts(udp_from("2001:db8::1"), 1), "D");
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.1"), 1), "P");
    EXPECT_EQ(t.counts().packets(7, kDrop, SLUICE_REASON_DENY), 3u);
}

// ---- the class aggregate's window algorithms on the fake clock ----------------------------

// The first boundary of a window of `window_ns` after t0(): windows are
// aligned to the clock, not to the test.
template <class Target>
uint64_t next_window(Target& t, uint64_t window_ns) {
    return (t.t0() / window_ns + 1) * window_ns;
}

inline ClassSpec windowed(uint8_t algorithm, uint64_t limit, Unit unit = Unit::packets) {
    return {.id = 1,
            .aggregate_window = WindowLimit{.algorithm = algorithm, .limit = limit, .window_ns = kSec, .unit = unit}};
}

// At most `limit` per aligned window, whatever the sources; and twice that
// in one millisecond across a boundary, the algorithm's known weakness.
template <class Target>
void fixed_window_admits_its_limit_per_aligned_window(Target& t) {
    t.apply(t.policy().add(windowed(SLUICE_ALGORITHM_FIXED_WINDOW, 3)).build());
    const uint64_t boundary = next_window(t, kSec) + kSec;
    t.set_clock(boundary - kMs);
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.30"), 2), "PP");
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.31"), 3), "PDD");
    t.set_clock(boundary);
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.31"), 4), "PPPD");
    t.set_clock(boundary + kSec - 1);
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.32"), 1), "D");
    t.set_clock(boundary + 5 * kSec + 7 * kMs);  // idle windows count nothing
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.32"), 4), "PPPD");

    const Counts c = t.counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 9u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_CLASS), 5u);
}

// The previous window weighs in by the share of it still inside the rolling
// window: with 4 per second, 4 admitted in one window leave 2 at its
// successor's middle, and that window's 2 leave 3 at three quarters of the next.
template <class Target>
void sliding_window_weighs_the_previous_window(Target& t) {
    t.apply(t.policy().add(windowed(SLUICE_ALGORITHM_SLIDING_WINDOW, 4)).build());
    const Bytes frame = udp_from("192.0.2.33");
    const uint64_t start = next_window(t, kSec);
    t.set_clock(start);
    EXPECT_EQ(t.verdicts(frame, 5), "PPPPD");
    t.set_clock(start + kSec + 500 * kMs);
    EXPECT_EQ(t.verdicts(frame, 3), "PPD");
    t.set_clock(start + 2 * kSec + 750 * kMs);
    EXPECT_EQ(t.verdicts(frame, 4), "PPPD");
    t.set_clock(start + 4 * kSec);  // two windows on: nothing weighs
    EXPECT_EQ(t.verdicts(frame, 5), "PPPPD");
    EXPECT_EQ(t.counts().packets(1, kDrop, SLUICE_REASON_CLASS), 4u);
}

// Exactly `limit` in every rolling window: an admission leaves the window
// exactly one window after it came.
template <class Target>
void sliding_log_admits_its_limit_in_every_rolling_window(Target& t) {
    t.apply(t.policy().add(windowed(SLUICE_ALGORITHM_SLIDING_LOG, 3)).build());
    const Bytes frame = udp_from("192.0.2.34");
    const uint64_t start = t.t0() + 123 * kMs;  // no alignment: the window rolls with each admission
    t.set_clock(start);
    EXPECT_EQ(t.verdicts(frame, 1), "P");
    t.set_clock(start + 400 * kMs);
    EXPECT_EQ(t.verdicts(frame, 3), "PPD");
    t.set_clock(start + kSec - 1);
    EXPECT_EQ(t.verdicts(frame, 1), "D");
    t.set_clock(start + kSec);  // the first has left
    EXPECT_EQ(t.verdicts(frame, 2), "PD");
    t.set_clock(start + 1400 * kMs);  // and both of the second
    EXPECT_EQ(t.verdicts(frame, 3), "PPD");
    const Counts c = t.counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 6u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_CLASS), 4u);
}

// "3 new connections a second for the whole class, exact": sliding_log
// counting TCP SYNs; everything else passes the level uncounted.
template <class Target>
void sliding_log_of_tcp_syns_passes_established_traffic(Target& t) {
    t.apply(t.policy().add(windowed(SLUICE_ALGORITHM_SLIDING_LOG, 3, Unit::tcp_syn)).build());
    const uint64_t start = t.t0() + 77 * kMs;
    t.set_clock(start);
    EXPECT_EQ(t.verdicts(tcp_from("192.0.2.35", 0x02), 2), "PP");
    EXPECT_EQ(t.verdicts(tcp_from("192.0.2.36", 0x02), 2), "PD");
    EXPECT_EQ(t.verdicts(tcp_from("192.0.2.35", 0x10), 5), "PPPPP");
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.36"), 2), "PP");
    t.set_clock(start + kSec);
    EXPECT_EQ(t.verdicts(tcp_from("192.0.2.36", 0x02), 4), "PPPD");
    EXPECT_EQ(t.counts().packets(1, kDrop, SLUICE_REASON_CLASS), 2u);
}

// Check-then-commit holds for a window aggregate: its refusals spend nothing
// from the source, and refusals above it (the global ceiling) spend nothing
// from the window.
template <class Target>
void window_aggregate_composes_check_then_commit(Target& t) {
    ClassSpec cls = windowed(SLUICE_ALGORITHM_FIXED_WINDOW, 2);
    cls.per_source = packets(5);
    const uint64_t start = next_window(t, kSec);
    t.set_clock(start);
    t.apply(t.policy(1).add(cls).build());
    const Bytes frame = udp_from("192.0.2.37");
    EXPECT_EQ(t.verdicts(frame, 4), "PPDD");
    t.set_clock(start + kSec);
    t.apply(t.policy(2).add(cls).global(Limit{.rate = 1, .burst = t.per_cpu(Accuracy::lease)}).build());
    EXPECT_EQ(t.verdicts(frame, 3), "PDD");  // the ceiling refuses the second
    t.apply(t.policy(3).add(cls).build());
    EXPECT_EQ(t.verdicts(frame, 2), "PD");  // the window still has its second unit
    t.set_clock(start + 2 * kSec);
    EXPECT_EQ(t.verdicts(frame, 3), "PPD");
    // The source spent only what was admitted: 6 of 5 + 2 refilled.
    ClassSpec source_only = cls;
    source_only.aggregate_window.reset();
    t.apply(t.policy(4).add(source_only).build());
    EXPECT_EQ(t.verdicts(frame, 2), "PD");
    const Counts c = t.counts();
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_CLASS), 4u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_GLOBAL), 2u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 1u);
}

// A version that changes a class's algorithm (or window) starts the class's
// count afresh: the old state means something else under the new algorithm.
// One that changes only the limit keeps it.
template <class Target>
void changing_the_algorithm_starts_the_count_afresh(Target& t) {
    const uint64_t start = next_window(t, kSec);
    t.set_clock(start);
    const Bytes frame = udp_from("192.0.2.38");
    t.apply(t.policy(1).add(windowed(SLUICE_ALGORITHM_FIXED_WINDOW, 3)).build());
    EXPECT_EQ(t.verdicts(frame, 4), "PPPD");
    t.apply(t.policy(2).add(windowed(SLUICE_ALGORITHM_SLIDING_WINDOW, 3)).build());
    EXPECT_EQ(t.verdicts(frame, 4), "PPPD");
    t.apply(t.policy(3).add(windowed(SLUICE_ALGORITHM_SLIDING_WINDOW, 5)).build());
    EXPECT_EQ(t.verdicts(frame, 3), "PPD");
    t.apply(t.policy(4).add(windowed(SLUICE_ALGORITHM_SLIDING_LOG, 2)).build());
    EXPECT_EQ(t.verdicts(frame, 3), "PPD");
    ClassSpec longer = windowed(SLUICE_ALGORITHM_SLIDING_LOG, 2);
    longer.aggregate_window->window_ns = 2 * kSec;
    t.apply(t.policy(5).add(longer).build());
    EXPECT_EQ(t.verdicts(frame, 3), "PPD");
    EXPECT_EQ(t.counts().packets(1, kDrop, SLUICE_REASON_CLASS), 5u);
}

// ---- the per-source level's window algorithms on the fake clock ---------------------------

inline ClassSpec windowed_sources(uint8_t algorithm, uint64_t limit, Unit unit = Unit::packets) {
    return {.id = 1,
            .per_source_window = WindowLimit{.algorithm = algorithm, .limit = limit, .window_ns = kSec, .unit = unit}};
}

// Each source has its own count: at most `limit` per aligned window, and
// twice that across a boundary; a source it refuses leaves the others alone.
template <class Target>
void per_source_fixed_window_counts_each_source_apart(Target& t) {
    t.apply(t.policy().add(windowed_sources(SLUICE_ALGORITHM_FIXED_WINDOW, 3)).build());
    const Bytes a = udp_from("192.0.2.50"), b = udp_from("192.0.2.51");
    const uint64_t boundary = next_window(t, kSec) + kSec;
    t.set_clock(boundary - kMs);
    EXPECT_EQ(t.verdicts(a, 4), "PPPD");
    EXPECT_EQ(t.verdicts(b, 2), "PP");
    t.set_clock(boundary);
    EXPECT_EQ(t.verdicts(a, 4), "PPPD");  // 6 within 1 ms: the boundary's double burst
    EXPECT_EQ(t.verdicts(b, 4), "PPPD");
    t.set_clock(boundary + kSec - 1);
    EXPECT_EQ(t.verdicts(a, 1), "D");
    t.set_clock(boundary + 5 * kSec + 7 * kMs);  // idle windows count nothing
    EXPECT_EQ(t.verdicts(a, 4), "PPPD");

    const Counts c = t.counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 14u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 5u);
    EXPECT_EQ(t.stat(SLUICE_STAT_SOURCE_INSERTS), 2u);
}

// The aggregate's sliding-window sequence, per source: two sources side by
// side get the same answers.
template <class Target>
void per_source_sliding_window_weighs_the_previous_window(Target& t) {
    t.apply(t.policy().add(windowed_sources(SLUICE_ALGORITHM_SLIDING_WINDOW, 4)).build());
    const Bytes a = udp_from("192.0.2.52"), b = udp_from("192.0.2.53");
    const uint64_t start = next_window(t, kSec);
    for (const Bytes* frame : {&a, &b}) {
        t.set_clock(start);
        EXPECT_EQ(t.verdicts(*frame, 5), "PPPPD");
        t.set_clock(start + kSec + 500 * kMs);
        EXPECT_EQ(t.verdicts(*frame, 3), "PPD");
    }
    t.set_clock(start + 2 * kSec + 750 * kMs);
    EXPECT_EQ(t.verdicts(a, 4), "PPPD");
    EXPECT_EQ(t.verdicts(b, 4), "PPPD");
    t.set_clock(start + 4 * kSec);  // two windows on: nothing weighs
    EXPECT_EQ(t.verdicts(a, 5), "PPPPD");
    EXPECT_EQ(t.counts().packets(1, kDrop, SLUICE_REASON_SOURCE), 7u);
}

// "3 new connections per source per second": SYNs counted per source, the
// rest of each source's traffic passes the level uncounted.
template <class Target>
void per_source_window_of_tcp_syns_passes_established_traffic(Target& t) {
    t.apply(t.policy().add(windowed_sources(SLUICE_ALGORITHM_FIXED_WINDOW, 3, Unit::tcp_syn)).build());
    const uint64_t start = next_window(t, kSec);
    t.set_clock(start);
    EXPECT_EQ(t.verdicts(tcp_from("192.0.2.54", 0x02), 4), "PPPD");
    EXPECT_EQ(t.verdicts(tcp_from("192.0.2.55", 0x02), 3), "PPP");
    EXPECT_EQ(t.verdicts(tcp_from("192.0.2.54", 0x10), 5), "PPPPP");
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.54"), 2), "PP");
    t.set_clock(start + kSec);
    EXPECT_EQ(t.verdicts(tcp_from("192.0.2.54", 0x02), 4), "PPPD");
    EXPECT_EQ(t.counts().packets(1, kDrop, SLUICE_REASON_SOURCE), 2u);
}

// Check-then-commit with a window at the source: a packet the aggregate
// refuses takes nothing from its source's window, and one the source refuses
// takes nothing from the aggregate.
template <class Target>
void per_source_window_composes_check_then_commit(Target& t) {
    ClassSpec cls = windowed_sources(SLUICE_ALGORITHM_FIXED_WINDOW, 3);
    cls.aggregate = Limit{.rate = 1, .burst = 4 * t.per_cpu(Accuracy::lease)};
    const uint64_t start = next_window(t, kSec);
    t.set_clock(start);
    t.apply(t.policy(1).add(cls).build());
    const Bytes a = udp_from("192.0.2.56"), b = udp_from("192.0.2.57");
    EXPECT_EQ(t.verdicts(a, 5), "PPPDD");  // the source refuses the last two
    EXPECT_EQ(t.verdicts(b, 3), "PDD");    // the aggregate's fourth, then it refuses
    ClassSpec sources_only = cls;
    sources_only.aggregate.reset();
    t.apply(t.policy(2).add(sources_only).build());
    EXPECT_EQ(t.verdicts(b, 3), "PPD");  // b's window holds the one it was admitted
    const Counts c = t.counts();
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 3u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_CLASS), 2u);
}

// A version that changes the per-source algorithm starts every source of
// the class afresh, GCRA's debt included; one that changes only the limit
// keeps the counts (while the limit needs as many bits: 5 and 7 need 3).
template <class Target>
void changing_the_per_source_algorithm_starts_sources_afresh(Target& t) {
    const uint64_t start = next_window(t, kSec);
    t.set_clock(start);
    const Bytes frame = udp_from("192.0.2.58");
    t.apply(t.policy(1).add({.id = 1, .per_source = packets(3)}).build());
    EXPECT_EQ(t.verdicts(frame, 4), "PPPD");
    t.apply(t.policy(2).add(windowed_sources(SLUICE_ALGORITHM_FIXED_WINDOW, 5)).build());
    EXPECT_EQ(t.verdicts(frame, 6), "PPPPPD");
    t.apply(t.policy(3).add(windowed_sources(SLUICE_ALGORITHM_FIXED_WINDOW, 7)).build());
    EXPECT_EQ(t.verdicts(frame, 3), "PPD");
    t.apply(t.policy(4).add(windowed_sources(SLUICE_ALGORITHM_SLIDING_WINDOW, 3)).build());
    EXPECT_EQ(t.verdicts(frame, 4), "PPPD");
    t.apply(t.policy(5).add({.id = 1, .per_source = packets(3)}).build());
    EXPECT_EQ(t.verdicts(frame, 4), "PPPD");
    EXPECT_EQ(t.counts().packets(1, kDrop, SLUICE_REASON_SOURCE), 5u);
}

// ---- shadow --------------------------------------------------------------------------------

// A class in shadow decides and counts exactly as if enforcing, but passes
// what it would drop; its state moves as it would, so promoting it (a new
// version without shadow) enforces from where the shadow left off.
template <class Target>
void shadow_class_passes_what_it_would_drop(Target& t) {
    ClassSpec cls{.id = 1, .per_source = packets(3), .shadow = true};
    t.apply(t.policy(1)
                .add(cls)
                .add({.id = 2, .action = SLUICE_ACTION_DROP, .shadow = true})
                .prefix("10.0.0.0/8", 2)
                .build());
    const Bytes frame = udp_from("192.0.2.40");
    EXPECT_EQ(t.verdicts(frame, 5), "PPPPP");
    EXPECT_EQ(t.verdicts(udp_from("10.0.0.1"), 2), "PP");
    cls.shadow = false;
    t.apply(t.policy(2).add(cls).build());
    EXPECT_EQ(t.verdicts(frame, 2), "DD");
    t.set_clock(t.t0() + kSec);
    EXPECT_EQ(t.verdicts(frame, 2), "PD");

    const Counts c = t.counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 4u);
    EXPECT_EQ(c.packets(1, SLUICE_VERDICT_WOULD_DROP, SLUICE_REASON_SOURCE), 2u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 3u);
    EXPECT_EQ(c.packets(2, SLUICE_VERDICT_WOULD_DROP, SLUICE_REASON_DENY), 2u);
    EXPECT_EQ(c.bytes(1, SLUICE_VERDICT_WOULD_DROP, SLUICE_REASON_SOURCE), 2u * frame.size());
}

// ---- window algorithms on the real clock, every CPU flooding one class ---------------------

// What a class aggregate of `algorithm` may admit between begin_ns and end_ns
// on the dataplane's clock: `limit` in each aligned window the interval
// touches (fixed and sliding window: neither counts more than `limit` in
// one), or in each of the rolling windows that cover it (the log).
inline uint64_t window_bound(uint8_t algorithm, uint64_t limit, uint64_t window_ns, uint64_t begin_ns,
                             uint64_t end_ns) {
    if (algorithm == SLUICE_ALGORITHM_SLIDING_LOG) return limit * ((end_ns - begin_ns + window_ns - 1) / window_ns);
    return limit * (end_ns / window_ns - begin_ns / window_ns + 1);
}

// What it admits at least, saturated throughout: `limit` in each window that
// lies wholly inside the interval.
inline uint64_t window_floor(uint8_t algorithm, uint64_t limit, uint64_t window_ns, uint64_t begin_ns,
                             uint64_t end_ns) {
    if (algorithm == SLUICE_ALGORITHM_SLIDING_LOG) return limit * ((end_ns - begin_ns) / window_ns);
    const uint64_t first_whole = begin_ns / window_ns + 1, end_window = end_ns / window_ns;
    return limit * (end_window > first_whole ? end_window - first_whole : 0);
}

struct WindowCase {
    uint8_t algorithm;
    uint64_t limit, window_ns;
    bool per_source;  // the window is the source's, not the class aggregate's
};

// A sliding window per source keeps both counts in the entry's 45 bits, so
// its limit is smaller (sluice_entry_window_fits).
inline const WindowCase kWindowCases[] = {{SLUICE_ALGORITHM_FIXED_WINDOW, 10'000, 100 * kMs, false},
                                          {SLUICE_ALGORITHM_SLIDING_WINDOW, 10'000, 100 * kMs, false},
                                          {SLUICE_ALGORITHM_SLIDING_LOG, SLUICE_LOG_MAX, 10 * kMs, false},
                                          {SLUICE_ALGORITHM_FIXED_WINDOW, 10'000, 100 * kMs, true},
                                          {SLUICE_ALGORITHM_SLIDING_WINDOW, 4'000, 100 * kMs, true}};

inline std::string window_case_name(const ::testing::TestParamInfo<WindowCase>& info) {
    return algorithm_name(info.param.algorithm) + (info.param.per_source ? "_per_source" : "");
}

// Class 1 limited as the case says.
inline ClassSpec window_case_class(const WindowCase& c) {
    const WindowLimit w{.algorithm = c.algorithm, .limit = c.limit, .window_ns = c.window_ns};
    ClassSpec cls{.id = 1};
    (c.per_source ? cls.per_source_window : cls.aggregate_window) = w;
    return cls;
}

// The reason the case's level refuses with.
inline uint8_t window_case_reason(const WindowCase& c) {
    return c.per_source ? SLUICE_REASON_SOURCE : SLUICE_REASON_CLASS;
}

// ---- fleet quotas ---------------------------------------------------------------------
//
// A class held to a fleet quota spends the credit its node was granted
// (sluice/fleet.h), after every local level admitted; the fleet's bucket
// itself (Redis) is not here: the scenarios grant as its leaser would.

// Class 1 (its sources 100 packets each) admits exactly what was granted, then
// drops with reason fleet; more credit admits more. Class 2 (10.0.0.0/8)
// counts its credit in bytes.
template <class Target>
void fleet_credit_admits_exactly_what_was_granted(Target& t) {
    t.apply(t.policy()
                .add({.id = 1, .per_source = packets(100), .fleet = FleetLimit{}})
                .add({.id = 2, .fleet = FleetLimit{.rate = 1'000'000, .burst = 100'000, .unit = Unit::bytes}})
                .prefix("10.0.0.0/8", 2)
                .build());
    sluice_fleet_credit* cells = t.fleet_credits();
    sluice_fleet_credit& credit = cells[1];
    const Bytes frame = udp_from("192.0.2.60");
    EXPECT_EQ(t.verdicts(frame, 2), "DD");  // nothing granted yet
    sluice_fleet_grant(&credit, 5);
    EXPECT_EQ(t.verdicts(frame, 7), "PPPPPDD");
    EXPECT_EQ(credit.taken, 5u);
    EXPECT_EQ(sluice_fleet_available(&credit), 0);
    sluice_fleet_grant(&credit, 3);
    EXPECT_EQ(t.verdicts(frame, 4), "PPPD");
    EXPECT_EQ(credit.granted, 8u);
    EXPECT_EQ(credit.taken, 8u);

    // Bytes: each frame costs its length; what is left of the credit must
    // hold the whole frame.
    const Bytes other = udp_from("10.0.0.1");
    sluice_fleet_grant(&cells[2], 2 * other.size() + other.size() - 1);
    EXPECT_EQ(t.verdicts(other, 3), "PPD");
    EXPECT_EQ(cells[2].taken, 2 * other.size());

    const Counts c = t.counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 8u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_FLEET), 5u);
    EXPECT_EQ(c.bytes(1, kDrop, SLUICE_REASON_FLEET), 5u * frame.size());
    EXPECT_EQ(c.packets(2, kPass, SLUICE_REASON_ADMITTED), 2u);
    EXPECT_EQ(c.packets(2, kDrop, SLUICE_REASON_FLEET), 1u);
    EXPECT_EQ(c.reason(SLUICE_REASON_FLEET), 6u);
    EXPECT_EQ(c.total(), 2u + 7 + 4 + 3);
}

// Whatever the credit says, the node's own levels hold, each refusing with
// its own reason: class 1's sources of 2 packets and its aggregate of 3, and
// a global ceiling of 5 that class 2 (10.0.0.0/8, a fleet quota and no
// limit of its own) meets. Only admitted frames spend credit.
template <class Target>
void local_limits_hold_whatever_the_fleet_credit(Target& t) {
    t.apply(t.policy()
                .add({.id = 1, .per_source = packets(2), .aggregate = packets(3), .fleet = FleetLimit{}})
                .add({.id = 2, .fleet = FleetLimit{}})
                .prefix("10.0.0.0/8", 2)
                .global(packets(5))
                .build());
    sluice_fleet_credit* cells = t.fleet_credits();
    for (uint32_t id : {1u, 2u}) sluice_fleet_grant(&cells[id], 1'000'000);
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.61"), 3), "PPD");  // the source's 2
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.62"), 2), "PD");   // the class's 3
    EXPECT_EQ(t.verdicts(udp_from("10.0.0.2"), 3), "PPD");    // the ceiling's 5

    const Counts c = t.counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 3u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 1u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_CLASS), 1u);
    EXPECT_EQ(c.packets(2, kPass, SLUICE_REASON_ADMITTED), 2u);
    EXPECT_EQ(c.packets(2, kDrop, SLUICE_REASON_GLOBAL), 1u);
    EXPECT_EQ(c.reason(SLUICE_REASON_FLEET), 0u);
    // taken == admitted, class by class.
    EXPECT_EQ(cells[1].taken, 3u);
    EXPECT_EQ(cells[2].taken, 2u);
}

// A class without a fleet quota never reads the cells, whatever they hold:
// its own cell empty or overdrawn, another class's credit exhausted.
template <class Target>
void class_without_a_fleet_quota_ignores_the_cells(Target& t) {
    t.apply(t.policy()
                .add({.id = 1, .per_source = packets(3)})
                .add({.id = 2, .fleet = FleetLimit{}})
                .prefix("10.0.0.0/8", 2)
                .build());
    sluice_fleet_credit* cells = t.fleet_credits();
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.64"), 2), "PP");  // cell 1 empty
    sluice_fleet_grant(&cells[1], -5);                       // overdrawn
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.64"), 2), "PD");  // the source's 3, nothing else
    EXPECT_EQ(cells[1].taken, 0u);
    EXPECT_EQ(sluice_fleet_available(&cells[1]), -5);
    sluice_fleet_grant(&cells[2], 1);
    EXPECT_EQ(t.verdicts(udp_from("10.0.0.3"), 2), "PD");
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.65"), 1), "P");

    const Counts c = t.counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 4u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 1u);
    EXPECT_EQ(c.packets(2, kDrop, SLUICE_REASON_FLEET), 1u);
    EXPECT_EQ(c.reason(SLUICE_REASON_FLEET), 1u);
}

// ---- composition (run once per accuracy mode) ----------------------------------------

// Composition is check-then-commit: a packet refused by the global ceiling
// spends nothing from its source bucket. (The accuracy is the ceiling's.)
template <class Target>
void global_refusals_spend_no_source_tokens(Target& t, Accuracy a) {
    const uint64_t n = t.per_cpu(a);
    const ClassSpec cls{.id = 1, .per_source = packets(5)};
    t.apply(t.policy(1).add(cls).global(Limit{.rate = n, .burst = 2 * n, .accuracy = a}).build());
    const Bytes frame = udp_from("192.0.2.20");
    EXPECT_EQ(t.verdicts(frame, 10), "PPDDDDDDDD");
    EXPECT_EQ(t.counts().packets(1, kDrop, SLUICE_REASON_GLOBAL), 8u);

    // Lift the ceiling with a new version: the source still holds 5 - 2.
    CompiledPolicy lifted = t.policy(2).add(cls).build();
    ASSERT_EQ(lifted.header.global.enabled, 0);
    t.apply(lifted);
    EXPECT_EQ(t.verdicts(frame, 5), "PPPDD");

    const Counts c = t.counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 5u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_GLOBAL), 8u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 2u);
}

// Same for the class aggregate: its refusals leave the source's tokens.
template <class Target>
void class_refusals_spend_no_source_tokens(Target& t, Accuracy a) {
    const uint64_t n = t.per_cpu(a);
    const Limit source = packets(5);
    t.apply(t.policy(1)
                .add({.id = 1, .per_source = source, .aggregate = Limit{.rate = n, .burst = 2 * n, .accuracy = a}})
                .build());
    const Bytes frame = udp_from("192.0.2.21");
    EXPECT_EQ(t.verdicts(frame, 6), "PPDDDD");
    t.apply(t.policy(2).add({.id = 1, .per_source = source}).build());
    EXPECT_EQ(t.verdicts(frame, 4), "PPPD");
    EXPECT_EQ(t.counts().packets(1, kDrop, SLUICE_REASON_CLASS), 4u);
}

// ---- new versions ---------------------------------------------------------------------

// Applies versions 1, 2 and 3 (the last one active at the end).
template <class Target>
void new_version_keeps_buckets_of_its_classes(Target& t) {
    t.apply(t.policy(1).add({.id = 1, .per_source = packets(3)}).build());
    const Bytes frame = udp_from("192.0.2.30");
    EXPECT_EQ(t.verdicts(frame, 4), "PPPD");

    // Version 2 adds a class and a prefix: class 1's buckets stay spent.
    t.apply(t.policy(2)
                .add({.id = 1, .per_source = packets(3)})
                .add({.id = 2, .per_source = packets(3)})
                .prefix("10.0.0.0/8", 2)
                .build());
    EXPECT_EQ(t.verdicts(frame, 1), "D");
    // A larger burst is not a free refill: no time has passed.
    t.apply(t.policy(3).add({.id = 1, .per_source = packets(10)}).build());
    EXPECT_EQ(t.verdicts(frame, 1), "D");
    EXPECT_EQ(t.stat(SLUICE_STAT_SOURCE_INSERTS), 1u);
}

template <class Target>
void new_version_can_move_a_source_to_another_class(Target& t) {
    t.apply(t.policy(1).add({.id = 1, .per_source = packets(1)}).add({.id = 2, .action = SLUICE_ACTION_DROP}).build());
    const Bytes frame = udp_from("192.0.2.40");
    EXPECT_EQ(t.verdicts(frame, 2), "PD");
    t.apply(t.policy(2)
                .add({.id = 1, .per_source = packets(1)})
                .add({.id = 2, .action = SLUICE_ACTION_DROP})
                .prefix("192.0.2.40/32", 2)
                .build());
    EXPECT_EQ(t.verdicts(frame, 1), "D");
    // And back: the prefix is gone from the slot version 3 is written to.
    t.apply(t.policy(3).add({.id = 1, .per_source = packets(1)}).add({.id = 2, .action = SLUICE_ACTION_DROP}).build());
    EXPECT_EQ(t.verdicts(frame, 1), "D");
    const Counts c = t.counts();
    EXPECT_EQ(c.packets(2, kDrop, SLUICE_REASON_DENY), 1u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 2u);
}

template <class Target>
void stale_prefixes_of_an_older_version_are_gone(Target& t) {
    // Version 1 (slot a) and 2 (slot b) both classify 10/8; version 3 reuses
    // slot a without the prefix: nothing of version 1 may linger there.
    auto with_prefix = [&](uint64_t v) {
        return t.policy(v)
            .add({.id = 1, .action = SLUICE_ACTION_PASS})
            .add({.id = 2, .action = SLUICE_ACTION_DROP})
            .prefix("10.0.0.0/8", 2)
            .build();
    };
    t.apply(with_prefix(1));
    t.apply(with_prefix(2));
    EXPECT_EQ(t.verdicts(udp_from("10.0.0.1"), 1), "D");
    t.apply(
        t.policy(3).add({.id = 1, .action = SLUICE_ACTION_PASS}).add({.id = 2, .action = SLUICE_ACTION_DROP}).build());
    EXPECT_EQ(t.verdicts(udp_from("10.0.0.1"), 1), "P");
    t.apply(
        t.policy(4).add({.id = 1, .action = SLUICE_ACTION_PASS}).add({.id = 2, .action = SLUICE_ACTION_DROP}).build());
    EXPECT_EQ(t.verdicts(udp_from("10.0.0.1"), 1), "P");
}

// Versions that add, remove and move prefixes, and come back to earlier
// sets, while the dataplane writes only what changed between slots: after
// each, every probe classifies as a longest-prefix match over that version's
// prefixes says (a model here, not the dataplane's code).
template <class Target>
void prefix_changes_classify_as_a_fresh_table_would(Target& t) {
    using Prefixes = std::vector<std::pair<std::string, uint32_t>>;  // CIDR, class (2 drop, 3 pass)
    const Prefixes a = {{"10.0.0.0/8", 2}, {"192.0.2.0/24", 2}, {"198.51.100.7/32", 2}, {"2001:db8::/32", 2}};
    const Prefixes b = {{"10.0.0.0/8", 3},      {"10.1.0.0/16", 2},   {"198.51.100.7/32", 2},
                        {"203.0.113.0/24", 2}, {"2001:db8::/32", 3}, {"2001:db8:5::/48", 2}};
    const std::vector<std::string> probes = {"10.0.0.1",     "10.1.0.1",     "192.0.2.1",   "203.0.113.1",
                                             "198.51.100.7", "198.51.100.8", "2001:db8::1", "2001:db8:5::1",
                                             "2001:db9::1"};
    // The class a probe's longest match gives, or 1 (the default, pass).
    const auto expected = [](const Prefixes& prefixes, const std::string& probe) {
        PolicyPrefix address = parse_prefix(probe, 0).value();
        int best = -1;
        uint32_t cls = 1;
        for (const auto& [cidr, id] : prefixes) {
            PolicyPrefix p = parse_prefix(cidr, id).value();
            address.length = p.length;
            if (p.family == address.family && masked_prefix(address).addr == p.addr && p.length > best) {
                best = p.length;
                cls = id;
            }
        }
        return cls == 2 ? "D" : "P";
    };
    uint64_t version = 0;
    for (const Prefixes* prefixes : {&a, &b, &a, &b, static_cast<const Prefixes*>(nullptr), &a, &a}) {
        auto policy = t.policy(++version);
        policy.add({.id = 1, .action = SLUICE_ACTION_PASS})
            .add({.id = 2, .action = SLUICE_ACTION_DROP})
            .add({.id = 3, .action = SLUICE_ACTION_PASS});
        const Prefixes none;
        const Prefixes& applied = prefixes ? *prefixes : none;
        for (const auto& [cidr, id] : applied) policy.prefix(cidr, id);
        t.apply(policy.build());
        for (const std::string& probe : probes)
            EXPECT_EQ(t.verdicts(udp_from(probe), 1), expected(applied, probe))
                << probe << " after version " << version;
    }
}

// ---- a full source table (run once per on_table_full choice) ------------------------

// Precondition of the table-full scenarios: the target's source table holds
// exactly this many entries: two sets, so every source's two sets are the
// same two and the sixteenth source in debt fills both.
inline constexpr uint32_t kTableFullCapacity = 2 * SLUICE_SET_WAYS;

inline std::string table_full_name(uint8_t on_table_full) {
    return on_table_full == SLUICE_TABLE_FULL_EVICT  ? "evict"
           : on_table_full == SLUICE_TABLE_FULL_OPEN ? "open"
                                                     : "closed";
}

// Test names for suites run per on_table_full choice.
inline std::string table_full_case_name(const ::testing::TestParamInfo<uint8_t>& info) {
    return table_full_name(info.param);
}

inline std::string table_source(int i) { return "10.0.0." + std::to_string(i); }

// Class 1: 3 packets per source, 10/s (a packet is 100 ms of schedule), with
// `on_table_full`. Class 2 (198.18.0.0/15) passes without state.
template <class Target>
void apply_table_policy(Target& t, uint8_t on_table_full) {
    t.apply(t.policy()
                .add({.id = 1, .per_source = Limit{.rate = 10, .burst = 3}, .on_table_full = on_table_full})
                .add({.id = 2, .action = SLUICE_ACTION_PASS})
                .prefix("198.18.0.0/15", 2)
                .build());
}

// Precondition: a source table of kTableFullCapacity entries. Sixteen
// sources in debt fill it (source 1 deepest, the others one packet each);
// the seventeenth finds both of its sets in debt and on_table_full decides.
template <class Target>
void seventeenth_source_meets_on_table_full(Target& t, uint8_t on_table_full) {
    ASSERT_EQ(t.source_table().capacity, kTableFullCapacity);
    apply_table_policy(t, on_table_full);
    EXPECT_EQ(t.verdicts(udp_from(table_source(1)), 3), "PPP");  // 300 ms ahead
    for (int i = 2; i <= static_cast<int>(kTableFullCapacity); i++)
        EXPECT_EQ(t.verdicts(udp_from(table_source(i)), 1), "P") << table_source(i);
    EXPECT_EQ(t.source_table().in_debt, kTableFullCapacity);

    const Bytes newcomer = udp_from(table_source(17));
    const bool evict = on_table_full == SLUICE_TABLE_FULL_EVICT;
    const uint8_t full_verdict = on_table_full == SLUICE_TABLE_FULL_CLOSED ? kDrop : kPass;
    // Evict: the newcomer takes an entry closest to free (one packet ahead,
    // never source 1's), and is then limited like anyone else.
    EXPECT_EQ(t.verdicts(newcomer, 4), evict ? "PPPD" : std::string(4, letter(full_verdict)[0]));
    // The deepest in debt keeps its debt whatever the choice ...
    EXPECT_EQ(t.verdicts(udp_from(table_source(1)), 1), "D");
    // ... and a class that needs no state is not affected.
    EXPECT_EQ(t.verdicts(udp_from("198.18.0.1"), 2), "PP");

    const Counts c = t.counts();
    if (evict) {
        EXPECT_EQ(c.reason(SLUICE_REASON_TABLE_FULL), 0u);
        EXPECT_EQ(t.stat(SLUICE_STAT_SOURCE_EVICTIONS), 1u);
        EXPECT_EQ(t.stat(SLUICE_STAT_SOURCE_TABLE_FULL), 0u);
        EXPECT_EQ(t.stat(SLUICE_STAT_SOURCE_INSERTS), kTableFullCapacity + 1);
        EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), kTableFullCapacity + 2 + 3);
    } else {
        EXPECT_EQ(c.packets(1, full_verdict, SLUICE_REASON_TABLE_FULL), 4u);
        EXPECT_EQ(c.bytes(1, full_verdict, SLUICE_REASON_TABLE_FULL), 4u * newcomer.size());
        EXPECT_EQ(c.reason(SLUICE_REASON_TABLE_FULL), 4u);
        EXPECT_EQ(t.stat(SLUICE_STAT_SOURCE_TABLE_FULL), 4u);
        EXPECT_EQ(t.stat(SLUICE_STAT_SOURCE_EVICTIONS), 0u);
        EXPECT_EQ(t.stat(SLUICE_STAT_SOURCE_INSERTS), kTableFullCapacity);
        EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), kTableFullCapacity + 2);
    }
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 1u + (evict ? 1u : 0u));
    EXPECT_EQ(c.packets(2, kPass, SLUICE_REASON_ALLOWED), 2u);
    EXPECT_EQ(t.source_table().in_debt, kTableFullCapacity);

    // 100 ms later the one-packet sources are back to full buckets: their
    // entries are free, and a new source takes one without evicting.
    t.set_clock(t.t0() + 100 * kMs);
    EXPECT_EQ(t.verdicts(udp_from(table_source(18)), 1), "P");
    EXPECT_EQ(t.stat(SLUICE_STAT_SOURCE_EVICTIONS), evict ? 1u : 0u);
}

// on_table_full = open lets a source through the per-source level without
// an entry, not past the levels above: such a source is new, so a spoofed
// flood that fills the table still pays the class's new-source budget.
// Precondition: a source table of kTableFullCapacity entries.
template <class Target>
void untracked_sources_still_meet_the_levels_above(Target& t) {
    ASSERT_EQ(t.source_table().capacity, kTableFullCapacity);
    const uint64_t n = t.per_cpu(Accuracy::lease);
    t.apply(t.policy()
                .add({.id = 1,
                      .per_source = Limit{.rate = 10, .burst = 3},
                      .new_sources = Limit{.rate = n, .burst = (kTableFullCapacity + 2) * n},
                      .on_table_full = SLUICE_TABLE_FULL_OPEN})
                .build());
    for (int i = 1; i <= static_cast<int>(kTableFullCapacity); i++)
        EXPECT_EQ(t.verdicts(udp_from(table_source(i)), 1), "P") << table_source(i);
    // The budget has 2 packets left: the untracked newcomer gets them.
    EXPECT_EQ(t.verdicts(udp_from(table_source(17)), 4), "PPDD");
    const Counts c = t.counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_TABLE_FULL), 2u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_NEW_SOURCE), 2u);
    EXPECT_EQ(t.stat(SLUICE_STAT_SOURCE_INSERTS), kTableFullCapacity);
}

// Entries free themselves: a source whose bucket is full again holds no
// entry in debt, and a table full of such entries takes new sources freely.
template <class Target>
void entries_free_themselves(Target& t) {
    t.apply(t.policy().add({.id = 1, .per_source = Limit{.rate = 10, .burst = 3}}).build());
    for (int i = 1; i <= 40; i++) EXPECT_EQ(t.verdicts(udp_from(table_source(i)), 2), "PP") << table_source(i);
    EXPECT_EQ(t.source_table().in_debt, 40u);
    t.set_clock(t.t0() + 199 * kMs);
    EXPECT_EQ(t.source_table().in_debt, 40u);
    t.set_clock(t.t0() + 200 * kMs);
    EXPECT_EQ(t.source_table().in_debt, 0u);
    EXPECT_EQ(t.source_table().known, 40u);  // free, but still known
    // A known source comes back with a full bucket: 3 packets.
    EXPECT_EQ(t.verdicts(udp_from(table_source(7)), 4), "PPPD");
    EXPECT_EQ(t.stat(SLUICE_STAT_SOURCE_INSERTS), 40u);
}

// ---- the new-source budget ------------------------------------------------------------

// Packets of sources with no entry also pay the class's new-source budget;
// sources the table knows do not, even while it is empty.
template <class Target>
void new_sources_pay_their_own_budget(Target& t, Accuracy a) {
    const uint64_t n = t.per_cpu(a);
    t.apply(t.policy()
                .add({.id = 1,
                      .per_source = Limit{.rate = 10, .burst = 3},
                      .new_sources = Limit{.rate = n, .burst = 2 * n, .accuracy = a}})
                .build());
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.1"), 4), "PPPD");  // one new source: 1 of the budget
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.2"), 2), "PP");    // another: 2 of 2
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.3"), 2), "DD");    // the budget is empty
    // Known sources are not new: their entries are free again after 300 ms,
    // and they pass with the budget still empty.
    t.set_clock(t.t0() + 300 * kMs);
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.1"), 4), "PPPD");
    EXPECT_EQ(t.verdicts(udp_from("192.0.2.3"), 1), "D");

    const Counts c = t.counts();
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_NEW_SOURCE), 3u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 2u);
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 8u);
    // A refused newcomer has no entry, and spent nothing at its own level.
    EXPECT_EQ(t.stat(SLUICE_STAT_SOURCE_INSERTS), 2u);
}

// ---- one bucket, several CPUs (precondition: cpus() >= 2) ------------------------------

// The per-source level is one entry whatever the CPU: burst 16 is 16 in all.
template <class Target>
void source_is_one_bucket_across_cpus(Target& t) {
    t.apply(t.policy().add({.id = 1, .per_source = packets(16)}).build());
    const Bytes frame = udp_from("192.0.2.1");
    EXPECT_EQ(t.verdicts(frame, 1), "P");
    ASSERT_NO_FATAL_FAILURE(t.use_cpu(1));
    EXPECT_EQ(t.verdicts(frame, 16), std::string(15, 'P') + "D");
    ASSERT_NO_FATAL_FAILURE(t.use_cpu(0));
    EXPECT_EQ(t.verdicts(frame, 1), "D");
    EXPECT_EQ(t.counts().packets(1, kPass, SLUICE_REASON_ADMITTED), 16u);
    EXPECT_EQ(t.stat(SLUICE_STAT_SOURCE_INSERTS), 1u);
}

template <class Target>
void split_mode_gives_each_cpu_its_share(Target& t) {
    // An aggregate of 3 per CPU: 3N in all.
    const uint64_t n = t.cpus();
    t.apply(
        t.policy().add({.id = 1, .aggregate = Limit{.rate = n, .burst = 3 * n, .accuracy = Accuracy::split}}).build());
    const Bytes frame = udp_from("192.0.2.1");
    for (uint32_t cpu = 0; cpu < n; cpu++) {
        ASSERT_NO_FATAL_FAILURE(t.use_cpu(cpu));
        EXPECT_EQ(t.verdicts(frame, 4), "PPPD") << "CPU " << cpu;
    }
    EXPECT_EQ(t.counts().packets(1, kPass, SLUICE_REASON_ADMITTED), 3 * n);
}

template <class Target>
void lease_mode_shares_one_bucket_across_cpus(Target& t) {
    // An aggregate of 16 with leases of 4: CPU 0 takes one packet and keeps
    // 3 leased, CPU 1 can spend the other 12, and CPU 0 its 3: 16 in all.
    t.apply(t.policy().add({.id = 1, .aggregate = Limit{.rate = 1, .burst = 16, .lease = 4}}).build());
    const Bytes frame = udp_from("192.0.2.2");
    EXPECT_EQ(t.verdicts(frame, 1), "P");
    ASSERT_NO_FATAL_FAILURE(t.use_cpu(1));
    EXPECT_EQ(t.verdicts(frame, 13), "PPPPPPPPPPPPD");
    ASSERT_NO_FATAL_FAILURE(t.use_cpu(0));
    EXPECT_EQ(t.verdicts(frame, 4), "PPPD");
    const Counts c = t.counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 16u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_CLASS), 2u);
}

template <class Target>
void expired_lease_goes_back_to_the_shared_bucket(Target& t) {
    // CPU 0 leases 4 of the aggregate and spends 1; after the lease lifetime
    // its 3 go back when it next takes tokens, so nothing is lost and
    // nothing minted.
    t.apply(t.policy().add({.id = 1, .aggregate = Limit{.rate = 1, .burst = 8, .lease = 4}}).build());
    const Bytes frame = udp_from("192.0.2.3");
    EXPECT_EQ(t.verdicts(frame, 1), "P");
    ASSERT_NO_FATAL_FAILURE(t.use_cpu(1));
    EXPECT_EQ(t.verdicts(frame, 5), "PPPPD");  // 8 - 4 leased to CPU 0
    // 20 ms later (two lifetimes, 0.02 packets refilled) CPU 0 returns its 3.
    t.set_clock(t.t0() + 20 * kMs);
    ASSERT_NO_FATAL_FAILURE(t.use_cpu(0));
    EXPECT_EQ(t.verdicts(frame, 4), "PPPD");
    EXPECT_EQ(t.counts().packets(1, kPass, SLUICE_REASON_ADMITTED), 8u);
}

}  // namespace sluice::test::scenarios
