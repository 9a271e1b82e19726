// SPDX-License-Identifier: Apache-2.0
#include "daemon_config.h"

#include <net/if.h>

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include "compiled_policy.h"

namespace sluice {
namespace {

// sluiced asks for more than the table's own minimum: below 1024 entries a
// host's sources in debt would not fit.
constexpr uint32_t kMinSourceCapacity = 1024;
constexpr uint32_t kMaxSourceCapacity = SLUICE_SOURCE_CAPACITY_MAX;
// 4 GiB: the prefix lists of SLUICE_PREFIX_CAPACITY_MAX prefixes per family, with room to spare.
constexpr int64_t kMaxPushBytes = int64_t{1} << 32;

std::string where(std::string_view path, const toml::source_region& region) {
    return std::string(path) + ":" + std::to_string(region.begin.line) + ":" + std::to_string(region.begin.column);
}

Error at(std::string_view path, const toml::node& node, std::string_view key, const std::string& what) {
    return Error{where(path, node.source()) + ": " + std::string(key) + ": " + what, std::string(key)};
}

Status string_key(std::string_view path, const toml::node& node, std::string_view key, std::string& out) {
    const auto* value = node.as_string();
    if (value == nullptr) return at(path, node, key, "expected a string");
    out = value->get();
    return ok_status();
}

Status absolute_path_key(std::string_view path, const toml::node& node, std::string_view key, std::string& out) {
    if (auto status = string_key(path, node, key, out); !status) return status;
    if (out.empty() || out.front() != '/') return at(path, node, key, "expected an absolute path, got \"" + out + "\"");
    while (out.size() > 1 && out.back() == '/') out.pop_back();
    return ok_status();
}

Status parse_interface(std::string_view path, const toml::node& node, std::set<std::string>& seen,
                       DaemonConfig& config) {
    const auto* table = node.as_table();
    if (table == nullptr) return at(path, node, "interface", "expected a table ([[interface]])");
    InterfaceConfig interface;
    bool named = false;
    for (const auto& [key, value] : *table) {
        if (key == "name") {
            if (auto status = string_key(path, value, "interface.name", interface.name); !status) return status;
            if (interface.name.empty() || interface.name.size() >= IF_NAMESIZE ||
                interface.name.find('/') != std::string::npos)
                return at(path, value, "interface.name", "\"" + interface.name + "\" is not an interface name");
            if (!seen.insert(interface.name).second)
                return at(path, value, "interface.name", "\"" + interface.name + "\" is listed twice");
            named = true;
        } else if (key == "mode") {
            std::string mode;
            if (auto status = string_key(path, value, "interface.mode", mode); !status) return status;
            auto parsed = parse_xdp_mode(mode);
            if (!parsed) return at(path, value, "interface.mode", parsed.error().message);
            interface.mode = parsed.value();
        } else {
            return at(path, value, "interface." + std::string(key.str()), "unknown key (expected name or mode)");
        }
    }
    if (!named) return at(path, node, "interface.name", "missing: every [[interface]] needs a name");
    config.interfaces.push_back(std::move(interface));
    return ok_status();
}

Status bounded_ms_key(std::string_view path, const toml::node& node, std::string_view key, uint32_t min, uint32_t max,
                      uint32_t& out) {
    const auto* number = node.as_integer();
    if (number == nullptr || number->get() < min || number->get() > max)
        return at(path, node, key, "expected milliseconds in " + std::to_string(min) + ".." + std::to_string(max));
    out = static_cast<uint32_t>(number->get());
    return ok_status();
}

Status parse_fleet(std::string_view path, const toml::node& node, FleetConfig& fleet) {
    const auto* table = node.as_table();
    if (table == nullptr) return at(path, node, "fleet", "expected a table ([fleet])");
    for (const auto& [name, value] : *table) {
        const std::string key = "fleet." + std::string(name.str());
        if (name == "servers") {
            const auto* list = value.as_array();
            if (list == nullptr || list->empty())
                return at(path, value, key, "expected a non-empty list of \"host:port\" strings");
            for (const auto& item : *list) {
                std::string text;
                if (auto status = string_key(path, item, key, text); !status) return status;
                auto endpoint = fleet::parse_redis_endpoint(text);
                if (!endpoint) return at(path, item, key, endpoint.error().message);
                fleet.servers.push_back(endpoint.value());
            }
        } else if (name == "namespace") {
            if (auto status = string_key(path, value, key, fleet.key_namespace); !status) return status;
            const bool plain =
                !fleet.key_namespace.empty() &&
                std::all_of(fleet.key_namespace.begin(), fleet.key_namespace.end(), [](char c) {
                    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == ':';
                });
            if (!plain) return at(path, value, key, "expected letters, digits and _ - . : (no braces: keys hash-tag)");
        } else if (name == "lease_period_ms") {
            if (auto status = bounded_ms_key(path, value, key, 10, 10000, fleet.lease_period_ms); !status)
                return status;
        } else if (name == "timeout_ms") {
            if (auto status = bounded_ms_key(path, value, key, 1, 10000, fleet.timeout_ms); !status) return status;
        } else if (name == "unavailable_after_ms") {
            if (auto status = bounded_ms_key(path, value, key, 1, 600000, fleet.unavailable_after_ms); !status)
                return status;
        } else if (name == "idle_hold_ms") {
            if (auto status = bounded_ms_key(path, value, key, 0, 60000, fleet.idle_hold_ms); !status) return status;
        } else if (name == "username") {
            if (auto status = string_key(path, value, key, fleet.username); !status) return status;
        } else if (name == "password") {
            if (auto status = string_key(path, value, key, fleet.password); !status) return status;
        } else {
            return at(path, value, key,
                      "unknown key (expected servers, namespace, lease_period_ms, timeout_ms, unavailable_after_ms, "
                      "idle_hold_ms, username or password)");
        }
    }
    if (fleet.servers.empty()) return at(path, node, "fleet.servers", "missing: [fleet] needs the Redis servers");
    if (fleet.unavailable_after_ms < fleet.timeout_ms)
        return at(path, node, "fleet.unavailable_after_ms", "must be at least fleet.timeout_ms");
    if (!fleet.username.empty() && fleet.password.empty())
        return at(path, node, "fleet.password", "missing: a username needs a password");
    return ok_status();
}

Status bounded_key(std::string_view path, const toml::node& node, std::string_view key, int64_t min, int64_t max,
                   uint64_t& out) {
    const auto* number = node.as_integer();
    if (number == nullptr || number->get() < min || number->get() > max)
        return at(path, node, key, "expected an integer in " + std::to_string(min) + ".." + std::to_string(max));
    out = static_cast<uint64_t>(number->get());
    return ok_status();
}

Status parse_request(std::string_view path, const toml::node& node, RequestConfig& request) {
    const auto* table = node.as_table();
    if (table == nullptr) return at(path, node, "request", "expected a table ([request])");
    request.enabled = true;
    for (const auto& [name, value] : *table) {
        const std::string key = "request." + std::string(name.str());
        uint64_t number = 0;
        Status status = ok_status();
        if (name == "http_address") {
            status = string_key(path, value, key, request.http_address);
        } else if (name == "grpc_address") {
            status = string_key(path, value, key, request.grpc_address);
        } else if (name == "trusted_proxies") {
            const auto* list = value.as_array();
            if (list == nullptr) return at(path, value, key, "expected an array of CIDR prefixes");
            for (const auto& item : *list) {
                const auto* text = item.as_string();
                if (text == nullptr) return at(path, item, key, "expected a CIDR prefix string");
                std::string cidr = text->get();
                if (cidr.find('/') == std::string::npos) cidr += cidr.find(':') == std::string::npos ? "/32" : "/128";
                if (auto prefix = parse_prefix(cidr, 0); !prefix) return at(path, item, key, prefix.error().message);
                request.trusted_proxies.push_back(text->get());
            }
        } else if (name == "client_address_header") {
            status = string_key(path, value, key, request.client_address_header);
            if (status && request.client_address_header != "X-Forwarded-For" &&
                request.client_address_header != "Forwarded")
                return at(path, value, key, "expected \"X-Forwarded-For\" or \"Forwarded\"");
        } else if (name == "identity_key_file") {
            status = absolute_path_key(path, value, key, request.identity_key_file);
        } else if (name == "http_threads") {
            status = bounded_key(path, value, key, 1, 256, number);
            request.http_threads = static_cast<uint32_t>(number);
        } else if (name == "max_in_flight") {
            status = bounded_key(path, value, key, 1, 1'000'000, number);
            request.max_in_flight = static_cast<uint32_t>(number);
        } else if (name == "domain_rate") {
            status = bounded_key(path, value, key, 0, 1'000'000'000, request.domain_rate);
        } else if (name == "domain_burst") {
            status = bounded_key(path, value, key, 0, 1'000'000'000, request.domain_burst);
        } else if (name == "deadline_ms") {
            status = bounded_ms_key(path, value, key, 1, 60000, request.deadline_ms);
        } else if (name == "max_counters") {
            status = bounded_key(path, value, key, 1, 100'000'000, number);
            request.max_counters = static_cast<uint32_t>(number);
        } else if (name == "grpc_max_message_bytes") {
            status = bounded_key(path, value, key, 1024, 4 * 1024 * 1024, number);
            request.grpc_max_message_bytes = static_cast<uint32_t>(number);
        } else {
            return at(path, value, key,
                      "unknown key (expected http_address, grpc_address, trusted_proxies, client_address_header, "
                      "identity_key_file, http_threads, max_in_flight, domain_rate, domain_burst, deadline_ms, "
                      "max_counters or grpc_max_message_bytes)");
        }
        if (!status) return status;
    }
    if (request.http_address.empty() && request.grpc_address.empty())
        return at(path, node, "request", "[request] needs http_address, grpc_address or both");
    return ok_status();
}

Status parse_key(std::string_view path, std::string_view key, const toml::node& value, DaemonConfig& config,
                 std::set<std::string>& interface_names) {
    if (key == "socket") return absolute_path_key(path, value, key, config.socket);
    if (key == "socket_group") return string_key(path, value, key, config.socket_group);
    if (key == "state_dir") return absolute_path_key(path, value, key, config.state_dir);
    if (key == "bpffs_dir") return absolute_path_key(path, value, key, config.bpffs_dir);
    if (key == "policy_file") {
        if (auto status = string_key(path, value, key, config.policy_file); !status) return status;
        if (!config.policy_file.empty() && config.policy_file.front() != '/')
            return at(path, value, key, "expected an absolute path (SIGHUP re-reads it from any working directory)");
        return ok_status();
    }
    if (key == "metrics_address") return string_key(path, value, key, config.metrics_address);
    if (key == "log_level") {
        std::string name;
        if (auto status = string_key(path, value, key, name); !status) return status;
        const auto level = parse_log_level(name);
        if (!level) return at(path, value, key, "\"" + name + "\" is not one of debug, info, warn, error");
        config.log_level = *level;
        return ok_status();
    }
    if (key == "detach_on_exit") {
        const auto* flag = value.as_boolean();
        if (flag == nullptr) return at(path, value, key, "expected true or false");
        config.detach_on_exit = flag->get();
        return ok_status();
    }
    if (key == "source_capacity") {
        const auto* number = value.as_integer();
        if (number == nullptr || number->get() < kMinSourceCapacity || number->get() > kMaxSourceCapacity)
            return at(path, value, key,
                      "expected an integer in " + std::to_string(kMinSourceCapacity) + ".." +
                          std::to_string(kMaxSourceCapacity));
        config.source_capacity = static_cast<uint32_t>(number->get());
        return ok_status();
    }
    if (key == "drop_sample_period") {
        const auto* number = value.as_integer();
        const int64_t period = number ? number->get() : 0;
        if (period < 1 || period > SLUICE_DROP_SAMPLE_PERIOD_MAX || (period & (period - 1)) != 0)
            return at(path, value, key,
                      "expected a power of two in 1.." + std::to_string(SLUICE_DROP_SAMPLE_PERIOD_MAX));
        config.drop_sample_period = static_cast<uint32_t>(period);
        return ok_status();
    }
    if (key == "prefix_capacity") {
        const auto* number = value.as_integer();
        if (number == nullptr || number->get() < 1 || number->get() > SLUICE_PREFIX_CAPACITY_MAX)
            return at(path, value, key,
                      "expected an integer in 1.." + std::to_string(SLUICE_PREFIX_CAPACITY_MAX) +
                          " (prefixes per address family)");
        config.prefix_capacity = static_cast<uint32_t>(number->get());
        return ok_status();
    }
    if (key == "max_push_bytes") {
        const auto* number = value.as_integer();
        if (number == nullptr || number->get() < 1024 || number->get() > kMaxPushBytes)
            return at(path, value, key, "expected an integer in 1024.." + std::to_string(kMaxPushBytes) + " (bytes)");
        config.max_push_bytes = static_cast<uint64_t>(number->get());
        return ok_status();
    }
    if (key == "max_bans") {
        const auto* number = value.as_integer();
        if (number == nullptr || number->get() < 1 || number->get() > SLUICE_MAX_BANS)
            return at(
                path, value, key,
                "expected an integer in 1.." + std::to_string(SLUICE_MAX_BANS) + " (timed bans in force at once)");
        config.max_bans = static_cast<uint32_t>(number->get());
        return ok_status();
    }
    if (key == "interface") {
        const auto* list = value.as_array();
        if (list == nullptr) return at(path, value, key, "expected [[interface]] tables");
        for (const auto& item : *list) {
            if (auto status = parse_interface(path, item, interface_names, config); !status) return status;
        }
        return ok_status();
    }
    if (key == "fleet") return parse_fleet(path, value, config.fleet);
    if (key == "request") return parse_request(path, value, config.request);
    return at(path, value, key,
              "unknown key (expected socket, socket_group, state_dir, bpffs_dir, policy_file, metrics_address, "
              "log_level, detach_on_exit, source_capacity, drop_sample_period, prefix_capacity, max_push_bytes, "
              "max_bans, [[interface]], [fleet] or [request])");
}

}  // namespace

Result<DaemonConfig> parse_daemon_config(std::string_view text, std::string_view path) {
    toml::table root;
    try {
        root = toml::parse(text, path);
    } catch (const toml::parse_error& error) {
        return Error{where(path, error.source()) + ": " + std::string(error.description())};
    }
    DaemonConfig config;
    std::set<std::string> interface_names;
    // Report problems in file order, so the first error is the first in the file.
    std::vector<std::pair<std::string, const toml::node*>> keys;
    for (const auto& [key, value] : root) keys.emplace_back(std::string(key.str()), &value);
    std::sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) {
        const auto& x = a.second->source().begin;
        const auto& y = b.second->source().begin;
        return std::tie(x.line, x.column) < std::tie(y.line, y.column);
    });
    for (const auto& [key, value] : keys) {
        if (auto status = parse_key(path, key, *value, config, interface_names); !status) return status.error();
    }
    return config;
}

Result<FleetConfig> parse_fleet_config(std::string_view text, std::string_view path) {
    toml::table root;
    try {
        root = toml::parse(text, path);
    } catch (const toml::parse_error& error) {
        return Error{where(path, error.source()) + ": " + std::string(error.description())};
    }
    FleetConfig fleet;
    for (const auto& [key, value] : root) {
        if (key != "fleet") return at(path, value, key.str(), "unknown key (this file holds only a [fleet] table)");
        if (auto status = parse_fleet(path, value, fleet); !status) return status.error();
    }
    if (fleet.servers.empty()) return Error{std::string(path) + ": no [fleet] table", "fleet"};
    return fleet;
}

namespace {
Result<std::string> read_config(const std::string& path) {
    std::ifstream file(path);
    if (!file) return Error{"cannot read the config " + path + ": " + std::strerror(errno)};
    std::ostringstream text;
    text << file.rdbuf();
    if (file.bad()) return Error{"cannot read the config " + path + ": " + std::strerror(errno)};
    return text.str();
}
}  // namespace

Result<DaemonConfig> load_daemon_config(const std::string& path) {
    auto text = read_config(path);
    if (!text) return text.error();
    return parse_daemon_config(text.value(), path);
}

Result<FleetConfig> load_fleet_config(const std::string& path) {
    auto text = read_config(path);
    if (!text) return text.error();
    return parse_fleet_config(text.value(), path);
}

}  // namespace sluice
