/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Layer: the core (dataplane/include/sluice/), the bottom of every build.
 * Its headers include each other, linux/types.h and linux/bpf.h only: they
 * compile into the BPF program as well as into host code.
 *
 * Every structure that crosses between user space and the kernel (or the DPDK
 * workers), in one place. Included by the BPF object, the DPDK workers, the
 * control library and the tests: nothing here may depend on either side.
 *
 * Rules: fixed-width types only, explicit padding, every multi-byte field in
 * host byte order unless its comment says "network order", and a static check
 * on the size and the key offsets of every struct.
 */
#ifndef SLUICE_ABI_H
#define SLUICE_ABI_H

#include <linux/types.h>
#include <linux/bpf.h> /* struct bpf_spin_lock: the verifier finds it by name in BTF */

#ifdef __cplusplus
#define SLUICE_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define SLUICE_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

#define SLUICE_INLINE static inline __attribute__((always_inline))

/* Shared 64-bit words that CPUs read and write without a lock. Clang's BPF
 * backend has no __atomic loads; an aligned 64-bit access is single-copy
 * atomic there, and BPF's atomic instructions are fully ordered. */
#ifdef __bpf__
#define SLUICE_LOAD64(ptr) (*(volatile const __u64 *)(ptr))
#define SLUICE_STORE64(ptr, value) (*(volatile __u64 *)(ptr) = (value))
#define SLUICE_FULL_FENCE() ((void)0) /* BPF atomics are fully ordered */
#else /* a host test may define its own, to pause before each shared access */
#ifndef SLUICE_LOAD64
#define SLUICE_LOAD64(ptr) __atomic_load_n((ptr), __ATOMIC_RELAXED)
#endif
#ifndef SLUICE_STORE64
#define SLUICE_STORE64(ptr, value) __atomic_store_n((ptr), (value), __ATOMIC_RELAXED)
#endif
#ifndef SLUICE_FULL_FENCE
#define SLUICE_FULL_FENCE() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#endif
#endif

/* Bumped on any change to a struct below: a daemon refuses pinned maps whose
 * ABI version differs instead of reinterpreting them. */
#define SLUICE_ABI_VERSION 10

/* ---- units and limits ------------------------------------------------------
 * Tokens are kept in nano-units: one packet (or one byte) is 10^9 nano-units,
 * so a rate of R units per second refills exactly R nano-units per ns and the
 * fast path never divides. The maxima keep every product inside 64 bits:
 * tokens + refill <= 2 * BURST_MAX * 10^9 + RATE_MAX < 2^64. */
#define SLUICE_NANO 1000000000ULL
#define SLUICE_RATE_MAX 100000000000ULL /* 10^11 units/s: 800 Gbit/s in bytes */
#define SLUICE_BURST_MAX 4000000000ULL  /* 4 * 10^9 units */
#define SLUICE_COST_MAX 65535U          /* largest frame charged in byte mode */

SLUICE_STATIC_ASSERT(SLUICE_BURST_MAX * SLUICE_NANO <= (0xffffffffffffffffULL - SLUICE_RATE_MAX) / 2,
                     "tokens plus a full refill must fit in 64 bits");

/* ---- outcomes: one list, expanded for BPF, C++, CLI and metrics -------------
 * X(ID, label, help). The label is the metric/CLI spelling (control/lib/labels.h);
 * never reorder: the position is the counter index in pinned maps. SHAPED
 * (pass), QUEUE_FULL and DEADLINE (drop) come only from sluice-dpdk's shaping
 * queue. */
#define SLUICE_VERDICT_LIST(X)                                                 \
	X(PASS, "pass", "packet handed to the kernel stack")                   \
	X(DROP, "drop", "packet dropped at the driver")                        \
	X(WOULD_DROP, "would_drop",                                            \
	  "packet passed: its class is in shadow and would have dropped it")

#define SLUICE_REASON_LIST(X)                                                  \
	X(ADMITTED, "admitted", "within every configured limit")               \
	X(ALLOWED, "allowed", "class action is pass: no limit applies")        \
	X(SOURCE, "source", "source was a whole burst ahead of its schedule")  \
	X(CLASS, "class", "class aggregate bucket was empty")                  \
	X(GLOBAL, "global", "global ceiling bucket was empty")                 \
	X(DENY, "deny", "class action is drop")                                \
	X(TABLE_FULL, "table_full", "new source found both its sets in debt")  \
	X(NON_IP, "non_ip", "frame is neither IPv4 nor IPv6")                  \
	X(MALFORMED, "malformed", "truncated or invalid header")               \
	X(SHAPED, "shaped", "sent after waiting in the class's shaping queue") \
	X(QUEUE_FULL, "queue_full", "the class's shaping queue was full")      \
	X(DEADLINE, "deadline",                                                \
	  "queueing delay would pass the class's max_delay_ms")                \
	X(NEW_SOURCE, "new_source",                                            \
	  "the class's budget for sources without state was empty")             \
	X(FLEET, "fleet", "the class's fleet quota: no credit leased for this node") \
	X(PENALTY, "penalty",                                                  \
	  "source is in the penalty box: it ran far over its per-source limit") \
	X(BAN, "ban", "source is in a prefix an operator banned (sluicectl ban)")

