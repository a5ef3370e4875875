//! PD and MR of the sim, and the [`crate::Provider`] implementation that
//! puts the mlx5 hot-path types on sim memory.

use std::sync::Arc;

use super::{Shared, SimDevice};
use crate::{Access, MemoryRegion};

/// A protection domain of the sim.
#[derive(Debug)]
pub struct SimPd {
    pub(crate) id: u32,
}

impl SimPd {
    /// Wrap a PD number from [`SimDevice::alloc_pd_raw`].
    pub fn from_raw(id: u32) -> SimPd {
        SimPd { id }
    }
    /// The PD number.
    pub fn id(&self) -> u32 {
        self.id
    }
}

/// A memory region registered with the sim (lkey == rkey, as on mlx5). Dropping it
/// deregisters it: later WQEs naming its key fail with LOC_PROT / REM_ACCESS.
pub struct SimMr {
    addr: u64,
    len: usize,
    key: u32,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for SimMr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimMr")
            .field("addr", &format_args!("{:#x}", self.addr))
            .field("len", &self.len)
            .field("key", &format_args!("{:#x}", self.key))
            .finish()
    }
}

impl Drop for SimMr {
    fn drop(&mut self) {
        self.shared.lock().dereg_mr(self.key);
    }
}

impl MemoryRegion for SimMr {
    fn addr(&self) -> u64 {
        self.addr
    }
    fn len(&self) -> usize {
        self.len
    }
    fn lkey(&self) -> u32 {
        self.key
    }
    fn rkey(&self) -> u32 {
        self.key
    }
}

impl SimDevice {
    /// A CQ whose CQEs carry the device clock's time of completion in `kind`'s format, with
    /// its [`CqClock`](crate::mlx5::CqClock) attached (free-running: the device's
    /// clock-info page). Use it for both CQs of a QP.
    pub fn create_cq_ts(
        &mut self,
        cqe: u32,
        kind: crate::clock::TimestampKind,
    ) -> crate::Result<SimCq> {
        use crate::mlx5::CqClock;
        let clock = match kind {
            crate::clock::TimestampKind::RealTime => CqClock::real_time(),
            crate::clock::TimestampKind::FreeRunning => {
                CqClock::free_running(self.clock().page().clone())?
            }
        };
        let (dv, owner) = self.create_cq_dv_ts(cqe, Some(kind))?;
        // SAFETY: as `create_cq`: a fresh sim CQ ring; `owner` keeps the memory alive.
        let mut cq = unsafe { Mlx5Cq::from_dv(dv, owner) }?;
        cq.set_clock(clock);
        self.attach_cq(&cq);
        Ok(cq)
    }

    /// Allocate a PD.
    pub fn alloc_sim_pd(&self) -> SimPd {
        SimPd {
            id: self.alloc_pd_raw(),
        }
    }

    /// Register `len` bytes at `addr` in `pd`.
    ///
    /// # Safety
    /// The memory must stay valid until the MR is dropped; the device reads and writes it as
    /// `access` allows, from the device thread too.
    pub unsafe fn reg_sim_mr(
        &self,
        pd: &SimPd,
        addr: *mut u8,
        len: usize,
        access: Access,
    ) -> crate::Result<SimMr> {
        if addr.is_null() || len == 0 {
            return Err(crate::Error::InvalidArgument {
                context: "sim reg_mr",
                detail: format!("empty or null region ({addr:p}, {len} B)"),
            });
        }
        let key = self
            .shared
            .lock()
            .reg_mr(pd.id, addr as u64, len as u64, access);
        Ok(SimMr {
            addr: addr as u64,
            len,
            key,
            shared: Arc::clone(&self.shared),
        })
    }
}

use crate::endpoint::Mtu;
use crate::mlx5::{AddressVector, Mlx5Cq, Mlx5Qp, Mlx5Srq, Owners};
use crate::{
    CompletionQueue, ConnectOpts, Provider, ProviderKind, QpConfig, QpEndpoint, QpState, QpType,
    QueuePair,
};

use super::{SimOwner, SimQpAttr};
use crate::wire;

