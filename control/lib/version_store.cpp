// SPDX-License-Identifier: Apache-2.0
// The version store's operations: what a version's content is (canonical
// text, SHA-256), numbering and compare-and-swap on prepare, rollback, commit
// and the history in memory. Where and how versions are kept on disk is
// version_store_disk.cpp; the diff between two versions is version_store_diff.cpp.
#include "version_store.h"

#include <openssl/evp.h>

#include <toml++/toml.h>

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <sstream>
#include <system_error>

#include "version_store_internal.h"

namespace sluice {
namespace {

// The formatter writes inline tables inline and arrays of inline tables as
// arrays; make every table a standard one so both spellings come out the same.
void make_tables_standard(toml::node& node) {
    if (toml::table* table = node.as_table()) {
        table->is_inline(false);
        for (auto&& [key, child] : *table) make_tables_standard(child);
    } else if (toml::array* array = node.as_array()) {
        for (toml::node& child : *array) make_tables_standard(child);
    }
}

}  // namespace

Result<std::string> canonical_policy_text(std::string_view text, std::string_view path_for_errors) {
    try {
        toml::table root = toml::parse(text, path_for_errors);
        root.erase("version");
        make_tables_standard(root);
        std::ostringstream out;
        // Fixed flags rather than the defaults, which keep a number's hex or
        // octal spelling and a string's literal quoting from the input.
        out << toml::toml_formatter(root, toml::format_flags::allow_unicode_strings);
        std::string canonical = out.str();
        if (!canonical.empty() && canonical.back() != '\n') canonical += '\n';
        return canonical;
    } catch (const toml::parse_error& error) {
        const toml::source_region& where = error.source();
        return Error{std::string(path_for_errors) + ":" + std::to_string(where.begin.line) + ":" +
                     std::to_string(where.begin.column) + ": " + std::string(error.description())};
    } catch (const std::exception& error) {
        return Error{std::string(path_for_errors) + ": cannot make the canonical text: " + error.what()};
    }
}

namespace {

// The canonical text (canonical_policy_text) and a line per list.
Result<std::string> canonical_text_with_lists(std::string_view text, std::string_view path_for_errors,
                                              const PrefixLists& lists) {
    auto canonical = canonical_policy_text(text, path_for_errors);
    if (!canonical) return canonical.error();
    std::map<std::string, const PrefixList*> named;
    for (const auto& [name, list] : lists) named.emplace(name, &list);
    return canonical.value() + list_trailer(named);
}

}  // namespace

std::string sha256_hex(std::string_view bytes) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    // One-shot EVP cannot fail for SHA-256 short of memory exhaustion; an
    // empty result then makes every comparison fail rather than match.
    if (EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr) != 1) return {};
    static constexpr char kHex[] = "0123456789abcdef";
    std::string hex;
    hex.reserve(length * 2);
    for (unsigned int i = 0; i < length; i++) {
        hex += kHex[digest[i] >> 4];
        hex += kHex[digest[i] & 0xf];
    }
    return hex;
}

Result<VersionStore> VersionStore::open(const std::string& state_dir) {
    VersionStore store(version_store_internal::policies_dir_of(state_dir));
    std::error_code error;
    std::filesystem::create_directories(store.policies_dir_, error);
    if (error) return Error{"cannot create " + store.policies_dir_ + ": " + error.message()};

    auto numbers = version_store_internal::list_committed_versions(store.policies_dir_, store.warnings_);
    if (!numbers) return numbers.error();
    for (uint64_t number : numbers.value()) {
        auto version = version_store_internal::read_version(store.policies_dir_, number, store.warnings_);
        if (!version) return version.error();
        // A list gone makes the version impossible to roll back to: as for its own files, say so now.
        auto lists = lists_in_trailer(version.value().canonical);
        if (!lists) return Error{"version " + std::to_string(number) + ": " + lists.error().message};
        for (const auto& [name, sha256] : lists.value())
            if (const std::string path = version_store_internal::list_path(store.policies_dir_, sha256);
                ::access(path.c_str(), R_OK) != 0)
                return Error{"version " + std::to_string(number) + ": its prefix list " + name + " (" + path +
                             ") cannot be read: " + std::strerror(errno)};
        store.versions_.emplace(number, std::move(version.value()));
    }
    return store;
}

std::map<std::string, uint32_t> VersionStore::all_class_ids() const {
    std::map<std::string, uint32_t> ids;
    for (const auto& [number, version] : versions_) {
        for (const auto& owner : version.class_ids) {
            // Once all ids are used the loader reuses a removed class's id;
            // the newer owner wins so no id is handed to two names.
            std::erase_if(
                ids, [&](const auto& entry) { return entry.second == owner.second && entry.first != owner.first; });
            ids[owner.first] = owner.second;
        }
    }
    return ids;
}

Result<PreparedPolicy> VersionStore::prepare(std::string_view text, std::string_view path_for_errors,
                                             std::optional<uint64_t> if_version, std::string origin,
                                             const PolicyLoadOptions& options, PrefixLists lists) const {
    return prepare_loaded(text, path_for_errors, if_version, std::move(origin), options, std::move(lists));
}

