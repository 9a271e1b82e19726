// SPDX-License-Identifier: Apache-2.0
// Trusted identity: the client address behind trusted proxies (spoofed
// X-Forwarded-For chains, Forwarded syntax, IPv6) and signed identity values.
#include "identity.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace sluice::request {
namespace {

constexpr auto xff = ForwardedKind::x_forwarded_for;
constexpr auto fwd = ForwardedKind::forwarded;

TrustedProxies proxies(const std::vector<std::string>& cidrs) {
    auto p = TrustedProxies::parse(cidrs);
    EXPECT_TRUE(p.ok()) << p.error().message;
    return p.value();
}

TEST(ClientAddress, UntrustedPeerIsTheClientWhateverItsHeaderSays) {
    const auto t = proxies({"10.0.0.0/8"});
    EXPECT_EQ(t.client_address("203.0.113.9", "198.51.100.1", xff), "203.0.113.9");
    EXPECT_EQ(t.client_address("203.0.113.9", "for=198.51.100.1", fwd), "203.0.113.9");
    EXPECT_EQ(TrustedProxies{}.client_address("10.0.0.1", "198.51.100.1", xff), "10.0.0.1");
}

TEST(ClientAddress, RightmostUntrustedHopIgnoresSpoofedLeftEntries) {
    const auto t = proxies({"10.0.0.0/8", "192.168.1.1"});
    // The client wrote "1.2.3.4, 5.6.7.8" itself; nginx appended what it saw.
    EXPECT_EQ(t.client_address("10.0.0.2", "1.2.3.4, 5.6.7.8, 203.0.113.7", xff), "203.0.113.7");
    // Two trusted proxies in a row are skipped.
    EXPECT_EQ(t.client_address("10.0.0.2", "1.2.3.4,203.0.113.7 , 192.168.1.1,10.9.9.9", xff), "203.0.113.7");
    // A spoofed trusted-looking entry left of the real client changes nothing.
    EXPECT_EQ(t.client_address("10.0.0.2", "10.1.1.1, 203.0.113.7", xff), "203.0.113.7");
}

TEST(ClientAddress, TrustedPeerWithoutHeaderIsTheClient) {
    const auto t = proxies({"10.0.0.0/8"});
    EXPECT_EQ(t.client_address("10.0.0.2", "", xff), "10.0.0.2");
    EXPECT_EQ(t.client_address("10.0.0.2", "  ", fwd), "10.0.0.2");
}

TEST(ClientAddress, AllTrustedChainGivesTheLeftmost) {
    const auto t = proxies({"10.0.0.0/8"});
    EXPECT_EQ(t.client_address("10.0.0.2", "10.0.0.9, 10.0.0.8", xff), "10.0.0.9");
}

TEST(ClientAddress, MalformedOrUnknownHopStopsAtTheLastTrustedHop) {
    const auto t = proxies({"10.0.0.0/8"});
    EXPECT_EQ(t.client_address("10.0.0.2", "203.0.113.7, garbage", xff), "10.0.0.2");
    EXPECT_EQ(t.client_address("10.0.0.2", "203.0.113.7, unknown, 10.0.0.5", xff), "10.0.0.5");
    EXPECT_EQ(t.client_address("10.0.0.2", "203.0.113.7, 300.1.1.1", xff), "10.0.0.2");
    EXPECT_EQ(t.client_address("10.0.0.2", "203.0.113.7,", xff), "10.0.0.2");  // empty hop
    EXPECT_EQ(t.client_address("10.0.0.2", "for=_hidden, for=10.0.0.3", fwd), "10.0.0.3");
    EXPECT_EQ(t.client_address("10.0.0.2", "for=203.0.113.7, proto=https", fwd), "10.0.0.2");  // no for=
}

TEST(ClientAddress, Ipv6AndPorts) {
    const auto t = proxies({"10.0.0.0/8", "2001:db8:1::/48"});
    EXPECT_EQ(t.client_address("2001:db8:1::5", "2001:DB8:2:0::7", xff), "2001:db8:2::7");
    EXPECT_EQ(t.client_address("2001:db8:1::5", "[2001:db8:2::7]:443", xff), "2001:db8:2::7");
    EXPECT_EQ(t.client_address("2001:db8:1::5", "203.0.113.7:5555, 2001:db8:1::9", xff), "203.0.113.7");
    // The peer as httplib gives it on a dual-stack socket.
    EXPECT_EQ(t.client_address("::ffff:10.0.0.2", "203.0.113.7", xff), "203.0.113.7");
    EXPECT_EQ(t.client_address("::ffff:203.0.113.9", "1.1.1.1", xff), "203.0.113.9");
    // A mapped hop is IPv4 and matches IPv4 prefixes.
    EXPECT_EQ(t.client_address("10.0.0.2", "203.0.113.7, ::ffff:10.0.0.3", xff), "203.0.113.7");
    EXPECT_EQ(t.client_address("10.0.0.2", "::ffff:203.0.113.7", xff), "203.0.113.7");
}

TEST(ClientAddress, ForwardedSyntax) {
    const auto t = proxies({"10.0.0.0/8", "2001:db8:1::/48"});
    EXPECT_EQ(t.client_address("10.0.0.2", R"(for=192.0.2.60;proto=http;by=203.0.113.43)", fwd), "192.0.2.60");
    EXPECT_EQ(t.client_address("10.0.0.2", R"(For="[2001:db8:cafe::17]:4711")", fwd), "2001:db8:cafe::17");
    EXPECT_EQ(t.client_address("10.0.0.2", R"(for=192.0.2.43, for="[2001:db8:1::9]")", fwd), "192.0.2.43");
    EXPECT_EQ(t.client_address("10.0.0.2", R"(for="192.0.2.43:47011" ; proto=https)", fwd), "192.0.2.43");
    // Several header lines, joined by the caller with ','.
    EXPECT_EQ(t.client_address("10.0.0.2", "for=198.51.100.1,for=192.0.2.43;by=\"a,b\"", fwd), "192.0.2.43");
    EXPECT_EQ(t.client_address("10.0.0.2", "for=\"_gazonk\"", fwd), "10.0.0.2");
    EXPECT_EQ(t.client_address("10.0.0.2", "for=unknown", fwd), "10.0.0.2");
    EXPECT_EQ(t.client_address("10.0.0.2", "for=\"[2001:db8::1\"", fwd), "10.0.0.2");  // no ]
}

TEST(ClientAddress, BadTrustedProxyIsRefused) {
    auto p = TrustedProxies::parse({"10.0.0.0/8", "10.0.0.1/8"});
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.error().message.find("10.0.0.1/8"), std::string::npos);
    EXPECT_FALSE(TrustedProxies::parse({"proxy.example"}).ok());
}

