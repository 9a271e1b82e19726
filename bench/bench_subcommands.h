// SPDX-License-Identifier: Apache-2.0
// The subcommands of sluice-bench and their options. sluice_bench.cpp
// declares them on the command line (with their ranges, and the smaller
// values a --smoke run takes); the defaults below are a full run's. Each
// subcommand prints its tables on stdout and fills report["settings"] and
// report["results"]; main adds the rest and writes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench_common.h"

namespace sluice::bench {

// What every subcommand takes besides its own options.
struct CommonOptions {
    bool smoke = false;     // --smoke: seconds, not minutes (small sizes, short runs)
    std::string json_path;  // --json PATH; empty writes no JSON
};

struct DecideOptions {
    uint32_t repeat = 2'000'000;  // runs per BPF_PROG_TEST_RUN call
    uint64_t rounds = 21;
    uint32_t sources = 1u << 20;  // the many-sources case
};

struct VethOptions {
    uint64_t seconds = 5;  // per receiver (a smoke run takes 0.3 s)
    std::vector<uint64_t> sources{1, 65536, 1u << 20};
    std::string dist = "uniform";  // or "zipf"
    uint64_t rate = 1000;          // packets per second per source
    uint64_t burst = 2000;         // bucket depth, packets
    std::vector<std::string> receivers{"baseline", "sluice", "nftables", "iptables"};
};

struct MemoryOptions {
    uint32_t capacity = 1u << 20;   // IPv4 table entries
    uint32_t capacity6 = 1u << 16;  // IPv6 table entries
};

struct DpdkBenchOptions {
    uint32_t sources = 1u << 20;  // the many-sources case
    uint32_t rounds = 5;
    uint64_t ms = 1000;  // per case and round
    uint32_t size = 64;  // frame bytes
};

Status run_decide(const CommonOptions& common, const DecideOptions& options, Json& report);
Status run_veth(const CommonOptions& common, const VethOptions& options, Json& report);
Status run_memory(const CommonOptions& common, const MemoryOptions& options, Json& report);
#ifdef SLUICE_BENCH_DPDK  // built with -Ddpdk (bench_dpdk.cpp)
Status run_dpdk(const CommonOptions& common, const DpdkBenchOptions& options, Json& report);
#endif

}  // namespace sluice::bench
