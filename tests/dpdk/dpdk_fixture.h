// SPDX-License-Identifier: Apache-2.0
// Shared by the tests of the DPDK dataplane: the EAL the test binary starts
// once (--no-huge --no-pci --no-shconf, see dpdk_test_main.cpp), ethdev
// ports whose RX and TX are rte_rings the test fills and drains
// (rte_eth_from_rings), and a fixture that runs one DpdkDataplane worker on
// such a port under a clock the test sets. The fixture offers what
// tests/common/verdict_scenarios.h needs, so the XDP program's expectations
// run unchanged against DPDK.
#pragma once

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/hash_key_from_env.h"
#include "common/policy_builder.h"
#include "common/privilege.h"
#include "dpdk_dataplane.h"

namespace sluice::test {

// The EAL of this test binary: started before any test, or why it could not be.
struct DpdkEnvironment {
    bool ready = false;
    std::string error;
    rte_mempool* pool = nullptr;  // frames the tests inject
};
DpdkEnvironment& dpdk_environment();

// Like SLUICE_REQUIRE_BPF: skips without the EAL, fails instead under
// SLUICE_REQUIRE_PRIVILEGED=1.
#define SLUICE_REQUIRE_DPDK()                                                                           \
    do {                                                                                                \
        if (!::sluice::test::dpdk_environment().ready) {                                                \
            const std::string sluice_why = ::sluice::test::dpdk_environment().error;                    \
            if (::sluice::test::privileged_suites_required())                                           \
                FAIL() << "SLUICE_REQUIRE_PRIVILEGED is set but the EAL did not start: " << sluice_why; \
            GTEST_SKIP() << "skipped: the EAL did not start: " << sluice_why;                           \
        }                                                                                               \
    } while (0)

// An mbuf holding `frame`, from the test pool; nullptr if the pool is empty.
rte_mbuf* make_mbuf(const Bytes& frame);
Bytes mbuf_bytes(const rte_mbuf* m);

// An ethdev port over two rings: inject() puts frames where a NIC would
// deliver them; sent() takes what the port transmitted. Stopped, closed and
// its rings freed on destruction.
class RingPort {
  public:
    static std::unique_ptr<RingPort> open(uint16_t queues = 1);
    ~RingPort();
    RingPort(const RingPort&) = delete;
    RingPort& operator=(const RingPort&) = delete;

    uint16_t id() const { return port_; }
    // Enqueues `copies` copies of `frame` on RX queue `queue`; returns how many fitted.
    unsigned inject(const Bytes& frame, unsigned copies = 1, uint16_t queue = 0);
    // Enqueues `frames` again, each with one more reference (the worker's
    // free, or drain_sent's, drops it): a flood from several threads that
    // takes nothing from the shared mbuf pool, whose ring a preempted thread
    // would hold up for all. Returns how many fitted.
    unsigned inject_again(rte_mbuf* const* frames, unsigned n, uint16_t queue = 0);
    // Everything transmitted on TX queue `queue` since the last call, oldest first.
    std::vector<Bytes> sent(uint16_t queue = 0);
    // How many frames were transmitted since the last call (and frees them).
    unsigned drain_sent(uint16_t queue = 0);

  private:
    RingPort() = default;
    uint16_t port_ = 0;
    bool started_ = false;
    std::vector<rte_ring*> rx_, tx_;
};

inline constexpr uint32_t kDpdkTestCapacity = 4096;

// One DpdkDataplane with one worker on a RingPort (RX and TX both), on a test
// clock that starts at t0().
class DpdkTest : public ::testing::Test {
  public:
    void SetUp() override {
        SLUICE_REQUIRE_DPDK();
        DpdkOptions opts = options();
        if (!opts.hash_key) opts.hash_key = hash_key_from_env();
        port_ = RingPort::open(static_cast<uint16_t>(opts.workers));
        ASSERT_TRUE(port_) << "cannot open a ring port";
        auto dp = DpdkDataplane::create(opts);
        ASSERT_TRUE(dp.ok()) << describe(dp);
        dp_ = std::move(dp.value());
        for (uint32_t i = 0; i < dp_->worker_count(); i++)
            dp_->worker(i).set_ports({port_->id(), static_cast<uint16_t>(i)}, {port_->id(), static_cast<uint16_t>(i)});
        dp_->set_test_clock(t0_);
    }

