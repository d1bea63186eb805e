// SPDX-License-Identifier: GPL-2.0
/*
 * C shims of the sunrpc server side (see svc_helpers.h): what bindgen
 * cannot reach. The class, its transports' allocation, the backchannel
 * class, the sysctl table and every read of svc_xprt and svc_rqst are Rust
 * (rust/svc*.rs).
 */
#include "rpcrdma_rs_helper.h"

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
