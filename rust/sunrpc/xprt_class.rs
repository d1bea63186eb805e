// SPDX-License-Identifier: GPL-2.0

//! The client transport class "rdma" (`struct xprt_class`) and its
//! operations table (`struct rpc_xprt_ops`), built here as
//! `net/sunrpc/xprtrdma/transport.c` builds them in C.
//!
//! - [`XprtOps`], a `#[vtable]` trait the transport implements;
//! - `OpsTable`, the `const` operations table of an implementation and its
//!   trampolines: generic entries are sunrpc's own functions (congestion
//!   control, slots, rpcbind), the transport-specific ones call [`XprtOps`];
//! - `Transport`, what `xprt_alloc` allocates for each transport: the
//!   `rpc_xprt` first, then the connect and flush work items, the
//!   implementation's state and the address strings sunrpc displays;
//! - [`Registration`], which fills the class and registers it.
//!
//! C header: [`include/linux/sunrpc/xprt.h`](srctree/include/linux/sunrpc/xprt.h).

use crate::rust::bindings;
use crate::rust::kext::workqueue::OwnedQueue;
use crate::rust::rdma::cm::{Addr, SockAddr};
use crate::rust::sunrpc::xprt::{RpcRqst, Xprt, XprtCounters, XprtLocked};
#[cfg(CONFIG_SUNRPC_BACKCHANNEL)]
use crate::rust::sunrpc::xprt_bc::BcPool;
use crate::rust::sunrpc::xprt_locks::transport_lock;
use crate::rust::sunrpc::xprt_slots::{Slot, SlotTable, SLOT_BUF};
use core::cell::UnsafeCell;
use core::fmt::Write;
use core::marker::PhantomData;
use core::mem::{offset_of, size_of};
use core::ptr::{addr_of_mut, null_mut, NonNull};
use kernel::bindings as kb;
use kernel::error::from_result;
use kernel::ffi::{c_char, c_int, c_uint, c_ulong, c_ushort, c_void};
use kernel::prelude::*;
use kernel::seq_file::SeqFile;
use kernel::sync::atomic::{Acquire, Atomic, Full, Relaxed, Release};
use kernel::sync::barrier::smp_mb;
use kernel::time::msecs_to_jiffies;
use kernel::types::{ForeignOwnable, Opaque};
use kernel::ThisModule;

/// Largest payload before the transport sets its own (1 MiB plus a page).
const MAX_DATA_SEGS: usize = (1024 * 1024) / kernel::page::PAGE_SIZE + 1;
/// rpcbind timeout (C `RPCRDMA_BIND_TO`).
const BIND_TO_MS: u32 = 60 * 1000;
/// First reconnect delay (C `RPCRDMA_INIT_REEST_TO`).
const INIT_REEST_TO_MS: u32 = 5 * 1000;
/// Idle time before sunrpc closes the connection (C `RPCRDMA_IDLE_DISC_TO`).
const IDLE_DISC_TO_MS: u32 = 5 * 60 * 1000;
/// RFC 8166's minimum inline size less the transport header: the largest
/// backchannel message until a connection says otherwise.
const BC_MIN_PAYLOAD: u32 = 1024 - 28;

/// The transport-specific client operations.
#[vtable]
pub trait XprtOps: Sized + Send + Sync {
    /// The transport's state for one request, kept in the request's slot
    /// (C's `rpcrdma_req` around its `rpc_rqst`) and reached from the
    /// request ([`RpcRqst::state`], [`crate::rust::sunrpc::xprt_reply::ReplyRqst::state`]).
    type Req: Send + Sync + 'static;
    /// Reverse-direction (callback) requests per transport, at most
    /// 64 (`xprt_bc::MAX_BC_SLOTS`).
    const BC_SLOTS: u32;
    /// Concurrent RPCs a transport admits (its slot table size, C
    /// `xprt_rdma_slot_table_entries`).
    fn max_slots() -> u32;
    /// The state of a new slot.
    fn new_req() -> impl PinInit<Self::Req, Error>;
    /// Creates the state of a new transport.
    fn setup(xprt: Xprt) -> Result<Self>;
    /// Connects; blocks (process context). Called with the connect lock,
    /// which holds `XPRT_LOCKED` for it.
    fn connect(&self, locked: &mut XprtLocked<'_>) -> Result;
    /// Sends one request: a call, or the Reply to a backchannel Call
    /// ([`RpcRqst::is_backchannel`]). Admission and reconnection are the
    /// transport's to decide (sunrpc's `->send_request`).
    fn send_request(&self, rqst: &RpcRqst<'_>, locked: &mut XprtLocked<'_>) -> Result;
    /// Tears the connection down.
    fn close(&self, locked: &mut XprtLocked<'_>);
    /// Releases what a request of the transport's slots still holds (its
    /// reply never came): `req` is the request's state, found once by the
    /// caller with its buffer.
    fn buf_free(&self, req: &Self::Req);
    /// Writes the transport's line of `/proc/self/mountstats`, which
    /// starts with `counters` (the same for every transport, each line
    /// ending with the transport's own counters).
    fn print_stats(&self, m: &SeqFile, counters: &XprtCounters);
    /// Deferred work requested with [`Xprt::schedule_flush`] (process
    /// context).
    fn flush(&self);
    /// Breaks the connection as a network failure would: sunrpc's
    /// `fail_sunrpc` fault injection calls it after a transmit, with the
    /// transport's send lock held (process context).
    fn inject_disconnect(&self);
}

/// A NUL-terminated string of at most `N - 1` bytes, in place, for the
/// `address_strings` sunrpc reads (`rpc_peeraddr2str`, debugfs, sysfs).
#[repr(C)]
pub(in crate::rust) struct Name<const N: usize>([u8; N]);

impl<const N: usize> Name<N> {
    /// The buffer, for C that writes a string into it.
    pub(in crate::rust) fn as_mut_ptr(&mut self) -> *mut c_char {
        self.0.as_mut_ptr().cast()
    }

    /// The longest string it holds, without its NUL.
    pub(in crate::rust) fn capacity(&self) -> usize {
        N - 1
    }

    /// Replaces the string with `args`, cut to fit. The last byte is never
    /// written, so a reader racing with `set_port` still finds a NUL.
    pub(in crate::rust) fn set(&mut self, args: core::fmt::Arguments<'_>) {
        struct Cursor<'a>(&'a mut [u8], usize);
        impl Write for Cursor<'_> {
            fn write_str(&mut self, s: &str) -> core::fmt::Result {
                for &b in s.as_bytes() {
                    // Keep the last byte for the NUL.
                    if self.1 + 1 >= self.0.len() {
                        break;
                    }
                    if let Some(slot) = self.0.get_mut(self.1) {
                        *slot = b;
                        self.1 += 1;
                    }
                }
                Ok(())
            }
        }
        let mut c = Cursor(&mut self.0, 0);
        let _ = c.write_fmt(args);
        let end = c.1;
        if let Some(slot) = self.0.get_mut(end) {
            *slot = 0;
        }
    }