enum sluice_verdict {
#define SLUICE_X(id, label, help) SLUICE_VERDICT_##id,
	SLUICE_VERDICT_LIST(SLUICE_X)
#undef SLUICE_X
	SLUICE_VERDICT_COUNT
};

enum sluice_reason {
#define SLUICE_X(id, label, help) SLUICE_REASON_##id,
	SLUICE_REASON_LIST(SLUICE_X)
#undef SLUICE_X
	SLUICE_REASON_COUNT
};

/* The levels a limited packet passes, in the order they are checked.
 * NEW_SOURCE applies only to packets whose source has no entry in the source
 * table. */
enum sluice_level {
	SLUICE_LEVEL_SOURCE = 0,
	SLUICE_LEVEL_NEW_SOURCE = 1,
	SLUICE_LEVEL_CLASS = 2,
	SLUICE_LEVEL_GLOBAL = 3,
	SLUICE_LEVEL_FLEET = 4,
	SLUICE_LEVEL_COUNT = 5,
	SLUICE_LEVEL_NONE = 0xff, /* no level refused */
};

enum sluice_unit {
	SLUICE_UNIT_PACKETS = 0, /* every frame costs 1 */
	SLUICE_UNIT_BYTES = 1,   /* a frame costs its length on the wire */
	SLUICE_UNIT_TCP_SYN = 2, /* a TCP SYN without ACK (a connection attempt) costs 1;
	                          * every other frame passes the level uncharged */
};

/* What a frame costs at a level of `unit`, in units: 0 passes it uncharged.
 * tcp_syn: the frame opens a TCP connection (struct sluice_packet). */
SLUICE_INLINE __u64 sluice_frame_units(__u8 unit, __u32 frame_len, __u8 tcp_syn)
{
	if (unit == SLUICE_UNIT_BYTES)
		return frame_len;
	if (unit == SLUICE_UNIT_TCP_SYN)
		return tcp_syn ? 1 : 0;
	return 1;
}

enum sluice_accuracy {
	SLUICE_ACCURACY_SPLIT = 0, /* each CPU owns rate/N and burst/N */
	SLUICE_ACCURACY_LEASE = 1, /* shared bucket, CPUs spend leased tokens */
};

enum sluice_action {
	SLUICE_ACTION_LIMIT = 0,
	SLUICE_ACTION_PASS = 1,
	SLUICE_ACTION_DROP = 2,
};

/* What a new source gets when both of its sets hold only sources in debt. */
enum sluice_table_full {
	SLUICE_TABLE_FULL_EVICT = 0,  /* take the entry closest to free (never the deepest in debt) */
	SLUICE_TABLE_FULL_OPEN = 1,   /* pass the packet untracked, reason table_full */
	SLUICE_TABLE_FULL_CLOSED = 2, /* drop the packet, reason table_full */
};

/* How a level counts (window.h). gcra is the token bucket of source_table.h
 * and bucket.h; the window algorithms count `limit` units per `window_ns`. */
enum sluice_algorithm {
	SLUICE_ALGORITHM_GCRA = 0,
	SLUICE_ALGORITHM_FIXED_WINDOW = 1,   /* limit per aligned window */
	SLUICE_ALGORITHM_SLIDING_WINDOW = 2, /* counter approximation of a rolling window */
	SLUICE_ALGORITHM_SLIDING_LOG = 3,    /* exact rolling window: the accepted times */
	SLUICE_ALGORITHM_COUNT,
};

/* A window algorithm's limit, precomputed by the control plane. Its state
 * is either one word (struct sluice_window_count packed: the window number
 * modulo 2^index_bits above one count (fixed) or two (sliding: previous,
 * current) of count_bits each), swapped in with one compare-and-swap, or
 * that struct in full under a lock (index_bits 64: no wrap; the class
 * aggregate keeps it so). The control plane keeps limit < 2^count_bits,
 * limit < 2^47 and window_ns within SLUICE_WINDOW_MIN_NS..SLUICE_WINDOW_MAX_NS.
 * generation: the state belongs to the limit with the same one; any other
 * state is stale (another algorithm's, or another window's) and is read as
 * empty: the control plane changes it whenever the algorithm or the window
 * changes, so a new version starts such a class from fresh state. */
