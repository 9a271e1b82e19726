// SPDX-License-Identifier: Apache-2.0
#include "identity.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace sluice::request {
namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

std::string_view unquote(std::string_view s) {
    s = trim(s);
    if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
    return trim(s);
}

bool ieq(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); i++) {
        const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
        if (lower(a[i]) != lower(b[i])) return false;
    }
    return true;
}

bool all_digits(std::string_view s) {
    if (s.empty()) return false;
    for (const char c : s)
        if (c < '0' || c > '9') return false;
    return true;
}

// Splits on `sep` outside double quotes (a backslash escapes inside them).
std::vector<std::string_view> split_outside_quotes(std::string_view s, char sep) {
    std::vector<std::string_view> parts;
    bool quoted = false;
    size_t start = 0;
    for (size_t i = 0; i < s.size(); i++) {
        if (quoted && s[i] == '\\') {
            i++;
        } else if (s[i] == '"') {
            quoted = !quoted;
        } else if (!quoted && s[i] == sep) {
            parts.push_back(s.substr(start, i - start));
            start = i + 1;
        }
    }
    parts.push_back(s.substr(start));
    return parts;
}

// A port after an address: decimal (at most 65535), or in Forwarded an
// obfuscated one ("_abc").
bool valid_port(std::string_view port, bool allow_obfuscated) {
    if (allow_obfuscated && port.size() > 1 && port.front() == '_') return true;
    return all_digits(port) && port.size() <= 5 && std::stoul(std::string(port)) <= 65535;
}

// One hop's node: an address with an optional port and brackets.
std::optional<IpAddress> parse_node(std::string_view node, bool forwarded) {
    node = unquote(node);
    if (node.empty()) return std::nullopt;
    if (node.front() == '[') {
        const auto close = node.find(']');
        if (close == std::string_view::npos) return std::nullopt;
        const auto rest = node.substr(close + 1);
        if (!rest.empty() && (rest.front() != ':' || !valid_port(rest.substr(1), forwarded))) return std::nullopt;
        auto ip = parse_ip(node.substr(1, close - 1));
        if (!ip) return std::nullopt;
        return ip;
    }
    const auto colons = std::count(node.begin(), node.end(), ':');
    if (colons == 1) {  // IPv4 with a port
        const auto colon = node.find(':');
        if (!valid_port(node.substr(colon + 1), forwarded)) return std::nullopt;
        auto ip = parse_ip(node.substr(0, colon));
        if (!ip || ip->family != SLUICE_FAMILY_IPV4) return std::nullopt;
        return ip;
    }
    return parse_ip(node);  // IPv4, or bare IPv6 (X-Forwarded-For writes it so)
}

// The hops of the header, left to right; nullopt for a hop that is not an address.
std::vector<std::optional<IpAddress>> hops(std::string_view header, ForwardedKind kind) {
    std::vector<std::optional<IpAddress>> out;
    if (trim(header).empty()) return out;
    for (const auto element : split_outside_quotes(header, ',')) {
        if (kind == ForwardedKind::x_forwarded_for) {
            out.push_back(parse_node(element, false));
            continue;
        }
        std::optional<IpAddress> hop;
        for (const auto pair : split_outside_quotes(element, ';')) {
            const auto eq = pair.find('=');
            if (eq == std::string_view::npos) continue;
            if (ieq(trim(pair.substr(0, eq)), "for")) {
                hop = parse_node(pair.substr(eq + 1), true);
                break;
            }
        }
        out.push_back(hop);
    }
    return out;
}

int64_t realtime_s() {
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    return static_cast<int64_t>(now.tv_sec);
}

std::array<unsigned char, 32> mac(const IdentityKey& key, std::string_view text) {
    std::array<unsigned char, 32> out{};
    unsigned int len = 0;
    HMAC(EVP_sha256(), key.bytes().data(), static_cast<int>(key.bytes().size()),
         reinterpret_cast<const unsigned char*>(text.data()), text.size(), out.data(), &len);
    return out;
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

constexpr char b64url_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

}  // namespace

Result<ForwardedKind> parse_forwarded_kind(std::string_view header_name) {
    if (ieq(header_name, "X-Forwarded-For")) return ForwardedKind::x_forwarded_for;
    if (ieq(header_name, "Forwarded")) return ForwardedKind::forwarded;
    return Error{"client address header \"" + std::string(header_name) + "\" is neither X-Forwarded-For nor Forwarded",
                 "client_address_header"};
}

