// SPDX-License-Identifier: Apache-2.0
// nginx in front of sluiced, end to end: a real nginx (/usr/sbin/nginx) with
// the shipped snippet packaging/nginx-sluice.conf included (its one sluiced
// address templated with the door's port: nginx_front.h), auth_request to a
// sluiced with `[request] http_address` on loopback and trusted_proxies =
// ["127.0.0.1"], and a client that sees only nginx. Clients speak from other
// loopback addresses (127.0.0.2 ...), so nginx's own address is the only
// trusted hop. No interfaces, no namespaces: the request door needs none.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "common/privilege.h"
#include "e2e_fixture.h"
#include "nginx_front.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr const char* kNginx = "/usr/sbin/nginx";

// Three domains, one per concern, so the cases do not share counters (and
// the packet class every policy needs; no interface runs it).
constexpr const char* kPolicy = R"(
[[class]]
name = "default"
per_source = { rate = 1000, burst = 2000 }

[[request_domain]]
name = "window"

[[request_class]]
name = "per-address"
domain = "window"
descriptor = ["remote_address"]
limit = { algorithm = "fixed_window", limit = 3, window = "3s" }

[[request_domain]]
name = "tiers"
headers = { tenant = "X-Tenant", user = "X-User" }

[[request_class]]
name = "tenant"
domain = "tiers"
descriptor = ["tenant"]
limit = { algorithm = "sliding_log", limit = 5, window = "1h" }

[[request_class]]
name = "user"
domain = "tiers"
descriptor = ["tenant", "user"]
limit = { algorithm = "sliding_log", limit = 2, window = "1h" }

[[request_domain]]
name = "addr"

[[request_class]]
name = "client"
domain = "addr"
descriptor = ["remote_address"]
limit = { algorithm = "sliding_log", limit = 3, window = "1h" }
)";

// r and t of class `name` in a RateLimit field value, or nullopt.
struct LimitState {
    uint64_t remaining = 0;
    uint64_t reset_s = 0;
};
std::optional<LimitState> limit_state(const std::optional<std::string>& field, const std::string& name) {
    if (!field) return std::nullopt;
    const std::regex member("\"" + name + "\";r=([0-9]+);t=([0-9]+)");
    std::smatch m;
    if (!std::regex_search(*field, m, member)) return std::nullopt;
    return LimitState{std::stoull(m[1]), std::stoull(m[2])};
}

class NginxE2E : public ::testing::Test {
  protected:
    void SetUp() override {
        if (access(kNginx, X_OK) != 0) {
            if (privileged_suites_required())
                FAIL() << "SLUICE_REQUIRE_PRIVILEGED is set but " << kNginx << " is missing";
            GTEST_SKIP() << "skipped: needs nginx (" << kNginx << ")";
        }
        NginxFrontOptions options;
        options.sluiced = binary_from_env("SLUICED");
        options.sluicectl = binary_from_env("SLUICECTL");
        options.snippet = binary_from_env("SLUICE_NGINX_SNIPPET");
        options.nginx = kNginx;
        options.dir_prefix = "/tmp/sluice-nginx-e2e-";
        front_ = std::make_unique<NginxFront>(options);
        ASSERT_EQ(front_->make_dir(), "");
        ASSERT_EQ(front_->start_sluiced(), "");
        ASSERT_EQ(front_->push_policy(kPolicy), "");
        sites_ = {NginxSite{.limited = true,
                            .domain = "window",
                            .locations = {{"/window/", "window"}, {"/tiers/", "tiers"}, {"/addr/", "addr"}}}};
        ASSERT_EQ(front_->start_nginx(sites_), "");
    }

    void TearDown() override {
        if (front_) {
            front_->stop_sluiced();
            EXPECT_EQ(sanitizer_report(front_->sluiced_log()), "") << "sluiced reported a sanitizer error";
        }
        if (HasFailure() && front_) {
            std::cout << "---- sluiced log ----\n"
                      << front_->sluiced_log() << "---- nginx error log ----\n"
                      << front_->nginx_log() << "---- end ----" << std::endl;
        }
        front_.reset();  // stops nginx and sluiced, removes the temp dir
    }

    HttpExchange get(const std::string& target, const std::string& source,
                     const std::vector<std::pair<std::string, std::string>>& headers = {}) {
        return http_request(sites_[0].port, target, source, headers);
    }

    void figure_line(const std::string& key, const std::string& text) {
        RecordProperty(key, text);
        std::cout << "[figure] " << ::testing::UnitTest::GetInstance()->current_test_info()->name() << " " << key
                  << ": " << text << std::endl;
    }

    std::unique_ptr<NginxFront> front_;
    std::vector<NginxSite> sites_;
};

std::string one_line(const HttpExchange& r) {
    std::string text = r.head();
    for (auto& c : text)
        if (c == '\n') c = '|';
    return text;
}

