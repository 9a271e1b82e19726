// SPDX-License-Identifier: Apache-2.0
// sluiced's config file and log lines: defaults, every key, and refusals that
// name file:line:column and the key.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "daemon_config.h"
#include "logger.h"

namespace sluice::daemon_config_test {
namespace {

TEST(DaemonConfig, EmptyFileGivesTheDocumentedDefaults) {
    auto config = parse_daemon_config("", "sluiced.toml");
    ASSERT_TRUE(config.ok()) << config.error().message;
    EXPECT_EQ(config.value().socket, "/run/sluice/sluiced.sock");
    EXPECT_EQ(config.value().state_dir, "/var/lib/sluice");
    EXPECT_EQ(config.value().bpffs_dir, "/sys/fs/bpf/sluice");
    EXPECT_EQ(config.value().metrics_address, "127.0.0.1:9464");
    EXPECT_FALSE(config.value().detach_on_exit);
    EXPECT_EQ(config.value().log_level, LogLevel::info);
    EXPECT_TRUE(config.value().interfaces.empty());
    EXPECT_TRUE(config.value().fleet.servers.empty());
}

TEST(DaemonConfig, ThePackagedExampleLoadsAndMatchesTheDefaults) {
    std::ifstream file(SLUICE_PACKAGING_DIR "/sluiced.toml");
    ASSERT_TRUE(file) << "packaging/sluiced.toml is missing";
    std::ostringstream text;
    text << file.rdbuf();
    auto example = parse_daemon_config(text.str(), "sluiced.toml");
    ASSERT_TRUE(example.ok()) << example.error().message;
    auto defaults = parse_daemon_config("", "defaults");
    ASSERT_TRUE(defaults.ok());
    EXPECT_EQ(example.value().socket, defaults.value().socket);
    EXPECT_EQ(example.value().state_dir, defaults.value().state_dir);
    EXPECT_EQ(example.value().bpffs_dir, defaults.value().bpffs_dir);
    EXPECT_EQ(example.value().source_capacity, defaults.value().source_capacity);
    EXPECT_EQ(example.value().prefix_capacity, defaults.value().prefix_capacity);
    EXPECT_EQ(example.value().max_push_bytes, defaults.value().max_push_bytes);
    EXPECT_EQ(example.value().max_bans, defaults.value().max_bans);
    EXPECT_EQ(defaults.value().max_bans, 1024u);
    // Installed as a conffile and started at once: it must attach to nothing
    // until the operator names an interface.
    EXPECT_TRUE(example.value().interfaces.empty());
}

TEST(DaemonConfig, ReadsEveryKey) {
    auto config = parse_daemon_config(R"(
socket = "/tmp/s/sluiced.sock"
socket_group = "adm"
state_dir = "/tmp/s/state/"
bpffs_dir = "/sys/fs/bpf/x"
policy_file = "/etc/sluice/policy.toml"
metrics_address = "127.0.0.1:9999"
log_level = "debug"
detach_on_exit = true
source_capacity = 4096
drop_sample_period = 1
prefix_capacity = 2000000
max_push_bytes = 1073741824
max_bans = 4096
[[interface]]
name = "sl0"
[[interface]]
name = "sl1"
mode = "generic"
)",
                                      "c.toml");
    ASSERT_TRUE(config.ok()) << config.error().message;
    const DaemonConfig& c = config.value();
    EXPECT_EQ(c.socket, "/tmp/s/sluiced.sock");
    EXPECT_EQ(c.socket_group, "adm");
    EXPECT_EQ(c.state_dir, "/tmp/s/state");  // trailing slash dropped
    EXPECT_EQ(c.policy_file, "/etc/sluice/policy.toml");
    EXPECT_EQ(c.log_level, LogLevel::debug);
    EXPECT_TRUE(c.detach_on_exit);
    EXPECT_EQ(c.source_capacity, 4096u);
    EXPECT_EQ(c.drop_sample_period, 1u);
    EXPECT_EQ(c.prefix_capacity, 2000000u);
    EXPECT_EQ(c.max_push_bytes, uint64_t{1} << 30);
    EXPECT_EQ(c.max_bans, 4096u);
    ASSERT_EQ(c.interfaces.size(), 2u);
    EXPECT_EQ(c.interfaces[0].mode, XdpMode::native);
    EXPECT_EQ(c.interfaces[1].name, "sl1");
    EXPECT_EQ(c.interfaces[1].mode, XdpMode::generic);
}

TEST(DaemonConfig, ReadsTheFleetTable) {
    auto config = parse_daemon_config(R"(
[fleet]
servers = ["127.0.0.1:6379", "[::1]:7000"]
namespace = "edge-eu"
lease_period_ms = 200
timeout_ms = 20
unavailable_after_ms = 1000
idle_hold_ms = 0
username = "sluice"
password = "secret"
)",
                                      "c.toml");
    ASSERT_TRUE(config.ok()) << config.error().message;
    const FleetConfig& fleet = config.value().fleet;
    ASSERT_EQ(fleet.servers.size(), 2u);
    EXPECT_EQ(fleet.servers[0], (fleet::RedisEndpoint{"127.0.0.1", 6379}));
    EXPECT_EQ(fleet.servers[1], (fleet::RedisEndpoint{"::1", 7000}));
    EXPECT_EQ(fleet.key_namespace, "edge-eu");
    EXPECT_EQ(fleet.lease_period_ms, 200u);
    EXPECT_EQ(fleet.timeout_ms, 20u);
    EXPECT_EQ(fleet.unavailable_after_ms, 1000u);
    EXPECT_EQ(fleet.idle_hold_ms, 0u);
    EXPECT_EQ(fleet.username, "sluice");
    EXPECT_EQ(fleet.password, "secret");
}

