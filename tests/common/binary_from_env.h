// SPDX-License-Identifier: Apache-2.0
// The path of a binary under test, from the environment meson's `test(env:)`
// sets. Header-only: sluice-bench links process.cpp without GoogleTest.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace sluice::test {

// Environment variable `name`, or a test failure and a path that does not exist.
inline std::string binary_from_env(const char* name) {
    const char* value = std::getenv(name);
    if (value == nullptr || value[0] == '\0') {
        ADD_FAILURE() << "$" << name << " is not set: run the suite through `meson test`, which sets it";
        return "/nonexistent/" + std::string(name);
    }
    return value;
}

}  // namespace sluice::test
