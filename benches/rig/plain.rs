//! Queue memory in plain host memory, with the caller acting as the device: the bench and
//! test rig of the mlx5 provider, a crate of its own (`rdma-direct-rig`) that the library does
//! not depend on: `benches/mlx5_hot.rs`, the CLI's `bench` and the mlx5 tests use it, and it
//! uses the providers' public API only.
//!
//! [`PlainCq`], [`PlainQp`] and [`PlainSrq`]
//! allocate the rings, doorbell records and a BlueFlame area the way `mlx5dv_init_obj` would
//! describe them (a fresh CQ has every `op_own = 0xF0`; an SRQ's entries are linked
//! `0 -> 1 -> ... -> n-1`), hand out the [`DvQp`]/[`DvCq`]/[`DvSrq`] descriptors and an owner
//! that keeps the memory alive, and let the caller play the device: read what the driver
//! wrote (WQEs, dbrec, BlueFlame copies) and write CQEs with the right owner bit
//! ([`PlainCq::push`]). [`PlainQp::complete_sends`] is a minimal device that answers every
//! signaled WQE up to the send dbrec with a REQ CQE, without allocating.
//!
//! Every byte the rig writes or reads as the device goes through `rdma_direct_core::wire`: CQEs
//! are emitted by [`CqeRepr::emit`], ctrl segments read through [`CtrlSeg`], offsets and bits
//! by their `MLX5_*` names.
//!
//! Measurements on this memory are "measured on plain memory, not hardware".

pub mod tap;

use std::alloc::Layout;
use std::sync::Arc;

use rdma_direct_core::mmio;
use rdma_direct_core::wire::offset::{cqe64, srq_next};
use rdma_direct_core::wire::{
    Cqe64, CqeOpcode, CqeRepr, CtrlSeg, Syndrome, MLX5_CQE64_LEN, MLX5_CQE_FLAGS_GRH_PRESENT,
    MLX5_CQE_INVALID_OP_OWN, MLX5_CQE_OWNER_MASK, MLX5_CQE_REQ, MLX5_SEND_WQE_BB, MLX5_SND_DBR,
    MLX5_WQE_CTRL_CQ_UPDATE, MLX5_WQE_DS_UNITS, MLX5_WQE_INDEX_MASK,
};
use rdma_direct_providers::mlx5::{
    AddressVector, DvCq, DvQp, DvSrq, Mlx5Cq, Mlx5Dedicated, Mlx5Qp, Mlx5Srq, Owners,
};
use rdma_direct_providers::{
    Completion, CompletionQueue, QpCaps, QpConfig, QpState, QpType, QueuePair, SendOp, SendQueue,
    SendWr, Sge, UdDest,
};

/// The plain-memory "device": every queue's memory is a [`Region`] (the queue holds it
/// alive), and an address handle is only its address vector.
#[derive(Debug)]
pub struct Plain;

impl Owners for Plain {
    type Cq = Arc<Region>;
    type Srq = Arc<Region>;
    type Qp = Arc<Region>;
    type Ah = AddressVector;
    #[inline(always)]
    fn av(ah: &AddressVector) -> &[u8; 48] {
        &ah.0
    }
}

/// One zeroed, aligned allocation, freed on drop. Accessed by raw pointer only.
pub struct Region {
    ptr: *mut u8,
    layout: Layout,
}

// SAFETY: a plain allocation; all access goes through raw pointers (volatile here), and the
// queue types that write it uphold the one-producer / one-consumer discipline.
unsafe impl Send for Region {}
// SAFETY: as above.
unsafe impl Sync for Region {}

