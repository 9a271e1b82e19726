/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What every dataplane does per packet around the decision, once: the
 * counter slot a decision is counted in, what the decision did to the
 * source table counted in the health stats, and about one drop in N of a
 * known source sent as an event (hot sources). The backend (BPF maps, DPDK worker
 * state, a test's arrays) says where these live by defining, before it
 * includes this header:
 *
 *   SLUICE_ACCOUNT_CTX               its per-packet context type; the
 *                                    functions below hand a pointer to it
 *                                    back to every hook (void: none)
 *   SLUICE_COUNTER(ctx, index)       struct sluice_counter * of the counter
 *                                    slot at `index` (a __u32 *), or NULL
 *   SLUICE_STAT_ADD(ctx, stat)       add 1 to health stat `stat`
 *   SLUICE_DROP_SAMPLER(ctx)         struct sluice_drop_sampler * of this
 *                                    CPU or worker, or NULL
 *   SLUICE_DROP_SAMPLE_PERIOD(ctx)   the period from this sampled drop on
 *                                    (asked only at sampled drops)
 *   SLUICE_DROP_RANDOM(ctx)          a pseudo-random __u32 (asked only at
 *                                    sampled drops)
 *   SLUICE_EVENT_RESERVE(ctx)        struct sluice_drop_event * to fill, or
 *                                    NULL (the event is lost)
 *   SLUICE_EVENT_SUBMIT(ctx, event)  send the filled event: nonzero if sent,
 *                                    0 if lost
 *   SLUICE_EVENT_NOW(ctx)            the event's time stamp (only sampled
 *                                    drops ask for it)
 *   SLUICE_BAN_COUNTER(ctx, slot)    struct sluice_counter * of the ban
 *                                    slot at `slot` (a __u32 *, below
 *                                    SLUICE_MAX_BANS), or NULL
 *
 * Optionally, SLUICE_PENALTY_EVENT_BY_STEP says the backend's penalty step
 * (decide.h, SLUICE_PENALTY_STEP) sends the penalty's event and counts the
 * `penalties` stat itself, so that this file does neither (the BPF program,
 * whose verifier would otherwise walk that path once per decision).
 *
 * Every hook is evaluated where it is needed and nowhere else: a packet that
 * passes costs one counter, as it did when each backend wrote this itself.
 */
#ifndef SLUICE_ACCOUNT_H
#define SLUICE_ACCOUNT_H

#include "abi.h"
#include "decide.h"

#if !defined(SLUICE_ACCOUNT_CTX) || !defined(SLUICE_COUNTER) || !defined(SLUICE_STAT_ADD) ||          \
	!defined(SLUICE_DROP_SAMPLER) || !defined(SLUICE_DROP_SAMPLE_PERIOD) || !defined(SLUICE_DROP_RANDOM) || \
	!defined(SLUICE_EVENT_RESERVE) || !defined(SLUICE_EVENT_SUBMIT) || !defined(SLUICE_EVENT_NOW) ||      \
	!defined(SLUICE_BAN_COUNTER)
#error "define the SLUICE_ACCOUNT_CTX type and the hooks listed in sluice/account.h before including it"
#endif

/* Where the decision leaves sluice_decide, a backend may hide its value
 * from its verifier (the BPF program does: every path through sluice_decide
 * then meets one state, not one per decision, for the rest). */
#ifndef SLUICE_DECISION_BARRIER
#define SLUICE_DECISION_BARRIER(d) ((void)0)
#endif

/* A class id as an index into per-class state: state is sized for
 * SLUICE_MAX_CLASSES, a power of two, and the clamp is what lets the
 * verifier (and a reader) see that no id from a map reaches past it. */
SLUICE_INLINE __u32 sluice_class_slot(__u32 class_id)
{
	return class_id & (SLUICE_MAX_CLASSES - 1);
}

/* The counter slot of a decision: class x verdict x reason, each clamped to
 * its range so that no decision can count outside the counters. */
SLUICE_INLINE __u32 sluice_decision_counter(__u32 class_id, struct sluice_decision d)
{
	return sluice_counter_index(sluice_class_slot(class_id),
				    d.verdict < SLUICE_VERDICT_COUNT ? (__u32)d.verdict : (__u32)SLUICE_VERDICT_DROP,
				    d.reason < SLUICE_REASON_COUNT ? d.reason : 0);
}

