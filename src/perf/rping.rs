//! rdma-core's `rping` protocol over an RC QP connected by address through the RDMA CM
//! ([`crate::cm`]), one end per call ([`run`]); the peer may be `rping -s` / `rping -c`
//! (CM port [`RPING_PORT`] by default, as rping's). What `rdma-direct pingpong -R` runs.
//!
//! The protocol, per ping: the client fills its source buffer (rping's pattern: the text
//! `rdma-ping-<n>: ` then the letters `A`..`z` cycling, each ping starting one letter later,
//! the last byte 0) and SENDs a 16-byte advertisement (address u64, rkey u32, size u32, all
//! big-endian) of it; the server RDMA READs that many bytes into its buffer and SENDs a
//! 16-byte "go ahead"; the client advertises its sink buffer the same way; the server RDMA
//! WRITEs the string it read (up to and including its NUL) there and SENDs another "go ahead".
//! Each end keeps one receive of 16 bytes posted (a message of another length is an error, as
//! in rping). The client then compares the sink with the source byte for byte (rping's `-V`;
//! ours always does, after zeroing the sink first) and, after the last ping, disconnects; the
//! server serves pings until the CM reports the disconnect.
//!
//! Connection parameters are rping's: one READ each way (`initiator_depth` /
//! `responder_resources` 1), retry and RNR retry 7. Each wait is bounded ([`STALL`]): a peer
//! that stops answering ends the run with an error naming what was awaited.
//!
//! Contract: [`run`] opens its own PD, buffer, CQ and QP on the caller's provider, connects
//! (client, [`Opts::host`] set) or accepts one connection (server), runs the pings and
//! returns the lines that describe the run (provider, connection, pings, time); it prints
//! nothing. A data mismatch or a message of the wrong length is [`Error::Protocol`], an
//! error completion [`Error::Failed`], the server leaving early [`Error::Io`]
//! (`ConnectionReset`), a wait past [`STALL`] the stall error of [`Stall`].

use std::time::{Duration, Instant};

use crate::cm;
use crate::providers::helpers::Stall;
use crate::providers::{
    Access, Completion, CompletionQueue, ConnectOpts, MemoryRegion, Pages, Provider, QpConfig,
    QpType, QueuePair, RecvQueue, RecvWr, SendQueue, SendWr, WcStatus,
};
use crate::{Error, Result};

/// rping's CM port.
pub const RPING_PORT: u16 = 7174;
/// The longest any one step may take.
pub const STALL: Duration = Duration::from_secs(20);

/// One end's parameters.
#[derive(Clone, Debug)]
pub struct Opts {
    /// The server's address (client); `None`: serve one client.
    pub host: Option<String>,
    /// The CM port (rping's: [`RPING_PORT`]).
    pub port: u16,
    /// Pings the client runs.
    pub iters: u32,
    /// Bytes per ping (rping's `-S`); both ends the same.
    pub size: usize,
    /// Transport retry count of the QP.
    pub retry_cnt: u8,
    /// Local ACK timeout exponent (4.096 µs × 2^timeout).
    pub timeout: u8,
}

/// An error completion of a transfer this end drove.
fn fail(detail: String) -> Error {
    Error::Failed {
        context: "rping",
        detail,
    }
}

/// The peer broke the protocol.
fn perr(detail: String) -> Error {
    Error::Protocol {
        context: "rping",
        detail,
    }
}
/// The advertisement's length.
const INFO: usize = 16;

const WR_RECV: u64 = 1;
const WR_SEND: u64 = 2;
const WR_RDMA: u64 = 3;

// Buffer layout: receive slot | send slot | source | sink.
const RECV_AT: usize = 0;
const SEND_AT: usize = INFO;
const SRC_AT: usize = 2 * INFO;

/// rping's pattern for ping `ping` in `buf`.
pub fn pattern(buf: &mut [u8], ping: u32) {
    let text = format!("rdma-ping-{ping}: ");
    let n = text.len().min(buf.len());
    buf[..n].copy_from_slice(&text.as_bytes()[..n]);
    // Ping 0 starts at 'A'; each ping one letter later, wrapping after 'z'.
    let mut c = b'A' + (ping % 58) as u8;
    for b in &mut buf[n..] {
        *b = c;
        c = if c >= b'z' { b'A' } else { c + 1 };
    }
    if let Some(last) = buf.last_mut() {
        *last = 0;
    }
}