struct sluice_window_limit {
	__u64 window_ns;
	__u64 limit;      /* units admitted per window */
	__u8 algorithm;   /* enum sluice_algorithm; GCRA: the level is a token bucket */
	__u8 index_bits;  /* 2..32 packed, 64 in full */
	__u8 count_bits;  /* 1..32 packed, 64 in full */
	__u8 _pad;
	__u32 generation;
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_window_limit) == 24, "sluice_window_limit layout");
SLUICE_STATIC_ASSERT(__builtin_offsetof(struct sluice_window_limit, generation) == 20,
                     "sluice_window_limit.generation offset");

#define SLUICE_WINDOW_MIN_NS 1000000ULL             /* 1 ms */
#define SLUICE_WINDOW_MAX_NS (86400ULL * SLUICE_NANO) /* one day */

/* A fixed or sliding window's counts: the window they are for, the units
 * admitted in it (cur) and in the one before (prev; sliding only). */
struct sluice_window_count {
	__u64 index;
	__u64 prev;
	__u64 cur;
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_window_count) == 24, "sluice_window_count layout");

/* sliding_log keeps the times of the last `limit` admissions; one log holds
 * at most this many, so a larger limit needs another algorithm. */
#define SLUICE_LOG_MAX 32U
struct sluice_log {
	__u64 stamp[SLUICE_LOG_MAX]; /* admission times, a ring of `limit` slots */
	__u32 head;                  /* the oldest */
	__u32 used;                  /* slots written, up to limit */
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_log) == 8 * SLUICE_LOG_MAX + 8, "sluice_log layout");

/* A window level's state in full, under its shared bucket's lock. */
struct sluice_window_state {
	struct sluice_window_count count; /* fixed_window, sliding_window */
	struct sluice_log log;            /* sliding_log */
	__u32 generation;                 /* of the limit that wrote it */
	__u32 _pad;
	__u64 refuse_until_ns;            /* written under the lock, read without it: the
	                                   * window has no room for one unit until then */
	__u64 refused_limit;              /* under this limit (a new one may have room) */
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_window_state) == 312, "sluice_window_state layout");
SLUICE_STATIC_ASSERT(__builtin_offsetof(struct sluice_window_state, generation) == 288,
                     "sluice_window_state.generation offset");

/* ---- bucket state ----------------------------------------------------------
 * The precomputed form of one human limit. Only the control plane builds it
 * (control/lib/rate_limits.h), after validating against the maxima above. */
struct sluice_limit {
	__u64 rate_per_s; /* refill, units per second == nano-units per ns */
	__u64 burst_nano; /* capacity, burst * 10^9 */
	__u64 fill_ns;    /* ceil(burst_nano / rate_per_s): empty-to-full time,
	                   * caps elapsed so elapsed * rate cannot overflow */
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_limit) == 24, "sluice_limit layout");

/* Everything one bucket level (new-source budget, class aggregate, global
 * ceiling) needs to decide. */
struct sluice_level_limit {
	struct sluice_limit full;  /* the level's limit; lease mode refills the shared bucket with it */
	struct sluice_limit share; /* split mode: this CPU's share, rate/N and burst/N */
	__u64 lease_nano;          /* lease mode: tokens a CPU takes at once (L) */
	__u64 lease_ttl_ns;        /* lease mode: unspent leased tokens go back after this */
	__u64 min_cost_nano;       /* lease mode: the smallest packet's cost; after the shared
	                            * bucket could not pay, CPUs refuse without its lock until
	                            * it could pay this much */
	__u8 enabled;              /* 0: this level does not limit */
	__u8 unit;                 /* enum sluice_unit */
	__u8 accuracy;             /* enum sluice_accuracy */
	__u8 _pad[5];
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_level_limit) == 80, "sluice_level_limit layout");
SLUICE_STATIC_ASSERT(__builtin_offsetof(struct sluice_level_limit, lease_nano) == 48,
                     "sluice_level_limit.lease_nano offset");

/* One GCRA limit: a source's state is how far ahead of its schedule it is, in
 * ns (source_table.h); each packet moves it on by its cost, and it may be at
 * most tolerance_ns ahead. Costs are whole ns, rounded up, so a source never
 * gets more than its limit. */
struct sluice_gcra_limit {
	__u64 interval_ns;   /* 10^9 / rate: ns of schedule one unit costs, integer part */
	__u32 interval_frac; /* its fraction, in 2^-32 ns, rounded up */
	__u8 unit;           /* enum sluice_unit */
	__u8 _pad[3];
	__u64 tolerance_ns;  /* the cost of a whole burst: how far ahead a source may get */
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_gcra_limit) == 24, "sluice_gcra_limit layout");

/* ns of schedule `units` cost under `l`, rounded up (the fraction too). */
SLUICE_INLINE __u64 sluice_gcra_units_ns(const struct sluice_gcra_limit *l, __u64 units)
{
	return units * l->interval_ns + ((units * l->interval_frac + 0xffffffffULL) >> 32);
}

