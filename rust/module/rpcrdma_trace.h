/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Trace events of rpcrdma_rs, in the "rpcrdma" system like the C module's
 * (include/trace/events/rpcrdma.h): same event names and, where this
 * module has the data, the same fields and output, so that recipes such as
 * "trace-cmd record -e rpcrdma" work unchanged. The two modules cannot be
 * loaded together (both register the "rdma" transport classes), so their
 * events never clash.
 *
 * Defined in rpcrdma_trace.c (CREATE_TRACE_POINTS), called from Rust
 * through the rust_do_trace_<name>() functions CREATE_RUST_TRACE_POINTS
 * generates; the static-key check is done on the Rust side (rust/module/trace.rs).
 * Arguments are scalars or pointers to objects the caller keeps alive for
 * the call (rpc_xprt, rpc_rqst, rdma_cm_id, a socket address).
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM rpcrdma

#if !defined(_RPCRDMA_RS_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _RPCRDMA_RS_TRACE_H

#include <linux/in6.h>
#include <linux/socket.h>
#include <linux/sunrpc/clnt.h>
#include <linux/sunrpc/sched.h>
#include <linux/sunrpc/xprt.h>
#include <linux/tracepoint.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

#include "../helpers/helpers.h"

#include <trace/misc/sunrpc.h>

/* The peer of a client transport, as C's rpcrdma_addrstr/rpcrdma_portstr. */
#define rpcrdma_rs_addrstr(x) ((x)->address_strings[RPC_DISPLAY_ADDR])
#define rpcrdma_rs_portstr(x) ((x)->address_strings[RPC_DISPLAY_PORT])

/* Task and client of a request; 0 and -1 (as C) when there is none. */
#define rpcrdma_rs_task_id(rqst)					\
	((rqst) && (rqst)->rq_task ? (rqst)->rq_task->tk_pid : 0)
#define rpcrdma_rs_client_id(rqst)					\
	((rqst) && (rqst)->rq_task && (rqst)->rq_task->tk_client ?	\
	 (rqst)->rq_task->tk_client->cl_clid : -1)

/* Chunk types, numbered as C's enum rpcrdma_chunktype (xprt_rdma.h). */
#define RPCRDMA_RS_NOCH		0
#define RPCRDMA_RS_NOCH_PULLUP	1
#define RPCRDMA_RS_NOCH_MAPPED	2
#define RPCRDMA_RS_READCH	3
#define RPCRDMA_RS_AREADCH	4
#define RPCRDMA_RS_WRITECH	5
#define RPCRDMA_RS_REPLYCH	6

#define rpcrdma_rs_show_chunktype(x)					\
		__print_symbolic(x,					\
				{ RPCRDMA_RS_NOCH, "inline" },		\
				{ RPCRDMA_RS_NOCH_PULLUP, "pullup" },	\
				{ RPCRDMA_RS_NOCH_MAPPED, "mapped" },	\
				{ RPCRDMA_RS_READCH, "read list" },	\
				{ RPCRDMA_RS_AREADCH, "*read list" },	\
				{ RPCRDMA_RS_WRITECH, "write list" },	\
				{ RPCRDMA_RS_REPLYCH, "reply chunk" })

/* DMA directions of an MR (enum dma_data_direction values). */
#define rpcrdma_rs_show_direction(x)					\
		__print_symbolic(x,					\
				{ 0, "BIDIR" },				\
				{ 1, "TO_DEVICE" },			\
				{ 2, "FROM_DEVICE" },			\
				{ 3, "NONE" })

/**
 ** Client: connections
 **/

DECLARE_EVENT_CLASS(xprtrdma_connect_class,
	TP_PROTO(
		const struct rpc_xprt *xprt,
		int rc
	),

	TP_ARGS(xprt, rc),

	TP_STRUCT__entry(
		__field(int, rc)
		__string(addr, rpcrdma_rs_addrstr(xprt))
		__string(port, rpcrdma_rs_portstr(xprt))
	),

	TP_fast_assign(
		__entry->rc = rc;
		__assign_str(addr);
		__assign_str(port);
	),

	TP_printk("peer=[%s]:%s rc=%d",
		__get_str(addr), __get_str(port), __entry->rc
	)
);

