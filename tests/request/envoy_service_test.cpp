// SPDX-License-Identifier: Apache-2.0
// EnvoyService on 127.0.0.1:0 with a real RequestLimiter and RequestGate, a
// grpc++ client stub sending what Envoy's ratelimit filter sends. The
// limiter's clock is fake and never moves: no assertion depends on timing.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "envoy_service.h"
#include "http_fields.h"
#include "request_class_builder.h"
#include "request_gate.h"
#include "request_limiter.h"
#include "sluice/abi.h"

namespace sluice::request::envoy_service_test {
namespace {

namespace rls = envoy::service::ratelimit::v3;
using RateLimit = rls::RateLimitResponse::RateLimit;

constexpr uint64_t kSecond = 1'000'000'000ULL;
// An hour boundary plus 15 s: a minute window has 45 s left, an hour 3585 s.
constexpr uint64_t kNow = 2 * 3600 * kSecond + 15 * kSecond;

RequestClass window_class(uint32_t id, std::string name, std::vector<RequestKey> keys, uint8_t algorithm,
                          uint64_t window_ns, uint64_t limit) {
    return window_request_class(id, std::move(name), "edge", std::move(keys), static_cast<Algorithm>(algorithm), limit,
                                window_ns, 5);
}

RequestClass gcra_class(uint32_t id, std::string name, std::vector<RequestKey> keys, uint64_t rate, uint64_t burst) {
    return gcra_request_class(id, std::move(name), "edge", std::move(keys), rate, burst, 5);
}

// The policy the tests run against, in domain "edge":
//   user   [user=*]          fixed window, 3 per minute
//   tenant [tenant=acme]     sliding window, 100 per 90 s (no Envoy unit)
//   api    [route=*]         gcra, 10/s, burst 10
//   tiny   [tenant=tiny]     fixed window, 2 per hour
//   daily  [plan=*]          sliding log, 4 per day
std::vector<RequestClass> policy() {
    std::vector<RequestClass> classes;
    classes.push_back(
        window_class(1, "user", {{"user", std::nullopt}}, SLUICE_ALGORITHM_FIXED_WINDOW, 60 * kSecond, 3));
    classes.push_back(
        window_class(2, "tenant", {{"tenant", "acme"}}, SLUICE_ALGORITHM_SLIDING_WINDOW, 90 * kSecond, 100));
    classes.push_back(gcra_class(3, "api", {{"route", std::nullopt}}, 10, 10));
    classes.push_back(window_class(4, "tiny", {{"tenant", "tiny"}}, SLUICE_ALGORITHM_FIXED_WINDOW, 3600 * kSecond, 2));
    classes.push_back(
        window_class(5, "daily", {{"plan", std::nullopt}}, SLUICE_ALGORITHM_SLIDING_LOG, 86400 * kSecond, 4));
    return classes;
}

rls::RateLimitRequest envoy_request(std::vector<std::vector<std::pair<std::string, std::string>>> descriptors,
                                    uint32_t hits_addend = 0) {
    rls::RateLimitRequest request;
    request.set_domain("edge");
    request.set_hits_addend(hits_addend);
    for (const auto& entries : descriptors) {
        auto* descriptor = request.add_descriptors();
        for (const auto& [key, value] : entries) {
            auto* entry = descriptor->add_entries();
            entry->set_key(key);
            entry->set_value(value);
        }
    }
    return request;
}

std::optional<std::string> header(const rls::RateLimitResponse& response, const std::string& name) {
    for (const auto& h : response.response_headers_to_add())
        if (h.key() == name) return h.value();
    return std::nullopt;
}

uint64_t reset_ns(const rls::RateLimitResponse::DescriptorStatus& status) {
    return static_cast<uint64_t>(status.duration_until_reset().seconds()) * kSecond +
           static_cast<uint64_t>(status.duration_until_reset().nanos());
}

class EnvoyServiceTest : public ::testing::Test {
  protected:
    void SetUp() override { start({}); }

    void start(GateOptions gate_options) {
        service_.reset();
        gate_.reset();
        limiter_.reset();
        LimiterOptions options;
        options.clock = [] { return kNow; };
        limiter_ = std::make_unique<RequestLimiter>(options);
        RequestDomain domain;
        domain.name = "edge";
        limiter_->apply(1, policy(), {domain});
        gate_ = std::make_unique<RequestGate>(*limiter_, gate_options);
        EnvoyServiceOptions service_options;
        service_options.address = "127.0.0.1:0";
        service_ = std::make_unique<EnvoyService>(*gate_, service_options);
        Status started = service_->start();
        ASSERT_TRUE(started.ok()) << started.error().message;
        ASSERT_GT(service_->port(), 0);
        auto channel =
            grpc::CreateChannel("127.0.0.1:" + std::to_string(service_->port()), grpc::InsecureChannelCredentials());
        stub_ = rls::RateLimitService::NewStub(channel);
    }

