// SPDX-License-Identifier: Apache-2.0
#include "http_fields.h"

#include "sluice/window.h"

namespace sluice::request {

std::string delay_seconds(uint64_t ns) {
    constexpr uint64_t kSecond = 1'000'000'000;
    return std::to_string(ns / kSecond + (ns % kSecond ? 1 : 0));
}

std::vector<HeaderField> rate_limit_fields(const Answer& answer) {
    std::vector<HeaderField> fields;
    if (answer.overall == Code::over_limit && answer.retry_after_ns)
        fields.push_back({"Retry-After", delay_seconds(*answer.retry_after_ns)});
    std::string policy, state;
    std::vector<const RequestClass*> seen;
    for (const DescriptorStatus& status : answer.statuses) {
        if (!status.limit || !status.limit->cls) continue;
        const LimitAnswer& limit = *status.limit;
        bool listed = false;
        for (const RequestClass* cls : seen) listed = listed || cls == limit.cls;
        if (listed) continue;
        seen.push_back(limit.cls);
        // A class name is a-z 0-9 _ - (the loader checks), so it needs no escaping in an sf-string.
        std::string name = "\"" + limit.cls->name + "\"";
        if (!policy.empty()) {
            policy += ", ";
            state += ", ";
        }
        policy += name + ";q=" + std::to_string(limit.quota) + ";w=" + delay_seconds(limit.window_ns);
        state += name + ";r=" + std::to_string(limit.remaining) + ";t=" + delay_seconds(limit.reset_ns);
    }
    if (!policy.empty()) {
        fields.push_back({"RateLimit-Policy", policy});
        fields.push_back({"RateLimit", state});
    }
    return fields;
}

}  // namespace sluice::request
