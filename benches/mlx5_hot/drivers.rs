//! The `--callgrind` and `--time` drivers: one workload run for callgrind, or its median wall
//! time, for `benches/compare.sh`.

use super::*;

pub(super) fn callgrind(kind: &str, n: u32) {
    let n = n.min(4000);
    let mut lb = Loopback::new(4096);
    lb.qp.set_doorbell_mode(DoorbellMode::Doorbell);
    let payload = 0x0102_0304_0506_0708u64.to_ne_bytes();
    let sge: [Sge; 1] = lb.sge(8);
    match kind {
        "single" => {
            cg_single(lb.qp.sq(), n, &payload);
            println!("posted {} staged {}", n, lb.qp.sq().staged());
        }
        "batch32" => {
            cg_batch32(lb.qp.sq(), n, &payload);
            println!("posted {} staged {}", n, lb.qp.sq().staged());
        }
        "single_wrs" => {
            let wrs: Vec<SendWr<'_, AddressVector>> = (0..n)
                .map(|i| lb.wr(BenchOp::WriteInline, &sge, &payload, i as u64))
                .collect();
            cg_single_wrs(lb.qp.sq(), &wrs);
            println!("posted {} staged {}", n, lb.qp.sq().staged());
        }
        "fast" => {
            cg_fast(lb.qp.sq(), n, &payload);
            println!("posted {} staged {}", n, lb.qp.sq().staged());
        }
        "now" => {
            cg_now(lb.qp.sq(), n, &payload);
            println!("posted {} staged {}", n, lb.qp.sq().staged());
        }
        "poll16" => {
            for i in 0..n as u64 {
                let wr = lb.wr(BenchOp::Send, &sge, &payload, i).signaled();
                lb.qp.sq().post(wr).expect("fits");
            }
            lb.qp.sq().ring();
            lb.dev.complete_sends(&mut lb.dcq);
            let mut out = [Completion::EMPTY; 16];
            let got = cg_poll16(&mut lb.cq, n as usize, &mut out);
            println!("polled {got}");
        }
        "poll1" => {
            for i in 0..n as u64 {
                let wr = lb.wr(BenchOp::Send, &sge, &payload, i).signaled();
                lb.qp.sq().post(wr).expect("fits");
            }
            lb.qp.sq().ring();
            lb.dev.complete_sends(&mut lb.dcq);
            println!("polled {}", cg_poll1(&mut lb.cq, n as usize));
        }
        "one" => {
            for i in 0..n as u64 {
                let wr = lb.wr(BenchOp::Send, &sge, &payload, i).signaled();
                lb.qp.sq().post(wr).expect("fits");
            }
            lb.qp.sq().ring();
            lb.dev.complete_sends(&mut lb.dcq);
            println!("polled {}", cg_one(&mut lb.cq, n as usize));
        }
        "rt" => rt_rounds(&mut lb, n, &sge, &payload),
        "poll0" => {
            let mut out = [Completion::EMPTY; 16];
            println!("polled {}", cg_poll0(&mut lb.cq, n as usize, &mut out));
        }
        "recv16" => println!("polled {}", rounds(&mut lb, n, 0)),
        "poll16_one" => {
            // One signaled SEND completed per round, each polled with 16 slots.
            let mut out = [Completion::EMPTY; 16];
            let mut got = 0;
            for i in 0..n as u64 {
                let wr = lb.wr(BenchOp::Send, &sge, &payload, i).signaled();
                lb.qp.sq().post(wr).expect("fits");
                lb.qp.sq().ring();
                lb.dev.complete_sends(&mut lb.dcq);
                let k = cg_round16(&mut lb.cq, &mut out);
                assert_eq!(k, 1, "a round polls its one CQE");
                got += k;
            }
            black_box(&out);
            println!("polled {got}");
        }
        "mixed16" => println!("polled {}", rounds(&mut lb, n, 8)),
        "cover16" | "every1" => {
            let (posted, got) = sig_rounds(&mut lb, kind, n, &payload);
            println!("posted {posted} polled {got}");
        }
        "cover_one" => {
            let mut got = 0;
            let mut one = Completion::EMPTY;
            while got < n as usize {
                let k = (n - got as u32).min(COVER_BATCH);
                let g = cover_batch(&mut lb, k, |lb| {
                    cg_cover_one(&mut lb.cq, k as usize, &mut one)
                });
                assert_eq!(g, k as usize, "a batch polls its CQEs");
                assert_eq!((one.covered, one.wr_id % 16), (15, 15), "{one:?}");
                got += g;
            }
            println!("polled {got}");
        }
        "ded_one" | "ded_poll0" | "ded16_one" | "ded_rt" => {
            drop(lb);
            callgrind_dedicated(kind, n)
        }
        other => {
            eprintln!(
                "unknown callgrind workload {other}: single | single_wrs | fast | now | batch32 | \
                 poll16 | poll1 | one | poll0 | recv16 | mixed16 | poll16_one | rt | ded_one | \
                 ded_poll0 | ded16_one | ded_rt | cover16 | every1 | cover_one"
            );
            std::process::exit(2);
        }
    }
}

