// SPDX-License-Identifier: Apache-2.0
// One policy version in the form the dataplanes load: the slot header, the
// class entries and the classification prefixes. The TOML loader produces
// it; validate() checks what the dataplane relies on, so a bad policy is
// refused before anything is written.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "result.h"
#include "sluice/abi.h"

namespace sluice {

struct PolicyPrefix {
    uint8_t family = SLUICE_FAMILY_IPV4;  // SLUICE_FAMILY_*
    uint8_t length = 0;                   // prefix length in bits
    std::array<uint8_t, 16> addr{};       // network order; bits past `length` must be zero
    uint32_t class_id = 0;
};

struct CompiledPolicy {
    sluice_policy_header header{};
    std::vector<sluice_class_entry> classes;
    std::vector<PolicyPrefix> prefixes;

    // The class entry with this id, or nullptr.
    const sluice_class_entry* find_class(uint32_t class_id) const;
};

// Limits of one policy, from the dataplane's tables (abi.h).
inline constexpr size_t kMaxPrefixesPerFamily = SLUICE_MAX_PREFIXES_PER_FAMILY;
// The shortest max_delay a shaped class may have (the policy file counts in ms).
inline constexpr uint64_t kMinShapeDelayNs = 1'000'000;

// Version > 0; class ids unique and in 1..SLUICE_MAX_CLASSES-1; the default
// class and every prefix's class exist; prefixes valid, unique and with no
// bits set past their length; enums in range; a per-source burst within
// SLUICE_DEBT_MAX_NS; a new-source budget only with a per-source limit; a shaped class has a queue of
// 1..SLUICE_SHAPE_QUEUE_MAX, a max delay of 1 ms..SLUICE_SHAPE_MAX_DELAY_NS,
// an aggregate limit and action limit.
Status validate(const CompiledPolicy& policy);

// Sets the header's has_prefixes_v4/v6 from the prefixes (validate checks them).
void mark_prefix_families(CompiledPolicy& policy);

// Before `next` replaces the version whose class entries are `running`: a
// class whose per-source limit changes gets the next generation and what its
// sources' debts convert with (see sluice_source_limit); an unchanged one
// keeps its generation and conversion.
void carry_previous_source_limits(const std::vector<sluice_class_entry>& running, CompiledPolicy& next);

// Parses "192.0.2.0/24" or "2001:db8::/32" into a prefix of `class_id`.
Result<PolicyPrefix> parse_prefix(const std::string& cidr, uint32_t class_id);

}  // namespace sluice
