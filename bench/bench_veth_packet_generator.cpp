// SPDX-License-Identifier: Apache-2.0
// sluice-bench veth's second generator, for kernels that refuse
// BPF_PROG_TEST_RUN with live frames: a raw AF_PACKET socket in the sending
// namespace, bound to the tx veth, past the qdisc layer
// (PACKET_QDISC_BYPASS). The sending thread fills a batch of 256 frames (the
// live generator's frame, each with a source drawn from the same
// SourceSpread) and hands them over with one sendmmsg(). A TX ring
// (PACKET_TX_RING) was measured too, and was no faster: into XDP_DROP, 1
// source, 422-439K packets per CPU-second against sendmmsg's 463-477K (into
// sluice about the same), as this kernel sends ring frames as zero-copy
// fragments that the veth copies once more (skb_copy_ubufs) before XDP on
// the veth copies them again.
//
// The veth delivers each frame on the sending CPU and schedules the
// receiver's softirq there; it runs when the transmit path re-enables bottom
// halves, inside the sender's sendmmsg() (measured: every NET_RX softirq of
// a run on the sender's CPU, about one per frame). As with live frames,
// sender and receiver take turns on one CPU, nothing is lost in between, and
// the thread's CPU time holds both. Unlike live frames, each frame is an skb
// from the start (XDP on a veth copies it into a page first) and the
// receiver runs per frame rather than per batch of 64: the receiver costs
// more per packet, and figures compare within a generator, not across.
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "bench_veth.h"

namespace sluice::bench::veth {
namespace {

constexpr uint32_t kBatch = 256;  // frames per sendmmsg()

// splitmix64: fast, and good enough to draw sources.
struct SplitMix {
    uint64_t state;
    uint32_t next() {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return static_cast<uint32_t>((z ^ (z >> 31)) >> 32);
    }
};

class PacketGenerator final : public Generator {
  public:
    PacketGenerator(int ifindex, std::vector<uint8_t> frame, SourceSpread spread)
        : ifindex_(ifindex), frame_(std::move(frame)), spread_(std::move(spread)) {}

    Result<Sent> send(const Netns& tx, int cpu, double seconds, const std::atomic<bool>* stop) override {
        return run_sender(tx, cpu, seconds, [&](std::chrono::steady_clock::time_point deadline) -> Result<uint64_t> {
            // Opened in the thread: a socket belongs to the namespace it was
            // made in, and the tx veth is only in the sender's.
            auto socket = open_socket();
            if (!socket) return socket.error();
            const int fd = socket.value().get();
            const size_t size = frame_.size();
            std::vector<uint8_t> frames(size * kBatch);
            std::vector<iovec> iov(kBatch);
            std::vector<mmsghdr> messages(kBatch);
            for (uint32_t i = 0; i < kBatch; ++i) {
                std::memcpy(&frames[i * size], frame_.data(), size);
                iov[i] = {&frames[i * size], size};
                messages[i].msg_hdr.msg_iov = &iov[i];
                messages[i].msg_hdr.msg_iovlen = 1;
            }
            SplitMix random{std::random_device{}()};
            uint64_t sent = 0;
            while (std::chrono::steady_clock::now() < deadline && !g_interrupted.load() && !(stop && stop->load())) {
                for (uint32_t i = 0; i < kBatch; ++i) set_source(&frames[i * size], random.next());
                for (uint32_t done = 0; done < kBatch;) {
                    const int n = sendmmsg(fd, messages.data() + done, kBatch - done, 0);
                    if (n < 0 && errno == EINTR) continue;
                    if (n < 0) return Error{std::string("sendmmsg on the tx veth: ") + std::strerror(errno)};
                    done += static_cast<uint32_t>(n);
                    sent += static_cast<uint64_t>(n);
                }
            }
            return sent;
        });
    }

  private:
    Result<UniqueFd> open_socket() const {
        UniqueFd fd(::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0));  // protocol 0: it receives nothing
        if (!fd.valid()) return Error{std::string("AF_PACKET socket: ") + std::strerror(errno)};
        const int bypass = 1;
        if (setsockopt(fd.get(), SOL_PACKET, PACKET_QDISC_BYPASS, &bypass, sizeof(bypass)) != 0)
            return Error{std::string("PACKET_QDISC_BYPASS: ") + std::strerror(errno)};
        sockaddr_ll address{};
        address.sll_family = AF_PACKET;
        address.sll_ifindex = ifindex_;
        if (bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0)
            return Error{std::string("binding the AF_PACKET socket to the tx veth: ") + std::strerror(errno)};
        return fd;
    }

    // Source 10.0.0.0 + a drawn index, and the IPv4 header checksum to
    // match (the receiving stack checks it).
    void set_source(uint8_t* frame, uint32_t random) const {
        const uint32_t index = spread_.zipf_table.empty()
                                   ? random & spread_.uniform_mask
                                   : spread_.zipf_table[random & (spread_.zipf_table.size() - 1)];
        const uint32_t source = kSourceBase + index;
        uint8_t* ip = frame + 14;
        ip[12] = static_cast<uint8_t>(source >> 24);
        ip[13] = static_cast<uint8_t>(source >> 16);
        ip[14] = static_cast<uint8_t>(source >> 8);
        ip[15] = static_cast<uint8_t>(source);
        ip[10] = ip[11] = 0;
        const uint16_t check = test::PacketBuilder::checksum(ip, 20);
        ip[10] = static_cast<uint8_t>(check >> 8);
        ip[11] = static_cast<uint8_t>(check);
    }

    int ifindex_;
    std::vector<uint8_t> frame_;
    SourceSpread spread_;
};

}  // namespace

Result<std::unique_ptr<Generator>> create_packet_generator(const Link& tx, const Link& rx, Distribution& dist) {
    return std::unique_ptr<Generator>(new PacketGenerator(tx.ifindex, generator_frame(tx, rx), source_spread(dist)));
}

}  // namespace sluice::bench::veth
