// SPDX-License-Identifier: Apache-2.0
// ns per decision of the shared core on the host, so later changes to it can
// be compared: one hot source, many sources (state spread over memory, as a
// flood from many addresses spreads it), and the full parse -> key -> decide
// path on a real frame. The kernel's figures come from sluice-bench.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "rate_limits.h"

#define SLUICE_SHARED_LOCK(shared) ((void)(shared))  // one thread: no contention to model
#define SLUICE_SHARED_UNLOCK(shared) ((void)(shared))
#include "sluice/decide.h"

namespace {

using sluice::Accuracy;

sluice_level_limit level(uint64_t rate, uint64_t burst, Accuracy accuracy) {
    sluice::LevelSettings settings;
    settings.limit = {rate, burst, sluice::Unit::packets};
    settings.accuracy = accuracy;
    settings.cpus = 2;
    auto compiled = sluice::compile_level(settings, "bench");
    if (!compiled)
        std::abort();
    return compiled.value();
}

// Limits a sender at one packet per ns half meets, so both verdicts occur.
struct Limits {
    sluice_level_limit source, aggregate, global;
    explicit Limits(Accuracy a)
        : source(level(500'000'000, 1000, a)),
          aggregate(level(100'000'000'000, 1'000'000, a)),
          global(level(100'000'000'000, 1'000'000, a)) {}
};

Accuracy accuracy_arg(const benchmark::State& state) {
    return state.range(0) == 0 ? Accuracy::split : Accuracy::lease;
}

void BM_DecideHotSource(benchmark::State& state) {
    const Limits limits(accuracy_arg(state));
    sluice_cpu_bucket cpu[3]{};
    sluice_shared_bucket shared[3]{};
    sluice_level_ref refs[3] = {{&limits.source, &cpu[0], &shared[0]},
                                {&limits.aggregate, &cpu[1], &shared[1]},
                                {&limits.global, &cpu[2], &shared[2]}};
    uint64_t now = 1'000'000'000'000;
    uint64_t passed = 0;
    for (auto _ : state) {
        passed += sluice_decide(refs, 64, ++now).verdict == SLUICE_VERDICT_PASS;
    }
    benchmark::DoNotOptimize(passed);
    state.SetItemsProcessed(state.iterations());
    state.counters["pass_ratio"] = static_cast<double>(passed) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_DecideHotSource)->ArgName("lease")->Arg(0)->Arg(1);

void BM_DecideManySources(benchmark::State& state) {
    const Limits limits(accuracy_arg(state));
    const size_t sources = static_cast<size_t>(state.range(1));
    std::vector<sluice_cpu_bucket> source_cpu(sources);
    std::vector<sluice_shared_bucket> source_shared(sources);
    sluice_cpu_bucket cpu[2]{};
    sluice_shared_bucket shared[2]{};
    // A precomputed random visiting order: the cost of reaching cold state,
    // not of the random generator.
    std::vector<uint32_t> order(1 << 20);
    std::mt19937 rng(1);
    for (auto& o : order)
        o = static_cast<uint32_t>(rng() % sources);
    uint64_t now = 1'000'000'000'000;
    size_t i = 0;
    for (auto _ : state) {
        const uint32_t s = order[i++ & (order.size() - 1)];
        sluice_level_ref refs[3] = {{&limits.source, &source_cpu[s], &source_shared[s]},
                                    {&limits.aggregate, &cpu[0], &shared[0]},
                                    {&limits.global, &cpu[1], &shared[1]}};
        benchmark::DoNotOptimize(sluice_decide(refs, 64, ++now));
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DecideManySources)->ArgNames({"lease", "sources"})->ArgsProduct({{0, 1}, {65536, 1 << 20}});

// parse -> source key -> decide on a 64-byte IPv4/UDP frame.
void BM_ParseKeyDecide(benchmark::State& state) {
    const Limits limits(Accuracy::lease);
    uint8_t frame[64] = {0};
    frame[12] = 0x08;  // EtherType IPv4
    frame[14] = 0x45;  // version 4, IHL 5
    frame[17] = 50;    // total length 50
    frame[23] = 17;    // UDP
    frame[26] = 192, frame[27] = 0, frame[28] = 2, frame[29] = 1;
    sluice_class_entry cls{};
    cls.class_id = 1;
    cls.prefix_v4 = 32;
    cls.prefix_v6 = 64;
    sluice_cpu_bucket cpu[3]{};
    sluice_shared_bucket shared[3]{};
    sluice_level_ref refs[3] = {{&limits.source, &cpu[0], &shared[0]},
                                {&limits.aggregate, &cpu[1], &shared[1]},
                                {&limits.global, &cpu[2], &shared[2]}};
    uint64_t now = 1'000'000'000'000;
    for (auto _ : state) {
        sluice_packet pkt;
        sluice_source_key key;
        if (sluice_parse(frame, frame + sizeof(frame), &pkt) != SLUICE_PARSE_OK)
            std::abort();
        sluice_source_key_make(&key, &pkt, &cls);
        benchmark::DoNotOptimize(key);
        benchmark::DoNotOptimize(sluice_decide(refs, pkt.frame_len, ++now));
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ParseKeyDecide);

}  // namespace

BENCHMARK_MAIN();