    grpc::Status call(const rls::RateLimitRequest& request, rls::RateLimitResponse& response) {
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        return stub_->ShouldRateLimit(&context, request, &response);
    }

    rls::RateLimitResponse ok_call(const rls::RateLimitRequest& request) {
        rls::RateLimitResponse response;
        grpc::Status status = call(request, response);
        EXPECT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
        return response;
    }

    std::unique_ptr<RequestLimiter> limiter_;
    std::unique_ptr<RequestGate> gate_;
    std::unique_ptr<EnvoyService> service_;
    std::unique_ptr<rls::RateLimitService::Stub> stub_;
};

TEST_F(EnvoyServiceTest, AnswersEveryDescriptorWithItsLimit) {
    auto response = ok_call(envoy_request({{{"user", "bob"}},
                                           {{"tenant", "acme"}},
                                           {{"route", "/a"}},
                                           {{"plan", "gold"}},
                                           {{"nobody", "limits-this"}},
                                           {{"tenant", "tiny"}}}));
    EXPECT_EQ(response.overall_code(), rls::RateLimitResponse::OK);
    ASSERT_EQ(response.statuses_size(), 6);
    for (const auto& status : response.statuses()) EXPECT_EQ(status.code(), rls::RateLimitResponse::OK);

    const auto& user = response.statuses(0);
    ASSERT_TRUE(user.has_current_limit());
    EXPECT_EQ(user.current_limit().name(), "user");
    EXPECT_EQ(user.current_limit().requests_per_unit(), 3u);
    EXPECT_EQ(user.current_limit().unit(), RateLimit::MINUTE);
    EXPECT_EQ(user.limit_remaining(), 2u);
    EXPECT_GT(reset_ns(user), 0u);
    EXPECT_LE(reset_ns(user), 60 * kSecond);

    const auto& tenant = response.statuses(1);
    EXPECT_EQ(tenant.current_limit().name(), "tenant");
    EXPECT_EQ(tenant.current_limit().requests_per_unit(), 100u);
    EXPECT_EQ(tenant.current_limit().unit(), RateLimit::UNKNOWN) << "90 s is no Envoy unit";
    EXPECT_EQ(tenant.limit_remaining(), 99u);
    EXPECT_LE(reset_ns(tenant), 2 * 90 * kSecond);

    const auto& api = response.statuses(2);
    EXPECT_EQ(api.current_limit().name(), "api");
    EXPECT_EQ(api.current_limit().requests_per_unit(), 10u);
    EXPECT_EQ(api.current_limit().unit(), RateLimit::SECOND);

    const auto& daily = response.statuses(3);
    EXPECT_EQ(daily.current_limit().name(), "daily");
    EXPECT_EQ(daily.current_limit().requests_per_unit(), 4u);
    EXPECT_EQ(daily.current_limit().unit(), RateLimit::DAY);
    EXPECT_EQ(daily.limit_remaining(), 3u);

    const auto& unmatched = response.statuses(4);
    EXPECT_FALSE(unmatched.has_current_limit());
    EXPECT_FALSE(unmatched.has_duration_until_reset());
    EXPECT_EQ(unmatched.limit_remaining(), 0u);

    const auto& tiny = response.statuses(5);
    EXPECT_EQ(tiny.current_limit().unit(), RateLimit::HOUR);
    EXPECT_EQ(tiny.limit_remaining(), 1u);

    EXPECT_FALSE(header(response, "Retry-After"));
    auto policy_field = header(response, "RateLimit-Policy");
    ASSERT_TRUE(policy_field);
    EXPECT_NE(policy_field->find("\"user\";q=3;w=60"), std::string::npos) << *policy_field;
    EXPECT_NE(policy_field->find("\"tiny\";q=2;w=3600"), std::string::npos) << *policy_field;
    auto limit_field = header(response, "RateLimit");
    ASSERT_TRUE(limit_field);
    EXPECT_NE(limit_field->find("\"user\";r=2;"), std::string::npos) << *limit_field;
}

TEST_F(EnvoyServiceTest, HitsAddendWeighsTheRequest) {
    auto first = ok_call(envoy_request({{{"user", "carol"}}}, 2));
    EXPECT_EQ(first.overall_code(), rls::RateLimitResponse::OK);
    EXPECT_EQ(first.statuses(0).limit_remaining(), 1u);
    auto second = ok_call(envoy_request({{{"user", "carol"}}}, 2));
    EXPECT_EQ(second.overall_code(), rls::RateLimitResponse::OVER_LIMIT);
    EXPECT_EQ(second.statuses(0).code(), rls::RateLimitResponse::OVER_LIMIT);
    EXPECT_EQ(second.statuses(0).limit_remaining(), 1u) << "a refused request spends nothing";
    auto third = ok_call(envoy_request({{{"user", "carol"}}}));
    EXPECT_EQ(third.overall_code(), rls::RateLimitResponse::OK) << "hits_addend 0 means 1";
    EXPECT_EQ(third.statuses(0).limit_remaining(), 0u);
}

TEST_F(EnvoyServiceTest, DescriptorHitsAddendWeighsItsDescriptorOnly) {
    auto request = envoy_request({{{"user", "frank"}}, {{"tenant", "acme"}}});
    request.mutable_descriptors(0)->mutable_hits_addend()->set_value(3);
    auto response = ok_call(request);
    EXPECT_EQ(response.overall_code(), rls::RateLimitResponse::OK);
    EXPECT_EQ(response.statuses(0).limit_remaining(), 0u);
    EXPECT_EQ(response.statuses(1).limit_remaining(), 99u);
}

TEST_F(EnvoyServiceTest, RefusalAtOneDescriptorChargesNoOther) {
    // tiny holds 2 an hour: spend them.
    for (int i = 0; i < 2; ++i)
        EXPECT_EQ(ok_call(envoy_request({{{"tenant", "tiny"}}})).overall_code(), rls::RateLimitResponse::OK);

    // Five requests that tiny refuses, each also naming dave, who may make 3
    // a minute, and the acme tenant.
    for (int i = 0; i < 5; ++i) {
        auto refused = ok_call(envoy_request({{{"user", "dave"}}, {{"tenant", "tiny"}}, {{"tenant", "acme"}}}));
        EXPECT_EQ(refused.overall_code(), rls::RateLimitResponse::OVER_LIMIT);
        ASSERT_EQ(refused.statuses_size(), 3);
        EXPECT_EQ(refused.statuses(1).code(), rls::RateLimitResponse::OVER_LIMIT);
        EXPECT_EQ(refused.statuses(1).limit_remaining(), 0u);
        EXPECT_GT(reset_ns(refused.statuses(1)), 0u);
        auto retry = header(refused, "Retry-After");
        ASSERT_TRUE(retry) << "a fixed window knows its retry point";
        EXPECT_GT(std::stoull(*retry), 0u);
        EXPECT_LE(std::stoull(*retry), 3600u);
        EXPECT_TRUE(header(refused, "RateLimit"));
    }

    // envoyproxy/ratelimit issue 1060: those refusals must not have been
    // counted against dave or acme.
    for (uint32_t left = 2;; --left) {
        auto allowed = ok_call(envoy_request({{{"user", "dave"}}, {{"tenant", "acme"}}}));
        EXPECT_EQ(allowed.overall_code(), rls::RateLimitResponse::OK);
        EXPECT_EQ(allowed.statuses(0).limit_remaining(), left);
        EXPECT_EQ(allowed.statuses(1).limit_remaining(), 99u - (2u - left));
        if (left == 0) break;
    }
    EXPECT_EQ(ok_call(envoy_request({{{"user", "dave"}}})).overall_code(), rls::RateLimitResponse::OVER_LIMIT);
}

TEST_F(EnvoyServiceTest, WeightAboveMaxCostIsInvalidAndChargesNothing) {
    rls::RateLimitResponse response;
    grpc::Status status = call(envoy_request({{{"user", "erin"}}, {{"tenant", "acme"}}}, 6), response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("max_cost"), std::string::npos) << status.error_message();

    auto request = envoy_request({{{"user", "erin"}}, {{"tenant", "acme"}}});
    request.mutable_descriptors(0)->mutable_hits_addend()->set_value(9);
    status = call(request, response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << "a descriptor's own weight too";

    auto after = ok_call(envoy_request({{{"user", "erin"}}, {{"tenant", "acme"}}}));
    EXPECT_EQ(after.statuses(0).limit_remaining(), 2u);
    EXPECT_EQ(after.statuses(1).limit_remaining(), 99u);
}

TEST_F(EnvoyServiceTest, EmptyDomainOrNoDescriptorsIsInvalid) {
    rls::RateLimitResponse response;
    auto no_domain = envoy_request({{{"user", "x"}}});
    no_domain.clear_domain();
    EXPECT_EQ(call(no_domain, response).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(call(envoy_request({}), response).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(EnvoyServiceTest, GateOverloadIsResourceExhausted) {
    GateOptions options;
    options.max_in_flight = 0;  // every decision is one too many
    start(options);
    rls::RateLimitResponse response;
    grpc::Status status = call(envoy_request({{{"user", "gail"}}}), response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
    EXPECT_EQ(gate_->stats().overloaded, 1u);
}

TEST_F(EnvoyServiceTest, ARequestOverMaxMessageBytesIsRefusedUnread) {
    rls::RateLimitResponse response;
    grpc::Status status = call(envoy_request({{{"user", std::string(100 * 1024, 'u')}}}), response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
    EXPECT_EQ(gate_->stats().latency_count, 0u) << "never decided";
    EXPECT_TRUE(call(envoy_request({{{"user", std::string(32 * 1024, 'u')}}}), response).ok());
}

// What the process writes to stderr while it lives.
class CapturedStderr {
  public:
    CapturedStderr() : file_(std::tmpfile()) {
        std::fflush(stderr);
        saved_ = dup(STDERR_FILENO);
        if (file_ != nullptr && saved_ >= 0) dup2(fileno(file_), STDERR_FILENO);
    }
    ~CapturedStderr() {
        restore();
        if (file_ != nullptr) std::fclose(file_);
    }
    CapturedStderr(const CapturedStderr&) = delete;
    CapturedStderr& operator=(const CapturedStderr&) = delete;

    bool ok() const { return file_ != nullptr && saved_ >= 0; }
    // Restores stderr and returns what was written.
    std::string text() {
        restore();
        std::string out;
        if (file_ == nullptr) return out;
        std::rewind(file_);
        char buffer[4096];
        for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), file_)) > 0;) out.append(buffer, n);
        return out;
    }

  private:
    void restore() {
        if (saved_ < 0) return;
        std::fflush(stderr);
        dup2(saved_, STDERR_FILENO);
        close(saved_);
        saved_ = -1;
    }
    std::FILE* file_;
    int saved_ = -1;
};

TEST_F(EnvoyServiceTest, ProtobufComplaintsGoThroughTheLoggerAtMostOnceASecond) {
    constexpr int kCalls = 50;
    CapturedStderr captured;
    ASSERT_TRUE(captured.ok()) << std::strerror(errno);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; i++) {
        rls::RateLimitResponse response;
        EXPECT_FALSE(call(envoy_request({{{"user", "\xff\xfe not UTF-8"}}}), response).ok())
            << "a string that is not UTF-8 does not parse";
    }
    const auto seconds =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start).count();
    const std::string text = captured.text();
    EXPECT_EQ(text.find("[libprotobuf"), std::string::npos) << "raw protobuf lines:\n" << text;
    size_t lines = 0;
    for (size_t at = text.find("msg=\"protobuf: "); at != std::string::npos; at = text.find("msg=\"protobuf: ", at + 1))
        lines++;
    EXPECT_GE(lines, 1u) << text;
    // One a second, and one more for each second begun.
    EXPECT_LE(lines, static_cast<size_t>(seconds) + 2) << kCalls << " calls in " << seconds << " s:\n" << text;
}

TEST_F(EnvoyServiceTest, ASecondServiceCannotTakeThePort) {
    EnvoyServiceOptions options;
    options.address = "127.0.0.1:" + std::to_string(service_->port());
    EnvoyService second(*gate_, options);
    Status started = second.start();
    EXPECT_FALSE(started.ok()) << "SO_REUSEPORT would share the port silently";
}

TEST_F(EnvoyServiceTest, StopIsIdempotent) {
    service_->stop();
    service_->stop();
    rls::RateLimitResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    grpc::Status status = stub_->ShouldRateLimit(&context, envoy_request({{{"user", "x"}}}), &response);
    EXPECT_FALSE(status.ok());
}

// The Answer -> response mapping alone, on Answers built by hand.
TEST(EnvoyResponse, UnitsRemainingAndReset) {
    RequestClass minute = window_class(1, "m", {}, SLUICE_ALGORITHM_FIXED_WINDOW, 60 * kSecond, 7);
    RequestClass odd = window_class(2, "odd", {}, SLUICE_ALGORITHM_SLIDING_LOG, 2 * kSecond, 9);
    RequestClass gcra = gcra_class(3, "g", {}, 250, 50);
    Answer answer;
    answer.overall = Code::over_limit;
    answer.refusal = Refusal::limit;
    answer.retry_after_ns = 1'500'000'000;
    auto status = [](const RequestClass& cls, Code code, uint64_t remaining, uint64_t reset) {
        LimitAnswer limit;
        limit.cls = &cls;
        limit.quota = cls.limit.window.limit;
        limit.window_ns = cls.limit.window.window_ns;
        limit.remaining = remaining;
        limit.reset_ns = reset;
        DescriptorStatus s;
        s.code = code;
        s.limit = limit;
        return s;
    };
    answer.statuses.push_back(status(minute, Code::ok, 5, 1'500'000'000));
    answer.statuses.push_back(status(odd, Code::over_limit, 0, 2 * kSecond));
    answer.statuses.push_back(status(gcra, Code::ok, uint64_t{1} << 40, 7));
    answer.statuses.push_back(DescriptorStatus{});
    answer.refused_by = &odd;

    rls::RateLimitResponse response;
    fill_response(answer, response);
    EXPECT_EQ(response.overall_code(), rls::RateLimitResponse::OVER_LIMIT);
    ASSERT_EQ(response.statuses_size(), 4);
    EXPECT_EQ(response.statuses(0).current_limit().unit(), RateLimit::MINUTE);
    EXPECT_EQ(response.statuses(0).current_limit().requests_per_unit(), 7u);
    EXPECT_EQ(response.statuses(0).duration_until_reset().seconds(), 1);
    EXPECT_EQ(response.statuses(0).duration_until_reset().nanos(), 500'000'000);
    EXPECT_EQ(response.statuses(1).code(), rls::RateLimitResponse::OVER_LIMIT);
    EXPECT_EQ(response.statuses(1).current_limit().unit(), RateLimit::UNKNOWN);
    EXPECT_EQ(response.statuses(1).current_limit().requests_per_unit(), 9u);
    EXPECT_EQ(response.statuses(2).current_limit().unit(), RateLimit::SECOND);
    EXPECT_EQ(response.statuses(2).current_limit().requests_per_unit(), 250u);
    EXPECT_EQ(response.statuses(2).limit_remaining(), UINT32_MAX) << "saturates";
    EXPECT_EQ(response.statuses(2).duration_until_reset().nanos(), 7);
    EXPECT_FALSE(response.statuses(3).has_current_limit());
    EXPECT_EQ(response.statuses(3).code(), rls::RateLimitResponse::OK);

    // The fields are rate_limit_fields(answer), in its order.
    auto fields = rate_limit_fields(answer);
    ASSERT_EQ(response.response_headers_to_add_size(), static_cast<int>(fields.size()));
    for (size_t i = 0; i < fields.size(); ++i) {
        EXPECT_EQ(response.response_headers_to_add(static_cast<int>(i)).key(), fields[i].name);
        EXPECT_EQ(response.response_headers_to_add(static_cast<int>(i)).value(), fields[i].value);
    }
    EXPECT_EQ(response.response_headers_to_add(0).key(), "Retry-After");
    EXPECT_EQ(response.response_headers_to_add(0).value(), "2");
}

TEST(EnvoyQuery, FromRequest) {
    auto request = envoy_request({{{"tenant", "acme"}, {"user", "bob"}}, {{"route", "/a"}}}, 0);
    auto query = query_from(request);
    ASSERT_TRUE(query.ok());
    EXPECT_EQ(query.value().domain, "edge");
    EXPECT_EQ(query.value().hits, 1u);
    ASSERT_EQ(query.value().descriptors.size(), 2u);
    EXPECT_EQ(query.value().descriptors[0], (Descriptor{{"tenant", "acme"}, {"user", "bob"}}));
    EXPECT_TRUE(query.value().descriptor_hits.empty());

    request.set_hits_addend(4);
    request.mutable_descriptors(1)->mutable_hits_addend()->set_value(2);
    request.mutable_descriptors(1)->mutable_limit()->set_requests_per_unit(1'000'000);  // ignored
    query = query_from(request);
    ASSERT_TRUE(query.ok());
    EXPECT_EQ(query.value().hits, 4u);
    EXPECT_EQ(query.value().descriptor_hits, (std::vector<uint64_t>{0, 2}));
}

}  // namespace
}  // namespace sluice::request::envoy_service_test
