// SPDX-License-Identifier: Apache-2.0
// The source table's hash key a test's dataplane uses: drawn at random as in
// production unless SLUICE_TEST_HASH_KEY names one, and printed when a test
// fails so that run's table layout can be had again.
#pragma once

#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>

#include "sluice/abi.h"

namespace sluice::test {

inline constexpr const char* kHashKeyEnv = "SLUICE_TEST_HASH_KEY";

// The words in hex, ':' between them: what SLUICE_TEST_HASH_KEY takes.
inline std::string hash_key_text(const sluice_hash_key& key) {
    std::string out;
    for (int i = 0; i < SLUICE_HASH_KEY_WORDS; i++) {
        char word[17];
        std::snprintf(word, sizeof(word), "%016" PRIx64, static_cast<uint64_t>(key.word[i]));
        out += (i ? ":" : "") + std::string(word);
    }
    return out;
}

// The key SLUICE_TEST_HASH_KEY names, none if it is unset (a malformed one
// is a test failure).
inline std::optional<sluice_hash_key> hash_key_from_env() {
    const char* value = std::getenv(kHashKeyEnv);
    if (value == nullptr || value[0] == '\0') return std::nullopt;
    sluice_hash_key key{};
    std::istringstream in(value);
    std::string word;
    int i = 0;
    for (; i < SLUICE_HASH_KEY_WORDS && std::getline(in, word, ':'); i++) {
        char* end = nullptr;
        key.word[i] = std::strtoull(word.c_str(), &end, 16);
        if (word.empty() || *end != '\0') break;
    }
    if (i != SLUICE_HASH_KEY_WORDS || in.peek() != EOF) {
        ADD_FAILURE() << "$" << kHashKeyEnv << " is not " << SLUICE_HASH_KEY_WORDS
                      << " hex words separated by ':': " << value;
        return std::nullopt;
    }
    return key;
}

// Says which key this test's table had, if the test failed.
inline void print_hash_key_if_failed(const sluice_hash_key& key) {
    if (::testing::Test::HasFailure()) std::cout << "[ hash key ] " << kHashKeyEnv << "=" << hash_key_text(key) << "\n";
}

}  // namespace sluice::test
