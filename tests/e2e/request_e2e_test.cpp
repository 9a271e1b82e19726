// SPDX-License-Identifier: Apache-2.0
// Request-level decisions through the real daemon: each test starts its own
// sluiced (no interfaces: [request] only; socket, state dir and config in a
// temp dir, pins under a bpffs dir of its own, gRPC and metrics on loopback
// port 0), pushes a policy with request classes through sluicectl and asks
// it as Envoy's ratelimit filter does, with a grpc++ stub of
// envoy.service.ratelimit.v3.RateLimitService.
//
//  - RequestE2E.Envoy*: statuses, limits, remaining, reset and the RateLimit
//    fields against the policy; a refusal at the user level charges nothing
//    at the tenant level (envoyproxy/ratelimit issue 1060) through the daemon;
//    weights above max_cost; unknown domains; `sluicectl stats` and /metrics
//    count what the client saw; a push changes the next answer.
//  - RequestE2E.FleetRedisDown*: two fleet request classes leasing from a
//    redis-server the test starts (open with a fallback rate, closed); Redis
//    killed and restarted under load. Prints each phase's admitted counts as
//    [figure] lines and asserts only bounds.
//
// Everything the test starts is killed and removed by destructors, also when
// an assertion fails (then sluiced's log is printed).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/http_get.h"
#include "common/netns.h"
#include "common/privilege.h"
#include "control_client.h"
#include "e2e/e2e_fixture.h"
#include "e2e/process.h"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "fleet/redis_server.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
namespace rls = envoy::service::ratelimit::v3;
using RateLimit = rls::RateLimitResponse::RateLimit;
using Steady = std::chrono::steady_clock;

constexpr auto kReadyTimeout = 10s;
constexpr auto kCtlTimeout = 30s;