    pub(in crate::rust) fn as_ptr(&self) -> *const c_char {
        self.0.as_ptr().cast()
    }
}

/// The address strings every transport of this module displays: its
/// address and port (protocol and netid are static strings).
#[repr(C)]
pub(in crate::rust) struct DisplayNames {
    addr: Name<64>,
    port: Name<8>,
}

/// The address strings of one client transport.
#[repr(C)]
struct Names {
    base: DisplayNames,
    hex_addr: Name<40>,
    hex_port: Name<8>,
}

/// Points `address_strings[which]` of `xprt` at `s`.
///
/// # Safety
///
/// `xprt` is live and its address strings are not being read as a whole
/// elsewhere (setup, or rpcbind's `set_port`); `s` lives as long as it.
unsafe fn set_display(
    xprt: *mut bindings::rpc_xprt,
    which: bindings::rpc_display_format_t,
    s: *const c_char,
) {
    // SAFETY: `address_strings` has `RPC_DISPLAY_MAX` entries, more than
    // any `rpc_display_format_t` value below it.
    unsafe {
        addr_of_mut!((*xprt).address_strings)
            .cast::<*const c_char>()
            .add(which as usize)
            .write(s)
    };
}

/// Formats the address and port of `xprt->addr` into `names` and points
/// the ADDR, PORT, PROTO and NETID strings of `xprt` at them (C
/// `xprt_rdma_format_addresses`, `xprt_setup_rdma_bc`); returns the
/// address for the class's further strings.
///
/// # Safety
///
/// As [`set_display`]; `xprt->addr` holds `addrlen` bytes; `names` is the
/// transport's and lives as long as it.
pub(in crate::rust) unsafe fn set_display_names(
    xprt: *mut bindings::rpc_xprt,
    names: &mut DisplayNames,
) -> Option<Addr> {
    // SAFETY: `addr` holds `addrlen` (at most its size) bytes.
    let addr = unsafe {
        SockAddr::copy_from(
            addr_of_mut!((*xprt).addr).cast::<bindings::sockaddr>(),
            (*xprt).addrlen,
        )
    }
    .addr();
    let (netid, port) = match addr {
        Some(Addr::V4(_, port)) => (NETID_RDMA, port),
        Some(Addr::V6(_, port)) => (NETID_RDMA6, port),
        None => (NETID_RDMA, 0),
    };
    // SAFETY: `addr` is a valid socket address; the buffer is writable for
    // its capacity plus the NUL, and `rpc_ntop` NUL-terminates within it.
    unsafe {
        bindings::rpc_ntop(
            addr_of_mut!((*xprt).addr).cast(),
            names.addr.as_mut_ptr(),
            names.addr.capacity(),
        )
    };
    names.port.set(format_args!("{}", port));
    // SAFETY: By the safety requirement; the strings live as long as the
    // transport (its names) or forever (static ones).
    unsafe {
        set_display(
            xprt,
            bindings::rpc_display_format_t_RPC_DISPLAY_ADDR,
            names.addr.as_ptr(),
        );
        set_display(
            xprt,
            bindings::rpc_display_format_t_RPC_DISPLAY_PORT,
            names.port.as_ptr(),
        );
        set_display(
            xprt,
            bindings::rpc_display_format_t_RPC_DISPLAY_PROTO,
            PROTO_RDMA.as_char_ptr(),
        );
        set_display(
            xprt,
            bindings::rpc_display_format_t_RPC_DISPLAY_NETID,
            netid.as_char_ptr(),
        );
    }
    addr
}

/// What `xprt_alloc` allocates for one transport.
///
/// # Invariants
///
/// `xprt` comes first, so an `rpc_xprt` of this class is a `Transport`.
/// `state` holds the `KBox` of the implementation from the end of `setup`
/// until `destroy`; `slots` holds the `KBox` of the request slots for the
/// same time. Both are written only while no other thread can reach the
/// transport (in `setup` before sunrpc is handed it, in `destroy` after
/// its last operation) and only read in between: plain fields, not
/// atomics. The work items are initialised in `setup` and
/// cancelled in `destroy` before anything they use is freed.
#[repr(C)]
struct Transport {
    xprt: Opaque<bindings::rpc_xprt>,
    connect_work: Opaque<kb::delayed_work>,
    flush_work: Opaque<kb::delayed_work>,
    state: UnsafeCell<*mut c_void>,
    slots: UnsafeCell<*mut c_void>,
    connect_failed: Atomic<bool>,
    bc_max_payload: Atomic<u32>,
    names: Opaque<Names>,
    #[cfg(CONFIG_SUNRPC_BACKCHANNEL)]
    bc_pool: Opaque<BcPool>,
}

impl Transport {
    /// # Safety
    ///
    /// `xprt` is a live transport of this class (allocated by `setup`, not
    /// yet freed by `destroy`).
    unsafe fn from_xprt<'a>(xprt: *mut bindings::rpc_xprt) -> &'a Transport {
        // SAFETY: By the type invariant and the safety requirement the
        // allocation is a `Transport`; every field C or other threads
        // change is an `Opaque` or an atomic, and the two cells are
        // written only while no other thread reaches it (type invariant).
        unsafe { &*xprt.cast::<Transport>() }
    }

    /// The request slots, if their state is `R`.
    fn slots<R: 'static>(&self) -> Option<&SlotTable<R>> {
        // SAFETY: By the type invariant, a `SlotTable` set from
        // `KBox::into_raw` before sunrpc can call an operation, and freed
        // only by `destroy`.
        unsafe { SlotTable::from_erased(*self.slots.get()) }
    }

    /// The request slots, of the state `R` the transport's class made them
    /// with, without looking at their type: for the class's own
    /// operations.
    ///
    /// # Safety
    ///
    /// `R` is the `XprtOps::Req` of the class whose `setup` made the
    /// transport (its `OpsTable`'s operations, which sunrpc calls only with
    /// transports of their class).
    unsafe fn class_slots<R: 'static>(&self) -> &SlotTable<R> {
        // SAFETY: By the type invariant, a `SlotTable` set from
        // `KBox::into_raw` before sunrpc can call an operation, and freed
        // only by `destroy`; of `R` by the safety requirement.
        unsafe { &*(*self.slots.get()).cast::<SlotTable<R>>() }
    }
}

/// [`slot_of`] for the class's own operations, without looking at the
/// type of the slots' state.
///
/// # Safety
///
/// `rqst` is a live request of a live transport of this class, whose
/// `XprtOps::Req` is `R`.
unsafe fn class_slot_of<'a, R: 'static>(rqst: *const bindings::rpc_rqst) -> Option<&'a Slot<R>> {
    // SAFETY: By the safety requirement.
    let t = unsafe { Transport::from_xprt((*rqst).rq_xprt) };
    // SAFETY: A live request of a transport whose slots hold `R` (safety
    // requirement).
    unsafe { t.class_slots::<R>().slot_of(rqst) }
}

