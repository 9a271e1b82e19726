// SPDX-License-Identifier: Apache-2.0
// The fleet tests' throwaway Redis servers (redis_process.h) and their skip
// rule.
#pragma once

#include <gtest/gtest.h>

#include "common/privilege.h"
#include "redis_process.h"

// Skips with the reason when redis-server or redis-cli is missing; fails
// instead under SLUICE_REQUIRE_PRIVILEGED=1, so CI cannot pass by skipping.
#define SLUICE_REQUIRE_REDIS()                                                                   \
    do {                                                                                         \
        if (const auto sluice_missing = ::sluice::test::missing_redis()) {                       \
            if (::sluice::test::privileged_suites_required())                                    \
                FAIL() << "SLUICE_REQUIRE_PRIVILEGED is set but this suite " << *sluice_missing; \
            GTEST_SKIP() << "skipped: " << *sluice_missing;                                      \
        }                                                                                        \
    } while (0)
