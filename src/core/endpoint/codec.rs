//! The endpoint binary message: encoding and decoding, no I/O.
//!
//! A [`QpEndpoint`] is what a peer needs to connect to one of our QPs: LID, GID and GID index,
//! QPN, starting PSN, the port's active MTU, and optionally one memory window (addr, len,
//! rkey) the peer may target with RDMA WRITE/READ/atomics.
//!
//! ## The binary message (version 1)
//!
//! All integers big-endian. An 8-byte header, then the body:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `RDEP` |
//! | 4 | 2 | version (1) |
//! | 6 | 2 | body length: 32, or 52 with a memory window |
//! | 8 | 2 | LID |
//! | 10 | 16 | GID (network order) |
//! | 26 | 1 | GID index |
//! | 27 | 1 | MTU (`enum ibv_mtu`, 1..=5) |
//! | 28 | 4 | QPN (24 bits) |
//! | 32 | 4 | PSN (24 bits) |
//! | 36 | 1 | flags: bit 0 = a memory window follows; other bits 0 |
//! | 37 | 3 | reserved, 0 |
//! | 40 | 8 | window address (flag set) |
//! | 48 | 8 | window length, 1 ..= 2^48, address + length must not wrap |
//! | 56 | 4 | rkey |
//!
//! [`QpEndpoint::decode`] checks every field and returns [`Error::Protocol`] naming what is
//! wrong; [`QpEndpoint::decode_header`] checks the header alone, so a reader can refuse an
//! absurd length before reading a body.

use crate::error::{Error, Result};
use crate::types::{Mtu, RemoteTarget};

/// One remote memory window a peer may access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RemoteMr {
    /// Virtual address of the window's first byte.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// The rkey.
    pub rkey: u32,
}

impl RemoteMr {
    /// The `len` bytes at `offset` into this window, as a narrower window; `None` when the
    /// range is empty or leaves the window.
    pub fn slice(&self, offset: u64, len: u64) -> Option<RemoteMr> {
        let end = offset.checked_add(len)?;
        if len == 0 || end > self.len {
            return None;
        }
        Some(RemoteMr {
            addr: self.addr + offset,
            len,
            rkey: self.rkey,
        })
    }

    /// The `len` bytes at `offset` into this window as a [`RemoteTarget`] for the typed
    /// WRITE / READ / atomic constructors: bounds checked here, once, so the posts that use
    /// it need none. An error naming the window when the range is empty, leaves the window or
    /// is longer than one message can be (2^31 bytes).
    pub fn target(&self, offset: u64, len: u64) -> Result<RemoteTarget> {
        match self.slice(offset, len) {
            Some(w) if len <= 1 << 31 => Ok(RemoteTarget::checked(w.addr, w.rkey, len as u32)),
            _ => Err(Error::InvalidArgument {
                context: "RemoteMr::target",
                detail: format!(
                    "{len} B at offset {offset} is outside the peer's window of {} B \
                     (addr {:#x}, rkey {:#x}) or empty or over 2 GiB; the peer shares the \
                     window it registered, ask it for a larger one or write less",
                    self.len, self.addr, self.rkey
                ),
            }),
        }
    }

    /// The remote address `offset` bytes into the window, when at least `len` bytes from
    /// there lie inside it (what an RDMA WRITE/READ of `len` bytes at `offset` needs).
    pub fn addr_at(&self, offset: u64, len: u64) -> Option<u64> {
        self.slice(offset, len.max(1)).map(|w| w.addr)
    }
}

/// What a peer needs to connect to one of our QPs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpEndpoint {
    /// Port LID (0 on RoCE).
    pub lid: u16,
    /// GID (network order, as in the GID table). All zero when the port has none in use.
    pub gid: [u8; 16],
    /// The local GID index the GID came from.
    pub gid_index: u8,
    /// QP number (24 bits).
    pub qpn: u32,
    /// Starting packet sequence number (24 bits).
    pub psn: u32,
    /// The port's active MTU.
    pub mtu: Mtu,
    /// An optional memory window.
    pub mr: Option<RemoteMr>,
}

/// The magic at the start of every binary endpoint message.
pub const ENDPOINT_MAGIC: [u8; 4] = *b"RDEP";
/// The version this code writes and reads.
pub const ENDPOINT_VERSION: u16 = 1;
/// Header bytes (magic, version, length).
pub const HEADER_LEN: usize = 8;
/// Body length without a memory window.
pub const BODY_LEN: usize = 32;
/// Body length with a memory window.
pub const BODY_LEN_MR: usize = 52;
/// The largest message: header + body with a window.
pub const MAX_MESSAGE_LEN: usize = HEADER_LEN + BODY_LEN_MR;
/// The largest window length accepted (2^48: no x86-64 or arm64 address space is larger).
pub const MAX_WINDOW_LEN: u64 = 1 << 48;

/// Flag bit: a memory window follows.
const FLAG_MR: u8 = 0x01;

