//! rdma-core's `ibv_rc_pingpong` endpoint format: encoding and parsing, no I/O.
//!
//! [`PingpongMsg`] is the text message of `libibverbs/examples/rc_pingpong.c`:
//! `%04x:%06x:%06x:<32 hex>` (LID, QPN, PSN, the GID's 16 bytes in network order), 52 bytes
//! including the trailing NUL, which is sent.

use super::codec::QpEndpoint;
use crate::error::{Error, Result};
use crate::types::Mtu;

/// `ibv_rc_pingpong`'s TCP port.
pub const PINGPONG_PORT: u16 = 18515;
/// Its message length, including the trailing NUL.
pub const PINGPONG_MSG_LEN: usize = 52;
/// What the client sends after reading the server's message ("done" and its NUL).
pub const PINGPONG_DONE: &[u8; 5] = b"done\0";

/// One `ibv_rc_pingpong` endpoint message: `LID:QPN:PSN:GID`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PingpongMsg {
    /// LID.
    pub lid: u16,
    /// QPN (24 bits).
    pub qpn: u32,
    /// PSN (24 bits).
    pub psn: u32,
    /// GID, network order (all zero when the peer runs without `-g`).
    pub gid: [u8; 16],
}

impl PingpongMsg {
    /// From an endpoint (MTU, GID index and window are not part of this format).
    pub fn from_endpoint(ep: &QpEndpoint) -> PingpongMsg {
        PingpongMsg {
            lid: ep.lid,
            qpn: ep.qpn,
            psn: ep.psn,
            gid: ep.gid,
        }
    }

    /// To an endpoint with the MTU and local GID index the format does not carry.
    pub fn to_endpoint(&self, mtu: Mtu, gid_index: u8) -> QpEndpoint {
        QpEndpoint {
            lid: self.lid,
            gid: self.gid,
            gid_index,
            qpn: self.qpn,
            psn: self.psn,
            mtu,
            mr: None,
        }
    }

    /// The 52 bytes on the wire: `%04x:%06x:%06x:` + 32 lowercase hex digits + NUL.
    pub fn format(&self) -> Result<[u8; PINGPONG_MSG_LEN]> {
        if self.qpn > 0xff_ffff || self.psn > 0xff_ffff {
            return Err(Error::InvalidArgument {
                context: "rc_pingpong message",
                detail: format!(
                    "QPN {:#x} / PSN {:#x} do not fit 24 bits",
                    self.qpn, self.psn
                ),
            });
        }
        let mut s = format!("{:04x}:{:06x}:{:06x}:", self.lid, self.qpn, self.psn);
        for b in self.gid {
            s.push_str(&format!("{b:02x}"));
        }
        let mut out = [0u8; PINGPONG_MSG_LEN];
        out[..s.len()].copy_from_slice(s.as_bytes());
        debug_assert_eq!(s.len(), PINGPONG_MSG_LEN - 1);
        Ok(out)
    }

    /// Parses the 52-byte message (51 bytes without the NUL are accepted too). Every field
    /// must have exactly its width in hex digits.
    pub fn parse(b: &[u8]) -> Result<PingpongMsg> {
        let bad = |detail: String| Error::Protocol {
            context: "rc_pingpong message",
            detail,
        };
        let text = match b.len() {
            PINGPONG_MSG_LEN => {
                if b[PINGPONG_MSG_LEN - 1] != 0 {
                    return Err(bad("byte 52 is not the terminating NUL".into()));
                }
                &b[..PINGPONG_MSG_LEN - 1]
            }
            51 => b,
            n => {
                return Err(bad(format!(
                    "{n} bytes (expected {PINGPONG_MSG_LEN}: \"LLLL:QQQQQQ:PPPPPP:<32 hex>\\0\")"
                )))
            }
        };
        let text = std::str::from_utf8(text).map_err(|_| bad("not ASCII".into()))?;
        let parts: Vec<&str> = text.split(':').collect();
        if parts.len() != 4 {
            return Err(bad(format!(
                "{} ':'-separated fields in {text:?} (expected 4: LID:QPN:PSN:GID)",
                parts.len()
            )));
        }
        let hex = |field: &str, s: &str, width: usize| -> Result<u32> {
            if s.len() != width || !s.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(bad(format!("{field} {s:?} is not {width} hex digits")));
            }
            u32::from_str_radix(s, 16).map_err(|_| bad(format!("{field} {s:?}")))
        };
        let lid = hex("LID", parts[0], 4)? as u16;
        let qpn = hex("QPN", parts[1], 6)?;
        let psn = hex("PSN", parts[2], 6)?;
        let g = parts[3];
        if g.len() != 32 || !g.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(bad(format!("GID {g:?} is not 32 hex digits")));
        }
        let mut gid = [0u8; 16];
        for (i, byte) in gid.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&g[2 * i..2 * i + 2], 16)
                .map_err(|_| bad(format!("GID {g:?}")))?;
        }
        Ok(PingpongMsg { lid, qpn, psn, gid })
    }
}
