//! perftest's TCP exchange (the wire of perftest 4.5, protocol version 6.06), byte for byte,
//! so that either side of a two-process run may be `ib_*_lat` / `ib_*_bw`.
//!
//! Every exchange is symmetric: **the client writes first, then reads; the server reads
//! first, then writes** (perftest's `ctx_xchg_data` and `ctx_hand_shake`). perftest reads each
//! message with one `read()` of exactly its size, so every message here leaves in one
//! `write()`. In order, after the client's TCP connect (port 18515 by default):
//!
//! 1. **versions** ([`VERSION_LEN`] = 16 bytes): a NUL-padded version string. perftest 4.5
//!    sends `"6.06"` and refuses a peer below 5.70 ("not compatible with versions older than
//!    5.70"); we send [`VERSION_FIELD`]: `"6.06"`, a NUL, and the tag `rdmadirect`, which
//!    perftest's `atof` never reads and which tells two copies of this tool apart from
//!    perftest.
//! 2. **system data** (peer version >= 5.32): the cycle buffer (page size) and the cache line
//!    size, one 4-byte big-endian integer each; both sides keep the larger.
//! 3. **MTU** (peer version >= 5.1): the active MTU as perftest's `sprintf("%d")` of the
//!    `ibv_mtu` enum (1 = 256 .. 5 = 4096), 2 bytes (`"3\0"`; 4 bytes before 5.31); both use
//!    the smaller.
//! 4. **test parameters** (only when both peers carry the tag): [`PARAMS_LEN`] bytes of
//!    NUL-padded text `key=value` pairs; each side compares and refuses a mismatch naming the
//!    parameter. perftest 4.5 exchanges no test parameters at all: against it, matching
//!    `-s`/`-a`/`-n` on both sides is the user's business, as between two perftests.
//! 5. **handshakes** of the QP's address ([`KeyMsg`]): `LID:OUT_READS:QPN:PSN:RKEY:VADDR`
//!    then either the SRQ number (59 bytes with the NUL, [`KEY_MSG_LEN`]) or, when a GID is
//!    used (RoCE, or `-x`), the 16 GID bytes and the SRQ number (108 bytes,
//!    [`KEY_MSG_GID_LEN`]). perftest repeats the same message several times (after setup,
//!    to print the remote address, after RTR, per size for SEND, at the end); how many times
//!    and where is per test ([`crate::perf::remote`]).
//! 6. **bandwidth report** (`*_bw`, WRITE/READ after the run): size and iterations as 8-byte
//!    big-endian integers (iterations 4 bytes before peer version 5.33), then BW peak, BW
//!    average and message rate as big-endian IEEE doubles: the server prints the client's.
//! 7. **close**: one more handshake, then each side writes `"done\0"` and closes (perftest
//!    never reads it).
//!
//! Nothing here touches a device: [`Wire`] works over any `Read + Write`.

use std::io::{Read, Write};

use crate::{Error, Result};

/// perftest's default TCP port.
pub const PERFTEST_PORT: u16 = 18515;
/// Bytes of the version exchange (perftest's `MAX_VERSION`).
pub const VERSION_LEN: usize = 16;
/// The perftest protocol version spoken here (perftest 4.5-0.17 reports "6.06").
pub const PROTOCOL_VERSION: &str = "6.06";
/// Our version field: the version, a NUL, the tag that marks this tool, a NUL.
pub const VERSION_FIELD: [u8; VERSION_LEN] = *b"6.06\0rdmadirect\0";
/// The oldest peer perftest 4.5 accepts (and so do we).
pub const MIN_PEER_VERSION: f64 = 5.70;
/// Address message without a GID, with its NUL.
pub const KEY_MSG_LEN: usize = 59;
/// Address message with a GID, with its NUL.
pub const KEY_MSG_GID_LEN: usize = 108;
/// Bytes of the parameter exchange between two copies of this tool.
pub const PARAMS_LEN: usize = 256;
/// The page size and cache line this side announces.
pub const CYCLE_BUFFER: u32 = 4096;
/// See [`CYCLE_BUFFER`].
pub const CACHE_LINE: u32 = 64;

fn perr(detail: impl Into<String>) -> Error {
    Error::Protocol {
        context: "perftest exchange",
        detail: detail.into(),
    }
}

