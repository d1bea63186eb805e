/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C shims of the sunrpc server side (svc_xprt, svc_rqst, svc_xprt_class),
 * used by rust/svc.rs.  Included by rpcrdma_rs_helper.h.
 *
 * Every shim takes scalars or pointers to structures that the Rust side
 * treats as opaque: no sunrpc structure layout is read from Rust.
 */
#ifndef RPCRDMA_RS_SVC_HELPERS_H
#define RPCRDMA_RS_SVC_HELPERS_H

struct svc_xprt;
struct svc_xprt_ops;
struct svc_rqst;
struct svc_serv;
struct rdma_cm_id;
struct net;
struct sockaddr;

struct rpc_rqst;

/*
 * Registers the "rdma" svc_xprt_class with @ops (owner: this module) and
 * the /proc/sys/sunrpc/svc_rdma table.
 */
int rpcrdma_rs_svc_register(const struct svc_xprt_ops *ops, u32 max_requests,
			    u32 max_req_size);

/* Counters shown in /proc/sys/sunrpc/svc_rdma/ (like C svcrdma's). */
enum rpcrdma_rs_svc_stat {
	RPCRDMA_RS_STAT_RECV = 0,	/* Calls received */
	RPCRDMA_RS_STAT_READ,		/* RDMA Read work requests posted */
	RPCRDMA_RS_STAT_WRITE,		/* RDMA Write work requests posted */
	RPCRDMA_RS_STAT_SQ_STARVE,	/* waits for a send queue slot */
	RPCRDMA_RS_STAT_READ_BYTES,	/* bytes pulled with RDMA Read */
	RPCRDMA_RS_STAT_WRITE_BYTES,	/* bytes pushed with RDMA Write */
	RPCRDMA_RS_STAT_REPLY_CHUNK,	/* Replies sent through a Reply chunk */
	RPCRDMA_RS_STAT_ERR_SENT,	/* RDMA_ERROR replies sent */
	RPCRDMA_RS_STAT_BC_CALLS,	/* backchannel Calls sent */
	RPCRDMA_RS_STAT_BC_REPLIES,	/* backchannel Replies received */
	RPCRDMA_RS_STAT_CACHE_HIT,	/* buffers reused from the cache */
	RPCRDMA_RS_STAT_CACHE_MISS,	/* buffers allocated and mapped */
	RPCRDMA_RS_STAT_BC_SETUP,	/* backchannel transports created */
	RPCRDMA_RS_STAT_BC_SEND_ERR,	/* backchannel Calls that failed */
	RPCRDMA_RS_STAT_MAX,
};
void rpcrdma_rs_svc_stat_add(int stat, u64 n);

/* Module parameter svc_buf_cache: keep bounce buffers mapped for reuse. */
/* Module parameter force_mr: register RDMA Read sinks on every device. */
void rpcrdma_rs_svc_unregister(void);

/* A svc_xprt with a Rust-owned private pointer. */
struct svc_xprt *rpcrdma_rs_svc_xprt_alloc(struct svc_serv *serv,
					   struct net *net, void *priv,
					   bool listener);
void *rpcrdma_rs_svc_xprt_priv(struct svc_xprt *xprt);
void rpcrdma_rs_svc_xprt_kfree(struct svc_xprt *xprt);
void rpcrdma_rs_svc_xprt_set_addrs(struct svc_xprt *xprt,
				   struct rdma_cm_id *id, bool listener);
void *rpcrdma_rs_page_address(struct page *page);

#endif
