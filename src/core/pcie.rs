//! A PCIe link model: what a NIC's transactions for a run of messages cost on the link, and the
//! message rate the link allows.
//!
//! Contract:
//! - [`Counts`] are the transactions a ConnectX-style NIC makes for `messages` requests, as
//!   the caller counted them from what a driver actually wrote (doorbells rung, BlueFlame
//!   chunks copied, WQEBBs posted, inline or gathered payloads, signaled requests). This
//!   module counts nothing itself: it turns counts into bytes on the wire.
//! - [`Link`] is one link (generation, width, MPS, MRRS, read completion size, address width),
//!   [`Link::preset`] names the usual ones (`gen3x8` ... `gen5x16`) and [`Link::parse`] takes
//!   overrides (`gen4x16,mps=512,mrrs=4096,rcb=128,addr32`); both return an error message
//!   naming the part that is wrong, never panic.
//! - [`Link::requester`] and [`Link::responder`] give [`Traffic`]: bytes per message in each
//!   direction (down: host to device, up: device to host) on the requester's and on the
//!   responder's link; [`Traffic::rate`] is the messages per second the busier direction
//!   allows. Pure arithmetic: no I/O, no allocation.
//!
//! ## The numbers and where they come from
//!
//! PCIe facts (the base specification, any generation since 3.0):
//! - Gen3 signals 8 GT/s per lane, Gen4 16, Gen5 32, all with 128b/130b line coding, so a lane
//!   carries `GT/s × 128/130 / 8` bytes per second in each direction (the link is full
//!   duplex: the two directions are separate budgets).
//! - Every transaction-layer packet (TLP) pays, besides its payload: a header of 3 doublewords
//!   (12 B) for a completion or a request with a 32-bit address, 4 doublewords (16 B) for a
//!   request with a 64-bit address; the data link layer's 2-byte sequence number and 4-byte
//!   LCRC; and the physical layer's framing, 2 bytes per TLP (the Gen3 STP token; Gen1/2's
//!   start and end symbols are about the same). So a memory write with a 64-bit address costs
//!   24 B plus its payload, a read request 24 B, a read completion 20 B plus its data.
//! - Writes are posted (no answer); reads are non-posted: a read request travels one way, its
//!   data returns in completions the other way. A write's payload is at most MPS (max
//!   payload size, commonly 256 B) per TLP; a read request asks for at most MRRS (max read
//!   request size, commonly 512 B); the host answers a read in completions that end on its
//!   read completion boundary (RCB, 64 B on most host bridges; some coalesce up to MPS).
//!
//! The accounting follows Neugebauer et al., "Understanding PCIe performance for end host
//! networking" (SIGCOMM 2018), who model a NIC's DMA this way (per-TLP overhead of framing,
//! link layer and header; MPS and MRRS splitting; completions at 64 B) and show that the
//! model tracks measured throughput closely for transfers of 64 B and up. Their model (and this
//! one) leaves out data-link packets (acknowledgements and flow-control credit updates, a few
//! percent of the link), the IOMMU, and latency: this is a bandwidth bound, an upper limit on
//! the message rate, not a prediction of it.
//!
//! What a NIC moves per request (requester side), as [`Counts`] records it:
//! - MMIO from the CPU (down): one 8-byte write per doorbell rung; one 64-byte write per
//!   BlueFlame chunk (a write-combined 64-byte line arrives as one TLP).
//! - WQE fetch: a read request per contiguous run of WQEBBs the NIC did not get by BlueFlame
//!   (up), their 64-byte blocks returned in completions (down).
//! - Payload fetch for a gathered (not inline) SGE: read requests (up) and completions (down).
//! - CQE writes (up): one per signaled request (64 or 128 B).
//! - Doorbell-record updates are host-memory stores the NIC reads only when it recovers a lost
//!   doorbell: counted, but no link bytes.
//!
//! On the responder's link: payload writes (up), receive-WQE reads for SENDs (a request up,
//! a completion down), responder CQE writes (up).
//!
//! Reads of one kind are assumed to have one size within a run (true for one point of a
//! sweep): a read's split into MRRS requests and RCB completions is computed from the average.