/// The sim port's active MTU.
pub const SIM_PORT_MTU: Mtu = Mtu::Mtu4096;

/// A CQ of the sim: the mlx5 provider's CQ over the sim's memory.
pub type SimCq = Mlx5Cq<SimDevice>;
/// An SRQ of the sim.
pub type SimSrq = Mlx5Srq<SimDevice>;
/// A QP of the sim.
pub type SimQp = Mlx5Qp<SimDevice>;

/// The sim's queue memory belongs to its own objects (dropping a [`SimOwner`] destroys the
/// object, as `ibv_destroy_*` would).
impl Owners for SimDevice {
    type Cq = SimOwner;
    type Srq = SimOwner;
    type Qp = SimOwner;
    type Ah = AddressVector;
    #[inline(always)]
    fn av(ah: &AddressVector) -> &[u8; wire::MLX5_AV_LEN] {
        &ah.0
    }
}

impl Provider for SimDevice {
    type Pd = SimPd;
    type Mr = SimMr;
    type Cq = SimCq;
    type Srq = SimSrq;
    type Qp = SimQp;
    type Ah = AddressVector;
    type Pair = crate::mlx5::Mlx5Dedicated<SimDevice>;

    fn kind(&self) -> ProviderKind {
        ProviderKind::Sim
    }

    fn device_name(&self) -> &str {
        &self.name
    }

    fn alloc_pd(&mut self) -> crate::Result<SimPd> {
        Ok(self.alloc_sim_pd())
    }

    unsafe fn reg_mr(
        &mut self,
        pd: &SimPd,
        addr: *mut u8,
        len: usize,
        access: Access,
    ) -> crate::Result<SimMr> {
        // SAFETY: the caller upholds `Provider::reg_mr`'s contract, which is this one's.
        unsafe { self.reg_sim_mr(pd, addr, len, access) }
    }

    fn create_cq(&mut self, cqe: u32) -> crate::Result<SimCq> {
        let (dv, owner) = self.create_cq_dv(cqe)?;
        // SAFETY: `dv` describes a fresh sim CQ ring initialised as the device expects
        // (op_own 0xF0 everywhere); `owner` keeps the memory alive for the CQ's lifetime and
        // only the device and this CQ use it.
        let cq = unsafe { Mlx5Cq::from_dv(dv, owner) }?;
        self.attach_cq(&cq);
        Ok(cq)
    }

    fn create_cq_ts(&mut self, cqe: u32) -> crate::Result<SimCq> {
        SimDevice::create_cq_ts(self, cqe, crate::clock::TimestampKind::RealTime)
    }

    fn create_srq(&mut self, pd: &SimPd, max_wr: u32, max_sge: u32) -> crate::Result<SimSrq> {
        let (dv, owner) = self.create_srq_dv(pd.id, max_wr, max_sge)?;
        // SAFETY: a fresh sim SRQ whose free list runs 0 -> 1 -> ... -> wqe_cnt-1 from
        // `dv.head` to `dv.tail`; `owner` keeps the memory alive.
        unsafe { Mlx5Srq::from_dv(dv, max_sge, owner) }
    }

    fn create_qp(
        &mut self,
        pd: &SimPd,
        send_cq: &mut SimCq,
        recv_cq: Option<&mut SimCq>,
        srq: Option<&mut SimSrq>,
        cfg: &QpConfig,
    ) -> crate::Result<SimQp> {
        let send_cqn = send_cq.cqn();
        let recv_cqn = recv_cq.as_ref().map_or(send_cqn, |c| c.cqn());
        let srqn = srq.as_ref().map(|s| s.srqn());
        let (dv, sized, owner) = self.create_qp_dv(pd.id, cfg, send_cqn, recv_cqn, srqn)?;
        // What the sim sized the rings for can exceed the request (whole WQEBBs, powers of
        // two); the limits enforced at post time are the requested ones, as the hardware glue
        // and the rxe provider enforce them, so a program behaves the same on each.
        let granted = cfg.caps.within(sized);
        // SAFETY: `dv` describes fresh sim QP memory (rings, dbrec, bfreg) used only by this
        // QP and the device; `owner` keeps it alive; `granted` are the caps the sim sized the
        // rings for.
        let mut qp =
            unsafe { Mlx5Qp::from_dv_checked(dv, cfg, granted, send_cq, recv_cq, srq, owner)? };
        qp.set_path_mtu(SIM_PORT_MTU.bytes());
        if let Some(q) = self.shared.lock().qps.get_mut(&qp.qpn()) {
            q.host = Some(Arc::downgrade(qp.shared()));
        }
        Ok(qp)
    }