TEST(DaemonConfig, FleetDefaults) {
    auto config = parse_daemon_config("[fleet]\nservers = [\"redis:6379\"]", "c.toml");
    ASSERT_TRUE(config.ok()) << config.error().message;
    const FleetConfig& fleet = config.value().fleet;
    EXPECT_EQ(fleet.key_namespace, "sluice");
    EXPECT_EQ(fleet.lease_period_ms, 100u);
    EXPECT_EQ(fleet.timeout_ms, 50u);
    EXPECT_EQ(fleet.unavailable_after_ms, 300u);
    EXPECT_EQ(fleet.idle_hold_ms, 1000u);
}

struct Refusal {
    const char* text;
    const char* where;    // "file:line:column: key"
    const char* setting;  // Error::setting
};

class DaemonConfigRefusal : public ::testing::TestWithParam<Refusal> {};

TEST_P(DaemonConfigRefusal, NamesFileLineColumnAndKey) {
    auto config = parse_daemon_config(GetParam().text, "c.toml");
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.error().message.rfind(GetParam().where, 0), 0u) << config.error().message;
    EXPECT_EQ(config.error().setting, GetParam().setting);
}

INSTANTIATE_TEST_SUITE_P(
    Keys, DaemonConfigRefusal,
    ::testing::Values(
        Refusal{"sockett = \"/x\"", "c.toml:1:11: sockett: unknown key", "sockett"},
        Refusal{"\nsocket = \"relative.sock\"", "c.toml:2:10: socket: expected an absolute path", "socket"},
        Refusal{"state_dir = 7", "c.toml:1:13: state_dir: expected a string", "state_dir"},
        Refusal{"policy_file = \"policy.toml\"", "c.toml:1:15: policy_file: expected an absolute path", "policy_file"},
        Refusal{"log_level = \"loud\"", "c.toml:1:13: log_level: \"loud\" is not one of", "log_level"},
        Refusal{"detach_on_exit = 1", "c.toml:1:18: detach_on_exit: expected true or false", "detach_on_exit"},
        Refusal{"source_capacity = 10", "c.toml:1:19: source_capacity: expected an integer in", "source_capacity"},
        Refusal{"drop_sample_period = 48", "c.toml:1:22: drop_sample_period: expected a power of two in 1..16777216",
                "drop_sample_period"},
        Refusal{"drop_sample_period = 0", "c.toml:1:22: drop_sample_period: expected a power of two",
                "drop_sample_period"},
        Refusal{"prefix_capacity = 0", "c.toml:1:19: prefix_capacity: expected an integer in 1..16777216",
                "prefix_capacity"},
        Refusal{"prefix_capacity = 16777217", "c.toml:1:19: prefix_capacity: expected an integer in 1..16777216",
                "prefix_capacity"},
        Refusal{"max_push_bytes = 10", "c.toml:1:18: max_push_bytes: expected an integer in 1024..4294967296",
                "max_push_bytes"},
        Refusal{"max_bans = 0", "c.toml:1:12: max_bans: expected an integer in 1..4096 (timed bans in force at once)",
                "max_bans"},
        Refusal{"max_bans = 4097",
                "c.toml:1:12: max_bans: expected an integer in 1..4096 (timed bans in force at once)", "max_bans"},
        Refusal{"max_bans = \"many\"",
                "c.toml:1:12: max_bans: expected an integer in 1..4096 (timed bans in force at once)", "max_bans"},
        Refusal{"[[interface]]\nmode = \"native\"", "c.toml:1:1: interface.name: missing", "interface.name"},
        Refusal{"[[interface]]\nname = \"a/b\"", "c.toml:2:8: interface.name: \"a/b\" is not", "interface.name"},
        Refusal{"[[interface]]\nname = \"sl0\"\n[[interface]]\nname = \"sl0\"",
                "c.toml:4:8: interface.name: \"sl0\" is listed twice", "interface.name"},
        Refusal{"[[interface]]\nname = \"sl0\"\nmode = \"offload\"",
                "c.toml:3:8: interface.mode: \"offload\" is not an XDP mode", "interface.mode"},
        Refusal{"[[interface]]\nname = \"sl0\"\nqueues = 4", "c.toml:3:10: interface.queues: unknown key",
                "interface.queues"},
        Refusal{"[fleet]\nnamespace = \"x\"", "c.toml:1:1: fleet.servers: missing", "fleet.servers"},
        Refusal{"[fleet]\nservers = [\"redis\"]", "c.toml:2:12: fleet.servers: ", "fleet.servers"},
        Refusal{"[fleet]\nservers = []", "c.toml:2:11: fleet.servers: expected a non-empty list", "fleet.servers"},
        Refusal{"[fleet]\nservers = [\"r:1\"]\nnamespace = \"a{b}\"", "c.toml:3:13: fleet.namespace: expected",
                "fleet.namespace"},
        Refusal{"[fleet]\nservers = [\"r:1\"]\nlease_period_ms = 0", "c.toml:3:19: fleet.lease_period_ms: expected",
                "fleet.lease_period_ms"},
        Refusal{"[fleet]\nservers = [\"r:1\"]\ntimeout_ms = 100\nunavailable_after_ms = 50",
                "c.toml:1:1: fleet.unavailable_after_ms: must be at least", "fleet.unavailable_after_ms"},
        Refusal{"[fleet]\nservers = [\"r:1\"]\nusername = \"u\"", "c.toml:1:1: fleet.password: missing",
                "fleet.password"},
        Refusal{"[fleet]\nservers = [\"r:1\"]\ntls = true", "c.toml:3:7: fleet.tls: unknown key", "fleet.tls"},
        Refusal{"[request]\nmax_in_flight = 4", "c.toml:1:1: request: [request] needs http_address, grpc_address",
                "request"},
        Refusal{"[request]\nhttp_address = \"127.0.0.1:1\"\ntrusted_proxies = [\"10.0.0.0/33\"]",
                "c.toml:3:20: request.trusted_proxies: ", "request.trusted_proxies"},
        Refusal{"[request]\nhttp_address = \"127.0.0.1:1\"\nclient_address_header = \"X-Real-IP\"",
                "c.toml:3:25: request.client_address_header: expected", "request.client_address_header"},
        Refusal{"[request]\ngrpc_address = \"127.0.0.1:1\"\nmax_in_flight = 0",
                "c.toml:3:17: request.max_in_flight: expected an integer in 1..", "request.max_in_flight"},
        Refusal{"[request]\ngrpc_address = \"127.0.0.1:1\"\nidentity_key_file = \"key\"",
                "c.toml:3:21: request.identity_key_file: expected an absolute path", "request.identity_key_file"},
        Refusal{"[request]\ngrpc_address = \"127.0.0.1:1\"\nport = 1", "c.toml:3:8: request.port: unknown key",
                "request.port"}));

