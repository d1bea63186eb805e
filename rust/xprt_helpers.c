// SPDX-License-Identifier: GPL-2.0
/*
 * C shims of the client (xprtrdma) side (see xprt_helpers.h): the static
 * xprt_class and rpc_xprt_ops tables, the parts of transport setup that
 * fill struct rpc_xprt (as net/sunrpc/xprtrdma/transport.c does), data
 * movement between xdr_bufs and our buffers, and fast registration of
 * xdr_buf ranges (as frwr_ops.c does).
 */
#include "rpcrdma_rs_helper.h"
#include <linux/sunrpc/addr.h>
#include <linux/sunrpc/bc_xprt.h>
#include <linux/sunrpc/clnt.h>
#include <linux/sunrpc/msg_prot.h>
#include <linux/random.h>
#include <linux/scatterlist.h>
#include <linux/workqueue.h>

#define RPCRDMA_RS_BIND_TO (60U * HZ)
#define RPCRDMA_RS_INIT_REEST_TO (5U * HZ)
#define RPCRDMA_RS_IDLE_DISC_TO (5U * 60 * HZ)
#define RPCRDMA_RS_MAX_SLOTS 128
#define RPCRDMA_RS_MAX_DATA_SEGS ((1 * 1024 * 1024) / PAGE_SIZE + 1)

struct rpcrdma_rs_xprt {
	struct rpc_xprt xprt;	/* first: xprt_alloc() sizes the container */
	void *state;		/* Rust state */
	struct delayed_work connect_worker;
	/* Runs the Rust ->flush callback (batched invalidations of an idle
	 * connection, see rpcrdma_rs_xprt_schedule_flush()).
	 */
	struct delayed_work flush_worker;
	bool connect_failed;
	u32 bc_max_payload;	/* largest backchannel message, set at connect */
};

static const struct rpcrdma_rs_xprt_cbs *rpcrdma_rs_cbs;
/*
 * Where connect workers run: the module's own queue (C uses sunrpc's
 * xprtiod_workqueue), WQ_MEM_RECLAIM so a reconnect makes progress under
 * memory pressure. Allocated before the class is registered, destroyed
 * (drained) after it is unregistered, when no transport is left.
 */
static struct workqueue_struct *rpcrdma_rs_connect_wq;

#if defined(CONFIG_SUNRPC_BACKCHANNEL)
static void rpcrdma_rs_xprt_bc_destroy(struct rpc_xprt *xprt,
				       unsigned int max_reqs);
#endif

static struct rpcrdma_rs_xprt *to_rsx(struct rpc_xprt *xprt)
{
	return container_of(xprt, struct rpcrdma_rs_xprt, xprt);
}

/* 60 second timeout, no retries (transport.c) */
static const struct rpc_timeout rpcrdma_rs_default_timeout = {
	.to_initval = 60 * HZ,
	.to_maxval = 60 * HZ,
};

static void rpcrdma_rs_format_addresses(struct rpc_xprt *xprt,
					struct sockaddr *sap)
{
	char buf[128];

	if (sap->sa_family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)sap;

		snprintf(buf, sizeof(buf), "%08x", ntohl(sin->sin_addr.s_addr));
		xprt->address_strings[RPC_DISPLAY_NETID] = RPCBIND_NETID_RDMA;
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)sap;

		snprintf(buf, sizeof(buf), "%pi6", &sin6->sin6_addr);
		xprt->address_strings[RPC_DISPLAY_NETID] = RPCBIND_NETID_RDMA6;
	}
	xprt->address_strings[RPC_DISPLAY_HEX_ADDR] = kstrdup(buf, GFP_KERNEL);
	(void)rpc_ntop(sap, buf, sizeof(buf));
	xprt->address_strings[RPC_DISPLAY_ADDR] = kstrdup(buf, GFP_KERNEL);
	snprintf(buf, sizeof(buf), "%u", rpc_get_port(sap));
	xprt->address_strings[RPC_DISPLAY_PORT] = kstrdup(buf, GFP_KERNEL);
	snprintf(buf, sizeof(buf), "%4hx", rpc_get_port(sap));
	xprt->address_strings[RPC_DISPLAY_HEX_PORT] = kstrdup(buf, GFP_KERNEL);
	xprt->address_strings[RPC_DISPLAY_PROTO] = "rdma";
}

static void rpcrdma_rs_free_addresses(struct rpc_xprt *xprt)
{
	unsigned int i;

	for (i = 0; i < RPC_DISPLAY_MAX; i++)
		if (i != RPC_DISPLAY_PROTO && i != RPC_DISPLAY_NETID)
			kfree(xprt->address_strings[i]);
}

static void rpcrdma_rs_connect_worker(struct work_struct *work)
{
	struct rpcrdma_rs_xprt *rsx = container_of(work, struct rpcrdma_rs_xprt,
						   connect_worker.work);
	struct rpc_xprt *xprt = &rsx->xprt;
	int rc;

	rc = rpcrdma_rs_cbs->connect(rsx->state);
	xprt_clear_connecting(xprt);
	if (!rc) {
		rsx->connect_failed = false;
		xprt->connect_cookie++;
		xprt->stat.connect_count++;
		xprt->stat.connect_time += (long)jiffies -
					   xprt->stat.connect_start;
		xprt_set_connected(xprt);
		rc = -EAGAIN;
	} else {
		rsx->connect_failed = true;
	}
	xprt_unlock_connect(xprt, rsx);
	xprt_wake_pending_tasks(xprt, rc);
}

static void rpcrdma_rs_flush_worker(struct work_struct *work)
{
	struct rpcrdma_rs_xprt *rsx = container_of(work, struct rpcrdma_rs_xprt,
						   flush_worker.work);

	rpcrdma_rs_cbs->flush(rsx->state);
}

/*
 * Runs ->flush within @ms milliseconds, unless it is already scheduled (then
 * the earlier deadline stands).  Callable from any context.  The module's
 * queue is WQ_MEM_RECLAIM: the work returns MRs writeback may wait for.
 */