/// Bytes of physical-layer framing per TLP (Gen3+ STP token).
pub const FRAMING: u32 = 2;
/// Data-link-layer bytes per TLP: 2-byte sequence number, 4-byte LCRC.
pub const DLL: u32 = 6;
/// TLP header with a 64-bit address (4 DW).
pub const HDR_ADDR64: u32 = 16;
/// TLP header with a 32-bit address, and every completion header (3 DW).
pub const HDR_3DW: u32 = 12;
/// A doorbell write's payload.
pub const DOORBELL_BYTES: u32 = 8;
/// A BlueFlame chunk (one write-combined line).
pub const BF_CHUNK: u32 = 64;
/// A WQE basic block.
pub const WQEBB: u32 = 64;

/// Transactions counted for `messages` requests (totals, not per message).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub messages: u64,
    /// 8-byte MMIO doorbell writes.
    pub doorbells: u64,
    /// 64-byte MMIO BlueFlame chunks.
    pub bf_chunks: u64,
    /// Send doorbell-record updates (host memory; no link bytes).
    pub dbrec_updates: u64,
    /// WQE fetches (contiguous runs of WQEBBs) and the WQEBBs they read.
    pub wqe_reads: u64,
    pub wqe_read_bbs: u64,
    /// Payload fetches (gathered SGEs) and their bytes.
    pub payload_reads: u64,
    pub payload_read_bytes: u64,
    /// Requester CQE writes and the CQE size (64 or 128).
    pub cqe_writes: u64,
    pub cqe_size: u32,
    /// Responder: payload writes and their bytes.
    pub resp_writes: u64,
    pub resp_write_bytes: u64,
    /// Responder: receive-WQE reads and their bytes.
    pub recv_wqe_reads: u64,
    pub recv_wqe_bytes: u64,
    /// Responder CQE writes (SEND, WRITE with immediate).
    pub resp_cqe_writes: u64,
}

impl Counts {
    /// `x / messages` (0 for no messages).
    pub fn per_message(&self, x: u64) -> f64 {
        if self.messages == 0 {
            0.0
        } else {
            x as f64 / self.messages as f64
        }
    }
}

/// Bytes per message in each direction of one link.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Traffic {
    /// Host to device (MMIO writes, read completions).
    pub down: f64,
    /// Device to host (DMA writes, read requests).
    pub up: f64,
}

impl Traffic {
    /// Messages per second the busier direction allows (infinite with no traffic).
    pub fn rate(&self, link: &Link) -> f64 {
        let worst = self.down.max(self.up);
        if worst <= 0.0 {
            f64::INFINITY
        } else {
            link.bytes_per_sec() / worst
        }
    }
    /// "down" or "up": the direction that sets [`Self::rate`].
    pub fn busier(&self) -> &'static str {
        if self.down >= self.up {
            "down"
        } else {
            "up"
        }
    }
}

/// One PCIe link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    /// 3, 4 or 5.
    pub gen: u32,
    /// Lanes (1, 2, 4, 8, 16).
    pub lanes: u32,
    /// Max payload size of a write TLP.
    pub mps: u32,
    /// Max read request size.
    pub mrrs: u32,
    /// Size of the host's read completions (its read completion boundary).
    pub rcb: u32,
    /// Requests carry 64-bit addresses (4-DW headers).
    pub addr64: bool,
}

impl Link {
    /// `genNxW` with MPS 256, MRRS 512, completions of 64 B, 64-bit addresses.
    pub fn preset(name: &str) -> Result<Link, String> {
        let bad = || {
            format!(
                "PCIe link {name:?}: expected genNxW with N 3, 4 or 5 and W 1, 2, 4, 8 or 16 \
                 (e.g. gen3x8, gen4x16)"
            )
        };
        let rest = name.strip_prefix("gen").ok_or_else(bad)?;
        let (g, w) = rest.split_once('x').ok_or_else(bad)?;
        let gen: u32 = g.parse().map_err(|_| bad())?;
        let lanes: u32 = w.parse().map_err(|_| bad())?;
        if !(3..=5).contains(&gen) || ![1, 2, 4, 8, 16].contains(&lanes) {
            return Err(bad());
        }
        Ok(Link {
            gen,
            lanes,
            mps: 256,
            mrrs: 512,
            rcb: 64,
            addr64: true,
        })
    }

