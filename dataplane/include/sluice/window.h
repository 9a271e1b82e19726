/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The window algorithms, once for every backend, and the answer every
 * algorithm gives a caller besides its verdict (struct sluice_quota: what is
 * left, when to come back, when the state is full again). The packet
 * dataplanes ignore the quota; a request-level caller answers Retry-After
 * and the RateLimit fields from it.
 *
 * fixed_window: at most `limit` units in each aligned window [kW, (k+1)W).
 * A window straddling a boundary can see 2 * limit: its known weakness.
 *
 * sliding_window: Cloudflare's counter approximation of a rolling window.
 * The previous window's count is weighted by the share of it still inside
 * the rolling window, (W - elapsed) / W, in steps of 2^-16 rounded up; a
 * packet is admitted iff prev * weight + cur + cost <= limit. Exactly at
 * most `limit` per aligned window (cur <= limit); against a rolling window
 * it is approximate (up to 2 * limit when the previous window's traffic all
 * came at its end): it is never called exact.
 *
 * sliding_log: exact in every rolling window (t - W, t]. The log keeps the
 * times of the last `limit` admissions; a new one is admitted iff the oldest
 * of them is at least W old, i.e. fewer than `limit` lie in the window. O(1)
 * per decision, memory proportional to limit (SLUICE_LOG_MAX at most). Every
 * admission costs one unit (packets or connection attempts, never bytes).
 *
 * One state transition each. A fixed or sliding window's state is one word:
 * the step functions compute the next word from the one read, and the
 * caller swaps it in with one compare-and-swap, retrying on failure
 * (sluice_window_admit): an update is never lost and a refusal writes
 * nothing. A log is more than a word: its caller holds the log's lock
 * (BPF: a bpf_spin_lock beside it) across sluice_log_step.
 *
 * Window numbers. The word keeps the window number modulo 2^index_bits, read
 * relative to now's: equal is this window, one behind the previous, a
 * difference in the upper half of the range is a window ahead of now (the
 * clock went backwards), whose counts stay in force, so a clock that goes
 * backwards mints nothing. Everything else is older, and counts nothing. A
 * word untouched for 2^(index_bits - 1) windows could look current again,
 * so whoever keeps such words must empty idle ones before then.
 *
 * Costs: one 64-bit division per decision (now / window_ns), unlike GCRA.
 */
#ifndef SLUICE_WINDOW_H
#define SLUICE_WINDOW_H

#include "abi.h"

#ifndef SLUICE_CAS64
#define SLUICE_CAS64(ptr, old, new) __sync_val_compare_and_swap((ptr), (old), (new))
#endif
#ifndef SLUICE_LOAD64
#define SLUICE_LOAD64(ptr) (*(volatile __u64 *)(ptr))
#endif

/* A retry_after that no wait satisfies: the cost is above the limit. */
#define SLUICE_NEVER (~0ULL)

/* What a caller may tell a client, after the decision. */
struct sluice_quota {
	__u64 remaining;      /* units that would still be admitted now */
	__u64 retry_after_ns; /* 0 if admitted; else until this cost would be */
	__u64 reset_ns;       /* until the state is as if nothing had been admitted */
};

SLUICE_INLINE __u64 sluice_low_mask(__u32 bits)
{
	return bits >= 64 ? ~0ULL : (1ULL << bits) - 1;
}

/* The stored window's place relative to `window` (now's): 0 this one, 1 the
 * one before, 2 older; -1 ahead of now (the clock went backwards). */
SLUICE_INLINE int sluice_window_age(const struct sluice_window_limit *l, __u64 stored_index, __u64 window)
{
	__u64 mask = sluice_low_mask(l->index_bits);
	__u64 behind = (window - stored_index) & mask;

	if (behind == 0)
		return 0;
	if (behind > (mask >> 1))
		return -1;
	return behind == 1 ? 1 : 2;
}

/* The window a word's counts are in force for: now's, or the stored one when
 * it is ahead of now (the clock went backwards). */
SLUICE_INLINE __u64 sluice_window_in_force(const struct sluice_window_limit *l, __u64 stored_index, __u64 window,
					   int age)
{
	return age < 0 ? window + ((stored_index - window) & sluice_low_mask(l->index_bits)) : window;
}

/* ---- fixed window ----------------------------------------------------------------- */

/* Decides a unit cost on counts `in`: 1 admits and *out is the counts after
 * it; 0 refuses and *out is untouched. */
