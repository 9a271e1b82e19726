/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Parse the first bytes of an Ethernet frame: up to two VLAN tags, then the
 * IPv4 or IPv6 header, far enough to know the family and the source address
 * and to tell a well-formed IP packet from a truncated or invalid one. It
 * never looks at L4, so every fragment (first or later, any offset or MF bit)
 * parses OK with its source: a limiter keys on the source alone.
 *
 * Shared by the XDP program, the DPDK workers and the tests, so it is pure
 * C that also compiles as C++: no libc, no loops, no division, no void *.
 * Every read is preceded by a check written as `if (p + N > data_end)`
 * against data_end itself: that is the form the BPF verifier understands to
 * widen the readable range of a packet pointer; a length computed some other
 * way would be rejected as an unbounded packet access. The loader needs
 * CAP_PERFMON (or root): without it the verifier refuses both data_end - data
 * and packet pointer + variable (IHL, lengths) as Spectre v1 hardening.
 */
#ifndef SLUICE_PARSE_H
#define SLUICE_PARSE_H

#include "abi.h"

/* X(ID, label, help). The label is the metric spelling; append only. */
#define SLUICE_PARSE_STATUS_LIST(X)                                            \
	X(OK, "ok", "IPv4 or IPv6 packet with a well-formed header")           \
	X(NON_IP, "non_ip", "complete L2 header, EtherType is not IPv4/IPv6")  \
	X(TRUNCATED_ETHERNET, "truncated_ethernet",                            \
	  "fewer than 14 bytes of Ethernet header")                            \
	X(TRUNCATED_VLAN, "truncated_vlan", "VLAN tag cut off")                \
	X(TOO_MANY_VLANS, "too_many_vlans", "more than two VLAN tags")         \
	X(TRUNCATED_IPV4, "truncated_ipv4", "fewer than 20 bytes of IPv4 header") \
	X(BAD_IPV4_VERSION, "bad_ipv4_version",                                \
	  "EtherType IPv4 but version is not 4")                               \
	X(BAD_IPV4_IHL, "bad_ipv4_ihl", "IPv4 header length below 5 words")    \
	X(TRUNCATED_IPV4_OPTIONS, "truncated_ipv4_options",                    \
	  "IPv4 options run past the frame")                                   \
	X(BAD_IPV4_TOTAL_LENGTH, "bad_ipv4_total_length",                      \
	  "IPv4 total length below the header or past the frame")              \
	X(TRUNCATED_IPV6, "truncated_ipv6", "fewer than 40 bytes of IPv6 header") \
	X(BAD_IPV6_VERSION, "bad_ipv6_version",                                \
	  "EtherType IPv6 but version is not 6")                               \
	X(BAD_IPV6_PAYLOAD_LENGTH, "bad_ipv6_payload_length",                  \
	  "IPv6 payload length runs past the frame")

enum sluice_parse_status {
#define SLUICE_X(id, label, help) SLUICE_PARSE_##id,
	SLUICE_PARSE_STATUS_LIST(SLUICE_X)
#undef SLUICE_X
	SLUICE_PARSE_STATUS_COUNT
};
SLUICE_STATIC_ASSERT(SLUICE_PARSE_OK == 0, "OK must be 0");
SLUICE_STATIC_ASSERT(SLUICE_PARSE_STATUS_COUNT <= 256, "status fits in __u8");

struct sluice_packet {
	__u32 frame_len; /* data_end - data: what byte mode charges */
	__u8 family;     /* SLUICE_FAMILY_IPV4 / _IPV6, 0 when status != OK */
	__u8 status;     /* enum sluice_parse_status */
	__u8 vlan_depth; /* complete VLAN tags seen: 0, 1 or 2 */
	__u8 tcp_syn;    /* 1: a TCP SYN without ACK, a connection attempt (see sluice_tcp_syn) */
	__u8 src[16];    /* network order; IPv4 in src[0..3], rest zero */
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_packet) == 24, "sluice_packet layout");
SLUICE_STATIC_ASSERT(__builtin_offsetof(struct sluice_packet, src) == 8,
                     "sluice_packet.src offset");

#define SLUICE_ETH_HLEN 14
#define SLUICE_VLAN_HLEN 4
#define SLUICE_IPV4_HLEN 20
#define SLUICE_IPV6_HLEN 40

