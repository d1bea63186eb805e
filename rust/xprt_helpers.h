/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C shims of the client (xprtrdma) side; included by rpcrdma_rs_helper.h.
 * The class and its rpc_xprt_ops table are built in Rust
 * (rust/xprt_class.rs); what is left here is listed in xprt_helpers.c.
 */
#ifndef RPCRDMA_RS_XPRT_HELPERS_H
#define RPCRDMA_RS_XPRT_HELPERS_H

/* A fast-registration MR with its scatterlist and REG_MR work request
 * (rust/mr.rs reads the keys and fills the work request).
 */
struct rpcrdma_rs_mr {
	struct ib_mr *mr;
	u32 max_pages;
	int nents;		/* mapped scatterlist entries, 0 if unmapped */
	enum dma_data_direction dir;
	struct ib_reg_wr reg_wr;
	struct scatterlist sg[];
};
struct rpcrdma_rs_mr *rpcrdma_rs_mr_alloc(struct ib_pd *pd, u32 max_pages);
void rpcrdma_rs_mr_destroy(struct ib_device *device, struct rpcrdma_rs_mr *mr);
int rpcrdma_rs_mr_sg_set(struct rpcrdma_rs_mr *mr, u32 i, struct page *page,
			 u32 off, u32 len);
int rpcrdma_rs_mr_sg_set_pages(struct rpcrdma_rs_mr *mr, u32 i,
			       struct page *const *pages, u32 off, u32 len);
int rpcrdma_rs_mr_map_sg(struct ib_device *device, struct rpcrdma_rs_mr *mr,
			 u32 n, bool writable);
struct page *rpcrdma_rs_virt_to_page(const void *virt);
void rpcrdma_rs_page_get(struct page *page);
void rpcrdma_rs_page_put(struct page *page);
u64 rpcrdma_rs_page_pfn(struct page *page);
void rpcrdma_rs_mr_sync(struct ib_device *device, struct rpcrdma_rs_mr *mr,
			bool for_device);
void rpcrdma_rs_mr_unmap(struct ib_device *device, struct rpcrdma_rs_mr *mr);
int rpcrdma_rs_mr_set_dma(struct rpcrdma_rs_mr *mr, u32 i, u64 dma_addr,
			  u32 len);
int rpcrdma_rs_mr_map_dma(struct ib_device *device, struct rpcrdma_rs_mr *mr,
			  u32 n);

#endif
