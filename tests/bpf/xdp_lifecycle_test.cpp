// SPDX-License-Identifier: Apache-2.0
// The dataplane's life around the program: pinned state that outlives the
// object and is re-adopted, attach and detach on a veth pair inside a
// throwaway network namespace, and pinned links that keep enforcing while no
// daemon runs (fail-static). Every test cleans up its namespace, links and
// pins through guards, also when it fails; the host's own interfaces are
// never touched.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/socket.h>
#include <cstring>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/netns.h"
#include "common/verdict_scenarios.h"
#include "xdp_fixture.h"

namespace sluice::test {
namespace {

// A veth pair in a throwaway namespace with this thread inside it; ifindex
// is sl1's, 0 if any step failed.
struct InsideVeth {
    VethNamespace ns;
    std::optional<EnterNamespace> inside;
    int ifindex = 0;

    InsideVeth() {
        if (!ns.ok()) return;
        inside.emplace(ns.name());
        if (inside->ok()) ifindex = static_cast<int>(if_nametoindex("sl1"));
    }
};

uint32_t prog_id(int prog_fd) {
    bpf_prog_info info{};
    __u32 len = sizeof(info);
    EXPECT_EQ(bpf_obj_get_info_by_fd(prog_fd, &info, &len), 0) << std::strerror(errno);
    return info.id;
}

uint32_t mode_flags(XdpMode mode) { return mode == XdpMode::native ? XDP_FLAGS_DRV_MODE : XDP_FLAGS_SKB_MODE; }

// The program attached to `ifindex` in that mode, 0 if none.
uint32_t attached_prog(int ifindex, XdpMode mode) {
    __u32 id = 0;
    const int err = bpf_xdp_query_id(ifindex, static_cast<int>(mode_flags(mode)), &id);
    EXPECT_EQ(err, 0) << "bpf_xdp_query_id: " << std::strerror(-err);
    return id;
}

// Sends `frame` n times out of `ifname` (into its veth peer).
void send_frames(const std::string& ifname, const Bytes& frame, int n) {
    const int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);  // protocol 0: send only
    ASSERT_GE(fd, 0) << std::strerror(errno);
    sockaddr_ll to{};
    to.sll_family = AF_PACKET;
    to.sll_ifindex = static_cast<int>(if_nametoindex(ifname.c_str()));
    to.sll_halen = ETH_ALEN;
    std::memcpy(to.sll_addr, frame.data(), ETH_ALEN);
    for (int i = 0; i < n; i++)
        EXPECT_EQ(sendto(fd, frame.data(), frame.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof(to)),
                  static_cast<ssize_t>(frame.size()))
            << std::strerror(errno);
    close(fd);
}

// Veth delivery is asynchronous: poll until `done` or 3 s.
bool eventually(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
}

class XdpLifecycle : public XdpTest {
  protected:
    bool open_in_setup() const override { return false; }

