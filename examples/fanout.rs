//! Market-data fan-out: one publisher, N subscribers. Each message (sequence number and send
//! time in 64 bytes) is RDMA-WRITTEN WITH IMMEDIATE into every subscriber's ring, 16 per
//! doorbell with one signaled request per batch; each subscriber checks the sequence (the
//! immediate and the bytes in the slot) and acknowledges every half ring with a zero-length
//! SEND WITH IMMEDIATE carrying its count, which is the publisher's credit. Prints the
//! one-way latency percentiles over every (message, subscriber). No `unsafe`, no error type of
//! its own: the library's flow helpers carry the glue (send windows, receive replenishers,
//! ring slots and credits, the stall deadline over several CQs).
//!
//! ```text
//! cargo run --release --example fanout                     # on the software device
//! cargo run --release --example fanout -- -d rxe0 -x 1    # on a device (loopback)
//! ```
//! RC is point to point, so the fan-out is one QP per subscriber; the publisher's QPs share
//! one CQ. With `-d`, the device is opened with the direct mlx5 provider when it is an mlx5
//! NIC and with libibverbs otherwise (e.g. rxe); publisher and subscribers are QPs of this one
//! process. Options: `-n MESSAGES` (default 100000), `-s SUBSCRIBERS` (default 4),
//! `-x GID_INDEX` (default 0; RoCE needs the index of a valid GID).

use rdma_direct::prelude::*;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

const MSG: usize = 64;
const BATCH: usize = 16;
/// Slots per subscriber ring; the publisher runs at most this far ahead of a subscriber.
const RING: u32 = 64;
/// A subscriber acknowledges every half ring.
const ACK_EVERY: u32 = RING / 2;
/// Receives kept posted at the publisher per subscriber (acknowledgements in flight: 2).
const ACK_RECVS: u32 = 4;
const STALL: Duration = Duration::from_secs(5);

struct Subscriber<P: Provider> {
    qp: P::Qp,
    ring: RegisteredBuf<P::Mr>,
    reader: RingReader,
    recvs: RecvReplenisher,
    acks: SendWindow,
}