/// One QP's address as perftest exchanges it (`struct pingpong_dest`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyMsg {
    /// Port LID (0 on RoCE).
    pub lid: u16,
    /// READs/atomics this side answers: the peer's initiator depth (`max_rd_atomic`).
    pub out_reads: u32,
    /// QP number (24 bits).
    pub qpn: u32,
    /// Starting PSN (24 bits).
    pub psn: u32,
    /// rkey of the buffer.
    pub rkey: u32,
    /// Address the peer writes to / reads from.
    pub vaddr: u64,
    /// GID, when one is used (decides the message size).
    pub gid: Option<[u8; 16]>,
    /// SRQ number (0: none).
    pub srqn: u32,
}

/// Bytes of the binary `struct pingpong_dest` perftest's `-R` sends (x86_64/aarch64 layout:
/// lid, out_reads, qpn, psn, rkey as 4-byte big-endian integers at 0..20, 4 bytes of padding,
/// vaddr 8-byte big-endian at 24, the GID at 32, srqn and gid_index at 48 and 52).
pub const DEST_LEN: usize = 56;

impl KeyMsg {
    /// The binary form ([`DEST_LEN`] bytes; padding and `gid_index` 0).
    pub fn to_dest(&self) -> [u8; DEST_LEN] {
        let mut b = [0u8; DEST_LEN];
        let words = [
            u32::from(self.lid),
            self.out_reads,
            self.qpn,
            self.psn,
            self.rkey,
        ];
        for (i, w) in words.iter().enumerate() {
            b[4 * i..4 * i + 4].copy_from_slice(&w.to_be_bytes());
        }
        b[24..32].copy_from_slice(&self.vaddr.to_be_bytes());
        b[32..48].copy_from_slice(&self.gid.unwrap_or([0; 16]));
        b[48..52].copy_from_slice(&self.srqn.to_be_bytes());
        b
    }

    /// Parse the binary form; `with_gid` keeps the GID (perftest fills it in every case).
    pub fn from_dest(b: &[u8], with_gid: bool) -> Result<KeyMsg> {
        if b.len() != DEST_LEN {
            return Err(perr(format!(
                "binary address message of {} bytes (perftest's -R sends {DEST_LEN})",
                b.len()
            )));
        }
        let w = |i: usize| u32::from_be_bytes(b[4 * i..4 * i + 4].try_into().expect("4 bytes"));
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[32..48]);
        Ok(KeyMsg {
            lid: w(0) as u16,
            out_reads: w(1),
            qpn: w(2) & 0xff_ffff,
            psn: w(3) & 0xff_ffff,
            rkey: w(4),
            vaddr: u64::from_be_bytes(b[24..32].try_into().expect("8 bytes")),
            gid: with_gid.then_some(gid),
            srqn: w(12),
        })
    }

    /// The message, NUL included: [`KEY_MSG_LEN`] or [`KEY_MSG_GID_LEN`] bytes.
    pub fn format(&self) -> Vec<u8> {
        let mut s = format!(
            "{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:",
            self.lid, self.out_reads, self.qpn, self.psn, self.rkey, self.vaddr
        );
        match self.gid {
            Some(g) => {
                for b in g {
                    s.push_str(&format!("{b:02x}:"));
                }
                s.push_str(&format!("{:08x}:", self.srqn));
            }
            None => s.push_str(&format!("{:08x}", self.srqn)),
        }
        let mut v = s.into_bytes();
        let want = if self.gid.is_some() {
            KEY_MSG_GID_LEN
        } else {
            KEY_MSG_LEN
        };
        v.resize(want, 0);
        v
    }

    /// Parse a message of [`KEY_MSG_LEN`] (no GID) or [`KEY_MSG_GID_LEN`] bytes.
    pub fn parse(buf: &[u8]) -> Result<KeyMsg> {
        let with_gid = match buf.len() {
            KEY_MSG_LEN => false,
            KEY_MSG_GID_LEN => true,
            n => {
                return Err(perr(format!(
                "address message of {n} bytes (perftest sends {KEY_MSG_LEN} or {KEY_MSG_GID_LEN})"
            )))
            }
        };
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        let text =
            std::str::from_utf8(&buf[..end]).map_err(|_| perr("address message is not ASCII"))?;
        let f: Vec<&str> = text.split(':').collect();
        let want = if with_gid { 23 } else { 7 };
        if f.len() < want {
            return Err(perr(format!(
                "address message '{text}': {} fields, expected {want}",
                f.len()
            )));
        }
        let hex = |i: usize, what: &str| -> Result<u64> {
            u64::from_str_radix(f[i], 16)
                .map_err(|_| perr(format!("address message '{text}': bad {what} '{}'", f[i])))
        };
        let gid = if with_gid {
            let mut g = [0u8; 16];
            for (k, b) in g.iter_mut().enumerate() {
                *b = hex(6 + k, "GID byte")? as u8;
            }
            Some(g)
        } else {
            None
        };
        Ok(KeyMsg {
            lid: hex(0, "LID")? as u16,
            out_reads: hex(1, "OUT_READS")? as u32,
            qpn: hex(2, "QPN")? as u32 & 0xff_ffff,
            psn: hex(3, "PSN")? as u32 & 0xff_ffff,
            rkey: hex(4, "RKEY")? as u32,
            vaddr: hex(5, "VADDR")?,
            srqn: hex(if with_gid { 22 } else { 6 }, "SRQN")? as u32,
            gid,
        })
    }
}