#define SLUICE_ETH_P_IPV4 0x0800
#define SLUICE_ETH_P_IPV6 0x86DD
#define SLUICE_ETH_P_8021Q 0x8100
#define SLUICE_ETH_P_8021AD 0x88A8

SLUICE_INLINE int sluice_packet_is_malformed(__u8 status)
{
	return status != SLUICE_PARSE_OK && status != SLUICE_PARSE_NON_IP;
}

/* Network to host order for 16 bits; no bpf_endian.h or arpa/inet.h so the
 * same header builds for BPF, DPDK and the tests. */
SLUICE_INLINE __u16 sluice_be16(__u16 v)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return __builtin_bswap16(v);
#else
	return v;
#endif
}

/* memcpy, not a cast: packet bytes carry no alignment guarantee. */
SLUICE_INLINE __u16 sluice_load_be16(const __u8 *p)
{
	__u16 v;

	__builtin_memcpy(&v, p, sizeof(v));
	return sluice_be16(v);
}

SLUICE_INLINE int sluice_is_vlan_tpid(__u16 proto)
{
	return proto == SLUICE_ETH_P_8021Q || proto == SLUICE_ETH_P_8021AD;
}

#define SLUICE_IPPROTO_TCP 6
#define SLUICE_TCP_FLAGS_OFFSET 13 /* CWR ECE URG ACK PSH RST SYN FIN */
#define SLUICE_TCP_SYN 0x02
#define SLUICE_TCP_ACK 0x10

/* Whether the TCP segment at `tcp` opens a connection: SYN set, ACK clear.
 * A segment too short to hold its flags opens nothing (the kernel would
 * drop it), so it passes a tcp_syn level uncharged, as any other packet. */
SLUICE_INLINE __u8 sluice_tcp_syn(const __u8 *tcp, const __u8 *data_end)
{
	if (tcp + SLUICE_TCP_FLAGS_OFFSET + 1 > data_end)
		return 0;
	return (tcp[SLUICE_TCP_FLAGS_OFFSET] & (SLUICE_TCP_SYN | SLUICE_TCP_ACK)) == SLUICE_TCP_SYN;
}

SLUICE_INLINE __u8 sluice_parse_ipv4(const __u8 *ip, const __u8 *data_end,
				     struct sluice_packet *pkt)
{
	__u32 hdr_len, tot_len;
	__u64 address;

	/* The fixed header first, so every field below is in range. */
	if (ip + SLUICE_IPV4_HLEN > data_end)
		return SLUICE_PARSE_TRUNCATED_IPV4;
	if ((ip[0] >> 4) != 4)
		return SLUICE_PARSE_BAD_IPV4_VERSION;
	hdr_len = (__u32)(ip[0] & 0x0f) * 4;
	if (hdr_len < SLUICE_IPV4_HLEN)
		return SLUICE_PARSE_BAD_IPV4_IHL;
	if (ip + hdr_len > data_end)
		return SLUICE_PARSE_TRUNCATED_IPV4_OPTIONS;
	/* A datagram longer than the frame was cut in transit; a shorter one
	 * is followed by Ethernet padding, which is fine. */
	tot_len = sluice_load_be16(ip + 2);
	if (tot_len < hdr_len)
		return SLUICE_PARSE_BAD_IPV4_TOTAL_LENGTH;
	if (ip + tot_len > data_end)
		return SLUICE_PARSE_BAD_IPV4_TOTAL_LENGTH;

	/* One 8-byte store: the source key is read back 8 bytes at a time, and
	 * a load spanning two stores waits for both to reach the cache
	 * (measured on DPDK: the stall cost more than the rest of the key). */
	address = 0;
	__builtin_memcpy(&address, ip + 12, 4);
	__builtin_memcpy(pkt->src, &address, 8);
	pkt->family = SLUICE_FAMILY_IPV4;
	/* Only a first fragment (offset 0) carries the TCP header, and its
	 * flags must lie inside the datagram, not in the frame's padding. */
	if (ip[9] == SLUICE_IPPROTO_TCP && !(sluice_load_be16(ip + 6) & 0x1fff) &&
	    hdr_len + SLUICE_TCP_FLAGS_OFFSET < tot_len)
		pkt->tcp_syn = sluice_tcp_syn(ip + hdr_len, data_end);
	return SLUICE_PARSE_OK;
}

