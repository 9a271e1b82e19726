// SPDX-License-Identifier: Apache-2.0
// Shadow rollout end to end: a version in shadow decides and counts exactly
// as if enforcing but passes every packet, so its would_drop figure is what
// enforcement would drop. One flood of a fixed number of frames through a
// shadow version, then the same flood once the same policy enforces: the
// receiver gets every frame of the first, and the second drops what the
// first would have, within 1%.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>

#include "common/privilege.h"
#include "e2e_fixture.h"

namespace sluice::test::shadow_test {
namespace {

using namespace std::chrono_literals;

// Each source 10/s with a burst of 100; a flood of kFrames at kPps, about a
// second, so a source is admitted about 100 + 10 of them and the rest are
// (would-)dropped: a figure large enough that 1% is a real margin.
constexpr double kRate = 10, kBurst = 100;
constexpr uint64_t kFrames = 20000;
constexpr double kPps = 20000;
// A deadline only: the run ends when every frame went out.
constexpr double kDeadlineSeconds = 20;

std::string policy(bool shadow) {
    return std::string("[defaults]\nshadow = ") + (shadow ? "true" : "false") +
           "\n\n[[class]]\nname = \"default\"\nper_source = { rate = " + figure(kRate) + ", burst = " + figure(kBurst) +
           " }\n";
}

class Shadow : public SluiceE2E {
  protected:
    // The class's would_drop or drop packets now.
    uint64_t counter(const std::string& field) {
        const auto now = stats();
        EXPECT_TRUE(now);
        return now ? class_counter(*now, "default", field) : 0;
    }
};

TEST_F(Shadow, AShadowClassDropsNothingAndWouldDropWhatEnforcingDrops) {
    SLUICE_REQUIRE_BPF();
    ASSERT_NO_FATAL_FAILURE(start_world());

    // 1. In shadow: a fresh source floods; every frame arrives.
    ASSERT_TRUE(push_policy("shadow.toml", policy(true)));
    const auto before = stats();
    ASSERT_TRUE(before);
    EXPECT_TRUE(interface_stats(*before, "sl0")["classes"].is_array());
    const auto shadowed = traffic_count({{"flood", "10.9.0.1", kPps}}, kFrames, kDeadlineSeconds);
    ASSERT_TRUE(shadowed);
    ASSERT_NO_FATAL_FAILURE(expect_no_receiver_drops(*shadowed));
    const FlowCount& shadow_flow = shadowed->flow("flood");
    ASSERT_EQ(shadow_flow.sent, kFrames) << "the tool did not send its fixed count";
    EXPECT_EQ(shadow_flow.received, kFrames) << "a class in shadow dropped frames";
    const auto after_shadow = stats();
    ASSERT_TRUE(after_shadow);
    EXPECT_EQ(class_counter(*after_shadow, "default", "drop_packets"), 0u) << "a class in shadow counted drops";
    const uint64_t would_drop = class_counter(*after_shadow, "default", "would_drop_packets");
    for (const auto& c : interface_stats(*after_shadow, "sl0").value("classes", json::array()))
        if (c.value("name", "") == "default") {
            EXPECT_EQ(c.value("shadow", false), true) << c.dump();
        }
    // What the bucket admits over the run; the rest is what it would drop.
    const double admitted_bound = kBurst + kRate * (shadowed->duration_s + 0.05);
    EXPECT_GE(static_cast<double>(would_drop), static_cast<double>(kFrames) - admitted_bound);
    EXPECT_LE(would_drop, kFrames - static_cast<uint64_t>(kBurst));

    // Hot sources see a would-drop as a would-drop, not an enforced drop.
    json sources;
    for (int attempt = 0; attempt < 20 && sources.empty(); attempt++) {
        if (const auto top = ctl_json({"top"})) sources = top->value("sources", json::array());
        if (sources.empty()) std::this_thread::sleep_for(100ms);
    }
    ASSERT_FALSE(sources.empty()) << "no hot source from a class in shadow";
    EXPECT_EQ(sources[0].value("source", ""), "10.9.0.1");
    EXPECT_EQ(sources[0].value("verdict", ""), "would_drop");

    // 2. Promoted: the same policy without shadow, one new version. The
    // source state carries over between versions, so the same flood comes
    // from a fresh address of the same class and starts with a full bucket.
    ASSERT_TRUE(push_policy("enforce.toml", policy(false)));
    const uint64_t drop_before = counter("drop_packets");
    const uint64_t would_drop_before = counter("would_drop_packets");
    const auto enforced = traffic_count({{"flood", "10.9.0.2", kPps}}, kFrames, kDeadlineSeconds);
    ASSERT_TRUE(enforced);
    ASSERT_NO_FATAL_FAILURE(expect_no_receiver_drops(*enforced));
    const FlowCount& enforced_flow = enforced->flow("flood");
    ASSERT_EQ(enforced_flow.sent, kFrames) << "the tool did not send its fixed count";
    const uint64_t dropped = counter("drop_packets") - drop_before;
    EXPECT_EQ(counter("would_drop_packets"), would_drop_before) << "an enforcing class counted would_drops";
    EXPECT_EQ(enforced_flow.received, kFrames - dropped) << "the receiver and the drop counter disagree";

    const double difference = std::abs(static_cast<double>(dropped) - static_cast<double>(would_drop));
    figure_line("shadow_vs_enforced",
                "flood of " + std::to_string(kFrames) + " frames at " + figure(kPps) + " pps, per_source rate " +
                    figure(kRate) + " burst " + figure(kBurst) + ": shadow would_drop " + std::to_string(would_drop) +
                    " (received " + std::to_string(shadow_flow.received) + " of " + std::to_string(shadow_flow.sent) +
                    ", in " + std::to_string(shadowed->duration_s) + " s), enforced drop " + std::to_string(dropped) +
                    " (received " + std::to_string(enforced_flow.received) + ", in " +
                    std::to_string(enforced->duration_s) + " s); difference " + figure(difference));
    EXPECT_LE(difference, 0.01 * static_cast<double>(would_drop))
        << "enforcing dropped " << dropped << ", the shadow said it would drop " << would_drop;
}

}  // namespace
}  // namespace sluice::test::shadow_test
