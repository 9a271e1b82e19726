// SPDX-License-Identifier: Apache-2.0
// RedisClient against one real redis-server: endpoints, key slots, errors
// (a dead server, a hung one, a wrong password, an error reply).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "redis_client.h"
#include "redis_server.h"

namespace sluice::fleet {
namespace {

using namespace std::chrono_literals;
using test::RedisServer;
using test::RedisServerOptions;

TEST(RedisEndpointTest, ParsesHostPortAndBracketedIpv6) {
    auto v4 = parse_redis_endpoint("127.0.0.1:6379");
    ASSERT_TRUE(v4) << v4.error().message;
    EXPECT_EQ(v4.value(), (RedisEndpoint{"127.0.0.1", 6379}));
    auto name = parse_redis_endpoint("redis.internal:1");
    ASSERT_TRUE(name) << name.error().message;
    EXPECT_EQ(name.value(), (RedisEndpoint{"redis.internal", 1}));
    auto v6 = parse_redis_endpoint("[::1]:7000");
    ASSERT_TRUE(v6) << v6.error().message;
    EXPECT_EQ(v6.value(), (RedisEndpoint{"::1", 7000}));
    EXPECT_EQ(format_redis_endpoint(v6.value()), "[::1]:7000");
    EXPECT_EQ(format_redis_endpoint(v4.value()), "127.0.0.1:6379");
}

TEST(RedisEndpointTest, ErrorsNameWhatIsWrong) {
    const std::vector<std::pair<std::string, std::string>> cases{
        {"", "expected host:port"},
        {"localhost", "expected host:port"},
        {":6379", "host is empty"},
        {"localhost:", "port must be a number"},
        {"localhost:0", "port must be a number"},
        {"localhost:65536", "port must be a number"},
        {"localhost:12ab", "port must be a number"},
        {"::1:6379", "IPv6 address needs brackets"},
        {"[::1:6379", "no ']'"},
        {"[::1]6379", "expected \":port\""},
        {"[]:6379", "host is empty"},
        // Found by the redis_reply fuzzer: a host that printed differently.
        {"[[\xff$1]:69", "not an IPv6 address"},
        {"[redis.internal]:6379", "not an IPv6 address"},
        {"redis internal:6379", "only letters, digits"},
        {"[::1]]:6379", "expected \":port\""},
    };
    for (const auto& [text, expected] : cases) {
        auto parsed = parse_redis_endpoint(text);
        ASSERT_FALSE(parsed) << text;
        EXPECT_NE(parsed.error().message.find(expected), std::string::npos) << text << ": " << parsed.error().message;
        EXPECT_NE(parsed.error().message.find("\"" + text + "\""), std::string::npos) << parsed.error().message;
    }
}

TEST(RedisKeySlotTest, KnownValuesAndHashTags) {
    EXPECT_EQ(redis_crc16("123456789"), 0x31C3);
    EXPECT_EQ(redis_key_slot("foo"), 12182);
    EXPECT_EQ(redis_key_slot(""), 0);
    EXPECT_EQ(redis_key_slot("{user1000}.following"), redis_key_slot("{user1000}.followers"));
    EXPECT_EQ(redis_key_slot("{user1000}.following"), redis_key_slot("user1000"));
    // An empty tag "{}" means no tag: the whole key is hashed.
    EXPECT_EQ(redis_key_slot("foo{}{bar}"), redis_crc16("foo{}{bar}") % 16384);
    EXPECT_NE(redis_key_slot("foo{}{bar}"), redis_key_slot("bar"));
    // The tag ends at the first '}' after the first '{'.
    EXPECT_EQ(redis_key_slot("foo{{bar}}zap"), redis_crc16("{bar") % 16384);
    EXPECT_EQ(redis_key_slot("foo{bar}{zap}"), redis_key_slot("bar"));
    // No closing brace: the whole key.
    EXPECT_EQ(redis_key_slot("foo{bar"), redis_crc16("foo{bar") % 16384);
}

class RedisClientTest : public ::testing::Test {
  protected:
    void SetUp() override { SLUICE_REQUIRE_REDIS(); }

