// SPDX-License-Identifier: Apache-2.0
// Flows of sluice-traffic: what `--flow NAME:SRC:PPS` means, the sources a
// flow cycles over, and the frames it sends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "control/lib/result.h"

namespace sluice::traffic {

// A flow may cycle over at most this many sources: every source has its own
// counters, and the JSON report lists each of them.
inline constexpr uint64_t kMaxSourcesPerFlow = uint64_t{1} << 20;

enum class Family { V4, V6 };

// One IPv4 or IPv6 address, big-endian bytes (IPv4 uses the first 4).
struct Address {
    Family family = Family::V4;
    uint8_t bytes[16] = {};
};

std::optional<Address> parse_address(const std::string& text);
std::string format_address(const Address& address);

// A contiguous run of addresses: `count` of them starting at `first`. Host
// bits are at most 20 (kMaxSourcesPerFlow), so only the low 64 bits vary.
struct SourceRange {
    Address first;
    uint64_t count = 1;

    Address at(uint64_t index) const;
    // The index of `address` in the range, or nothing if it is not in it.
    std::optional<uint64_t> index_of(Family family, const uint8_t* address_bytes) const;
    bool overlaps(const SourceRange& other) const;
};

// "10.3.0.0/22", "2001:db8:3::/120" or one address. The error says what is
// wrong with `text` (the caller adds which argument it came from).
Result<SourceRange> parse_source_range(const std::string& text);

struct FlowSpec {
    std::string text;  // NAME:SRC:PPS as written
    std::string name;
    std::string source_text;  // SRC as written
    SourceRange sources;
    double pps = 0;  // the flow's total offered rate
};

// NAME:SRC:PPS; SRC may itself hold colons (IPv6), so NAME ends at the first
// colon and PPS starts after the last.
Result<FlowSpec> parse_flow(const std::string& text);

// Ethernet + IPv4/UDP or IPv6/UDP, padded to frame_bytes. The source address
// is written per packet by write_source().
struct FrameTemplate {
    std::vector<uint8_t> bytes;
    Family family = Family::V4;

    void write_source(uint8_t* frame, const Address& source) const;
};

inline constexpr size_t kEthernetHeaderBytes = 14;
size_t header_bytes(Family family);

FrameTemplate build_frame_template(Family family, const uint8_t (&dst_mac)[6], const uint8_t (&src_mac)[6],
                                   const Address& destination, uint16_t src_port, size_t frame_bytes);

// Where the source address sits in a received frame, or nothing if the frame
// is not plain (untagged) IPv4 or IPv6.
struct ParsedSource {
    Family family;
    const uint8_t* address;
};
std::optional<ParsedSource> source_of_frame(const uint8_t* frame, size_t length);

}  // namespace sluice::traffic
