// SPDX-License-Identifier: Apache-2.0
// Source tables that fill up: a plain table refuses and the class's
// on_table_full decides; an LRU table evicts; collect_idle_sources deletes
// entries whose bucket would be full anyway. The table-full scenario is in
// tests/common/verdict_scenarios.h, shared with the DPDK dataplane.
#include <gtest/gtest.h>

#include <tuple>

#include "common/verdict_scenarios.h"
#include "xdp_fixture.h"

namespace sluice::test {
namespace {

constexpr uint32_t kCapacity = scenarios::kTableFullCapacity;

std::string source(int i) { return scenarios::table_source(i); }

uint32_t action_of(uint8_t verdict) { return verdict == kPass ? XDP_PASS : XDP_DROP; }

// ---- a plain table of four sources ----------------------------------------------------

class XdpPlainTable : public XdpTest, public ::testing::WithParamInterface<std::tuple<uint8_t, Accuracy>> {
  protected:
    XdpOptions options() const override {
        return XdpOptions{.test_clock = true, .source_capacity = kCapacity, .source_lru = false, .pin_dir = {}};
    }
    uint8_t table_full() const { return std::get<0>(GetParam()); }
    Accuracy accuracy() const { return std::get<1>(GetParam()); }

    void apply_policy() { scenarios::apply_table_policy(*this, table_full(), accuracy()); }
    void fill_table() { scenarios::fill_table(*this); }