/// The slot of `rqst`, a forward request of a transport of this class
/// (its `alloc_slot` gave it out), if it is one and its state is `R`.
///
/// # Safety
///
/// `rqst` is a live request of a live transport of this class.
pub(in crate::rust) unsafe fn slot_of<'a, R: 'static>(
    rqst: *const bindings::rpc_rqst,
) -> Option<&'a Slot<R>> {
    // SAFETY: By the safety requirement.
    let t = unsafe { Transport::from_xprt((*rqst).rq_xprt) };
    // SAFETY: A live request (safety requirement).
    unsafe { t.slots::<R>()?.slot_of(rqst) }
}

/// The state of every slot of `xprt`, if it is `R`.
///
/// # Safety
///
/// `xprt` is a live transport of this class.
pub(in crate::rust) unsafe fn slot_states<'a, R: 'static>(
    xprt: *mut bindings::rpc_xprt,
) -> Option<&'a SlotTable<R>> {
    // SAFETY: By the safety requirement.
    unsafe { Transport::from_xprt(xprt) }.slots::<R>()
}

/// `xprt_class::setup`.
pub(in crate::rust) type SetupFn =
    unsafe extern "C" fn(*mut bindings::xprt_create) -> *mut bindings::rpc_xprt;

#[repr(C)]
struct ClassStorage<const N: usize> {
    class: bindings::xprt_class,
    /// The flexible array `xprt_class::netid`, ended by "" (sunrpc's lookup
    /// by netid reads it up to the first "").
    netid: [*const c_char; N],
}

// `netid` must land where the flexible array `xprt_class::netid` starts.
const _: () = assert!(offset_of!(bindings::xprt_class, netid) == size_of::<bindings::xprt_class>());

/// An `xprt_class` in a static, because sunrpc's `setup` receives no
/// pointer to its class: the client's "rdma" here, the server's
/// "rdma backchannel" in `rust/sunrpc/svc_bc.rs`.
///
/// # Invariants
///
/// `storage` is written only by [`Self::register`] while `registered` says
/// no registration exists, and is on sunrpc's list from a successful
/// `register` until [`Self::unregister`].
pub(in crate::rust) struct ClassSlot<const N: usize> {
    storage: Opaque<ClassStorage<N>>,
    registered: Atomic<bool>,
}

// SAFETY: See the type invariant: otherwise only sunrpc writes the class,
// under its own lock.
unsafe impl<const N: usize> Sync for ClassSlot<N> {}

impl<const N: usize> ClassSlot<N> {
    pub(in crate::rust) const fn new() -> Self {
        Self {
            storage: Opaque::uninit(),
            registered: Atomic::new(false),
        }
    }

    /// Fills the class (owned by `module`) and lists it with sunrpc;
    /// `netid` ends with "". `EBUSY` if it is registered already.
    pub(in crate::rust) fn register(
        &self,
        module: &ThisModule,
        name: &CStr,
        ident: bindings::xprt_transports,
        setup: SetupFn,
        netid: [&'static CStr; N],
    ) -> Result {
        if self.registered.xchg(true, Full) {
            return Err(EBUSY);
        }
        // Longer names are cut; one byte stays NUL.
        let mut class_name = [0 as c_char; 32];
        for (d, s) in class_name.iter_mut().take(31).zip(name.to_bytes()) {
            *d = *s as c_char;
        }
        // SAFETY: No registration exists (`registered` was false), so
        // sunrpc does not see the class and nothing reads it.
        unsafe {
            self.storage.get().write(ClassStorage {
                class: bindings::xprt_class {
                    list: core::mem::zeroed(),
                    ident,
                    setup: Some(setup),
                    owner: module.as_ptr().cast(),
                    name: class_name,
                    netid: bindings::__IncompleteArrayField::new(),
                },
                netid: netid.map(|n| n.as_char_ptr()),
            })
        };
        // SAFETY: The class is filled and lives in a static; it stays
        // listed until `unregister`.
        let rc = unsafe { bindings::xprt_register_transport(self.class()) };
        if rc != 0 {
            self.registered.store(false, Release);
            return Err(Error::from_errno(rc));
        }
        // INVARIANT: Listed above.
        Ok(())
    }

    /// Takes the class off sunrpc's list.
    ///
    /// # Safety
    ///
    /// `register` succeeded and this is its one `unregister`.
    pub(in crate::rust) unsafe fn unregister(&self) {
        // SAFETY: Listed, by the safety requirement.
        unsafe { bindings::xprt_unregister_transport(self.class()) };
        self.registered.store(false, Release);
    }

    /// The class (a transport's `xprt_class`).
    pub(in crate::rust) fn class(&self) -> *mut bindings::xprt_class {
        // SAFETY: Only a place is computed, nothing is read.
        unsafe { &raw mut (*self.storage.get()).class }
    }

    /// The module that owns the class.
    ///
    /// # Safety
    ///
    /// The class is registered.
    pub(in crate::rust) unsafe fn owner(&self) -> *mut kb::module {
        // SAFETY: Filled by `register` (safety requirement), then constant.
        unsafe { (*self.class()).owner.cast() }
    }
}

/// The client class "rdma".
static CLASS: ClassSlot<3> = ClassSlot::new();

/// The connect and flush queue of the client registration (module-owned,
/// so unload waits for the last item), read by the trampolines.
static QUEUE: Atomic<*mut kb::workqueue_struct> = Atomic::new(null_mut());

/// `RPC_DISPLAY_*` protocol and netid strings (static, never freed).
const PROTO_RDMA: &CStr = c"rdma";
const NETID_RDMA: &CStr = c"rdma";
const NETID_RDMA6: &CStr = c"rdma6";
const NETID_END: &CStr = c"";

/// Default timeouts: 60 s, no retries (C `xprt_rdma_default_timeout`);
/// the server's backchannel uses them too.
pub(in crate::rust) static DEFAULT_TIMEOUT: bindings::rpc_timeout = bindings::rpc_timeout {
    to_initval: 60 * kb::CONFIG_HZ as c_ulong,
    to_maxval: 60 * kb::CONFIG_HZ as c_ulong,
    to_increment: 0,
    to_retries: 0,
    to_exponential: 0,
};

/// The operations table of `T` and its trampolines.
struct OpsTable<T: XprtOps>(PhantomData<T>);

impl<T: XprtOps> OpsTable<T> {
    const OPS: bindings::rpc_xprt_ops = bindings::rpc_xprt_ops {
        set_buffer_size: None,
        reserve_xprt: Some(bindings::xprt_reserve_xprt_cong),
        release_xprt: Some(bindings::xprt_release_xprt_cong),
        alloc_slot: Some(Self::alloc_slot),
        free_slot: Some(Self::free_slot),
        rpcbind: Some(bindings::rpcb_getport_async),
        set_port: Some(Self::set_port),
        connect: Some(Self::connect),
        get_srcaddr: None,
        get_srcport: None,
        buf_alloc: Some(Self::buf_alloc),
        buf_free: Some(Self::buf_free),
        prepare_request: None,
        send_request: Some(Self::send_request),
        abort_send_request: None,
        wait_for_reply_request: Some(bindings::xprt_wait_for_reply_request_def),
        timer: Some(Self::timer),
        release_request: Some(bindings::xprt_release_rqst_cong),
        close: Some(Self::close),
        destroy: Some(Self::destroy),
        set_connect_timeout: Some(Self::set_connect_timeout),
        print_stats: Some(Self::print_stats),
        enable_swap: Some(Self::enable_swap),
        disable_swap: Some(Self::disable_swap),
        inject_disconnect: Some(Self::inject_disconnect),
        bc_setup: Some(Self::bc_setup),
        bc_maxpayload: Some(Self::bc_maxpayload),
        bc_num_slots: Some(Self::bc_num_slots),
        bc_free_rqst: BC_FREE_RQST,
        bc_destroy: BC_DESTROY,
    };

