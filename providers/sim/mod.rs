//! The software mlx5 device ("sim").
//!
//! A model of an mlx5 HCA in process memory, the other side of the real protocol (as
//! rust-vmm's virtio-queue `mock` is the other side of a virtio queue). It hands out exactly
//! the memory `mlx5dv_init_obj` would — SQ and RQ rings (64-byte SQ stride, power-of-two
//! counts), doorbell records, a UAR page with a BlueFlame register of two 256-byte halves per
//! QP, CQ rings with every CQE initialised as libmlx5 and the kernel leave a new CQ buffer —
//! as the descriptors of [`crate::mlx5::dv`]. The production mlx5 provider runs on
//! it unchanged: it cannot tell, and it has no sim-only branch.
//!
//! Words used here as rdma-core uses them: **qpn** (QP number), **lkey/rkey** (local/remote
//! key of an MR; equal on mlx5), **dbrec** (doorbell record: the host's producer counters the
//! device reads — QP `[0]` receive, `[1]` send; CQ `[0]` consumer index), **bf** (BlueFlame
//! register in the UAR page: the doorbell is an 8-byte write there, or a copy of the whole
//! WQE), **ci/pi** (consumer/producer index), **ds** (WQE size in 16-byte units),
//! **wqe_counter** (the WQE index a CQE reports).
//!
//! ## Choosing a mode
//!
//! - **Deterministic** ([`SimDevice::new`], the default): the device does nothing on its
//!   own. [`Provider::progress`](crate::Provider::progress) runs it until idle
//!   (every posted request executes, every CQE is written), as do [`SimDevice::process`] (one
//!   pass) and [`SimDevice::run_until_idle`]. Every run is reproducible and single-threaded,
//!   so tests, the examples, scenario runs and anything debugged step by step use it. A loop
//!   written for any provider calls `progress()` between post and poll (`poll_wait`,
//!   `wait_each` and `drain` do); on real devices it does nothing. Latency measured in this
//!   mode is the caller's own loop running the device: it includes the device's work.
//! - **Device thread** ([`SimDevice::start_device_thread`]): a thread polls the doorbells and
//!   runs the engine, as hardware would, and `progress()` does nothing. Use it to measure
//!   (pingpong and the benches do: their figures are this mode's) or to exercise two threads
//!   against the device; it needs a spare core, and timing varies with the host's load.
//!
//! The hot path does exactly the same stores and loads in both modes.
//!
//! ## What the sim models
//!
//! - Device memory exactly as `mlx5dv_init_obj` hands it out (see above), page-aligned
//!   anonymous mappings that live as long as the object (the mlx5 queue's `owner` is a
//!   [`SimOwner`]; dropping it destroys the object, as `ibv_destroy_*`).
//! - The doorbell protocol: only a write to one of the two BlueFlame halves (8-byte doorbell or
//!   BlueFlame copy) makes the device read `dbrec[1]`; a dbrec update alone is not seen.
//!   Receive queues and SRQs have no doorbell: the device reads their dbrec when a message
//!   needs a receive. SRQ WQEs are consumed in arrival order along their `next_wqe_index`
//!   links, and the CQE names the SRQ WQE index as `wqe_counter`.
//! - One port per device, with its own GID and QPN range (see [`SimDevice::gid`]), unique
//!   per process too: two devices share nothing, and connecting a QP to another device's
//!   endpoint of this process is refused (`ibv_modify_qp`/`ibv_create_ah`, EINVAL, naming
//!   which). An RC QP of *another process's* sim device is reached through the sim
//!   [`fabric`]: packets in shared memory, the peer's engine executing the responder side
//!   into its own memory (the engine's `remote.rs`); UC, UD and address handles across
//!   processes are still refused.
//! - PD, MR (address, length, lkey = rkey, access flags), CQ, QP (RC, UC, UD) with the
//!   RESET → INIT → RTR → RTS / ERR state machine (invalid transitions are refused), SRQ.
//! - WQE validation with the syndromes of `MLX5_CQE_SYNDROME_*`, execution of SEND,
//!   SEND_IMM, WRITE, WRITE_IMM (consumes a receive), READ, CAS and FAA (old value in host
//!   byte order), RC in order and reliable (RNR and transport retries counted in engine
//!   passes; 7 = forever), UC without acks (remote errors and missing receives drop the
//!   message silently; READ and atomics are LOC_QP_OP), UD through the address vector with a
//!   Q_Key check and 40 bytes of GRH in front of the payload (CQE GRH flag, source QPN).
//! - CQEs with the right opcode, byte count, immediate, QPN, `wqe_counter`, owner parity;
//!   error CQEs and one flush CQE per outstanding WQE and per posted receive after an error;
//!   CQ overrun detected from the consumer index in the CQ's dbrec: reported
//!   ([`AsyncEvent::CqOverrun`]), never overwritten.
//! - CQ arming (the 8-byte CQ doorbell at `MLX5_CQ_DOORBELL` of a per-CQ UAR stub, with
//!   `rdma-core`'s `sn`/`cmd`/`ci`/`cqn` word) and completion events delivered on a
//!   [`channel::SimChannel`] (a pipe fd); see `engine/arm.rs` for the device's rules.
//! - A device clock ([`clock`]): CQs created with a timestamp kind carry the time of
//!   completion in the CQE's timestamp field.
//! - A seeded fault injector ([`fault`]): error CQEs, delayed completions, out-of-order
//!   completion across QPs, CQEs landing while the poller is mid-batch.
//!
//! ## What it deliberately does not model
//!
//! PCIe timing and ordering beyond the barriers the protocol requires, the write-combining
//! buffer (a BlueFlame copy rings the doorbell and the device executes the WQE from the
//! ring; in deterministic mode the copy's bytes are compared with the ring and counted in
//! [`EngineStats::bf_copies`] or, where hardware would execute different bytes,
//! [`EngineStats::bf_mismatches`]), link speed, congestion, packetisation and MTU
//! segmentation of RC/UC messages, PSNs and acknowledgements on a wire within one process
//! (across processes the fabric has them: `engine/remote.rs`), scatter-to-CQE (the sim
//! behaves as if it were disabled,
//! which is how the mlx5 provider configures hardware),
//! memory windows, the masked/extended atomics, vendor syndromes (always 0), fences (the
//! engine executes in order anyway), multiple ports. Its timing says nothing about hardware:
//! every figure measured on it is labelled "sim".
//!
//! ## Measuring on it
//!
//! Two RC QPs on the sim in device-thread mode run the production mlx5 hot path on both
//! ends; the device's counters ([`SimDevice::stats`]: doorbells, WQEs, CQEs, engine passes)
//! say what the path did, e.g. one doorbell and one WQE per message of a ping-pong and two
//! CQEs per message (the sender's and the receiver's). A figure measured on it is the sim's,
//! never hardware's.
//!
//! The engine's own documentation (passes, validation order, errors) is in `engine/mod.rs`.
//!
//! ## Lifetime
//!
//! Every object the device hands out (PD, MR, CQ, SRQ, QP) holds the device's engine alive,
//! so dropping the [`SimDevice`] first never leaves a QP without a device: if objects are
//! still alive, the engine keeps running for them on the device thread (started then if the
//! device was in deterministic mode), which ends once the last object is dropped. Posts,
//! rings and polls go on working as before; only the `SimDevice` methods (and so
//! [`Provider::progress`](crate::Provider::progress)) are gone with it.
//!
//! ## A new CQ buffer: owner bit 0
//!
//! rdma-core (`mlx5_alloc_cq_buf` in providers/mlx5/cq.c) and the kernel (`init_cq_frag_buf`
//! in drivers/infiniband/hw/mlx5/cq.c) both write `op_own = MLX5_CQE_INVALID << 4` = 0xF0
//! into every CQE of a new CQ buffer, i.e. owner bit **0** (not 1, as one might guess), and
//! hardware writes the first pass over the ring with owner 0 (the parity of `ci & cqe_cnt`).
//! The sim does the same. Either way an INVALID opcode is never taken as a CQE.

