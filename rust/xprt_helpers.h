/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C shims of the client (xprtrdma) side; included by rpcrdma_rs_helper.h.
 *
 * The rpc_xprt_ops table is a static const table here: generic entries
 * point at sunrpc's own functions (congestion control, slots, rpcbind), the
 * transport-specific ones call back into Rust through the table registered
 * with rpcrdma_rs_xprt_register() (see rust/xprt.rs for the safe trait).
 */
#ifndef RPCRDMA_RS_XPRT_HELPERS_H
#define RPCRDMA_RS_XPRT_HELPERS_H

/* Counters printed in the "xprt: rdma" line of /proc/self/mountstats. */
struct rpcrdma_rs_xprt_stats {
	u64 read_chunk_count;
	u64 write_chunk_count;
	u64 reply_chunk_count;
	u64 total_rdma_request;
	u64 total_rdma_reply;
	u64 pullup_copy_count;
	u64 fixup_copy_count;
	u64 hardway_register_count;
	u64 failed_marshal_count;
	u64 bad_reply_count;
	u64 nomsg_call_count;
	u64 mrs_recycled;
	u64 mrs_orphaned;
	u64 mrs_allocated;
	u64 local_inv_needed;
	u64 empty_sendctx_q;
};

/* The transport-specific operations, implemented in Rust. */
struct rpcrdma_rs_xprt_cbs {
	/* Creates the Rust state of a new transport; NULL on failure. */
	void *(*setup)(struct rpc_xprt *xprt);
	/* Connects (blocking, process context); 0 or a negative errno. */
	int (*connect)(void *state);
	/* Sends one request (a call, or the Reply to a backchannel Call):
	 * sunrpc's ->send_request; 0 or a negative errno.
	 */
	int (*send_request)(void *state, struct rpc_rqst *rqst);
	/* Tears the connection down (the transport may reconnect later). */
	void (*close)(void *state);
	/* Frees the Rust state; no other callback runs after this. */
	void (*destroy)(void *state);
	/* Releases what a request still holds (signal, timeout). */
	void (*buf_free)(void *state, struct rpc_rqst *rqst);
	/* Fills the mountstats counters. */
	void (*stats)(void *state, struct rpcrdma_rs_xprt_stats *out);
	/* Deferred work scheduled with rpcrdma_rs_xprt_schedule_flush()
	 * (process context, the module's connect workqueue).
	 */
	void (*flush)(void *state);
	/* Breaks the connection as a network failure would (sunrpc's
	 * fail_sunrpc); called with the transport's send lock held.
	 */
	void (*inject_disconnect)(void *state);
};

/* Shape of an xdr_buf, as the chunk planner needs it. */
struct rpcrdma_rs_xdr_shape {
	u32 head_len;
	u32 head_page_offset;
	u32 page_base;
	u32 page_len;
	u32 tail_len;
	u32 tail_page_offset;
	u32 buflen;
	u32 flags;
	u32 len;
};

struct rpcrdma_rs_rqst_info {
	u32 xid;		/* host order */
	struct rpcrdma_rs_xdr_shape snd;
	struct rpcrdma_rs_xdr_shape rcv;
};

int rpcrdma_rs_xprt_register(const struct rpcrdma_rs_xprt_cbs *cbs);
void rpcrdma_rs_xprt_unregister(void);
const struct sockaddr *rpcrdma_rs_xprt_sockaddr(struct rpc_xprt *xprt,
						size_t *len);
void rpcrdma_rs_rqst_info(struct rpc_rqst *rqst,
			  struct rpcrdma_rs_rqst_info *out);
bool rpcrdma_rs_rqst_is_bc(const struct rpc_rqst *rqst);
bool rpcrdma_rs_xprt_is_connected(struct rpc_xprt *xprt);
bool rpcrdma_rs_rqst_get_cong(struct rpc_rqst *rqst);
bool rpcrdma_rs_rqst_same_connection(const struct rpc_rqst *rqst);
void rpcrdma_rs_rqst_count_sent(struct rpc_rqst *rqst);
bool rpcrdma_rs_rqst_reply_expected(const struct rpc_rqst *rqst);
void rpcrdma_rs_xprt_drop_connection(struct rpc_xprt *xprt);
void rpcrdma_rs_rqst_mark_sent(struct rpc_rqst *rqst);
int rpcrdma_rs_rqst_read(struct rpc_rqst *rqst, u32 offset, void *dst,
			 u32 len);