/// A bandwidth report as exchanged after a `*_bw` run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BwReport {
    /// Message size.
    pub size: u64,
    /// Iterations.
    pub iters: u64,
    /// Peak bandwidth, in the sender's unit.
    pub bw_peak: f64,
    /// Average bandwidth, in the sender's unit.
    pub bw_avg: f64,
    /// Messages per second, in millions.
    pub msg_rate: f64,
}

/// Which side of the exchange this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Connected out; writes first.
    Client,
    /// Accepted; reads first.
    Server,
}

/// perftest's exchange over a stream.
pub struct Wire<S: Read + Write> {
    s: S,
    side: Side,
    /// The peer's version (after [`Wire::versions`]).
    pub peer_version: f64,
    /// The peer is this tool (its version field carries the tag).
    pub peer_is_us: bool,
    /// The exchange runs over an RDMA CM connection (perftest's `-R`): addresses travel as
    /// the binary `struct pingpong_dest` ([`DEST_LEN`]) and the close writes no `"done"`.
    cm: bool,
}

impl<S: Read + Write> Wire<S> {
    /// Wrap a connected stream.
    pub fn new(s: S, side: Side) -> Wire<S> {
        Wire {
            s,
            side,
            peer_version: 0.0,
            peer_is_us: false,
            cm: false,
        }
    }

    /// Wrap a message channel over an RDMA CM connection (each write one SEND, each read one
    /// received message), as perftest's `-R` exchanges.
    pub fn new_cm(s: S, side: Side) -> Wire<S> {
        Wire {
            cm: true,
            ..Wire::new(s, side)
        }
    }

    /// This side.
    pub fn side(&self) -> Side {
        self.side
    }

    /// The stream.
    pub fn stream(&mut self) -> &mut S {
        &mut self.s
    }

    fn write(&mut self, what: &str, b: &[u8]) -> Result<()> {
        self.s
            .write_all(b)
            .and_then(|()| self.s.flush())
            .map_err(|e| Error::io(format!("perftest exchange: write {what}"), &e))
    }

    fn read(&mut self, what: &str, n: usize) -> Result<Vec<u8>> {
        let mut v = vec![0u8; n];
        self.s.read_exact(&mut v).map_err(|e| {
            Error::io(
                format!(
                    "perftest exchange: read {what} ({n} bytes; did the peer stop, or run \
                     another test or other options?)"
                ),
                &e,
            )
        })?;
        Ok(v)
    }

    /// One symmetric exchange: the client writes `mine` then reads as many bytes; the server
    /// reads, then writes.
    pub fn xchg(&mut self, what: &str, mine: &[u8]) -> Result<Vec<u8>> {
        match self.side {
            Side::Client => {
                self.write(what, mine)?;
                self.read(what, mine.len())
            }
            Side::Server => {
                let r = self.read(what, mine.len())?;
                self.write(what, mine)?;
                Ok(r)
            }
        }
    }

    /// Step 1: versions. Refuses a peer older than [`MIN_PEER_VERSION`].
    pub fn versions(&mut self) -> Result<()> {
        let r = self.xchg("version", &VERSION_FIELD)?;
        let end = r.iter().position(|&b| b == 0).unwrap_or(r.len());
        let text = String::from_utf8_lossy(&r[..end]).into_owned();
        self.peer_version = leading_f64(&text);
        self.peer_is_us = r[end..].starts_with(b"\0rdmadirect");
        if self.peer_version < MIN_PEER_VERSION {
            return Err(perr(format!(
                "the peer speaks perftest protocol version '{text}'; perftest 4.5 (and this \
                 tool) need {MIN_PEER_VERSION:.2} or later"
            )));
        }
        Ok(())
    }