pub mod channel;
pub mod clock;
mod engine;
pub mod fabric;
pub mod fault;
mod mem;
mod provider;
pub mod standin;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

pub use engine::{AsyncEvent, EngineStats, SimQpAttr};
pub use fault::{FaultConfig, FaultStats};
pub use provider::{SimCq, SimMr, SimPd, SimQp, SimSrq, SIM_PORT_MTU};

use super::mlx5::dv::{DvCq, DvQp, DvSrq};
use super::{QpCaps, QpConfig, QpState};
use crate::clock::TimestampKind;
use clock::{SimClock, SimClockConfig};
use engine::Engine;
use mem::DevMem;

pub(crate) struct Shared {
    engine: Mutex<Engine>,
    clock: Arc<SimClock>,
    stop: AtomicBool,
    threaded: AtomicBool,
    /// The `SimDevice` was dropped while objects were alive: the device thread runs on until
    /// it holds the last reference (see "Lifetime" in the module doc).
    orphaned: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Engine> {
        // A panic inside the engine is a sim bug; the state is still consistent enough to
        // tear down, so a poisoned lock is taken over rather than propagated.
        self.engine.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Sim devices created so far in this process; each takes the next number.
static DEVICES: AtomicU32 = AtomicU32::new(0);

/// The first four bytes of every sim GID: `fd73:696d` (a unique-local IPv6 prefix, then
/// "sim" in ASCII), so an endpoint names a software device at sight.
pub(crate) const SIM_GID_PREFIX: [u8; 4] = [0xfd, 0x73, 0x69, 0x6d];

/// The identity of the `n`-th sim device of process `pid`: its first QPN and its port's GID.
///
/// Devices share no memory, so a QP of one cannot reach a QP of another — of this process or
/// of another one. Distinct GIDs make an endpoint of another device recognisable (connecting
/// to it is refused) instead of silently naming a local QP with the same number; two
/// processes' first devices used to get the same GID and the same first QPN, so each
/// accepted the other's endpoint and connected its QP to itself. GID:
/// `fd73:696d:0:0:PPPP:PPPP:0:NNNN` (the prefix, the process id in bytes 8..11, the device
/// number in bytes 12..15): unique per process and device. QPNs: device `n` of process
/// `pid` starts at `((pid + n) mod 255) << 16 | 0x100` (24-bit QPNs; the top byte never 0xff,
/// so never the multicast QPN 0xffffff), room for 65,280 QPs before the next range; two
/// processes differ in their first QPN unless their ids differ by a multiple of 255 (the
/// GID tells them apart regardless).
fn identity(pid: u32, n: u32) -> (u32, [u8; 16]) {
    /// Where in its 64 Ki range a device's QP numbers start.
    const QPN_RANGE_START: u32 = 0x100;
    let qpn_base = ((pid.wrapping_add(n) % 0xff) << 16) | QPN_RANGE_START;
    let mut gid = [0u8; 16];
    gid[..4].copy_from_slice(&SIM_GID_PREFIX);
    gid[8..12].copy_from_slice(&pid.to_be_bytes());
    gid[12..].copy_from_slice(&n.to_be_bytes());
    (qpn_base, gid)
}

/// The process id a sim GID carries (`None`: not a sim GID).
pub(crate) fn gid_process(gid: &[u8; 16]) -> Option<u32> {
    (gid[..4] == SIM_GID_PREFIX && gid[4..8] == [0; 4])
        .then(|| u32::from_be_bytes([gid[8], gid[9], gid[10], gid[11]]))
}

/// The software mlx5 device.
pub struct SimDevice {
    shared: Arc<Shared>,
    /// The GID of the device's single port (see [`identity`]).
    gid: [u8; 16],
    /// CQE size of the CQs created from now on (64 or 128).
    cqe_size: u32,
    thread: Option<JoinHandle<()>>,
    name: String,
}

impl std::fmt::Debug for SimDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimDevice")
            .field("name", &self.name)
            .field("threaded", &self.thread.is_some())
            .finish()
    }
}

