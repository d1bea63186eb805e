/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The C helpers of rust/: what bindgen cannot turn into callable symbols
 * (static inlines and macros).  rdma.c and mr.c serve rust/rdma/, kext.c
 * serves rust/kext/.
 */
#ifndef RPCRDMA_RS_HELPERS_H
#define RPCRDMA_RS_HELPERS_H

/* ---- rdma.c ---- */

const char *rpcrdma_rs_ib_device_name(struct ib_device *device);

struct ib_pd *rpcrdma_rs_alloc_pd(struct ib_device *device, bool global_rkey);
void rpcrdma_rs_dealloc_pd(struct ib_pd *pd);
bool rpcrdma_rs_device_get(struct ib_device *device);
bool rpcrdma_rs_device_is_iwarp(struct ib_device *device);
bool rpcrdma_rs_uses_virt_dma(struct ib_device *device);

int rpcrdma_rs_dma_map(struct ib_device *device, void *cpu_addr, size_t size,
		       int to_device, u64 *dma_addr);
int rpcrdma_rs_dma_map_page(struct ib_device *device, struct page *page,
			    u32 off, u32 len, int to_device, u64 *dma_addr);
void rpcrdma_rs_dma_unmap(struct ib_device *device, u64 dma_addr, size_t len,
			  int to_device);
int rpcrdma_rs_map_page_run(struct ib_device *device, struct page *const *pages,
			    u32 n, u32 off, u32 len, u32 lkey,
			    struct ib_sge *sges, struct page **held);
void rpcrdma_rs_unmap_page_run(struct ib_device *device, struct page *const *held,
			       const struct ib_sge *sges, u32 n);
int rpcrdma_rs_dma_map_sink_pages(struct ib_device *device,
				  struct page *const *pages, u32 n, u64 *dmas);
void rpcrdma_rs_sink_pages_received(struct ib_device *device,
				    struct page *const *pages, const u64 *dmas,
				    u32 n, struct page **out);
void rpcrdma_rs_release_sink_pages(struct ib_device *device,
				   struct page *const *pages, const u64 *dmas,
				   u32 mapped, u32 n);
void rpcrdma_rs_dma_sync_for_cpu(struct ib_device *device, u64 dma_addr,
				 size_t size, int to_device);
void rpcrdma_rs_dma_sync_for_device(struct ib_device *device, u64 dma_addr,
				    size_t size, int to_device);

struct rdma_cm_id *rpcrdma_rs_cm_create_id(struct net *net,
					   rdma_cm_event_handler handler,
					   void *context);

bool rpcrdma_rs_cq_is_current(struct ib_cq *cq);

int rpcrdma_rs_ib_post_send(struct ib_qp *qp, const struct ib_send_wr *wr,
			    const struct ib_send_wr **bad);
int rpcrdma_rs_ib_post_recv(struct ib_qp *qp, const struct ib_recv_wr *wr,
			    const struct ib_recv_wr **bad);

/* ---- mr.c ---- */

/* A fast-registration MR with its scatterlist and REG_MR work request
 * (rust/rdma/mr.rs reads the keys and fills the work request).
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
void rpcrdma_rs_mr_sync(struct ib_device *device, struct rpcrdma_rs_mr *mr,
			bool for_device);
void rpcrdma_rs_mr_unmap(struct ib_device *device, struct rpcrdma_rs_mr *mr);
int rpcrdma_rs_mr_set_dma(struct rpcrdma_rs_mr *mr, u32 i, u64 dma_addr,
			  u32 len);
int rpcrdma_rs_mr_map_dma(struct ib_device *device, struct rpcrdma_rs_mr *mr,
			  u32 n);

/* ---- kext.c ---- */

/* memalloc_noio_save/restore (static inlines): allocations of the current
 * task neither start I/O nor enter filesystems until restored.
 */
unsigned int rpcrdma_rs_memalloc_noio_save(void);
void rpcrdma_rs_memalloc_noio_restore(unsigned int flags);

void *rpcrdma_rs_alloc_wq(const char *name);

struct page *rpcrdma_rs_virt_to_page(const void *virt);
void rpcrdma_rs_page_get(struct page *page);
void rpcrdma_rs_page_put(struct page *page);
u64 rpcrdma_rs_page_pfn(struct page *page);
struct page *rpcrdma_rs_alloc_page(void);
void *rpcrdma_rs_page_address(struct page *page);
void rpcrdma_rs_release_page_slots(struct page **slots, unsigned int nr,
				   unsigned int pages);

/* Slab caches (kmem_cache_alloc is a macro). */
struct kmem_cache *rpcrdma_rs_slab_create(const char *name, unsigned int size,
					  unsigned int align);
void *rpcrdma_rs_slab_alloc(struct kmem_cache *cache);

/* Module-wide counters kept per CPU (rust/kext/percpu.rs): this_cpu_add and
 * per_cpu are macros. A slot at or above RPCRDMA_RS_PCPU_SLOTS is ignored
 * (adds) or reads 0. One array per module (the KUnit module includes
 * kext.c too), in the module's static per-CPU area; x86_64 adds to it
 * inline from Rust, as this_cpu_add does (one %gs-relative add).
 */
#define RPCRDMA_RS_PCPU_SLOTS 64
struct rpcrdma_rs_pcpu {
	s64 v[RPCRDMA_RS_PCPU_SLOTS];
};
DECLARE_PER_CPU(struct rpcrdma_rs_pcpu, rpcrdma_rs_pcpu);
void rpcrdma_rs_pcpu_add(unsigned int slot, s64 n);
s64 rpcrdma_rs_pcpu_sum(unsigned int slot);
void rpcrdma_rs_pcpu_reset(unsigned int slot);

#endif /* RPCRDMA_RS_HELPERS_H */