TEST(DaemonConfig, ReadsTheRequestTable) {
    auto config = parse_daemon_config(R"([request]
http_address = "127.0.0.1:9466"
grpc_address = "[::1]:8081"
trusted_proxies = ["127.0.0.1", "10.0.0.0/8", "::1"]
client_address_header = "Forwarded"
identity_key_file = "/etc/sluice/identity.key"
http_threads = 4
max_in_flight = 64
domain_rate = 5000
domain_burst = 500
deadline_ms = 10
max_counters = 1000
grpc_max_message_bytes = 8192
)",
                                      "c.toml");
    ASSERT_TRUE(config.ok()) << config.error().message;
    const RequestConfig& request = config.value().request;
    EXPECT_TRUE(request.enabled);
    EXPECT_EQ(request.http_address, "127.0.0.1:9466");
    EXPECT_EQ(request.grpc_address, "[::1]:8081");
    EXPECT_EQ(request.trusted_proxies, (std::vector<std::string>{"127.0.0.1", "10.0.0.0/8", "::1"}));
    EXPECT_EQ(request.client_address_header, "Forwarded");
    EXPECT_EQ(request.identity_key_file, "/etc/sluice/identity.key");
    EXPECT_EQ(request.http_threads, 4u);
    EXPECT_EQ(request.max_in_flight, 64u);
    EXPECT_EQ(request.domain_rate, 5000u);
    EXPECT_EQ(request.domain_burst, 500u);
    EXPECT_EQ(request.deadline_ms, 10u);
    EXPECT_EQ(request.max_counters, 1000u);
    EXPECT_EQ(request.grpc_max_message_bytes, 8192u);
    auto defaults = parse_daemon_config("", "c.toml");
    ASSERT_TRUE(defaults.ok());
    EXPECT_FALSE(defaults.value().request.enabled) << "no [request]: neither door is served";
}

