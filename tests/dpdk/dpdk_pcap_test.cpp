// SPDX-License-Identifier: Apache-2.0
// A net_pcap vdev round trip: frames written to a capture file go in through
// the pcap PMD, a worker decides them, and the capture the PMD writes holds
// exactly the frames that passed, in order, unchanged.
#include <gtest/gtest.h>
#include <rte_bus_vdev.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "dpdk_fixture.h"
#include "eal.h"
#include "pcap_file.h"

namespace sluice::test {
namespace {

class DpdkPcap : public DpdkTest {
  protected:
    void SetUp() override {
        DpdkTest::SetUp();
        if (IsSkipped() || HasFatalFailure()) return;
        char dir[] = "/tmp/sluice-pcap-XXXXXX";
        ASSERT_NE(mkdtemp(dir), nullptr);
        dir_ = dir;
    }
    void TearDown() override {
        close_pcap_port();
        DpdkTest::TearDown();
        std::error_code ignored;
        if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
    }

    // Probes a net_pcap vdev reading `in` and writing `out`, and starts it.
    void open_pcap_port(const std::string& in, const std::string& out) {
        const std::string args = "rx_pcap=" + in + ",tx_pcap=" + out;
        ASSERT_EQ(rte_vdev_init(kName, args.c_str()), 0) << "probing " << kName << " " << args;
        probed_ = true;
        auto port = port_by_name(kName);
        ASSERT_TRUE(port.ok()) << describe(port);
        auto started = configure_port(port.value(), 1, 1, dpdk_environment().pool);
        ASSERT_TRUE(started.ok()) << describe(started);
        pcap_port_ = std::move(started.value());
    }

    // The worker decides what the pcap port reads until it has read it all
    // (three empty polls); returns the frames received.
    unsigned decide_capture() {
        dp_->worker(0).set_ports({pcap_port_->id(), 0}, {pcap_port_->id(), 0});
        unsigned received = 0;
        for (int idle = 0; idle < 3;) {
            const uint16_t n = dp_->worker(0).poll_once();
            received += n;
            idle = n == 0 ? idle + 1 : 0;
        }
        return received;
    }
    // Stopping and removing the device closes (and so flushes) its capture file.
    void close_pcap_port() {
        pcap_port_.reset();
        if (probed_) (void)rte_vdev_uninit(kName);
        probed_ = false;
    }

    static constexpr const char* kName = "net_pcap_roundtrip";
    std::string dir_;
    std::unique_ptr<StartedPort> pcap_port_;
    bool probed_ = false;
};

TEST_F(DpdkPcap, ACaptureGoesThroughAndOnlyWhatPassedComesOut) {
    const Bytes a = udp_from("192.0.2.10");
    const Bytes b = udp_from("192.0.2.11", 100);
    const Bytes six = udp_from("2001:db8::1");
    const Bytes arp = PacketBuilder().eth().ethertype(0x0806).payload(28).build();
    const Bytes cut = PacketBuilder().eth().ipv4("192.0.2.12", "198.51.100.1").udp(1, 2).truncate(14 + 19).build();
    // Two per source, then drops; non-IP passes, malformed drops (the policy's defaults).
    const std::vector<Bytes> in = {a, a, b, a, arp, cut, six, six, six, b, b};
    const std::vector<Bytes> expected = {a, a, b, arp, six, six, b};
    write_pcap(dir_ + "/in.pcap", in);

    apply(policy().add({.id = 1, .per_source = Limit{.rate = 1, .burst = 2, .unit = Unit::packets}}).build());
    ASSERT_NO_FATAL_FAILURE(open_pcap_port(dir_ + "/in.pcap", dir_ + "/out.pcap"));
    const unsigned received = decide_capture();
    EXPECT_EQ(received, in.size());
    close_pcap_port();

    const std::vector<Bytes> out = read_pcap(dir_ + "/out.pcap");
    ASSERT_EQ(out.size(), expected.size());
    for (size_t i = 0; i < out.size(); i++) EXPECT_EQ(out[i], expected[i]) << "frame " << i;
    const Counts c = counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 6u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 3u);
    EXPECT_EQ(c.packets(SLUICE_CLASS_UNCLASSIFIED, kPass, SLUICE_REASON_NON_IP), 1u);
    EXPECT_EQ(c.packets(SLUICE_CLASS_UNCLASSIFIED, kDrop, SLUICE_REASON_MALFORMED), 1u);
}

// A jumbo frame arrives in a chain of the pool's 2 KB mbufs: it is decided
// like any other (admitted, then refused by its source's limit, never
// malformed) and the one that passed goes out whole.
TEST_F(DpdkPcap, AJumboFrameInChainedMbufsIsDecidedLikeAnyOther) {
    const Bytes jumbo = udp_from("192.0.2.20", 8000);  // 8042 bytes
    ASSERT_EQ(jumbo.size(), 8042u);
    const Bytes small = udp_from("192.0.2.21");
    write_pcap(dir_ + "/in.pcap", {jumbo, jumbo, small});

    apply(policy().add({.id = 1, .per_source = Limit{.rate = 1, .burst = 1, .unit = Unit::packets}}).build());
    ASSERT_NO_FATAL_FAILURE(open_pcap_port(dir_ + "/in.pcap", dir_ + "/out.pcap"));
    const unsigned received = decide_capture();
    EXPECT_EQ(received, 3u);
    close_pcap_port();

    const std::vector<Bytes> out = read_pcap(dir_ + "/out.pcap");
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0], jumbo);
    EXPECT_EQ(out[1], small);
    const Counts c = counts();
    EXPECT_EQ(c.packets(1, kPass, SLUICE_REASON_ADMITTED), 2u);
    EXPECT_EQ(c.packets(1, kDrop, SLUICE_REASON_SOURCE), 1u);
    EXPECT_EQ(c.packets(SLUICE_CLASS_UNCLASSIFIED, kDrop, SLUICE_REASON_MALFORMED), 0u);
}

}  // namespace
}  // namespace sluice::test
