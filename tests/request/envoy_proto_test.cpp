// SPDX-License-Identifier: Apache-2.0
// The protos in control/request/proto/ against Envoy's wire format: the tags
// of the documented field numbers, the full names, and the method path a real
// Envoy calls. No limiter involved.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"

namespace {

namespace rls = envoy::service::ratelimit::v3;
namespace rl = envoy::extensions::common::ratelimit::v3;

// The first byte of a message with one field set: its tag
// (field_number << 3 | wire_type).
template <class Message>
uint8_t first_tag(const Message& message) {
    std::string bytes;
    EXPECT_TRUE(message.SerializeToString(&bytes));
    EXPECT_FALSE(bytes.empty());
    return bytes.empty() ? 0 : static_cast<uint8_t>(bytes[0]);
}

TEST(EnvoyProto, RateLimitRequestTags) {
    rls::RateLimitRequest domain;
    domain.set_domain("edge");
    EXPECT_EQ(first_tag(domain), 0x0a);  // 1, length-delimited
    rls::RateLimitRequest descriptors;
    descriptors.add_descriptors();
    EXPECT_EQ(first_tag(descriptors), 0x12);  // 2, length-delimited
    rls::RateLimitRequest hits;
    hits.set_hits_addend(3);
    EXPECT_EQ(first_tag(hits), 0x18);  // 3, varint
}

TEST(EnvoyProto, RateLimitDescriptorTags) {
    rl::RateLimitDescriptor entries;
    auto* entry = entries.add_entries();
    entry->set_key("user");
    entry->set_value("bob");
    EXPECT_EQ(first_tag(entries), 0x0a);
    EXPECT_EQ(first_tag(*entry), 0x0a);  // Entry.key 1
    rl::RateLimitDescriptor::Entry value;
    value.set_value("bob");
    EXPECT_EQ(first_tag(value), 0x12);  // Entry.value 2
    rl::RateLimitDescriptor limit;
    limit.mutable_limit()->set_requests_per_unit(5);
    EXPECT_EQ(first_tag(limit), 0x12);
    EXPECT_EQ(first_tag(limit.limit()), 0x08);
    rl::RateLimitDescriptor::RateLimitOverride unit;
    unit.set_unit(2);
    EXPECT_EQ(first_tag(unit), 0x10);
    rl::RateLimitDescriptor hits;
    hits.mutable_hits_addend()->set_value(7);
    EXPECT_EQ(first_tag(hits), 0x1a);  // 3, a UInt64Value message
    EXPECT_TRUE(hits.has_hits_addend());
    rl::RateLimitDescriptor zero;
    zero.mutable_hits_addend()->set_value(0);
    EXPECT_TRUE(zero.has_hits_addend()) << "a wrapper tells 0 from unset";
}

TEST(EnvoyProto, RateLimitResponseTags) {
    rls::RateLimitResponse code;
    code.set_overall_code(rls::RateLimitResponse::OVER_LIMIT);
    EXPECT_EQ(first_tag(code), 0x08);
    rls::RateLimitResponse statuses;
    statuses.add_statuses();
    EXPECT_EQ(first_tag(statuses), 0x12);
    rls::RateLimitResponse response_headers;
    response_headers.add_response_headers_to_add()->set_key("Retry-After");
    EXPECT_EQ(first_tag(response_headers), 0x1a);
    rls::RateLimitResponse request_headers;
    request_headers.add_request_headers_to_add()->set_key("x");
    EXPECT_EQ(first_tag(request_headers), 0x22);
    rls::RateLimitResponse body;
    body.set_raw_body("slow down");
    EXPECT_EQ(first_tag(body), 0x2a);
    rls::RateLimitResponse metadata;
    (*metadata.mutable_dynamic_metadata()->mutable_fields())["k"].set_string_value("v");
    EXPECT_EQ(first_tag(metadata), 0x32);
}

TEST(EnvoyProto, DescriptorStatusAndRateLimitTags) {
    rls::RateLimitResponse::DescriptorStatus code;
    code.set_code(rls::RateLimitResponse::OK);
    EXPECT_EQ(first_tag(code), 0x08);
    rls::RateLimitResponse::DescriptorStatus current;
    current.mutable_current_limit()->set_name("user");
    EXPECT_EQ(first_tag(current), 0x12);
    rls::RateLimitResponse::DescriptorStatus remaining;
    remaining.set_limit_remaining(9);
    EXPECT_EQ(first_tag(remaining), 0x18);
    rls::RateLimitResponse::DescriptorStatus reset;
    reset.mutable_duration_until_reset()->set_seconds(1);
    EXPECT_EQ(first_tag(reset), 0x22);

    rls::RateLimitResponse::RateLimit per_unit;
    per_unit.set_requests_per_unit(10);
    EXPECT_EQ(first_tag(per_unit), 0x08);
    rls::RateLimitResponse::RateLimit unit;
    unit.set_unit(rls::RateLimitResponse::RateLimit::MINUTE);
    EXPECT_EQ(first_tag(unit), 0x10);
    rls::RateLimitResponse::RateLimit name;
    name.set_name("user");
    EXPECT_EQ(first_tag(name), 0x1a);

    rls::RateLimitResponse::DescriptorStatus full;
    full.mutable_current_limit()->set_name("user");
    full.set_code(rls::RateLimitResponse::OK);
    std::string bytes;
    ASSERT_TRUE(full.SerializeToString(&bytes));
    EXPECT_EQ(static_cast<uint8_t>(bytes[0]), 0x08) << "fields serialize in number order";
}

TEST(EnvoyProto, HeaderValueTags) {
    envoy::config::core::v3::HeaderValue key;
    key.set_key("RateLimit");
    EXPECT_EQ(first_tag(key), 0x0a);
    envoy::config::core::v3::HeaderValue value;
    value.set_value("x");
    EXPECT_EQ(first_tag(value), 0x12);
    envoy::config::core::v3::HeaderValue raw;
    raw.set_raw_value("x");
    EXPECT_EQ(first_tag(raw), 0x1a);
}

TEST(EnvoyProto, EnumValues) {
    using RL = rls::RateLimitResponse::RateLimit;
    EXPECT_EQ(rls::RateLimitResponse::UNKNOWN, 0);
    EXPECT_EQ(rls::RateLimitResponse::OK, 1);
    EXPECT_EQ(rls::RateLimitResponse::OVER_LIMIT, 2);
    EXPECT_EQ(RL::UNKNOWN, 0);
    EXPECT_EQ(RL::SECOND, 1);
    EXPECT_EQ(RL::MINUTE, 2);
    EXPECT_EQ(RL::HOUR, 3);
    EXPECT_EQ(RL::DAY, 4);
    EXPECT_EQ(RL::MONTH, 5);
    EXPECT_EQ(RL::YEAR, 6);
    EXPECT_EQ(RL::WEEK, 7);
}

TEST(EnvoyProto, FullNames) {
    EXPECT_EQ(rls::RateLimitRequest::descriptor()->full_name(), "envoy.service.ratelimit.v3.RateLimitRequest");
    EXPECT_EQ(rls::RateLimitResponse::descriptor()->full_name(), "envoy.service.ratelimit.v3.RateLimitResponse");
    EXPECT_EQ(rl::RateLimitDescriptor::descriptor()->full_name(),
              "envoy.extensions.common.ratelimit.v3.RateLimitDescriptor");
    EXPECT_EQ(envoy::config::core::v3::HeaderValue::descriptor()->full_name(), "envoy.config.core.v3.HeaderValue");
    const auto* service = rls::RateLimitRequest::descriptor()->file()->FindServiceByName("RateLimitService");
    ASSERT_NE(service, nullptr);
    EXPECT_EQ(service->full_name(), "envoy.service.ratelimit.v3.RateLimitService");
    ASSERT_NE(service->FindMethodByName("ShouldRateLimit"), nullptr);
    // The reserved quota numbers stay unused.
    EXPECT_EQ(rls::RateLimitResponse::descriptor()->FindFieldByNumber(7), nullptr);
}

// A server with the generated service answers a call made by path alone,
// the way Envoy names the method on the wire.
class EchoDomain final : public rls::RateLimitService::Service {
  public:
    grpc::Status ShouldRateLimit(grpc::ServerContext*, const rls::RateLimitRequest* request,
                                 rls::RateLimitResponse* response) override {
        response->set_overall_code(rls::RateLimitResponse::OVER_LIMIT);
        response->set_raw_body(request->domain());
        return grpc::Status::OK;
    }
};

grpc::Status call_by_path(const std::string& target, const std::string& path, const rls::RateLimitRequest& request,
                          rls::RateLimitResponse& response) {
    auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
    grpc::GenericStub stub(channel);
    std::string bytes;
    request.SerializeToString(&bytes);
    grpc::Slice slice(bytes);
    grpc::ByteBuffer send(&slice, 1);
    grpc::ByteBuffer received;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::CompletionQueue queue;
    auto call = stub.PrepareUnaryCall(&context, path, send, &queue);
    call->StartCall();
    grpc::Status status;
    call->Finish(&received, &status, reinterpret_cast<void*>(1));
    void* tag = nullptr;
    bool ok = false;
    EXPECT_TRUE(queue.Next(&tag, &ok));
    EXPECT_TRUE(ok);
    if (status.ok()) {
        std::vector<grpc::Slice> slices;
        EXPECT_TRUE(received.Dump(&slices).ok());
        std::string out;
        for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
        EXPECT_TRUE(response.ParseFromString(out));
    }
    queue.Shutdown();
    while (queue.Next(&tag, &ok)) {
    }
    return status;
}

TEST(EnvoyProto, MethodPathOnTheWire) {
    EchoDomain service;
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    auto server = builder.BuildAndStart();
    ASSERT_NE(server, nullptr);
    ASSERT_NE(port, 0);
    const std::string target = "127.0.0.1:" + std::to_string(port);

    rls::RateLimitRequest request;
    request.set_domain("edge");
    rls::RateLimitResponse response;
    grpc::Status status =
        call_by_path(target, "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", request, response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.overall_code(), rls::RateLimitResponse::OVER_LIMIT);
    EXPECT_EQ(response.raw_body(), "edge");

    rls::RateLimitResponse unused;
    status = call_by_path(target, "/envoy.service.ratelimit.v2.RateLimitService/ShouldRateLimit", request, unused);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
    server->Shutdown();
}

}  // namespace
