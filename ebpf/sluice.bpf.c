// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
/*
 * Sluice's XDP program: parse -> classify (LPM) -> the source's entry ->
 * new-source budget -> class aggregate -> global ceiling -> fleet credit ->
 * PASS or DROP, per packet, at the driver; a source its per-source limit
 * refused may then go in its class's penalty box.
 * Every decision is the shared core's (dataplane/include/sluice/); this file
 * only finds the state the core decides over.
 *
 * Policy versions. Two slots: the policy header and class entries are arrays
 * indexed by slot, and the LPM tries carry the slot in the first 32 bits of
 * every key. The control plane writes the inactive slot, flips sluice_active,
 * then waits an RCU grace period before it ever writes that slot again. A
 * packet reads sluice_active once and looks up everything in that slot, so no
 * decision mixes two versions. We chose this over map-in-map (one inner map
 * per version, swapped in an outer array) because the tries, arrays and their
 * pins stay fixed: a daemon restart re-adopts the same maps, and a policy
 * push is plain element writes with no map creation on the hot path of a
 * push.
 *
 * State. Sources live in one array of 64-byte sets shared by every CPU
 * (sluice/source_table.h: GCRA, one compare-and-swap per admission, no lock);
 * the class's new-source budget, the class aggregate and the global ceiling
 * are per-CPU buckets with shared spin-locked ones behind them for lease
 * mode; a fleet quota's credit is one shared line per class (fleet.h),
 * granted by the daemon. Class state is keyed by class id and source state by (class id,
 * source prefix); the control plane keeps class ids stable per class name,
 * so a new policy version keeps every bucket.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* The index sluice_source_find_known found, through per-CPU scratch: read
 * back from a map value it is any index to the verifier, so the sixteen
 * ways out of the table's loop meet as one state rather than carrying a
 * constant each through the rest of the decision. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} sluice_found_index SEC(".maps");

static __always_inline __u32 found_index(__u32 i)
{
	__u32 zero = 0;
	volatile __u32 *slot = bpf_map_lookup_elem(&sluice_found_index, &zero);

	if (!slot)
		return i;
	*slot = i;
	return *slot;
}
#define SLUICE_FOUND_INDEX(i) found_index(i)
#include "sluice/source_table.h"

/* The source level runs in global functions (below): the verifier checks a
 * global function once, whatever state its caller is in, where inlined
 * into sluice_decide the table's loops took it past its million
 * instructions. A call carries what they need, by value. */
struct sluice_source_call {
	__u32 home, second;
	__u64 tag, now, cost;
	struct sluice_source_limit limit; /* the class's, copied: the calls' frames stay small */
	struct sluice_source_look look;
	__u8 verdict, reason, level, table; /* a refusal's struct sluice_decision */
	__u8 on_table_full;
	__u8 _pad[3];
};
__noinline int sluice_source_find_call(struct sluice_source_call *call);
__noinline int sluice_source_charge_call(struct sluice_source_call *call);
__noinline int sluice_source_settle_call(struct sluice_source_call *call);
__noinline int sluice_source_commit_call(struct sluice_source_call *call);

static __always_inline void call_make(struct sluice_source_call *call, const struct sluice_source_ref *src,
				      __u64 cost, __u64 now, const struct sluice_source_look *look)
{
	__builtin_memset(call, 0, sizeof(*call));
	call->home = src->home_index;
	call->second = src->second_index;
	call->tag = src->tag;
	call->now = now;
	call->cost = cost;
	call->limit = *src->limit;
	call->look = *look;
	call->on_table_full = src->on_table_full;
}

/* The call's decision fields as the struct decide.h defines later; the
 * functions below write it in place, with no copy on their stack. */
#define CALL_DECISION(call) ((struct sluice_decision *)&(call)->verdict)

/* A call lives in per-CPU scratch space, not on the stack, which a program
 * and the functions it calls share 512 bytes of. Nothing preempts a program
 * on its CPU (XDP runs in softirq; BPF_PROG_TEST_RUN with bottom halves off). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sluice_source_call);
} sluice_source_scratch SEC(".maps");

/* sluice_decide's settle and commit: one call, the look and the decision
 * copied back; no scratch (never) reads as an entry that stayed busy. */