TEST(ForwardedKindName, Parses) {
    EXPECT_EQ(parse_forwarded_kind("x-forwarded-for").value(), xff);
    EXPECT_EQ(parse_forwarded_kind("Forwarded").value(), fwd);
    EXPECT_FALSE(parse_forwarded_kind("X-Real-IP").ok());
}

// ---- signed values --------------------------------------------------------

IdentityKey key(char fill = 'k') { return IdentityKey::from_bytes(std::string(32, fill)).value(); }
const auto at = [](int64_t t) { return [t] { return t; }; };

TEST(SignedIdentity, ValidValueVerifies) {
    const auto signed_value = sign_identity(key(), "bob", 2000);
    // The README's Python signer gives the same text.
    EXPECT_EQ(signed_value, "Ym9i.2000.db396971dacbb78c5dce6865e66336bbcba1265cad16dff78038ad7c09275719");
    const auto outcome = verify_identity(key(), signed_value, at(1999));
    ASSERT_TRUE(std::holds_alternative<std::string>(outcome));
    EXPECT_EQ(std::get<std::string>(outcome), "bob");
    // Any bytes, dots included.
    const auto o2 = verify_identity(key(), sign_identity(key(), std::string("x.y\0z", 5), 2000), at(0));
    ASSERT_TRUE(std::holds_alternative<std::string>(o2));
    EXPECT_EQ(std::get<std::string>(o2), std::string("x.y\0z", 5));
    // Upper-case hex is accepted.
    auto upper = signed_value;
    for (size_t i = upper.rfind('.'); i < upper.size(); i++) upper[i] = static_cast<char>(std::toupper(upper[i]));
    EXPECT_TRUE(std::holds_alternative<std::string>(verify_identity(key(), upper, at(1999))));
}

