//! The TCP exchange and the RC/UC bring-up over the control path.
//!
//! [`write_endpoint`] / [`read_endpoint`] carry one binary endpoint message over any byte
//! stream; [`read_endpoint`] checks the header before reading the body, so a peer announcing
//! an absurd length costs nothing. [`exchange_server`] / [`exchange_client`] swap endpoints
//! over TCP (client writes first); [`connect_server`] / [`connect_client`] do the whole RC/UC
//! bring-up of a control-path QP with path MTU = the smaller of the two ports' active MTUs
//! (the providers crate's `connect::connect_qp_server` does the same for any provider's QP).
//!
//! The timeout given is one deadline for the whole exchange (accept or connect, every read
//! and write, the sync): a peer that drips one byte at a time cannot stretch it, and running
//! out of it is an [`Error::Io`] of kind `TimedOut` saying
//! "timed out after N s waiting for the peer's endpoint" (or "sync").

use super::codec::{proto, QpEndpoint, RemoteMr, HEADER_LEN, MAX_MESSAGE_LEN};
use crate::control::Qp;
use crate::error::{Error, Result};
use crate::types::ConnectOpts;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Default deadline of the TCP exchange (connect or accept, reads, writes and sync together).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

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

/// One deadline for a whole exchange.
#[derive(Clone, Copy, Debug)]
pub struct Deadline {
    at: Instant,
    total: Duration,
}

impl Deadline {
    /// A deadline `total` from now.
    pub fn after(total: Duration) -> Self {
        Deadline {
            at: Instant::now() + total,
            total,
        }
    }

    /// Time left, or the timeout error naming what we were waiting for.
    fn left(&self, waiting_for: &str) -> Result<Duration> {
        let left = self.at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(self.expired(waiting_for));
        }
        Ok(left)
    }

    fn expired(&self, waiting_for: &str) -> Error {
        Error::Io {
            context: "endpoint exchange".into(),
            kind: std::io::ErrorKind::TimedOut,
            detail: format!(
                "timed out after {} s waiting for the peer's {waiting_for}",
                self.total.as_secs_f64()
            ),
        }
    }
}

/// `read_exact` on a socket within `dl`: each read waits at most the time left.
fn read_exact_by(
    s: &mut TcpStream,
    buf: &mut [u8],
    what: &str,
    waiting_for: &str,
    dl: &Deadline,
) -> Result<()> {
    let mut got = 0;
    while got < buf.len() {
        let left = dl.left(waiting_for)?;
        s.set_read_timeout(Some(left))
            .map_err(|e| Error::io("endpoint exchange: socket options", &e))?;
        match s.read(&mut buf[got..]) {
            Ok(0) => {
                return Err(proto(format!(
                    "truncated {what}: peer closed after {got} of {} bytes",
                    buf.len()
                )))
            }
            Ok(n) => got += n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::Interrupted
                        | std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(Error::io(format!("endpoint exchange: read {what}"), &e)),
        }
    }
    Ok(())
}

fn write_by(s: &mut TcpStream, b: &[u8], what: &str, dl: &Deadline) -> Result<()> {
    let left = dl.left(what)?;
    s.set_write_timeout(Some(left))
        .and_then(|()| s.write_all(b))
        .and_then(|()| s.flush())
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => dl.expired(what),
            _ => Error::io(format!("endpoint exchange: write {what}"), &e),
        })
}

/// Reads one endpoint message from a socket within `dl`.
pub fn read_endpoint_by(s: &mut TcpStream, dl: &Deadline) -> Result<QpEndpoint> {
    let mut b = [0u8; MAX_MESSAGE_LEN];
    read_exact_by(s, &mut b[..HEADER_LEN], "header", "endpoint", dl)?;
    let len = QpEndpoint::decode_header(&b[..HEADER_LEN])?;
    read_exact_by(
        s,
        &mut b[HEADER_LEN..HEADER_LEN + len],
        "body",
        "endpoint",
        dl,
    )?;
    QpEndpoint::decode(&b[..HEADER_LEN + len])
}

/// Writes one endpoint message to a socket within `dl`.
pub fn write_endpoint_by(s: &mut TcpStream, ep: &QpEndpoint, dl: &Deadline) -> Result<()> {
    write_by(s, &ep.encode()?, "endpoint", dl)
}