impl Region {
    /// `len` zeroed bytes aligned to 4096.
    pub fn new(len: usize) -> Arc<Region> {
        let layout = Layout::from_size_align(len.max(64), 4096).expect("region layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Arc::new(Region { ptr, layout })
    }
    /// Start address.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }
    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.layout.size()
    }
    /// Never empty.
    pub fn is_empty(&self) -> bool {
        false
    }
    /// Copy `len` bytes at `off` out (volatile byte loads). Out-of-range parts read as 0.
    pub fn read(&self, off: usize, len: usize) -> Vec<u8> {
        (off..off + len)
            .map(|i| {
                if i < self.len() {
                    // SAFETY: `i` is inside the allocation.
                    unsafe { mmio::read8(self.ptr.add(i)) }
                } else {
                    0
                }
            })
            .collect()
    }
    /// Read a big-endian u32 at `off` (4-aligned, inside).
    pub fn be32(&self, off: usize) -> u32 {
        assert!(off % 4 == 0 && off + 4 <= self.len(), "be32 at {off}");
        // SAFETY: checked just above.
        u32::from_be(unsafe { mmio::read32(self.ptr.add(off) as *const u32) })
    }
    /// Write bytes at `off` (volatile byte stores; out-of-range bytes are dropped).
    pub fn write(&self, off: usize, bytes: &[u8]) {
        for (i, b) in bytes.iter().enumerate() {
            if off + i < self.len() {
                // SAFETY: inside the allocation.
                unsafe { core::ptr::write_volatile(self.ptr.add(off + i), *b) };
            }
        }
    }
    /// Fill with `byte` (to show which bytes a writer leaves alone).
    pub fn fill(&self, off: usize, len: usize, byte: u8) {
        for i in off..(off + len).min(self.len()) {
            // SAFETY: inside the allocation.
            unsafe { core::ptr::write_volatile(self.ptr.add(i), byte) };
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

/// A 64-byte CQE as the device writes it (owner bit 0; [`PlainCq::push`] sets it), built
/// with [`CqeRepr::emit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cqe(pub [u8; MLX5_CQE64_LEN]);

impl Cqe {
    fn emit(r: CqeRepr) -> Cqe {
        let mut b = [0u8; MLX5_CQE64_LEN];
        r.emit(&mut Cqe64::new_unchecked(&mut b[..]))
            .expect("a CQE-sized buffer");
        Cqe(b)
    }
    /// Requester completion of the WQE starting at `wqe_counter`, for a WQE of `wqe_opcode`.
    pub fn req(qpn: u32, wqe_counter: u16, wqe_opcode: u8, byte_cnt: u32) -> Cqe {
        Cqe::emit(CqeRepr {
            opcode: CqeOpcode::from(MLX5_CQE_REQ),
            qpn,
            wqe_counter,
            s_wqe_opcode: wqe_opcode,
            byte_cnt,
            ..CqeRepr::default()
        })
    }
    /// Responder completion (`opcode` one of `MLX5_CQE_RESP_*`); `imm` host order.
    pub fn resp(opcode: u8, qpn: u32, wqe_counter: u16, byte_cnt: u32, imm: u32) -> Cqe {
        Cqe::emit(CqeRepr {
            opcode: CqeOpcode::from(opcode),
            qpn,
            wqe_counter,
            byte_cnt,
            imm_inval_pkey: imm,
            ..CqeRepr::default()
        })
    }
    /// Error CQE (`opcode` `MLX5_CQE_REQ_ERR` or `MLX5_CQE_RESP_ERR`).
    pub fn err(opcode: u8, qpn: u32, wqe_counter: u16, syndrome: u8, vendor: u8) -> Cqe {
        Cqe::emit(CqeRepr {
            opcode: CqeOpcode::from(opcode),
            qpn,
            wqe_counter,
            syndrome: Syndrome::from(syndrome),
            vendor_syndrome: vendor,
            ..CqeRepr::default()
        })
    }
    /// UD receive: source QP and the GRH flag.
    pub fn with_src(mut self, src_qp: u32, grh: bool) -> Cqe {
        let flags = if grh { MLX5_CQE_FLAGS_GRH_PRESENT } else { 0 };
        Cqe64::new_unchecked(&mut self.0[..]).set_flags_rqpn(flags, src_qp);
        self
    }
}

/// A CQ in plain memory; the caller writes CQEs.
pub struct PlainCq {
    /// The descriptor for [`Mlx5Cq::from_dv`].
    pub dv: DvCq,
    /// Ring, then the doorbell record at `ring_len`.
    pub mem: Arc<Region>,
    /// Device producer index (free-running).
    pub pi: u32,
}

impl PlainCq {
    /// `cqe_cnt` (a power of two) CQEs of `cqe_size` (64 or 128) bytes, all INVALID.
    pub fn new(cqn: u32, cqe_cnt: u32, cqe_size: u32) -> PlainCq {
        let ring = cqe_cnt as usize * cqe_size as usize;
        let mem = Region::new(ring + 64);
        for i in 0..cqe_cnt as usize {
            let op_own = i * cqe_size as usize + cqe_size as usize - MLX5_CQE64_LEN + cqe64::OP_OWN;
            mem.write(op_own, &[MLX5_CQE_INVALID_OP_OWN]);
        }
        PlainCq {
            dv: DvCq {
                cqn,
                buf: mem.ptr(),
                cqe_cnt,
                cqe_size,
                dbrec: mem.ptr().wrapping_add(ring) as *mut u32,
            },
            mem,
            pi: 0,
        }
    }
    /// An owner for `from_dv` (keeps the memory alive).
    pub fn owner(&self) -> Arc<Region> {
        self.mem.clone()
    }
    /// Write `cqe` at the producer index with the owner bit of its pass: body first, the
    /// `op_own` byte last.
    pub fn push(&mut self, cqe: &Cqe) {
        let size = self.dv.cqe_size as usize;
        let slot = (self.pi & (self.dv.cqe_cnt - 1)) as usize * size + size - MLX5_CQE64_LEN;
        let owner = ((self.pi & self.dv.cqe_cnt) != 0) as u8;
        self.mem.write(slot, &cqe.0[..cqe64::OP_OWN]);
        // The body is visible before the owner byte that validates it.
        rdma_direct_core::barrier::to_device_store_barrier();
        let op_own = (cqe.0[cqe64::OP_OWN] & !MLX5_CQE_OWNER_MASK) | owner;
        self.mem.write(slot + cqe64::OP_OWN, &[op_own]);
        self.pi = self.pi.wrapping_add(1);
    }
    /// The consumer index the driver last wrote to `dbrec[0]`.
    pub fn dbrec_ci(&self) -> u32 {
        self.mem
            .be32(self.dv.cqe_cnt as usize * self.dv.cqe_size as usize)
    }
    /// Offset of the 64-byte CQE of position `i` (for scatter-to-CQE tests).
    pub fn cqe_offset(&self, i: u32) -> usize {
        let size = self.dv.cqe_size as usize;
        (i & (self.dv.cqe_cnt - 1)) as usize * size + size - MLX5_CQE64_LEN
    }
}

/// A QP in plain memory: SQ ring, RQ ring, dbrec, two BlueFlame halves.
pub struct PlainQp {
    /// The descriptor for [`Mlx5Qp::from_dv`].
    pub dv: DvQp,
    /// All of the QP's memory.
    pub mem: Arc<Region>,
    /// Offsets of the parts in `mem`.
    pub rq_off: usize,
    /// Doorbell record offset.
    pub dbrec_off: usize,
    /// BlueFlame area offset (`2 * bf_size` bytes).
    pub bf_off: usize,
    /// Device side: the next send WQEBB it has not looked at (free-running).
    pub dev_sq_pi: u32,
}

impl PlainQp {
    /// `sq_wqe_cnt` WQEBBs, `rq_wqe_cnt` receive slots of `rq_stride` bytes (0 for none),
    /// BlueFlame halves of `bf_size` bytes (0 = no BlueFlame, and no register: the 8-byte
    /// doorbell still goes to a register area of 64 bytes).
    pub fn new(
        qpn: u32,
        sq_wqe_cnt: u32,
        rq_wqe_cnt: u32,
        rq_stride: u32,
        bf_size: u32,
    ) -> PlainQp {
        let sq = sq_wqe_cnt as usize * MLX5_SEND_WQE_BB;
        let rq = rq_wqe_cnt as usize * rq_stride as usize;
        let rq_off = sq;
        let dbrec_off = (sq + rq + 63) & !63;
        let bf_off = dbrec_off + 64;
        let bf_len = (2 * bf_size as usize).max(64);
        let mem = Region::new(bf_off + bf_len);
        let p = mem.ptr();
        PlainQp {
            dv: DvQp {
                qpn,
                sq_buf: p,
                sq_wqe_cnt,
                sq_stride: MLX5_SEND_WQE_BB as u32,
                rq_buf: if rq_wqe_cnt == 0 {
                    core::ptr::null_mut()
                } else {
                    p.wrapping_add(rq_off)
                },
                rq_wqe_cnt,
                rq_stride,
                dbrec: p.wrapping_add(dbrec_off) as *mut u32,
                bf_reg: p.wrapping_add(bf_off),
                bf_size,
            },
            mem,
            rq_off,
            dbrec_off,
            bf_off,
            dev_sq_pi: 0,
        }
    }
    /// An owner for `from_dv`.
    pub fn owner(&self) -> Arc<Region> {
        self.mem.clone()
    }
    /// The WQEBB at ring index `idx & (wqe_cnt - 1)`.
    pub fn wqebb(&self, idx: u32) -> Vec<u8> {
        self.mem.read(
            (idx & (self.dv.sq_wqe_cnt - 1)) as usize * MLX5_SEND_WQE_BB,
            MLX5_SEND_WQE_BB,
        )
    }
    /// `n` WQEBBs starting at index `idx`, following the ring wrap.
    pub fn wqe(&self, idx: u32, n: u32) -> Vec<u8> {
        (0..n).flat_map(|k| self.wqebb(idx + k)).collect()
    }
    /// Receive slot `idx`.
    pub fn rq_slot(&self, idx: u32) -> Vec<u8> {
        let s = self.dv.rq_stride as usize;
        self.mem.read(
            self.rq_off + (idx & (self.dv.rq_wqe_cnt - 1)) as usize * s,
            s,
        )
    }
    /// dbrec `[receive, send]`, host order.
    pub fn dbrec(&self) -> [u32; 2] {
        [
            self.mem.be32(self.dbrec_off),
            self.mem.be32(self.dbrec_off + 4),
        ]
    }
    /// BlueFlame half `h` (0 or 1), `bf_size` bytes (64 with no BlueFlame).
    pub fn bf(&self, h: usize) -> Vec<u8> {
        let len = (self.dv.bf_size as usize).max(MLX5_SEND_WQE_BB);
        self.mem
            .read(self.bf_off + h * self.dv.bf_size as usize, len)
    }
    /// A minimal device: walk the WQEs from where it stopped up to the send dbrec and answer
    /// every one with CQ_UPDATE by a REQ CQE in `cq`. Returns how many CQEs it wrote. No
    /// allocation (reads the ring by pointer).
    pub fn complete_sends(&mut self, cq: &mut PlainCq) -> u32 {
        let target = self.mem.be32(self.dbrec_off + 4 * MLX5_SND_DBR) & MLX5_WQE_INDEX_MASK;
        let mut n = 0;
        while (self.dev_sq_pi & MLX5_WQE_INDEX_MASK) != target {
            let off = (self.dev_sq_pi & (self.dv.sq_wqe_cnt - 1)) as usize * MLX5_SEND_WQE_BB;
            let mut seg = [0u8; MLX5_WQE_DS_UNITS];
            for (k, w) in seg.chunks_exact_mut(4).enumerate() {
                w.copy_from_slice(&self.mem.be32(off + 4 * k).to_be_bytes());
            }
            let ctrl = CtrlSeg::new_unchecked(&seg[..]);
            if ctrl.fm_ce_se() & MLX5_WQE_CTRL_CQ_UPDATE != 0 {
                let op = u8::from(ctrl.opcode());
                cq.push(&Cqe::req(self.dv.qpn, ctrl.wqe_idx(), op, 0));
                n += 1;
            }
            let wqebbs = u32::from(ctrl.ds()).div_ceil(4).max(1);
            self.dev_sq_pi = self.dev_sq_pi.wrapping_add(wqebbs);
        }
        n
    }
}

/// An SRQ in plain memory, its entries linked `0 -> 1 -> ... -> n-1`.
pub struct PlainSrq {
    /// The descriptor for [`rdma_direct_providers::mlx5::Mlx5Srq::from_dv`].
    pub dv: DvSrq,
    /// Ring, then the dbrec.
    pub mem: Arc<Region>,
}

impl PlainSrq {
    /// `wqe_cnt` entries of `stride` bytes.
    pub fn new(srqn: u32, wqe_cnt: u32, stride: u32) -> PlainSrq {
        let ring = wqe_cnt as usize * stride as usize;
        let mem = Region::new(ring + 64);
        for i in 0..wqe_cnt {
            let next = ((i + 1) % wqe_cnt) as u16;
            let at = i as usize * stride as usize + srq_next::NEXT_WQE_INDEX;
            mem.write(at, &next.to_be_bytes());
        }
        PlainSrq {
            dv: DvSrq {
                srqn,
                buf: mem.ptr(),
                wqe_cnt,
                stride,
                head: 0,
                tail: wqe_cnt - 1,
                dbrec: mem.ptr().wrapping_add(ring) as *mut u32,
            },
            mem,
        }
    }
    /// An owner for `from_dv`.
    pub fn owner(&self) -> Arc<Region> {
        self.mem.clone()
    }
    /// Entry `idx`.
    pub fn entry(&self, idx: u32) -> Vec<u8> {
        let s = self.dv.stride as usize;
        self.mem.read(idx as usize * s, s)
    }
    /// The receive counter in `dbrec[0]`.
    pub fn dbrec(&self) -> u32 {
        self.mem
            .be32(self.dv.wqe_cnt as usize * self.dv.stride as usize)
    }
}

/// The operation a [`Loopback`] posts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchOp {
    /// RDMA WRITE with the payload inline.
    WriteInline,
    /// RDMA WRITE from one SGE.
    Write,
    /// SEND from one SGE.
    Send,
    /// SEND with the payload inline.
    SendInline,
    /// RDMA READ into one SGE.
    Read,
    /// Fetch-and-add (8 bytes).
    FetchAdd,
    /// Compare-and-swap (8 bytes).
    CompareSwap,
}

impl BenchOp {
    /// Name for tables.
    pub fn name(self) -> &'static str {
        match self {
            BenchOp::WriteInline => "WRITE inline",
            BenchOp::Write => "WRITE",
            BenchOp::Send => "SEND",
            BenchOp::SendInline => "SEND inline",
            BenchOp::Read => "READ",
            BenchOp::FetchAdd => "FETCH_ADD",
            BenchOp::CompareSwap => "CMP_SWAP",
        }
    }
}

/// [`Loopback`] with its QP and CQ as one [`Mlx5Dedicated`].
pub struct DedicatedLoopback {
    /// The QP and its CQ under test.
    pub ded: Mlx5Dedicated<Plain>,
    /// Device side of the QP.
    pub dev: PlainQp,
    /// Device side of the CQ.
    pub dcq: PlainCq,
    _buf: Vec<u64>,
}

/// A QP and CQ on plain memory with the caller as the device, for benches: post runs of
/// requests, then let the "device" complete them and poll.
pub struct Loopback {
    /// The queue pair under test.
    pub qp: Mlx5Qp<Plain>,
    /// Its CQ.
    pub cq: Mlx5Cq<Plain>,
    /// Device side of the QP.
    pub dev: PlainQp,
    /// Device side of the CQ.
    pub dcq: PlainCq,
    buf: Vec<u64>,
    out: Vec<Completion>,
}

/// The address vector of [`ud_dest`]: plain memory sends nothing, so any bytes do.
static PLAIN_AV: AddressVector = AddressVector([0; rdma_direct_core::wire::MLX5_AV_LEN]);

/// A UD destination for requests posted on a [`Loopback::ud`] queue (QPN 0x4343, the
/// default Q_Key 0x11111111).
pub fn ud_dest() -> UdDest<'static, AddressVector> {
    UdDest {
        ah: &PLAIN_AV,
        remote_qpn: 0x4343,
        remote_qkey: 0x1111_1111,
    }
}

