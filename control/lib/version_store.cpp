// SPDX-License-Identifier: Apache-2.0
#include "version_store.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <system_error>

#include "unique_fd.h"

namespace sluice {
namespace {

constexpr std::string_view kTempSuffix = ".tmp";
constexpr size_t kVersionDigits = 12;
constexpr size_t kDiffContext = 3;
// Above this many line pairs the diff stops looking for common lines in the
// changed middle and shows it as all removed, all added: still correct, and a
// policy that large changing wholesale is unusual.
constexpr size_t kMaxDiffCells = 4'000'000;

std::string errno_text(int error) { return std::strerror(error); }

std::string join_path(const std::string& dir, std::string_view name) { return dir + "/" + std::string(name); }

Status fsync_dir(const std::string& dir) {
    UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (fd.get() < 0) return Error{"cannot open directory " + dir + ": " + errno_text(errno)};
    if (::fsync(fd.get()) != 0) return Error{"cannot fsync directory " + dir + ": " + errno_text(errno)};
    return ok_status();
}

// Replaces dir/name with `content` so that after a crash the file is either
// the old one or the new one, never a mix: temp file, fsync, rename, fsync dir.
Status write_file_durably(const std::string& dir, std::string_view name, std::string_view content) {
    const std::string path = join_path(dir, name);
    const std::string temp = path + std::string(kTempSuffix);
    UniqueFd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd.get() < 0) return Error{"cannot create " + temp + ": " + errno_text(errno)};
    size_t written = 0;
    while (written < content.size()) {
        const ssize_t n = ::write(fd.get(), content.data() + written, content.size() - written);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return Error{"cannot write " + temp + ": " + errno_text(errno)};
        written += static_cast<size_t>(n);
    }
    if (::fsync(fd.get()) != 0) return Error{"cannot fsync " + temp + ": " + errno_text(errno)};
    if (fd.close() != 0) return Error{"cannot close " + temp + ": " + errno_text(errno)};
    if (::rename(temp.c_str(), path.c_str()) != 0)
        return Error{"cannot rename " + temp + " to " + path + ": " + errno_text(errno)};
    return fsync_dir(dir);
}

Result<std::string> read_file(const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return Error{"cannot read " + path + ": " + errno_text(errno)};
    std::string content;
    char buffer[65536];
    for (;;) {
        const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return Error{"cannot read " + path + ": " + errno_text(errno)};
        if (n == 0) break;
        content.append(buffer, static_cast<size_t>(n));
    }
    return content;
}

std::string file_stem(uint64_t version) {
    std::string digits = std::to_string(version);
    if (digits.size() < kVersionDigits) digits.insert(0, kVersionDigits - digits.size(), '0');
    return digits;
}

template <class T>
std::optional<T> parse_number(std::string_view text) {
    T value{};
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
    return value;
}

// The meta format before JSON (see version_store.h): values escaped '\\' and
// newline as "\\\\" and "\\n". Read, never written.
std::optional<std::string> unescape_value(std::string_view value) {
    std::string out;
    for (size_t i = 0; i < value.size(); i++) {
        if (value[i] != '\\') {
            out += value[i];
            continue;
        }
        if (++i == value.size()) return std::nullopt;
        if (value[i] == '\\')
            out += '\\';
        else if (value[i] == 'n')
            out += '\n';
        else
            return std::nullopt;
    }
    return out;
}

// A .meta file's JSON: everything but the canonical and source texts.
std::string meta_text(const PolicyVersion& version) {
    nlohmann::ordered_json meta;
    meta["version"] = version.version;
    meta["sha256"] = version.sha256;
    meta["origin"] = version.origin;
    meta["applied_unix_s"] = version.applied_unix_s;
    meta["class_ids"] = version.class_ids;
    // Origin is free text: bytes that are not UTF-8 become U+FFFD rather than
    // failing the commit.
    return meta.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

// Fills everything but canonical and source from a .meta file's JSON.
Result<PolicyVersion> parse_meta_json(std::string_view text, const std::string& path) {
    nlohmann::json meta;
    try {
        meta = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& error) {
        // what() is "[json.exception.parse_error.101] parse error at line 1, ...".
        const std::string what = error.what();
        return Error{path + ": not valid JSON: " + what.substr(what.find(']') + 2)};
    }
    if (!meta.is_object()) return Error{path + ": expected a JSON object"};
    auto field = [&](const char* key, bool (nlohmann::json::*is_type)() const,
                     const char* expected) -> Result<const nlohmann::json*> {
        const auto found = meta.find(key);
        if (found == meta.end()) return Error{path + ": \"" + key + "\" is missing"};
        if (!((*found).*is_type)()) return Error{path + ": \"" + key + "\" is not " + expected};
        return &*found;
    };
    PolicyVersion out;
    auto version = field("version", &nlohmann::json::is_number_unsigned, "a positive integer");
    if (!version) return version.error();
    out.version = version.value()->get<uint64_t>();
    if (out.version == 0) return Error{path + ": \"version\" is not a positive integer"};
    auto sha256 = field("sha256", &nlohmann::json::is_string, "a string");
    if (!sha256) return sha256.error();
    out.sha256 = sha256.value()->get<std::string>();
    auto origin = field("origin", &nlohmann::json::is_string, "a string");
    if (!origin) return origin.error();
    out.origin = origin.value()->get<std::string>();
    auto applied = field("applied_unix_s", &nlohmann::json::is_number_integer, "an integer");
    if (!applied) return applied.error();
    out.applied_unix_s = applied.value()->get<int64_t>();
    auto classes = field("class_ids", &nlohmann::json::is_object, "an object of class name to id");
    if (!classes) return classes.error();
    for (const auto& [name, id] : classes.value()->items()) {
        if (!id.is_number_unsigned() || id.get<uint64_t>() > UINT32_MAX)
            return Error{path + ": \"class_ids\".\"" + name + "\" is not a class id"};
        out.class_ids[name] = id.get<uint32_t>();
    }
    // Other keys are ignored, so a newer daemon's extra fields do not stop an older one.
    return out;
}

// Fills everything but canonical and source from a .meta file in the format
// before JSON: key=value lines.
Result<PolicyVersion> parse_legacy_meta(std::string_view text, const std::string& path) {
    PolicyVersion out;
    std::set<std::string> seen;
    size_t line_number = 0;
    while (!text.empty()) {
        line_number++;
        const size_t end = text.find('\n');
        if (end == std::string_view::npos)
            return Error{path + ":" + std::to_string(line_number) + ": the file ends mid-line (cut short?)"};
        const std::string_view line = text.substr(0, end);
        text.remove_prefix(end + 1);
        const std::string where = path + ":" + std::to_string(line_number) + ": ";
        const size_t equals = line.find('=');
        if (equals == std::string_view::npos) return Error{where + "expected key=value"};
        const std::string key(line.substr(0, equals));
        const auto value = unescape_value(line.substr(equals + 1));
        if (!value) return Error{where + "a bad escape in the value of " + key};
        if (key != "class" && !seen.insert(key).second) return Error{where + key + " appears twice"};
        if (key == "version") {
            const auto number = parse_number<uint64_t>(*value);
            if (!number || *number == 0) return Error{where + "version is not a positive integer"};
            out.version = *number;
        } else if (key == "sha256") {
            out.sha256 = *value;
        } else if (key == "origin") {
            out.origin = *value;
        } else if (key == "applied_unix_s") {
            const auto number = parse_number<int64_t>(*value);
            if (!number) return Error{where + "applied_unix_s is not an integer"};
            out.applied_unix_s = *number;
        } else if (key == "class") {
            const size_t space = value->find(' ');
            const auto id = space == std::string::npos
                                ? std::nullopt
                                : parse_number<uint32_t>(std::string_view(*value).substr(0, space));
            if (!id || space + 1 == value->size()) return Error{where + "expected class=<id> <name>"};
            out.class_ids[value->substr(space + 1)] = *id;
        }
        // Other keys are ignored, so a newer daemon's extra fields do not stop an older one.
    }
    for (const char* required : {"version", "sha256", "origin", "applied_unix_s"})
        if (!seen.count(required)) return Error{path + ": " + required + "= is missing"};
    return out;
}

// The format before JSON begins with a key ("version="); JSON cannot.
bool is_legacy_meta(std::string_view text) {
    const size_t first = text.find_first_not_of(" \t\r\n");
    return first != std::string_view::npos && std::isalpha(static_cast<unsigned char>(text[first]));
}

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

struct DiffOp {
    char kind;         // ' ', '-' or '+'
    size_t from_line;  // lines of `from` before this one
    size_t to_line;    // lines of `to` before this one
    std::string_view text;
};

std::vector<std::string_view> split_lines(std::string_view text) {
    std::vector<std::string_view> lines;
    while (!text.empty()) {
        const size_t end = text.find('\n');
        lines.push_back(text.substr(0, end));
        if (end == std::string_view::npos) break;
        text.remove_prefix(end + 1);
    }
    return lines;
}

// The edit script between two line lists: common prefix and suffix, then a
// longest-common-subsequence table over what is left.
std::vector<DiffOp> edit_script(const std::vector<std::string_view>& a, const std::vector<std::string_view>& b) {
    size_t prefix = 0;
    while (prefix < a.size() && prefix < b.size() && a[prefix] == b[prefix]) prefix++;
    size_t suffix = 0;
    while (suffix < a.size() - prefix && suffix < b.size() - prefix &&
           a[a.size() - 1 - suffix] == b[b.size() - 1 - suffix])
        suffix++;
    const size_t n = a.size() - prefix - suffix;
    const size_t m = b.size() - prefix - suffix;

    std::vector<DiffOp> ops;
    size_t i = 0, j = 0;  // positions in a and b
    auto emit = [&](char kind) {
        ops.push_back(DiffOp{kind, i, j, kind == '+' ? b[j] : a[i]});
        if (kind != '+') i++;
        if (kind != '-') j++;
    };
    while (i < prefix) emit(' ');
    if (n > 0 && m > 0 && (n + 1) * (m + 1) <= kMaxDiffCells) {
        // common[x][y]: LCS length of a[prefix+x..] and b[prefix+y..] within the middle.
        std::vector<uint32_t> common((n + 1) * (m + 1), 0);
        auto at = [&](size_t x, size_t y) -> uint32_t& { return common[x * (m + 1) + y]; };
        for (size_t x = n; x-- > 0;)
            for (size_t y = m; y-- > 0;)
                at(x, y) = a[prefix + x] == b[prefix + y] ? at(x + 1, y + 1) + 1 : std::max(at(x + 1, y), at(x, y + 1));
        size_t x = 0, y = 0;
        while (x < n || y < m) {
            if (x < n && y < m && a[prefix + x] == b[prefix + y]) {
                emit(' ');
                x++, y++;
            } else if (y == m || (x < n && at(x + 1, y) >= at(x, y + 1))) {
                emit('-');
                x++;
            } else {
                emit('+');
                y++;
            }
        }
    } else {
        for (size_t x = 0; x < n; x++) emit('-');
        for (size_t y = 0; y < m; y++) emit('+');
    }
    while (i < a.size()) emit(' ');
    return ops;
}

std::string hunk_range(size_t before, size_t count) {
    // Unified format: a range with no lines names the line before it.
    return std::to_string(count == 0 ? before : before + 1) + "," + std::to_string(count);
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
    VersionStore store(join_path(state_dir, "policies"));
    std::error_code error;
    std::filesystem::create_directories(store.policies_dir_, error);
    if (error) return Error{"cannot create " + store.policies_dir_ + ": " + error.message()};

    std::set<uint64_t> metas;
    std::map<uint64_t, std::string> data_files;  // .toml/.source, to spot the uncommitted
    for (std::filesystem::directory_iterator it(store.policies_dir_, error), end; !error && it != end;
         it.increment(error)) {
        const std::string name = it->path().filename().string();
        const std::string path = it->path().string();
        if (name.ends_with(kTempSuffix)) {
            store.warnings_.push_back("skipped " + path + ": an unfinished write (a crash during commit?)");
            continue;
        }
        const size_t dot = name.find('.');
        const auto number =
            dot == kVersionDigits ? parse_number<uint64_t>(std::string_view(name).substr(0, dot)) : std::nullopt;
        const std::string_view extension = dot == std::string::npos ? "" : std::string_view(name).substr(dot);
        if (!number || *number == 0 || (extension != ".meta" && extension != ".toml" && extension != ".source")) {
            store.warnings_.push_back("skipped " + path + ": not a policy version file");
            continue;
        }
        if (extension == ".meta")
            metas.insert(*number);
        else
            data_files.emplace(*number, path);
    }
    if (error) return Error{"cannot list " + store.policies_dir_ + ": " + error.message()};

    for (const auto& [number, path] : data_files)
        if (!metas.count(number))
            store.warnings_.push_back("skipped " + path + ": no " + file_stem(number) +
                                      ".meta, so it was never committed (a crash during commit?)");

    for (uint64_t number : metas) {
        const std::string stem = join_path(store.policies_dir_, file_stem(number));
        const std::string meta_path = stem + ".meta";
        auto meta = read_file(meta_path);
        if (!meta) return meta.error();
        const bool legacy = is_legacy_meta(meta.value());
        auto version = legacy ? parse_legacy_meta(meta.value(), meta_path) : parse_meta_json(meta.value(), meta_path);
        if (!version) return version.error();
        PolicyVersion& loaded = version.value();
        if (loaded.version != number)
            return Error{meta_path + ": says version " + std::to_string(loaded.version) + ", its name " +
                         std::to_string(number)};
        auto canonical = read_file(stem + ".toml");
        if (!canonical) return Error{meta_path + ": its policy text is missing: " + canonical.error().message};
        auto source = read_file(stem + ".source");
        if (!source) return Error{meta_path + ": its source text is missing: " + source.error().message};
        loaded.canonical = std::move(canonical.value());
        loaded.source = std::move(source.value());
        if (sha256_hex(loaded.canonical) != loaded.sha256)
            return Error{stem + ".toml: its SHA-256 is " + sha256_hex(loaded.canonical) + ", " + meta_path + " says " +
                         loaded.sha256 + " (the file was changed or damaged)"};
        // Written before metas were JSON: rewritten as JSON once it is known
        // to be whole, so the old format is read once; if that fails it is
        // read again at the next open.
        if (legacy) {
            if (auto written = write_file_durably(store.policies_dir_, file_stem(number) + ".meta", meta_text(loaded));
                !written)
                store.warnings_.push_back(meta_path +
                                          " is in the key=value format of older versions and could not be "
                                          "rewritten as JSON (" +
                                          written.error().message + "); it was read as it is");
        }
        store.versions_.emplace(number, std::move(loaded));
    }
    return store;
}

std::map<std::string, uint32_t> VersionStore::all_class_ids() const {
    std::map<std::string, uint32_t> ids;
    for (const auto& [number, version] : versions_) {
        for (const auto& [name, id] : version.class_ids) {
            // Once all ids are used the loader reuses a removed class's id;
            // the newer owner wins so no id is handed to two names.
            std::erase_if(ids, [&](const auto& entry) { return entry.second == id && entry.first != name; });
            ids[name] = id;
        }
    }
    return ids;
}

Result<PreparedPolicy> VersionStore::prepare(std::string_view text, std::string_view path_for_errors,
                                             std::optional<uint64_t> if_version, std::string origin,
                                             const PolicyLoadOptions& options) const {
    return prepare_loaded(text, path_for_errors, if_version, std::move(origin), options);
}

Result<PreparedPolicy> VersionStore::prepare_loaded(std::string_view text, std::string_view path_for_errors,
                                                    std::optional<uint64_t> if_version, std::string origin,
                                                    const PolicyLoadOptions& options) const {
    const uint64_t current_version = versions_.empty() ? 0 : versions_.rbegin()->first;
    if (if_version && *if_version != current_version)
        return Error{std::string(path_for_errors) + ": not applied: the current policy version is " +
                         std::to_string(current_version) + ", not " + std::to_string(*if_version) +
                         " (another push came first; review it and retry)",
                     "version"};

    auto loaded = load_policy_toml(text, path_for_errors, all_class_ids(), options);
    if (!loaded) return loaded.error();
    auto canonical = canonical_policy_text(text, path_for_errors);
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
    // The canonical text has no `version`, so the store numbers it current + 1.
    return prepare_loaded(old.value().canonical, "version " + std::to_string(target), std::nullopt,
                          "rollback of " + std::to_string(target), options);
}

Status VersionStore::commit(const PolicyVersion& version) {
    const uint64_t current_version = versions_.empty() ? 0 : versions_.rbegin()->first;
    if (version.version <= current_version)
        return Error{"version " + std::to_string(version.version) + " not committed: the current version is already " +
                     std::to_string(current_version) + " (prepare it again)"};
    if (sha256_hex(version.canonical) != version.sha256)
        return Error{"version " + std::to_string(version.version) + " not committed: its sha256 " + version.sha256 +
                     " does not match its canonical text"};
    const std::string stem = file_stem(version.version);
    // Data first, meta last: the meta's rename is what makes the version exist.
    if (auto written = write_file_durably(policies_dir_, stem + ".toml", version.canonical); !written) return written;
    if (auto written = write_file_durably(policies_dir_, stem + ".source", version.source); !written) return written;
    if (auto written = write_file_durably(policies_dir_, stem + ".meta", meta_text(version)); !written) return written;
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

bool VersionStore::same_as_current(std::string_view text) const {
    if (versions_.empty()) return false;
    auto canonical = canonical_policy_text(text, "candidate");
    return canonical && sha256_hex(canonical.value()) == versions_.rbegin()->second.sha256;
}

std::string diff_policies(const PolicyVersion& from, const PolicyVersion& to) {
    const auto a = split_lines(from.canonical);
    const auto b = split_lines(to.canonical);
    const std::vector<DiffOp> ops = edit_script(a, b);

    std::vector<size_t> changes;
    for (size_t k = 0; k < ops.size(); k++)
        if (ops[k].kind != ' ') changes.push_back(k);
    if (changes.empty()) return {};

    std::string out =
        "--- version " + std::to_string(from.version) + "\n+++ version " + std::to_string(to.version) + "\n";
    size_t c = 0;
    while (c < changes.size()) {
        // A hunk runs while the unchanged gap to the next change fits in the context on both sides.
        size_t last = c;
        while (last + 1 < changes.size() && changes[last + 1] - changes[last] <= 2 * kDiffContext + 1) last++;
        const size_t begin = changes[c] >= kDiffContext ? changes[c] - kDiffContext : 0;
        const size_t end = std::min(ops.size(), changes[last] + kDiffContext + 1);
        size_t from_count = 0, to_count = 0;
        for (size_t k = begin; k < end; k++) {
            if (ops[k].kind != '+') from_count++;
            if (ops[k].kind != '-') to_count++;
        }
        out += "@@ -" + hunk_range(ops[begin].from_line, from_count) + " +" + hunk_range(ops[begin].to_line, to_count) +
               " @@\n";
        for (size_t k = begin; k < end; k++) {
            out += ops[k].kind;
            out += ops[k].text;
            out += '\n';
        }
        c = last + 1;
    }
    return out;
}

}  // namespace sluice