/// Reads one binary endpoint message: the header is checked before the body is read.
pub fn read_endpoint(r: &mut impl Read) -> Result<QpEndpoint> {
    let mut b = [0u8; MAX_MESSAGE_LEN];
    read_exact_or(r, &mut b[..HEADER_LEN], "header")?;
    let len = QpEndpoint::decode_header(&b[..HEADER_LEN])?;
    read_exact_or(r, &mut b[HEADER_LEN..HEADER_LEN + len], "body")?;
    QpEndpoint::decode(&b[..HEADER_LEN + len])
}

fn set_nodelay(s: &TcpStream) -> Result<()> {
    s.set_nodelay(true)
        .map_err(|e| Error::io("endpoint exchange: socket options", &e))
}

/// Accepts one connection before `dl`.
pub fn accept_by(listener: &TcpListener, dl: &Deadline) -> Result<TcpStream> {
    let (deadline, timeout) = (dl.at, dl.total);
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

/// Server side: accepts one peer, reads its endpoint, sends `local`, all within `timeout`.
/// Returns the peer's endpoint and the connection (kept for a later sync or teardown).
pub fn exchange_server(
    listener: &TcpListener,
    local: &QpEndpoint,
    timeout: Duration,
) -> Result<(QpEndpoint, TcpStream)> {
    exchange_server_by(listener, local, &Deadline::after(timeout))
}

pub fn exchange_server_by(
    listener: &TcpListener,
    local: &QpEndpoint,
    dl: &Deadline,
) -> Result<(QpEndpoint, TcpStream)> {
    let mut s = accept_by(listener, dl)?;
    set_nodelay(&s)?;
    let remote = read_endpoint_by(&mut s, dl)?;
    write_endpoint_by(&mut s, local, dl)?;
    Ok((remote, s))
}

/// Client side: connects to `addr`, sends `local`, reads the server's endpoint, all within
/// `timeout`.
pub fn exchange_client(
    addr: impl ToSocketAddrs,
    local: &QpEndpoint,
    timeout: Duration,
) -> Result<(QpEndpoint, TcpStream)> {
    exchange_client_by(addr, local, &Deadline::after(timeout))
}

pub fn exchange_client_by(
    addr: impl ToSocketAddrs,
    local: &QpEndpoint,
    dl: &Deadline,
) -> Result<(QpEndpoint, TcpStream)> {
    let addrs: Vec<_> = addr
        .to_socket_addrs()
        .map_err(|e| Error::io("endpoint exchange: resolve", &e))?
        .collect();
    let mut last = None;
    let mut stream = None;
    for a in &addrs {
        let left = dl.left("endpoint")?;
        match TcpStream::connect_timeout(a, left) {
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
    set_nodelay(&s)?;
    write_endpoint_by(&mut s, local, dl)?;
    let remote = read_endpoint_by(&mut s, dl)?;
    Ok((remote, s))
}

/// One byte each way: returns once the peer has reached the same point (both QPs are in
/// RTS, so neither side sends to a QP that cannot receive yet). Waits at most
/// [`DEFAULT_TIMEOUT`].
pub fn sync(s: &mut TcpStream) -> Result<()> {
    sync_by(s, &Deadline::after(DEFAULT_TIMEOUT))
}

pub fn sync_by(s: &mut TcpStream, dl: &Deadline) -> Result<()> {
    write_by(s, b"R", "sync", dl)?;
    let mut b = [0u8; 1];
    read_exact_by(s, &mut b, "sync byte", "sync", dl)?;
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
        Err(e) if port.link_layer == crate::control::LinkLayer::Ethernet => return Err(e),
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
    let dl = Deadline::after(timeout);
    let local = local_endpoint(qp, opts, mr)?;
    let (remote, mut s) = exchange_server_by(listener, &local, &dl)?;
    connect(qp, &local, &remote, opts)?;
    sync_by(&mut s, &dl)?;
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
    let dl = Deadline::after(timeout);
    let local = local_endpoint(qp, opts, mr)?;
    let (remote, mut s) = exchange_client_by(addr, &local, &dl)?;
    connect(qp, &local, &remote, opts)?;
    sync_by(&mut s, &dl)?;
    Ok((local, remote))
}
