// SPDX-License-Identifier: GPL-2.0
/*
 * C shims of the sunrpc server side (see svc_helpers.h): the transport
 * class object, allocation of struct svc_xprt with a private pointer, and
 * the /proc/sys/sunrpc/svc_rdma table. The backchannel class is Rust
 * (rust/svc_bc.rs), and so is every read of svc_xprt and svc_rqst.
 */
#include "rpcrdma_rs_helper.h"
#include <linux/module.h>
#include <linux/sunrpc/addr.h>
#include <linux/sunrpc/svc_rdma.h>
#include <linux/sunrpc/xprt.h>
#include <linux/seq_file.h>
#include <linux/sysctl.h>

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

static atomic_long_t rpcrdma_rs_svc_stats[RPCRDMA_RS_STAT_MAX];

/* Statistics: /proc/sys/sunrpc/svc_rdma/ (C svc_rdma.c's, plus ours). */
static unsigned int rpcrdma_rs_svc_max_requests;
static unsigned int rpcrdma_rs_svc_max_req_size;

void rpcrdma_rs_svc_stat_add(int stat, u64 n)
{
	if (stat >= 0 && stat < RPCRDMA_RS_STAT_MAX)
		atomic_long_add(n, &rpcrdma_rs_svc_stats[stat]);
}

/* Reads a counter; any write resets it (as C svcrdma_counter_handler). */
static int rpcrdma_rs_svc_stat_handler(const struct ctl_table *table,
				       int write, void *buffer, size_t *lenp,
				       loff_t *ppos)
{
	atomic_long_t *stat = table->data;
	char tmp[24];
	size_t len;

	if (write) {
		atomic_long_set(stat, 0);
		return 0;
	}
	len = scnprintf(tmp, sizeof(tmp), "%lu\n",
			(unsigned long)atomic_long_read(stat));
	if (*ppos >= len) {
		*lenp = 0;
		return 0;
	}
	len -= *ppos;
	if (len > *lenp)
		len = *lenp;
	memcpy(buffer, tmp + *ppos, len);
	*lenp = len;
	*ppos += len;
	return 0;
}

#define RPCRDMA_RS_STAT(name, idx)                                        \
	{                                                                  \
		.procname = name, .data = &rpcrdma_rs_svc_stats[idx],      \
		.maxlen = sizeof(atomic_long_t), .mode = 0644,             \
		.proc_handler = rpcrdma_rs_svc_stat_handler,               \
	}

static struct ctl_table rpcrdma_rs_svc_table[] = {
	{
		.procname = "max_requests",
		.data = &rpcrdma_rs_svc_max_requests,
		.maxlen = sizeof(unsigned int),
		.mode = 0444,
		.proc_handler = proc_douintvec,
	},
	{
		.procname = "max_req_size",
		.data = &rpcrdma_rs_svc_max_req_size,
		.maxlen = sizeof(unsigned int),
		.mode = 0444,
		.proc_handler = proc_douintvec,
	},
	RPCRDMA_RS_STAT("rdma_stat_recv", RPCRDMA_RS_STAT_RECV),
	RPCRDMA_RS_STAT("rdma_stat_read", RPCRDMA_RS_STAT_READ),
	RPCRDMA_RS_STAT("rdma_stat_write", RPCRDMA_RS_STAT_WRITE),
	RPCRDMA_RS_STAT("rdma_stat_sq_starve", RPCRDMA_RS_STAT_SQ_STARVE),
	RPCRDMA_RS_STAT("rdma_stat_read_bytes", RPCRDMA_RS_STAT_READ_BYTES),
	RPCRDMA_RS_STAT("rdma_stat_write_bytes", RPCRDMA_RS_STAT_WRITE_BYTES),
	RPCRDMA_RS_STAT("rdma_stat_reply_chunk", RPCRDMA_RS_STAT_REPLY_CHUNK),
	RPCRDMA_RS_STAT("rdma_stat_err_sent", RPCRDMA_RS_STAT_ERR_SENT),
	RPCRDMA_RS_STAT("rdma_stat_bc_calls", RPCRDMA_RS_STAT_BC_CALLS),
	RPCRDMA_RS_STAT("rdma_stat_bc_replies", RPCRDMA_RS_STAT_BC_REPLIES),
	RPCRDMA_RS_STAT("rdma_stat_cache_hit", RPCRDMA_RS_STAT_CACHE_HIT),
	RPCRDMA_RS_STAT("rdma_stat_cache_miss", RPCRDMA_RS_STAT_CACHE_MISS),
	RPCRDMA_RS_STAT("rdma_stat_bc_setup", RPCRDMA_RS_STAT_BC_SETUP),
	RPCRDMA_RS_STAT("rdma_stat_bc_send_err", RPCRDMA_RS_STAT_BC_SEND_ERR),
};

static struct ctl_table_header *rpcrdma_rs_svc_sysctl;

int rpcrdma_rs_svc_register(const struct svc_xprt_ops *ops, u32 max_requests,
			    u32 max_req_size)
{
	int ret;

	rpcrdma_rs_svc_class.xcl_ops = ops;
	rpcrdma_rs_svc_max_requests = max_requests;
	rpcrdma_rs_svc_max_req_size = max_req_size;
	ret = svc_reg_xprt_class(&rpcrdma_rs_svc_class);
	if (ret)
		return ret;
	/* Statistics are optional: a failure only costs the proc files. */
	rpcrdma_rs_svc_sysctl = register_sysctl("sunrpc/svc_rdma",
						rpcrdma_rs_svc_table);
	if (!rpcrdma_rs_svc_sysctl)
		pr_warn("rpcrdma_rs: svcrdma: no /proc/sys/sunrpc/svc_rdma\n");
	return 0;
}

void rpcrdma_rs_svc_unregister(void)
{
	if (rpcrdma_rs_svc_sysctl)
		unregister_sysctl_table(rpcrdma_rs_svc_sysctl);
	rpcrdma_rs_svc_sysctl = NULL;
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
