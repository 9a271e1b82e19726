// SPDX-License-Identifier: Apache-2.0
// The shared core inside the real kernel: ebpf/core_check.bpf.c must pass the
// verifier on this kernel, and BPF_PROG_TEST_RUN must reach the same decisions
// the host build of the core reaches for the same frames and limits.
#include <bpf/libbpf.h>
#include <sched.h>

#include <memory>
#include <vector>

#include "common/packet_builder.h"
#include "common/privilege.h"
#include "rate_limits.h"

// Host build of the core, to compare with the kernel's (single-threaded: no lock).
#define SLUICE_SHARED_LOCK(shared) ((void)(shared))
#define SLUICE_SHARED_UNLOCK(shared) ((void)(shared))
#include "sluice/decide.h"

// The skeleton names the core's structs, so it comes after them.
#include "core_check.skel.h"

namespace sluice::test {
namespace {

struct SkeletonDeleter {
    void operator()(core_check_bpf* skel) const { core_check_bpf::destroy(skel); }
};
using CoreCheck = std::unique_ptr<core_check_bpf, SkeletonDeleter>;

uint32_t possible_cpus() { return static_cast<uint32_t>(libbpf_num_possible_cpus()); }

// A level whose rate is one unit per second per CPU: nothing measurable
// refills while a test runs, and split mode still has a whole share.
sluice_level_limit compiled(uint64_t burst, Accuracy accuracy, Unit unit = Unit::packets,
                            uint32_t max_frame_bytes = 1518) {
    LevelSettings settings;
    settings.limit = {possible_cpus(), burst, unit};
    settings.accuracy = accuracy;
    settings.cpus = possible_cpus();
    settings.max_frame_bytes = max_frame_bytes;
    auto level = compile_level(settings, "test");
    EXPECT_TRUE(level.ok()) << (level.ok() ? "" : level.error().message);
    return level.ok() ? level.value() : sluice_level_limit{};
}

class CoreInKernel : public ::testing::Test {
protected:
    void SetUp() override {
        SLUICE_REQUIRE_BPF();
        // Split mode keeps a bucket per CPU: stay on one so counts are exact.
        ASSERT_EQ(sched_getaffinity(0, sizeof(saved_affinity_), &saved_affinity_), 0);
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(0, &one);
        ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0) << std::strerror(errno);
        pinned_ = true;
        skel_.reset(core_check_bpf::open_and_load());
        ASSERT_TRUE(skel_) << "the verifier rejected ebpf/core_check.bpf.c: " << std::strerror(errno)
                           << " (run the test binary to see libbpf's verifier log)";
    }

    void set_policy(const sluice_policy_header& header, const sluice_class_entry& cls) {
        const uint32_t zero = 0;
        ASSERT_EQ(bpf_map__update_elem(skel_->maps.check_policy, &zero, sizeof(zero), &header, sizeof(header), 0), 0);
        ASSERT_EQ(bpf_map__update_elem(skel_->maps.check_class, &zero, sizeof(zero), &cls, sizeof(cls), 0), 0);
    }

    // One frame through BPF_PROG_TEST_RUN; returns the XDP action.
    uint32_t run(std::vector<uint8_t> frame) {
        LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(),
                    .data_size_in = static_cast<uint32_t>(frame.size()), .repeat = 1);
        const int err = bpf_prog_test_run_opts(bpf_program__fd(skel_->progs.core_check), &opts);
        EXPECT_EQ(err, 0) << std::strerror(errno);
        return opts.retval;
    }

    // Counter summed over every possible CPU.
    sluice_counter counter(uint32_t class_id, uint32_t verdict, uint32_t reason) {
        const int cpus = libbpf_num_possible_cpus();
        std::vector<sluice_counter> per_cpu(static_cast<size_t>(cpus));
        const uint32_t index = sluice_counter_index(class_id, verdict, reason);
        EXPECT_EQ(bpf_map__lookup_elem(skel_->maps.check_counters, &index, sizeof(index), per_cpu.data(),
                                       per_cpu.size() * sizeof(sluice_counter), 0),
                  0);
        sluice_counter sum{};
        for (const auto& c : per_cpu) {
            sum.packets += c.packets;
            sum.bytes += c.bytes;
        }
        return sum;
    }

    void TearDown() override {
        if (pinned_)
            sched_setaffinity(0, sizeof(saved_affinity_), &saved_affinity_);
    }

    CoreCheck skel_;
    cpu_set_t saved_affinity_{};
    bool pinned_ = false;
};

sluice_class_entry limited_class(Accuracy accuracy, uint64_t source_burst) {
    sluice_class_entry cls{};
    cls.class_id = 3;
    cls.action = SLUICE_ACTION_LIMIT;
    cls.prefix_v4 = 32;
    cls.prefix_v6 = 64;
    cls.table_full_verdict = SLUICE_VERDICT_PASS;
    cls.per_source = compiled(source_burst, accuracy);
    cls.aggregate = compiled(1000, accuracy);
    return cls;
}

sluice_policy_header open_policy(Accuracy accuracy) {
    sluice_policy_header header{};
    header.version = 1;
    header.global = compiled(1000, accuracy);
    header.non_ip_verdict = SLUICE_VERDICT_PASS;
    header.malformed_verdict = SLUICE_VERDICT_DROP;
    return header;
}

std::vector<uint8_t> udp_from(const std::string& source) {
    return PacketBuilder().eth().ipv4(source, "198.51.100.1").udp(1000, 53).payload(18).build();
}

class CoreInKernelModes : public CoreInKernel, public ::testing::WithParamInterface<Accuracy> {};