impl Loopback {
    /// SQ of `sq_wqe_cnt` WQEBBs (power of two), CQ of `2 * sq_wqe_cnt` entries, BlueFlame
    /// halves of 256 bytes, inline up to 256 bytes; an RC QP.
    pub fn new(sq_wqe_cnt: u32) -> Loopback {
        Loopback::of_type(sq_wqe_cnt, QpType::Rc)
    }

    /// As [`Loopback::new`], a UD QP: its SENDs name [`ud_dest`].
    pub fn ud(sq_wqe_cnt: u32) -> Loopback {
        Loopback::of_type(sq_wqe_cnt, QpType::Ud)
    }

    fn of_type(sq_wqe_cnt: u32, qp_type: QpType) -> Loopback {
        let caps = QpCaps {
            max_send_wr: sq_wqe_cnt,
            max_recv_wr: 16,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 256,
        };
        let dev = PlainQp::new(0x4242, sq_wqe_cnt, 16, 16, 256);
        let dcq = PlainCq::new(1, 2 * sq_wqe_cnt, 64);
        // SAFETY: the plain memory is kept alive by the owners and used only by these objects
        // and by this struct acting as the device.
        let mut cq = unsafe { Mlx5Cq::from_dv(dcq.dv, dcq.owner()) }.expect("plain CQ");
        let cfg = QpConfig::new(qp_type);
        // SAFETY: as above.
        let mut qp =
            unsafe { Mlx5Qp::from_dv(dev.dv, &cfg, caps, &mut cq, None, None, dev.owner()) }
                .expect("plain QP");
        qp.set_state(QpState::Init);
        qp.set_state(QpState::Rtr);
        qp.set_state(QpState::Rts);
        Loopback {
            qp,
            cq,
            dev,
            dcq,
            buf: vec![0u64; 1024],
            out: vec![Completion::EMPTY; 64],
        }
    }