#define SOURCE_CALL(fn, src, cost, now, look_, d_)                                                   \
	({                                                                                          \
		__u32 zero_ = 0;                                                                    \
		struct sluice_source_call *call_ = bpf_map_lookup_elem(&sluice_source_scratch, &zero_); \
		int verdict_ = -1;                                                                  \
		if (call_) {                                                                        \
			call_make(call_, (src), (cost), (now), (look_));                            \
			verdict_ = fn(call_);                                                       \
			*(look_) = call_->look;                                                     \
			*(d_) = *CALL_DECISION(call_);                                              \
		}                                                                                   \
		verdict_;                                                                           \
	})
#define SLUICE_SOURCE_SETTLE(src, cost, now, look, d) SOURCE_CALL(sluice_source_settle_call, src, cost, now, look, d)
#define SLUICE_SOURCE_COMMIT(src, cost, now, look, d) SOURCE_CALL(sluice_source_commit_call, src, cost, now, look, d)
/* Within those, the look is a call's own (the global functions below pass
 * &call->look), so finding and charging run on the same call: no second
 * copy on a stack that all frames share 512 bytes of. */
#define CALL_OF(look) ((struct sluice_source_call *)((char *)(look) - __builtin_offsetof(struct sluice_source_call, look)))
#define SLUICE_SOURCE_FIND(src, now, look) ((void)(now), (void)sluice_source_find_call(CALL_OF(look)))
#define SLUICE_SOURCE_CHARGE(src, look) (sluice_source_charge_call(CALL_OF(look)) > 0)

/* A per-source window's step, in a global function too: inlined, its counts
 * would take stack in its callers' frames. Within the calls above, the look
 * is a call's own; the program's known source fills the scratch call first
 * (no source call is under way then). */
__noinline int sluice_source_window_call(struct sluice_source_call *call);
#define SLUICE_SOURCE_WINDOW_STEP(src, look, cost, now) ((void)(cost), (void)(now), sluice_source_window_call(CALL_OF(look)) > 0)
#define SLUICE_SOURCE_WINDOW_STEP_KNOWN(src, look_, cost_, now_)                                     \
	({                                                                                          \
		__u32 zero_ = 0;                                                                    \
		struct sluice_source_call *call_ = bpf_map_lookup_elem(&sluice_source_scratch, &zero_); \
		int ok_ = 0;                                                                        \
		if (call_) {                                                                        \
			call_->limit = *(src)->limit;                                               \
			call_->look = *(look_);                                                     \
			call_->cost = (cost_);                                                      \
			call_->now = (now_);                                                        \
			ok_ = sluice_source_window_call(call_) > 0;                                 \
			(look_)->next = call_->look.next;                                           \
		}                                                                                   \
		ok_;                                                                                \
	})

/* A window aggregate is decided in a global function too, over a copy of
 * its limit in per-CPU scratch; it finds the class's state by class id,
 * which the limit's class entry holds (the limit is that entry's). */
struct sluice_window_call {
	struct sluice_window_limit limit;
	__u64 now, cost;
	__u32 class_id;
	__u32 refund; /* 0: admit `cost` if the window has room; 1: take it back */
};
__noinline int sluice_window_level_call(struct sluice_window_call *call);

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sluice_window_call);
} sluice_window_scratch SEC(".maps");

#define WINDOW_CLASS_ID(window)                                                                    \
	(((const struct sluice_class_entry *)((const char *)(window) -                              \
					      __builtin_offsetof(struct sluice_class_entry, aggregate_window))) \
		 ->class_id)
/* No scratch (never) reads as a refusal. */
#define WINDOW_CALL(ref, cost_, now_, refund_)                                                         \
	({                                                                                          \
		__u32 zero_ = 0;                                                                    \
		struct sluice_window_call *call_ = bpf_map_lookup_elem(&sluice_window_scratch, &zero_); \
		int ok_ = 0;                                                                        \
		if (call_) {                                                                        \
			call_->limit = *(ref)->window;                                              \
			call_->now = (now_);                                                        \
			call_->cost = (cost_);                                                      \
			call_->class_id = WINDOW_CLASS_ID((ref)->window);                           \
			call_->refund = (refund_);                                                  \
			ok_ = sluice_window_level_call(call_);                                      \
		}                                                                                   \
		ok_;                                                                                \
	})