int rpcrdma_rs_rqst_fill_reply(struct rpc_rqst *rqst, const void *src,
			       u32 len, u32 writelist);
u32 rpcrdma_rs_rqst_reply_chunk_done(struct rpc_rqst *rqst, u32 len);
struct rpc_rqst *rpcrdma_rs_xprt_lookup_pin(struct rpc_xprt *xprt, u32 xid);
void rpcrdma_rs_xprt_complete(struct rpc_xprt *xprt, struct rpc_rqst *rqst,
			      int status);
void rpcrdma_rs_xprt_update_cwnd(struct rpc_xprt *xprt, u32 credits);
void rpcrdma_rs_xprt_force_disconnect(struct rpc_xprt *xprt);
void rpcrdma_rs_xprt_data_seen(struct rpc_xprt *xprt);
void rpcrdma_rs_xprt_schedule_flush(struct rpc_xprt *xprt, u32 ms);

/* Backchannel: hands a received reverse-direction Call (the RPC message,
 * xid first) to the callback service. 0, -ENOBUFS when every callback
 * slot is busy, -EMSGSIZE for a Call that cannot be a valid one.
 */
int rpcrdma_rs_bc_receive_call(struct rpc_xprt *xprt, const void *src, u32 len);
void rpcrdma_rs_xprt_set_bc_max_payload(struct rpc_xprt *xprt, u32 bytes);

/* Fast registration (FRWR) of xdr_buf ranges. */
struct rpcrdma_rs_mr;
struct rpcrdma_rs_mr *rpcrdma_rs_mr_alloc(struct ib_pd *pd, u32 max_pages);
void rpcrdma_rs_mr_free(struct rpcrdma_rs_mr *mr);
void rpcrdma_rs_mr_destroy(struct ib_device *device, struct rpcrdma_rs_mr *mr);
int rpcrdma_rs_mr_map_rqst(struct ib_device *device, struct rpcrdma_rs_mr *mr,
			   struct rpc_rqst *rqst, bool rcv, u32 offset,
			   u32 len, bool writable, u32 *mapped);
void rpcrdma_rs_mr_unmap(struct ib_device *device, struct rpcrdma_rs_mr *mr);
void rpcrdma_rs_mr_segment(const struct rpcrdma_rs_mr *mr, u32 *handle,
			   u32 *length, u64 *offset);
u32 rpcrdma_rs_mr_lkey(const struct rpcrdma_rs_mr *mr);
int rpcrdma_rs_mr_map_buf(struct ib_device *device, struct rpcrdma_rs_mr *mr,
			  u64 dma_addr, u32 len);
int rpcrdma_rs_post_reg_mr(struct ib_qp *qp, struct rpcrdma_rs_mr *mr,
			   bool writable);
/* A server RDMA Read sink's registration for one use: new key byte;
 * remote write only with remote_write (iWARP).
 */
int rpcrdma_rs_post_sink_reg(struct ib_qp *qp, struct rpcrdma_rs_mr *mr,
			     bool remote_write);
int rpcrdma_rs_post_local_inv(struct ib_qp *qp, u32 rkey,
			      struct ib_cqe *cqe);

/* "physical" registration: DMA addresses under the PD's global rkey. */
struct rpcrdma_rs_phys;
struct rpcrdma_rs_phys *rpcrdma_rs_phys_alloc(u32 max);
int rpcrdma_rs_phys_map_rqst(struct ib_device *device,
			     struct rpcrdma_rs_phys *pm, struct rpc_rqst *rqst,
			     bool rcv, u32 offset, u32 len, bool writable);
u32 rpcrdma_rs_phys_count(const struct rpcrdma_rs_phys *pm);
void rpcrdma_rs_phys_get(const struct rpcrdma_rs_phys *pm, u32 i, u64 *addr,
			 u32 *len);
void rpcrdma_rs_phys_free(struct ib_device *device, struct rpcrdma_rs_phys *pm);

/* Module parameters declared on the C side (strings). */
const char *rpcrdma_rs_param_memreg(void);
void rpcrdma_rs_xprt_set_max_payload(struct rpc_xprt *xprt, u32 bytes);

#endif
