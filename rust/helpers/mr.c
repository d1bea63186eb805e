// SPDX-License-Identifier: GPL-2.0
/*
 * C for rust/rdma/mr.rs: a fast-registration MR with its scatterlist
 * (struct rpcrdma_rs_mr, helpers.h), mapped from pages or from DMA
 * addresses its owner already mapped, as frwr_ops.c does.
 */
#include <linux/random.h>
#include <linux/scatterlist.h>

#include "../bindings_helper.h"

struct rpcrdma_rs_mr *rpcrdma_rs_mr_alloc(struct ib_pd *pd, u32 max_pages)
{
	struct rpcrdma_rs_mr *mr;

	mr = kzalloc(struct_size(mr, sg, max_pages), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, max_pages);
	if (IS_ERR(mr->mr)) {
		long rc = PTR_ERR(mr->mr);

		kfree(mr);
		return ERR_PTR(rc);
	}
	mr->max_pages = max_pages;
	sg_init_table(mr->sg, max_pages);
	return mr;
}

/*
 * Deregisters first, then releases the DMA mapping of the last map_rqst:
 * until ib_dereg_mr() returns the rkey may still be valid (an MR dropped
 * because its LOCAL_INV could not be posted), and it must never name
 * unmapped IOVAs (the order DmaBuf's drop uses too).
 */
void rpcrdma_rs_mr_destroy(struct ib_device *device, struct rpcrdma_rs_mr *mr)
{
	ib_dereg_mr(mr->mr);
	if (mr->nents)
		ib_dma_unmap_sg(device, mr->sg, mr->nents, mr->dir);
	kfree(mr);
}

/* Entry @i of the MR's scatterlist, to be set while it is not DMA-mapped
 * by the MR itself. The table is initialised once, at allocation, and no
 * end marker is set since: every walk of it is bounded by the number of
 * entries set (ib_dma_map_sg(), ib_map_mr_sg(), the unmap and syncs), as
 * in frwr_map(), which reuses its table the same way. Initialising it
 * again for each mapping zeroed the whole table (8 KiB for a 257-page MR)
 * once per registration.
 */
static struct scatterlist *rpcrdma_rs_mr_sg_at(struct rpcrdma_rs_mr *mr, u32 i)
{
	if (mr->nents)
		return ERR_PTR(-EBUSY);
	if (i >= mr->max_pages)
		return ERR_PTR(-EINVAL);
	return &mr->sg[i];
}

/* Sets entry @i of the MR's scatterlist (the walk and its gap rule are
 * Rust, rust/rdma/mr.rs).
 */
int rpcrdma_rs_mr_sg_set(struct rpcrdma_rs_mr *mr, u32 i, struct page *page,
			 u32 off, u32 len)
{
	struct scatterlist *sg = rpcrdma_rs_mr_sg_at(mr, i);

	if (IS_ERR(sg))
		return PTR_ERR(sg);
	sg_set_page(sg, page, len, off);
	return 0;
}

/* Sets entries @i.. of the MR's scatterlist to @len bytes of the page array
 * @pages, from @off inside its first page: one entry per page, where only
 * the first starts inside its page and only the last may end inside one
 * (the page part of an xdr_buf, a run of whole pages). The state and the
 * bounds are checked once for the run, not per page. Returns the number of
 * entries set, or -EBUSY while mapped, -EINVAL if @len is 0, @off is not
 * inside a page or the run does not fit the MR.
 */
int rpcrdma_rs_mr_sg_set_pages(struct rpcrdma_rs_mr *mr, u32 i,
			       struct page *const *pages, u32 off, u32 len)
{
	struct scatterlist *sg;
	u64 n;
	u32 k;

