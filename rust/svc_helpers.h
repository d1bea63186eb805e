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

/* Registers the "rdma" svc_xprt_class with @ops (owner: this module). */
int rpcrdma_rs_svc_register(const struct svc_xprt_ops *ops);
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