#define DEFINE_CONN_EVENT(name)						\
		DEFINE_EVENT(xprtrdma_connect_class, xprtrdma_##name,	\
				TP_PROTO(				\
					const struct rpc_xprt *xprt,	\
					int rc				\
				),					\
				TP_ARGS(xprt, rc))

DEFINE_CONN_EVENT(connect);
DEFINE_CONN_EVENT(disconnect);

DECLARE_EVENT_CLASS(xprtrdma_rxprt,
	TP_PROTO(
		const struct rpc_xprt *xprt
	),

	TP_ARGS(xprt),

	TP_STRUCT__entry(
		__string(addr, rpcrdma_rs_addrstr(xprt))
		__string(port, rpcrdma_rs_portstr(xprt))
	),

	TP_fast_assign(
		__assign_str(addr);
		__assign_str(port);
	),

	TP_printk("peer=[%s]:%s",
		__get_str(addr), __get_str(port)
	)
);

#define DEFINE_RXPRT_EVENT(name)					\
		DEFINE_EVENT(xprtrdma_rxprt, name,			\
				TP_PROTO(				\
					const struct rpc_xprt *xprt	\
				),					\
				TP_ARGS(xprt))

DEFINE_RXPRT_EVENT(xprtrdma_op_inject_dsc);
DEFINE_RXPRT_EVENT(xprtrdma_device_removal);

TRACE_EVENT(xprtrdma_op_connect,
	TP_PROTO(
		const struct rpc_xprt *xprt,
		unsigned long delay
	),

	TP_ARGS(xprt, delay),

	TP_STRUCT__entry(
		__field(unsigned long, delay)
		__string(addr, rpcrdma_rs_addrstr(xprt))
		__string(port, rpcrdma_rs_portstr(xprt))
	),

	TP_fast_assign(
		__entry->delay = delay;
		__assign_str(addr);
		__assign_str(port);
	),

	TP_printk("peer=[%s]:%s delay=%lu",
		__get_str(addr), __get_str(port), __entry->delay
	)
);

TRACE_EVENT(xprtrdma_inline_thresh,
	TP_PROTO(
		const struct rpc_xprt *xprt,
		unsigned int inline_send,
		unsigned int inline_recv,
		unsigned int max_send,
		unsigned int max_recv
	),

	TP_ARGS(xprt, inline_send, inline_recv, max_send, max_recv),

	TP_STRUCT__entry(
		__field(unsigned int, inline_send)
		__field(unsigned int, inline_recv)
		__field(unsigned int, max_send)
		__field(unsigned int, max_recv)
		__string(addr, rpcrdma_rs_addrstr(xprt))
		__string(port, rpcrdma_rs_portstr(xprt))
	),

	TP_fast_assign(
		__entry->inline_send = inline_send;
		__entry->inline_recv = inline_recv;
		__entry->max_send = max_send;
		__entry->max_recv = max_recv;
		__assign_str(addr);
		__assign_str(port);
	),

	TP_printk("peer=[%s]:%s neg send/recv=%u/%u, calc send/recv=%u/%u",
		__get_str(addr), __get_str(port),
		__entry->inline_send, __entry->inline_recv,
		__entry->max_send, __entry->max_recv
	)
);

TRACE_EVENT(xprtrdma_createmrs,
	TP_PROTO(
		const struct rpc_xprt *xprt,
		unsigned int count
	),

	TP_ARGS(xprt, count),

	TP_STRUCT__entry(
		__string(addr, rpcrdma_rs_addrstr(xprt))
		__string(port, rpcrdma_rs_portstr(xprt))
		__field(unsigned int, count)
	),

	TP_fast_assign(
		__entry->count = count;
		__assign_str(addr);
		__assign_str(port);
	),

	TP_printk("peer=[%s]:%s created %u MRs",
		__get_str(addr), __get_str(port), __entry->count
	)
);

