// SPDX-License-Identifier: Apache-2.0
// The fleet leaser against one real redis-server. Dataplanes are arrays of
// credit cells; traffic is threads taking one unit at a time at an offered
// rate. The tests check correctness bounds (fleet_leaser.h's), never
// timings: every rate assertion has generous slack for a noisy 2-core box.
#include "fleet_leaser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "redis_server.h"

namespace sluice::fleet {
namespace {

using namespace std::chrono_literals;
using test::RedisServer;
using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

FleetQuota quota(uint32_t class_id, std::string name, uint64_t rate, uint64_t burst, std::string hash = "0123abcd",
                 bool fail_open = false, uint64_t fallback_rate = 0) {
    FleetQuota q;
    q.class_id = class_id;
    q.class_name = std::move(name);
    q.rate_per_s = rate;
    q.burst = burst;
    q.fail_open = fail_open;
    q.fallback_rate_per_s = fallback_rate;
    q.definition_hash = std::move(hash);
    return q;
}

// One dataplane's credit cells.
struct Cells {
    sluice_fleet_credit cells[SLUICE_MAX_CLASSES]{};
    sluice_fleet_credit* get() { return cells; }
    int64_t available(uint32_t id) const { return sluice_fleet_available(&cells[id]); }
    // Takes everything the cell holds, one unit at a time; returns how much.
    uint64_t drain(uint32_t id) {
        uint64_t n = 0;
        while (sluice_fleet_take(&cells[id], 1)) ++n;
        return n;
    }
};

// Offers `rate` units per second to one cell until stopped, one take per unit.
class Traffic {
  public:
    Traffic(sluice_fleet_credit* cell, double rate) : cell_(cell), rate_(rate) {
        thread_ = std::thread([this] { run(); });
    }
    ~Traffic() { stop(); }
    void stop() {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
    }
    uint64_t admitted() const { return admitted_; }
    uint64_t offered() const { return offered_; }

  private:
    void run() {
        const auto start = Clock::now();
        uint64_t offered = 0;
        while (!stop_) {
            const auto due = static_cast<uint64_t>(rate_ * seconds(Clock::now() - start));
            for (; offered < due; ++offered)
                if (sluice_fleet_take(cell_, 1)) admitted_.fetch_add(1, std::memory_order_relaxed);
            offered_ = offered;
            std::this_thread::sleep_for(1ms);
        }
    }

    sluice_fleet_credit* cell_;
    double rate_;
    std::atomic<bool> stop_{false};
    std::atomic<uint64_t> admitted_{0};
    std::atomic<uint64_t> offered_{0};
    std::thread thread_;
};

class FleetLeaserTest : public ::testing::Test {
  protected:
    void SetUp() override {
        SLUICE_REQUIRE_REDIS();
        server_ = std::make_unique<RedisServer>();
        ASSERT_EQ(server_->error(), "");
    }

    FleetLeaserOptions options(std::chrono::milliseconds period = 100ms) {
        FleetLeaserOptions o;
        o.redis.servers = {server_->endpoint()};
        o.lease_period = period;
        o.unavailable_after = 300ms;
        o.log = [this](const std::string& line) {
            std::lock_guard lock(log_mu_);
            log_.push_back(line);
        };
        return o;
    }

    std::vector<std::string> logs() {
        std::lock_guard lock(log_mu_);
        return log_;
    }

    // The bucket's stored tokens (as of its last exchange), or nothing when the key is missing.
    std::optional<double> tokens(const std::string& key) {
        const RedisReply reply = server_->call({"HGET", key, "tokens"});
        if (reply.type != RedisReplyType::string) return std::nullopt;
        return std::stod(reply.str);
    }

    static FleetClassStatus only(const FleetLeaser& leaser) {
        auto all = leaser.status();
        EXPECT_EQ(all.size(), 1u);
        return all.empty() ? FleetClassStatus{} : all.front();
    }

    // Rounds in which the node spends everything it holds: each asks four
    // times what the last spent (1, 4, 16, ...). Returns the units spent.
    static uint64_t ramp(FleetLeaser& leaser, Cells& cells, uint32_t id, int rounds) {
        uint64_t spent = 0;
        for (int i = 0; i < rounds; ++i) {
            spent += cells.drain(id);
            leaser.run_once();
        }
        return spent;
    }