TEST(SignedIdentity, Failures) {
    const auto good = sign_identity(key(), "bob", 2000);
    auto failure = [](const IdentityOutcome& o) {
        return std::holds_alternative<IdentityFailure>(o) ? std::get<IdentityFailure>(o)
                                                          : static_cast<IdentityFailure>(255);
    };
    EXPECT_EQ(failure(verify_identity(key('x'), good, at(0))), IdentityFailure::bad_signature);
    // The value changed, the MAC kept: bad signature.
    auto alice = sign_identity(key(), "alice", 2000);
    const auto forged = alice.substr(0, alice.find('.')) + good.substr(good.find('.'));
    EXPECT_EQ(failure(verify_identity(key(), forged, at(0))), IdentityFailure::bad_signature);
    // A later expiry under the old MAC: bad signature, not trusted.
    EXPECT_EQ(failure(verify_identity(key(), "Ym9i.9999" + good.substr(good.rfind('.')), at(0))),
              IdentityFailure::bad_signature);
    EXPECT_EQ(failure(verify_identity(key(), good, at(2000))), IdentityFailure::expired);
    EXPECT_EQ(failure(verify_identity(key(), good, at(5000))), IdentityFailure::expired);
    EXPECT_EQ(failure(verify_identity(key(), "bob", at(0))), IdentityFailure::unsigned_value);
    EXPECT_EQ(failure(verify_identity(key(), "", at(0))), IdentityFailure::unsigned_value);
    EXPECT_EQ(failure(verify_identity(key(), "Ym9i.2000", at(0))), IdentityFailure::malformed);
    EXPECT_EQ(failure(verify_identity(key(), "Ym9i.20x0" + good.substr(good.rfind('.')), at(0))),
              IdentityFailure::malformed);
    EXPECT_EQ(failure(verify_identity(key(), good.substr(0, good.size() - 1), at(0))), IdentityFailure::malformed);
    EXPECT_EQ(failure(verify_identity(key(), "Ym9*" + good.substr(good.find('.')), at(0))), IdentityFailure::malformed);
    EXPECT_EQ(failure(verify_identity(key(), "a.b.c.d", at(0))), IdentityFailure::malformed);
    auto bad_hex = good;
    bad_hex.back() = 'g';
    EXPECT_EQ(failure(verify_identity(key(), bad_hex, at(0))), IdentityFailure::malformed);
}

TEST(SignedIdentity, Base64urlRoundTrip) {
    for (const std::string s : {"", "f", "fo", "foo", "foob", "fooba", "foobar", "\xfb\xff"}) {
        const auto e = base64url_encode(s);
        EXPECT_EQ(e.find_first_of("+/="), std::string::npos);
        EXPECT_EQ(base64url_decode(e), s);
    }
    EXPECT_EQ(base64url_encode("\xfb\xff"), "-_8");
    EXPECT_FALSE(base64url_decode("Zm9vYg==").has_value());
    EXPECT_FALSE(base64url_decode("Z").has_value());
    EXPECT_FALSE(base64url_decode("Zh").has_value());  // non-zero leftover bits
}

class KeyFile : public ::testing::Test {
  protected:
    void SetUp() override {
        char tmpl[] = "/tmp/sluice-key-XXXXXX";
        dir_ = mkdtemp(tmpl);
        path_ = dir_ + "/key";
    }
    void TearDown() override {
        unlink(path_.c_str());
        rmdir(dir_.c_str());
    }
    void write(const std::string& bytes, mode_t mode) {
        std::ofstream(path_, std::ios::binary) << bytes;
        chmod(path_.c_str(), mode);
    }
    std::string dir_, path_;
};

TEST_F(KeyFile, PrivateKeyLoadsWithoutItsNewline) {
    write(std::string(64, 'a') + "\n", 0600);
    auto k = IdentityKey::load(path_);
    ASSERT_TRUE(k.ok()) << k.error().message;
    EXPECT_EQ(k.value().bytes(), std::string(64, 'a'));
    write(std::string(64, 'a') + "\n", 0400);
    EXPECT_TRUE(IdentityKey::load(path_).ok());
}

TEST_F(KeyFile, TooOpenKeyFileIsRefusedNamingPathAndMode) {
    for (const mode_t mode : {0644, 0640, 0604, 0620}) {
        write(std::string(64, 'a'), mode);
        auto k = IdentityKey::load(path_);
        ASSERT_FALSE(k.ok());
        EXPECT_NE(k.error().message.find(path_), std::string::npos) << k.error().message;
        char text[8];
        std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode));
        EXPECT_NE(k.error().message.find(text), std::string::npos) << k.error().message;
    }
}

TEST_F(KeyFile, ShortOrMissingKeyIsRefused) {
    write(std::string(31, 'a') + "\n", 0600);
    auto k = IdentityKey::load(path_);
    ASSERT_FALSE(k.ok());
    EXPECT_NE(k.error().message.find("at least 32"), std::string::npos) << k.error().message;
    auto missing = IdentityKey::load(dir_ + "/nope");
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.error().message.find(dir_ + "/nope"), std::string::npos);
}

// Random key bytes may end in '\n' or '\r' (one in 128): they are key, not a
// line end, or the daemon's placeholder key fails to start it now and then.
TEST(IdentityKeyBytes, RawBytesEndingInNewlineAreAllKey) {
    auto k = IdentityKey::from_bytes(std::string(31, 'a') + "\n");
    ASSERT_TRUE(k.ok()) << k.error().message;
    EXPECT_EQ(k.value().bytes().size(), 32u);
}

}  // namespace
}  // namespace sluice::request