TRACE_EVENT(xprtrdma_nomrs_err,
	TP_PROTO(
		const struct rpc_xprt *xprt,
		const struct rpc_rqst *rqst
	),

	TP_ARGS(xprt, rqst),

	TP_STRUCT__entry(
		__field(unsigned int, task_id)
		__field(unsigned int, client_id)
		__string(addr, rpcrdma_rs_addrstr(xprt))
		__string(port, rpcrdma_rs_portstr(xprt))
	),

	TP_fast_assign(
		__entry->task_id = rpcrdma_rs_task_id(rqst);
		__entry->client_id = rpcrdma_rs_client_id(rqst);
		__assign_str(addr);
		__assign_str(port);
	),

	TP_printk(SUNRPC_TRACE_TASK_SPECIFIER " peer=[%s]:%s",
		__entry->task_id, __entry->client_id,
		__get_str(addr), __get_str(port)
	)
);

/**
 ** Client: calls
 **/

TRACE_EVENT(xprtrdma_marshal,
	TP_PROTO(
		const struct rpc_rqst *rqst,
		unsigned int hdrlen,
		unsigned int rtype,
		unsigned int wtype
	),

	TP_ARGS(rqst, hdrlen, rtype, wtype),

	TP_STRUCT__entry(
		__field(unsigned int, task_id)
		__field(unsigned int, client_id)
		__field(u32, xid)
		__field(unsigned int, hdrlen)
		__field(unsigned int, headlen)
		__field(unsigned int, pagelen)
		__field(unsigned int, taillen)
		__field(unsigned int, rtype)
		__field(unsigned int, wtype)
	),

	TP_fast_assign(
		__entry->task_id = rpcrdma_rs_task_id(rqst);
		__entry->client_id = rpcrdma_rs_client_id(rqst);
		__entry->xid = be32_to_cpu(rqst->rq_xid);
		__entry->hdrlen = hdrlen;
		__entry->headlen = rqst->rq_snd_buf.head[0].iov_len;
		__entry->pagelen = rqst->rq_snd_buf.page_len;
		__entry->taillen = rqst->rq_snd_buf.tail[0].iov_len;
		__entry->rtype = rtype;
		__entry->wtype = wtype;
	),

	TP_printk(SUNRPC_TRACE_TASK_SPECIFIER
		  " xid=0x%08x hdr=%u xdr=%u/%u/%u %s/%s",
		__entry->task_id, __entry->client_id, __entry->xid,
		__entry->hdrlen,
		__entry->headlen, __entry->pagelen, __entry->taillen,
		rpcrdma_rs_show_chunktype(__entry->rtype),
		rpcrdma_rs_show_chunktype(__entry->wtype)
	)
);

DECLARE_EVENT_CLASS(xprtrdma_rqst_status_class,
	TP_PROTO(
		const struct rpc_rqst *rqst,
		int ret
	),

	TP_ARGS(rqst, ret),

	TP_STRUCT__entry(
		__field(unsigned int, task_id)
		__field(unsigned int, client_id)
		__field(u32, xid)
		__field(int, ret)
	),

	TP_fast_assign(
		__entry->task_id = rpcrdma_rs_task_id(rqst);
		__entry->client_id = rpcrdma_rs_client_id(rqst);
		__entry->xid = be32_to_cpu(rqst->rq_xid);
		__entry->ret = ret;
	),

	TP_printk(SUNRPC_TRACE_TASK_SPECIFIER " xid=0x%08x ret=%d",
		__entry->task_id, __entry->client_id, __entry->xid,
		__entry->ret
	)
);

DEFINE_EVENT(xprtrdma_rqst_status_class, xprtrdma_marshal_failed,
	TP_PROTO(const struct rpc_rqst *rqst, int ret),
	TP_ARGS(rqst, ret));
DEFINE_EVENT(xprtrdma_rqst_status_class, xprtrdma_post_send_err,
	TP_PROTO(const struct rpc_rqst *rqst, int ret),
	TP_ARGS(rqst, ret));

TRACE_EVENT(xprtrdma_post_send,
	TP_PROTO(
		const struct rpc_rqst *rqst,
		unsigned int length
	),

	TP_ARGS(rqst, length),

	TP_STRUCT__entry(
		__field(unsigned int, task_id)
		__field(unsigned int, client_id)
		__field(u32, xid)
		__field(unsigned int, length)
	),

	TP_fast_assign(
		__entry->task_id = rpcrdma_rs_task_id(rqst);
		__entry->client_id = rpcrdma_rs_client_id(rqst);
		__entry->xid = be32_to_cpu(rqst->rq_xid);
		__entry->length = length;
	),

	TP_printk(SUNRPC_TRACE_TASK_SPECIFIER " xid=0x%08x length=%u",
		__entry->task_id, __entry->client_id, __entry->xid,
		__entry->length
	)
);