/* The per-source level. A source's debt is kept in time, and the same time
 * means more packets under a lower rate: so each entry records the
 * generation of its class's limit that wrote it, and when the limit changes
 * (the dataplane bumps the generation as it applies the change) a source
 * written under the one before has its debt converted on first sight to the
 * same tokens under the new one. A change never grants packets. */
struct sluice_source_limit {
	struct sluice_gcra_limit current; /* gcra; its unit is the level's under every algorithm */
	__u64 previous_tolerance_ns; /* the limit this one replaced: its tolerance (0: none) */
	__u64 previous_scale;        /* and how much more schedule a unit costs now than
	                              * then: interval now / interval then, 32.32 fixed
	                              * point (1.0 when the unit changed) */
	__u8 enabled;                /* 0: no per-source limit */
	__u8 generation;             /* 0..3 */
	__u8 previous_fresh;         /* 1: the limit replaced counted another way (another
	                              * algorithm, window or count layout): what it wrote
	                              * reads as a fresh source */
	__u8 _pad[5];
	/* The algorithm. GCRA: `current` is the limit. A window algorithm: the
	 * counts live in the entry's time field (window.h, "in a source-table
	 * entry"); index_bits is 64 (whole window numbers), count_bits holds `limit`. */
	struct sluice_window_limit window;
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_source_limit) == 72, "sluice_source_limit layout");
SLUICE_STATIC_ASSERT(__builtin_offsetof(struct sluice_source_limit, enabled) == 40,
                     "sluice_source_limit.enabled offset");
SLUICE_STATIC_ASSERT(__builtin_offsetof(struct sluice_source_limit, window) == 48,
                     "sluice_source_limit.window offset");

/* One CPU's state for one level. Split mode: a token bucket and the time it
 * was last refilled. Lease mode: the unspent part of a lease and the time it
 * expires. Sharing the layout means a policy that switches accuracy reuses the
 * entry safely: a stale split bucket reads as an expired lease (its tokens go
 * back, clamped to burst) and a lease reads as a bucket (clamped to burst/N). */
struct sluice_cpu_bucket {
	__u64 tokens_nano;
	__u64 stamp_ns; /* split: last refill; lease: expiry */
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_cpu_bucket) == 16, "sluice_cpu_bucket layout");

/* The shared bucket behind the per-CPU leases. Only touched under `lock`. */
struct sluice_shared_bucket {
	struct bpf_spin_lock lock;
	__u32 _pad;
	__u64 tokens_nano;
	__u64 last_ns;     /* last refill */
	__u64 retry_at_ns; /* written under the lock, read without it: a hint that
	                    * the bucket is empty until then */
	struct sluice_window_state window; /* the class aggregate's, when it is a window
	                                    * algorithm (unused by the other levels) */
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_shared_bucket) == 344, "sluice_shared_bucket layout");
SLUICE_STATIC_ASSERT(__builtin_offsetof(struct sluice_shared_bucket, window) == 32,
                     "sluice_shared_bucket.window offset");
SLUICE_STATIC_ASSERT(__builtin_offsetof(struct sluice_shared_bucket, tokens_nano) == 8,
                     "sluice_shared_bucket.tokens_nano offset");

/* A fleet quota's credit on one dataplane, by class id: the units this node
 * may still admit for the class, leased from the fleet's bucket in Redis by
 * the control plane (control/fleet/). Both counts only grow (but for the
 * take-back of a lost race, fleet.h) and are compared by their difference,
 * so neither side ever writes the other's: the control plane adds to
 * `granted`, the dataplane's CPUs add to `taken`. One cache line, so two
 * classes' credits never share one. */
struct sluice_fleet_credit {
	__u64 granted; /* units granted, in total; written by the control plane only */
	__u64 taken;   /* units admitted, in total; atomic adds by every CPU */
	__u64 _pad[6];
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_fleet_credit) == 64, "sluice_fleet_credit layout");
SLUICE_STATIC_ASSERT(__builtin_offsetof(struct sluice_fleet_credit, taken) == 8, "sluice_fleet_credit.taken offset");

/* ---- keys ------------------------------------------------------------------ */
#define SLUICE_FAMILY_IPV4 4
#define SLUICE_FAMILY_IPV6 6

/* Source-level key: a source prefix within a class. Bits past the class's
 * prefix length are zero, so every address of a /64 maps to one key. */
struct sluice_source_key {
	__u32 class_id;
	__u8 family; /* SLUICE_FAMILY_* */
	__u8 _pad[3];
	__u8 addr[16]; /* network order; IPv4 in the first 4 bytes */
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_source_key) == 24, "sluice_source_key layout");
SLUICE_STATIC_ASSERT(__builtin_offsetof(struct sluice_source_key, addr) == 8,
                     "sluice_source_key.addr offset");