    /// A preset with overrides: `gen4x16,mps=512,mrrs=4096,rcb=128,addr32`.
    pub fn parse(spec: &str) -> Result<Link, String> {
        let mut parts = spec.split(',');
        let mut l = Link::preset(parts.next().unwrap_or_default())?;
        for p in parts {
            if p == "addr32" {
                l.addr64 = false;
                continue;
            }
            let (k, v) = p.split_once('=').ok_or_else(|| {
                format!("PCIe link {spec:?}: {p:?} is not key=value (mps, mrrs, rcb) or addr32")
            })?;
            let v: u32 = v
                .parse()
                .ok()
                .filter(|v: &u32| v.is_power_of_two() && (64..=4096).contains(v))
                .ok_or_else(|| {
                    format!("PCIe link {spec:?}: {k} must be a power of two from 64 to 4096")
                })?;
            match k {
                "mps" => l.mps = v,
                "mrrs" => l.mrrs = v,
                "rcb" => l.rcb = v,
                _ => return Err(format!("PCIe link {spec:?}: unknown key {k:?}")),
            }
        }
        Ok(l)
    }

    /// `gen3x8` style name (overrides not shown).
    pub fn name(&self) -> String {
        format!("gen{}x{}", self.gen, self.lanes)
    }

    /// Bytes per second in one direction after line coding.
    pub fn bytes_per_sec(&self) -> f64 {
        let gts = match self.gen {
            3 => 8.0,
            4 => 16.0,
            _ => 32.0,
        };
        gts * 1e9 * f64::from(self.lanes) * 128.0 / 130.0 / 8.0
    }

    /// Overhead of a request TLP (memory write or read request).
    pub fn request_overhead(&self) -> u32 {
        FRAMING + DLL + if self.addr64 { HDR_ADDR64 } else { HDR_3DW }
    }

    /// Overhead of a completion TLP.
    pub fn completion_overhead(&self) -> u32 {
        FRAMING + DLL + HDR_3DW
    }

    /// Link bytes of `n` writes carrying `bytes` in total, each split at MPS.
    fn writes(&self, n: u64, bytes: u64) -> f64 {
        if n == 0 {
            return 0.0;
        }
        let each = (bytes as f64 / n as f64).ceil() as u64;
        let tlps = n * each.div_ceil(u64::from(self.mps)).max(1);
        (tlps * u64::from(self.request_overhead()) + bytes) as f64
    }

    /// (up, down) link bytes of `n` reads of `bytes` in total: requests of at most MRRS up,
    /// completions of RCB down.
    fn reads(&self, n: u64, bytes: u64) -> (f64, f64) {
        if n == 0 {
            return (0.0, 0.0);
        }
        let each = (bytes as f64 / n as f64).ceil() as u64;
        let reqs = n * each.div_ceil(u64::from(self.mrrs)).max(1);
        let cpls = n * each.div_ceil(u64::from(self.rcb)).max(1);
        (
            (reqs * u64::from(self.request_overhead())) as f64,
            (cpls * u64::from(self.completion_overhead()) + bytes) as f64,
        )
    }

    /// Bytes per message on the requester's link.
    pub fn requester(&self, c: &Counts) -> Traffic {
        let mmio = self.writes(c.doorbells, c.doorbells * u64::from(DOORBELL_BYTES))
            + self.writes(c.bf_chunks, c.bf_chunks * u64::from(BF_CHUNK));
        let (wq_up, wq_down) = self.reads(c.wqe_reads, c.wqe_read_bbs * u64::from(WQEBB));
        let (pl_up, pl_down) = self.reads(c.payload_reads, c.payload_read_bytes);
        let cqe = self.writes(c.cqe_writes, c.cqe_writes * u64::from(c.cqe_size));
        per_message(c, mmio + wq_down + pl_down, wq_up + pl_up + cqe)
    }

    /// Bytes per message on the responder's link.
    pub fn responder(&self, c: &Counts) -> Traffic {
        let data = self.writes(c.resp_writes, c.resp_write_bytes);
        let (rq_up, rq_down) = self.reads(c.recv_wqe_reads, c.recv_wqe_bytes);
        let cqe = self.writes(c.resp_cqe_writes, c.resp_cqe_writes * u64::from(c.cqe_size));
        per_message(c, rq_down, data + rq_up + cqe)
    }
}