Result<PreparedPolicy> VersionStore::prepare_loaded(std::string_view text, std::string_view path_for_errors,
                                                    std::optional<uint64_t> if_version, std::string origin,
                                                    const PolicyLoadOptions& options, PrefixLists lists) const {
    const uint64_t current_version = versions_.empty() ? 0 : versions_.rbegin()->first;
    if (if_version && *if_version != current_version)
        return Error{std::string(path_for_errors) + ": not applied: the current policy version is " +
                         std::to_string(current_version) + ", not " + std::to_string(*if_version) +
                         " (another push came first; review it and retry)",
                     "version"};

    auto loaded = load_policy_toml(text, path_for_errors, all_class_ids(), options, lists);
    if (!loaded) return loaded.error();
    for (const auto& [name, list] : lists)
        if (!loaded.value().list_names.count(name))
            return Error{std::string(path_for_errors) + ": prefix list " + name +
                         " was sent, but no class names it in match_files"};
    auto canonical = canonical_text_with_lists(text, path_for_errors, lists);
    if (!canonical) return canonical.error();

    uint64_t assigned = current_version + 1;
    if (loaded.value().version != 0) {
        if (loaded.value().version <= current_version)
            return Error{std::string(path_for_errors) + ": version " + std::to_string(loaded.value().version) +
                             " is not greater than the current version " + std::to_string(current_version) +
                             "; versions only grow (leave `version` out to get " + std::to_string(current_version + 1) +
                             ")",
                         "version"};
        assigned = loaded.value().version;
    }

    PreparedPolicy prepared;
    prepared.loaded = std::move(loaded.value());
    prepared.loaded.version = assigned;
    prepared.loaded.compiled.header.version = assigned;
    PolicyVersion& version = prepared.version;
    version.version = assigned;
    version.canonical = std::move(canonical.value());
    version.sha256 = sha256_hex(version.canonical);
    version.source = std::string(text);
    version.origin = std::move(origin);
    version.applied_unix_s = static_cast<int64_t>(std::time(nullptr));
    version.class_ids = prepared.loaded.class_ids;
    prepared.lists = std::move(lists);
    return prepared;
}

Result<PreparedPolicy> VersionStore::prepare_rollback(std::optional<uint64_t> to,
                                                      const PolicyLoadOptions& options) const {
    if (versions_.empty()) return Error{"nothing to roll back: no policy version has been applied"};
    uint64_t target = 0;
    if (to) {
        target = *to;
    } else {
        if (versions_.size() < 2)
            return Error{"nothing to roll back to: version " + std::to_string(versions_.begin()->first) +
                         " is the only one"};
        target = std::prev(versions_.end(), 2)->first;
    }
    auto old = get(target);
    if (!old) return old.error();
    auto lists = lists_of(old.value());
    if (!lists) return lists.error();
    // The canonical text has no `version`, so the store numbers it current + 1.
    return prepare_loaded(old.value().canonical, "version " + std::to_string(target), std::nullopt,
                          "rollback of " + std::to_string(target), options, std::move(lists.value()));
}

Result<PrefixLists> VersionStore::lists_of(const PolicyVersion& version) const {
    auto named = lists_in_trailer(version.canonical);
    if (!named) return Error{"version " + std::to_string(version.version) + ": " + named.error().message};
    PrefixLists lists;
    for (const auto& [name, sha256] : named.value()) {
        auto text = version_store_internal::read_list(policies_dir_, sha256);
        if (!text)
            return Error{"version " + std::to_string(version.version) + ": its prefix list " + name +
                         " is gone from the store: " + text.error().message};
        auto list = parse_prefix_list(text.value(), name);
        if (!list) return Error{"version " + std::to_string(version.version) + ": " + list.error().message};
        lists.emplace(name, std::move(list.value()));
    }
    return lists;
}

Status VersionStore::commit(const PolicyVersion& version, const PrefixLists& lists) {
    const uint64_t current_version = versions_.empty() ? 0 : versions_.rbegin()->first;
    if (version.version <= current_version)
        return Error{"version " + std::to_string(version.version) + " not committed: the current version is already " +
                     std::to_string(current_version) + " (prepare it again)"};
    if (sha256_hex(version.canonical) != version.sha256)
        return Error{"version " + std::to_string(version.version) + " not committed: its sha256 " + version.sha256 +
                     " does not match its canonical text"};
    auto named = lists_in_trailer(version.canonical);
    if (!named) return named.error();
    for (const auto& [name, sha256] : named.value()) {
        const auto given = lists.find(name);
        if (given != lists.end() && given->second.sha256 == sha256) {
            if (auto written = version_store_internal::write_list(policies_dir_, given->second); !written)
                return written;
        } else if (::access(version_store_internal::list_path(policies_dir_, sha256).c_str(), F_OK) != 0) {
            return Error{"version " + std::to_string(version.version) + " not committed: its prefix list " + name +
                         " (" + sha256 + ") was neither given nor stored"};
        }
    }
    if (auto written = version_store_internal::write_version(policies_dir_, version); !written) return written;
    versions_.emplace(version.version, version);
    return ok_status();
}

std::optional<PolicyVersion> VersionStore::current() const {
    if (versions_.empty()) return std::nullopt;
    return versions_.rbegin()->second;
}

std::vector<PolicyVersion> VersionStore::history() const {
    std::vector<PolicyVersion> out;
    out.reserve(versions_.size());
    for (const auto& [number, version] : versions_) out.push_back(version);
    return out;
}

Result<PolicyVersion> VersionStore::get(uint64_t version) const {
    const auto found = versions_.find(version);
    if (found != versions_.end()) return found->second;
    if (versions_.empty()) return Error{"no policy version " + std::to_string(version) + ": the history is empty"};
    return Error{"no policy version " + std::to_string(version) + " in the history (it holds " +
                 std::to_string(versions_.size()) + " versions, " + std::to_string(versions_.begin()->first) + " to " +
                 std::to_string(versions_.rbegin()->first) + ")"};
}

bool VersionStore::same_as_current(std::string_view text, const PrefixLists& lists) const {
    if (versions_.empty()) return false;
    auto canonical = canonical_text_with_lists(text, "candidate", lists);
    return canonical && sha256_hex(canonical.value()) == versions_.rbegin()->second.sha256;
}

}  // namespace sluice