double seconds_between(Steady::time_point a, Steady::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

// ---- one sluiced with [request] and no interfaces --------------------------------------

class RequestDaemon {
  public:
    RequestDaemon() = default;
    ~RequestDaemon() { stop(); }
    RequestDaemon(const RequestDaemon&) = delete;
    RequestDaemon& operator=(const RequestDaemon&) = delete;

    // Writes sluiced.toml (`extra` appended after [request]) and starts
    // sluiced; waits for `status`, then reads the gRPC port from it and the
    // metrics port from the log. Use with ASSERT_NO_FATAL_FAILURE.
    void start(const std::string& extra = {}) {
        char templ[] = "/tmp/sluice-req-e2e-XXXXXX";
        ASSERT_NE(mkdtemp(templ), nullptr) << "mkdtemp: " << std::strerror(errno);
        dir_ = templ;
        pins_ = std::make_unique<PinDir>("/sys/fs/bpf/sluice-req-e2e-" + unique_suffix());
        write_file(config_path(), "socket = \"" + socket_path() + "\"\n" +               //
                                      "state_dir = \"" + dir_ + "/state\"\n" +           //
                                      "bpffs_dir = \"" + pins_->path() + "\"\n" +        //
                                      "metrics_address = \"127.0.0.1:0\"\n" +            //
                                      "source_capacity = 1024\n" +                       //
                                      "\n[request]\ngrpc_address = \"127.0.0.1:0\"\n" +  //
                                      extra);
        pid_ = spawn(
            {binary_from_env("SLUICED"), "--config", config_path()},
            SpawnOptions{
                .stdout_path = dir_ + "/sluiced.stdout", .stderr_path = log_path(), .netns_path = {}, .append = false});
        ASSERT_GT(pid_, 0) << "fork: " << std::strerror(errno);
        const auto deadline = Steady::now() + kReadyTimeout;
        std::string last = "no attempt";
        while (Steady::now() < deadline) {
            int code = 0;
            if (exited(pid_, &code)) {
                pid_ = -1;
                FAIL() << "sluiced exited with " << code << " before answering `status`; its log:\n" << log();
            }
            auto client = ControlClient::connect(socket_path(), 1000);
            if (client.ok()) {
                auto answer = client.value().call("status");
                if (answer.ok()) {
                    const json& requests = answer.value()["requests"];
                    ASSERT_TRUE(requests.is_object()) << answer.value().dump();
                    grpc_port_ = requests.value("grpc_port", 0);
                    break;
                }
                last = answer.error().message;
            } else {
                last = client.error().message;
            }
            std::this_thread::sleep_for(50ms);
        }
        ASSERT_GT(grpc_port_, 0) << "sluiced did not answer `status` with a grpc_port within 10 s (last: " << last
                                 << "); its log:\n"
                                 << log();
        std::smatch found;
        const std::string text = log();
        ASSERT_TRUE(std::regex_search(text, found, std::regex("msg=\"?serving metrics\"?.* port=(\\d+)")))
            << "no metrics port in the log:\n"
            << text;
        metrics_port_ = std::stoi(found[1]);
    }

    // SIGTERM, so a sanitizer build runs sluiced's exit path; a sanitizer
    // report in its log fails the test.
    void stop() {
        if (pid_ > 0) {
            (void)terminate_child(pid_, 10s);
            pid_ = -1;
        }
        if (!dir_.empty()) {
            EXPECT_EQ(sanitizer_report(log()), "") << "sluiced's log:\n" << log();
        }
        pins_.reset();
        if (!dir_.empty()) {
            std::error_code ignored;
            std::filesystem::remove_all(dir_, ignored);
            dir_.clear();
        }
    }

    std::string log() const { return read_file(log_path()); }
    std::string socket_path() const { return dir_ + "/sluiced.sock"; }
    std::string config_path() const { return dir_ + "/sluiced.toml"; }
    std::string log_path() const { return dir_ + "/sluiced.log"; }
    int grpc_port() const { return grpc_port_; }

    ProcResult ctl(const std::vector<std::string>& args) {
        std::vector<std::string> argv = {binary_from_env("SLUICECTL"), "--socket", socket_path()};
        argv.insert(argv.end(), args.begin(), args.end());
        return run(argv, dir_ + "/ctl-" + std::to_string(ctl_runs_++), kCtlTimeout);
    }
    std::optional<json> ctl_json(const std::vector<std::string>& args) {
        std::vector<std::string> with = {"--json"};
        with.insert(with.end(), args.begin(), args.end());
        const ProcResult r = ctl(with);
        if (r.code != 0) {
            ADD_FAILURE() << "sluicectl " << join_argv(with) << " exited " << r.code << "\nstdout: " << r.out
                          << "\nstderr: " << r.err;
            return std::nullopt;
        }
        json parsed = json::parse(r.out, nullptr, false);
        if (parsed.is_discarded()) {
            ADD_FAILURE() << "sluicectl " << join_argv(with) << " printed no JSON:\n" << r.out;
            return std::nullopt;
        }
        return parsed;
    }
    // `policy push FILE` through sluicectl; the --json result.
    std::optional<json> push(const std::string& name, const std::string& text) {
        const std::string path = dir_ + "/" + name;
        write_file(path, text);
        return ctl_json({"policy", "push", path});
    }

    std::string scrape() {
        const HttpResponse r = http_get_loopback(metrics_port_, "/metrics");
        EXPECT_EQ(r.status, 200) << r.error;
        return r.body;
    }
    // Scrapes until `ready(text)` (metrics are published once a second).
    std::string scrape_when(const std::function<bool(const std::string&)>& ready, std::chrono::milliseconds timeout) {
        const auto deadline = Steady::now() + timeout;
        std::string text;
        do {
            text = scrape();
            if (ready(text)) return text;
            std::this_thread::sleep_for(100ms);
        } while (Steady::now() < deadline);
        return text;
    }

  private:
    std::string dir_;
    std::unique_ptr<PinDir> pins_;
    pid_t pid_ = -1;
    int grpc_port_ = 0;
    int metrics_port_ = 0;
    int ctl_runs_ = 0;
};

// ---- Envoy's side ----------------------------------------------------------------------

using Entries = std::vector<std::pair<std::string, std::string>>;

struct Descriptor {
    Entries entries;
    uint64_t hits_addend = 0;  // 0: unset
};

rls::RateLimitRequest make_request(const std::string& domain, const std::vector<Descriptor>& descriptors,
                                   uint32_t hits_addend = 0) {
    rls::RateLimitRequest request;
    request.set_domain(domain);
    for (const Descriptor& d : descriptors) {
        auto* descriptor = request.add_descriptors();
        for (const auto& [key, value] : d.entries) {
            auto* entry = descriptor->add_entries();
            entry->set_key(key);
            entry->set_value(value);
        }
        if (d.hits_addend) descriptor->mutable_hits_addend()->set_value(d.hits_addend);
    }
    if (hits_addend) request.set_hits_addend(hits_addend);
    return request;
}

struct Call {
    grpc::Status status;
    rls::RateLimitResponse response;

    std::optional<std::string> header(const std::string& name) const {
        for (const auto& h : response.response_headers_to_add())
            if (h.key() == name) return h.value();
        return std::nullopt;
    }
};

class Envoy {
  public:
    explicit Envoy(int port)
        : stub_(rls::RateLimitService::NewStub(
              grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()))) {}

    Call ask(const rls::RateLimitRequest& request) {
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + 5s);
        Call call;
        call.status = stub_->ShouldRateLimit(&context, request, &call.response);
        return call;
    }

  private:
    std::unique_ptr<rls::RateLimitService::Stub> stub_;
};