TEST_P(CoreInKernelModes, SourceBurstThenDropsCountedAsSource) {
    // Split mode gives this CPU burst/N, so size the burst per CPU.
    const uint64_t cpus = possible_cpus();
    set_policy(open_policy(GetParam()), limited_class(GetParam(), 3 * cpus));
    ASSERT_NO_FATAL_FAILURE();
    const uint32_t expect_pass = GetParam() == Accuracy::split ? 3 : static_cast<uint32_t>(3 * cpus);
    for (uint32_t i = 0; i < expect_pass; i++)
        EXPECT_EQ(run(udp_from("192.0.2.10")), XDP_PASS) << "packet " << i;
    for (int i = 0; i < 5; i++)
        EXPECT_EQ(run(udp_from("192.0.2.10")), XDP_DROP);
    EXPECT_EQ(counter(3, SLUICE_VERDICT_PASS, SLUICE_REASON_ADMITTED).packets, expect_pass);
    EXPECT_EQ(counter(3, SLUICE_VERDICT_DROP, SLUICE_REASON_SOURCE).packets, 5u);
    EXPECT_EQ(counter(3, SLUICE_VERDICT_DROP, SLUICE_REASON_SOURCE).bytes, 5u * udp_from("192.0.2.10").size());
}

TEST_P(CoreInKernelModes, GlobalRefusalSpendsNoSourceTokens) {
    sluice_policy_header header = open_policy(GetParam());
    // Two 64-byte frames for this CPU: all of it in lease mode, its share in split.
    const uint32_t global_frames = GetParam() == Accuracy::split ? 2 * possible_cpus() : 2;
    header.global = compiled(64 * global_frames, GetParam(), Unit::bytes, 64);
    // Five packets for this source on this CPU.
    const uint32_t source_burst = GetParam() == Accuracy::split ? 5 * possible_cpus() : 5;
    const sluice_class_entry cls = limited_class(GetParam(), source_burst);
    set_policy(header, cls);
    ASSERT_NO_FATAL_FAILURE();
    auto frame = udp_from("192.0.2.20");
    frame.resize(64);
    uint32_t passed = 0;
    for (int i = 0; i < 10; i++)
        passed += run(frame) == XDP_PASS;
    EXPECT_EQ(passed, 2u);
    EXPECT_EQ(counter(3, SLUICE_VERDICT_DROP, SLUICE_REASON_GLOBAL).packets, 8u);
    EXPECT_EQ(counter(3, SLUICE_VERDICT_DROP, SLUICE_REASON_SOURCE).packets, 0u);

    // Lift the ceiling: the source still holds 5 - 2, untouched by 8 refusals.
    header.global.enabled = 0;
    set_policy(header, cls);
    passed = 0;
    for (int i = 0; i < 10; i++)
        passed += run(frame) == XDP_PASS;
    EXPECT_EQ(passed, 3u);
    EXPECT_EQ(counter(3, SLUICE_VERDICT_DROP, SLUICE_REASON_SOURCE).packets, 7u);
}

INSTANTIATE_TEST_SUITE_P(Accuracy, CoreInKernelModes, ::testing::Values(Accuracy::split, Accuracy::lease),
                         [](const auto& info) { return info.param == Accuracy::split ? "split" : "lease"; });

TEST_F(CoreInKernel, ClassActionsAndUnparsedFramesFollowPolicy) {
    sluice_class_entry cls = limited_class(Accuracy::lease, 10);
    cls.action = SLUICE_ACTION_DROP;
    set_policy(open_policy(Accuracy::lease), cls);
    ASSERT_NO_FATAL_FAILURE();
    EXPECT_EQ(run(udp_from("192.0.2.30")), XDP_DROP);
    EXPECT_EQ(counter(3, SLUICE_VERDICT_DROP, SLUICE_REASON_DENY).packets, 1u);

    EXPECT_EQ(run(PacketBuilder().eth().ethertype(0x0806).payload(28).build()), XDP_PASS);  // ARP
    EXPECT_EQ(counter(SLUICE_CLASS_UNCLASSIFIED, SLUICE_VERDICT_PASS, SLUICE_REASON_NON_IP).packets, 1u);

    EXPECT_EQ(run(PacketBuilder().eth().ipv4("192.0.2.30", "198.51.100.1").ihl(4).udp(1, 2).build()), XDP_DROP);
    EXPECT_EQ(counter(SLUICE_CLASS_UNCLASSIFIED, SLUICE_VERDICT_DROP, SLUICE_REASON_MALFORMED).packets, 1u);
}

TEST_F(CoreInKernel, KernelAndHostBuildTheSameSourceKey) {
    sluice_class_entry cls = limited_class(Accuracy::lease, 1000);
    set_policy(open_policy(Accuracy::lease), cls);
    ASSERT_NO_FATAL_FAILURE();
    const auto frame = PacketBuilder()
                           .eth()
                           .vlan(0x88a8, 10)
                           .vlan(0x8100, 20)
                           .ipv6("2001:db8:aa:bb:1:2:3:4", "2001:db8::1")
                           .udp(1, 2)
                           .build();
    ASSERT_EQ(run(frame), XDP_PASS);

    sluice_packet pkt;
    ASSERT_EQ(sluice_parse(frame.data(), frame.data() + frame.size(), &pkt), SLUICE_PARSE_OK);
    sluice_source_key host_key;
    sluice_source_key_make(&host_key, &pkt, &cls);
    EXPECT_EQ(std::memcmp(&host_key, &skel_->bss->check_last_key, sizeof(host_key)), 0);
    EXPECT_EQ(skel_->bss->check_last_key.addr[7], 0xbb);
    EXPECT_EQ(skel_->bss->check_last_key.addr[8], 0);  // cut at /64
}

}  // namespace
}  // namespace sluice::test
