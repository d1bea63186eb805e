// SPDX-License-Identifier: GPL-2.0
/*
 * C for rust/rdma/ where bindgen cannot reach: static inlines and macros of
 * the RDMA core and the DMA API (ib_post_send, ib_dma_map_page, rdma_create_id,
 * ...), and the page-run mappings that map a run of pages in one call.
 */
#include "../bindings_helper.h"

const char *rpcrdma_rs_ib_device_name(struct ib_device *device)
{
	return dev_name(&device->dev);
}

struct ib_pd *rpcrdma_rs_alloc_pd(struct ib_device *device, bool global_rkey)
{
	return ib_alloc_pd(device, global_rkey ? IB_PD_UNSAFE_GLOBAL_RKEY : 0);
}

void rpcrdma_rs_dealloc_pd(struct ib_pd *pd)
{
	ib_dealloc_pd(pd);
}

bool rpcrdma_rs_device_get(struct ib_device *device)
{
	return ib_device_try_get(device);
}

bool rpcrdma_rs_device_is_iwarp(struct ib_device *device)
{
	return rdma_protocol_iwarp(device, rdma_start_port(device));
}

bool rpcrdma_rs_uses_virt_dma(struct ib_device *device)
{
	return ib_uses_virt_dma(device);
}

static enum dma_data_direction rpcrdma_rs_dir(int to_device)
{
	return to_device ? DMA_TO_DEVICE : DMA_FROM_DEVICE;
}

int rpcrdma_rs_dma_map(struct ib_device *device, void *cpu_addr, size_t size,
		       int to_device, u64 *dma_addr)
{
	*dma_addr = ib_dma_map_single(device, cpu_addr, size, rpcrdma_rs_dir(to_device));
	return ib_dma_mapping_error(device, *dma_addr) ? -EIO : 0;
}

int rpcrdma_rs_dma_map_page(struct ib_device *device, struct page *page,
			    u32 off, u32 len, int to_device, u64 *dma_addr)
{
	*dma_addr = ib_dma_map_page(device, page, off, len, rpcrdma_rs_dir(to_device));
	return ib_dma_mapping_error(device, *dma_addr) ? -EIO : 0;
}

/* Undoes rpcrdma_rs_dma_map() and rpcrdma_rs_dma_map_page():
 * dma_unmap_single() is dma_unmap_page().
 */
void rpcrdma_rs_dma_unmap(struct ib_device *device, u64 dma_addr, size_t len,
			  int to_device)
{
	ib_dma_unmap_page(device, dma_addr, len, rpcrdma_rs_dir(to_device));
}

/* rpcrdma_rs_map_page_run() on a virtual-DMA device (rxe, siw), where the
 * "DMA address" is the kernel address and nothing is mapped: a loop of its
 * own, apart from the mapping loop below, that works out no length. Each
 * entry is made a whole page; the first and the last are cut to the run
 * after the loop.
 */
static int map_run_virt(struct page *const *pages, u32 n, u32 off, u32 len,
			u32 lkey, struct ib_sge *sges)
{
	struct ib_sge *sge = sges;

	if (n == 1) {
		/* The usual run (a 4 KiB READ's): one page, no loop. */
		if (unlikely(!*pages))
			return -EINVAL;
		sges[0] = (struct ib_sge){ (uintptr_t)page_address(*pages) + off, len, lkey };
		return 0;
	}
	for (struct page *const *p = pages; p < pages + n; p++, sge++) {
		if (unlikely(!*p))
			return -EINVAL;
		sge->addr = (uintptr_t)page_address(*p);
		sge->length = PAGE_SIZE;
		sge->lkey = lkey;
	}
	sges[n - 1].length = ((u64)off + len - 1) % PAGE_SIZE + 1;
	sges[0].addr += off;
	sges[0].length = min_t(u32, PAGE_SIZE - off, len);
	return 0;
}

/* rpcrdma_rs_map_page_run() on a device that maps: each page's part of the
 * run mapped for the device to read. A failure undoes the mappings made.
 */
static noinline int map_run_dma(struct ib_device *device, struct page *const *pages,
				u32 n, u32 off, u32 len, u32 lkey, struct ib_sge *sges)
{
	for (u32 i = 0, left = len; i < n; i++) {
		u32 l = min_t(u32, PAGE_SIZE - (i ? 0 : off), left);
		u64 addr = pages[i] ? ib_dma_map_page(device, pages[i], i ? 0 : off, l,
						      DMA_TO_DEVICE) : 0;

		if (!pages[i] || ib_dma_mapping_error(device, addr)) {
			rpcrdma_rs_unmap_page_run(device, NULL, sges, i);
			return pages[i] ? -EIO : -EINVAL;
		}
		sges[i] = (struct ib_sge){ addr, l, lkey };
		left -= l;
	}
	return 0;
}

/* Takes a reference on each of the @n pages at @pages and maps the bytes
 * [@off, @off + @len) of them, counted from the first page's first byte,
 * for the device to read: one scatter/gather entry per page, with @lkey,
 * written to @sges, and the page to @held (C svc_rdma_pagelist_to_bvec and
 * the mapping rdma_rw_ctx_init_bvec makes, in one call for one RDMA Write
 * rather than four calls per page). With @held NULL no reference is taken:
 * the caller keeps the pages (a Reply's, held until its Writes complete, as
 * C's send context does). The range must span exactly @n pages, none of
 * them NULL (checked here, where each entry is read anyway). Returns 0, or
 * -EINVAL or -EIO with nothing referenced or mapped.
 */
