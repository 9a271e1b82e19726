// SPDX-License-Identifier: Apache-2.0
// Policy files shared by the version store and policy service tests.
#pragma once

#include <string_view>

#include "policy_toml.h"

namespace sluice::test {

inline const PolicyLoadOptions kOptions{4};

inline constexpr std::string_view kTwoClasses = R"toml(
[[class]]
name = "default"
per_source = { rate = 1_000, burst = 2_000 }

[[class]]
name = "web"
match = ["198.51.100.0/24"]
per_source = { rate = 500, burst = 1_000 }
)toml";

// kTwoClasses with a different rate for "web".
inline constexpr std::string_view kWebFaster = R"toml(
[[class]]
name = "default"
per_source = { rate = 1_000, burst = 2_000 }

[[class]]
name = "web"
match = ["198.51.100.0/24"]
per_source = { rate = 900, burst = 1_000 }
)toml";

}  // namespace sluice::test
