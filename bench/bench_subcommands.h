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
    uint32_t sources = 1u << 20;   // the many-sources case
    uint32_t prefixes = 1u << 20;  // per family, the prefix table's large policy (next to 10)
};

struct VethOptions {
    uint64_t seconds = 5;  // per receiver (a smoke run takes 0.3 s)
    std::vector<uint64_t> sources{1, 65536, 1u << 20};
    std::string dist = "uniform";  // or "zipf"
    uint64_t rate = 1000;          // packets per second per source
    uint64_t burst = 2000;         // bucket depth, packets
    std::vector<std::string> receivers{"baseline", "sluice", "nftables", "iptables"};
    std::string generator = "auto";  // "live", "packet" or "auto" (live where the kernel allows it)
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

struct FleetBenchOptions {
    uint64_t seconds = 3;                     // T, per node count
    uint64_t rate = 100'000;                  // the fleet quota, units per second
    uint64_t burst = 10'000;                  // its bucket depth
    uint64_t period_ms = 100;                 // P, the leasers' lease period
    uint64_t nodes = 3;                       // runs with 1 .. nodes local nodes
    uint64_t offered_percent = 200;           // offered load in total, % of rate
    uint64_t idle = 10;                       // idle fleet quotas per node besides the busy one (no traffic)
    std::vector<uint64_t> threads{1, 4, 16};  // the capacity runs' concurrent clients
    uint64_t capacity_ms = 2000;              // per capacity run
};

// Where sluice-bench http finds what it runs (the build's own, by default).
#ifndef SLUICE_BENCH_SLUICED
#define SLUICE_BENCH_SLUICED "sluiced"
#endif
#ifndef SLUICE_BENCH_SLUICECTL
#define SLUICE_BENCH_SLUICECTL "sluicectl"
#endif
#ifndef SLUICE_BENCH_NGINX_SNIPPET
#define SLUICE_BENCH_NGINX_SNIPPET "packaging/nginx-sluice.conf"
#endif

struct HttpBenchOptions {
    uint64_t seconds = 10;      // per wrk run (bare, then through sluiced)
    uint64_t threads = 2;       // wrk -t
    uint64_t connections = 32;  // wrk -c
    uint64_t users = 50;        // X-User values, round-robin
    uint64_t rate = 20;         // per user, requests per second (GCRA)
    uint64_t burst = 10;        // per user
    uint64_t nginx_workers = 1;
    std::string nginx = "/usr/sbin/nginx";
    std::string wrk = "/usr/bin/wrk";
    std::string sluiced = SLUICE_BENCH_SLUICED;
    std::string sluicectl = SLUICE_BENCH_SLUICECTL;
    std::string snippet = SLUICE_BENCH_NGINX_SNIPPET;
};

struct SoakOptions {
    uint64_t minutes = 30;           // a smoke run takes seconds (bench_soak.cpp)
    std::string generator = "auto";  // as VethOptions::generator
    std::string sluiced = SLUICE_BENCH_SLUICED;
    std::string sluicectl = SLUICE_BENCH_SLUICECTL;
};

struct PushOptions {
    std::vector<uint64_t> sizes{10, 10'000, 100'000, 1u << 20};  // prefixes per family
    uint64_t change = 10'000;  // per family, on the largest size: half removed, half added
    std::vector<std::string> parts{"dataplane", "daemon"};
    std::string sluiced = SLUICE_BENCH_SLUICED;
    std::string sluicectl = SLUICE_BENCH_SLUICECTL;
};

Status run_decide(const CommonOptions& common, const DecideOptions& options, Json& report);
Status run_veth(const CommonOptions& common, const VethOptions& options, Json& report);
Status run_memory(const CommonOptions& common, const MemoryOptions& options, Json& report);
Status run_fleet(const CommonOptions& common, const FleetBenchOptions& options, Json& report);
Status run_http(const CommonOptions& common, const HttpBenchOptions& options, Json& report);
Status run_soak(const CommonOptions& common, const SoakOptions& options, Json& report);
Status run_push(const CommonOptions& common, const PushOptions& options, Json& report);
#ifdef SLUICE_BENCH_DPDK  // built with -Ddpdk (bench_dpdk.cpp)
Status run_dpdk(const CommonOptions& common, const DpdkBenchOptions& options, Json& report);
#endif

}  // namespace sluice::bench
