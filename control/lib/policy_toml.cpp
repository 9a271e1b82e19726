// SPDX-License-Identifier: Apache-2.0
// The policy loader as a whole: the file read, its top-level tables,
// [[class]] by [[class]] with its prefixes, class ids kept across versions,
// and the result checked by validate(). How one table's keys are read and
// refused is policy_toml_fields.cpp; what a level or a shape sets is
// policy_toml_levels.cpp; the request-level tables ([[request_domain]],
// [[request_class]]) are policy_toml_requests.cpp.
#include "policy_toml.h"

#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <iterator>
#include <memory>
#include <optional>
#include <system_error>
#include <tuple>
#include <vector>

#include "policy_toml_internal.h"

namespace sluice {
namespace {

// Far above any real policy (255 classes, 8192 prefixes); stops a wrong path such as /dev/zero.
constexpr size_t kMaxFileBytes = 16 << 20;

}  // namespace

namespace policy_toml_internal {
namespace {

constexpr uint32_t kMaxClassId = SLUICE_MAX_CLASSES - 1;
constexpr size_t kMaxClassNameLength = 63;

constexpr Choice<uint8_t> kActions[] = {
    {"limit", SLUICE_ACTION_LIMIT}, {"pass", SLUICE_ACTION_PASS}, {"drop", SLUICE_ACTION_DROP}};
constexpr Choice<uint8_t> kVerdicts[] = {{"pass", SLUICE_VERDICT_PASS}, {"drop", SLUICE_VERDICT_DROP}};

constexpr std::string_view kTopKeys[] = {"version", "defaults", "global", "class", "request_domain", "request_class"};
constexpr std::string_view kDefaultsKeys[] = {"unit",      "accuracy",        "on_table_full", "non_ip",
                                              "malformed", "max_frame_bytes", "prefix_v4",     "prefix_v6",
                                              "class",     "shadow"};
constexpr std::string_view kClassKeys[] = {
    "name",      "match",           "match_files", "action",      "unit",      "accuracy", "on_table_full",
    "prefix_v4", "prefix_v6",       "max_frame_bytes", "per_source", "new_sources", "aggregate", "shape",
    "shadow",    "fleet",           "penalty"};

bool valid_class_name(std::string_view name) {
    if (name.empty() || name.size() > kMaxClassNameLength || name[0] < 'a' || name[0] > 'z') return false;
    return std::all_of(name.begin(), name.end(),
                       [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'; });
}

// algorithm, limit and window set one level, the class aggregate or
// per_source: in [defaults] or on the class itself they would look like they
// apply to every level.
Status refuse_level_keys(const Fields& fields) {
    for (std::string_view key : {"algorithm", "limit", "window"})
        if (const toml::node* value = fields.find(key))
            return fields.at(*value, key,
                             "goes in the class's aggregate or per_source table ([class.aggregate], "
                             "[class.per_source]): each of those two levels chooses its own algorithm");
    return ok_status();
}

// One match_files entry of a class: the list it names, and where.
struct ListUse {
    std::string name;
    const PrefixList* list;
    toml::source_region where;
    std::string key;  // "match_files[i]"
};

struct ParsedClass {
    std::string name;
    sluice_class_entry entry{};
    std::vector<PolicyPrefix> prefixes;  // class_id is filled in once ids are assigned
    std::vector<ListUse> lists;
    std::optional<FleetQuota> fleet;  // class_id too
    std::string label;                // "class "x"", as errors name it
};

// A prefix with where it came from, while the classes' prefixes are merged:
// `use` indexes the list uses, or is kInline.
struct PlacedPrefix {
    PolicyPrefix prefix;
    uint32_t use;
    uint32_t line;
};
constexpr uint32_t kInline = UINT32_MAX;

using PrefixKey = std::tuple<uint8_t, uint8_t, std::array<uint8_t, 16>>;

struct PrefixOwner {
    std::string class_name;
    toml::source_region where;
};

class PolicyReader {
  public:
    PolicyReader(std::string_view path, const PolicyLoadOptions& options, const PrefixLists& lists)
        : path_(path), options_(options), lists_(lists) {}

    Result<LoadedPolicy> read(const toml::table& root, const std::map<std::string, uint32_t>& previous_ids);

  private:
    Status read_defaults(const Fields& top);
    Result<ParsedClass> read_class(const toml::table& table, size_t number);
    Status read_match(const Fields& cls, const std::string& class_name, std::vector<PolicyPrefix>& prefixes);
    Status read_match_files(const Fields& cls, std::vector<ListUse>& uses) const;
    // Every class's prefixes, inline and from lists, in prefix_less order;
    // refuses a prefix that two classes (or one class twice) match.
    Result<std::vector<PolicyPrefix>> merge_prefixes(const std::vector<ParsedClass>& classes,
                                                     const std::vector<uint32_t>& ids) const;
    Result<std::vector<uint32_t>> assign_ids(const std::vector<ParsedClass>& classes,
                                             const std::map<std::string, uint32_t>& previous_ids) const;

    std::string_view path_;
    PolicyLoadOptions options_;
    const PrefixLists& lists_;
    ClassSettings defaults_;
    uint8_t non_ip_verdict_ = SLUICE_VERDICT_PASS;
    uint8_t malformed_verdict_ = SLUICE_VERDICT_DROP;
    std::optional<std::string> default_class_;
    toml::source_region default_class_where_;
    std::map<std::string, toml::source_region> class_names_;
    std::map<PrefixKey, PrefixOwner> prefix_owners_;
};

Status PolicyReader::read_defaults(const Fields& top) {
    auto table = top.table("defaults");
    if (!table) return table.error();
    if (!table.value()) return ok_status();
    const Fields defaults(path_, *table.value(), "defaults");
    if (auto refused = refuse_level_keys(defaults); !refused) return refused.error();
    if (auto keys = defaults.only(kDefaultsKeys); !keys) return keys.error();
    if (auto settings = read_class_settings(defaults, defaults_); !settings) return settings.error();
    auto non_ip = defaults.choice("non_ip", kVerdicts);
    if (!non_ip) return non_ip.error();
    auto malformed = defaults.choice("malformed", kVerdicts);
    if (!malformed) return malformed.error();
    auto default_class = defaults.string("class");
    if (!default_class) return default_class.error();

    non_ip_verdict_ = non_ip.value().value_or(non_ip_verdict_);
    malformed_verdict_ = malformed.value().value_or(malformed_verdict_);
    default_class_ = default_class.value();
    if (default_class_) default_class_where_ = defaults.find("class")->source();
    return ok_status();
}

Status PolicyReader::read_match(const Fields& cls, const std::string& class_name, std::vector<PolicyPrefix>& prefixes) {
    const toml::node* node = cls.find("match");
    if (!node) return ok_status();
    const toml::array* list = node->as_array();
    if (!list) return cls.at(*node, "match", "expected an array of CIDR strings, got " + describe(*node));
    for (size_t i = 0; i < list->size(); i++) {
        const toml::node& item = *list->get(i);
        const std::string key = "match[" + std::to_string(i) + "]";
        const auto* cidr = item.as_string();
        if (!cidr) return cls.at(item, key, "expected a CIDR string such as \"192.0.2.0/24\", got " + describe(item));
        auto prefix = parse_prefix(cidr->get(), SLUICE_CLASS_UNCLASSIFIED);
        if (!prefix) return cls.at(item, key, prefix.error().message);
        const PolicyPrefix& p = prefix.value();

        const auto [owner, first] =
            prefix_owners_.emplace(PrefixKey{p.family, p.length, p.addr}, PrefixOwner{class_name, item.source()});
        if (!first && owner->second.class_name == class_name)
            return cls.at(item, key,
                          in_quotes(cidr->get()) + " is listed twice in class " + in_quotes(class_name) + " (also at " +
                              position(path_, owner->second.where) + ")");
        if (!first)
            return cls.at(item, key,
                          in_quotes(cidr->get()) + " conflicts with class " + in_quotes(owner->second.class_name) + " (" +
                              position(path_, owner->second.where) +
                              "), which matches the same prefix; a prefix belongs to one class only");

        prefixes.push_back(p);
    }
    return ok_status();
}

Status PolicyReader::read_match_files(const Fields& cls, std::vector<ListUse>& uses) const {
    const toml::node* node = cls.find("match_files");
    if (!node) return ok_status();
    const toml::array* files = node->as_array();
    if (!files)
        return cls.at(*node, "match_files", "expected an array of prefix-list file paths, got " + describe(*node));
    for (size_t i = 0; i < files->size(); i++) {
        const toml::node& item = *files->get(i);
        const std::string key = "match_files[" + std::to_string(i) + "]";
        const auto* name = item.as_string();
        if (!name || name->get().empty())
            return cls.at(item, key, "expected the path of a prefix-list file, got " + describe(item));
        const auto found = lists_.find(name->get());
        if (found == lists_.end())
            return cls.at(item, key, in_quotes(name->get()) + " was not read (the pushing side reads each match_files list)");
        for (const ListUse& earlier : uses)
            if (earlier.name == name->get())
                return cls.at(item, key, in_quotes(name->get()) + " is named twice in " + cls.name());
        uses.push_back({name->get(), &found->second, item.source(), key});
    }
    return ok_status();
}

Result<std::vector<PolicyPrefix>> PolicyReader::merge_prefixes(const std::vector<ParsedClass>& classes,
                                                               const std::vector<uint32_t>& ids) const {
    // Each run is sorted (a list is; a class's inline prefixes are sorted
    // here), so merging them costs one pass each instead of a sort of millions.
    std::vector<const ListUse*> uses;
    std::vector<size_t> use_class;
    std::vector<std::vector<PlacedPrefix>> runs;
    for (size_t c = 0; c < classes.size(); c++) {
        std::vector<PlacedPrefix> inline_run;
        for (PolicyPrefix p : classes[c].prefixes) {
            p.class_id = ids[c];
            inline_run.push_back({p, kInline, 0});
        }
        std::sort(inline_run.begin(), inline_run.end(),
                  [](const PlacedPrefix& a, const PlacedPrefix& b) { return prefix_less(a.prefix, b.prefix); });
        runs.push_back(std::move(inline_run));
        for (const ListUse& use : classes[c].lists) {
            const uint32_t index = static_cast<uint32_t>(uses.size());
            uses.push_back(&use);
            use_class.push_back(c);
            std::vector<PlacedPrefix> run;
            run.reserve(use.list->entries.size());
            for (const PrefixListEntry& entry : use.list->entries) {
                PlacedPrefix placed{entry.prefix, index, entry.line};
                placed.prefix.class_id = ids[c];
                run.push_back(placed);
            }
            runs.push_back(std::move(run));
        }
    }
    const auto less = [](const PlacedPrefix& a, const PlacedPrefix& b) { return prefix_less(a.prefix, b.prefix); };
    std::vector<PlacedPrefix> merged;
    for (std::vector<PlacedPrefix>& run : runs) {
        if (run.empty()) continue;
        if (merged.empty()) {
            merged = std::move(run);
            continue;
        }
        std::vector<PlacedPrefix> next;
        next.reserve(merged.size() + run.size());
        std::merge(merged.begin(), merged.end(), run.begin(), run.end(), std::back_inserter(next), less);
        merged = std::move(next);
    }

    // Where a placed prefix is, for an error: "drop.txt:17 (class "a".match_files[0])" or the TOML position.
    const auto origin = [&](const PlacedPrefix& p) -> std::string {
        if (p.use == kInline) {
            const auto owner = prefix_owners_.find(PrefixKey{p.prefix.family, p.prefix.length, p.prefix.addr});
            return owner == prefix_owners_.end() ? std::string(path_) : position(path_, owner->second.where);
        }
        const ListUse& use = *uses[p.use];
        return use.name + ":" + std::to_string(p.line) + " (" + position(path_, use.where) + ", " +
               classes[use_class[p.use]].label + "." + use.key + ")";
    };
    for (size_t i = 1; i < merged.size(); i++) {
        const PlacedPrefix& a = merged[i - 1];
        const PlacedPrefix& b = merged[i];
        if (prefix_less(a.prefix, b.prefix)) continue;
        // At least one side is a list: inline duplicates were refused as they were read.
        const PlacedPrefix& listed = b.use != kInline ? b : a;
        const PlacedPrefix& other = &listed == &b ? a : b;
        const ListUse& use = *uses[listed.use];
        const std::string what = prefix_text(listed.prefix) + " at " + use.name + ":" + std::to_string(listed.line);
        Error error = a.prefix.class_id == b.prefix.class_id
                          ? located(path_, use.where, classes[use_class[listed.use]].label + "." + use.key,
                                    what + " is listed twice in " + classes[use_class[listed.use]].label +
                                        " (also at " + origin(other) + ")")
                          : located(path_, use.where, classes[use_class[listed.use]].label + "." + use.key,
                                    what + " conflicts with " + origin(other) +
                                        ", which matches the same prefix for another class; a prefix belongs to "
                                        "one class only");
        return error;
    }
    std::vector<PolicyPrefix> prefixes;
    prefixes.reserve(merged.size());
    for (const PlacedPrefix& p : merged) prefixes.push_back(p.prefix);
    return prefixes;
}

Result<ParsedClass> PolicyReader::read_class(const toml::table& table, size_t number) {
    // Errors name the class by its name as soon as it has one, so even an
    // unknown key says whose it is; before that, by its position in the file.
    const toml::node* name_node = table.get("name");
    const std::string label = name_node && name_node->is_string() ? "class " + in_quotes(name_node->as_string()->get())
                                                                  : "class #" + std::to_string(number);
    const Fields cls(path_, table, label);
    if (auto refused = refuse_level_keys(cls); !refused) return refused.error();
    if (auto keys = cls.only(kClassKeys); !keys) return keys.error();
    if (!name_node) return cls.here("name is required");
    auto name = cls.string("name");
    if (!name) return name.error();
    ParsedClass out;
    out.name = *name.value();
    if (!valid_class_name(out.name))
        return cls.at(*name_node, "name",
                      in_quotes(out.name) + " is not a valid class name: use 1-" + std::to_string(kMaxClassNameLength) +
                          " characters of a-z, 0-9, _ and -, starting with a letter");
    if (const auto [earlier_use, first] = class_names_.emplace(out.name, name_node->source()); !first)
        return cls.at(*name_node, "name",
                      in_quotes(out.name) + " is already the name of the class at " +
                          position(path_, earlier_use->second) + "; class names must be unique");

    ClassSettings settings = defaults_;
    if (auto overrides = read_class_settings(cls, settings); !overrides) return overrides.error();
    auto action = cls.choice("action", kActions);
    if (!action) return action.error();
    auto per_source = cls.table("per_source");
    if (!per_source) return per_source.error();
    auto new_sources = cls.table("new_sources");
    if (!new_sources) return new_sources.error();
    auto aggregate = cls.table("aggregate");
    if (!aggregate) return aggregate.error();
    auto shape = cls.table("shape");
    if (!shape) return shape.error();
    auto fleet = cls.table("fleet");
    if (!fleet) return fleet.error();
    auto penalty = cls.table("penalty");
    if (!penalty) return penalty.error();
    // About shape as a whole, worded "class "x": shape needs ..." so the
    // class and the key read first.
    const auto shape_error = [&](std::string_view what) {
        Error error = located(path_, cls.find("shape")->source(), cls.name(), "shape " + std::string(what));
        error.setting = cls.field("shape");
        return error;
    };

    sluice_class_entry& entry = out.entry;
    entry.action = action.value().value_or(SLUICE_ACTION_LIMIT);
    if (entry.action != SLUICE_ACTION_LIMIT) {
        const std::string_view action_name = entry.action == SLUICE_ACTION_PASS ? "pass" : "drop";
        // Checked before the limits so the refusal names shape, the key that needs "limit".
        if (shape.value())
            return shape_error("needs action = \"limit\": action = " + in_quotes(action_name) +
                               " decides every packet at once, so none would wait in the queue");
        for (std::string_view key : {"per_source", "new_sources", "aggregate", "fleet", "penalty"})
            if (const toml::node* level = cls.find(key))
                return cls.at(*level, key,
                              "never applies: action = " + in_quotes(action_name) + " limits nothing; remove " +
                                  std::string(key) + " or use action = \"limit\"");
    }

    if (per_source.value()) {
        const Fields level(path_, *per_source.value(), cls.field("per_source"));
        // per_source may say how sources are aggregated; saying it differently
        // at class level too is a contradiction, not an override.
        for (const auto& [key, bits, length] :
             {std::tuple{"prefix_v4", 32, &settings.prefix_v4}, std::tuple{"prefix_v6", 128, &settings.prefix_v6}}) {
            auto value = level.integer(key, 1, bits);
            if (!value) return value.error();
            if (!value.value()) continue;
            const auto source_length = static_cast<uint8_t>(*value.value());
            if (const toml::node* class_value = cls.find(key); class_value && source_length != *length)
                return level.at(*level.find(key), key,
                                "/" + std::to_string(source_length) + " contradicts " + cls.field(key) + " = " +
                                    std::to_string(*length) + " (" + position(path_, class_value->source()) +
                                    "); set it in one place");
            *length = source_length;
        }
        auto limit = read_source_level(level, settings);
        if (!limit) return limit.error();
        entry.per_source = limit.value();
    }
    if (penalty.value()) {
        // The penalty box is a state of the source's GCRA entry.
        if (!per_source.value())
            return cls.at(*cls.find("penalty"), "penalty",
                          "needs a per_source limit: a penalty is kept in the source's per-source entry");
        if (entry.per_source.window.algorithm != SLUICE_ALGORITHM_GCRA)
            return cls.at(*cls.find("penalty"), "penalty",
                          "needs per_source algorithm = \"gcra\": a penalty is a GCRA entry put past its end, and "
                          "algorithm = " +
                              in_quotes(algorithm_name(entry.per_source.window.algorithm)) + " keeps counts instead");
        auto compiled = read_penalty(Fields(path_, *penalty.value(), cls.field("penalty")), entry.per_source);
        if (!compiled) return compiled.error();
        entry.penalty = compiled.value();
    }
    if (new_sources.value()) {
        // Only the source table can tell a new source from a known one.
        if (!per_source.value())
            return cls.at(*cls.find("new_sources"), "new_sources",
                          "needs a per_source limit: a source is new when the per-source table has no entry for it");
        const Fields level(path_, *new_sources.value(), cls.field("new_sources"));
        auto limit = read_level(level, settings, options_.cpus);
        if (!limit) return limit.error();
        entry.new_sources = limit.value();
    }
    if (aggregate.value()) {
        const Fields level(path_, *aggregate.value(), cls.field("aggregate"));
        auto limit = read_aggregate(level, settings, options_.cpus);
        if (!limit) return limit.error();
        entry.aggregate = limit.value().level;
        entry.aggregate_window = limit.value().window;
    }
    if (shape.value() && settings.shadow) {
        // The shape queue holds packets; a class in shadow must pass each one
        // as it comes, or trying a limit would already delay traffic.
        const bool own = cls.find("shadow") != nullptr;
        const std::string shape_at = position(path_, cls.find("shape")->source());
        if (own)
            return cls.at(*cls.find("shadow"), "shadow",
                          "cannot be true with shape (" + shape_at +
                              "): the shape queue holds packets, and a class in shadow holds none");
        return located(path_, *settings.shadow_where, "defaults.shadow",
                       "true applies to " + cls.name() + ", whose shape (" + shape_at +
                           ") holds packets, and a class in shadow holds none; set shadow = false on that class");
    }
    if (shape.value()) {
        if (!aggregate.value()) return shape_error("needs an aggregate limit (the queue drains at the aggregate rate)");
        if (entry.aggregate_window.algorithm != SLUICE_ALGORITHM_GCRA)
            return shape_error(
                "needs aggregate algorithm = \"gcra\": the queue drains at the aggregate's "
                "token-bucket rate, and algorithm = " +
                in_quotes(algorithm_name(entry.aggregate_window.algorithm)) + " has none");
        auto compiled = read_shape(Fields(path_, *shape.value(), cls.field("shape")));
        if (!compiled) return compiled.error();
        entry.shape = compiled.value();
    }
    if (fleet.value()) {
        const Fields fleet_fields(path_, *fleet.value(), cls.field("fleet"));
        if (!options_.fleet_leasing)
            return fleet_fields.here("this daemon has no [fleet] servers in its config to lease the quota from");
        auto quota = read_fleet(fleet_fields, settings);
        if (!quota) return quota.error();
        out.fleet = quota.value();
        out.fleet->class_name = out.name;
        entry.fleet = 1;
        entry.fleet_unit = out.fleet->unit;
    }
    entry.on_table_full = settings.on_table_full;
    entry.prefix_v4 = settings.prefix_v4;
    entry.prefix_v6 = settings.prefix_v6;
    entry.shadow = settings.shadow ? 1 : 0;

    if (auto match = read_match(cls, out.name, out.prefixes); !match) return match.error();
    if (auto files = read_match_files(cls, out.lists); !files) return files.error();
    out.label = cls.name();
    return out;
}

Result<std::vector<uint32_t>> PolicyReader::assign_ids(const std::vector<ParsedClass>& classes,
                                                       const std::map<std::string, uint32_t>& previous_ids) const {
    std::vector<uint32_t> ids(classes.size(), SLUICE_CLASS_UNCLASSIFIED);
    std::array<bool, SLUICE_MAX_CLASSES> taken{};     // by a class of this file
    std::array<bool, SLUICE_MAX_CLASSES> reserved{};  // by an earlier version, maybe for a removed class
    for (const auto& [name, id] : previous_ids)
        if (id != SLUICE_CLASS_UNCLASSIFIED && id <= kMaxClassId) reserved[id] = true;

    for (size_t i = 0; i < classes.size(); i++) {
        const auto previous = previous_ids.find(classes[i].name);
        if (previous == previous_ids.end()) continue;
        const uint32_t id = previous->second;
        if (id == SLUICE_CLASS_UNCLASSIFIED || id > kMaxClassId)
            return Error{std::string(path_) + ": class " + in_quotes(classes[i].name) + ": its previous id " +
                         std::to_string(id) + " is outside 1.." + std::to_string(kMaxClassId)};
        if (taken[id])
            return Error{std::string(path_) + ": class " + in_quotes(classes[i].name) + ": its previous id " +
                         std::to_string(id) + " also belonged to another class of this file"};
        taken[id] = true;
        ids[i] = id;
    }
    // New names take the lowest id no earlier version used, so a removed
    // class's buckets are not inherited; only when none is left (255 ids in
    // use across versions) does a removed class's id get reused.
    for (size_t i = 0; i < classes.size(); i++) {
        if (ids[i] != SLUICE_CLASS_UNCLASSIFIED) continue;
        uint32_t id = 1;
        while (id <= kMaxClassId && (taken[id] || reserved[id])) id++;
        if (id > kMaxClassId)
            for (id = 1; taken[id];) id++;  // at most 255 classes, so one is free
        taken[id] = true;
        ids[i] = id;
    }
    return ids;
}

Result<LoadedPolicy> PolicyReader::read(const toml::table& root, const std::map<std::string, uint32_t>& previous_ids) {
    const Fields top(path_, root, "");
    if (auto keys = top.only(kTopKeys); !keys) return keys.error();
    auto version = top.integer("version", 1, kUnbounded);
    if (!version) return version.error();
    if (auto defaults = read_defaults(top); !defaults) return defaults.error();

    sluice_level_limit global{};  // disabled: no ceiling
    auto global_table = top.table("global");
    if (!global_table) return global_table.error();
    if (global_table.value()) {
        const Fields level(path_, *global_table.value(), "global");
        auto limit = read_level(level, defaults_, options_.cpus);
        if (!limit) return limit.error();
        global = limit.value();
    }

    const toml::node* class_node = root.get("class");
    if (class_node && !class_node->is_array())
        return top.at(*class_node, "class", "expected an array of tables ([[class]]), got " + describe(*class_node));
    const toml::array* class_list = class_node ? class_node->as_array() : nullptr;
    if (!class_list || class_list->empty())
        return located(path_, root.source(), "class", "at least one [[class]] is required");
    if (class_list->size() > kMaxClassId)
        return top.at(*class_list->get(kMaxClassId), "class #" + std::to_string(kMaxClassId + 1),
                      "a policy holds at most " + std::to_string(kMaxClassId) + " classes (ids 1.." +
                          std::to_string(kMaxClassId) + ")");
    std::vector<ParsedClass> classes;
    for (size_t i = 0; i < class_list->size(); i++) {
        const toml::node& item = *class_list->get(i);
        if (!item.is_table())
            return top.at(item, "class #" + std::to_string(i + 1), "expected a table, got " + describe(item));
        auto parsed = read_class(*item.as_table(), i + 1);
        if (!parsed) return parsed.error();
        classes.push_back(std::move(parsed.value()));
    }

    const std::string default_name = default_class_.value_or("default");
    const auto default_class =
        std::find_if(classes.begin(), classes.end(), [&](const ParsedClass& c) { return c.name == default_name; });
    if (default_class == classes.end()) {
        if (default_class_)
            return located(path_, default_class_where_, "defaults.class",
                           "no [[class]] is named " + in_quotes(default_name));
        return located(path_, root.source(), "defaults.class",
                       "not set, and no [[class]] is named \"default\"; sources no prefix matches need a class: "
                       "name one \"default\" or set defaults.class");
    }

    auto ids = assign_ids(classes, previous_ids);
    if (!ids) return ids.error();
    auto requests = read_requests(path_, root, options_.fleet_leasing);
    if (!requests) return requests.error();

    LoadedPolicy loaded;
    loaded.version = static_cast<uint64_t>(version.value().value_or(0));
    CompiledPolicy& policy = loaded.compiled;
    policy.header.global = global;
    policy.header.default_class_id = ids.value()[static_cast<size_t>(default_class - classes.begin())];
    policy.header.non_ip_verdict = non_ip_verdict_;
    policy.header.malformed_verdict = malformed_verdict_;
    for (size_t i = 0; i < classes.size(); i++) {
        const uint32_t id = ids.value()[i];
        classes[i].entry.class_id = id;
        policy.classes.push_back(classes[i].entry);
        loaded.class_ids[classes[i].name] = id;
        for (const ListUse& use : classes[i].lists) loaded.list_names.insert(use.name);
        if (classes[i].fleet) {
            classes[i].fleet->class_id = id;
            policy.fleet.push_back(*classes[i].fleet);
        }
    }
    std::sort(policy.fleet.begin(), policy.fleet.end(),
              [](const FleetQuota& a, const FleetQuota& b) { return a.class_id < b.class_id; });
    policy.requests = std::move(requests.value().classes);
    policy.request_domains = std::move(requests.value().domains);

    auto prefixes = merge_prefixes(classes, ids.value());
    if (!prefixes) return prefixes.error();
    policy.prefixes = std::move(prefixes.value());
    mark_prefix_families(policy);
    if (auto fits = check_prefix_capacity(policy, options_.prefix_capacity, "prefix_capacity"); !fits)
        return Error{std::string(path_) + ": " + fits.error().message, fits.error().setting};
    // validate() refuses version 0, which here only means "the daemon numbers
    // it"; everything else it checks must hold already.
    policy.header.version = loaded.version ? loaded.version : 1;
    const Status valid = validate(policy);
    policy.header.version = loaded.version;
    if (!valid) return Error{std::string(path_) + ": " + valid.error().message};
    return loaded;
}

}  // namespace
}  // namespace policy_toml_internal

Result<LoadedPolicy> load_policy_toml(std::string_view text, std::string_view path,
                                      const std::map<std::string, uint32_t>& previous_ids,
                                      const PolicyLoadOptions& options, const PrefixLists& lists) {
    if (options.cpus == 0) return Error{std::string(path) + ": CPU count is 0"};
    toml::table root;
    try {
        root = toml::parse(text, path);
    } catch (const toml::parse_error& error) {
        return policy_toml_internal::located(path, error.source(), "TOML syntax", error.description());
    }
    return policy_toml_internal::PolicyReader(path, options, lists).read(root, previous_ids);
}

Result<PrefixListTexts> read_match_files(std::string_view text, std::string_view policy_path) {
    toml::table root;
    try {
        root = toml::parse(text, policy_path);
    } catch (const toml::parse_error&) {
        return PrefixListTexts{};
    }
    const size_t slash = policy_path.rfind('/');
    const std::string base = slash == std::string_view::npos ? "" : std::string(policy_path.substr(0, slash + 1));
    PrefixListTexts texts;
    const toml::array* classes = root["class"].as_array();
    for (size_t c = 0; classes && c < classes->size(); c++) {
        const toml::table* cls = classes->get(c)->as_table();
        const toml::array* files = cls ? (*cls)["match_files"].as_array() : nullptr;
        for (size_t i = 0; files && i < files->size(); i++) {
            const auto* name = files->get(i)->as_string();
            if (!name || name->get().empty() || texts.count(name->get())) continue;
            const std::string& file = name->get();
            auto content = read_prefix_list_file(file.front() == '/' ? file : base + file);
            if (!content)
            {
                const auto* class_name = (*cls)["name"].as_string();
                const std::string label = class_name ? "class " + policy_toml_internal::in_quotes(class_name->get())
                                                     : "class #" + std::to_string(c + 1);
                return policy_toml_internal::located(policy_path, files->get(i)->source(),
                                                     label + ".match_files[" + std::to_string(i) + "]",
                                                     content.error().message);
            }
            texts.emplace(name->get(), std::move(content.value()));
        }
    }
    return texts;
}

Result<PrefixLists> parse_prefix_lists(const PrefixListTexts& texts) {
    PrefixLists lists;
    for (const auto& [name, text] : texts) {
        auto list = parse_prefix_list(text, name);
        if (!list) return list.error();
        lists.emplace(name, std::move(list.value()));
    }
    return lists;
}

Result<LoadedPolicy> load_policy_file(const std::string& path, const std::map<std::string, uint32_t>& previous_ids,
                                      const PolicyLoadOptions& options) {
    const auto failure = [&path](std::string_view doing, int error) {
        return Error{path + ": cannot " + std::string(doing) + ": " + std::generic_category().message(error)};
    };
    const std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
    if (!file) return failure("open", errno);
    std::string text;
    char buffer[1 << 16];
    size_t got = 0;
    while ((got = std::fread(buffer, 1, sizeof(buffer), file.get())) > 0) {
        text.append(buffer, got);
        if (text.size() > kMaxFileBytes)
            return Error{path + ": larger than " + std::to_string(kMaxFileBytes >> 20) + " MiB; not a policy file"};
    }
    if (std::ferror(file.get())) return failure("read", errno);
    auto texts = read_match_files(text, path);
    if (!texts) return texts.error();
    auto lists = parse_prefix_lists(texts.value());
    if (!lists) return lists.error();
    return load_policy_toml(text, path, previous_ids, options, lists.value());
}

}  // namespace sluice
