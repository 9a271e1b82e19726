// SPDX-License-Identifier: Apache-2.0
// A policy slot's prefix tries across pushes: edited in place when the new
// set fits them, re-created when it does not, and either way every address
// classifies as the policy says (the longest prefix that covers it, else the
// default class), as a freshly built table would; a policy over
// --prefix-capacity is refused and the running version stays; and a worker
// polling while versions change never sees a slot before it is complete.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include "dpdk_fixture.h"

namespace sluice::test {
namespace {

constexpr uint32_t kDefaultClass = 1;
constexpr uint32_t kClasses = 4;  // 1 (default) .. 4, all passing

// A prefix set keyed as prefix_less orders it, with each prefix's class.
using PrefixKey = std::tuple<uint8_t, std::array<uint8_t, 16>, uint8_t>;
using PrefixSet = std::map<PrefixKey, uint32_t>;

PolicyPrefix to_prefix(const PrefixKey& key, uint32_t class_id) {
    PolicyPrefix p;
    std::tie(p.family, p.addr, p.length) = key;
    p.class_id = class_id;
    return p;
}

// Clears the bits of `addr` past `length`.
void mask(std::array<uint8_t, 16>& addr, uint8_t length) {
    for (size_t bit = length; bit < addr.size() * 8; bit++) addr[bit / 8] &= static_cast<uint8_t>(~(0x80u >> (bit % 8)));
}

bool covers(const PolicyPrefix& p, uint8_t family, const std::array<uint8_t, 16>& addr) {
    if (p.family != family) return false;
    std::array<uint8_t, 16> masked = addr;
    mask(masked, p.length);
    return masked == p.addr;
}

// Random prefixes that nest often: IPv4 /16../32 inside 10.0.0.0/8, IPv6
// /36../128 inside 2001:db8::/32 with few distinct bits in bytes 4 and 5.
PrefixKey random_prefix(std::mt19937& rng, uint8_t family) {
    std::array<uint8_t, 16> addr{};
    uint8_t length;
    if (family == SLUICE_FAMILY_IPV4) {
        addr[0] = 10;
        for (size_t i = 1; i < 4; i++) addr[i] = static_cast<uint8_t>(rng());
        length = static_cast<uint8_t>(16 + rng() % 17);
    } else {
        addr = {0x20, 0x01, 0x0d, 0xb8};
        addr[4] = static_cast<uint8_t>(rng() % 4);
        addr[5] = static_cast<uint8_t>(rng() % 4);
        for (size_t i = 6; i < 16; i++) addr[i] = static_cast<uint8_t>(rng());
        static constexpr uint8_t kLengths[] = {36, 40, 44, 48, 52, 56, 64, 96, 127, 128};
        length = kLengths[rng() % std::size(kLengths)];
    }
    mask(addr, length);
    return {family, addr, length};
}

uint32_t random_class(std::mt19937& rng) { return 2 + rng() % (kClasses - 1); }

void add_random(PrefixSet& set, std::mt19937& rng, uint8_t family, size_t n) {
    for (size_t added = 0; added < n;)
        if (set.emplace(random_prefix(rng, family), random_class(rng)).second) added++;
}

// Keys of `set` of `family`, every `step`-th one.
std::vector<PrefixKey> every(const PrefixSet& set, uint8_t family, size_t step) {
    std::vector<PrefixKey> out;
    size_t i = 0;
    for (const auto& [key, cls] : set)
        if (std::get<0>(key) == family && i++ % step == 0) out.push_back(key);
    return out;
}

std::string address_text(uint8_t family, const std::array<uint8_t, 16>& addr) {
    char text[INET6_ADDRSTRLEN];
    inet_ntop(family == SLUICE_FAMILY_IPV4 ? AF_INET : AF_INET6, addr.data(), text, sizeof(text));
    return text;
}

class DpdkPrefixes : public DpdkTest {
  protected:
    CompiledPolicy policy_of(const PrefixSet& set, uint64_t version) const {
        PolicyBuilder builder = policy(version);
        for (uint32_t id = 1; id <= kClasses; id++) builder.add({.id = id, .action = SLUICE_ACTION_PASS});
        CompiledPolicy p = builder.build();
        for (const auto& [key, cls] : set) p.prefixes.push_back(to_prefix(key, cls));
        sort_prefixes(p.prefixes);
        mark_prefix_families(p);
        return p;
    }

