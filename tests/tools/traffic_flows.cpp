// SPDX-License-Identifier: Apache-2.0
#include "tests/tools/traffic_flows.h"

#include <arpa/inet.h>
#include <net/ethernet.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace sluice::traffic {
namespace {

constexpr size_t kIpv4HeaderBytes = 20;
constexpr size_t kIpv6HeaderBytes = 40;
constexpr size_t kUdpHeaderBytes = 8;
constexpr uint16_t kDiscardPort = 9;
// Far above what one sender thread can do; keeps pacing arithmetic exact.
constexpr double kMaxFlowPps = 10'000'000;

size_t address_length(Family family) { return family == Family::V4 ? 4 : 16; }

// The low 64 bits of an address (all 32 for IPv4), as a number.
uint64_t low64(const uint8_t* bytes, size_t len) {
    uint64_t value = 0;
    for (size_t i = len >= 8 ? len - 8 : 0; i < len; i++) value = value << 8 | bytes[i];
    return value;
}

uint64_t low64(const Address& a) { return low64(a.bytes, address_length(a.family)); }

// `address` with its low 64 bits (all 32 for IPv4) replaced by `value`.
Address with_low64(Address address, uint64_t value) {
    const size_t len = address_length(address.family);
    for (size_t i = len; i-- > (len >= 8 ? len - 8 : 0);) {
        address.bytes[i] = static_cast<uint8_t>(value);
        value >>= 8;
    }
    return address;
}

void put16(uint8_t* p, uint16_t v) {
    p[0] = static_cast<uint8_t>(v >> 8);
    p[1] = static_cast<uint8_t>(v);
}

uint16_t internet_checksum(const uint8_t* p, size_t n) {
    uint32_t sum = 0;
    for (size_t i = 0; i + 1 < n; i += 2) sum += static_cast<uint32_t>(p[i] << 8 | p[i + 1]);
    if (n % 2) sum += static_cast<uint32_t>(p[n - 1] << 8);
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    return static_cast<uint16_t>(~sum);
}

}  // namespace

std::optional<Address> parse_address(const std::string& text) {
    Address address;
    if (inet_pton(AF_INET, text.c_str(), address.bytes) == 1) {
        address.family = Family::V4;
        return address;
    }
    if (inet_pton(AF_INET6, text.c_str(), address.bytes) == 1) {
        address.family = Family::V6;
        return address;
    }
    return std::nullopt;
}

std::string format_address(const Address& address) {
    char text[INET6_ADDRSTRLEN] = {};
    const int af = address.family == Family::V4 ? AF_INET : AF_INET6;
    if (inet_ntop(af, address.bytes, text, sizeof(text)) == nullptr) return "?";
    return text;
}

Address SourceRange::at(uint64_t index) const {
    // Host bits never carry past the low 64 bits (see kMaxSourcesPerFlow).
    return with_low64(first, low64(first) + index);
}

std::optional<uint64_t> SourceRange::index_of(Family family, const uint8_t* address_bytes) const {
    if (family != first.family) return std::nullopt;
    const size_t len = address_length(family);
    if (len > 8 && std::memcmp(address_bytes, first.bytes, len - 8) != 0) return std::nullopt;
    const uint64_t value = low64(address_bytes, len);
    const uint64_t base = low64(first);
    if (value < base || value - base >= count) return std::nullopt;
    return value - base;
}

bool SourceRange::overlaps(const SourceRange& other) const {
    if (first.family != other.first.family) return false;
    const size_t len = address_length(first.family);
    if (len > 8 && std::memcmp(first.bytes, other.first.bytes, len - 8) != 0) return false;
    const uint64_t a = low64(first);
    const uint64_t b = low64(other.first);
    return a < b + other.count && b < a + count;
}

Result<SourceRange> parse_source_range(const std::string& text) {
    const size_t slash = text.find('/');
    const std::string address_text = text.substr(0, slash);
    const auto address = parse_address(address_text);
    if (!address) return Error{"bad address \"" + address_text + "\""};
    SourceRange range{*address, 1};
    if (slash == std::string::npos) return range;

    const std::string length_text = text.substr(slash + 1);
    const unsigned max_length = address->family == Family::V4 ? 32 : 128;
    char* end = nullptr;
    errno = 0;
    const unsigned long length = std::strtoul(length_text.c_str(), &end, 10);
    if (length_text.empty() || *end != '\0' || errno != 0 || length > max_length ||
        !std::isdigit(static_cast<unsigned char>(length_text[0])))
        return Error{"bad prefix length \"" + length_text + "\" (0.." + std::to_string(max_length) + ")"};
    const unsigned host_bits = max_length - static_cast<unsigned>(length);
    if (host_bits > 20)
        return Error{"prefix \"" + text + "\" holds 2^" + std::to_string(host_bits) + " sources, more than the " +
                     std::to_string(kMaxSourcesPerFlow) + " a flow may cycle over"};
    range.count = uint64_t{1} << host_bits;
    if (low64(*address) % range.count != 0) {
        const Address network = with_low64(*address, low64(*address) & ~(range.count - 1));
        return Error{"prefix \"" + text + "\" has host bits set (did you mean " + format_address(network) + "/" +
                     length_text + "?)"};
    }
    return range;
}

