/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The per-packet decision over abstract state: the backend (BPF maps, DPDK
 * tables, a test's arrays) finds the state of each level and hands this file
 * pointers; everything after that is here, once.
 *
 * Levels, in order: the source (GCRA, or a fixed or sliding window, in the
 * shared source table: source_table.h, window.h), the class's budget for
 * new sources (only for sources without an entry), the class aggregate
 * (token buckets in split or lease mode, bucket.h, or a window, window.h),
 * the global ceiling (a token bucket) and the class's fleet quota (credit
 * leased from Redis, fleet.h).
 *
 * Composition is check-then-commit: every level is checked first (taking
 * leases as needed, which moves tokens but spends none), and the cost is
 * charged to every level only if all admit. A packet refused at any level
 * spends nothing anywhere, and its drop is counted under the level that
 * refused it. The source is charged first, by a compare-and-swap that fails
 * if another CPU charged it since the check: the source is then checked
 * again, and if it now refuses, the levels above have spent nothing. A class
 * aggregate that counts in windows (window.h) and the fleet credit are the
 * exceptions: their checks take for real, and a refusal after them gives the
 * units back, so they too end up having spent nothing.
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
#include "fleet.h"
#include "parse.h"
#include "source_table.h"
#include "window.h"

/* How the source level finds and charges a source (source_table.h), and how
 * sluice_decide settles and commits it (below). A backend may route these
 * through functions of its own: the BPF program does, so the verifier checks
 * each of them once rather than once for every way of reaching it. */
#ifndef SLUICE_SOURCE_FIND
#define SLUICE_SOURCE_FIND(src, now, look) sluice_source_find((src), (now), (look))
#endif
#ifndef SLUICE_SOURCE_CHARGE
#define SLUICE_SOURCE_CHARGE(src, look) sluice_source_charge((src), (look))
#endif
/* sluice_decide's one compare-and-swap on a source it found (a test
 * observes every charge through this and the one above). */
#ifndef SLUICE_SOURCE_CHARGE_KNOWN
#define SLUICE_SOURCE_CHARGE_KNOWN(src, look) sluice_source_charge_known((src), (look))
#endif
#ifndef SLUICE_SOURCE_SETTLE
#define SLUICE_SOURCE_SETTLE(src, cost, now, look, d) sluice_source_settle((src), (cost), (now), (look), (d))
#endif
#ifndef SLUICE_SOURCE_COMMIT
#define SLUICE_SOURCE_COMMIT(src, cost, now, look, d) sluice_source_commit((src), (cost), (now), (look), (d))
#endif
/* How a per-source level of a window algorithm judges a look (below), from
 * the source calls (STEP) and from sluice_decide's known source (STEP_KNOWN);
 * the BPF program calls a function of its own, whose stack frame is then not
 * part of every caller's. */
#ifndef SLUICE_SOURCE_WINDOW_STEP
#define SLUICE_SOURCE_WINDOW_STEP(src, look, cost, now) sluice_source_window_step((src)->limit, (look), (cost), (now))
#endif
#ifndef SLUICE_SOURCE_WINDOW_STEP_KNOWN
#define SLUICE_SOURCE_WINDOW_STEP_KNOWN(src, look, cost, now) SLUICE_SOURCE_WINDOW_STEP(src, look, cost, now)
#endif

/* How the fleet level takes (refund 0) or gives back (refund 1) what a frame
 * costs there (below); the BPF program routes it through a function of its
 * own, so its branches are verified once rather than on every path. */
#ifndef SLUICE_FLEET_LEVEL
#define SLUICE_FLEET_LEVEL(ref, frame_len, tcp_syn, refund) \
	sluice_fleet_level((ref)->credit, (ref)->unit, (frame_len), (tcp_syn), (refund))
#endif

/* How a window level (the class aggregate, window.h) is decided and refunded
 * under its lock; the BPF program routes these through a function of its own. */
#ifndef SLUICE_WINDOW_LEVEL_DECIDE
#define SLUICE_WINDOW_LEVEL_DECIDE(ref, cost, now) sluice_window_level_decide((ref), (cost), (now))
#endif
#ifndef SLUICE_WINDOW_LEVEL_REFUND
#define SLUICE_WINDOW_LEVEL_REFUND(ref, cost, now) sluice_window_level_refund((ref), (cost), (now))
#endif

#if !defined(SLUICE_SHARED_LOCK) || !defined(SLUICE_SHARED_UNLOCK)
#error "define SLUICE_SHARED_LOCK(shared) and SLUICE_SHARED_UNLOCK(shared) before including sluice/decide.h"
#endif

