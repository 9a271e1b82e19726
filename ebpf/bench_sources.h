/* SPDX-License-Identifier: GPL-2.0 OR Apache-2.0 */
/*
 * Benchmark-only source spreading, shared by sluice.bpf.c, baseline.bpf.c and
 * probe.bpf.c so all pay exactly the same for it. BPF_PROG_TEST_RUN repeats
 * one frame; with bench_source_mask set before load (sluice-bench decide and
 * memory), each run first rewrites the IPv4 source of an untagged IPv4 frame
 * to 10.0.0.0 + (hash of this CPU's run counter & mask): mask + 1 distinct
 * sources in an order with no pattern, as real traffic has. (In counter
 * order, the sources' state would sit in memory in the order it is visited,
 * and the prefetcher would hide the cache misses real traffic pays.) Every
 * other load leaves the mask 0: the verifier sees the constant and removes
 * the branch, leaving only the load of the switch (4 instructions of 1800;
 * bench/README.md has the before and after figures).
 */
#ifndef SLUICE_BENCH_SOURCES_H
#define SLUICE_BENCH_SOURCES_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "bench_packet.h"

#define BENCH_MAX_CPUS 64

const volatile __u32 bench_source_mask = 0;

/* One run counter per CPU, every 8th slot so CPUs never share a cache line.
 * A plain array: the skeleton cannot name a struct type declared here. */
__u64 bench_runs[BENCH_MAX_CPUS * 8];

static __always_inline void bench_spread_source(struct xdp_md *ctx)
{
	__u64 *runs;
	__u32 h;

	if (!bench_source_mask)
		return;
	runs = &bench_runs[(bpf_get_smp_processor_id() & (BENCH_MAX_CPUS - 1)) * 8];
	/* murmur3's finaliser: a bijection on 32 bits that mixes every bit */
	h = (__u32)(*runs)++;
	h ^= h >> 16;
	h *= 0x85ebca6b;
	h ^= h >> 13;
	h *= 0xc2b2ae35;
	h ^= h >> 16;
	bench_set_ipv4_source(ctx, bpf_htonl(0x0a000000 + (h & bench_source_mask)));
}

#endif