    static RedisOptions options_for(const RedisServer& server) {
        RedisOptions options;
        options.servers = {server.endpoint()};
        return options;
    }
};

TEST_F(RedisClientTest, SingleModeCommandsAreBinarySafe) {
    RedisServer server;
    ASSERT_EQ(server.error(), "");
    RedisClient client(options_for(server));
    const std::string value("a\0b\r\nc", 6);
    auto set = client.command({"SET", "bin", value}, "bin");
    ASSERT_TRUE(set) << set.error().message;
    EXPECT_EQ(set.value().type, RedisReplyType::status);
    EXPECT_FALSE(client.cluster_mode());
    auto get = client.command({"GET", "bin"}, "bin");
    ASSERT_TRUE(get) << get.error().message;
    EXPECT_EQ(get.value().type, RedisReplyType::string);
    EXPECT_EQ(get.value().str, value);
    auto missing = client.command({"GET", "nothing"}, "nothing");
    ASSERT_TRUE(missing);
    EXPECT_EQ(missing.value().type, RedisReplyType::nil);
    auto list = client.command({"MGET", "bin", "nothing"}, "bin");
    ASSERT_TRUE(list);
    ASSERT_EQ(list.value().elements.size(), 2u);
    EXPECT_EQ(list.value().elements[0].str, value);
    EXPECT_EQ(list.value().elements[1].type, RedisReplyType::nil);
    EXPECT_EQ(client.stats().connects, 1u);

    // Moving keeps the connection.
    RedisClient moved(std::move(client));
    auto again = moved.command({"INCR", "n"}, "n");
    ASSERT_TRUE(again);
    EXPECT_EQ(again.value().integer, 1);
    EXPECT_EQ(moved.stats().connects, 1u);
}

TEST_F(RedisClientTest, AnErrorReplyIsNotAConnectionFailure) {
    RedisServer server;
    ASSERT_EQ(server.error(), "");
    RedisClient client(options_for(server));
    auto bad = client.command({"NOSUCHCOMMAND", "x"}, "x");
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().code, ErrorCode::internal);
    EXPECT_NE(bad.error().message.find("unknown command"), std::string::npos) << bad.error().message;
    EXPECT_NE(bad.error().message.find(format_redis_endpoint(server.endpoint())), std::string::npos);
    EXPECT_EQ(client.last_error_code(), "ERR");
    ASSERT_TRUE(client.command({"SET", "s", "1"}, "s"));
    auto wrong_type = client.command({"HGET", "s", "f"}, "s");
    ASSERT_FALSE(wrong_type);
    EXPECT_EQ(client.last_error_code(), "WRONGTYPE");
    auto ping = client.command({"PING"}, "");
    ASSERT_TRUE(ping) << ping.error().message;
    EXPECT_EQ(client.last_error_code(), "");
    EXPECT_EQ(client.stats().connects, 1u);  // the same connection throughout
    EXPECT_FALSE(client.command({}, ""));
}

TEST_F(RedisClientTest, DeadServerIsUnreachableAndComesBack) {
    auto server = std::make_unique<RedisServer>();
    ASSERT_EQ(server->error(), "");
    const RedisOptions options = options_for(*server);
    RedisClient client(options);
    ASSERT_TRUE(client.command({"PING"}, ""));
    server->kill();

    const auto start = std::chrono::steady_clock::now();
    auto down = client.command({"PING"}, "");
    const auto took = std::chrono::steady_clock::now() - start;
    ASSERT_FALSE(down);
    EXPECT_EQ(down.error().code, ErrorCode::unreachable);
    EXPECT_NE(down.error().message.find(format_redis_endpoint(options.servers[0])), std::string::npos)
        << down.error().message;
    EXPECT_LT(took, 1s);

    // A client that never reached it fails the same way (in detection).
    RedisClient fresh(options);
    auto never = fresh.command({"PING"}, "");
    ASSERT_FALSE(never);
    EXPECT_EQ(never.error().code, ErrorCode::unreachable);
}

TEST_F(RedisClientTest, HungServerTimesOutAndTheNextCallReconnects) {
    RedisServer server;
    ASSERT_EQ(server.error(), "");
    RedisClient client(options_for(server));
    ASSERT_TRUE(client.command({"PING"}, ""));
    server.pause();
    const auto start = std::chrono::steady_clock::now();
    auto hung = client.command({"PING"}, "");
    const auto took = std::chrono::steady_clock::now() - start;
    server.resume();
    ASSERT_FALSE(hung);
    EXPECT_EQ(hung.error().code, ErrorCode::unreachable);
    EXPECT_NE(hung.error().message.find("timeout"), std::string::npos) << hung.error().message;
    EXPECT_GE(took, 40ms);  // it did wait for the command timeout (50 ms)...
    EXPECT_LT(took, 1s);    // ...and not much longer

    auto back = client.command({"PING"}, "");
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(client.stats().connects, 2u);  // the timed-out connection was dropped
}

TEST_F(RedisClientTest, PasswordsAndWrongPasswords) {
    RedisServer server(RedisServerOptions{.cluster = false, .requirepass = "s3cret"});
    ASSERT_EQ(server.error(), "");

    RedisOptions wrong = options_for(server);
    wrong.password = "wrong";
    RedisClient refused(wrong);
    auto no = refused.command({"PING"}, "");
    ASSERT_FALSE(no);
    EXPECT_EQ(no.error().code, ErrorCode::permission_denied);
    EXPECT_NE(no.error().message.find("AUTH refused"), std::string::npos) << no.error().message;
    EXPECT_NE(no.error().message.find("WRONGPASS"), std::string::npos) << no.error().message;

    RedisClient anonymous(options_for(server));
    auto noauth = anonymous.command({"PING"}, "");
    ASSERT_FALSE(noauth);
    EXPECT_NE(noauth.error().message.find("NOAUTH"), std::string::npos) << noauth.error().message;

    RedisOptions right = options_for(server);
    right.password = "s3cret";
    RedisClient client(right);
    auto yes = client.command({"PING"}, "");
    ASSERT_TRUE(yes) << yes.error().message;

    RedisOptions acl = right;
    acl.username = "default";
    RedisClient acl_client(acl);
    auto acl_yes = acl_client.command({"PING"}, "");
    ASSERT_TRUE(acl_yes) << acl_yes.error().message;
}

}  // namespace
}  // namespace sluice::fleet
