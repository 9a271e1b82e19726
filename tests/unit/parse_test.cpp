// SPDX-License-Identifier: Apache-2.0
//
// sluice_parse on one frame per class. Every frame is copied into a heap
// buffer of exactly its size, so any read past data_end is a heap overflow
// that ASan (or valgrind) reports.
#include "sluice/parse.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/packet_builder.h"
#include "labels.h"

namespace sluice::test::parse_test {
namespace {

using Addr = std::array<uint8_t, 16>;

constexpr const char* kSrc4 = "192.0.2.1";
constexpr const char* kDst4 = "198.51.100.1";
constexpr const char* kSrc6 = "2001:db8::1";
constexpr const char* kDst6 = "2001:db8::2";

struct Parsed {
    sluice_packet pkt;
    uint8_t ret;
};

Parsed parse(const std::vector<uint8_t>& frame) {
    std::unique_ptr<uint8_t[]> buf(new uint8_t[frame.size()]);
    if (!frame.empty()) std::memcpy(buf.get(), frame.data(), frame.size());
    Parsed p;
    std::memset(&p.pkt, 0xa5, sizeof(p.pkt));  // stale garbage: parse must overwrite all of it
    p.ret = sluice_parse(buf.get(), buf.get() + frame.size(), &p.pkt);
    return p;
}

Addr src_of(const sluice_packet& pkt) {
    Addr a;
    std::memcpy(a.data(), pkt.src, a.size());
    return a;
}

// A well-formed IP packet: family and source set.
void check_ok(const Parsed& p, uint8_t family, uint8_t vlan_depth, uint32_t frame_len, const char* src) {
    EXPECT_EQ(p.ret, SLUICE_PARSE_OK) << parse_status_label(p.ret);
    EXPECT_EQ(p.pkt.status, SLUICE_PARSE_OK);
    EXPECT_EQ(p.pkt.family, family);
    EXPECT_EQ(p.pkt.vlan_depth, vlan_depth);
    EXPECT_EQ(p.pkt.frame_len, frame_len);
    EXPECT_EQ(p.pkt.tcp_syn, 0);
    EXPECT_EQ(src_of(p.pkt), PacketBuilder::address(src));
}

// Anything else: no family, no source.
void check_status(const Parsed& p, uint8_t status, uint8_t vlan_depth, uint32_t frame_len) {
    EXPECT_EQ(p.ret, status) << "got " << parse_status_label(p.ret) << ", want " << parse_status_label(status);
    EXPECT_EQ(p.pkt.status, status);
    EXPECT_EQ(p.pkt.family, 0);
    EXPECT_EQ(p.pkt.vlan_depth, vlan_depth);
    EXPECT_EQ(p.pkt.frame_len, frame_len);
    EXPECT_EQ(p.pkt.tcp_syn, 0);
    EXPECT_EQ(src_of(p.pkt), Addr{});
}

// The checks above, with failures also naming the calling line.
#define EXPECT_PARSED_OK(...)             \
    do {                                  \
        SCOPED_TRACE("called from here"); \
        check_ok(__VA_ARGS__);            \
    } while (0)
#define EXPECT_PARSED(...)                \
    do {                                  \
        SCOPED_TRACE("called from here"); \
        check_status(__VA_ARGS__);        \
    } while (0)

PacketBuilder ipv4_udp() { return std::move(PacketBuilder().eth().ipv4(kSrc4, kDst4).udp(1234, 53).payload(32)); }

PacketBuilder ipv6_udp() { return std::move(PacketBuilder().eth().ipv6(kSrc6, kDst6).udp(1234, 53).payload(32)); }

// ---- well-formed IP ---------------------------------------------------------

TEST(Parse, Ipv4) { EXPECT_PARSED_OK(parse(ipv4_udp().build()), SLUICE_FAMILY_IPV4, 0, 14 + 20 + 8 + 32, kSrc4); }

TEST(Parse, Ipv4MinimalHeaderOnly) {
    const auto f = PacketBuilder().eth().ipv4(kSrc4, kDst4).build();
    ASSERT_EQ(f.size(), 34u);
    EXPECT_PARSED_OK(parse(f), SLUICE_FAMILY_IPV4, 0, 34, kSrc4);
}

TEST(Parse, Ipv4MaxOptions) {
    const auto f = PacketBuilder().eth().ipv4(kSrc4, kDst4).ipv4_options(40).udp(1, 2).payload(32).build();
    ASSERT_EQ(f[14], 0x4f);  // version 4, IHL 15
    EXPECT_PARSED_OK(parse(f), SLUICE_FAMILY_IPV4, 0, 14 + 60 + 8 + 32, kSrc4);
}

TEST(Parse, Ipv4FirstFragmentCarriesSource) {
    const auto f = PacketBuilder().eth().ipv4(kSrc4, kDst4).fragment(0, true).udp(1234, 53).payload(32).build();
    ASSERT_EQ(f[14 + 6], 0x20);  // MF, offset 0
    EXPECT_PARSED_OK(parse(f), SLUICE_FAMILY_IPV4, 0, 74, kSrc4);
}

TEST(Parse, Ipv4LaterFragmentCarriesSource) {
    // Offset 185 * 8 = 1480, last fragment, no L4 header: the parser never needs one.
    const auto f = PacketBuilder().eth().ipv4(kSrc4, kDst4).fragment(185, false).payload(32).build();
    ASSERT_EQ((f[14 + 6] << 8 | f[14 + 7]), 185);
    EXPECT_PARSED_OK(parse(f), SLUICE_FAMILY_IPV4, 0, 14 + 20 + 32, kSrc4);
}

TEST(Parse, Ipv4EthernetPaddingIsFine) {
    // 44 bytes of frame padded to the 60-byte Ethernet minimum.
    const auto f = PacketBuilder().eth().ipv4(kSrc4, kDst4).udp(1, 2).payload(2).pad(16).build();
    ASSERT_EQ(f.size(), 60u);
    ASSERT_EQ((f[16] << 8 | f[17]), 30);  // total length excludes the padding
    EXPECT_PARSED_OK(parse(f), SLUICE_FAMILY_IPV4, 0, 60, kSrc4);
}

TEST(Parse, Ipv6) { EXPECT_PARSED_OK(parse(ipv6_udp().build()), SLUICE_FAMILY_IPV6, 0, 14 + 40 + 8 + 32, kSrc6); }

TEST(Parse, Ipv6FragmentHeaderCarriesSource) {
    const auto first = PacketBuilder().eth().ipv6(kSrc6, kDst6).fragment(0, true).udp(1, 2).payload(32).build();
    ASSERT_EQ(first[14 + 6], 44);  // next header: Fragment
    EXPECT_PARSED_OK(parse(first), SLUICE_FAMILY_IPV6, 0, 14 + 40 + 8 + 8 + 32, kSrc6);

    const auto later = PacketBuilder().eth().ipv6(kSrc6, kDst6).fragment(100, false).payload(48).build();
    EXPECT_PARSED_OK(parse(later), SLUICE_FAMILY_IPV6, 0, 14 + 40 + 8 + 48, kSrc6);
}

TEST(Parse, Ipv6PayloadLengthZeroIsAllowed) {
    // Jumbogram / unknown length: the header is all we need.
    const auto f = PacketBuilder().eth().ipv6(kSrc6, kDst6).payload_length(0).udp(1, 2).payload(32).build();
    ASSERT_EQ((f[18] << 8 | f[19]), 0);
    EXPECT_PARSED_OK(parse(f), SLUICE_FAMILY_IPV6, 0, 94, kSrc6);
}

TEST(Parse, Ipv6PayloadLengthExactlyFillsFrame) {
    const auto f = PacketBuilder().eth().ipv6(kSrc6, kDst6).payload(40).build();
    EXPECT_PARSED_OK(parse(f), SLUICE_FAMILY_IPV6, 0, 94, kSrc6);
}

// ---- VLAN -------------------------------------------------------------------

TEST(Parse, Dot1Q) {
    const auto f = PacketBuilder().eth().vlan(0x8100, 100).ipv4(kSrc4, kDst4).udp(1, 2).payload(32).build();
    ASSERT_EQ((f[12] << 8 | f[13]), 0x8100);
    EXPECT_PARSED_OK(parse(f), SLUICE_FAMILY_IPV4, 1, 78, kSrc4);
}

TEST(Parse, QinQ) {
    const auto f =
        PacketBuilder().eth().vlan(0x88a8, 10).vlan(0x8100, 20).ipv6(kSrc6, kDst6).udp(1, 2).payload(32).build();
    EXPECT_PARSED_OK(parse(f), SLUICE_FAMILY_IPV6, 2, 14 + 8 + 40 + 8 + 32, kSrc6);
}

TEST(Parse, DoubleDot1Q) {
    const auto f =
        PacketBuilder().eth().vlan(0x8100, 10).vlan(0x8100, 20).ipv4(kSrc4, kDst4).udp(1, 2).payload(32).build();
    EXPECT_PARSED_OK(parse(f), SLUICE_FAMILY_IPV4, 2, 82, kSrc4);
}

TEST(Parse, ThreeTagsAreTooMany) {
    for (const uint16_t third : {0x8100, 0x88a8}) {
        SCOPED_TRACE(third);
        const auto f = PacketBuilder()
                           .eth()
                           .vlan(0x88a8, 1)
                           .vlan(0x8100, 2)
                           .vlan(third, 3)
                           .ipv4(kSrc4, kDst4)
                           .udp(1, 2)
                           .payload(32)
                           .build();
        EXPECT_PARSED(parse(f), SLUICE_PARSE_TOO_MANY_VLANS, 2, 86);
    }
}

TEST(Parse, VlanTagCutOff) {
    // Just the TPID, then part of the first tag.
    const auto one = PacketBuilder().eth().vlan(0x8100, 5).ipv4(kSrc4, kDst4);
    EXPECT_PARSED(parse(PacketBuilder(one).truncate(14).build()), SLUICE_PARSE_TRUNCATED_VLAN, 0, 14);
    EXPECT_PARSED(parse(PacketBuilder(one).truncate(17).build()), SLUICE_PARSE_TRUNCATED_VLAN, 0, 17);
    // Second tag cut off after a complete first one.
    const auto f = PacketBuilder().eth().vlan(0x88a8, 5).vlan(0x8100, 6).ipv4(kSrc4, kDst4).truncate(21).build();
    EXPECT_PARSED(parse(f), SLUICE_PARSE_TRUNCATED_VLAN, 1, 21);
}

// ---- short Ethernet and non-IP ------------------------------------------------

TEST(Parse, EmptyFrame) { EXPECT_PARSED(parse({}), SLUICE_PARSE_TRUNCATED_ETHERNET, 0, 0); }

TEST(Parse, ThirteenBytes) {
    const auto f = ipv4_udp().truncate(13).build();
    ASSERT_EQ(f.size(), 13u);
    EXPECT_PARSED(parse(f), SLUICE_PARSE_TRUNCATED_ETHERNET, 0, 13);
}

TEST(Parse, ArpIsNonIp) {
    const auto f = PacketBuilder().eth().ethertype(0x0806).payload(28).build();
    EXPECT_PARSED(parse(f), SLUICE_PARSE_NON_IP, 0, 42);
}

TEST(Parse, LldpIsNonIp) {
    const auto f = PacketBuilder().eth().ethertype(0x88cc).payload(46).build();
    EXPECT_PARSED(parse(f), SLUICE_PARSE_NON_IP, 0, 60);
}

TEST(Parse, Ieee8023LengthFieldIsNonIp) {
    // EtherType < 0x0600 is an 802.3 length and LLC follows: both ends of the range.
    for (const uint16_t len : {0x0000, 0x002e, 0x05dc, 0x05ff}) {
        SCOPED_TRACE(len);
        const auto f = PacketBuilder().eth().ethertype(len).payload({0x42, 0x42, 0x03}).pad(43).build();
        EXPECT_PARSED(parse(f), SLUICE_PARSE_NON_IP, 0, 60);
    }
}

TEST(Parse, EthernetHeaderOnlyIsNonIp) {
    // Complete header, nothing after it, EtherType neither IP nor VLAN.
    EXPECT_PARSED(parse(PacketBuilder().eth().ethertype(0x8847).build()), SLUICE_PARSE_NON_IP, 0, 14);
}

TEST(Parse, VlanArpIsNonIp) {
    const auto f = PacketBuilder().eth().vlan(0x8100, 7).ethertype(0x0806).payload(28).build();
    EXPECT_PARSED(parse(f), SLUICE_PARSE_NON_IP, 1, 46);
}

TEST(Parse, QinQMplsIsNonIp) {
    const auto f = PacketBuilder().eth().vlan(0x88a8, 7).vlan(0x8100, 8).ethertype(0x8847).payload(20).build();
    EXPECT_PARSED(parse(f), SLUICE_PARSE_NON_IP, 2, 42);
}

// ---- malformed IPv4 -----------------------------------------------------------

TEST(Parse, Ipv4IhlZero) { EXPECT_PARSED(parse(ipv4_udp().ihl(0).build()), SLUICE_PARSE_BAD_IPV4_IHL, 0, 74); }

TEST(Parse, Ipv4IhlFour) { EXPECT_PARSED(parse(ipv4_udp().ihl(4).build()), SLUICE_PARSE_BAD_IPV4_IHL, 0, 74); }

TEST(Parse, Ipv4WrongVersion) {
    for (const uint8_t v : {0, 5, 6, 15}) {
        SCOPED_TRACE(static_cast<int>(v));
        EXPECT_PARSED(parse(ipv4_udp().version(v).build()), SLUICE_PARSE_BAD_IPV4_VERSION, 0, 74);
    }
    // An IPv6 header behind EtherType IPv4.
    const auto f = PacketBuilder().eth().ethertype(0x0800).ipv6(kSrc6, kDst6).build();
    EXPECT_PARSED(parse(f), SLUICE_PARSE_BAD_IPV4_VERSION, 0, 54);
}

TEST(Parse, Ipv4HeaderTruncated) {
    EXPECT_PARSED(parse(ipv4_udp().truncate(14 + 19).build()), SLUICE_PARSE_TRUNCATED_IPV4, 0, 33);
    // EtherType IPv4 and nothing after it.
    EXPECT_PARSED(parse(ipv4_udp().truncate(14).build()), SLUICE_PARSE_TRUNCATED_IPV4, 0, 14);
}

TEST(Parse, Ipv4OptionsTruncated) {
    // 40 bytes of options, one missing.
    const auto cut = PacketBuilder().eth().ipv4(kSrc4, kDst4).ipv4_options(40).truncate(14 + 59).build();
    EXPECT_PARSED(parse(cut), SLUICE_PARSE_TRUNCATED_IPV4_OPTIONS, 0, 73);
    // IHL claims 15 words but the frame has a 20-byte header and 8 of UDP.
    const auto lying = PacketBuilder().eth().ipv4(kSrc4, kDst4).ihl(15).udp(1, 2).build();
    EXPECT_PARSED(parse(lying), SLUICE_PARSE_TRUNCATED_IPV4_OPTIONS, 0, 42);
}

TEST(Parse, Ipv4TotalLengthBelowHeader) {
    EXPECT_PARSED(parse(ipv4_udp().total_length(19).build()), SLUICE_PARSE_BAD_IPV4_TOTAL_LENGTH, 0, 74);
    EXPECT_PARSED(parse(ipv4_udp().total_length(0).build()), SLUICE_PARSE_BAD_IPV4_TOTAL_LENGTH, 0, 74);
    // With options the floor is IHL * 4, not 20.
    const auto opts = PacketBuilder().eth().ipv4(kSrc4, kDst4).ipv4_options(8).total_length(27).udp(1, 2).build();
    EXPECT_PARSED(parse(opts), SLUICE_PARSE_BAD_IPV4_TOTAL_LENGTH, 0, 14 + 28 + 8);
    // Exactly the header is fine.
    const auto exact = PacketBuilder().eth().ipv4(kSrc4, kDst4).ipv4_options(8).total_length(28).udp(1, 2).build();
    EXPECT_PARSED_OK(parse(exact), SLUICE_FAMILY_IPV4, 0, 50, kSrc4);
}

TEST(Parse, Ipv4TotalLengthPastFrame) {
    // 60 bytes follow the L2 header: 60 is fine, 61 is a cut datagram.
    EXPECT_PARSED_OK(parse(ipv4_udp().total_length(60).build()), SLUICE_FAMILY_IPV4, 0, 74, kSrc4);
    EXPECT_PARSED(parse(ipv4_udp().total_length(61).build()), SLUICE_PARSE_BAD_IPV4_TOTAL_LENGTH, 0, 74);
    EXPECT_PARSED(parse(ipv4_udp().total_length(65535).build()), SLUICE_PARSE_BAD_IPV4_TOTAL_LENGTH, 0, 74);
    // Measured from the end of the VLAN tags, not from the frame start.
    const auto vlan = PacketBuilder().eth().vlan(0x8100, 1).vlan(0x8100, 2).ipv4(kSrc4, kDst4).total_length(21).build();
    EXPECT_PARSED(parse(vlan), SLUICE_PARSE_BAD_IPV4_TOTAL_LENGTH, 2, 42);
}

// ---- malformed IPv6 -----------------------------------------------------------

TEST(Parse, Ipv6HeaderTruncated) {
    EXPECT_PARSED(parse(ipv6_udp().truncate(14 + 39).build()), SLUICE_PARSE_TRUNCATED_IPV6, 0, 53);
    EXPECT_PARSED(parse(ipv6_udp().truncate(14).build()), SLUICE_PARSE_TRUNCATED_IPV6, 0, 14);
}

TEST(Parse, Ipv6WrongVersion) {
    for (const uint8_t v : {0, 4, 7}) {
        SCOPED_TRACE(static_cast<int>(v));
        EXPECT_PARSED(parse(ipv6_udp().version(v).build()), SLUICE_PARSE_BAD_IPV6_VERSION, 0, 94);
    }
}

TEST(Parse, Ipv6PayloadLengthPastFrame) {
    // 40 bytes follow the IPv6 header.
    EXPECT_PARSED_OK(parse(ipv6_udp().payload_length(40).build()), SLUICE_FAMILY_IPV6, 0, 94, kSrc6);
    EXPECT_PARSED(parse(ipv6_udp().payload_length(41).build()), SLUICE_PARSE_BAD_IPV6_PAYLOAD_LENGTH, 0, 94);
    EXPECT_PARSED(parse(ipv6_udp().payload_length(65535).build()), SLUICE_PARSE_BAD_IPV6_PAYLOAD_LENGTH, 0, 94);
}

// ---- every truncation ---------------------------------------------------------

// Cuts `full` at every length; `expected(len)` is the status and VLAN depth.
template <typename Expect>
void every_truncation(const std::vector<uint8_t>& full, uint8_t family, const char* src, Expect expected) {
    for (size_t len = 0; len <= full.size(); len++) {
        SCOPED_TRACE("len " + std::to_string(len));
        const auto [status, depth] = expected(len);
        const Parsed p = parse(std::vector<uint8_t>(full.begin(), full.begin() + static_cast<long>(len)));
        if (status == SLUICE_PARSE_OK)
            EXPECT_PARSED_OK(p, family, depth, static_cast<uint32_t>(len), src);
        else
            EXPECT_PARSED(p, status, depth, static_cast<uint32_t>(len));
        if (len < full.size()) {
            EXPECT_TRUE(sluice_packet_is_malformed(p.ret));
        }
    }
}

TEST(ParseTruncation, Ipv4EveryLength) {
    const auto full = ipv4_udp().build();
    every_truncation(full, SLUICE_FAMILY_IPV4, kSrc4, [&](size_t len) {
        if (len < 14) return std::pair{SLUICE_PARSE_TRUNCATED_ETHERNET, 0};
        if (len < 34) return std::pair{SLUICE_PARSE_TRUNCATED_IPV4, 0};
        if (len < full.size()) return std::pair{SLUICE_PARSE_BAD_IPV4_TOTAL_LENGTH, 0};
        return std::pair{SLUICE_PARSE_OK, 0};
    });
}

TEST(ParseTruncation, Ipv4WithOptionsEveryLength) {
    const auto full = PacketBuilder().eth().ipv4(kSrc4, kDst4).ipv4_options(12).udp(1, 2).payload(8).build();
    every_truncation(full, SLUICE_FAMILY_IPV4, kSrc4, [&](size_t len) {
        if (len < 14) return std::pair{SLUICE_PARSE_TRUNCATED_ETHERNET, 0};
        if (len < 34) return std::pair{SLUICE_PARSE_TRUNCATED_IPV4, 0};
        if (len < 46) return std::pair{SLUICE_PARSE_TRUNCATED_IPV4_OPTIONS, 0};
        if (len < full.size()) return std::pair{SLUICE_PARSE_BAD_IPV4_TOTAL_LENGTH, 0};
        return std::pair{SLUICE_PARSE_OK, 0};
    });
}

TEST(ParseTruncation, Ipv6EveryLength) {
    const auto full = ipv6_udp().build();
    every_truncation(full, SLUICE_FAMILY_IPV6, kSrc6, [&](size_t len) {
        if (len < 14) return std::pair{SLUICE_PARSE_TRUNCATED_ETHERNET, 0};
        if (len < 54) return std::pair{SLUICE_PARSE_TRUNCATED_IPV6, 0};
        if (len < full.size()) return std::pair{SLUICE_PARSE_BAD_IPV6_PAYLOAD_LENGTH, 0};
        return std::pair{SLUICE_PARSE_OK, 0};
    });
}

TEST(ParseTruncation, QinQEveryLength) {
    const auto full =
        PacketBuilder().eth().vlan(0x88a8, 10).vlan(0x8100, 20).ipv4(kSrc4, kDst4).udp(1234, 53).payload(32).build();
    every_truncation(full, SLUICE_FAMILY_IPV4, kSrc4, [&](size_t len) {
        if (len < 14) return std::pair{SLUICE_PARSE_TRUNCATED_ETHERNET, 0};
        if (len < 18) return std::pair{SLUICE_PARSE_TRUNCATED_VLAN, 0};
        if (len < 22) return std::pair{SLUICE_PARSE_TRUNCATED_VLAN, 1};
        if (len < 42) return std::pair{SLUICE_PARSE_TRUNCATED_IPV4, 2};
        if (len < full.size()) return std::pair{SLUICE_PARSE_BAD_IPV4_TOTAL_LENGTH, 2};
        return std::pair{SLUICE_PARSE_OK, 2};
    });
}

// Random bytes steered towards the interesting EtherTypes and version nibbles:
// whatever comes in, no over-read (ASan) and the output is consistent.
TEST(ParseTruncation, RandomFramesStayInBounds) {
    uint64_t state = 0x9e3779b97f4a7c15ULL;
    auto next = [&state]() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        return static_cast<uint32_t>(state);
    };
    const uint16_t types[] = {0x0800, 0x86dd, 0x8100, 0x88a8, 0x0806, 0x0000};
    std::array<int, SLUICE_PARSE_STATUS_COUNT> seen{};
    for (int i = 0; i < 20000; i++) {
        std::vector<uint8_t> f(next() % 120);
        for (auto& b : f) b = static_cast<uint8_t>(next());
        for (size_t off = 12; off + 2 <= f.size() && off <= 20; off += 4) {
            const uint16_t t = types[next() % 6];
            f[off] = static_cast<uint8_t>(t >> 8);
            f[off + 1] = static_cast<uint8_t>(t);
        }
        // A plausible IPv4 (IHL 5, short total length) or IPv6 (short
        // payload length) header at one of the three L3 offsets.
        const size_t ip = 14 + 4 * (next() % 3);
        if (ip + 6 <= f.size() && next() % 2) {
            const bool v4 = next() % 2;
            f[ip] = v4 ? 0x45 : 0x60;
            f[ip + (v4 ? 2 : 4)] = 0;
            f[ip + (v4 ? 3 : 5)] = static_cast<uint8_t>((v4 ? 20 : 0) + next() % 24);
        }
        const Parsed p = parse(f);
        ASSERT_EQ(p.ret, p.pkt.status);
        ASSERT_LT(p.ret, SLUICE_PARSE_STATUS_COUNT);
        ASSERT_EQ(p.pkt.frame_len, f.size());
        ASSERT_LE(p.pkt.vlan_depth, 2);
        seen[p.ret]++;
        if (p.ret == SLUICE_PARSE_OK) {
            ASSERT_TRUE(p.pkt.family == SLUICE_FAMILY_IPV4 || p.pkt.family == SLUICE_FAMILY_IPV6);
            if (p.pkt.family == SLUICE_FAMILY_IPV4) {
                ASSERT_EQ(src_of(p.pkt), (Addr{p.pkt.src[0], p.pkt.src[1], p.pkt.src[2], p.pkt.src[3]}));
            }
        } else {
            ASSERT_EQ(p.pkt.family, 0);
            ASSERT_EQ(src_of(p.pkt), Addr{});
        }
    }
    // The steering reaches every outcome, so the run covers every path.
    for (uint32_t s = 0; s < SLUICE_PARSE_STATUS_COUNT; s++) EXPECT_GT(seen[s], 0) << parse_status_label(s);
}

// ---- names and predicates -------------------------------------------------------

TEST(ParseStatus, NamesAreDistinctAndKnown) {
    std::set<std::string> names;
    for (uint32_t s = 0; s < SLUICE_PARSE_STATUS_COUNT; s++) {
        const std::string name(parse_status_label(s));
        EXPECT_NE(name, "unknown") << s;
        EXPECT_TRUE(names.insert(name).second) << "duplicate " << name;
    }
    EXPECT_EQ(names.size(), 13u);
    EXPECT_EQ(parse_status_label(SLUICE_PARSE_OK), "ok");
    EXPECT_EQ(parse_status_label(SLUICE_PARSE_NON_IP), "non_ip");
    EXPECT_EQ(parse_status_label(SLUICE_PARSE_BAD_IPV6_PAYLOAD_LENGTH), "bad_ipv6_payload_length");
    EXPECT_EQ(parse_status_label(SLUICE_PARSE_STATUS_COUNT), "unknown");
}

TEST(ParseStatus, MalformedIsEverythingButOkAndNonIp) {
    EXPECT_FALSE(sluice_packet_is_malformed(SLUICE_PARSE_OK));
    EXPECT_FALSE(sluice_packet_is_malformed(SLUICE_PARSE_NON_IP));
    for (uint32_t s = SLUICE_PARSE_NON_IP + 1; s < SLUICE_PARSE_STATUS_COUNT; s++)
        EXPECT_TRUE(sluice_packet_is_malformed(static_cast<uint8_t>(s))) << parse_status_label(s);
}

// ---- connection attempts (unit tcp_syn) ---------------------------------------------

uint8_t tcp_syn_of(const PacketBuilder::Bytes& frame) {
    const Parsed p = parse(frame);
    EXPECT_EQ(p.ret, SLUICE_PARSE_OK) << parse_status_label(p.ret);
    return p.pkt.tcp_syn;
}

constexpr uint8_t kSyn = 0x02, kAck = 0x10, kRst = 0x04, kFin = 0x01;

TEST(TcpSyn, ASynWithoutAckOpensAConnectionInEitherFamily) {
    EXPECT_EQ(tcp_syn_of(PacketBuilder().eth().ipv4(kSrc4, kDst4).tcp(40000, 22, kSyn).build()), 1);
    EXPECT_EQ(tcp_syn_of(PacketBuilder().eth().ipv6(kSrc6, kDst6).tcp(40000, 22, kSyn).build()), 1);
    // The TCP header is found past IPv4 options and VLAN tags.
    EXPECT_EQ(tcp_syn_of(PacketBuilder().eth().ipv4(kSrc4, kDst4).ipv4_options(12).tcp(1, 22, kSyn).build()), 1);
    EXPECT_EQ(
        tcp_syn_of(PacketBuilder().eth().vlan(0x88a8, 7).vlan(0x8100, 8).ipv4(kSrc4, kDst4).tcp(1, 22, kSyn).build()),
        1);
}

TEST(TcpSyn, NoOtherSegmentOrProtocolDoes) {
    for (const uint8_t flags : {uint8_t(kSyn | kAck), kAck, kRst, kFin, uint8_t(0)}) {
        EXPECT_EQ(tcp_syn_of(PacketBuilder().eth().ipv4(kSrc4, kDst4).tcp(1, 22, flags).build()), 0) << int(flags);
        EXPECT_EQ(tcp_syn_of(PacketBuilder().eth().ipv6(kSrc6, kDst6).tcp(1, 22, flags).build()), 0) << int(flags);
    }
    EXPECT_EQ(tcp_syn_of(PacketBuilder().eth().ipv4(kSrc4, kDst4).udp(1, 22).payload({0, 0, 0, 0, 0, kSyn}).build()),
              0);
}

TEST(TcpSyn, OnlyAFirstFragmentCarriesTheFlags) {
    EXPECT_EQ(tcp_syn_of(PacketBuilder().eth().ipv4(kSrc4, kDst4).fragment(0, true).tcp(1, 22, kSyn).build()), 1);
    // Later fragments hold payload where a header would be: never a SYN.
    EXPECT_EQ(tcp_syn_of(PacketBuilder().eth().ipv4(kSrc4, kDst4).fragment(8, false).tcp(1, 22, kSyn).build()), 0);
    // Behind an IPv6 extension header TCP is not looked for.
    EXPECT_EQ(tcp_syn_of(PacketBuilder().eth().ipv6(kSrc6, kDst6).fragment(0, true).tcp(1, 22, kSyn).build()), 0);
}

TEST(TcpSyn, FlagsOutsideTheDatagramCountForNothing) {
    // IP says TCP, but the datagram ends before the flags; the Ethernet
    // padding after it holds SYN bits in the right place.
    EXPECT_EQ(tcp_syn_of(PacketBuilder().eth().ipv4(kSrc4, kDst4).protocol(6).payload(10).pad(10, kSyn).build()), 0);
    EXPECT_EQ(tcp_syn_of(PacketBuilder().eth().ipv6(kSrc6, kDst6).protocol(6).payload(10).pad(10, kSyn).build()), 0);
}

// ---- the builder itself -----------------------------------------------------------

TEST(Builder, Ipv4HeaderIsValid) {
    const auto f = PacketBuilder().eth().ipv4(kSrc4, kDst4).ipv4_options(4).udp(1234, 53).payload(10).build();
    ASSERT_EQ(f.size(), 14u + 24 + 8 + 10);
    EXPECT_EQ((f[12] << 8 | f[13]), 0x0800);
    EXPECT_EQ(f[14], 0x46);
    EXPECT_EQ((f[16] << 8 | f[17]), 24 + 8 + 10);
    EXPECT_EQ(f[14 + 9], 17);
    EXPECT_EQ(PacketBuilder::checksum(f.data() + 14, 24), 0);  // a valid header sums to zero
    EXPECT_EQ((f[38 + 4] << 8 | f[38 + 5]), 18);               // UDP length
}
}  // namespace
}  // namespace sluice::test::parse_test
