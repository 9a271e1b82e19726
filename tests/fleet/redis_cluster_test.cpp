// SPDX-License-Identifier: Apache-2.0
// RedisClient and the fleet bucket against a real three-master cluster:
// routing by slot, MOVED after a slot changes owner, ASK while one migrates,
// the redirection bound, and the script (with NOSCRIPT) on every node. The
// cluster is shared by the suite; each test works in slots of its own tags.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fleet_bucket.h"
#include "redis_client.h"
#include "redis_server.h"

namespace sluice::fleet {
namespace {

using test::RedisCluster;

class RedisClusterTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        if (!test::missing_redis()) cluster_ = std::make_unique<RedisCluster>();
    }
    static void TearDownTestSuite() { cluster_.reset(); }

    void SetUp() override {
        SLUICE_REQUIRE_REDIS();
        ASSERT_NE(cluster_, nullptr);
        ASSERT_EQ(cluster_->error(), "");
    }

    // Seeds with one node only: the client must find the others itself.
    static RedisOptions options(size_t seed = 0) {
        RedisOptions o;
        o.servers = {cluster_->node(seed).endpoint()};
        return o;
    }

    static size_t owner_of(const std::string& key) {
        const auto owner = cluster_->owner(redis_key_slot(key));
        EXPECT_TRUE(owner.has_value()) << key;
        return owner.value_or(0);
    }

    // CLUSTER SETSLOT <slot> NODE <id> on every node, the new owner first.
    static void assign_slot(uint16_t slot, size_t to) {
        const std::string id = cluster_->node_id(to);
        std::vector<size_t> order{to};
        for (size_t i = 0; i < cluster_->size(); ++i)
            if (i != to) order.push_back(i);
        for (size_t i : order) {
            const RedisReply ok = cluster_->node(i).call({"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", id});
            ASSERT_EQ(ok.str, "OK") << "node " << i;
        }
    }

    static std::unique_ptr<RedisCluster> cluster_;
};

std::unique_ptr<RedisCluster> RedisClusterTest::cluster_;

TEST_F(RedisClusterTest, KeysRouteToTheMasterOwningTheirSlot) {
    RedisClient client(options(1));
    std::set<size_t> used;
    for (int i = 0; i < 30; ++i) {
        const std::string key = "{tag" + std::to_string(i) + "}.k";
        const std::string value = "v" + std::to_string(i);
        auto set = client.command({"SET", key, value}, key);
        ASSERT_TRUE(set) << set.error().message;
        EXPECT_TRUE(client.cluster_mode());
        const RedisReply keyslot = cluster_->node(0).call({"CLUSTER", "KEYSLOT", key});
        EXPECT_EQ(keyslot.integer, redis_key_slot(key)) << key;
        const size_t owner = owner_of(key);
        used.insert(owner);
        EXPECT_EQ(client.last_node(), cluster_->node(owner).endpoint()) << key;
        EXPECT_EQ(cluster_->node(owner).call({"GET", key}).str, value) << key;
    }
    EXPECT_EQ(used.size(), 3u);  // 30 tags spread over all three masters
    EXPECT_EQ(client.stats().moved, 0u);
    EXPECT_EQ(client.stats().asks, 0u);
    EXPECT_EQ(client.stats().slot_map_refreshes, 1u);
    EXPECT_EQ(client.stats().connects, 3u);
}

TEST_F(RedisClusterTest, FollowsMovedAfterASlotChangesOwner) {
    const std::string key = "{moved}.k";
    const uint16_t slot = redis_key_slot(key);
    const size_t from = owner_of(key);
    const size_t to = (from + 1) % cluster_->size();
    ASSERT_EQ(cluster_->node(from).call({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}).integer, 0);

    RedisClient client(options());
    ASSERT_TRUE(client.command({"GET", key}, key));  // loads the map: slot -> from
    EXPECT_EQ(client.last_node(), cluster_->node(from).endpoint());

    assign_slot(slot, to);
    ASSERT_EQ(cluster_->owner(slot), to);
    auto set = client.command({"SET", key, "here"}, key);
    ASSERT_TRUE(set) << set.error().message;
    EXPECT_EQ(client.stats().moved, 1u);
    EXPECT_EQ(client.last_node(), cluster_->node(to).endpoint());
    EXPECT_EQ(cluster_->node(to).call({"GET", key}).str, "here");
    // The map was refreshed: the next command goes straight there.
    ASSERT_TRUE(client.command({"GET", key}, key));
    EXPECT_EQ(client.stats().moved, 1u);
    EXPECT_EQ(client.last_node(), cluster_->node(to).endpoint());
}