Result<FlowSpec> parse_flow(const std::string& text) {
    const size_t first_colon = text.find(':');
    const size_t last_colon = text.rfind(':');
    if (first_colon == std::string::npos || first_colon == last_colon)
        return Error{"expected NAME:SRC:PPS (SRC an address or prefix, PPS packets per second)"};
    FlowSpec flow;
    flow.text = text;
    flow.name = text.substr(0, first_colon);
    flow.source_text = text.substr(first_colon + 1, last_colon - first_colon - 1);
    const std::string pps_text = text.substr(last_colon + 1);

    if (flow.name.empty()) return Error{"empty flow name"};
    for (const char c : flow.name) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.')
            return Error{"bad flow name \"" + flow.name + "\" (letters, digits, '_', '-', '.')"};
    }
    auto range = parse_source_range(flow.source_text);
    if (!range) return range.error();
    flow.sources = range.value();

    char* end = nullptr;
    errno = 0;
    flow.pps = std::strtod(pps_text.c_str(), &end);
    if (pps_text.empty() || *end != '\0' || errno != 0 || !std::isfinite(flow.pps) || flow.pps <= 0 ||
        flow.pps > kMaxFlowPps)
        return Error{"bad rate \"" + pps_text + "\" (packets per second, above 0, at most 10000000)"};
    return flow;
}

size_t header_bytes(Family family) {
    return kEthernetHeaderBytes + (family == Family::V4 ? kIpv4HeaderBytes : kIpv6HeaderBytes) + kUdpHeaderBytes;
}

FrameTemplate build_frame_template(Family family, const uint8_t (&dst_mac)[6], const uint8_t (&src_mac)[6],
                                   const Address& destination, uint16_t src_port, size_t frame_bytes) {
    FrameTemplate frame;
    frame.family = family;
    frame.bytes.assign(frame_bytes, 0);
    uint8_t* p = frame.bytes.data();
    std::memcpy(p, dst_mac, 6);
    std::memcpy(p + 6, src_mac, 6);
    uint8_t* l3 = p + kEthernetHeaderBytes;
    const size_t l3_bytes = frame_bytes - kEthernetHeaderBytes;
    uint8_t* udp = nullptr;
    if (family == Family::V4) {
        put16(p + 12, ETHERTYPE_IP);
        l3[0] = 0x45;
        put16(l3 + 2, static_cast<uint16_t>(l3_bytes));
        put16(l3 + 6, 0x4000);  // don't fragment
        l3[8] = 64;             // TTL
        l3[9] = IPPROTO_UDP;
        std::memcpy(l3 + 16, destination.bytes, 4);
        udp = l3 + kIpv4HeaderBytes;
    } else {
        put16(p + 12, ETHERTYPE_IPV6);
        l3[0] = 0x60;
        put16(l3 + 4, static_cast<uint16_t>(l3_bytes - kIpv6HeaderBytes));
        l3[6] = IPPROTO_UDP;
        l3[7] = 64;  // hop limit
        std::memcpy(l3 + 24, destination.bytes, 16);
        udp = l3 + kIpv6HeaderBytes;
    }
    put16(udp, src_port);
    put16(udp + 2, kDiscardPort);
    const size_t ip_header = family == Family::V4 ? kIpv4HeaderBytes : kIpv6HeaderBytes;
    put16(udp + 4, static_cast<uint16_t>(l3_bytes - ip_header));
    // The UDP checksum stays zero: neither the limiter nor the counter reads
    // it, and nothing listens on these addresses.
    return frame;
}

void FrameTemplate::write_source(uint8_t* frame, const Address& source) const {
    uint8_t* l3 = frame + kEthernetHeaderBytes;
    if (family == Family::V4) {
        std::memcpy(l3 + 12, source.bytes, 4);
        l3[10] = 0;
        l3[11] = 0;
        put16(l3 + 10, internet_checksum(l3, kIpv4HeaderBytes));
    } else {
        std::memcpy(l3 + 8, source.bytes, 16);
    }
}

std::optional<ParsedSource> source_of_frame(const uint8_t* frame, size_t length) {
    if (length < kEthernetHeaderBytes) return std::nullopt;
    const uint16_t ethertype = static_cast<uint16_t>(frame[12] << 8 | frame[13]);
    const uint8_t* l3 = frame + kEthernetHeaderBytes;
    if (ethertype == ETHERTYPE_IP && length >= kEthernetHeaderBytes + kIpv4HeaderBytes)
        return ParsedSource{Family::V4, l3 + 12};
    if (ethertype == ETHERTYPE_IPV6 && length >= kEthernetHeaderBytes + kIpv6HeaderBytes)
        return ParsedSource{Family::V6, l3 + 8};
    return std::nullopt;
}

}  // namespace sluice::traffic