    /// The implementation's state of `xprt`.
    ///
    /// # Safety
    ///
    /// `xprt` is a transport of this class between the end of `setup` and
    /// `destroy`.
    unsafe fn state<'a>(xprt: *mut bindings::rpc_xprt) -> &'a T {
        // SAFETY: By the safety requirement.
        let t = unsafe { Transport::from_xprt(xprt) };
        // SAFETY: By the type invariant of `Transport`, `state` came from
        // `KBox::<T>::into_foreign` and is owned until `destroy`.
        unsafe { <KBox<T> as ForeignOwnable>::borrow((*t.state.get()).cast()) }
    }

    /// Fills the address strings from `xprt->addr`.
    ///
    /// # Safety
    ///
    /// `xprt` is a transport of this class being set up, or whose port
    /// sunrpc is setting (`set_port`).
    unsafe fn format_addresses(xprt: *mut bindings::rpc_xprt) {
        // SAFETY: By the safety requirement.
        let t = unsafe { Transport::from_xprt(xprt) };
        // SAFETY: Only `setup` and `set_port` (serialised by sunrpc's
        // rpcbind) write the names; readers find a NUL in every buffer.
        let names = unsafe { &mut *t.names.get() };
        // SAFETY: By the safety requirement; the names are the transport's.
        let addr = unsafe { set_display_names(xprt, &mut names.base) };
        let port = match addr {
            Some(Addr::V4(a, port)) => {
                names
                    .hex_addr
                    .set(format_args!("{:08x}", u32::from_be_bytes(a)));
                port
            }
            Some(Addr::V6(a, port)) => {
                names
                    .hex_addr
                    .set(format_args!("{:032x}", u128::from_be_bytes(a)));
                port
            }
            None => 0,
        };
        names.hex_port.set(format_args!("{:4x}", port));
        // SAFETY: As above.
        unsafe {
            set_display(
                xprt,
                bindings::rpc_display_format_t_RPC_DISPLAY_HEX_ADDR,
                names.hex_addr.as_ptr(),
            );
            set_display(
                xprt,
                bindings::rpc_display_format_t_RPC_DISPLAY_HEX_PORT,
                names.hex_port.as_ptr(),
            );
        }
    }

    /// # Safety
    ///
    /// Called by sunrpc (`xprt_create_transport`) with valid arguments.
    unsafe extern "C" fn setup(args: *mut bindings::xprt_create) -> *mut bindings::rpc_xprt {
        // SAFETY: `args` is valid for the call.
        let args = unsafe { &*args };
        if args.addrlen > size_of::<bindings::__kernel_sockaddr_storage>() {
            return EBADF.to_ptr();
        }
        // SAFETY: `dstaddr` is valid for `addrlen` bytes.
        let sa = unsafe { SockAddr::copy_from(args.dstaddr, args.addrlen) };
        if sa.addr().is_none() {
            return EAFNOSUPPORT.to_ptr();
        }
        // SAFETY: The class is registered (sunrpc found it).
        let owner = unsafe { CLASS.owner() };
        // SAFETY: `owner` is this module, live while the class is listed.
        if !unsafe { kb::try_module_get(owner) } {
            return EIO.to_ptr();
        }
        let max_slots = T::max_slots();
        let slots = match SlotTable::<T::Req>::new(max_slots, T::new_req) {
            Ok(s) => s,
            Err(e) => {
                // SAFETY: Taken above.
                unsafe { kb::module_put(owner) };
                return e.to_ptr();
            }
        };
        // SAFETY: `net` is the caller's namespace; `xprt_alloc` zeroes the
        // `Transport`-sized allocation and puts the `rpc_xprt` first. Its
        // own slots stay unused (none preallocated): `alloc_slot` serves
        // the table's, and `max_reqs` still bounds the congestion window.
        let xprt = unsafe { bindings::xprt_alloc(args.net, size_of::<Transport>(), 0, max_slots) };
        let Some(xp) = NonNull::new(xprt) else {
            drop(slots);
            // SAFETY: Taken above.
            unsafe { kb::module_put(owner) };
            return ENOMEM.to_ptr();
        };
        // SAFETY: Freshly allocated and zeroed: every field of `Transport`
        // is valid as zeroes; nothing else refers to it yet.
        unsafe { Self::init(xprt, args) };
        // SAFETY: As above; sunrpc calls no operation before `setup`
        // returns.
        unsafe { *Transport::from_xprt(xprt).slots.get() = KBox::into_raw(slots).cast() };
        // SAFETY: The transport lives until `destroy`, which drops the state
        // (and with it every `Xprt`) before freeing it.
        let handle = unsafe { Xprt::from_raw(xp) };
        match T::setup(handle).and_then(|s| Ok(KBox::new(s, GFP_KERNEL)?)) {
            Ok(state) => {
                // SAFETY: `xprt` is live.
                let t = unsafe { Transport::from_xprt(xprt) };
                // SAFETY: Not handed to sunrpc yet: no other thread reads
                // it (type invariant).
                unsafe { *t.state.get() = state.into_foreign().cast() };
                xprt
            }
            Err(e) => {
                pr_err!("client transport setup failed: {:?}\n", e);
                // SAFETY: Nothing was queued on the work items and nothing
                // holds the transport: it is freed as allocated, with its
                // slots (from `KBox::into_raw` above).
                unsafe {
                    drop(KBox::from_raw(*Transport::from_xprt(xprt).slots.get()));
                    bindings::xprt_free(xprt);
                    kb::module_put(owner);
                }
                ENOMEM.to_ptr()
            }
        }
    }

