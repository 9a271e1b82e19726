/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A fleet quota's credit (struct sluice_fleet_credit), spent by the packet
 * path and granted by the control plane, shared by BPF, DPDK and the tests.
 *
 * Every unit a dataplane admits under a fleet quota was granted to it first:
 * a packet is admitted only if it can take its cost from `granted - taken`.
 * The take is one atomic add on the class's credit line, made only when the
 * credit looks sufficient, so a flood the credit cannot pay for reads the
 * line and writes nothing. Two CPUs racing for the last units both add; the
 * one whose add went past `granted` takes its cost back, so `taken` may stand
 * above `granted` for a moment, and never stays there.
 *
 * Why one shared counter rather than per-CPU leases as bucket.h's levels use:
 * credit a CPU leased and did not spend would be credit Redis granted this
 * node and the fleet cannot use; with one counter the node returns exactly
 * what it did not spend. The cost is one contended atomic per admitted
 * packet of a fleet class, and admitted packets are bounded by the quota.
 */
#ifndef SLUICE_FLEET_H
#define SLUICE_FLEET_H

#include "abi.h"

/* Units the credit still holds; negative when more was taken than granted
 * (a race's moment, or the control plane revoking credit being spent). */
SLUICE_INLINE __s64 sluice_fleet_available(const struct sluice_fleet_credit *credit)
{
	__u64 granted = SLUICE_LOAD64(&credit->granted);
	__u64 taken = SLUICE_LOAD64(&credit->taken);

	return (__s64)(granted - taken);
}

/* Takes `cost` units (1 .. SLUICE_COST_MAX) if the credit holds them.
 * Returns 1 if taken. */
SLUICE_INLINE int sluice_fleet_take(struct sluice_fleet_credit *credit, __u64 cost)
{
	__u64 before;

	if (sluice_fleet_available(credit) < (__s64)cost)
		return 0;
	before = __sync_fetch_and_add(&credit->taken, cost);
	if ((__s64)(SLUICE_LOAD64(&credit->granted) - before) >= (__s64)cost)
		return 1;
	__sync_fetch_and_sub(&credit->taken, cost); /* lost the race for the last units */
	return 0;
}

/* Gives back what sluice_fleet_take took, when a level after it refused. */
SLUICE_INLINE void sluice_fleet_refund(struct sluice_fleet_credit *credit, __u64 cost)
{
	__sync_fetch_and_sub(&credit->taken, cost);
}

/* The control plane's side: `delta` more units granted (negative: revoked).
 * It is the only writer of `granted`. */
SLUICE_INLINE void sluice_fleet_grant(struct sluice_fleet_credit *credit, __s64 delta)
{
	SLUICE_STORE64(&credit->granted, SLUICE_LOAD64(&credit->granted) + (__u64)delta);
}

#endif /* SLUICE_FLEET_H */