    // Class 1 (10.0.0.0/8) passes, class 2 (192.0.2.0/24) is limited to 3
    // per source. The default class 3 passes whatever else a live veth
    // carries (IPv6 neighbour discovery, MLD), so it cannot disturb counts.
    CompiledPolicy standard_policy(uint64_t version) const {
        return policy(version)
            .add({.id = 3, .action = SLUICE_ACTION_PASS})
            .add({.id = 2, .per_source = Limit{.rate = 1, .burst = 3}})
            .add({.id = 1, .action = SLUICE_ACTION_PASS})
            .prefix("10.0.0.0/8", 1)
            .prefix("192.0.2.0/24", 2)
            .build();
    }
};

// ---- pins ----------------------------------------------------------------------------

TEST_F(XdpLifecycle, PinnedStateSurvivesAndIsReadopted) {
    PinDir pins;
    ASSERT_NO_FATAL_FAILURE(
        open(XdpOptions{.test_clock = true, .source_capacity = kTestCapacity, .pin_dir = pins.path()}));
    apply(standard_policy(7));
    const Bytes frame = udp_from("192.0.2.1");
    EXPECT_EQ(verdicts(frame, 5), "PPPDD");
    const uint64_t then = t0_;
    const sluice_hash_key key = dp_->hash_key();
    dp_.reset();
    EXPECT_FALSE(pins.empty());

    ASSERT_NO_FATAL_FAILURE(
        open(XdpOptions{.test_clock = true, .source_capacity = kTestCapacity, .pin_dir = pins.path()}));
    // The new program hashes with the key the pinned table was filled under.
    EXPECT_EQ(std::memcmp(&dp_->hash_key(), &key, sizeof(key)), 0);
    set_clock(then);  // the new program's clock starts unset
    auto version = dp_->active_version();
    SLUICE_ASSERT_OK(version);
    EXPECT_EQ(version.value(), 7u);
    Counts c = counts();
    EXPECT_EQ(c.packets(2, kPass, SLUICE_REASON_ADMITTED), 3u);
    EXPECT_EQ(c.packets(2, kDrop, SLUICE_REASON_SOURCE), 2u);
    // The bucket was not reset: still empty at the same time.
    EXPECT_EQ(verdicts(frame, 2), "DD");
    EXPECT_EQ(counts().packets(2, kDrop, SLUICE_REASON_SOURCE), 4u);
    EXPECT_EQ(stat(SLUICE_STAT_SOURCE_INSERTS), 1u);
    EXPECT_EQ(source_table().in_debt, 1u);

    // New versions after re-adoption land in the inactive slot and take effect.
    apply(policy(8)
              .add({.id = 3, .action = SLUICE_ACTION_PASS})
              .add({.id = 2, .action = SLUICE_ACTION_PASS})
              .prefix("192.0.2.0/24", 2)
              .build());
    EXPECT_EQ(verdicts(frame, 1), "P");
    apply(standard_policy(9));
    EXPECT_EQ(verdicts(frame, 1), "D");
    version = dp_->active_version();
    SLUICE_ASSERT_OK(version);
    EXPECT_EQ(version.value(), 9u);
}

// Bans live in pinned tries: a reloaded program keeps dropping what was
// banned before anyone sets them again, and the first set after adoption
// keeps what it names and removes what it does not.
TEST_F(XdpLifecycle, PinnedBansKeepDroppingAcrossAReloadUntilTheNextSetReplacesThem) {
    PinDir pins;
    const XdpOptions options{.test_clock = true, .source_capacity = kTestCapacity, .pin_dir = pins.path()};
    ASSERT_NO_FATAL_FAILURE(open(options));
    apply(standard_policy(1));
    const uint64_t until = t0_ + 60 * kSec;
    SLUICE_ASSERT_OK(dp_->set_bans({scenarios::ban_of("10.1.0.0/16", until, 4),
                                    scenarios::ban_of("2001:db8::/32", until, 5)}));
    const Bytes banned = udp_from("10.1.2.3"), banned6 = udp_from("2001:db8::7");
    EXPECT_EQ(verdicts(banned, 1), "D");
    const uint64_t then = t0_;
    dp_.reset();

    ASSERT_NO_FATAL_FAILURE(open(options));
    set_clock(then);
    EXPECT_EQ(verdicts(banned, 2), "DD");
    EXPECT_EQ(verdicts(banned6, 1), "D");
    auto slots = dp_->ban_counters();
    SLUICE_ASSERT_OK(slots);
    EXPECT_EQ(slots.value()[4].packets, 3u);  // pinned counters carry on
    EXPECT_EQ(slots.value()[5].packets, 1u);

    SLUICE_ASSERT_OK(dp_->set_bans({scenarios::ban_of("2001:db8::/32", until, 5)}));
    EXPECT_EQ(verdicts(banned, 1), "P");
    EXPECT_EQ(verdicts(banned6, 1), "D");
}

TEST_F(XdpLifecycle, ABanHoldsBeforeTheFirstPolicy) {
    ASSERT_NO_FATAL_FAILURE(open(XdpOptions{.test_clock = true, .source_capacity = kTestCapacity}));
    scenarios::a_ban_holds_before_the_first_policy(*this);
}

TEST_F(XdpLifecycle, PinsOfOtherTableOptionsAreRefused) {
    PinDir pins;
    ASSERT_NO_FATAL_FAILURE(
        open(XdpOptions{.test_clock = true, .source_capacity = kTestCapacity, .pin_dir = pins.path()}));
    dp_.reset();
    // A table of another size would not be the table the pins hold.
    auto other = XdpDataplane::open(XdpOptions{.test_clock = true, .source_capacity = 64, .pin_dir = pins.path()});
    ASSERT_FALSE(other.ok());
    EXPECT_NE(other.error().message.find("source_capacity"), std::string::npos) << other.error().message;
    EXPECT_NE(other.error().message.find(pins.path()), std::string::npos) << other.error().message;
    // The original options still adopt them.
    ASSERT_NO_FATAL_FAILURE(
        open(XdpOptions{.test_clock = true, .source_capacity = kTestCapacity, .pin_dir = pins.path()}));
}

TEST_F(XdpLifecycle, PinsOfAnOlderAbiAreRefusedNamingWhatToRemove) {
    // What ABI 2 pinned: a 16-byte meta whose first word is its version.
    PinDir pins;
    struct {
        uint32_t abi_version, max_classes;
        uint64_t created_ns;
    } old_meta{2, SLUICE_MAX_CLASSES, 1};
    UniqueFd meta(bpf_map_create(BPF_MAP_TYPE_ARRAY, "sluice_meta", 4, sizeof(old_meta), 1, nullptr));
    ASSERT_GE(meta.get(), 0) << std::strerror(errno);
    const uint32_t zero = 0;
    ASSERT_EQ(bpf_map_update_elem(meta.get(), &zero, &old_meta, BPF_ANY), 0) << std::strerror(errno);
    ASSERT_EQ(bpf_obj_pin(meta.get(), (pins.path() + "/sluice_meta").c_str()), 0) << std::strerror(errno);

    auto refused =
        XdpDataplane::open(XdpOptions{.test_clock = true, .source_capacity = kTestCapacity, .pin_dir = pins.path()});
    ASSERT_FALSE(refused.ok());
    const std::string& message = refused.error().message;
    EXPECT_NE(message.find("ABI version 2"), std::string::npos) << message;
    EXPECT_NE(message.find("remove " + pins.path()), std::string::npos) << message;
}

// README, sluiced: "Pins written by an incompatible build are refused with a
// message naming the directory to remove." A map pinned under one of the
// program's map names with another value size (as a build whose struct grew
// would have left) must not be adopted, and must be left as it was: the
// operator decides what to remove.
TEST_F(XdpLifecycle, PinnedMapOfAnotherShapeIsRefusedNamingTheDirectoryAndLeftAlone) {
    PinDir pins;
    const std::string path = pins.path() + "/sluice_stats";
    // sluice_stats is a PERCPU_ARRAY of SLUICE_STAT_COUNT u64s; this one holds 16-byte values.
    UniqueFd stale(bpf_map_create(BPF_MAP_TYPE_PERCPU_ARRAY, "sluice_stats", 4, 16, SLUICE_STAT_COUNT, nullptr));
    ASSERT_GE(stale.get(), 0) << std::strerror(errno);
    ASSERT_EQ(bpf_obj_pin(stale.get(), path.c_str()), 0) << std::strerror(errno);
    bpf_map_info pinned{};
    __u32 len = sizeof(pinned);
    ASSERT_EQ(bpf_obj_get_info_by_fd(stale.get(), &pinned, &len), 0) << std::strerror(errno);

    auto refused =
        XdpDataplane::open(XdpOptions{.test_clock = true, .source_capacity = kTestCapacity, .pin_dir = pins.path()});
    ASSERT_FALSE(refused.ok()) << "a pinned sluice_stats with 16-byte values was adopted";
    const std::string& message = refused.error().message;
    EXPECT_NE(message.find(path + " does not match this build"), std::string::npos) << message;
    EXPECT_NE(message.find("remove " + pins.path()), std::string::npos) << message;

    // The directory holds what it held: the same map, nothing added.
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(pins.path()))
        names.push_back(entry.path().filename().string());
    EXPECT_EQ(names, std::vector<std::string>{"sluice_stats"});
    UniqueFd again(bpf_obj_get(path.c_str()));
    ASSERT_GE(again.get(), 0) << path << ": " << std::strerror(errno);
    bpf_map_info now{};
    len = sizeof(now);
    ASSERT_EQ(bpf_obj_get_info_by_fd(again.get(), &now, &len), 0) << std::strerror(errno);
    EXPECT_EQ(now.id, pinned.id) << "the pinned map was replaced";
    EXPECT_EQ(now.value_size, 16u);
}