    /// Fills a new transport (C `xprt_setup_rdma`).
    ///
    /// # Safety
    ///
    /// `xprt` is a zeroed `Transport` allocation of `xprt_alloc` no one
    /// else sees yet; `args` is sunrpc's.
    unsafe fn init(xprt: *mut bindings::rpc_xprt, args: &bindings::xprt_create) {
        let timeout = &raw const DEFAULT_TIMEOUT;
        // SAFETY: By the safety requirement.
        unsafe {
            let x = &mut *xprt;
            x.timeout = timeout;
            x.connect_timeout = (*timeout).to_initval;
            x.max_reconnect_timeout = (*timeout).to_maxval;
            x.bind_timeout = msecs_to_jiffies(BIND_TO_MS);
            x.reestablish_timeout = msecs_to_jiffies(INIT_REEST_TO_MS);
            x.idle_timeout = msecs_to_jiffies(IDLE_DISC_TO_MS);
            x.ops = &Self::OPS;
            x.prot = kb::IPPROTO_TCP as c_int;
            x.xprt_class = CLASS.class();
            x.addrlen = args.addrlen;
            core::ptr::copy_nonoverlapping(
                args.dstaddr.cast::<u8>(),
                addr_of_mut!(x.addr).cast::<u8>(),
                args.addrlen,
            );
            x.max_payload = MAX_DATA_SEGS << kernel::page::PAGE_SHIFT;
            // A congestion window of one credit until the server grants more.
            x.cwnd = bindings::RPC_CWNDSCALE as c_ulong;
        }
        // SAFETY: As above.
        let sa = unsafe { SockAddr::copy_from(args.dstaddr, args.addrlen) };
        if matches!(sa.addr(), Some(Addr::V4(_, p) | Addr::V6(_, p)) if p != 0) {
            // SAFETY: `state` is the transport's bit field.
            unsafe { kb::set_bit(bindings::XPRT_BOUND as c_ulong, addr_of_mut!((*xprt).state)) };
        }
        // SAFETY: By the safety requirement.
        unsafe { Self::format_addresses(xprt) };
        // SAFETY: By the safety requirement.
        let t = unsafe { Transport::from_xprt(xprt) };
        t.bc_max_payload.store(BC_MIN_PAYLOAD, Relaxed);
        #[cfg(CONFIG_SUNRPC_BACKCHANNEL)]
        {
            const {
                assert!(T::BC_SLOTS as usize <= crate::rust::sunrpc::xprt_bc::MAX_BC_SLOTS);
            }
            // SAFETY: By the safety requirement, a transport of this class.
            unsafe { crate::rust::sunrpc::xprt_bc::set_limit(xprt, T::BC_SLOTS as usize) };
        }
        // SAFETY: The work items are unused; their functions have the C
        // signature and find the transport from the item.
        unsafe {
            init_delayed_work(
                t.connect_work.get(),
                Self::connect_worker,
                c"rpcrdma_rs_connect",
                kernel::static_lock_class!(),
                kernel::static_lock_class!(),
            );
            init_delayed_work(
                t.flush_work.get(),
                Self::flush_worker,
                c"rpcrdma_rs_flush",
                kernel::static_lock_class!(),
                kernel::static_lock_class!(),
            );
        }
    }

    /// # Safety
    ///
    /// Called once by sunrpc when the last reference is gone.
    unsafe extern "C" fn destroy(xprt: *mut bindings::rpc_xprt) {
        // SAFETY: A live transport of this class.
        let t = unsafe { Transport::from_xprt(xprt) };
        // SAFETY: Initialised in `setup`.
        unsafe { kb::cancel_delayed_work_sync(t.connect_work.get()) };
        // Close first: once the connection is drained no completion can
        // schedule the flush worker again, so cancelling it then is final
        // and `flush` never runs on freed state.
        // SAFETY: `xprt_destroy` took `XPRT_LOCKED` for good before it
        // scheduled this; no other holder is left.
        let mut locked = unsafe { XprtLocked::new(NonNull::new_unchecked(xprt)) };
        // SAFETY: Between setup and destroy.
        unsafe { Self::state(xprt) }.close(&mut locked);
        // SAFETY: Initialised in `setup`.
        unsafe { kb::cancel_delayed_work_sync(t.flush_work.get()) };
        // Callback requests not released by `bc_destroy` (each in-flight
        // one holds a transport reference, so none is in use here).
        #[cfg(CONFIG_SUNRPC_BACKCHANNEL)]
        // SAFETY: The transport is live and has no callback in flight.
        unsafe {
            crate::rust::sunrpc::xprt_bc::destroy(xprt, 0)
        };
        // SAFETY: After the transport's last operation: no other thread
        // reads it (type invariant).
        let state = unsafe { core::ptr::replace(t.state.get(), null_mut()) };
        // SAFETY: `state` came from `into_foreign` in `setup`; no other
        // operation runs after `destroy`.
        drop(unsafe { <KBox<T> as ForeignOwnable>::from_foreign(state.cast()) });
        // SAFETY: As for `state`.
        let slots = unsafe { core::ptr::replace(t.slots.get(), null_mut()) };
        // SAFETY: From `KBox::into_raw` in `setup`; sunrpc destroys a
        // transport after its last task, so no slot is in use.
        drop(unsafe { KBox::from_raw(slots.cast::<SlotTable<T::Req>>()) });
        // SAFETY: The class is registered while a transport exists.
        let owner = unsafe { CLASS.owner() };
        // SAFETY: Nothing refers to the transport any more; `setup` took
        // the module reference dropped here.
        unsafe {
            bindings::xprt_free(xprt);
            kb::module_put(owner);
        }
    }

    /// # Safety
    ///
    /// Called by sunrpc with a live transport and the task that connects.
    unsafe extern "C" fn connect(xprt: *mut bindings::rpc_xprt, task: *mut bindings::rpc_task) {
        // SAFETY: A live transport of this class.
        let t = unsafe { Transport::from_xprt(xprt) };
        let cookie = core::ptr::from_ref(t).cast_mut().cast::<c_void>();
        // sunrpc calls `connect` with the transport locked for `task`; the
        // lock then passes to the connect worker (C WARNs otherwise). Not
        // passed, the worker would run without it: the task retries.
        // SAFETY: Both are live.
        if !unsafe { bindings::xprt_lock_connect(xprt, task, cookie) } {
            crate::pr_warn_ratelimited!("connect called without the transport's send lock\n");
            // `xprt_connect` set `XPRT_CONNECTING` for this connect: left
            // set, every later connect would return at once and the
            // transport would never connect again.
            // SAFETY: Live transport; the tasks waiting for the connect
            // retry it.
            unsafe {
                clear_connecting(xprt);
                bindings::xprt_wake_pending_tasks(xprt, EAGAIN.to_errno());
            }
            return;
        }
        let mut delay: c_ulong = 0;
        if t.connect_failed.load(Relaxed) {
            // SAFETY: Live transport.
            unsafe {
                delay = bindings::xprt_reconnect_delay(xprt);
                bindings::xprt_reconnect_backoff(xprt, msecs_to_jiffies(INIT_REEST_TO_MS));
            }
        }
        // SAFETY: A live transport (above).
        unsafe { crate::rust::module::trace::xprtrdma_op_connect(xprt, delay) };
        // SAFETY: The queue outlives every transport (drained at
        // unregistration); the work item is initialised and cancelled in
        // `destroy` before the transport is freed.
        unsafe { queue_delayed(t.connect_work.get(), delay) };
    }

