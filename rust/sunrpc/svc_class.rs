// SPDX-License-Identifier: GPL-2.0

//! The server transport class "rdma" (`struct svc_xprt_class`) and the
//! allocation of its transports (`struct svc_xprt` with the pointer to
//! their Rust state), as `net/sunrpc/xprtrdma/svc_rdma_transport.c` has
//! them. The operations table is [`crate::rust::sunrpc::svc`]'s.
//!
//! C header: [`include/linux/sunrpc/svc_xprt.h`](srctree/include/linux/sunrpc/svc_xprt.h).

use crate::rust::bindings;
use core::mem::size_of;
use core::ptr::{addr_of_mut, null_mut};
use kernel::bindings as kb;
use kernel::ffi::{c_int, c_ulong, c_void};
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Full, Release};
use kernel::types::Opaque;
use kernel::ThisModule;

/// The class, in a static: sunrpc lists it and `svc_xprt_init` points each
/// transport at it.
struct Class {
    class: Opaque<bindings::svc_xprt_class>,
    registered: Atomic<bool>,
}

// SAFETY: `class` is written only by `register` while no registration
// exists, then only by sunrpc under its own lock.
unsafe impl Sync for Class {}

static CLASS: Class = Class {
    class: Opaque::uninit(),
    registered: Atomic::new(false),
};

/// Registers the class with `ops`, owned by `module`.
pub(in crate::rust) fn register(
    module: &ThisModule,
    ops: &'static bindings::svc_xprt_ops,
) -> Result {
    if CLASS.registered.xchg(true, Full) {
        return Err(EBUSY);
    }
    // SAFETY: No registration exists, so sunrpc does not see the class;
    // it lives in a static.
    let rc = unsafe {
        CLASS.class.get().write(bindings::svc_xprt_class {
            xcl_name: c"rdma".as_char_ptr().cast(),
            xcl_owner: module.as_ptr().cast(),
            xcl_ops: ops,
            xcl_list: core::mem::zeroed(),
            xcl_max_payload: bindings::RPCSVC_MAXPAYLOAD,
            xcl_ident: bindings::xprt_transports_XPRT_TRANSPORT_RDMA as c_int,
        });
        bindings::svc_reg_xprt_class(CLASS.class.get())
    };
    if rc != 0 {
        CLASS.registered.store(false, Release);
        return Err(Error::from_errno(rc));
    }
    Ok(())
}

/// Unregisters the class.
///
/// # Safety
///
/// `register` succeeded and this is its one unregistration.
pub(in crate::rust) unsafe fn unregister() {
    // SAFETY: Registered, by the safety requirement.
    unsafe { bindings::svc_unreg_xprt_class(CLASS.class.get()) };
    CLASS.registered.store(false, Release);
}

/// A `struct svc_xprt` and the Rust state behind it.
#[repr(C)]
struct SvcXprt {
    xprt: Opaque<bindings::svc_xprt>,
    state: *mut c_void,
    /// Frees the allocation after a grace period ([`free`]).
    rcu: Opaque<kb::kvfree_rcu_head>,
}

/// Allocates a transport of the class for `serv` in `net` whose state is
/// `state` (a listener when `listener`); null when memory is short.
///
/// # Safety
///
/// The class is registered; `serv` and `net` are live.
pub(in crate::rust) unsafe fn alloc(
    serv: *mut bindings::svc_serv,
    net: *mut bindings::net,
    state: *mut c_void,
    listener: bool,
) -> *mut bindings::svc_xprt {
    // SAFETY: A zeroed allocation is a valid `SvcXprt` to initialise.
    let x = unsafe { kb::__kmalloc_noprof(size_of::<SvcXprt>(), kb::GFP_KERNEL | kb::__GFP_ZERO) }
        .cast::<SvcXprt>();
    if x.is_null() {
        return null_mut();
    }
    // SAFETY: `x` is ours; the class is registered (safety requirement).
    unsafe {
        let xprt = (*x).xprt.get();
        bindings::svc_xprt_init(net, CLASS.class.get(), xprt, serv);
        (*x).state = state;
        let flags = addr_of_mut!((*xprt).xpt_flags);
        // RDMA has flow control (RFC 7530 s. 3.1), like C svc_rdma.
        kb::set_bit(bindings::XPT_CONG_CTRL as c_ulong, flags);
        if listener {
            kb::set_bit(bindings::XPT_LISTENER as c_ulong, flags);
            let name = b"listener\0";
            core::ptr::copy_nonoverlapping(
                name.as_ptr(),
                addr_of_mut!((*xprt).xpt_remotebuf).cast::<u8>(),
                name.len(),
            );
        }
        xprt
    }
}