/* Is this drop a sampled one? The first is; then one every period. */
SLUICE_INLINE int sluice_drop_sampled(struct sluice_drop_sampler *sampler)
{
	if (sampler->countdown > 1) {
		sampler->countdown--;
		return 0;
	}
	return 1;
}

/* The drops until the next sampled one, this one included: drawn from
 * [period / 2, period * 3 / 2) for a power-of-two period (period 1: 1), so
 * traffic that repeats with a power-of-two pattern (a replayed capture, a
 * burst of 32) is not sampled at the same place of the pattern every time.
 * `random` 0 gives the period itself. */
SLUICE_INLINE __u32 sluice_drop_sample_gap(__u32 period, __u32 random)
{
	if (period <= 1)
		return 1;
	if (period > SLUICE_DROP_SAMPLE_PERIOD_MAX)
		period = SLUICE_DROP_SAMPLE_PERIOD_MAX;
	return (period >> 1) + ((random ^ (period >> 1)) & (period - 1));
}

/* Every byte of the event, padding too: it leaves for user space as it is. */
SLUICE_INLINE void sluice_drop_event_fill(struct sluice_drop_event *event, __u64 now,
					  const struct sluice_source_key *key, __u32 frame_len, __u8 verdict,
					  __u8 reason, __u64 weight)
{
	event->time_ns = now;
	event->source = *key;
	event->frame_len = frame_len;
	event->reason = reason;
	event->verdict = verdict;
	event->flags = 0;
	event->_pad = 0;
	event->weight = weight;
}

/* Only drops take this path: BPF inlines it, as it must; elsewhere it stays
 * out of line, so the path every packet takes stays small enough to inline. */
#ifdef __bpf__
#define SLUICE_DROP_PATH SLUICE_INLINE
#else
#define SLUICE_DROP_PATH static __attribute__((noinline, unused))
#endif

/* A drop of a known source: sent as an event if it is the sampled one,
 * weighted by the drops it stands for (itself and the gap to the next sampled
 * one), so the weights add up to the drops whatever the period does. */
SLUICE_DROP_PATH void sluice_sample_drop(SLUICE_ACCOUNT_CTX *ctx, const struct sluice_source_key *key,
					 __u32 frame_len, __u8 verdict, __u8 reason)
{
	struct sluice_drop_sampler *sampler = SLUICE_DROP_SAMPLER(ctx);
	struct sluice_drop_event *event;
	__u32 gap;

	if (!sampler || !sluice_drop_sampled(sampler))
		return;
	gap = sluice_drop_sample_gap(SLUICE_DROP_SAMPLE_PERIOD(ctx), SLUICE_DROP_RANDOM(ctx));
	sampler->countdown = gap;
	event = SLUICE_EVENT_RESERVE(ctx);
	if (!event) {
		sampler->carried += gap;
		SLUICE_STAT_ADD(ctx, SLUICE_STAT_DROP_EVENTS_LOST);
		return;
	}
	sluice_drop_event_fill(event, SLUICE_EVENT_NOW(ctx), key, frame_len, verdict, reason,
			       sampler->carried + gap);
	if (SLUICE_EVENT_SUBMIT(ctx, event)) {
		sampler->carried = 0;
		SLUICE_STAT_ADD(ctx, SLUICE_STAT_DROP_EVENTS_SENT);
	} else {
		sampler->carried += gap;
		SLUICE_STAT_ADD(ctx, SLUICE_STAT_DROP_EVENTS_LOST);
	}
}

/* The drop that put its source in the penalty box, always sent: the daemon
 * keeps the penalties in force from these (their weight is 0; the sampler
 * counts the drop as any other). */
SLUICE_DROP_PATH void sluice_penalty_event(SLUICE_ACCOUNT_CTX *ctx, const struct sluice_source_key *key,
					   __u32 frame_len, __u8 verdict)
{
	struct sluice_drop_event *event = SLUICE_EVENT_RESERVE(ctx);

	if (!event) {
		SLUICE_STAT_ADD(ctx, SLUICE_STAT_DROP_EVENTS_LOST);
		return;
	}
	sluice_drop_event_fill(event, SLUICE_EVENT_NOW(ctx), key, frame_len, verdict, SLUICE_REASON_PENALTY, 0);
	event->flags = SLUICE_EVENT_PENALTY_STARTED;
	if (SLUICE_EVENT_SUBMIT(ctx, event))
		SLUICE_STAT_ADD(ctx, SLUICE_STAT_DROP_EVENTS_SENT);
	else
		SLUICE_STAT_ADD(ctx, SLUICE_STAT_DROP_EVENTS_LOST);
}

