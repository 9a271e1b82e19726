// SPDX-License-Identifier: Apache-2.0
// The fleet bucket script against one real redis-server. Bounds come from
// the Redis times the script reports, never from this machine's clocks: a
// local model of the script, fed those times, must agree with every reply.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fleet_bucket.h"
#include "redis_client.h"
#include "redis_server.h"

namespace sluice::fleet {
namespace {

using namespace std::chrono_literals;
using test::RedisServer;

// The script's arithmetic in the same order, so results match exactly.
struct BucketModel {
    double rate;
    double burst;
    bool exists = false;
    double tokens = 0;
    double ts = 0;

    FleetExchange step(uint64_t now_us, uint64_t request, int64_t returned) {
        const auto now = static_cast<double>(now_us);
        if (!exists) {
            tokens = burst;
            ts = now;
            exists = true;
        }
        if (now > ts) {
            tokens = std::min(burst, tokens + (now - ts) * rate / 1000000);
            ts = now;
        }
        tokens = std::min(burst, tokens + static_cast<double>(returned));
        const double grant = std::floor(std::min(static_cast<double>(request), std::max(tokens, 0.0)));
        tokens -= grant;
        return FleetExchange{.granted = static_cast<uint64_t>(grant),
                             .tokens_left = static_cast<int64_t>(std::floor(tokens)),
                             .redis_time_us = now_us};
    }
};

class FleetBucketTest : public ::testing::Test {
  protected:
    void SetUp() override {
        SLUICE_REQUIRE_REDIS();
        server_ = std::make_unique<RedisServer>();
        ASSERT_EQ(server_->error(), "");
    }

    RedisOptions options() const {
        RedisOptions o;
        o.servers = {server_->endpoint()};
        return o;
    }

    // Runs one exchange and checks it against the model.
    FleetExchange checked(RedisClient& client, BucketModel& model, const std::string& key, const FleetBucketSpec& spec,
                          uint64_t request, int64_t returned) {
        auto got = script_.exchange(client, key, spec, request, returned);
        EXPECT_TRUE(got) << got.error().message;
        if (!got) return {};
        const FleetExchange expected = model.step(got.value().redis_time_us, request, returned);
        EXPECT_EQ(got.value().granted, expected.granted) << "request " << request << " returned " << returned;
        EXPECT_EQ(got.value().tokens_left, expected.tokens_left) << "request " << request << " returned " << returned;
        return got.value();
    }

    long long pttl(const std::string& key) const { return server_->call({"PTTL", key}).integer; }

