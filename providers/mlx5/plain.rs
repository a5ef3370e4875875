//! Queue memory in plain host memory, with the caller acting as the device.
//!
//! For tests, benches and `rdma-direct bench`: [`PlainCq`], [`PlainQp`] and [`PlainSrq`]
//! allocate the rings, doorbell records and a BlueFlame area the way `mlx5dv_init_obj` would
//! describe them (a fresh CQ has every `op_own = 0xF0`; an SRQ's entries are linked
//! `0 -> 1 -> ... -> n-1`), hand out the [`DvQp`]/[`DvCq`]/[`DvSrq`] descriptors and an owner
//! that keeps the memory alive, and let the caller play the device: read what the driver
//! wrote (WQEs, dbrec, BlueFlame copies) and write CQEs with the right owner bit
//! ([`PlainCq::push`]). [`PlainQp::complete_sends`] is a minimal device that answers every
//! signaled WQE up to the send dbrec with a REQ CQE, without allocating.
//!
//! Measurements on this memory are "measured on plain memory, not hardware".

use std::alloc::Layout;
use std::sync::Arc;

use super::dv::{DvCq, DvQp, DvSrq};
use crate::mmio;

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

/// A 64-byte CQE, built field by field (device side).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cqe(pub [u8; 64]);

impl Cqe {
    fn base(opcode: u8, qpn: u32, wqe_counter: u16) -> Cqe {
        let mut b = [0u8; 64];
        b[56..60].copy_from_slice(&(qpn & 0x00ff_ffff).to_be_bytes());
        b[60..62].copy_from_slice(&wqe_counter.to_be_bytes());
        b[63] = opcode << 4;
        Cqe(b)
    }
    /// Requester completion of the WQE starting at `wqe_counter` (send WQE opcode at 56).
    pub fn req(qpn: u32, wqe_counter: u16, wqe_opcode: u8, byte_cnt: u32) -> Cqe {
        let mut c = Cqe::base(0, qpn, wqe_counter);
        c.0[56] = wqe_opcode;
        c.0[44..48].copy_from_slice(&byte_cnt.to_be_bytes());
        c
    }
    /// Responder completion (`opcode` 1 WR_IMM, 2 SEND, 3 SEND_IMM); `imm` host order.
    pub fn resp(opcode: u8, qpn: u32, wqe_counter: u16, byte_cnt: u32, imm: u32) -> Cqe {
        let mut c = Cqe::base(opcode, qpn, wqe_counter);
        c.0[44..48].copy_from_slice(&byte_cnt.to_be_bytes());
        c.0[36..40].copy_from_slice(&imm.to_be_bytes());
        c
    }
    /// Error CQE (`opcode` 13 REQ_ERR or 14 RESP_ERR).
    pub fn err(opcode: u8, qpn: u32, wqe_counter: u16, syndrome: u8, vendor: u8) -> Cqe {
        let mut c = Cqe::base(opcode, qpn, wqe_counter);
        c.0[54] = vendor;
        c.0[55] = syndrome;
        c
    }
    /// UD receive: source QP and the GRH flag.
    pub fn with_src(mut self, src_qp: u32, grh: bool) -> Cqe {
        let v = (src_qp & 0x00ff_ffff) | if grh { 1 << 29 } else { 0 };
        self.0[24..28].copy_from_slice(&v.to_be_bytes());
        self
    }
}

/// A CQ in plain memory; the caller writes CQEs.
pub struct PlainCq {
    /// The descriptor for [`super::Mlx5Cq::from_dv`].
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
            mem.write(i * cqe_size as usize + cqe_size as usize - 1, &[0xf0]);
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
    pub fn owner(&self) -> Box<dyn std::any::Any + Send + Sync> {
        Box::new(self.mem.clone())
    }
    /// Write `cqe` at the producer index with the owner bit of its pass: body first, the
    /// `op_own` byte last.
    pub fn push(&mut self, cqe: &Cqe) {
        let size = self.dv.cqe_size as usize;
        let slot = (self.pi & (self.dv.cqe_cnt - 1)) as usize * size + size - 64;
        let owner = ((self.pi & self.dv.cqe_cnt) != 0) as u8;
        self.mem.write(slot, &cqe.0[..63]);
        // The body is visible before the owner byte that validates it.
        crate::barrier::to_device_store_barrier();
        self.mem.write(slot + 63, &[(cqe.0[63] & !1) | owner]);
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
        (i & (self.dv.cqe_cnt - 1)) as usize * size + size - 64
    }
}