TRACE_EVENT(xprtrdma_chunk_read,
	TP_PROTO(
		const struct rpc_rqst *rqst,
		unsigned int pos,
		u32 handle,
		u32 length,
		u64 offset,
		bool is_last
	),

	TP_ARGS(rqst, pos, handle, length, offset, is_last),

	TP_STRUCT__entry(
		__field(unsigned int, task_id)
		__field(unsigned int, client_id)
		__field(unsigned int, pos)
		__field(u32, handle)
		__field(u32, length)
		__field(u64, offset)
		__field(bool, is_last)
	),

	TP_fast_assign(
		__entry->task_id = rpcrdma_rs_task_id(rqst);
		__entry->client_id = rpcrdma_rs_client_id(rqst);
		__entry->pos = pos;
		__entry->handle = handle;
		__entry->length = length;
		__entry->offset = offset;
		__entry->is_last = is_last;
	),

	TP_printk(SUNRPC_TRACE_TASK_SPECIFIER
		  " pos=%u %u@0x%016llx:0x%08x (%s)",
		__entry->task_id, __entry->client_id,
		__entry->pos, __entry->length,
		(unsigned long long)__entry->offset, __entry->handle,
		__entry->is_last ? "last" : "more"
	)
);

DECLARE_EVENT_CLASS(xprtrdma_wrch_event,
	TP_PROTO(
		const struct rpc_rqst *rqst,
		u32 handle,
		u32 length,
		u64 offset,
		bool is_last
	),

	TP_ARGS(rqst, handle, length, offset, is_last),

	TP_STRUCT__entry(
		__field(unsigned int, task_id)
		__field(unsigned int, client_id)
		__field(u32, handle)
		__field(u32, length)
		__field(u64, offset)
		__field(bool, is_last)
	),

	TP_fast_assign(
		__entry->task_id = rpcrdma_rs_task_id(rqst);
		__entry->client_id = rpcrdma_rs_client_id(rqst);
		__entry->handle = handle;
		__entry->length = length;
		__entry->offset = offset;
		__entry->is_last = is_last;
	),

	TP_printk(SUNRPC_TRACE_TASK_SPECIFIER
		  " %u@0x%016llx:0x%08x (%s)",
		__entry->task_id, __entry->client_id,
		__entry->length, (unsigned long long)__entry->offset,
		__entry->handle,
		__entry->is_last ? "last" : "more"
	)
);

#define DEFINE_WRCH_EVENT(name)						\
		DEFINE_EVENT(xprtrdma_wrch_event, xprtrdma_chunk_##name,\
				TP_PROTO(				\
					const struct rpc_rqst *rqst,	\
					u32 handle,			\
					u32 length,			\
					u64 offset,			\
					bool is_last			\
				),					\
				TP_ARGS(rqst, handle, length, offset, is_last))

DEFINE_WRCH_EVENT(write);
DEFINE_WRCH_EVENT(reply);

/**
 ** Client: memory registration
 **/

DECLARE_EVENT_CLASS(xprtrdma_mr_class,
	TP_PROTO(
		const struct rpc_rqst *rqst,
		const struct rpcrdma_rs_mr *mr
	),

	TP_ARGS(rqst, mr),

	TP_STRUCT__entry(
		__field(unsigned int, task_id)
		__field(unsigned int, client_id)
		__field(u32, mr_id)
		__field(int, nents)
		__field(u32, handle)
		__field(u32, length)
		__field(u64, offset)
		__field(u32, dir)
	),

	TP_fast_assign(
		__entry->task_id = rpcrdma_rs_task_id(rqst);
		__entry->client_id = rpcrdma_rs_client_id(rqst);
		__entry->mr_id  = mr->mr->res.id;
		__entry->nents  = mr->nents;
		__entry->handle = mr->mr->rkey;
		__entry->length = mr->mr->length;
		__entry->offset = mr->mr->iova;
		__entry->dir    = mr->dir;
	),

	TP_printk(SUNRPC_TRACE_TASK_SPECIFIER
		  " mr.id=%u nents=%d %u@0x%016llx:0x%08x (%s)",
		__entry->task_id, __entry->client_id,
		__entry->mr_id, __entry->nents, __entry->length,
		(unsigned long long)__entry->offset, __entry->handle,
		rpcrdma_rs_show_direction(__entry->dir)
	)
);

