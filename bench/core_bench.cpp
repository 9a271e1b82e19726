// SPDX-License-Identifier: Apache-2.0
// ns per decision of the shared core on the host, so later changes to it can
// be compared: one hot source, many sources (state spread over memory, as a
// flood from many addresses spreads it), the full parse -> key -> decide
// path on a real frame, and one class aggregate decided from every CPU at
// once in its two possible forms. The kernel's figures come from sluice-bench.
#include <benchmark/benchmark.h>

#include <time.h>

#include <random>
#include <vector>

#include "common/packet_builder.h"
#include "rate_limits.h"

#include "sluice/host_lock.h"
// (the lock above is what decide.h uses)
#include "sluice/decide.h"

namespace {

using sluice::Accuracy;

sluice_level_limit level(uint64_t rate, uint64_t burst, Accuracy accuracy) {
    sluice::LevelSettings settings;
    settings.limit = {rate, burst, sluice::Unit::packets};
    settings.accuracy = accuracy;
    settings.cpus = 2;
    auto compiled = sluice::compile_level(settings, "bench");
    if (!compiled) std::abort();
    return compiled.value();
}

// One CPU's levels: the source in a table of `sets` sets (GCRA), the class
// aggregate and the global ceiling in the given accuracy mode. The source
// admits 500M packets/s of a sender offering one per ns, so both verdicts
// occur; class and global are wide open.
struct Levels {
    std::vector<sluice_source_set> table;
    sluice_source_limit source;
    sluice_level_limit aggregate, global;
    sluice_cpu_bucket cpu[2]{};
    sluice_shared_bucket shared[2]{};
    sluice_levels refs{};

