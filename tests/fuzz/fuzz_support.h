// SPDX-License-Identifier: Apache-2.0
// What the harnesses in this directory share: an invariant that stops the run
// (libFuzzer saves the input that broke it), and the check that an error
// names where in the input it is.
#pragma once

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "result.h"

namespace sluice::fuzz {

inline void require(bool holds, std::string_view what, std::string_view detail = {}) {
    if (holds) return;
    std::fprintf(stderr, "invariant broken: %.*s\n%.*s\n", static_cast<int>(what.size()), what.data(),
                 static_cast<int>(detail.size()), detail.data());
    std::abort();
}

// An error about a file names the file and then the place in it: a
// line:column, or the key or class at fault (checks across keys, such as
// two classes sharing a prefix, have no single line).
inline bool names_location(const Error& error, std::string_view path) {
    const std::string_view message = error.message;
    if (!message.starts_with(path) || message.size() <= path.size() + 2 || message[path.size()] != ':') return false;
    const std::string_view rest = message.substr(path.size() + 1);
    size_t digits = 0;
    while (digits < rest.size() && std::isdigit(static_cast<unsigned char>(rest[digits]))) digits++;
    const bool line_column = digits > 0 && digits < rest.size() && rest[digits] == ':';
    return line_column || !error.setting.empty() || rest.find('"') != std::string_view::npos;
}

}  // namespace sluice::fuzz
