//! Two-process mode of the scenario runner: the requester side of a scenario in one process,
//! the responder side in another (on two hosts, or two guests on one link).
//!
//! A scenario splits when every QP is brought up by exactly one `connect X Y` with X and Y
//! different QPs: X and everything it uses belongs to side **A** (the requester, the client
//! of the TCP exchange), Y and everything it uses to side **B** (the responder, the server).
//! [`plan`] works this out, or says why the scenario cannot split:
//!
//! - a QP connected to itself, or more than once, or never (its side is undefined);
//! - a UD QP (its address handles name the peer's QP on this device);
//! - a CQ or SRQ serving QPs of both sides, or a buffer used by both sides (a local SGE on
//!   one side and a local SGE or a remote target on the other). One exception: the source
//!   of an RDMA READ may be a local buffer of the reader's side too when the file leaves it
//!   unchanged (no `final` edit): both processes hold the same initial image, so the peer's
//!   copy reads the same bytes.
//!
//! Both processes build every resource of the scenario (the other side's QPs stay in RESET,
//! unused) and walk the same step list in lockstep: before each step both sides exchange its
//! number on the control connection, so a receive the file posts before a send is posted on
//! B before A sends. Each side executes only the steps of its own queues: posts, rings, the
//! `error` moves and the expected completions of its queues. A `connect` brings each side's
//! QP up towards the peer's with [`crate::endpoint::connect_qp_server`] (B) /
//! [`crate::endpoint::connect_qp_client`] (A). Remote addresses and rkeys of RDMA
//! WRITE/READ/atomics are the peer's buffers (their addresses and rkeys are exchanged after
//! setup). After the last step both sides meet, so that every expected completion of both
//! has arrived (a responder's bytes are final only once its requester has the ACKs); then
//! each side checks the final bytes of its own buffers (those of neither side hold their
//! initial image in both) and both sides meet once more, so that neither destroys its QPs
//! while the other still polls.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};

use super::{PostOp, QpType, RecvTarget, Scenario, StepKind};

/// One side of a split scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The first QP of each `connect` (the requester; TCP client).
    A,
    /// The second QP (the responder; TCP server).
    B,
}

impl Side {
    /// The other side.
    pub fn other(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }
}

/// Which side owns what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Per QP.
    pub qp: Vec<Side>,
    /// Per SRQ (`None`: no QP uses it).
    pub srq: Vec<Option<Side>>,
    /// Per buffer (`None`: no step uses it).
    pub buf: Vec<Option<Side>>,
    /// The side of the queue each wr_id is posted to.
    pub wr: HashMap<u64, Side>,
}

fn claim(slot: &mut Option<Side>, side: Side, what: impl FnOnce() -> String) -> Result<(), String> {
    match *slot {
        Some(s) if s != side => Err(what()),
        _ => {
            *slot = Some(side);
            Ok(())
        }
    }
}

