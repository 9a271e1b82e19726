// SPDX-License-Identifier: Apache-2.0
// What the files of sluice-bench veth share: the shell commands it runs, the
// two network namespaces and the veth pair between them
// (bench_veth_topology.cpp), the receivers (bench_veth_receivers.cpp) and the
// traffic generators (bench_veth_generator.cpp and
// bench_veth_packet_generator.cpp). bench_veth.cpp runs a generator against
// each receiver in turn and reports.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_common.h"
#include "common/packet_builder.h"

namespace sluice::bench::veth {

inline constexpr const char* kRxAddress = "198.18.0.1";  // RFC 2544 benchmarking range

// ---- shell commands ---------------------------------------------------------

// Runs a shell command; its output (stdout and stderr) on success, or an
// error quoting the command and what it said.
Result<std::string> command_output(const std::string& command);
Status run_command(const std::string& command);
// Cleanup from destructors: a failure is reported, never thrown away silently.
void run_cleanup(const std::string& command);
Status require_tool(const std::string& tool);

// ---- namespaces and the veth pair -------------------------------------------

// A named network namespace, deleted (with every link, address, nftables
// table and iptables rule inside it) when dropped.
class Netns {
  public:
    static Result<std::unique_ptr<Netns>> create(const std::string& name);
    ~Netns();
    Netns(const Netns&) = delete;
    Netns& operator=(const Netns&) = delete;
    const std::string& name() const { return name_; }
    std::string exec(const std::string& command) const { return "ip netns exec " + name_ + " " + command; }

  private:
    explicit Netns(std::string name) : name_(std::move(name)) {}
    std::string name_;
};

// Moves the calling thread into a namespace, and back when dropped.
class InNetns {
  public:
    static Result<std::unique_ptr<InNetns>> enter(const Netns& ns);
    ~InNetns();

  private:
    InNetns() = default;
    UniqueFd saved_;
};

struct Link {
    int ifindex = 0;
    test::PacketBuilder::Mac mac{};
};

// netns sluice-bench-<pid>-tx: veth sb<pid>t, the generator's way out
// netns sluice-bench-<pid>-rx: veth sb<pid>r, 198.18.0.1/24, the receiver
// IPv6 is off on both sides: its neighbour discovery would add frames the
// receivers count. Dropping it deletes both namespaces, and with them the
// pair and whatever a receiver left inside: on every exit, Ctrl-C included.
struct Topology {
    std::unique_ptr<Netns> tx, rx;  // in this order: rx is deleted first
    std::string tx_dev, rx_dev;
    Link tx_link, rx_link;
};

// Removes the namespaces of earlier runs that died without cleaning up, then
// builds this run's.
Result<Topology> create_topology();

// ---- receivers --------------------------------------------------------------

struct Counts {
    uint64_t decided = 0;   // packets the receiver's limiter (or drop) saw
    uint64_t admitted = 0;  // of which it let through
    uint64_t bpf_runs = 0;  // XDP receivers: program runs and their time
    uint64_t bpf_run_ns = 0;
};

struct Limit {
    uint64_t rate;   // packets per second per source
    uint64_t burst;  // bucket depth in packets
};

// A limiter (or XDP_DROP) on the receiving veth, removed when dropped; read()
// gives its counts so far, and a run takes their difference.
class Receiver {
  public:
    virtual ~Receiver() = default;
    virtual Result<Counts> read() = 0;
};

// The receiver called `name` ("baseline", "sluice", "nftables" or
// "iptables"), set up on topology's receiving veth to limit each of
// `sources` sources to `limit`.
Result<std::unique_ptr<Receiver>> create_receiver(const std::string& name, const Topology& topology, const Limit& limit,
                                                  uint32_t sources);

// ---- the generators ---------------------------------------------------------

struct Distribution {
    std::string name;  // "uniform" or "zipf"
    uint32_t sources;
    // Expected share of each source that appears (for the accuracy bound).
    std::vector<double> shares;
};

inline constexpr uint32_t kSourceBase = 0x0a000000;  // sources are 10.0.0.0 + index

// How a generator draws each frame's source index, the same for both
// generators. Uniform: random & uniform_mask (sources is a power of two).
// Zipf (s = 1): a random entry of zipf_table (a power of two long), which
// holds source indexes in proportion to their probability, so drawing stays
// one lookup per frame.
struct SourceSpread {
    uint32_t uniform_mask = 0;
    std::vector<uint32_t> zipf_table;  // empty: uniform
};

// The spread for dist; fills dist.shares.
SourceSpread source_spread(Distribution& dist);

// The frame every generator sends, before its source is set: UDP from
// 10.0.0.0 to kRxAddress:9, from tx's MAC to rx's, 60 bytes.
std::vector<uint8_t> generator_frame(const Link& tx, const Link& rx);

struct Sent {
    uint64_t frames;
    double seconds;
    double cpu_ns;  // the sending thread's CPU time: with the receiver's softirq in it
};

// Sends dist's frames out of the tx veth to the rx veth's MAC and kRxAddress.
//   live:   ebpf/trafficgen.bpf.c under BPF_PROG_TEST_RUN with
//           BPF_F_TEST_XDP_LIVE_FRAMES, redirecting each frame into the veth
//           (bench_veth_generator.cpp);
//   packet: sendmmsg() on a raw AF_PACKET socket bound to the veth, for
//           kernels that refuse live frames (bench_veth_packet_generator.cpp).
// bench/README.md says how the two differ.
class Generator {
  public:
    virtual ~Generator() = default;
    // Sends for `seconds` from a thread in the sender's namespace pinned to
    // cpu; stops early on Ctrl-C or when *stop is set.
    virtual Result<Sent> send(const Netns& tx, int cpu, double seconds, const std::atomic<bool>* stop = nullptr) = 0;
};

// Runs body(deadline) on a thread in tx's namespace pinned to cpu, timing it
// in wall-clock and in the thread's CPU time; body returns the frames it sent.
using SenderBody = std::function<Result<uint64_t>(std::chrono::steady_clock::time_point deadline)>;
Result<Sent> run_sender(const Netns& tx, int cpu, double seconds, const SenderBody& body);

// "live" or "packet" for --generator's value: "auto" takes live if one
// live-frame run of one frame succeeds in tx's namespace (it is refused with
// EPERM by some kernels), else packet, and says why on stderr.
Result<std::string> choose_generator(const std::string& option, const Topology& topology);

// The generator called `name` ("live" or "packet"); fills dist.shares.
Result<std::unique_ptr<Generator>> create_generator(const std::string& name, const Link& tx, const Link& rx,
                                                    Distribution& dist);
Result<std::unique_ptr<Generator>> create_packet_generator(const Link& tx, const Link& rx, Distribution& dist);

}  // namespace sluice::bench::veth