    fn own_pair(
        &mut self,
        qp: SimQp,
        cq: SimCq,
    ) -> crate::Result<crate::mlx5::Mlx5Dedicated<SimDevice>> {
        crate::mlx5::Mlx5Dedicated::new(qp, cq).map_err(|e| e.reason)
    }

    fn endpoint(&self, qp: &SimQp, opts: &ConnectOpts) -> crate::Result<QpEndpoint> {
        Ok(QpEndpoint {
            lid: 0,
            gid: self.gid(),
            gid_index: opts.gid_index,
            qpn: qp.qpn(),
            // A fixed function of the QPN: deterministic runs, distinct per QP.
            psn: (qp.qpn().wrapping_mul(0x9e37_79b9) >> 8) & 0xff_ffff,
            mtu: SIM_PORT_MTU,
            mr: None,
        })
    }

    fn connect(
        &mut self,
        qp: &mut SimQp,
        local: &QpEndpoint,
        remote: &QpEndpoint,
        opts: &ConnectOpts,
    ) -> crate::Result<()> {
        let _ = local;
        // Another process's sim device: reached through the fabric, never refused (a UD
        // QP joins it too: its datagrams' address vectors name the device).
        let across = self.other_process(remote);
        if across {
            self.join_fabric(None)?;
        } else {
            self.same_device("ibv_modify_qp (sim connect)", remote)?;
        }
        let qpn = qp.qpn();
        if qp.state() != QpState::Reset {
            self.modify_qp(qpn, QpState::Reset, None)?;
            qp.set_state(QpState::Reset);
        }
        self.shared.lock().set_remote(
            qpn,
            (across && qp.qp_type() != QpType::Ud).then_some(remote.gid),
        );
        let mtu = opts
            .path_mtu
            .unwrap_or(if remote.mtu.bytes() < SIM_PORT_MTU.bytes() {
                remote.mtu
            } else {
                SIM_PORT_MTU
            });
        let attr = SimQpAttr {
            remote_qpn: if qp.qp_type() == QpType::Ud {
                0
            } else {
                remote.qpn
            },
            path_mtu: mtu.bytes(),
            rnr_retry: opts.rnr_retry,
            retry_cnt: opts.retry_cnt,
            min_rnr_timer: opts.min_rnr_timer,
            timeout: opts.timeout,
            access: opts.access,
            qkey: opts.qkey,
        };
        for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
            self.modify_qp(qpn, s, Some(attr))?;
            qp.set_state(s);
        }
        qp.set_path_mtu(mtu.bytes());
        Ok(())
    }

    fn to_error(&mut self, qp: &mut SimQp) -> crate::Result<()> {
        self.modify_qp(qp.qpn(), QpState::Err, None)?;
        qp.set_state(QpState::Err);
        Ok(())
    }

    fn create_ah(
        &mut self,
        _pd: &SimPd,
        remote: &QpEndpoint,
        opts: &ConnectOpts,
    ) -> crate::Result<AddressVector> {
        if self.other_process(remote) {
            // A datagram to another process's sim device crosses the fabric.
            self.join_fabric(None)?;
        } else {
            self.same_device("ibv_create_ah (sim)", remote)?;
        }
        // The address vector as libmlx5's `mlx5_create_ah` fills it for a RoCE port (the
        // sim's GID is a RoCE v2 one): extended AV, service level in bits 1-3 of
        // `stat_rate_sl` (static rate 0: the port's), the GRH bit of `grh_gid_fl` clear (RoCE
        // packets always carry a GRH) with the source GID index in bits 20-27, hop limit 64,
        // the remote GID. The SQ fills qkey and dqp_dct per request from the UdDest; the
        // device reads only those two fields.
        let mut av = [0u8; wire::MLX5_AV_LEN];
        let mut seg = wire::DatagramSeg::new_unchecked(&mut av[..]);
        seg.set_dqp_dct(remote.qpn, true);
        seg.set_stat_rate_sl((opts.sl & 0x7) << 1);
        seg.set_rlid(remote.lid);
        seg.set_hop_limit(64);
        seg.set_grh_gid_fl(u32::from(opts.gid_index) << 20);
        seg.set_rgid(remote.gid);
        Ok(AddressVector(av))
    }

    fn progress(&mut self) {
        if !self.is_threaded() {
            self.run_until_idle();
        }
    }

    fn async_events(&mut self) -> crate::Result<Option<Vec<crate::AsyncEvent>>> {
        Ok(Some(
            self.take_events().iter().map(|e| e.to_verbs()).collect(),
        ))
    }

    fn inject_fault(&mut self, qp: Option<&SimQp>, fault: crate::Fault) -> crate::Result<()> {
        match (fault, qp) {
            (crate::Fault::QpFatal, Some(q)) => self.fail_qp(q.qpn()),
            (crate::Fault::QpFatal, None) => {
                return Err(crate::Error::InvalidArgument {
                    context: "SimDevice::inject_fault",
                    detail: "QpFatal names no QP (EINVAL): pass the QP".into(),
                })
            }
            (crate::Fault::PortDown(port), _) => {
                self.raise_event(super::AsyncEvent::PortErr { port })
            }
            (crate::Fault::PortUp(port), _) => {
                self.raise_event(super::AsyncEvent::PortActive { port })
            }
        }
        Ok(())
    }
}