TEST_F(RedisClusterTest, FollowsAskWhileASlotMigrates) {
    const std::string k1 = "{ask}.1";
    const std::string k2 = "{ask}.2";
    const std::string k3 = "{ask}.3";
    const uint16_t slot = redis_key_slot(k1);
    const size_t from = owner_of(k1);
    const size_t to = (from + 1) % cluster_->size();
    auto& source = cluster_->node(from);
    auto& target = cluster_->node(to);
    ASSERT_EQ(source.call({"SET", k1, "one"}).str, "OK");
    ASSERT_EQ(source.call({"SET", k2, "two"}).str, "OK");

    RedisClient client(options());
    ASSERT_TRUE(client.command({"PING"}, ""));  // loads the map before the migration starts

    const std::string s = std::to_string(slot);
    ASSERT_EQ(target.call({"CLUSTER", "SETSLOT", s, "IMPORTING", cluster_->node_id(from)}).str, "OK");
    ASSERT_EQ(source.call({"CLUSTER", "SETSLOT", s, "MIGRATING", cluster_->node_id(to)}).str, "OK");
    const RedisReply migrated =
        source.call({"MIGRATE", "127.0.0.1", std::to_string(target.port()), "", "0", "5000", "KEYS", k1});
    ASSERT_EQ(migrated.str, "OK");

    // k1 has moved: the source answers ASK, the client asks the target.
    auto one = client.command({"GET", k1}, k1);
    ASSERT_TRUE(one) << one.error().message;
    EXPECT_EQ(one.value().str, "one");
    EXPECT_EQ(client.stats().asks, 1u);
    EXPECT_EQ(client.last_node(), target.endpoint());
    // Keys on both sides of a migration: Redis says TRYAGAIN, the client passes it on.
    auto both = client.command({"MGET", k1, k2}, k1);
    ASSERT_FALSE(both);
    EXPECT_EQ(both.error().code, ErrorCode::internal);
    EXPECT_EQ(client.last_error_code(), "TRYAGAIN") << both.error().message;
    // k2 is still at the source, and the map still says so.
    auto two = client.command({"GET", k2}, k2);
    ASSERT_TRUE(two) << two.error().message;
    EXPECT_EQ(two.value().str, "two");
    EXPECT_EQ(client.stats().asks, 1u);
    EXPECT_EQ(client.last_node(), source.endpoint());
    // A new key in a migrating slot is created at the target.
    ASSERT_TRUE(client.command({"SET", k3, "three"}, k3));
    EXPECT_EQ(client.stats().asks, 2u);
    EXPECT_EQ(client.last_node(), target.endpoint());
    EXPECT_EQ(client.stats().moved, 0u);

    // Finish the migration; the old map now earns a MOVED.
    ASSERT_EQ(source.call({"MIGRATE", "127.0.0.1", std::to_string(target.port()), "", "0", "5000", "KEYS", k2}).str,
              "OK");
    assign_slot(slot, to);
    auto after = client.command({"GET", k2}, k2);
    ASSERT_TRUE(after) << after.error().message;
    EXPECT_EQ(after.value().str, "two");
    EXPECT_EQ(client.stats().moved, 1u);
    EXPECT_EQ(client.last_node(), target.endpoint());
    EXPECT_EQ(target.call({"GET", k3}).str, "three");
}

