//! What both ends of the two-process mode share: the QP with its CQ and ring, the order
//! bytes and checksum, the TCP side channel, the drain after a fault.

use super::*;

/// Order slots in the receiver's ring (a multiple of `BATCH`): the gateway's window.
pub(super) const RING: u64 = 64;
/// The gateway's credit receives kept posted (the receiver confirms once per batch, at most
/// `RING / BATCH` batches unconfirmed).
pub(super) const CREDITS: u32 = (RING / BATCH) as u32 + 2;
/// A gateway with nothing in flight for this long writes a heartbeat (8 bytes into a slot of
/// the receiver's ring past the orders): a peer that vanished while the gateway waited for
/// credit is then found from a completion too, within the retry budget.
pub(super) const HEARTBEAT: Duration = Duration::from_millis(200);
/// How long a drain waits for the outstanding requests to end after the first error.
pub(super) const DRAIN: Duration = Duration::from_secs(5);
/// How long the gateway keeps trying to reach a restarted receiver.
pub(super) const RECONNECT: Duration = Duration::from_secs(120);
/// wr_id of the heartbeat write (orders use their sequence number).
pub(super) const HB_ID: u64 = u64::MAX >> 2;
/// Set in the wr_id of every receive: a flushed completion's opcode is not reliable (verbs
/// leaves it undefined), its wr_id is.
pub(super) const RECV_ID: u64 = 1 << 62;

/// Whether `c` is a receive's completion (by its wr_id, which a flush keeps).
pub(super) fn is_recv(c: &Completion) -> bool {
    c.wr_id & RECV_ID != 0
}

/// The transport's bound for a vanished peer: each request is sent `retry_cnt + 1` times,
/// one local ACK timeout (4.096 us x 2^`timeout`) apart, then ends in `RETRY_EXC_ERR`.
pub(super) fn device_opts(gid: u8) -> ConnectOpts {
    ConnectOpts {
        gid_index: gid,
        timeout: 16,  // 268 ms
        retry_cnt: 2, // 3 tries: about 0.8 s
        ..ConnectOpts::default()
    }
}

/// The retry budget of `device_opts` in seconds.
pub(super) fn retry_budget(o: &ConnectOpts) -> f64 {
    f64::from(o.retry_cnt + 1) * 4.096e-6 * f64::from(1u32 << o.timeout)
}

/// Order `seq`'s 64 bytes: its number, then 7 copies of a hash of it (little endian).
pub(super) fn order_bytes(seq: u64) -> [u8; ORDER] {
    let mut o = [0u8; ORDER];
    o[..8].copy_from_slice(&seq.to_le_bytes());
    let mut z = seq.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    for c in o[8..].chunks_mut(8) {
        c.copy_from_slice(&z.to_le_bytes());
    }
    o
}

/// FNV-1a over the bytes of a stream of orders, continued from `h`.
pub(super) fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    h
}
pub(super) const FNV0: u64 = 0xcbf2_9ce4_8422_2325;

pub(super) fn proto(detail: String) -> Error {
    Error::Protocol {
        context: "reconnect example",
        detail,
    }
}

pub(super) fn read_u64(s: &mut std::net::TcpStream, what: &str) -> Result<u64> {
    use std::io::Read;
    let mut b = [0u8; 8];
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .and_then(|()| s.read_exact(&mut b))
        .map_err(|e| Error::io(format!("reconnect: reading {what}"), &e))?;
    Ok(u64::from_le_bytes(b))
}

pub(super) fn write_u64(s: &mut std::net::TcpStream, v: u64, what: &str) -> Result<()> {
    use std::io::Write;
    s.write_all(&v.to_le_bytes())
        .map_err(|e| Error::io(format!("reconnect: sending {what}"), &e))
}

/// Whether the peer closed (or reset) the TCP connection of the exchange: a process that
/// died, or a gateway that gave its QP up. Non-blocking.
pub(super) fn peer_closed(s: &std::net::TcpStream) -> bool {
    let mut b = [0u8; 1];
    if s.set_nonblocking(true).is_err() {
        return true;
    }
    let r = s.peek(&mut b);
    let _ = s.set_nonblocking(false);
    match r {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    }
}

/// How the requests outstanding at a fault ended: the first error, the flushes, and what
/// never came back within `DRAIN` (must be 0: nothing silent).
pub(super) struct Drain {
    /// The first error, `None` when the fault came from elsewhere (the QP moved to ERR here).
    pub(super) first: Option<WcStatus>,
    pub(super) what: &'static str,
    pub(super) sends: u64,
    pub(super) recvs: u64,
    pub(super) flushed: u64,
    pub(super) other: u64,
    pub(super) missing: u64,
    pub(super) secs: f64,
    /// `to_error` calls again after a second without completions.
    pub(super) kicks: u32,
    pub(super) note: String,
}