SLUICE_INLINE int sluice_fixed_window_step(const struct sluice_window_limit *l, const struct sluice_window_count *in,
					   __u64 now, __u64 cost, struct sluice_window_count *out,
					   struct sluice_quota *quota)
{
	__u64 window = now / l->window_ns;
	int age = sluice_window_age(l, in->index, window);
	__u64 count = age <= 0 ? in->cur : 0;
	__u64 in_force = sluice_window_in_force(l, in->index, window, age);
	int admit = cost <= l->limit && count <= l->limit - cost;

	if (admit) {
		count += cost;
		out->index = in_force;
		out->prev = 0;
		out->cur = count;
	}
	if (quota) {
		__u64 window_end = (in_force + 1) * l->window_ns;

		quota->remaining = count >= l->limit ? 0 : l->limit - count;
		quota->reset_ns = count ? window_end - now : 0;
		quota->retry_after_ns = admit ? 0 : cost > l->limit ? SLUICE_NEVER : window_end - now;
	}
	return admit;
}

/* ---- sliding window ---------------------------------------------------------------- */

/* ceil((W - elapsed) * 2^16 / W): the share of the previous window still
 * inside the rolling window, rounded so the estimate never comes out low. */
SLUICE_INLINE __u64 sluice_previous_weight(__u64 window_ns, __u64 elapsed)
{
	return (((window_ns - elapsed) << 16) + window_ns - 1) / window_ns;
}

/* The earliest elapsed time in a window at which prev * weight + used <= limit
 * (all << 16 but prev), given that it holds at the window's end. */
SLUICE_INLINE __u64 sluice_elapsed_until_weight(__u64 window_ns, __u64 prev, __u64 room)
{
	/* weight(e) <= target  <=>  e >= W - floor(target * W / 2^16) */
	__u64 target = prev ? room / prev : (1ULL << 16);

	if (target >= (1ULL << 16))
		return 0;
	return window_ns - ((target * window_ns) >> 16);
}

SLUICE_INLINE int sluice_sliding_window_step(const struct sluice_window_limit *l, const struct sluice_window_count *in,
					     __u64 now, __u64 cost, struct sluice_window_count *out,
					     struct sluice_quota *quota)
{
	__u64 window = now / l->window_ns;
	int age = sluice_window_age(l, in->index, window);
	__u64 in_force = sluice_window_in_force(l, in->index, window, age);
	__u64 prev = 0, cur = 0, elapsed = 0, weight, estimate, limit16 = l->limit << 16;
	__u64 start = in_force * l->window_ns;
	int admit;

	if (age <= 0) {
		prev = in->prev;
		cur = in->cur;
	} else if (age == 1) {
		prev = in->cur;
	}
	/* A window ahead of now is read at its start: the previous window at
	 * full weight, the most it can count. */
	if (age >= 0)
		elapsed = now - start;
	weight = sluice_previous_weight(l->window_ns, elapsed);
	estimate = prev * weight + (cur << 16);
	admit = cost <= l->limit && estimate + (cost << 16) <= limit16;
	if (admit) {
		cur += cost;
		estimate += cost << 16;
		out->index = in_force;
		out->prev = prev;
		out->cur = cur;
	}
	if (quota) {
		__u64 used = (cur + cost) << 16;

		quota->remaining = estimate >= limit16 ? 0 : (limit16 - estimate) >> 16;
		quota->reset_ns = cur ? start + 2 * l->window_ns - now : prev ? start + l->window_ns - now : 0;
		if (admit)
			quota->retry_after_ns = 0;
		else if (cost > l->limit)
			quota->retry_after_ns = SLUICE_NEVER;
		else if (used <= limit16) /* later in this window, as prev's weight falls */
			quota->retry_after_ns =
				start + sluice_elapsed_until_weight(l->window_ns, prev, limit16 - used) - now;
		else /* in the next one, where cur becomes prev */
			quota->retry_after_ns = start + l->window_ns +
						sluice_elapsed_until_weight(l->window_ns, cur, limit16 - (cost << 16)) -
						now;
	}
	return admit;
}

SLUICE_INLINE int sluice_window_step(const struct sluice_window_limit *l, const struct sluice_window_count *in,
				     __u64 now, __u64 cost, struct sluice_window_count *out,
				     struct sluice_quota *quota)
{
	if (l->algorithm == SLUICE_ALGORITHM_SLIDING_WINDOW)
		return sluice_sliding_window_step(l, in, now, cost, out, quota);
	return sluice_fixed_window_step(l, in, now, cost, out, quota);
}

