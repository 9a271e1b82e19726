// SPDX-License-Identifier: Apache-2.0
// What the request-level front doors read from a request before deciding:
// the client address from the peer and X-Forwarded-For / Forwarded, and a
// signed identity header value. The input is
//
//   u8 flags, peer '\0' forwarding header '\0' identity header value
//
// (flags bit 0: the header is Forwarded; bit 1: every address is a trusted
// proxy). Asserted: trusting nothing, the client is the peer whatever the
// header says (a client cannot spoof its way to another bucket); any answer
// is the peer as given or a canonical address; a value signed with the key
// verifies to itself, any bytes in it; one changed MAC digit does not verify;
// base64url decodes what it encodes.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.h"
#include "identity.h"

namespace {

using namespace sluice::request;
using sluice::fuzz::require;
constexpr int64_t kNow = 1'800'000'000;

std::string_view next_field(std::string_view& rest) {
    const size_t end = rest.find('\0');
    const std::string_view field = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
    return field;
}

void check_client(const std::string& client, std::string_view peer) {
    if (client == peer) return;
    const auto parsed = parse_ip(client);
    require(parsed.has_value(), "the client is the peer as given or an address", client);
    require(to_string(*parsed) == client, "an address comes back canonical", client);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const TrustedProxies nobody;
    static const TrustedProxies everybody = TrustedProxies::parse({"0.0.0.0/0", "::/0"}).value();
    static const IdentityKey key = IdentityKey::from_bytes(std::string(32, 'k')).value();
    if (size == 0) return 0;
    const uint8_t flags = data[0];
    std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
    const std::string_view peer = next_field(rest);
    const std::string_view forwarded = next_field(rest);
    const std::string_view identity = rest;
    const ForwardedKind kind = flags & 1 ? ForwardedKind::forwarded : ForwardedKind::x_forwarded_for;

    const std::string direct = nobody.client_address(peer, forwarded, kind);
    require(direct == nobody.client_address(peer, {}, kind), "trusting nobody, the header changes nothing", direct);
    check_client(direct, peer);
    if (flags & 2) check_client(everybody.client_address(peer, forwarded, kind), peer);

    (void)verify_identity(key, identity, [] { return kNow; });
    const std::string signed_value = sign_identity(key, identity, kNow + 60);
    const IdentityOutcome outcome = verify_identity(key, signed_value, [] { return kNow; });
    require(std::holds_alternative<std::string>(outcome) && std::get<std::string>(outcome) == identity,
            "a signed value verifies to itself", signed_value);
    std::string tampered = signed_value;
    tampered.back() = tampered.back() == '0' ? '1' : '0';
    const IdentityOutcome refused = verify_identity(key, tampered, [] { return kNow; });
    require(std::holds_alternative<IdentityFailure>(refused) &&
                std::get<IdentityFailure>(refused) == IdentityFailure::bad_signature,
            "a changed MAC digit is a bad signature", tampered);
    const auto decoded = base64url_decode(base64url_encode(identity));
    require(decoded && *decoded == identity, "base64url decodes what it encodes");
    return 0;
}