// What the client saw, per class as the daemon's gate counts it: every class
// a request met (a descriptor with a current_limit) refused it by that
// descriptor's own code, or allowed it when the whole request was allowed (a
// class that would have admitted a request another refused was not charged,
// and counts nothing).
struct ClientCounts {
    std::map<std::string, std::map<std::string, uint64_t>> per_class;  // class -> allowed|refused -> n
    uint64_t allowed = 0, refused = 0, invalid = 0;

    void add(const Call& call) {
        if (call.status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
            ++invalid;
            return;
        }
        if (!call.status.ok()) return;
        (call.response.overall_code() == rls::RateLimitResponse::OK ? allowed : refused)++;
        std::vector<std::string> seen;
        for (const auto& s : call.response.statuses()) {
            if (!s.has_current_limit()) continue;
            const std::string& name = s.current_limit().name();
            if (std::find(seen.begin(), seen.end(), name) != seen.end()) continue;
            seen.push_back(name);
            if (s.code() != rls::RateLimitResponse::OK)
                ++per_class[name]["refused"];
            else if (call.response.overall_code() == rls::RateLimitResponse::OK)
                ++per_class[name]["allowed"];
        }
    }
};

class RequestE2E : public ::testing::Test {
  protected:
    void SetUp() override { SLUICE_REQUIRE_BPF(); }  // sluiced needs root and a bpffs for its (empty) pins
    void TearDown() override {
        if (HasFailure() && daemon_)
            std::cout << "---- sluiced log ----\n" << daemon_->log() << "---- end of sluiced log ----" << std::endl;
        daemon_.reset();
        redis_.reset();
    }
    void figure_line(const std::string& key, const std::string& text) {
        RecordProperty(key, text);
        std::cout << "[figure] " << ::testing::UnitTest::GetInstance()->current_test_info()->name() << " " << key
                  << ": " << text << std::endl;
    }

    std::unique_ptr<RequestDaemon> daemon_;
    std::unique_ptr<RedisServer> redis_;
};

// ---- 1. Envoy's rate limit service through sluiced ----------------------------------

// Domain "api": the whole domain (burst 1000), each tenant (10), each
// tenant's users (user_burst). GCRA at 1 per second, so within the test's second or two a counter refills by at
// most one or two units; the assertions allow for that.
std::string api_policy(uint64_t user_burst) {
    return "[[class]]\nname = \"default\"\n\n"
           "[[request_class]]\nname = \"global\"\ndomain = \"api\"\ndescriptor = []\n"
           "limit = { rate = 1, burst = 1000 }\nmax_cost = 10\n\n"
           "[[request_class]]\nname = \"tenant\"\ndomain = \"api\"\ndescriptor = [\"tenant\"]\n"
           "limit = { rate = 1, burst = 10 }\nmax_cost = 5\n\n"
           "[[request_class]]\nname = \"user\"\ndomain = \"api\"\ndescriptor = [\"tenant\", \"user\"]\n"
           "limit = { rate = 1, burst = " +
           std::to_string(user_burst) + " }\nmax_cost = 3\n";
}

std::vector<Descriptor> three_levels(const std::string& user) {
    return {{{}, 0}, {{{"tenant", "acme"}}, 0}, {{{"tenant", "acme"}, {"user", user}}, 0}};
}