fn info(addr: u64, rkey: u32, size: u32) -> [u8; INFO] {
    let mut b = [0u8; INFO];
    b[..8].copy_from_slice(&addr.to_be_bytes());
    b[8..12].copy_from_slice(&rkey.to_be_bytes());
    b[12..].copy_from_slice(&size.to_be_bytes());
    b
}

fn parse_info(b: &[u8]) -> (u64, u32, u32) {
    let u = |r: std::ops::Range<usize>| b[r].iter().fold(0u64, |a, &x| a << 8 | u64::from(x));
    (u(0..8), u(8..12) as u32, u(12..16) as u32)
}

/// One end's resources; field order is drop order (the QP before its CQ, the buffer's MR
/// before the PD).
struct End<'c, P: Provider> {
    p: &'c mut P,
    qp: P::Qp,
    cq: P::Cq,
    buf: crate::providers::RegisteredBuf<P::Mr>,
    _pd: P::Pd,
    size: usize,
    conn: Option<cm::Connection>,
    /// Completions seen but not yet waited for, by wr_id.
    seen: [u32; 4],
}

impl<P: Provider> End<'_, P> {
    fn sink_at(&self) -> usize {
        SRC_AT + self.size
    }

    fn post_recv(&mut self) -> Result<()> {
        let sge = [self.buf.sge(RECV_AT, INFO)?];
        self.qp
            .rq()
            .post_recv(RecvWr::new(WR_RECV, &sge))
            .map_err(|r| r.error)?;
        self.qp.rq().ring();
        Ok(())
    }

    fn post(&mut self, wr: SendWr<'_, P::Ah>) -> Result<()> {
        self.qp.sq().post(wr.signaled()).map_err(|r| r.error)?;
        self.qp.sq().ring();
        Ok(())
    }

    fn send_info(&mut self, at: usize) -> Result<()> {
        let i = info(
            self.buf.sge(at, 1)?.addr,
            self.buf.mr().rkey(),
            self.size as u32,
        );
        self.buf.get_mut(SEND_AT, INFO)?.copy_from_slice(&i);
        let sge = [self.buf.sge(SEND_AT, INFO)?];
        self.post(SendWr::send(WR_SEND, &sge))
    }

    /// Waits for a completion of `wr_id` (other kinds are counted for later); a receive must
    /// carry exactly 16 bytes. The peer's disconnect ends the wait with `Ok(false)`, and so
    /// does a flushed request once it was seen (the disconnect moved the QP to ERR: what was
    /// outstanding is flushed, not failed).
    fn wait(&mut self, wr_id: u64, what: &str) -> Result<bool> {
        let mut stall = Stall::new(STALL);
        let mut wc = [Completion::EMPTY; 8];
        loop {
            if self.seen[wr_id as usize] > 0 {
                self.seen[wr_id as usize] -= 1;
                return Ok(true);
            }
            let n = self.cq.poll(&mut wc);
            for c in &wc[..n] {
                if !c.is_ok() {
                    let gone = self.conn.as_ref().is_some_and(|c| c.is_disconnected());
                    if gone && c.status == WcStatus::WrFlushErr {
                        return Ok(false);
                    }
                    return Err(fail(format!(
                        "{} completion of wr_id {} failed while waiting for {what}",
                        c.status, c.wr_id
                    )));
                }
                if c.wr_id == WR_RECV && c.byte_len as usize != INFO {
                    return Err(perr(format!(
                        "received {} bytes, the protocol's messages are {INFO}",
                        c.byte_len
                    )));
                }
                if let Some(s) = self.seen.get_mut(c.wr_id as usize) {
                    *s += 1;
                }
            }
            if n == 0 {
                if let Some(conn) = self.conn.as_mut() {
                    if let Err(e) = conn.check(self.p, &mut self.qp) {
                        if conn.is_disconnected() {
                            return Ok(false);
                        }
                        return Err(e);
                    }
                }
                stall.idle("rping", || what.to_string())?;
                std::thread::yield_now();
            }
        }
    }

    /// The advertisement just received; the receive is re-posted.
    fn take_info(&mut self) -> Result<(u64, u32, u32)> {
        let i = parse_info(self.buf.get(RECV_AT, INFO)?);
        self.post_recv()?;
        Ok(i)
    }
}