/// `--time <single|fast|batch32|one|ded_one> <n> <runs>`: the median wall time per post (per
/// CQE for `one` and `ded_one`, see `time_polls`) of `runs` runs
/// of the callgrind workload (`n` posts each), for `benches/compare.sh`'s side-by-side with
/// the C writer. Between runs (untimed) one signaled WRITE retires everything and the CQ is
/// drained.
pub(super) fn time_workload(kind: &str, n: u32, runs: usize) -> f64 {
    let n = n.clamp(1, 4000);
    if kind == "one" || kind == "ded_one" {
        return time_polls(kind, n, runs);
    }
    if kind == "cover16" || kind == "every1" || kind == "cover_one" {
        return time_sig(kind, n, runs);
    }
    let mut lb = Loopback::new(4096);
    lb.qp.set_doorbell_mode(DoorbellMode::Doorbell);
    let payload = 0x0102_0304_0506_0708u64.to_ne_bytes();
    let mut per: Vec<f64> = Vec::with_capacity(runs);
    let sge: [Sge; 1] = lb.sge(8);
    let wrs: Vec<SendWr<'_, AddressVector>> = (0..n)
        .map(|i| lb.wr(BenchOp::WriteInline, &sge, &payload, u64::from(i)))
        .collect();
    for r in 0..runs + 5 {
        let t = Instant::now();
        match kind {
            "single" => cg_single(lb.qp.sq(), n, &payload),
            "single_wrs" => cg_single_wrs(lb.qp.sq(), &wrs),
            "fast" => cg_fast(lb.qp.sq(), n, &payload),
            "now" => cg_now(lb.qp.sq(), n, &payload),
            "batch32" => cg_batch32(lb.qp.sq(), n, &payload),
            other => {
                eprintln!(
                    "unknown timed workload {other}: single | single_wrs | fast | now | batch32"
                );
                std::process::exit(2);
            }
        }
        let d = t.elapsed();
        let sq = lb.qp.sq();
        sq.post(
            SendWr::write(u64::MAX, &[], 0x10_0000, 7)
                .inline(&payload)
                .signaled(),
        )
        .expect("the run leaves room");
        sq.ring();
        assert_eq!(lb.drain(), 1);
        if r >= 5 {
            per.push(d.as_nanos() as f64 / f64::from(n));
        }
    }
    per.sort_by(|a, b| a.total_cmp(b));
    per[per.len() / 2]
}