void rpcrdma_rs_xprt_schedule_flush(struct rpc_xprt *xprt, u32 ms)
{
	queue_delayed_work(rpcrdma_rs_connect_wq, &to_rsx(xprt)->flush_worker,
			   msecs_to_jiffies(ms));
}

static void rpcrdma_rs_op_connect(struct rpc_xprt *xprt, struct rpc_task *task)
{
	struct rpcrdma_rs_xprt *rsx = to_rsx(xprt);
	unsigned long delay = 0;

	WARN_ON_ONCE(!xprt_lock_connect(xprt, task, rsx));
	if (rsx->connect_failed) {
		delay = xprt_reconnect_delay(xprt);
		xprt_reconnect_backoff(xprt, RPCRDMA_RS_INIT_REEST_TO);
	}
	queue_delayed_work(rpcrdma_rs_connect_wq, &rsx->connect_worker, delay);
}

static void rpcrdma_rs_op_close(struct rpc_xprt *xprt)
{
	rpcrdma_rs_cbs->close(to_rsx(xprt)->state);
	xprt->reestablish_timeout = 0;
	++xprt->connect_cookie;
	xprt_disconnect_done(xprt);
}

/* fail_sunrpc (CONFIG_FAIL_SUNRPC) calls this after a transmit; without it
 * sunrpc would call through a NULL pointer once the fault is armed.
 */
static void rpcrdma_rs_op_inject_disconnect(struct rpc_xprt *xprt)
{
	rpcrdma_rs_cbs->inject_disconnect(to_rsx(xprt)->state);
}

static void rpcrdma_rs_op_destroy(struct rpc_xprt *xprt)
{
	struct rpcrdma_rs_xprt *rsx = to_rsx(xprt);

	cancel_delayed_work_sync(&rsx->connect_worker);
	/* Close first: once the connection is drained no completion can
	 * schedule the flush worker again, so cancelling it then is final and
	 * ->flush never runs on freed state.
	 */
	rpcrdma_rs_cbs->close(rsx->state);
	cancel_delayed_work_sync(&rsx->flush_worker);
#if defined(CONFIG_SUNRPC_BACKCHANNEL)
	/* Callback rqsts not released by ->bc_destroy (each in-flight one
	 * holds a transport reference, so none is in use here).
	 */
	rpcrdma_rs_xprt_bc_destroy(xprt, 0);
#endif
	rpcrdma_rs_cbs->destroy(rsx->state);
	rsx->state = NULL;
	rpcrdma_rs_free_addresses(xprt);
	xprt_free(xprt);
	module_put(THIS_MODULE);
}

/* The send policy (admission, reconnecting instead of retransmitting on
 * the same connection) is Client::send_request in xprtrdma/transport.rs.
 */
static int rpcrdma_rs_op_send_request(struct rpc_rqst *rqst)
{
	return rpcrdma_rs_cbs->send_request(to_rsx(rqst->rq_xprt)->state, rqst);
}

/* Static inlines and fields the send policy reads. */
bool rpcrdma_rs_rqst_is_bc(const struct rpc_rqst *rqst)
{
#if defined(CONFIG_SUNRPC_BACKCHANNEL)
	/* Backchannel rqsts have no rq_buffer (no ->buf_alloc). */
	return !rqst->rq_buffer;
#else
	return false;
#endif
}

bool rpcrdma_rs_xprt_is_connected(struct rpc_xprt *xprt)
{
	return xprt_connected(xprt);
}

bool rpcrdma_rs_rqst_get_cong(struct rpc_rqst *rqst)
{
	return xprt_request_get_cong(rqst->rq_xprt, rqst);
}

bool rpcrdma_rs_rqst_same_connection(const struct rpc_rqst *rqst)
{
	return rqst->rq_connect_cookie == rqst->rq_xprt->connect_cookie;
}

void rpcrdma_rs_rqst_count_sent(struct rpc_rqst *rqst)
{
	rqst->rq_xmit_bytes_sent += rqst->rq_snd_buf.len;
}

bool rpcrdma_rs_rqst_reply_expected(const struct rpc_rqst *rqst)
{
	return rpc_reply_expected(rqst->rq_task);
}

void rpcrdma_rs_xprt_drop_connection(struct rpc_xprt *xprt)
{
	rpcrdma_rs_op_close(xprt);
}

static int rpcrdma_rs_op_buf_alloc(struct rpc_task *task)
{
	struct rpc_rqst *rqst = task->tk_rqstp;
	size_t size = rqst->rq_callsize + rqst->rq_rcvsize;
	void *buf;

	buf = kmalloc(size, rpc_task_gfp_mask());
	if (!buf)
		return -ENOMEM;
	rqst->rq_buffer = buf;
	rqst->rq_rbuffer = (char *)buf + rqst->rq_callsize;
	return 0;
}

static void rpcrdma_rs_op_buf_free(struct rpc_task *task)
{
	struct rpc_rqst *rqst = task->tk_rqstp;

	rpcrdma_rs_cbs->buf_free(to_rsx(rqst->rq_xprt)->state, rqst);
	kfree(rqst->rq_buffer);
	rqst->rq_buffer = NULL;
	rqst->rq_rbuffer = NULL;
}

static void rpcrdma_rs_op_set_port(struct rpc_xprt *xprt, unsigned short port)
{
	struct sockaddr *sap = (struct sockaddr *)&xprt->addr;
	char buf[8];

	rpc_set_port(sap, port);
	kfree(xprt->address_strings[RPC_DISPLAY_PORT]);
	snprintf(buf, sizeof(buf), "%u", port);
	xprt->address_strings[RPC_DISPLAY_PORT] = kstrdup(buf, GFP_KERNEL);
	kfree(xprt->address_strings[RPC_DISPLAY_HEX_PORT]);
	snprintf(buf, sizeof(buf), "%4hx", port);
	xprt->address_strings[RPC_DISPLAY_HEX_PORT] = kstrdup(buf, GFP_KERNEL);
}

