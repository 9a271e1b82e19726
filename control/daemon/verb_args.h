// SPDX-License-Identifier: Apache-2.0
// The arguments of a control request as the daemon's handlers read them:
// each missing or ill-typed one is a bad_request error naming it.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "control_protocol.h"
#include "result.h"

namespace sluice {

// args[key] as a string; `fallback` when it is absent or null, else an error.
inline Result<std::string> string_arg(const nlohmann::json& args, const char* key,
                                      std::optional<std::string> fallback = {}) {
    const auto it = args.find(key);
    if (it == args.end() || it->is_null()) {
        if (fallback) return *fallback;
        return control_error(ErrorCode::bad_request, std::string("missing argument \"") + key + "\"", key);
    }
    if (!it->is_string())
        return control_error(ErrorCode::bad_request, std::string("argument \"") + key + "\" must be a string", key);
    return it->get<std::string>();
}

// args[key] as a non-negative integer; nullopt when absent or null.
inline Result<std::optional<uint64_t>> uint_arg(const nlohmann::json& args, const char* key) {
    const auto it = args.find(key);
    if (it == args.end() || it->is_null()) return std::optional<uint64_t>{};
    if (!it->is_number_unsigned())
        return control_error(ErrorCode::bad_request,
                             std::string("argument \"") + key + "\" must be a non-negative integer", key);
    return std::optional<uint64_t>(it->get<uint64_t>());
}

// args[key] as true or false; false when absent or null.
inline Result<bool> bool_arg(const nlohmann::json& args, const char* key) {
    const auto it = args.find(key);
    if (it == args.end() || it->is_null()) return false;
    if (!it->is_boolean())
        return control_error(ErrorCode::bad_request, std::string("argument \"") + key + "\" must be true or false",
                             key);
    return it->get<bool>();
}

// A failure of the daemon itself, not of the request.
inline Error as_internal(Error error) {
    error.code = ErrorCode::internal;
    return error;
}

}  // namespace sluice
