// SPDX-License-Identifier: GPL-2.0

//! RDMA device discovery through an `ib_client`.
//!
//! The RDMA core calls the client's `add` for every device that exists when
//! the client registers and for every device that appears later, and `remove`
//! before a device goes away. The registry keeps a snapshot of each device's
//! name and limits so transports can size their resources and report what
//! they run on.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).

use crate::rust::bindings;
use crate::rust::kext::workqueue::OwnedQueue;
use crate::rust::rdma::verbs::DeferredTeardown;
use kernel::alloc::KVec;
use kernel::error::to_result;
use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::SetOnce;
use kernel::types::Opaque;

/// Longest device name kept (IB_DEVICE_NAME_MAX is 64 including the NUL).
const NAME_MAX: usize = 64;

/// Limits and capabilities of an RDMA device.
#[derive(Clone, Copy, Debug, Default)]
pub struct DeviceAttr {
    /// Maximum work requests per queue.
    pub max_qp_wr: u32,
    /// Maximum scatter/gather entries in a Send work request.
    pub max_send_sge: u32,
    /// Maximum scatter/gather entries in a Receive work request.
    pub max_recv_sge: u32,
    /// Maximum completion queue entries.
    pub max_cqe: u32,
    /// Maximum scatter/gather entries in an RDMA Read work request.
    pub max_sge_rd: u32,
    /// Maximum outstanding RDMA Reads a queue pair can be the target of.
    pub max_qp_rd_atom: u32,
    /// Maximum outstanding RDMA Reads a queue pair can issue.
    pub max_qp_init_rd_atom: u32,
    /// Maximum pages in one fast registration.
    pub max_fast_reg_page_list_len: u32,
    /// Number of completion vectors.
    pub num_comp_vectors: u32,
    /// Whether fast registration work requests (FRWR) are supported.
    pub mem_mgt_extensions: bool,
    /// Whether the device has a local DMA lkey of its own.
    pub local_dma_lkey: bool,
}

impl DeviceAttr {
    /// Reads the attributes of `device` (`device->attrs`, fixed once the
    /// device is registered).
    ///
    /// # Safety
    ///
    /// `device` must point to a registered `struct ib_device`.
    pub(crate) unsafe fn query(device: *mut bindings::ib_device) -> Self {
        // SAFETY: `device` is valid by the function's safety requirement.
        let (d, a) = unsafe { (&*device, &(*device).attrs) };
        Self {
            max_qp_wr: a.max_qp_wr,
            max_send_sge: a.max_send_sge,
            max_recv_sge: a.max_recv_sge,
            max_cqe: a.max_cqe,
            max_sge_rd: a.max_sge_rd,
            max_qp_rd_atom: a.max_qp_rd_atom,
            max_qp_init_rd_atom: a.max_qp_init_rd_atom,
            max_fast_reg_page_list_len: a.max_fast_reg_page_list_len,
            num_comp_vectors: d.num_comp_vectors as u32,
            mem_mgt_extensions: a.device_cap_flags
                & bindings::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS as u64
                != 0,
            local_dma_lkey: a.kernel_cap_flags
                & u64::from(bindings::ib_kernel_cap_flags_IBK_LOCAL_DMA_LKEY)
                != 0,
        }
    }
}

/// What the registry knows about one RDMA device.
#[derive(Clone)]
pub struct DeviceInfo {
    /// Identity of the C device, only ever compared, never dereferenced.
    key: usize,
    name: [u8; NAME_MAX],
    name_len: usize,
    /// The device's limits when it was added.
    pub attr: DeviceAttr,
}

impl DeviceInfo {
    /// The device's name, for example `rxe0`.
    pub fn name(&self) -> &str {
        let bytes = self.name.get(..self.name_len).unwrap_or(&[]);
        core::str::from_utf8(bytes).unwrap_or("?")
    }
}

kernel::sync::global_lock! {
    // SAFETY: Initialised once by `DeviceClient::register`, before the client
    // can call back.
    unsafe(uninit) static DEVICES: Mutex<KVec<DeviceInfo>> = KVec::new();
}

kernel::sync::global_lock! {
    // SAFETY: Initialised once by `DeviceClient::register`, before any
    // endpoint exists.
    unsafe(uninit) static TEARDOWN_WQ: Mutex<Option<OwnedQueue>> = None;
}

/// Queues the teardown of an endpoint dropped on its own completion work
/// ([`crate::rust::rdma::verbs`]), on a queue the device client destroys,
/// which waits for it, when the module goes; gives the item back if there
/// is no such queue.
pub(in crate::rust) fn enqueue_teardown(
    item: Pin<KBox<DeferredTeardown>>,
) -> core::result::Result<(), Pin<KBox<DeferredTeardown>>> {
    if !REGISTERED.load(Relaxed) {
        return Err(item);
    }
    match TEARDOWN_WQ.lock().as_ref() {
        Some(wq) => {
            wq.queue().enqueue(item);
            Ok(())
        }
        None => Err(item),
    }
}

static REGISTERED: Atomic<bool> = Atomic::new(false);

/// The name the module registered its client under.
static CLIENT_NAME: SetOnce<&'static CStr> = SetOnce::new();

/// The name of the module's `ib_client` (the module's own name), which the
/// RDMA core also shows as the owner of the CQs it allocates for it.
pub fn client_name() -> &'static CStr {
    CLIENT_NAME.as_ref().copied().unwrap_or(c"rpcrdma_rs")
}