/* ---- counts in one word ---------------------------------------------------------------
 * fixed:   index << count_bits | cur
 * sliding: index << 2 * count_bits | prev << count_bits | cur */

SLUICE_INLINE void sluice_window_unpack(const struct sluice_window_limit *l, __u64 word,
					struct sluice_window_count *c)
{
	__u32 bits = l->count_bits;
	__u32 counts = l->algorithm == SLUICE_ALGORITHM_SLIDING_WINDOW ? 2 * bits : bits;

	c->cur = word & sluice_low_mask(bits);
	c->prev = counts > bits ? (word >> bits) & sluice_low_mask(bits) : 0;
	c->index = (word >> counts) & sluice_low_mask(l->index_bits);
}

SLUICE_INLINE __u64 sluice_window_pack(const struct sluice_window_limit *l, const struct sluice_window_count *c)
{
	__u32 bits = l->count_bits;
	__u64 index = c->index & sluice_low_mask(l->index_bits);

	if (l->algorithm == SLUICE_ALGORITHM_SLIDING_WINDOW)
		return (index << (2 * bits)) | (c->prev << bits) | c->cur;
	return (index << bits) | c->cur;
}

/* One admission decision on a shared window word: step, then swap the new
 * word in, again from what the swap found if another CPU got there first. */
SLUICE_INLINE int sluice_window_admit(const struct sluice_window_limit *l, __u64 *word, __u64 now, __u64 cost,
				      struct sluice_quota *quota)
{
	__u64 seen = SLUICE_LOAD64(word);
	int attempt;

	for (attempt = 0; attempt < 16; attempt++) {
		struct sluice_window_count in, out;
		__u64 next, found;

		sluice_window_unpack(l, seen, &in);
		if (!sluice_window_step(l, &in, now, cost, &out, quota))
			return 0;
		next = sluice_window_pack(l, &out);
		if (next == seen)
			return 1;
		found = SLUICE_CAS64(word, seen, next);
		if (found == seen)
			return 1;
		seen = found;
	}
	return 0; /* contended past all reason: refuse rather than spin */
}

/* ---- counts in a source-table entry's 45 bits ------------------------------------------
 * For the per-source level (decide.h). The entry's time field holds when
 * its counts stop mattering, "busy until": the end
 * of the counted window (fixed) or of the window after it (sliding, whose
 * previous count weighs until then), rounded up to 2^C ns, and the C bits
 * below hold the counts (C = count_bits, twice that for sliding). The table
 * reads the field as it reads a TAT (source_table.h): in debt while ahead
 * of now, by at most 2^C ns more than the counts need, and free after. So
 * the table's scan, eviction and survey work unchanged, as long as the limit
 * fits (sluice_entry_window_fits), whose window numbers are read in full
 * (index_bits 64). */

SLUICE_INLINE __u32 sluice_entry_count_bits(const struct sluice_window_limit *l)
{
	return l->algorithm == SLUICE_ALGORITHM_SLIDING_WINDOW ? 2u * l->count_bits : l->count_bits;
}

/* Does a per-source window limit fit an entry? Window numbers are whole
 * (index_bits 64: the entry's time field holds no number), its counts hold
 * the limit (limit < 2^count_bits), rounded window ends stay more than half a
 * window apart (window_ns >= 2^(C + 1)), and the entry is busy at most
 * SLUICE_DEBT_MAX_NS ahead (a window, or two for sliding, plus the rounding).
 * The control plane compiles only such limits; the dataplane checks again. */
SLUICE_INLINE int sluice_entry_window_fits(const struct sluice_window_limit *l)
{
	__u64 windows = l->algorithm == SLUICE_ALGORITHM_SLIDING_WINDOW ? 2 : 1;
	__u32 bits;

	if (l->algorithm != SLUICE_ALGORITHM_FIXED_WINDOW && l->algorithm != SLUICE_ALGORITHM_SLIDING_WINDOW)
		return 0;
	if (l->index_bits != 64 || l->count_bits == 0 || l->count_bits > 32 || l->limit == 0 ||
	    (l->limit >> l->count_bits) != 0)
		return 0;
	bits = sluice_entry_count_bits(l);
	if (bits > 40)
		return 0;
	return l->window_ns >= SLUICE_WINDOW_MIN_NS && l->window_ns >= (2ULL << bits) &&
	       l->window_ns <= (SLUICE_DEBT_MAX_NS - (1ULL << bits)) / windows;
}