#define DEFINE_MR_EVENT(name)						\
		DEFINE_EVENT(xprtrdma_mr_class,				\
				xprtrdma_mr_##name,			\
				TP_PROTO(				\
					const struct rpc_rqst *rqst,	\
					const struct rpcrdma_rs_mr *mr	\
				),					\
				TP_ARGS(rqst, mr))

DEFINE_MR_EVENT(fastreg);
DEFINE_MR_EVENT(localinv);
DEFINE_MR_EVENT(reminv);
DEFINE_MR_EVENT(map);

TRACE_EVENT(xprtrdma_mr_unmap,
	TP_PROTO(
		const struct rpcrdma_rs_mr *mr
	),

	TP_ARGS(mr),

	TP_STRUCT__entry(
		__field(u32, mr_id)
		__field(int, nents)
		__field(u32, handle)
		__field(u32, length)
		__field(u64, offset)
		__field(u32, dir)
	),

	TP_fast_assign(
		__entry->mr_id  = mr->mr->res.id;
		__entry->nents  = mr->nents;
		__entry->handle = mr->mr->rkey;
		__entry->length = mr->mr->length;
		__entry->offset = mr->mr->iova;
		__entry->dir    = mr->dir;
	),

	TP_printk("mr.id=%u nents=%d %u@0x%016llx:0x%08x (%s)",
		__entry->mr_id, __entry->nents, __entry->length,
		(unsigned long long)__entry->offset, __entry->handle,
		rpcrdma_rs_show_direction(__entry->dir)
	)
);

TRACE_EVENT(xprtrdma_post_linv_err,
	TP_PROTO(
		u32 xid,
		int status
	),

	TP_ARGS(xid, status),

	TP_STRUCT__entry(
		__field(u32, xid)
		__field(int, status)
	),

	TP_fast_assign(
		__entry->xid = xid;
		__entry->status = status;
	),

	TP_printk("xid=0x%08x status=%d", __entry->xid, __entry->status)
);

/**
 ** Client: replies
 **/

TRACE_EVENT(xprtrdma_reply,
	TP_PROTO(
		const struct rpc_rqst *rqst,
		u32 xid,
		unsigned int credits
	),

	TP_ARGS(rqst, xid, credits),

	TP_STRUCT__entry(
		__field(unsigned int, task_id)
		__field(unsigned int, client_id)
		__field(u32, xid)
		__field(unsigned int, credits)
	),

	TP_fast_assign(
		__entry->task_id = rpcrdma_rs_task_id(rqst);
		__entry->client_id = rpcrdma_rs_client_id(rqst);
		__entry->xid = xid;
		__entry->credits = credits;
	),

	TP_printk(SUNRPC_TRACE_TASK_SPECIFIER " xid=0x%08x credits=%u",
		__entry->task_id, __entry->client_id, __entry->xid,
		__entry->credits
	)
);

DECLARE_EVENT_CLASS(xprtrdma_reply_class,
	TP_PROTO(
		const struct rpc_xprt *xprt,
		u32 xid,
		u32 version,
		u32 proc
	),

	TP_ARGS(xprt, xid, version, proc),

	TP_STRUCT__entry(
		__field(u32, xid)
		__field(u32, version)
		__field(u32, proc)
		__string(addr, rpcrdma_rs_addrstr(xprt))
		__string(port, rpcrdma_rs_portstr(xprt))
	),

	TP_fast_assign(
		__entry->xid = xid;
		__entry->version = version;
		__entry->proc = proc;
		__assign_str(addr);
		__assign_str(port);
	),

	TP_printk("peer=[%s]:%s xid=0x%08x version=%u proc=%u",
		__get_str(addr), __get_str(port),
		__entry->xid, __entry->version, __entry->proc
	)
);