#define SLUICE_WINDOW_LEVEL_DECIDE(ref, cost, now) WINDOW_CALL((ref), (cost), (now), 0)
#define SLUICE_WINDOW_LEVEL_REFUND(ref, cost, now) ((void)WINDOW_CALL((ref), (cost), (now), 1))
/* The fleet level in a global function too: verified once, its branches
 * add no paths to the program's. */
__noinline int sluice_fleet_call(struct sluice_fleet_credit *credit, __u64 unit, __u32 frame_len, __u32 tcp_syn,
				 __u32 refund);
#define SLUICE_FLEET_LEVEL(ref, frame_len, tcp_syn, refund) \
	(sluice_fleet_call((ref)->credit, (ref)->unit, (frame_len), (tcp_syn), (refund)) > 0)
/* A refused source's penalty step (penalty_step, below): the meter, then
 * the source's own entry, found and charged through the source calls
 * above (verified once already: a copy of the table's loops of its own
 * would be verified again), each call made from the program itself. A
 * function that called them in turn would stack its frame and theirs on
 * the program's, past the 512 bytes all frames share. */
static __always_inline int penalty_step(__u64 units, __u64 now);
#define SLUICE_PENALTY_STEP(levels, units, now) penalty_step((units), (now))
#define SLUICE_PENALTY_EVENT_BY_STEP 1
#define SLUICE_SHARED_LOCK(shared) bpf_spin_lock(&(shared)->lock)
#define SLUICE_SHARED_UNLOCK(shared) bpf_spin_unlock(&(shared)->lock)
#include "sluice/decide.h"
_Static_assert(sizeof(struct sluice_decision) == 4 && __builtin_offsetof(struct sluice_source_call, table) ==
							__builtin_offsetof(struct sluice_source_call, verdict) + 3,
	       "CALL_DECISION: the call's four fields are a struct sluice_decision");
#include "bench_sources.h" /* off unless sluice-bench sets it */

/* Sets in the source table unless the loader says otherwise. */
#define SLUICE_DEFAULT_SETS (SLUICE_SOURCE_CAPACITY_DEFAULT / SLUICE_SET_WAYS)

/* ---- load-time switches (set through the skeleton before load) ----------- */

/* Tests drive time through sluice_test_now_ns; production leaves this 0 and
 * the verifier removes the branch. */
const volatile __u8 sluice_use_test_clock = 0;
/* bpf_ktime_get_coarse_ns instead of bpf_ktime_get_ns (see sluice_now). */
const volatile __u8 sluice_use_coarse_clock = 0;
/* The source table has mask + 1 sets; the loader sets both. */
const volatile __u32 sluice_set_mask = SLUICE_DEFAULT_SETS - 1;
/* The keyed hash's key: drawn by the loader, or the pinned table's own. */
const volatile struct sluice_hash_key sluice_hash_key = {};

__u64 sluice_test_now_ns = 0;

/* ---- maps ----------------------------------------------------------------- */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sluice_meta);
} sluice_meta SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sluice_active);
} sluice_active SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_POLICY_SLOTS);
	__type(key, __u32);
	__type(value, struct sluice_policy_header);
} sluice_policy SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_POLICY_SLOTS * SLUICE_MAX_CLASSES);
	__type(key, __u32);
	__type(value, struct sluice_class_entry);
} sluice_classes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, SLUICE_POLICY_SLOTS * SLUICE_PREFIX_CAPACITY_DEFAULT);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sluice_lpm_v4_key);
	__type(value, __u32);
} sluice_lpm_v4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, SLUICE_POLICY_SLOTS * SLUICE_PREFIX_CAPACITY_DEFAULT);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sluice_lpm_v6_key);
	__type(value, __u32);
} sluice_lpm_v6 SEC(".maps");