/* ---- the source table ---------------------------------------------------------
 * A fixed array of 64-byte sets, each one cache line of 8 entries; a source
 * lives in one of two sets picked by a keyed hash (source_table.h says how
 * it is used). An entry is one 64-bit word, so its tag and its state change
 * together under one compare-and-swap:
 *
 *   bit 63      pending: the entry is being created; nobody else touches it
 *   bits 62..47 tag: 16 bits of the source's keyed hash, never 0 in use
 *   bits 46..45 generation of its class's per-source limit that wrote it
 *   bits 44..0  theoretical arrival time (TAT) modulo 2^45 ns (9.8 h)
 *
 * 0 is an empty entry. A TAT no later than now is a full bucket: the entry
 * is free to take, and the table needs no deletes. */
#define SLUICE_SET_WAYS 8
#define SLUICE_ENTRY_TAT_BITS 45
#define SLUICE_ENTRY_TAT_MASK ((1ULL << SLUICE_ENTRY_TAT_BITS) - 1)
#define SLUICE_ENTRY_GENERATION_SHIFT SLUICE_ENTRY_TAT_BITS
#define SLUICE_ENTRY_GENERATION_MASK (3ULL << SLUICE_ENTRY_GENERATION_SHIFT)
#define SLUICE_ENTRY_TAG_SHIFT 47
#define SLUICE_ENTRY_TAG_BITS 16
#define SLUICE_ENTRY_TAG_MASK (((1ULL << SLUICE_ENTRY_TAG_BITS) - 1) << SLUICE_ENTRY_TAG_SHIFT)
#define SLUICE_ENTRY_PENDING (1ULL << 63)
/* The most a source can be ahead of its schedule (the control plane refuses
 * a per-source tolerance above it): 2^42 ns, 73 minutes. A TAT further ahead
 * than this is read as an old, free entry. */
#define SLUICE_DEBT_MAX_NS (1ULL << 42)
/* Sets: at least 2 (a source's second set differs from its first), at most
 * 2^23 (the hash bits that pick them): 16 .. 2^26 entries. */
#define SLUICE_SOURCE_SETS_MIN 2U
#define SLUICE_SOURCE_SETS_MAX (1U << 23)
/* The same bounds in entries (what source_capacity and --source-capacity
 * accept, rounded up to a power of two of sets), and the capacity a table
 * gets unless it is told otherwise: 2^20 entries, 8 MiB. */
#define SLUICE_SOURCE_CAPACITY_MIN (SLUICE_SOURCE_SETS_MIN * SLUICE_SET_WAYS)
#define SLUICE_SOURCE_CAPACITY_MAX (SLUICE_SOURCE_SETS_MAX * SLUICE_SET_WAYS)
#define SLUICE_SOURCE_CAPACITY_DEFAULT (1U << 20)

struct sluice_source_set {
	__u64 entry[SLUICE_SET_WAYS];
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_source_set) == 64, "sluice_source_set layout: one cache line");

/* The keyed hash's key, drawn at random when the table is created and kept
 * with it: with another key every source would land in other sets. */
#define SLUICE_HASH_KEY_WORDS 6
struct sluice_hash_key {
	__u64 word[SLUICE_HASH_KEY_WORDS];
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_hash_key) == 48, "sluice_hash_key layout");

/* LPM trie keys for classification. Both policy slots share one trie per
 * family: the slot is the first 32 bits of the key, always part of the
 * prefix, so a lookup in slot s only ever matches slot s's entries. */
#define SLUICE_LPM_SLOT_BITS 32
/* Prefixes one policy may have per address family. The operator sets it
 * (sluiced.toml prefix_capacity, sluice-dpdk --prefix-capacity) within
 * 1..MAX; the control plane refuses a policy with more, and each policy slot's
 * tries hold this many. */
#define SLUICE_PREFIX_CAPACITY_DEFAULT (1U << 20)
#define SLUICE_PREFIX_CAPACITY_MAX (1U << 24)

struct sluice_lpm_v4_key {
	__u32 prefixlen; /* SLUICE_LPM_SLOT_BITS + address prefix length */
	__u32 slot;      /* matched whole; byte order irrelevant */
	__u8 addr[4];    /* network order */
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_lpm_v4_key) == 12, "sluice_lpm_v4_key layout");
SLUICE_STATIC_ASSERT(__builtin_offsetof(struct sluice_lpm_v4_key, addr) == 8, "sluice_lpm_v4_key.addr offset");

struct sluice_lpm_v6_key {
	__u32 prefixlen; /* SLUICE_LPM_SLOT_BITS + address prefix length */
	__u32 slot;
	__u8 addr[16]; /* network order */
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_lpm_v6_key) == 24, "sluice_lpm_v6_key layout");
SLUICE_STATIC_ASSERT(__builtin_offsetof(struct sluice_lpm_v6_key, addr) == 8, "sluice_lpm_v6_key.addr offset");

