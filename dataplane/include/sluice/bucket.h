/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Token-bucket and lease arithmetic for the class aggregate, the class's
 * new-source budget and the global ceiling, shared by BPF, DPDK and the
 * tests. (Sources are GCRA entries in a shared table: source_table.h.)
 *
 * Why these levels are not one GCRA word too: every CPU admitting a class
 * would swap the same cache line on every packet. core_bench's
 * BM_AggregateAcrossThreads measured it on 2 CPUs, every packet admitted:
 * a lease level 25 ns of CPU per decision on each, one shared GCRA word 52 ns
 * (the two CPUs together barely faster than one); both 26-28 ns when
 * refusing. Sources do not have this problem: one source rarely arrives on
 * many CPUs at once, while a class always does.
 *
 * Fast path only: no clock reads (`now` is always an argument), no division
 * but one on the refused path of lease mode (sluice_lease_back_off),
 * no locks (the caller holds the shared bucket's lock where one is needed).
 * The control plane (control/lib/rate_limits.h) validates human limits and builds the
 * struct sluice_limit these functions trust.
 *
 * Guarantees, for one bucket with rate r and burst b:
 *  - admitted cost in any window of length T is at most b + r*T;
 *  - a clock that goes backwards refills nothing and never moves `last` back,
 *    so a regression can neither mint tokens nor make a later refill larger;
 *  - no arithmetic wraps: tokens <= burst_nano and elapsed is capped at
 *    fill_ns, so tokens + elapsed * rate <= 2 * BURST_MAX * 10^9 + RATE_MAX.
 *
 * A zeroed bucket (stamp 0) is a new one and starts full: backends may create
 * state by zero-filling, as the kernel does for the other CPUs' slots of a
 * per-CPU map entry. `now` must therefore never be 0; stamps are kept >= 1.
 */
#ifndef SLUICE_BUCKET_H
#define SLUICE_BUCKET_H

#include "abi.h"

SLUICE_INLINE __u64 sluice_min_u64(__u64 a, __u64 b)
{
	return a < b ? a : b;
}

SLUICE_INLINE __u64 sluice_stamp(__u64 now)
{
	return now ? now : 1;
}

/* Tokens a bucket holds at `now`, given what it held at `last`. */
SLUICE_INLINE __u64 sluice_refilled_tokens(__u64 tokens_nano, __u64 last_ns,
					   const struct sluice_limit *limit, __u64 now)
{
	__u64 elapsed = now > last_ns ? now - last_ns : 0;

	/* A lowered burst (policy edit) clamps what was saved under the old one. */
	tokens_nano = sluice_min_u64(tokens_nano, limit->burst_nano);
	elapsed = sluice_min_u64(elapsed, limit->fill_ns);
	return sluice_min_u64(tokens_nano + elapsed * limit->rate_per_s, limit->burst_nano);
}

/* Refill a bucket held as (tokens, last refill) to `now`; a zero stamp is a
 * new bucket and fills it. Both bucket kinds below keep their state this way. */
SLUICE_INLINE void sluice_refill_in_place(__u64 *tokens_nano, __u64 *last_ns,
					  const struct sluice_limit *limit, __u64 now)
{
	if (*last_ns == 0) {
		*tokens_nano = limit->burst_nano;
		*last_ns = sluice_stamp(now);
		return;
	}
	*tokens_nano = sluice_refilled_tokens(*tokens_nano, *last_ns, limit, now);
	if (now > *last_ns)
		*last_ns = now;
}

/* ---- split mode: a private bucket per CPU --------------------------------- */

SLUICE_INLINE void sluice_bucket_refill(struct sluice_cpu_bucket *bucket,
					const struct sluice_limit *limit, __u64 now)
{
	sluice_refill_in_place(&bucket->tokens_nano, &bucket->stamp_ns, limit, now);
}

/* Refill, then spend `cost_nano` if the bucket holds it. Returns 1 if spent. */
SLUICE_INLINE int sluice_bucket_consume(struct sluice_cpu_bucket *bucket,
					const struct sluice_limit *limit,
					__u64 cost_nano, __u64 now)
{
	sluice_bucket_refill(bucket, limit, now);
	if (bucket->tokens_nano < cost_nano)
		return 0;
	bucket->tokens_nano -= cost_nano;
	return 1;
}

/* ---- lease mode: a shared bucket, CPUs spend leased tokens ------------------
 * The shared bucket is the truth. A CPU whose lease cannot cover a packet
 * takes up to L more tokens under the shared bucket's lock; a lease unspent at
 * its expiry goes back. Each CPU holds at most max(L, cost) leased tokens, so
 * admitted cost in any window T is at most burst + rate*T + N*L. */

SLUICE_INLINE void sluice_shared_refill(struct sluice_shared_bucket *shared,
					const struct sluice_limit *limit, __u64 now)
{
	sluice_refill_in_place(&shared->tokens_nano, &shared->last_ns, limit, now);
}

/* Was the shared bucket found unable to pay so recently that taking its lock
 * again is pointless? Read without the lock: a stale answer only means one
 * extra lock, or one refusal the bucket could not have paid for anyway. */
SLUICE_INLINE int sluice_lease_backing_off(const struct sluice_shared_bucket *shared, __u64 now)
{
	return now < shared->retry_at_ns;
}

/* Can this CPU's lease pay `cost_nano` right now without the lock? */
SLUICE_INLINE int sluice_lease_covers(const struct sluice_cpu_bucket *lease,
				      __u64 cost_nano, __u64 now)
{
	return now < lease->stamp_ns && lease->tokens_nano >= cost_nano;
}

/* Give an expired lease's unspent tokens back. Caller holds the lock. */
SLUICE_INLINE void sluice_lease_return(struct sluice_shared_bucket *shared,
				       struct sluice_cpu_bucket *lease,
				       const struct sluice_limit *limit)
{
	shared->tokens_nano = sluice_min_u64(shared->tokens_nano + lease->tokens_nano,
					     limit->burst_nano);
	lease->tokens_nano = 0;
}

/*
 * Under a flood most packets find the shared bucket empty. Record when it
 * could next pay the smallest packet, so every CPU refuses until then without
 * the lock. Exact, never late: the one division of the fast path, on the
 * refused path and at most once per such wait. Capped at a lease's lifetime.
 */
SLUICE_INLINE void sluice_lease_back_off(struct sluice_shared_bucket *shared,
					 const struct sluice_cpu_bucket *lease,
					 const struct sluice_level_limit *level, __u64 now)
{
	__u64 have = shared->tokens_nano + lease->tokens_nano;
	__u64 wait;

	if (have >= level->min_cost_nano || level->full.rate_per_s == 0)
		return;
	wait = (level->min_cost_nano - have + level->full.rate_per_s - 1) / level->full.rate_per_s;
	shared->retry_at_ns = now + sluice_min_u64(wait, level->lease_ttl_ns);
}

/*
 * Top this CPU's lease up so it covers `cost_nano`. Caller holds the lock.
 * Moves tokens from the shared bucket, spends none; returns 1 on success.
 * When the shared bucket cannot cover the shortfall nothing moves, so a
 * refused packet never strands tokens on a CPU.
 */
SLUICE_INLINE int sluice_lease_acquire(struct sluice_shared_bucket *shared,
				       struct sluice_cpu_bucket *lease,
				       const struct sluice_level_limit *level,
				       __u64 cost_nano, __u64 now)
{
	__u64 target, grant;

	sluice_shared_refill(shared, &level->full, now);
	if (now >= lease->stamp_ns)
		sluice_lease_return(shared, lease, &level->full);
	if (lease->tokens_nano >= cost_nano)
		return 1;
	if (shared->tokens_nano < cost_nano - lease->tokens_nano) {
		sluice_lease_back_off(shared, lease, level, now);
		return 0;
	}

	/* Normally tops up to L; a cost above L (never after validation) still fits. */
	target = level->lease_nano > cost_nano ? level->lease_nano : cost_nano;
	grant = sluice_min_u64(shared->tokens_nano, target - lease->tokens_nano);
	shared->tokens_nano -= grant;
	lease->tokens_nano += grant;
	lease->stamp_ns = now + level->lease_ttl_ns;
	return 1;
}

#endif /* SLUICE_BUCKET_H */