static void rpcrdma_rs_op_timer(struct rpc_xprt *xprt, struct rpc_task *task)
{
	xprt_force_disconnect(xprt);
}

static void rpcrdma_rs_op_set_connect_timeout(struct rpc_xprt *xprt,
					      unsigned long connect_timeout,
					      unsigned long reconnect_timeout)
{
	spin_lock(&xprt->transport_lock);
	if (connect_timeout < xprt->connect_timeout)
		xprt->connect_timeout = connect_timeout;
	if (reconnect_timeout < xprt->max_reconnect_timeout)
		xprt->max_reconnect_timeout = reconnect_timeout;
	spin_unlock(&xprt->transport_lock);
}

static void rpcrdma_rs_op_print_stats(struct rpc_xprt *xprt,
				      struct seq_file *seq)
{
	struct rpcrdma_rs_xprt_stats s = {};
	long idle_time = 0;

	rpcrdma_rs_cbs->stats(to_rsx(xprt)->state, &s);
	if (xprt_connected(xprt))
		idle_time = (long)(jiffies - xprt->last_used) / HZ;

	/* Same fields in the same order as the C module: mountstats and
	 * nfsiostat parse this line.
	 */
	seq_puts(seq, "\txprt:\trdma ");
	seq_printf(seq, "%u %lu %lu %lu %ld %lu %lu %lu %llu %llu ",
		   0, xprt->stat.bind_count, xprt->stat.connect_count,
		   xprt->stat.connect_time / HZ, idle_time, xprt->stat.sends,
		   xprt->stat.recvs, xprt->stat.bad_xids, xprt->stat.req_u,
		   xprt->stat.bklog_u);
	seq_printf(seq, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu ",
		   s.read_chunk_count, s.write_chunk_count, s.reply_chunk_count,
		   s.total_rdma_request, s.total_rdma_reply,
		   s.pullup_copy_count, s.fixup_copy_count,
		   s.hardway_register_count, s.failed_marshal_count,
		   s.bad_reply_count, s.nomsg_call_count);
	seq_printf(seq, "%llu %llu %llu %llu %llu %lu\n", s.mrs_recycled,
		   s.mrs_orphaned, s.mrs_allocated, s.local_inv_needed,
		   s.empty_sendctx_q, 0LU);
}

static int rpcrdma_rs_op_enable_swap(struct rpc_xprt *xprt)
{
	return 0;
}

static void rpcrdma_rs_op_disable_swap(struct rpc_xprt *xprt)
{
}

#if defined(CONFIG_SUNRPC_BACKCHANNEL)
/*
 * Reverse-direction (backchannel) calls, NFSv4.1+ callbacks, as
 * backchannel.c does: a received Call is copied into an rpc_rqst of our own
 * (kept on xprt->bc_pa_list between uses, at most RPCRDMA_RS_BC_SLOTS of
 * them, each with a page for the Call and a page for the Reply) and queued
 * for the NFS callback service with xprt_enqueue_bc_request(); the Reply
 * comes back through ->send_request() with rq_buffer NULL and goes out
 * inline (bc_send_reply in Rust).  Copying keeps the receive buffer free
 * to be reposted at once.
 */
#define RPCRDMA_RS_BC_SLOTS 16

static void rpcrdma_rs_bc_rqst_free(struct rpc_rqst *rqst)
{
	kfree(rqst->rq_rcv_buf.head[0].iov_base);
	kfree(rqst->rq_snd_buf.head[0].iov_base);
	kfree(rqst);
}

static void rpcrdma_rs_bc_rqst_reset(struct rpc_rqst *rqst)
{
	void *rcv = rqst->rq_rcv_buf.head[0].iov_base;
	void *snd = rqst->rq_snd_buf.head[0].iov_base;

	/* svc_process_bc() encodes the Reply into a full page. */
	xdr_buf_init(&rqst->rq_rcv_buf, rcv, PAGE_SIZE);
	xdr_buf_init(&rqst->rq_snd_buf, snd, PAGE_SIZE);
}

static struct rpc_rqst *rpcrdma_rs_bc_rqst_get(struct rpc_xprt *xprt)
{
	struct rpc_rqst *rqst;

	spin_lock(&xprt->bc_pa_lock);
	rqst = list_first_entry_or_null(&xprt->bc_pa_list, struct rpc_rqst,
					rq_bc_pa_list);
	if (rqst) {
		list_del(&rqst->rq_bc_pa_list);
		spin_unlock(&xprt->bc_pa_lock);
		return rqst;
	}
	/* A peer must not make us allocate without bound. */
	if (xprt->bc_alloc_count >= RPCRDMA_RS_BC_SLOTS) {
		spin_unlock(&xprt->bc_pa_lock);
		return NULL;
	}
	xprt->bc_alloc_count++;
	spin_unlock(&xprt->bc_pa_lock);

	/* Called from the Receive completion, which the transport's swap
	 * support forbids to wait on reclaim: no reclaim at all (as C
	 * XPRTRDMA_GFP_FLAGS); a failure is the overflow case, the caller
	 * resets the connection and the server retries on a fresh one.
	 */
	rqst = kzalloc(sizeof(*rqst), GFP_NOWAIT | __GFP_NOWARN);
	if (!rqst)
		goto out_uncount;
	rqst->rq_rcv_buf.head[0].iov_base = kmalloc(PAGE_SIZE, GFP_NOWAIT | __GFP_NOWARN);
	rqst->rq_snd_buf.head[0].iov_base = kmalloc(PAGE_SIZE, GFP_NOWAIT | __GFP_NOWARN);
	if (!rqst->rq_rcv_buf.head[0].iov_base ||
	    !rqst->rq_snd_buf.head[0].iov_base) {
		rpcrdma_rs_bc_rqst_free(rqst);
		goto out_uncount;
	}
	rqst->rq_xprt = xprt;
	INIT_LIST_HEAD(&rqst->rq_bc_pa_list);
	return rqst;

out_uncount:
	spin_lock(&xprt->bc_pa_lock);
	xprt->bc_alloc_count--;
	spin_unlock(&xprt->bc_pa_lock);
	return NULL;
}

