//! The measured loops of an in-process run: [`lat_loop`] (one size of a latency test) and
//! [`bw_loop`] (one size of a bandwidth test), as the parent module's doc states them.
//!
//! Contract: a loop fills the timestamp arrays it is given (and, with `--hw-ts`, the device
//! times) and allocates nothing: everything it uses was prepared before its first stamp. A
//! failed post or completion ends the size with an error.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::providers::{
    Completion, CompletionQueue, ConnectOpts, MemoryRegion, Provider, QpType, QueuePair, SendOp,
    SendQueue, SendWr, Sge, UdDest, WcStatus,
};
use crate::Result;

use super::bed::{refill_recvs, Bed, Side};
use super::clock::Clock;
use super::pingpong::{self, Kind, Waiter};
use super::{bad_opt, perr, Params, Test, RX_DEPTH, TX_DEPTH};

/// Poll `cq` until one completion arrives; it must be a success.
fn wait_one<P: Provider>(
    p: &mut P,
    cq: &mut P::Cq,
    wc: &mut [Completion; 1],
    ts: Option<&mut u64>,
    w: &mut Waiter<'_>,
    what: &str,
) -> Result<Completion> {
    w.reset();
    let mut ns = [0u64];
    loop {
        let got = match ts {
            Some(_) => cq.poll_ts(wc, &mut ns),
            None => cq.poll(wc),
        };
        if got == 1 {
            if let Some(t) = ts {
                *t = ns[0];
            }
            let c = wc[0];
            if !c.is_ok() {
                return Err(perr(format!(
                    "{what}: completion wr_id {} failed: {} (vendor_err {:#x})",
                    c.wr_id, c.status, c.vendor_err
                )));
            }
            return Ok(c);
        }
        p.progress();
        w.tick(what)?;
    }
}