    // Packets counted under each class 0..kClasses.
    std::array<uint64_t, kClasses + 1> per_class() {
        const Counts c = counts();
        std::array<uint64_t, kClasses + 1> sums{};
        for (uint32_t id = 0; id <= kClasses; id++)
            for (uint32_t v = 0; v < SLUICE_VERDICT_COUNT; v++)
                for (uint32_t r = 0; r < SLUICE_REASON_COUNT; r++) sums[id] += c.packets(id, v, r);
        return sums;
    }

    // Sends a frame from each of `sources` and returns what each class counted.
    std::array<uint64_t, kClasses + 1> classify(const std::vector<std::string>& sources) {
        const auto before = per_class();
        for (size_t i = 0; i < sources.size(); i++) {
            EXPECT_EQ(port_->inject(udp_from(sources[i])), 1u);
            if (i % 32 == 31 || i + 1 == sources.size()) dp_->worker(0).poll_once();
        }
        port_->drain_sent();
        auto after = per_class();
        for (uint32_t id = 0; id <= kClasses; id++) after[id] -= before[id];
        return after;
    }

    // Every prefix of `probed` at its first and last address and just past
    // it classifies in the running version as the policy `p` says. Probes
    // go by expected class, a burst at a time; a class whose count is off is
    // probed again frame by frame to name the addresses.
    void expect_classified(const CompiledPolicy& p, const PrefixSet& probed) {
        std::map<uint32_t, std::vector<std::string>> expected;
        for (const auto& [key, unused] : probed) {
            const auto& [family, network, length] = key;
            const size_t bytes = family == SLUICE_FAMILY_IPV4 ? 4 : 16;
            std::array<uint8_t, 16> last = network;
            for (size_t bit = length; bit < bytes * 8; bit++) last[bit / 8] |= static_cast<uint8_t>(0x80u >> (bit % 8));
            std::array<uint8_t, 16> past = last;
            size_t i = bytes;
            while (i > 0 && ++past[i - 1] == 0) i--;
            std::vector<std::array<uint8_t, 16>> probes{network, last};
            if (i > 0) probes.push_back(past);  // not past the end of the address space
            for (const auto& addr : probes) {
                uint32_t cls = p.header.default_class_id;
                int best = -1;
                for (const PolicyPrefix& q : p.prefixes)
                    if (covers(q, family, addr) && q.length > best) {
                        best = q.length;
                        cls = q.class_id;
                    }
                expected[cls].push_back(address_text(family, addr));
            }
        }
        for (const auto& [cls, sources] : expected) {
            std::array<uint64_t, kClasses + 1> want{};
            want[cls] = sources.size();
            if (classify(sources) == want) continue;
            size_t wrong = 0;
            for (const std::string& source : sources) {
                const auto got = classify({source});
                if (got[cls] != 1 && ++wrong <= 10)
                    ADD_FAILURE() << "version " << p.header.version << ": " << source << " is not in class " << cls;
            }
            EXPECT_GT(wrong, 0u) << "class " << cls << " counted wrong in bulk, right frame by frame";
        }
    }

    // Applies `set` as `version` and checks it against every prefix it or
    // the previous version had.
    void push(const PrefixSet& set, uint64_t version) {
        const CompiledPolicy p = policy_of(set, version);
        SLUICE_ASSERT_OK(dp_->apply(p));
        ASSERT_EQ(dp_->active_version().value(), version);
        PrefixSet probed = previous_;
        probed.insert(set.begin(), set.end());
        expect_classified(p, probed);
        previous_ = set;
    }