std::optional<IpAddress> parse_ip(std::string_view text) {
    const std::string s(text);
    IpAddress ip;
    if (inet_pton(AF_INET, s.c_str(), ip.addr.data()) == 1) {
        ip.family = SLUICE_FAMILY_IPV4;
        return ip;
    }
    if (inet_pton(AF_INET6, s.c_str(), ip.addr.data()) != 1) return std::nullopt;
    ip.family = SLUICE_FAMILY_IPV6;
    static constexpr uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(ip.addr.data(), mapped, sizeof mapped) == 0) {
        IpAddress v4;
        v4.family = SLUICE_FAMILY_IPV4;
        std::memcpy(v4.addr.data(), ip.addr.data() + 12, 4);
        return v4;
    }
    return ip;
}

std::string to_string(const IpAddress& address) {
    char text[INET6_ADDRSTRLEN] = {};
    inet_ntop(address.family == SLUICE_FAMILY_IPV4 ? AF_INET : AF_INET6, address.addr.data(), text, sizeof text);
    return text;
}

Result<TrustedProxies> TrustedProxies::parse(const std::vector<std::string>& cidrs) {
    TrustedProxies proxies;
    for (const auto& cidr : cidrs) {
        auto prefix = parse_prefix(cidr, 0);
        if (!prefix) return Error{"trusted proxy " + prefix.error().message, "trusted_proxies"};
        proxies.prefixes_.push_back(prefix.value());
    }
    return proxies;
}

bool TrustedProxies::trusts(const IpAddress& address) const {
    for (const auto& p : prefixes_) {
        if (p.family != address.family) continue;
        bool match = true;
        for (unsigned bit = 0; bit < p.length && match; bit++) {
            const uint8_t mask = static_cast<uint8_t>(0x80 >> (bit % 8));
            match = (p.addr[bit / 8] & mask) == (address.addr[bit / 8] & mask);
        }
        if (match) return true;
    }
    return false;
}

std::string TrustedProxies::client_address(std::string_view peer, std::string_view forwarded,
                                           ForwardedKind kind) const {
    // httplib may give an IPv6 peer with a zone ("fe80::1%eth0"): drop it.
    const auto zone = peer.find('%');
    const auto peer_ip = parse_ip(peer.substr(0, zone));
    if (!peer_ip) return std::string(peer);
    if (!trusts(*peer_ip)) return to_string(*peer_ip);
    IpAddress last_trusted = *peer_ip;
    const auto list = hops(forwarded, kind);
    for (auto hop = list.rbegin(); hop != list.rend(); ++hop) {
        if (!*hop) return to_string(last_trusted);  // not an address: stop at the proxy that wrote it
        if (!trusts(**hop)) return to_string(**hop);
        last_trusted = **hop;
    }
    return to_string(last_trusted);  // all trusted: the leftmost
}

Result<IdentityKey> IdentityKey::from_bytes(std::string bytes) {
    if (bytes.size() < min_bytes)
        return Error{"identity key has " + std::to_string(bytes.size()) + " bytes; it needs at least " +
                         std::to_string(min_bytes),
                     "identity_key_file"};
    IdentityKey key;
    key.bytes_ = std::move(bytes);
    return key;
}

Result<IdentityKey> IdentityKey::load(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Error{"identity key file " + path + ": " + std::strerror(errno), "identity_key_file"};
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        return Error{"identity key file " + path + ": " + std::strerror(err), "identity_key_file"};
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        return Error{"identity key file " + path + " is not a regular file", "identity_key_file"};
    }
    if ((st.st_mode & 077) != 0) {
        ::close(fd);
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        return Error{"identity key file " + path + " has mode " + mode +
                         ": group and others must have no access (chmod 600 " + path + ")",
                     "identity_key_file"};
    }
    std::string bytes;
    char buf[4096];
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const int err = errno;
            ::close(fd);
            return Error{"identity key file " + path + ": " + std::strerror(err), "identity_key_file"};
        }
        if (n == 0) break;
        bytes.append(buf, static_cast<size_t>(n));
        if (bytes.size() > 1 << 16) {
            ::close(fd);
            return Error{"identity key file " + path + " is larger than 64 KiB", "identity_key_file"};
        }
    }
    ::close(fd);
    // A key file written by an editor or `echo` ends in a newline that is not
    // key; raw bytes (from_bytes) keep theirs, or a random key ending in '\n'
    // would come up one byte short.
    while (!bytes.empty() && (bytes.back() == '\n' || bytes.back() == '\r')) bytes.pop_back();
    auto key = from_bytes(std::move(bytes));
    if (!key) return Error{"identity key file " + path + ": " + key.error().message, "identity_key_file"};
    return key;
}

