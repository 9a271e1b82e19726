// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
/*
 * The benchmark probe: the floor any per-source limiter pays. It parses the
 * frame as Sluice does, looks its source up in a hash map (inserting it on a
 * miss) and drops the frame: no classification, no limit, no counters.
 * sluice-bench decide reports Sluice's cost over this one's, on the same
 * sources in the same run.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "sluice/abi.h"
#include "sluice/parse.h"
#include "bench_sources.h" /* off unless sluice-bench sets it, as in sluice */

/* Sized by the loader, as Sluice's source table is. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 20);
	__type(key, struct sluice_source_key);
	__type(value, __u64);
} probe_sources SEC(".maps");

SEC("xdp")
int probe_xdp(struct xdp_md *ctx)
{
	const __u8 *data, *data_end;
	struct sluice_source_key key;
	struct sluice_packet pkt;
	__u64 first = 1;

	bench_spread_source(ctx);
	data = (const __u8 *)(long)ctx->data;
	data_end = (const __u8 *)(long)ctx->data_end;
	if (sluice_parse(data, data_end, &pkt) != SLUICE_PARSE_OK)
		return XDP_DROP;
	__builtin_memset(&key, 0, sizeof(key));
	key.class_id = 1;
	key.family = pkt.family;
	__builtin_memcpy(key.addr, pkt.src, sizeof(key.addr));
	if (!bpf_map_lookup_elem(&probe_sources, &key))
		bpf_map_update_elem(&probe_sources, &key, &first, BPF_NOEXIST);
	return XDP_DROP;
}

/* The GPL-2.0 side of the SPDX line, as in sluice.bpf.c. */
char LICENSE[] SEC("license") = "GPL v2";