    std::unique_ptr<RedisServer> server_;
    FleetBucketScript script_;
};

TEST(FleetBucketSpecTest, ValidationNamesTheField) {
    auto rate = validate_fleet_bucket_spec({.rate_per_s = 0, .burst = 10});
    ASSERT_FALSE(rate);
    EXPECT_EQ(rate.error().setting, "rate_per_s");
    EXPECT_FALSE(validate_fleet_bucket_spec({.rate_per_s = -1, .burst = 10}));
    EXPECT_FALSE(validate_fleet_bucket_spec({.rate_per_s = std::nan(""), .burst = 10}));
    EXPECT_FALSE(validate_fleet_bucket_spec({.rate_per_s = INFINITY, .burst = 10}));
    auto burst = validate_fleet_bucket_spec({.rate_per_s = 1, .burst = 0});
    ASSERT_FALSE(burst);
    EXPECT_EQ(burst.error().setting, "burst");
    EXPECT_TRUE(validate_fleet_bucket_spec({.rate_per_s = 0.001, .burst = 1}));
}

TEST(FleetBucketKeyTest, OneQuotaOneSlot) {
    const std::string key = fleet_bucket_key("sluice", "web.syn-v4", "ab12");
    EXPECT_EQ(key, "sluice:{web.syn-v4:ab12}:bucket");
    EXPECT_EQ(redis_key_slot(key), redis_key_slot("sluice:{web.syn-v4:ab12}:leases"));
    EXPECT_EQ(redis_key_slot(key), redis_key_slot("web.syn-v4:ab12"));
}

TEST_F(FleetBucketTest, NewBucketGrantsUpToBurstThenNothing) {
    RedisClient client(options());
    // A slow refill (one unit per 1000 s) keeps the grants exact.
    const FleetBucketSpec spec{.rate_per_s = 0.001, .burst = 100};
    BucketModel model{.rate = spec.rate_per_s, .burst = 100};
    const std::string key = fleet_bucket_key("t", "new", "1");
    EXPECT_EQ(checked(client, model, key, spec, 30, 0).granted, 30u);
    EXPECT_EQ(checked(client, model, key, spec, 50, 0).granted, 50u);
    const FleetExchange last = checked(client, model, key, spec, 50, 0);
    EXPECT_EQ(last.granted, 20u);
    EXPECT_EQ(last.tokens_left, 0);
    EXPECT_EQ(checked(client, model, key, spec, 50, 0).granted, 0u);
    EXPECT_GT(pttl(key), 0);
    // A refused spec never reaches Redis.
    auto bad = script_.exchange(client, key, {.rate_per_s = 1, .burst = 0}, 1, 0);
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().setting, "burst");
}

TEST_F(FleetBucketTest, RefillFollowsRedisTime) {
    RedisClient client(options());
    const FleetBucketSpec spec{.rate_per_s = 200, .burst = 100};
    BucketModel model{.rate = 200, .burst = 100};
    const std::string key = fleet_bucket_key("t", "refill", "1");
    const FleetExchange drained = checked(client, model, key, spec, 100, 0);
    ASSERT_EQ(drained.granted, 100u);
    std::this_thread::sleep_for(200ms);
    const FleetExchange refilled = checked(client, model, key, spec, 1000, 0);
    ASSERT_GT(refilled.redis_time_us, drained.redis_time_us);
    const double elapsed_s = static_cast<double>(refilled.redis_time_us - drained.redis_time_us) / 1e6;
    const double earned = std::min(100.0, elapsed_s * spec.rate_per_s);
    EXPECT_LE(static_cast<double>(refilled.granted), earned);
    EXPECT_GE(static_cast<double>(refilled.granted), std::floor(earned) - 1);
    EXPECT_GT(refilled.granted, 0u);
}

TEST_F(FleetBucketTest, ReturnedUnitsGoBackCappedAtBurst) {
    RedisClient client(options());
    const FleetBucketSpec spec{.rate_per_s = 0.001, .burst = 100};
    BucketModel model{.rate = spec.rate_per_s, .burst = 100};
    const std::string key = fleet_bucket_key("t", "return", "1");
    ASSERT_EQ(checked(client, model, key, spec, 100, 0).granted, 100u);
    EXPECT_EQ(checked(client, model, key, spec, 0, 30).tokens_left, 30);
    EXPECT_EQ(checked(client, model, key, spec, 40, 0).granted, 30u);
    // More back than the bucket holds: full, no more.
    EXPECT_EQ(checked(client, model, key, spec, 0, 1000).tokens_left, 100);
    EXPECT_EQ(checked(client, model, key, spec, 1000, 0).granted, 100u);
}

TEST_F(FleetBucketTest, NegativeReturnIsADebtTheRefillPaysFirst) {
    RedisClient client(options());
    const FleetBucketSpec spec{.rate_per_s = 100, .burst = 100};
    BucketModel model{.rate = 100, .burst = 100};
    const std::string key = fleet_bucket_key("t", "debt", "1");
    ASSERT_EQ(checked(client, model, key, spec, 100, 0).granted, 100u);
    // The node spent 60 it had returned: the bucket owes them.
    const FleetExchange debt = checked(client, model, key, spec, 10, -60);
    EXPECT_EQ(debt.granted, 0u);
    EXPECT_LT(debt.tokens_left, 0);
    EXPECT_GE(debt.tokens_left, -60);
    // Poll until something is granted; every step must match the model, and
    // the first grant comes only once the refill since has paid the debt.
    FleetExchange last = debt;
    for (int i = 0; i < 1000 && last.granted == 0; ++i) {
        std::this_thread::sleep_for(2ms);
        last = checked(client, model, key, spec, 1, 0);
    }
    ASSERT_EQ(last.granted, 1u);
    const double refill = static_cast<double>(last.redis_time_us - debt.redis_time_us) / 1e6 * spec.rate_per_s;
    EXPECT_GT(refill, static_cast<double>(-debt.tokens_left) - 1e-9);
    EXPECT_GT(pttl(key), 0);
}

TEST_F(FleetBucketTest, TtlIsTheTimeToFullPlusTheMargin) {
    RedisClient client(options());
    const FleetBucketSpec spec{.rate_per_s = 10, .burst = 100};
    BucketModel model{.rate = 10, .burst = 100};
    const std::string key = fleet_bucket_key("t", "ttl", "1");
    const FleetExchange full = checked(client, model, key, spec, 0, 0);
    EXPECT_EQ(full.tokens_left, 100);
    EXPECT_GT(pttl(key), 0);
    EXPECT_LE(pttl(key), 1000);  // full: just the margin
    const FleetExchange half = checked(client, model, key, spec, 50, 0);
    const long long ttl = pttl(key);
    // 50 missing units at 10/s: 5 s to full, plus the 1 s margin.
    EXPECT_GT(ttl, 5000);
    EXPECT_LE(ttl, 6000);
    EXPECT_EQ(half.granted, 50u);
    // An expired key reads as full.
    ASSERT_EQ(server_->call({"DEL", key}).integer, 1);
    auto fresh = script_.exchange(client, key, spec, 1000, 0);
    ASSERT_TRUE(fresh) << fresh.error().message;
    EXPECT_EQ(fresh.value().granted, 100u);
}

TEST_F(FleetBucketTest, ConcurrentClientsNeverExceedBurstPlusRefill) {
    const FleetBucketSpec spec{.rate_per_s = 2000, .burst = 200};
    const std::string key = fleet_bucket_key("t", "concurrent", "1");
    struct Call {
        uint64_t time_us;
        uint64_t granted;
        int64_t tokens_left;
    };
    constexpr int kThreads = 8;
    std::vector<std::vector<Call>> calls(kThreads);
    std::vector<std::string> errors(kThreads);
    std::vector<std::thread> threads;
    const auto stop_at = std::chrono::steady_clock::now() + 1s;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            RedisOptions o = options();
            o.command_timeout = 2s;  // a loaded test machine must not lose a grant to a timeout
            RedisClient client(o);
            std::mt19937 random(static_cast<unsigned>(t) * 7919u + 1);
            std::uniform_int_distribution<uint64_t> size(1, 20);
            while (std::chrono::steady_clock::now() < stop_at) {
                auto got = script_.exchange(client, key, spec, size(random), 0);
                if (!got) {
                    errors[static_cast<size_t>(t)] = got.error().message;
                    return;
                }
                calls[static_cast<size_t>(t)].push_back(
                    {got.value().redis_time_us, got.value().granted, got.value().tokens_left});
            }
        });
    }
    for (auto& thread : threads) thread.join();
    for (const auto& error : errors) ASSERT_EQ(error, "");

    std::vector<Call> all;
    for (const auto& per_thread : calls) all.insert(all.end(), per_thread.begin(), per_thread.end());
    ASSERT_GT(all.size(), 100u);
    std::sort(all.begin(), all.end(), [](const Call& a, const Call& b) { return a.time_us < b.time_us; });
    double granted = 0;
    for (const auto& call : all) granted += static_cast<double>(call.granted);

    // The first call created the bucket full at its own Redis time.
    const double span_s = static_cast<double>(all.back().time_us - all.front().time_us) / 1e6;
    const double upper = static_cast<double>(spec.burst) + spec.rate_per_s * span_s;
    EXPECT_LE(granted, upper + 1) << all.size() << " calls over " << span_s << " s";

    // Lower bound: what came in minus what is left and what the cap at burst
    // threw away in gaps between calls (a call leaves floor(tokens)+1 at most).
    double capped = 0;
    for (size_t i = 1; i < all.size(); ++i) {
        const double gap_s = static_cast<double>(all[i].time_us - all[i - 1].time_us) / 1e6;
        capped += std::max(0.0, static_cast<double>(all[i - 1].tokens_left + 1) + spec.rate_per_s * gap_s -
                                    static_cast<double>(spec.burst));
    }
    const double lower = upper - capped - static_cast<double>(std::max<int64_t>(all.back().tokens_left, 0) + 1);
    EXPECT_GE(granted, lower - 2) << "capped " << capped;
    EXPECT_GE(granted, static_cast<double>(spec.burst));  // at least the first burst went out

    const long long ttl = server_->call({"PTTL", key}).integer;
    EXPECT_GT(ttl, 0);
}

