// SPDX-License-Identifier: Apache-2.0
// ns per decision of the real XDP program in the running kernel, under
// BPF_PROG_TEST_RUN, next to the bare XDP_DROP baseline measured in the same
// run: a hot IPv4 source through the source, aggregate and global levels (no
// new-source budget), admitted and refused, with the aggregate and global in
// split and lease mode, with bpf_ktime_get_ns and the coarse clock. Needs
// root. The kernel reports the mean time per repetition; compare ratios.
#include <benchmark/benchmark.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "common/packet_builder.h"
#include "rate_limits.h"
#include "xdp_dataplane.h"

// The skeleton names its own types; they come after the core's.
#include "baseline.skel.h"

namespace {

using namespace sluice;

constexpr uint32_t kRepeat = 200'000;

// Mean ns per run reported by the kernel, one BPF_PROG_TEST_RUN call.
bool run_once(benchmark::State& state, int prog_fd, std::vector<uint8_t>& frame) {
    LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(), .data_size_in = static_cast<uint32_t>(frame.size()),
                .repeat = kRepeat);
    if (bpf_prog_test_run_opts(prog_fd, &opts) != 0) {
        state.SkipWithError("BPF_PROG_TEST_RUN failed (root needed)");
        return false;
    }
    state.SetIterationTime(static_cast<double>(opts.duration) * kRepeat / 1e9);
    return true;
}

void BM_Baseline(benchmark::State& state) {
    std::unique_ptr<baseline_bpf, void (*)(baseline_bpf*)> skel(baseline_bpf::open_and_load(), baseline_bpf::destroy);
    if (!skel) {
        state.SkipWithError("cannot load ebpf/baseline.bpf.c (root needed)");
        return;
    }
    auto frame = test::sample_udp_frame(false);
    for (auto _ : state)
        if (!run_once(state, bpf_program__fd(skel->progs.baseline_xdp), frame)) return;
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kRepeat);
}
BENCHMARK(BM_Baseline)->UseManualTime()->Unit(benchmark::kMillisecond);

// Args: accuracy (0 split, 1 lease), coarse clock, source over its limit, IPv6.
void BM_Sluice(benchmark::State& state) {
    const Accuracy accuracy = state.range(0) ? Accuracy::lease : Accuracy::split;
    const bool coarse = state.range(1) != 0, flooding = state.range(2) != 0, ipv6 = state.range(3) != 0;
    XdpOptions options;
    options.coarse_clock = coarse;
    auto dp = XdpDataplane::open(options);
    if (!dp) {
        state.SkipWithError(dp.error().message.c_str());
        return;
    }
    LevelSettings settings;
    settings.accuracy = accuracy;
    settings.cpus = dp.value()->possible_cpus();
    // A flooding source has a few packets per second; an admitted one has
    // room for every run; class and global never refuse.
    settings.limit = {flooding ? 10u : 100'000'000'000u, flooding ? 10u : 4'000'000'000u, Unit::packets};
    CompiledPolicy policy;
    policy.header.version = 1;
    policy.header.default_class_id = 1;
    sluice_class_entry cls{};
    cls.class_id = 1;
    cls.prefix_v4 = 32;
    cls.prefix_v6 = 64;
    cls.per_source = compile_source_limit(settings.limit, kDefaultMaxFrameBytes, "bench").value();
    settings.limit = {100'000'000'000, 4'000'000'000, Unit::packets};
    cls.aggregate = compile_level(settings, "bench").value();
    policy.header.global = compile_level(settings, "bench").value();
    policy.classes.push_back(cls);
    if (auto status = dp.value()->apply(policy); !status) {
        state.SkipWithError(status.error().message.c_str());
        return;
    }
    auto frame = test::sample_udp_frame(ipv6);
    for (auto _ : state)
        if (!run_once(state, dp.value()->program_fd(), frame)) return;
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kRepeat);
    state.SetLabel(std::string(accuracy == Accuracy::lease ? "lease" : "split") + (coarse ? " coarse-clock" : "") +
                   (flooding ? " refused" : " admitted") + (ipv6 ? " ipv6" : " ipv4"));
}
BENCHMARK(BM_Sluice)
    ->ArgNames({"lease", "coarse", "flood", "ipv6"})
    ->Args({0, 0, 0, 0})
    ->Args({1, 0, 0, 0})
    ->Args({0, 1, 0, 0})
    ->Args({1, 1, 0, 0})
    ->Args({0, 0, 1, 0})
    ->Args({1, 0, 1, 0})
    ->Args({1, 0, 0, 1})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
