// SPDX-License-Identifier: GPL-2.0

//! The server's backchannel: nfsd sends NFSv4.1 callbacks through an
//! `rpc_xprt` of class "rdma backchannel" (ident `XPRT_TRANSPORT_BC_RDMA`)
//! bound to the `svc_xprt` of the client's connection, as
//! `net/sunrpc/xprtrdma/svc_rdma_backchannel.c` builds it. Everything but
//! the Send is generic sunrpc; the Send is [`SvcTransport::bc_send`].
//!
//! C header: [`include/linux/sunrpc/xprt.h`](srctree/include/linux/sunrpc/xprt.h).

use crate::rust::bindings;
use crate::rust::sunrpc::svc::{OpsTable, SvcTransport};
use crate::rust::sunrpc::xprt_class::{
    set_display_names, ClassSlot, DisplayNames, DEFAULT_TIMEOUT,
};
use core::marker::PhantomData;
use core::mem::size_of;
use core::ptr::{addr_of_mut, null_mut};
use kernel::bindings as kb;
use kernel::ffi::{c_int, c_ulong};
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;
use kernel::seq_file::SeqFile;
use kernel::seq_print;
use kernel::types::Opaque;
use kernel::ThisModule;

/// What `xprt_alloc` allocates for one backchannel transport.
///
/// # Invariants
///
/// `xprt` comes first, so an `rpc_xprt` of this class is a `BcTransport`.
#[repr(C)]
struct BcTransport {
    xprt: Opaque<bindings::rpc_xprt>,
    names: Opaque<DisplayNames>,
}

/// The class "rdma backchannel".
static CLASS: ClassSlot<1> = ClassSlot::new();

/// The backchannel's operations table for `T` and its trampolines.
struct BcOpsTable<T: SvcTransport>(PhantomData<T>);

impl<T: SvcTransport> BcOpsTable<T> {
    const OPS: bindings::rpc_xprt_ops = bindings::rpc_xprt_ops {
        set_buffer_size: None,
        reserve_xprt: Some(bindings::xprt_reserve_xprt_cong),
        release_xprt: Some(bindings::xprt_release_xprt_cong),
        alloc_slot: Some(bindings::xprt_alloc_slot),
        free_slot: Some(bindings::xprt_free_slot),
        rpcbind: None,
        set_port: None,
        connect: None,
        get_srcaddr: None,
        get_srcport: None,
        buf_alloc: Some(Self::buf_alloc),
        buf_free: Some(Self::buf_free),
        prepare_request: None,
        send_request: Some(Self::send_request),
        abort_send_request: None,
        wait_for_reply_request: Some(bindings::xprt_wait_for_reply_request_def),
        timer: None,
        release_request: Some(bindings::xprt_release_rqst_cong),
        close: Some(Self::close),
        destroy: Some(Self::destroy),
        set_connect_timeout: None,
        print_stats: Some(Self::print_stats),
        enable_swap: None,
        disable_swap: None,
        inject_disconnect: Some(Self::inject_disconnect),
        bc_setup: None,
        bc_maxpayload: None,
        bc_num_slots: None,
        bc_free_rqst: None,
        bc_destroy: None,
    };

    /// # Safety
    ///
    /// Called by sunrpc (`xprt_create_transport` from nfsd's callback
    /// client) with valid arguments.
    unsafe extern "C" fn setup(args: *mut bindings::xprt_create) -> *mut bindings::rpc_xprt {
        // SAFETY: `args` is valid for the call.
        let args = unsafe { &*args };
        if args.addrlen > size_of::<bindings::__kernel_sockaddr_storage>() || args.bc_xprt.is_null()
        {
            return EBADF.to_ptr();
        }
        let max = bindings::RPCRDMA_MAX_BC_REQUESTS;
        // SAFETY: `net` is the caller's; the allocation is zeroed and puts
        // the `rpc_xprt` first.
        let xprt = unsafe { bindings::xprt_alloc(args.net, size_of::<BcTransport>(), max, max) };
        if xprt.is_null() {
            return ENOMEM.to_ptr();
        }
        // SAFETY: `xprt` is new and only ours; it is a `BcTransport`
        // (type invariant); the svc_xprt of the connection is live for the
        // call.
        unsafe {
            let t = &*xprt.cast::<BcTransport>();
            let x = &mut *xprt;
            x.timeout = &raw const DEFAULT_TIMEOUT;
            kb::set_bit(bindings::XPRT_BOUND as c_ulong, addr_of_mut!(x.state));
            kb::set_bit(bindings::XPRT_CONNECTED as c_ulong, addr_of_mut!(x.state));
            x.bind_timeout = 0;
            x.reestablish_timeout = 0;
            x.idle_timeout = 0;
            x.prot = bindings::xprt_transports_XPRT_TRANSPORT_BC_RDMA as c_int;
            x.ops = &Self::OPS;
            core::ptr::copy_nonoverlapping(
                args.dstaddr.cast::<u8>(),
                addr_of_mut!(x.addr).cast::<u8>(),
                args.addrlen,
            );
            x.addrlen = args.addrlen;
            set_display_names(core::ptr::from_mut(x), &mut *t.names.get());
            x.max_payload = PAGE_SIZE;
            // One reference for the svc_xprt (put by svc_xprt_free), one
            // for the caller.
            bindings::xprt_get(xprt);
            (*args.bc_xprt).xpt_bc_xprt = xprt;
            x.bc_xprt = args.bc_xprt;
            bindings::xprt_get(xprt);
        }
        // SAFETY: The svc_xprt of the connection is live for the call and
        // of the class `T` (only that class sets this backchannel up).
        unsafe { OpsTable::<T>::bc_setup(args.bc_xprt) };
        xprt
    }

