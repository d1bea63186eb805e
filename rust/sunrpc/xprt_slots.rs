// SPDX-License-Identifier: GPL-2.0

//! Request slots a transport allocates itself (`rpc_xprt_ops::alloc_slot`
//! and `free_slot`), as C's RDMA transport does with its `rpcrdma_req`s:
//! every `rpc_rqst` of the transport lives in a [`Slot`] allocated with it,
//! together with the buffer that `buf_alloc` hands out for the call and
//! its reply, and the transport's own state for the request. Found from the
//! request by its address (`container_of`), not by a lookup, and with no
//! allocation per RPC.
//!
//! The free slots are a stack under the transport's `reserve_lock`, and a
//! task that finds none waits on the transport's backlog, both as sunrpc's
//! generic `xprt_alloc_slot`/`xprt_free_slot` do; a freed slot goes
//! straight to the first waiting task.
//!
//! C header: [`include/linux/sunrpc/xprt.h`](srctree/include/linux/sunrpc/xprt.h).

use crate::rust::bindings;
use crate::rust::sunrpc::xprt_locks::reserve_lock;
use core::any::TypeId;
use core::cell::UnsafeCell;
use core::pin::Pin;
use core::ptr::NonNull;
use kernel::alloc::KVBox;
use kernel::bindings as kb;
use kernel::ffi::c_void;
use kernel::prelude::*;
use kernel::types::Opaque;

/// Bytes of a slot's buffer: a call and its reply buffer up to this size
/// together are served from it (C starts its `rl_sendbuf` and
/// `rl_recvbuf` at 2 KiB each). Larger ones are allocated per RPC.
pub(in crate::rust) const SLOT_BUF: usize = kernel::page::PAGE_SIZE;

/// No next free slot.
const END: u32 = u32::MAX;

/// A slot's buffer: [`SLOT_BUF`] bytes from kmalloc, owned.
struct SlotBuf(NonNull<u8>);

impl SlotBuf {
    fn new() -> Result<Self> {
        // SAFETY: A plain allocation, freed by `drop`.
        let buf = unsafe { kb::__kmalloc_noprof(SLOT_BUF, kb::GFP_KERNEL) };
        NonNull::new(buf.cast::<u8>()).map(Self).ok_or(ENOMEM)
    }
}

impl Drop for SlotBuf {
    fn drop(&mut self) {
        // SAFETY: Owned; no request uses it when the table goes (sunrpc
        // destroys a transport after its last task).
        unsafe { kb::kfree(self.0.as_ptr().cast()) };
    }
}

/// One request slot (C `struct rpcrdma_req`, its `rl_slot` first), with
/// the transport's state for the request, `R`.
///
/// # Invariants
///
/// `rqst` is the first field, so the slot's address is its request's.
/// `next` is read and written only under the transport's `reserve_lock`.
/// `index` is the slot's place in its table.
#[pin_data]
#[repr(C)]
pub(in crate::rust) struct Slot<R> {
    #[pin]
    rqst: Opaque<bindings::rpc_rqst>,
    /// The next free slot's index, or [`END`].
    next: UnsafeCell<u32>,
    index: u32,
    buf: SlotBuf,
    #[pin]
    state: R,
}

// SAFETY: The request is sunrpc's to access under its own rules; the
// buffer is reached only through the request that holds it; `next` only
// under the transport's `reserve_lock` (type invariant), and `R` is
// shared as the transport's own state.
unsafe impl<R: Send> Send for Slot<R> {}
// SAFETY: As for `Send`.
unsafe impl<R: Sync> Sync for Slot<R> {}

impl<R> Slot<R> {
    /// The transport's state for the request.
    pub(in crate::rust) fn state(&self) -> &R {
        &self.state
    }
}

/// The request slots of one transport, with the transport's state `R` for
/// each request.
///
/// # Invariants
///
/// `req_type` is the first field and is `R`'s type: a table behind an
/// erased pointer is read as a `SlotTable<R>` only after checking it.
/// `slots` never moves after `new` (each `rpc_rqst` stays where sunrpc
/// was given it). `free` (the first free slot or [`END`]) and the `next`
/// links form a stack of distinct free slots, changed only under the
/// transport's `reserve_lock`; a slot not on it is held by one task.
#[repr(C)]
pub(in crate::rust) struct SlotTable<R> {
    req_type: TypeId,
    slots: Pin<KVBox<[Slot<R>]>>,
    free: UnsafeCell<u32>,
}