// Within the limit: 200 with the fields; over it: 429 with Retry-After and
// the fields; refused until the window's end (Retry-After rounds up, so every
// request answered before the 429 was sent + Retry-After - 1 s must be
// refused), and allowed at the advertised point: not before.
TEST_F(NginxE2E, AllowsThen429WithRetryAfterNotBefore) {
    const std::string client = "127.0.0.2";
    // Start just after a window began: the first answer's t says when it ends.
    const auto first = get("/window/", client);
    ASSERT_EQ(first.status, 200) << first.error << one_line(first);
    const auto first_state = limit_state(first.header("RateLimit"), "per-address");
    ASSERT_TRUE(first_state) << one_line(first);
    std::this_thread::sleep_for(std::chrono::seconds(first_state->reset_s) + 50ms);

    for (uint64_t i = 0; i < 3; i++) {
        const auto allowed = get("/window/", client);
        ASSERT_EQ(allowed.status, 200) << "request " << i << ": " << allowed.error << one_line(allowed);
        EXPECT_EQ(allowed.body, "ok\n");
        EXPECT_EQ(allowed.header("RateLimit-Policy").value_or(""), "\"per-address\";q=3;w=3");
        const auto state = limit_state(allowed.header("RateLimit"), "per-address");
        ASSERT_TRUE(state) << one_line(allowed);
        EXPECT_EQ(state->remaining, 2 - i) << one_line(allowed);
        EXPECT_FALSE(allowed.header("Retry-After")) << one_line(allowed);
    }

    const auto sent = Clock::now();
    const auto refused = get("/window/", client);
    const auto received = Clock::now();
    ASSERT_EQ(refused.status, 429) << refused.error << one_line(refused);
    EXPECT_EQ(refused.status_line, "HTTP/1.1 429 Too Many Requests");
    figure_line("refused", one_line(refused));
    const auto retry_after = refused.header("Retry-After");
    ASSERT_TRUE(retry_after) << one_line(refused);
    ASSERT_TRUE(std::regex_match(*retry_after, std::regex("[0-9]+"))) << "not delay-seconds: " << *retry_after;
    const int advertised = std::stoi(*retry_after);
    EXPECT_GE(advertised, 1);
    EXPECT_LE(advertised, 3);
    EXPECT_EQ(refused.header("RateLimit-Policy").value_or(""), "\"per-address\";q=3;w=3");
    const auto refused_state = limit_state(refused.header("RateLimit"), "per-address");
    ASSERT_TRUE(refused_state) << one_line(refused);
    EXPECT_EQ(refused_state->remaining, 0u);

    // The true retry point lies after sent + advertised - 1 s: any answer
    // received before that was decided before it and must be a refusal.
    const auto refused_until = sent + std::chrono::seconds(advertised) - 1s;
    int probes = 0;
    while (Clock::now() + 100ms < refused_until) {
        const auto probe = get("/window/", client);
        if (Clock::now() < refused_until) {
            EXPECT_EQ(probe.status, 429) << "probe " << probes
                                         << " before the advertised retry point: " << one_line(probe);
            EXPECT_TRUE(probe.header("Retry-After")) << one_line(probe);
            probes++;
        }
        std::this_thread::sleep_for(250ms);
    }
    // At the advertised point (counted from when the 429 arrived, so past the
    // decision's own retry point): allowed.
    std::this_thread::sleep_until(received + std::chrono::seconds(advertised));
    const auto again = get("/window/", client);
    EXPECT_EQ(again.status, 200) << "at Retry-After (" << advertised << " s): " << one_line(again);
    figure_line("retry",
                "Retry-After " + std::to_string(advertised) + " s; " + std::to_string(probes) +
                    " probes before (advertised - 1 s) refused; at the advertised point: " + again.status_line);
}