/* The time field of counts in window `index`, modulo 2^45. */
SLUICE_INLINE __u64 sluice_entry_window_busy(const struct sluice_window_limit *l, __u64 index)
{
	__u64 grain = sluice_low_mask(sluice_entry_count_bits(l));
	__u64 windows = l->algorithm == SLUICE_ALGORITHM_SLIDING_WINDOW ? 2 : 1;

	return (((index + windows) * l->window_ns + grain) & ~grain) & SLUICE_ENTRY_TAT_MASK;
}

/* An entry's 45 bits at `now` as counts with a full window number. */
SLUICE_INLINE void sluice_entry_window_counts(const struct sluice_window_limit *l, __u64 field, __u64 now,
					      struct sluice_window_count *c)
{
	__u32 bits = sluice_entry_count_bits(l);
	__u64 window = now / l->window_ns;
	__u64 counts = field & sluice_low_mask(bits);
	__u64 busy = field & ~sluice_low_mask(bits) & SLUICE_ENTRY_TAT_MASK;
	__u64 ahead = (field - now) & SLUICE_ENTRY_TAT_MASK;
	__u64 behind = (sluice_entry_window_busy(l, window) - busy) & SLUICE_ENTRY_TAT_MASK;

	c->index = window - 2; /* older than the previous window: counts nothing */
	c->prev = 0;
	c->cur = 0;
	if (ahead == 0 || ahead > SLUICE_DEBT_MAX_NS)
		return; /* free: nothing counts any more */
	if (behind > (SLUICE_ENTRY_TAT_MASK >> 1)) /* ahead of now's: the clock went backwards */
		c->index = window + ((((busy - sluice_entry_window_busy(l, window)) & SLUICE_ENTRY_TAT_MASK) +
				      l->window_ns / 2) / l->window_ns);
	else if (behind < l->window_ns / 2)
		c->index = window;
	else if (behind < l->window_ns + l->window_ns / 2)
		c->index = window - 1;
	if (l->algorithm == SLUICE_ALGORITHM_SLIDING_WINDOW) {
		c->cur = counts & sluice_low_mask(l->count_bits);
		c->prev = counts >> l->count_bits;
	} else {
		c->cur = counts;
	}
}

SLUICE_INLINE __u64 sluice_entry_window_field(const struct sluice_window_limit *l, const struct sluice_window_count *c)
{
	__u64 counts = c->cur;

	if (l->algorithm == SLUICE_ALGORITHM_SLIDING_WINDOW)
		counts |= c->prev << l->count_bits;
	return sluice_entry_window_busy(l, c->index) | counts;
}

/* Decides `cost` on an entry's 45 bits: 1 admits and *next is the field to
 * swap in; 0 refuses. */
SLUICE_INLINE int sluice_entry_window_step(const struct sluice_window_limit *l, __u64 field, __u64 now, __u64 cost,
					   __u64 *next, struct sluice_quota *quota)
{
	struct sluice_window_count in, out;

	sluice_entry_window_counts(l, field, now, &in);
	if (!sluice_window_step(l, &in, now, cost, &out, quota))
		return 0;
	*next = sluice_entry_window_field(l, &out);
	return 1;
}

/* ---- sliding log: the caller holds the log's lock --------------------------------- */

SLUICE_INLINE __u32 sluice_log_limit(const struct sluice_window_limit *l)
{
	return l->limit < SLUICE_LOG_MAX ? (__u32)l->limit : SLUICE_LOG_MAX;
}

/* The ring's slot i (< SLUICE_LOG_MAX already): masked where the BPF
 * verifier sees it, which cannot bound a remainder; the barrier keeps the
 * compiler, which can, from dropping the mask. */
SLUICE_INLINE __u32 sluice_log_slot(__u32 i)
{
#ifdef __bpf__
	asm volatile("" : "+r"(i));
#endif
	return i & (SLUICE_LOG_MAX - 1);
}

/* The ring's newest admission time (0 when empty); the caller holds the lock. */
SLUICE_INLINE __u64 sluice_log_newest(const struct sluice_log *log, __u32 limit, __u32 head, __u32 used)
{
	return used && limit ? log->stamp[sluice_log_slot((head + used + limit - 1) % limit)] : 0;
}

