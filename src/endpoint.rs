//! Out-of-band endpoint exchange.
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
//! wrong; [`read_endpoint`] checks the header before reading the body, so a peer announcing an
//! absurd length costs nothing. [`exchange_server`] / [`exchange_client`] swap endpoints over
//! TCP (client writes first) with timeouts; [`connect_server`] / [`connect_client`] do the whole
//! RC/UC bring-up with path MTU = the smaller of the two ports' active MTUs.
//!
//! ## rdma-core's `ibv_rc_pingpong` format
//!
//! [`PingpongMsg`] is the text message of `libibverbs/examples/rc_pingpong.c`:
//! `%04x:%06x:%06x:<32 hex>` (LID, QPN, PSN, the GID's 16 bytes in network order), 52 bytes
//! including the trailing NUL, which is sent.

use crate::error::{Error, Result};
use crate::types::ConnectOpts;
pub use crate::types::Mtu;
use crate::verbs::Qp;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

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
/// Default timeout of the TCP exchange (connect, accept, each read and write).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

const FLAG_MR: u8 = 0x01;

fn proto(detail: impl Into<String>) -> Error {
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

/// Writes one binary endpoint message.
pub fn write_endpoint(w: &mut impl Write, ep: &QpEndpoint) -> Result<()> {
    let b = ep.encode()?;
    w.write_all(&b)
        .and_then(|()| w.flush())
        .map_err(|e| Error::io("endpoint exchange: write", &e))
}

fn read_exact_or(r: &mut impl Read, buf: &mut [u8], what: &str) -> Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => {
                return Err(proto(format!(
                    "truncated {what}: peer closed after {got} of {} bytes",
                    buf.len()
                )))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io(format!("endpoint exchange: read {what}"), &e)),
        }
    }
    Ok(())
}

/// Reads one binary endpoint message: the header is checked before the body is read.
pub fn read_endpoint(r: &mut impl Read) -> Result<QpEndpoint> {
    let mut b = [0u8; MAX_MESSAGE_LEN];
    read_exact_or(r, &mut b[..HEADER_LEN], "header")?;
    let len = QpEndpoint::decode_header(&b[..HEADER_LEN])?;
    read_exact_or(r, &mut b[HEADER_LEN..HEADER_LEN + len], "body")?;
    QpEndpoint::decode(&b[..HEADER_LEN + len])
}

fn set_timeouts(s: &TcpStream, timeout: Duration) -> Result<()> {
    s.set_read_timeout(Some(timeout))
        .and_then(|()| s.set_write_timeout(Some(timeout)))
        .and_then(|()| s.set_nodelay(true))
        .map_err(|e| Error::io("endpoint exchange: socket options", &e))
}

/// Accepts one connection within `timeout`.
fn accept_timeout(listener: &TcpListener, timeout: Duration) -> Result<TcpStream> {
    let deadline = Instant::now() + timeout;
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::io("endpoint exchange: listener", &e))?;
    let res = loop {
        match listener.accept() {
            Ok((s, _)) => break Ok(s),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    break Err(Error::Io {
                        context: "endpoint exchange: accept".into(),
                        kind: std::io::ErrorKind::TimedOut,
                        detail: format!("no peer connected within {timeout:?}"),
                    });
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => break Err(Error::io("endpoint exchange: accept", &e)),
        }
    };
    let _ = listener.set_nonblocking(false);
    let s = res?;
    s.set_nonblocking(false)
        .map_err(|e| Error::io("endpoint exchange: socket", &e))?;
    Ok(s)
}

/// Server side: accepts one peer, reads its endpoint, sends `local`. Returns the peer's
/// endpoint and the connection (kept for a later sync or teardown).
pub fn exchange_server(
    listener: &TcpListener,
    local: &QpEndpoint,
    timeout: Duration,
) -> Result<(QpEndpoint, TcpStream)> {
    let mut s = accept_timeout(listener, timeout)?;
    set_timeouts(&s, timeout)?;
    let remote = read_endpoint(&mut s)?;
    write_endpoint(&mut s, local)?;
    Ok((remote, s))
}