/// Calls `f` for every RDMA device currently present.
pub fn for_each(mut f: impl FnMut(&DeviceInfo)) {
    if !REGISTERED.load(Relaxed) {
        return;
    }
    for dev in DEVICES.lock().iter() {
        f(dev);
    }
}

/// Number of RDMA devices currently present.
pub fn count() -> usize {
    let mut n = 0;
    for_each(|_| n += 1);
    n
}

/// Called by the RDMA core for each device, in process context.
///
/// # Safety
///
/// Called only by the `ib_client` `add` callback with a registered device.
unsafe extern "C" fn device_add(device: *mut bindings::ib_device) -> kernel::ffi::c_int {
    // SAFETY: The RDMA core passes a registered device.
    let attr = unsafe { DeviceAttr::query(device) };
    let mut info = DeviceInfo {
        key: device as usize,
        name: [0; NAME_MAX],
        name_len: 0,
        attr,
    };
    // SAFETY: The device is registered, so its name is a valid NUL-terminated
    // string that lives at least until this callback returns; it is copied.
    let name = unsafe { CStr::from_char_ptr(bindings::rpcrdma_rs_ib_device_name(device)) };
    let bytes = name.to_bytes();
    let len = bytes.len().min(NAME_MAX);
    if let (Some(dst), Some(src)) = (info.name.get_mut(..len), bytes.get(..len)) {
        dst.copy_from_slice(src);
        info.name_len = len;
    }
    pr_info!(
        "device {} added (max_qp_wr {}, max_sge {}/{}, frwr {}, fast-reg pages {})\n",
        info.name(),
        attr.max_qp_wr,
        attr.max_send_sge,
        attr.max_recv_sge,
        attr.mem_mgt_extensions,
        attr.max_fast_reg_page_list_len
    );
    match DEVICES.lock().push(info, GFP_KERNEL) {
        Ok(()) => 0,
        Err(_) => ENOMEM.to_errno(),
    }
}

/// Called by the RDMA core before a device goes away, in process context.
///
/// # Safety
///
/// Called only by the `ib_client` `remove` callback.
unsafe extern "C" fn device_remove(
    device: *mut bindings::ib_device,
    _data: *mut kernel::ffi::c_void,
) {
    let key = device as usize;
    let mut devices = DEVICES.lock();
    if let Some(pos) = devices.iter().position(|d| d.key == key) {
        let info = devices.remove(pos);
        if let Ok(info) = info {
            pr_info!("device {} removed\n", info.name());
        }
    }
}

/// The module's `ib_client` (C `rpcrdma_ib_client`): its name and the two
/// callbacks above; the RDMA core fills the rest when it is registered.
///
/// # Invariants
///
/// Rust writes only its name, once, before `ib_register_client`; after that
/// only the RDMA core reads or writes the C object, until
/// `ib_unregister_client`.
struct IbClient(Opaque<bindings::ib_client>);

// SAFETY: Rust never touches the object after it is built (type invariant);
// the RDMA core serialises its own accesses.
unsafe impl Sync for IbClient {}

static IB_CLIENT: IbClient = IbClient(Opaque::new(bindings::ib_client {
    name: core::ptr::null(),
    add: Some(device_add),
    remove: Some(device_remove),
    // SAFETY: All-zero is the C initializer's value for every other field:
    // no optional callback, and the counters `ib_register_client` sets.
    ..unsafe { core::mem::zeroed() }
}));

/// The module's registration as an `ib_client`.
///
/// # Invariants
///
/// While a `DeviceClient` exists the client is registered with the RDMA core
/// and `DEVICES` is initialised. At most one exists per module.
pub struct DeviceClient(());

impl DeviceClient {
    /// Registers the client under `name` (the module's name: the RDMA
    /// core lists it); the RDMA core calls `add` for existing devices before
    /// this returns.
    pub fn register(name: &'static CStr) -> Result<Self> {
        if REGISTERED.load(Relaxed) {
            return Err(EBUSY);
        }
        let wq = OwnedQueue::new(c"rpcrdma_rs_teardown")?;
        // SAFETY: `REGISTERED` is false, so this is the first registration of
        // this module instance and `DEVICES` has not been initialised yet.
        unsafe { DEVICES.init() };
        // SAFETY: As for `DEVICES`.
        unsafe { TEARDOWN_WQ.init() };
        *TEARDOWN_WQ.lock() = Some(wq);
        REGISTERED.store(true, Relaxed);
        // SAFETY: The client is not registered yet (`REGISTERED` was false),
        // so nothing else reads the object; `name` is `'static`.
        unsafe { (*IB_CLIENT.0.get()).name = name.as_char_ptr() };
        CLIENT_NAME.populate(name);
        // SAFETY: `IB_CLIENT` is a static, so it outlives the registration,
        // which `drop` ends; it is registered once (`REGISTERED`).
        let rc = unsafe { bindings::ib_register_client(IB_CLIENT.0.get()) };
        to_result(rc)?;
        // INVARIANT: The client is registered and `DEVICES` initialised.
        Ok(Self(()))
    }
}

impl Drop for DeviceClient {
    fn drop(&mut self) {
        // Destroying the queue waits for the teardowns on it.
        let wq = TEARDOWN_WQ.lock().take();
        drop(wq);
        // SAFETY: By the type invariant the client is registered.
        unsafe { bindings::ib_unregister_client(IB_CLIENT.0.get()) };
        DEVICES.lock().clear();
    }
}