fn post_one<P: Provider>(s: &mut Side<P>, wr: SendWr<'_, P::Ah>) -> Result<()> {
    if let Err(r) = s.qp.sq().post_and_ring(wr) {
        return Err(perr(format!("post {}: {}", wr.op.name(), r.error)));
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub(super) fn lat_loop<P: Provider>(
    p: &mut P,
    o: &Params,
    bed: &mut Bed<P>,
    size: u32,
    tposted: &mut [u64],
    away: &mut [u64],
    cqe_ns: &mut [u64],
    two_threads: bool,
) -> Result<u64>
where
    P::Qp: Send,
    P::Cq: Send,
{
    let n = o.iters as usize;
    let half = bed.half;
    let use_inline = size <= o.inline && !o.test.is_read_like();
    // Every receive takes the run's largest message (see the bed's doc).
    let recv_len = bed.recv_len;
    let (c_rkey, s_rkey) = (bed.client.buf.rkey(), bed.server.buf.rkey());
    let (c_base, s_base) = (bed.client.base as usize, bed.server.base as usize);
    let (c_qpn, s_qpn) = (bed.client.ep.qpn, bed.server.ep.qpn);
    let c_src = [bed.client.buf.mr().sge(0, size)];
    let s_src = [bed.server.buf.mr().sge(0, size)];
    // READ lands in the client's incoming half; the atomic's old value too (8 bytes).
    let c_dst = [bed.client.buf.mr().sge(half, size)];
    let last = size as usize - 1;
    // The incoming bytes start at 0: the first expected value is 1.
    for at in [c_base + half + last, s_base + half + last] {
        pingpong::write_byte(at, 0);
    }
    let stop = AtomicBool::new(false);
    let mut w = Waiter::new(&stop);
    let mut wc = [Completion::EMPTY];
    tposted.fill(0);
    away.fill(0);
    cqe_ns.fill(0);
    let clock = Clock::start();
    let stamp = || clock.ticks().max(1);
    match o.test {
        Test::WriteLat | Test::SendLat => {
            let qkey = ConnectOpts::default().qkey;
            let (d_server, d_client) = match bed.ahs.as_ref() {
                Some((to_s, to_c)) => (
                    Some(UdDest {
                        ah: to_s,
                        remote_qpn: s_qpn,
                        remote_qkey: qkey,
                    }),
                    Some(UdDest {
                        ah: to_c,
                        remote_qpn: c_qpn,
                        remote_qkey: qkey,
                    }),
                ),
                None => (None, None),
            };
            let write = o.test == Test::WriteLat;
            // Inline payloads are copied into the WQE at post time, so they come from
            // ordinary memory, prepared before the clock starts.
            let inline = vec![0u8; if use_inline { size as usize } else { 0 }];
            let (cl, sv) = (&mut bed.client, &mut bed.server);
            let mut ce = pingpong::End {
                kind: if write {
                    Kind::Write {
                        raddr: (s_base + half) as u64,
                        rkey: s_rkey,
                    }
                } else {
                    Kind::Send
                },
                src: c_src,
                recv: [cl.buf.mr().sge(half, recv_len)],
                inline: inline.clone(),
                out_last: c_base + last,
                in_last: c_base + half + last,
                dest: d_server,
                iters: o.iters,
                outstanding: 0,
                routs: cl.routs,
                early: 0,
                rx_depth: RX_DEPTH,
                qp: &mut cl.qp,
                cq: &mut cl.cq,
                cqe_ns: &mut *cqe_ns,
            };
            let mut se = pingpong::End {
                kind: if write {
                    Kind::Write {
                        raddr: (c_base + half) as u64,
                        rkey: c_rkey,
                    }
                } else {
                    Kind::Send
                },
                src: s_src,
                recv: [sv.buf.mr().sge(half, recv_len)],
                inline,
                out_last: s_base + last,
                in_last: s_base + half + last,
                dest: d_client,
                iters: o.iters,
                outstanding: 0,
                routs: sv.routs,
                early: 0,
                rx_depth: RX_DEPTH,
                qp: &mut sv.qp,
                cq: &mut sv.cq,
                cqe_ns: &mut [],
            };
            let res = if two_threads {
                std::thread::scope(|sc| {
                    let h = sc.spawn(|| {
                        let r = pingpong::server(&mut se, o.iters, &stop);
                        if r.is_err() {
                            stop.store(true, Ordering::Relaxed);
                        }
                        r
                    });
                    let rc = pingpong::client(
                        &mut ce,
                        tposted,
                        away,
                        &stamp,
                        o.inject,
                        &stop,
                        &mut || {},
                    );
                    if rc.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    let rs = h
                        .join()
                        .unwrap_or_else(|_| Err(perr("the server thread panicked")));
                    rc.and(rs)
                })
            } else {
                pingpong::alternate(
                    &mut ce,
                    &mut se,
                    tposted,
                    away,
                    &stamp,
                    o.inject,
                    &mut || p.progress(),
                )
            };
            let (c_routs, s_routs) = (ce.routs + ce.early, se.routs + se.early);
            drop((ce, se));
            bed.client.routs = c_routs;
            bed.server.routs = s_routs;
            res?;
        }
        Test::ReadLat | Test::AtomicLat => {
            let ts = !cqe_ns.is_empty();
            for (i, t) in tposted.iter_mut().enumerate().take(n) {
                *t = stamp();
                pingpong::sample_mark(away, i, &mut w);
                pingpong::injected(o.inject, i as u32, &mut w, &mut || p.progress());
                let op = if o.test == Test::ReadLat {
                    SendOp::Read {
                        raddr: s_base as u64,
                        rkey: s_rkey,
                    }
                } else {
                    SendOp::FetchAdd {
                        raddr: s_base as u64,
                        rkey: s_rkey,
                        add: 1,
                    }
                };
                post_one(
                    &mut bed.client,
                    SendWr::new(i as u64, op, &c_dst).signaled(),
                )?;
                let at = if ts { cqe_ns.get_mut(i) } else { None };
                wait_one(p, &mut bed.client.cq, &mut wc, at, &mut w, op.name())?;
            }
        }
        _ => return Err(bad_opt("not a latency test")),
    }
    clock.to_ns(tposted);
    clock.spans_to_ns(away);
    Ok(clock.real0)
}

/// A bandwidth run's send completions, stamped `now`: completions come in order and the one
/// of request `j` (its wr_id) retires every request up to `j`, so `tcompleted[j]` is set and
/// `ccnt` (requests retired) becomes `j + 1`. A failed completion or a wr_id that is out of
/// range or behind `ccnt` is an error naming the op (`hint` is appended to the failure).
pub(super) fn stamp_bw_completions(
    wcs: &[Completion],
    now: u64,
    op: SendOp,
    hint: &str,
    ccnt: &mut usize,
    tcompleted: &mut [u64],
) -> Result<()> {
    for c in wcs {
        if !c.is_ok() {
            // The transport's retries ran out: the status's own cause (the peer is gone, or
            // the path is wrong) says it all; the caller's guess about the test is not it.
            let hint = if c.status == WcStatus::RetryExcErr {
                ""
            } else {
                hint
            };
            return Err(perr(format!(
                "{} #{} failed: {} (vendor_err {:#x}): {}{hint}",
                op.name(),
                c.wr_id,
                c.status,
                c.vendor_err,
                c.status.hint()
            )));
        }
        let j = c.wr_id as usize;
        if j >= tcompleted.len() || j < *ccnt {
            return Err(perr(format!("unexpected completion wr_id {}", c.wr_id)));
        }
        tcompleted[j] = now;
        *ccnt = j + 1;
    }
    Ok(())
}

pub(super) fn bw_loop<P: Provider>(
    p: &mut P,
    o: &Params,
    bed: &mut Bed<P>,
    size: u32,
    tposted: &mut [u64],
    tcompleted: &mut [u64],
) -> Result<()> {
    let n = o.iters as usize;
    let half = bed.half;
    let pl = o.post_list as usize;
    let cq_mod = o.cq_mod as usize;
    let use_inline = size <= o.inline && !o.test.is_read_like();
    let s_rkey = bed.server.buf.rkey();
    let s_base = bed.server.base as u64;
    let c_src = [bed.client.buf.mr().sge(0, size)];
    let c_dst = [bed.client.buf.mr().sge(half, size)];
    // Inline payload: copied into the WQE at post time, so ordinary memory will do.
    let inline_bytes = vec![0u8; if use_inline { size as usize } else { 0 }];
    let dest = bed.ahs.as_ref().map(|(to_s, _)| UdDest {
        ah: to_s,
        remote_qpn: bed.server.ep.qpn,
        remote_qkey: ConnectOpts::default().qkey,
    });
    let op = match o.test {
        Test::WriteBw => SendOp::Write {
            raddr: s_base + half as u64,
            rkey: s_rkey,
        },
        Test::ReadBw => SendOp::Read {
            raddr: s_base,
            rkey: s_rkey,
        },
        Test::SendBw => SendOp::Send,
        _ => return Err(bad_opt("not a bandwidth test")),
    };
    let sges: &[Sge] = if o.test == Test::ReadBw {
        &c_dst
    } else {
        &c_src
    };
    let mut wcs = [Completion::EMPTY; 16];
    let stop = AtomicBool::new(false);
    let mut w = Waiter::new(&stop);
    tposted.fill(0);
    tcompleted.fill(0);
    let clock = Clock::start();
    let stamp = || clock.ticks().max(1);
    let (mut scnt, mut ccnt, mut received) = (0usize, 0usize, 0usize);
    let tx = TX_DEPTH as usize;
    while ccnt < n {
        while scnt < n && scnt - ccnt + pl <= tx {
            tposted[scnt] = stamp();
            let sq = bed.client.qp.sq();
            let end = (scnt + pl).min(n);
            for k in scnt..end {
                let mut wr = SendWr::new(k as u64, op, sges);
                if (k + 1) % cq_mod == 0 || k + 1 == n {
                    wr = wr.signaled();
                }
                if use_inline {
                    wr = wr.inline(&inline_bytes);
                }
                if let Some(d) = dest {
                    wr = wr.to(d);
                }
                if let Err(r) = sq.post(wr) {
                    sq.ring();
                    return Err(perr(format!("post {} #{k}: {}", op.name(), r.error)));
                }
            }
            if let Err(e) = sq.try_ring() {
                return Err(perr(format!("post {}: {e}", op.name())));
            }
            scnt = end;
        }
        if o.test == Test::SendBw {
            let m = bed.server.cq.poll(&mut wcs);
            for c in &wcs[..m] {
                if !c.is_ok() {
                    return Err(perr(format!("server receive failed: {}", c.status)));
                }
            }
            bed.server.routs -= m as u32;
            received += m;
            if bed.server.routs < RX_DEPTH / 2 {
                refill_recvs(&mut bed.server, half, bed.recv_len)?;
            }
        }
        let m = bed.client.cq.poll(&mut wcs);
        if m == 0 {
            p.progress();
            w.tick("bandwidth completions")?;
            continue;
        }
        stamp_bw_completions(&wcs[..m], stamp(), op, "", &mut ccnt, &mut tcompleted[..n])?;
        w.reset();
    }
    clock.to_ns(tposted);
    clock.to_ns(tcompleted);
    // send_bw on RC: every completed SEND consumed a receive; collect all of them so the
    // next size starts with a full receive queue. (UC/UD may drop messages: what is left
    // over is counted in the next size's loop.)
    if o.test == Test::SendBw {
        if o.qp_type == QpType::Rc {
            w.reset();
            while received < n {
                let m = bed.server.cq.poll(&mut wcs);
                received += m;
                bed.server.routs -= m as u32;
                if m == 0 {
                    p.progress();
                    w.tick("the server's receives")?;
                }
            }
        }
        refill_recvs(&mut bed.server, half, bed.recv_len)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::WcStatus;

    fn failed(status: WcStatus, hint: &str) -> String {
        let wcs = [Completion {
            wr_id: 3,
            status,
            vendor_err: 0x15,
            ..Completion::EMPTY
        }];
        let (mut ccnt, mut t) = (0, [0u64; 8]);
        let op = SendOp::Write { raddr: 0, rkey: 1 };
        let e = stamp_bw_completions(&wcs, 1, op, hint, &mut ccnt, &mut t);
        assert_eq!(ccnt, 0);
        e.unwrap_err().to_string()
    }

    /// A failed bandwidth completion names the status's own cause before the caller's
    /// hint, not only the caller's guess.
    #[test]
    fn a_failed_completion_names_its_status_cause() {
        let e = failed(WcStatus::RemAccessErr, "; or X");
        let want = format!(
            "WRITE #3 failed: REM_ACCESS_ERR (vendor_err 0x15): {}; or X",
            WcStatus::RemAccessErr.hint()
        );
        assert!(e.contains(&want), "{e}");
    }

    /// RETRY_EXC_ERR (after a peer was killed): the peer is gone, said once, and not the
    /// caller's guess about a test or size mismatch.
    #[test]
    fn retries_run_out_name_the_gone_peer_alone() {
        let e = failed(WcStatus::RetryExcErr, "; or X");
        let want = format!(
            "WRITE #3 failed: RETRY_EXC_ERR (vendor_err 0x15): {}",
            WcStatus::RetryExcErr.hint()
        );
        assert!(e.ends_with(&want), "{e}");
        assert!(e.contains("the peer is gone"), "{e}");
    }
}
