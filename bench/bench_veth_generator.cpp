// SPDX-License-Identifier: Apache-2.0
// sluice-bench veth's traffic generator: ebpf/trafficgen.bpf.c loaded for a
// uniform or Zipf spread of IPv4 sources, run under BPF_PROG_TEST_RUN with
// live frames from a thread in the sending namespace.
#include <bpf/bpf.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "bench_veth.h"
#include "trafficgen.skel.h"

namespace sluice::bench::veth {

constexpr uint32_t kSourceBase = 0x0a000000;  // sources are 10.0.0.0 + index

Result<std::unique_ptr<Generator>> Generator::create(const Link& tx, const Link& rx, Distribution& dist) {
    std::unique_ptr<Generator> g(new Generator());
    g->skel_ = trafficgen_bpf::open();
    if (!g->skel_) return Error{std::string("opening ebpf/trafficgen.bpf.c: ") + std::strerror(errno)};
    g->skel_->rodata->tg_ifindex = static_cast<uint32_t>(tx.ifindex);
    g->skel_->rodata->tg_source_base = kSourceBase;
    std::vector<uint32_t> table;
    if (dist.name == "zipf" && dist.sources > 1) {
        // Zipf (s = 1): source k (from 1) has probability (1/k) / H(N).
        // The table's entries hold source indexes in that proportion,
        // by inverse CDF at the middle of each entry's slice.
        const uint32_t entries = std::max<uint32_t>(1u << 16, std::min<uint32_t>(dist.sources, 1u << 22));
        double harmonic = 0;
        for (uint32_t k = 1; k <= dist.sources; ++k) harmonic += 1.0 / k;
        table.resize(entries);
        double cdf = 0;
        uint32_t k = 0;
        for (uint32_t i = 0; i < entries; ++i) {
            const double target = (i + 0.5) / entries;
            while (k < dist.sources - 1 && cdf + 1.0 / (k + 1) / harmonic < target) cdf += 1.0 / (++k) / harmonic;
            table[i] = k;
        }
        g->skel_->rodata->tg_zipf_mask = entries - 1;
        bpf_map__set_max_entries(g->skel_->maps.tg_zipf, entries);
        std::map<uint32_t, uint32_t> hits;
        for (const uint32_t source : table) hits[source]++;
        dist.shares.clear();
        for (const auto& [source, n] : hits) dist.shares.push_back(static_cast<double>(n) / entries);
    } else {
        g->skel_->rodata->tg_source_mask = dist.sources - 1;
        dist.shares.assign(dist.sources, 1.0 / dist.sources);
    }
    if (const int err = trafficgen_bpf::load(g->skel_))
        return Error{std::string("loading ebpf/trafficgen.bpf.c: ") + std::strerror(-err)};
    if (!table.empty()) {
        std::vector<uint32_t> keys(table.size());
        for (uint32_t i = 0; i < keys.size(); ++i) keys[i] = i;
        __u32 count = static_cast<__u32>(table.size());
        if (bpf_map_update_batch(bpf_map__fd(g->skel_->maps.tg_zipf), keys.data(), table.data(), &count, nullptr) != 0)
            return Error{std::string("filling the Zipf table: ") + std::strerror(errno)};
    }
    g->frame_ = test::PacketBuilder()
                    .eth(rx.mac, tx.mac)
                    .ipv4("10.0.0.0", kRxAddress)
                    .udp(1000, 9)  // discard: a closed port
                    .payload(18)
                    .build();
    return g;
}

Generator::~Generator() { trafficgen_bpf::destroy(skel_); }

Result<Generator::Sent> Generator::send(const Netns& tx, int cpu, double seconds) {
    Result<Sent> result = Error{"generator did not run"};
    std::thread sender([&] {
        auto scope = InNetns::enter(tx);
        if (!scope) {
            result = scope.error();
            return;
        }
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        sched_setaffinity(0, sizeof(set), &set);
        timespec cpu_start{}, cpu_end{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu_start);
        const auto start = std::chrono::steady_clock::now();
        const auto deadline = start + std::chrono::duration<double>(seconds);
        uint64_t sent = 0;
        constexpr int kChunk = 1 << 16;  // short calls: Ctrl-C is seen within milliseconds
        while (std::chrono::steady_clock::now() < deadline && !g_interrupted.load()) {
            std::vector<uint8_t> data = frame_;
            LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = data.data(),
                        .data_size_in = static_cast<uint32_t>(data.size()), .repeat = kChunk,
                        .flags = BPF_F_TEST_XDP_LIVE_FRAMES, .batch_size = 64);
            if (bpf_prog_test_run_opts(bpf_program__fd(skel_->progs.trafficgen_xdp), &opts) != 0) {
                result = Error{std::string("BPF_PROG_TEST_RUN (live frames) failed: ") + std::strerror(errno)};
                return;
            }
            sent += kChunk;
        }
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu_end);
        result = Sent{sent, elapsed,
                      static_cast<double>(cpu_end.tv_sec - cpu_start.tv_sec) * 1e9 +
                          static_cast<double>(cpu_end.tv_nsec - cpu_start.tv_nsec)};
    });
    sender.join();
    return result;
}

}  // namespace sluice::bench::veth