/// The sides of `sc`'s QPs, queues and buffers, or why it cannot run split.
pub fn plan(sc: &Scenario) -> Result<Plan, String> {
    let mut qp: Vec<Option<Side>> = vec![None; sc.qps.len()];
    for st in &sc.steps {
        if let StepKind::Connect { a, b, .. } = st.kind {
            if a == b {
                return Err(format!(
                    "QP '{}' is connected to itself (line {})",
                    sc.qps[a].name, st.line
                ));
            }
            for (q, s) in [(a, Side::A), (b, Side::B)] {
                if qp[q].is_some() {
                    return Err(format!(
                        "QP '{}' is connected more than once (line {})",
                        sc.qps[q].name, st.line
                    ));
                }
                qp[q] = Some(s);
            }
        }
    }
    let mut sides = Vec::with_capacity(qp.len());
    for (i, s) in qp.iter().enumerate() {
        let q = &sc.qps[i];
        if q.qp_type == QpType::Ud {
            return Err(format!(
                "QP '{}' is UD: its address handles name a QP of this device",
                q.name
            ));
        }
        sides.push(s.ok_or_else(|| format!("QP '{}' is never connected: no side", q.name))?);
    }
    let mut cq: Vec<Option<Side>> = vec![None; sc.cqs.len()];
    let mut srq: Vec<Option<Side>> = vec![None; sc.srqs.len()];
    for (i, q) in sc.qps.iter().enumerate() {
        for c in [q.send_cq, q.recv_cq].into_iter().flatten() {
            claim(&mut cq[c], sides[i], || {
                format!("CQ '{}' serves QPs of both sides", sc.cqs[c].name)
            })?;
        }
        if let Some(s) = q.srq {
            claim(&mut srq[s], sides[i], || {
                format!("SRQ '{}' serves QPs of both sides", sc.srqs[s].name)
            })?;
        }
    }
    let mut buf: Vec<Option<Side>> = vec![None; sc.bufs.len()];
    let mut wr = HashMap::new();
    let mut read_src = Vec::new();
    let used = |buf: &mut Vec<Option<Side>>, b: usize, side: Side| {
        claim(&mut buf[b], side, || {
            format!("buffer '{}' is used on both sides", sc.bufs[b].name)
        })
    };
    for st in &sc.steps {
        match &st.kind {
            StepKind::Post(ps) => {
                let side = sides[ps.qp];
                for r in ps.sges.iter().chain(ps.inline.iter()) {
                    used(&mut buf, r.buf, side)?;
                }
                if let Some((b, _)) = ps.remote {
                    if ps.op == PostOp::Read {
                        read_src.push((b, side));
                    } else {
                        used(&mut buf, b, side.other())?;
                    }
                }
                for i in 0..u64::from(ps.repeat) {
                    wr.insert(ps.wr_id + i, side);
                }
            }
            StepKind::PostRecv(rs) => {
                let side = match rs.target {
                    RecvTarget::Qp(q) => sides[q],
                    RecvTarget::Srq(s) => srq[s].ok_or_else(|| {
                        format!("SRQ '{}' serves no QP: no side", sc.srqs[s].name)
                    })?,
                };
                for r in &rs.sges {
                    used(&mut buf, r.buf, side)?;
                }
                for i in 0..u64::from(rs.repeat) {
                    wr.insert(rs.wr_id + i, side);
                }
            }
            _ => {}
        }
    }
    for (b, reader) in read_src {
        let unchanged = !sc.finals.iter().any(|e| e.range.buf == b);
        if buf[b] != Some(reader) || !unchanged {
            used(&mut buf, b, reader.other())?;
        }
    }
    Ok(Plan {
        qp: sides,
        srq,
        buf,
        wr,
    })
}

/// This process's end of a split run: its side, the control connection to the peer
/// process, and where QP connections are made (B listens, A connects).
pub struct Link {
    /// This side.
    pub side: Side,
    /// Control connection (step lockstep, buffer tables).
    pub ctl: TcpStream,
    /// B: the listener for the QP exchanges of `connect` steps.
    pub listener: Option<TcpListener>,
    /// A: where B's listener is.
    pub peer: Option<SocketAddr>,
}

impl Link {
    /// Both sides at the same point: exchange `tag` (4 bytes) and compare.
    pub fn meet(&mut self, tag: u32) -> Result<(), String> {
        self.ctl
            .write_all(&tag.to_le_bytes())
            .map_err(|e| format!("control connection: write step {tag}: {e}"))?;
        let mut b = [0u8; 4];
        self.ctl
            .read_exact(&mut b)
            .map_err(|e| format!("control connection: waiting for the peer at step {tag}: {e}"))?;
        let got = u32::from_le_bytes(b);
        if got != tag {
            return Err(format!(
                "control connection: the peer is at step {got}, this side at {tag}"
            ));
        }
        Ok(())
    }