/* Timed bans (abi.h, "bans"), probed only at the lengths sluice_active lists,
 * and each ban's drop counter. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SLUICE_MAX_BANS);
	__type(key, struct sluice_ban_key);
	__type(value, struct sluice_ban);
} sluice_bans SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SLUICE_MAX_BANS);
	__type(key, __u32);
	__type(value, struct sluice_counter);
} sluice_ban_counters SEC(".maps");

/* The source table. An ARRAY, so finding a set is inlined pointer
 * arithmetic; mmapable, so its values start on a page boundary (every set
 * is one cache line) and the daemon counts entries without a syscall. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_DEFAULT_SETS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct sluice_source_set);
} sluice_sources SEC(".maps");

/* The class's budget for new sources, by class id. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SLUICE_MAX_CLASSES);
	__type(key, __u32);
	__type(value, struct sluice_cpu_bucket);
} sluice_new_cpu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_MAX_CLASSES);
	__type(key, __u32);
	__type(value, struct sluice_shared_bucket);
} sluice_new_shr SEC(".maps");

/* Class aggregate level, by class id. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SLUICE_MAX_CLASSES);
	__type(key, __u32);
	__type(value, struct sluice_cpu_bucket);
} sluice_cls_cpu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_MAX_CLASSES);
	__type(key, __u32);
	__type(value, struct sluice_shared_bucket);
} sluice_cls_shr SEC(".maps");

/* Fleet quotas' credit, by class id: the daemon's fleet leaser adds what
 * Redis granted (mmapable: it writes without a syscall), CPUs take. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_MAX_CLASSES);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct sluice_fleet_credit);
} sluice_fleet SEC(".maps");

/* Global ceiling. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sluice_cpu_bucket);
} sluice_glb_cpu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sluice_shared_bucket);
} sluice_glb_shr SEC(".maps");

/* class x verdict x reason, packets and bytes. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SLUICE_COUNTER_SLOTS);
	__type(key, __u32);
	__type(value, struct sluice_counter);
} sluice_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SLUICE_STAT_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} sluice_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} sluice_events SEC(".maps");

/* Where each CPU's drop sampling stands. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sluice_drop_sampler);
} sluice_sampler SEC(".maps");

/* The drop sampling period user space sets after each drain of the ring
 * buffer, which every CPU shares; the loader writes the least one first. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} sluice_sample_period SEC(".maps");

/* ---- helpers ---------------------------------------------------------------- */

/*
 * The one place that reads time. bpf_ktime_get_ns is the default: the
 * measurement in README.md puts the coarse clock's saving at a few ns per
 * packet, while its tick (a jiffy, 4 ms at HZ=250) loosens the bound to
 * burst + rate*(T + tick) and makes refills arrive in steps.
 */
static __always_inline __u64 sluice_now(void)
{
	if (sluice_use_test_clock)
		return sluice_test_now_ns;
	if (sluice_use_coarse_clock)
		return bpf_ktime_get_coarse_ns();
	return bpf_ktime_get_ns();
}

static __always_inline void stat_add(__u32 stat, __u64 n)
{
	__u64 *value = bpf_map_lookup_elem(&sluice_stats, &stat);

	if (value)
		*value += n;
}

static __always_inline __u32 classify(__u32 slot, const struct sluice_packet *pkt,
				       const struct sluice_policy_header *policy)
{
	__u32 default_class = policy->default_class_id;
	__u32 *class_id;

	/* A family without prefixes needs no trie walk. */
	if (!(pkt->family == SLUICE_FAMILY_IPV4 ? policy->has_prefixes_v4 : policy->has_prefixes_v6))
		return default_class;
	if (pkt->family == SLUICE_FAMILY_IPV4) {
		struct sluice_lpm_v4_key key = {
			.prefixlen = SLUICE_LPM_SLOT_BITS + 32,
			.slot = slot,
		};

		__builtin_memcpy(key.addr, pkt->src, 4);
		class_id = bpf_map_lookup_elem(&sluice_lpm_v4, &key);
	} else {
		struct sluice_lpm_v6_key key = {
			.prefixlen = SLUICE_LPM_SLOT_BITS + 128,
			.slot = slot,
		};

		__builtin_memcpy(key.addr, pkt->src, 16);
		class_id = bpf_map_lookup_elem(&sluice_lpm_v6, &key);
	}
	return class_id ? *class_id : default_class;
}

static __always_inline struct sluice_drop_sampler *drop_sampler(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&sluice_sampler, &zero);
}

static __always_inline __u32 drop_sample_period(void)
{
	__u32 zero = 0;
	__u32 *period = bpf_map_lookup_elem(&sluice_sample_period, &zero);

	/* The loader writes the period before attaching; 0 only if it never did. */
	return period && *period ? *period : SLUICE_DROP_SAMPLE_PERIOD_DEFAULT;
}

/* sluice/account.h's hooks: counters, stats and the drop sampler are maps,
 * drop events go on the ring buffer; the program has no per-packet context
 * beyond them. Submitting a reserved record cannot fail. */
