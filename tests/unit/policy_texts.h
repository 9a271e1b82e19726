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

// kTwoClasses with "web" in shadow.
inline constexpr std::string_view kWebInShadow = R"toml(
[[class]]
name = "default"
per_source = { rate = 1_000, burst = 2_000 }

[[class]]
name = "web"
match = ["198.51.100.0/24"]
per_source = { rate = 500, burst = 1_000 }
shadow = true
)toml";

// kTwoClasses with "web" passed untouched: what a ban of its prefix must not override unforced.
inline constexpr std::string_view kWebPasses = R"toml(
[[class]]
name = "default"
per_source = { rate = 1_000, burst = 2_000 }

[[class]]
name = "web"
match = ["198.51.100.0/24"]
action = "pass"
)toml";

// kTwoClasses with a penalty box on "web".
inline constexpr std::string_view kWebWithPenalty = R"toml(
[[class]]
name = "default"
per_source = { rate = 1_000, burst = 2_000 }

[[class]]
name = "web"
match = ["198.51.100.0/24"]
per_source = { rate = 500, burst = 1_000 }
penalty = { over = 10, within = "1s", for = "60s" }
)toml";

// kTwoClasses plus a shaped class (the shape only sluice-dpdk acts on).
inline constexpr std::string_view kShaped = R"toml(
[[class]]
name = "default"
per_source = { rate = 1_000, burst = 2_000 }

[[class]]
name = "web"
match = ["198.51.100.0/24"]
per_source = { rate = 500, burst = 1_000 }

[[class]]
name = "bulk"
match = ["198.18.0.0/15"]
aggregate = { rate = 10_000, burst = 100 }
shape = { queue = 1_024, max_delay_ms = 50 }
)toml";

// kShaped with a longer queue for "bulk".
inline constexpr std::string_view kShapedLongerQueue = R"toml(
[[class]]
name = "default"
per_source = { rate = 1_000, burst = 2_000 }

[[class]]
name = "web"
match = ["198.51.100.0/24"]
per_source = { rate = 500, burst = 1_000 }

[[class]]
name = "bulk"
match = ["198.18.0.0/15"]
aggregate = { rate = 10_000, burst = 100 }
shape = { queue = 4_096, max_delay_ms = 50 }
)toml";

}  // namespace sluice::test