// ---- attach and detach -----------------------------------------------------------------

class XdpAttach : public XdpLifecycle, public ::testing::WithParamInterface<XdpMode> {};

TEST_P(XdpAttach, AttachSeesTrafficAndDetachRemovesTheProgram) {
    InsideVeth veth;
    ASSERT_GT(veth.ifindex, 0) << "could not set up veth pair sl0/sl1 in namespace " << veth.ns.name() << ": "
                               << std::strerror(errno);
    const int ifindex = veth.ifindex;

    ASSERT_NO_FATAL_FAILURE(open(XdpOptions{.source_capacity = kTestCapacity, .pin_dir = {}}));
    apply(standard_policy(1));
    SLUICE_ASSERT_OK(dp_->attach(ifindex, GetParam()));
    EXPECT_EQ(dp_->attached_ifindexes(), std::vector<int>{ifindex});
    EXPECT_EQ(attached_prog(ifindex, GetParam()), prog_id(dp_->program_fd()));
    EXPECT_FALSE(dp_->attach(ifindex, GetParam()).ok()) << "attached twice";

    // Frames sent into sl0 arrive on sl1, where the program decides them.
    ASSERT_NO_FATAL_FAILURE(send_frames("sl0", udp_from("10.0.0.1"), 3));
    EXPECT_TRUE(eventually([&] { return counts().packets(1, kPass, SLUICE_REASON_ALLOWED) == 3; }))
        << "the attached program saw " << counts().packets(1, kPass, SLUICE_REASON_ALLOWED) << " of 3 frames";

    SLUICE_ASSERT_OK(dp_->detach(ifindex));
    EXPECT_EQ(attached_prog(ifindex, GetParam()), 0u);
    EXPECT_TRUE(dp_->attached_ifindexes().empty());
    EXPECT_FALSE(dp_->detach(ifindex).ok()) << "detached twice";

    // An unpinned link goes with its dataplane.
    SLUICE_ASSERT_OK(dp_->attach(ifindex, GetParam()));
    EXPECT_NE(attached_prog(ifindex, GetParam()), 0u);
    dp_.reset();
    EXPECT_EQ(attached_prog(ifindex, GetParam()), 0u);
}