    /// The request for `op` of `size` bytes (`size` is 8 for atomics).
    pub fn wr<'a>(
        &self,
        op: BenchOp,
        sge: &'a [Sge; 1],
        inline: &'a [u8],
        id: u64,
    ) -> SendWr<'a, AddressVector> {
        match op {
            BenchOp::WriteInline => SendWr::write(id, &[], 0x10_0000, 7).inline(inline),
            BenchOp::Write => SendWr::write(id, sge, 0x10_0000, 7),
            BenchOp::Send => SendWr::send(id, sge),
            BenchOp::SendInline => SendWr::send(id, &[]).inline(inline),
            BenchOp::Read => SendWr::read(id, sge, 0x10_0000, 7),
            BenchOp::FetchAdd => SendWr::new(
                id,
                SendOp::FetchAdd {
                    raddr: 0x10_0000,
                    rkey: 7,
                    add: 1,
                },
                &sge[..],
            ),
            BenchOp::CompareSwap => SendWr::new(
                id,
                SendOp::CompareSwap {
                    raddr: 0x10_0000,
                    rkey: 7,
                    compare: 0,
                    swap: 1,
                },
                &sge[..],
            ),
        }
    }

    /// The same QP and CQ owned together as an [`Mlx5Dedicated`] (the CQ serves this QP
    /// alone), with the device sides; the buffer comes along so SGEs made by [`Self::sge`]
    /// stay valid.
    pub fn into_dedicated(self) -> DedicatedLoopback {
        let ded = Mlx5Dedicated::new(self.qp, self.cq).expect("the loopback CQ serves one QP");
        DedicatedLoopback {
            ded,
            dev: self.dev,
            dcq: self.dcq,
            _buf: self.buf,
        }
    }

    /// An SGE over the loopback's own buffer.
    pub fn sge(&mut self, size: u32) -> [Sge; 1] {
        [Sge {
            addr: self.buf.as_mut_ptr() as u64,
            length: size.min(8192),
            lkey: 3,
        }]
    }

    /// The device completes everything rung so far (one CQE per signaled WQE) and the CQ is
    /// polled empty. Returns the completions polled.
    pub fn drain(&mut self) -> u32 {
        self.dev.complete_sends(&mut self.dcq);
        let mut total = 0;
        loop {
            let n = self.cq.poll(&mut self.out);
            if n == 0 {
                return total;
            }
            total += n as u32;
        }
    }
}