std::string base64url_encode(std::string_view bytes) {
    std::string out;
    out.reserve((bytes.size() * 4 + 2) / 3);
    size_t i = 0;
    for (; i + 3 <= bytes.size(); i += 3) {
        const uint32_t n = static_cast<uint8_t>(bytes[i]) << 16 | static_cast<uint8_t>(bytes[i + 1]) << 8 |
                           static_cast<uint8_t>(bytes[i + 2]);
        out += b64url_alphabet[n >> 18 & 63];
        out += b64url_alphabet[n >> 12 & 63];
        out += b64url_alphabet[n >> 6 & 63];
        out += b64url_alphabet[n & 63];
    }
    const size_t rest = bytes.size() - i;
    if (rest == 1) {
        const uint32_t n = static_cast<uint8_t>(bytes[i]) << 16;
        out += b64url_alphabet[n >> 18 & 63];
        out += b64url_alphabet[n >> 12 & 63];
    } else if (rest == 2) {
        const uint32_t n = static_cast<uint8_t>(bytes[i]) << 16 | static_cast<uint8_t>(bytes[i + 1]) << 8;
        out += b64url_alphabet[n >> 18 & 63];
        out += b64url_alphabet[n >> 12 & 63];
        out += b64url_alphabet[n >> 6 & 63];
    }
    return out;
}

std::optional<std::string> base64url_decode(std::string_view text) {
    if (text.size() % 4 == 1) return std::nullopt;
    std::string out;
    uint32_t acc = 0;
    int bits = 0;
    for (const char c : text) {
        const char* at = std::strchr(b64url_alphabet, c);
        if (c == '\0' || at == nullptr) return std::nullopt;
        acc = acc << 6 | static_cast<uint32_t>(at - b64url_alphabet);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out += static_cast<char>(acc >> bits & 0xff);
        }
    }
    // Leftover bits must be zero (one text per value).
    if ((acc & ((1u << bits) - 1)) != 0) return std::nullopt;
    return out;
}

std::string sign_identity(const IdentityKey& key, std::string_view value, int64_t expiry_unix_s) {
    std::string text = base64url_encode(value) + "." + std::to_string(expiry_unix_s);
    const auto m = mac(key, text);
    static constexpr char hex[] = "0123456789abcdef";
    text += '.';
    for (const unsigned char b : m) {
        text += hex[b >> 4];
        text += hex[b & 15];
    }
    return text;
}

IdentityOutcome verify_identity(const IdentityKey& key, std::string_view header_value,
                                const std::function<int64_t()>& now_unix_s) {
    const std::string_view v = trim(header_value);
    const auto first = v.find('.');
    if (first == std::string_view::npos) return IdentityFailure::unsigned_value;
    const auto last = v.rfind('.');
    if (last == first) return IdentityFailure::malformed;
    const auto b64 = v.substr(0, first);
    const auto expiry_text = v.substr(first + 1, last - first - 1);
    const auto mac_text = v.substr(last + 1);
    if (!all_digits(expiry_text) || expiry_text.size() > 18 || mac_text.size() != 64) return IdentityFailure::malformed;
    std::array<unsigned char, 32> sent{};
    for (size_t i = 0; i < sent.size(); i++) {
        const int hi = hex_digit(mac_text[2 * i]), lo = hex_digit(mac_text[2 * i + 1]);
        if (hi < 0 || lo < 0) return IdentityFailure::malformed;
        sent[i] = static_cast<unsigned char>(hi << 4 | lo);
    }
    auto value = base64url_decode(b64);
    if (!value) return IdentityFailure::malformed;
    const auto expected = mac(key, v.substr(0, last));
    if (CRYPTO_memcmp(expected.data(), sent.data(), sent.size()) != 0) return IdentityFailure::bad_signature;
    const int64_t expiry = std::stoll(std::string(expiry_text));
    const int64_t now = now_unix_s ? now_unix_s() : realtime_s();
    if (now >= expiry) return IdentityFailure::expired;
    return std::move(*value);
}

}  // namespace sluice::request