/// `--time <cover16|every1|cover_one> <n> <runs>`: the median wall time of `runs` runs.
/// `cover16`, `every1`: per WQE, rounds of 32 until `n` WQEs, the post side and the poll side
/// of each round timed (the device's work between them not). `cover_one`: per CQE, `n` (at
/// most 240) CQEs covering 15 each polled with `poll_one` (posts and device untimed).
fn time_sig(kind: &str, n: u32, runs: usize) -> f64 {
    let mut lb = Loopback::new(4096);
    lb.qp.set_doorbell_mode(DoorbellMode::Doorbell);
    let payload = 0x0102_0304_0506_0708u64.to_ne_bytes();
    let mut per: Vec<f64> = Vec::with_capacity(runs);
    let mut out = [Completion::EMPTY; 16];
    for r in 0..runs + 5 {
        let (d, ops) = if kind == "cover_one" {
            let k = n.min(COVER_BATCH);
            let mut one = Completion::EMPTY;
            let mut d = Duration::ZERO;
            let got = cover_batch(&mut lb, k, |lb| {
                let t = Instant::now();
                let g = cg_cover_one(&mut lb.cq, k as usize, &mut one);
                d = t.elapsed();
                g
            });
            assert_eq!(got, k as usize, "every CQE polled");
            (d, k)
        } else {
            let mut d = Duration::ZERO;
            let mut posted = 0u32;
            while posted < n {
                let base = u64::from(posted);
                let t = Instant::now();
                if kind == "cover16" {
                    cg_cover16_post(lb.qp.sq(), base, &payload);
                } else {
                    cg_every1_post(lb.qp.sq(), base, &payload);
                }
                d += t.elapsed();
                lb.dev.complete_sends(&mut lb.dcq);
                let t = Instant::now();
                let k = if kind == "cover16" {
                    cg_cover16_poll(&mut lb.cq, &mut out)
                } else {
                    cg_every1_poll(&mut lb.cq, &mut out)
                };
                d += t.elapsed();
                assert!(k > 0, "the round's CQEs polled");
                posted += 32;
            }
            (d, posted)
        };
        if r >= 5 {
            per.push(d.as_nanos() as f64 / f64::from(ops));
        }
    }
    per.sort_by(|a, b| a.total_cmp(b));
    per[per.len() / 2]
}

/// `--time <one|ded_one> <n> <runs>`: the median wall time per CQE of `runs` runs of `n`
/// requester CQEs polled with `poll_one` (the CQ's, or the dedicated pair's); before each run
/// (untimed) `n` signaled SENDs are posted and the device completes them.
fn time_polls(kind: &str, n: u32, runs: usize) -> f64 {
    let mut lb = Loopback::new(4096);
    lb.qp.set_doorbell_mode(DoorbellMode::Doorbell);
    let payload = [0u8; 8];
    let sge: [Sge; 1] = lb.sge(8);
    let wrs: Vec<_> = (0..u64::from(n))
        .map(|i| lb.wr(BenchOp::Send, &sge, &payload, i).signaled())
        .collect();
    // One run: post and complete (untimed), then poll (timed).
    fn run<Q: QueuePair>(
        qp: &mut Q,
        wrs: &[SendWr<'_, AddressVector>],
        complete: impl FnOnce(),
        poll: impl FnOnce(&mut Q) -> usize,
    ) -> Duration
    where
        Q::Sq: SendQueue<Ah = AddressVector>,
    {
        for wr in wrs {
            qp.sq().post(*wr).expect("the run fits");
        }
        qp.sq().ring();
        complete();
        let t = Instant::now();
        let got = poll(qp);
        let d = t.elapsed();
        assert_eq!(got, wrs.len(), "every CQE polled");
        d
    }
    let mut per: Vec<f64> = Vec::with_capacity(runs);
    if kind == "ded_one" {
        let mut l = lb.into_dedicated();
        for r in 0..runs + 5 {
            let (dev, dcq) = (&mut l.dev, &mut l.dcq);
            let d = run(
                &mut l.ded,
                &wrs,
                || {
                    dev.complete_sends(dcq);
                },
                |ded| cg_ded_one(ded, n as usize),
            );
            if r >= 5 {
                per.push(d.as_nanos() as f64 / f64::from(n));
            }
        }
    } else {
        for r in 0..runs + 5 {
            let (dev, dcq, cq) = (&mut lb.dev, &mut lb.dcq, &mut lb.cq);
            let d = run(
                &mut lb.qp,
                &wrs,
                || {
                    dev.complete_sends(dcq);
                },
                |_| cg_one(cq, n as usize),
            );
            if r >= 5 {
                per.push(d.as_nanos() as f64 / f64::from(n));
            }
        }
    }
    per.sort_by(|a, b| a.total_cmp(b));
    per[per.len() / 2]
}