TEST(DaemonConfig, ReportsTheFirstProblemInFileOrder) {
    auto config = parse_daemon_config("zzz = 1\naaa = 2\n", "c.toml");
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.error().message.rfind("c.toml:1:7: zzz", 0), 0u) << config.error().message;
}

TEST(DaemonConfig, SyntaxErrorsCarryTheirPosition) {
    auto config = parse_daemon_config("socket = \n", "c.toml");
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.error().message.rfind("c.toml:1:", 0), 0u) << config.error().message;
}

TEST(DaemonConfig, AFleetFileHoldsOnlyTheFleetTable) {
    auto fleet = parse_fleet_config("[fleet]\nservers = [\"127.0.0.1:6379\"]\nlease_period_ms = 50", "f.toml");
    ASSERT_TRUE(fleet.ok()) << fleet.error().message;
    EXPECT_EQ(fleet.value().lease_period_ms, 50u);
    auto other = parse_fleet_config("socket = \"/x\"\n[fleet]\nservers = [\"r:1\"]", "f.toml");
    ASSERT_FALSE(other.ok());
    EXPECT_EQ(other.error().message.rfind("f.toml:1:10: socket: unknown key", 0), 0u) << other.error().message;
    auto empty = parse_fleet_config("", "f.toml");
    ASSERT_FALSE(empty.ok());
    EXPECT_EQ(empty.error().message, "f.toml: no [fleet] table");
}

TEST(DaemonConfig, MissingFileNamesIt) {
    auto config = load_daemon_config("/nonexistent/sluiced.toml");
    ASSERT_FALSE(config.ok());
    EXPECT_NE(config.error().message.find("/nonexistent/sluiced.toml"), std::string::npos);
}

TEST(LogLine, IsLogfmtWithQuotingOnlyWhereNeeded) {
    EXPECT_EQ(format_log_line("T", LogLevel::warn, "policy refused", {{"interface", "sl0"}, {"error", "a \"b\"\nc"}}),
              "ts=T level=warn msg=\"policy refused\" interface=sl0 error=\"a \\\"b\\\"\\nc\"");
    EXPECT_EQ(format_log_line("T", LogLevel::info, "ready", {{"empty", ""}, {"eq", "a=b"}}),
              "ts=T level=info msg=ready empty=\"\" eq=\"a=b\"");
}

TEST(LogLine, WhatAClientSentCannotReachATerminalOrForgeALine) {
    EXPECT_EQ(format_log_line("T", LogLevel::warn, "refused", {{"key", "evil\x1b[2J\n level=error msg=forged \xff"}}),
              R"(ts=T level=warn msg=refused key="evil\x1b[2J\n level=error msg=forged \xff")");
    EXPECT_EQ(format_log_line("T", LogLevel::info, "x", {{"path", "C:\\dir"}, {"tenant", "\xc2\x9b" "31m"}}),
              R"(ts=T level=info msg=x path="C:\\dir" tenant="\u{009b}31m")");
}

TEST(LogLevels, RoundTripByName) {
    for (const auto level : {LogLevel::debug, LogLevel::info, LogLevel::warn, LogLevel::error})
        EXPECT_EQ(parse_log_level(log_level_name(level)), level);
    EXPECT_FALSE(parse_log_level("verbose"));
}

}  // namespace
}  // namespace sluice::daemon_config_test