/// Keeps a sim object (its device memory and its engine entry) alive; dropping it destroys
/// the object, as `ibv_destroy_*` would. The mlx5 queue types hold one as their `owner`.
pub struct SimOwner {
    shared: Arc<Shared>,
    obj: Obj,
    _mem: Arc<DevMem>,
}

#[derive(Clone, Copy, Debug)]
enum Obj {
    Qp(u32),
    Cq(u32),
    Srq(u32),
}

impl std::fmt::Debug for SimOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimOwner").field("obj", &self.obj).finish()
    }
}

impl Drop for SimOwner {
    fn drop(&mut self) {
        let mut e = self.shared.lock();
        match self.obj {
            Obj::Qp(n) => e.destroy_qp(n),
            Obj::Cq(n) => e.destroy_cq(n),
            Obj::Srq(n) => e.destroy_srq(n),
        }
    }
}

impl Default for SimDevice {
    fn default() -> Self {
        Self::new()
    }
}

impl SimDevice {
    /// A new device in deterministic mode, named `sim0`.
    pub fn new() -> SimDevice {
        Self::with_clock(SimClockConfig::default()).expect("the default clock is valid")
    }

    /// A new device whose device clock starts as `clock` says (frequency, first counter
    /// value); fails only on a frequency the clock info cannot scale.
    pub fn with_clock(clock: SimClockConfig) -> crate::Result<SimDevice> {
        let clock = Arc::new(SimClock::new(clock)?);
        let (qpn_base, gid) = identity(std::process::id(), DEVICES.fetch_add(1, Ordering::Relaxed));
        Ok(SimDevice {
            gid,
            shared: Arc::new(Shared {
                engine: Mutex::new(Engine::new(qpn_base, gid, Arc::clone(&clock))),
                clock,
                stop: AtomicBool::new(false),
                threaded: AtomicBool::new(false),
                orphaned: AtomicBool::new(false),
            }),
            thread: None,
            cqe_size: 64,
            name: "sim0".to_string(),
        })
    }

