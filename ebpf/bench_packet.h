/* SPDX-License-Identifier: GPL-2.0 OR Apache-2.0 */
/*
 * Packet rewriting for the benchmark programs (bench_sources.h and
 * trafficgen.bpf.c): set an IPv4 source and keep the header checksum valid.
 */
#ifndef SLUICE_BENCH_PACKET_H
#define SLUICE_BENCH_PACKET_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* RFC 1624 incremental update of a ones' complement checksum for one 32-bit
 * field; the sum does not depend on byte order, so raw loads are fine. */
static __always_inline __u16 bench_csum_replace4(__u16 check, __u32 from, __u32 to)
{
	__u32 sum = (__u16)~check;

	sum += (__u16)~from + (__u16)~(from >> 16) + (to & 0xffff) + (to >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

/* Sets the source of an untagged IPv4 frame (network order), keeping the
 * header checksum valid: the receiving IP stack checks it. */
static __always_inline void bench_set_ipv4_source(struct xdp_md *ctx, __u32 source_be)
{
	__u8 *data = (__u8 *)(long)ctx->data;
	__u8 *data_end = (__u8 *)(long)ctx->data_end;
	__u32 *saddr;
	__u16 *check;

	if (data + 14 + 20 > data_end || data[12] != 0x08 || data[13] != 0x00)
		return;
	check = (__u16 *)(data + 14 + 10);
	saddr = (__u32 *)(data + 14 + 12);
	*check = bench_csum_replace4(*check, *saddr, source_be);
	*saddr = source_be;
}

#endif