int rpcrdma_rs_bc_receive_call(struct rpc_xprt *xprt, const void *src, u32 len)
{
	struct rpc_rqst *rqst;

	if (len < 8 || len > PAGE_SIZE)
		return -EMSGSIZE;
	rqst = rpcrdma_rs_bc_rqst_get(xprt);
	if (!rqst)
		return -ENOBUFS;
	rpcrdma_rs_bc_rqst_reset(rqst);
	memcpy(rqst->rq_rcv_buf.head[0].iov_base, src, len);
	rqst->rq_rcv_buf.head[0].iov_len = len;
	rqst->rq_rcv_buf.len = len;
	rqst->rq_private_buf = rqst->rq_rcv_buf;
	rqst->rq_xid = *(const __be32 *)src;
	rqst->rq_reply_bytes_recvd = 0;
	rqst->rq_connect_cookie = xprt->connect_cookie;
	set_bit(RPC_BC_PA_IN_USE, &rqst->rq_bc_pa_state);
	/* svc_process_bc() and xprt_enqueue_bc_request() decrement it. */
	atomic_inc(&xprt->bc_slot_count);
	xprt_enqueue_bc_request(rqst);
	return 0;
}

static int rpcrdma_rs_xprt_bc_setup(struct rpc_xprt *xprt, unsigned int min_reqs)
{
	return 0;
}

static size_t rpcrdma_rs_xprt_bc_maxpayload(struct rpc_xprt *xprt)
{
	return to_rsx(xprt)->bc_max_payload;
}

static unsigned int rpcrdma_rs_xprt_bc_num_slots(struct rpc_xprt *xprt)
{
	return RPCRDMA_RS_BC_SLOTS;
}

static void rpcrdma_rs_xprt_bc_free_rqst(struct rpc_rqst *rqst)
{
	struct rpc_xprt *xprt = rqst->rq_xprt;

	clear_bit(RPC_BC_PA_IN_USE, &rqst->rq_bc_pa_state);
	spin_lock(&xprt->bc_pa_lock);
	list_add_tail(&rqst->rq_bc_pa_list, &xprt->bc_pa_list);
	spin_unlock(&xprt->bc_pa_lock);
	/* The reference xprt_enqueue_bc_request() took. */
	xprt_put(xprt);
}

static void rpcrdma_rs_xprt_bc_destroy(struct rpc_xprt *xprt, unsigned int max_reqs)
{
	struct rpc_rqst *rqst, *tmp;
	LIST_HEAD(free);

	spin_lock(&xprt->bc_pa_lock);
	list_splice_init(&xprt->bc_pa_list, &free);
	spin_unlock(&xprt->bc_pa_lock);
	list_for_each_entry_safe(rqst, tmp, &free, rq_bc_pa_list) {
		list_del(&rqst->rq_bc_pa_list);
		spin_lock(&xprt->bc_pa_lock);
		xprt->bc_alloc_count--;
		spin_unlock(&xprt->bc_pa_lock);
		rpcrdma_rs_bc_rqst_free(rqst);
	}
}

#else
int rpcrdma_rs_bc_receive_call(struct rpc_xprt *xprt, const void *src, u32 len)
{
	return -EPROTONOSUPPORT;
}
#endif

void rpcrdma_rs_xprt_set_bc_max_payload(struct rpc_xprt *xprt, u32 bytes)
{
	to_rsx(xprt)->bc_max_payload = bytes;
}

static const struct rpc_xprt_ops rpcrdma_rs_xprt_ops = {
	.reserve_xprt = xprt_reserve_xprt_cong,
	.release_xprt = xprt_release_xprt_cong,
	.alloc_slot = xprt_alloc_slot,
	.free_slot = xprt_free_slot,
	.release_request = xprt_release_rqst_cong,
	.wait_for_reply_request = xprt_wait_for_reply_request_def,
	.timer = rpcrdma_rs_op_timer,
	.rpcbind = rpcb_getport_async,
	.set_port = rpcrdma_rs_op_set_port,
	.connect = rpcrdma_rs_op_connect,
	.buf_alloc = rpcrdma_rs_op_buf_alloc,
	.buf_free = rpcrdma_rs_op_buf_free,
	.send_request = rpcrdma_rs_op_send_request,
	.close = rpcrdma_rs_op_close,
	.inject_disconnect = rpcrdma_rs_op_inject_disconnect,
	.destroy = rpcrdma_rs_op_destroy,
	.set_connect_timeout = rpcrdma_rs_op_set_connect_timeout,
	.print_stats = rpcrdma_rs_op_print_stats,
	.enable_swap = rpcrdma_rs_op_enable_swap,
	.disable_swap = rpcrdma_rs_op_disable_swap,
#if defined(CONFIG_SUNRPC_BACKCHANNEL)
	.bc_setup = rpcrdma_rs_xprt_bc_setup,
	.bc_maxpayload = rpcrdma_rs_xprt_bc_maxpayload,
	.bc_num_slots = rpcrdma_rs_xprt_bc_num_slots,
	.bc_free_rqst = rpcrdma_rs_xprt_bc_free_rqst,
	.bc_destroy = rpcrdma_rs_xprt_bc_destroy,
#endif
};

static struct xprt_class rpcrdma_rs_xprt_class;

static struct rpc_xprt *rpcrdma_rs_setup(struct xprt_create *args)
{
	struct rpcrdma_rs_xprt *rsx;
	struct rpc_xprt *xprt;
	struct sockaddr *sap = args->dstaddr;

