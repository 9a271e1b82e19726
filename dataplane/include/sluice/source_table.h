/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-source state: GCRA over a fixed-memory table of one-word entries,
 * shared by every CPU (BPF) or worker (DPDK) with no lock. The layout is in
 * abi.h; this file is its arithmetic and its protocol, once for all backends.
 *
 * GCRA. An entry holds the source's theoretical arrival time (TAT): when its
 * bucket will be full again. debt = TAT - now is how far ahead of schedule
 * the source is; a packet of cost c (ns of schedule) is admitted iff
 * debt + c <= tolerance, and then TAT = max(TAT, now) + c. This is the token
 * bucket in its virtual-scheduling form (same rate, same burst, same
 * admitted sequence, with costs rounded up to whole ns), so in any window T
 * a source is admitted at most burst + rate*T: exactly, across any number of
 * CPUs, because every admission is one compare-and-swap of the one word that
 * holds the source's state. A refusal writes nothing, so under a flood in
 * which nearly every packet is refused no cache line is written. A clock
 * that goes backwards makes the debt look larger: it can neither mint
 * tokens nor move TAT back.
 *
 * Entries free themselves. TAT <= now is a full bucket, the same as no entry,
 * so such an entry may be taken by any new source: the table holds only
 * sources in debt, about (admitted packets per second) / (per-source rate)
 * of them, and needs no LRU, no deletes and no idle collection. A free entry
 * keeps its tag until it is taken, so a source seen recently is still known
 * (the class's new-source budget applies to the others); new sources take
 * the free entry unused longest.
 *
 * Two sets per source. A source's home set is one keyed hash away; its
 * second set is the home set moved by an offset drawn from its tag (as a
 * cuckoo filter finds a fingerprint's other bucket), so sources of one tag
 * that share a set share both: the creator's look through both sets (below)
 * then sees every entry of its tag that any of them could be charged on,
 * and a tag collision can only make two sources share one bucket, never
 * give one a second. A source goes to its home set while that has a free
 * entry.
 * 8 entries per set and one choice hold a table to about 34% of its entries
 * before 0.1% of new sources find no free entry; with a second set, first
 * fit, it is 56% (sluice-bench memory measures it on the real table). A
 * known source is nearly always found in its home set: one cache line per
 * packet. When both sets hold only
 * sources in debt, the class's on_table_full decides; `evict` takes the
 * entry closest to free of the 16, never the one deepest in debt.
 *
 * The keyed hash. Pair-multiply-shift (universal for a random key) over the
 * key's 32-bit words, then murmur3's 64-bit finaliser (a bijection) to mix
 * every bit: without the key, nobody can pick sources that share a set.
 *
 * Time modulo 2^45. TAT is kept in 45 bits, read relative to now: a TAT up to
 * SLUICE_DEBT_MAX_NS ahead is debt, anything else is free. An entry nobody
 * touches for 8.5 h would come round to look in debt again, so a free entry
 * unused for 2^43 ns (2.4 h) is emptied when a new source's scan meets it,
 * and by the control plane's survey of the table every few seconds
 * (survey_source_table in control/lib/dataplane.h).
 *
 * Policy changes. Debt is time, and time is worth more packets under a lower
 * rate: each entry records the generation of its class's per-source limit
 * that wrote it, and a source written under the limit just replaced has its
 * debt converted to the same tokens under the new one when it is next seen
 * (or, when the new limit counts another way, previous_fresh, starts fresh).
 * Any other generation counts as an empty bucket while it is in debt: an
 * older one, which only two changes within one burst time leave in debt,
 * and the next one, which a decision still running on the replaced limit
 * (an XDP packet, a DPDK burst) meets once the new limit has written; read
 * as fresh, it would undo the new limit's debt at every such decision. With
 * two bits, four changes within one burst time make a generation look
 * current again, and its debt is then read unconverted.
 *
 * Concurrency, for the backends' atomics: SLUICE_CAS64 is a full barrier
 * (BPF_ATOMIC cmpxchg, __sync in C); SLUICE_LOAD64 and SLUICE_STORE64 are
 * single-copy atomic. Charging an existing entry is one compare-and-swap of
 * the word that was read: tag and TAT change together, and the word a CPU
 * read can never come back once replaced (TATs only grow, modulo 2^45), so a
 * successful swap always charges the source it read. Creating an entry
 * could race: two CPUs meeting a source for the first time could each take
 * a free entry and admit a full burst twice. So a new entry is first written
 * pending; its creator then looks through both sets again, and backs out
 * (empties its entry and starts over) if any other entry carries the tag.
 * Two creators each swap their own entry and then read the other's, each
 * swap a full barrier: at least one sees the other and backs out, so at
 * most one entry of a source is ever confirmed. Other CPUs neither charge
 * nor take a pending entry; one of its own source looks again, a few times,
 * and counts the packet contended if it stays pending.
 */
#ifndef SLUICE_SOURCE_TABLE_H
#define SLUICE_SOURCE_TABLE_H

#include "abi.h"

#ifndef SLUICE_CAS64
#define SLUICE_CAS64(ptr, old, new) __sync_val_compare_and_swap((ptr), (old), (new))
#endif

/* Where sluice_source_find_known found a source, as the backend wants it
 * seen: the BPF program hides the constant from its verifier, so the
 * sixteen ways out of the loop meet as one state. */
#ifndef SLUICE_FOUND_INDEX
#define SLUICE_FOUND_INDEX(i) (i)
#endif

/* A free entry unused this long is emptied when a scan meets it. */
#define SLUICE_STALE_NS (1ULL << 43)
/* How often a decision looks again at a source whose entry is busy. */
#define SLUICE_SOURCE_ATTEMPTS 8

/* ---- the keyed hash -------------------------------------------------------------- */

SLUICE_INLINE __u64 sluice_mix64(__u64 h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

SLUICE_INLINE __u64 sluice_source_hash(const struct sluice_source_key *key, const struct sluice_hash_key *k)
{
	__u32 w[6];

	w[0] = key->class_id ^ ((__u32)key->family << 24);
	__builtin_memcpy(&w[1], key->addr, 16);
	w[5] = 0;
	return sluice_mix64((k->word[0] + w[0]) * (k->word[1] + w[1]) + (k->word[2] + w[2]) * (k->word[3] + w[3]) +
			    (k->word[4] + w[4]) * (k->word[5] + w[5]));
}

/* The source's tag, in place in an entry word. */
SLUICE_INLINE __u64 sluice_source_tag(__u64 hash)
{
	__u64 tag = hash & SLUICE_ENTRY_TAG_MASK;

	return tag ? tag : 1ULL << SLUICE_ENTRY_TAG_SHIFT;
}

/* Its two sets in a table of mask + 1 sets (a power of two, at least 2). */
SLUICE_INLINE __u32 sluice_source_home(__u64 hash, __u32 mask)
{
	return (__u32)hash & mask;
}

/* The other set of a source of `tag` one of whose sets is `set`: `set` moved
 * by an odd offset drawn from the tag alone, so the pairing is symmetric and
 * every source of one tag that has a set in common with another has both. */
SLUICE_INLINE __u32 sluice_source_other(__u32 set, __u64 tag, __u32 mask)
{
	return set ^ (((__u32)sluice_mix64(tag) & mask) | 1u);
}

SLUICE_INLINE __u32 sluice_source_second(__u64 hash, __u32 mask)
{
	return sluice_source_other(sluice_source_home(hash, mask), sluice_source_tag(hash), mask);
}

/* ---- GCRA ---------------------------------------------------------------------- */

/* The generation of its class's per-source limit that wrote an entry. */
SLUICE_INLINE __u32 sluice_entry_generation(__u64 word)
{
	return (__u32)((word & SLUICE_ENTRY_GENERATION_MASK) >> SLUICE_ENTRY_GENERATION_SHIFT);
}

/* ns of schedule a frame of frame_len bytes costs, rounded up; 0 for a frame
 * the level does not count (unit tcp_syn, and not a SYN). */
SLUICE_INLINE __u64 sluice_source_cost_ns(const struct sluice_gcra_limit *limit, __u32 frame_len, __u8 tcp_syn)
{
	return sluice_gcra_units_ns(limit, sluice_frame_units(limit->unit, frame_len, tcp_syn));
}

/* x * scale / 2^32 (scale in 32.32 fixed point), rounded down, at most cap
 * (<= 2^42, as x is): no 128-bit product, which BPF does not have. */
SLUICE_INLINE __u64 sluice_scale_capped(__u64 x, __u64 scale, __u64 cap)
{
	__u64 whole = scale >> 32, part = scale & 0xffffffffULL, product;

	if ((x >> 21) * whole > (cap >> 21))
		return cap;
	product = x * whole + (x >> 32) * part + (((x & 0xffffffffULL) * part) >> 32);
	return product < cap ? product : cap;
}

/* How far a source is ahead of its schedule under `limit`, given its entry
 * `word` and its `debt` under the limit that wrote it: the same tokens where
 * that was the limit `limit` replaced (a lower rate or a larger burst is no
 * refill; none where it counted another way, previous_fresh), an empty
 * bucket where it was any other. */
SLUICE_INLINE __u64 sluice_source_debt_now(const struct sluice_source_limit *limit, __u64 word, __u64 debt)
{
	__u64 tolerance = limit->current.tolerance_ns, then = limit->previous_tolerance_ns;
	__u32 written = sluice_entry_generation(word);

	if (!debt || written == limit->generation)
		return debt;
	/* Older, or the limit replacing this one (a decision still on the old
	 * policy slot meets what the new one wrote): an empty bucket. */
	if (written != ((limit->generation - 1u) & 3u))
		return tolerance;
	if (limit->previous_fresh)
		return 0; /* another algorithm's counts: no debt in this one's terms */
	if (!then)
		return tolerance;
	/* In the penalty box under the limit before: what is left of it stays. */
	if (debt > then + SLUICE_PENALTY_MARGIN_NS)
		return debt - then < SLUICE_DEBT_MAX_NS - tolerance ? tolerance + (debt - then) : SLUICE_DEBT_MAX_NS;
	/* Room left then (tokens times their old cost), in today's costs. */
	return tolerance - sluice_scale_capped(then - (debt < then ? debt : then), limit->previous_scale, tolerance);
}

/* How far an entry's source is ahead of its schedule at `now`; 0: free. */
SLUICE_INLINE __u64 sluice_entry_debt(__u64 word, __u64 now)
{
	__u64 ahead = (word - now) & SLUICE_ENTRY_TAT_MASK;

	if (!(word & SLUICE_ENTRY_TAG_MASK) || ahead > SLUICE_DEBT_MAX_NS)
		return 0;
	return ahead;
}

/* How long a free entry has been free (unused) at `now`. */
SLUICE_INLINE __u64 sluice_entry_free_for(__u64 word, __u64 now)
{
	return (now - word) & SLUICE_ENTRY_TAT_MASK;
}

/* The word of an entry of `tag`, written by limit `generation`, whose time
 * field is `field` (a TAT, or window counts: window.h). */
SLUICE_INLINE __u64 sluice_entry_word(__u64 tag, __u32 generation, __u64 field)
{
	return tag | ((__u64)(generation & 3u) << SLUICE_ENTRY_GENERATION_SHIFT) | (field & SLUICE_ENTRY_TAT_MASK);
}

/* ---- finding a source -------------------------------------------------------------- */

/* The per-source level of one packet. */
struct sluice_source_ref {
	const struct sluice_source_limit *limit; /* NULL or !enabled: no per-source limit */
	struct sluice_source_set *home, *second;
	__u32 home_index, second_index; /* where home and second are in the table */
	__u64 tag;
	__u8 on_table_full; /* enum sluice_table_full */
	__u8 penalty;       /* the class has a penalty box (decide.h) */
};

/* Entries of both sets are numbered 0..15, the home set's first. */
#define SLUICE_SOURCE_CANDIDATES (2 * SLUICE_SET_WAYS)

/* What a scan of both sets found. */
struct sluice_source_look {
	__u32 index;  /* the source's entry; if !found, where a new one would go
		       * (SLUICE_SOURCE_CANDIDATES: nowhere, every entry is pending) */
	__u8 found;   /* the source has an entry (in debt or free) */
	__u8 pending; /* found, but another CPU is still creating it */
	__u8 evicts;  /* !found and both sets are in debt: `index` is the one closest to free */
	__u8 _pad;
	__u64 seen;   /* that entry's word when judged: a swap expects it */
	union {       /* one word: the BPF program's stack has no room for two */
		__u64 debt; /* found: how far ahead the source is; 0: a full bucket */
		__u64 next; /* once a check admits: the time field the charge writes (decide.h) */
	};
};

SLUICE_INLINE __u64 *sluice_set_entry(const struct sluice_source_ref *src, __u32 index)
{
	struct sluice_source_set *set = index < SLUICE_SET_WAYS ? src->home : src->second;

	return &set->entry[index & (SLUICE_SET_WAYS - 1)];
}

/* 1 if x is not 0, else 0; no branch. */
SLUICE_INLINE __u64 sluice_nonzero(__u64 x)
{
	return (x | (0 - x)) >> 63;
}

/*
 * Scans both sets for the source, then (if it has no entry) for where a new
 * one would go, best first: a free entry of the home set, unused longest (an
 * empty one beats all), then one of the second set, then the entry in debt
 * closest to free; pending entries are never taken. Read-only but for
 * emptying stale entries.
 *
 * Written for the BPF verifier, whose work multiplies with every branch
 * whose outcome it can compute: one loop per question, and the ranking in
 * arithmetic on 0/1 values rather than in branches.
 */
SLUICE_INLINE void sluice_source_find(const struct sluice_source_ref *src, __u64 now, struct sluice_source_look *out)
{
	__u64 word, used, pending, ahead, in_debt, age, stale, cleaned, score, *entry;
	__u64 best_score = 0, best_word = 0;
	__u32 i, best = SLUICE_SOURCE_CANDIDATES;

	out->found = 0;
	out->pending = 0;
	out->evicts = 0;
	out->debt = 0;
	for (i = 0; i < SLUICE_SOURCE_CANDIDATES; i++) {
		word = SLUICE_LOAD64(sluice_set_entry(src, i));
		if (word && (word & SLUICE_ENTRY_TAG_MASK) == src->tag) {
			out->index = i;
			out->seen = word;
			out->found = 1;
			out->pending = (word & SLUICE_ENTRY_PENDING) != 0;
			out->debt = sluice_entry_debt(word, now);
			return;
		}
	}
	for (i = 0; i < SLUICE_SOURCE_CANDIDATES; i++) {
		entry = sluice_set_entry(src, i);
		word = SLUICE_LOAD64(entry);
		used = sluice_nonzero(word & SLUICE_ENTRY_TAG_MASK);
		pending = word >> 63;
		ahead = (word - now) & SLUICE_ENTRY_TAT_MASK;
		in_debt = used & sluice_nonzero(ahead) & (((SLUICE_DEBT_MAX_NS - ahead) >> 63) ^ 1);
		age = (now - word) & SLUICE_ENTRY_TAT_MASK;
		stale = used & (1 - pending) & (1 - in_debt) & (((age - SLUICE_STALE_NS) >> 63) ^ 1);
		cleaned = 0;
		if (stale)
			cleaned = 1 - sluice_nonzero(SLUICE_CAS64(entry, word, 0) ^ word);
		used &= 1 - cleaned;
		word *= 1 - cleaned;
		age = used * age + (1 - used) * (1ULL << 59);
		score = (1 - pending) * (in_debt * ((1ULL << 60) + SLUICE_DEBT_MAX_NS - ahead) +
					 (1 - in_debt) * (((i < SLUICE_SET_WAYS ? 3ULL : 2ULL) << 60) + age));
		if (score > best_score) {
			best_score = score;
			best_word = word;
			best = i;
		}
	}
	/* `seen` is the word judged here: if it changed since (another source
	 * took it, or began creating itself there), the swap fails. */
	out->index = best;
	out->seen = best_word;
	out->evicts = best_score < 2ULL << 60;
}

/* The common case, without looking for where a new entry would go: the
 * source's entry, if it has one that nobody is creating. 0: it has none, or
 * it is pending; sluice_source_find then says which. */
SLUICE_INLINE int sluice_source_find_known(const struct sluice_source_ref *src, __u64 now,
					   struct sluice_source_look *out)
{
	__u64 word;
	__u32 i;

	for (i = 0; i < SLUICE_SOURCE_CANDIDATES; i++) {
		word = SLUICE_LOAD64(sluice_set_entry(src, i));
		if (word && (word & SLUICE_ENTRY_TAG_MASK) == src->tag) {
			if (word & SLUICE_ENTRY_PENDING)
				return 0;
			out->index = SLUICE_FOUND_INDEX(i);
			out->seen = word;
			out->found = 1;
			out->pending = 0;
			out->evicts = 0;
			out->debt = sluice_entry_debt(word, now);
			return 1;
		}
	}
	return 0;
}

/* Does any entry of both sets but the one at `mine` carry the source's tag? */
SLUICE_INLINE int sluice_source_duplicated(const struct sluice_source_ref *src, __u32 mine)
{
	__u64 word;
	__u32 i;

	for (i = 0; i < SLUICE_SOURCE_CANDIDATES; i++) {
		word = SLUICE_LOAD64(sluice_set_entry(src, i));
		if (i != mine && word && (word & SLUICE_ENTRY_TAG_MASK) == src->tag)
			return 1;
	}
	return 0;
}

/* Charging a source that has an entry: one compare-and-swap. 1 when charged;
 * 0 when another CPU changed the entry first, and the caller looks again. */
SLUICE_INLINE int sluice_source_charge_known(const struct sluice_source_ref *src,
					     const struct sluice_source_look *look)
{
	__u64 word = sluice_entry_word(src->tag, src->limit->generation, look->next);

	return SLUICE_CAS64(sluice_set_entry(src, look->index), look->seen, word) == look->seen;
}

/*
 * Writes the time field the check admitted with (look->next) to the source
 * `look` found, or creates its entry where `look` says. 1 when charged; 0
 * when another CPU changed the entry first or is creating the same source,
 * and the caller looks again.
 */
SLUICE_INLINE int sluice_source_charge(const struct sluice_source_ref *src, const struct sluice_source_look *look)
{
	__u64 word, *entry;

	if (look->found)
		return sluice_source_charge_known(src, look);
	word = sluice_entry_word(src->tag, src->limit->generation, look->next);
	entry = sluice_set_entry(src, look->index);
	if (SLUICE_CAS64(entry, look->seen, word | SLUICE_ENTRY_PENDING) != look->seen)
		return 0;
	SLUICE_FULL_FENCE();
	if (sluice_source_duplicated(src, look->index)) {
		/* Another CPU is creating this source too: let it (or let us
		 * both start over). What the entry held is gone: an eviction. */
		SLUICE_STORE64(entry, 0);
		return 0;
	}
	SLUICE_STORE64(entry, word);
	return 1;
}

#endif /* SLUICE_SOURCE_TABLE_H */
