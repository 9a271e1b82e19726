/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shaping's queue admission and release, once, for any backend that can
 * hold packets (sluice-dpdk; XDP cannot, so sluiced polices a shaped class
 * at its aggregate rate instead).
 *
 * A frame of a shaped class that only the class aggregate refuses waits in
 * the class's FIFO (one per worker) instead of being dropped, if the queue
 * holds fewer than shape.queue_packets frames and its predicted wait is
 * within shape.max_delay_ns: what is queued ahead of it and the frame
 * itself, less the tokens the class has now, paid at the worker's drain rate
 * (sluice_shape_drain). The head of the queue leaves when the class
 * aggregate and the global ceiling admit it, so the output never exceeds
 * burst + rate * T in any window; a frame still queued after its deadline
 * (the global ceiling can hold a queue back longer than predicted) is
 * dropped.
 *
 * Pure, as the rest of the core: time is an argument, nothing reads a clock,
 * and nothing divides (the drain rate's reciprocal is the control plane's).
 * The backend keeps the frames themselves and a struct sluice_shape_queue of
 * each queue's length and cost.
 */
#ifndef SLUICE_SHAPE_H
#define SLUICE_SHAPE_H

#include "abi.h"
#include "bucket.h"
#include "decide.h"

/* What the core needs of one class's queue on one worker. */
struct sluice_shape_queue {
	__u32 count; /* frames waiting */
	__u32 _pad;
	__u64 cost_nano; /* what they cost the class aggregate, together */
};

/* Whether a frame may wait, and until when. */
struct sluice_shape_admission {
	__u64 send_ns;     /* when the drain rate will have paid for it and all ahead of it */
	__u64 deadline_ns; /* still queued after this: dropped, reason DEADLINE */
	__u8 reason;       /* SLUICE_REASON_SHAPED: it may wait; QUEUE_FULL or DEADLINE: refused */
	__u8 _pad[7];
};

/* The high 64 bits of a * b, from 32-bit halves: BPF has no 128-bit
 * multiply, and the core compiles for it. */
SLUICE_INLINE __u64 sluice_mul_high(__u64 a, __u64 b)
{
	__u64 a_lo = a & 0xffffffffULL, a_hi = a >> 32;
	__u64 b_lo = b & 0xffffffffULL, b_hi = b >> 32;
	__u64 lo_lo = a_lo * b_lo, hi_lo = a_hi * b_lo, lo_hi = a_lo * b_hi;
	__u64 cross = (lo_lo >> 32) + (hi_lo & 0xffffffffULL) + lo_hi; /* < 2^64 */

	return a_hi * b_hi + (hi_lo >> 32) + (cross >> 32);
}

/* ns the drain takes to pay `backlog_nano`: floor(backlog_nano / rate),
 * exactly. inverse >= 2^64 / rate - 1, so backlog * inverse / 2^64 is within
 * backlog / 2^64 < 1 below the quotient and never above it: its floor is
 * the quotient or one less, and the remainder says which. */
SLUICE_INLINE __u64 sluice_shape_drain_ns(const struct sluice_shape_drain *drain, __u64 backlog_nano)
{
	__u64 wait = sluice_mul_high(backlog_nano, drain->inverse);

	if (backlog_nano - wait * drain->rate_per_s >= drain->rate_per_s)
		wait++;
	return wait;
}

/* Tokens this CPU could spend at an active level at `now`, changing
 * nothing: split, its bucket refilled to now; lease, its unexpired lease and
 * the shared bucket refilled to now, read without the lock (an estimate for
 * a deadline, never a spend). */
SLUICE_INLINE __u64 sluice_level_tokens(const struct sluice_level_ref *ref, __u64 now)
{
	const struct sluice_level_limit *level = ref->limit;
	const struct sluice_cpu_bucket *cpu = ref->cpu;
	const struct sluice_shared_bucket *shared = ref->shared;
	__u64 lease;

	if (level->accuracy != SLUICE_ACCURACY_LEASE) {
		if (cpu->stamp_ns == 0)
			return level->share.burst_nano;
		return sluice_refilled_tokens(cpu->tokens_nano, cpu->stamp_ns, &level->share, now);
	}
	lease = now < cpu->stamp_ns ? cpu->tokens_nano : 0;
	if (shared->last_ns == 0)
		return lease + level->full.burst_nano;
	return lease + sluice_refilled_tokens(shared->tokens_nano, shared->last_ns, &level->full, now);
}

