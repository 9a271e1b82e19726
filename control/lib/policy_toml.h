// SPDX-License-Identifier: Apache-2.0
// The policy file: TOML in, a validated CompiledPolicy out. The format is
// documented in examples/policy-schema.md. Every refusal names the file, the
// line and column, and the setting, so an operator can fix it without reading
// the source; nothing the loader returns is refused by validate().
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "compiled_policy.h"
#include "prefix_list.h"
#include "result.h"

namespace sluice {

struct PolicyLoadOptions {
    uint32_t cpus = 1;  // possible CPUs: split shares and default lease sizes depend on it
    // Whether the daemon can lease fleet quotas (its config has [fleet]):
    // without, a class's fleet table is refused rather than never leased.
    bool fleet_leasing = true;
    // Prefixes per address family the dataplanes' tables hold (sluiced.toml
    // prefix_capacity): a policy with more is refused with both numbers.
    uint32_t prefix_capacity = SLUICE_PREFIX_CAPACITY_DEFAULT;
};

struct LoadedPolicy {
    uint64_t version = 0;                       // the file's `version`; 0 when absent (the daemon assigns one)
    CompiledPolicy compiled;                    // header.version == version, so possibly 0 here
    std::map<std::string, uint32_t> class_ids;  // class name -> id used in `compiled`
    std::set<std::string> list_names;           // the prefix lists its match_files name
};

// Parses and validates one policy. `path` only appears in error messages.
// `previous_ids` maps class names to the ids an earlier version used: a class
// keeps its id across versions, so its buckets survive edits. A new name gets
// the lowest id in 1..255 that is neither in `previous_ids` nor taken by
// another class of this file; only when no such id is left does it reuse the
// id of a class this file removed (the caller should then reset that state).
// `lists` holds every prefix-list file a class names in match_files, by the
// name it gives (read_match_files, parse_prefix_lists).
Result<LoadedPolicy> load_policy_toml(std::string_view text, std::string_view path,
                                      const std::map<std::string, uint32_t>& previous_ids,
                                      const PolicyLoadOptions& options, const PrefixLists& lists = PrefixLists{});

// Reads the prefix-list files the classes of `text` name in match_files. A
// relative name is relative to the directory of `policy_path` (the working
// directory when it has none, as for a policy read from stdin). Errors give
// the policy's line and column and the file. A policy that does not parse
// yet names nothing: its loading will say why.
Result<PrefixListTexts> read_match_files(std::string_view text, std::string_view policy_path);
// Parses each list; errors name the list and the line.
Result<PrefixLists> parse_prefix_lists(const PrefixListTexts& texts);

// Reads `path` and the lists it names, and loads it as above; every error
// names `path` or the list.
Result<LoadedPolicy> load_policy_file(const std::string& path, const std::map<std::string, uint32_t>& previous_ids,
                                      const PolicyLoadOptions& options);

}  // namespace sluice
