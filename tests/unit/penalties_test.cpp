// SPDX-License-Identifier: Apache-2.0
// The penalties in force as the daemon keeps them from penalty events: ends
// on the dataplane's clock, expiry, repeats, the bound and what it turns away.
#include <gtest/gtest.h>

#include <cstdint>

#include "penalties.h"

namespace sluice {
namespace {

constexpr uint64_t kSecond = 1'000'000'000;

sluice_source_key ipv4(uint8_t host, uint32_t class_id = 2) {
    sluice_source_key key{};
    key.class_id = class_id;
    key.family = SLUICE_FAMILY_IPV4;
    key.addr[0] = 198, key.addr[1] = 51, key.addr[2] = 100, key.addr[3] = host;
    return key;
}

TEST(PenaltiesInForce, APenaltyLastsItsForFromTheEventsTime) {
    PenaltiesInForce penalties;
    // Read 250 ms after it started: the end is still the event's time plus `for`.
    penalties.start(ipv4(7), 100 * kSecond, 60 * kSecond, 100 * kSecond + kSecond / 4);
    EXPECT_EQ(penalties.ends_at(ipv4(7), 101 * kSecond), 160 * kSecond);
    EXPECT_EQ(penalties.active(160 * kSecond - 1), 1u);
    EXPECT_EQ(penalties.active(160 * kSecond), 0u);
    EXPECT_FALSE(penalties.ends_at(ipv4(7), 160 * kSecond));
    EXPECT_FALSE(penalties.ends_at(ipv4(8), 101 * kSecond));  // another source is not in the box
    EXPECT_EQ(penalties.untracked(), 0u);
}

TEST(PenaltiesInForce, ExpiredPenaltiesAreForgotten) {
    PenaltiesInForce penalties(2);
    penalties.start(ipv4(1), 0, 10 * kSecond, 0);
    penalties.start(ipv4(2), 0, 20 * kSecond, 0);
    penalties.expire(10 * kSecond);
    EXPECT_EQ(penalties.active(10 * kSecond), 1u);
    // The room it left takes a new one, where a full tracker would turn it away.
    penalties.start(ipv4(3), 10 * kSecond, 5 * kSecond, 10 * kSecond);
    EXPECT_EQ(penalties.active(10 * kSecond), 2u);
    EXPECT_EQ(penalties.untracked(), 0u);
}

TEST(PenaltiesInForce, AnEventReadAfterItsPenaltyEndedAddsNothing) {
    PenaltiesInForce penalties;
    penalties.start(ipv4(7), 0, kSecond, 2 * kSecond);
    EXPECT_EQ(penalties.active(2 * kSecond), 0u);
    EXPECT_EQ(penalties.untracked(), 0u);  // nothing was turned away: it was over
}

TEST(PenaltiesInForce, ASourcePenalisedAgainKeepsTheLaterEnd) {
    PenaltiesInForce penalties;
    penalties.start(ipv4(7), 10 * kSecond, 60 * kSecond, 10 * kSecond);
    penalties.start(ipv4(7), 30 * kSecond, 60 * kSecond, 30 * kSecond);
    EXPECT_EQ(penalties.ends_at(ipv4(7), 30 * kSecond), 90 * kSecond);
    // An event that arrives late for an earlier start does not shorten it.
    penalties.start(ipv4(7), 20 * kSecond, 60 * kSecond, 31 * kSecond);
    EXPECT_EQ(penalties.ends_at(ipv4(7), 31 * kSecond), 90 * kSecond);
    EXPECT_EQ(penalties.active(31 * kSecond), 1u);
}

TEST(PenaltiesInForce, BoundedAndCountsWhatItTurnsAway) {
    PenaltiesInForce penalties(3);
    for (uint8_t host = 1; host <= 5; host++) penalties.start(ipv4(host), 0, 60 * kSecond, 0);
    EXPECT_EQ(penalties.active(0), 3u);
    EXPECT_EQ(penalties.untracked(), 2u);
    EXPECT_TRUE(penalties.ends_at(ipv4(3), 0));
    EXPECT_FALSE(penalties.ends_at(ipv4(4), 0));  // the newcomers were turned away
    // A source already tracked still has its end moved when the tracker is full.
    penalties.start(ipv4(1), 30 * kSecond, 60 * kSecond, 30 * kSecond);
    EXPECT_EQ(penalties.ends_at(ipv4(1), 30 * kSecond), 90 * kSecond);
    EXPECT_EQ(penalties.untracked(), 2u);
}

TEST(PenaltiesInForce, AClassWithoutAPenaltyIsCountedAsUntracked) {
    // The class lost its penalty (or the policy) before the daemon read the
    // event: the end cannot be known.
    PenaltiesInForce penalties;
    penalties.start(ipv4(7), 0, 0, 0);
    EXPECT_EQ(penalties.active(0), 0u);
    EXPECT_EQ(penalties.untracked(), 1u);
}

TEST(PenaltiesInForce, ClassAndFamilyArePartOfTheSource) {
    PenaltiesInForce penalties;
    sluice_source_key v6 = ipv4(7);
    v6.family = SLUICE_FAMILY_IPV6;
    penalties.start(ipv4(7, 2), 0, 60 * kSecond, 0);
    penalties.start(ipv4(7, 3), 0, 30 * kSecond, 0);
    penalties.start(ipv4(8, 3), 0, 30 * kSecond, 0);
    penalties.start(v6, 0, 60 * kSecond, 0);
    EXPECT_EQ(penalties.active(0), 4u);
    EXPECT_EQ(penalties.ends_at(ipv4(7, 3), 0), 30 * kSecond);
    EXPECT_EQ(penalties.active_by_class(0), (std::map<uint32_t, uint64_t>{{2, 2}, {3, 2}}));
    EXPECT_EQ(penalties.active_by_class(30 * kSecond), (std::map<uint32_t, uint64_t>{{2, 2}}));
}

TEST(PenaltiesInForce, AnEndPastTheClocksRangeSaturates) {
    PenaltiesInForce penalties;
    penalties.start(ipv4(7), UINT64_MAX - kSecond, 60 * kSecond, UINT64_MAX - kSecond);
    EXPECT_EQ(penalties.ends_at(ipv4(7), UINT64_MAX - kSecond), UINT64_MAX);
}

}  // namespace
}  // namespace sluice
