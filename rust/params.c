// SPDX-License-Identifier: GPL-2.0
/*
 * The module parameters, all eleven, declared in C so that every one is shown
 * read-only in /sys/module/rpcrdma_rs/parameters/: Rust's module! macro
 * gives each parameter it declares permissions 0, which hides it there.
 * Rust reads them once at load (rpcrdma_rs_params_get, rust/params.rs),
 * checks them (src/config.rs) and refuses the load on a bad value; 0444
 * keeps them fixed afterwards. The client's runtime tunables are the
 * sysctls of xprtrdma/sysctl.rs and rust/svc_sysctl.rs, seeded from here.
 */
#include "rpcrdma_rs_helper.h"
#include <linux/moduleparam.h>

static unsigned int rpcrdma_rs_max_requests = 128;
module_param_named(max_requests, rpcrdma_rs_max_requests, uint, 0444);
MODULE_PARM_DESC(max_requests,
		 "Credits (concurrent RPC requests) per connection, 4..16384 (default 128)");

static unsigned int rpcrdma_rs_max_inline_read = 4096;
module_param_named(max_inline_read, rpcrdma_rs_max_inline_read, uint, 0444);
MODULE_PARM_DESC(max_inline_read,
		 "Largest inline reply in bytes, 1024..65536 (default 4096)");

static unsigned int rpcrdma_rs_max_inline_write = 4096;
module_param_named(max_inline_write, rpcrdma_rs_max_inline_write, uint, 0444);
MODULE_PARM_DESC(max_inline_write,
		 "Largest inline call in bytes, 1024..65536 (default 4096)");

static char rpcrdma_rs_memreg[16] = "fmr";
module_param_string(memreg, rpcrdma_rs_memreg, sizeof(rpcrdma_rs_memreg), 0444);
MODULE_PARM_DESC(memreg,
		 "Client memory registration: fmr (default; FMR-style pool semantics built on FRWR work requests, since the kernel removed the FMR verbs in 5.8: MRs allocated per connection at connect time, mapped per I/O with REG_MR, invalidated with LOCAL_INV, optionally in batches) physical (global steering tag: the server can read and write ALL client memory; trusted servers only) or cache (registrations of whole I/O pages kept across RPCs, up to cache_max_mb per connection: the server can read or write those pages until they are evicted; trusted servers only)");

static unsigned int rpcrdma_rs_fmr_pool_size;
module_param_named(fmr_pool_size, rpcrdma_rs_fmr_pool_size, uint, 0444);
MODULE_PARM_DESC(fmr_pool_size,
		 "Client memreg=fmr (FMR-style pool on FRWR work requests): MRs allocated per connection at connect time (0: 4 per credit)");

static unsigned int rpcrdma_rs_fmr_pages_per_mr;
module_param_named(fmr_pages_per_mr, rpcrdma_rs_fmr_pages_per_mr, uint, 0444);
MODULE_PARM_DESC(fmr_pages_per_mr,
		 "Client memreg=fmr: pages per MR, 1..257 (0: the device's limit, at most 257)");

static unsigned int rpcrdma_rs_fmr_dirty_watermark;
module_param_named(fmr_dirty_watermark, rpcrdma_rs_fmr_dirty_watermark, uint, 0444);
MODULE_PARM_DESC(fmr_dirty_watermark,
		 "Client memreg=fmr: MRs left registered after their RPC before a batched invalidation (0: invalidate before every RPC completes; >0 lets the server read and write the pages and the kmalloc'd reply buffer of completed RPCs, i.e. memory reused by others, until the batch runs, at most 1 s later)");

static unsigned int rpcrdma_rs_cache_max_mb = 64;
module_param_named(cache_max_mb, rpcrdma_rs_cache_max_mb, uint, 0444);
MODULE_PARM_DESC(cache_max_mb,
		 "Client memreg=cache: MiB of pages each connection keeps registered (and referenced) across RPCs, 1..65536 (default 64); the server can read or write them while they stay cached");

static char rpcrdma_rs_svc_memreg[16] = "direct";
module_param_string(svc_memreg, rpcrdma_rs_svc_memreg, sizeof(rpcrdma_rs_svc_memreg), 0444);
MODULE_PARM_DESC(svc_memreg,
		 "Server: how Write chunks leave and Read chunks arrive: direct (default; RDMA Writes straight from the Reply's pages, and on devices whose Read sinks need no registration a Call's single Read chunk RDMA-Read into pages handed to the request; no copy) or cache (both copied through buffers of the slab-backed registration cache, see svc_buf_cache)");

static bool rpcrdma_rs_svc_buf_cache = true;
module_param_named(svc_buf_cache, rpcrdma_rs_svc_buf_cache, bool, 0444);
MODULE_PARM_DESC(svc_buf_cache,
		 "Server: keep RDMA bounce and Send buffers mapped, and RDMA Read sinks registered where the device needs it, for reuse (default Y)");

static bool rpcrdma_rs_force_mr;
module_param_named(force_mr, rpcrdma_rs_force_mr, bool, 0444);
MODULE_PARM_DESC(force_mr,
		 "Server: register RDMA Read sinks with a fast-registration MR even where the device does not need it (RoCE/IB; iWARP always does) (default N)");

void rpcrdma_rs_params_get(struct rpcrdma_rs_params *p)
{
	p->max_requests = rpcrdma_rs_max_requests;
	p->max_inline_read = rpcrdma_rs_max_inline_read;
	p->max_inline_write = rpcrdma_rs_max_inline_write;
	p->fmr_pool_size = rpcrdma_rs_fmr_pool_size;
	p->fmr_pages_per_mr = rpcrdma_rs_fmr_pages_per_mr;
	p->fmr_dirty_watermark = rpcrdma_rs_fmr_dirty_watermark;
	p->cache_max_mb = rpcrdma_rs_cache_max_mb;
	p->svc_buf_cache = rpcrdma_rs_svc_buf_cache;
	p->force_mr = rpcrdma_rs_force_mr;
}

const char *rpcrdma_rs_param_memreg(void)
{
	return rpcrdma_rs_memreg;
}

const char *rpcrdma_rs_param_svc_memreg(void)
{
	return rpcrdma_rs_svc_memreg;
}