	if (mr->nents)
		return -EBUSY;
	if (!len || off >= PAGE_SIZE)
		return -EINVAL;
	n = DIV_ROUND_UP((u64)off + len, PAGE_SIZE);
	if (i > mr->max_pages || n > mr->max_pages - i)
		return -EINVAL;
	sg = &mr->sg[i];
	/* The first entry from @off, whole pages, then what is left: the
	 * loop sets whole pages only, with no length to work out per page.
	 */
	sg_set_page(sg, pages[0], min_t(u32, PAGE_SIZE - off, len), off);
	len -= min_t(u32, PAGE_SIZE - off, len);
	for (k = 1; len > PAGE_SIZE; k++, len -= PAGE_SIZE)
		sg_set_page(&sg[k], pages[k], PAGE_SIZE, 0);
	if (len)
		sg_set_page(&sg[k], pages[k], len, 0);
	return n;
}

/* DMA-maps the first @n scatterlist entries and maps them into the MR with
 * a new key (C frwr_map).
 */
int rpcrdma_rs_mr_map_sg(struct ib_device *device, struct rpcrdma_rs_mr *mr,
			 u32 n, bool writable)
{
	int rc;

	if (mr->nents)
		return -EBUSY;
	if (!n || n > mr->max_pages)
		return -EINVAL;
	mr->dir = writable ? DMA_FROM_DEVICE : DMA_TO_DEVICE;
	mr->nents = ib_dma_map_sg(device, mr->sg, n, mr->dir);
	if (!mr->nents)
		return -EIO;
	rc = ib_map_mr_sg(mr->mr, mr->sg, mr->nents, NULL, PAGE_SIZE);
	if (rc != mr->nents) {
		ib_dma_unmap_sg(device, mr->sg, n, mr->dir);
		mr->nents = 0;
		return -EIO;
	}
	mr->nents = n;
	ib_update_fast_reg_key(mr->mr, ib_inc_rkey(mr->mr->rkey));
	return 0;
}

/* Hands a long-lived mapping of the MR's pages to the device before a
 * reuse (the CPU wrote them since) or back to the CPU after the device
 * wrote them: the registration cache keeps mappings across RPCs.
 */
void rpcrdma_rs_mr_sync(struct ib_device *device, struct rpcrdma_rs_mr *mr,
			bool for_device)
{
	if (!mr->nents || ib_uses_virt_dma(device))
		return;
	if (for_device)
		dma_sync_sg_for_device(device->dma_device, mr->sg, mr->nents, mr->dir);
	else
		dma_sync_sg_for_cpu(device->dma_device, mr->sg, mr->nents, mr->dir);
}

/* Sets entry @i of the MR's scatterlist to @len bytes at @dma_addr, a
 * range its owner already DMA-mapped (the client's write pad, a server Read
 * sink or the pages of one).
 */
int rpcrdma_rs_mr_set_dma(struct rpcrdma_rs_mr *mr, u32 i, u64 dma_addr,
			  u32 len)
{
	struct scatterlist *sg = rpcrdma_rs_mr_sg_at(mr, i);

	if (IS_ERR(sg))
		return PTR_ERR(sg);
	sg_dma_address(sg) = dma_addr;
	sg_dma_len(sg) = len;
	return 0;
}

/* Maps the first @n entries rpcrdma_rs_mr_set_dma() set into the MR with a
 * new key. FRWR maps page lists: only the first entry may start inside a
 * page and only the last may end inside one (the caller's rule, checked
 * again by ib_map_mr_sg()).
 */
int rpcrdma_rs_mr_map_dma(struct ib_device *device, struct rpcrdma_rs_mr *mr,
			  u32 n)
{
	int rc;

	if (mr->nents)
		return -EBUSY;
	if (!n || n > mr->max_pages)
		return -EINVAL;
	rc = ib_map_mr_sg(mr->mr, mr->sg, n, NULL, PAGE_SIZE);
	if (rc != n)
		return -EIO;
	/* Mapped by the caller's buffers: nothing to unmap here. */
	mr->nents = 0;
	mr->dir = DMA_BIDIRECTIONAL;
	ib_update_fast_reg_key(mr->mr, ib_inc_rkey(mr->mr->rkey));
	return 0;
}

void rpcrdma_rs_mr_unmap(struct ib_device *device, struct rpcrdma_rs_mr *mr)
{
	if (mr->nents) {
		ib_dma_unmap_sg(device, mr->sg, mr->nents, mr->dir);
		mr->nents = 0;
	}
}