fn per_message(c: &Counts, down: f64, up: f64) -> Traffic {
    let n = c.messages.max(1) as f64;
    Traffic {
        down: down / n,
        up: up / n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gen3x8() -> Link {
        Link::preset("gen3x8").unwrap()
    }

    #[test]
    fn lane_rates_after_line_coding() {
        // 8 GT/s × 8 lanes × 128/130 / 8 bits = 7.8769 GB/s per direction.
        assert!((gen3x8().bytes_per_sec() - 7_876_923_076.9).abs() < 1.0);
        let g5 = Link::preset("gen5x16").unwrap();
        assert!((g5.bytes_per_sec() - 63_015_384_615.4).abs() < 1.0);
        assert_eq!(
            Link::preset("gen4x16").unwrap().bytes_per_sec(),
            4.0 * gen3x8().bytes_per_sec()
        );
    }

    #[test]
    fn overheads_per_tlp() {
        let l = gen3x8();
        assert_eq!(l.request_overhead(), 24);
        assert_eq!(l.completion_overhead(), 20);
        let l32 = Link::parse("gen3x8,addr32").unwrap();
        assert_eq!(l32.request_overhead(), 20);
    }

    #[test]
    fn one_blueflame_inline_write() {
        // One 64-byte BlueFlame chunk down (24 + 64), one 64-byte CQE up (24 + 64).
        let c = Counts {
            messages: 1,
            bf_chunks: 1,
            dbrec_updates: 1,
            cqe_writes: 1,
            cqe_size: 64,
            ..Counts::default()
        };
        let t = gen3x8().requester(&c);
        assert_eq!(
            t,
            Traffic {
                down: 88.0,
                up: 88.0
            }
        );
        assert!((t.rate(&gen3x8()) - 7_876_923_076.9 / 88.0).abs() < 1.0);
    }

    #[test]
    fn thirty_two_under_one_doorbell() {
        // 32 one-WQEBB WQEs, one 8-byte doorbell, every one signaled.
        // Down: doorbell 24 + 8 = 32; the 2048 WQE bytes in 32 completions of 64 B:
        // 32 × 20 + 2048 = 2688. Total 2720, 85 per message.
        // Up: 2048 / 512 = 4 read requests × 24 = 96; 32 CQEs × 88 = 2816. 2912, 91 each.
        let c = Counts {
            messages: 32,
            doorbells: 1,
            dbrec_updates: 1,
            wqe_reads: 1,
            wqe_read_bbs: 32,
            cqe_writes: 32,
            cqe_size: 64,
            ..Counts::default()
        };
        let l = gen3x8();
        let t = l.requester(&c);
        assert_eq!(
            t,
            Traffic {
                down: 85.0,
                up: 91.0
            }
        );
        assert_eq!(t.busier(), "up");
        assert!((t.rate(&l) - 7_876_923_076.9 / 91.0).abs() < 1.0);
    }

    #[test]
    fn gathered_payload_and_responder() {
        // One 1024-byte gathered WRITE, doorbell, signaled. MRRS 512: 2 requests up (48),
        // 16 completions of 64 B down (320 + 1024). Responder: 1024 B at MPS 256: 4 writes
        // (96 + 1024) up.
        let c = Counts {
            messages: 1,
            doorbells: 1,
            wqe_reads: 1,
            wqe_read_bbs: 1,
            payload_reads: 1,
            payload_read_bytes: 1024,
            cqe_writes: 1,
            cqe_size: 64,
            resp_writes: 1,
            resp_write_bytes: 1024,
            ..Counts::default()
        };
        let l = gen3x8();
        let t = l.requester(&c);
        // Down: 32 (doorbell) + 84 (WQE completion) + 1344. Up: 24 (WQE) + 48 + 88.
        assert_eq!(
            t,
            Traffic {
                down: 1460.0,
                up: 160.0
            }
        );
        assert_eq!(
            l.responder(&c),
            Traffic {
                down: 0.0,
                up: 1120.0
            }
        );
        let big = Link::parse("gen3x8,mps=512,mrrs=1024,rcb=128").unwrap();
        // Down: 32 + (20 + 64) + (8 × 20 + 1024); up: 24 + 24 + 88.
        assert_eq!(
            big.requester(&c),
            Traffic {
                down: 1300.0,
                up: 136.0
            }
        );
    }

    #[test]
    fn bad_specs_are_refused_with_the_reason() {
        for s in [
            "gen6x8",
            "gen3x3",
            "pcie3",
            "gen3x8,mps=100",
            "gen3x8,foo=256",
            "gen3x8,x",
        ] {
            let e = Link::parse(s).unwrap_err();
            assert!(e.contains("PCIe link"), "{s}: {e}");
        }
        assert_eq!(Link::parse("gen4x16,mps=512").unwrap().mps, 512);
    }
}