    /// # Safety
    ///
    /// Called by sunrpc with a task holding a request of this class.
    unsafe extern "C" fn buf_alloc(task: *mut bindings::rpc_task) -> c_int {
        // No I/O to reclaim memory from here (C uses GFP_NOIO).
        let _noio = crate::rust::kext::memalloc::NoIoScope::new();
        let gfp = kb::GFP_KERNEL | kb::__GFP_NOWARN;
        // SAFETY: The task's request is live; a page-sized kmalloc is
        // page-aligned, as the C's `alloc_page` was.
        unsafe {
            let rqst = (*task).tk_rqstp;
            if (*rqst).rq_callsize > PAGE_SIZE {
                return EINVAL.to_errno();
            }
            let call = kb::__kmalloc_noprof(PAGE_SIZE, gfp);
            if call.is_null() {
                return ENOMEM.to_errno();
            }
            let reply = kb::__kmalloc_noprof((*rqst).rq_rcvsize, gfp);
            if reply.is_null() {
                kb::kfree(call);
                return ENOMEM.to_errno();
            }
            (*rqst).rq_buffer = call;
            (*rqst).rq_rbuffer = reply;
        }
        0
    }

    /// # Safety
    ///
    /// Called by sunrpc with a task whose request `buf_alloc` served.
    unsafe extern "C" fn buf_free(task: *mut bindings::rpc_task) {
        // SAFETY: The task's request is live; its buffers came from
        // `buf_alloc`.
        unsafe {
            let rqst = (*task).tk_rqstp;
            kb::kfree((*rqst).rq_buffer);
            kb::kfree((*rqst).rq_rbuffer);
            (*rqst).rq_buffer = null_mut();
            (*rqst).rq_rbuffer = null_mut();
        }
    }

    /// # Safety
    ///
    /// Called by sunrpc with a request of a live transport of this class.
    unsafe extern "C" fn send_request(rqst: *mut bindings::rpc_rqst) -> c_int {
        // SAFETY: The request and its transport are live; the svc_xprt,
        // when set, holds a reference on this transport and lives while
        // it is not dead.
        unsafe {
            let sxprt = (*(*rqst).rq_xprt).bc_xprt;
            let dead = bindings::XPT_DEAD as usize;
            if sxprt.is_null()
                || core::ptr::read_volatile(&raw const (*sxprt).xpt_flags) & (1 << dead) != 0
            {
                return ENOTCONN.to_errno();
            }
            (*rqst).rq_xtime = kb::ktime_get();
            let ret = OpsTable::<T>::bc_send(sxprt, rqst);
            if ret == ENOTCONN.to_errno() {
                bindings::svc_xprt_close(sxprt);
            }
            ret
        }
    }

    /// sunrpc's `fail_sunrpc` calls this after every transmit once armed
    /// for clients, backchannel ones included: a NULL entry would be
    /// called. The backchannel rides on the forward connection, which the
    /// server's own fault injection closes; nothing to do here (as
    /// `xs_inject_disconnect` for TCP's backchannel).
    extern "C" fn inject_disconnect(_xprt: *mut bindings::rpc_xprt) {}

    /// # Safety
    ///
    /// Called by sunrpc with a live transport of this class.
    unsafe extern "C" fn close(xprt: *mut bindings::rpc_xprt) {
        // SAFETY: Live transport. The window value is C's
        // (`xprt_rdma_bc_close` sets `RPC_CWNDSHIFT`).
        unsafe {
            bindings::xprt_disconnect_done(xprt);
            (*xprt).cwnd = bindings::RPC_CWNDSHIFT as c_ulong;
        }
    }

    /// # Safety
    ///
    /// Called once by sunrpc when the last reference is gone.
    unsafe extern "C" fn destroy(xprt: *mut bindings::rpc_xprt) {
        // SAFETY: Nothing refers to the transport; its strings are inside it.
        unsafe { bindings::xprt_free(xprt) };
    }

    /// # Safety
    ///
    /// Called by sunrpc with its seq_file.
    unsafe extern "C" fn print_stats(_xprt: *mut bindings::rpc_xprt, seq: *mut bindings::seq_file) {
        // SAFETY: The seq_file is the caller's, for the call.
        let m = unsafe { SeqFile::from_raw(seq.cast()) };
        seq_print!(m, "\txprt:\trdma-bc\n");
    }
}

/// The registration of the "rdma backchannel" class.
///
/// # Invariants
///
/// The class is registered with `BcOpsTable::<T>` transports while this
/// object exists.
pub(in crate::rust) struct BcRegistration<T: SvcTransport> {
    _p: PhantomData<T>,
}

impl<T: SvcTransport> BcRegistration<T> {
    pub(in crate::rust) fn new(module: &ThisModule) -> Result<Self> {
        CLASS.register(
            module,
            c"rdma backchannel",
            bindings::xprt_transports_XPRT_TRANSPORT_BC_RDMA,
            BcOpsTable::<T>::setup,
            [c""],
        )?;
        // INVARIANT: Registered above.
        Ok(Self { _p: PhantomData })
    }
}

impl<T: SvcTransport> Drop for BcRegistration<T> {
    fn drop(&mut self) {
        // SAFETY: Registered by the type invariant; every backchannel
        // transport is gone with the connections of the server, which are
        // gone before the module unloads.
        unsafe { CLASS.unregister() };
    }
}