#define SLUICE_ACCOUNT_CTX void
#define SLUICE_COUNTER(ctx, index) ((void)(ctx), bpf_map_lookup_elem(&sluice_counters, (index)))
#define SLUICE_STAT_ADD(ctx, stat) ((void)(ctx), stat_add((stat), 1))
#define SLUICE_DROP_SAMPLER(ctx) ((void)(ctx), drop_sampler())
#define SLUICE_DROP_SAMPLE_PERIOD(ctx) ((void)(ctx), drop_sample_period())
#define SLUICE_DROP_RANDOM(ctx) ((void)(ctx), bpf_get_prandom_u32())
#define SLUICE_EVENT_RESERVE(ctx) \
	((void)(ctx), (struct sluice_drop_event *)bpf_ringbuf_reserve(&sluice_events, sizeof(struct sluice_drop_event), 0))
#define SLUICE_EVENT_SUBMIT(ctx, event) ((void)(ctx), bpf_ringbuf_submit((event), 0), 1)
#define SLUICE_EVENT_NOW(ctx) ((void)(ctx), sluice_now()) /* only sampled drops pay for this read */
#define SLUICE_BAN_COUNTER(ctx, slot) ((void)(ctx), bpf_map_lookup_elem(&sluice_ban_counters, (slot)))
/* The packet and its source key, in per-CPU scratch: on the stack they
 * would leave the source calls too little of the 512 bytes all frames share. */
struct sluice_packet_scratch {
	struct sluice_packet pkt;
	struct sluice_source_key key;
	struct sluice_source_key meter_key; /* its penalty meter's (sluice_penalty_prepare_call) */
	struct sluice_ban_key ban_key;      /* find_ban's probe */
	__u32 class_index;                  /* in sluice_classes: what the penalty calls look up */
	struct sluice_decision decision;    /* SLUICE_DECISION_BARRIER */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sluice_packet_scratch);
} sluice_packet_scratch SEC(".maps");

/* The longest ban in force that covers the packet's source: one hash probe
 * per prefix length the family's bans use, longest first. */
static __always_inline const struct sluice_ban *find_ban(const struct sluice_packet *pkt,
							  const struct sluice_active *active,
							  struct sluice_ban_key *key, __u64 now)
{
	const int v4 = pkt->family == SLUICE_FAMILY_IPV4;
	const __u8 *lengths = v4 ? active->ban_length_v4 : active->ban_length_v6;
	const __u32 count = v4 ? active->ban_lengths_v4 : active->ban_lengths_v6;
	const struct sluice_ban *ban;

	for (__u32 i = 0; i < SLUICE_BAN_LENGTHS_MAX; i++) {
		if (i >= count)
			return NULL;
		sluice_ban_key_make(key, pkt, lengths[i]);
		ban = bpf_map_lookup_elem(&sluice_bans, key);
		if (sluice_ban_applies(ban, now))
			return ban;
	}
	return NULL;
}

/* The decision through the packet scratch: read back from a map value,
 * it is any decision to the verifier, so the paths through sluice_decide
 * meet in one state before the penalty step and the accounting. */
#define SLUICE_DECISION_BARRIER(d)                                                              \
	do {                                                                                    \
		__u32 zero_ = 0;                                                                \
		struct sluice_packet_scratch *s_ = bpf_map_lookup_elem(&sluice_packet_scratch, &zero_); \
		if (s_) {                                                                       \
			*(volatile struct sluice_decision *)&s_->decision = (d);                \
			(d) = *(volatile struct sluice_decision *)&s_->decision;                \
		}                                                                               \
	} while (0)
#include "sluice/account.h"

/* Count the decision, sample it if it dropped a known source, and turn it
 * into an XDP action. */
static __always_inline int account(__u32 class_id, struct sluice_decision d, __u32 frame_len,
				   const struct sluice_source_key *key)
{
	sluice_account(NULL, class_id, d, frame_len, key);
	return d.verdict == SLUICE_VERDICT_DROP ? XDP_DROP : XDP_PASS;
}

/* The per-source level: the source's two sets. Returns 0 only when the
 * class limits sources and a set is missing. */
