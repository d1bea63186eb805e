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

struct page *rpcrdma_rs_alloc_page(void);
void *rpcrdma_rs_page_address(struct page *page);
void rpcrdma_rs_release_page_slots(struct page **slots, unsigned int nr);

#endif