fn run<P: Provider>(p: &mut P, msgs: u64, subs: usize, opts: &ConnectOpts) -> Result<()> {
    let pd = p.alloc_pd()?;
    let mut src = p.alloc_buf(&pd, RING as usize * MSG, Access::LOCAL_WRITE, Pages::Normal)?;
    let mut pub_cfg = QpConfig::new(QpType::Rc);
    (pub_cfg.caps.max_send_wr, pub_cfg.caps.max_recv_wr) = (RING, ACK_RECVS);
    let mut sub_cfg = QpConfig::new(QpType::Rc);
    (sub_cfg.caps.max_send_wr, sub_cfg.caps.max_recv_wr) = (4, RING);
    // One CQ for the publisher's QPs (it absorbs all their queues), one per subscriber.
    let mut pub_cq = p.create_cq(subs as u32 * (RING + ACK_RECVS))?;
    let mut sub_cqs = Vec::new();
    let (mut pub_qps, mut windows, mut writers, mut credits) =
        (vec![], SendWindows::new(), vec![], vec![]);
    let mut subscribers: Vec<Subscriber<P>> = Vec::new();
    for _ in 0..subs {
        let mut cq = p.create_cq(RING + 8)?;
        let mut qp = p.create_qp(&pd, &mut pub_cq, None, None, &pub_cfg)?;
        let mut sub_qp = p.create_qp(&pd, &mut cq, None, None, &sub_cfg)?;
        connect_pair(p, &mut qp, &mut sub_qp, opts)?;
        let ring = p.alloc_buf(&pd, RING as usize * MSG, Access::ALL, Pages::Normal)?;
        // The subscriber's window, as the endpoint message would carry it between processes.
        let window = ring.remote(0, ring.len())?;
        writers.push(RingWriter::new(window.target(0, window.len)?, MSG as u32)?);
        let mut recvs = RecvReplenisher::new(RING);
        recvs.fill(sub_qp.rq())?;
        let mut credit_recvs = RecvReplenisher::new(ACK_RECVS).for_qp(qp.qpn());
        credit_recvs.fill(qp.rq())?;
        credits.push(credit_recvs);
        windows.add(&qp);
        pub_qps.push(qp);
        subscribers.push(Subscriber {
            reader: RingReader::new(RING, MSG as u32, ACK_EVERY)?,
            acks: SendWindow::new(&sub_qp),
            qp: sub_qp,
            ring,
            recvs,
        });
        sub_cqs.push(cq);
    }

    let start = Instant::now();
    let mut lat_ns = Vec::with_capacity(msgs as usize * subs);
    let mut batches = VecDeque::with_capacity(RING as usize);
    let mut published = 0u64;
    let mut missing = vec![0; subs];
    let mut wc = [Completion::EMPTY; 32];
    loop {
        // Publish while every subscriber's ring and every send queue has room.
        loop {
            let room = writers.iter().map(|w| w.room()).min().unwrap_or(0);
            let n = (BATCH as u64)
                .min(msgs - published)
                .min(room.min(windows.min_room()) as u64);
            if n == 0 {
                break;
            }
            let mut sges = [[Sge::default()]; BATCH];
            for (i, sge) in sges[..n as usize].iter_mut().enumerate() {
                let seq = published + i as u64;
                let off = (seq % RING as u64) as usize * MSG;
                let m = src.get_mut(off, 16)?;
                m[..8].copy_from_slice(&seq.to_le_bytes());
                m[8..].copy_from_slice(&(start.elapsed().as_nanos() as u64).to_le_bytes());
                *sge = [src.sge(off, MSG)?];
            }
            for (k, qp) in pub_qps.iter_mut().enumerate() {
                let mut batch = SendBatch::<_, BATCH>::new();
                for (i, sge) in sges[..n as usize].iter().enumerate() {
                    let (seq, slot) = writers[k].claim().ok_or(Error::InvalidArgument {
                        context: "fanout",
                        detail: "ring full after its room was checked".into(),
                    })?;
                    let wr = SendWr::write_imm_to(seq, sge, slot, seq as u32);
                    let _ = batch.push(wr.signaled_if(i == n as usize - 1));
                }
                if let Some(w) = windows.get_mut(k) {
                    w.post_list(qp.sq(), batch.as_slice())?;
                }
                if let Some(e) = qp.sq().take_ring_error() {
                    return Err(e.into());
                }
            }
            published += n;
            batches.push_back(n as usize);
        }
        // Wait for the oldest batch at every subscriber, or, with none outstanding, for
        // the publisher's credit or send completions.
        if let Some(n) = batches.pop_front() {
            missing.fill(n);
            wait_each(p, &mut sub_cqs, &mut missing, STALL, |k, c| {
                c.check()?;
                let s = &mut subscribers[k];
                if !c.opcode.is_recv() {
                    s.acks.retire(c);
                    return Ok(0);
                }
                let seq = s.reader.expected();
                let m = s.ring.get(s.reader.next_offset(), 16)?;
                let got = u64::from_le_bytes(m[..8].try_into().unwrap_or_default());
                let sent = u64::from_le_bytes(m[8..].try_into().unwrap_or_default());
                if c.imm != seq as u32 || got != seq {
                    return Err(Error::Protocol {
                        context: "fanout",
                        detail: format!(
                            "subscriber {k} expected message {seq}, got immediate {} and {got} in its slot",
                            c.imm
                        ),
                    });
                }
                lat_ns.push((start.elapsed().as_nanos() as u64).saturating_sub(sent));
                s.recvs.consumed(c);
                if let Some(upto) = s.reader.consume() {
                    if s.acks.room() == 0 {
                        return Err(Error::InvalidArgument {
                            context: "fanout",
                            detail: format!("subscriber {k}: no room for its acknowledgement"),
                        });
                    }
                    let ack = SendWr::send_imm(k as u64, &[], upto as u32).signaled();
                    s.qp.sq().post(ack)?;
                    s.qp.sq().ring();
                    s.acks.posted(1);
                }
                Ok(1)
            })?;
            for s in subscribers.iter_mut() {
                s.recvs.replenish(s.qp.rq())?;
            }
        } else if published == msgs {
            break;
        } else {
            // Blocked on credit or send room: wait for the publisher's CQ.
            wait_each(p, &mut [&mut pub_cq], &mut [1], STALL, |_, c| {
                on_publisher(c, &mut windows, &mut writers, &mut credits).map(|()| 1)
            })?;
        }
        p.progress();
        loop {
            let n = pub_cq.poll(&mut wc);
            for c in &wc[..n] {
                on_publisher(c, &mut windows, &mut writers, &mut credits)?;
            }
            if n == 0 {
                break;
            }
        }
        for (qp, r) in pub_qps.iter_mut().zip(credits.iter_mut()) {
            r.replenish(qp.rq())?;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    lat_ns.sort_unstable();
    let at = |q: f64| lat_ns[((lat_ns.len() - 1) as f64 * q) as usize] as f64 / 1000.0;
    println!(
        "{subs} subscribers, {msgs} messages each, every sequence checked: one-way p50 {:.2} us  p90 {:.2} us  p99 {:.2} us  max {:.2} us  ({:.2} Mmsg/s delivered)",
        at(0.5),
        at(0.9),
        at(0.99),
        at(1.0),
        lat_ns.len() as f64 / secs / 1e6
    );
    Ok(())
}

/// One completion of the publisher's CQ: a send one retires requests of its QP's window, a
/// receive is a subscriber's acknowledgement (its count in the immediate), credit for its
/// ring.
fn on_publisher(
    c: &Completion,
    windows: &mut SendWindows,
    writers: &mut [RingWriter],
    credits: &mut [RecvReplenisher],
) -> Result<()> {
    c.check()?;
    let k = windows.index_of(c.qp_num).unwrap_or(usize::MAX);
    if !c.opcode.is_recv() {
        windows.retire(c);
    } else if let (Some(w), Some(r)) = (writers.get_mut(k), credits.get_mut(k)) {
        w.ack_low32(c.imm);
        r.consumed(c);
    }
    Ok(())
}

/// [`run`] on whichever provider [`run_chosen`] opens.
struct Fanout {
    msgs: u64,
    subs: usize,
    opts: ConnectOpts,
}

impl Job for Fanout {
    type Out = ();
    fn run<P: Provider>(&mut self, p: &mut P) -> Result<()>
    where
        P::Qp: Send,
        P::Cq: Send,
    {
        run(p, self.msgs, self.subs, &self.opts)
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut msgs, mut subs, mut dev) = (100_000u64, 4usize, None);
    let mut opts = ConnectOpts::default();
    let mut it = args.iter();
    let usage = "usage: fanout [-d DEV [-x GID_INDEX]] [-n MESSAGES] [-s SUBSCRIBERS]";
    let bad = |what: String| -> ! {
        eprintln!("fanout: {what} ({usage})");
        std::process::exit(2);
    };
    while let Some(a) = it.next() {
        let mut num = |flag: &str| match it.next().map(|v| (v, v.parse::<u64>())) {
            Some((_, Ok(n))) => n,
            Some((v, Err(_))) => bad(format!("{flag} needs a number, not {v:?}")),
            None => bad(format!("{flag} needs a value")),
        };
        match a.as_str() {
            "-n" => msgs = num("-n"),
            "-s" => subs = num("-s") as usize,
            "-x" => {
                let x = num("-x");
                opts.gid_index =
                    u8::try_from(x).unwrap_or_else(|_| bad("-x: not a GID index".into()))
            }
            "-d" => {
                dev = Some(
                    it.next()
                        .cloned()
                        .unwrap_or_else(|| bad("-d needs a value".into())),
                )
            }
            o => bad(format!("unknown argument {o:?}")),
        }
    }
    let (msgs, subs) = (msgs.max(1), subs.clamp(1, 64));
    // The library's rule: no device, the sim; an mlx5 NIC, the direct provider; else verbs.
    let r = run_chosen(
        Choice::Auto,
        dev.as_deref(),
        &mut Fanout { msgs, subs, opts },
    );
    if let Err(e) = r {
        eprintln!("fanout: {e}");
        std::process::exit(1);
    }
}
