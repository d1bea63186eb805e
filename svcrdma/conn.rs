// SPDX-License-Identifier: GPL-2.0

//! One accepted connection (C `struct svcxprt_rdma`): the state the
//! server's files share. What is done with it lives in files named like the
//! C module's:
//!
//! - `accept`: sizing, the queue pair and its Receives, the CM events of a
//!   connection (`svc_rdma_transport.c`);
//! - `recv_queue`: completed Receives and Calls being read, the repost of
//!   Receives;
//! - `recvfrom`: `xpo_recvfrom`, decoding and assembling Calls
//!   (`svc_rdma_recvfrom.c`);
//! - `read_call`: Calls with Read chunks, from their first Reads to their
//!   assembly (`svc_rdma_process_read_list`, `svc_rdma_read_complete`);
//! - `rw`: RDMA Reads and Writes of chunks (`svc_rdma_rw.c`);
//! - `sendto`: `xpo_sendto`, placing Replies (`svc_rdma_sendto.c`);
//! - `backchannel`: callbacks to the client (`svc_rdma_backchannel.c`).

use super::cache::BufCache;
use super::read::ReadPiece;
use super::read_sinks::{PagedSinks, ReadSinks};
use super::recv_queue::RecvQ;
use super::rw::Io;
use super::sq_gate::SqGate;
use crate::proto::msg::{ChunkLists, DecodeLimits, Header, Segment};
use crate::proto::pcl::{ChunkLayout, ParsedChunks, PclChunk, PclError};
use crate::proto::pieces::Piece;
use crate::rust::rdma::cm::CmId;
use crate::rust::rdma::recv_slots::{HeldRecv, RecvSlots};
use crate::rust::rdma::verbs::Endpoint;
use crate::rust::sunrpc::page_sinks::PageSinks;
use crate::rust::sunrpc::svc::{ArgLoan, XprtLink};
use crate::small_list::SmallList;
use kernel::alloc::KVec;
use kernel::prelude::*;
use kernel::sync::Arc;

pub(super) struct Shared {
    // Dropped first: draining completes every posted work request, RDMA
    // Reads included (their operations land in `rq`'s queues). `rq` goes
    // after it, so the sinks of Calls still being read, and any sink a
    // queued REG_MR named, are freed only once nothing can touch them.
    pub(super) ep: Endpoint,
    /// The receive queues and the Receives, whose contexts are freed
    /// after the drain.
    pub(super) rq: Arc<RecvQ>,
    pub(super) sq: Arc<SqGate>,
    pub(super) cache: Arc<BufCache>,
    pub(super) link: Arc<XprtLink>,
    pub(super) credits: u32,
    pub(super) inline_send: u32,
    pub(super) snd_w_inv: bool,
    /// Write chunks leave straight from the Reply's pages.
    pub(super) direct: bool,
    /// Where RDMA Reads land: a Call's single Read chunk in pages handed
    /// to the request (see `read::PAGED_PIECE`), or cached buffers.
    pub(super) read_sinks: ReadSinks,
    pub(super) limits: DecodeLimits,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // The link's close hook is the send queue gate, which holds the
        // link: the cycle ends here (the gate goes with the fields below).
        drop(self.link.clear_on_close());
    }
}

/// An accepted connection.
pub(super) struct Conn {
    pub(super) shared: Arc<Shared>,
}

/// Chunks and segments a Call's lists usually fit in without an
/// allocation of their own.
const INLINE_CHUNKS: usize = 4;

/// Storage for parsed chunk lists.
pub(super) struct PclStore {
    pub(super) chunks: SmallList<PclChunk, INLINE_CHUNKS>,
    pub(super) segs: SmallList<Segment, INLINE_CHUNKS>,
}

impl PclStore {
    /// Makes the storage the size `lists` need, in place.
    pub(super) fn refill_for(&mut self, lists: &ChunkLists<'_>) -> Result {
        self.chunks.refill(ParsedChunks::chunks_needed(lists))?;
        self.segs.refill(ParsedChunks::segments_needed(lists))
    }
}

/// A Call's transport header as `xpo_recvfrom` decoded it: its chunk
/// lists, kept with the Call while it is read and then with the request
/// until the Reply is sent, so the header is decoded once (C keeps the
/// parsed lists in `svc_rdma_recv_ctxt`).
pub(super) struct DecodedCall {
    pub(super) xid: u32,
    store: PclStore,
    layout: ChunkLayout,
    /// Length of the transport header.
    header_len: usize,
    /// Where the inline body starts in the received message (its end for
    /// `RDMA_NOMSG`, which has none).
    inline_at: usize,
}

impl DecodedCall {
    /// Nothing decoded yet.
    fn blank() -> Self {
        Self {
            xid: 0,
            store: PclStore {
                chunks: SmallList::new(),
                segs: SmallList::new(),
            },
            layout: ChunkLayout::default(),
            header_len: 0,
            inline_at: 0,
        }
    }

    /// Storage for the chunk lists of `lists`, to parse them into in place.
    pub(super) fn store_for(&mut self, lists: &ChunkLists<'_>) -> Result<&mut PclStore> {
        self.store.refill_for(lists)?;
        Ok(&mut self.store)
    }

