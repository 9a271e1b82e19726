// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
/*
 * Not the product: a small XDP program that runs every function of the shared
 * core (parse, source key, split and lease buckets under bpf_spin_lock,
 * composition, counters) over plain array maps, so the build proves the core
 * compiles for BPF and tests/bpf proves the kernel's verifier accepts it.
 * One bucket per level; the real per-source tables live in sluice.bpf.c.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define SLUICE_SHARED_LOCK(shared) bpf_spin_lock(&(shared)->lock)
#define SLUICE_SHARED_UNLOCK(shared) bpf_spin_unlock(&(shared)->lock)
#include "sluice/decide.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sluice_policy_header);
} check_policy SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sluice_class_entry);
} check_class SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SLUICE_LEVEL_COUNT);
	__type(key, __u32);
	__type(value, struct sluice_cpu_bucket);
} check_cpu_buckets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLUICE_LEVEL_COUNT);
	__type(key, __u32);
	__type(value, struct sluice_shared_bucket);
} check_shared_buckets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SLUICE_COUNTER_SLOTS);
	__type(key, __u32);
	__type(value, struct sluice_counter);
} check_counters SEC(".maps");

/* The last source key built, for the test to compare with the host's. */
struct sluice_source_key check_last_key;

static __always_inline int level_ref(__u32 level, const struct sluice_level_limit *limit,
				     struct sluice_level_ref *ref)
{
	ref->limit = limit;
	ref->cpu = bpf_map_lookup_elem(&check_cpu_buckets, &level);
	ref->shared = bpf_map_lookup_elem(&check_shared_buckets, &level);
	return ref->cpu && ref->shared;
}

static __always_inline int count(__u32 class_id, struct sluice_decision d, __u32 frame_len)
{
	__u32 index = sluice_counter_index(class_id, d.verdict, d.reason);
	struct sluice_counter *counter = bpf_map_lookup_elem(&check_counters, &index);

	if (counter) {
		counter->packets++;
		counter->bytes += frame_len;
	}
	return d.verdict == SLUICE_VERDICT_PASS ? XDP_PASS : XDP_DROP;
}

SEC("xdp")
int core_check(struct xdp_md *ctx)
{
	const __u8 *data = (const __u8 *)(long)ctx->data;
	const __u8 *data_end = (const __u8 *)(long)ctx->data_end;
	struct sluice_level_ref levels[SLUICE_LEVEL_COUNT];
	const struct sluice_policy_header *policy;
	const struct sluice_class_entry *cls;
	struct sluice_decision d;
	struct sluice_packet pkt;
	__u32 zero = 0;
	__u64 now;

	policy = bpf_map_lookup_elem(&check_policy, &zero);
	cls = bpf_map_lookup_elem(&check_class, &zero);
	if (!policy || !cls)
		return XDP_PASS;

	if (sluice_parse(data, data_end, &pkt) != SLUICE_PARSE_OK)
		return count(SLUICE_CLASS_UNCLASSIFIED, sluice_decide_unparsed(policy, pkt.status),
			     pkt.frame_len);
	if (sluice_decide_action(cls, &d))
		return count(cls->class_id, d, pkt.frame_len);

	sluice_source_key_make(&check_last_key, &pkt, cls);
	if (!level_ref(SLUICE_LEVEL_SOURCE, &cls->per_source, &levels[SLUICE_LEVEL_SOURCE]) ||
	    !level_ref(SLUICE_LEVEL_CLASS, &cls->aggregate, &levels[SLUICE_LEVEL_CLASS]) ||
	    !level_ref(SLUICE_LEVEL_GLOBAL, &policy->global, &levels[SLUICE_LEVEL_GLOBAL]))
		return count(cls->class_id, sluice_decide_table_full(cls), pkt.frame_len);

	now = bpf_ktime_get_ns();
	return count(cls->class_id, sluice_decide(levels, pkt.frame_len, now), pkt.frame_len);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
