// SPDX-License-Identifier: Apache-2.0
// The source table in a DPDK burst: a worker hashes every frame of a burst
// and prefetches both of its sets before it decides any, yet decides them in
// order, so a source's second frame in a burst finds the entry its first
// created; and the table's size is the capacity asked for, rounded up.
#include <gtest/gtest.h>

#include <string>

#include "common/verdict_scenarios.h"
#include "dpdk_fixture.h"

namespace sluice::test {
namespace {

using DpdkSourceTable = DpdkTest;

TEST_F(DpdkSourceTable, FramesOfOneBurstAreDecidedInOrder) {
    apply(policy().add({.id = 1, .per_source = Limit{.rate = 10, .burst = 3}}).build());
    // One burst of 32: 8 new sources, four frames each, interleaved.
    for (int frame = 0; frame < 4; frame++)
        for (int s = 1; s <= 8; s++) ASSERT_EQ(port_->inject(udp_from(scenarios::table_source(s))), 1u);
    EXPECT_EQ(dp_->worker(0).poll_once(), 32u);
    EXPECT_EQ(port_->drain_sent(), 24u);  // 3 of 4 for each

    const Counts c = counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 24u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 8u);
    EXPECT_EQ(stat(SLUICE_STAT_SOURCE_INSERTS), 8u);
    EXPECT_EQ(source_table().in_debt, 8u);
}

TEST_F(DpdkSourceTable, CapacityIsRoundedUpToWholeSetsOfAPowerOfTwo) {
    EXPECT_EQ(source_table().capacity, kDpdkTestCapacity);
    DpdkOptions odd = options();
    odd.source_capacity = 1000;
    auto rounded = DpdkDataplane::create(odd);
    SLUICE_ASSERT_OK(rounded);
    auto usage = rounded.value()->source_table();
    SLUICE_ASSERT_OK(usage);
    EXPECT_EQ(usage.value().capacity, 1024u);
    odd.source_capacity = 15;
    EXPECT_FALSE(DpdkDataplane::create(odd).ok());
}

}  // namespace
}  // namespace sluice::test