    PrefixSet previous_;
};

TEST_F(DpdkPrefixes, EveryPushClassifiesAsAFreshTable) {
    std::mt19937 rng(19);
    PrefixSet set;
    add_random(set, rng, SLUICE_FAMILY_IPV4, 300);
    add_random(set, rng, SLUICE_FAMILY_IPV6, 120);
    ASSERT_NO_FATAL_FAILURE(push(set, 1));  // both slots' tries are created...

    add_random(set, rng, SLUICE_FAMILY_IPV4, 150);
    add_random(set, rng, SLUICE_FAMILY_IPV6, 60);
    ASSERT_NO_FATAL_FAILURE(push(set, 2));

    for (uint8_t family : {SLUICE_FAMILY_IPV4, SLUICE_FAMILY_IPV6})  // ...then edited: some removed
        for (const PrefixKey& key : every(set, family, 4)) set.erase(key);
    ASSERT_NO_FATAL_FAILURE(push(set, 3));

    for (uint8_t family : {SLUICE_FAMILY_IPV4, SLUICE_FAMILY_IPV6})  // some moved to another class
        for (const PrefixKey& key : every(set, family, 3)) set[key] = 2 + (set[key] - 1) % (kClasses - 1);
    ASSERT_NO_FATAL_FAILURE(push(set, 4));
    ASSERT_NO_FATAL_FAILURE(push(set, 5));  // the same set again

    // More than the tries were sized for: both slots' are re-created.
    add_random(set, rng, SLUICE_FAMILY_IPV4, 1200);
    add_random(set, rng, SLUICE_FAMILY_IPV6, 1200);
    ASSERT_NO_FATAL_FAILURE(push(set, 6));
    for (const PrefixKey& key : every(set, SLUICE_FAMILY_IPV6, 5)) set.erase(key);
    ASSERT_NO_FATAL_FAILURE(push(set, 7));

    // Nearly everything replaced, and no IPv6 at all; then IPv6 again.
    set.clear();
    add_random(set, rng, SLUICE_FAMILY_IPV4, 20);
    ASSERT_NO_FATAL_FAILURE(push(set, 8));
    ASSERT_NO_FATAL_FAILURE(push(set, 9));
    add_random(set, rng, SLUICE_FAMILY_IPV6, 50);
    ASSERT_NO_FATAL_FAILURE(push(set, 10));
    ASSERT_NO_FATAL_FAILURE(push(set, 11));
}

class DpdkPrefixCapacity : public DpdkPrefixes {
  protected:
    DpdkOptions options() const override {
        DpdkOptions o = DpdkPrefixes::options();
        o.prefix_capacity = 4;
        return o;
    }
};

TEST_F(DpdkPrefixCapacity, APolicyOverItIsRefusedAndTheRunningVersionStays) {
    std::mt19937 rng(4);
    PrefixSet set;
    add_random(set, rng, SLUICE_FAMILY_IPV4, 4);
    add_random(set, rng, SLUICE_FAMILY_IPV6, 4);
    ASSERT_NO_FATAL_FAILURE(push(set, 1));

    PrefixSet over = set;
    add_random(over, rng, SLUICE_FAMILY_IPV4, 1);
    const Status refused = dp_->apply(policy_of(over, 2));
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().message,
              "the policy has 5 IPv4 prefixes; the dataplane holds 4 per family (raise --prefix-capacity, at most " +
                  std::to_string(SLUICE_PREFIX_CAPACITY_MAX) + ")");
    EXPECT_EQ(refused.error().setting, "--prefix-capacity");
    EXPECT_EQ(dp_->active_version().value(), 1u);
    PrefixSet probed = over;
    expect_classified(policy_of(set, 1), probed);  // the added prefix too: as version 1 says

