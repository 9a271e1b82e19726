// SPDX-License-Identifier: Apache-2.0
// Request classes for the tests, compiled as the policy loader compiles them
// (rate_limits.h), so a test's limits are ones a policy could hold.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "rate_limits.h"
#include "request_classes.h"

namespace sluice::request {

inline RequestClass gcra_request_class(uint32_t id, std::string name, std::string domain, std::vector<RequestKey> keys,
                                       uint64_t rate, uint64_t burst, uint64_t max_cost = 1) {
    RequestClass cls;
    cls.id = id;
    cls.name = std::move(name);
    cls.domain = std::move(domain);
    cls.keys = std::move(keys);
    cls.max_cost = max_cost;
    auto limit = compile_source_limit(HumanLimit{rate, burst, Unit::packets}, 1, cls.name);
    EXPECT_TRUE(limit.ok()) << (limit.ok() ? "" : limit.error().message);
    cls.limit.algorithm = SLUICE_ALGORITHM_GCRA;
    if (limit.ok()) cls.limit.gcra = limit.value().current;
    cls.limit.rate_per_s = rate;
    cls.limit.burst = burst;
    return cls;
}

inline RequestClass window_request_class(uint32_t id, std::string name, std::string domain,
                                         std::vector<RequestKey> keys, Algorithm algorithm, uint64_t limit,
                                         uint64_t window_ns, uint64_t max_cost = 1) {
    RequestClass cls;
    cls.id = id;
    cls.name = std::move(name);
    cls.domain = std::move(domain);
    cls.keys = std::move(keys);
    cls.max_cost = max_cost;
    auto level = compile_window_level(WindowSettings{algorithm, limit, window_ns, Unit::packets, 1}, cls.name);
    EXPECT_TRUE(level.ok()) << (level.ok() ? "" : level.error().message);
    cls.limit.algorithm = static_cast<uint8_t>(algorithm);
    if (level.ok()) cls.limit.window = level.value().window;
    return cls;
}

}  // namespace sluice::request