// Every bucket key the server holds has an expiry.
void expect_every_key_expires(const RedisServer& server, size_t* keys_seen) {
    std::string cursor = "0";
    size_t seen = 0;
    do {
        const RedisReply page = server.call({"SCAN", cursor, "COUNT", "1000"});
        ASSERT_EQ(page.type, RedisReplyType::array) << page.str;
        ASSERT_EQ(page.elements.size(), 2u);
        cursor = page.elements[0].str;
        for (const auto& key : page.elements[1].elements) {
            const RedisReply ttl = server.call({"PTTL", key.str});
            EXPECT_GT(ttl.integer, 0) << key.str;  // -1: no expiry; -2: gone meanwhile (never, here)
            ++seen;
        }
    } while (cursor != "0");
    *keys_seen = seen;
}

TEST_F(FleetBucketTest, EveryKeyHasATtlEvenWhenClientsAreKilledMidCall) {
    const FleetBucketSpec spec{.rate_per_s = 50, .burst = 1000};
    const RedisOptions o = options();
    std::mt19937 random(12345);
    std::uniform_int_distribution<int> pause_ms(5, 60);
    for (int round = 0; round < 8; ++round) {
        const pid_t parent = getpid();
        const pid_t child = fork();
        ASSERT_GE(child, 0);
        if (child == 0) {
            // Exchanges in a loop on 16 keys until killed.
            if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(1);
            RedisClient client(o);
            FleetBucketScript script;
            std::mt19937 mine(static_cast<unsigned>(getpid()));
            for (uint64_t i = 0;; ++i) {
                const std::string key = fleet_bucket_key("t", "killed", std::to_string(mine() % 16));
                (void)script.exchange(client, key, spec, mine() % 50, static_cast<int64_t>(mine() % 21) - 10);
            }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms(random)));
        kill(child, SIGKILL);
        int status = 0;
        ASSERT_EQ(waitpid(child, &status, 0), child);
        ASSERT_TRUE(WIFSIGNALED(status)) << "the child stopped on its own: " << status;
    }
    // Plus many exchanges from here, on other keys.
    RedisClient client(o);
    for (int i = 0; i < 500; ++i) {
        const std::string key = fleet_bucket_key("t", "many", std::to_string(i % 32));
        auto got = script_.exchange(client, key, spec, static_cast<uint64_t>(i % 7), i % 3 - 1);
        ASSERT_TRUE(got) << got.error().message;
    }
    size_t keys = 0;
    expect_every_key_expires(*server_, &keys);
    EXPECT_GE(keys, 33u);  // the 32 here and at least one from the children
}