    /// Storage for chunk lists as short as the common Calls': the inline
    /// lists' (a one-pass decoder that finds more leaves the Call to the
    /// general path, which sizes the storage for it).
    pub(super) fn store_inline(&mut self) -> Result<&mut PclStore> {
        self.store.chunks.refill(INLINE_CHUNKS)?;
        self.store.segs.refill(INLINE_CHUNKS)?;
        Ok(&mut self.store)
    }

    /// Keeps what a one-pass decode of a Call found: its XID, where its
    /// lists went in this call's store ([`Self::store_inline`]), and the
    /// length of its transport header, behind which the whole RPC Call
    /// is inline.
    pub(super) fn set_decoded(&mut self, xid: u32, header_len: usize, layout: ChunkLayout) {
        self.xid = xid;
        self.layout = layout;
        self.header_len = header_len;
        self.inline_at = header_len;
    }

    /// Keeps what the chunk lists of `msg`, parsed into this call's store
    /// ([`Self::store_for`]), found (`layout`); `inline` is the inline
    /// body, a tail of `msg`.
    pub(super) fn set(&mut self, msg: &[u8], hdr: &Header<'_>, inline: &[u8], layout: ChunkLayout) {
        self.xid = hdr.xid;
        self.layout = layout;
        self.header_len = hdr.header_len;
        self.inline_at = msg.len().saturating_sub(inline.len());
    }

    /// Whether the Call carried no chunk at all.
    pub(super) fn has_no_chunks(&self) -> bool {
        self.layout.is_empty()
    }

    /// Whether the Call carried no Write chunk and no Reply chunk: its
    /// Reply goes inline with empty lists.
    pub(super) fn has_no_result_chunks(&self) -> bool {
        self.layout.has_no_result_chunks()
    }

    /// The one segment of the Call's lists if they hold nothing else: one
    /// Write chunk of one segment (an NFS READ's).
    pub(super) fn one_write_segment(&self) -> Option<Segment> {
        if !self.layout.is_one_write_segment() {
            return None;
        }
        self.store.segs.as_slice().first().copied()
    }

    /// The Call's Read chunk and its segments if it has no call chunk and
    /// no other Read chunk (an NFS WRITE), as decoded into the store.
    pub(super) fn only_read_chunk(&self) -> Option<(&PclChunk, &[Segment])> {
        self.layout
            .only_read_chunk(self.store.chunks.as_slice(), self.store.segs.as_slice())
    }

    /// The R_key a Reply may invalidate (see `ParsedChunks::inv_rkey`),
    /// from the store, with no lists built.
    pub(super) fn inv_rkey(&self) -> Option<u32> {
        self.layout.inv_rkey(self.store.segs.as_slice())
    }

    /// The parsed chunk lists again.
    pub(super) fn pcl(&mut self) -> Result<ParsedChunks<'_>> {
        ParsedChunks::from_layout(
            &self.layout,
            self.store.chunks.as_mut_slice(),
            self.store.segs.as_slice(),
        )
        .map_err(|_| EINVAL)
    }

    /// Records result payload `index` in the Call's Write chunk `index`
    /// (see `ChunkLayout::set_result_payload`): false, with nothing
    /// recorded, when the Call has no such chunk.
    pub(super) fn set_result_payload(
        &mut self,
        index: usize,
        position: u32,
        length: u32,
    ) -> core::result::Result<bool, PclError> {
        self.layout
            .set_result_payload(self.store.chunks.as_mut_slice(), index, position, length)
    }

    /// Result payload `index` as recorded: its XDR position and length.
    pub(super) fn result_payload(&self, index: usize) -> Option<(u32, u32)> {
        self.layout
            .result_payload(self.store.chunks.as_slice(), index)
    }

    /// The inline body of the received message `msg`.
    pub(super) fn inline<'m>(&self, msg: &'m [u8]) -> &'m [u8] {
        msg.get(self.inline_at..).unwrap_or(&[])
    }

    /// Where the inline body starts in the received message.
    pub(super) fn inline_at(&self) -> usize {
        self.inline_at
    }

    /// Room for a Reply's transport header: it echoes at most the Call's
    /// Write list and Reply chunk, plus four words.
    pub(super) fn reply_header_room(&self) -> usize {
        self.header_len.saturating_add(16)
    }
}

