// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
/*
 * sluice-bench's packet generator. Run with BPF_PROG_TEST_RUN and
 * BPF_F_TEST_XDP_LIVE_FRAMES, every run takes the frame handed in (its
 * Ethernet and IP destination are the receiving veth's), gives it an IPv4
 * source drawn from the configured distribution and redirects it out of the
 * sender's veth, so the peer receives it as from a wire. Uniform: a random
 * source of tg_source_mask + 1 (a power of two). Zipf: a random entry of
 * tg_zipf, a table the loader fills with source indexes in proportion to
 * their Zipf probability, so drawing stays one lookup per packet.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "bench_packet.h"

const volatile __u32 tg_ifindex = 0;      /* redirect target: the sender's veth */
const volatile __u32 tg_source_base = 0;  /* first source address, host order */
const volatile __u32 tg_source_mask = 0;  /* uniform: sources - 1; 0: one source */
const volatile __u32 tg_zipf_mask = 0;    /* Zipf: table entries - 1; 0: uniform */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* sized by the loader */
	__type(key, __u32);
	__type(value, __u32);
} tg_zipf SEC(".maps");

SEC("xdp")
int trafficgen_xdp(struct xdp_md *ctx)
{
	__u32 index = 0;

	if (tg_zipf_mask) {
		__u32 slot = bpf_get_prandom_u32() & tg_zipf_mask;
		__u32 *source = bpf_map_lookup_elem(&tg_zipf, &slot);

		if (source)
			index = *source;
	} else if (tg_source_mask) {
		index = bpf_get_prandom_u32() & tg_source_mask;
	}
	bench_set_ipv4_source(ctx, bpf_htonl(tg_source_base + index));
	return bpf_redirect(tg_ifindex, 0);
}

/* The GPL-2.0 side of the SPDX line, as in sluice.bpf.c. */
char LICENSE[] SEC("license") = "GPL v2";