/* ---- bans --------------------------------------------------------------------
 * Timed bans (sluicectl ban): prefixes whose packets are dropped until a time,
 * checked right after parsing, before classification, so a ban beats even a
 * `pass` class. Not part of a policy version: one set, changed in place, in a
 * hash keyed by family, length and masked address, probed once per prefix
 * length in use, longest first (sluice_active lists them). Per length, not a
 * trie: a trie walk of a thousand bans cost more than a whole refusal (bench/
 * README.md, "Refusals"), a hash probe a fraction of it. Each ban has a slot,
 * its per-CPU drop counter; the daemon caps how many are in force (max_bans). */
#define SLUICE_MAX_BANS 4096U
SLUICE_STATIC_ASSERT((SLUICE_MAX_BANS & (SLUICE_MAX_BANS - 1)) == 0, "a ban slot is clamped with a mask");
/* Distinct prefix lengths the bans of one family may use: each is a probe
 * for every packet of the family. */
#define SLUICE_BAN_LENGTHS_MAX 8

struct sluice_ban_key {
	__u8 family;   /* SLUICE_FAMILY_* */
	__u8 length;   /* prefix length */
	__u8 _pad[2];
	__u8 addr[16]; /* network order, bits past `length` zero; IPv4 in the first 4 bytes */
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_ban_key) == 20, "sluice_ban_key layout");

struct sluice_ban {
	__u64 until_ns; /* dropped while now < until_ns, on the dataplane's clock */
	__u32 slot;     /* its drop counter: < SLUICE_MAX_BANS */
	__u32 _pad;
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_ban) == 16, "sluice_ban layout");

/* What every packet reads first: the active policy slot and the prefix
 * lengths each family's bans use (none: a packet of that family looks
 * nothing up). */
struct sluice_active {
	__u32 slot;        /* the active policy slot */
	__u8 ban_lengths_v4;                        /* lengths in use, 0..SLUICE_BAN_LENGTHS_MAX */
	__u8 ban_lengths_v6;
	__u16 _pad;
	__u8 ban_length_v4[SLUICE_BAN_LENGTHS_MAX]; /* longest first */
	__u8 ban_length_v6[SLUICE_BAN_LENGTHS_MAX];
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_active) == 24, "sluice_active layout");

/* ---- policy ----------------------------------------------------------------
 * A policy version occupies one of two slots; packets read the active slot
 * index once, so one decision never mixes two versions. */
#define SLUICE_POLICY_SLOTS 2
#define SLUICE_MAX_CLASSES 256 /* class id 0 is reserved for "not classified" */
#define SLUICE_CLASS_UNCLASSIFIED 0

/* Shaping: a bounded FIFO per class that drains at the class's aggregate
 * rate. Only sluice-dpdk shapes; XDP cannot hold packets, so on sluiced a
 * shaped class is policed at its aggregate rate (excess dropped, reason
 * `class`) and this is ignored. */
#define SLUICE_SHAPE_QUEUE_MAX 65536U              /* packets */
#define SLUICE_SHAPE_MAX_DELAY_NS 60000000000ULL /* 60 s */

struct sluice_shape {
	__u32 queue_packets; /* 0: the class is not shaped; else 1..SLUICE_SHAPE_QUEUE_MAX */
	__u32 _pad;
	__u64 max_delay_ns;  /* a packet whose predicted wait exceeds this is refused
	                      * (reason DEADLINE); 1 ms..SLUICE_SHAPE_MAX_DELAY_NS */
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_shape) == 16, "sluice_shape layout");
SLUICE_STATIC_ASSERT(__builtin_offsetof(struct sluice_shape, max_delay_ns) == 8,
                     "sluice_shape.max_delay_ns offset");

/* The rate one worker's queue of a shaped class drains at, as the control
 * plane precomputes it (control/rate_limits.h) for the dataplane's worker
 * count: with its reciprocal, predicting a frame's wait needs no division
 * (sluice/shape.h). Held by sluice-dpdk beside its policy slot, in no map. */
struct sluice_shape_drain {
	__u64 rate_per_s; /* units per second == nano-units per ns; at least 1 */
	__u64 inverse;    /* (2^64 - 1) / rate_per_s, rounded down */
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_shape_drain) == 16, "sluice_shape_drain layout");

