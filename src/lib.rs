//! # rdma-direct
//!
//! A kernel-bypass RDMA data plane with a hand-rolled mlx5 provider.
//!
//! ## Layers
//!
//! | layer | module | what it does | unsafe? |
//! |---|---|---|---|
//! | wire | [`wire`] | typed views over mlx5 WQE segments and CQEs (bytes in, fields out) | forbidden |
//! | vocabulary | [`types`], [`error`] | work requests, completions, QP parameters, access flags, MTU, errors: plain values every layer shares | `Send`/`Sync` of the address handle only |
//! | ffi | [`ffi`] | `#[repr(C)]` mirrors of `verbs.h` / `mlx5dv.h`, the `dlopen` loader | yes, fenced |
//! | control path | [`control`] | devices, ports, GIDs, PD, MR, CQ, SRQ, QP and their state machine through libibverbs | wraps ffi |
//! | endpoints | [`endpoint`] | out-of-band exchange of QPN/PSN/GID/MR over TCP, and rc_pingpong's text format | none |
//! | connection manager | [`cm`] | connect any provider's RC QP by IP address through librdmacm (`rdma_cm`) | wraps ffi |
//! | barriers, MMIO | [`barrier`], [`mmio`] | one named barrier per purpose, volatile device-memory access | yes, fenced |
//! | data plane | [`providers`] | the provider traits and the three providers: `mlx5` (direct WQE writing), `verbs` (libibverbs post/poll, e.g. on rxe), `sim` (software mlx5 device) | providers only |
//! | diagnostics | [`doctor`] | the troubleshooting order (link, MTU, caps, memlock, NUMA/affinity, PCIe) as checks returning findings | none |
//! | host noise | [`noise`], [`doctor::latency`] | spinning threads that measure how often and how long each CPU is taken away, with what the kernel counted meanwhile; the tuning checks for the polling core | `sched_setaffinity` only |
//! | measurement | [`perf`] | perftest-style latency / bandwidth runs over any provider, returning perftest's statistics | none |
//! | reports | [`report`] | result files (perftest's too), JSON, perftest's tables, SVG charts: text and values, never printed | none |
//! | first light | [`selftest`] | the ladder of small real operations to run first on a new device, each rung's expectation and outcome returned | none |
//! | hot-path benches | [`bench`](mod@bench) | the mlx5 post/poll cost on plain memory and the doorbell-batching sweep with its PCIe counts | none |
//! | fixture tests | [`scenario`] | `.scn` transfer scenarios parsed and run on any provider, every mismatch with its file line | registers the runner's own buffers |
//!
//! [`prelude`] holds the names an embedding program needs (devices, provider traits, work
//! requests, completions) in one `use`. The library parses no command line and prints
//! nothing: the `rdma-direct` binary (`src/bin/rdma-direct/`) does that on top of it.
//!
//! ## Features
//!
//! The default build is the whole tool. `default-features = false` builds the data plane
//! alone (wire, types, ffi, the control path, the `mlx5` and `verbs` providers, the endpoint
//! exchange); `sim` adds the software device, `perf` the measurement runs, `doctor` the
//! checks, `scenario` the fixture-scenario runner, `report` the result files, tables and
//! charts (with `perf`), `selftest` the first-light ladder (with the sim), `bench` the
//! hot-path measurements (with the plain-memory rig), and `cli` (the default) all of these
//! plus the `rdma-direct` binary. The guide below
//! runs on the sim.
//!
//! ## Guide
//!
//! Open a device (here the software one; `VerbsDevice::open("rxe0")` or
//! `Mlx5Device::open("mlx5_0")` on hardware), get registered memory from
//! [`Provider::alloc_buf`](providers::Provider::alloc_buf) (no `unsafe`), create and connect
//! two RC QPs (over TCP between processes: [`endpoint::connect_qp_server`] /
//! [`endpoint::connect_qp_client`]), WRITE WITH IMMEDIATE a batch into the peer's memory
//! with one doorbell and one signaled request, and let `?` carry every error:
//!
//! ```
//! use rdma_direct::prelude::*;
//!
//! fn main() -> Result<()> {
//!     let mut dev = SimDevice::new();
//!     let pd = dev.alloc_pd()?;
//!     let mut mine = dev.alloc_buf(&pd, 4096, Access::LOCAL_WRITE, Pages::Normal)?;
//!     let theirs = dev.alloc_buf(&pd, 4096, Access::ALL, Pages::Normal)?;
//!     let cfg = QpConfig::new(QpType::Rc);
//!     let (mut ca, mut cb) = (dev.create_cq(256)?, dev.create_cq(256)?);
//!     let mut a = dev.create_qp(&pd, &mut ca, None, None, &cfg)?;
//!     let mut b = dev.create_qp(&pd, &mut cb, None, None, &cfg)?;
//!     connect_pair(&mut dev, &mut a, &mut b, &ConnectOpts::default())?; // one device, loopback
//!
//!     // The peer's window (this travels in the endpoint message between processes).
//!     let window = theirs.remote(0, 4096)?;
//!     mine.get_mut(0, 4)?.copy_from_slice(b"buy!");
//!     let sge = [mine.sge(0, 64)?];
//!     let mut batch = SendBatch::<_, 4>::new();
//!     for i in 0..4u64 {
//!         let at = window.target(i * 64, 64)?; // address + rkey, bounds-checked here once
//!         let wr = SendWr::write_imm_to(i, &sge, at, i as u32);
//!         let _ = batch.push(wr.signaled_if(i == 3)); // selective signaling
//!     }
//!     for i in 0..4 {
//!         b.rq().post_recv(RecvWr::new(i, &[]))?; // a WRITE WITH IMM consumes a receive
//!     }
//!     b.rq().ring();
//!     a.sq().post_list(batch.as_slice())?; // one doorbell
//!
//!     let (mut got, mut wc) = (0, [Completion::EMPTY; 8]);
//!     while got < 4 {
//!         dev.progress(); // runs the software device; real devices need nothing
//!         let n = cb.poll(&mut wc[..]);
//!         for c in &wc[..n] {
//!             c.check()?; // a failed completion: an error naming the likely cause and fix
//!         }
//!         got += n;
//!     }
//!     // The receive completions say the peer's bytes have landed: they are ours to read.
//!     assert_eq!(theirs.get(192, 4)?, b"buy!");
//!     Ok(())
//! }
//! ```
//!
//! ### When a link fails
//!
//! A peer that dies is noticed with the default [`ConnectOpts`](types::ConnectOpts): the
//! oldest outstanding request ends in `RETRY_EXC_ERR` within
//! [`ConnectOpts::retry_budget`](types::ConnectOpts::retry_budget) (4.096 µs × 2^timeout ×
//! (retry_cnt + 1) = 0.47 s), the rest flushed, on mlx5, rxe and the sim. An RC QP in ERR comes
//! back through RESET → INIT → RTR → RTS ([`Provider::connect`](providers::Provider::connect)
//! does the whole walk) once every request on it has ended; [`providers::recover`] does it
//! all: QP to ERR, every outstanding request drained and counted, the failed ones listed, the
//! flow helpers reset, reconnected:
//!
//! ```
//! use rdma_direct::prelude::*;
//!
//! fn main() -> Result<()> {
//!     let mut dev = SimDevice::new();
//!     let pd = dev.alloc_pd()?;
//!     let mem = dev.alloc_buf(&pd, 64, Access::ALL, Pages::Normal)?;
//!     let to = mem.remote(0, 64)?;
//!     let (mut ca, mut cb) = (dev.create_cq(256)?, dev.create_cq(256)?);
//!     let cfg = QpConfig::new(QpType::Rc);
//!     let mut a = dev.create_qp(&pd, &mut ca, None, None, &cfg)?;
//!     let mut b = dev.create_qp(&pd, &mut cb, None, None, &cfg)?;
//!     let opts = ConnectOpts::default();
//!     connect_pair(&mut dev, &mut a, &mut b, &opts)?;
//!     let mut window = Recovery::send_window(&a); // one slot kept for the drain's marker
//!     let mut recovery = Recovery::new(&window, 4 * opts.retry_budget());
//!
//!     dev.to_error(&mut b)?; // the peer fails
//!     for order in 1..=3 {
//!         let wr = SendWr::write(order, &[], to.addr, to.rkey).inline(b"buy!");
//!         a.sq().post_and_ring(wr.signaled())?;
//!         window.posted(1);
//!     }
//!     let mut wc = [Completion::EMPTY];
//!     while ca.poll(&mut wc) == 0 {
//!         dev.progress();
//!     }
//!     window.retire(&wc[0]);
//!     assert_eq!((wc[0].wr_id, wc[0].is_ok()), (1, false)); // order 1 failed
//!
//!     // Both ends recover (the peer would do it in its own process).
//!     let report = recovery.recover(
//!         &mut dev,
//!         &mut a,
//!         LinkQueues { send_cq: &mut ca, recv_cq: None, window: &mut window, recvs: None },
//!         |_| {}, // every completion the drain polls
//!         |p, a| {
//!             let (ea, eb) = (p.endpoint(a, &opts)?, p.endpoint(&b, &opts)?);
//!             p.connect(a, &ea, &eb, &opts)?;
//!             p.connect(&mut b, &eb, &ea, &opts)
//!         },
//!     )?;
//!     assert_eq!(recovery.failed(), [2, 3]); // flushed: to send again, with order 1
//!     assert_eq!((report.sends_failed, window.in_flight()), (2, 0));
//!     assert_eq!(a.state(), QpState::Rts);
//!     Ok(())
//! }
//! ```
//!
//! **The QP state machine from ERR.** A QP in ERR accepts no post (refused with
//! `PostError::BadState`) but the drain's flush marker (`SendQueue::post_flush_marker`), and
//! completes everything still outstanding as `WR_FLUSH_ERR`. It
//! leaves ERR only to RESET (the provider's `connect` does it first; on rxe only once every
//! request has ended, which the drain ensures), then INIT (port, access), RTR (the peer's
//! QPN, PSN, path, MTU) and RTS (its own PSN, `timeout`, `retry_cnt`, `rnr_retry`); the
//! peer walks its own QP the same way towards this one's new endpoint (a fresh PSN each
//! time). A link goes on either on **the same QP** ([`RcLink::recover`](prelude::RcLink::recover),
//! or [`Recovery::recover`](prelude::Recovery::recover) as above: the QPN, CQ and buffers
//! stay) or on **new QPs** ([`RcLink::drain_polled`](prelude::RcLink::drain_polled) on the old
//! link, then a new `RcLink` connected; the old one dropped).
//!
//! **What a fault looks like.** Everywhere: an error completion (the failed request's
//! status, the rest `WR_FLUSH_ERR`), then posts refused with `BadState`. A peer that
//! vanished: `RETRY_EXC_ERR` on the oldest outstanding request within the bound above (with
//! nothing in flight, only a [`probe`](prelude::probe) finds it). Per provider:
//! - **mlx5**: the CQE's syndrome in `vendor_err`; a QP or CQ the device failed on its own
//!   also raises `QP_FATAL` / `CQ_ERR` on the context's async fd;
//! - **verbs (rxe, any other device)**: a request libibverbs refuses (EINVAL, ENOMEM,
//!   EOPNOTSUPP) is refused at the call: `post_and_ring`, `try_ring` and the lists return
//!   it; after a bare `ring` the queue's next call or its CQ's next empty poll does (a
//!   completion flagged `REFUSED`, see `SendQueue::ring`). rxe's async events: `QP_FATAL`
//!   class, `CQ_ERR` on an overrun, `COMM_EST`; a vanished peer raises none;
//! - **the sim**: as mlx5 (the same code), its faults on demand: a responder to ERR or
//!   dropped, `fail_qp` / `fail_cq` (with their events), the seeded injector's error CQEs.
//!
//! The asynchronous events come through one call,
//! [`Provider::async_events`](providers::Provider::async_events) (each handed out once: read
//! them in one place); [`link_events`](prelude::link_events) gives them as
//! [`LinkEvent`](prelude::LinkEvent)s, and [`RcLink::failed_by`](prelude::RcLink::failed_by)
//! says whether one fails a link, which then recovers with nothing polled.
//!
//! `examples/order_gateway.rs` is the same pattern as a measured round trip, on the sim or
//! between two processes over a device; `examples/fanout.rs` writes into N peers' rings with
//! the glue of [`providers::flow`] (send windows, receive replenishers, ring credits, a wait
//! over several CQs).
//!
//! The control path may allocate, lock and make system calls. The data plane on mlx5 and on
//! the sim does none of these per operation (see `tests/hot_path_alloc.rs`).
#![deny(unsafe_op_in_unsafe_fn)]
// Without the default features the docs still name the sim, perf and doctor (what the full
// build adds); those links cannot resolve in that build, and only there are they allowed.
#![cfg_attr(
    not(all(
        feature = "sim",
        feature = "perf",
        feature = "doctor",
        feature = "scenario",
        feature = "report",
        feature = "selftest",
        feature = "bench"
    )),
    allow(rustdoc::broken_intra_doc_links)
)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub use rdma_direct_core::{barrier, clock, control, error, ffi, mmio, pcie, types, wire};
pub use rdma_direct_providers as providers;

#[cfg(feature = "bench")]
pub mod bench;
pub mod cm;
#[cfg(feature = "doctor")]
pub mod doctor;
#[cfg(feature = "doctor")]
pub mod noise;
#[cfg(feature = "perf")]
pub mod perf;
pub mod prelude;
#[cfg(feature = "report")]
pub mod report;
#[cfg(feature = "scenario")]
pub mod scenario;
#[cfg(feature = "selftest")]
pub mod selftest;
#[cfg(any(feature = "perf", feature = "doctor"))]
mod tsc;

pub use error::{Error, Result};

/// Out-of-band endpoint exchange: the message, its codecs and the TCP exchange
/// (`rdma-direct-core`), and any provider's QP connected over TCP in one call
/// ([`endpoint::connect_qp_server`], [`endpoint::connect_qp_client`], from the providers
/// crate).
pub mod endpoint {
    pub use rdma_direct_core::endpoint::*;
    pub use rdma_direct_providers::connect::{connect_qp_client, connect_qp_server, Connection};
}
