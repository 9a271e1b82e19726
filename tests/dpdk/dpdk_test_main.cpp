// SPDX-License-Identifier: Apache-2.0
// The DPDK suite's main: starts the EAL once for every test, without
// hugepages, PCI devices or shared files, on two lcores (the test thread and
// one worker lcore for tests that run a worker loop), runs the tests, and
// tears everything down again (Eal removes its runtime directory).
#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "dpdk_fixture.h"
#include "eal.h"

int main(int argc, char** argv) {
    ::testing::InitGoogleTest(&argc, argv);
    // Listing (scripts/test-summary.py counts the cases) needs no EAL.
    if (::testing::GTEST_FLAG(list_tests)) return RUN_ALL_TESTS();
    auto& env = sluice::test::dpdk_environment();
    if (geteuid() != 0) {
        env.error = "needs root (the EAL maps device and process memory)";
        return RUN_ALL_TESTS();
    }
    auto eal = sluice::Eal::init({"dpdk_tests", "--no-huge", "--no-pci", "--no-shconf", "--file-prefix",
                                  "sluice-test-" + std::to_string(getpid()), "-m", "512", "-l", "0-1", "--log-level",
                                  "warning", "--no-telemetry"});
    if (!eal) {
        env.error = eal.error().message;
        return RUN_ALL_TESTS();
    }
    auto pool = sluice::PacketPool::create("sluice_test", 16383);
    if (!pool) {
        env.error = pool.error().message;
        return RUN_ALL_TESTS();
    }
    env.pool = pool.value()->get();
    env.ready = true;
    const int result = RUN_ALL_TESTS();
    env.ready = false;
    return result;  // the pool goes before the EAL
}
