// SPDX-License-Identifier: Apache-2.0
// Prefix-list files, which a class names in `match_files`: one CIDR or bare
// address per line, `#` or `;` starting a comment (whole line or after the
// prefix), blank lines ignored: the format of the common public drop lists.
// Parsed into the sorted prefixes a class matches and a canonical text (one
// prefix per line, sorted), whose SHA-256 is the list's identity: files that
// differ only in comments, spacing, order or `/32` vs a bare address are the
// same list. The version store keeps that canonical text, so a rollback never
// reads a file that may have changed since.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "compiled_policy.h"
#include "result.h"

namespace sluice {

// What a file may hold at most: above 2^24 prefixes (SLUICE_PREFIX_CAPACITY_MAX)
// of the longest spelling plus a comment each; stops a wrong path such as /dev/zero.
inline constexpr size_t kMaxPrefixListBytes = size_t{1} << 30;

struct PrefixListEntry {
    PolicyPrefix prefix;  // class_id 0: the class that names the list sets it
    uint32_t line = 0;    // where it is in the file, for errors
};

struct PrefixList {
    std::vector<PrefixListEntry> entries;  // sorted by prefix_less, no duplicates
    std::string canonical;                 // "<address>/<length>\n" per entry, in that order
    std::string sha256;                    // lowercase hex, of `canonical`
};

// A policy's lists by the name its match_files give them, as pushed (raw
// file content) or parsed.
using PrefixListTexts = std::map<std::string, std::string>;
using PrefixLists = std::map<std::string, PrefixList>;

// Parses one list. Errors read "<name>:<line>: <what>": a line that is not a
// prefix, host bits set past the length, a prefix listed twice (naming both
// lines), a NUL byte (not a text file).
Result<PrefixList> parse_prefix_list(std::string_view content, std::string_view name);

// Reads a list file, at most kMaxPrefixListBytes; errors name the path.
Result<std::string> read_prefix_list_file(const std::string& path);

// How the version store's canonical policy text records each list: one TOML
// comment line per list, after the policy, so the text's SHA-256 covers the
// lists' content and a diff shows which list changed.
std::string list_trailer(const std::map<std::string, const PrefixList*>& lists);
// The lists a canonical text records: name -> sha256 (empty when none);
// refuses a malformed trailer line.
Result<std::map<std::string, std::string>> lists_in_trailer(std::string_view canonical);

}  // namespace sluice
