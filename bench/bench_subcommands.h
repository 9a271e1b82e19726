// SPDX-License-Identifier: Apache-2.0
// The subcommands of sluice-bench. Each prints its tables on stdout and fills
// report["settings"] and report["results"]; main adds the rest and writes it.
#pragma once

#include "bench_common.h"

namespace sluice::bench {

Status run_decide(const Options& options, Json& report);
Status run_veth(const Options& options, Json& report);
Status run_memory(const Options& options, Json& report);
#ifdef SLUICE_BENCH_DPDK  // built with -Ddpdk (bench_dpdk.cpp)
Status run_dpdk(const Options& options, Json& report);
#endif

}  // namespace sluice::bench
