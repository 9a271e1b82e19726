// SPDX-License-Identifier: Apache-2.0
// A value or the reason there is none. std::expected arrives with C++23; this
// is the subset Sluice needs, so errors keep their reason up to the caller.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace sluice {

// What kind of failure an Error is; the control protocol carries it as the
// error's "code" (control_protocol.h has the wire names).
enum class ErrorCode {
    bad_request,        // not JSON, not an object, or a missing/ill-typed id, verb or args
    unknown_verb,       // no handler for the verb
    too_large,          // a line over the request size limit; the server then closes the connection
    timeout,            // a request left half-sent past the idle timeout; the server then closes
    permission_denied,  // the peer failed the SO_PEERCRED check; the server then closes
    conflict,           // a compare-and-swap lost (handlers)
    invalid,            // well-formed request, unacceptable input such as a policy error (the default)
    internal,           // the server failed; not the client's fault
    unreachable,        // client side only: the request got no answer (not running, timeout, hang-up)
};

struct Error {
    std::string message;    // what is wrong and where, for a human
    std::string setting{};  // the input key that is wrong ("rate", "burst", ...), when one is
    ErrorCode code = ErrorCode::invalid;
};

template <class T>
class [[nodiscard]] Result {
  public:
    Result(T value) : state_(std::move(value)) {}      // NOLINT: implicit by design
    Result(Error error) : state_(std::move(error)) {}  // NOLINT: implicit by design

    bool ok() const { return std::holds_alternative<T>(state_); }
    explicit operator bool() const { return ok(); }

    const T& value() const& {
        assert(ok());
        return std::get<T>(state_);
    }
    T& value() & {
        assert(ok());
        return std::get<T>(state_);
    }
    const Error& error() const {
        assert(!ok());
        return std::get<Error>(state_);
    }

  private:
    std::variant<T, Error> state_;
};

// For operations that return nothing but may fail.
using Status = Result<std::monostate>;
inline Status ok_status() { return std::monostate{}; }

}  // namespace sluice