/* Counts a decision of a frame of `class_id` and samples it if it dropped a
 * known source (`key`; NULL for frames without one: unparsed, or leaving a
 * shaping queue). The backend then sends or drops the frame by d.verdict:
 * returning that from here instead cost the BPF program ~35 instructions of
 * spills in sluice_decide (clang 14), so the verdict stays the caller's. */
SLUICE_INLINE void sluice_account(SLUICE_ACCOUNT_CTX *ctx, __u32 class_id, struct sluice_decision d,
				  __u32 frame_len, const struct sluice_source_key *key)
{
	__u32 index = sluice_decision_counter(class_id, d);
	struct sluice_counter *counter = SLUICE_COUNTER(ctx, &index);

	if (counter) {
		counter->packets++;
		counter->bytes += frame_len;
	}
	if (d.verdict != SLUICE_VERDICT_PASS && key) {
#ifndef SLUICE_PENALTY_EVENT_BY_STEP
		if (d.table == SLUICE_TABLE_PENALISED)
			sluice_penalty_event(ctx, key, frame_len, d.verdict);
#endif
		sluice_sample_drop(ctx, key, frame_len, d.verdict, d.reason);
	}
}

/* A packet that a ban in force caught (sluice_ban_applies): counted in its
 * ban's slot and under class 0 with reason `ban`, and sampled under its whole
 * address (`key` is filled here). The backend drops it. */
SLUICE_INLINE void sluice_account_ban(SLUICE_ACCOUNT_CTX *ctx, const struct sluice_ban *ban,
				      const struct sluice_packet *pkt, struct sluice_source_key *key)
{
	__u32 slot = ban->slot & (SLUICE_MAX_BANS - 1);
	struct sluice_counter *counter = SLUICE_BAN_COUNTER(ctx, &slot);

	if (counter) {
		counter->packets++;
		counter->bytes += pkt->frame_len;
	}
	sluice_ban_source_key(key, pkt);
	sluice_account(ctx, SLUICE_CLASS_UNCLASSIFIED, sluice_decide_banned(), pkt->frame_len, key);
}

/* What a decision did to the source table, counted in the health stats. */
SLUICE_INLINE void sluice_count_table_event(SLUICE_ACCOUNT_CTX *ctx, __u8 event)
{
	if (event == SLUICE_TABLE_INSERTED || event == SLUICE_TABLE_EVICTED)
		SLUICE_STAT_ADD(ctx, SLUICE_STAT_SOURCE_INSERTS);
	if (event == SLUICE_TABLE_EVICTED)
		SLUICE_STAT_ADD(ctx, SLUICE_STAT_SOURCE_EVICTIONS);
	else if (event == SLUICE_TABLE_FULL)
		SLUICE_STAT_ADD(ctx, SLUICE_STAT_SOURCE_TABLE_FULL);
	else if (event == SLUICE_TABLE_CONTENDED)
		SLUICE_STAT_ADD(ctx, SLUICE_STAT_SOURCE_CONTENDED);
#ifndef SLUICE_PENALTY_EVENT_BY_STEP
	else if (event == SLUICE_TABLE_PENALISED)
		SLUICE_STAT_ADD(ctx, SLUICE_STAT_PENALTIES);
#endif
}

/* sluice_decide and the penalty box, and what they did to the source table
 * counted. */
SLUICE_INLINE struct sluice_decision sluice_decide_counted(SLUICE_ACCOUNT_CTX *ctx, const struct sluice_levels *levels,
							   __u32 frame_len, __u8 tcp_syn, __u64 now)
{
	struct sluice_decision d = sluice_decide(levels, frame_len, tcp_syn, now);

	SLUICE_DECISION_BARRIER(d);
	d = sluice_penalty_after(levels, d, frame_len, tcp_syn, now);

	sluice_count_table_event(ctx, d.table);
	return d;
}

#endif /* SLUICE_ACCOUNT_H */