/* One level's state for the packet being decided. */
struct sluice_level_ref {
	const struct sluice_level_limit *limit;   /* NULL or !enabled: no limit at this level */
	struct sluice_cpu_bucket *cpu;            /* this CPU's bucket (split) or lease (lease) */
	struct sluice_shared_bucket *shared;      /* lease mode: the bucket behind the leases;
	                                           * a window level: its state */
	const struct sluice_window_limit *window; /* the class aggregate's algorithm; NULL or
	                                           * GCRA: the level is the token bucket `limit` */
};

/* A class's fleet quota for the packet being decided. */
struct sluice_fleet_ref {
	struct sluice_fleet_credit *credit; /* NULL: the class has no fleet quota */
	__u64 unit;                         /* enum sluice_unit */
};

#ifndef __bpf__
/* What a class's penalty step needs beyond the source level (whose
 * `penalty` says whether the class has one), looked at only when the
 * source level refuses. The BPF program finds all of it itself
 * (SLUICE_PENALTY_STEP): there this would take stack every packet pays for. */
struct sluice_penalty_ref {
	const struct sluice_penalty *limit;
	const struct sluice_source_key *key;    /* the source's: its meter's is derived */
	const struct sluice_hash_key *hash_key; /* the table's */
	struct sluice_source_set *sets;         /* the table, set_mask + 1 sets */
	__u32 set_mask;
};
#endif

/* Every level of one packet. */
struct sluice_levels {
	struct sluice_source_ref source;
	struct sluice_level_ref new_sources;
	struct sluice_level_ref aggregate;
	struct sluice_level_ref global;
	struct sluice_fleet_ref fleet;
#ifndef __bpf__
	struct sluice_penalty_ref penalty;
#endif
};

/* What a decision did to the source table, for the backend's stats. */
enum sluice_table_event {
	SLUICE_TABLE_NONE = 0,
	SLUICE_TABLE_INSERTED = 1,  /* a new source took a free entry */
	SLUICE_TABLE_EVICTED = 2,   /* a new source took the entry of one in debt */
	SLUICE_TABLE_FULL = 3,      /* both sets in debt: on_table_full open or closed decided */
	SLUICE_TABLE_CONTENDED = 4, /* the source's entry stayed busy on another CPU: dropped */
	SLUICE_TABLE_PENALISED = 5, /* the refused source was put in the penalty box */
};

struct sluice_decision {
	__u8 verdict; /* enum sluice_verdict */
	__u8 reason;  /* enum sluice_reason */
	__u8 level;   /* enum sluice_level that refused, or SLUICE_LEVEL_NONE */
	__u8 table;   /* enum sluice_table_event */
};

SLUICE_INLINE struct sluice_decision sluice_decision_make(__u8 verdict, __u8 reason, __u8 level)
{
	struct sluice_decision d;

	d.verdict = verdict;
	d.reason = reason;
	d.level = level;
	d.table = SLUICE_TABLE_NONE;
	return d;
}

SLUICE_INLINE __u8 sluice_level_reason(__u32 level)
{
	switch (level) {
	case SLUICE_LEVEL_SOURCE:
		return SLUICE_REASON_SOURCE;
	case SLUICE_LEVEL_NEW_SOURCE:
		return SLUICE_REASON_NEW_SOURCE;
	case SLUICE_LEVEL_CLASS:
		return SLUICE_REASON_CLASS;
	case SLUICE_LEVEL_FLEET:
		return SLUICE_REASON_FLEET;
	default:
		return SLUICE_REASON_GLOBAL;
	}
}

/* Does the level count in windows (window.h) rather than tokens? */
SLUICE_INLINE int sluice_level_windowed(const struct sluice_level_ref *ref)
{
	return ref->window && ref->window->algorithm != SLUICE_ALGORITHM_GCRA;
}

SLUICE_INLINE int sluice_level_active(const struct sluice_level_ref *ref)
{
	if (!ref->limit || !ref->limit->enabled)
		return 0;
	if (sluice_level_windowed(ref))
		return ref->shared != 0;
	return ref->cpu && (ref->limit->accuracy != SLUICE_ACCURACY_LEASE || ref->shared);
}

SLUICE_INLINE __u64 sluice_level_cost_nano(const struct sluice_level_limit *limit, __u32 frame_len, __u8 tcp_syn)
{
	return sluice_frame_units(limit->unit, frame_len, tcp_syn) * SLUICE_NANO;
}

/* What the packet costs at an active level: nano-units for a bucket, units
 * for a window. */
SLUICE_INLINE __u64 sluice_level_cost(const struct sluice_level_ref *ref, __u32 frame_len, __u8 tcp_syn)
{
	__u64 units = sluice_frame_units(ref->limit->unit, frame_len, tcp_syn);

	return sluice_level_windowed(ref) ? units : units * SLUICE_NANO;
}

