//! The private data this crate puts in the CM's connect request and reply: one optional
//! memory window. Pure, no I/O.
//!
//! All integers big-endian, 28 bytes (a CM REQ on an IP port space carries at most 56 bytes
//! of private data, a REP 196):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `RDCM` |
//! | 4 | 1 | version (1) |
//! | 5 | 1 | flags: bit 0 = the window fields are set; other bits 0 |
//! | 6 | 2 | reserved, 0 |
//! | 8 | 8 | window address |
//! | 16 | 8 | window length, 1 ..= 2^48, address + length must not wrap |
//! | 24 | 4 | rkey |
//!
//! The CM pads what it delivers (a REQ's private data arrives as 56 bytes): bytes after the
//! 28 are ignored. Private data that does not start with the magic is a foreign peer's
//! (perftest and rping send none): no window, not an error.

use crate::endpoint::{RemoteMr, MAX_WINDOW_LEN};
use crate::error::{Error, Result};

/// `RDCM`.
pub const CM_MAGIC: [u8; 4] = *b"RDCM";
/// The layout's version.
pub const CM_VERSION: u8 = 1;
/// Encoded length.
pub const CM_PRIVATE_LEN: usize = 28;

fn proto(detail: String) -> Error {
    Error::Protocol {
        context: "rdma_cm private data",
        detail,
    }
}

/// The private data carrying `mr` (or saying "no window").
pub fn encode(mr: Option<RemoteMr>) -> [u8; CM_PRIVATE_LEN] {
    let mut b = [0u8; CM_PRIVATE_LEN];
    b[0..4].copy_from_slice(&CM_MAGIC);
    b[4] = CM_VERSION;
    if let Some(m) = mr {
        b[5] = 1;
        b[8..16].copy_from_slice(&m.addr.to_be_bytes());
        b[16..24].copy_from_slice(&m.len.to_be_bytes());
        b[24..28].copy_from_slice(&m.rkey.to_be_bytes());
    }
    b
}

/// The window in a peer's private data: `Ok(None)` for none or a foreign peer's bytes, an
/// [`Error::Protocol`] naming the field when our magic is there but the rest is wrong.
pub fn decode(b: &[u8]) -> Result<Option<RemoteMr>> {
    if b.len() < 4 || b[0..4] != CM_MAGIC {
        return Ok(None);
    }
    if b.len() < CM_PRIVATE_LEN {
        return Err(proto(format!(
            "truncated: {} bytes, the layout has {CM_PRIVATE_LEN}",
            b.len()
        )));
    }
    if b[4] != CM_VERSION {
        return Err(proto(format!(
            "version {} (this build speaks {CM_VERSION})",
            b[4]
        )));
    }
    if b[5] & !1 != 0 || b[6] != 0 || b[7] != 0 {
        return Err(proto(format!(
            "unknown flags {:#04x} or non-zero reserved bytes",
            b[5]
        )));
    }
    let u64_at = |o: usize| u64::from_be_bytes(b[o..o + 8].try_into().expect("8 bytes"));
    let (addr, len) = (u64_at(8), u64_at(16));
    let rkey = u32::from_be_bytes(b[24..28].try_into().expect("4 bytes"));
    if b[5] & 1 == 0 {
        if addr != 0 || len != 0 || rkey != 0 {
            return Err(proto("window fields set without the window flag".into()));
        }
        return Ok(None);
    }
    if len == 0 || len > MAX_WINDOW_LEN {
        return Err(proto(format!(
            "window length {len} (must be 1 ..= {MAX_WINDOW_LEN})"
        )));
    }
    if addr.checked_add(len).is_none() {
        return Err(proto(format!("window {addr:#x} + {len} wraps")));
    }
    Ok(Some(RemoteMr { addr, len, rkey }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_round_trips_byte_for_byte_and_padding_is_ignored() {
        let mr = RemoteMr {
            addr: 0x0102_0304_0506_0708,
            len: 4096,
            rkey: 0xa1b2_c3d4,
        };
        let b = encode(Some(mr));
        assert_eq!(
            b,
            [
                b'R', b'D', b'C', b'M', 1, 1, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0x10,
                0, 0xa1, 0xb2, 0xc3, 0xd4
            ]
        );
        let mut padded = [0u8; 56];
        padded[..28].copy_from_slice(&b);
        assert_eq!(decode(&padded).unwrap(), Some(mr));
        let none = encode(None);
        assert_eq!(&none[..8], b"RDCM\x01\x00\x00\x00");
        assert_eq!(decode(&none).unwrap(), None);
    }

    #[test]
    fn a_foreign_peers_bytes_are_no_window() {
        assert_eq!(decode(&[]).unwrap(), None);
        assert_eq!(decode(&[0u8; 56]).unwrap(), None);
        assert_eq!(decode(b"rping").unwrap(), None);
    }

    #[test]
    fn a_bad_field_is_named() {
        let ok = encode(Some(RemoteMr {
            addr: 0x1000,
            len: 64,
            rkey: 7,
        }));
        let cases: [(usize, u8, &str); 4] = [
            (4, 2, "version 2"),
            (5, 3, "unknown flags"),
            (6, 1, "reserved"),
            (16, 0xff, "window length"),
        ];
        for (at, v, want) in cases {
            let mut b = ok;
            b[at] = v;
            let e = decode(&b).unwrap_err().to_string();
            assert!(
                e.contains(want) && e.contains("rdma_cm private data"),
                "{e}"
            );
        }
        let mut b = ok;
        b[8..16].copy_from_slice(&u64::MAX.to_be_bytes());
        assert!(decode(&b).unwrap_err().to_string().contains("wraps"));
        let e = decode(&ok[..20]).unwrap_err().to_string();
        assert!(e.contains("truncated: 20 bytes"), "{e}");
        let mut b = encode(None);
        b[27] = 1;
        assert!(decode(&b)
            .unwrap_err()
            .to_string()
            .contains("without the window flag"));
    }
}
