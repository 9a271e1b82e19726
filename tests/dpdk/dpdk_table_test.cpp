// SPDX-License-Identifier: Apache-2.0
// Idle collection in the DPDK dataplane: each worker deletes its own idle
// source entries when the control thread asks (it is their only writer), the
// control thread deletes idle shared (lease) entries after a grace period,
// and an entry comes back as a new, full bucket.
#include <gtest/gtest.h>

#include "dpdk_fixture.h"

namespace sluice::test {
namespace {

class DpdkIdleSources : public DpdkTest, public ::testing::WithParamInterface<Accuracy> {
  protected:
    // Collects, lets the worker walk its table, and collects again to hear
    // what it deleted.
    size_t collect(uint64_t now) {
        auto first = dp_->collect_idle_sources(now);
        EXPECT_TRUE(first.ok()) << describe(first);
        for (int i = 0; i < 10; i++) dp_->worker(0).poll_once();
        auto second = dp_->collect_idle_sources(now);
        EXPECT_TRUE(second.ok()) << describe(second);
        return (first.ok() ? first.value() : 0) + (second.ok() ? second.value() : 0);
    }
};

TEST_P(DpdkIdleSources, OnlyIdleSourcesAreCollectedAndComeBackFull) {
    // 3 packets, 10/s on this worker: a bucket is full again 300 ms after its last use.
    const uint64_t n = per_cpu(GetParam());
    apply(policy().add({.id = 1, .per_source = Limit{.rate = 10 * n, .burst = 3 * n, .accuracy = GetParam()}}).build());
    const Bytes idle = udp_from("10.0.0.1"), busy = udp_from("10.0.0.2");
    EXPECT_EQ(verdicts(idle, 4), "PPPD");
    EXPECT_EQ(verdicts(busy, 1), "P");
    const size_t shared = GetParam() == Accuracy::lease ? 2 : 0;
    EXPECT_EQ(source_counts(), std::make_pair(size_t{2}, shared));

    // 10 s later the first is idle; the second was just used.
    set_clock(t0() + 10 * kSec);
    EXPECT_EQ(verdicts(busy, 1), "P");
    EXPECT_EQ(collect(t0() + 10 * kSec), GetParam() == Accuracy::lease ? 2u : 1u);
    EXPECT_EQ(source_counts(), std::make_pair(size_t{1}, shared / 2));

    // The collected source starts over with a full bucket.
    EXPECT_EQ(verdicts(idle, 4), "PPPD");
    EXPECT_EQ(stat(SLUICE_STAT_SOURCE_INSERTS), 3u);
}

INSTANTIATE_TEST_SUITE_P(Accuracy, DpdkIdleSources, ::testing::Values(Accuracy::split, Accuracy::lease), accuracy_name);

}  // namespace
}  // namespace sluice::test