/* A window level admits for real, under its lock, where a bucket is only
 * checked: one lock per packet, admitted or refused. The levels after it
 * may still refuse the packet; then it takes the units back
 * (sluice_window_level_refund), which a global ceiling in overload makes a
 * second lock, and a race for the source on another CPU a rare one. */
SLUICE_INLINE int sluice_window_level_decide(const struct sluice_level_ref *ref, __u64 cost, __u64 now)
{
	struct sluice_shared_bucket *shared = ref->shared;
	int ok;

	if (!shared)
		return 1;
	if (sluice_window_state_refusing(ref->window, &shared->window, now))
		return 0;
	SLUICE_SHARED_LOCK(shared);
	ok = sluice_window_state_decide(ref->window, &shared->window, now, cost, 1, 0);
	SLUICE_SHARED_UNLOCK(shared);
	return ok;
}

/* Takes back what sluice_window_level_decide admitted, when a level after
 * it refused the packet after all. */
SLUICE_INLINE void sluice_window_level_refund(const struct sluice_level_ref *ref, __u64 cost, __u64 now)
{
	struct sluice_shared_bucket *shared = ref->shared;

	if (!shared)
		return;
	SLUICE_SHARED_LOCK(shared);
	sluice_window_state_refund(ref->window, &shared->window, now, cost);
	SLUICE_SHARED_UNLOCK(shared);
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

	if (sluice_level_windowed(ref))
		return SLUICE_WINDOW_LEVEL_DECIDE(ref, cost_nano, now);
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

/* A bucket level's commit; a window level admitted for real at its check. */
SLUICE_INLINE void sluice_level_commit(const struct sluice_level_ref *ref, __u64 cost_nano)
{
	if (ref->cpu && !sluice_level_windowed(ref))
		ref->cpu->tokens_nano -= cost_nano;
}

SLUICE_INLINE int sluice_source_active(const struct sluice_source_ref *src)
{
	return src->limit && src->limit->enabled && src->home && src->second;
}

/* Does the per-source level count in windows rather than by GCRA? */
SLUICE_INLINE int sluice_source_windowed(const struct sluice_source_limit *limit)
{
	return limit->window.algorithm != SLUICE_ALGORITHM_GCRA;
}

/* What a frame costs at the per-source level: ns of schedule (GCRA) or units
 * (a window); 0 where the level does not count it. */
SLUICE_INLINE __u64 sluice_source_cost(const struct sluice_source_limit *limit, __u32 frame_len, __u8 tcp_syn)
{
	if (sluice_source_windowed(limit))
		return sluice_frame_units(limit->current.unit, frame_len, tcp_syn);
	return sluice_source_cost_ns(&limit->current, frame_len, tcp_syn);
}

SLUICE_INLINE struct sluice_decision sluice_drop(__u8 level)
{
	return sluice_decision_make(SLUICE_VERDICT_DROP, sluice_level_reason(level), level);
}

/* The source level's verdict on what a look found: 1 admits (look->next is
 * the time field to write), 0 refuses (the decision is in *d), -1 means look
 * again (the entry is busy), and SLUICE_SOURCE_UNTRACKED lets the packet
 * through this level without an entry (on_table_full = open; *d is that
 * decision, if the levels above admit it too). The found source is judged
 * under the class's current limit: its debt converted (GCRA), or its counts
 * read as fresh if another limit's layout wrote them (a window). */
#define SLUICE_SOURCE_UNTRACKED 2

/* Did the look let the packet through untracked? Recomputed from the look
 * rather than kept in a variable: the BPF program's stack has no room. */
SLUICE_INLINE int sluice_source_untracked(const struct sluice_source_ref *src, const struct sluice_source_look *look)
{
	return !look->found && look->evicts && src->on_table_full == SLUICE_TABLE_FULL_OPEN;
}

SLUICE_INLINE struct sluice_decision sluice_untracked(void)
{
	struct sluice_decision d = sluice_decision_make(SLUICE_VERDICT_PASS, SLUICE_REASON_TABLE_FULL, SLUICE_LEVEL_SOURCE);

	d.table = SLUICE_TABLE_FULL;
	return d;
}
/* What decides before the algorithm does: -1, 0 or SLUICE_SOURCE_UNTRACKED
 * as sluice_source_check says, 1 to let the algorithm judge. */
SLUICE_INLINE int sluice_source_placed(const struct sluice_source_ref *src, const struct sluice_source_look *look,
				       struct sluice_decision *d)
{
	if (look->pending || look->index >= SLUICE_SOURCE_CANDIDATES)
		return -1; /* another CPU is creating it (or every entry of both sets) */
	if (sluice_source_untracked(src, look)) {
		*d = sluice_untracked();
		return SLUICE_SOURCE_UNTRACKED;
	}
	if (!look->found && look->evicts && src->on_table_full == SLUICE_TABLE_FULL_CLOSED) {
		*d = sluice_decision_make(SLUICE_VERDICT_DROP, SLUICE_REASON_TABLE_FULL, SLUICE_LEVEL_SOURCE);
		d->table = SLUICE_TABLE_FULL;
		return 0;
	}
	return 1;
}

/* Is a source `debt` ahead of its schedule under `limit` in the penalty box?
 * An admission leaves a source at most its tolerance ahead; only a penalty
 * puts it further (by more than the margin, which skew between CPUs' clocks
 * cannot reach). */
SLUICE_INLINE int sluice_source_penalised(const struct sluice_source_limit *limit, __u64 debt)
{
	return debt > limit->current.tolerance_ns + SLUICE_PENALTY_MARGIN_NS;
}

/* GCRA's judgement: admitted iff the debt after `cost` stays within the
 * tolerance; a source in the penalty box is refused for that reason. */
SLUICE_INLINE int sluice_source_check_gcra(const struct sluice_source_ref *src, struct sluice_source_look *look,
					   __u64 cost, __u64 now, struct sluice_decision *d)
{
	int placed = sluice_source_placed(src, look, d);

	if (placed != 1)
		return placed;
	look->debt = sluice_source_debt_now(src->limit, look->seen, look->debt);
	if (look->debt + cost > src->limit->current.tolerance_ns) {
		*d = sluice_drop(SLUICE_LEVEL_SOURCE);
		/* In arithmetic rather than a branch: this is on the inline path
		 * of a known source, every branch of which the verifier walks. */
		d->reason += (__u8)(sluice_source_penalised(src->limit, look->debt) *
				    (SLUICE_REASON_PENALTY - SLUICE_REASON_SOURCE));
		return 0;
	}
	look->next = now + look->debt + cost;
	return 1;
}

/* A window's judgement: the counts in the entry's time field stepped by
 * `cost` (window.h). A new source's entry, or one another limit wrote,
 * counts nothing: `now` as the field reads as free. (Of those another limit
 * wrote, sluice_source_window_full has refused the ones still busy first.) */
SLUICE_INLINE int sluice_source_window_step(const struct sluice_source_limit *limit, struct sluice_source_look *look,
					    __u64 cost, __u64 now)
{
	__u64 field = look->found && sluice_entry_generation(look->seen) == limit->generation ? look->seen : now;

	return sluice_entry_window_step(&limit->window, field, now, cost, &look->next, 0);
}

/* Does the entry a window limit found count as a full window? One another
 * limit wrote that is still busy does, as GCRA reads it as an empty bucket
 * (sluice_source_debt_now): above all what the limit replacing this one
 * wrote, met by a decision still running on this one. The one exception is
 * the limit this one replaced when it counted another way (previous_fresh):
 * fresh. Checked before the step, outside the BPF program's window function,
 * whose stack has no room for it. */
SLUICE_INLINE int sluice_source_window_full(const struct sluice_source_limit *limit,
					    const struct sluice_source_look *look)
{
	/* How many generations this limit is ahead of the entry's writer. */
	__u32 behind = (limit->generation - sluice_entry_generation(look->seen)) & 3u;

	return look->found && behind && look->debt && (behind != 1 || !limit->previous_fresh);
}

/* sluice_source_check of an entry sluice_source_find_known found: only the
 * algorithm judges it. */
SLUICE_INLINE int sluice_source_check_known(const struct sluice_source_ref *src, struct sluice_source_look *look,
					    __u64 cost, __u64 now, struct sluice_decision *d)
{
	if (!sluice_source_windowed(src->limit))
		return sluice_source_check_gcra(src, look, cost, now, d);
	if (!sluice_source_window_full(src->limit, look) && SLUICE_SOURCE_WINDOW_STEP_KNOWN(src, look, cost, now))
		return 1;
	*d = sluice_drop(SLUICE_LEVEL_SOURCE);
	return 0;
}

SLUICE_INLINE int sluice_source_check(const struct sluice_source_ref *src, struct sluice_source_look *look,
				      __u64 cost, __u64 now, struct sluice_decision *d)
{
	int placed;

	if (!sluice_source_windowed(src->limit))
		return sluice_source_check_gcra(src, look, cost, now, d);
	placed = sluice_source_placed(src, look, d);
	if (placed != 1)
		return placed;
	if (sluice_source_window_full(src->limit, look) || !SLUICE_SOURCE_WINDOW_STEP(src, look, cost, now)) {
		*d = sluice_drop(SLUICE_LEVEL_SOURCE);
		return 0;
	}
	return 1;
}

/* Finds the source and checks it: 1 admits (*look holds what the charge
 * needs), 0 refuses (*d says why), -1 its entry stayed busy, or
 * SLUICE_SOURCE_UNTRACKED. */
SLUICE_INLINE int sluice_source_settle(const struct sluice_source_ref *src, __u64 cost, __u64 now,
				       struct sluice_source_look *look, struct sluice_decision *d)
{
	__u32 attempt;
	int verdict;

	for (attempt = 0; attempt < SLUICE_SOURCE_ATTEMPTS; attempt++) {
		SLUICE_SOURCE_FIND(src, now, look);
		verdict = sluice_source_check(src, look, cost, now, d);
		if (verdict >= 0)
			return verdict;
	}
	return -1;
}

/* Charges what settle admitted. If another CPU changed the entry since,
 * looks and checks again: 1 charged, 0 now refused (*d), -1 stayed busy, or
 * SLUICE_SOURCE_UNTRACKED. */
SLUICE_INLINE int sluice_source_commit(const struct sluice_source_ref *src, __u64 cost, __u64 now,
				       struct sluice_source_look *look, struct sluice_decision *d)
{
	__u32 attempt;
	int verdict = 1;

	for (attempt = 0; attempt < SLUICE_SOURCE_ATTEMPTS; attempt++) {
		if (verdict == 1 && SLUICE_SOURCE_CHARGE(src, look))
			return 1;
		SLUICE_SOURCE_FIND(src, now, look);
		verdict = sluice_source_check(src, look, cost, now, d);
		if (verdict == 0 || verdict == SLUICE_SOURCE_UNTRACKED)
			return verdict;
	}
	/* The last look may have admitted: one more try before giving up. */
	return verdict == 1 && SLUICE_SOURCE_CHARGE(src, look) ? 1 : -1;
}

/* ---- penalties -----------------------------------------------------------------
 * A class's penalty says: a source whose refused units run above
 * (over - 1) x its rate for longer than `within` goes in the penalty box for
 * `for`. Refused units are what the source sent beyond its limit, so with
 * the rate it is admitted at, such a source sends more than `over` times its
 * limit. The meter of refused units is a GCRA entry of its own in the source
 * table (struct sluice_penalty), charged only when the source is refused:
 * a source that stays within its burst never touches it. When the meter
 * refuses, the source's own entry is written once, past the end of the
 * penalty (abi.h); from then on its packets are refused on reading that
 * entry, which costs what any refusal costs, and nothing is written until
 * the penalty ends and the source comes out with an empty bucket.
 *
 * Policy changes: a penalty in force keeps its end (a changed `for` applies
 * to penalties that start after it), through a change of the per-source
 * limit too (sluice_source_debt_now); a change of the per-source algorithm
 * starts the class's sources fresh, out of the box. The meter never takes
 * an entry from a source in debt (a full table means no penalty rather than
 * an eviction), and a lost race on its entry leaves the refusal uncounted:
 * both err towards not penalising. */

/* ns of the meter's schedule `units` refused units cost, rounded down, so
 * that a source refused at exactly (over - 1) x its rate never fills it. */
SLUICE_INLINE __u64 sluice_penalty_meter_cost(const struct sluice_gcra_limit *meter, __u64 units)
{
	return units * meter->interval_ns + ((units * meter->interval_frac) >> 32);
}

/* The key the meter of `key`'s source is kept under. */
SLUICE_INLINE void sluice_penalty_meter_key(struct sluice_source_key *meter, const struct sluice_source_key *key)
{
	*meter = *key;
	meter->class_id |= SLUICE_PENALTY_METER_CLASS;
}

/* The meter's judgement of what a look at it found (`m`), for a refusal of
 * `units`: 1 the meter is full, and the source is to go in the penalty
 * box; 0 it holds them (m->next is then the time field to charge); -1 it
 * has no entry and no free one to take: no penalty, and nothing written. */
SLUICE_INLINE int sluice_penalty_meter_judge(const struct sluice_penalty *penalty, struct sluice_source_look *m,
					     __u64 units, __u64 now)
{
	__u64 cost = sluice_penalty_meter_cost(&penalty->meter.current, units);

	if (m->pending || m->index >= SLUICE_SOURCE_CANDIDATES || (!m->found && m->evicts))
		return -1;
	if (m->debt + cost > penalty->meter.current.tolerance_ns)
		return 1;
	m->next = now + m->debt + cost;
	return 0;
}

/* Charges a refused source's meter (`meter`, its sets found; its limit is
 * the penalty's meter) with the refused `units`: 1 if it is full. */
SLUICE_INLINE int sluice_penalty_meter_full(const struct sluice_penalty *penalty, const struct sluice_source_ref *meter,
					    __u64 units, __u64 now, struct sluice_source_look *m)
{
	int judged;

	sluice_source_find(meter, now, m);
	judged = sluice_penalty_meter_judge(penalty, m, units, now);
	if (judged == 0)
		(void)sluice_source_charge(meter, m);
	return judged == 1;
}

/* Puts the source whose entry is `entry` (tag `tag`), last seen as `seen`,
 * in the penalty box: one compare-and-swap, of a word under `limit` that
 * reaches past the penalty's end. 1 if it took; 0 if another CPU changed
 * the entry first (the source's next refusal tries again). */
SLUICE_INLINE int sluice_penalty_impose(const struct sluice_penalty *penalty, const struct sluice_source_limit *limit,
					__u64 tag, __u64 *entry, __u64 seen, __u64 now)
{
	__u64 end = now + limit->current.tolerance_ns + SLUICE_PENALTY_MARGIN_NS + penalty->for_ns;

	return SLUICE_CAS64(entry, seen, sluice_entry_word(tag, limit->generation, end)) == seen;
}

#ifndef __bpf__
/* A refused source's penalty step where the table is memory the backend
 * can index: 1 if it put the source in the penalty box. */
SLUICE_INLINE int sluice_penalty_step_host(const struct sluice_penalty_ref *ref, const struct sluice_source_ref *src,
					   __u64 units, __u64 now)
{
	struct sluice_source_key key;
	struct sluice_source_ref meter;
	struct sluice_source_look look, m;
	__u64 hash;

	if (!ref->limit || !ref->key || !ref->hash_key || !ref->sets)
		return 0;
	sluice_penalty_meter_key(&key, ref->key);
	hash = sluice_source_hash(&key, ref->hash_key);
	meter.limit = &ref->limit->meter;
	meter.home_index = sluice_source_home(hash, ref->set_mask);
	meter.second_index = sluice_source_second(hash, ref->set_mask);
	meter.home = &ref->sets[meter.home_index];
	meter.second = &ref->sets[meter.second_index];
	meter.tag = sluice_source_tag(hash);
	meter.on_table_full = SLUICE_TABLE_FULL_OPEN;
	return sluice_penalty_meter_full(ref->limit, &meter, units, now, &m) && sluice_source_find_known(src, now, &look) &&
	       sluice_penalty_impose(ref->limit, src->limit, src->tag, sluice_set_entry(src, look.index), look.seen, now);
}
#endif

/* How a refused source's penalty is judged; the BPF program routes it
 * through a function of its own, which finds the sets itself. */
#ifndef SLUICE_PENALTY_STEP
#define SLUICE_PENALTY_STEP(levels, units, now) \
	sluice_penalty_step_host(&(levels)->penalty, &(levels)->source, (units), (now))
#endif

/* A decision of sluice_decide, after the penalty box had its say: a source
 * the per-source level refused in a class with a penalty has its meter
 * charged, and goes in the box if the meter is full. Apart from
 * sluice_decide, and finding the source again (its line is in cache), so
 * that no path through sluice_decide carries this step: inside it, the BPF
 * program passed the verifier's million instructions. */
SLUICE_INLINE struct sluice_decision sluice_penalty_after(const struct sluice_levels *l, struct sluice_decision d,
							  __u32 frame_len, __u8 tcp_syn, __u64 now)
{
	const struct sluice_source_limit *limit = l->source.limit;

	if (d.reason != SLUICE_REASON_SOURCE || !l->source.penalty || !limit || sluice_source_windowed(limit))
		return d;
	if (SLUICE_PENALTY_STEP(l, sluice_frame_units(limit->current.unit, frame_len, tcp_syn), now)) {
		d.reason = SLUICE_REASON_PENALTY;
		d.table = SLUICE_TABLE_PENALISED;
	}
	return d;
}

/* The fleet level: take what the frame costs at a class's fleet quota from
 * its credit (refund 0), or give it back (refund 1). 1 admits, and so does a
 * class without a fleet quota or a frame that costs nothing there. */
SLUICE_INLINE int sluice_fleet_level(struct sluice_fleet_credit *credit, __u64 unit, __u32 frame_len, __u8 tcp_syn,
				     int refund)
{
	__u64 cost;

	if (!credit)
		return 1;
	cost = sluice_frame_units((__u8)unit, frame_len, tcp_syn);
	if (!cost)
		return 1;
	if (!refund)
		return sluice_fleet_take(credit, cost);
	sluice_fleet_refund(credit, cost);
	return 1;
}

/* A level after the class aggregate (and the fleet, when `fleet_taken`)
 * refused: give back what their checks took. */
SLUICE_INLINE void sluice_give_back(const struct sluice_levels *l, int cls_on, __u64 cls_cost, int fleet_taken,
				    __u32 frame_len, __u8 tcp_syn, __u64 now)
{
	if (cls_on && sluice_level_windowed(&l->aggregate))
		SLUICE_WINDOW_LEVEL_REFUND(&l->aggregate, cls_cost, now);
	if (fleet_taken)
		(void)SLUICE_FLEET_LEVEL(&l->fleet, frame_len, tcp_syn, 1);
}

SLUICE_INLINE struct sluice_decision sluice_contended(void)
{
	struct sluice_decision d = sluice_drop(SLUICE_LEVEL_SOURCE);

	d.table = SLUICE_TABLE_CONTENDED;
	return d;
}

/*
 * Decide a packet of `frame_len` bytes (`tcp_syn`: it opens a TCP
 * connection). Inactive levels admit, and so does a level the packet costs
 * nothing at (unit tcp_syn, and not a SYN): it neither looks at nor charges
 * that level, so a packet that skips the source level is not a new source
 * either. The bucket
 * levels are written out one by one (no loop over them, and none around
 * them) so the verifier sees each lock/unlock pair with a known map value
 * pointer and the compiler cannot hoist their address arithmetic above the
 * checks that a pointer is there.
 */
SLUICE_INLINE struct sluice_decision sluice_decide(const struct sluice_levels *l, __u32 frame_len, __u8 tcp_syn,
						  __u64 now)
{
	const struct sluice_source_ref *src = &l->source;
	int src_on = sluice_source_active(src);
	int new_on, cls_on = sluice_level_active(&l->aggregate);
	int glb_on = sluice_level_active(&l->global);
	__u64 src_cost = src_on ? sluice_source_cost(src->limit, frame_len, tcp_syn) : 0;
	__u64 new_cost = 0;
	__u64 cls_cost = cls_on ? sluice_level_cost(&l->aggregate, frame_len, tcp_syn) : 0;
	__u64 glb_cost = glb_on ? sluice_level_cost_nano(l->global.limit, frame_len, tcp_syn) : 0;
	struct sluice_source_look look;
	struct sluice_decision d;
	int verdict;

	__builtin_memset(&look, 0, sizeof(look));
	__builtin_memset(&d, 0, sizeof(d));
	src_on = src_on && src_cost;
	cls_on = cls_on && cls_cost;
	glb_on = glb_on && glb_cost;

	/* A known source is found and checked here; anything else (a new one,
	 * an entry being created) takes the longer way. */
	if (src_on) {
		verdict = sluice_source_find_known(src, now, &look) ? sluice_source_check_known(src, &look, src_cost, now, &d)
								    : SLUICE_SOURCE_SETTLE(src, src_cost, now, &look, &d);
		if (verdict < 0)
			return sluice_contended();
		if (verdict == 0)
			return d;
	}

	/* Whether the source is new is judged once, on arrival. A source let
	 * through untracked (on_table_full = open) is new too: a flood of new
	 * sources pays its budget, and the aggregate and global still hold. */
	new_on = src_on && !look.found && sluice_level_active(&l->new_sources);
	if (new_on) {
		new_cost = sluice_level_cost_nano(l->new_sources.limit, frame_len, tcp_syn);
		new_on = new_cost != 0;
	}
	if (new_on) {
		if (!sluice_level_check(&l->new_sources, new_cost, now))
			return sluice_drop(SLUICE_LEVEL_NEW_SOURCE);
	}
	if (cls_on && !sluice_level_check(&l->aggregate, cls_cost, now))
		return sluice_drop(SLUICE_LEVEL_CLASS);
	if (glb_on && !sluice_level_check(&l->global, glb_cost, now)) {
		sluice_give_back(l, cls_on, cls_cost, 0, frame_len, tcp_syn, now);
		return sluice_drop(SLUICE_LEVEL_GLOBAL);
	}
	/* The fleet's credit last: what the node's own limits refuse never
	 * takes it (a node keeps its ceilings whatever it was granted), and
	 * under overload no packet takes and gives back. */
	if (!SLUICE_FLEET_LEVEL(&l->fleet, frame_len, tcp_syn, 0)) {
		sluice_give_back(l, cls_on, cls_cost, 0, frame_len, tcp_syn, now);
		return sluice_drop(SLUICE_LEVEL_FLEET);
	}

	/* The source next: the bucket levels have spent nothing yet if it
	 * now refuses, and a window aggregate and the fleet credit take their
	 * units back. A known
	 * source is one compare-and-swap; if another CPU charged it first, it
	 * is looked at and checked again. */
	if (src_on && !sluice_source_untracked(src, &look) &&
	    !(look.found && SLUICE_SOURCE_CHARGE_KNOWN(src, &look))) {
		verdict = 1;
		if (look.found)
			verdict = SLUICE_SOURCE_SETTLE(src, src_cost, now, &look, &d);
		if (verdict == 1)
			verdict = SLUICE_SOURCE_COMMIT(src, src_cost, now, &look, &d);
		if (verdict <= 0) {
			sluice_give_back(l, cls_on, cls_cost, 1, frame_len, tcp_syn, now);
			return verdict < 0 ? sluice_contended() : d;
		}
	}
	if (new_on)
		sluice_level_commit(&l->new_sources, new_cost);
	if (cls_on)
		sluice_level_commit(&l->aggregate, cls_cost);
	if (glb_on)
		sluice_level_commit(&l->global, glb_cost);
	if (src_on && sluice_source_untracked(src, &look))
		return sluice_untracked();
	d = sluice_decision_make(SLUICE_VERDICT_PASS, SLUICE_REASON_ADMITTED, SLUICE_LEVEL_NONE);
	if (src_on && !look.found)
		d.table = look.evicts ? SLUICE_TABLE_EVICTED : SLUICE_TABLE_INSERTED;
	return d;
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

/* A class in shadow decides and counts as if enforcing, and its state moves
 * exactly as it would (a refused packet spends nothing either way), but what
 * it would drop passes: verdict WOULD_DROP. */
SLUICE_INLINE struct sluice_decision sluice_shadowed(const struct sluice_class_entry *cls, struct sluice_decision d)
{
	if (cls->shadow && d.verdict == SLUICE_VERDICT_DROP)
		d.verdict = SLUICE_VERDICT_WOULD_DROP;
	return d;
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

/* The per-source level of a packet whose source key is `key`, but for the
 * two set pointers, which the backend finds at home_index and second_index. */
SLUICE_INLINE void sluice_source_ref_make(struct sluice_source_ref *ref, const struct sluice_class_entry *cls,
					  const struct sluice_source_key *key, const struct sluice_hash_key *hash_key,
					  __u32 set_mask)
{
	__u64 hash = sluice_source_hash(key, hash_key);

	ref->limit = &cls->per_source;
	ref->home = 0;
	ref->second = 0;
	ref->home_index = sluice_source_home(hash, set_mask);
	ref->second_index = sluice_source_second(hash, set_mask);
	ref->tag = sluice_source_tag(hash);
	ref->on_table_full = cls->on_table_full;
	ref->penalty = cls->penalty.for_ns != 0;
}

/* ---- bans ------------------------------------------------------------------
 * A ban (abi.h, "bans") found for the packet's source: is it still in force?
 * A ban the daemon has not yet removed ends on time by itself, and the probe
 * goes on to shorter lengths (a longer ban that ended does not hide a
 * shorter one still running). */
SLUICE_INLINE int sluice_ban_applies(const struct sluice_ban *ban, __u64 now)
{
	return ban && now < ban->until_ns;
}

/* The ban key a packet's source has at prefix length `length`: what the
 * backend probes, once per length in use, longest first. */
SLUICE_INLINE void sluice_ban_key_make(struct sluice_ban_key *key, const struct sluice_packet *pkt, __u8 length)
{
	__u64 hi, lo;

	__builtin_memcpy(&hi, pkt->src, 8);
	__builtin_memcpy(&lo, pkt->src + 8, 8);
	hi &= sluice_prefix_mask64(length);
	lo &= sluice_prefix_mask64((int)length - 64);
	key->family = pkt->family;
	key->length = length;
	key->_pad[0] = 0;
	key->_pad[1] = 0;
	__builtin_memcpy(key->addr, &hi, 8);
	__builtin_memcpy(key->addr + 8, &lo, 8);
}

SLUICE_INLINE struct sluice_decision sluice_decide_banned(void)
{
	return sluice_decision_make(SLUICE_VERDICT_DROP, SLUICE_REASON_BAN, SLUICE_LEVEL_NONE);
}

/* A banned packet is not classified: its drop is sampled under its whole
 * address and class 0, so hot sources show the address the ban caught. */
SLUICE_INLINE void sluice_ban_source_key(struct sluice_source_key *key, const struct sluice_packet *pkt)
{
	__builtin_memset(key, 0, sizeof(*key));
	key->class_id = SLUICE_CLASS_UNCLASSIFIED;
	key->family = pkt->family;
	__builtin_memcpy(key->addr, pkt->src, 16);
}

#endif /* SLUICE_DECIDE_H */
