// SPDX-License-Identifier: Apache-2.0
// sluice-bench veth's traffic generators: what both share (the source spread
// and the frame), the live one (ebpf/trafficgen.bpf.c run under
// BPF_PROG_TEST_RUN with live frames from a thread in the sending namespace)
// and the choice between it and the AF_PACKET one
// (bench_veth_packet_generator.cpp).
#include <bpf/bpf.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "bench_veth.h"
#include "trafficgen.skel.h"

namespace sluice::bench::veth {

SourceSpread source_spread(Distribution& dist) {
    SourceSpread spread;
    if (dist.name == "zipf" && dist.sources > 1) {
        // Zipf (s = 1): source k (from 1) has probability (1/k) / H(N).
        // The table's entries hold source indexes in that proportion,
        // by inverse CDF at the middle of each entry's slice.
        const uint32_t entries = std::max<uint32_t>(1u << 16, std::min<uint32_t>(dist.sources, 1u << 22));
        double harmonic = 0;
        for (uint32_t k = 1; k <= dist.sources; ++k) harmonic += 1.0 / k;
        std::vector<uint32_t>& table = spread.zipf_table;
        table.resize(entries);
        double cdf = 0;
        uint32_t k = 0;
        for (uint32_t i = 0; i < entries; ++i) {
            const double target = (i + 0.5) / entries;
            while (k < dist.sources - 1 && cdf + 1.0 / (k + 1) / harmonic < target) cdf += 1.0 / (++k) / harmonic;
            table[i] = k;
        }
        std::map<uint32_t, uint32_t> hits;
        for (const uint32_t source : table) hits[source]++;
        dist.shares.clear();
        for (const auto& [source, n] : hits) dist.shares.push_back(static_cast<double>(n) / entries);
    } else {
        spread.uniform_mask = dist.sources - 1;
        dist.shares.assign(dist.sources, 1.0 / dist.sources);
    }
    return spread;
}

std::vector<uint8_t> generator_frame(const Link& tx, const Link& rx) {
    return test::PacketBuilder()
        .eth(rx.mac, tx.mac)
        .ipv4("10.0.0.0", kRxAddress)
        .udp(1000, 9)  // discard: a closed port
        .payload(18)
        .build();
}

Result<Sent> run_sender(const Netns& tx, int cpu, double seconds, const SenderBody& body) {
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
        if (sched_setaffinity(0, sizeof(set), &set) != 0) {
            result = Error{"cannot pin the generator to CPU " + std::to_string(cpu) + ": " + std::strerror(errno)};
            return;
        }
        timespec cpu_start{}, cpu_end{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu_start);
        const auto start = std::chrono::steady_clock::now();
        const Result<uint64_t> sent = body(start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                       std::chrono::duration<double>(seconds)));
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu_end);
        if (!sent) {
            result = sent.error();
            return;
        }
        result = Sent{sent.value(), elapsed,
                      static_cast<double>(cpu_end.tv_sec - cpu_start.tv_sec) * 1e9 +
                          static_cast<double>(cpu_end.tv_nsec - cpu_start.tv_nsec)};
    });
    sender.join();
    return result;
}