/* Would sluice_log_step admit at `now`? Writes nothing. */
SLUICE_INLINE int sluice_log_admits(const struct sluice_window_limit *l, const struct sluice_log *log, __u64 now)
{
	__u32 limit = sluice_log_limit(l);
	__u32 head = log->head < limit ? log->head : 0;
	__u32 used = log->used < limit ? log->used : limit;
	__u64 newest = sluice_log_newest(log, limit, head, used);

	if (now < newest)
		now = newest;
	return limit > 0 && (used < limit || now - log->stamp[sluice_log_slot(head)] >= l->window_ns);
}

SLUICE_INLINE int sluice_log_step(const struct sluice_window_limit *l, struct sluice_log *log, __u64 now,
				  struct sluice_quota *quota)
{
	__u32 limit = sluice_log_limit(l);
	__u32 head = log->head < limit ? log->head : 0;
	__u32 used = log->used < limit ? log->used : limit;
	__u64 newest = sluice_log_newest(log, limit, head, used);
	__u64 oldest = log->stamp[sluice_log_slot(head)];
	int admit;
	__u32 i;

	/* A clock that went backwards reads as the latest admission: it can
	 * neither shorten an admission's stay nor mint one. */
	if (now < newest)
		now = newest;
	admit = limit > 0 && (used < limit || now - oldest >= l->window_ns);
	if (admit) {
		if (used < limit) {
			log->stamp[sluice_log_slot((head + used) % limit)] = now;
			used++;
		} else {
			log->stamp[sluice_log_slot(head)] = now;
			head = (head + 1) % limit;
		}
		log->head = head;
		log->used = used;
		newest = now;
		oldest = log->stamp[sluice_log_slot(head)];
	}
	if (quota) {
		__u32 inside = 0;

		for (i = 0; i < SLUICE_LOG_MAX; i++)
			if (i < used && now - log->stamp[i] < l->window_ns)
				inside++;
		quota->remaining = limit - inside;
		quota->reset_ns = used && now - newest < l->window_ns ? newest + l->window_ns - now : 0;
		quota->retry_after_ns = admit ? 0 : limit == 0 ? SLUICE_NEVER : oldest + l->window_ns - now;
	}
	return admit;
}

/* ---- a window level's state in full, under its lock -----------------------------------
 * The class aggregate keeps its counts this way (index_bits 64: no wrap, and
 * counts of 64 bits), in its shared bucket, behind the bucket's lock: every
 * CPU decides every packet of the class there, and one lock costs what one
 * compare-and-swap of a shared word would, the cache line's trip between
 * CPUs. State written under another generation is read as empty. */

SLUICE_INLINE void sluice_window_state_claim(const struct sluice_window_limit *l, struct sluice_window_state *s)
{
	if (s->generation == l->generation)
		return;
	s->count.index = 0;
	s->count.prev = 0;
	s->count.cur = 0;
	s->log.head = 0;
	s->log.used = 0;
	s->refuse_until_ns = 0;
	s->generation = l->generation;
}

/* Under a flood nearly every packet is refused, and the lock is most of a
 * window level's cost (sluice-bench decide). So a refusal records when the
 * state could next admit one unit, and until then packets are refused
 * without the lock: read without it, a stale hint only means one lock more,
 * or one refusal the state would have made anyway. A refund clears it. */
SLUICE_INLINE int sluice_window_state_refusing(const struct sluice_window_limit *l,
					       const struct sluice_window_state *s, __u64 now)
{
	return *(volatile const __u32 *)&s->generation == l->generation &&
	       now < *(volatile const __u64 *)&s->refuse_until_ns &&
	       *(volatile const __u64 *)&s->refused_limit == l->limit;
}

SLUICE_INLINE void sluice_window_state_hint(const struct sluice_window_limit *l, struct sluice_window_state *s,
					    __u64 now)
{
	struct sluice_window_count next;
	struct sluice_quota quota;

	if (l->algorithm == SLUICE_ALGORITHM_SLIDING_LOG) {
		__u32 limit = sluice_log_limit(l);

		/* Full: room again when the oldest leaves, a window after it came
		 * (whatever the clock read: the log decides at its newest time or
		 * later, and refused, that is before then). */
		if (limit && s->log.used >= limit && s->log.head < limit) {
			s->refuse_until_ns = s->log.stamp[sluice_log_slot(s->log.head)] + l->window_ns;
			s->refused_limit = l->limit;
		}
		return;
	}
	if (sluice_window_step(l, &s->count, now, 1, &next, &quota) || quota.retry_after_ns == SLUICE_NEVER)
		return;
	s->refuse_until_ns = now + quota.retry_after_ns;
	s->refused_limit = l->limit;
}

