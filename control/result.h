// SPDX-License-Identifier: Apache-2.0
// A value or the reason there is none. std::expected arrives with C++23; this
// is the subset Sluice needs, so errors keep their reason up to the caller.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace sluice {

struct Error {
    std::string message;    // what is wrong and where, for a human
    std::string setting{};  // the input key that is wrong ("rate", "burst", ...), when one is
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
