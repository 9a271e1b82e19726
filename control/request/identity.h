// SPDX-License-Identifier: Apache-2.0
// Who is asking, as far as a front door can trust it: the client's address
// behind trusted proxies, and identity header values signed by whoever
// authenticated the user (an auth service, the application's login).
//
// Client address ("rightmost untrusted"). The immediate peer (the TCP
// connection's address) is the client unless it is a trusted proxy. When it
// is, the forwarding header (X-Forwarded-For, or RFC 7239 Forwarded's `for=`)
// is walked from the right, each hop being the address the proxy to its right
// saw: trusted hops are skipped, and the first untrusted hop is the client.
// Everything to its left was written by the client itself and is ignored, so a
// spoofed leftmost entry changes nothing. If every hop is trusted, the leftmost
// is the client. A hop that is not an address (malformed, "unknown", an
// RFC 7239 obfuscated identifier "_abc", an element without for=) stops the
// walk: the last trusted hop examined, the proxy that wrote it, is the client,
// since nothing to its left can be checked. Several header lines are one list
// joined by commas, in order (the caller joins them). Accepted hop forms:
// `192.0.2.1`, `192.0.2.1:8080`, `2001:db8::1`, `[2001:db8::1]`,
// `[2001:db8::1]:8080`, each optionally quoted, with optional whitespace;
// Forwarded also `For="[2001:db8::1]:4711"`, `for=192.0.2.1;proto=https`.
// IPv4-mapped IPv6 (`::ffff:192.0.2.1`) is the IPv4 address. The result is
// canonical text (inet_ntop), or the peer as given when it is not an address.
//
// Signed values. A signed identity header value is
//     <base64url(value), no padding>.<expiry, unix seconds, decimal>.<hex HMAC-SHA256(key, "<b64>.<expiry>")>
// e.g. `Ym9i.1767225600.5c1f…` (64 hex digits, either case) for "bob". The value
// is base64url so it may hold any bytes, '.' included, and the three parts
// split unambiguously; the MAC covers exactly the text before the last '.'.
// Verification order: a value without any '.' is unsigned_value; a value that
// is not three parts of the right form is malformed; then the MAC, compared in
// constant time (CRYPTO_memcmp): bad_signature; only then the expiry, so an
// unverified expiry is never trusted: expired when now >= expiry (wall clock).
//
// Key file: the key is the file's bytes with trailing '\n' / '\r' removed
// (so `openssl rand -hex 32 > key` works), at least 32 bytes; a file any
// group or other permission bit is set on is refused (chmod 600).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "compiled_policy.h"
#include "request_gate.h"
#include "result.h"

namespace sluice::request {

// Which forwarding header a door reads.
enum class ForwardedKind : uint8_t { x_forwarded_for, forwarded };
// "X-Forwarded-For" / "Forwarded" (case-insensitive); an Error otherwise.
Result<ForwardedKind> parse_forwarded_kind(std::string_view header_name);

// An IPv4 or IPv6 address; IPv4-mapped IPv6 is held as IPv4.
struct IpAddress {
    uint8_t family = SLUICE_FAMILY_IPV4;  // SLUICE_FAMILY_*
    std::array<uint8_t, 16> addr{};       // network order; IPv4 in the first 4
    bool operator==(const IpAddress&) const = default;
};
// Parses a bare address ("192.0.2.1", "2001:db8::1", "::ffff:192.0.2.1").
std::optional<IpAddress> parse_ip(std::string_view text);
// inet_ntop's text.
std::string to_string(const IpAddress& address);

class TrustedProxies {
  public:
    TrustedProxies() = default;  // trusts nothing: the peer is always the client
    // "10.0.0.0/8", "2001:db8::/32", "127.0.0.1" (a single address); an Error
    // names the bad entry.
    static Result<TrustedProxies> parse(const std::vector<std::string>& cidrs);

    bool trusts(const IpAddress& address) const;
    // The client's address as canonical text (see the top of this file).
    // `forwarded`: the header's value, several lines joined with ','; empty
    // when there is none.
    std::string client_address(std::string_view peer, std::string_view forwarded, ForwardedKind kind) const;

  private:
    std::vector<PolicyPrefix> prefixes_;
};

// The key signed values are verified with.
class IdentityKey {
  public:
    static constexpr size_t min_bytes = 32;
    // Reads and checks the file (see the top of this file); the Error names
    // the path and, for a too open file, its mode.
    static Result<IdentityKey> load(const std::string& path);
    // For tests and signers that hold the key already: every byte is key,
    // a trailing newline too; at least min_bytes.
    static Result<IdentityKey> from_bytes(std::string bytes);
    const std::string& bytes() const { return bytes_; }

  private:
    std::string bytes_;
};

// `<b64url(value)>.<expiry>.<hex mac>` (lower-case hex).
std::string sign_identity(const IdentityKey& key, std::string_view value, int64_t expiry_unix_s);

// The value a signed header carries, or why it is not trusted.
using IdentityOutcome = std::variant<std::string, IdentityFailure>;

// Verifies `header_value`. `now_unix_s`: the wall clock's seconds; the
// default reads CLOCK_REALTIME.
IdentityOutcome verify_identity(const IdentityKey& key, std::string_view header_value,
                                const std::function<int64_t()>& now_unix_s = {});

// base64url without padding (RFC 4648 §5); decode refuses padding, other
// characters and impossible lengths.
std::string base64url_encode(std::string_view bytes);
std::optional<std::string> base64url_decode(std::string_view text);

}  // namespace sluice::request