/* The penalty box (decide.h, "penalties"): a source whose refused units run
 * above (over - 1) x its per-source rate for longer than `within` is
 * refused outright for for_ns. `meter` is that threshold as a GCRA over the
 * refused units (rate (over - 1) x the source's, tolerance `within`), kept
 * in the source table under the source's key with SLUICE_PENALTY_METER_CLASS
 * set in its class id. A penalty is one write: the source's TAT put
 * tolerance + SLUICE_PENALTY_MARGIN_NS + for_ns ahead, so a source reads as
 * penalised while its debt exceeds its tolerance by more than the margin
 * (which no admission can leave: an admitted source is at most its
 * tolerance ahead), and comes out of it with an empty bucket. */
struct sluice_penalty {
	struct sluice_source_limit meter; /* gcra; generation 0 */
	__u64 for_ns;                     /* 0: the class has no penalty */
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_penalty) == 80, "sluice_penalty layout");

#define SLUICE_PENALTY_METER_CLASS (1U << 31)
/* Slack between the most debt an admission leaves and the least a penalty
 * writes: CPUs read the clock at slightly different moments, and a debt
 * that looks a few ns past the tolerance must not read as a penalty. */
#define SLUICE_PENALTY_MARGIN_NS 1000000ULL
#define SLUICE_PENALTY_FOR_MIN_NS SLUICE_NANO
#define SLUICE_PENALTY_FOR_MAX_NS (3600ULL * SLUICE_NANO)
SLUICE_STATIC_ASSERT(SLUICE_PENALTY_FOR_MAX_NS + SLUICE_PENALTY_MARGIN_NS < SLUICE_DEBT_MAX_NS,
		     "a penalty must fit in the debt an entry can hold");

struct sluice_class_entry {
	struct sluice_source_limit per_source;
	/* Packets of sources without an entry in the source table also spend
	 * from this class-wide budget, so a flood of never-seen (spoofed)
	 * sources cannot take the whole aggregate from the sources it knows. */
	struct sluice_level_limit new_sources;
	struct sluice_level_limit aggregate;
	__u32 class_id;
	__u8 action;        /* enum sluice_action */
	__u8 on_table_full; /* enum sluice_table_full */
	__u8 prefix_v4;     /* source aggregation: 1..32, default 32 */
	__u8 prefix_v6;     /* source aggregation: 1..128, default 64 */
	struct sluice_shape shape; /* sluice-dpdk only: needs action LIMIT and an aggregate */
	/* How the aggregate counts. GCRA: the token bucket `aggregate` describes.
	 * A window algorithm: `limit` units per window, state under the shared
	 * bucket's lock; `aggregate` then only says enabled and unit. */
	struct sluice_window_limit aggregate_window;
	/* 1: the class decides and counts as if enforcing, but passes what it
	 * would drop (verdict WOULD_DROP): a limit tried before it is trusted. */
	__u8 shadow;
	/* 1: the class is also held to a fleet quota: a packet spends the
	 * credit its node leased (struct sluice_fleet_credit, by class id). */
	__u8 fleet;
	__u8 fleet_unit; /* enum sluice_unit of the fleet quota */
	__u8 _pad[5];
	struct sluice_penalty penalty; /* needs a gcra per-source limit */
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_class_entry) == 368, "sluice_class_entry layout");
SLUICE_STATIC_ASSERT(__builtin_offsetof(struct sluice_class_entry, penalty) == 288,
                     "sluice_class_entry.penalty offset");
SLUICE_STATIC_ASSERT(__builtin_offsetof(struct sluice_class_entry, fleet) == 281,
                     "sluice_class_entry.fleet offset");
SLUICE_STATIC_ASSERT(__builtin_offsetof(struct sluice_class_entry, new_sources) == 72,
                     "sluice_class_entry.new_sources offset");
SLUICE_STATIC_ASSERT(__builtin_offsetof(struct sluice_class_entry, class_id) == 232,
                     "sluice_class_entry.class_id offset");
SLUICE_STATIC_ASSERT(__builtin_offsetof(struct sluice_class_entry, shape) == 240,
                     "sluice_class_entry.shape offset");
SLUICE_STATIC_ASSERT(__builtin_offsetof(struct sluice_class_entry, aggregate_window) == 256,
                     "sluice_class_entry.aggregate_window offset");

struct sluice_policy_header {
	__u64 version;                /* the daemon's policy version, only grows */
	struct sluice_level_limit global; /* the host-wide ceiling */
	__u32 default_class_id;       /* class for sources no prefix matches */
	__u8 non_ip_verdict;          /* enum sluice_verdict */
	__u8 malformed_verdict;       /* enum sluice_verdict */
	__u8 has_prefixes_v4;         /* 0: no IPv4 prefix, every IPv4 source is of the default class */
	__u8 has_prefixes_v6;         /* the same for IPv6: a dataplane need not look them up */
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_policy_header) == 96, "sluice_policy_header layout");

/* ---- counters and events ---------------------------------------------------- */
struct sluice_counter {
	__u64 packets;
	__u64 bytes;
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_counter) == 16, "sluice_counter layout");