// SAFETY: The slots are `Send` and `Sync` as `R` is; `free` is read and
// written only under the transport's `reserve_lock` (type invariant).
unsafe impl<R: Send> Send for SlotTable<R> {}
// SAFETY: As for `Send`.
unsafe impl<R: Sync> Sync for SlotTable<R> {}

impl<R: 'static> SlotTable<R> {
    /// `n` free slots, each with its buffer and a state made by `state`.
    pub(in crate::rust) fn new<E, I: PinInit<R, E>>(
        n: u32,
        mut state: impl FnMut() -> I,
    ) -> Result<KBox<Self>>
    where
        Error: From<E>,
    {
        let count = usize::try_from(n).map_err(|_| EINVAL)?;
        if n == 0 || n == END {
            return Err(EINVAL);
        }
        let slots = KVBox::pin_slice(
            |i| {
                // Below `n` (the slice's length, `count`), so a `u32`.
                let index = u32::try_from(i).unwrap_or(END);
                let next = index.checked_add(1).filter(|&j| j < n).unwrap_or(END);
                let init = state();
                // INVARIANT: slot `i` knows its index.
                try_pin_init!(Slot {
                    rqst: Opaque::zeroed(),
                    next: UnsafeCell::new(next),
                    index,
                    buf: SlotBuf::new()?,
                    state <- init,
                }? Error)
            },
            count,
            GFP_KERNEL,
        )?;
        // INVARIANT: All slots are free, linked in order.
        Ok(KBox::new(
            Self {
                req_type: TypeId::of::<R>(),
                slots,
                free: UnsafeCell::new(0),
            },
            GFP_KERNEL,
        )?)
    }

    /// The table behind `ptr` if it is a `SlotTable<R>`.
    ///
    /// # Safety
    ///
    /// `ptr` is a live `SlotTable` of some state type, for `'a`.
    pub(in crate::rust) unsafe fn from_erased<'a>(ptr: *const c_void) -> Option<&'a Self> {
        // SAFETY: `req_type` is the first field of every `SlotTable`
        // (`repr(C)`), initialised by `new`.
        let t = unsafe { *ptr.cast::<TypeId>() };
        // SAFETY: The type invariant: a table whose `req_type` is `R`'s is
        // a `SlotTable<R>`.
        (t == TypeId::of::<R>()).then(|| unsafe { &*ptr.cast::<Self>() })
    }
}

impl<R> SlotTable<R> {
    /// The slot whose request `rqst` is, if it is one of this table's (C
    /// `container_of`): a request that lies within the table is a slot's.
    /// One compare, on every RPC's path several times (a backchannel
    /// request, which has no slot, lies elsewhere).
    ///
    /// # Safety
    ///
    /// `rqst` is a live `rpc_rqst`.
    #[inline]
    pub(in crate::rust) unsafe fn slot_of(
        &self,
        rqst: *const bindings::rpc_rqst,
    ) -> Option<&Slot<R>> {
        if self.offset_of(rqst.cast()) >= core::mem::size_of_val(&*self.slots) {
            return None;
        }
        // SAFETY: A live `rpc_rqst` (safety requirement) within the table
        // is the first field of one of its slots, so at that slot's
        // address: the table holds requests only there, and a live object
        // lies within another only as one of its fields. The slots live as
        // long as the table (type invariant).
        Some(unsafe { &*rqst.cast::<Slot<R>>() })
    }

    /// Every slot's state.
    pub(in crate::rust) fn states(&self) -> impl Iterator<Item = &R> {
        self.slots.iter().map(|s| &s.state)
    }

    /// The slot's buffer of [`SLOT_BUF`] bytes.
    pub(in crate::rust) fn buf(slot: &Slot<R>) -> *mut u8 {
        slot.buf.0.as_ptr()
    }