	if (args->addrlen > sizeof(xprt->addr))
		return ERR_PTR(-EBADF);
	if (sap->sa_family != AF_INET && sap->sa_family != AF_INET6)
		return ERR_PTR(-EAFNOSUPPORT);
	if (!try_module_get(THIS_MODULE))
		return ERR_PTR(-EIO);
	xprt = xprt_alloc(args->net, sizeof(*rsx), RPCRDMA_RS_MAX_SLOTS,
			  RPCRDMA_RS_MAX_SLOTS);
	if (!xprt) {
		module_put(THIS_MODULE);
		return ERR_PTR(-ENOMEM);
	}
	rsx = to_rsx(xprt);
	xprt->timeout = &rpcrdma_rs_default_timeout;
	xprt->connect_timeout = xprt->timeout->to_initval;
	xprt->max_reconnect_timeout = xprt->timeout->to_maxval;
	xprt->bind_timeout = RPCRDMA_RS_BIND_TO;
	xprt->reestablish_timeout = RPCRDMA_RS_INIT_REEST_TO;
	xprt->idle_timeout = RPCRDMA_RS_IDLE_DISC_TO;
	xprt->resvport = 0;
	xprt->ops = &rpcrdma_rs_xprt_ops;
	xprt->prot = IPPROTO_TCP;
	xprt->xprt_class = &rpcrdma_rs_xprt_class;
	xprt->addrlen = args->addrlen;
	memcpy(&xprt->addr, sap, xprt->addrlen);
	if (rpc_get_port(sap))
		xprt_set_bound(xprt);
	rpcrdma_rs_format_addresses(xprt, sap);
	xprt->max_payload = RPCRDMA_RS_MAX_DATA_SEGS << PAGE_SHIFT;
	INIT_DELAYED_WORK(&rsx->connect_worker, rpcrdma_rs_connect_worker);
	INIT_DELAYED_WORK(&rsx->flush_worker, rpcrdma_rs_flush_worker);
	/* A congestion window of one credit until the server grants more. */
	xprt->cwnd = RPC_CWNDSCALE;
	/* RFC 8166's minimum inline size less the header, until connected. */
	rsx->bc_max_payload = 1024 - 28;

	rsx->state = rpcrdma_rs_cbs->setup(xprt);
	if (!rsx->state) {
		rpcrdma_rs_free_addresses(xprt);
		xprt_free(xprt);
		module_put(THIS_MODULE);
		return ERR_PTR(-ENOMEM);
	}
	return xprt;
}

static struct xprt_class rpcrdma_rs_xprt_class = {
	.list = LIST_HEAD_INIT(rpcrdma_rs_xprt_class.list),
	.name = "rdma",
	.owner = THIS_MODULE,
	.ident = XPRT_TRANSPORT_RDMA,
	.setup = rpcrdma_rs_setup,
	.netid = { "rdma", "rdma6", "" },
};