pub(super) fn proto(detail: impl Into<String>) -> Error {
    Error::Protocol {
        context: "endpoint message",
        detail: detail.into(),
    }
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

/// Checks a window: non-empty, at most [`MAX_WINDOW_LEN`], and `addr + len` does not wrap.
fn check_window(mr: &RemoteMr) -> std::result::Result<(), String> {
    if mr.len == 0 {
        return Err("memory window length 0".into());
    }
    if mr.len > MAX_WINDOW_LEN {
        return Err(format!("memory window length {:#x} > 2^48", mr.len));
    }
    if mr.addr.checked_add(mr.len).is_none() {
        return Err(format!(
            "memory window {:#x}+{:#x} wraps the address space",
            mr.addr, mr.len
        ));
    }
    Ok(())
}

impl QpEndpoint {
    /// Checks every field: 24-bit QPN and PSN, a sane memory window.
    pub fn validate(&self) -> Result<()> {
        let bad = |detail: String| Error::InvalidArgument {
            context: "QpEndpoint",
            detail,
        };
        if self.qpn > 0xff_ffff {
            return Err(bad(format!("QPN {:#x} does not fit 24 bits", self.qpn)));
        }
        if self.psn > 0xff_ffff {
            return Err(bad(format!("PSN {:#x} does not fit 24 bits", self.psn)));
        }
        if let Some(mr) = &self.mr {
            check_window(mr).map_err(bad)?;
        }
        Ok(())
    }

    /// The binary message (header + body), after [`QpEndpoint::validate`].
    pub fn encode(&self) -> Result<Vec<u8>> {
        self.validate()?;
        let body = if self.mr.is_some() {
            BODY_LEN_MR
        } else {
            BODY_LEN
        };
        let mut b = Vec::with_capacity(HEADER_LEN + body);
        b.extend_from_slice(&ENDPOINT_MAGIC);
        b.extend_from_slice(&ENDPOINT_VERSION.to_be_bytes());
        b.extend_from_slice(&(body as u16).to_be_bytes());
        b.extend_from_slice(&self.lid.to_be_bytes());
        b.extend_from_slice(&self.gid);
        b.push(self.gid_index);
        b.push(self.mtu as u8);
        b.extend_from_slice(&self.qpn.to_be_bytes());
        b.extend_from_slice(&self.psn.to_be_bytes());
        b.push(if self.mr.is_some() { FLAG_MR } else { 0 });
        b.extend_from_slice(&[0; 3]);
        if let Some(mr) = &self.mr {
            b.extend_from_slice(&mr.addr.to_be_bytes());
            b.extend_from_slice(&mr.len.to_be_bytes());
            b.extend_from_slice(&mr.rkey.to_be_bytes());
        }
        debug_assert_eq!(b.len(), HEADER_LEN + body);
        Ok(b)
    }

    /// Checks a header and returns the body length it announces.
    pub fn decode_header(h: &[u8]) -> Result<usize> {
        if h.len() < HEADER_LEN {
            return Err(proto(format!(
                "truncated header: {} of {HEADER_LEN} bytes",
                h.len()
            )));
        }
        if h[..4] != ENDPOINT_MAGIC {
            return Err(proto(format!(
                "wrong magic {:02x?} (expected \"RDEP\"): is the peer rdma-direct?",
                &h[..4]
            )));
        }
        let version = be16(h, 4);
        if version != ENDPOINT_VERSION {
            return Err(proto(format!(
                "unsupported version {version} (this side speaks {ENDPOINT_VERSION})"
            )));
        }
        let len = usize::from(be16(h, 6));
        if len != BODY_LEN && len != BODY_LEN_MR {
            return Err(proto(format!(
                "body length {len} (expected {BODY_LEN} or {BODY_LEN_MR})"
            )));
        }
        Ok(len)
    }

    /// Parses a whole message, checking every field.
    pub fn decode(b: &[u8]) -> Result<QpEndpoint> {
        let len = Self::decode_header(b)?;
        let total = HEADER_LEN + len;
        if b.len() < total {
            return Err(proto(format!("truncated: {} of {total} bytes", b.len())));
        }
        if b.len() > total {
            return Err(proto(format!(
                "{} trailing bytes after the {total}-byte message",
                b.len() - total
            )));
        }
        let body = &b[HEADER_LEN..];
        let lid = be16(body, 0);
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&body[2..18]);
        let gid_index = body[18];
        let mtu = Mtu::from_ibv(u32::from(body[19]))
            .ok_or_else(|| proto(format!("MTU code {} (expected 1..=5)", body[19])))?;
        let qpn = be32(body, 20);
        if qpn > 0xff_ffff {
            return Err(proto(format!("QPN {qpn:#x} does not fit 24 bits")));
        }
        let psn = be32(body, 24);
        if psn > 0xff_ffff {
            return Err(proto(format!("PSN {psn:#x} does not fit 24 bits")));
        }
        let flags = body[28];
        if flags & !FLAG_MR != 0 {
            return Err(proto(format!("unknown flags {flags:#04x}")));
        }
        if body[29..32] != [0, 0, 0] {
            return Err(proto("reserved bytes are not zero"));
        }
        let has_mr = flags & FLAG_MR != 0;
        if has_mr != (len == BODY_LEN_MR) {
            return Err(proto(format!(
                "body length {len} disagrees with the memory-window flag ({})",
                if has_mr { "set" } else { "clear" }
            )));
        }
        let mr = if has_mr {
            let mr = RemoteMr {
                addr: be64(body, 32),
                len: be64(body, 40),
                rkey: be32(body, 48),
            };
            check_window(&mr).map_err(proto)?;
            Some(mr)
        } else {
            None
        };
        Ok(QpEndpoint {
            lid,
            gid,
            gid_index,
            qpn,
            psn,
            mtu,
            mr,
        })
    }
}