impl std::fmt::Display for Drain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "failed status {} ({}); drain: outstanding={} sends={} receives={} first_error={} \
             flushed={} other={} missing={} in {:.2} s (to_error again: {}){}",
            self.first.map_or("none".into(), |s| format!("{s:?}")),
            self.what,
            self.sends + self.recvs,
            self.sends,
            self.recvs,
            u8::from(self.first.is_some()),
            self.flushed,
            self.other,
            self.missing,
            self.secs,
            self.kicks,
            self.note
        )
    }
}

/// After a fault (`first` is the error completion already polled, `None` when the fault
/// came from elsewhere and `qp` is to be failed here; `rest` what that poll returned after
/// it): the QP goes to ERR (if the device has not put it there) and every request still
/// outstanding is polled to its end. `sends` / `recvs`: requests outstanding before `first`
/// was counted.
pub(super) fn drain_fault<P: Provider>(
    p: &mut P,
    qp: &mut P::Qp,
    cq: &mut P::Cq,
    first: Option<&Completion>,
    rest: &[Completion],
    mut sends: u64,
    mut recvs: u64,
) -> Drain {
    let t = std::time::Instant::now();
    let (out_s, out_r) = (sends, recvs);
    let mut d = Drain {
        first: first.map(|c| c.status),
        what: first.map_or(
            "the peer closed the connection; QP moved to ERR here",
            |c| {
                if is_recv(c) {
                    "on a receive"
                } else {
                    "on a send"
                }
            },
        ),
        sends: out_s,
        recvs: out_r,
        flushed: 0,
        other: 0,
        missing: 0,
        secs: 0.0,
        kicks: 0,
        note: String::new(),
    };
    if let Some(c) = first {
        if is_recv(c) {
            recvs -= 1;
        } else {
            sends = sends.saturating_sub(1 + u64::from(c.covered));
            d.other += u64::from(c.covered);
        }
    }
    // Also when the device failed the QP already: on rxe 6.1 the transition flushes the
    // receives posted after the device failed it (before its error completion was polled),
    // which would otherwise never complete.
    if let Err(e) = p.to_error(qp) {
        d.note = format!(" (to_error: {e})");
    }
    let mut wc = [Completion::EMPTY; 32];
    let mut last = std::time::Instant::now();
    let mut batch = rest.len();
    wc[..batch].copy_from_slice(rest);
    while sends + recvs > 0 && last.elapsed() < DRAIN {
        let n = if batch > 0 {
            std::mem::take(&mut batch)
        } else {
            cq.poll(&mut wc)
        };
        if n == 0 {
            p.progress();
            // Nothing for a second with requests still out: move the QP to ERR once more
            // (counted; rxe runs its flush again).
            if last.elapsed() > Duration::from_secs(1) * (d.kicks + 1) && d.kicks < 3 {
                d.kicks += 1;
                let _ = p.to_error(qp);
            }
            continue;
        }
        last = std::time::Instant::now();
        for c in &wc[..n] {
            let k = if is_recv(c) {
                recvs = recvs.saturating_sub(1);
                1
            } else {
                sends = sends.saturating_sub(1 + u64::from(c.covered));
                1 + u64::from(c.covered)
            };
            if c.status == WcStatus::WrFlushErr {
                d.flushed += k;
            } else {
                d.other += k;
            }
        }
    }
    d.missing = sends + recvs;
    d.secs = t.elapsed().as_secs_f64();
    d
}

/// One connection's QP and CQ (a new pair per connection: works on every provider).
pub(super) struct Link<P: Provider> {
    pub(super) qp: P::Qp,
    pub(super) cq: P::Cq,
}

pub(super) fn new_link<P: Provider>(
    p: &mut P,
    pd: &P::Pd,
    send_wr: u32,
    recv_wr: u32,
) -> Result<Link<P>> {
    let mut cq = p.create_cq(send_wr + recv_wr)?;
    let mut c = QpConfig::new(QpType::Rc);
    (c.caps.max_send_wr, c.caps.max_recv_wr) = (send_wr, recv_wr);
    let qp = p.create_qp(pd, &mut cq, None, None, &c)?;
    Ok(Link { qp, cq })
}

/// What a post refusal means here: a QP the device failed (a fault to recover from), or a
/// bug (an error).
pub(super) fn post_fault(e: &PostError) -> bool {
    matches!(e, PostError::BadState { .. } | PostError::CqError { .. })
}