#define DEFINE_REPLY_EVENT(name)					\
		DEFINE_EVENT(xprtrdma_reply_class,			\
				xprtrdma_reply_##name##_err,		\
				TP_PROTO(				\
					const struct rpc_xprt *xprt,	\
					u32 xid,			\
					u32 version,			\
					u32 proc			\
				),					\
				TP_ARGS(xprt, xid, version, proc))

DEFINE_REPLY_EVENT(vers);
DEFINE_REPLY_EVENT(rqst);
DEFINE_REPLY_EVENT(short);
DEFINE_REPLY_EVENT(hdr);

TRACE_EVENT(xprtrdma_err_vers,
	TP_PROTO(
		const struct rpc_rqst *rqst,
		u32 min,
		u32 max
	),

	TP_ARGS(rqst, min, max),

	TP_STRUCT__entry(
		__field(unsigned int, task_id)
		__field(unsigned int, client_id)
		__field(u32, xid)
		__field(u32, min)
		__field(u32, max)
	),

	TP_fast_assign(
		__entry->task_id = rpcrdma_rs_task_id(rqst);
		__entry->client_id = rpcrdma_rs_client_id(rqst);
		__entry->xid = be32_to_cpu(rqst->rq_xid);
		__entry->min = min;
		__entry->max = max;
	),

	TP_printk(SUNRPC_TRACE_TASK_SPECIFIER " xid=0x%08x versions=[%u, %u]",
		__entry->task_id, __entry->client_id, __entry->xid,
		__entry->min, __entry->max
	)
);

TRACE_EVENT(xprtrdma_err_chunk,
	TP_PROTO(
		const struct rpc_rqst *rqst
	),

	TP_ARGS(rqst),

	TP_STRUCT__entry(
		__field(unsigned int, task_id)
		__field(unsigned int, client_id)
		__field(u32, xid)
	),

	TP_fast_assign(
		__entry->task_id = rpcrdma_rs_task_id(rqst);
		__entry->client_id = rpcrdma_rs_client_id(rqst);
		__entry->xid = be32_to_cpu(rqst->rq_xid);
	),

	TP_printk(SUNRPC_TRACE_TASK_SPECIFIER " xid=0x%08x",
		__entry->task_id, __entry->client_id, __entry->xid
	)
);

TRACE_EVENT(xprtrdma_err_unrecognized,
	TP_PROTO(
		const struct rpc_rqst *rqst,
		u32 procedure
	),

	TP_ARGS(rqst, procedure),

	TP_STRUCT__entry(
		__field(unsigned int, task_id)
		__field(unsigned int, client_id)
		__field(u32, xid)
		__field(u32, procedure)
	),

	TP_fast_assign(
		__entry->task_id = rpcrdma_rs_task_id(rqst);
		__entry->client_id = rpcrdma_rs_client_id(rqst);
		__entry->xid = be32_to_cpu(rqst->rq_xid);
		__entry->procedure = procedure;
	),

	TP_printk(SUNRPC_TRACE_TASK_SPECIFIER " xid=0x%08x procedure=%u",
		__entry->task_id, __entry->client_id, __entry->xid,
		__entry->procedure
	)
);

/**
 ** Server: connections
 **/

TRACE_EVENT(svcrdma_accept,
	TP_PROTO(
		const struct sockaddr *peer,
		unsigned int credits,
		unsigned int inline_send,
		unsigned int inline_recv,
		unsigned int ird
	),

	TP_ARGS(peer, credits, inline_send, inline_recv, ird),

	TP_STRUCT__entry(
		__array(unsigned char, addr, sizeof(struct sockaddr_in6))
		__field(unsigned int, credits)
		__field(unsigned int, inline_send)
		__field(unsigned int, inline_recv)
		__field(unsigned int, ird)
	),

	TP_fast_assign(
		memcpy(__entry->addr, peer, sizeof(struct sockaddr_in6));
		__entry->credits = credits;
		__entry->inline_send = inline_send;
		__entry->inline_recv = inline_recv;
		__entry->ird = ird;
	),

	TP_printk("addr=%pISpc credits=%u inline send/recv=%u/%u ird=%u",
		__entry->addr, __entry->credits, __entry->inline_send,
		__entry->inline_recv, __entry->ird
	)
);

