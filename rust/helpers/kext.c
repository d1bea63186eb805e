// SPDX-License-Identifier: GPL-2.0
/*
 * C for the kernel-crate gaps in rust/kext/ that bindgen cannot reach:
 * static inlines and macros of the memory allocator, pages, per-CPU data
 * and workqueues.
 */
#include <linux/percpu.h>
#include <linux/sched/mm.h>

#include "../bindings_helper.h"

unsigned int rpcrdma_rs_memalloc_noio_save(void)
{
	return memalloc_noio_save();
}

void rpcrdma_rs_memalloc_noio_restore(unsigned int flags)
{
	memalloc_noio_restore(flags);
}

/* A workqueue of this module (alloc_workqueue is a variadic macro), with a
 * rescuer: its work (reconnects, MRs writeback waits for, teardowns) must
 * make progress under memory pressure.
 */
void *rpcrdma_rs_alloc_wq(const char *name)
{
	return alloc_workqueue("%s", WQ_UNBOUND | WQ_MEM_RECLAIM, 0, name);
}

/* ---- per-CPU counters ---- */

/* RPCRDMA_RS_PCPU_SLOTS * 8 bytes a CPU (helpers.h). */
DEFINE_PER_CPU(struct rpcrdma_rs_pcpu, rpcrdma_rs_pcpu);

void rpcrdma_rs_pcpu_add(unsigned int slot, s64 n)
{
	if (slot < RPCRDMA_RS_PCPU_SLOTS)
		this_cpu_add(rpcrdma_rs_pcpu.v[slot], n);
}

/* Not a snapshot: adds on other CPUs during the sum may or may not count,
 * as with percpu_counter_sum.
 */
s64 rpcrdma_rs_pcpu_sum(unsigned int slot)
{
	s64 sum = 0;
	int cpu;

	if (slot >= RPCRDMA_RS_PCPU_SLOTS)
		return 0;
	for_each_possible_cpu(cpu)
		sum += per_cpu(rpcrdma_rs_pcpu.v[slot], cpu);
	return sum;
}

/* As percpu_counter_set(c, 0): an add racing with it may survive. */
void rpcrdma_rs_pcpu_reset(unsigned int slot)
{
	int cpu;

	if (slot >= RPCRDMA_RS_PCPU_SLOTS)
		return;
	for_each_possible_cpu(cpu)
		WRITE_ONCE(per_cpu(rpcrdma_rs_pcpu.v[slot], cpu), 0);
}

/* ---- slab caches ---- */

struct kmem_cache *rpcrdma_rs_slab_create(const char *name, unsigned int size,
					  unsigned int align)
{
	return kmem_cache_create(name, size, align, SLAB_HWCACHE_ALIGN, NULL);
}

void *rpcrdma_rs_slab_alloc(struct kmem_cache *cache)
{
	return kmem_cache_alloc(cache, GFP_KERNEL);
}

/* get_page(), put_page() and page_to_pfn() are static inlines or macros:
 * the client registration cache (rust/rdma/run_mr.rs) keeps whole pages it
 * registered referenced while cached, keyed by page frame number.
 */
void rpcrdma_rs_page_get(struct page *page)
{
	get_page(page);
}

void rpcrdma_rs_page_put(struct page *page)
{
	put_page(page);
}

u64 rpcrdma_rs_page_pfn(struct page *page)
{
	return page_to_pfn(page);
}

/* virt_to_page() is a macro. */
struct page *rpcrdma_rs_virt_to_page(const void *virt)
{
	return virt_to_page(virt);
}

/* alloc_page() is a macro. */
struct page *rpcrdma_rs_alloc_page(void)
{
	return alloc_page(GFP_KERNEL);
}

/* page_address() is a macro or an inline, depending on the configuration. */
void *rpcrdma_rs_page_address(struct page *page)
{
	return page_address(page);
}

/*
 * Puts the pages of @nr page slots, in one batch: a request's about to be
 * overwritten, as C's svc_rdma_read_complete() does, or those a send
 * context held for its Writes. release_pages() takes no NULL entries: the
 * slots are compacted first, from the first NULL at or after @pages (the
 * caller found pages in the slots before it).
 */
void rpcrdma_rs_release_page_slots(struct page **slots, unsigned int nr,
				   unsigned int pages)
{
	unsigned int i, n;

	for (i = pages; i < nr && slots[i]; i++)
		;
	for (n = i; i < nr; i++)
		if (slots[i])
			slots[n++] = slots[i];
	release_pages(slots, n);
}