/// The caps the mlx5 tests give their QPs: 16 requests each way, 2 SGEs, 64 bytes inline.
pub fn test_caps() -> QpCaps {
    QpCaps {
        max_send_wr: 16,
        max_recv_wr: 16,
        max_send_sge: 2,
        max_recv_sge: 2,
        max_inline_data: 64,
    }
}

/// The SGE the mlx5 tests post (8 bytes at 0x1000, lkey 1: plain memory checks no key).
pub const TEST_SGE: [Sge; 1] = [Sge {
    addr: 0x1000,
    length: 8,
    lkey: 1,
}];

/// One poll of up to 16 completions, as a vector.
pub fn poll_all(cq: &mut Mlx5Cq<Plain>) -> Vec<Completion> {
    let mut out = [Completion::EMPTY; 16];
    let n = cq.poll(&mut out);
    out[..n].to_vec()
}

/// [`test_qp`] whose receives complete into `cq` too.
pub fn qp_on(
    cq: &mut Mlx5Cq<Plain>,
    qpn: u32,
    srq: Option<&mut Mlx5Srq<Plain>>,
) -> (Mlx5Qp<Plain>, PlainQp) {
    test_qp(cq, None, qpn, srq)
}

/// An mlx5 CQ (CQN 3) of `cqe_cnt` CQEs of `cqe_size` bytes over plain memory, with its device
/// side.
pub fn test_cq(cqe_cnt: u32, cqe_size: u32) -> (Mlx5Cq<Plain>, PlainCq) {
    let d = PlainCq::new(3, cqe_cnt, cqe_size);
    // SAFETY: plain memory kept alive by the owner; used only by this CQ and its device side.
    let cq = unsafe { Mlx5Cq::<Plain>::from_dv(d.dv, d.owner()) }.expect("plain CQ");
    (cq, d)
}