    size_t shared_entries(size_t per_cpu_entries) const {
        return scenarios::shared_entries(accuracy(), per_cpu_entries);
    }
};

TEST_P(XdpPlainTable, FifthSourceGetsTheTableFullVerdict) {
    scenarios::fifth_source_gets_the_table_full_verdict(*this, table_full(), accuracy());
}

TEST_P(XdpPlainTable, IdleCollectionMakesRoom) {
    apply_policy();
    ASSERT_NO_FATAL_FAILURE(fill_table());
    EXPECT_EQ(run(udp_from(source(5))), action_of(table_full()));

    // Not idle yet: 200 ms < fill time (300 ms) + lease lifetime (10 ms).
    set_clock(t0_ + 200 * kMs);
    auto none = dp_->collect_idle_sources(t0_ + 200 * kMs);
    SLUICE_ASSERT_OK(none);
    EXPECT_EQ(none.value(), 0u);
    EXPECT_EQ(source_counts(), std::make_pair(size_t{kCapacity}, shared_entries(kCapacity)));

    set_clock(t0_ + 2 * kSec);
    auto deleted = dp_->collect_idle_sources(t0_ + 2 * kSec);
    SLUICE_ASSERT_OK(deleted);
    EXPECT_GE(deleted.value(), kCapacity);
    EXPECT_EQ(source_counts(), std::make_pair(size_t{0}, size_t{0}));

    // Room again, and a fresh (full) bucket for the source that found none.
    EXPECT_EQ(verdicts(udp_from(source(5)), 4), "PPPD");
    EXPECT_EQ(stat(SLUICE_STAT_SOURCE_INSERTS), kCapacity + 1);
    EXPECT_EQ(stat(SLUICE_STAT_SOURCE_TABLE_FULL), 1u);
}

INSTANTIATE_TEST_SUITE_P(Verdicts, XdpPlainTable,
                         ::testing::Combine(::testing::Values(kPass, kDrop),
                                            ::testing::Values(Accuracy::split, Accuracy::lease)),
                         scenarios::table_full_case_name);

// ---- idle collection keeps what is in use -----------------------------------------------

class XdpIdleSources : public XdpModes {};

TEST_P(XdpIdleSources, OnlyIdleSourcesAreCollectedAndComeBackFull) {
    const uint64_t n = per_cpu(GetParam());
    apply(policy().add({.id = 1, .per_source = Limit{.rate = 10 * n, .burst = 3 * n, .accuracy = GetParam()}}).build());
    const Bytes a = udp_from("192.0.2.1");
    const Bytes b = udp_from("192.0.2.2");
    EXPECT_EQ(verdicts(a, 4), "PPPD");
    set_clock(t0_ + 1 * kSec);
    EXPECT_EQ(verdicts(b, 4), "PPPD");
    const size_t lease = GetParam() == Accuracy::lease ? 1 : 0;
    EXPECT_EQ(source_counts(), std::make_pair(size_t{2}, 2 * lease));

    // A idle for 1.1 s, B for 0.1 s; the limit is 300 ms + 10 ms.
    set_clock(t0_ + 1100 * kMs);
    auto deleted = dp_->collect_idle_sources(t0_ + 1100 * kMs);
    SLUICE_ASSERT_OK(deleted);
    EXPECT_GE(deleted.value(), 1u);
    EXPECT_EQ(source_counts(), std::make_pair(size_t{1}, lease));
    auto again = dp_->collect_idle_sources(t0_ + 1100 * kMs);
    SLUICE_ASSERT_OK(again);
    EXPECT_EQ(again.value(), 0u);

    // A starts over with a full bucket; B kept its state: empty at 1 s,
    // one packet earned since.
    EXPECT_EQ(verdicts(a, 4), "PPPD");
    EXPECT_EQ(verdicts(b, 2), "PD");
    EXPECT_EQ(stat(SLUICE_STAT_SOURCE_INSERTS), 3u);
}

INSTANTIATE_TEST_SUITE_P(Accuracy, XdpIdleSources, ::testing::Values(Accuracy::split, Accuracy::lease), accuracy_name);

// A lease's unspent tokens go back to the shared bucket when its CPU next
// takes tokens; collecting the per-CPU entry before the source is idle for
// the fill time would lose them.
class XdpIdleLeases : public XdpTest {};

TEST_F(XdpIdleLeases, CollectionKeepsUnspentLeases) {
    // burst 16 at 1/s (fill time 16 s), leases of 4 living 10 ms.
    apply(policy().add({.id = 1, .per_source = Limit{.rate = 1, .burst = 16, .lease = 4}}).build());
    const Bytes frame = udp_from("192.0.2.1");
    EXPECT_EQ(verdicts(frame, 1), "P");  // leases 4, spends 1: 3 unspent on this CPU

    // 50 ms later the lease has expired but the source is far from idle
    // for 16 s + 10 ms: nothing may go.
    set_clock(t0_ + 50 * kMs);
    auto deleted = dp_->collect_idle_sources(t0_ + 50 * kMs);
    SLUICE_ASSERT_OK(deleted);
    EXPECT_EQ(deleted.value(), 0u);
    EXPECT_EQ(source_counts(), std::make_pair(size_t{1}, size_t{1}));
    // All 15 remaining tokens are still there: 12 shared + 3 returned.
    EXPECT_EQ(verdicts(frame, 16), std::string(15, 'P') + "D");
}

// ---- an LRU table of four sources -------------------------------------------------------

class XdpLruTable : public XdpTest {
  protected:
    XdpOptions options() const override {
        return XdpOptions{.test_clock = true, .source_capacity = kCapacity, .source_lru = true, .pin_dir = {}};
    }
};

TEST_F(XdpLruTable, NewSourcesEvictOldOnesInsteadOfFailing) {
    const uint64_t n = cpus_;
    apply(policy()
              .add({.id = 1,
                    .per_source = Limit{.rate = 10 * n, .burst = 3 * n, .accuracy = Accuracy::split},
                    .table_full_verdict = kDrop})
              .build());
    for (int i = 1; i <= 10; i++) EXPECT_EQ(verdicts(udp_from(source(i)), 1), "P") << source(i);

    const Counts c = counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 10u);
    EXPECT_EQ(c.reason(SLUICE_REASON_TABLE_FULL), 0u);
    EXPECT_EQ(stat(SLUICE_STAT_SOURCE_TABLE_FULL), 0u);
    EXPECT_EQ(stat(SLUICE_STAT_SOURCE_INSERTS), 10u);
    EXPECT_LE(source_counts().first, size_t{kCapacity});
}

TEST_F(XdpLruTable, LeaseSourcesStillNeedRoomInThePlainSharedTable) {
    // The kernel refuses bpf_spin_lock in LRU values, so the shared table of
    // lease mode is a plain hash even with source_lru: once it holds
    // `capacity` sources, on_table_full decides until idle entries go.
    apply(policy().add({.id = 1, .per_source = Limit{.rate = 10, .burst = 3}, .table_full_verdict = kDrop}).build());
    for (int i = 1; i <= static_cast<int>(kCapacity); i++)
        EXPECT_EQ(verdicts(udp_from(source(i)), 1), "P") << source(i);
    EXPECT_EQ(verdicts(udp_from(source(5)), 1), "D");
    const Counts c = counts();
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_TABLE_FULL), 1u);
    EXPECT_EQ(stat(SLUICE_STAT_SHARED_SOURCE_INSERTS), kCapacity);
    EXPECT_EQ(source_counts().second, size_t{kCapacity});

    set_clock(t0_ + 2 * kSec);
    SLUICE_EXPECT_OK(dp_->collect_idle_sources(t0_ + 2 * kSec));
    EXPECT_EQ(verdicts(udp_from(source(5)), 1), "P");
}

}  // namespace
}  // namespace sluice::test