    /// The connect work item (C `xprt_rdma_connect_worker`).
    ///
    /// # Safety
    ///
    /// Called by the workqueue with `connect_work` of a live transport.
    unsafe extern "C" fn connect_worker(work: *mut kb::work_struct) {
        // SAFETY: `work` is `connect_work.work` of a `Transport`.
        let xprt = unsafe { xprt_of_work(work, offset_of!(Transport, connect_work)) };
        // SAFETY: `destroy` cancels this work first.
        let t = unsafe { Transport::from_xprt(xprt) };
        let mut rc = from_result(|| {
            // SAFETY: `connect` passed `XPRT_LOCKED` to this work
            // (`xprt_lock_connect`), held until `xprt_unlock_connect` below.
            let mut locked = unsafe { XprtLocked::new(NonNull::new_unchecked(xprt)) };
            // SAFETY: Between setup and destroy.
            unsafe { Self::state(xprt) }.connect(&mut locked)?;
            Ok(0)
        });
        // SAFETY: Live transport.
        unsafe { clear_connecting(xprt) };
        if rc == 0 {
            t.connect_failed.store(false, Relaxed);
            // SAFETY: sunrpc reads these under the connect lock we hold.
            unsafe {
                let x = &mut *xprt;
                x.connect_cookie = x.connect_cookie.wrapping_add(1);
                x.stat.connect_count += 1;
                x.stat.connect_time = x
                    .stat
                    .connect_time
                    .wrapping_add(jiffies().wrapping_sub(x.stat.connect_start));
                kb::set_bit(bindings::XPRT_CONNECTED as c_ulong, addr_of_mut!(x.state));
            }
            rc = EAGAIN.to_errno();
        } else {
            t.connect_failed.store(true, Relaxed);
        }
        let cookie = core::ptr::from_ref(t).cast_mut().cast::<c_void>();
        // SAFETY: We hold the connect lock taken in `connect`.
        unsafe {
            bindings::xprt_unlock_connect(xprt, cookie);
            bindings::xprt_wake_pending_tasks(xprt, rc);
        }
    }

    /// The flush work item: runs [`XprtOps::flush`].
    ///
    /// # Safety
    ///
    /// Called by the workqueue with `flush_work` of a live transport.
    unsafe extern "C" fn flush_worker(work: *mut kb::work_struct) {
        // SAFETY: `work` is `flush_work.work` of a `Transport`.
        let xprt = unsafe { xprt_of_work(work, offset_of!(Transport, flush_work)) };
        // SAFETY: `destroy` closes, then cancels this work, before the
        // state goes.
        unsafe { Self::state(xprt) }.flush();
    }

    /// # Safety
    ///
    /// Called by sunrpc with a live transport.
    unsafe extern "C" fn close(xprt: *mut bindings::rpc_xprt) {
        // SAFETY: sunrpc closes from `xprt_autoclose`, which holds
        // `XPRT_LOCKED` (taken by `xprt_schedule_autoclose_locked`).
        let mut locked = unsafe { XprtLocked::new(NonNull::new_unchecked(xprt)) };
        // SAFETY: Between setup and destroy.
        unsafe { Self::state(xprt) }.close(&mut locked);
        // SAFETY: Live transport; sunrpc serialises close with connect.
        unsafe {
            (*xprt).reestablish_timeout = 0;
            (*xprt).connect_cookie = (*xprt).connect_cookie.wrapping_add(1);
            bindings::xprt_disconnect_done(xprt);
        }
    }

    /// # Safety
    ///
    /// Called by sunrpc with a live transport.
    unsafe extern "C" fn inject_disconnect(xprt: *mut bindings::rpc_xprt) {
        // SAFETY: Between setup and destroy.
        unsafe { Self::state(xprt) }.inject_disconnect();
    }

    /// A major timeout: close, the next call reconnects.
    ///
    /// # Safety
    ///
    /// Called by sunrpc with a live transport.
    unsafe extern "C" fn timer(xprt: *mut bindings::rpc_xprt, _task: *mut bindings::rpc_task) {
        // SAFETY: Live transport.
        unsafe { bindings::xprt_force_disconnect(xprt) };
    }

    /// # Safety
    ///
    /// Called by sunrpc (rpcbind) with a live transport.
    unsafe extern "C" fn set_port(xprt: *mut bindings::rpc_xprt, port: c_ushort) {
        // SAFETY: `sin_port` and `sin6_port` share their offset; the
        // address is AF_INET or AF_INET6 (checked in `setup`).
        unsafe {
            let p = addr_of_mut!((*xprt).addr)
                .cast::<u8>()
                .add(2)
                .cast::<[u8; 2]>();
            p.write(port.to_be_bytes());
            Self::format_addresses(xprt);
        }
    }

    /// # Safety
    ///
    /// Called by sunrpc with a live transport.
    unsafe extern "C" fn set_connect_timeout(
        xprt: *mut bindings::rpc_xprt,
        connect_timeout: c_ulong,
        reconnect_timeout: c_ulong,
    ) {
        // SAFETY: Live transport.
        let _transport = unsafe { transport_lock(xprt) }.lock();
        // SAFETY: Live transport; the fields are under `transport_lock`
        // (held).
        unsafe {
            if connect_timeout < (*xprt).connect_timeout {
                (*xprt).connect_timeout = connect_timeout;
            }
            if reconnect_timeout < (*xprt).max_reconnect_timeout {
                (*xprt).max_reconnect_timeout = reconnect_timeout;
            }
        }
    }

    /// # Safety
    ///
    /// Called by sunrpc with a live transport and a task without a request.
    unsafe extern "C" fn alloc_slot(xprt: *mut bindings::rpc_xprt, task: *mut bindings::rpc_task) {
        // SAFETY: By the safety requirement: a transport of this class,
        // whose `setup` made its slots of `T::Req`.
        let slots = unsafe { Transport::from_xprt(xprt).class_slots::<T::Req>() };
        // SAFETY: By the safety requirement.
        unsafe { slots.alloc(xprt, task) };
    }

    /// # Safety
    ///
    /// Called by sunrpc with a live transport and a request `alloc_slot`
    /// gave out, which no one uses any more.
    unsafe extern "C" fn free_slot(xprt: *mut bindings::rpc_xprt, rqst: *mut bindings::rpc_rqst) {
        // SAFETY: By the safety requirement: a transport of this class,
        // whose `setup` made its slots of `T::Req`.
        let slots = unsafe { Transport::from_xprt(xprt).class_slots::<T::Req>() };
        // SAFETY: By the safety requirement.
        unsafe { slots.free(xprt, rqst) };
    }