/// An RC QP `qpn` in RTS over plain memory ([`test_caps`]; a 16-WQEBB SQ, an 8-entry RQ unless
/// it receives from `srq`): sends complete into `cq`, receives into `recv_cq` (`None`: `cq`
/// too). With its device side.
pub fn test_qp(
    cq: &mut Mlx5Cq<Plain>,
    recv_cq: Option<&mut Mlx5Cq<Plain>>,
    qpn: u32,
    srq: Option<&mut Mlx5Srq<Plain>>,
) -> (Mlx5Qp<Plain>, PlainQp) {
    let d = PlainQp::new(qpn, 16, if srq.is_some() { 0 } else { 8 }, 32, 0);
    let cfg = QpConfig::new(QpType::Rc);
    // SAFETY: as in `test_cq`.
    let mut qp =
        unsafe { Mlx5Qp::<Plain>::from_dv(d.dv, &cfg, test_caps(), cq, recv_cq, srq, d.owner()) }
            .expect("plain QP");
    for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
        qp.set_state(s);
    }
    (qp, d)
}

/// A QP `qpn` of `qp_type` in RTS over plain memory with `caps`, for the send queue's tests:
/// a `sq_wqe_cnt`-WQEBB SQ filled with 0xa5 (unwritten bytes show), a 16-entry RQ, BlueFlame
/// halves of `bf_size` bytes; sends and receives complete into `cq`. With its device side.
pub fn send_qp(
    cq: &mut Mlx5Cq<Plain>,
    qpn: u32,
    qp_type: QpType,
    sq_wqe_cnt: u32,
    bf_size: u32,
    caps: QpCaps,
) -> (Mlx5Qp<Plain>, PlainQp) {
    let d = PlainQp::new(qpn, sq_wqe_cnt, 16, 32, bf_size);
    d.mem.fill(0, sq_wqe_cnt as usize * MLX5_SEND_WQE_BB, 0xa5);
    let cfg = QpConfig {
        qp_type,
        caps,
        sq_sig_all: false,
    };
    // SAFETY: as in `test_cq`.
    let mut qp = unsafe { Mlx5Qp::<Plain>::from_dv(d.dv, &cfg, caps, cq, None, None, d.owner()) }
        .expect("plain QP");
    for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
        qp.set_state(s);
    }
    (qp, d)
}

/// A seeded xorshift generator for the tests' random walks (the same seed, the same walk).
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 bits (the seed must not be 0).
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// A value in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// What a poster and the device can observe of a send queue and its CQ, for holding two
/// equal: the ring's first `wqebbs` WQEBBs and both BlueFlame halves, the dbrec, and the
/// queue's producer index, staged count, free slots and posting budget, and the CQ's
/// reservations.
pub type SqSeen = (Vec<u8>, [u32; 2], u32, u32, u32, u32, u32);

/// See [`SqSeen`].
pub fn sq_seen(dev: &PlainQp, qp: &mut Mlx5Qp<Plain>, cq: &Mlx5Cq<Plain>, wqebbs: u32) -> SqSeen {
    let mut bytes = dev.mem.read(0, wqebbs as usize * MLX5_SEND_WQE_BB);
    bytes.extend(dev.bf(0));
    bytes.extend(dev.bf(1));
    let sq = qp.sq();
    let (pi, staged, free, budget) = (sq.pi(), sq.staged(), sq.free_slots(), sq.cq_budget());
    (bytes, dev.dbrec(), pi, staged, free, budget, cq.reserved())
}