/// Opens one end: a buffer of 32 + 2 × size bytes, one CQ, an RC QP in RESET.
fn open<P: Provider>(p: &mut P, size: usize) -> Result<End<'_, P>> {
    let pd = p.alloc_pd()?;
    let buf = p.alloc_buf(&pd, SRC_AT + 2 * size, Access::ALL, Pages::Normal)?;
    let mut cq = p.create_cq(64)?;
    let mut cfg = QpConfig::new(QpType::Rc);
    cfg.caps.max_send_wr = 16;
    cfg.caps.max_recv_wr = 2;
    let qp = p.create_qp(&pd, &mut cq, None, None, &cfg)?;
    Ok(End {
        p,
        qp,
        cq,
        buf,
        _pd: pd,
        size,
        conn: None,
        seen: [0; 4],
    })
}

fn connect_opts(a: &Opts) -> ConnectOpts {
    ConnectOpts {
        max_rd_atomic: 1,
        max_dest_rd_atomic: 1,
        retry_cnt: a.retry_cnt,
        rnr_retry: 7,
        timeout: a.timeout,
        ..ConnectOpts::default()
    }
}

/// The server left before ping `ping` was done.
fn gone(ping: u32) -> Error {
    Error::Io {
        context: "rping".into(),
        kind: std::io::ErrorKind::ConnectionReset,
        detail: format!(
            "RDMA_CM_EVENT_DISCONNECTED: the server disconnected at ping {ping}; the QP was moved to ERR"
        ),
    }
}

/// [`run`] on the provider [`open_and_run`](crate::providers::choice::open_and_run) opens.
impl crate::providers::choice::Job for Opts {
    type Out = String;
    fn run<P: Provider>(&mut self, p: &mut P) -> Result<String>
    where
        P::Qp: Send,
        P::Cq: Send,
    {
        run(p, self)
    }
}

