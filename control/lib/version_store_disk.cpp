// SPDX-License-Identifier: Apache-2.0
// The version store on disk: the file names of a version, written durably
// (durable_file.h), the .meta JSON, and the metas of older daemons in
// key=value lines, read once and rewritten as JSON.
// Apart from version_store.cpp so the store's operations (numbering,
// compare-and-swap, rollback) know nothing of files and formats.
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <system_error>

#include "durable_file.h"
#include "version_store_internal.h"

namespace sluice::version_store_internal {
namespace {

constexpr size_t kVersionDigits = 12;
constexpr std::string_view kListsDir = "lists";

std::string errno_text(int error) { return std::strerror(error); }

std::string join_path(const std::string& dir, std::string_view name) { return dir + "/" + std::string(name); }

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

}  // namespace

std::string policies_dir_of(const std::string& state_dir) { return join_path(state_dir, "policies"); }

Result<std::set<uint64_t>> list_committed_versions(const std::string& dir, std::vector<std::string>& warnings) {
    std::error_code error;
    std::set<uint64_t> metas;
    std::multimap<uint64_t, std::string> data_files;  // .toml/.source, to spot the uncommitted
    for (std::filesystem::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
        const std::string name = it->path().filename().string();
        const std::string path = it->path().string();
        if (name == kListsDir && it->is_directory()) continue;
        if (name.ends_with(kDurableTempSuffix)) {
            // Never read: removed so it holds no space (unlink leaves a
            // directory of that name alone, and says so).
            if (::unlink(path.c_str()) == 0)
                warnings.push_back("removed " + path + ": an unfinished write (a crash during commit?)");
            else
                warnings.push_back(
                    "skipped " + path +
                    ": an unfinished write (a crash during commit?) that cannot be removed: " + errno_text(errno));
            continue;
        }
        const size_t dot = name.find('.');
        const auto number =
            dot == kVersionDigits ? parse_number<uint64_t>(std::string_view(name).substr(0, dot)) : std::nullopt;
        const std::string_view extension = dot == std::string::npos ? "" : std::string_view(name).substr(dot);
        if (!number || *number == 0 || (extension != ".meta" && extension != ".toml" && extension != ".source")) {
            warnings.push_back("skipped " + path + ": not a policy version file");
            continue;
        }
        if (extension == ".meta")
            metas.insert(*number);
        else
            data_files.emplace(*number, path);
    }
    if (error) return Error{"cannot list " + dir + ": " + error.message()};

    // A version's data files without its meta were never committed: the
    // next commit of that number would replace them, so they go now.
    for (const auto& [number, path] : data_files) {
        if (metas.count(number)) continue;
        const std::string why =
            ": no " + file_stem(number) + ".meta, so it was never committed (a crash during commit?)";
        if (::unlink(path.c_str()) == 0)
            warnings.push_back("removed " + path + why);
        else
            warnings.push_back("skipped " + path + why + "; cannot remove it: " + errno_text(errno));
    }
    return metas;
}

Result<PolicyVersion> read_version(const std::string& dir, uint64_t number, std::vector<std::string>& warnings) {
    const std::string stem = join_path(dir, file_stem(number));
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
        if (auto written = write_file_durably(dir, file_stem(number) + ".meta", meta_text(loaded)); !written)
            warnings.push_back(meta_path +
                               " is in the key=value format of older versions and could not be "
                               "rewritten as JSON (" +
                               written.error().message + "); it was read as it is");
    }
    return version;
}

Status write_version(const std::string& dir, const PolicyVersion& version) {
    const std::string stem = file_stem(version.version);
    // Data first, meta last: the meta's rename is what makes the version exist.
    Status written = write_file_durably(dir, stem + ".toml", version.canonical);
    if (written) written = write_file_durably(dir, stem + ".source", version.source);
    if (written) written = write_file_durably(dir, stem + ".meta", meta_text(version));
    if (written) return written;
    // Not committed: take back what was written, the meta first (its rename
    // may have happened before the directory's fsync failed), so a restart
    // does not find a version whose push was answered with an error.
    for (const char* extension : {".meta", ".source", ".toml"}) ::unlink(join_path(dir, stem + extension).c_str());
    (void)fsync_dir(dir);
    return written;
}

std::string list_path(const std::string& dir, const std::string& sha256) {
    return join_path(join_path(dir, kListsDir), sha256 + ".txt");
}

Status write_list(const std::string& dir, const PrefixList& list) {
    const std::string lists = join_path(dir, kListsDir);
    if (::access(list_path(dir, list.sha256).c_str(), F_OK) == 0) return ok_status();
    if (::mkdir(lists.c_str(), 0755) != 0 && errno != EEXIST)
        return Error{"cannot create " + lists + ": " + errno_text(errno)};
    return write_file_durably(lists, list.sha256 + ".txt", list.canonical);
}

Result<std::string> read_list(const std::string& dir, const std::string& sha256) {
    const std::string path = list_path(dir, sha256);
    auto text = read_file(path);
    if (!text) return text.error();
    if (const std::string actual = sha256_hex(text.value()); actual != sha256)
        return Error{path + ": its SHA-256 is " + actual + ", not the one it is named by (the file was changed or damaged)"};
    return text;
}

}  // namespace sluice::version_store_internal