    void TearDown() override {
        if (dp_) print_hash_key_if_failed(dp_->hash_key());
        dp_.reset();  // frees held frames before the port goes
        port_.reset();
    }

    // ---- what tests/common/verdict_scenarios.h needs ----
    PolicyBuilder policy(uint64_t version = 1) const { return PolicyBuilder(dp_->worker_count(), version); }
    void apply(const CompiledPolicy& policy) { SLUICE_ASSERT_OK(dp_->apply(policy)); }
    void set_clock(uint64_t now_ns) { dp_->set_test_clock(now_ns); }
    uint64_t t0() const { return t0_; }
    uint64_t per_cpu(Accuracy accuracy) const { return accuracy == Accuracy::split ? dp_->worker_count() : 1; }
    uint32_t cpus() const { return dp_->worker_count(); }
    void use_cpu(uint32_t worker) {
        ASSERT_LT(worker, dp_->worker_count());
        worker_ = worker;
    }
    // n frames, each received and decided in its own burst by the current
    // worker (on its own RX and TX queue): P if it left through TX, D if not.
    std::string verdicts(const Bytes& frame, int n) {
        std::string out;
        const auto queue = static_cast<uint16_t>(worker_);
        for (int i = 0; i < n; i++) {
            EXPECT_EQ(port_->inject(frame, 1, queue), 1u);
            dp_->worker(worker_).poll_once();
            const unsigned sent = port_->drain_sent(queue);
            out += sent == 1 ? 'P' : sent == 0 ? 'D' : '?';
        }
        return out;
    }
    // n frames decided by bursts that read the active policy slot just
    // before the last apply() flipped it and are still running.
    std::string verdicts_on_the_replaced_policy(const Bytes& frame, int n) {
        dp_->flip_active_slot_for_test();
        std::string out = verdicts(frame, n);
        dp_->flip_active_slot_for_test();
        return out;
    }
    Counts counts() {
        auto c = dp_->counters();
        EXPECT_TRUE(c.ok()) << describe(c);
        return Counts{c.ok() ? c.value() : std::vector<sluice_counter>(SLUICE_COUNTER_SLOTS)};
    }
    uint64_t stat(uint32_t which) {
        auto s = dp_->stats();
        EXPECT_TRUE(s.ok()) << describe(s);
        return s.ok() ? s.value().at(which) : ~0ull;
    }
    sluice_fleet_credit* fleet_credits() { return dp_->fleet_credits(); }
    Status set_bans(const std::vector<DataplaneBan>& bans) { return dp_->set_bans(bans); }
    std::vector<sluice_counter> ban_counters() {
        auto c = dp_->ban_counters();
        EXPECT_TRUE(c.ok()) << describe(c);
        return c.ok() ? c.value() : std::vector<sluice_counter>(SLUICE_MAX_BANS);
    }
    SourceTableUsage source_table() {
        auto s = dp_->source_table();
        EXPECT_TRUE(s.ok()) << describe(s);
        return s.ok() ? s.value() : SourceTableUsage{};
    }

  protected:
    virtual DpdkOptions options() const {
        DpdkOptions o;
        o.workers = 1;
        o.source_capacity = kDpdkTestCapacity;
        o.test_clock = true;
        return o;
    }

    uint64_t t0_ = kT0;
    uint32_t worker_ = 0;  // the one verdicts() runs on
    std::unique_ptr<RingPort> port_;
    std::unique_ptr<DpdkDataplane> dp_;
};

}  // namespace sluice::test
