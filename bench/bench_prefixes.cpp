// SPDX-License-Identifier: Apache-2.0
#include "bench_prefixes.h"

#include <arpa/inet.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <unordered_set>

namespace sluice::bench {
namespace {

struct Weight {
    uint8_t length;
    uint32_t per_mille;
};
// Sum 1000 each.
constexpr Weight kV4Lengths[] = {{12, 1},  {13, 1},  {14, 2},  {15, 3},   {16, 15}, {17, 8},   {18, 15},
                                 {19, 25}, {20, 40}, {21, 50}, {22, 100}, {23, 90}, {24, 550}, {25, 5},
                                 {26, 5},  {27, 5},  {28, 5},  {29, 5},   {30, 5},  {31, 5},   {32, 65}};
constexpr Weight kV6Lengths[] = {{29, 5},   {30, 5},  {31, 5},  {32, 120}, {33, 15}, {34, 15},
                                 {35, 10},  {36, 40}, {40, 60}, {44, 70},  {46, 20}, {47, 15},
                                 {48, 500}, {52, 10}, {56, 70}, {60, 10},  {64, 30}};

template <size_t N>
uint8_t pick_length(const Weight (&weights)[N], uint64_t draw) {
    uint32_t at = static_cast<uint32_t>(draw % 1000);
    for (const Weight& w : weights) {
        if (at < w.per_mille) return w.length;
        at -= w.per_mille;
    }
    return weights[N - 1].length;
}

// The top `length` bits of `bits` (a 64-bit big-endian address prefix).
uint64_t keep(uint64_t bits, uint8_t length) { return length == 0 ? 0 : bits & (~uint64_t{0} << (64 - length)); }

}  // namespace

std::vector<PolicyPrefix> generated_prefixes(uint8_t family, uint32_t count, uint32_t class_id) {
    // The raw 64-bit outputs of a fixed-seed mt19937_64 are the same on
    // every standard library (its distributions are not).
    std::mt19937_64 random(family == SLUICE_FAMILY_IPV4 ? 0x5111ce4u : 0x5111ce6u);
    const bool v4 = family == SLUICE_FAMILY_IPV4;
    std::vector<PolicyPrefix> prefixes;
    prefixes.reserve(count);
    // IPv4: the address in the top 32 bits, the length below, exact. IPv6
    // (lengths up to /64): the top 64 bits with the length mixed in; a
    // collision only skips a prefix, never lets a duplicate through.
    std::unordered_set<uint64_t> seen;
    auto add = [&](uint64_t bits, uint8_t length) {
        bits = keep(bits, length);
        const uint64_t id = v4 ? (bits | length) : (bits ^ (uint64_t{length} * 0x9e3779b97f4a7c15u));
        if (!seen.insert(id).second) return;
        PolicyPrefix p;
        p.family = family;
        p.length = length;
        p.class_id = class_id;
        for (int i = 0; i < 8; i++) p.addr[i] = static_cast<uint8_t>(bits >> (56 - 8 * i));
        prefixes.push_back(p);
    };
    if (count == 0) return prefixes;
    if (v4)
        add(uint64_t{0xc0000200} << 32, 24);  // 192.0.2.0/24
    else
        add(uint64_t{0x20010db800000000}, 48);  // 2001:db8::/48
    while (prefixes.size() < count) {
        const uint64_t draw = random();
        const uint8_t length = v4 ? pick_length(kV4Lengths, draw) : pick_length(kV6Lengths, draw);
        uint64_t bits = random();
        if (v4) {
            const uint64_t first = bits >> 56;
            if (first == 0 || first == 10 || first == 127 || first >= 224) continue;
            bits &= 0xffffffff00000000u;
        } else {
            bits = (bits >> 3) | (uint64_t{1} << 61);  // 2000::/3
        }
        add(bits, length);
    }
    return prefixes;
}

std::string cidr_text(const PolicyPrefix& prefix) {
    char text[INET6_ADDRSTRLEN];
    const int af = prefix.family == SLUICE_FAMILY_IPV4 ? AF_INET : AF_INET6;
    if (inet_ntop(af, prefix.addr.data(), text, sizeof(text)) == nullptr) return "?";
    return std::string(text) + "/" + std::to_string(prefix.length);
}

Status write_prefix_file(const std::string& path, const std::vector<PolicyPrefix>& prefixes) {
    FILE* out = std::fopen(path.c_str(), "w");
    if (out == nullptr) return Error{"cannot write " + path + ": " + std::strerror(errno)};
    std::fprintf(out, "# sluice-bench: %zu generated prefixes\n", prefixes.size());
    for (const PolicyPrefix& p : prefixes) std::fprintf(out, "%s\n", cidr_text(p).c_str());
    if (std::fclose(out) != 0) return Error{"writing " + path + " failed: " + std::strerror(errno)};
    return ok_status();
}

}  // namespace sluice::bench