/// The state pointer of a transport of [`alloc`].
///
/// # Safety
///
/// `xprt` came from [`alloc`] and is not freed.
pub(in crate::rust) unsafe fn state(xprt: *mut bindings::svc_xprt) -> *mut c_void {
    // SAFETY: `xprt` is the first field of an `SvcXprt`.
    unsafe { (*xprt.cast::<SvcXprt>()).state }
}

/// Frees a transport of [`alloc`].
///
/// # Safety
///
/// `xprt` came from [`alloc`]; nothing refers to it any more.
pub(in crate::rust) unsafe fn free(xprt: *mut bindings::svc_xprt) {
    let x = xprt.cast::<SvcXprt>();
    // SAFETY: The allocation starts at `xprt` (first field) and is an
    // `SvcXprt`; its `rcu` head is unused until now. Freed by the RCU core
    // once every reader that may have found the transport through an
    // `XprtLink` (under `rcu_read_lock`) is done.
    unsafe { kb::kvfree_call_rcu((*x).rcu.get(), x.cast()) };
}

/// Bytes of a socket address of its family (C `svc_addr_len`); 0 for a
/// family sunrpc does not serve.
///
/// # Safety
///
/// `sa` points to a socket address.
unsafe fn addr_len(sa: *const bindings::__kernel_sockaddr_storage) -> usize {
    // SAFETY: The family is the first field of every socket address.
    let family = u32::from(unsafe { (*sa).__bindgen_anon_1.__bindgen_anon_1.ss_family });
    if family == bindings::AF_INET {
        size_of::<bindings::sockaddr_in>()
    } else if family == bindings::AF_INET6 {
        size_of::<bindings::sockaddr_in6>()
    } else {
        0
    }
}

/// Sets the transport's local (and, for a connection, remote) address from
/// the CM identifier's route.
///
/// # Safety
///
/// `xprt` came from [`alloc`]; `id` is live.
pub(in crate::rust) unsafe fn set_addrs(
    xprt: *mut bindings::svc_xprt,
    id: *mut bindings::rdma_cm_id,
    listener: bool,
) {
    // SAFETY: By the safety requirement; the route's addresses are
    // `sockaddr_storage`s.
    unsafe {
        // C `svc_xprt_set_local`.
        let src = addr_of_mut!((*id).route.addr.src_addr);
        let len = addr_len(src);
        core::ptr::copy_nonoverlapping(
            src.cast::<u8>(),
            addr_of_mut!((*xprt).xpt_local).cast::<u8>(),
            len,
        );
        (*xprt).xpt_locallen = len;
        if listener {
            return;
        }
        let dst = addr_of_mut!((*id).route.addr.dst_addr);
        let len = addr_len(dst);
        (*xprt).xpt_remotelen = len;
        core::ptr::copy_nonoverlapping(
            dst.cast::<u8>(),
            addr_of_mut!((*xprt).xpt_remote).cast::<u8>(),
            len,
        );
        let buf = addr_of_mut!((*xprt).xpt_remotebuf);
        bindings::rpc_ntop(dst.cast(), buf.cast(), (*buf).len() - 1);
        // Fixed remote port so the DRC survives reconnects (as C): the
        // port is at the same offset in both families.
        addr_of_mut!((*xprt).xpt_remote)
            .cast::<u8>()
            .add(2)
            .cast::<[u8; 2]>()
            .write([0, 0]);
    }
}
