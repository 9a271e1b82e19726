// SPDX-License-Identifier: Apache-2.0
// The policy loader's request-level tables: [[request_domain]] (how an HTTP
// request's headers become descriptor entries) and [[request_class]] (a
// limit on the requests whose descriptors match it), read key by key with the
// helpers of policy_toml_fields.cpp and compiled with rate_limits.h, then
// checked as a whole: names unique, ids 1..N in file order, and no two
// classes a descriptor could match with equally many fixed values. Apart from
// policy_toml.cpp because the packet dataplanes never see any of it.
#include <algorithm>
#include <map>

#include "policy_toml_internal.h"

namespace sluice::policy_toml_internal {
namespace {

constexpr uint32_t kMaxRequestClasses = SLUICE_MAX_CLASSES - 1;

constexpr std::string_view kDomainKeys[] = {"name", "headers", "signed", "anonymous", "cost_header"};
constexpr std::string_view kRequestClassKeys[] = {"name",   "domain", "descriptor", "match",        "limit",
                                                  "cost",   "max_cost", "shadow",   "on_table_full", "fleet"};
constexpr Choice<bool> kRequestTableFullChoices[] = {{"closed", false}, {"open", true}};
constexpr std::string_view kLimitKeys[] = {"algorithm", "rate", "burst", "limit", "window"};
constexpr std::string_view kRequestFleetKeys[] = {"rate", "burst", "on_unavailable", "fallback_rate"};

const std::string kDomainRule =
    "use 1-" + std::to_string(kMaxRequestDomainLength) + " characters of printable ASCII without spaces or quotes";
const std::string kKeyRule = "use 1-" + std::to_string(kMaxRequestKeyLength) + " characters of a-z, 0-9, _, - and .";
const std::string kValueRule =
    "a value is 1.." + std::to_string(kMaxRequestValueBytes) + " bytes without control characters";
constexpr std::string_view kTokenRule = "an HTTP token: letters, digits and !#$%&'*+-.^_`|~";

// "[tenant, user]"
std::string key_list(const std::vector<RequestKey>& keys) {
    std::string text;
    for (const RequestKey& key : keys) text += (text.empty() ? "" : ", ") + key.key;
    return "[" + text + "]";
}

// A request class as read, with where the loader points when it could tie
// with another: its match, or its descriptor when it fixes nothing.
struct ParsedRequest {
    RequestClass cls;
    std::string tie_field;
    toml::source_region tie_where;
};

class RequestReader {
  public:
    RequestReader(std::string_view path, bool fleet_leasing) : path_(path), fleet_leasing_(fleet_leasing) {}

    Result<RequestTables> read(const toml::table& root);

  private:
    Result<const toml::array*> tables(const Fields& top, std::string_view key, size_t max) const;
    Result<RequestDomain> read_domain(const toml::table& table, size_t number);
    Status read_headers(const Fields& domain, RequestDomain& out) const;
    Status read_signed(const Fields& domain, RequestDomain& out) const;
    Result<ParsedRequest> read_class(const toml::table& table, size_t number);
    Status read_descriptor(const Fields& cls, RequestClass& out) const;
    Status read_match(const Fields& cls, RequestClass& out) const;
    Result<RequestLimit> read_limit(const Fields& limit) const;
    Status read_costs(const Fields& cls, const Fields& limit, RequestClass& out) const;
    Result<RequestFleet> read_request_fleet(const Fields& fleet, const RequestClass& cls) const;
    Status refuse_ties(const std::vector<ParsedRequest>& classes) const;

