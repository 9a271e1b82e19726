// SPDX-License-Identifier: Apache-2.0
// The nginx auth_request endpoint, served on 127.0.0.1:0 over a real
// RequestLimiter and RequestGate (fake monotonic clock: the windows do not
// move), asked by an httplib::Client as nginx would ask it.
#include "http_service.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "identity.h"
#include "request_class_builder.h"
#include "request_gate.h"
#include "request_limiter.h"

namespace sluice::request::http_service_test {
namespace {

constexpr uint64_t kSecond = 1'000'000'000;

RequestClass window_class(uint32_t id, const std::string& name, const std::string& domain, std::vector<RequestKey> keys,
                          uint64_t limit, uint64_t max_cost = 1) {
    return window_request_class(id, name, domain, std::move(keys), Algorithm::fixed_window, limit, 60 * kSecond,
                                max_cost);
}

class HttpServiceTest : public ::testing::Test {
  protected:
    HttpServiceTest() : limiter_(limiter_options()), gate_(limiter_, GateOptions{}) {}

    static LimiterOptions limiter_options() {
        LimiterOptions o;
        o.clock = [] { return 1000 * 60 * kSecond + 10 * kSecond + kSecond / 2; };  // 10.5 s into a window
        return o;
    }

    void SetUp() override {
        // "web": 3 requests a window per user (a signed header), weights up to 5.
        RequestDomain web;
        web.name = "web";
        web.headers = {{"user", "X-User"}};
        web.signed_keys = {"user"};
        web.cost_header = "X-Cost";
        // "edge": 1 request a window per client address.
        RequestDomain edge;
        edge.name = "edge";
        limiter_.apply(1,
                       {window_class(1, "user", "web", {{"user", std::nullopt}}, 3, 5),
                        window_class(2, "per_ip", "edge", {{"remote_address", std::nullopt}}, 1)},
                       {web, edge});

        key_path_ = "/tmp/sluice-http-key-" + std::to_string(::getpid());
        {
            std::FILE* f = std::fopen(key_path_.c_str(), "w");
            ASSERT_NE(f, nullptr);
            std::fputs(std::string(40, 'z').c_str(), f);
            std::fclose(f);
            ::chmod(key_path_.c_str(), 0600);
        }
        HttpServiceOptions options;
        options.address = "127.0.0.1:0";
        options.trusted_proxies = {"127.0.0.1"};
        options.identity_key_file = key_path_;
        options.threads = 2;
        auto service = HttpService::start(gate_, options);
        ASSERT_TRUE(service.ok()) << service.error().message;
        service_ = std::move(service.value());
        ASSERT_GT(service_->port(), 0);
        client_ = std::make_unique<httplib::Client>("127.0.0.1", service_->port());
    }

    void TearDown() override {
        if (service_) service_->stop();
        ::unlink(key_path_.c_str());
    }

