// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
/*
 * The benchmark baseline: drop every frame and count it, nothing else. Sluice's
 * cost is reported as a ratio to this program, measured in the same run.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "bench_sources.h" /* off unless sluice-bench sets it, as in sluice */

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} baseline_drops SEC(".maps");

SEC("xdp")
int baseline_xdp(struct xdp_md *ctx)
{
	__u32 zero = 0;
	__u64 *drops = bpf_map_lookup_elem(&baseline_drops, &zero);

	bench_spread_source(ctx);
	if (drops)
		(*drops)++;
	return XDP_DROP;
}

/* The GPL-2.0 side of the SPDX line, as in sluice.bpf.c. */
char LICENSE[] SEC("license") = "GPL v2";
