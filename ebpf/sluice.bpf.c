// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
/*
 * Sluice's XDP program: parse -> classify (LPM) -> source bucket -> class
 * aggregate -> global ceiling -> PASS or DROP, per packet, at the driver.
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
 * State. Per-CPU maps on the fast path, shared spin-locked maps behind them
 * for lease mode (DESIGN.md section 4); buckets are keyed by class id, which
 * the control plane keeps stable per class name, so a new policy version
 * keeps every bucket.
 */
#include <linux/bpf.h>
#include <linux/errno.h>
#include <bpf/bpf_helpers.h>

#define SLUICE_SHARED_LOCK(shared) bpf_spin_lock(&(shared)->lock)
#define SLUICE_SHARED_UNLOCK(shared) bpf_spin_unlock(&(shared)->lock)
#include "sluice/decide.h"
#include "bench_sources.h" /* off unless sluice-bench sets it */

/* ---- load-time switches (set through the skeleton before load) ----------- */

/* Tests drive time through sluice_test_now_ns; production leaves this 0 and
 * the verifier removes the branch. */
const volatile __u8 sluice_use_test_clock = 0;
/* bpf_ktime_get_coarse_ns instead of bpf_ktime_get_ns (see sluice_now). */
const volatile __u8 sluice_use_coarse_clock = 0;
/* One drop in (mask + 1) is sent as an event; mask is a power of two minus 1. */
const volatile __u32 sluice_drop_sample_mask = 63;

__u64 sluice_test_now_ns = 0;

/* ---- maps ----------------------------------------------------------------- */

#define SLUICE_DEFAULT_SOURCES (1 << 18)

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
	__type(value, __u32);
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
	__uint(max_entries, SLUICE_POLICY_SLOTS * 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sluice_lpm_v4_key);
	__type(value, __u32);
} sluice_lpm_v4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, SLUICE_POLICY_SLOTS * 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sluice_lpm_v6_key);
	__type(value, __u32);
} sluice_lpm_v6 SEC(".maps");

/* Source level. The per-CPU table is LRU by default: idle sources are
 * evicted to make room; the loader may make it a plain hash instead. The
 * shared table of lease mode must be a plain hash: the kernel allows
 * bpf_spin_lock in HASH and ARRAY values but not in LRU_HASH. The control
 * plane deletes its idle entries (XdpDataplane::collect_idle_sources); when
 * a plain table is full, the class's on_table_full decides. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, SLUICE_DEFAULT_SOURCES);
	__type(key, struct sluice_source_key);
	__type(value, struct sluice_cpu_bucket);
} sluice_src_cpu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SLUICE_DEFAULT_SOURCES);
	__type(key, struct sluice_source_key);
	__type(value, struct sluice_shared_bucket);
} sluice_src_shr SEC(".maps");

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

/* Per-CPU drop count that drives 1-in-N event sampling. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} sluice_sampler SEC(".maps");

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

static __always_inline __u32 classify(__u32 slot, const struct sluice_packet *pkt, __u32 default_class)
{
	__u32 *class_id;

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

/* Find or create the state behind `key` in a source map. NULL means the
 * table could not take it (full, or out of memory). */
static __always_inline void *source_state(void *map, const struct sluice_source_key *key, __u32 insert_stat)
{
	/* Large enough for either value type; a zeroed value is a new bucket. */
	struct sluice_shared_bucket fresh = {};
	void *state = bpf_map_lookup_elem(map, key);
	long err;

	if (state)
		return state;
	err = bpf_map_update_elem(map, key, &fresh, BPF_NOEXIST);
	if (err && err != -EEXIST)
		return NULL;
	if (!err)
		stat_add(insert_stat, 1);
	return bpf_map_lookup_elem(map, key);
}

static __always_inline void send_drop_event(const struct sluice_source_key *key, __u32 frame_len, __u8 reason)
{
	struct sluice_drop_event *event;
	__u32 zero = 0;
	__u64 *drops = bpf_map_lookup_elem(&sluice_sampler, &zero);

	if (!drops || ((*drops)++ & sluice_drop_sample_mask) != 0)
		return;
	event = bpf_ringbuf_reserve(&sluice_events, sizeof(*event), 0);
	if (!event) {
		stat_add(SLUICE_STAT_DROP_EVENTS_LOST, 1);
		return;
	}
	event->time_ns = sluice_now(); /* only sampled drops pay for this read */
	event->source = *key;
	event->frame_len = frame_len;
	event->reason = reason;
	__builtin_memset(event->_pad, 0, sizeof(event->_pad));
	event->weight = (__u64)sluice_drop_sample_mask + 1;
	bpf_ringbuf_submit(event, 0);
	stat_add(SLUICE_STAT_DROP_EVENTS_SENT, 1);
}

/* Count the decision, sample it if it dropped a known source, and turn it
 * into an XDP action. */