    DpdkOptions bad = options();
    for (uint32_t capacity : {0u, SLUICE_PREFIX_CAPACITY_MAX + 1}) {
        bad.prefix_capacity = capacity;
        EXPECT_FALSE(DpdkDataplane::create(bad).ok()) << capacity;
    }
}

// A worker polls on the second lcore while versions alternate between
// moving every prefix to class 2 and to class 3, each defined only in its own
// version: a frame decided against a slot whose class entries and tries came
// from different versions would find no class entry for its class, and be
// counted under class 0.
TEST_F(DpdkPrefixes, AWorkerNeverSeesASlotBeforeItIsComplete) {
    const unsigned lcore = rte_get_next_lcore(-1, 1, 0);
    ASSERT_LT(lcore, RTE_MAX_LCORE) << "the suite's EAL has no worker lcore";
    std::mt19937 rng(7);
    PrefixSet set;
    add_random(set, rng, SLUICE_FAMILY_IPV4, 600);
    std::vector<Bytes> frames;
    for (const auto& [key, cls] : set) frames.push_back(udp_from(address_text(SLUICE_FAMILY_IPV4, std::get<1>(key))));

    std::atomic<bool> stop{false};
    struct Launch {
        DpdkDataplane* dp;
        std::atomic<bool>* stop;
    } launch{dp_.get(), &stop};
    ASSERT_EQ(rte_eal_remote_launch(
                  [](void* arg) {
                      auto* l = static_cast<Launch*>(arg);
                      return l->dp->worker(0).run(*l->stop);
                  },
                  &launch, lcore),
              0);
    // Frames keep arriving from another thread while the versions change,
    // from after the first one: before it, frames pass as no_policy, counted
    // in no class (under ASan the first apply was slow enough to see some).
    std::atomic<bool> stop_traffic{false};
    std::atomic<uint64_t> injected{0};
    std::thread traffic;
    for (uint64_t version = 1; version <= 40; version++) {
        if (version == 2)
            traffic = std::thread([&] {
                for (size_t next = 0; !stop_traffic.load(); next = (next + 1) % frames.size()) {
                    injected += port_->inject(frames[next]);
                    if (next % 64 == 0) port_->drain_sent();
                }
            });
        // Versions 1, 2 move everything to class 2; 3, 4 to class 3; ...:
        // each slot's tries are rewritten at every push.
        const uint32_t moved_to = 2 + (version - 1) / 2 % 2;
        CompiledPolicy p = policy(version)
                               .add({.id = kDefaultClass, .action = SLUICE_ACTION_PASS})
                               .add({.id = moved_to, .action = SLUICE_ACTION_PASS})
                               .build();
        for (const auto& [key, cls] : set) p.prefixes.push_back(to_prefix(key, moved_to));
        sort_prefixes(p.prefixes);
        mark_prefix_families(p);
        SLUICE_EXPECT_OK(dp_->apply(p));
    }
    stop_traffic.store(true);
    traffic.join();
    // Until the worker has taken every frame off the RX ring: an event, not
    // a time (under ASan the backlog took over a second).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (counts().total() < injected.load() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        port_->drain_sent();
    }
    stop.store(true);
    rte_eal_wait_lcore(lcore);
    port_->drain_sent();

    const Counts c = counts();
    uint64_t unclassified = 0, moved = 0;
    for (uint32_t v = 0; v < SLUICE_VERDICT_COUNT; v++)
        for (uint32_t r = 0; r < SLUICE_REASON_COUNT; r++) {
            unclassified += c.packets(SLUICE_CLASS_UNCLASSIFIED, v, r) + c.packets(kDefaultClass, v, r);
            moved += c.packets(2, v, r) + c.packets(3, v, r);
        }
    EXPECT_EQ(unclassified, 0u);
    EXPECT_EQ(moved, injected.load());
}

}  // namespace
}  // namespace sluice::test