/* Decide `cost` units at `now`: commit 0 asks and writes nothing (but the
 * emptying of stale state); commit 1 admits for real. 1: admitted. */
SLUICE_INLINE int sluice_window_state_decide(const struct sluice_window_limit *l, struct sluice_window_state *s,
					     __u64 now, __u64 cost, int commit, struct sluice_quota *quota)
{
	struct sluice_window_count next;
	int admit;

	sluice_window_state_claim(l, s);
	if (l->algorithm == SLUICE_ALGORITHM_SLIDING_LOG) {
		if (!commit && !quota)
			return sluice_log_admits(l, &s->log, now);
		admit = sluice_log_step(l, &s->log, now, quota);
		if (!admit && commit)
			sluice_window_state_hint(l, s, now);
		return admit;
	}
	admit = sluice_window_step(l, &s->count, now, cost, &next, quota);
	if (admit && commit)
		s->count = next;
	else if (!admit && commit)
		sluice_window_state_hint(l, s, now);
	return admit;
}

/* Take back `cost` units admitted at `now` by sluice_window_state_decide
 * (when a level below refused the packet after all). Exact unless the clock
 * went backwards in between or, for the log, another admission came after
 * this one: then nothing is taken back, and the level holds the units until
 * they leave the window, refusing a little more than it must, never less. */
SLUICE_INLINE void sluice_window_state_refund(const struct sluice_window_limit *l, struct sluice_window_state *s,
					      __u64 now, __u64 cost)
{
	__u32 limit = sluice_log_limit(l);
	__u64 window;

	if (s->generation != l->generation)
		return;
	s->refuse_until_ns = 0;
	if (l->algorithm == SLUICE_ALGORITHM_SLIDING_LOG) {
		if (s->log.head < limit && s->log.used && s->log.used <= limit &&
		    sluice_log_newest(&s->log, limit, s->log.head, s->log.used) == now)
			s->log.used--;
		return;
	}
	window = now / l->window_ns;
	if (s->count.index == window)
		s->count.cur -= cost < s->count.cur ? cost : s->count.cur;
	else if (s->count.index == window + 1 && l->algorithm == SLUICE_ALGORITHM_SLIDING_WINDOW)
		s->count.prev -= cost < s->count.prev ? cost : s->count.prev;
}

/* ---- GCRA's answer, from the source table's debt ---------------------------------- */

/* debt_ns: how far ahead of schedule the source is after the decision;
 * unit_ns: the schedule one unit costs; cost_ns: the refused packet's. */
SLUICE_INLINE void sluice_gcra_quota(__u64 debt_ns, __u64 cost_ns, __u64 tolerance_ns, __u64 unit_ns, int admitted,
				     struct sluice_quota *quota)
{
	quota->remaining = debt_ns >= tolerance_ns || !unit_ns ? 0 : (tolerance_ns - debt_ns) / unit_ns;
	quota->reset_ns = debt_ns;
	quota->retry_after_ns = admitted ? 0 : cost_ns > tolerance_ns ? SLUICE_NEVER : debt_ns + cost_ns - tolerance_ns;
}

/* GCRA on a whole theoretical arrival time, for state kept outside the
 * source table (request-level counters): admits `units` at `now` iff the
 * debt after them stays within the tolerance; then *next is the new TAT.
 * A refusal leaves *next untouched. A TAT behind now is no debt. */
SLUICE_INLINE int sluice_gcra_step(const struct sluice_gcra_limit *l, __u64 tat, __u64 now, __u64 units, __u64 *next,
				   struct sluice_quota *quota)
{
	__u64 debt = tat > now ? tat - now : 0;
	__u64 cost_ns = sluice_gcra_units_ns(l, units);
	int admit = cost_ns <= l->tolerance_ns && debt <= l->tolerance_ns - cost_ns;

	if (admit) {
		debt += cost_ns;
		*next = now + debt;
	}
	if (quota)
		sluice_gcra_quota(debt, cost_ns, l->tolerance_ns, sluice_gcra_units_ns(l, 1), admit, quota);
	return admit;
}

#endif /* SLUICE_WINDOW_H */
