/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shared buckets' lock outside BPF (DPDK workers, host benchmarks): a
 * test-and-test-and-set spinlock on the word BPF uses for bpf_spin_lock, so
 * every backend shares one bucket layout. Include before sluice/decide.h.
 */
#ifndef SLUICE_HOST_LOCK_H
#define SLUICE_HOST_LOCK_H

#include "sluice/abi.h"

static inline void sluice_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

static inline void sluice_lock_word(__u32 *word)
{
	while (__atomic_exchange_n(word, 1u, __ATOMIC_ACQUIRE) != 0) {
		while (__atomic_load_n(word, __ATOMIC_RELAXED) != 0)
			sluice_cpu_relax();
	}
}

static inline void sluice_unlock_word(__u32 *word)
{
	__atomic_store_n(word, 0u, __ATOMIC_RELEASE);
}

#define SLUICE_SHARED_LOCK(shared) sluice_lock_word(&(shared)->lock.val)
#define SLUICE_SHARED_UNLOCK(shared) sluice_unlock_word(&(shared)->lock.val)

#endif /* SLUICE_HOST_LOCK_H */