int rpcrdma_rs_map_page_run(struct ib_device *device, struct page *const *pages,
			    u32 n, u32 off, u32 len, u32 lkey,
			    struct ib_sge *sges, struct page **held)
{
	int rc;

	if (!n || !len || off >= PAGE_SIZE ||
	    DIV_ROUND_UP((u64)off + len, PAGE_SIZE) != n)
		return -EINVAL;
	/* Tested once, as ib_dma_map_sg() does. */
	rc = ib_uses_virt_dma(device) ? map_run_virt(pages, n, off, len, lkey, sges) :
					map_run_dma(device, pages, n, off, len, lkey, sges);
	if (rc)
		return rc;
	/* The references are taken once every page is mapped, so a failure
	 * undoes the mappings only.
	 */
	for (u32 i = 0; held && i < n; i++) {
		get_page(pages[i]);
		held[i] = pages[i];
	}
	return 0;
}

/* Undoes rpcrdma_rs_map_page_run() for its first @n entries: each mapping,
 * then the page's reference, if it took them (@held not NULL). On a
 * virtual-DMA device with no references that is nothing: no loop.
 */
void rpcrdma_rs_unmap_page_run(struct ib_device *device, struct page *const *held,
			       const struct ib_sge *sges, u32 n)
{
	bool virt = ib_uses_virt_dma(device);
	u32 i;

	for (i = 0; i < n && (held || !virt); i++) {
		if (!virt)
			ib_dma_unmap_page(device, sges[i].addr, sges[i].length, DMA_TO_DEVICE);
		if (held)
			put_page(held[i]);
	}
}

/* Maps each of the @n pages at @pages whole for the device to write (the
 * sinks of a Call's RDMA Reads, C svc_rdma_build_read_segment's pages),
 * writing the DMA addresses to @dmas. Returns 0, or -EIO with none mapped.
 */
int rpcrdma_rs_dma_map_sink_pages(struct ib_device *device,
				  struct page *const *pages, u32 n, u64 *dmas)
{
	u32 i;

	if (ib_uses_virt_dma(device)) {
		for (i = 0; i < n; i++)
			dmas[i] = (uintptr_t)page_address(pages[i]);
		return 0;
	}
	for (i = 0; i < n; i++) {
		u64 addr = ib_dma_map_page(device, pages[i], 0, PAGE_SIZE, DMA_FROM_DEVICE);

		if (ib_dma_mapping_error(device, addr)) {
			while (i--)
				ib_dma_unmap_page(device, dmas[i], PAGE_SIZE, DMA_FROM_DEVICE);
			return -EIO;
		}
		dmas[i] = addr;
	}
	return 0;
}

/* Unmaps the @n sink pages, which the device has finished writing (which
 * makes what it wrote visible to the CPU), and hands their references over:
 * the pages go to @out in order (C svc_rdma_read_complete moves rc_pages
 * into rq_pages).
 */
void rpcrdma_rs_sink_pages_received(struct ib_device *device,
				    struct page *const *pages, const u64 *dmas,
				    u32 n, struct page **out)
{
	u32 i;

	if (!ib_uses_virt_dma(device))
		for (i = 0; i < n; i++)
			ib_dma_unmap_page(device, dmas[i], PAGE_SIZE, DMA_FROM_DEVICE);
	memcpy(out, pages, n * sizeof(*out));
}

/* Unmaps the first @mapped of the @n sink pages and puts all @n in one
 * batch.
 */
void rpcrdma_rs_release_sink_pages(struct ib_device *device,
				   struct page *const *pages, const u64 *dmas,
				   u32 mapped, u32 n)
{
	u32 i;

	if (!ib_uses_virt_dma(device))
		for (i = 0; i < mapped; i++)
			ib_dma_unmap_page(device, dmas[i], PAGE_SIZE, DMA_FROM_DEVICE);
	release_pages((struct page **)pages, n);
}

void rpcrdma_rs_dma_sync_for_cpu(struct ib_device *device, u64 dma_addr,
				 size_t size, int to_device)
{
	ib_dma_sync_single_for_cpu(device, dma_addr, size, rpcrdma_rs_dir(to_device));
}

void rpcrdma_rs_dma_sync_for_device(struct ib_device *device, u64 dma_addr,
				    size_t size, int to_device)
{
	ib_dma_sync_single_for_device(device, dma_addr, size, rpcrdma_rs_dir(to_device));
}

struct rdma_cm_id *rpcrdma_rs_cm_create_id(struct net *net,
					   rdma_cm_event_handler handler,
					   void *context)
{
	return rdma_create_id(net, handler, context, RDMA_PS_TCP, IB_QPT_RC);
}

/* ib_post_send() and ib_post_recv() are static inlines; the work requests
 * are built in Rust (rust/rdma/verbs.rs).
 */
int rpcrdma_rs_ib_post_send(struct ib_qp *qp, const struct ib_send_wr *wr,
			    const struct ib_send_wr **bad)
{
	return ib_post_send(qp, wr, bad);
}

int rpcrdma_rs_ib_post_recv(struct ib_qp *qp, const struct ib_recv_wr *wr,
			    const struct ib_recv_wr **bad)
{
	return ib_post_recv(qp, wr, bad);
}

/* Whether the current thread runs @cq's completion work (IB_POLL_WORKQUEUE). */
bool rpcrdma_rs_cq_is_current(struct ib_cq *cq)
{
	return current_work() == &cq->work;
}
