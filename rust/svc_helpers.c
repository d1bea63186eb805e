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

/*
 * Puts the pages of @nr page slots, in one batch: a request's about to be
 * overwritten, as C's svc_rdma_read_complete() does, or a Reply's page
 * array once its Writes are done with it. release_pages() takes no NULL
 * entries: the slots are compacted first.
 */
void rpcrdma_rs_release_page_slots(struct page **slots, unsigned int nr)
{
	unsigned int i, n = 0;

	for (i = 0; i < nr; i++)
		if (slots[i])
			slots[n++] = slots[i];
	release_pages(slots, n);
}
