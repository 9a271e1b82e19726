// SPDX-License-Identifier: Apache-2.0
#include "envoy_service.h"

#include <google/protobuf/stubs/logging.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <utility>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "clock.h"
#include "http_fields.h"
#include "logger.h"
#include "sluice/abi.h"

namespace sluice::request {

namespace rls = envoy::service::ratelimit::v3;
using RateLimit = rls::RateLimitResponse::RateLimit;

namespace {

constexpr uint64_t kSecondNs = 1'000'000'000ULL;

uint32_t saturate_u32(uint64_t value) {
    return static_cast<uint32_t>(std::min<uint64_t>(value, std::numeric_limits<uint32_t>::max()));
}

rls::RateLimitResponse::Code code_of(Code code) {
    return code == Code::over_limit ? rls::RateLimitResponse::OVER_LIMIT : rls::RateLimitResponse::OK;
}

// The unit a window of exactly that length is, or UNKNOWN.
RateLimit::Unit unit_of_window(uint64_t window_ns) {
    switch (window_ns) {
        case kSecondNs:
            return RateLimit::SECOND;
        case 60 * kSecondNs:
            return RateLimit::MINUTE;
        case 3600 * kSecondNs:
            return RateLimit::HOUR;
        case 86400 * kSecondNs:
            return RateLimit::DAY;
        default:
            return RateLimit::UNKNOWN;
    }
}

void fill_limit(const RequestClass& cls, RateLimit& out) {
    out.set_name(cls.name);
    if (cls.limit.algorithm == SLUICE_ALGORITHM_GCRA) {
        out.set_requests_per_unit(saturate_u32(cls.limit.rate_per_s));
        out.set_unit(RateLimit::SECOND);
    } else {
        out.set_requests_per_unit(saturate_u32(cls.limit.window.limit));
        out.set_unit(unit_of_window(cls.limit.window.window_ns));
    }
}

// protobuf's messages, one line a second at most: a client that sends a
// string that is not UTF-8 in every request must not flood the log.
std::atomic<uint64_t> g_protobuf_logged_ns{0};
std::atomic<uint64_t> g_protobuf_held_back{0};

void log_protobuf(google::protobuf::LogLevel level, const char* filename, int line, const std::string& message) {
    const uint64_t now = monotonic_ns();
    uint64_t last = g_protobuf_logged_ns.load(std::memory_order_relaxed);
    if ((last != 0 && now - last < kSecondNs) ||
        !g_protobuf_logged_ns.compare_exchange_strong(last, now, std::memory_order_relaxed)) {
        g_protobuf_held_back.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    const LogLevel ours = level >= google::protobuf::LOGLEVEL_ERROR     ? LogLevel::error
                          : level == google::protobuf::LOGLEVEL_WARNING ? LogLevel::warn
                                                                         : LogLevel::info;
    log(ours, "protobuf: " + message,
        {{"source", std::string(filename) + ":" + std::to_string(line)},
         {"held_back", std::to_string(g_protobuf_held_back.exchange(0, std::memory_order_relaxed))}});
}

grpc::Status status_from(const Error& error) {
    if (error.code == ErrorCode::invalid) return {grpc::StatusCode::INVALID_ARGUMENT, error.message};
    if (is_overload(error)) return {grpc::StatusCode::RESOURCE_EXHAUSTED, error.message};
    return {grpc::StatusCode::INTERNAL, error.message};
}

class RateLimitServiceImpl final : public rls::RateLimitService::Service {
  public:
    explicit RateLimitServiceImpl(RequestGate& gate) : gate_(gate) {}

    grpc::Status ShouldRateLimit(grpc::ServerContext* /*context*/, const rls::RateLimitRequest* request,
                                 rls::RateLimitResponse* response) override {
        Result<Query> query = query_from(*request);
        if (!query) return status_from(query.error());
        Result<Answer> answer = gate_.decide(Door::envoy, query.value());
        if (!answer) return status_from(answer.error());
        fill_response(answer.value(), *response);
        return grpc::Status::OK;
    }

  private:
    RequestGate& gate_;
};

}  // namespace

Result<Query> query_from(const rls::RateLimitRequest& request) {
    if (request.domain().empty()) return Error{.message = "domain is empty"};
    if (request.descriptors().empty()) return Error{.message = "no descriptors"};
    Query query;
    query.domain = request.domain();
    query.hits = request.hits_addend() == 0 ? 1 : request.hits_addend();
    bool any_descriptor_hits = false;
    for (const auto& descriptor : request.descriptors()) {
        Descriptor& entries = query.descriptors.emplace_back();
        entries.reserve(static_cast<size_t>(descriptor.entries_size()));
        for (const auto& entry : descriptor.entries()) entries.push_back({entry.key(), entry.value()});
        any_descriptor_hits = any_descriptor_hits || descriptor.has_hits_addend();
    }
    if (any_descriptor_hits) {
        query.descriptor_hits.reserve(query.descriptors.size());
        for (const auto& descriptor : request.descriptors())
            query.descriptor_hits.push_back(descriptor.has_hits_addend() ? descriptor.hits_addend().value() : 0);
    }
    return query;
}

void fill_response(const Answer& answer, rls::RateLimitResponse& response) {
    response.set_overall_code(code_of(answer.overall));
    for (const DescriptorStatus& status : answer.statuses) {
        auto* out = response.add_statuses();
        out->set_code(code_of(status.code));
        if (!status.limit) continue;
        const LimitAnswer& limit = *status.limit;
        if (limit.cls != nullptr) fill_limit(*limit.cls, *out->mutable_current_limit());
        out->set_limit_remaining(saturate_u32(limit.remaining));
        auto* reset = out->mutable_duration_until_reset();
        reset->set_seconds(static_cast<int64_t>(limit.reset_ns / kSecondNs));
        reset->set_nanos(static_cast<int32_t>(limit.reset_ns % kSecondNs));
    }
    for (const HeaderField& field : rate_limit_fields(answer)) {
        auto* header = response.add_response_headers_to_add();
        header->set_key(field.name);
        header->set_value(field.value);
    }
}

struct EnvoyService::Impl {
    explicit Impl(RequestGate& gate, EnvoyServiceOptions opts) : service(gate), options(std::move(opts)) {}
    RateLimitServiceImpl service;
    EnvoyServiceOptions options;
    std::unique_ptr<grpc::Server> server;
    int port = 0;
};

EnvoyService::EnvoyService(RequestGate& gate, EnvoyServiceOptions options)
    : impl_(std::make_unique<Impl>(gate, std::move(options))) {}

EnvoyService::~EnvoyService() { stop(); }

Status EnvoyService::start() {
    if (impl_->server) return Error{.message = "envoy service already started", .code = ErrorCode::internal};
    grpc::ServerBuilder builder;
    // gRPC sets SO_REUSEPORT by default: a second sluiced would then share
    // the port silently instead of failing to start.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.SetMaxReceiveMessageSize(impl_->options.max_message_bytes);
    google::protobuf::SetLogHandler(&log_protobuf);
    int selected = 0;
    builder.AddListeningPort(impl_->options.address, grpc::InsecureServerCredentials(), &selected);
    builder.RegisterService(&impl_->service);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    if (!server || selected == 0) {
        if (server) server->Shutdown();
        return Error{.message = "envoy service: cannot listen on " + impl_->options.address,
                     .setting = "address",
                     .code = ErrorCode::internal};
    }
    impl_->server = std::move(server);
    impl_->port = selected;
    return ok_status();
}

int EnvoyService::port() const { return impl_->port; }

void EnvoyService::stop() {
    if (!impl_ || !impl_->server) return;
    // Calls in progress get a moment to finish, then are cancelled.
    impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    impl_->server->Wait();
    impl_->server.reset();
}

}  // namespace sluice::request