SLUICE_INLINE __u8 sluice_parse_ipv6(const __u8 *ip, const __u8 *data_end,
				     struct sluice_packet *pkt)
{
	__u32 payload_len;

	if (ip + SLUICE_IPV6_HLEN > data_end)
		return SLUICE_PARSE_TRUNCATED_IPV6;
	if ((ip[0] >> 4) != 6)
		return SLUICE_PARSE_BAD_IPV6_VERSION;
	/* 0 (jumbogram or unknown) passes trivially: the header is present. */
	payload_len = sluice_load_be16(ip + 4);
	if (ip + SLUICE_IPV6_HLEN + payload_len > data_end)
		return SLUICE_PARSE_BAD_IPV6_PAYLOAD_LENGTH;

	__builtin_memcpy(pkt->src, ip + 8, 16);
	pkt->family = SLUICE_FAMILY_IPV6;
	/* TCP right after the fixed header; behind extension headers it is not
	 * looked for (and such a SYN is not counted as one). */
	if (ip[6] == SLUICE_IPPROTO_TCP && (payload_len == 0 || payload_len > SLUICE_TCP_FLAGS_OFFSET))
		pkt->tcp_syn = sluice_tcp_syn(ip + SLUICE_IPV6_HLEN, data_end);
	return SLUICE_PARSE_OK;
}

SLUICE_INLINE __u8 sluice_parse_l3(__u16 proto, const __u8 *l3,
				   const __u8 *data_end, struct sluice_packet *pkt)
{
	/* Anything else, including 802.3 length values below 0x0600, is a
	 * complete frame we just do not limit by source. */
	if (proto == SLUICE_ETH_P_IPV4)
		return sluice_parse_ipv4(l3, data_end, pkt);
	if (proto == SLUICE_ETH_P_IPV6)
		return sluice_parse_ipv6(l3, data_end, pkt);
	return SLUICE_PARSE_NON_IP;
}

/* The two tags are unrolled by hand: constant offsets, no loop for the
 * verifier to bound. */
SLUICE_INLINE __u8 sluice_parse_frame(const __u8 *data, const __u8 *data_end,
				      struct sluice_packet *pkt)
{
	__u16 proto;

	if (data + SLUICE_ETH_HLEN > data_end)
		return SLUICE_PARSE_TRUNCATED_ETHERNET;
	proto = sluice_load_be16(data + 12);
	if (!sluice_is_vlan_tpid(proto))
		return sluice_parse_l3(proto, data + SLUICE_ETH_HLEN, data_end, pkt);

	/* The tag is TCI (2 bytes) then the inner EtherType (2 bytes). */
	if (data + SLUICE_ETH_HLEN + SLUICE_VLAN_HLEN > data_end)
		return SLUICE_PARSE_TRUNCATED_VLAN;
	pkt->vlan_depth = 1;
	proto = sluice_load_be16(data + SLUICE_ETH_HLEN + 2);
	if (!sluice_is_vlan_tpid(proto))
		return sluice_parse_l3(proto, data + SLUICE_ETH_HLEN + SLUICE_VLAN_HLEN,
				       data_end, pkt);

	if (data + SLUICE_ETH_HLEN + 2 * SLUICE_VLAN_HLEN > data_end)
		return SLUICE_PARSE_TRUNCATED_VLAN;
	pkt->vlan_depth = 2;
	proto = sluice_load_be16(data + SLUICE_ETH_HLEN + SLUICE_VLAN_HLEN + 2);
	if (sluice_is_vlan_tpid(proto))
		return SLUICE_PARSE_TOO_MANY_VLANS;
	return sluice_parse_l3(proto, data + SLUICE_ETH_HLEN + 2 * SLUICE_VLAN_HLEN,
			       data_end, pkt);
}

/* Fills *pkt completely and returns pkt->status. family and src are only
 * set when the status is OK. */
SLUICE_INLINE __u8 sluice_parse(const __u8 *data, const __u8 *data_end,
				struct sluice_packet *pkt)
{
	__u8 status;

	pkt->frame_len = (__u32)(data_end - data);
	pkt->family = 0;
	pkt->status = SLUICE_PARSE_OK;
	pkt->vlan_depth = 0;
	pkt->tcp_syn = 0;
	__builtin_memset(pkt->src, 0, sizeof(pkt->src));

	status = sluice_parse_frame(data, data_end, pkt);
	pkt->status = status;
	return status;
}

#endif /* SLUICE_PARSE_H */
