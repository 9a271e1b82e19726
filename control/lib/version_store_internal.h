// SPDX-License-Identifier: Apache-2.0
// The on-disk layout of the version store (version_store.h describes it),
// shared by version_store.cpp, which keeps the history and decides what is
// stored, and version_store_disk.cpp, the only one that knows file names,
// the meta JSON, the old key=value metas and how a write is made durable.
// Not part of the store's interface.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "prefix_list.h"
#include "result.h"
#include "version_store.h"

namespace sluice::version_store_internal {

// <state_dir>/policies
std::string policies_dir_of(const std::string& state_dir);

// The versions `dir` holds committed (those with a .meta). Adds a warning for
// each file it passes over: an unfinished write, a file that is not a policy
// version's, a .toml or .source never committed.
Result<std::set<uint64_t>> list_committed_versions(const std::string& dir, std::vector<std::string>& warnings);

// Version `number` from `dir`: its meta, canonical and source texts, checked
// against each other. A meta in the old key=value format is rewritten as JSON;
// if that fails, a warning says so and the version is read all the same.
Result<PolicyVersion> read_version(const std::string& dir, uint64_t number, std::vector<std::string>& warnings);

// Writes the three files of `version` durably, the meta last: once its rename
// is done the version exists.
Status write_version(const std::string& dir, const PolicyVersion& version);

// Prefix lists, by the SHA-256 of their canonical text, in <dir>/lists/<sha256>.txt:
// shared by every version that uses the same list, so a version that changes
// one list stores only that one.
std::string list_path(const std::string& dir, const std::string& sha256);
// Writes the list durably unless it is there already.
Status write_list(const std::string& dir, const PrefixList& list);
// The canonical text of list `sha256`, checked against its name.
Result<std::string> read_list(const std::string& dir, const std::string& sha256);

}  // namespace sluice::version_store_internal