static __always_inline int source_ref(struct sluice_source_ref *ref, const struct sluice_class_entry *cls,
				      const struct sluice_source_key *key)
{
	const struct sluice_hash_key *hash_key = (const struct sluice_hash_key *)&sluice_hash_key;

	ref->limit = NULL;
	ref->home = NULL;
	ref->second = NULL;
	ref->penalty = 0;
	if (!cls->per_source.enabled)
		return 1;
	/* The loader writes the key into read-only data after compilation: hide
	 * the pointer from the compiler, which would fold the zeroes it sees. */
	asm volatile("" : "+r"(hash_key));
	sluice_source_ref_make(ref, cls, key, hash_key, sluice_set_mask);
	ref->home = bpf_map_lookup_elem(&sluice_sources, &ref->home_index);
	ref->second = bpf_map_lookup_elem(&sluice_sources, &ref->second_index);
	return ref->home && ref->second;
}

/* The source level of a call, its sets found again: a global function knows
 * nothing of its caller's pointers. */
static __always_inline int call_ref(struct sluice_source_ref *ref, const struct sluice_source_call *call)
{
	ref->limit = &call->limit;
	ref->home = bpf_map_lookup_elem(&sluice_sources, &call->home);
	ref->second = bpf_map_lookup_elem(&sluice_sources, &call->second);
	ref->home_index = call->home;
	ref->second_index = call->second;
	ref->tag = call->tag;
	ref->on_table_full = call->on_table_full;
	return ref->home && ref->second;
}

__noinline int sluice_source_find_call(struct sluice_source_call *call)
{
	struct sluice_source_ref ref;

	if (!call)
		return -1;
	if (!call_ref(&ref, call)) {
		call->look.index = SLUICE_SOURCE_CANDIDATES; /* no sets: as if every entry were busy */
		return -1;
	}
	sluice_source_find(&ref, call->now, &call->look);
	return 0;
}

__noinline int sluice_source_charge_call(struct sluice_source_call *call)
{
	struct sluice_source_ref ref;

	if (!call || !call_ref(&ref, call))
		return 0;
	return sluice_source_charge(&ref, &call->look);
}

__noinline int sluice_source_settle_call(struct sluice_source_call *call)
{
	struct sluice_source_ref ref;

	if (!call || !call_ref(&ref, call))
		return -1;
	return sluice_source_settle(&ref, call->cost, call->now, &call->look, CALL_DECISION(call));
}

__noinline int sluice_source_commit_call(struct sluice_source_call *call)
{
	struct sluice_source_ref ref;

	if (!call || !call_ref(&ref, call))
		return -1;
	return sluice_source_commit(&ref, call->cost, call->now, &call->look, CALL_DECISION(call));
}

__noinline int sluice_source_window_call(struct sluice_source_call *call)
{
	if (!call)
		return 0;
	return sluice_source_window_step(&call->limit, &call->look, call->cost, call->now);
}

__noinline int sluice_window_level_call(struct sluice_window_call *call)
{
	struct sluice_shared_bucket *shared;
	__u32 index;
	int ok = 0;

	if (!call)
		return 0;
	index = sluice_class_slot(call->class_id);
	shared = bpf_map_lookup_elem(&sluice_cls_shr, &index);
	if (!shared)
		return 0;
	if (!call->refund && sluice_window_state_refusing(&call->limit, &shared->window, call->now))
		return 0;
	bpf_spin_lock(&shared->lock);
	if (call->refund)
		sluice_window_state_refund(&call->limit, &shared->window, call->now, call->cost);
	else
		ok = sluice_window_state_decide(&call->limit, &shared->window, call->now, call->cost, 1, 0);
	bpf_spin_unlock(&shared->lock);
	return ok;
}

__noinline int sluice_fleet_call(struct sluice_fleet_credit *credit, __u64 unit, __u32 frame_len, __u32 tcp_syn,
				 __u32 refund)
{
	return sluice_fleet_level(credit, unit, frame_len, (__u8)tcp_syn, (int)refund);
}

/* Fill one level's refs; the limit says whether the level is active. Both
 * buckets are found whatever the limit (two inlined array lookups): refs
 * that are always map values, never NULL for some levels and not others,
 * keep the verifier's paths few. Returns 0 only when a bucket is missing. */