    /// The device clock: its counter, its clock-info page (what `mlx5dv_get_clock_info`
    /// reads on hardware) and its real-time clock.
    pub fn clock(&self) -> &Arc<SimClock> {
        &self.shared.clock
    }

    /// One engine pass over every QP; returns how much work it did (0 = idle).
    pub fn process(&self) -> usize {
        let torn = self.shared.threaded.load(Ordering::Relaxed);
        self.shared.lock().process(torn)
    }

    /// Run passes until one does nothing (bounded: at most `1 << 24` passes). Returns the
    /// total work done.
    pub fn run_until_idle(&self) -> usize {
        let mut total = 0;
        for _ in 0..1 << 24 {
            let w = self.process();
            if w == 0 {
                break;
            }
            total += w;
        }
        total
    }

    /// Start the device thread: it polls doorbells and runs the engine until
    /// [`SimDevice::stop_device_thread`] or the device's drop (or, when objects outlive the
    /// device, the last object's drop: see "Lifetime" in the module doc). Idempotent.
    pub fn start_device_thread(&mut self) -> crate::Result<()> {
        if self.thread.is_some() {
            return Ok(());
        }
        self.shared.stop.store(false, Ordering::Relaxed);
        self.shared.threaded.store(true, Ordering::Relaxed);
        let shared = Arc::clone(&self.shared);
        let h = std::thread::Builder::new()
            .name("sim0-device".into())
            .spawn(move || {
                let mut idle = 0u32;
                while !shared.stop.load(Ordering::Relaxed) {
                    // Orphaned and the last holder: no object is left to serve.
                    if shared.orphaned.load(Ordering::Acquire) && Arc::strong_count(&shared) == 1 {
                        break;
                    }
                    let w = shared.lock().process(true);
                    if w == 0 {
                        idle = idle.saturating_add(1);
                        std::hint::spin_loop();
                        if idle > 4096 {
                            // Long idle: let other threads run (the machine may have fewer
                            // cores than busy threads). Never taken while work keeps coming.
                            std::thread::yield_now();
                        }
                    } else {
                        idle = 0;
                    }
                }
            })
            .map_err(|e| crate::Error::io("sim: spawning the device thread", &e))?;
        self.thread = Some(h);
        Ok(())
    }

    /// Stop the device thread (back to deterministic mode).
    pub fn stop_device_thread(&mut self) {
        if let Some(h) = self.thread.take() {
            self.shared.stop.store(true, Ordering::Relaxed);
            let _ = h.join();
        }
        self.shared.threaded.store(false, Ordering::Relaxed);
    }

    /// The GID of the device's single port: `fd73:696d::` with the process id and the
    /// device's number in the process (see `identity`), distinct per device and per
    /// process, as are the QPN ranges the devices hand out.
    pub fn gid(&self) -> [u8; 16] {
        self.gid
    }