    /// `alloc_slot`: gives `task` a free request, or puts it on the
    /// backlog of `xprt` (`EAGAIN`), where `free` hands it one.
    ///
    /// # Safety
    ///
    /// `xprt` is the live transport this table belongs to and `task` a
    /// task of it without a request.
    pub(in crate::rust) unsafe fn alloc(
        &self,
        xprt: *mut bindings::rpc_xprt,
        task: *mut bindings::rpc_task,
    ) {
        // SAFETY: `reserve_lock` is initialised by `xprt_alloc` and lives
        // with the transport.
        let lock = unsafe { reserve_lock(xprt) };
        let _guard = lock.lock();
        // SAFETY: Under `reserve_lock`, which guards the stack (type
        // invariant).
        let head = unsafe { *self.free.get() };
        match self.slots.get(head as usize) {
            Some(slot) => {
                // SAFETY: As above. INVARIANT: Popped under the lock; now
                // held by `task`.
                unsafe { *self.free.get() = *slot.next.get() };
                // SAFETY: Live task (safety requirement).
                unsafe {
                    (*task).tk_status = 0;
                    (*task).tk_rqstp = slot.rqst.get();
                }
            }
            None => {
                // SAFETY: As above; sunrpc's own `xprt_alloc_slot` queues
                // the task under `reserve_lock` too, so `free` cannot give
                // a slot back in between without waking it.
                unsafe {
                    bindings::xprt_add_backlog(xprt, task);
                    (*task).tk_status = EAGAIN.to_errno();
                }
            }
        }
    }

    /// `free_slot`: hands the request to the first task on the backlog, or
    /// puts it back on the free stack.
    ///
    /// # Safety
    ///
    /// `xprt` is the live transport this table belongs to, and `rqst` a
    /// request `alloc` gave out that no one uses any more.
    pub(in crate::rust) unsafe fn free(
        &self,
        xprt: *mut bindings::rpc_xprt,
        rqst: *mut bindings::rpc_rqst,
    ) {
        // SAFETY: A live request (safety requirement).
        let Some(slot) = (unsafe { self.slot_of(rqst) }) else {
            return;
        };
        // SAFETY: As in `alloc`.
        let lock = unsafe { reserve_lock(xprt) };
        let _guard = lock.lock();
        // SAFETY: Live transport; the request is no one's (safety
        // requirement). A woken task gets it zeroed, as on the stack.
        if unsafe { bindings::xprt_wake_up_backlog(xprt, rqst) } {
            return;
        }
        // SAFETY: No one uses the request; zeroed as sunrpc marks unused
        // requests.
        unsafe { core::ptr::write_bytes(rqst, 0, 1) };
        // SAFETY: Under `reserve_lock`, which guards the stack (type
        // invariant). INVARIANT: Pushed under the lock.
        unsafe {
            *slot.next.get() = *self.free.get();
            *self.free.get() = slot.index;
        }
    }

    /// Bytes from the table's first slot to `p` (wrapped: huge for an
    /// address below it).
    fn offset_of(&self, p: *const u8) -> usize {
        (p as usize).wrapping_sub(self.slots.as_ptr() as usize)
    }
}

/// `tk_runstate` bits (the anonymous enum of `include/linux/sunrpc/sched.h`).
#[cfg(CONFIG_KUNIT)]
const RPC_TASK_RUNNING: u32 = 0;
#[cfg(CONFIG_KUNIT)]
const RPC_TASK_ACTIVE: u32 = 2;

/// A bare transport (no class, no connection) with a slot table and tasks
/// that wait on its backlog as sunrpc's do, for KUnit: the allocation,
/// the lookup from a request and the hand-off of a freed slot to a waiting
/// task, on the kernel's own `rpc_xprt` and wait queue.
///
/// # Invariants
///
/// `xprt` is an `xprt_alloc` transport owned by this value; `table` its
/// slots. Each task is marked running and activated, so sunrpc queues it
/// and wakes it without scheduling it; a task's `tk_rqstp` is null or a
/// slot it holds.
#[cfg(CONFIG_KUNIT)]
pub struct SlotBench {
    xprt: NonNull<bindings::rpc_xprt>,
    table: KBox<SlotTable<()>>,
    tasks: KVec<KBox<Opaque<bindings::rpc_task>>>,
}