/// Per-request state, from `xpo_recvfrom` to `xpo_release_ctxt`.
pub(crate) struct CallCtxt {
    /// The Call's decoded header.
    pub(super) call: DecodedCall,
    /// How many result payloads were recorded, one in each of the first
    /// Write chunks, where the Reply finds them (C keeps them in its
    /// chunks, `ch_position` and `ch_payload_length`).
    pub(super) payloads: usize,
    /// The Receive whose buffer the Call is read from in place, if any,
    /// kept here by the `svc` trampolines and given back with the request
    /// (`release_ctxt`), to post again.
    pub(super) arg: ArgLoan,
    /// The allocation of the list of RDMA Reads of the last Call with
    /// Read chunks this state carried, empty: reused by the next.
    pub(super) read_pieces: KVec<ReadPiece>,
    /// The Call's one Read, into its pages with no registration (the
    /// usual NFS WRITE), while not posted: planned without the list of
    /// pieces, which is then empty.
    pub(super) single_read: Option<Piece>,
    /// The pages the Call's Read chunk is read into, when they are its
    /// own, from the plan of its Reads until it is assembled: in this
    /// boxed state, written where it stays, not in a value moved from
    /// `xpo_recvfrom` into the read context and out again.
    pub(super) paged: Option<PagedSinks>,
    /// The page sinks of the last Call read into its pages, emptied (its
    /// pages handed to the request): the next one's are made in their
    /// allocations.
    pub(super) spare_sinks: Option<Arc<PageSinks>>,
}

impl CallCtxt {
    /// The state of a new request, decoded into in place: `spare`, the
    /// allocation of a released one if `xpo_recvfrom` took one
    /// (`Ring::ctxts`), else a new one.
    pub(super) fn reuse_or_new(spare: Option<KBox<Self>>) -> Result<KBox<Self>> {
        match spare {
            Some(mut ctxt) => {
                ctxt.payloads = 0;
                ctxt.single_read = None;
                Ok(ctxt)
            }
            None => Ok(KBox::new(
                Self {
                    call: DecodedCall::blank(),
                    payloads: 0,
                    arg: ArgLoan::new(),
                    read_pieces: KVec::new(),
                    single_read: None,
                    paged: None,
                    spare_sinks: None,
                },
                GFP_KERNEL,
            )?),
        }
    }

    /// Records a result payload for the next Write chunk (C
    /// `svc_rdma_result_payload`); without a Write chunk it stays inline,
    /// and so it does when the Call's flavor protects the data
    /// (`ddp_allowed` false: krb5i, krb5p): the client's Write chunk is then
    /// left unused, and the Reply goes inline or in the Reply chunk as a
    /// client that follows RFC 8166 section 3.5.3 would have asked.
    pub(super) fn result_payload(&mut self, offset: u32, length: u32, ddp_allowed: bool) -> Result {
        if !ddp_allowed || length == 0 {
            return Ok(());
        }
        // Into the next Write chunk the client offered, as `xpo_recvfrom`
        // stored it; without one the payload stays inline.
        match self.call.set_result_payload(self.payloads, offset, length) {
            Ok(true) => {
                self.payloads += 1;
                Ok(())
            }
            Ok(false) => Ok(()),
            Err(_) => Err(E2BIG),
        }
    }
}

pub(super) fn usize_of(v: u32) -> Result<usize> {
    usize::try_from(v).map_err(|_| EINVAL)
}

impl Conn {
    pub(super) fn cm_id(&self) -> &CmId {
        self.shared.ep.cm_id()
    }

    /// False while Replies wait for send queue room (C 7.3
    /// `svc_rdma_has_wspace`): sunrpc then dispatches no more of this
    /// connection's Calls, so a peer that stops completing Sends holds only
    /// the threads already waiting, each for at most the gate's stall
    /// bound, not one more per Call it sends. Nothing is left undispatched:
    /// each waiting thread's request releases its slot when it is done
    /// (`svc_xprt_release_slot`), which enqueues the transport again, and
    /// a gate that gives up closes the connection.
    pub(super) fn has_wspace(&self) -> bool {
        !self.shared.sq.has_waiters()
    }

    pub(super) fn detach(&self) {
        let s = &self.shared;
        s.sq.close();
        let _ = s.ep.cm_id().disconnect();
    }

    /// The receive contexts whose buffers the Calls are read from.
    pub(super) fn recv_slots(&self) -> &RecvSlots<RecvQ> {
        &self.shared.rq.recvs
    }

    pub(super) fn io(&self) -> Io<'_> {
        let s = &self.shared;
        Io {
            ep: &s.ep,
            sq: &s.sq,
            cache: &s.cache,
        }
    }

    /// Keeps the allocation of a released request's state for the next
    /// Call, if there is room (its contents are overwritten then), and
    /// queues the Receive its Call was read from, `held`, if it was, for
    /// reposting: under one hold of the ring's lock.
    pub(super) fn release_ctxt(&self, ctxt: KBox<CallCtxt>, held: Option<HeldRecv>) {
        let Some(recv) = held.map(HeldRecv::into_recv) else {
            let rejected = self
                .shared
                .rq
                .ring
                .lock()
                .ctxts
                .push_within_capacity(ctxt)
                .err();
            // Freed outside the lock.
            drop(rejected);
            return;
        };
        let (rejected, batch) = {
            let mut r = self.shared.rq.ring.lock();
            let batch = r.queue_repost(recv, true);
            (r.ctxts.push_within_capacity(ctxt).err(), batch)
        };
        drop(rejected);
        if let Some(batch) = batch {
            self.post_reposts(batch);
        }
    }

    /// Posts a Send of `bytes`.
    pub(super) fn send_bytes(&self, bytes: &[u8], inv: Option<u32>) -> Result {
        self.io().send(bytes, inv)
    }
}