namespace {

class LiveGenerator final : public Generator {
  public:
    static Result<std::unique_ptr<LiveGenerator>> create(const Link& tx, const Link& rx, Distribution& dist) {
        std::unique_ptr<LiveGenerator> g(new LiveGenerator());
        g->skel_ = trafficgen_bpf::open();
        if (!g->skel_) return Error{std::string("opening ebpf/trafficgen.bpf.c: ") + std::strerror(errno)};
        g->skel_->rodata->tg_ifindex = static_cast<uint32_t>(tx.ifindex);
        g->skel_->rodata->tg_source_base = kSourceBase;
        const SourceSpread spread = source_spread(dist);
        const std::vector<uint32_t>& table = spread.zipf_table;
        if (!table.empty()) {
            g->skel_->rodata->tg_zipf_mask = static_cast<uint32_t>(table.size() - 1);
            bpf_map__set_max_entries(g->skel_->maps.tg_zipf, static_cast<uint32_t>(table.size()));
        } else {
            g->skel_->rodata->tg_source_mask = spread.uniform_mask;
        }
        if (const int err = trafficgen_bpf::load(g->skel_))
            return Error{std::string("loading ebpf/trafficgen.bpf.c: ") + std::strerror(-err)};
        if (!table.empty()) {
            std::vector<uint32_t> keys(table.size());
            for (uint32_t i = 0; i < keys.size(); ++i) keys[i] = i;
            __u32 count = static_cast<__u32>(table.size());
            if (bpf_map_update_batch(bpf_map__fd(g->skel_->maps.tg_zipf), keys.data(), table.data(), &count, nullptr) !=
                0)
                return Error{std::string("filling the Zipf table: ") + std::strerror(errno)};
        }
        g->frame_ = generator_frame(tx, rx);
        return g;
    }
    ~LiveGenerator() override { trafficgen_bpf::destroy(skel_); }

    Result<Sent> send(const Netns& tx, int cpu, double seconds, const std::atomic<bool>* stop) override {
        return run_sender(tx, cpu, seconds, [&](std::chrono::steady_clock::time_point deadline) -> Result<uint64_t> {
            uint64_t sent = 0;
            constexpr int kChunk = 1 << 16;  // short calls: Ctrl-C is seen within milliseconds
            while (std::chrono::steady_clock::now() < deadline && !g_interrupted.load() && !(stop && stop->load())) {
                if (auto status = run(kChunk); !status) return status.error();
                sent += kChunk;
            }
            return sent;
        });
    }

    // One BPF_PROG_TEST_RUN call sending `frames` frames, from the calling
    // thread (in the sending namespace).
    Status run(int frames) {
        std::vector<uint8_t> data = frame_;
        LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = data.data(), .data_size_in = static_cast<uint32_t>(data.size()),
                    .repeat = frames, .flags = BPF_F_TEST_XDP_LIVE_FRAMES, .batch_size = 64);
        if (bpf_prog_test_run_opts(bpf_program__fd(skel_->progs.trafficgen_xdp), &opts) != 0)
            return Error{std::string("BPF_PROG_TEST_RUN (live frames) failed: ") + std::strerror(errno)};
        return ok_status();
    }

  private:
    LiveGenerator() = default;
    ::trafficgen_bpf* skel_ = nullptr;
    std::vector<uint8_t> frame_;
};

// Whether this kernel runs live frames: one frame, sent for real from tx's
// namespace to the rx veth (before any receiver counts).
Status probe_live_frames(const Topology& topology) {
    Distribution one{"uniform", 1, {}};
    auto live = LiveGenerator::create(topology.tx_link, topology.rx_link, one);
    if (!live) return live.error();
    Status status = Error{"the probe did not run"};
    std::thread prober([&] {
        auto scope = InNetns::enter(*topology.tx);
        status = scope ? live.value()->run(1) : Status(scope.error());
    });
    prober.join();
    return status;
}

}  // namespace

Result<std::string> choose_generator(const std::string& option, const Topology& topology) {
    if (option == "live" || option == "packet") return option;
    if (option != "auto") return Error{"unknown generator " + option + " (live, packet or auto)"};
    const Status live = probe_live_frames(topology);
    if (live) return std::string("live");
    std::fprintf(stderr, "sluice-bench: live frames refused (%s): the packet generator sends instead\n",
                 live.error().message.c_str());
    return std::string("packet");
}

Result<std::unique_ptr<Generator>> create_generator(const std::string& name, const Link& tx, const Link& rx,
                                                    Distribution& dist) {
    if (name == "live") {
        auto live = LiveGenerator::create(tx, rx, dist);
        if (!live) return live.error();
        return std::unique_ptr<Generator>(std::move(live.value()));
    }
    if (name == "packet") return create_packet_generator(tx, rx, dist);
    return Error{"unknown generator " + name + " (live or packet)"};
}

}  // namespace sluice::bench::veth
