// SPDX-License-Identifier: Apache-2.0
// The policy loader's reading of one TOML table: a key's value by type and
// range, unknown keys refused, and every refusal worded
// "path:line:column: field: what". Apart from policy_toml.cpp because it knows
// nothing of what the keys mean, only how to read them and how to say where a
// wrong one is.
#include <algorithm>
#include <iterator>
#include <sstream>
#include <tuple>

#include "policy_toml_internal.h"

namespace sluice::policy_toml_internal {
namespace {

std::string type_name(const toml::node& node) {
    switch (node.type()) {
        case toml::node_type::table:
            return "a table";
        case toml::node_type::array:
            return "an array";
        case toml::node_type::string:
            return "a string";
        case toml::node_type::integer:
            return "an integer";
        case toml::node_type::floating_point:
            return "a float";
        case toml::node_type::boolean:
            return "a boolean";
        case toml::node_type::date:
            return "a date";
        case toml::node_type::time:
            return "a time";
        case toml::node_type::date_time:
            return "a date-time";
        case toml::node_type::none:
            break;
    }
    return "nothing";
}

bool earlier(const toml::source_region& a, const toml::source_region& b) {
    return std::tie(a.begin.line, a.begin.column) < std::tie(b.begin.line, b.begin.column);
}

std::string expected_integer(int64_t min, int64_t max) {
    if (max != kUnbounded) return "an integer in " + std::to_string(min) + ".." + std::to_string(max);
    if (min == 0) return "a non-negative integer";
    return "an integer of at least " + std::to_string(min);
}

// The TOML key of a setting compile_level names in Error::setting.
std::string_view toml_key_of(std::string_view setting) { return setting == "lease_ttl" ? "lease_ttl_ms" : setting; }

}  // namespace

std::string in_quotes(std::string_view text) { return "\"" + std::string(text) + "\""; }

std::string describe(const toml::node& node) {
    std::string text = type_name(node);
    if (const auto* string = node.as_string()) {
        text += " (" + in_quotes(string->get()) + ")";  // TOML++ would print it single-quoted
    } else if (node.is_value()) {
        std::ostringstream value;
        node.visit([&value](const auto& concrete) { value << concrete; });
        text += " (" + value.str() + ")";
    }
    return text;
}

std::string position(std::string_view path, const toml::source_region& where) {
    return std::string(path) + ":" + std::to_string(where.begin.line) + ":" + std::to_string(where.begin.column);
}

Error located(std::string_view path, const toml::source_region& where, std::string_view field, std::string_view what) {
    std::string message = position(path, where) + ": ";
    if (!field.empty()) message += std::string(field) + ": ";
    message += what;
    return Error{std::move(message), std::string(field)};
}

Status Fields::only(Keys allowed) const {
    const toml::key* unknown = nullptr;
    for (auto&& [key, value] : table_) {
        if (std::find(allowed.begin(), allowed.end(), key.str()) != allowed.end()) continue;
        if (!unknown || earlier(key.source(), unknown->source())) unknown = &key;
    }
    if (!unknown) return ok_status();
    std::string names;
    for (std::string_view name : allowed) names += (names.empty() ? "" : ", ") + std::string(name);
    return located(path_, unknown->source(), field(unknown->str()), "unknown key; allowed here: " + names);
}

Result<std::optional<int64_t>> Fields::integer(std::string_view key, int64_t min, int64_t max) const {
    const toml::node* node = find(key);
    if (!node) return std::optional<int64_t>{};
    const auto* value = node->as_integer();
    if (!value) return at(*node, key, "expected " + expected_integer(min, max) + ", got " + describe(*node));
    const int64_t number = value->get();
    if (number < min || number > max)
        return at(*node, key, "expected " + expected_integer(min, max) + ", got " + std::to_string(number));
    return std::optional<int64_t>{number};
}

Result<std::optional<std::string>> Fields::string(std::string_view key) const {
    const toml::node* node = find(key);
    if (!node) return std::optional<std::string>{};
    const auto* value = node->as_string();
    if (!value) return at(*node, key, "expected a string, got " + describe(*node));
    return std::optional<std::string>{value->get()};
}

Result<std::optional<bool>> Fields::boolean(std::string_view key) const {
    const toml::node* node = find(key);
    if (!node) return std::optional<bool>{};
    const auto* value = node->as_boolean();
    if (!value) return at(*node, key, "expected true or false, got " + describe(*node));
    return std::optional<bool>{value->get()};
}

Result<std::optional<uint64_t>> Fields::duration(std::string_view key, uint64_t min_ns, uint64_t max_ns) const {
    const toml::node* node = find(key);
    if (!node) return std::optional<uint64_t>{};
    const auto* value = node->as_string();
    if (!value) return at(*node, key, "expected " + std::string(kDurationExample) + ", got " + describe(*node));
    auto ns = parse_duration(value->get(), min_ns, max_ns);
    if (!ns) return at(*node, key, ns.error().message);
    return std::optional<uint64_t>{ns.value()};
}

Result<const toml::table*> Fields::table(std::string_view key) const {
    const toml::node* node = find(key);
    if (!node) return static_cast<const toml::table*>(nullptr);
    if (!node->is_table()) return at(*node, key, "expected a table, got " + describe(*node));
    return node->as_table();
}

Error Fields::limit_error(const Error& error) const {
    const std::string prefix = name_ + ": ";
    if (!error.message.starts_with(prefix)) return located(path_, table_.source(), "", error.message);
    const std::string_view what = std::string_view(error.message).substr(prefix.size());
    const std::string_view key = toml_key_of(error.setting);
    const toml::node* value = key.empty() ? nullptr : find(key);
    return value ? at(*value, key, what) : here(what);
}

}  // namespace sluice::policy_toml_internal
