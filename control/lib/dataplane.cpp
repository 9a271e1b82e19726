// SPDX-License-Identifier: Apache-2.0
#include "dataplane.h"

#include <algorithm>
#include <bitset>

namespace sluice {

Status check_bans(const std::vector<DataplaneBan>& bans) {
    if (bans.size() > SLUICE_MAX_BANS)
        return Error{std::to_string(bans.size()) + " bans; a dataplane holds " + std::to_string(SLUICE_MAX_BANS)};
    std::bitset<SLUICE_MAX_BANS> slots;
    std::vector<PolicyPrefix> prefixes;
    prefixes.reserve(bans.size());
    for (const DataplaneBan& ban : bans) {
        const PolicyPrefix& p = ban.prefix;
        const unsigned bits = family_bits(p.family);
        if ((p.family != SLUICE_FAMILY_IPV4 && p.family != SLUICE_FAMILY_IPV6) || p.length > bits)
            return Error{"ban of an invalid prefix (family " + std::to_string(p.family) + ", length " +
                         std::to_string(p.length) + ")"};
        if (!host_bits_clear(p)) return Error{"ban of " + prefix_text(p) + ": host bits set past the prefix length"};
        if (ban.slot >= SLUICE_MAX_BANS)
            return Error{"ban of " + prefix_text(p) + ": slot " + std::to_string(ban.slot) + " is not below " +
                         std::to_string(SLUICE_MAX_BANS)};
        if (slots.test(ban.slot))
            return Error{"ban of " + prefix_text(p) + ": slot " + std::to_string(ban.slot) + " is used twice"};
        slots.set(ban.slot);
        prefixes.push_back(p);
    }
    sort_prefixes(prefixes);
    const auto twice = std::adjacent_find(prefixes.begin(), prefixes.end(), same_prefix);
    if (twice != prefixes.end()) return Error{prefix_text(*twice) + " is banned twice"};
    const BanLengths lengths = ban_lengths(bans);
    for (const auto& [family, used] : {std::pair{"IPv4", &lengths.v4}, std::pair{"IPv6", &lengths.v6}})
        if (used->size() > SLUICE_BAN_LENGTHS_MAX)
            return Error{std::string(family) + " bans use " + std::to_string(used->size()) +
                         " prefix lengths; at most " + std::to_string(SLUICE_BAN_LENGTHS_MAX) +
                         " (each is a lookup for every packet): ban wider or narrower prefixes of a length in use"};
    return ok_status();
}

BanLengths ban_lengths(const std::vector<DataplaneBan>& bans) {
    std::bitset<129> v4, v6;
    for (const DataplaneBan& ban : bans) (ban.prefix.family == SLUICE_FAMILY_IPV4 ? v4 : v6).set(ban.prefix.length);
    BanLengths lengths;
    for (int length = 128; length >= 0; length--) {
        if (v4.test(static_cast<size_t>(length))) lengths.v4.push_back(static_cast<uint8_t>(length));
        if (v6.test(static_cast<size_t>(length))) lengths.v6.push_back(static_cast<uint8_t>(length));
    }
    return lengths;
}

}  // namespace sluice
