/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The per-packet decision over abstract state: the backend (BPF maps, DPDK
 * tables, a test's arrays) looks up the state of each level and hands this
 * file pointers; everything after the lookups is here, once.
 *
 * Composition is check-then-commit: every level is checked first (taking
 * leases as needed, which moves tokens but spends none), and the cost is
 * deducted from every level only if all admit. A packet refused at any level
 * spends nothing anywhere, and its drop is counted under the level that
 * refused it.
 *
 * Lease mode takes the shared bucket's lock; the backend says how by defining
 * SLUICE_SHARED_LOCK(shared) and SLUICE_SHARED_UNLOCK(shared) before including
 * this header (bpf_spin_lock in BPF, a spinlock in DPDK, nothing in a
 * single-threaded simulation). The critical section is inline arithmetic
 * only, as the verifier requires.
 */
#ifndef SLUICE_DECIDE_H
#define SLUICE_DECIDE_H

#include "abi.h"
#include "bucket.h"
#include "parse.h"

#if !defined(SLUICE_SHARED_LOCK) || !defined(SLUICE_SHARED_UNLOCK)
#error "define SLUICE_SHARED_LOCK(shared) and SLUICE_SHARED_UNLOCK(shared) before including sluice/decide.h"
#endif

/* One level's state for the packet being decided. */
struct sluice_level_ref {
	const struct sluice_level_limit *limit; /* NULL or !enabled: no limit at this level */
	struct sluice_cpu_bucket *cpu;          /* this CPU's bucket (split) or lease (lease) */
	struct sluice_shared_bucket *shared;    /* lease mode: the bucket behind the leases */
};

struct sluice_decision {
	__u8 verdict; /* enum sluice_verdict */
	__u8 reason;  /* enum sluice_reason */
	__u8 level;   /* enum sluice_level that refused, or SLUICE_LEVEL_NONE */
};

SLUICE_INLINE struct sluice_decision sluice_decision_make(__u8 verdict, __u8 reason, __u8 level)
{
	struct sluice_decision d;

	d.verdict = verdict;
	d.reason = reason;
	d.level = level;
	return d;
}

SLUICE_INLINE __u8 sluice_level_reason(__u32 level)
{
	switch (level) {
	case SLUICE_LEVEL_SOURCE:
		return SLUICE_REASON_SOURCE;
	case SLUICE_LEVEL_CLASS:
		return SLUICE_REASON_CLASS;
	default:
		return SLUICE_REASON_GLOBAL;
	}
}

SLUICE_INLINE int sluice_level_active(const struct sluice_level_ref *ref)
{
	return ref->limit && ref->limit->enabled && ref->cpu &&
	       (ref->limit->accuracy != SLUICE_ACCURACY_LEASE || ref->shared);
}

SLUICE_INLINE __u64 sluice_level_cost_nano(const struct sluice_level_limit *limit, __u32 frame_len)
{
	return (limit->unit == SLUICE_UNIT_BYTES ? (__u64)frame_len : 1) * SLUICE_NANO;
}

/*
 * Make this CPU's state at an active level hold `cost_nano`; spends nothing.
 * The pointer checks repeat sluice_level_active's because the verifier
 * cannot tie a second read of `accuracy` from map memory to the first.
 */
SLUICE_INLINE int sluice_level_check(const struct sluice_level_ref *ref, __u64 cost_nano, __u64 now)
{
	struct sluice_cpu_bucket *cpu = ref->cpu;
	struct sluice_shared_bucket *shared = ref->shared;
	int ok;

	if (!cpu)
		return 1;
	if (ref->limit->accuracy != SLUICE_ACCURACY_LEASE) {
		sluice_bucket_refill(cpu, &ref->limit->share, now);
		return cpu->tokens_nano >= cost_nano;
	}
	if (sluice_lease_covers(cpu, cost_nano, now))
		return 1;
	if (!shared)
		return 1;
	if (sluice_lease_backing_off(shared, now))
		return 0;
	SLUICE_SHARED_LOCK(shared);
	ok = sluice_lease_acquire(shared, cpu, ref->limit, cost_nano, now);
	SLUICE_SHARED_UNLOCK(shared);
	return ok;
}

SLUICE_INLINE void sluice_level_commit(const struct sluice_level_ref *ref, __u64 cost_nano)
{
	if (ref->cpu)
		ref->cpu->tokens_nano -= cost_nano;
}

/*
 * Decide a packet of `frame_len` bytes against levels[SOURCE, CLASS, GLOBAL].
 * Inactive levels admit. Written out per level (no loop over the array) so
 * the verifier sees each lock/unlock pair with a known map value pointer.
 */
SLUICE_INLINE struct sluice_decision sluice_decide(const struct sluice_level_ref *levels,
						   __u32 frame_len, __u64 now)
{
	const struct sluice_level_ref *src = &levels[SLUICE_LEVEL_SOURCE];
	const struct sluice_level_ref *cls = &levels[SLUICE_LEVEL_CLASS];
	const struct sluice_level_ref *glb = &levels[SLUICE_LEVEL_GLOBAL];
	int src_on = sluice_level_active(src);
	int cls_on = sluice_level_active(cls);
	int glb_on = sluice_level_active(glb);
	__u64 src_cost = src_on ? sluice_level_cost_nano(src->limit, frame_len) : 0;
	__u64 cls_cost = cls_on ? sluice_level_cost_nano(cls->limit, frame_len) : 0;
	__u64 glb_cost = glb_on ? sluice_level_cost_nano(glb->limit, frame_len) : 0;

	if (src_on && !sluice_level_check(src, src_cost, now))
		return sluice_decision_make(SLUICE_VERDICT_DROP, SLUICE_REASON_SOURCE, SLUICE_LEVEL_SOURCE);
	if (cls_on && !sluice_level_check(cls, cls_cost, now))
		return sluice_decision_make(SLUICE_VERDICT_DROP, SLUICE_REASON_CLASS, SLUICE_LEVEL_CLASS);
	if (glb_on && !sluice_level_check(glb, glb_cost, now))
		return sluice_decision_make(SLUICE_VERDICT_DROP, SLUICE_REASON_GLOBAL, SLUICE_LEVEL_GLOBAL);

	/* Every level holds its cost on this CPU: commit. */
	if (src_on)
		sluice_level_commit(src, src_cost);
	if (cls_on)
		sluice_level_commit(cls, cls_cost);
	if (glb_on)
		sluice_level_commit(glb, glb_cost);
	return sluice_decision_make(SLUICE_VERDICT_PASS, SLUICE_REASON_ADMITTED, SLUICE_LEVEL_NONE);
}

/* ---- decisions that need no bucket ------------------------------------------ */

/* A frame that did not parse as IP gets the policy's configured verdict. */
SLUICE_INLINE struct sluice_decision sluice_decide_unparsed(const struct sluice_policy_header *policy,
							    __u8 parse_status)
{
	if (parse_status == SLUICE_PARSE_NON_IP)
		return sluice_decision_make(policy->non_ip_verdict, SLUICE_REASON_NON_IP, SLUICE_LEVEL_NONE);
	return sluice_decision_make(policy->malformed_verdict, SLUICE_REASON_MALFORMED, SLUICE_LEVEL_NONE);
}

/* Classes whose action is pass or drop never touch a bucket. Returns 0 for
 * action limit, meaning "go on to the buckets". */
SLUICE_INLINE int sluice_decide_action(const struct sluice_class_entry *cls, struct sluice_decision *out)
{
	if (cls->action == SLUICE_ACTION_PASS) {
		*out = sluice_decision_make(SLUICE_VERDICT_PASS, SLUICE_REASON_ALLOWED, SLUICE_LEVEL_NONE);
		return 1;
	}
	if (cls->action == SLUICE_ACTION_DROP) {
		*out = sluice_decision_make(SLUICE_VERDICT_DROP, SLUICE_REASON_DENY, SLUICE_LEVEL_NONE);
		return 1;
	}
	return 0;
}

/* A source whose state could not be created gets the class's table-full verdict. */
SLUICE_INLINE struct sluice_decision sluice_decide_table_full(const struct sluice_class_entry *cls)
{
	return sluice_decision_make(cls->table_full_verdict, SLUICE_REASON_TABLE_FULL, SLUICE_LEVEL_SOURCE);
}

/* ---- source keys -------------------------------------------------------------- */

/* Network-order mask of the first `bits` (0..64) bits of a 64-bit word. */
SLUICE_INLINE __u64 sluice_prefix_mask64(int bits)
{
	__u64 mask;

	if (bits <= 0)
		return 0;
	mask = bits >= 64 ? ~0ULL : ~0ULL << (64 - bits);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	mask = __builtin_bswap64(mask);
#endif
	return mask;
}

/* The source-level key of a parsed packet in a class: the source address cut
 * to the class's prefix length, so one allocation shares one bucket. */
SLUICE_INLINE void sluice_source_key_make(struct sluice_source_key *key,
					  const struct sluice_packet *pkt,
					  const struct sluice_class_entry *cls)
{
	int prefix = pkt->family == SLUICE_FAMILY_IPV4 ? cls->prefix_v4 : cls->prefix_v6;
	__u64 hi, lo;

	__builtin_memcpy(&hi, pkt->src, 8);
	__builtin_memcpy(&lo, pkt->src + 8, 8);
	hi &= sluice_prefix_mask64(prefix);
	lo &= sluice_prefix_mask64(prefix - 64);
	__builtin_memset(key, 0, sizeof(*key));
	key->class_id = cls->class_id;
	key->family = pkt->family;
	__builtin_memcpy(key->addr, &hi, 8);
	__builtin_memcpy(key->addr + 8, &lo, 8);
}

#endif /* SLUICE_DECIDE_H */
