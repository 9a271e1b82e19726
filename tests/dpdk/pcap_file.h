// SPDX-License-Identifier: Apache-2.0
// Capture files for the net_pcap PMD, written and read by the tests: the
// classic libpcap format, a 24-byte file header, then a 16-byte header before
// each frame. Little-endian, microsecond timestamps, Ethernet.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace sluice::test {

inline void write_pcap(const std::string& path, const std::vector<std::vector<uint8_t>>& frames) {
    std::ofstream out(path, std::ios::binary);
    auto put32 = [&](uint32_t v) { out.write(reinterpret_cast<const char*>(&v), 4); };
    auto put16 = [&](uint16_t v) { out.write(reinterpret_cast<const char*>(&v), 2); };
    put32(0xa1b2c3d4);
    put16(2);
    put16(4);
    put32(0);
    put32(0);
    put32(65535);
    put32(1);  // LINKTYPE_ETHERNET
    uint32_t usec = 0;
    for (const std::vector<uint8_t>& frame : frames) {
        put32(0);
        put32(usec++);
        put32(static_cast<uint32_t>(frame.size()));
        put32(static_cast<uint32_t>(frame.size()));
        out.write(reinterpret_cast<const char*>(frame.data()), static_cast<std::streamsize>(frame.size()));
    }
    ASSERT_TRUE(out.good()) << "writing " << path;
}

// The frames of a capture file (none if it is missing or has no header).
inline std::vector<std::vector<uint8_t>> read_pcap(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::vector<std::vector<uint8_t>> frames;
    char header[24];
    if (!in.read(header, sizeof(header))) return frames;
    uint32_t record[4];
    while (in.read(reinterpret_cast<char*>(record), sizeof(record))) {
        std::vector<uint8_t> frame(record[2]);
        if (!in.read(reinterpret_cast<char*>(frame.data()), record[2])) break;
        frames.push_back(std::move(frame));
    }
    return frames;
}

}  // namespace sluice::test