static __always_inline int level_ref(struct sluice_level_ref *ref, const struct sluice_level_limit *limit,
				     void *cpu_map, void *shared_map, __u32 index)
{
	ref->limit = limit;
	ref->window = NULL;
	ref->cpu = bpf_map_lookup_elem(cpu_map, &index);
	ref->shared = bpf_map_lookup_elem(shared_map, &index);
	return ref->cpu && ref->shared;
}

/* ---- the penalty step ------------------------------------------------------------ */

/* The packet's scratch and class entry, for the penalty calls. */
static __always_inline const struct sluice_class_entry *penalty_class(struct sluice_packet_scratch **scratch)
{
	__u32 zero = 0;

	*scratch = bpf_map_lookup_elem(&sluice_packet_scratch, &zero);
	if (!*scratch)
		return NULL;
	return bpf_map_lookup_elem(&sluice_classes, &(*scratch)->class_index);
}

/* Makes the source call in scratch one for the refused source's meter
 * (meter 1) or for the source itself (meter 0), ready to find. 1 if it is. */
__noinline int sluice_penalty_prepare_call(__u32 meter, __u64 now)
{
	const struct sluice_hash_key *hash_key = (const struct sluice_hash_key *)&sluice_hash_key;
	struct sluice_packet_scratch *scratch;
	const struct sluice_class_entry *cls = penalty_class(&scratch);
	struct sluice_source_call *call;
	__u32 zero = 0;
	__u64 hash;

	call = bpf_map_lookup_elem(&sluice_source_scratch, &zero);
	if (!cls || !scratch || !call)
		return 0;
	sluice_penalty_meter_key(&scratch->meter_key, &scratch->key);
	asm volatile("" : "+r"(hash_key)); /* as in source_ref */
	hash = sluice_source_hash(meter ? &scratch->meter_key : &scratch->key, hash_key);
	__builtin_memset(call, 0, sizeof(*call));
	call->home = sluice_source_home(hash, sluice_set_mask);
	call->second = sluice_source_second(hash, sluice_set_mask);
	call->tag = sluice_source_tag(hash);
	call->now = now;
	call->limit = meter ? cls->penalty.meter : cls->per_source;
	call->on_table_full = SLUICE_TABLE_FULL_OPEN;
	return 1;
}

/* The meter's judgement of the look in scratch (sluice_penalty_meter_judge). */
__noinline int sluice_penalty_judge_call(__u64 units, __u64 now)
{
	struct sluice_packet_scratch *scratch;
	const struct sluice_class_entry *cls = penalty_class(&scratch);
	struct sluice_source_call *call;
	__u32 zero = 0;

	call = bpf_map_lookup_elem(&sluice_source_scratch, &zero);
	if (!cls || !call)
		return -1;
	return sluice_penalty_meter_judge(&cls->penalty, &call->look, units, now);
}

/* Puts the source the call in scratch found in the penalty box, and sends
 * the event that says so. */
__noinline int sluice_penalty_impose_call(__u64 now)
{
	struct sluice_packet_scratch *scratch;
	const struct sluice_class_entry *cls = penalty_class(&scratch);
	struct sluice_source_call *call;
	struct sluice_source_set *set;
	__u32 zero = 0;

	call = bpf_map_lookup_elem(&sluice_source_scratch, &zero);
	if (!cls || !scratch || !call || !call->look.found || call->look.pending ||
	    call->look.index >= SLUICE_SOURCE_CANDIDATES)
		return 0;
	set = bpf_map_lookup_elem(&sluice_sources, call->look.index < SLUICE_SET_WAYS ? &call->home : &call->second);
	if (!set || !sluice_penalty_impose(&cls->penalty, &cls->per_source, call->tag,
					   &set->entry[call->look.index & (SLUICE_SET_WAYS - 1)], call->look.seen, now))
		return 0;
	sluice_penalty_event(NULL, &scratch->key, scratch->pkt.frame_len,
			     cls->shadow ? SLUICE_VERDICT_WOULD_DROP : SLUICE_VERDICT_DROP);
	stat_add(SLUICE_STAT_PENALTIES, 1);
	return 1;
}

static __always_inline int penalty_step(__u64 units, __u64 now)
{
	__u32 zero = 0;
	struct sluice_source_call *call = bpf_map_lookup_elem(&sluice_source_scratch, &zero);
	int judged;

	if (!call || !sluice_penalty_prepare_call(1, now) || sluice_source_find_call(call) < 0)
		return 0;
	judged = sluice_penalty_judge_call(units, now);
	if (judged == 0)
		(void)sluice_source_charge_call(call);
	if (judged != 1 || !sluice_penalty_prepare_call(0, now) || sluice_source_find_call(call) < 0)
		return 0;
	return sluice_penalty_impose_call(now);
}