static __always_inline int account(__u32 class_id, struct sluice_decision d, __u32 frame_len,
				   const struct sluice_source_key *key)
{
	__u32 index = sluice_counter_index(class_id & (SLUICE_MAX_CLASSES - 1), d.verdict & 1,
					   d.reason < SLUICE_REASON_COUNT ? d.reason : 0);
	struct sluice_counter *counter = bpf_map_lookup_elem(&sluice_counters, &index);

	if (counter) {
		counter->packets++;
		counter->bytes += frame_len;
	}
	if (d.verdict == SLUICE_VERDICT_PASS)
		return XDP_PASS;
	if (key)
		send_drop_event(key, frame_len, d.reason);
	return XDP_DROP;
}

/* Fill one level's refs; a level without a limit is left inactive. Returns 0
 * only when an enabled level's state is missing. */
static __always_inline int level_ref(struct sluice_level_ref *ref, const struct sluice_level_limit *limit,
				     void *cpu_map, void *shared_map, __u32 index)
{
	ref->limit = limit;
	ref->cpu = NULL;
	ref->shared = NULL;
	if (!limit->enabled)
		return 1;
	ref->cpu = bpf_map_lookup_elem(cpu_map, &index);
	if (limit->accuracy == SLUICE_ACCURACY_LEASE)
		ref->shared = bpf_map_lookup_elem(shared_map, &index);
	return ref->cpu && (limit->accuracy != SLUICE_ACCURACY_LEASE || ref->shared);
}

/* ---- the program -------------------------------------------------------------- */

SEC("xdp")
int sluice_xdp(struct xdp_md *ctx)
{
	const __u8 *data = (const __u8 *)(long)ctx->data;
	const __u8 *data_end = (const __u8 *)(long)ctx->data_end;
	struct sluice_level_ref levels[SLUICE_LEVEL_COUNT];
	const struct sluice_policy_header *policy;
	const struct sluice_class_entry *cls;
	const struct sluice_level_limit *src_limit;
	struct sluice_source_key key;
	struct sluice_decision d;
	struct sluice_packet pkt;
	__u32 zero = 0, slot, class_id, class_index;
	__u32 *active;

	bench_spread_source(ctx);
	/* The one read of the active slot: everything below uses `slot`. */
	active = bpf_map_lookup_elem(&sluice_active, &zero);
	if (!active)
		return XDP_PASS;
	slot = *active & (SLUICE_POLICY_SLOTS - 1);
	policy = bpf_map_lookup_elem(&sluice_policy, &slot);
	if (!policy || policy->version == 0) {
		stat_add(SLUICE_STAT_NO_POLICY, 1);
		return XDP_PASS;
	}

	if (sluice_parse(data, data_end, &pkt) != SLUICE_PARSE_OK)
		return account(SLUICE_CLASS_UNCLASSIFIED, sluice_decide_unparsed(policy, pkt.status), pkt.frame_len,
			       NULL);

	class_id = classify(slot, &pkt, policy->default_class_id) & (SLUICE_MAX_CLASSES - 1);
	class_index = slot * SLUICE_MAX_CLASSES + class_id;
	cls = bpf_map_lookup_elem(&sluice_classes, &class_index);
	if (!cls) {
		stat_add(SLUICE_STAT_STATE_LOOKUP_FAILED, 1);
		return XDP_PASS;
	}
	sluice_source_key_make(&key, &pkt, cls);
	if (sluice_decide_action(cls, &d))
		return account(class_id, d, pkt.frame_len, &key);

	/* Source level: found or created in the per-CPU table, and in the
	 * shared one when the class leases. */
	src_limit = &cls->per_source;
	levels[SLUICE_LEVEL_SOURCE].limit = src_limit;
	levels[SLUICE_LEVEL_SOURCE].cpu = NULL;
	levels[SLUICE_LEVEL_SOURCE].shared = NULL;
	if (src_limit->enabled) {
		levels[SLUICE_LEVEL_SOURCE].cpu = source_state(&sluice_src_cpu, &key, SLUICE_STAT_SOURCE_INSERTS);
		if (levels[SLUICE_LEVEL_SOURCE].cpu && src_limit->accuracy == SLUICE_ACCURACY_LEASE)
			levels[SLUICE_LEVEL_SOURCE].shared =
				source_state(&sluice_src_shr, &key, SLUICE_STAT_SHARED_SOURCE_INSERTS);
		if (!levels[SLUICE_LEVEL_SOURCE].cpu ||
		    (src_limit->accuracy == SLUICE_ACCURACY_LEASE && !levels[SLUICE_LEVEL_SOURCE].shared)) {
			stat_add(SLUICE_STAT_SOURCE_TABLE_FULL, 1);
			return account(class_id, sluice_decide_table_full(cls), pkt.frame_len, &key);
		}
	}

	if (!level_ref(&levels[SLUICE_LEVEL_CLASS], &cls->aggregate, &sluice_cls_cpu, &sluice_cls_shr, class_id) ||
	    !level_ref(&levels[SLUICE_LEVEL_GLOBAL], &policy->global, &sluice_glb_cpu, &sluice_glb_shr, 0)) {
		stat_add(SLUICE_STAT_STATE_LOOKUP_FAILED, 1);
		return XDP_PASS;
	}

	/* Time is read only for packets that reach a bucket. */
	d = sluice_decide(levels, pkt.frame_len, sluice_now());
	return account(class_id, d, pkt.frame_len, &key);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
