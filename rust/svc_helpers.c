// SPDX-License-Identifier: GPL-2.0
/*
 * C shims of the sunrpc server side (see svc_helpers.h): the transport
 * class object, allocation of struct svc_xprt with a private pointer and
 * its addresses. The backchannel class (rust/svc_bc.rs), the
 * /proc/sys/sunrpc/svc_rdma table (rust/svc_sysctl.rs) and every read of
 * svc_xprt and svc_rqst are Rust.
 */
#include "rpcrdma_rs_helper.h"
#include <linux/module.h>
#include <linux/sunrpc/addr.h>
#include <linux/sunrpc/svc_rdma.h>
#include <linux/sunrpc/xprt.h>

/* A struct svc_xprt and the Rust state behind it. */
struct rpcrdma_rs_svc_xprt {
	struct svc_xprt xprt;
	void *priv;
};

static struct svc_xprt_class rpcrdma_rs_svc_class = {
	.xcl_name = "rdma",
	.xcl_owner = THIS_MODULE,
	.xcl_max_payload = RPCSVC_MAXPAYLOAD_RDMA,
	.xcl_ident = XPRT_TRANSPORT_RDMA,
};

int rpcrdma_rs_svc_register(const struct svc_xprt_ops *ops)
{
	rpcrdma_rs_svc_class.xcl_ops = ops;
	return svc_reg_xprt_class(&rpcrdma_rs_svc_class);
}

void rpcrdma_rs_svc_unregister(void)
{
	svc_unreg_xprt_class(&rpcrdma_rs_svc_class);
}

struct svc_xprt *rpcrdma_rs_svc_xprt_alloc(struct svc_serv *serv,
					   struct net *net, void *priv,
					   bool listener)
{
	struct rpcrdma_rs_svc_xprt *x = kzalloc(sizeof(*x), GFP_KERNEL);

	if (!x)
		return NULL;
	svc_xprt_init(net, &rpcrdma_rs_svc_class, &x->xprt, serv);
	x->priv = priv;
	/* RDMA has flow control (RFC 7530 s. 3.1), like C svc_rdma. */
	set_bit(XPT_CONG_CTRL, &x->xprt.xpt_flags);
	if (listener) {
		set_bit(XPT_LISTENER, &x->xprt.xpt_flags);
		strscpy(x->xprt.xpt_remotebuf, "listener");
	}
	return &x->xprt;
}

void *rpcrdma_rs_svc_xprt_priv(struct svc_xprt *xprt)
{
	return container_of(xprt, struct rpcrdma_rs_svc_xprt, xprt)->priv;
}

void rpcrdma_rs_svc_xprt_kfree(struct svc_xprt *xprt)
{
	kfree(container_of(xprt, struct rpcrdma_rs_svc_xprt, xprt));
}

void rpcrdma_rs_svc_xprt_set_addrs(struct svc_xprt *xprt,
				   struct rdma_cm_id *id, bool listener)
{
	struct sockaddr *sa = (struct sockaddr *)&id->route.addr.src_addr;

	svc_xprt_set_local(xprt, sa, svc_addr_len(sa));
	if (listener)
		return;
	sa = (struct sockaddr *)&id->route.addr.dst_addr;
	xprt->xpt_remotelen = svc_addr_len(sa);
	memcpy(&xprt->xpt_remote, sa, xprt->xpt_remotelen);
	snprintf(xprt->xpt_remotebuf, sizeof(xprt->xpt_remotebuf) - 1,
		 "%pISc", sa);
	/* Fixed remote port so the DRC survives reconnects (as C). */
	rpc_set_port((struct sockaddr *)&xprt->xpt_remote, 0);
}

/* page_address() is a macro or an inline, depending on the configuration. */
void *rpcrdma_rs_page_address(struct page *page)
{
	return page_address(page);
}
