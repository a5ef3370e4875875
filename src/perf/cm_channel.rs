//! perftest's `-R` control channel: an RC connection made through the RDMA CM on the test's
//! port, carrying perftest's exchange as messages, one SEND per message (perftest's
//! `rdma_write_data` / `rdma_read_data`: each side keeps a receive of
//! [`DEST_LEN`](super::wire::DEST_LEN) bytes posted and re-posts it after each message).
//!
//! [`CmChannel`] is a `Read + Write` for [`super::wire::Wire::new_cm`]: each `write` call is
//! one SEND (and waits for its completion), each `read` takes bytes from the oldest received
//! message. Its QP, CQ and buffer are its own, on the provider of the test. [`Channel`] is
//! either kind of control channel (TCP or this), made from a host and port.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::cm;
use crate::providers::helpers::Stall;
use crate::providers::{
    Access, Completion, CompletionQueue, ConnectOpts, Pages, Provider, QpConfig, QpType, QueuePair,
    RecvQueue, RecvWr, RegisteredBuf, SendQueue, SendWr,
};
use crate::{Error, Result};

/// Largest message either way (perftest's are at most 56 bytes; two copies of this tool send
/// 256 bytes of test parameters).
const SLOT: usize = 1024;
/// Receives kept posted.
const RECVS: usize = 2;
/// A read or write that sees no completion for this long fails with the stall error (a
/// bandwidth server waits in a handshake for the whole run of the client).
const WAIT: Duration = Duration::from_secs(600);
const WR_SEND: u64 = u64::MAX;

/// The control channel (see the module doc). Field order is drop order: the CM id, the QP,
/// its CQ, the buffer, the PD.
pub struct CmChannel<P: Provider> {
    conn: cm::Connection,
    qp: P::Qp,
    cq: P::Cq,
    buf: RegisteredBuf<P::Mr>,
    _pd: P::Pd,
    /// The message being read and how far.
    cur: Vec<u8>,
    at: usize,
    /// Messages received while waiting for a send completion.
    pending: std::collections::VecDeque<Vec<u8>>,
}

/// A channel's resources before it connects.
type Parts<P> = (
    <P as Provider>::Pd,
    RegisteredBuf<<P as Provider>::Mr>,
    <P as Provider>::Cq,
    <P as Provider>::Qp,
);

fn setup<P: Provider>(p: &mut P) -> Result<Parts<P>> {
    let pd = p.alloc_pd()?;
    let buf = p.alloc_buf(&pd, SLOT * (RECVS + 1), Access::LOCAL_WRITE, Pages::Normal)?;
    let mut cq = p.create_cq(16)?;
    let mut cfg = QpConfig::new(QpType::Rc);
    cfg.caps.max_send_wr = 4;
    cfg.caps.max_recv_wr = RECVS as u32 + 1;
    let qp = p.create_qp(&pd, &mut cq, None, None, &cfg)?;
    Ok((pd, buf, cq, qp))
}

fn opts() -> ConnectOpts {
    ConnectOpts {
        max_rd_atomic: 0,
        max_dest_rd_atomic: 0,
        rnr_retry: 7,
        ..ConnectOpts::default()
    }
}

fn post_recvs<Q: QueuePair, M: crate::providers::MemoryRegion>(
    qp: &mut Q,
    buf: &RegisteredBuf<M>,
) -> Result<()> {
    for i in 0..RECVS {
        let sge = [buf.sge((i + 1) * SLOT, SLOT)?];
        qp.rq()
            .post_recv(RecvWr::new(i as u64, &sge))
            .map_err(|r| r.error)?;
    }
    qp.rq().try_ring()?;
    Ok(())
}

impl<P: Provider> CmChannel<P> {
    /// Client: connect to perftest's (or our) server at `addr`; a reject (the server not
    /// listening yet) is retried ten times 100 ms apart, as perftest's client.
    pub fn connect(p: &mut P, addr: SocketAddr) -> Result<CmChannel<P>> {
        let (pd, buf, cq, mut qp) = setup(p)?;
        let mut n = 0;
        let conn = loop {
            n += 1;
            let r = cm::connect_with(
                p,
                &mut qp,
                addr,
                &opts(),
                None,
                cm::DEFAULT_TIMEOUT,
                |_, qp| post_recvs(qp, &buf),
            );
            match r {
                Err(crate::Error::Io {
                    kind: io::ErrorKind::ConnectionRefused,
                    ..
                }) if n < 10 => std::thread::sleep(Duration::from_millis(100)),
                r => break r?,
            }
        };
        Ok(Self::new(conn, qp, cq, buf, pd))
    }

    /// Server: accept one client on `l` (within `timeout`).
    pub fn accept(p: &mut P, l: &mut cm::Listener, timeout: Duration) -> Result<CmChannel<P>> {
        let (pd, buf, cq, mut qp) = setup(p)?;
        let conn = l.accept_with(p, &mut qp, &opts(), None, timeout, |_, qp| {
            post_recvs(qp, &buf)
        })?;
        Ok(Self::new(conn, qp, cq, buf, pd))
    }

    fn new(
        conn: cm::Connection,
        qp: P::Qp,
        cq: P::Cq,
        buf: RegisteredBuf<P::Mr>,
        pd: P::Pd,
    ) -> CmChannel<P> {
        CmChannel {
            conn,
            qp,
            cq,
            buf,
            _pd: pd,
            cur: Vec::new(),
            at: 0,
            pending: Default::default(),
        }
    }

    /// The CM connection (its peer address, its disconnect).
    pub fn connection(&self) -> &cm::Connection {
        &self.conn
    }

