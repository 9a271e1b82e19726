// SPDX-License-Identifier: Apache-2.0
// sluice-bench dpdk: frames per second through sluice-dpdk's dataplane on one
// lcore, against a loop that only forwards. Both run on the main lcore of an
// EAL this subcommand starts (no hugepages, no PCI, no shared files), receive from
// net_null0 and send to net_null1, in bursts of 32:
//   pass-through  rte_eth_rx_burst -> rte_eth_tx_burst, nothing else;
//   sluice        DpdkDataplane::Worker::poll_once(): the same receive and
//                 send, with a decision for every frame in between.
// net_null hands out mbufs whose bytes it never writes (copy=0), so an RX
// callback on net_null0 writes an Ethernet/IPv4/UDP header into each frame,
// the IPv4 source from a counter: one source, or --sources of them in a
// scattered order. The callback runs in both loops, so both pay for the
// generator and the ratio is Sluice's own cost. The policy is one class whose
// every level admits (10^11/s), so every frame is decided and forwarded: the
// work differs only by the decision. Cases are interleaved round by round;
// the best round of each counts.
#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>

#include "bench_subcommands.h"
#include "dpdk_dataplane.h"
#include "eal.h"

namespace sluice::bench {
namespace {

constexpr uint16_t kBurst = 32;
constexpr size_t kHeaderBytes = 14 + 20 + 8;  // Ethernet, IPv4, UDP
constexpr size_t kSourceOffset = 14 + 12;     // the IPv4 source address

// What the RX callback writes: a header template and the source counter.
struct Generator {
    std::array<uint8_t, kHeaderBytes> header{};
    uint32_t next = 0;
    uint32_t mask = 0;  // sources - 1; 0: every frame from 10.0.0.0
};

// An Ethernet/IPv4/UDP header for a frame of `frame_bytes`: 10.0.0.0 ->
// 198.51.100.1, UDP 40000 -> 9. The IPv4 checksum is left 0: the source
// changes per frame and the decision core does not read it.
std::array<uint8_t, kHeaderBytes> header_template(uint16_t frame_bytes) {
    std::array<uint8_t, kHeaderBytes> h{};
    const uint8_t ether[14] = {0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00};
    std::memcpy(h.data(), ether, sizeof ether);
    uint8_t* ip = h.data() + 14;
    const uint16_t ip_bytes = static_cast<uint16_t>(frame_bytes - 14);
    ip[0] = 0x45;
    ip[2] = static_cast<uint8_t>(ip_bytes >> 8);
    ip[3] = static_cast<uint8_t>(ip_bytes);
    ip[8] = 64;  // TTL
    ip[9] = 17;  // UDP
    ip[12] = 10;
    const uint8_t destination[4] = {198, 51, 100, 1};
    std::memcpy(ip + 16, destination, 4);
    uint8_t* udp = ip + 20;
    const uint16_t udp_bytes = static_cast<uint16_t>(ip_bytes - 20);
    const uint8_t ports_and_length[6] = {
        40000 >> 8, 40000 & 0xff, 0, 9, static_cast<uint8_t>(udp_bytes >> 8), static_cast<uint8_t>(udp_bytes)};
    std::memcpy(udp, ports_and_length, sizeof ports_and_length);
    return h;
}

uint16_t stamp_frames(uint16_t, uint16_t, rte_mbuf** frames, uint16_t count, uint16_t, void* user) {
    auto* generator = static_cast<Generator*>(user);
    for (uint16_t i = 0; i < count; ++i) {
        auto* data = rte_pktmbuf_mtod(frames[i], uint8_t*);
        std::memcpy(data, generator->header.data(), kHeaderBytes);
        // An odd multiplier permutes the low bits: every source once per
        // mask + 1 frames, in an order the caches cannot follow.
        const uint32_t source = rte_cpu_to_be_32(0x0a000000u | ((generator->next++ * 2654435761u) & generator->mask));
        std::memcpy(data + kSourceOffset, &source, sizeof source);
    }
    return count;
}

double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct DpdkSample {
    uint64_t frames = 0;
    double wall_s = 0, cpu_s = 0;
    double mpps() const { return wall_s > 0 ? static_cast<double>(frames) / wall_s / 1e6 : 0; }
    double mpps_per_cpu_s() const { return cpu_s > 0 ? static_cast<double>(frames) / cpu_s / 1e6 : 0; }
    double ns_per_frame() const { return frames > 0 ? cpu_s * 1e9 / static_cast<double>(frames) : 0; }
};

// Calls poll (one burst; returns the frames it received) for `seconds`.
DpdkSample measure(double seconds, const std::function<uint16_t()>& poll) {
    const uint64_t hz = rte_get_tsc_hz();
    const uint64_t start = rte_get_tsc_cycles();
    const uint64_t end = start + static_cast<uint64_t>(seconds * static_cast<double>(hz));
    const double cpu_start = thread_cpu_seconds();
    DpdkSample sample;
    uint64_t now = start;
    while (now < end && !g_interrupted.load(std::memory_order_relaxed)) {
        for (int i = 0; i < 64; ++i) sample.frames += poll();
        now = rte_get_tsc_cycles();
    }
    sample.wall_s = static_cast<double>(now - start) / static_cast<double>(hz);
    sample.cpu_s = thread_cpu_seconds() - cpu_start;
    return sample;
}

// Polls until `frames` frames went through: every source gets its state
// before the clock starts, as in `decide`.
Status warm_up(uint64_t frames, const std::function<uint16_t()>& poll) {
    for (uint64_t done = 0; done < frames;) {
        if (auto status = check_interrupted(); !status) return status;
        const uint16_t received = poll();
        if (received == 0) return Error{"net_null0 delivered no frames (mbuf pool exhausted?)"};
        done += received;
    }
    return ok_status();
}

// Frames the dataplane passed and dropped so far, over every class and reason
// (would_drop passed: its class is in shadow).
Result<std::pair<uint64_t, uint64_t>> verdict_totals(DpdkDataplane& dataplane) {
    auto counters = dataplane.counters();
    if (!counters) return counters.error();
    uint64_t passed = 0, dropped = 0;
    for (size_t i = 0; i < counters.value().size(); ++i) {
        const uint32_t verdict = static_cast<uint32_t>(i / SLUICE_REASON_COUNT % SLUICE_VERDICT_COUNT);
        (verdict == SLUICE_VERDICT_DROP ? dropped : passed) += counters.value()[i].packets;
    }
    return std::pair{passed, dropped};
}

struct DpdkCase {
    std::string name;
    uint64_t sources = 1;
    DpdkDataplane* dataplane = nullptr;  // null: pass-through
    DpdkSample best;
    uint64_t frames = 0;  // over every round
};

}  // namespace

Status run_dpdk(const CommonOptions& /*run*/, const DpdkBenchOptions& options, Json& report) {
    const uint64_t sources = options.sources, rounds = options.rounds, size = options.size;
    const double seconds = static_cast<double>(options.ms) / 1000.0;

    // One lcore, the CPU we are on: the EAL pins this thread to it.
    const int cpu = sched_getcpu();
    if (cpu < 0) return Error{std::string("sched_getcpu: ") + std::strerror(errno)};
    // Tables for 2x the sources: a cuckoo hash near full spends its time
    // relocating entries, and production sizes with headroom too.
    const uint32_t capacity = static_cast<uint32_t>(sources * 2);
    const std::string memory_mb = std::to_string(512 + capacity / 1024);  // ~1 KiB per entry is ample
    // No hugepages, no PCI, no shared config files (--in-memory cannot be
    // combined with --no-huge in DPDK 22.11); the prefix keeps concurrent runs
    // apart, and the Eal removes its empty runtime directory.
    auto eal =
        Eal::init({"sluice-bench", "-l", std::to_string(cpu), "--no-huge", "--no-pci", "--no-shconf", "--file-prefix",
                   "sluice-bench-" + std::to_string(getpid()), "-m", memory_mb, "--no-telemetry", "--log-level",
                   "warning", "--vdev", "net_null0,copy=0,size=" + std::to_string(size), "--vdev",
                   "net_null1,size=" + std::to_string(size)});
    if (!eal) return eal.error();
    auto pool = PacketPool::create("bench_pool", 8191);
    if (!pool) return pool.error();
    auto rx = port_by_name("net_null0");
    if (!rx) return rx.error();
    auto tx = port_by_name("net_null1");
    if (!tx) return tx.error();
    auto rx_port = configure_port(rx.value(), 1, 1, pool.value()->get());
    if (!rx_port) return rx_port.error();
    auto tx_port = configure_port(tx.value(), 1, 1, pool.value()->get());
    if (!tx_port) return tx_port.error();

    Generator generator;
    generator.header = header_template(static_cast<uint16_t>(size));
    if (rte_eth_add_rx_callback(rx.value(), 0, stamp_frames, &generator) == nullptr)
        return Error{"port net_null0: rte_eth_add_rx_callback: " + dpdk_error(rte_errno)};

    auto policy = single_class_policy(100'000'000'000, 4'000'000'000, Accuracy::split, 1);
    if (!policy) return policy.error();
    std::vector<std::unique_ptr<DpdkDataplane>> dataplanes;
    std::vector<DpdkCase> cases{{"pass-through", 1, nullptr, {}, 0}};
    for (const uint64_t n : {uint64_t{1}, sources}) {
        DpdkOptions dp_options;
        dp_options.workers = 1;
        dp_options.source_capacity = n == 1 ? 1024 : capacity;
        auto dataplane = DpdkDataplane::create(dp_options);
        if (!dataplane) return dataplane.error();
        if (auto status = dataplane.value()->apply(policy.value()); !status) return status.error();
        dataplane.value()->worker(0).set_ports({rx.value(), 0}, {tx.value(), 0});
        cases.push_back({"sluice", n, dataplane.value().get(), {}, 0});
        dataplanes.push_back(std::move(dataplane.value()));
    }

    std::array<rte_mbuf*, kBurst> frames{};
    auto pass_through = [&]() -> uint16_t {
        const uint16_t received = rte_eth_rx_burst(rx.value(), 0, frames.data(), kBurst);
        const uint16_t sent = rte_eth_tx_burst(tx.value(), 0, frames.data(), received);
        if (sent < received) rte_pktmbuf_free_bulk(frames.data() + sent, received - sent);
        return received;
    };
    auto poll_of = [&](const DpdkCase& c) -> std::function<uint16_t()> {
        if (c.dataplane == nullptr) return pass_through;
        Worker* worker = &c.dataplane->worker(0);
        return [worker]() { return worker->poll_once(); };
    };

    for (const auto& c : cases) {
        generator.mask = static_cast<uint32_t>(c.sources - 1);
        if (auto status = warm_up(std::max<uint64_t>(2 * c.sources, 1u << 16), poll_of(c)); !status) return status;
    }
    std::vector<std::pair<uint64_t, uint64_t>> verdicts_before;
    for (auto& dataplane : dataplanes) {
        auto totals = verdict_totals(*dataplane);
        if (!totals) return totals.error();
        verdicts_before.push_back(totals.value());
    }
    for (uint64_t round = 0; round < rounds; ++round) {
        for (auto& c : cases) {
            generator.mask = static_cast<uint32_t>(c.sources - 1);
            const DpdkSample sample = measure(seconds, poll_of(c));
            if (auto status = check_interrupted(); !status) return status;
            c.frames += sample.frames;
            if (sample.mpps_per_cpu_s() > c.best.mpps_per_cpu_s()) c.best = sample;
        }
    }

    const DpdkSample& base = cases[0].best;
    Table table{"dpdk: frames per second on one lcore (CPU " + std::to_string(cpu) + "), net_null0 -> net_null1, " +
                    std::to_string(size) + " B frames, bursts of " + std::to_string(kBurst) + ", best of " +
                    std::to_string(rounds) + " rounds of " + fixed(seconds, 2) + " s",
                {"loop", "sources", "source table", "Mpps", "Mpps/CPU-s", "ns/frame", "vs pass-through", "+ns/frame",
                 "passed", "dropped"},
                {}};
    Json results = Json::array();
    for (size_t i = 0; i < cases.size(); ++i) {
        const DpdkCase& c = cases[i];
        const double ratio = base.mpps_per_cpu_s() > 0 ? c.best.mpps_per_cpu_s() / base.mpps_per_cpu_s() : 0;
        const double added_ns = c.best.ns_per_frame() - base.ns_per_frame();
        Json row = {{"loop", c.name},
                    {"sources", c.sources},
                    {"frames", c.frames},
                    {"best_round_frames", c.best.frames},
                    {"mpps", c.best.mpps()},
                    {"mpps_per_cpu_second", c.best.mpps_per_cpu_s()},
                    {"ns_per_frame", c.best.ns_per_frame()},
                    {"ratio_to_pass_through", ratio},
                    {"added_ns_per_frame", added_ns}};
        std::string passed = "-", dropped = "-", table_size = "-";
        if (c.dataplane != nullptr) {
            auto totals = verdict_totals(*c.dataplane);
            if (!totals) return totals.error();
            const auto& before = verdicts_before[i - 1];
            const uint64_t p = totals.value().first - before.first, d = totals.value().second - before.second;
            auto usage = c.dataplane->source_table();
            if (!usage) return usage.error();
            row["passed"] = p;
            row["dropped"] = d;
            row["source_entries_known"] = usage.value().known;
            row["source_capacity"] = usage.value().capacity;
            passed = std::to_string(p);
            dropped = std::to_string(d);
            table_size = count_label(usage.value().known) + "/" + count_label(usage.value().capacity);
        }
        table.rows.push_back({c.name, count_label(c.sources), table_size, fixed(c.best.mpps(), 2),
                              fixed(c.best.mpps_per_cpu_s(), 2), fixed(c.best.ns_per_frame(), 1), fixed(ratio, 2),
                              i == 0 ? "-" : fixed(added_ns, 1), passed, dropped});
        results.push_back(row);
    }
    table.print();
    std::printf(
        "\nMpps/CPU-s: frames per second of CPU the loop got (the machine is shared); vs pass-through: that rate\n"
        "over the pass-through loop's; +ns/frame: what the decision adds. Every frame should pass (dropped 0).\n");

    report["settings"] = {{"sources", sources},
                          {"rounds", rounds},
                          {"seconds_per_round", seconds},
                          {"frame_bytes", size},
                          {"burst", kBurst},
                          {"lcore_cpu", cpu},
                          {"ports", "net_null0 (copy=0, RX callback writes Ethernet/IPv4/UDP) -> net_null1"},
                          {"policy", "one class, split accuracy, every level admits (1e11/s)"}};
    report["results"] = results;
    // Dataplanes before the ports, the ports before the pool, all before the EAL.
    dataplanes.clear();
    return ok_status();
}

}  // namespace sluice::bench