impl SimDevice {
    /// Tell the device where the host keeps `cq`'s state, so a CQ error reaches it.
    fn attach_cq(&self, cq: &SimCq) {
        if let Some(c) = self.shared.lock().cqs.get_mut(&cq.cqn()) {
            c.host = Some(Arc::downgrade(cq.shared()));
        }
    }

    /// True when `remote` is a sim device of another (live or not) process.
    fn other_process(&self, remote: &QpEndpoint) -> bool {
        matches!(super::gid_process(&remote.gid), Some(pid) if pid != std::process::id())
    }

    /// A remote endpoint must be one of this device's own: sim devices share no memory, and
    /// a QPN of another device could name an unrelated local QP.
    fn same_device(&self, verb: &'static str, remote: &QpEndpoint) -> crate::Result<()> {
        if remote.gid == self.gid() {
            return Ok(());
        }
        let (them, me) = (
            std::net::Ipv6Addr::from(remote.gid),
            std::net::Ipv6Addr::from(self.gid()),
        );
        let hint = match super::gid_process(&remote.gid) {
            Some(pid) if pid != std::process::id() => format!(
                "the remote endpoint (GID {them}, QPN {:#x}) is a sim device of another \
                 process (pid {pid}; this is pid {}, GID {me}): a software device cannot reach \
                 another process, it has no link. Run both QPs on one SimDevice in one \
                 process, or use an RDMA device between processes",
                remote.qpn,
                std::process::id()
            ),
            Some(_) => format!(
                "the remote endpoint (GID {them}, QPN {:#x}) belongs to another sim device \
                 (this one is GID {me}); a sim device connects only its own QPs: create both \
                 QPs on one SimDevice",
                remote.qpn
            ),
            None => format!(
                "the remote endpoint (GID {them}, QPN {:#x}) is not a sim device's (this one \
                 is GID {me}): a software device cannot reach another device or host; use an \
                 RDMA device for that",
                remote.qpn
            ),
        };
        Err(crate::Error::verb(verb, libc::EINVAL, hint))
    }
}

// The queue types stay the mlx5 provider's own: nothing sim-specific leaks into them.
const _: fn() = || {
    fn is_cq<T: CompletionQueue>() {}
    fn is_qp<T: QueuePair>() {}
    is_cq::<Mlx5Cq<SimDevice>>();
    is_qp::<Mlx5Qp<SimDevice>>();
};