    /// Join the sim fabric `name` (`None`: `RDMA_DIRECT_SIM_FABRIC` or the per-user
    /// default), so QPs of this device can be connected to other processes' sim devices
    /// (see [`fabric`]). Connecting to such an endpoint joins the default fabric by itself;
    /// a device already on a fabric stays on it.
    pub fn join_fabric(&self, name: Option<&str>) -> crate::Result<()> {
        let mut e = self.shared.lock();
        if e.port.is_none() {
            let seg = fabric::Segment::open(name)?;
            e.port = Some(Box::new(engine::Port::new(fabric::Member::join(
                seg, self.gid,
            )?)));
        }
        Ok(())
    }

    /// The device's fabric slot, generation and counters (`None`: not on a fabric).
    pub fn fabric_stats(&self) -> Option<(u8, u32, fabric::FabricStats)> {
        let e = self.shared.lock();
        e.port
            .as_ref()
            .map(|p| (p.member.slot(), p.member.epoch(), p.member.stats))
    }

    /// True while the device thread runs.
    pub fn is_threaded(&self) -> bool {
        self.thread.is_some()
    }

    /// CQE size of the CQs created from now on: 64 (default) or 128 (the 64-byte CQE is then
    /// the second half of each slot, as `mlx5dv_create_cq` with a 128-byte CQE size gives).
    pub fn set_cqe_size(&mut self, bytes: u32) -> crate::Result<()> {
        if bytes != 64 && bytes != 128 {
            return Err(crate::Error::InvalidArgument {
                context: "SimDevice::set_cqe_size",
                detail: format!("{bytes} (64 or 128)"),
            });
        }
        self.cqe_size = bytes;
        Ok(())
    }

    /// Install (or remove, with `None`) a seeded fault injector.
    pub fn set_faults(&self, cfg: Option<FaultConfig>) {
        self.shared.lock().set_faults(cfg);
    }

    /// What the fault injector did so far.
    pub fn fault_stats(&self) -> FaultStats {
        self.shared.lock().fault_stats()
    }

    /// Engine counters.
    pub fn stats(&self) -> EngineStats {
        self.shared.lock().stats
    }

    /// Take the queued asynchronous events (CQ overrun, QP fatal).
    pub fn take_events(&self) -> Vec<AsyncEvent> {
        std::mem::take(&mut self.shared.lock().events)
    }

    /// The oldest queued asynchronous event, if any (never blocks): the sim's
    /// `ibv_get_async_event` on a non-blocking async fd, acknowledged on return.
    pub fn poll_async_event(&self) -> Option<AsyncEvent> {
        let mut e = self.shared.lock();
        if e.events.is_empty() {
            None
        } else {
            Some(e.events.remove(0))
        }
    }

    /// Queue `event` as if the device had raised it (port changes, SRQ limit, fatal
    /// errors the engine has no cause for), for tests and `rdma-direct events`.
    pub fn raise_event(&self, event: AsyncEvent) {
        self.shared.lock().events.push(event);
    }

    /// Inject a fault: CQ `cqn` goes into error as an overrun would put it (no more CQEs,
    /// `CQ_ERR` and `QP_FATAL` for each QP on it). The CQ's QPs refuse posts with
    /// `PostError::CqError`, say ERR, and the CQ's poll reports it (`WcFlags::CQ_ERROR`).
    pub fn fail_cq(&self, cqn: u32) {
        self.shared.lock().cq_error(cqn);
    }

    /// Inject a fault: QP `qpn` moves to ERR with `QP_FATAL`, as a local fatal error would;
    /// the device flushes its outstanding requests, the QP refuses posts and says ERR.
    pub fn fail_qp(&self, qpn: u32) {
        self.shared.lock().qp_fatal(qpn);
    }

    /// The device's view of a QP's state (ERR after an error CQE even if the host has not
    /// looked yet).
    pub fn qp_state(&self, qpn: u32) -> Option<QpState> {
        self.shared.lock().qp_state(qpn)
    }

    /// True when the CQ overran and is in its error state.
    pub fn cq_in_error(&self, cqn: u32) -> bool {
        self.shared.lock().cq_in_error(cqn)
    }

