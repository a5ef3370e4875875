//! Doorbell batching on the software device: N 64-byte RDMA WRITEs staged in a `SendBatch`,
//! posted with one `post_list` (one doorbell), only the last one signaled; prints the
//! message rate per batch size 1..64. Only the prelude, no `unsafe`.
//!
//! ```text
//! cargo run --release --example batching            # -n MESSAGES per batch size (default 100000)
//! ```

use rdma_direct::prelude::*;
use std::time::{Duration, Instant};

const MSG: usize = 64;
const MAX_BATCH: usize = 64;

fn run(msgs: usize) -> Result<()> {
    let mut p = SimDevice::new();
    let pd = p.alloc_pd()?;
    let buf = p.alloc_buf(&pd, 2 * MAX_BATCH * MSG, Access::ALL, Pages::Normal)?;
    let mut cfg = QpConfig::new(QpType::Rc);
    cfg.caps.max_send_wr = MAX_BATCH as u32;
    let (mut ca, mut cb) = (p.create_cq(MAX_BATCH as u32)?, p.create_cq(16)?);
    let mut a = p.create_qp(&pd, &mut ca, None, None, &cfg)?;
    let mut b = p.create_qp(&pd, &mut cb, None, None, &cfg)?;
    let opts = ConnectOpts::default();
    let (ea, eb) = (p.endpoint(&a, &opts)?, p.endpoint(&b, &opts)?);
    p.connect(&mut a, &ea, &eb, &opts)?;
    p.connect(&mut b, &eb, &ea, &opts)?;
    // Write from the first half of the buffer into the second half (the peer's window).
    let dst = buf.remote(MAX_BATCH * MSG, MAX_BATCH * MSG)?;
    let mut sges = [[Sge::default()]; MAX_BATCH];
    for (i, s) in sges.iter_mut().enumerate() {
        *s = [buf.sge(i * MSG, MSG)?];
    }

    let mut wc = [Completion::EMPTY; 4];
    for size in [1usize, 2, 4, 8, 16, 32, 64] {
        let batches = msgs.div_ceil(size);
        let t = Instant::now();
        for _ in 0..batches {
            let mut batch = SendBatch::<_, MAX_BATCH>::new();
            for (i, sge) in sges[..size].iter().enumerate() {
                let addr = dst.addr + (i * MSG) as u64;
                let wr = SendWr::write(i as u64, sge, addr, dst.rkey);
                let _ = batch.push(wr.signaled_if(i == size - 1));
            }
            a.sq().post_list(batch.as_slice())?;
            // One completion covers the whole batch.
            let n = poll_wait(&mut p, &mut ca, &mut wc, Duration::from_secs(5))?;
            if n != 1 || !wc[0].is_ok() || wc[0].wr_id != (size - 1) as u64 {
                return Err(Error::Unsupported {
                    what: format!(
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

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut msgs = 100_000usize;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "-n" {
            msgs = it.next().and_then(|v| v.parse().ok()).unwrap_or(msgs);
        }
    }
    if let Err(e) = run(msgs.max(1)) {
        eprintln!("batching: {e}");
        std::process::exit(1);
    }
}