TEST_P(XdpAttach, PinnedLinkKeepsEnforcingWithoutItsDaemon) {
    PinDir pins;
    InsideVeth veth;
    ASSERT_GT(veth.ifindex, 0) << "could not set up veth pair sl0/sl1 in namespace " << veth.ns.name() << ": "
                               << std::strerror(errno);
    const int ifindex = veth.ifindex;

    ASSERT_NO_FATAL_FAILURE(open(XdpOptions{.source_capacity = kTestCapacity, .pin_dir = pins.path()}));
    apply(standard_policy(1));
    SLUICE_ASSERT_OK(dp_->attach(ifindex, GetParam()));
    const uint32_t first = prog_id(dp_->program_fd());
    dp_.reset();

    // Fail-static: the program stays attached and keeps deciding.
    EXPECT_EQ(attached_prog(ifindex, GetParam()), first);
    ASSERT_NO_FATAL_FAILURE(send_frames("sl0", udp_from("10.0.0.1"), 3));
    ASSERT_NO_FATAL_FAILURE(send_frames("sl0", udp_from("192.0.2.1"), 5));

    // A new daemon adopts the link and switches it to its own program.
    ASSERT_NO_FATAL_FAILURE(open(XdpOptions{.source_capacity = kTestCapacity, .pin_dir = pins.path()}));
    EXPECT_EQ(dp_->attached_ifindexes(), std::vector<int>{ifindex});
    const uint32_t second = prog_id(dp_->program_fd());
    EXPECT_NE(second, first);
    EXPECT_EQ(attached_prog(ifindex, GetParam()), second);
    // What the orphaned program decided is in the pinned counters.
    EXPECT_TRUE(eventually([&] {
        const Counts c = counts();
        return c.packets(1, kPass, SLUICE_REASON_ALLOWED) == 3 && c.packets(2, kPass, SLUICE_REASON_ADMITTED) == 3 &&
               c.packets(2, kDrop, SLUICE_REASON_SOURCE) == 2;
    })) << "counters did not reach 3 allowed, 3 admitted, 2 dropped: "
        << counts().packets(1, kPass, SLUICE_REASON_ALLOWED) << " allowed, "
        << counts().packets(2, kPass, SLUICE_REASON_ADMITTED) << " admitted, "
        << counts().packets(2, kDrop, SLUICE_REASON_SOURCE) << " dropped, " << counts().total() << " in all";

    SLUICE_ASSERT_OK(dp_->detach(ifindex));
    EXPECT_EQ(attached_prog(ifindex, GetParam()), 0u);
    dp_.reset();
    // Nothing re-attaches from the pins once detached.
    ASSERT_NO_FATAL_FAILURE(open(XdpOptions{.source_capacity = kTestCapacity, .pin_dir = pins.path()}));
    EXPECT_TRUE(dp_->attached_ifindexes().empty());
    EXPECT_EQ(attached_prog(ifindex, GetParam()), 0u);
    dp_.reset();
}

INSTANTIATE_TEST_SUITE_P(Modes, XdpAttach, ::testing::Values(XdpMode::generic, XdpMode::native),
                         [](const auto& info) { return info.param == XdpMode::native ? "native" : "generic"; });

TEST_F(XdpLifecycle, AttachToAMissingInterfaceFailsAndIsCounted) {
    ASSERT_NO_FATAL_FAILURE(open(XdpOptions{.source_capacity = kTestCapacity, .pin_dir = {}}));
    const int missing = 0x7ffffff0;
    EXPECT_FALSE(dp_->attach(missing, XdpMode::generic).ok());
    EXPECT_EQ(dp_->syscall_errors()[static_cast<size_t>(SyscallOp::link)], 1u);
    EXPECT_TRUE(dp_->attached_ifindexes().empty());
    EXPECT_FALSE(dp_->detach(missing).ok());
}

}  // namespace
}  // namespace sluice::test