    std::string signed_user(const std::string& user) {
        return sign_identity(IdentityKey::from_bytes(std::string(40, 'z')).value(), user, 4'000'000'000);
    }

    httplib::Result get(const std::string& path, httplib::Headers headers = {}) {
        return client_->Get(path.c_str(), headers);
    }

    RequestLimiter limiter_;
    RequestGate gate_;
    std::string key_path_;
    std::unique_ptr<HttpService> service_;
    std::unique_ptr<httplib::Client> client_;
};

TEST_F(HttpServiceTest, AllowsThenRefusesWithRetryAfterAndRateLimitFields) {
    const httplib::Headers bob = {{"X-User", signed_user("bob")}};
    for (int i = 0; i < 3; i++) {
        auto res = get("/v1/decide/web", bob);
        ASSERT_TRUE(res) << httplib::to_string(res.error());
        EXPECT_EQ(res->status, 200) << i;
        EXPECT_EQ(res->body, "");
        EXPECT_EQ(res->get_header_value("X-Sluice-Decision"), "allow");
        EXPECT_FALSE(res->has_header("Retry-After"));
        EXPECT_NE(res->get_header_value("RateLimit-Policy").find("\"user\""), std::string::npos);
        EXPECT_NE(res->get_header_value("RateLimit").find("r=" + std::to_string(2 - i)), std::string::npos)
            << res->get_header_value("RateLimit");
    }
    auto res = client_->Post("/v1/decide/web", bob, "", "text/plain");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 403);
    EXPECT_EQ(res->get_header_value("X-Sluice-Decision"), "refuse");
    // The window ends 49.5 s from now: Retry-After never names an earlier point.
    ASSERT_TRUE(res->has_header("Retry-After"));
    const long retry = std::stol(res->get_header_value("Retry-After"));
    EXPECT_GE(static_cast<double>(retry), 49.5);
    EXPECT_EQ(retry, 50);
    EXPECT_NE(res->get_header_value("RateLimit-Policy").find("\"user\""), std::string::npos);
    EXPECT_NE(res->get_header_value("RateLimit").find("r=0"), std::string::npos);
    const auto stats = gate_.stats();
    EXPECT_EQ(stats.domains.at("web").allowed, 3u);
    EXPECT_EQ(stats.domains.at("web").refused, 1u);
}

TEST_F(HttpServiceTest, UnknownDomainIs404) {
    auto res = get("/v1/decide/nope");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 404);
    EXPECT_NE(res->body.find("\"nope\""), std::string::npos) << res->body;
}

TEST_F(HttpServiceTest, BadCostIs400NamingTheHeader) {
    auto res = get("/v1/decide/web", {{"X-User", signed_user("bob")}, {"X-Cost", "two"}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400);
    EXPECT_NE(res->body.find("X-Cost"), std::string::npos) << res->body;
    res = get("/v1/decide/web", {{"X-User", signed_user("bob")}, {"X-Cost", "0"}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400);
    // Above the class's max_cost: the limiter's own refusal, as invalid.
    res = get("/v1/decide/web", {{"X-User", signed_user("bob")}, {"X-Cost", "6"}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400);
    EXPECT_FALSE(res->body.empty());
    // A weight within it is charged as such: 3 in one request, then none left.
    res = get("/v1/decide/web", {{"X-User", signed_user("bob")}, {"X-Cost", "3"}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
    res = get("/v1/decide/web", {{"X-User", signed_user("bob")}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 403);
}

TEST_F(HttpServiceTest, UntrustedIdentitiesFallToAnonymousAndAreCounted) {
    // Bob spends his three.
    for (int i = 0; i < 3; i++) EXPECT_EQ(get("/v1/decide/web", {{"X-User", signed_user("bob")}})->status, 200);
    EXPECT_EQ(get("/v1/decide/web", {{"X-User", signed_user("bob")}})->status, 403);
    // "bob" unsigned is not bob: it is anonymous, a counter of its own.
    EXPECT_EQ(get("/v1/decide/web", {{"X-User", "bob"}})->status, 200);
    auto forged = signed_user("bob");
    forged.back() = forged.back() == '0' ? '1' : '0';
    EXPECT_EQ(get("/v1/decide/web", {{"X-User", forged}})->status, 200);
    EXPECT_EQ(get("/v1/decide/web", {{"X-User", "Ym9i.12"}})->status, 200);  // malformed
    // The anonymous counter is spent now, whoever claims to be whom.
    auto res = get("/v1/decide/web", {{"X-User", "alice"}});
    EXPECT_EQ(res->status, 403);
    // No header at all is anonymous too (not a failure).
    EXPECT_EQ(get("/v1/decide/web")->status, 403);
    // An anonymous signed value is anonymous's counter, honestly.
    EXPECT_EQ(get("/v1/decide/web", {{"X-User", signed_user("anonymous")}})->status, 403);
    // Someone else, properly signed, has their own.
    EXPECT_EQ(get("/v1/decide/web", {{"X-User", signed_user("carol")}})->status, 200);

    const auto failures = gate_.stats().domains.at("web").identity_failures;
    EXPECT_EQ(failures.at("unsigned"), 2u);
    EXPECT_EQ(failures.at("bad_signature"), 1u);
    EXPECT_EQ(failures.at("malformed"), 1u);
    EXPECT_EQ(failures.count("expired"), 0u);
}

TEST_F(HttpServiceTest, ClientAddressIsTheRightmostUntrustedHop) {
    // The peer, 127.0.0.1, is a trusted proxy: the client is the hop it added.
    EXPECT_EQ(get("/v1/decide/edge", {{"X-Forwarded-For", "1.1.1.1, 203.0.113.9"}})->status, 200);
    // The same client with another spoofed left part: the same counter, spent.
    auto res = get("/v1/decide/edge", {{"X-Forwarded-For", "2.2.2.2, 203.0.113.9"}});
    EXPECT_EQ(res->status, 403);
    EXPECT_EQ(res->get_header_value("X-Sluice-Decision"), "refuse");
    // Another client has its own.
    EXPECT_EQ(get("/v1/decide/edge", {{"X-Forwarded-For", "203.0.113.9, 203.0.113.10"}})->status, 200);
    // Without a header, the proxy itself is the client.
    EXPECT_EQ(get("/v1/decide/edge")->status, 200);
    EXPECT_EQ(get("/v1/decide/edge")->status, 403);
}

TEST(HttpServiceOptionsTest, BadOptionsAreRefusedNamingThem) {
    RequestLimiter limiter;
    RequestGate gate(limiter, GateOptions{});
    HttpServiceOptions options;
    options.address = "127.0.0.1";
    auto s = HttpService::start(gate, options);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().setting, "address");
    options.address = "127.0.0.1:0";
    options.trusted_proxies = {"10.0.0.0/33"};
    s = HttpService::start(gate, options);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().message.find("10.0.0.0/33"), std::string::npos);
    options.trusted_proxies = {};
    options.client_address_header = "X-Real-IP";
    EXPECT_FALSE(HttpService::start(gate, options).ok());
    options.client_address_header = "Forwarded";
    options.identity_key_file = "/nonexistent/sluice-key";
    s = HttpService::start(gate, options);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().message.find("/nonexistent/sluice-key"), std::string::npos);
    // Without a key every signed key is anonymous; the service still runs.
    options.identity_key_file = "";
    s = HttpService::start(gate, options);
    ASSERT_TRUE(s.ok()) << s.error().message;
    s.value()->stop();
    s.value()->stop();  // idempotent
}

}  // namespace
}  // namespace sluice::request::http_service_test
