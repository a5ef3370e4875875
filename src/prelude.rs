//! The names an embedding program needs, in one `use`:
//!
//! ```
//! use rdma_direct::prelude::*;
//! ```
//!
//! - the three devices, each a [`Provider`]: [`Mlx5Device`] (direct WQE writing on an mlx5
//!   NIC), [`VerbsDevice`] (libibverbs post/poll, any verbs device such as rxe) and
//!   [`SimDevice`] (the software mlx5 device), with its QP and CQ types named [`SimQp`] and
//!   [`SimCq`] (for struct fields; generic code says `P::Qp`, `P::Cq`);
//! - the provider traits: [`Provider`] (control path: PD, MR, CQ, SRQ, QP, bring-up) and the
//!   data-plane traits [`QueuePair`], [`SendQueue`], [`RecvQueue`], [`CompletionQueue`],
//!   [`MemoryRegion`];
//! - work requests and completions: [`SendWr`], [`SendOp`], [`SendFlags`], [`Sge`],
//!   [`UdDest`], [`RecvWr`], [`Completion`], [`WcStatus`], [`WcOpcode`], [`WcFlags`],
//!   [`PostError`], [`Rejected`], [`PostListError`], [`RingError`], [`RingVerb`], [`SendBatch`];
//! - registered memory: [`RegisteredBuf`] (from [`Provider::alloc_buf`]), [`Pages`],
//!   [`RemoteMr`] (a window the peer may access) and [`RemoteTarget`] (a range of it,
//!   bounds-checked once, for the typed WRITE / READ / atomic constructors);
//! - QP set-up: [`QpType`], [`QpCaps`], [`QpConfig`], [`QpState`], [`ConnectOpts`],
//!   [`Access`], [`QpEndpoint`], [`Mtu`], [`ProviderKind`];
//! - the provider for a device ([`crate::providers::choice`]): [`run_chosen`] opens the one
//!   [`Choice`] asks for (the sim without a device, the direct mlx5 provider on an mlx5 NIC,
//!   libibverbs otherwise) and runs a [`Job`] on it;
//! - bring-up over TCP for any provider: [`connect_qp_server`], [`connect_qp_client`],
//!   [`Connection`];
//! - around the hot loop: [`poll_wait`] (busy-poll with a stall deadline), [`drain`],
//!   [`pin_current_thread`], [`local_cpus`];
//! - the glue of a message loop ([`crate::providers::flow`]): [`SendWindow`] /
//!   [`SendWindows`] (requests in flight per QP, from completions), [`RecvReplenisher`]
//!   (receives kept posted), [`RingWriter`] / [`RingReader`] (slots and credits of a ring in
//!   the peer's memory), [`poll_any`] / [`wait_each`] (several CQs, one stall deadline),
//!   [`connect_pair`] (two QPs of one device);
//! - after a fault ([`crate::providers::recover`]): [`Recovery`] (QP to ERR, every
//!   outstanding request drained and accounted, the flow helpers reset, reconnected),
//!   [`LinkQueues`], [`RcLink`] (an RC link in the common shape), [`RecoveryReport`],
//!   [`probe`] (a liveness probe for an idle link), [`LinkEvent`] (an asynchronous event
//!   as a link sees it), [`link_events`] (`Provider::async_events` read as those);
//! - [`Error`] and [`Result`].
//!
//! A program written against the traits runs on every device. Two RC QPs on the software
//! device, one SEND between them, nothing `unsafe`:
//!
//! ```
//! use rdma_direct::prelude::*;
//!
//! fn send_one<P: Provider>(p: &mut P) -> Result<Completion> {
//!     let pd = p.alloc_pd()?;
//!     let mem = p.alloc_buf(&pd, 2 * 64, Access::LOCAL_WRITE, Pages::Normal)?;
//!     let mut cfg = QpConfig::new(QpType::Rc);
//!     // Each CQ must absorb its QP's queues (create_qp refuses a smaller one).
//!     (cfg.caps.max_send_wr, cfg.caps.max_recv_wr) = (8, 8);
//!     let (mut ca, mut cb) = (p.create_cq(16)?, p.create_cq(16)?);
//!     let mut a = p.create_qp(&pd, &mut ca, None, None, &cfg)?;
//!     let mut b = p.create_qp(&pd, &mut cb, None, None, &cfg)?;
//!     connect_pair(p, &mut a, &mut b, &ConnectOpts::default())?;
//!
//!     // A refused post hands the request back with the reason; `?` makes it an `Error`.
//!     let into = [mem.sge(64, 64)?];
//!     b.rq().post_recv(RecvWr::new(7, &into))?;
//!     b.rq().ring();
//!     let from = [mem.sge(0, 64)?];
//!     a.sq().post(SendWr::send(1, &from).signaled())?;
//!     a.sq().ring();
//!
//!     let mut wc = [Completion::EMPTY];
//!     poll_wait(p, &mut cb, &mut wc, std::time::Duration::from_secs(5))?;
//!     wc[0].check()?; // a failed completion becomes an error naming the likely fix
//!     Ok(wc[0])
//! }
//!
//! let c = send_one(&mut SimDevice::new()).unwrap();
//! assert_eq!((c.wr_id, c.byte_len), (7, 64));
//! ```

pub use crate::endpoint::{connect_qp_client, connect_qp_server, Connection};
pub use crate::providers::choice::{run_chosen, Choice, Job};
pub use crate::providers::flow::{
    connect_pair, poll_any, wait_each, RecvReplenisher, RingReader, RingWriter, SendWindow,
    SendWindows,
};
pub use crate::providers::helpers::{drain, local_cpus, pin_current_thread, poll_wait};
pub use crate::providers::mlx5::{Mlx5Dedicated, Mlx5Device};
pub use crate::providers::recover::{
    link_events, probe, LinkEvent, LinkQueues, RcLink, Recovery, Report as RecoveryReport,
};
#[cfg(feature = "sim")]
pub use crate::providers::sim::{SimCq, SimDevice, SimQp};
pub use crate::providers::verbs::VerbsDevice;
pub use crate::providers::{
    Access, Completion, CompletionQueue, ConnectOpts, MemoryRegion, Mtu, OwnedPair, Pages,
    PostError, PostListError, Provider, ProviderKind, QpCaps, QpConfig, QpEndpoint, QpState,
    QpType, QueuePair, RecvQueue, RecvWr, RegisteredBuf, Rejected, RemoteMr, RemoteTarget,
    RingError, RingVerb, SendBatch, SendFlags, SendOp, SendQueue, SendWr, Sge, UdDest, WcFlags,
    WcOpcode, WcStatus,
};
pub use crate::{Error, Result};