// A per-user class inside a per-tenant class: a user refused at its own
// limit spends nothing of the tenant's (check, then commit).
TEST_F(NginxE2E, UsersRefusedDoNotSpendTheirTenant) {
    const std::string client = "127.0.0.5";
    const auto as = [&](const std::string& user) {
        return get("/tiers/", client, {{"X-Tenant", "acme"}, {"X-User", user}});
    };
    for (uint64_t i = 0; i < 2; i++) {
        const auto r = as("alice");
        ASSERT_EQ(r.status, 200) << r.error << one_line(r);
        EXPECT_EQ(limit_state(r.header("RateLimit"), "user").value_or(LimitState{99, 0}).remaining, 1 - i);
        EXPECT_EQ(limit_state(r.header("RateLimit"), "tenant").value_or(LimitState{99, 0}).remaining, 4 - i);
    }
    for (int i = 0; i < 6; i++) {
        const auto r = as("alice");
        ASSERT_EQ(r.status, 429) << one_line(r);
        EXPECT_TRUE(r.header("Retry-After")) << one_line(r);
        // The tenant still has the 3 alice's two admissions left it.
        EXPECT_EQ(limit_state(r.header("RateLimit"), "tenant").value_or(LimitState{99, 0}).remaining, 3u)
            << one_line(r);
        if (i == 0) figure_line("user_refused", one_line(r));
    }
    // Had the refusals spent the tenant (8 > 5), bob would be refused.
    for (uint64_t i = 0; i < 2; i++) {
        const auto r = as("bob");
        ASSERT_EQ(r.status, 200) << one_line(r);
        EXPECT_EQ(limit_state(r.header("RateLimit"), "tenant").value_or(LimitState{99, 0}).remaining, 2 - i)
            << one_line(r);
    }
    const auto carol = as("carol");
    ASSERT_EQ(carol.status, 200) << one_line(carol);
    EXPECT_EQ(limit_state(carol.header("RateLimit"), "tenant").value_or(LimitState{99, 0}).remaining, 0u);
    EXPECT_EQ(limit_state(carol.header("RateLimit"), "user").value_or(LimitState{99, 0}).remaining, 1u);
    // Carol has room of her own; the tenant is spent: refused by the tenant.
    const auto carol_again = as("carol");
    ASSERT_EQ(carol_again.status, 429) << one_line(carol_again);
    figure_line("tenant_refused", one_line(carol_again));

    std::string error;
    const auto stats = front_->ctl_json({"stats"}, &error);
    ASSERT_TRUE(stats) << error;
    const auto doc = nlohmann::json::parse(*stats);
    const nlohmann::json* tiers = nullptr;
    for (const auto& d : doc["requests"]["domains"])
        if (d.value("domain", "") == "tiers") tiers = &d;
    ASSERT_NE(tiers, nullptr) << *stats;
    EXPECT_EQ(tiers->value("allowed", 0u), 5u) << tiers->dump();
    EXPECT_EQ(tiers->value("refused", 0u), 7u) << tiers->dump();
    std::map<std::string, uint64_t> refused_by_class;
    for (const auto& c : (*tiers)["classes"]) refused_by_class[c.value("class", "")] = c.value("refused", 0u);
    EXPECT_EQ(refused_by_class["user"], 6u) << tiers->dump();
    EXPECT_EQ(refused_by_class["tenant"], 1u) << tiers->dump();
}

// nginx appends the address it saw to X-Forwarded-For; sluiced believes only
// its trusted hop (127.0.0.1) and takes the rightmost untrusted address, so
// what the client wrote there moves nothing.
TEST_F(NginxE2E, SpoofedForwardedForDoesNotMoveTheClientsCounter) {
    const std::string client = "127.0.0.3";
    const std::vector<std::string> spoofs = {"203.0.113.7", "198.51.100.1, 10.0.0.1", "127.0.0.4", "192.0.2.55"};
    for (uint64_t i = 0; i < spoofs.size(); i++) {
        const auto r = get("/addr/", client, {{"X-Forwarded-For", spoofs[i]}});
        if (i < 3) {
            ASSERT_EQ(r.status, 200) << "X-Forwarded-For: " << spoofs[i] << ": " << r.error << one_line(r);
            EXPECT_EQ(limit_state(r.header("RateLimit"), "client").value_or(LimitState{99, 0}).remaining, 2 - i)
                << "X-Forwarded-For: " << spoofs[i] << ": " << one_line(r);
        } else {
            ASSERT_EQ(r.status, 429) << "X-Forwarded-For: " << spoofs[i] << ": " << one_line(r);
            figure_line("spoof_refused", "X-Forwarded-For: " + spoofs[i] + " -> " + one_line(r));
        }
    }
    // Another client naming the refused one is counted as itself.
    const auto other = get("/addr/", "127.0.0.4", {{"X-Forwarded-For", client}});
    ASSERT_EQ(other.status, 200) << one_line(other);
    EXPECT_EQ(limit_state(other.header("RateLimit"), "client").value_or(LimitState{99, 0}).remaining, 2u);

    // The refused key is the real address.
    std::string error;
    const auto top = front_->ctl_json({"top"}, &error);
    ASSERT_TRUE(top) << error;
    const auto doc = nlohmann::json::parse(*top);
    std::vector<std::string> keys;
    for (const auto& k : doc.value("request_keys", nlohmann::json::array())) keys.push_back(k.value("key", ""));
    EXPECT_EQ(keys, std::vector<std::string>{"remote_address=127.0.0.3"}) << *top;
}

// sluiced stopped: the snippet fails closed, nginx answers 500
// (packaging/nginx-sluice.conf: "anything else (sluiced down, ...) -> 500").
TEST_F(NginxE2E, SluicedDownFailsClosed) {
    const auto before = get("/addr/", "127.0.0.6");
    ASSERT_EQ(before.status, 200) << before.error << one_line(before);
    front_->stop_sluiced();
    ASSERT_FALSE(loopback_listening(front_->http_port())) << "the door still answers";
    const auto down = get("/addr/", "127.0.0.6");
    EXPECT_EQ(down.status, 500) << down.error << one_line(down);
    EXPECT_FALSE(down.header("RateLimit")) << one_line(down);
    EXPECT_NE(down.body, "ok\n") << "the upstream was reached";
    figure_line("sluiced_down", one_line(down));
}

}  // namespace
}  // namespace sluice::test