    // ------------------------------------------------------------ raw control path
    // The sim "context": the same steps as the control path, returning the
    // `mlx5dv_init_obj` descriptors. The `Provider` implementation is built on these.

    /// Allocate a protection domain; returns its number.
    pub fn alloc_pd_raw(&self) -> u32 {
        self.shared.lock().alloc_pd()
    }

    /// Create a CQ of at least `cqe` entries (64-byte CQEs).
    pub fn create_cq_dv(&self, cqe: u32) -> crate::Result<(DvCq, SimOwner)> {
        self.create_cq_dv_ts(cqe, None)
    }

    /// Create a CQ whose CQEs carry the device's time of completion in `ts`'s format (the
    /// sim's `ibv_create_cq_ex` with a completion-timestamp flag); `None`: no time.
    pub fn create_cq_dv_ts(
        &self,
        cqe: u32,
        ts: Option<TimestampKind>,
    ) -> crate::Result<(DvCq, SimOwner)> {
        let mut e = self.shared.lock();
        let cqn = e.create_cq(cqe, self.cqe_size, ts)?;
        let c = &e.cqs[&cqn];
        let dv = DvCq {
            cqn,
            buf: c.mem.ptr(0),
            cqe_cnt: c.cqe_cnt,
            cqe_size: c.cqe_size,
            dbrec: c.mem.ptr(c.dbrec_off).cast(),
        };
        let mem = Arc::clone(&c.mem);
        drop(e);
        Ok((dv, self.owner(Obj::Cq(cqn), mem)))
    }

    /// A completion channel (`ibv_create_comp_channel`): a pipe fd the device writes one
    /// event per fired arm into.
    pub fn create_comp_channel(&self) -> crate::Result<channel::SimChannel> {
        channel::SimChannel::new()
    }

    /// Deliver `cq`'s completion events on `ch` and return the waiter that arms `cq` and
    /// sleeps on `ch` (`ibv_create_cq` with a channel, then `ibv_req_notify_cq` /
    /// `ibv_get_cq_event` — here by hand). The CQ must be this device's.
    pub fn cq_waiter(
        &self,
        cq: &SimCq,
        ch: channel::SimChannel,
    ) -> crate::Result<crate::mlx5::CqWaiter<channel::SimChannel>> {
        let mut e = self.shared.lock();
        let cqn = cq.cqn();
        let c = e
            .cqs
            .get_mut(&cqn)
            .filter(|c| c.mem.ptr(c.dbrec_off).cast::<u32>() == cq.dbrec())
            .ok_or_else(|| crate::Error::InvalidArgument {
                context: "SimDevice::cq_waiter",
                detail: format!("CQ {cqn:#x} is not a CQ of this device"),
            })?;
        c.arm.channel = Some(Arc::clone(&ch.wr));
        let uar = c.mem.ptr(c.uar_off);
        e.any_channel = true;
        // SAFETY: `dbrec` and `uar` are the CQ's doorbell record and UAR stub in memory the
        // CQ's owner keeps alive; the waiter is used with that CQ only (its `wait` takes it).
        let mut arm = unsafe { crate::mlx5::CqArm::new(cqn, cq.dbrec(), uar) };
        arm.keep_alive(cq.keep_alive());
        Ok(crate::mlx5::CqWaiter::new(arm, ch))
    }

    /// The UAR stub of CQ `cqn` (its CQ doorbell is at `MLX5_CQ_DOORBELL`): what
    /// `mlx5dv_init_obj(CQ)` reports as `cq_uar`. `None` for a CQ this device does not have.
    pub fn cq_uar(&self, cqn: u32) -> Option<*mut u8> {
        let e = self.shared.lock();
        e.cqs.get(&cqn).map(|c| c.mem.ptr(c.uar_off))
    }

    /// Deregister the MR whose key is `key` (what dropping its [`SimMr`] does), for MRs
    /// whose lifetime is tracked outside Rust (the stand-in's `ibv_dereg_mr`).
    pub(crate) fn dereg_key(&self, key: u32) -> crate::Result<()> {
        self.shared.lock().dereg_mr(key);
        Ok(())
    }