TEST_F(FleetBucketTest, ScriptFlushIsRecoveredByLoadingAgain) {
    RedisClient client(options());
    const FleetBucketSpec spec{.rate_per_s = 1, .burst = 10};
    const std::string key = fleet_bucket_key("t", "flush", "1");
    ASSERT_TRUE(script_.exchange(client, key, spec, 1, 0));
    EXPECT_EQ(server_->call({"SCRIPT", "EXISTS", script_.sha1()}).elements.at(0).integer, 1);
    ASSERT_EQ(server_->call({"SCRIPT", "FLUSH"}).str, "OK");
    EXPECT_EQ(server_->call({"SCRIPT", "EXISTS", script_.sha1()}).elements.at(0).integer, 0);
    auto again = script_.exchange(client, key, spec, 1, 0);
    ASSERT_TRUE(again) << again.error().message;
    EXPECT_EQ(again.value().granted, 1u);
    EXPECT_EQ(server_->call({"SCRIPT", "EXISTS", script_.sha1()}).elements.at(0).integer, 1);
}

TEST_F(FleetBucketTest, ServerDownIsUnreachable) {
    RedisClient client(options());
    const FleetBucketSpec spec{.rate_per_s = 1, .burst = 10};
    const std::string key = fleet_bucket_key("t", "down", "1");
    ASSERT_TRUE(script_.exchange(client, key, spec, 1, 0));
    server_->kill();
    auto down = script_.exchange(client, key, spec, 1, 0);
    ASSERT_FALSE(down);
    EXPECT_EQ(down.error().code, ErrorCode::unreachable);
}

TEST_F(FleetBucketTest, AKeyOfAnotherTypeIsAnErrorNotAGrant) {
    RedisClient client(options());
    ASSERT_EQ(server_->call({"SET", "plain", "x"}).str, "OK");
    auto got = script_.exchange(client, "plain", {.rate_per_s = 1, .burst = 10}, 1, 0);
    ASSERT_FALSE(got);
    EXPECT_EQ(got.error().code, ErrorCode::internal);
    EXPECT_NE(got.error().message.find("WRONGTYPE"), std::string::npos) << got.error().message;
}

}  // namespace
}  // namespace sluice::fleet