TEST_F(RedisClusterTest, RedirectionsAreBounded) {
    // A source MIGRATING to a node that is not IMPORTING: the source says
    // ASK, the other node says MOVED back, forever.
    const std::string key = "{loop}.k";
    const std::string s = std::to_string(redis_key_slot(key));
    const size_t from = owner_of(key);
    const size_t to = (from + 1) % cluster_->size();
    ASSERT_EQ(cluster_->node(from).call({"CLUSTER", "SETSLOT", s, "MIGRATING", cluster_->node_id(to)}).str, "OK");
    RedisClient client(options());
    auto looped = client.command({"GET", key}, key);
    ASSERT_EQ(cluster_->node(from).call({"CLUSTER", "SETSLOT", s, "STABLE"}).str, "OK");
    ASSERT_FALSE(looped);
    EXPECT_EQ(looped.error().code, ErrorCode::internal);
    EXPECT_NE(looped.error().message.find("more than 5 redirections"), std::string::npos) << looped.error().message;
    EXPECT_EQ(client.stats().moved + client.stats().asks, 5u);
    // Stable again: the same client gets through.
    auto fine = client.command({"GET", key}, key);
    ASSERT_TRUE(fine) << fine.error().message;
}

TEST_F(RedisClusterTest, ErrorRepliesComeBackAsInternalErrors) {
    RedisClient client(options(2));
    auto bad = client.command({"NOSUCHCOMMAND", "{x}"}, "{x}");
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().code, ErrorCode::internal);
    EXPECT_EQ(client.last_error_code(), "ERR");
    // Keys in different slots in one command: Redis refuses, the client passes it on.
    auto cross = client.command({"MGET", "{a}", "{b}"}, "{a}");
    ASSERT_FALSE(cross);
    EXPECT_EQ(client.last_error_code(), "CROSSSLOT");
    // command_at does not follow redirections: a non-owner's MOVED is the answer.
    const std::string key = "{at}";
    const size_t other = (owner_of(key) + 1) % cluster_->size();
    auto moved = client.command_at(cluster_->node(other).endpoint(), {"GET", key});
    ASSERT_FALSE(moved);
    EXPECT_EQ(client.last_error_code(), "MOVED");
    EXPECT_EQ(client.stats().moved, 0u);
}

TEST_F(RedisClusterTest, BucketScriptRunsOnEveryNodeAndSurvivesScriptFlush) {
    RedisClient client(options());
    const FleetBucketScript script;
    const FleetBucketSpec spec{.rate_per_s = 0.001, .burst = 10};
    std::vector<std::string> keys;
    std::set<size_t> owners;
    for (int i = 0; i < 12; ++i) {
        keys.push_back(fleet_bucket_key("t", "class" + std::to_string(i), "h"));
        owners.insert(owner_of(keys.back()));
    }
    ASSERT_EQ(owners.size(), 3u);
    for (const auto& key : keys) {
        auto got = script.exchange(client, key, spec, 4, 0);
        ASSERT_TRUE(got) << got.error().message;
        EXPECT_EQ(got.value().granted, 4u);
        EXPECT_EQ(client.last_node(), cluster_->node(owner_of(key)).endpoint());
        EXPECT_GT(cluster_->node(owner_of(key)).call({"PTTL", key}).integer, 0) << key;
    }
    for (size_t i = 0; i < cluster_->size(); ++i) ASSERT_EQ(cluster_->node(i).call({"SCRIPT", "FLUSH"}).str, "OK");
    for (const auto& key : keys) {
        auto got = script.exchange(client, key, spec, 10, 0);
        ASSERT_TRUE(got) << got.error().message;
        EXPECT_EQ(got.value().granted, 6u) << key;
        EXPECT_GT(cluster_->node(owner_of(key)).call({"PTTL", key}).integer, 0) << key;
    }
    for (size_t i = 0; i < cluster_->size(); ++i)
        EXPECT_EQ(cluster_->node(i).call({"SCRIPT", "EXISTS", script.sha1()}).elements.at(0).integer, 1);
}

}  // namespace
}  // namespace sluice::fleet