DECLARE_EVENT_CLASS(svcrdma_accept_class,
	TP_PROTO(
		const struct sockaddr *peer,
		long status
	),

	TP_ARGS(peer, status),

	TP_STRUCT__entry(
		__field(long, status)
		__array(unsigned char, addr, sizeof(struct sockaddr_in6))
	),

	TP_fast_assign(
		__entry->status = status;
		memcpy(__entry->addr, peer, sizeof(struct sockaddr_in6));
	),

	TP_printk("addr=%pISpc status=%ld",
		__entry->addr, __entry->status
	)
);

#define DEFINE_ACCEPT_EVENT(name) \
		DEFINE_EVENT(svcrdma_accept_class, svcrdma_##name##_err, \
				TP_PROTO( \
					const struct sockaddr *peer, \
					long status \
				), \
				TP_ARGS(peer, status))

DEFINE_ACCEPT_EVENT(pd);
DEFINE_ACCEPT_EVENT(qp);
DEFINE_ACCEPT_EVENT(initdepth);
DEFINE_ACCEPT_EVENT(accept);

/**
 ** Server: calls (xpo_recvfrom)
 **/

#define rpcrdma_rs_show_proc(x)						\
		__print_symbolic(x,					\
				{ 0, "RDMA_MSG" },			\
				{ 1, "RDMA_NOMSG" },			\
				{ 2, "RDMA_MSGP" },			\
				{ 3, "RDMA_DONE" },			\
				{ 4, "RDMA_ERROR" })

TRACE_EVENT(svcrdma_decode_rqst,
	TP_PROTO(
		u32 xid,
		u32 vers,
		u32 credits,
		u32 proc,
		unsigned int hdrlen
	),

	TP_ARGS(xid, vers, credits, proc, hdrlen),

	TP_STRUCT__entry(
		__field(u32, xid)
		__field(u32, vers)
		__field(u32, proc)
		__field(u32, credits)
		__field(unsigned int, hdrlen)
	),

	TP_fast_assign(
		__entry->xid = xid;
		__entry->vers = vers;
		__entry->proc = proc;
		__entry->credits = credits;
		__entry->hdrlen = hdrlen;
	),

	TP_printk("xid=0x%08x vers=%u credits=%u proc=%s hdrlen=%u",
		__entry->xid, __entry->vers, __entry->credits,
		rpcrdma_rs_show_proc(__entry->proc), __entry->hdrlen)
);

DECLARE_EVENT_CLASS(svcrdma_badreq_event,
	TP_PROTO(
		u32 xid,
		u32 vers,
		u32 credits,
		u32 proc
	),

	TP_ARGS(xid, vers, credits, proc),

	TP_STRUCT__entry(
		__field(u32, xid)
		__field(u32, vers)
		__field(u32, proc)
		__field(u32, credits)
	),

	TP_fast_assign(
		__entry->xid = xid;
		__entry->vers = vers;
		__entry->credits = credits;
		__entry->proc = proc;
	),

	TP_printk("xid=0x%08x vers=%u credits=%u proc=%u",
		__entry->xid, __entry->vers, __entry->credits, __entry->proc)
);

#define DEFINE_BADREQ_EVENT(name)					\
		DEFINE_EVENT(svcrdma_badreq_event,			\
			     svcrdma_decode_##name##_err,		\
				TP_PROTO(				\
					u32 xid,			\
					u32 vers,			\
					u32 credits,			\
					u32 proc			\
				),					\
				TP_ARGS(xid, vers, credits, proc))

DEFINE_BADREQ_EVENT(badvers);
DEFINE_BADREQ_EVENT(drop);
DEFINE_BADREQ_EVENT(badproc);
DEFINE_BADREQ_EVENT(parse);

DECLARE_EVENT_CLASS(svcrdma_error_event,
	TP_PROTO(
		u32 xid
	),

	TP_ARGS(xid),

	TP_STRUCT__entry(
		__field(u32, xid)
	),

	TP_fast_assign(
		__entry->xid = xid;
	),

	TP_printk("xid=0x%08x",
		__entry->xid
	)
);

