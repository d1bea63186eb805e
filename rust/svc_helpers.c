// SPDX-License-Identifier: GPL-2.0
/*
 * C shims of the sunrpc server side (see svc_helpers.h): the transport
 * class object, allocation of struct svc_xprt with a private pointer, flag
 * bits, and the parts of struct svc_rqst a transport fills in.
 */
#include "rpcrdma_rs_helper.h"
#include <linux/module.h>
#include <linux/sunrpc/addr.h>
#include <linux/sunrpc/svc_rdma.h>

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

struct svc_serv *rpcrdma_rs_svc_xprt_serv(struct svc_xprt *xprt)
{
	return xprt->xpt_server;
}

struct net *rpcrdma_rs_svc_xprt_net(struct svc_xprt *xprt)
{
	return xprt->xpt_net;
}

void rpcrdma_rs_svc_xprt_set_priv(struct svc_xprt *xprt, void *priv)
{
	container_of(xprt, struct rpcrdma_rs_svc_xprt, xprt)->priv = priv;
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

static int rpcrdma_rs_svc_bit(int flag)
{
	return flag == RPCRDMA_RS_XPT_CONN ? XPT_CONN : XPT_DATA;
}

void rpcrdma_rs_svc_xprt_set_flag(struct svc_xprt *xprt, int flag)
{
	set_bit(rpcrdma_rs_svc_bit(flag), &xprt->xpt_flags);
}

void rpcrdma_rs_svc_xprt_clear_flag(struct svc_xprt *xprt, int flag)
{
	clear_bit(rpcrdma_rs_svc_bit(flag), &xprt->xpt_flags);
}

void rpcrdma_rs_svc_xprt_enqueue(struct svc_xprt *xprt)
{
	svc_xprt_enqueue(xprt);
}

void rpcrdma_rs_svc_xprt_close(struct svc_xprt *xprt)
{
	svc_xprt_deferred_close(xprt);
}

void rpcrdma_rs_svc_xprt_received(struct svc_xprt *xprt)
{
	svc_xprt_received(xprt);
}

int rpcrdma_rs_svc_sockaddr(const struct sockaddr *sa, int salen, int *family,
			    u8 *addr, u16 *port)
{
	if (sa->sa_family == AF_INET && salen >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;

		*family = AF_INET;
		memcpy(addr, &sin->sin_addr, 4);
		*port = ntohs(sin->sin_port);
		return 0;
	}
	if (sa->sa_family == AF_INET6 && salen >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;

		*family = AF_INET6;
		memcpy(addr, &sin6->sin6_addr, 16);
		*port = ntohs(sin6->sin6_port);
		return 0;
	}
	return -EAFNOSUPPORT;
}

int rpcrdma_rs_svc_set_afonly(struct rdma_cm_id *id)
{
#if IS_ENABLED(CONFIG_IPV6)
	return rdma_set_afonly(id, 1);
#else
	return 0;
#endif
}

struct svc_xprt *rpcrdma_rs_svc_rqst_xprt(struct svc_rqst *rqstp)
{
	return rqstp->rq_xprt;
}

void rpcrdma_rs_svc_rqst_begin(struct svc_rqst *rqstp)
{
	/* A zero page count on error makes svc_rqst_release_pages() a no-op. */
	rqstp->rq_next_page = rqstp->rq_respages;
	rqstp->rq_xprt_ctxt = NULL;
}

/* Bytes of Call the arg pages hold (svc_alloc_arg keeps one page back). */
u32 rpcrdma_rs_svc_arg_max(struct svc_rqst *rqstp)
{
	if (rqstp->rq_maxpages < 2)
		return 0;
	return (rqstp->rq_maxpages - 1) * PAGE_SIZE;
}

/* Lays out rq_arg as TCP does: head = rq_pages[0], then rq_pages[1..]. */
int rpcrdma_rs_svc_arg_setup(struct svc_rqst *rqstp, u32 len)
{
	struct xdr_buf *arg = &rqstp->rq_arg;
	u32 head;

	if (len > rpcrdma_rs_svc_arg_max(rqstp))
		return -EMSGSIZE;
	head = min_t(u32, len, PAGE_SIZE);
	arg->head[0].iov_base = page_address(rqstp->rq_pages[0]);
	arg->head[0].iov_len = head;
	arg->pages = rqstp->rq_pages + 1;
	arg->page_base = 0;
	arg->page_len = len - head;
	arg->tail[0].iov_base = NULL;
	arg->tail[0].iov_len = 0;
	arg->len = len;
	arg->buflen = len;
	return 0;
}

int rpcrdma_rs_svc_arg_write(struct svc_rqst *rqstp, u32 offset,
			     const void *src, u32 len)
{
	if (offset > rqstp->rq_arg.len || len > rqstp->rq_arg.len - offset)
		return -EMSGSIZE;
	return write_bytes_to_xdr_buf(&rqstp->rq_arg, offset, (void *)src, len);
}

void rpcrdma_rs_svc_rqst_ready(struct svc_rqst *rqstp, void *ctxt)
{
	rqstp->rq_xprt_ctxt = ctxt;
	rqstp->rq_prot = IPPROTO_MAX;
	svc_xprt_copy_addrs(rqstp, rqstp->rq_xprt);
	set_bit(RQ_SECURE, &rqstp->rq_flags);
}

void *rpcrdma_rs_svc_rqst_ctxt(struct svc_rqst *rqstp)
{
	return rqstp->rq_xprt_ctxt;
}

u32 rpcrdma_rs_svc_res_len(struct svc_rqst *rqstp)
{
	const struct xdr_buf *xb = &rqstp->rq_res;

	return xb->head[0].iov_len + xb->page_len + xb->tail[0].iov_len;
}

int rpcrdma_rs_svc_res_read(struct svc_rqst *rqstp, u32 offset, void *dst,
			    u32 len)
{
	if (offset > rpcrdma_rs_svc_res_len(rqstp) ||
	    len > rpcrdma_rs_svc_res_len(rqstp) - offset)
		return -EMSGSIZE;
	return read_bytes_from_xdr_buf(&rqstp->rq_res, offset, dst, len);
}