    /// Deliver CQ `cqn`'s completion events (the CQN, 4 bytes each) into `fd`, the write end
    /// of a pipe (a completion channel made outside the sim, as by `ibv_create_comp_channel`).
    pub fn set_cq_channel_fd(&self, cqn: u32, fd: std::os::fd::OwnedFd) -> crate::Result<()> {
        let mut e = self.shared.lock();
        let c = e
            .cqs
            .get_mut(&cqn)
            .ok_or_else(|| crate::Error::InvalidArgument {
                context: "SimDevice::set_cq_channel_fd",
                detail: format!("CQ {cqn:#x} is not a CQ of this device"),
            })?;
        c.arm.channel = Some(Arc::new(fd));
        e.any_channel = true;
        Ok(())
    }

    /// Create an SRQ in protection domain `pd`.
    pub fn create_srq_dv(
        &self,
        pd: u32,
        max_wr: u32,
        max_sge: u32,
    ) -> crate::Result<(DvSrq, SimOwner)> {
        let mut e = self.shared.lock();
        let srqn = e.create_srq(pd, max_wr, max_sge)?;
        let s = &e.srqs[&srqn];
        let dv = DvSrq {
            srqn,
            buf: s.mem.ptr(0),
            wqe_cnt: s.wqe_cnt,
            stride: s.stride,
            head: 0,
            tail: s.wqe_cnt - 1,
            dbrec: s.mem.ptr(s.dbrec_off).cast(),
        };
        let mem = Arc::clone(&s.mem);
        drop(e);
        Ok((dv, self.owner(Obj::Srq(srqn), mem)))
    }

    /// Create a QP in RESET; returns its descriptor and the granted capacities.
    pub fn create_qp_dv(
        &self,
        pd: u32,
        cfg: &QpConfig,
        send_cqn: u32,
        recv_cqn: u32,
        srqn: Option<u32>,
    ) -> crate::Result<(DvQp, QpCaps, SimOwner)> {
        let mut e = self.shared.lock();
        let (qpn, caps, sq_cnt) =
            e.create_qp(pd, cfg.qp_type, &cfg.caps, send_cqn, recv_cqn, srqn)?;
        let q = e.qp(qpn).expect("just created");
        let dv = DvQp {
            qpn,
            sq_buf: q.mem.ptr(0),
            sq_wqe_cnt: sq_cnt,
            sq_stride: crate::wire::MLX5_SEND_WQE_BB as u32,
            rq_buf: if q.rq_cnt == 0 {
                std::ptr::null_mut()
            } else {
                q.mem.ptr(q.rq_off)
            },
            rq_wqe_cnt: q.rq_cnt,
            rq_stride: q.rq_stride,
            dbrec: q.mem.ptr(q.dbrec_off).cast(),
            bf_reg: q.mem.ptr(q.uar_off),
            bf_size: crate::wire::MLX5_BF_SIZE,
        };
        let mem = Arc::clone(&q.mem);
        drop(e);
        Ok((dv, caps, self.owner(Obj::Qp(qpn), mem)))
    }

    /// `ibv_modify_qp` on the device side: move `qpn` to `to`, optionally setting attributes.
    pub fn modify_qp(&self, qpn: u32, to: QpState, attr: Option<SimQpAttr>) -> crate::Result<()> {
        self.shared.lock().modify_qp(qpn, to, attr)
    }

    fn owner(&self, obj: Obj, mem: Arc<DevMem>) -> SimOwner {
        SimOwner {
            shared: Arc::clone(&self.shared),
            obj,
            _mem: mem,
        }
    }
}

impl Drop for SimDevice {
    /// See "Lifetime" in the module doc: with objects still alive the engine keeps running
    /// for them on the device thread (started if the device was deterministic), which ends
    /// once the last of them is dropped; otherwise the thread stops here.
    fn drop(&mut self) {
        let thread = usize::from(self.thread.is_some());
        let objects = Arc::strong_count(&self.shared) - 1 - thread;
        if objects == 0 || (self.thread.is_none() && self.start_device_thread().is_err()) {
            self.stop_device_thread();
            return;
        }
        self.shared.orphaned.store(true, Ordering::Release);
        // Detached: the thread ends by itself (the handle is dropped, not joined).
        self.thread = None;
    }
}