#define DEFINE_ERROR_EVENT(name)					\
		DEFINE_EVENT(svcrdma_error_event, svcrdma_err_##name,	\
				TP_PROTO(				\
					u32 xid				\
				),					\
				TP_ARGS(xid))

DEFINE_ERROR_EVENT(vers);
DEFINE_ERROR_EVENT(chunk);

/**
 ** Server: RDMA Read, Write and Send
 **/

DECLARE_EVENT_CLASS(svcrdma_post_chunk_class,
	TP_PROTO(
		int sqecount,
		unsigned int length
	),

	TP_ARGS(sqecount, length),

	TP_STRUCT__entry(
		__field(int, sqecount)
		__field(unsigned int, length)
	),

	TP_fast_assign(
		__entry->sqecount = sqecount;
		__entry->length = length;
	),

	TP_printk("sqecount=%d length=%u",
		__entry->sqecount, __entry->length
	)
);

#define DEFINE_POST_CHUNK_EVENT(name)					\
		DEFINE_EVENT(svcrdma_post_chunk_class,			\
				svcrdma_post_##name##_chunk,		\
				TP_PROTO(				\
					int sqecount,			\
					unsigned int length		\
				),					\
				TP_ARGS(sqecount, length))

DEFINE_POST_CHUNK_EVENT(read);
DEFINE_POST_CHUNK_EVENT(write);
DEFINE_POST_CHUNK_EVENT(reply);

TRACE_EVENT(svcrdma_post_send,
	TP_PROTO(
		unsigned int length,
		u32 inv_rkey
	),

	TP_ARGS(length, inv_rkey),

	TP_STRUCT__entry(
		__field(unsigned int, num_sge)
		__field(unsigned int, length)
		__field(u32, inv_rkey)
	),

	TP_fast_assign(
		/* Every Send of this module is one bounce buffer. */
		__entry->num_sge = 1;
		__entry->length = length;
		__entry->inv_rkey = inv_rkey;
	),

	TP_printk("num_sge=%u length=%u inv_rkey=0x%08x",
		__entry->num_sge, __entry->length, __entry->inv_rkey
	)
);

TRACE_EVENT(svcrdma_send_err,
	TP_PROTO(
		const struct sockaddr *peer,
		u32 xid,
		int status
	),

	TP_ARGS(peer, xid, status),

	TP_STRUCT__entry(
		__field(int, status)
		__field(u32, xid)
		__array(unsigned char, addr, sizeof(struct sockaddr_in6))
	),

	TP_fast_assign(
		__entry->status = status;
		__entry->xid = xid;
		memcpy(__entry->addr, peer, sizeof(struct sockaddr_in6));
	),

	TP_printk("addr=%pISpc xid=0x%08x status=%d", __entry->addr,
		__entry->xid, __entry->status
	)
);

DECLARE_EVENT_CLASS(svcrdma_send_flush_class,
	TP_PROTO(
		int status
	),

	TP_ARGS(status),

	TP_STRUCT__entry(
		__field(int, status)
	),

	TP_fast_assign(
		__entry->status = status;
	),

	TP_printk("status=%d", __entry->status)
);

DEFINE_EVENT(svcrdma_send_flush_class, svcrdma_wc_send_err,
	TP_PROTO(int status),
	TP_ARGS(status));
DEFINE_EVENT(svcrdma_send_flush_class, svcrdma_wc_read_err,
	TP_PROTO(int status),
	TP_ARGS(status));

DECLARE_EVENT_CLASS(svcrdma_sendqueue_class,
	TP_PROTO(
		unsigned int avail
	),

	TP_ARGS(avail),

	TP_STRUCT__entry(
		__field(unsigned int, avail)
	),

	TP_fast_assign(
		__entry->avail = avail;
	),

	TP_printk("avail=%u", __entry->avail)
);

DEFINE_EVENT(svcrdma_sendqueue_class, svcrdma_sq_full,
	TP_PROTO(unsigned int avail),
	TP_ARGS(avail));
DEFINE_EVENT(svcrdma_sendqueue_class, svcrdma_sq_retry,
	TP_PROTO(unsigned int avail),
	TP_ARGS(avail));

#endif /* _RPCRDMA_RS_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE rpcrdma_trace

#include <trace/define_trace.h>