    /// # Safety
    ///
    /// Called by sunrpc with a live task that holds a request.
    unsafe extern "C" fn buf_alloc(task: *mut bindings::rpc_task) -> c_int {
        // SAFETY: `tk_rqstp` is the task's request, from `alloc_slot`. The
        // call and reply buffers are its slot's buffer when they fit (C's
        // `rl_sendbuf` and `rl_recvbuf`), else one allocation.
        unsafe {
            let rqst = (*task).tk_rqstp;
            let Some(size) = (*rqst).rq_callsize.checked_add((*rqst).rq_rcvsize) else {
                return ENOMEM.to_errno();
            };
            let own = class_slot_of::<T::Req>(rqst).map(SlotTable::buf);
            let buf = match own {
                Some(b) if size <= SLOT_BUF => b,
                _ => {
                    let base = kb::__kmalloc_noprof(size, bindings::rpc_task_gfp_mask());
                    if base.is_null() {
                        return ENOMEM.to_errno();
                    }
                    base.cast::<u8>()
                }
            };
            (*rqst).rq_buffer = buf.cast();
            (*rqst).rq_rbuffer = buf.add((*rqst).rq_callsize).cast();
        }
        0
    }

    /// # Safety
    ///
    /// Called by sunrpc with a live task whose request `buf_alloc` served.
    unsafe extern "C" fn buf_free(task: *mut bindings::rpc_task) {
        // SAFETY: `tk_rqstp` is the task's request, of a live transport.
        unsafe {
            let rqst = (*task).tk_rqstp;
            // Found once: its state for the transport, its buffer here.
            let slot = class_slot_of::<T::Req>(rqst);
            if let Some(slot) = slot {
                Self::state((*rqst).rq_xprt).buf_free(slot.state());
            }
            let buf = (*rqst).rq_buffer.cast::<u8>();
            let own = slot.map(SlotTable::buf);
            if !buf.is_null() && own != Some(buf) {
                // `buf_alloc` allocated it: the call did not fit the slot.
                kb::kfree(buf.cast());
            }
            (*rqst).rq_buffer = null_mut();
            (*rqst).rq_rbuffer = null_mut();
        }
    }

    /// # Safety
    ///
    /// Called by sunrpc with a request of a live transport.
    unsafe extern "C" fn send_request(rqst: *mut bindings::rpc_rqst) -> c_int {
        let Some(r) = NonNull::new(rqst) else {
            return EINVAL.to_errno();
        };
        // SAFETY: The request and its transport are live for the call.
        let s = unsafe { Self::state((*rqst).rq_xprt) };
        // SAFETY: sunrpc sends holding `XPRT_LOCKED` for the sending task
        // (`xprt_prepare_transmit`), for the whole call.
        let mut locked = unsafe { XprtLocked::new(NonNull::new_unchecked((*rqst).rq_xprt)) };
        from_result(|| {
            // SAFETY: sunrpc lends the request for the call.
            s.send_request(&unsafe { RpcRqst::from_raw(r) }, &mut locked)?;
            Ok(0)
        })
    }

    /// The transport's line of `/proc/self/mountstats`.
    ///
    /// # Safety
    ///
    /// Called by sunrpc with a live transport and its seq_file.
    unsafe extern "C" fn print_stats(xprt: *mut bindings::rpc_xprt, seq: *mut bindings::seq_file) {
        // SAFETY: Between setup and destroy.
        let s = unsafe { Self::state(xprt) };
        // SAFETY: The seq_file is the caller's, for the call.
        let m = unsafe { SeqFile::from_raw(seq.cast()) };
        // SAFETY: Live transport; the counters are plain loads, as in C.
        let (x, connected) = unsafe { (&*xprt, xprt_connected(xprt)) };
        let hz = kb::CONFIG_HZ as c_ulong;
        let idle = if connected {
            (jiffies().wrapping_sub(x.last_used) as isize) / hz as isize
        } else {
            0
        };
        let counters = XprtCounters {
            bind_count: x.stat.bind_count,
            connect_count: x.stat.connect_count,
            connect_secs: x.stat.connect_time / hz,
            idle_secs: idle,
            sends: x.stat.sends,
            recvs: x.stat.recvs,
            bad_xids: x.stat.bad_xids,
            req_u: x.stat.req_u,
            bklog_u: x.stat.bklog_u,
        };
        s.print_stats(m, &counters);
    }

    /// Swap over this transport needs nothing more (C likewise).
    extern "C" fn enable_swap(_xprt: *mut bindings::rpc_xprt) -> c_int {
        0
    }

    extern "C" fn disable_swap(_xprt: *mut bindings::rpc_xprt) {}

    /// Callback requests are allocated on demand (`bc_receive_call`).
    extern "C" fn bc_setup(_xprt: *mut bindings::rpc_xprt, _min_reqs: c_uint) -> c_int {
        0
    }

    /// # Safety
    ///
    /// Called by sunrpc with a live transport.
    unsafe extern "C" fn bc_maxpayload(xprt: *mut bindings::rpc_xprt) -> usize {
        // SAFETY: Live transport.
        unsafe { Transport::from_xprt(xprt) }
            .bc_max_payload
            .load(Relaxed) as usize
    }