/* ---- the program -------------------------------------------------------------- */

SEC("xdp")
int sluice_xdp(struct xdp_md *ctx)
{
	const __u8 *data = (const __u8 *)(long)ctx->data;
	const __u8 *data_end = (const __u8 *)(long)ctx->data_end;
	struct sluice_levels levels;
	const struct sluice_policy_header *policy;
	const struct sluice_class_entry *cls;
	const struct sluice_active *active;
	const struct sluice_ban *ban;
	struct sluice_packet_scratch *scratch;
	struct sluice_source_key *key;
	struct sluice_decision d;
	struct sluice_packet *pkt;
	__u32 zero = 0, slot, class_id, class_index;
	__u64 now;

	bench_spread_source(ctx);
	/* The one read of the active slot: everything below uses `slot`. */
	active = bpf_map_lookup_elem(&sluice_active, &zero);
	scratch = bpf_map_lookup_elem(&sluice_packet_scratch, &zero);
	if (!active || !scratch)
		return XDP_PASS;
	pkt = &scratch->pkt;
	key = &scratch->key;
	slot = active->slot & (SLUICE_POLICY_SLOTS - 1);
	now = sluice_now();
	sluice_parse(data, data_end, pkt);

	/* Before the policy and its classes: a ban beats every class, `pass`
	 * too, and holds before the first policy arrives. */
	ban = pkt->status == SLUICE_PARSE_OK ? find_ban(pkt, active, &scratch->ban_key, now) : NULL;
	if (ban) {
		sluice_account_ban(NULL, ban, pkt, key);
		return XDP_DROP;
	}

	policy = bpf_map_lookup_elem(&sluice_policy, &slot);
	if (!policy || policy->version == 0) {
		stat_add(SLUICE_STAT_NO_POLICY, 1);
		return XDP_PASS;
	}
	if (pkt->status != SLUICE_PARSE_OK)
		return account(SLUICE_CLASS_UNCLASSIFIED, sluice_decide_unparsed(policy, pkt->status), pkt->frame_len,
			       NULL);

	class_id = sluice_class_slot(classify(slot, pkt, policy));
	class_index = slot * SLUICE_MAX_CLASSES + class_id;
	scratch->class_index = class_index;
	cls = bpf_map_lookup_elem(&sluice_classes, &class_index);
	if (!cls) {
		stat_add(SLUICE_STAT_STATE_LOOKUP_FAILED, 1);
		return XDP_PASS;
	}
	sluice_source_key_make(key, pkt, cls);
	if (sluice_decide_action(cls, &d))
		return account(class_id, sluice_shadowed(cls, d), pkt->frame_len, key);

	if (!source_ref(&levels.source, cls, key) ||
	    !level_ref(&levels.new_sources, &cls->new_sources, &sluice_new_cpu, &sluice_new_shr, class_id) ||
	    !level_ref(&levels.aggregate, &cls->aggregate, &sluice_cls_cpu, &sluice_cls_shr, class_id) ||
	    !level_ref(&levels.global, &policy->global, &sluice_glb_cpu, &sluice_glb_shr, 0)) {
		stat_add(SLUICE_STAT_STATE_LOOKUP_FAILED, 1);
		return XDP_PASS;
	}
	levels.aggregate.window = &cls->aggregate_window;
	levels.fleet.credit = cls->fleet ? bpf_map_lookup_elem(&sluice_fleet, &class_id) : NULL;
	levels.fleet.unit = cls->fleet_unit;

	d = sluice_decide_counted(NULL, &levels, pkt->frame_len, pkt->tcp_syn, now);
	return account(class_id, sluice_shadowed(cls, d), pkt->frame_len, key);
}

/* The licence is the SPDX line's: GPL-2.0 OR Apache-2.0. The kernel reads this
 * string only to allow GPL-only helpers and has no spelling for a GPL/Apache
 * dual licence, so it names the GPL-2.0 side ("GPL v2", version 2 only, as
 * SPDX's GPL-2.0). */
char LICENSE[] SEC("license") = "GPL v2";