/// A QP in plain memory: SQ ring, RQ ring, dbrec, two BlueFlame halves.
pub struct PlainQp {
    /// The descriptor for [`super::Mlx5Qp::from_dv`].
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
        let sq = sq_wqe_cnt as usize * 64;
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
                sq_stride: 64,
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
    pub fn owner(&self) -> Box<dyn std::any::Any + Send + Sync> {
        Box::new(self.mem.clone())
    }
    /// The WQEBB at ring index `idx & (wqe_cnt - 1)`.
    pub fn wqebb(&self, idx: u32) -> Vec<u8> {
        self.mem
            .read((idx & (self.dv.sq_wqe_cnt - 1)) as usize * 64, 64)
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
        let len = (self.dv.bf_size as usize).max(64);
        self.mem
            .read(self.bf_off + h * self.dv.bf_size as usize, len)
    }
    /// A minimal device: walk the WQEs from where it stopped up to the send dbrec and answer
    /// every one with CQ_UPDATE by a REQ CQE in `cq`. Returns how many CQEs it wrote. No
    /// allocation (reads the ring by pointer).
    pub fn complete_sends(&mut self, cq: &mut PlainCq) -> u32 {
        let target = self.mem.be32(self.dbrec_off + 4) & 0xffff;
        let mut n = 0;
        while (self.dev_sq_pi & 0xffff) != target {
            let off = (self.dev_sq_pi & (self.dv.sq_wqe_cnt - 1)) as usize * 64;
            let w0 = self.mem.be32(off);
            let w1 = self.mem.be32(off + 4);
            let fm = self.mem.be32(off + 8) as u8;
            let ds = w1 & 0x3f;
            let opcode = w0 as u8;
            if fm & 0x08 != 0 {
                cq.push(&Cqe::req(self.dv.qpn, (w0 >> 8) as u16, opcode, 0));
                n += 1;
            }
            self.dev_sq_pi = self.dev_sq_pi.wrapping_add(ds.div_ceil(4).max(1));
        }
        n
    }
}

/// An SRQ in plain memory, its entries linked `0 -> 1 -> ... -> n-1`.
pub struct PlainSrq {
    /// The descriptor for [`super::Mlx5Srq::from_dv`].
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
            mem.write(i as usize * stride as usize + 2, &next.to_be_bytes());
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
    pub fn owner(&self) -> Box<dyn std::any::Any + Send + Sync> {
        Box::new(self.mem.clone())
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

/// A UD address handle carrying the 48-byte mlx5 address vector `av` (what the mlx5 and sim
/// providers put in [`crate::providers::AddressHandle`]).
pub fn address_handle(av: [u8; 48]) -> crate::providers::AddressHandle {
    crate::providers::AddressHandle {
        av,
        raw: core::ptr::null_mut(),
        _owner: None,
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
    /// Parse a perftest-style name (`write`, `write_inline`, `send`, `send_inline`, `read`,
    /// `fetch_add`, `cmp_swap`).
    pub fn parse(s: &str) -> Option<BenchOp> {
        Some(match s {
            "write_inline" | "write-inline" => BenchOp::WriteInline,
            "write" => BenchOp::Write,
            "send" => BenchOp::Send,
            "send_inline" | "send-inline" => BenchOp::SendInline,
            "read" => BenchOp::Read,
            "fetch_add" | "fetch-add" | "fa" => BenchOp::FetchAdd,
            "cmp_swap" | "cmp-swap" | "cs" => BenchOp::CompareSwap,
            _ => return None,
        })
    }
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

/// A QP and CQ on plain memory with the caller as the device, for benches: post runs of
/// requests, then let the "device" complete them and poll.
pub struct Loopback {
    /// The queue pair under test.
    pub qp: super::Mlx5Qp,
    /// Its CQ.
    pub cq: super::Mlx5Cq,
    /// Device side of the QP.
    pub dev: PlainQp,
    /// Device side of the CQ.
    pub dcq: PlainCq,
    buf: Vec<u64>,
    out: Vec<crate::providers::Completion>,
}

impl Loopback {
    /// SQ of `sq_wqe_cnt` WQEBBs (power of two), CQ of `2 * sq_wqe_cnt` entries, BlueFlame
    /// halves of 256 bytes, inline up to 256 bytes.
    pub fn new(sq_wqe_cnt: u32) -> Loopback {
        use crate::providers::{QpCaps, QpConfig, QpState, QpType};
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
        let mut cq = unsafe { super::Mlx5Cq::from_dv(dcq.dv, dcq.owner()) }.expect("plain CQ");
        let cfg = QpConfig::new(QpType::Rc);
        // SAFETY: as above.
        let mut qp =
            unsafe { super::Mlx5Qp::from_dv(dev.dv, &cfg, caps, &mut cq, None, None, dev.owner()) }
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
            out: vec![crate::providers::Completion::EMPTY; 64],
        }
    }

    /// The request for `op` of `size` bytes (`size` is 8 for atomics).
    pub fn wr<'a>(
        &self,
        op: BenchOp,
        sge: &'a [crate::providers::Sge; 1],
        inline: &'a [u8],
        id: u64,
    ) -> crate::providers::SendWr<'a> {
        use crate::providers::{SendOp, SendWr};
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

    /// An SGE over the loopback's own buffer.
    pub fn sge(&mut self, size: u32) -> [crate::providers::Sge; 1] {
        [crate::providers::Sge {
            addr: self.buf.as_mut_ptr() as u64,
            length: size.min(8192),
            lkey: 3,
        }]
    }

    /// The device completes everything rung so far (one CQE per signaled WQE) and the CQ is
    /// polled empty. Returns the completions polled.
    pub fn drain(&mut self) -> u32 {
        use crate::providers::CompletionQueue;
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
