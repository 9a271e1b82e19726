// SPDX-License-Identifier: Apache-2.0
// Shared by the policy loader's three parts, not part of its interface
// (policy_toml.h is): policy_toml_fields.cpp reads one TOML table's keys by
// type and range and words every refusal as "path:line:column: field: what";
// policy_toml_levels.cpp turns the keys of a class, a limit or a shape into
// their compiled settings; policy_toml_requests.cpp reads the request-level
// tables; policy_toml.cpp reads the file as a whole (defaults, classes,
// prefixes, class ids) into a CompiledPolicy.
#pragma once

#include <toml++/toml.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "compiled_policy.h"
#include "rate_limits.h"
#include "result.h"

namespace sluice::policy_toml_internal {

inline constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();

template <class T>
struct Choice {
    std::string_view name;
    T value;
};

inline constexpr Choice<Unit> kUnits[] = {
    {"packets", Unit::packets}, {"bytes", Unit::bytes}, {"tcp_syn", Unit::tcp_syn}};
inline constexpr Choice<Accuracy> kAccuracies[] = {{"lease", Accuracy::lease}, {"split", Accuracy::split}};
inline constexpr Choice<Algorithm> kAlgorithms[] = {{"gcra", Algorithm::gcra},
                                                    {"fixed_window", Algorithm::fixed_window},
                                                    {"sliding_window", Algorithm::sliding_window},
                                                    {"sliding_log", Algorithm::sliding_log}};

using Keys = std::span<const std::string_view>;

std::string in_quotes(std::string_view text);
// What was found where something else was expected: `a float (1.5)`.
std::string describe(const toml::node& node);
// "path:line:column"
std::string position(std::string_view path, const toml::source_region& where);
// "path:line:column: field: what"
Error located(std::string_view path, const toml::source_region& where, std::string_view field, std::string_view what);

// One TOML table and the dotted name it goes by in errors, e.g. `class "web".per_source`.
class Fields {
  public:
    Fields(std::string_view path, const toml::table& table, std::string name)
        : path_(path), table_(table), name_(std::move(name)) {}

    const std::string& name() const { return name_; }
    const toml::node* find(std::string_view key) const { return table_.get(key); }
    std::string field(std::string_view key) const {
        return name_.empty() ? std::string(key) : name_ + "." + std::string(key);
    }

    // An error about the value of `key`, at that value.
    Error at(const toml::node& value, std::string_view key, std::string_view what) const {
        return located(path_, value.source(), field(key), what);
    }
    // An error about the table as a whole (a missing key), at its start.
    Error here(std::string_view what) const { return located(path_, table_.source(), name_, what); }

    // Refuses the first key (in file order) not in `allowed`: a misspelt
    // setting must not silently leave its default in place.
    Status only(Keys allowed) const;

    // The integer at `key`, within min..max; nullopt when absent.
    Result<std::optional<int64_t>> integer(std::string_view key, int64_t min, int64_t max) const;

    Result<std::optional<std::string>> string(std::string_view key) const;

    Result<std::optional<bool>> boolean(std::string_view key) const;

    // The duration string at `key` ("500ms", "1s", "10m", "2h", "1d": digits
    // and one unit) in ns, within min_ns..max_ns; nullopt when absent.
    Result<std::optional<uint64_t>> duration(std::string_view key, uint64_t min_ns, uint64_t max_ns) const;

    template <class T, size_t N>
    Result<std::optional<T>> choice(std::string_view key, const Choice<T> (&choices)[N]) const {
        const toml::node* node = find(key);
        if (!node) return std::optional<T>{};
        if (const auto* value = node->as_string())
            for (const Choice<T>& choice : choices)
                if (value->get() == choice.name) return std::optional<T>{choice.value};
        std::string names;
        for (const Choice<T>& choice : choices) names += (names.empty() ? "" : ", ") + in_quotes(choice.name);
        return at(*node, key, "expected one of " + names + ", got " + describe(*node));
    }

    // The sub-table at `key`; nullptr when absent.
    Result<const toml::table*> table(std::string_view key) const;

    // compile_level names the limit ("<name_>: what"); point at the setting
    // the message is about, so the position is as precise as for a type error.
    Error limit_error(const Error& error) const;

  private:
    std::string_view path_;
    const toml::table& table_;
    std::string name_;
};

// What [defaults] sets for every class and a class may override.
struct ClassSettings {
    Unit unit = Unit::packets;
    Accuracy accuracy = Accuracy::lease;
    uint8_t on_table_full = SLUICE_TABLE_FULL_EVICT;
    uint32_t max_frame_bytes = kDefaultMaxFrameBytes;
    uint8_t prefix_v4 = 32;
    uint8_t prefix_v6 = 64;
    bool shadow = false;
    // Where shadow was set to what it is (a default set in [defaults] points
    // there), so a refusal about it can say where it came from.
    std::optional<toml::source_region> shadow_where;
};

// Overrides in `settings` whatever `fields` sets.
Status read_class_settings(const Fields& fields, ClassSettings& settings);
// A bucket level (global, new_sources), compiled for `cpus` CPUs.
Result<sluice_level_limit> read_level(const Fields& level, const ClassSettings& inherited, uint32_t cpus);

// A class aggregate: a bucket level as above when its algorithm is gcra (the
// default; window all zero), else `limit` per `window` (rate_limits.h).
struct Aggregate {
    sluice_level_limit level{};
    sluice_window_limit window{};
};
Result<Aggregate> read_aggregate(const Fields& level, const ClassSettings& inherited, uint32_t cpus);
// A class's per_source level.
Result<sluice_source_limit> read_source_level(const Fields& level, const ClassSettings& inherited);
// A class's shape table.
Result<sluice_shape> read_shape(const Fields& shape);

// A class's [penalty] table (over, within, for) over its compiled per-source limit.
Result<sluice_penalty> read_penalty(const Fields& penalty, const sluice_source_limit& per_source);
// A class's fleet table: its FleetQuota but for class_id and class_name.
Result<FleetQuota> read_fleet(const Fields& fleet, const ClassSettings& inherited);

// The policy's [[request_domain]] and [[request_class]] tables
// (policy_toml_requests.cpp), each read and checked, request class ids 1..N in
// file order, and no two classes a descriptor could match with equally many
// fixed values. `fleet_leasing` as in PolicyLoadOptions.
struct RequestTables {
    std::vector<RequestClass> classes;
    std::vector<RequestDomain> domains;
};
Result<RequestTables> read_requests(std::string_view path, const toml::table& root, bool fleet_leasing);

}  // namespace sluice::policy_toml_internal