    Levels(Accuracy a, size_t sets)
        : table(sets),
          source(sluice::compile_source_limit({500'000'000, 1000, sluice::Unit::packets}, 1518, "bench").value()),
          aggregate(level(100'000'000'000, 1'000'000, a)),
          global(level(100'000'000'000, 1'000'000, a)) {
        refs.aggregate = {&aggregate, &cpu[0], &shared[0], nullptr};
        refs.global = {&global, &cpu[1], &shared[1], nullptr};
        use_source(0);
    }
    // Source n: its own tag, in the two sets a hash would pick.
    void use_source(uint64_t n) {
        const uint64_t hash = sluice_mix64(n + 1);
        const uint32_t mask = static_cast<uint32_t>(table.size() - 1);
        refs.source.limit = &source;
        refs.source.home_index = sluice_source_home(hash, mask);
        refs.source.second_index = sluice_source_second(hash, mask);
        refs.source.home = &table[refs.source.home_index];
        refs.source.second = &table[refs.source.second_index];
        refs.source.tag = sluice_source_tag(hash);
        refs.source.on_table_full = SLUICE_TABLE_FULL_EVICT;
    }
};

// Argument 0 selects the accuracy mode; the label says which.
Accuracy accuracy_arg(benchmark::State& state) {
    const Accuracy accuracy = state.range(0) == 0 ? Accuracy::split : Accuracy::lease;
    state.SetLabel(accuracy == Accuracy::split ? "split" : "lease");
    return accuracy;
}

void BM_DecideHotSource(benchmark::State& state) {
    Levels levels(accuracy_arg(state), 1024);
    uint64_t now = 1'000'000'000'000;
    uint64_t passed = 0;
    for (auto _ : state) {
        passed += sluice_decide(&levels.refs, 64, 0, ++now).verdict == SLUICE_VERDICT_PASS;
    }
    benchmark::DoNotOptimize(passed);
    state.SetItemsProcessed(state.iterations());
    state.counters["pass_ratio"] = static_cast<double>(passed) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_DecideHotSource)->ArgName("mode")->Arg(0)->Arg(1);

void BM_DecideManySources(benchmark::State& state) {
    const size_t sources = static_cast<size_t>(state.range(1));
    // Two entries per source, as sluice-bench sizes its tables.
    Levels levels(accuracy_arg(state), 2 * sources / SLUICE_SET_WAYS);
    // A precomputed random visiting order: the cost of reaching cold state,
    // not of the random generator.
    std::vector<uint32_t> order(1 << 20);
    std::mt19937 rng(1);
    for (auto& o : order) o = static_cast<uint32_t>(rng() % sources);
    uint64_t now = 1'000'000'000'000;
    size_t i = 0;
    for (auto _ : state) {
        levels.use_source(order[i++ & (order.size() - 1)]);
        benchmark::DoNotOptimize(sluice_decide(&levels.refs, 64, 0, ++now));
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DecideManySources)->ArgNames({"mode", "sources"})->ArgsProduct({{0, 1}, {65536, 1 << 20}});

// parse -> source key -> decide on a 64-byte IPv4/UDP frame.
void BM_ParseKeyDecide(benchmark::State& state) {
    Levels levels(Accuracy::lease, 1024);
    const auto frame =
        sluice::test::PacketBuilder().eth().ipv4("192.0.2.1", "198.51.100.1").udp(1000, 53).pad(22).build();
    sluice_class_entry cls{};
    cls.class_id = 1;
    cls.prefix_v4 = 32;
    cls.prefix_v6 = 64;
    uint64_t now = 1'000'000'000'000;
    for (auto _ : state) {
        sluice_packet pkt;
        sluice_source_key key;
        if (sluice_parse(frame.data(), frame.data() + frame.size(), &pkt) != SLUICE_PARSE_OK) std::abort();
        sluice_source_key_make(&key, &pkt, &cls);
        benchmark::DoNotOptimize(key);
        benchmark::DoNotOptimize(sluice_decide(&levels.refs, pkt.frame_len, pkt.tcp_syn, ++now));
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ParseKeyDecide);

// A class aggregate decided by every thread at once, on the real clock, as a
// lease level (per-CPU tokens, a locked shared bucket behind them) or as one
// GCRA word all threads swap (how sources are kept). Both hold b + r*T; this
// measures which is cheaper when CPUs share a class. `admit`: the limit is
// far above what the threads offer, so every packet is charged; `refuse`:
// the limit is spent, so nearly every packet is refused (a flood).
struct SharedAggregate {
    sluice_level_limit lease;
    sluice_source_limit gcra;
    sluice_shared_bucket shared{};
    alignas(64) sluice_source_set sets[2]{};  // the word lives at home; a second set as every source has
    struct alignas(64) PerThread {
        sluice_cpu_bucket lease{};
    } per_thread[64];

    explicit SharedAggregate(uint64_t rate)
        : lease(level(rate, rate / 100 + 1, Accuracy::lease)),
          gcra(sluice::compile_source_limit({rate, rate / 100 + 1, sluice::Unit::packets}, 1518, "bench").value()) {}
};
SharedAggregate* shared_aggregate = nullptr;

uint64_t monotonic_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec);
}

void BM_AggregateAcrossThreads(benchmark::State& state) {
    const bool gcra = state.range(0) == 1, admit = state.range(1) == 1;
    if (state.thread_index() == 0) {
        delete shared_aggregate;
        shared_aggregate = new SharedAggregate(admit ? 1'000'000'000 : 1);
    }
    state.SetLabel(std::string(gcra ? "gcra" : "lease") + (admit ? " admit" : " refuse"));
    // (Google Benchmark holds every thread at the loop until setup is done.)
    uint64_t passed = 0;
    for (auto _ : state) {
        SharedAggregate& a = *shared_aggregate;
        sluice_levels l{};
        if (gcra) {
            l.source.limit = &a.gcra;
            l.source.home = &a.sets[0];
            l.source.second = &a.sets[1];
            l.source.second_index = 1;
            l.source.tag = 1ULL << SLUICE_ENTRY_TAG_SHIFT;
        } else {
            l.aggregate = {&a.lease, &a.per_thread[state.thread_index()].lease, &a.shared, nullptr};
        }
        passed += sluice_decide(&l, 64, 0, monotonic_ns()).verdict == SLUICE_VERDICT_PASS;
    }
    state.SetItemsProcessed(state.iterations());
    state.counters["pass_ratio"] = benchmark::Counter(
        static_cast<double>(passed) / static_cast<double>(state.iterations()), benchmark::Counter::kAvgThreads);
}
BENCHMARK(BM_AggregateAcrossThreads)
    ->ArgNames({"gcra", "admit"})
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