int rpcrdma_rs_xprt_register(const struct rpcrdma_rs_xprt_cbs *cbs)
{
	int rc;

	rpcrdma_rs_connect_wq = alloc_workqueue("rpcrdma_rs_connect",
						WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
	if (!rpcrdma_rs_connect_wq)
		return -ENOMEM;
	rpcrdma_rs_cbs = cbs;
	rc = xprt_register_transport(&rpcrdma_rs_xprt_class);
	if (rc) {
		destroy_workqueue(rpcrdma_rs_connect_wq);
		rpcrdma_rs_connect_wq = NULL;
	}
	return rc;
}

void rpcrdma_rs_xprt_unregister(void)
{
	xprt_unregister_transport(&rpcrdma_rs_xprt_class);
	/*
	 * Every transport was destroyed (each held a module reference) and
	 * cancelled its connect worker; draining makes sure none returns
	 * through this module after unload.
	 */
	destroy_workqueue(rpcrdma_rs_connect_wq);
	rpcrdma_rs_connect_wq = NULL;
}

const struct sockaddr *rpcrdma_rs_xprt_sockaddr(struct rpc_xprt *xprt,
						size_t *len)
{
	*len = xprt->addrlen;
	return (const struct sockaddr *)&xprt->addr;
}

static void rpcrdma_rs_shape(const struct xdr_buf *buf,
			     struct rpcrdma_rs_xdr_shape *out)
{
	out->head_len = buf->head[0].iov_len;
	out->head_page_offset = offset_in_page(buf->head[0].iov_base);
	out->page_base = buf->page_base;
	out->page_len = buf->page_len;
	out->tail_len = buf->tail[0].iov_len;
	out->tail_page_offset = offset_in_page(buf->tail[0].iov_base);
	out->buflen = buf->buflen;
	out->flags = buf->flags;
	out->len = buf->len;
}

void rpcrdma_rs_rqst_info(struct rpc_rqst *rqst,
			  struct rpcrdma_rs_rqst_info *out)
{
	out->xid = be32_to_cpu(rqst->rq_xid);
	rpcrdma_rs_shape(&rqst->rq_snd_buf, &out->snd);
	rpcrdma_rs_shape(&rqst->rq_rcv_buf, &out->rcv);
}

void rpcrdma_rs_rqst_mark_sent(struct rpc_rqst *rqst)
{
	rqst->rq_xtime = ktime_get();
}

int rpcrdma_rs_rqst_read(struct rpc_rqst *rqst, u32 offset, void *dst,
			 u32 len)
{
	return read_bytes_from_xdr_buf(&rqst->rq_snd_buf, offset, dst, len);
}

/*
 * Places an RDMA_MSG reply's inline part in rq_rcv_buf: the part that
 * fits the head goes there; without a Write chunk the rest continues into
 * the pages and the tail; with one (its data already placed in the pages
 * by the server), the rest goes to the tail behind the Write chunk's XDR
 * pad, as rpcrdma_inline_fixup() arranges it.  Returns bytes copied.
 */
int rpcrdma_rs_rqst_fill_reply(struct rpc_rqst *rqst, const void *src,
			       u32 len, u32 writelist)
{
	struct xdr_buf *buf = &rqst->rq_rcv_buf;
	u32 head = min_t(u32, len, buf->head[0].iov_len);
	u32 pad, rest;

	if (!writelist) {
		if (len > buf->buflen)
			return -EIO;
		return write_bytes_to_xdr_buf(buf, 0, (void *)src, len) ? -EIO : len;
	}
	memcpy(buf->head[0].iov_base, src, head);
	rest = len - head;
	pad = writelist & 3 ? 4 - (writelist & 3) : 0;
	if (rest) {
		if ((u64)rest + pad > buf->tail[0].iov_len)
			return -EIO;
		memcpy((char *)buf->tail[0].iov_base + pad, (const char *)src + head,
		       rest);
	}
	return len;
}

u32 rpcrdma_rs_rqst_reply_chunk_done(struct rpc_rqst *rqst, u32 len)
{
	return min_t(u32, len, rqst->rq_rcv_buf.buflen);
}

struct rpc_rqst *rpcrdma_rs_xprt_lookup_pin(struct rpc_xprt *xprt, u32 xid)
{
	struct rpc_rqst *rqst;

	spin_lock(&xprt->queue_lock);
	rqst = xprt_lookup_rqst(xprt, cpu_to_be32(xid));
	if (rqst)
		xprt_pin_rqst(rqst);
	spin_unlock(&xprt->queue_lock);
	return rqst;
}

void rpcrdma_rs_xprt_complete(struct rpc_xprt *xprt, struct rpc_rqst *rqst,
			      int status)
{
	spin_lock(&xprt->queue_lock);
	if (status < 0) {
		rqst->rq_task->tk_status = status;
		status = 0;
	}
	xprt_complete_rqst(rqst->rq_task, status);
	xprt_unpin_rqst(rqst);
	spin_unlock(&xprt->queue_lock);
}

void rpcrdma_rs_xprt_update_cwnd(struct rpc_xprt *xprt, u32 credits)
{
	spin_lock(&xprt->transport_lock);
	xprt->cwnd = credits << RPC_CWNDSHIFT;
	spin_unlock(&xprt->transport_lock);
}

void rpcrdma_rs_xprt_force_disconnect(struct rpc_xprt *xprt)
{
	xprt_force_disconnect(xprt);
}

void rpcrdma_rs_xprt_data_seen(struct rpc_xprt *xprt)
{
	if (xprt->reestablish_timeout)
		xprt->reestablish_timeout = 0;
}

/*
 * Walks [offset, offset + len) of an xdr_buf as head range, page pieces and
 * tail range, calling add() for each: a page piece passes its page, a head
 * or tail range its virtual address (page NULL).  add() returns 0 to go on,
 * 1 to stop before this piece (the caller maps what it has), or a negative
 * errno.  *done receives the bytes added.
 */
typedef int (*rpcrdma_rs_piece_fn)(void *ctx, struct page *page,
				   const void *virt, u32 off, u32 len);

static int rpcrdma_rs_xdr_walk(const struct xdr_buf *buf, u32 offset, u32 len,
			       rpcrdma_rs_piece_fn add, void *ctx, u32 *done)
{
	u32 head_len = buf->head[0].iov_len, page_len = buf->page_len;
	u32 end;
	int rc;

	*done = 0;
	if (check_add_overflow(offset, len, &end))
		return -EINVAL;
	if (offset < head_len) {
		u32 l = min(head_len - offset, len);

		rc = add(ctx, NULL, (char *)buf->head[0].iov_base + offset, 0, l);
		if (rc)
			return rc < 0 ? rc : 0;
		*done += l;
	}
	while (*done < len && offset + *done < head_len + page_len) {
		u32 in_pages = offset + *done - head_len;
		u32 pos = buf->page_base + in_pages;
		u32 off = offset_in_page(pos);
		u32 l = min3((u32)PAGE_SIZE - off, len - *done, page_len - in_pages);

		rc = add(ctx, buf->pages[pos >> PAGE_SHIFT], NULL, off, l);
		if (rc)
			return rc < 0 ? rc : 0;
		*done += l;
	}
	if (*done < len) {
		u32 in_tail = offset + *done - head_len - page_len;
		u32 l = len - *done;

		if ((u64)in_tail + l > buf->tail[0].iov_len)
			return -EINVAL;
		rc = add(ctx, NULL, (char *)buf->tail[0].iov_base + in_tail, 0, l);
		if (rc)
			return rc < 0 ? rc : 0;
		*done += l;
	}
	return 0;
}

/* ---- FRWR ---- */

struct rpcrdma_rs_mr {
	struct ib_mr *mr;
	u32 max_pages;
	int nents;		/* mapped scatterlist entries, 0 if unmapped */
	enum dma_data_direction dir;
	struct ib_reg_wr reg_wr;
	struct scatterlist sg[];
};

struct rpcrdma_rs_mr *rpcrdma_rs_mr_alloc(struct ib_pd *pd, u32 max_pages)
{
	struct rpcrdma_rs_mr *mr;

	mr = kzalloc(struct_size(mr, sg, max_pages), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, max_pages);
	if (IS_ERR(mr->mr)) {
		long rc = PTR_ERR(mr->mr);

		kfree(mr);
		return ERR_PTR(rc);
	}
	mr->max_pages = max_pages;
	sg_init_table(mr->sg, max_pages);
	return mr;
}

void rpcrdma_rs_mr_free(struct rpcrdma_rs_mr *mr)
{
	ib_dereg_mr(mr->mr);
	kfree(mr);
}

/*
 * Deregisters first, then releases the DMA mapping of the last map_rqst:
 * until ib_dereg_mr() returns the rkey may still be valid (an MR dropped
 * because its LOCAL_INV could not be posted), and it must never name
 * unmapped IOVAs (the order DmaBuf's drop uses too).
 */
void rpcrdma_rs_mr_destroy(struct ib_device *device, struct rpcrdma_rs_mr *mr)
{
	ib_dereg_mr(mr->mr);
	if (mr->nents)
		ib_dma_unmap_sg(device, mr->sg, mr->nents, mr->dir);
	kfree(mr);
}

/* Adds [page+off, len) to the scatterlist unless it would leave a gap
 * (FRWR maps page lists: only the first entry may start inside a page and
 * only the last may end inside one).  Returns false when it must stop.
 */
static bool rpcrdma_rs_sg_add(struct rpcrdma_rs_mr *mr, int *n, u32 *pages,
			      struct page *page, u32 off, u32 len)
{
	u32 npages = DIV_ROUND_UP(off + len, PAGE_SIZE);

	if (*n > 0) {
		struct scatterlist *prev = &mr->sg[*n - 1];

		if (off || offset_in_page(prev->offset + prev->length))
			return false;
	}
	if (*n >= mr->max_pages || *pages + npages > mr->max_pages)
		return false;
	sg_set_page(&mr->sg[*n], page, len, off);
	(*n)++;
	*pages += npages;
	return true;
}

struct rpcrdma_rs_sg_ctx {
	struct rpcrdma_rs_mr *mr;
	int n;
	u32 pages;
};

static int rpcrdma_rs_sg_piece(void *ctx, struct page *page, const void *virt,
			       u32 off, u32 len)
{
	struct rpcrdma_rs_sg_ctx *c = ctx;

	if (!page) {
		page = virt_to_page(virt);
		off = offset_in_page(virt);
	}
	return rpcrdma_rs_sg_add(c->mr, &c->n, &c->pages, page, off, len) ? 0 : 1;
}

int rpcrdma_rs_mr_map_rqst(struct ib_device *device, struct rpcrdma_rs_mr *mr,
			   struct rpc_rqst *rqst, bool rcv, u32 offset,
			   u32 len, bool writable, u32 *mapped)
{
	const struct xdr_buf *buf = rcv ? &rqst->rq_rcv_buf : &rqst->rq_snd_buf;
	struct rpcrdma_rs_sg_ctx ctx = { .mr = mr };
	u32 done;
	int n, rc;

	if (mr->nents)
		return -EBUSY;
	sg_init_table(mr->sg, mr->max_pages);
	/* The walk stops at the MR's depth or at a gap FRWR cannot map. */
	rc = rpcrdma_rs_xdr_walk(buf, offset, len, rpcrdma_rs_sg_piece, &ctx, &done);
	if (rc)
		return rc;
	n = ctx.n;
	if (!n)
		return -EINVAL;
	sg_mark_end(&mr->sg[n - 1]);
	mr->dir = writable ? DMA_FROM_DEVICE : DMA_TO_DEVICE;
	mr->nents = ib_dma_map_sg(device, mr->sg, n, mr->dir);
	if (!mr->nents)
		return -EIO;
	rc = ib_map_mr_sg(mr->mr, mr->sg, mr->nents, NULL, PAGE_SIZE);
	if (rc != mr->nents) {
		ib_dma_unmap_sg(device, mr->sg, n, mr->dir);
		mr->nents = 0;
		return -EIO;
	}
	mr->nents = n;
	ib_update_fast_reg_key(mr->mr, ib_inc_rkey(mr->mr->rkey));
	*mapped = done;
	return 0;
}

int rpcrdma_rs_mr_map_buf(struct ib_device *device, struct rpcrdma_rs_mr *mr,
			  u64 dma_addr, u32 len)
{
	int rc;

	if (mr->nents)
		return -EBUSY;
	sg_init_table(mr->sg, 1);
	sg_dma_address(&mr->sg[0]) = dma_addr;
	sg_dma_len(&mr->sg[0]) = len;
	rc = ib_map_mr_sg(mr->mr, mr->sg, 1, NULL, PAGE_SIZE);
	if (rc != 1)
		return -EIO;
	/* Mapped by the caller's DmaBuf: nothing to unmap here. */
	mr->nents = 0;
	mr->dir = DMA_BIDIRECTIONAL;
	ib_update_fast_reg_key(mr->mr, ib_inc_rkey(mr->mr->rkey));
	return 0;
}

void rpcrdma_rs_mr_unmap(struct ib_device *device, struct rpcrdma_rs_mr *mr)
{
	if (mr->nents) {
		ib_dma_unmap_sg(device, mr->sg, mr->nents, mr->dir);
		mr->nents = 0;
	}
}

void rpcrdma_rs_mr_segment(const struct rpcrdma_rs_mr *mr, u32 *handle,
			   u32 *length, u64 *offset)
{
	*handle = mr->mr->rkey;
	*length = mr->mr->length;
	*offset = mr->mr->iova;
}

u32 rpcrdma_rs_mr_lkey(const struct rpcrdma_rs_mr *mr)
{
	return mr->mr->lkey;
}

static void rpcrdma_rs_unsignaled_done(struct ib_cq *cq, struct ib_wc *wc)
{
	if (wc->status != IB_WC_SUCCESS && wc->status != IB_WC_WR_FLUSH_ERR)
		pr_warn_ratelimited("rpcrdma_rs: registration work request failed: %s (%d)\n",
			ib_wc_status_msg(wc->status), wc->status);
}

static struct ib_cqe rpcrdma_rs_unsignaled_cqe = {
	.done = rpcrdma_rs_unsignaled_done,
};

int rpcrdma_rs_post_reg_mr(struct ib_qp *qp, struct rpcrdma_rs_mr *mr,
			   bool writable)
{
	struct ib_reg_wr *reg = &mr->reg_wr;

	memset(reg, 0, sizeof(*reg));
	reg->wr.opcode = IB_WR_REG_MR;
	reg->wr.wr_cqe = &rpcrdma_rs_unsignaled_cqe;
	reg->mr = mr->mr;
	reg->key = mr->mr->rkey;
	reg->access = writable ? IB_ACCESS_REMOTE_WRITE | IB_ACCESS_LOCAL_WRITE :
				 IB_ACCESS_REMOTE_READ;
	return ib_post_send(qp, &reg->wr, NULL);
}

/* Registers a server RDMA Read sink for one use (audit finding 2).  The key
 * byte is re-made on every registration, at random and never equal to the
 * previous one, so a key a client saw in an earlier iWARP Read Request (the
 * Data Sink STag) does not name the MR again.  Remote write is granted only
 * when the device needs it for a Read sink (iWARP); such an MR is then
 * invalidated by the RDMA_READ_WITH_INV that uses it, so it is valid only
 * from this REG_MR until that Read completes.  On IB/RoCE (force_mr) the
 * sink gets local write only.  Unsignaled, like rpcrdma_rs_post_reg_mr.
 */
int rpcrdma_rs_post_sink_reg(struct ib_qp *qp, struct rpcrdma_rs_mr *mr,
			     bool remote_write)
{
	struct ib_reg_wr *reg = &mr->reg_wr;

	/* Local-only sinks keep the key rpcrdma_rs_mr_map_buf gave them: it is
	 * never sent, and the Read's SGE may already name it.
	 */
	if (remote_write)
		ib_update_fast_reg_key(mr->mr, (u8)(mr->mr->rkey + 1 +
						    get_random_u32_below(255)));
	memset(reg, 0, sizeof(*reg));
	reg->wr.opcode = IB_WR_REG_MR;
	reg->wr.wr_cqe = &rpcrdma_rs_unsignaled_cqe;
	reg->mr = mr->mr;
	reg->key = mr->mr->rkey;
	reg->access = IB_ACCESS_LOCAL_WRITE |
		      (remote_write ? IB_ACCESS_REMOTE_WRITE : 0);
	return ib_post_send(qp, &reg->wr, NULL);
}

int rpcrdma_rs_post_local_inv(struct ib_qp *qp, u32 rkey, struct ib_cqe *cqe)
{
	struct ib_send_wr wr = {
		.opcode = IB_WR_LOCAL_INV,
		.ex.invalidate_rkey = rkey,
		.wr_cqe = cqe ? cqe : &rpcrdma_rs_unsignaled_cqe,
		.send_flags = cqe ? IB_SEND_SIGNALED : 0,
	};

	return ib_post_send(qp, &wr, NULL);
}

/* ---- "physical" registration ---- */

struct rpcrdma_rs_phys_ent {
	u64 addr;
	u32 len;
	bool page;
};

struct rpcrdma_rs_phys {
	u32 n;
	u32 max;
	enum dma_data_direction dir;
	struct rpcrdma_rs_phys_ent ent[];
};

struct rpcrdma_rs_phys *rpcrdma_rs_phys_alloc(u32 max)
{
	struct rpcrdma_rs_phys *pm = kzalloc(struct_size(pm, ent, max), GFP_KERNEL);

	if (!pm)
		return ERR_PTR(-ENOMEM);
	pm->max = max;
	return pm;
}

static int rpcrdma_rs_phys_add(struct ib_device *device,
			       struct rpcrdma_rs_phys *pm, struct page *page,
			       const void *virt, u32 off, u32 len)
{
	struct rpcrdma_rs_phys_ent *e;
	u64 addr;

	if (pm->n >= pm->max)
		return -EMSGSIZE;
	if (page)
		addr = ib_dma_map_page(device, page, off, len, pm->dir);
	else
		addr = ib_dma_map_single(device, (void *)virt, len, pm->dir);
	if (ib_dma_mapping_error(device, addr))
		return -EIO;
	e = &pm->ent[pm->n++];
	e->addr = addr;
	e->len = len;
	e->page = !!page;
	return 0;
}

struct rpcrdma_rs_phys_ctx {
	struct ib_device *device;
	struct rpcrdma_rs_phys *pm;
};

static int rpcrdma_rs_phys_piece(void *ctx, struct page *page, const void *virt,
				 u32 off, u32 len)
{
	struct rpcrdma_rs_phys_ctx *c = ctx;

	return rpcrdma_rs_phys_add(c->device, c->pm, page, virt, off, len);
}

int rpcrdma_rs_phys_map_rqst(struct ib_device *device,
			     struct rpcrdma_rs_phys *pm, struct rpc_rqst *rqst,
			     bool rcv, u32 offset, u32 len, bool writable)
{
	const struct xdr_buf *buf = rcv ? &rqst->rq_rcv_buf : &rqst->rq_snd_buf;
	struct rpcrdma_rs_phys_ctx ctx = { .device = device, .pm = pm };
	u32 done;
	int rc;

	pm->dir = writable ? DMA_FROM_DEVICE : DMA_TO_DEVICE;
	rc = rpcrdma_rs_xdr_walk(buf, offset, len, rpcrdma_rs_phys_piece, &ctx, &done);
	if (rc)
		return rc;
	/* Every piece is its own segment: running out of them is an error. */
	return done == len ? 0 : -EMSGSIZE;
}

u32 rpcrdma_rs_phys_count(const struct rpcrdma_rs_phys *pm)
{
	return pm->n;
}

void rpcrdma_rs_phys_get(const struct rpcrdma_rs_phys *pm, u32 i, u64 *addr,
			 u32 *len)
{
	*addr = i < pm->n ? pm->ent[i].addr : 0;
	*len = i < pm->n ? pm->ent[i].len : 0;
}

void rpcrdma_rs_phys_free(struct ib_device *device, struct rpcrdma_rs_phys *pm)
{
	u32 i;

	for (i = 0; i < pm->n; i++) {
		if (pm->ent[i].page)
			ib_dma_unmap_page(device, pm->ent[i].addr, pm->ent[i].len,
					  pm->dir);
		else
			ib_dma_unmap_single(device, pm->ent[i].addr,
					    pm->ent[i].len, pm->dir);
	}
	kfree(pm);
}

static char rpcrdma_rs_memreg[16] = "fmr";
module_param_string(memreg, rpcrdma_rs_memreg, sizeof(rpcrdma_rs_memreg), 0444);
MODULE_PARM_DESC(memreg,
		 "Client memory registration: fmr (default; FMR-style pool semantics built on FRWR work requests, since the kernel removed the FMR verbs in 5.8: MRs allocated per connection at connect time, mapped per I/O with REG_MR, invalidated with LOCAL_INV, optionally in batches) or physical (global steering tag: the server can read and write ALL client memory; trusted servers only)");

const char *rpcrdma_rs_param_memreg(void)
{
	return rpcrdma_rs_memreg;
}

void rpcrdma_rs_xprt_set_max_payload(struct rpc_xprt *xprt, u32 bytes)
{
	xprt->max_payload = bytes;
}