    /// Polls until `done` says so; received messages are queued (and their receives
    /// re-posted) on the way.
    fn poll_until(
        &mut self,
        what: &str,
        mut done: impl FnMut(&Completion) -> bool,
    ) -> io::Result<()> {
        let mut stalled = Stall::new(WAIT);
        let mut wc = [Completion::EMPTY; 4];
        loop {
            let n = self.cq.poll(&mut wc);
            let mut hit = false;
            for c in &wc[..n] {
                if !c.is_ok() {
                    return Err(io::Error::other(format!(
                        "perftest -R channel: {} completion (wr_id {}) while waiting for {what}",
                        c.status, c.wr_id
                    )));
                }
                if c.wr_id != WR_SEND {
                    let slot = (c.wr_id as usize + 1) * SLOT;
                    let len = (c.byte_len as usize).min(SLOT);
                    let m = self.buf.get(slot, len).map_err(io::Error::other)?.to_vec();
                    self.pending.push_back(m);
                    let sge = [self.buf.sge(slot, SLOT).map_err(io::Error::other)?];
                    self.qp
                        .rq()
                        .post_recv(RecvWr::new(c.wr_id, &sge))
                        .map_err(|r| io::Error::other(r.error))?;
                    self.qp.rq().try_ring().map_err(io::Error::other)?;
                }
                hit |= done(c);
            }
            if hit {
                return Ok(());
            }
            if n == 0 {
                // The library's stall error, as an I/O timeout (this is the run's channel).
                stalled
                    .idle("perftest -R channel", || what.to_string())
                    .map_err(|e| io::Error::new(io::ErrorKind::TimedOut, e))?;
                std::thread::yield_now();
            } else {
                stalled.progressed();
            }
        }
    }
}

impl<P: Provider> Write for CmChannel<P> {
    /// One SEND of all of `b` (at most 1024 bytes), waiting for its completion.
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        if b.len() > SLOT {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "perftest -R channel: a {} B message (at most {SLOT})",
                    b.len()
                ),
            ));
        }
        self.buf
            .get_mut(0, b.len())
            .map_err(io::Error::other)?
            .copy_from_slice(b);
        let sge = [self.buf.sge(0, b.len()).map_err(io::Error::other)?];
        self.qp
            .sq()
            .post(SendWr::send(WR_SEND, &sge).signaled())
            .map_err(|r| io::Error::other(r.error))?;
        self.qp.sq().try_ring().map_err(io::Error::other)?;
        self.poll_until("a SEND's completion", |c| c.wr_id == WR_SEND)?;
        Ok(b.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<P: Provider> Read for CmChannel<P> {
    /// Bytes of the oldest received message (waiting for one when none is left).
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.at >= self.cur.len() {
            if self.pending.is_empty() {
                self.poll_until("the peer's message", |c| c.wr_id != WR_SEND)?;
            }
            self.cur = self.pending.pop_front().unwrap_or_default();
            self.at = 0;
        }
        let n = out.len().min(self.cur.len() - self.at);
        out[..n].copy_from_slice(&self.cur[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// perftest's control channel, either kind: its TCP connection ([`super::remote::connect`] /
/// [`super::remote::accept`]), or its `-R` connection through the RDMA CM ([`CmChannel`]).
pub enum Channel<P: Provider> {
    Tcp(TcpStream),
    Cm(Box<CmChannel<P>>),
}

impl<P: Provider> Channel<P> {
    /// The client's channel to `host:port`: TCP, or with `cm` a CM connection to the first
    /// IPv4 address of `host` (perftest's RDMA CM exchange speaks IPv4), whose address is
    /// returned for [`Params::rdma_cm`](super::Params::rdma_cm).
    pub fn connect(
        p: &mut P,
        host: &str,
        port: u16,
        cm: bool,
    ) -> Result<(Channel<P>, Option<SocketAddr>)> {
        if !cm {
            return Ok((Channel::Tcp(super::remote::connect(host, port)?), None));
        }
        let at = (host, port)
            .to_socket_addrs()
            .map_err(|e| Error::io(format!("perf (RDMA CM): resolving {host}"), &e))?
            .find(|a| a.is_ipv4())
            .ok_or_else(|| Error::InvalidArgument {
                context: "perf (RDMA CM)",
                detail: format!(
                    "{host}: no IPv4 address (perftest's RDMA CM exchange speaks IPv4)"
                ),
            })?;
        Ok((Channel::Cm(Box::new(CmChannel::connect(p, at)?)), Some(at)))
    }

    /// The server's channel: waits on `port` (TCP, or with `cm` the RDMA CM, for up to an
    /// hour) for one client; with `cm`, the address listened on.
    pub fn accept(p: &mut P, port: u16, cm: bool) -> Result<(Channel<P>, Option<SocketAddr>)> {
        if !cm {
            return Ok((Channel::Tcp(super::remote::accept(port)?), None));
        }
        let at = SocketAddr::from(([0, 0, 0, 0], port));
        let mut l = cm::Listener::bind(at)?;
        let ch = CmChannel::accept(p, &mut l, Duration::from_secs(3600))?;
        // perftest's server closes its control listener before the test's CM connection
        // listens on the same port.
        drop(l);
        Ok((Channel::Cm(Box::new(ch)), Some(at)))
    }
}

impl<P: Provider> Read for Channel<P> {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            Channel::Tcp(s) => s.read(b),
            Channel::Cm(c) => c.read(b),
        }
    }
}

impl<P: Provider> Write for Channel<P> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match self {
            Channel::Tcp(s) => s.write(b),
            Channel::Cm(c) => c.write(b),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Channel::Tcp(s) => s.flush(),
            Channel::Cm(c) => c.flush(),
        }
    }
}