    /// Step 2: cycle buffer and cache line (peer >= 5.32).
    pub fn sys_data(&mut self) -> Result<()> {
        if self.peer_version < 5.32 {
            return Ok(());
        }
        self.xchg("page size", &CYCLE_BUFFER.to_be_bytes())?;
        self.xchg("cache line size", &CACHE_LINE.to_be_bytes())?;
        Ok(())
    }

    /// Step 3: the MTU as the `ibv_mtu` enum (1..=5); returns the smaller of the two (ours
    /// when the peer's is not valid or the peer is too old to send one).
    pub fn mtu(&mut self, mine: u32) -> Result<u32> {
        if self.peer_version < 5.1 {
            return Ok(mine);
        }
        let n = if self.peer_version >= 5.31 { 2 } else { 4 };
        let mut b = format!("{mine}").into_bytes();
        b.resize(n, 0);
        let r = self.xchg("MTU", &b)?;
        let end = r.iter().position(|&b| b == 0).unwrap_or(r.len());
        let rem: u32 = std::str::from_utf8(&r[..end])
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        Ok(if (1..=5).contains(&rem) && rem < mine {
            rem
        } else {
            mine
        })
    }

    /// Step 4 (both peers this tool): exchange `mine` (`key=value` pairs, space-separated)
    /// and refuse the first key whose value differs, naming it and both values.
    pub fn params(&mut self, mine: &str) -> Result<()> {
        if !self.peer_is_us {
            return Ok(());
        }
        let mut b = mine.as_bytes().to_vec();
        if b.len() >= PARAMS_LEN {
            return Err(perr("test parameters too long for the exchange"));
        }
        b.resize(PARAMS_LEN, 0);
        let r = self.xchg("test parameters", &b)?;
        let end = r.iter().position(|&b| b == 0).unwrap_or(r.len());
        let theirs = String::from_utf8_lossy(&r[..end]).into_owned();
        match params_mismatch(mine, &theirs) {
            None => Ok(()),
            Some(m) => Err(Error::InvalidArgument {
                context: "perf",
                detail: m,
            }),
        }
    }

    /// Step 5: one handshake of addresses; the peer's message has the size of ours.
    pub fn hand_shake(&mut self, mine: &KeyMsg) -> Result<KeyMsg> {
        if self.cm {
            let r = self.xchg("QP address", &mine.to_dest())?;
            return KeyMsg::from_dest(&r, mine.gid.is_some());
        }
        let r = self.xchg("QP address", &mine.format())?;
        KeyMsg::parse(&r)
    }

    /// Step 6: the bandwidth reports.
    pub fn bw_reports(&mut self, mine: &BwReport) -> Result<BwReport> {
        let size = self.xchg("report size", &mine.size.to_be_bytes())?;
        let iters = if self.peer_version >= 5.33 {
            let r = self.xchg("report iterations", &mine.iters.to_be_bytes())?;
            u64::from_be_bytes(r[..8].try_into().unwrap_or([0; 8]))
        } else {
            let r = self.xchg("report iterations", &(mine.iters as u32).to_be_bytes())?;
            u64::from(u32::from_be_bytes(r[..4].try_into().unwrap_or([0; 4])))
        };
        let mut f = |what: &str, v: f64| -> Result<f64> {
            let r = self.xchg(what, &v.to_bits().to_be_bytes())?;
            Ok(f64::from_bits(u64::from_be_bytes(
                r[..8].try_into().unwrap_or([0; 8]),
            )))
        };
        let bw_peak = f("report BW peak", mine.bw_peak)?;
        let bw_avg = f("report BW average", mine.bw_avg)?;
        let msg_rate = f("report message rate", mine.msg_rate)?;
        Ok(BwReport {
            size: u64::from_be_bytes(size[..8].try_into().unwrap_or([0; 8])),
            iters,
            bw_peak,
            bw_avg,
            msg_rate,
        })
    }

    /// Step 7: a last handshake, then `"done\0"` (never read back, as perftest).
    pub fn close(&mut self, mine: &KeyMsg) -> Result<()> {
        self.hand_shake(mine)?;
        if self.cm {
            // perftest writes no "done" over its CM connection.
            return Ok(());
        }
        self.write("\"done\"", b"done\0")
    }
}