    std::unique_ptr<RedisServer> server_;
    std::mutex log_mu_;
    std::vector<std::string> log_;
};

// H = P + 50 ms: the longest credit is held before it is spent or returned
// (no account in these tests idles, so idle_hold does not add to it).
constexpr double kHoldSlack = 0.150;

TEST_F(FleetLeaserTest, OneNodeStaysWithinTheBoundAndUsesTheQuota) {
    constexpr uint64_t kRate = 2000, kBurst = 2000;
    Cells cells;
    FleetLeaser leaser(options());
    leaser.set_quotas(1, {quota(5, "api", kRate, kBurst)});
    leaser.attach("eth0", cells.get());

    const auto start = Clock::now();
    leaser.start();
    Traffic traffic(&cells.cells[5], 3.0 * kRate);
    // A window of 2 s at least, and long enough for the five exchanges checked below.
    const auto deadline = start + 30s;
    while (Clock::now() < deadline && (Clock::now() - start < 2s || only(leaser).exchanges < 5))
        std::this_thread::sleep_for(10ms);
    traffic.stop();
    const double t = seconds(Clock::now() - start);
    leaser.stop();

    const auto admitted = static_cast<double>(traffic.admitted());
    EXPECT_LE(admitted, kBurst + kRate * (t + kHoldSlack)) << "T " << t;
    EXPECT_GE(admitted, 0.9 * kRate * t) << "T " << t;  // a single node gets the whole quota

    const FleetClassStatus s = only(leaser);
    EXPECT_EQ(s.dataplane, "eth0");
    EXPECT_EQ(s.class_id, 5u);
    EXPECT_EQ(s.key, fleet_bucket_key("sluice", "api", "0123abcd"));
    EXPECT_EQ(s.policy_version, 1u);
    EXPECT_EQ(s.state, LeaseState::leasing);
    EXPECT_EQ(s.failures, 0u);
    EXPECT_GE(s.exchanges, 5u);
    // Every admitted unit came from Redis; what is left in the cell too.
    EXPECT_GE(s.redis_granted_total, traffic.admitted());
    EXPECT_TRUE(logs().empty());
}

// Three nodes, one quota, 3x the quota offered, 90/5/5. What the split
// should be: the light nodes each want 15% of the quota, under their fair
// share, so a fair outcome serves them in full and the busy node gets the
// rest (~70% of the quota, not 90%: "90% of the demand" is not a share the
// quota owes it). So: the fleet stays within the bound, uses >= 85% of the
// quota (no credit stranded on light nodes), the busy node gets >= 85% of
// what the light nodes' demand leaves, and the light nodes are not starved
// (>= 40% of their demand; jittered rounds keep them out of lockstep).
TEST_F(FleetLeaserTest, ThreeNodesShareOneQuota) {
    constexpr uint64_t kRate = 2000, kBurst = 2000;
    constexpr double kOffered = 3.0 * kRate;
    const double share[3] = {0.90, 0.05, 0.05};
    Cells cells[3];
    std::vector<std::unique_ptr<FleetLeaser>> nodes;
    for (int i = 0; i < 3; ++i) {
        nodes.push_back(std::make_unique<FleetLeaser>(options()));
        nodes.back()->set_quotas(1, {quota(9, "api", kRate, kBurst)});
        nodes.back()->attach("node" + std::to_string(i), cells[i].get());
    }
    const auto start = Clock::now();
    for (auto& node : nodes) node->start();
    std::vector<std::unique_ptr<Traffic>> traffic;
    for (int i = 0; i < 3; ++i) traffic.push_back(std::make_unique<Traffic>(&cells[i].cells[9], share[i] * kOffered));
    std::this_thread::sleep_for(2s);
    for (auto& tr : traffic) tr->stop();
    const double t = seconds(Clock::now() - start);
    for (auto& node : nodes) node->stop();

    double total = 0;
    for (auto& tr : traffic) total += static_cast<double>(tr->admitted());
    const auto busy = static_cast<double>(traffic[0]->admitted());
    const double light_offered = static_cast<double>(traffic[1]->offered() + traffic[2]->offered());
    EXPECT_LE(total, kBurst + kRate * (t + kHoldSlack)) << "T " << t;
    EXPECT_GE(total, 0.85 * kRate * t) << "T " << t;
    EXPECT_GE(busy, 0.85 * (kRate * t - light_offered)) << "busy " << busy << " total " << total;
    for (int i = 1; i < 3; ++i)
        EXPECT_GE(static_cast<double>(traffic[i]->admitted()), 0.4 * static_cast<double>(traffic[i]->offered()))
            << "light node " << i;
    for (auto& node : nodes) {
        const FleetClassStatus s = only(*node);
        EXPECT_EQ(s.key, fleet_bucket_key("sluice", "api", "0123abcd"));
        EXPECT_EQ(s.failures, 0u);
    }
}

TEST_F(FleetLeaserTest, IdleNodeReturnsCreditAndClosingReturnsTheRest) {
    // rate 1/s: the bucket barely refills during the test, so returns show in its tokens.
    constexpr uint64_t kRate = 1, kBurst = 1000;
    const uint64_t min_lease = FleetLeaser::min_lease(kRate, 100ms);
    ASSERT_EQ(min_lease, 1u);
    Cells cells;
    FleetLeaser leaser(options());
    leaser.set_quotas(1, {quota(3, "idle", kRate, kBurst)});
    leaser.attach("eth0", cells.get());
    const std::string key = fleet_bucket_key("sluice", "idle", "0123abcd");

    ramp(leaser, cells, 3, 5);  // grants 1, 4, 16, 64, 256
    EXPECT_EQ(cells.available(3), 256);
    EXPECT_EQ(only(leaser).redis_granted_total, 341u);
    const double before = tokens(key).value_or(-1);
    // Idle rounds: it keeps only min_lease and returns the rest.
    leaser.run_once();
    leaser.run_once();
    EXPECT_LE(cells.available(3), static_cast<int64_t>(min_lease));
    EXPECT_GE(cells.available(3), 0);
    EXPECT_EQ(only(leaser).last_lease, min_lease);
    EXPECT_GE(tokens(key).value_or(-1), before + 255 - 2) << "the idle node returned its credit";

    // A class the new version drops: its unspent credit goes back to Redis, the cell is emptied.
    ramp(leaser, cells, 3, 4);
    const int64_t held = cells.available(3);
    EXPECT_GE(held, 32);
    const double before_removal = tokens(key).value_or(-1);
    leaser.set_quotas(2, {});
    EXPECT_TRUE(leaser.status().empty());
    EXPECT_EQ(cells.available(3), 0);
    EXPECT_GE(tokens(key).value_or(-1), before_removal + static_cast<double>(held) - 1);

    // Detach does the same; one of two attaches of the same cells keeps the dataplane.
    leaser.set_quotas(3, {quota(3, "idle", kRate, kBurst)});
    leaser.attach("eth0-again", cells.get());
    EXPECT_EQ(only(leaser).dataplane, "eth0");
    ramp(leaser, cells, 3, 4);
    const int64_t held2 = cells.available(3);
    EXPECT_GE(held2, 32);
    const double before_detach = tokens(key).value_or(-1);
    leaser.detach(cells.get());
    EXPECT_EQ(leaser.status().size(), 1u);
    EXPECT_EQ(cells.available(3), held2);
    leaser.detach(cells.get());
    EXPECT_TRUE(leaser.status().empty());
    EXPECT_EQ(cells.available(3), 0);
    EXPECT_GE(tokens(key).value_or(-1), before_detach + static_cast<double>(held2) - 1);
}

TEST_F(FleetLeaserTest, ClosedFallbackSpendsOnlyWhatIsHeld) {
    constexpr uint64_t kRate = 1, kBurst = 1000;
    Cells cells;
    FleetLeaser leaser(options());
    // Two classes: one unreachable exchange fails both in a round.
    leaser.set_quotas(1, {quota(1, "a", kRate, kBurst), quota(2, "b", kRate, kBurst)});
    leaser.attach("eth0", cells.get());
    ramp(leaser, cells, 1, 3);  // class 1 now holds 16
    const int64_t held = cells.available(1);
    ASSERT_EQ(held, 16);

    server_->pause();
    const auto deadline = Clock::now() + 5s;
    while (Clock::now() < deadline && leaser.status()[0].state != LeaseState::fallback) {
        leaser.run_once();
        std::this_thread::sleep_for(50ms);
    }
    for (int i = 0; i < 3; ++i) leaser.run_once();  // more failed rounds: still one transition
    auto s = leaser.status();
    ASSERT_EQ(s.size(), 2u);
    for (const auto& c : s) {
        EXPECT_EQ(c.state, LeaseState::fallback) << c.class_name;
        EXPECT_EQ(c.fallbacks, 1u) << c.class_name;
        EXPECT_GE(c.failures, 4u) << c.class_name;
    }
    EXPECT_EQ(s[0].failures, s[1].failures);
    // Closed: what was held, and not one unit more.
    EXPECT_EQ(cells.drain(1), static_cast<uint64_t>(held));
    leaser.run_once();
    EXPECT_EQ(cells.drain(1), 0u);
    EXPECT_EQ(leaser.status()[0].fallback_granted_total, 0u);
    auto lines = logs();
    ASSERT_EQ(lines.size(), 2u);  // one per class
    EXPECT_NE(lines[0].find("fleet class a (sluice:{a:0123abcd}:bucket)"), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("fail-closed: admitting only 16 units already leased"), std::string::npos) << lines[0];

    server_->resume();
    leaser.run_once();
    leaser.run_once();
    s = leaser.status();
    for (const auto& c : s) {
        EXPECT_EQ(c.state, LeaseState::leasing) << c.class_name;
        EXPECT_EQ(c.fallbacks, 1u);
    }
    lines = logs();
    ASSERT_EQ(lines.size(), 4u);
    EXPECT_NE(lines[2].find("Redis reachable again: leasing"), std::string::npos) << lines[2];
    EXPECT_GT(cells.available(1), 0);  // leasing again
}

TEST_F(FleetLeaserTest, OpenFallbackAdmitsAboutTheFallbackRate) {
    constexpr uint64_t kRate = 1, kBurst = 100, kFallback = 500;
    constexpr double kPeriod = 0.1;
    Cells cells;
    FleetLeaser leaser(options());
    leaser.set_quotas(1, {quota(4, "open", kRate, kBurst, "0123abcd", true, kFallback)});
    leaser.attach("eth0", cells.get());
    leaser.start();
    Traffic traffic(&cells.cells[4], 4.0 * kFallback);
    // Redis goes away once the node leases from it.
    auto deadline = Clock::now() + 10s;
    while (Clock::now() < deadline && only(leaser).redis_granted_total == 0) std::this_thread::sleep_for(10ms);
    ASSERT_GT(only(leaser).redis_granted_total, 0u) << "no lease from Redis in 10 s";
    server_->pause();

    deadline = Clock::now() + 5s;
    while (Clock::now() < deadline && only(leaser).state != LeaseState::fallback) std::this_thread::sleep_for(10ms);
    ASSERT_EQ(only(leaser).state, LeaseState::fallback);
    const auto from = Clock::now();
    const uint64_t admitted_before = traffic.admitted();
    std::this_thread::sleep_for(1500ms);
    const double t = seconds(Clock::now() - from);
    const auto admitted = static_cast<double>(traffic.admitted() - admitted_before);
    FleetClassStatus s = only(leaser);
    EXPECT_EQ(s.state, LeaseState::fallback);
    EXPECT_EQ(s.fallbacks, 1u);
    // At most the fallback rate, plus the local cap, plus what Redis had
    // granted before (<= burst); at least half of it (slack for a noisy box).
    EXPECT_LE(admitted, kFallback * t + 2 * kFallback * kPeriod + kBurst) << "T " << t;
    EXPECT_GE(admitted, 0.5 * kFallback * t) << "T " << t;
    EXPECT_GT(s.fallback_granted_total, 0u);

    server_->resume();
    deadline = Clock::now() + 5s;
    while (Clock::now() < deadline && only(leaser).state != LeaseState::leasing) std::this_thread::sleep_for(10ms);
    traffic.stop();
    leaser.stop();
    s = only(leaser);
    EXPECT_EQ(s.state, LeaseState::leasing);
    EXPECT_EQ(s.fallbacks, 1u);
    const auto lines = logs();
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_NE(lines[0].find("Redis unavailable ("), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("fail-open at 500/s"), std::string::npos) << lines[0];
    EXPECT_NE(lines[1].find("Redis reachable again: leasing"), std::string::npos) << lines[1];
    // Out of fallback the cell holds only Redis-granted credit: at most what the last exchange asked for.
    EXPECT_LE(s.credit_available, static_cast<int64_t>(std::max<uint64_t>(s.last_lease, 1)));
}

TEST_F(FleetLeaserTest, DifferentDefinitionsUseDifferentKeys) {
    constexpr uint64_t kRate = 1, kBurst = 100;
    Cells a_cells, b_cells;
    FleetLeaser a(options()), b(options());
    a.set_quotas(1, {quota(2, "api", kRate, kBurst, "aaaa")});
    b.set_quotas(1, {quota(2, "api", kRate, kBurst, "bbbb")});
    a.attach("a", a_cells.get());
    b.attach("b", b_cells.get());
    const std::string key_a = fleet_bucket_key("sluice", "api", "aaaa");
    const std::string key_b = fleet_bucket_key("sluice", "api", "bbbb");
    ASSERT_NE(key_a, key_b);

    // A drains its bucket (1 + 4 + 16 + 64 + 256 > burst) ...
    ramp(a, a_cells, 2, 8);
    EXPECT_LT(tokens(key_a).value_or(1000), 5);
    EXPECT_LE(only(a).redis_granted_total, kBurst + 5);
    // ... and B's bucket is untouched: full grants.
    ramp(b, b_cells, 2, 4);
    EXPECT_EQ(only(b).redis_granted_total, 1u + 4 + 16 + 64);
    EXPECT_EQ(only(b).key, key_b);

    // A new definition for A's class: a new account on a new key; the old key gets A's credit back.
    const int64_t held = a_cells.available(2);
    const double old_tokens = tokens(key_a).value_or(-1);
    a.set_quotas(2, {quota(2, "api", kRate, kBurst, "cccc")});
    const FleetClassStatus s = only(a);
    EXPECT_EQ(s.key, fleet_bucket_key("sluice", "api", "cccc"));
    EXPECT_EQ(s.policy_version, 2u);
    EXPECT_EQ(s.redis_granted_total, 0u);
    EXPECT_EQ(a_cells.available(2), 0);
    EXPECT_GE(tokens(key_a).value_or(-1), old_tokens + static_cast<double>(held) - 1);
    a.run_once();
    EXPECT_EQ(only(a).redis_granted_total, 1u);  // a fresh bucket: min_lease granted at once
}

// An idle account (nothing spent, holding its min_lease) exchanges once per
// idle_hold instead of once per round; the first unit it spends ends that.
TEST_F(FleetLeaserTest, IdleAccountExchangesOncePerHoldTime) {
    constexpr uint64_t kRate = 6400, kBurst = 1000;
    const auto min_lease = static_cast<int64_t>(FleetLeaser::min_lease(kRate, 100ms));
    ASSERT_EQ(min_lease, 10);
    {
        // By hand, on a clock of the test's own: rounds skip until exactly
        // the hold time has passed, however long the rounds take.
        Cells cells;
        FleetLeaserOptions o = options();
        o.idle_hold = 400ms;
        Clock::time_point now = Clock::now();
        o.now = [&now] { return now; };
        FleetLeaser leaser(o);
        leaser.set_quotas(1, {quota(6, "quiet", kRate, kBurst)});
        leaser.attach("eth0", cells.get());
        leaser.run_once();  // a new account leases at once
        EXPECT_EQ(only(leaser).exchanges, 1u);
        EXPECT_EQ(cells.available(6), min_lease);
        for (int i = 0; i < 5; ++i) leaser.run_once();
        EXPECT_EQ(only(leaser).exchanges, 1u);
        EXPECT_EQ(only(leaser).idle_skips, 5u);
        EXPECT_EQ(cells.available(6), min_lease);
        now += 399ms;
        leaser.run_once();  // a millisecond short of idle_hold: still skips
        EXPECT_EQ(only(leaser).exchanges, 1u);
        EXPECT_EQ(only(leaser).idle_skips, 6u);
        now += 1ms;
        leaser.run_once();  // held for idle_hold: returned, and min_lease leased again
        EXPECT_EQ(only(leaser).exchanges, 2u);
        EXPECT_EQ(cells.available(6), min_lease);
        EXPECT_EQ(cells.drain(6), static_cast<uint64_t>(min_lease));
        leaser.run_once();  // it spent: exchanges (and asks for more)
        EXPECT_EQ(only(leaser).exchanges, 3u);
        EXPECT_GT(only(leaser).last_lease, static_cast<uint64_t>(min_lease));
        leaser.run_once();  // idle again: returns the rest, keeps min_lease
        EXPECT_EQ(only(leaser).exchanges, 4u);
        EXPECT_EQ(cells.available(6), min_lease);
        leaser.run_once();  // and skips
        EXPECT_EQ(only(leaser).exchanges, 4u);
        EXPECT_EQ(only(leaser).failures, 0u);
    }

    // On the lease threads, P = 100 ms (a round every 50..100 ms, as the
    // machine runs them), until each node has had 20 rounds: the idle one
    // exchanges once per idle_hold (500 ms) of the time that took, the
    // reference (idle_hold 0) every round.
    Cells idle_cells, busy_cells;
    FleetLeaserOptions skipping = options();
    skipping.idle_hold = 500ms;
    FleetLeaserOptions every_round = options();
    every_round.idle_hold = 0ms;
    FleetLeaser idle(skipping), reference(every_round);
    idle.set_quotas(1, {quota(6, "quiet", kRate, kBurst, "aaaa")});
    reference.set_quotas(1, {quota(6, "quiet", kRate, kBurst, "bbbb")});
    idle.attach("idle", idle_cells.get());
    reference.attach("reference", busy_cells.get());
    const auto rounds = [](const FleetClassStatus& a) { return a.exchanges + a.idle_skips; };
    constexpr uint64_t kRounds = 20;
    const auto start = Clock::now();
    idle.start();
    reference.start();
    const auto deadline = start + 30s;
    while (Clock::now() < deadline && (rounds(only(idle)) < kRounds || rounds(only(reference)) < kRounds))
        std::this_thread::sleep_for(10ms);
    idle.stop();
    reference.stop();
    const double t = seconds(Clock::now() - start);
    const FleetClassStatus s = only(idle), r = only(reference);
    ASSERT_GE(rounds(s), kRounds) << "in 30 s";
    ASSERT_GE(rounds(r), kRounds) << "in 30 s";
    // The first exchange at start, then one per idle_hold at most.
    const auto most = 1 + static_cast<uint64_t>(std::ceil(t / 0.5));
    EXPECT_GE(s.exchanges, 1u);
    EXPECT_LE(s.exchanges, most) << "T " << t << " s, skips " << s.idle_skips;
    EXPECT_EQ(r.exchanges, rounds(r));
    EXPECT_EQ(r.idle_skips, 0u);
    EXPECT_EQ(idle_cells.available(6), min_lease);
    EXPECT_EQ(s.failures, 0u);
}

TEST_F(FleetLeaserTest, LeftoverCreditIsRevokedAtAttach) {
    constexpr uint64_t kRate = 1, kBurst = 1000;
    Cells cells;
    cells.cells[7].granted = 500;  // as a pinned map might hold after a restart
    cells.cells[7].taken = 100;
    cells.cells[8].granted = 50;  // a class without a fleet quota: not ours to touch
    FleetLeaser leaser(options());
    leaser.set_quotas(1, {quota(7, "left", kRate, kBurst)});
    leaser.attach("eth0", cells.get());
    EXPECT_EQ(cells.available(7), 0);
    EXPECT_EQ(cells.available(8), 50);
    EXPECT_EQ(only(leaser).credit_available, 0);

    leaser.run_once();
    EXPECT_EQ(cells.available(7), 1);  // min_lease, from Redis; nothing of the leftover returned
    const FleetClassStatus s = only(leaser);
    EXPECT_EQ(s.redis_granted_total, 1u);
    EXPECT_EQ(s.exchanges, 1u);
    EXPECT_LE(tokens(s.key).value_or(-1), kBurst - 1 + 0.5);
}

}  // namespace
}  // namespace sluice::fleet
