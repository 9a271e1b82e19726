// SPDX-License-Identifier: Apache-2.0
//
// Builds Ethernet frames for tests, layer by layer:
//
//   auto f = PacketBuilder().eth().vlan(0x88a8, 10).vlan(0x8100, 20)
//                .ipv4("192.0.2.1", "198.51.100.1").udp(1234, 53).payload(32).build();
//
// Lengths, "next protocol" fields and the IPv4 header checksum are filled at
// build() time from the layers that follow, so the result is a valid frame
// unless a field is overridden on purpose (version(), ihl(), total_length(),
// payload_length(), ethertype(), protocol()) or the frame is cut (truncate()).
// Field setters apply to the most recent layer of the matching kind.
// L4 checksums are left at zero: nothing here (or in XDP) checks them.
#pragma once

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace sluice::test {

class PacketBuilder {
  public:
    using Bytes = std::vector<uint8_t>;
    using Mac = std::array<uint8_t, 6>;

    static constexpr Mac kDstMac{0x02, 0x00, 0x00, 0x00, 0x00, 0x02};
    static constexpr Mac kSrcMac{0x02, 0x00, 0x00, 0x00, 0x00, 0x01};

    // Ethernet II header; the EtherType comes from the next layer.
    PacketBuilder& eth(const Mac& dst = kDstMac, const Mac& src = kSrcMac) {
        Layer& l = push(Kind::Eth, 14);
        std::copy(dst.begin(), dst.end(), l.bytes.begin());
        std::copy(src.begin(), src.end(), l.bytes.begin() + 6);
        return *this;
    }

    // One VLAN tag: its TPID goes into the previous layer's EtherType.
    PacketBuilder& vlan(uint16_t tpid, uint16_t vid, uint8_t pcp = 0) {
        Layer& l = push(Kind::Vlan, 4);
        l.tpid = tpid;
        put16(l.bytes, 0, static_cast<uint16_t>((pcp & 7) << 13 | (vid & 0x0fff)));
        return *this;
    }

    // Explicit EtherType of the last Ethernet or VLAN layer (ARP, 802.3 length...).
    PacketBuilder& ethertype(uint16_t type) {
        last({Kind::Eth, Kind::Vlan}).next = type;
        return *this;
    }

    PacketBuilder& ipv4(const std::string& src, const std::string& dst, uint8_t ttl = 64) {
        Layer& l = push(Kind::Ipv4, 20);
        l.bytes[4] = 0x12;  // identification
        l.bytes[5] = 0x34;
        l.bytes[8] = ttl;
        addr(AF_INET, src, l.bytes.data() + 12);
        addr(AF_INET, dst, l.bytes.data() + 16);
        return *this;
    }

    // n bytes of NOP options (a multiple of 4, at most 40); raises IHL.
    PacketBuilder& ipv4_options(size_t n) {
        if (n % 4 != 0 || n > 40) throw std::invalid_argument("ipv4_options: n must be 0..40, a multiple of 4");
        Layer& l = last({Kind::Ipv4});
        l.bytes.resize(20 + n, 0x01);
        return *this;
    }

    PacketBuilder& ipv6(const std::string& src, const std::string& dst, uint8_t hop_limit = 64) {
        Layer& l = push(Kind::Ipv6, 40);
        l.bytes[7] = hop_limit;
        addr(AF_INET6, src, l.bytes.data() + 8);
        addr(AF_INET6, dst, l.bytes.data() + 24);
        return *this;
    }

    // Fragment offset in 8-byte units. After ipv4(): sets the header's
    // flags/offset. After ipv6(): appends a Fragment extension header.
    PacketBuilder& fragment(uint16_t offset, bool more_fragments, uint32_t id = 0x1234) {
        offset &= 0x1fff;
        Layer& ip = last({Kind::Ipv4, Kind::Ipv6, Kind::Ipv6Frag});
        if (ip.kind == Kind::Ipv4) {
            // Flags in the top 3 bits (DF kept as set by dont_fragment()), offset below.
            const uint16_t df = get16(ip.bytes, 6) & 0x4000;
            put16(ip.bytes, 4, static_cast<uint16_t>(id));
            put16(ip.bytes, 6, static_cast<uint16_t>(df | (more_fragments ? 0x2000 : 0) | offset));
            return *this;
        }
        // IPv6: offset in the top 13 bits, M flag in bit 0.
        Layer& l = push(Kind::Ipv6Frag, 8);
        put16(l.bytes, 2, static_cast<uint16_t>(offset << 3 | (more_fragments ? 1 : 0)));
        put32(l.bytes, 4, id);
        return *this;
    }

    PacketBuilder& dont_fragment() {
        Layer& l = last({Kind::Ipv4});
        put16(l.bytes, 6, static_cast<uint16_t>(get16(l.bytes, 6) | 0x4000));
        return *this;
    }

    // Overrides of the last IP layer, to build invalid headers.
    PacketBuilder& version(uint8_t v) {
        last({Kind::Ipv4, Kind::Ipv6}).version = v;
        return *this;
    }
    PacketBuilder& ihl(uint8_t words) {
        last({Kind::Ipv4}).ihl = words;
        return *this;
    }
    PacketBuilder& total_length(uint16_t len) {
        last({Kind::Ipv4}).length = len;
        return *this;
    }
    PacketBuilder& payload_length(uint16_t len) {
        last({Kind::Ipv6}).length = len;
        return *this;
    }
    // IPv4 protocol / IPv6 next header of the last IP layer.
    PacketBuilder& protocol(uint8_t proto) {
        last({Kind::Ipv4, Kind::Ipv6, Kind::Ipv6Frag}).next = proto;
        return *this;
    }

    PacketBuilder& udp(uint16_t sport, uint16_t dport) {
        Layer& l = push(Kind::Udp, 8);
        put16(l.bytes, 0, sport);
        put16(l.bytes, 2, dport);
        return *this;
    }

    PacketBuilder& tcp(uint16_t sport, uint16_t dport, uint8_t flags = 0x02 /* SYN */) {
        Layer& l = push(Kind::Tcp, 20);
        put16(l.bytes, 0, sport);
        put16(l.bytes, 2, dport);
        l.bytes[12] = 5 << 4;  // data offset
        l.bytes[13] = flags;
        put16(l.bytes, 14, 65535);  // window
        return *this;
    }

    // n bytes counted in the IP/UDP lengths, a recognisable ramp by default.
    PacketBuilder& payload(size_t n) {
        Layer& l = push(Kind::Payload, n);
        for (size_t i = 0; i < n; i++) l.bytes[i] = static_cast<uint8_t>(i);
        return *this;
    }
    PacketBuilder& payload(std::initializer_list<uint8_t> bytes) {
        push(Kind::Payload, 0).bytes.assign(bytes);
        return *this;
    }

    // n bytes after everything, not counted in any length: Ethernet padding.
    PacketBuilder& pad(size_t n, uint8_t fill = 0) {
        push(Kind::Trailer, n).bytes.assign(n, fill);
        return *this;
    }

    // Cut the built frame to its first n bytes (no effect if it is shorter).
    PacketBuilder& truncate(size_t n) {
        cut_ = n;
        return *this;
    }

    Bytes build() const {
        Bytes out;
        for (size_t i = 0; i < layers_.size(); i++) {
            Bytes b = render(i);
            out.insert(out.end(), b.begin(), b.end());
        }
        if (cut_ && *cut_ < out.size()) out.resize(*cut_);
        return out;
    }

    // The Internet checksum (RFC 1071) of bytes, as stored in a header.
    static uint16_t checksum(const uint8_t* p, size_t n) {
        uint32_t sum = 0;
        for (size_t i = 0; i + 1 < n; i += 2) sum += static_cast<uint32_t>(p[i] << 8 | p[i + 1]);
        if (n % 2) sum += static_cast<uint32_t>(p[n - 1] << 8);
        while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
        return static_cast<uint16_t>(~sum);
    }

    // An address in network order, zero-padded to 16 bytes like sluice_packet.src.
    static std::array<uint8_t, 16> address(const std::string& text) {
        std::array<uint8_t, 16> a{};
        addr(text.find(':') == std::string::npos ? AF_INET : AF_INET6, text, a.data());
        return a;
    }

  private:
    enum class Kind { Eth, Vlan, Ipv4, Ipv6, Ipv6Frag, Udp, Tcp, Payload, Trailer };

    struct Layer {
        Kind kind;
        Bytes bytes;
        uint16_t tpid = 0;               // Vlan
        std::optional<uint16_t> next;    // EtherType / protocol override
        std::optional<uint16_t> length;  // total / payload length override
        std::optional<uint8_t> version;
        std::optional<uint8_t> ihl;
    };

    Layer& push(Kind kind, size_t size) {
        layers_.push_back(Layer{kind, Bytes(size, 0), 0, {}, {}, {}, {}});
        return layers_.back();
    }

    Layer& last(std::initializer_list<Kind> kinds) {
        for (auto it = layers_.rbegin(); it != layers_.rend(); ++it)
            for (Kind k : kinds)
                if (it->kind == k) return *it;
        throw std::logic_error("PacketBuilder: no layer for this setter");
    }

    // The type field of layer i, from the layer after it unless overridden.
    uint16_t next_type(size_t i) const {
        const Layer& l = layers_[i];
        if (l.next) return *l.next;
        const bool l2 = l.kind == Kind::Eth || l.kind == Kind::Vlan;
        if (i + 1 < layers_.size()) {
            const Layer& n = layers_[i + 1];
            switch (n.kind) {
                case Kind::Vlan:
                    return n.tpid;
                case Kind::Ipv4:
                    return l2 ? 0x0800 : 4;
                case Kind::Ipv6:
                    return l2 ? 0x86dd : 41;
                case Kind::Ipv6Frag:
                    return 44;
                case Kind::Udp:
                    return 17;
                case Kind::Tcp:
                    return 6;
                default:
                    break;
            }
        }
        return l2 ? 0x88b5 /* local experimental */ : 59 /* no next header */;
    }

    // Bytes after layer i that its length fields count (padding excluded).
    size_t inner_len(size_t i) const {
        size_t n = 0;
        for (size_t j = i + 1; j < layers_.size(); j++)
            if (layers_[j].kind != Kind::Trailer) n += layers_[j].bytes.size();
        return n;
    }

    Bytes render(size_t i) const {
        const Layer& l = layers_[i];
        Bytes b = l.bytes;
        switch (l.kind) {
            case Kind::Eth:
                put16(b, 12, next_type(i));
                break;
            case Kind::Vlan:
                put16(b, 2, next_type(i));
                break;
            case Kind::Ipv4:
                b[0] = static_cast<uint8_t>(l.version.value_or(4) << 4 | (l.ihl.value_or(b.size() / 4) & 0x0f));
                put16(b, 2, l.length.value_or(static_cast<uint16_t>(b.size() + inner_len(i))));
                b[9] = static_cast<uint8_t>(next_type(i));
                put16(b, 10, 0);
                put16(b, 10, checksum(b.data(), b.size()));
                break;
            case Kind::Ipv6:
                b[0] = static_cast<uint8_t>(l.version.value_or(6) << 4);
                put16(b, 4, l.length.value_or(static_cast<uint16_t>(inner_len(i))));
                b[6] = static_cast<uint8_t>(next_type(i));
                break;
            case Kind::Ipv6Frag:
                b[0] = static_cast<uint8_t>(next_type(i));
                break;
            case Kind::Udp:
                put16(b, 4, static_cast<uint16_t>(b.size() + inner_len(i)));
                break;
            default:
                break;
        }
        return b;
    }

    static void addr(int family, const std::string& text, uint8_t* out) {
        if (inet_pton(family, text.c_str(), out) != 1)
            throw std::invalid_argument("PacketBuilder: bad address " + text);
    }
    static void put16(Bytes& b, size_t off, uint16_t v) {
        b[off] = static_cast<uint8_t>(v >> 8);
        b[off + 1] = static_cast<uint8_t>(v);
    }
    static void put32(Bytes& b, size_t off, uint32_t v) {
        put16(b, off, static_cast<uint16_t>(v >> 16));
        put16(b, off + 2, static_cast<uint16_t>(v));
    }
    static uint16_t get16(const Bytes& b, size_t off) { return static_cast<uint16_t>(b[off] << 8 | b[off + 1]); }

    std::vector<Layer> layers_;
    std::optional<size_t> cut_;
};

// The frame the benchmarks decide: Ethernet + IPv4 (192.0.2.1 -> 198.51.100.1)
// or IPv6 (2001:db8::1 -> 2001:db8::2) + UDP 1000 -> 53, 64 bytes for IPv4.
inline PacketBuilder::Bytes sample_udp_frame(bool ipv6) {
    PacketBuilder b;
    b.eth();
    if (ipv6)
        b.ipv6("2001:db8::1", "2001:db8::2");
    else
        b.ipv4("192.0.2.1", "198.51.100.1");
    return b.udp(1000, 53).payload(18).build();
}

}  // namespace sluice::test