/// The number at the start of `s` (as C's `atof`; 0 when there is none).
fn leading_f64(s: &str) -> f64 {
    let n = s
        .char_indices()
        .take_while(|&(i, c)| c.is_ascii_digit() || (c == '.' && i > 0))
        .count();
    s[..n].parse().unwrap_or(0.0)
}

/// The first parameter that differs between two `key=value` lists, as a message naming it;
/// a key only one side has counts as a difference.
pub fn params_mismatch(mine: &str, theirs: &str) -> Option<String> {
    let kv = |s: &str| -> Vec<(String, String)> {
        s.split_whitespace()
            .map(|p| match p.split_once('=') {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => (p.to_string(), String::new()),
            })
            .collect()
    };
    let (m, t) = (kv(mine), kv(theirs));
    for (k, v) in &m {
        let other = t.iter().find(|(k2, _)| k2 == k).map(|(_, v2)| v2.as_str());
        if other != Some(v.as_str()) {
            return Some(format!(
                "the peer runs with another {k}: here {v}, there {} (both sides must run the \
                 same test with the same sizes, iterations and connection type)",
                other.unwrap_or("(not given)")
            ));
        }
    }
    t.iter()
        .find(|(k, _)| !m.iter().any(|(k2, _)| k2 == k))
        .map(|(k, v)| format!("the peer runs with {k}={v}, which this side does not know"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binary_address_is_perftests_struct_pingpong_dest_byte_for_byte() {
        let m = KeyMsg {
            lid: 0x1234,
            out_reads: 16,
            qpn: 0xab_cdef,
            psn: 0x12_3456,
            rkey: 0xdead_beef,
            vaddr: 0x0102_0304_0506_0708,
            gid: Some([0xfe; 16]),
            srqn: 7,
        };
        let b = m.to_dest();
        assert_eq!(
            &b[..20],
            &[
                0, 0, 0x12, 0x34, 0, 0, 0, 16, 0, 0xab, 0xcd, 0xef, 0, 0x12, 0x34, 0x56, 0xde,
                0xad, 0xbe, 0xef
            ]
        );
        assert_eq!(&b[20..24], &[0; 4]);
        assert_eq!(&b[24..32], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&b[32..48], &[0xfe; 16]);
        assert_eq!(&b[48..56], &[0, 0, 0, 7, 0, 0, 0, 0]);
        assert_eq!(KeyMsg::from_dest(&b, true).unwrap(), m);
        let e = KeyMsg::from_dest(&b[..40], true).unwrap_err().to_string();
        assert!(e.contains("40 bytes") && e.contains("56"), "{e}");
    }

    /// Bytes written by one side and bytes it will read, in one stream.
    struct Pipe {
        input: std::io::Cursor<Vec<u8>>,
        output: Vec<u8>,
    }
    impl Read for Pipe {
        fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
            self.input.read(b)
        }
    }
    impl Write for Pipe {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.output.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn msg(gid: bool) -> KeyMsg {
        KeyMsg {
            lid: 0,
            out_reads: 16,
            qpn: 0x11,
            psn: 0xabcdef,
            rkey: 0x1234,
            vaddr: 0x7f00_0000_1000,
            gid: gid.then_some([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1]),
            srqn: 0,
        }
    }

    #[test]
    fn key_messages_are_perftests_byte_for_byte() {
        let g = msg(true).format();
        assert_eq!(g.len(), KEY_MSG_GID_LEN);
        assert_eq!(
            &g[..KEY_MSG_GID_LEN - 1],
            &b"0000:0010:000011:abcdef:00001234:00007f0000001000:00:00:00:00:00:00:00:00:00:00:ff:ff:7f:00:00:01:00000000:"[..]
        );
        assert_eq!(g[KEY_MSG_GID_LEN - 1], 0);
        assert_eq!(KeyMsg::parse(&g).unwrap(), msg(true));
        let n = msg(false).format();
        assert_eq!(n.len(), KEY_MSG_LEN);
        assert_eq!(
            &n[..KEY_MSG_LEN - 1],
            &b"0000:0010:000011:abcdef:00001234:00007f0000001000:00000000"[..]
        );
        assert_eq!(KeyMsg::parse(&n).unwrap(), msg(false));
    }

    #[test]
    fn bad_key_messages_are_errors_not_panics() {
        assert!(KeyMsg::parse(b"short").is_err());
        let mut g = msg(true).format();
        g[2] = b'z';
        assert!(KeyMsg::parse(&g).unwrap_err().to_string().contains("LID"));
        let mut n = vec![b':'; KEY_MSG_LEN];
        n[KEY_MSG_LEN - 1] = 0;
        assert!(KeyMsg::parse(&n).is_err());
        assert!(KeyMsg::parse(&[0xffu8; KEY_MSG_GID_LEN]).is_err());
    }

    /// The client writes first; the server reads first and answers. Versions, system data,
    /// MTU against a perftest 6.06 peer, in perftest's byte layout.
    #[test]
    fn the_prologue_against_perftest_in_both_roles() {
        let mut peer = b"6.06".to_vec();
        peer.resize(16, 0);
        peer.extend_from_slice(&8192u32.to_be_bytes());
        peer.extend_from_slice(&64u32.to_be_bytes());
        peer.extend_from_slice(b"2\0");
        for side in [Side::Client, Side::Server] {
            let p = Pipe {
                input: std::io::Cursor::new(peer.clone()),
                output: Vec::new(),
            };
            let mut w = Wire::new(p, side);
            w.versions().unwrap();
            assert!(!w.peer_is_us && (w.peer_version - 6.06).abs() < 1e-9);
            w.sys_data().unwrap();
            assert_eq!(w.mtu(3).unwrap(), 2, "the smaller MTU wins");
            // perftest: no parameter exchange.
            w.params("test=write_lat").unwrap();
            let mut want = VERSION_FIELD.to_vec();
            want.extend_from_slice(&[0, 0, 0x10, 0, 0, 0, 0, 64, b'3', 0]);
            assert_eq!(w.s.output, want);
        }
    }

    #[test]
    fn old_peers_are_refused_with_the_version() {
        let mut peer = b"5.60".to_vec();
        peer.resize(16, 0);
        let p = Pipe {
            input: std::io::Cursor::new(peer),
            output: Vec::new(),
        };
        let e = Wire::new(p, Side::Server).versions().unwrap_err();
        assert!(e.to_string().contains("5.60"), "{e}");
    }

    #[test]
    fn two_copies_of_this_tool_compare_their_parameters() {
        let mut peer = VERSION_FIELD.to_vec();
        let mut theirs = b"test=write_lat sizes=2 iters=500 conn=RC".to_vec();
        theirs.resize(PARAMS_LEN, 0);
        peer.extend_from_slice(&theirs);
        let p = Pipe {
            input: std::io::Cursor::new(peer),
            output: Vec::new(),
        };
        let mut w = Wire::new(p, Side::Client);
        w.versions().unwrap();
        assert!(w.peer_is_us);
        let e = w
            .params("test=write_lat sizes=2 iters=1000 conn=RC")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("iters") && e.contains("1000") && e.contains("500"),
            "{e}"
        );
        assert_eq!(params_mismatch("a=1 b=2", "a=1 b=2"), None);
        assert!(params_mismatch("a=1", "a=1 c=3").unwrap().contains("c=3"));
        assert!(params_mismatch("a=1 b=2", "a=1")
            .unwrap()
            .contains("(not given)"));
    }

    #[test]
    fn bandwidth_reports_are_big_endian() {
        let theirs = BwReport {
            size: 65536,
            iters: 5000,
            bw_peak: 1.5,
            bw_avg: 2.25,
            msg_rate: 0.125,
        };
        let mut peer = Vec::new();
        peer.extend_from_slice(&theirs.size.to_be_bytes());
        peer.extend_from_slice(&theirs.iters.to_be_bytes());
        for v in [theirs.bw_peak, theirs.bw_avg, theirs.msg_rate] {
            peer.extend_from_slice(&v.to_bits().to_be_bytes());
        }
        let p = Pipe {
            input: std::io::Cursor::new(peer),
            output: Vec::new(),
        };
        let mut w = Wire::new(p, Side::Server);
        w.peer_version = 6.06;
        let zero = BwReport {
            size: 0,
            iters: 0,
            bw_peak: 0.0,
            bw_avg: 0.0,
            msg_rate: 0.0,
        };
        assert_eq!(w.bw_reports(&zero).unwrap(), theirs);
        assert_eq!(w.s.output, vec![0u8; 40]);
        assert_eq!(leading_f64("6.06"), 6.06);
        assert_eq!(leading_f64("x"), 0.0);
    }
}