#define SLUICE_COUNTERS_PER_CLASS ((__u32)SLUICE_VERDICT_COUNT * (__u32)SLUICE_REASON_COUNT)
#define SLUICE_COUNTER_SLOTS (SLUICE_MAX_CLASSES * SLUICE_COUNTERS_PER_CLASS)

SLUICE_INLINE __u32 sluice_counter_index(__u32 class_id, __u32 verdict, __u32 reason)
{
	return (class_id * (__u32)SLUICE_VERDICT_COUNT + verdict) * (__u32)SLUICE_REASON_COUNT + reason;
}

/* Dataplane health counters, one per-CPU slot each. X(ID, label, help). */
#define SLUICE_STAT_LIST(X)                                                    \
	X(NO_POLICY, "no_policy", "packets passed before any policy was applied") \
	X(SOURCE_INSERTS, "source_inserts", "source entries created")          \
	X(SOURCE_EVICTIONS, "source_evictions",                                \
	  "entries of sources in debt taken for a new source (on_table_full = evict)") \
	X(SOURCE_TABLE_FULL, "source_table_full",                              \
	  "new sources found both sets in debt; on_table_full = open or closed decided") \
	X(SOURCE_CONTENDED, "source_contended",                                \
	  "packets dropped because another CPU kept their source's entry busy") \
	X(DROP_EVENTS_SENT, "drop_events_sent", "sampled drops sent to the ring buffer") \
	X(DROP_EVENTS_LOST, "drop_events_lost", "sampled drops lost: ring buffer full") \
	X(STATE_LOOKUP_FAILED, "state_lookup_failed",                          \
	  "class or global state missing: packet passed")                      \
	X(TX_FULL, "tx_full",                                                  \
	  "sluice-dpdk: passed frames the TX queue had no room for (freed)") \
	X(PENALTIES, "penalties", "sources put in the penalty box")

enum sluice_stat {
#define SLUICE_X(id, label, help) SLUICE_STAT_##id,
	SLUICE_STAT_LIST(SLUICE_X)
#undef SLUICE_X
	SLUICE_STAT_COUNT
};

/* Written once when the maps are created; a daemon that re-adopts pinned
 * maps refuses them unless abi_version matches its own, and loads its
 * program with hash_key, under which the pinned source table was filled. */
struct sluice_meta {
	__u32 abi_version; /* SLUICE_ABI_VERSION; first, so any version can read it */
	__u32 max_classes; /* SLUICE_MAX_CLASSES */
	__u64 created_ns;  /* CLOCK_MONOTONIC at creation */
	__u32 source_sets; /* sets in the source table */
	__u32 _pad;
	struct sluice_hash_key hash_key;
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_meta) == 72, "sluice_meta layout");
SLUICE_STATIC_ASSERT(__builtin_offsetof(struct sluice_meta, hash_key) == 24, "sluice_meta.hash_key offset");

/* Drops are sampled for events: one in `period`, where the period is at least
 * this unless a dataplane is told otherwise (a power of two), and user space
 * raises it while the events of a drain interval would overrun the ring
 * (control/lib/drop_sampling.h), up to the maximum. */
#define SLUICE_DROP_SAMPLE_PERIOD_DEFAULT 64U
#define SLUICE_DROP_SAMPLE_PERIOD_MAX (1U << 24)

/* Where one CPU's (one worker's) drop sampling stands. Each sampled drop
 * stands for itself and the period's drops after it, so the weights of the
 * events add up to the drops however the period moves; a sampled drop whose
 * event is lost passes its weight on to the next event sent. */
struct sluice_drop_sampler {
	__u64 carried;   /* weight of lost events, added to the next event sent */
	__u32 countdown; /* drops until the next sampled one (0 or 1: this one) */
	__u32 _pad;
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_drop_sampler) == 16, "sluice_drop_sampler layout");

/* A sampled drop, sent on a ring buffer for hot-source detection; or, with
 * SLUICE_EVENT_PENALTY_STARTED, the drop that put its source in the penalty
 * box (sent whatever the sampling, with weight 0: the sampler counts the
 * drop itself). */
#define SLUICE_EVENT_PENALTY_STARTED 1
struct sluice_drop_event {
	__u64 time_ns;
	struct sluice_source_key source;
	__u32 frame_len;
	__u8 reason;  /* enum sluice_reason */
	__u8 verdict; /* DROP, or WOULD_DROP: a class in shadow passed it */
	__u8 flags;   /* SLUICE_EVENT_* */
	__u8 _pad;
	__u64 weight; /* drops this event stands for: its period, plus lost events' */
};
SLUICE_STATIC_ASSERT(sizeof(struct sluice_drop_event) == 48, "sluice_drop_event layout");

#endif /* SLUICE_ABI_H */
