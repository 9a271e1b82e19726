// SPDX-License-Identifier: Apache-2.0
// What the files of sluice-bench veth share: the shell commands it runs, the
// two network namespaces and the veth pair between them
// (bench_veth_topology.cpp), the receivers (bench_veth_receivers.cpp) and the
// traffic generator (bench_veth_generator.cpp). bench_veth.cpp runs the
// generator against each receiver in turn and reports.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench_common.h"
#include "common/packet_builder.h"

struct trafficgen_bpf;

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

// ---- the generator ----------------------------------------------------------

struct Distribution {
    std::string name;  // "uniform" or "zipf"
    uint32_t sources;
    // Expected share of each source that appears (for the accuracy bound).
    std::vector<double> shares;
};

// ebpf/trafficgen.bpf.c, loaded to send UDP frames from dist's sources out of
// the tx veth to the rx veth's MAC and kRxAddress.
class Generator {
  public:
    // Fills dist.shares.
    static Result<std::unique_ptr<Generator>> create(const Link& tx, const Link& rx, Distribution& dist);
    ~Generator();

    struct Sent {
        uint64_t frames;
        double seconds;
        double cpu_ns;  // the sending thread's CPU time: with the receiver's softirq in it
    };

    // Sends for `seconds` from a thread in the sender's namespace pinned to
    // cpu.
    Result<Sent> send(const Netns& tx, int cpu, double seconds);

  private:
    Generator() = default;
    ::trafficgen_bpf* skel_ = nullptr;
    std::vector<uint8_t> frame_;
};

}  // namespace sluice::bench::veth