TEST_F(RequestE2E, EnvoyDescriptorsLimitsFieldsCountsAndPush) {
    daemon_ = std::make_unique<RequestDaemon>();
    ASSERT_NO_FATAL_FAILURE(daemon_->start());
    auto pushed = daemon_->push("api.toml", api_policy(3));
    ASSERT_TRUE(pushed);
    const uint64_t v1 = pushed->value("version", uint64_t{0});
    ASSERT_GT(v1, 0u);
    Envoy envoy(daemon_->grpc_port());
    ClientCounts seen;
    auto ask = [&](const rls::RateLimitRequest& request) {
        Call call = envoy.ask(request);
        seen.add(call);
        return call;
    };

    // Three descriptors, weight 1: every level admits.
    Call first = ask(make_request("api", three_levels("bob")));
    ASSERT_TRUE(first.status.ok()) << first.status.error_message();
    EXPECT_EQ(first.response.overall_code(), rls::RateLimitResponse::OK);
    ASSERT_EQ(first.response.statuses_size(), 3);
    const auto& global = first.response.statuses(0);
    EXPECT_EQ(global.code(), rls::RateLimitResponse::OK);
    EXPECT_EQ(global.current_limit().name(), "global");
    EXPECT_EQ(global.current_limit().requests_per_unit(), 1u);
    EXPECT_EQ(global.current_limit().unit(), RateLimit::SECOND);
    EXPECT_EQ(global.limit_remaining(), 999u);
    EXPECT_LE(global.duration_until_reset().seconds(), 1);
    const auto& tenant = first.response.statuses(1);
    EXPECT_EQ(tenant.current_limit().name(), "tenant");
    EXPECT_EQ(tenant.current_limit().requests_per_unit(), 1u);
    EXPECT_EQ(tenant.limit_remaining(), 9u);
    // One unit spent at 1/s: back to full in about a second.
    EXPECT_LE(tenant.duration_until_reset().seconds(), 1);
    EXPECT_GT(tenant.duration_until_reset().seconds() * 1'000'000'000LL + tenant.duration_until_reset().nanos(),
              500'000'000LL);
    const auto& user = first.response.statuses(2);
    EXPECT_EQ(user.current_limit().name(), "user");
    EXPECT_EQ(user.limit_remaining(), 2u);
    EXPECT_FALSE(first.header("Retry-After"));
    EXPECT_EQ(first.header("RateLimit-Policy").value_or(""),
              "\"global\";q=1000;w=1000, \"tenant\";q=10;w=10, \"user\";q=3;w=3");
    EXPECT_EQ(first.header("RateLimit").value_or(""), "\"global\";r=999;t=1, \"tenant\";r=9;t=1, \"user\";r=2;t=1");

    // hits_addend 2: bob's user counter is then empty.
    Call second = ask(make_request("api", three_levels("bob"), 2));
    ASSERT_TRUE(second.status.ok()) << second.status.error_message();
    EXPECT_EQ(second.response.overall_code(), rls::RateLimitResponse::OK);
    EXPECT_GE(second.response.statuses(0).limit_remaining(), 997u);
    EXPECT_LE(second.response.statuses(0).limit_remaining(), 998u);
    EXPECT_GE(second.response.statuses(1).limit_remaining(), 7u);
    EXPECT_LE(second.response.statuses(1).limit_remaining(), 8u);
    EXPECT_LE(second.response.statuses(2).limit_remaining(), 1u);
    const uint32_t tenant_after_second = second.response.statuses(1).limit_remaining();

    // Refused at the user level, five times (weight 2 so a unit refilled in
    // between does not let one through): OVER_LIMIT with Retry-After, and the
    // tenant's and global remaining untouched (issue 1060).
    for (int i = 0; i < 5; ++i) {
        Call refused = ask(make_request("api", three_levels("bob"), 2));
        ASSERT_TRUE(refused.status.ok()) << refused.status.error_message();
        EXPECT_EQ(refused.response.overall_code(), rls::RateLimitResponse::OVER_LIMIT) << i;
        EXPECT_EQ(refused.response.statuses(2).code(), rls::RateLimitResponse::OVER_LIMIT) << i;
        EXPECT_EQ(refused.response.statuses(1).code(), rls::RateLimitResponse::OK) << i;
        EXPECT_EQ(refused.response.statuses(0).code(), rls::RateLimitResponse::OK) << i;
        EXPECT_GE(refused.response.statuses(1).limit_remaining(), tenant_after_second) << i;
        EXPECT_GE(refused.response.statuses(0).limit_remaining(), 997u) << i;
        const auto retry = refused.header("Retry-After");
        ASSERT_TRUE(retry) << i;
        EXPECT_GE(std::stoi(*retry), 1) << i;
        EXPECT_LE(std::stoi(*retry), 2) << i;
        EXPECT_NE(refused.header("RateLimit").value_or("").find("\"user\";r=0;"), std::string::npos)
            << refused.header("RateLimit").value_or("");
    }
    // Carol, same tenant: charged one at the tenant, which the refusals left alone.
    Call carol = ask(make_request("api", three_levels("carol")));
    ASSERT_TRUE(carol.status.ok());
    EXPECT_EQ(carol.response.overall_code(), rls::RateLimitResponse::OK);
    EXPECT_GE(carol.response.statuses(1).limit_remaining() + 1, tenant_after_second)
        << "the refused requests were charged at the tenant level (issue 1060)";
    EXPECT_EQ(carol.response.statuses(2).limit_remaining(), 2u);

    // A descriptor's own hits_addend: 3 at the tenant only.
    Call own = ask(make_request("api", {{{{"tenant", "acme"}}, 3}, {{{"tenant", "acme"}, {"user", "dave"}}, 0}}));
    ASSERT_TRUE(own.status.ok());
    EXPECT_EQ(own.response.overall_code(), rls::RateLimitResponse::OK);
    EXPECT_LE(own.response.statuses(0).limit_remaining() + 3, carol.response.statuses(1).limit_remaining() + 1);
    EXPECT_EQ(own.response.statuses(1).limit_remaining(), 2u);

    // A weight above user's max_cost (3): INVALID_ARGUMENT, nothing charged.
    Call heavy = ask(make_request("api", three_levels("erin"), 4));
    EXPECT_EQ(heavy.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(heavy.status.error_message().find("max_cost"), std::string::npos) << heavy.status.error_message();
    Call erin = ask(make_request("api", three_levels("erin")));
    ASSERT_TRUE(erin.status.ok());
    EXPECT_EQ(erin.response.statuses(2).limit_remaining(), 2u) << "the invalid request charged erin";

    // A domain no class names: OK, no limit, no fields.
    Call unknown = ask(make_request("nope", {{{{"tenant", "acme"}}, 0}}));
    ASSERT_TRUE(unknown.status.ok());
    EXPECT_EQ(unknown.response.overall_code(), rls::RateLimitResponse::OK);
    ASSERT_EQ(unknown.response.statuses_size(), 1);
    EXPECT_EQ(unknown.response.statuses(0).code(), rls::RateLimitResponse::OK);
    EXPECT_FALSE(unknown.response.statuses(0).has_current_limit());
    EXPECT_EQ(unknown.response.response_headers_to_add_size(), 0);

    // `sluicectl stats`: what the client saw, per class.
    auto stats = daemon_->ctl_json({"stats"});
    ASSERT_TRUE(stats);
    const json& requests = (*stats)["requests"];
    ASSERT_TRUE(requests.is_object()) << stats->dump();
    EXPECT_EQ(requests.value("invalid", uint64_t{0}), seen.invalid);
    json api;
    for (const json& d : requests["domains"])
        if (d.value("domain", "") == "api") api = d;
    ASSERT_TRUE(api.is_object()) << requests.dump();
    EXPECT_EQ(api.value("allowed", uint64_t{0}), seen.allowed - 1);  // the unknown domain's is not api's
    EXPECT_EQ(api.value("refused", uint64_t{0}), seen.refused);
    for (const json& c : api["classes"]) {
        const std::string name = c.value("class", "");
        EXPECT_EQ(c.value("allowed", uint64_t{0}), seen.per_class[name]["allowed"]) << name;
        EXPECT_EQ(c.value("refused", uint64_t{0}), seen.per_class[name]["refused"]) << name;
    }
    EXPECT_EQ(api["classes"].size(), 3u) << api.dump();
    std::string printed;
    for (const auto& [name, counts] : seen.per_class)
        printed += name + " allowed " + std::to_string(counts.at("allowed")) + " refused " +
                   std::to_string(counts.count("refused") ? counts.at("refused") : 0) + "; ";
    figure_line("client-counts", printed + "invalid " + std::to_string(seen.invalid));

    // /metrics (published once a second).
    const std::map<std::string, std::string> user_refused{{"domain", "api"}, {"class", "user"}, {"outcome", "refused"}};
    const std::string text = daemon_->scrape_when(
        [&](const std::string& t) {
            return metric(t, "sluice_request_decisions_total", user_refused) ==
                   static_cast<double>(seen.per_class["user"]["refused"]);
        },
        5s);
    for (const auto& [name, counts] : seen.per_class)
        for (const char* outcome : {"allowed", "refused"}) {
            const double expected = counts.count(outcome) ? static_cast<double>(counts.at(outcome)) : 0.0;
            EXPECT_EQ(metric(text, "sluice_request_decisions_total",
                             {{"domain", "api"}, {"class", name}, {"outcome", outcome}}),
                      expected)
                << name << " " << outcome;
        }
    EXPECT_EQ(metric(text, "sluice_request_answers_total", {{"domain", "api"}, {"result", "refused"}}),
              static_cast<double>(seen.refused));
    EXPECT_EQ(metric(text, "sluice_request_errors_total", {{"kind", "invalid"}}), static_cast<double>(seen.invalid));
    EXPECT_EQ(
        metric(text, "sluice_request_decisions_total", {{"domain", "nope"}, {"class", ""}, {"outcome", "allowed"}}), 1);
    EXPECT_GE(metric(text, "sluice_request_decision_seconds_count", {}), static_cast<double>(seen.allowed));

    // A push that raises user's burst: the very next answer has it, and the
    // limiter runs the new version.
    pushed = daemon_->push("api2.toml", api_policy(50));
    ASSERT_TRUE(pushed);
    const uint64_t v2 = pushed->value("version", uint64_t{0});
    EXPECT_EQ(v2, v1 + 1);
    Call after = ask(make_request("api", three_levels("frank")));
    ASSERT_TRUE(after.status.ok());
    EXPECT_NE(after.header("RateLimit-Policy").value_or("").find("\"user\";q=50;w=50"), std::string::npos)
        << after.header("RateLimit-Policy").value_or("");
    EXPECT_EQ(after.response.statuses(2).limit_remaining(), 49u);
    auto status = daemon_->ctl_json({"status"});
    ASSERT_TRUE(status);
    EXPECT_EQ((*status)["requests"].value("policy_version", uint64_t{0}), v2) << status->dump();
}

// The version a push made is the one the very next request is decided by:
// pushes through the control socket alternate user's burst, each followed at
// once by a request.
TEST_F(RequestE2E, EnvoyNextRequestAfterAPushSeesIt) {
    daemon_ = std::make_unique<RequestDaemon>();
    ASSERT_NO_FATAL_FAILURE(daemon_->start());
    ASSERT_TRUE(daemon_->push("api.toml", api_policy(3)));
    Envoy envoy(daemon_->grpc_port());
    auto client = ControlClient::connect(daemon_->socket_path(), 5000);
    ASSERT_TRUE(client.ok()) << client.error().message;
    int stale = 0;
    for (int i = 0; i < 40; ++i) {
        const uint64_t burst = i % 2 ? 3 : 7;
        auto answer = client.value().call("policy.push", json{{"text", api_policy(burst)}, {"path", "p.toml"}});
        ASSERT_TRUE(answer.ok()) << answer.error().message;
        Call call = envoy.ask(make_request("api", {{{{"tenant", "t"}, {"user", std::to_string(i)}}, 0}}));
        ASSERT_TRUE(call.status.ok());
        const std::string policy = call.header("RateLimit-Policy").value_or("");
        if (policy.find("q=" + std::to_string(burst) + ";") == std::string::npos) ++stale;
    }
    EXPECT_EQ(stale, 0) << "answers decided by the version before the push that had already returned";
}

// ---- 2. fleet request classes while Redis is down ------------------------------------

constexpr double kRate = 100;     // fleet rate per class, requests per second
constexpr double kBurst = 20;     // fleet burst (>= rate·P)
constexpr double kFallback = 40;  // class a's fallback_rate
constexpr double kOffered = 300;  // each class's offered load
constexpr double kP = 0.1;        // lease period
constexpr double kH = 0.2;        // P + one round of exchanges, rounded up (as fleet_e2e_test)
constexpr double kSliver = std::max(1.0, kRate* kP / 64);

std::string fleet_policy() {
    const std::string limit = "limit = { rate = 100000, burst = 100000 }\n";
    const std::string fleet = "fleet = { rate = " + figure(kRate) + ", burst = " + figure(kBurst);
    return "[[class]]\nname = \"default\"\n\n"
           "[[request_class]]\nname = \"a\"\ndomain = \"fleet\"\ndescriptor = [\"tenant\"]\n"
           "match = { tenant = \"a\" }\n" +
           limit + fleet + ", on_unavailable = \"open\", fallback_rate = " + figure(kFallback) +
           " }\n\n"
           "[[request_class]]\nname = \"b\"\ndomain = \"fleet\"\ndescriptor = [\"tenant\"]\n"
           "match = { tenant = \"b\" }\n" +
           limit + fleet + ", on_unavailable = \"closed\" }\n";
}

struct PacedRun {
    uint64_t admitted = 0, refused = 0, errors = 0;
    uint64_t admitted_last_second = 0;
    double t_lower = 0, t_upper = 0;  // first to last request; start to end
    std::string first_error;
};

// Asks for tenant `tenant` at `rate` per second for `seconds`.
PacedRun paced(int port, const std::string& tenant, double rate, double seconds) {
    Envoy envoy(port);
    PacedRun run;
    const auto request = make_request("fleet", {{{{"tenant", tenant}}, 0}});
    const auto start = Steady::now();
    const auto period = std::chrono::duration<double>(1.0 / rate);
    Steady::time_point first{}, last{};
    for (uint64_t k = 0;; ++k) {
        const auto at = start + std::chrono::duration_cast<Steady::duration>(period * static_cast<double>(k));
        if (seconds_between(start, at) >= seconds) break;
        std::this_thread::sleep_until(at);
        if (k == 0) first = Steady::now();
        const Call call = envoy.ask(request);
        last = Steady::now();
        if (!call.status.ok()) {
            if (!run.errors++) run.first_error = call.status.error_message();
            continue;
        }
        if (call.response.overall_code() == rls::RateLimitResponse::OK) {
            ++run.admitted;
            if (seconds_between(start, at) >= seconds - 1) ++run.admitted_last_second;
        } else {
            ++run.refused;
        }
    }
    run.t_lower = seconds_between(first, last);
    run.t_upper = seconds_between(start, Steady::now());
    return run;
}

struct Both {
    PacedRun a, b;
};
Both paced_both(int port, double seconds) {
    auto a = std::async(std::launch::async, paced, port, "a", kOffered, seconds);
    auto b = std::async(std::launch::async, paced, port, "b", kOffered, seconds);
    return {a.get(), b.get()};
}

std::string describe(const PacedRun& run, double bound) {
    std::ostringstream out;
    out.precision(2);
    out << std::fixed << "admitted " << run.admitted << " refused " << run.refused << " errors " << run.errors
        << " over " << run.t_upper << " s (" << static_cast<double>(run.admitted) / run.t_upper << "/s), last second "
        << run.admitted_last_second << ", bound " << bound;
    return out.str();
}

TEST_F(RequestE2E, FleetRedisDownOpenKeepsTheFallbackRateClosedRefuses) {
    SLUICE_REQUIRE_REDIS();
    redis_ = std::make_unique<RedisServer>();
    ASSERT_EQ(redis_->error(), "");
    const uint16_t redis_port = redis_->port();
    daemon_ = std::make_unique<RequestDaemon>();
    ASSERT_NO_FATAL_FAILURE(daemon_->start("\n[fleet]\nservers = [\"127.0.0.1:" + std::to_string(redis_port) +
                                           "\"]\nlease_period_ms = 100\nunavailable_after_ms = 300\n"));
    ASSERT_TRUE(daemon_->push("fleet.toml", fleet_policy()));
    const int port = daemon_->grpc_port();
    const std::string a_cls = "request.fleet.a", b_cls = "request.fleet.b";
    auto labels = [](const std::string& cls, std::map<std::string, std::string> more = {}) {
        more["class"] = cls;
        more["interface"] = "requests";
        return more;
    };
    constexpr double kSeconds = 3;

    // Redis up: both lease about the fleet rate.
    const Both up = paced_both(port, kSeconds);
    for (const auto& [name, run] : {std::pair{"a", up.a}, std::pair{"b", up.b}}) {
        const double bound = kBurst + kRate * (run.t_upper + kH) + kSliver;
        figure_line(std::string("redis-up-") + name, describe(run, bound));
        EXPECT_EQ(run.errors, 0u) << run.first_error;
        EXPECT_LE(static_cast<double>(run.admitted), bound) << name;
        EXPECT_GE(static_cast<double>(run.admitted), 0.7 * kRate * run.t_lower) << name;
    }

    // Redis killed: a keeps admitting at about its fallback rate, b only what
    // it held. Measured from the kill.
    const std::string before = daemon_->scrape();
    const auto killed_at = Steady::now();
    redis_->kill();
    const Both down = paced_both(port, kSeconds);
    const double since_kill = seconds_between(killed_at, Steady::now());
    {
        // What a held when Redis went (at most what one exchange grants: a
        // burst) plus fallback_rate per second of local credit (T + P).
        const double bound = kBurst + kFallback * (since_kill + kP);
        figure_line("redis-down-a-open", describe(down.a, bound));
        EXPECT_EQ(down.a.errors, 0u) << down.a.first_error;
        EXPECT_LE(static_cast<double>(down.a.admitted), bound);
        // In fallback from unavailable_after (0.3 s) + a round on.
        EXPECT_GE(static_cast<double>(down.a.admitted), 0.6 * kFallback * (down.a.t_lower - 0.5));
        EXPECT_GE(static_cast<double>(down.a.admitted_last_second), 0.6 * kFallback);
    }
    {
        const double bound = kBurst;  // b admits at most what it held
        figure_line("redis-down-b-closed", describe(down.b, bound));
        EXPECT_EQ(down.b.errors, 0u) << down.b.first_error;
        EXPECT_LE(static_cast<double>(down.b.admitted), bound);
        EXPECT_EQ(down.b.admitted_last_second, 0u) << "b admitted after it had spent what it held";
        EXPECT_GT(down.b.refused, 0u);
    }
    const double fleet_refused_before =
        metric(before, "sluice_request_refusals_total", {{"domain", "fleet"}, {"reason", "fleet"}});
    const std::string text = daemon_->scrape_when(
        [&](const std::string& t) {
            return metric(t, "sluice_fleet_state", labels(b_cls, {{"state", "fallback"}})) == 1 &&
                   metric(t, "sluice_fleet_state", labels(a_cls, {{"state", "fallback"}})) == 1;
        },
        3s);
    const double fleet_refused =
        metric(text, "sluice_request_refusals_total", {{"domain", "fleet"}, {"reason", "fleet"}});
    EXPECT_GE(fleet_refused - (std::isnan(fleet_refused_before) ? 0 : fleet_refused_before),
              static_cast<double>(down.b.refused))
        << "b's refusals are not counted as fleet refusals";
    for (const std::string& cls : {a_cls, b_cls}) {
        EXPECT_EQ(metric(text, "sluice_fleet_state", labels(cls, {{"state", "fallback"}})), 1) << cls;
        EXPECT_EQ(metric(text, "sluice_fleet_state", labels(cls, {{"state", "leasing"}})), 0) << cls;
        EXPECT_EQ(metric(text, "sluice_fleet_fallback_total", labels(cls)), 1) << cls;
    }
    EXPECT_GT(metric(text, "sluice_fleet_granted_units_total", labels(a_cls, {{"from", "fallback"}})), 0);
    EXPECT_EQ(metric(text, "sluice_fleet_granted_units_total", labels(b_cls, {{"from", "fallback"}})), 0);
    figure_line("redis-down-metrics",
                "refusals{reason=fleet} " + figure(fleet_refused) + ", a fallback granted " +
                    figure(metric(text, "sluice_fleet_granted_units_total", labels(a_cls, {{"from", "fallback"}}))) +
                    ", failed exchanges a " +
                    figure(metric(text, "sluice_fleet_exchanges_total", labels(a_cls, {{"result", "failed"}}))) +
                    " b " +
                    figure(metric(text, "sluice_fleet_exchanges_total", labels(b_cls, {{"result", "failed"}}))));

    // Redis back (empty, same port): both lease again.
    RedisServerOptions same_port;
    same_port.port = redis_port;
    redis_ = std::make_unique<RedisServer>(same_port);
    ASSERT_EQ(redis_->error(), "");
    const std::string leasing = daemon_->scrape_when(
        [&](const std::string& t) {
            return metric(t, "sluice_fleet_state", labels(a_cls, {{"state", "leasing"}})) == 1 &&
                   metric(t, "sluice_fleet_state", labels(b_cls, {{"state", "leasing"}})) == 1;
        },
        5s);
    for (const std::string& cls : {a_cls, b_cls})
        ASSERT_EQ(metric(leasing, "sluice_fleet_state", labels(cls, {{"state", "leasing"}})), 1)
            << cls << " did not return to leasing";
    const Both back = paced_both(port, kSeconds);
    for (const auto& [name, run] : {std::pair{"a", back.a}, std::pair{"b", back.b}}) {
        // Restarted empty: one more burst, and what a held from fallback.
        const double bound = 2 * kBurst + 2 * kFallback * kP + kRate * (run.t_upper + kH) + kSliver;
        figure_line(std::string("redis-back-") + name, describe(run, bound));
        EXPECT_EQ(run.errors, 0u) << run.first_error;
        EXPECT_LE(static_cast<double>(run.admitted), bound) << name;
        EXPECT_GE(static_cast<double>(run.admitted), 0.7 * kRate * run.t_lower) << name;
    }
}

}  // namespace
}  // namespace sluice::test
