// SPDX-License-Identifier: Apache-2.0
// Classification prefixes of realistic shape for `decide` and `push`:
// deterministic (a fixed seed), unique, host bits clear.
//   IPv4: 1.0.0.0 - 223.255.255.255 but 10/8 and 127/8, lengths /12../32
//         weighted like a BGP table with a drop list: 55% /24, 10% /22,
//         9% /23, 6.5% /32, the rest spread over /12../31.
//   IPv6: 2000::/3, lengths /29../64 weighted to /48 (50%), then /32 (12%).
// Each family's first prefix covers the sample frames' source
// (test::sample_udp_frame: 192.0.2.1, 2001:db8::1): 192.0.2.0/24 and
// 2001:db8::/48, so a hot source of those frames is matched by a prefix.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiled_policy.h"

namespace sluice::bench {

// `count` prefixes of one family (SLUICE_FAMILY_*) of class `class_id`, in
// generation order (not sorted): a prefix of the first n is the same for
// every count >= n, so a longer list extends a shorter one.
std::vector<PolicyPrefix> generated_prefixes(uint8_t family, uint32_t count, uint32_t class_id);

// "192.0.2.0/24", "2001:db8::/48".
std::string cidr_text(const PolicyPrefix& prefix);

// Writes one CIDR a line (a prefix-list file of a policy's match_files).
Status write_prefix_file(const std::string& path, const std::vector<PolicyPrefix>& prefixes);

}  // namespace sluice::bench
