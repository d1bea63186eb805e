/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kernel headers the rpcrdma-rs FFI layer is generated from.  bindgen reads
 * this file on every build (rust/Kbuild rule), so the Rust view of every
 * structure matches the configured kernel (struct rpc_xprt changes with
 * CONFIG_SUNRPC_BACKCHANNEL and CONFIG_SUNRPC_DEBUG).  Nothing generated is
 * ever checked in.
 */
#ifndef RPCRDMA_RS_HELPER_H
#define RPCRDMA_RS_HELPER_H

#include <linux/completion.h>
#include <linux/dma-mapping.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/inet.h>
#include <linux/shrinker.h>
#include <linux/slab.h>
#include <linux/sysctl.h>
#include <linux/socket.h>
#include <linux/sunrpc/addr.h>
#include <linux/sunrpc/bc_xprt.h>
#include <linux/sunrpc/svc.h>
#include <linux/sunrpc/svc_rdma.h>
#include <linux/sunrpc/svc_xprt.h>
#include <linux/sunrpc/xdr.h>
#include <linux/sunrpc/xprt.h>
#include <net/net_namespace.h>
#include <rdma/ib_cm.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>
#include <rdma/rw.h>

const char *rpcrdma_rs_ib_device_name(struct ib_device *device);

struct ib_pd *rpcrdma_rs_alloc_pd(struct ib_device *device, bool global_rkey);
void rpcrdma_rs_dealloc_pd(struct ib_pd *pd);
bool rpcrdma_rs_device_get(struct ib_device *device);
bool rpcrdma_rs_device_is_iwarp(struct ib_device *device);

/* memalloc_noio_save/restore (static inlines): allocations of the current
 * task neither start I/O nor enter filesystems until restored.
 */
unsigned int rpcrdma_rs_memalloc_noio_save(void);
void rpcrdma_rs_memalloc_noio_restore(unsigned int flags);


int rpcrdma_rs_dma_map(struct ib_device *device, void *cpu_addr, size_t size,
		       int to_device, u64 *dma_addr);
void rpcrdma_rs_dma_unmap(struct ib_device *device, u64 dma_addr, size_t size,
			  int to_device);
int rpcrdma_rs_dma_map_page(struct ib_device *device, struct page *page,
			    u32 off, u32 len, int to_device, u64 *dma_addr);
void rpcrdma_rs_dma_unmap_page(struct ib_device *device, u64 dma_addr, u32 len,
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
void *rpcrdma_rs_alloc_wq(const char *name);

int rpcrdma_rs_ib_post_send(struct ib_qp *qp, const struct ib_send_wr *wr);
int rpcrdma_rs_ib_post_send_bad(struct ib_qp *qp, const struct ib_send_wr *wr,
				const struct ib_send_wr **bad);
int rpcrdma_rs_ib_post_recv(struct ib_qp *qp, const struct ib_recv_wr *wr,
			    const struct ib_recv_wr **bad);

/* Slab caches (kmem_cache_alloc is a macro). */
struct kmem_cache *rpcrdma_rs_slab_create(const char *name, unsigned int size,
					  unsigned int align);
void *rpcrdma_rs_slab_alloc(struct kmem_cache *cache);

/* Module-wide counters kept per CPU (rust/percpu.rs): this_cpu_add and
 * per_cpu are macros. A slot at or above RPCRDMA_RS_PCPU_SLOTS is ignored
 * (adds) or reads 0.
 */
#define RPCRDMA_RS_PCPU_SLOTS 48
void rpcrdma_rs_pcpu_add(unsigned int slot, s64 n);
s64 rpcrdma_rs_pcpu_sum(unsigned int slot);
void rpcrdma_rs_pcpu_reset(unsigned int slot);

/* The module parameters (rust/params.c), as loaded. */
struct rpcrdma_rs_params {
	u32 max_requests;
	u32 max_inline_read;
	u32 max_inline_write;
	u32 fmr_pool_size;
	u32 fmr_pages_per_mr;
	u32 fmr_dirty_watermark;
	u32 cache_max_mb;
	bool svc_buf_cache;
	bool force_mr;
};
void rpcrdma_rs_params_get(struct rpcrdma_rs_params *p);
/* The memreg string; NUL-terminated, fixed after load. */
const char *rpcrdma_rs_param_memreg(void);
/* The svc_memreg string; NUL-terminated, fixed after load. */
const char *rpcrdma_rs_param_svc_memreg(void);

#include "xprt_helpers.h"
#include "svc_helpers.h"

#endif /* RPCRDMA_RS_HELPER_H */
