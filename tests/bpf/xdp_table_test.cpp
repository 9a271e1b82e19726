// SPDX-License-Identifier: Apache-2.0
// Source tables that fill up: a plain table refuses and the class's
// on_table_full decides; an LRU table evicts; collect_idle_sources deletes
// entries whose bucket would be full anyway.
#include <gtest/gtest.h>

#include <tuple>

#include "xdp_fixture.h"

namespace sluice::test {
namespace {

constexpr uint32_t kCapacity = 4;

std::string source(int i) { return "10.0.0." + std::to_string(i); }

uint32_t action_of(uint8_t verdict) { return verdict == kPass ? XDP_PASS : XDP_DROP; }

// ---- a plain table of four sources ----------------------------------------------------

class XdpPlainTable : public XdpTest, public ::testing::WithParamInterface<std::tuple<uint8_t, Accuracy>> {
  protected:
    XdpOptions options() const override {
        return XdpOptions{.test_clock = true, .source_capacity = kCapacity, .source_lru = false, .pin_dir = {}};
    }
    uint8_t table_full() const { return std::get<0>(GetParam()); }
    Accuracy accuracy() const { return std::get<1>(GetParam()); }

    // Class 1: 3 packets per source on this CPU, 10/s (fill time 300 ms).
    // Class 2 (198.18.0.0/15) passes without state.
    void apply_policy() {
        const uint64_t n = per_cpu(accuracy());
        apply(policy()
                  .add({.id = 1,
                        .per_source = Limit{.rate = 10 * n, .burst = 3 * n, .accuracy = accuracy()},
                        .table_full_verdict = table_full()})
                  .add({.id = 2, .action = SLUICE_ACTION_PASS})
                  .prefix("198.18.0.0/15", 2)
                  .build());
    }

    void fill_table() {
        for (int i = 1; i <= static_cast<int>(kCapacity); i++)
            EXPECT_EQ(verdicts(udp_from(source(i)), 1), "P") << source(i);
    }

    size_t shared_entries(size_t per_cpu_entries) const { return accuracy() == Accuracy::lease ? per_cpu_entries : 0; }
};

TEST_P(XdpPlainTable, FifthSourceGetsTheTableFullVerdict) {
    apply_policy();
    ASSERT_NO_FATAL_FAILURE(fill_table());
    EXPECT_EQ(source_counts(), std::make_pair(size_t{kCapacity}, shared_entries(kCapacity)));

    const Bytes fifth = udp_from(source(5));
    for (int i = 0; i < 3; i++) EXPECT_EQ(run(fifth), action_of(table_full())) << "packet " << i;
    // Sources already in the table are still limited as before ...
    EXPECT_EQ(verdicts(udp_from(source(1)), 3), "PPD");
    // ... and a class that needs no state is not affected.
    EXPECT_EQ(verdicts(udp_from("198.18.0.1"), 2), "PP");

    const Counts c = counts();
    EXPECT_EQ(c.packets(1, table_full(), SLUICE_REASON_TABLE_FULL), 3u);
    EXPECT_EQ(c.bytes(1, table_full(), SLUICE_REASON_TABLE_FULL), 3u * fifth.size());
    EXPECT_EQ(c.reason(SLUICE_REASON_TABLE_FULL), 3u);
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), kCapacity + 2);
    EXPECT_EQ(c.packets(2, kPass, SLUICE_REASON_ALLOWED), 2u);
    EXPECT_EQ(stat(SLUICE_STAT_SOURCE_TABLE_FULL), 3u);
    EXPECT_EQ(stat(SLUICE_STAT_SOURCE_INSERTS), kCapacity);
    EXPECT_EQ(stat(SLUICE_STAT_SHARED_SOURCE_INSERTS), shared_entries(kCapacity));
    EXPECT_EQ(source_counts(), std::make_pair(size_t{kCapacity}, shared_entries(kCapacity)));
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
                         [](const auto& info) {
                             return std::string(std::get<0>(info.param) == kPass ? "open" : "closed") + "_" +
                                    (std::get<1>(info.param) == Accuracy::split ? "split" : "lease");
                         });

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