/* Did the decision refuse the frame at the class aggregate alone? Only such
 * a frame may wait: nothing is spent yet, and no other level objects. */
SLUICE_INLINE int sluice_shape_may_wait(struct sluice_decision d)
{
	return d.verdict != SLUICE_VERDICT_PASS && d.level == SLUICE_LEVEL_CLASS;
}

/*
 * May a frame costing `cost_nano` at the class `aggregate` join `queue` at
 * `now`? Refused with QUEUE_FULL when the queue is at its bound (before the
 * buckets are read), with DEADLINE when its predicted wait exceeds the
 * class's max delay.
 */
SLUICE_INLINE struct sluice_shape_admission sluice_shape_admit(const struct sluice_shape *shape,
							       const struct sluice_shape_drain *drain,
							       const struct sluice_shape_queue *queue,
							       const struct sluice_level_ref *aggregate,
							       __u64 cost_nano, __u64 now)
{
	struct sluice_shape_admission a;
	__u64 tokens, need;

	__builtin_memset(&a, 0, sizeof(a));
	a.send_ns = now;
	a.deadline_ns = now + shape->max_delay_ns;
	a.reason = SLUICE_REASON_SHAPED;
	if (queue->count >= shape->queue_packets) {
		a.reason = SLUICE_REASON_QUEUE_FULL;
		return a;
	}
	tokens = sluice_level_tokens(aggregate, now);
	need = queue->cost_nano + cost_nano;
	if (need > tokens)
		a.send_ns = now + sluice_shape_drain_ns(drain, need - tokens);
	if (a.send_ns - now > shape->max_delay_ns)
		a.reason = SLUICE_REASON_DEADLINE;
	return a;
}

SLUICE_INLINE void sluice_shape_queue_push(struct sluice_shape_queue *queue, __u64 cost_nano)
{
	queue->count++;
	queue->cost_nano += cost_nano;
}

/* The head left. `cost_nano` is its cost under the policy it leaves under,
 * which may not be the one it joined under: the queue's cost never goes
 * below zero, and is zero once the queue is empty. */
SLUICE_INLINE void sluice_shape_queue_pop(struct sluice_shape_queue *queue, __u64 cost_nano)
{
	queue->count--;
	queue->cost_nano = queue->count == 0 || cost_nano > queue->cost_nano ? 0 : queue->cost_nano - cost_nano;
}

/*
 * The head of a class's queue at `now` (its tcp_syn as parsed on arrival):
 * returns 1 if it leaves, with *d
 * saying how (dropped, reason DEADLINE, if its deadline has passed; else
 * sent, reason SHAPED, paid at `upper`, the class aggregate and global
 * ceiling), or 0 if it waits for them to refill. A class a new policy
 * version no longer shapes (`shaped` 0) sends what it held at once: it was
 * admitted to the queue.
 */
SLUICE_INLINE int sluice_shape_release(int shaped, const struct sluice_levels *upper, __u32 frame_len,
				       __u8 tcp_syn, __u64 deadline_ns, __u64 now, struct sluice_decision *d)
{
	if (shaped && now > deadline_ns) {
		*d = sluice_decision_make(SLUICE_VERDICT_DROP, SLUICE_REASON_DEADLINE, SLUICE_LEVEL_CLASS);
		return 1;
	}
	if (shaped && sluice_decide(upper, frame_len, tcp_syn, now).verdict != SLUICE_VERDICT_PASS)
		return 0;
	*d = sluice_decision_make(SLUICE_VERDICT_PASS, SLUICE_REASON_SHAPED, SLUICE_LEVEL_NONE);
	return 1;
}

#endif /* SLUICE_SHAPE_H */
