//! Doorbell batching: N 64-byte RDMA WRITEs staged in a `SendBatch`, posted with one
//! `post_list` (one doorbell), only the last one signaled; prints the message rate per batch
//! size 1..64. Two RC QPs of one process, connected to each other. Only the prelude, no
//! `unsafe`.
//!
//! ```text
//! cargo run --release --example batching                     # on the software device
//! cargo run --release --example batching -- -d rxe0 -x 1    # on a device (loopback)
//! ```
//! With `-d`, the device is opened with the direct mlx5 provider when it is an mlx5 NIC and
//! with libibverbs otherwise (e.g. rxe). Options: `-n MESSAGES` per batch size (default
//! 100000), `-x GID_INDEX` (default 0; RoCE needs the index of a valid GID).

use rdma_direct::prelude::*;
use std::time::{Duration, Instant};

const MSG: usize = 64;
const MAX_BATCH: usize = 64;

fn run<P: Provider>(p: &mut P, msgs: usize, opts: &ConnectOpts) -> Result<()> {
    let pd = p.alloc_pd()?;
    let buf = p.alloc_buf(&pd, 2 * MAX_BATCH * MSG, Access::ALL, Pages::Normal)?;
    // A batch in flight at most; nothing is received (WRITEs consume no receive). Each CQ
    // holds its QP's whole send and receive queues.
    let mut cfg = QpConfig::new(QpType::Rc);
    cfg.caps.max_send_wr = MAX_BATCH as u32;
    cfg.caps.max_recv_wr = 1;
    let cqe = MAX_BATCH as u32 + 1;
    let (mut ca, mut cb) = (p.create_cq(cqe)?, p.create_cq(cqe)?);
    let mut a = p.create_qp(&pd, &mut ca, None, None, &cfg)?;
    let mut b = p.create_qp(&pd, &mut cb, None, None, &cfg)?;
    let (ea, eb) = (p.endpoint(&a, opts)?, p.endpoint(&b, opts)?);
    p.connect(&mut a, &ea, &eb, opts)?;
    p.connect(&mut b, &eb, &ea, opts)?;
    // Write from the first half of the buffer into the second half (the peer's window).
    let dst = buf.remote(MAX_BATCH * MSG, MAX_BATCH * MSG)?;
    let mut sges = [[Sge::default()]; MAX_BATCH];
    let mut slots = Vec::with_capacity(MAX_BATCH);
    for (i, s) in sges.iter_mut().enumerate() {
        *s = [buf.sge(i * MSG, MSG)?];
        slots.push(dst.target((i * MSG) as u64, MSG as u64)?);
    }

    let mut wc = [Completion::EMPTY; 4];
    for size in [1usize, 2, 4, 8, 16, 32, 64] {
        let batches = msgs.div_ceil(size);
        let t = Instant::now();
        for _ in 0..batches {
            let mut batch = SendBatch::<_, MAX_BATCH>::new();
            for (i, sge) in sges[..size].iter().enumerate() {
                let wr = SendWr::write_to(i as u64, sge, slots[i]);
                let _ = batch.push(wr.signaled_if(i == size - 1));
            }
            a.sq().post_list(batch.as_slice())?;
            // Only a verbs device can refuse a doorbell; a refused batch never completes.
            if let Some(e) = a.sq().take_ring_error() {
                return Err(e.into());
            }
            // One completion covers the whole batch.
            let n = poll_wait(p, &mut ca, &mut wc, Duration::from_secs(5))?;
            wc[..n].iter().try_for_each(Completion::check)?;
            if n != 1 || wc[0].wr_id != (size - 1) as u64 {
                return Err(Error::Protocol {
                    context: "batching",
                    detail: format!(
                        "batch of {size}: expected one completion, got {:?}",
                        &wc[..n]
                    ),
                });
            }
        }
        let secs = t.elapsed().as_secs_f64();
        println!(
            "batch {size:>2}: {:>8} writes, {:>7} doorbells, {:>8.2} Mmsg/s",
            batches * size,
            batches,
            (batches * size) as f64 / secs / 1e6
        );
    }
    Ok(())
}

/// [`run`] on whichever provider [`run_chosen`] opens.
struct Batching {
    msgs: usize,
    opts: ConnectOpts,
}

impl Job for Batching {
    type Out = ();
    fn run<P: Provider>(&mut self, p: &mut P) -> Result<()>
    where
        P::Qp: Send,
        P::Cq: Send,
    {
        run(p, self.msgs, &self.opts)
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut msgs, mut dev) = (100_000usize, None);
    let mut opts = ConnectOpts::default();
    let mut it = args.iter();
    let usage = "usage: batching [-d DEV [-x GID_INDEX]] [-n MESSAGES]";
    let bad = |what: String| -> ! {
        eprintln!("batching: {what} ({usage})");
        std::process::exit(2);
    };
    while let Some(a) = it.next() {
        let mut num = |flag: &str| match it.next().map(|v| (v, v.parse::<u64>())) {
            Some((_, Ok(n))) => n,
            Some((v, Err(_))) => bad(format!("{flag} needs a number, not {v:?}")),
            None => bad(format!("{flag} needs a value")),
        };
        match a.as_str() {
            "-n" => msgs = num("-n") as usize,
            "-d" => {
                dev = Some(
                    it.next()
                        .cloned()
                        .unwrap_or_else(|| bad("-d needs a value".into())),
                )
            }
            "-x" => {
                let x = num("-x");
                opts.gid_index =
                    u8::try_from(x).unwrap_or_else(|_| bad("-x: not a GID index".into()))
            }
            o => bad(format!("unknown argument {o:?}")),
        }
    }
    let msgs = msgs.max(1);
    // The library's rule: no device, the sim; an mlx5 NIC, the direct provider; else verbs.
    let r = run_chosen(Choice::Auto, dev.as_deref(), &mut Batching { msgs, opts });
    if let Err(e) = r {
        eprintln!("batching: {e}");
        std::process::exit(1);
    }
}