    std::string_view path_;
    bool fleet_leasing_;
    std::map<std::string, toml::source_region> domain_names_;
    std::map<std::string, toml::source_region> class_names_;
};

// The array of tables at `key` ([[key]]), at most `max` of them; nullptr when absent.
Result<const toml::array*> RequestReader::tables(const Fields& top, std::string_view key, size_t max) const {
    const toml::node* node = top.find(key);
    if (!node) return static_cast<const toml::array*>(nullptr);
    const toml::array* list = node->as_array();
    if (!list)
        return top.at(*node, key, "expected an array of tables ([[" + std::string(key) + "]]), got " + describe(*node));
    if (list->size() > max)
        return top.at(*list->get(max), std::string(key) + " #" + std::to_string(max + 1),
                      "a policy holds at most " + std::to_string(max) + " [[" + std::string(key) + "]] tables" +
                          (key == "request_class" ? " (ids 1.." + std::to_string(max) + ")" : std::string()));
    for (size_t i = 0; i < list->size(); i++)
        if (!list->get(i)->is_table())
            return top.at(*list->get(i), std::string(key) + " #" + std::to_string(i + 1),
                          "expected a table, got " + describe(*list->get(i)));
    return list;
}

Status RequestReader::read_headers(const Fields& domain, RequestDomain& out) const {
    auto table = domain.table("headers");
    if (!table) return table.error();
    if (!table.value()) return ok_status();
    const Fields headers(path_, *table.value(), domain.field("headers"));
    for (auto&& [key, value] : *table.value()) {
        const std::string_view name = key.str();
        if (!valid_descriptor_key(name))
            return located(path_, key.source(), headers.field(name),
                           in_quotes(name) + " is not a valid descriptor key: " + kKeyRule);
        if (name == kRemoteAddressKey)
            return located(path_, key.source(), headers.field(name),
                           "remote_address is the client's address, taken from the connection, never from a "
                           "header; remove it here (a class may still count by it)");
        const auto* header = value.as_string();
        if (!header) return headers.at(value, name, "expected a header name (a string), got " + describe(value));
        if (!valid_http_token(header->get()))
            return headers.at(value, name,
                              in_quotes(header->get()) + " is not an HTTP header name (" + std::string(kTokenRule) + ")");
        out.headers.emplace_back(std::string(name), header->get());
    }
    return ok_status();
}

Status RequestReader::read_signed(const Fields& domain, RequestDomain& out) const {
    const toml::node* node = domain.find("signed");
    if (!node) return ok_status();
    const toml::array* list = node->as_array();
    if (!list) return domain.at(*node, "signed", "expected an array of descriptor keys, got " + describe(*node));
    for (size_t i = 0; i < list->size(); i++) {
        const toml::node& item = *list->get(i);
        const std::string key = "signed[" + std::to_string(i) + "]";
        const auto* name = item.as_string();
        if (!name) return domain.at(item, key, "expected a descriptor key (a string), got " + describe(item));
        const bool has_header = std::any_of(out.headers.begin(), out.headers.end(),
                                            [&](const auto& header) { return header.first == name->get(); });
        if (!has_header)
            return domain.at(item, key,
                             in_quotes(name->get()) +
                                 " is not a key of headers: a signed key's value, and its signature, come from "
                                 "its header");
        if (std::find(out.signed_keys.begin(), out.signed_keys.end(), name->get()) != out.signed_keys.end())
            return domain.at(item, key, in_quotes(name->get()) + " is listed twice");
        out.signed_keys.push_back(name->get());
    }
    return ok_status();
}

Result<RequestDomain> RequestReader::read_domain(const toml::table& table, size_t number) {
    const toml::node* name_node = table.get("name");
    const std::string label = name_node && name_node->is_string()
                                  ? "request_domain " + in_quotes(name_node->as_string()->get())
                                  : "request_domain #" + std::to_string(number);
    const Fields domain(path_, table, label);
    if (auto keys = domain.only(kDomainKeys); !keys) return keys.error();
    if (!name_node) return domain.here("name is required");
    auto name = domain.string("name");
    if (!name) return name.error();
    RequestDomain out;
    out.name = *name.value();
    if (!valid_request_domain(out.name))
        return domain.at(*name_node, "name", in_quotes(out.name) + " is not a valid domain name: " + kDomainRule);
    if (const auto [earlier, first] = domain_names_.emplace(out.name, name_node->source()); !first)
        return domain.at(*name_node, "name",
                         in_quotes(out.name) + " is already the name of the request_domain at " +
                             position(path_, earlier->second) + "; a domain is described once");

    if (auto headers = read_headers(domain, out); !headers) return headers.error();
    if (auto signed_keys = read_signed(domain, out); !signed_keys) return signed_keys.error();
    auto anonymous = domain.string("anonymous");
    if (!anonymous) return anonymous.error();
    if (anonymous.value()) {
        if (!valid_descriptor_value(*anonymous.value()))
            return domain.at(*domain.find("anonymous"), "anonymous",
                             in_quotes(*anonymous.value()) + " is not a descriptor value: " + kValueRule);
        out.anonymous = *anonymous.value();
    }
    auto cost_header = domain.string("cost_header");
    if (!cost_header) return cost_header.error();
    if (cost_header.value()) {
        if (!valid_http_token(*cost_header.value()))
            return domain.at(
                *domain.find("cost_header"), "cost_header",
                in_quotes(*cost_header.value()) + " is not an HTTP header name (" + std::string(kTokenRule) + ")");
        out.cost_header = *cost_header.value();
    }
    return out;
}

Status RequestReader::read_descriptor(const Fields& cls, RequestClass& out) const {
    const toml::node* node = cls.find("descriptor");
    if (!node)
        return cls.here(
            "descriptor is required: the keys this class counts by, in the order a descriptor lists them (e.g. "
            "[\"tenant\", \"user\"]); [] counts the whole domain as one");
    const toml::array* list = node->as_array();
    if (!list) return cls.at(*node, "descriptor", "expected an array of descriptor keys, got " + describe(*node));
    if (list->size() > kMaxRequestKeys)
        return cls.at(*list->get(kMaxRequestKeys), "descriptor[" + std::to_string(kMaxRequestKeys) + "]",
                      "a descriptor has at most " + std::to_string(kMaxRequestKeys) + " keys");
    for (size_t i = 0; i < list->size(); i++) {
        const toml::node& item = *list->get(i);
        const std::string key = "descriptor[" + std::to_string(i) + "]";
        const auto* name = item.as_string();
        if (!name) return cls.at(item, key, "expected a descriptor key (a string), got " + describe(item));
        if (!valid_descriptor_key(name->get()))
            return cls.at(item, key, in_quotes(name->get()) + " is not a valid descriptor key: " + kKeyRule);
        for (size_t j = 0; j < out.keys.size(); j++)
            if (out.keys[j].key == name->get())
                return cls.at(item, key,
                              in_quotes(name->get()) + " is listed twice (also descriptor[" + std::to_string(j) + "])");
        out.keys.push_back(RequestKey{name->get(), std::nullopt});
    }
    return ok_status();
}

Status RequestReader::read_match(const Fields& cls, RequestClass& out) const {
    auto table = cls.table("match");
    if (!table) return table.error();
    if (!table.value()) return ok_status();
    const Fields match(path_, *table.value(), cls.field("match"));
    for (auto&& [key, value] : *table.value()) {
        const std::string_view name = key.str();
        const auto found =
            std::find_if(out.keys.begin(), out.keys.end(), [&](const RequestKey& k) { return k.key == name; });
        if (found == out.keys.end())
            return located(path_, key.source(), match.field(name),
                           in_quotes(name) + " is not in descriptor " + key_list(out.keys) +
                               ": a fixed value is for one of the class's keys");
        const auto* text = value.as_string();
        if (!text) return match.at(value, name, "expected a fixed value (a string), got " + describe(value));
        if (!valid_descriptor_value(text->get()))
            return match.at(value, name, in_quotes(text->get()) + " is not a descriptor value: " + kValueRule);
        found->value = text->get();
    }
    return ok_status();
}

Result<RequestLimit> RequestReader::read_limit(const Fields& limit) const {
    if (auto keys = limit.only(kLimitKeys); !keys) return keys.error();
    auto algorithm = limit.choice("algorithm", kAlgorithms);
    if (!algorithm) return algorithm.error();
    const Algorithm chosen = algorithm.value().value_or(Algorithm::gcra);
    const std::string chosen_name = in_quotes(algorithm_name(static_cast<uint8_t>(chosen)));
    RequestLimit out;
    out.algorithm = static_cast<uint8_t>(chosen);

    if (chosen == Algorithm::gcra) {
        for (std::string_view key : {"limit", "window"})
            if (const toml::node* value = limit.find(key))
                return limit.at(*value, key,
                                "needs algorithm = \"fixed_window\", \"sliding_window\" or \"sliding_log\"; gcra "
                                "(the default) takes rate and burst");
        auto rate = limit.integer("rate", 1, static_cast<int64_t>(SLUICE_RATE_MAX));
        if (!rate) return rate.error();
        auto burst = limit.integer("burst", 1, static_cast<int64_t>(SLUICE_BURST_MAX));
        if (!burst) return burst.error();
        if (!rate.value()) return limit.here("rate is required (requests per second)");
        if (!burst.value()) return limit.here("burst is required (requests)");
        HumanLimit human;
        human.rate_per_s = static_cast<uint64_t>(*rate.value());
        human.burst = static_cast<uint64_t>(*burst.value());
        human.unit = Unit::packets;  // one request, one unit
        auto compiled = compile_source_limit(human, kDefaultMaxFrameBytes, limit.name());
        if (!compiled) return limit.limit_error(compiled.error());
        out.gcra = compiled.value().current;
        out.rate_per_s = human.rate_per_s;
        out.burst = human.burst;
        return out;
    }

    for (std::string_view key : {"rate", "burst"})
        if (const toml::node* value = limit.find(key))
            return limit.at(*value, key,
                            "belongs to algorithm = \"gcra\" (the token bucket); algorithm = " + chosen_name +
                                " counts limit requests per window");
    auto count = limit.integer("limit", 1, kUnbounded);
    if (!count) return count.error();
    auto window = limit.duration("window", SLUICE_WINDOW_MIN_NS, SLUICE_WINDOW_MAX_NS);
    if (!window) return window.error();
    if (!count.value())
        return limit.here("limit is required for algorithm = " + chosen_name + " (requests per window)");
    if (!window.value())
        return limit.here("window is required for algorithm = " + chosen_name +
                          " (a duration such as \"1s\" or \"10m\")");
    WindowSettings settings;
    settings.algorithm = chosen;
    settings.limit = static_cast<uint64_t>(*count.value());
    settings.window_ns = *window.value();
    settings.unit = Unit::packets;
    auto compiled = compile_window_level(settings, limit.name());
    if (!compiled) return limit.limit_error(compiled.error());
    out.window = compiled.value().window;
    return out;
}

Status RequestReader::read_costs(const Fields& cls, const Fields& limit, RequestClass& out) const {
    auto cost = cls.integer("cost", 1, kUnbounded);
    if (!cost) return cost.error();
    auto max_cost = cls.integer("max_cost", 1, kUnbounded);
    if (!max_cost) return max_cost.error();
    out.cost = static_cast<uint64_t>(cost.value().value_or(1));
    out.max_cost = max_cost.value() ? static_cast<uint64_t>(*max_cost.value()) : out.cost;
    if (out.max_cost < out.cost)
        return cls.at(*cls.find("max_cost"), "max_cost",
                      std::to_string(out.max_cost) + " is below cost " + std::to_string(out.cost) +
                          ": a request weighs cost when its caller names no weight, and a caller may name at most "
                          "max_cost");
    if (out.limit.algorithm == SLUICE_ALGORITHM_SLIDING_LOG)
        for (std::string_view key : {"cost", "max_cost"})
            if (const toml::node* value = cls.find(key); value && value->value_or<int64_t>(1) != 1)
                return cls.at(*value, key,
                              "must be 1 with a sliding_log limit: the log keeps one time per admitted request, so "
                              "it cannot weigh requests; use fixed_window or sliding_window for weighted requests");
    // The largest weight must fit in what the limit holds, or a request
    // naming it would be refused whatever the counter held.
    const uint64_t capacity = request_capacity(out.limit);
    if (out.max_cost <= capacity) return ok_status();
    const bool gcra = out.limit.algorithm == SLUICE_ALGORITHM_GCRA;
    const std::string_view capacity_key = gcra ? "burst" : "limit";
    const std::string what = std::string(gcra ? "exceeds the limit's burst " : "exceeds the limit's limit ") +
                             std::to_string(capacity) + (gcra ? "" : " per window") + " (" + limit.field(capacity_key) +
                             ", " + position(path_, limit.find(capacity_key)->source()) +
                             "): a request that costs more than the limit holds could never pass";
    if (max_cost.value()) return cls.at(*cls.find("max_cost"), "max_cost", std::to_string(out.max_cost) + " " + what);
    return cls.at(*cls.find("cost"), "cost", std::to_string(out.cost) + " " + what + " (max_cost defaults to cost)");
}

Result<RequestFleet> RequestReader::read_request_fleet(const Fields& fleet, const RequestClass& cls) const {
    if (!fleet_leasing_) return fleet.here("this daemon has no [fleet] servers in its config to lease the quota from");
    if (auto keys = fleet.only(kRequestFleetKeys); !keys) return keys.error();
    for (const RequestKey& key : cls.keys)
        if (!key.value)
            return fleet.here(
                "needs every descriptor key fixed in match (the fleet's quota is one bucket for the "
                "whole class), and " +
                in_quotes(key.key) + " has no fixed value; put the fleet quota on a class that fixes " + key.key +
                ", or drop it from descriptor");
    // read_fleet takes unit too; only() above has refused it: requests are the unit.
    auto quota = read_fleet(fleet, ClassSettings{});
    if (!quota) return quota.error();
    RequestFleet out;
    out.rate_per_s = quota.value().rate_per_s;
    out.burst = quota.value().burst;
    out.fail_open = quota.value().fail_open;
    out.fallback_rate_per_s = quota.value().fallback_rate_per_s;
    out.definition_hash = fleet_definition_hash(out.rate_per_s, out.burst, SLUICE_UNIT_PACKETS);
    if (out.burst < cls.max_cost) {
        const std::string what = "burst " + std::to_string(out.burst) + " is below max_cost " +
                                 std::to_string(cls.max_cost) +
                                 ": credit is leased in at most a burst, so a request of max_cost could never pass";
        if (const toml::node* stated = fleet.find("burst")) return fleet.at(*stated, "burst", what);
        return fleet.here(what + " (burst defaults to a tenth of rate); set burst");
    }
    return out;
}

Result<ParsedRequest> RequestReader::read_class(const toml::table& table, size_t number) {
    const toml::node* name_node = table.get("name");
    const std::string label = name_node && name_node->is_string()
                                  ? "request_class " + in_quotes(name_node->as_string()->get())
                                  : "request_class #" + std::to_string(number);
    const Fields cls(path_, table, label);
    if (auto keys = cls.only(kRequestClassKeys); !keys) return keys.error();
    if (!name_node) return cls.here("name is required");
    auto name = cls.string("name");
    if (!name) return name.error();
    ParsedRequest parsed;
    RequestClass& out = parsed.cls;
    out.name = *name.value();
    if (!valid_request_class_name(out.name))
        return cls.at(*name_node, "name",
                      in_quotes(out.name) +
                          " is not a valid class name: use 1-63 characters of a-z, 0-9, _ and -, starting with a "
                          "letter");
    if (const auto [earlier, first] = class_names_.emplace(out.name, name_node->source()); !first)
        return cls.at(*name_node, "name",
                      in_quotes(out.name) + " is already the name of the request_class at " +
                          position(path_, earlier->second) + "; request class names must be unique");

    auto domain = cls.string("domain");
    if (!domain) return domain.error();
    if (!domain.value())
        return cls.here("domain is required: the domain (as a proxy names it) whose descriptors this class limits");
    if (!valid_request_domain(*domain.value()))
        return cls.at(*cls.find("domain"), "domain",
                      in_quotes(*domain.value()) + " is not a valid domain name: " + kDomainRule);
    out.domain = *domain.value();

    if (auto descriptor = read_descriptor(cls, out); !descriptor) return descriptor.error();
    if (auto match = read_match(cls, out); !match) return match.error();
    const bool fixes_some = std::any_of(out.keys.begin(), out.keys.end(), [](const RequestKey& k) { return k.value; });
    parsed.tie_field = cls.field(fixes_some ? "match" : "descriptor");
    parsed.tie_where = cls.find(fixes_some ? "match" : "descriptor")->source();

    auto limit_table = cls.table("limit");
    if (!limit_table) return limit_table.error();
    if (!limit_table.value())
        return cls.here(
            "limit is required: { rate = ..., burst = ... } (gcra, requests per second) or { algorithm = "
            "\"fixed_window\", limit = ..., window = \"1m\" }");
    const Fields limit(path_, *limit_table.value(), cls.field("limit"));
    auto compiled = read_limit(limit);
    if (!compiled) return compiled.error();
    out.limit = compiled.value();
    if (auto costs = read_costs(cls, limit, out); !costs) return costs.error();

    auto shadow = cls.boolean("shadow");
    if (!shadow) return shadow.error();
    out.shadow = shadow.value().value_or(false);

    auto table_full = cls.choice("on_table_full", kRequestTableFullChoices);
    if (!table_full) return table_full.error();
    out.open_when_table_full = table_full.value().value_or(false);

    auto fleet = cls.table("fleet");
    if (!fleet) return fleet.error();
    if (fleet.value()) {
        auto quota = read_request_fleet(Fields(path_, *fleet.value(), cls.field("fleet")), out);
        if (!quota) return quota.error();
        out.fleet = quota.value();
    }
    return parsed;
}

// The matcher takes, of the classes a descriptor matches, the one with the
// most fixed values: two that could tie would leave it nothing to choose by.
Status RequestReader::refuse_ties(const std::vector<ParsedRequest>& classes) const {
    for (size_t later = 0; later < classes.size(); later++)
        for (size_t earlier = 0; earlier < later; earlier++) {
            const RequestClass& a = classes[earlier].cls;
            const RequestClass& b = classes[later].cls;
            if (!request_classes_could_tie(a, b)) continue;
            const size_t fixed =
                std::count_if(b.keys.begin(), b.keys.end(), [](const RequestKey& k) { return k.value.has_value(); });
            return located(path_, classes[later].tie_where, classes[later].tie_field,
                           "could tie with request_class " + in_quotes(a.name) + " (" + classes[earlier].tie_field + ", " +
                               position(path_, classes[earlier].tie_where) + "): both count domain " +
                               in_quotes(a.domain) + " by descriptor " + key_list(a.keys) + ", each with " +
                               std::to_string(fixed) + (fixed == 1 ? " fixed value," : " fixed values,") +
                               " and fix no key to different values, so a descriptor could match both with "
                               "equally many fixed values; fix different values for a key both fix, or give one "
                               "more fixed values than the other");
        }
    return ok_status();
}

Result<RequestTables> RequestReader::read(const toml::table& root) {
    const Fields top(path_, root, "");
    RequestTables out;
    auto domains = tables(top, "request_domain", kMaxRequestClasses);
    if (!domains) return domains.error();
    if (domains.value())
        for (size_t i = 0; i < domains.value()->size(); i++) {
            auto domain = read_domain(*domains.value()->get(i)->as_table(), i + 1);
            if (!domain) return domain.error();
            out.domains.push_back(std::move(domain.value()));
        }

    auto classes = tables(top, "request_class", kMaxRequestClasses);
    if (!classes) return classes.error();
    std::vector<ParsedRequest> parsed;
    if (classes.value())
        for (size_t i = 0; i < classes.value()->size(); i++) {
            auto cls = read_class(*classes.value()->get(i)->as_table(), i + 1);
            if (!cls) return cls.error();
            cls.value().cls.id = static_cast<uint32_t>(i + 1);  // ids in file order
            parsed.push_back(std::move(cls.value()));
        }
    if (auto ties = refuse_ties(parsed); !ties) return ties.error();
    for (ParsedRequest& cls : parsed) out.classes.push_back(std::move(cls.cls));
    return out;
}

}  // namespace

Result<RequestTables> read_requests(std::string_view path, const toml::table& root, bool fleet_leasing) {
    return RequestReader(path, fleet_leasing).read(root);
}

}  // namespace sluice::policy_toml_internal