/// One end of the protocol (see the module doc): the lines describing the run.
pub fn run<P: Provider>(p: &mut P, a: &Opts) -> Result<String> {
    let port = a.port;
    let o = connect_opts(a);
    let t0 = Instant::now();
    let mut out = format!("provider: {} on {}\n", p.kind(), p.device_name());
    let mut e = open(p, a.size)?;
    match &a.host {
        Some(h) => {
            let conn = cm::connect_with(
                e.p,
                &mut e.qp,
                (h.as_str(), port),
                &o,
                None,
                cm::DEFAULT_TIMEOUT,
                |_, qp| post_recv_on(qp, &e.buf),
            )?;
            out += &format!(
                "client: connected to {h}:{port} by address (RDMA CM), local QPN 0x{:06x}, remote QPN 0x{:06x}\n",
                conn.local.qpn, conn.remote.qpn
            );
            e.conn = Some(conn);
            for ping in 0..a.iters {
                let size = e.size;
                pattern(e.buf.get_mut(SRC_AT, size)?, ping);
                let sink = e.sink_at();
                e.buf.get_mut(sink, size)?.fill(0);
                e.send_info(SRC_AT)?;
                e.wait(WR_SEND, "our source advertisement's completion")?;
                if !e.wait(WR_RECV, "the server's go-ahead after its RDMA READ")? {
                    return Err(gone(ping));
                }
                e.take_info()?;
                e.send_info(sink)?;
                e.wait(WR_SEND, "our sink advertisement's completion")?;
                if !e.wait(WR_RECV, "the server's go-ahead after its RDMA WRITE")? {
                    return Err(gone(ping));
                }
                e.take_info()?;
                let (src, dst) = (e.buf.get(SRC_AT, size)?, e.buf.get(sink, size)?);
                if let Some(i) = src.iter().zip(dst).position(|(x, y)| x != y) {
                    return Err(perr(format!(
                        "data mismatch at ping {ping}, byte {i}: sent {:#04x}, got back {:#04x}",
                        src[i], dst[i]
                    )));
                }
            }
            let conn = e.conn.take().expect("connected");
            conn.disconnect(e.p, &mut e.qp, cm::DEFAULT_TIMEOUT)?;
            out += &format!(
                "client: {} pings of {} bytes, every byte verified, disconnected ({:.2} s)\n",
                a.iters,
                a.size,
                t0.elapsed().as_secs_f64()
            );
        }
        None => {
            let mut l = cm::Listener::bind(("0.0.0.0", port))?;
            let conn = l.accept_with(
                e.p,
                &mut e.qp,
                &o,
                None,
                cm::DEFAULT_TIMEOUT.max(Duration::from_secs(60)),
                |_, qp| post_recv_on(qp, &e.buf),
            )?;
            drop(l);
            out += &format!(
                "server: accepted on port {port} (RDMA CM), local QPN 0x{:06x}, remote QPN 0x{:06x}\n",
                conn.local.qpn, conn.remote.qpn
            );
            e.conn = Some(conn);
            let mut pings = 0u32;
            loop {
                if !e.wait(WR_RECV, "the client's source advertisement")? {
                    break;
                }
                let (addr, rkey, len) = e.take_info()?;
                if len as usize > e.size {
                    return Err(perr(format!(
                        "the client's buffer is {len} bytes, ours {} (run both with the same size)",
                        e.size
                    )));
                }
                let sge = [e.buf.sge(SRC_AT, len as usize)?];
                e.post(SendWr::read(WR_RDMA, &sge, addr, rkey))?;
                if !e.wait(WR_RDMA, "our RDMA READ of the client's buffer")? {
                    break;
                }
                e.buf.get_mut(SEND_AT, INFO)?.fill(0);
                let sge = [e.buf.sge(SEND_AT, INFO)?];
                e.post(SendWr::send(WR_SEND, &sge))?;
                if !e.wait(WR_SEND, "our go-ahead's completion")? {
                    break;
                }
                if !e.wait(WR_RECV, "the client's sink advertisement")? {
                    break;
                }
                let (addr, rkey, _) = e.take_info()?;
                // The string read, up to and including its NUL.
                let data = e.buf.get(SRC_AT, len as usize)?;
                let n = data
                    .iter()
                    .position(|&b| b == 0)
                    .map_or(data.len(), |z| z + 1);
                let sge = [e.buf.sge(SRC_AT, n)?];
                e.post(SendWr::write(WR_RDMA, &sge, addr, rkey))?;
                if !e.wait(WR_RDMA, "our RDMA WRITE to the client's sink")? {
                    break;
                }
                // The ping is served: the client's buffer came back in its sink. The client
                // may disconnect as soon as the go-ahead lands, before its completion here.
                pings += 1;
                let sge = [e.buf.sge(SEND_AT, INFO)?];
                e.post(SendWr::send(WR_SEND, &sge))?;
                if !e.wait(WR_SEND, "our go-ahead's completion")? {
                    break;
                }
            }
            out += &format!(
                "server: {pings} pings served, the client disconnected ({:.2} s)\n",
                t0.elapsed().as_secs_f64()
            );
        }
    }
    Ok(out)
}

fn post_recv_on<Q: QueuePair, M: MemoryRegion>(
    qp: &mut Q,
    buf: &crate::providers::RegisteredBuf<M>,
) -> Result<()> {
    let sge = [buf.sge(RECV_AT, INFO)?];
    qp.rq()
        .post_recv(RecvWr::new(WR_RECV, &sge))
        .map_err(|r| r.error)?;
    qp.rq().ring();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pattern_is_rpings() {
        let mut b = [0u8; 24];
        pattern(&mut b, 0);
        assert_eq!(&b, b"rdma-ping-0: ABCDEFGHIJ\0");
        pattern(&mut b, 1);
        assert_eq!(&b, b"rdma-ping-1: BCDEFGHIJK\0");
        let mut b = [0u8; 20];
        pattern(&mut b, 57);
        assert_eq!(&b, b"rdma-ping-57: zABCD\0");
    }

    #[test]
    fn the_advertisement_is_big_endian_and_round_trips() {
        let i = info(0x0102_0304_0506_0708, 0x0a0b_0c0d, 64);
        assert_eq!(
            i,
            [1, 2, 3, 4, 5, 6, 7, 8, 0x0a, 0x0b, 0x0c, 0x0d, 0, 0, 0, 64]
        );
        assert_eq!(parse_info(&i), (0x0102_0304_0506_0708, 0x0a0b_0c0d, 64));
    }
}