    extern "C" fn bc_num_slots(_xprt: *mut bindings::rpc_xprt) -> c_uint {
        if cfg!(CONFIG_SUNRPC_BACKCHANNEL) {
            T::BC_SLOTS
        } else {
            0
        }
    }
}

#[cfg(CONFIG_SUNRPC_BACKCHANNEL)]
const BC_FREE_RQST: Option<unsafe extern "C" fn(*mut bindings::rpc_rqst)> =
    Some(crate::rust::sunrpc::xprt_bc::free_rqst);
#[cfg(not(CONFIG_SUNRPC_BACKCHANNEL))]
const BC_FREE_RQST: Option<unsafe extern "C" fn(*mut bindings::rpc_rqst)> = None;
#[cfg(CONFIG_SUNRPC_BACKCHANNEL)]
const BC_DESTROY: Option<unsafe extern "C" fn(*mut bindings::rpc_xprt, c_uint)> =
    Some(crate::rust::sunrpc::xprt_bc::destroy);
#[cfg(not(CONFIG_SUNRPC_BACKCHANNEL))]
const BC_DESTROY: Option<unsafe extern "C" fn(*mut bindings::rpc_xprt, c_uint)> = None;

/// The backchannel request pool of `xprt`.
///
/// # Safety
///
/// `xprt` is a live transport of this class.
#[cfg(CONFIG_SUNRPC_BACKCHANNEL)]
pub(in crate::rust) unsafe fn bc_pool(xprt: *mut bindings::rpc_xprt) -> *mut BcPool {
    // SAFETY: By the safety requirement.
    unsafe { Transport::from_xprt(xprt) }.bc_pool.get()
}

/// Initialises a delayed work item (C `INIT_DELAYED_WORK`). The work and
/// its timer need lock classes of their own: the timer's runs in softirq
/// context, the work's in process context with softirqs enabled, and one
/// class for both is an inconsistent lock state to lockdep.
///
/// # Safety
///
/// `dwork` is valid for writes and not queued.
unsafe fn init_delayed_work(
    dwork: *mut kb::delayed_work,
    func: unsafe extern "C" fn(*mut kb::work_struct),
    name: &'static CStr,
    work_key: Pin<&'static kernel::sync::LockClassKey>,
    timer_key: Pin<&'static kernel::sync::LockClassKey>,
) {
    // SAFETY: By the safety requirement; `delayed_work_timer_fn` is the
    // timer function of every delayed work item.
    unsafe {
        kb::init_work_with_key(
            addr_of_mut!((*dwork).work),
            Some(func),
            false,
            name.as_char_ptr(),
            work_key.as_ptr(),
        );
        kb::timer_init_key(
            addr_of_mut!((*dwork).timer),
            Some(kb::delayed_work_timer_fn),
            kb::TIMER_IRQSAFE,
            name.as_char_ptr(),
            timer_key.as_ptr(),
        );
    }
}

/// Queues `dwork` on the class's queue after `delay` jiffies, unless it is
/// queued already (then the earlier deadline stands).
///
/// # Safety
///
/// `dwork` is an initialised work item of a live transport, cancelled
/// before the transport is freed.
unsafe fn queue_delayed(dwork: *mut kb::delayed_work, delay: c_ulong) {
    let queue = QUEUE.load(Acquire);
    // SAFETY: The queue lives while the class is registered, which it is
    // while a transport exists; `dwork` by the safety requirement.
    unsafe {
        kb::queue_delayed_work_on(
            kb::wq_misc_consts_WORK_CPU_UNBOUND as c_int,
            queue,
            dwork,
            delay,
        )
    };
}

/// Clears `XPRT_CONNECTING` (C `xprt_clear_connecting`, barriers
/// included): the connect `xprt_connect` started is over.
///
/// # Safety
///
/// `xprt` is a live transport.
unsafe fn clear_connecting(xprt: *mut bindings::rpc_xprt) {
    smp_mb(Full);
    // SAFETY: `state` is the live transport's bit field.
    unsafe {
        kb::clear_bit(
            bindings::XPRT_CONNECTING as c_ulong,
            addr_of_mut!((*xprt).state),
        )
    };
    smp_mb(Full);
}

/// The transport a work item of it belongs to.
///
/// # Safety
///
/// `work` is the `work` of the delayed work item at `offset` in a
/// `Transport`.
unsafe fn xprt_of_work(work: *mut kb::work_struct, offset: usize) -> *mut bindings::rpc_xprt {
    // SAFETY: `work` is the first field of `delayed_work`, which is at
    // `offset` in the `Transport`, whose first field is the `rpc_xprt`.
    unsafe {
        work.cast::<u8>()
            .sub(offset_of!(kb::delayed_work, work))
            .sub(offset)
            .cast()
    }
}

/// The current time in jiffies.
fn jiffies() -> c_ulong {
    // SAFETY: `jiffies` is always readable; a volatile read as C's.
    unsafe { core::ptr::read_volatile(&raw const kb::jiffies) }
}

/// Whether sunrpc considers `xprt` connected (C `xprt_connected`).
///
/// # Safety
///
/// `xprt` is live.
pub(in crate::rust) unsafe fn xprt_connected(xprt: *mut bindings::rpc_xprt) -> bool {
    // SAFETY: `state` is a bit field sunrpc changes with atomic bit
    // operations; a volatile read is C's `test_bit`.
    let state = unsafe { core::ptr::read_volatile(&raw const (*xprt).state) };
    state & (1 << bindings::XPRT_CONNECTED) != 0
}

/// Queues [`XprtOps::flush`] on `xprt` within `ms` milliseconds, unless it
/// is queued already.
///
/// # Safety
///
/// `xprt` is a live transport of this class.
pub(in crate::rust) unsafe fn schedule_flush(xprt: *mut bindings::rpc_xprt, ms: u32) {
    // SAFETY: By the safety requirement.
    let t = unsafe { Transport::from_xprt(xprt) };
    // SAFETY: `destroy` cancels the item before freeing the transport.
    unsafe { queue_delayed(t.flush_work.get(), msecs_to_jiffies(ms)) };
}

/// Sets the largest backchannel message of `xprt`.
///
/// # Safety
///
/// `xprt` is a live transport of this class.
pub(in crate::rust) unsafe fn set_bc_max_payload(xprt: *mut bindings::rpc_xprt, bytes: u32) {
    // SAFETY: By the safety requirement.
    unsafe { Transport::from_xprt(xprt) }
        .bc_max_payload
        .store(bytes, Relaxed);
}

/// The registration of the client transport class "rdma" (ident 256,
/// netids "rdma" and "rdma6") with sunrpc.
///
/// # Invariants
///
/// The class is registered with `OpsTable::<T>::OPS` transports and `queue`
/// is the class's queue while this object exists.
pub struct Registration<T: XprtOps> {
    queue: Option<OwnedQueue>,
    _p: PhantomData<T>,
}

impl<T: XprtOps> Registration<T> {
    /// Registers the class for `module`; fails with `EEXIST` while the
    /// in-tree C `rpcrdma` module is loaded.
    pub fn new(module: &ThisModule) -> Result<Self> {
        // Connect workers run on the module's own queue (C uses sunrpc's
        // xprtiod_workqueue), WQ_MEM_RECLAIM so a reconnect makes progress
        // under memory pressure; destroyed (drained) after unregistration.
        let queue = OwnedQueue::new(c"rpcrdma_rs_connect")?;
        QUEUE.store(queue.as_raw(), Release);
        let registered = CLASS.register(
            module,
            c"rdma",
            bindings::xprt_transports_XPRT_TRANSPORT_RDMA,
            OpsTable::<T>::setup,
            [NETID_RDMA, NETID_RDMA6, NETID_END],
        );
        if let Err(e) = registered {
            QUEUE.store(null_mut(), Release);
            return Err(e);
        }
        // INVARIANT: Registered above, with this queue.
        Ok(Self {
            queue: Some(queue),
            _p: PhantomData,
        })
    }
}

impl<T: XprtOps> Drop for Registration<T> {
    fn drop(&mut self) {
        // SAFETY: Registered by the type invariant. sunrpc holds a module
        // reference for every transport, so none exists at unload.
        unsafe { CLASS.unregister() };
        // Every transport was destroyed and cancelled its work items;
        // draining the queue makes sure none returns through this module
        // after unload.
        drop(self.queue.take());
        QUEUE.store(null_mut(), Release);
    }
}