    /// Send ours, receive theirs: (address, rkey) of each buffer, in declaration order.
    pub fn swap_bufs(&mut self, mine: &[(u64, u32)]) -> Result<Vec<(u64, u32)>, String> {
        let mut out = Vec::with_capacity(mine.len() * 12 + 4);
        out.extend_from_slice(&(mine.len() as u32).to_le_bytes());
        for (a, k) in mine {
            out.extend_from_slice(&a.to_le_bytes());
            out.extend_from_slice(&k.to_le_bytes());
        }
        self.ctl
            .write_all(&out)
            .map_err(|e| format!("control connection: write buffer table: {e}"))?;
        let mut n = [0u8; 4];
        self.ctl
            .read_exact(&mut n)
            .map_err(|e| format!("control connection: read buffer table: {e}"))?;
        let n = u32::from_le_bytes(n) as usize;
        if n != mine.len() {
            return Err(format!(
                "the peer has {n} buffers, this side {} (not the same scenario?)",
                mine.len()
            ));
        }
        let mut v = vec![0u8; n * 12];
        self.ctl
            .read_exact(&mut v)
            .map_err(|e| format!("control connection: read buffer table: {e}"))?;
        Ok(v.chunks_exact(12)
            .map(|c| {
                let mut a = [0u8; 8];
                a.copy_from_slice(&c[..8]);
                let mut k = [0u8; 4];
                k.copy_from_slice(&c[8..]);
                (u64::from_le_bytes(a), u32::from_le_bytes(k))
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{load_dir, parse};

    fn sc(text: &str) -> Scenario {
        parse("t.scn", "t", text).expect("parses")
    }

    #[test]
    fn a_two_qp_scenario_splits_by_connect_order() {
        let s = sc(
            "desc d\nbuf src 4K\nbuf dst 4K\nbuf rd 4K\nqp a rc\nqp b rc\nconnect a b\n\
                    post_recv b wr=10 sge=dst+0:4K\nring_recv b\n\
                    post a send wr=1 sge=src+0:4K signaled\n\
                    post a read wr=2 sge=rd+0:64 remote=dst+0 signaled\nring a\n\
                    expect wr=1 SUCCESS SEND\nexpect wr=2 SUCCESS RDMA_READ\n\
                    expect wr=10 SUCCESS RECV len=4096\n",
        );
        let p = plan(&s).expect("splits");
        assert_eq!(p.qp, vec![Side::A, Side::B]);
        assert_eq!(p.buf, vec![Some(Side::A), Some(Side::B), Some(Side::A)]);
        assert_eq!((p.wr[&1], p.wr[&2], p.wr[&10]), (Side::A, Side::A, Side::B));
    }

    #[test]
    fn what_cannot_split_says_why() {
        let tail =
            "post_recv b wr=1 sge=x+0:64\nring_recv b\npost a send wr=2 sge=y+0:64 signaled\n\
                    ring a\nexpect wr=2 SUCCESS SEND\nexpect wr=1 SUCCESS RECV len=64\n";
        for (head, want) in [
            (
                "desc d\nbuf x 4K\nbuf y 4K\ncq c 16\nqp a rc cq=c\nqp b rc cq=c\nconnect a b\n",
                "CQ 'c' serves QPs of both sides",
            ),
            (
                "desc d\nbuf x 4K\nbuf y 4K\nqp a rc\nqp b rc\nconnect a b\n\
                 post_recv b wr=3 sge=y+0:64\nexpect wr=3 WR_FLUSH_ERR\n",
                "buffer 'y' is used on both sides",
            ),
        ] {
            let e = plan(&sc(&format!("{head}{tail}"))).unwrap_err();
            assert!(e.contains(want), "{head}: {e}");
        }
        let all = load_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/scenarios"))
            .expect("the fixtures parse");
        let ud = all.iter().find(|s| s.name == "ud_send").expect("ud_send");
        assert!(plan(ud).unwrap_err().contains("is UD"));
        let rc = all
            .iter()
            .find(|s| s.name == "send_recv_4k")
            .expect("send_recv_4k");
        assert_eq!(plan(rc).expect("splits").qp, vec![Side::A, Side::B]);
    }
}