/// Client side: connects to `addr`, sends `local`, reads the server's endpoint.
pub fn exchange_client(
    addr: impl ToSocketAddrs,
    local: &QpEndpoint,
    timeout: Duration,
) -> Result<(QpEndpoint, TcpStream)> {
    let addrs: Vec<_> = addr
        .to_socket_addrs()
        .map_err(|e| Error::io("endpoint exchange: resolve", &e))?
        .collect();
    let mut last = None;
    let mut stream = None;
    for a in &addrs {
        match TcpStream::connect_timeout(a, timeout) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = Some(Error::io(format!("endpoint exchange: connect {a}"), &e)),
        }
    }
    let mut s = match stream {
        Some(s) => s,
        None => {
            return Err(last.unwrap_or_else(|| Error::InvalidArgument {
                context: "endpoint exchange",
                detail: "the address resolved to nothing".into(),
            }))
        }
    };
    set_timeouts(&s, timeout)?;
    write_endpoint(&mut s, local)?;
    let remote = read_endpoint(&mut s)?;
    Ok((remote, s))
}

/// One byte each way: returns once the peer has reached the same point (both QPs are in
/// RTS, so neither side sends to a QP that cannot receive yet).
pub fn sync(s: &mut TcpStream) -> Result<()> {
    s.write_all(b"R")
        .map_err(|e| Error::io("endpoint exchange: sync write", &e))?;
    let mut b = [0u8; 1];
    read_exact_or(s, &mut b, "sync")?;
    if b[0] != b'R' {
        return Err(proto(format!("sync byte {:#04x} (expected 'R')", b[0])));
    }
    Ok(())
}

/// A random 24-bit PSN.
pub fn random_psn() -> u32 {
    let mut b = [0u8; 4];
    // SAFETY: `b` is a writable 4-byte buffer.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    let v = if n == 4 {
        u32::from_ne_bytes(b)
    } else {
        // getrandom is unavailable (very old kernel): any value will do for a PSN.
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0x12_3456, |d| d.subsec_nanos())
    };
    v & 0xff_ffff
}

/// Our endpoint for `qp`: the port's LID and active MTU, the GID at `opts.gid_index` (zero on
/// an InfiniBand port where that index is empty), the QPN, a random PSN, and `mr`.
pub fn local_endpoint(qp: &Qp, opts: &ConnectOpts, mr: Option<RemoteMr>) -> Result<QpEndpoint> {
    let ctx = qp.pd().context();
    let port = ctx.query_port(opts.port)?;
    let mtu = port.active_mtu().ok_or_else(|| Error::Unsupported {
        what: format!(
            "{} port {}: active MTU code {}",
            ctx.name(),
            opts.port,
            port.active_mtu_raw
        ),
    })?;
    let gid = match ctx.check_gid_index(opts.port, opts.gid_index) {
        Ok(e) => e.gid.0,
        Err(e) if port.link_layer == crate::verbs::LinkLayer::Ethernet => return Err(e),
        Err(_) => [0; 16],
    };
    let ep = QpEndpoint {
        lid: port.lid,
        gid,
        gid_index: opts.gid_index,
        qpn: qp.qpn(),
        psn: random_psn(),
        mtu,
        mr,
    };
    ep.validate()?;
    Ok(ep)
}

/// RESET → INIT → RTR → RTS of `qp` towards `remote`, path MTU = the smaller of the two
/// endpoints' MTUs unless `opts.path_mtu` says otherwise.
pub fn connect(
    qp: &mut Qp,
    local: &QpEndpoint,
    remote: &QpEndpoint,
    opts: &ConnectOpts,
) -> Result<()> {
    remote.validate()?;
    qp.connect(local, remote, opts)
}

/// The whole server-side bring-up: accept a peer on `listener`, swap endpoints, connect
/// `qp`, and sync with the peer once both are in RTS. Returns (local, remote).
pub fn connect_server(
    qp: &mut Qp,
    listener: &TcpListener,
    opts: &ConnectOpts,
    mr: Option<RemoteMr>,
    timeout: Duration,
) -> Result<(QpEndpoint, QpEndpoint)> {
    let local = local_endpoint(qp, opts, mr)?;
    let (remote, mut s) = exchange_server(listener, &local, timeout)?;
    connect(qp, &local, &remote, opts)?;
    sync(&mut s)?;
    Ok((local, remote))
}

/// The whole client-side bring-up: connect to `addr`, swap endpoints, connect `qp`, sync.
/// Returns (local, remote).
pub fn connect_client(
    qp: &mut Qp,
    addr: impl ToSocketAddrs,
    opts: &ConnectOpts,
    mr: Option<RemoteMr>,
    timeout: Duration,
) -> Result<(QpEndpoint, QpEndpoint)> {
    let local = local_endpoint(qp, opts, mr)?;
    let (remote, mut s) = exchange_client(addr, &local, timeout)?;
    connect(qp, &local, &remote, opts)?;
    sync(&mut s)?;
    Ok((local, remote))
}

// ---------------------------------------------------------------------------------------------
// ibv_rc_pingpong's text format
// ---------------------------------------------------------------------------------------------

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
