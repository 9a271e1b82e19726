// SPDX-License-Identifier: Apache-2.0
// sluicectl's side of the control socket (see control_protocol.h): one
// connection, one request at a time, each answered or timed out.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "control_protocol.h"
#include "result.h"

namespace sluice {

class ControlClient {
  public:
    // Errors say what to do: start sluiced when there is no socket or no one
    // listens, run as root or a group member when access is denied.
    // `failed_errno`, when given, receives connect()'s errno (0 when it failed
    // before that), so a caller can tell "not running" from "access denied".
    static Result<ControlClient> connect(const std::string& path, int timeout_ms, int* failed_errno = nullptr);

    // Sends {"id", "verb", "args"} and waits (up to the connect timeout) for
    // the response with the same id. A server error comes back as an Error
    // carrying the server's code (ErrorCode::unreachable: no answer came).
    // `attachments` (name -> bytes) travel raw after the request line
    // (control_protocol.h): the way to send megabytes.
    Result<nlohmann::json> call(const std::string& verb, const nlohmann::json& args = nlohmann::json::object(),
                                const std::map<std::string, std::string>& attachments = {});

    const std::string& socket_path() const { return path_; }

  private:
    ControlClient(UniqueFd fd, std::string path, int timeout_ms)
        : fd_(std::move(fd)), path_(std::move(path)), timeout_ms_(timeout_ms) {}

    Status send_all(const std::string& bytes, int* failed_errno);
    Result<std::string> read_line();
    // Sets *answered when the server sent a response for this call (ok or not).
    Result<nlohmann::json> read_response(std::int64_t id, bool* answered);

    UniqueFd fd_;
    std::string path_;
    int timeout_ms_;
    std::int64_t next_id_ = 1;
    std::string pending_;  // bytes read past the last complete line
};

}  // namespace sluice