#[cfg(CONFIG_KUNIT)]
impl SlotBench {
    /// A transport of `slots` slots and `tasks` tasks.
    pub fn new(slots: u32, tasks: usize) -> Result<Self> {
        let table = SlotTable::new(slots, || ())?;
        let mut list = KVec::with_capacity(tasks, GFP_KERNEL)?;
        for _ in 0..tasks {
            let t = KBox::new(Opaque::<bindings::rpc_task>::zeroed(), GFP_KERNEL)?;
            // SAFETY: Zeroed and owned; sunrpc sees it only once queued.
            unsafe {
                (*t.get()).tk_runstate = (1 << RPC_TASK_RUNNING) | (1 << RPC_TASK_ACTIVE);
            }
            list.push(t, GFP_KERNEL)?;
        }
        // SAFETY: `init_net` lives as long as the kernel.
        let xprt = unsafe {
            bindings::xprt_alloc(
                &raw mut bindings::init_net,
                core::mem::size_of::<bindings::rpc_xprt>(),
                0,
                slots,
            )
        };
        let xprt = NonNull::new(xprt).ok_or(ENOMEM)?;
        // INVARIANT: Allocated above; no task holds a slot.
        Ok(Self {
            xprt,
            table,
            tasks: list,
        })
    }

    fn task(&self, i: usize) -> Result<*mut bindings::rpc_task> {
        Ok(self.tasks.get(i).ok_or(EINVAL)?.get())
    }

    /// Task `i` asks for a slot (`alloc_slot`): the slot's index, or
    /// `None` if the task now waits on the backlog.
    pub fn alloc(&self, i: usize) -> Result<Option<usize>> {
        if self.holds(i)?.is_some() {
            return Err(EBUSY);
        }
        let task = self.task(i)?;
        // SAFETY: By the type invariant; the task holds no request.
        unsafe { self.table.alloc(self.xprt.as_ptr(), task) };
        let held = self.holds(i)?;
        // SAFETY: The task is ours.
        let status = unsafe { (*task).tk_status };
        match (held, status) {
            (Some(_), 0) => Ok(held),
            (None, s) if s == EAGAIN.to_errno() => Ok(None),
            _ => Err(EPROTO),
        }
    }

    /// The index of the slot task `i` holds (given by `alloc` or handed
    /// over by a `free`).
    pub fn holds(&self, i: usize) -> Result<Option<usize>> {
        let task = self.task(i)?;
        // SAFETY: The task is ours; sunrpc writes `tk_rqstp` only under
        // the locks `alloc` and `free` take, on this thread.
        let rqst = unsafe { (*task).tk_rqstp };
        if rqst.is_null() {
            return Ok(None);
        }
        // SAFETY: The task's request is a live one of this table.
        let slot = unsafe { self.table.slot_of(rqst) }.ok_or(EPROTO)?;
        Ok(Some(slot.index as usize))
    }

    /// Task `i` gives its slot back (`free_slot`).
    pub fn free(&self, i: usize) -> Result {
        let task = self.task(i)?;
        // SAFETY: The task is ours.
        let rqst = unsafe { (*task).tk_rqstp };
        if rqst.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: The task is ours and gives the request up.
        unsafe { (*task).tk_rqstp = core::ptr::null_mut() };
        // SAFETY: By the type invariant; the request is no one's now.
        unsafe { self.table.free(self.xprt.as_ptr(), rqst) };
        Ok(())
    }

    /// The address of slot `index`'s buffer.
    pub fn buf_addr(&self, index: usize) -> Option<usize> {
        self.table
            .slots
            .get(index)
            .map(|s| s.buf.0.as_ptr() as usize)
    }

    /// Whether a request that is not one of the table's (as a backchannel
    /// request is not) is taken for a slot.
    pub fn other_request_is_a_slot(&self) -> Result<bool> {
        let other = KBox::new(Opaque::<bindings::rpc_rqst>::zeroed(), GFP_KERNEL)?;
        // SAFETY: A live request, zeroed, of no transport.
        Ok(unsafe { self.table.slot_of(other.get()) }.is_some())
    }
}

#[cfg(CONFIG_KUNIT)]
impl Drop for SlotBench {
    fn drop(&mut self) {
        // Every slot back, waiting tasks served first: each `free` either
        // hands a slot to a waiter or puts it on the stack, so this ends
        // with no task queued on the transport.
        loop {
            let holder = (0..self.tasks.len()).find(|&i| matches!(self.holds(i), Ok(Some(_))));
            match holder {
                Some(i) => {
                    let _ = self.free(i);
                }
                None => break,
            }
        }
        // SAFETY: Allocated by `xprt_alloc` (type invariant); no task is
        // queued on it any more.
        unsafe { bindings::xprt_free(self.xprt.as_ptr()) };
    }
}
