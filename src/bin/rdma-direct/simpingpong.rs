//! `rdma-direct pingpong` without `-d`: two RC QPs on the software mlx5 device.
//!
//! The production mlx5 hot path (WQE writing, doorbell / BlueFlame, CQE polling) runs against
//! the sim in device-thread mode: a second thread plays the HCA, polling doorbells and
//! writing CQEs. The protocol is `ibv_rc_pingpong`'s, both ends in this process: `rx_depth`
//! receives posted up front on each side, the client sends first, a side sends again once its
//! last send and a receive have completed; each side sends and receives `iters` messages.
//! The output is `ibv_rc_pingpong`'s two lines plus a perftest-style latency summary (half
//! the round trip between consecutive client sends).

use std::fmt::Write as _;
use std::time::Instant;

use rdma_direct::endpoint::Mtu;
use rdma_direct::providers::mlx5::{Mlx5Cq, Mlx5Qp};
use rdma_direct::providers::sim::{SimDevice, SimMr};
use rdma_direct::providers::{
    Access, Completion, CompletionQueue, ConnectOpts, MemoryRegion, Provider, QpCaps, QpConfig,
    QpEndpoint, QpType, QueuePair, RecvQueue, RecvWr, SendQueue, SendWr,
};

const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;

const HELP: &str = "\
usage: rdma-direct pingpong [options]        (no -d: runs on the software mlx5 device)
  -s, --size <n>       message size (default 4096)
  -n, --iters <n>      iterations (default 1000)
  -r, --rx-depth <n>   receives posted in advance (default 500)
  -m, --mtu <n>        path MTU: 256, 512, 1024, 2048, 4096 (default 1024)
";

/// Options of the sim pingpong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opts {
    /// Message size in bytes.
    pub size: u32,
    /// Iterations (each side sends and receives this many).
    pub iters: u32,
    /// Receives posted in advance.
    pub rx_depth: u32,
    /// Path MTU.
    pub mtu: Mtu,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            size: 4096,
            iters: 1000,
            rx_depth: 500,
            mtu: Mtu::Mtu1024,
        }
    }
}

/// Parse the command line (without the `pingpong` word). `Ok(None)` = help was asked for.
pub fn parse(args: &[String]) -> Result<Option<Opts>, String> {
    let mut o = Opts::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        let mut value = |name: &str| -> Result<u32, String> {
            let v = match &inline {
                Some(v) => v.clone(),
                None => it
                    .next()
                    .cloned()
                    .ok_or_else(|| format!("{name} needs a value"))?,
            };
            v.parse::<u32>()
                .map_err(|_| format!("{name}: '{v}' is not a number"))
        };
        match flag {
            "-h" | "--help" => return Ok(None),
            "-s" | "--size" => o.size = value("--size")?,
            "-n" | "--iters" => o.iters = value("--iters")?,
            "-r" | "--rx-depth" => o.rx_depth = value("--rx-depth")?,
            "-m" | "--mtu" => {
                let m = value("--mtu")?;
                o.mtu = Mtu::from_bytes(m)
                    .ok_or_else(|| format!("--mtu: {m} is not 256, 512, 1024, 2048 or 4096"))?;
            }
            other => return Err(format!("unknown option '{other}'")),
        }
    }
    if o.size == 0 || o.size > 1 << 30 {
        return Err(format!("--size {} out of range 1..=1073741824", o.size));
    }
    if o.iters == 0 {
        return Err("--iters must be at least 1".into());
    }
    if o.rx_depth == 0 || o.rx_depth > 8192 {
        return Err(format!("--rx-depth {} out of range 1..=8192", o.rx_depth));
    }
    Ok(Some(o))
}

/// Entry point from `rdma-direct pingpong` when no device is given.
pub fn run(args: &[String]) -> i32 {
    let o = match parse(args) {
        Ok(Some(o)) => o,
        Ok(None) => {
            print!("{HELP}");
            return 0;
        }
        Err(e) => {
            eprintln!("rdma-direct pingpong: {e}\n\n{HELP}");
            return 2;
        }
    };
    match run_opts(&o) {
        Ok(out) => {
            print!("{out}");
            0
        }
        Err(e) => {
            eprintln!("rdma-direct pingpong (sim): {e}");
            1
        }
    }
}

struct Side {
    qp: Mlx5Qp,
    cq: Mlx5Cq,
    mr: SimMr,
    ep: QpEndpoint,
    /// Bits of RECV_WRID / SEND_WRID still to complete before the next send.
    pending: u64,
    /// Receives still posted.
    routs: u32,
    scnt: u32,
    rcnt: u32,
}

/// Run the pingpong; returns the text to print.
pub fn run_opts(o: &Opts) -> rdma_direct::Result<String> {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd()?;
    let mut bufs = [vec![0u8; o.size as usize], vec![0u8; o.size as usize]];
    let caps = QpCaps {
        max_send_wr: 1,
        max_recv_wr: o.rx_depth,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let cfg = QpConfig {
        qp_type: QpType::Rc,
        caps,
        sq_sig_all: false,
    };
    let opts = ConnectOpts {
        path_mtu: Some(o.mtu),
        ..ConnectOpts::default()
    };
    let mk = |dev: &mut SimDevice, buf: &mut Vec<u8>| -> rdma_direct::Result<Side> {
        let mut cq = dev.create_cq(o.rx_depth + 1)?;
        let qp = dev.create_qp(&pd, &mut cq, None, None, &cfg)?;
        // SAFETY: `buf` lives in `bufs`, which outlives every side (dropped after them at
        // the end of this function); the device writes it only through this MR.
        let mr = unsafe { dev.reg_mr(&pd, buf.as_mut_ptr(), buf.len(), Access::LOCAL_WRITE) }?;
        let ep = dev.endpoint(&qp, &opts)?;
        Ok(Side {
            qp,
            cq,
            mr,
            ep,
            pending: RECV_WRID,
            routs: 0,
            scnt: 0,
            rcnt: 0,
        })
    };
    let [b0, b1] = &mut bufs;
    let mut client = mk(&mut dev, b0)?;
    let mut server = mk(&mut dev, b1)?;
    let (ce, se) = (client.ep, server.ep);
    dev.connect(&mut server.qp, &se, &ce, &opts)?;
    dev.connect(&mut client.qp, &ce, &se, &opts)?;
    // rc_pingpong posts its receives in INIT, before the exchange; `connect` goes RESET ->
    // RTS in one call here, so they go up right after it, before any send.
    for s in [&mut client, &mut server] {
        s.routs = post_recvs(s, o.rx_depth, o.size);
        if s.routs == 0 {
            return Err(rdma_direct::Error::Protocol {
                context: "pingpong (sim)",
                detail: "could not post any receive".into(),
            });
        }
    }
    dev.start_device_thread()?;
    // Start the clock once the device thread runs (a pass done), so thread start-up is not
    // counted as the first round trip.
    let t0 = Instant::now();
    while dev.stats().passes == 0 && t0.elapsed().as_secs() < 10 {
        std::thread::yield_now();
    }

    let mut out = String::new();
    let _ = writeln!(out, "provider: sim (software mlx5 device; not hardware)");
    let _ = writeln!(out, "  local address:  {}", addr_line(&client.ep));
    let _ = writeln!(out, "  remote address: {}", addr_line(&server.ep));

    let mut stamps: Vec<Instant> = Vec::with_capacity(o.iters as usize + 1);
    let start = Instant::now();
    stamps.push(Instant::now());
    post_send(&mut client, o.size)?;
    client.pending = RECV_WRID | SEND_WRID;
    let mut wc = [Completion::EMPTY; 16];
    let mut spins: u64 = 0;
    while client.rcnt < o.iters
        || client.scnt < o.iters
        || server.rcnt < o.iters
        || server.scnt < o.iters
    {
        let mut progressed = false;
        for (is_client, s) in [(true, &mut client), (false, &mut server)] {
            let n = s.cq.poll(&mut wc);
            for c in &wc[..n] {
                progressed = true;
                if !c.is_ok() {
                    return Err(rdma_direct::Error::Protocol {
                        context: "pingpong (sim)",
                        detail: format!(
                            "{} completion for wr_id {} failed: {} (vendor_err {:#x})",
                            if is_client { "client" } else { "server" },
                            c.wr_id,
                            c.status,
                            c.vendor_err
                        ),
                    });
                }
                match c.wr_id {
                    SEND_WRID => s.scnt += 1,
                    RECV_WRID => {
                        s.rcnt += 1;
                        s.routs -= 1;
                        if s.routs <= 1 {
                            s.routs += post_recvs(s, o.rx_depth - s.routs, o.size);
                        }
                    }
                    other => {
                        return Err(rdma_direct::Error::Protocol {
                            context: "pingpong (sim)",
                            detail: format!("completion for unknown wr_id {other}"),
                        })
                    }
                }
                s.pending &= !c.wr_id;
                if s.scnt < o.iters && s.pending == 0 {
                    if is_client {
                        stamps.push(Instant::now());
                    }
                    post_send(s, o.size)?;
                    s.pending = RECV_WRID | SEND_WRID;
                }
            }
        }
        if !progressed {
            spins += 1;
            std::hint::spin_loop();
            if spins > 2_000_000_000 {
                return Err(rdma_direct::Error::Protocol {
                    context: "pingpong (sim)",
                    detail: "no completion for a long time: the device thread stalled".into(),
                });
            }
        }
    }
    let end = Instant::now();
    stamps.push(end);
    dev.stop_device_thread();

    let usec = end.duration_since(start).as_secs_f64() * 1e6;
    let bytes = u64::from(o.size) * u64::from(o.iters) * 2;
    let _ = writeln!(
        out,
        "{bytes} bytes in {:.2} seconds = {:.2} Mbit/sec",
        usec / 1e6,
        bytes as f64 * 8.0 / usec
    );
    let _ = writeln!(
        out,
        "{} iters in {:.2} seconds = {:.2} usec/iter",
        o.iters,
        usec / 1e6,
        usec / f64::from(o.iters)
    );
    // Round trips: intervals between consecutive client sends (the last one ends at the
    // final completion); latency is half of each, perftest's send_lat convention.
    let mut lat: Vec<f64> = stamps
        .windows(2)
        .map(|w| w[1].duration_since(w[0]).as_secs_f64() * 1e6 / 2.0)
        .collect();
    let _ = write!(out, "{}", latency_summary(&mut lat, o.size));
    let st = dev.stats();
    let _ = writeln!(
        out,
        "sim device: {} doorbells, {} WQEs, {} CQEs, {} engine passes",
        st.doorbells, st.wqes, st.cqes, st.passes
    );
    drop((client, server));
    drop(bufs);
    Ok(out)
}

fn addr_line(e: &QpEndpoint) -> String {
    let g = &e.gid;
    let gid = if g[..10].iter().all(|&b| b == 0) && g[10] == 0xff && g[11] == 0xff {
        format!("::ffff:{}.{}.{}.{}", g[12], g[13], g[14], g[15])
    } else {
        g.chunks(2)
            .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
            .collect::<Vec<_>>()
            .join(":")
    };
    format!(
        "LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {gid}",
        e.lid, e.qpn, e.psn
    )
}

fn post_recvs(s: &mut Side, n: u32, size: u32) -> u32 {
    let sge = [s.mr.sge(0, size)];
    let mut done = 0;
    for _ in 0..n {
        if s.qp
            .rq()
            .post_recv(RecvWr {
                wr_id: RECV_WRID,
                sges: &sge,
            })
            .is_err()
        {
            break;
        }
        done += 1;
    }
    s.qp.rq().ring();
    done
}

fn post_send(s: &mut Side, size: u32) -> rdma_direct::Result<()> {
    let sge = [s.mr.sge(0, size)];
    let sq = s.qp.sq();
    sq.post(SendWr::send(SEND_WRID, &sge).signaled())
        .map_err(|r| rdma_direct::Error::Protocol {
            context: "pingpong (sim): post_send",
            detail: r.error.to_string(),
        })?;
    sq.ring();
    Ok(())
}

/// perftest's latency table for `samples` (µs): t_min, t_max (the second largest, perftest
/// drops the outliers), t_typical (median), t_avg, t_stdev, 99% and 99.9% percentiles
/// (`sorted[ceil(p * n)]`, clamped). The two largest samples are left out, as perftest does.
pub fn latency_summary(samples: &mut [f64], size: u32) -> String {
    let mut out = String::new();
    samples.sort_by(|a, b| a.total_cmp(b));
    let raw_n = samples.len();
    let n = if raw_n > 3 { raw_n - 2 } else { raw_n };
    if n == 0 {
        return out;
    }
    let s = &samples[..n];
    let max = if raw_n >= 2 {
        samples[raw_n - 2]
    } else {
        samples[raw_n - 1]
    };
    let avg = s.iter().sum::<f64>() / n as f64;
    let var = s.iter().map(|x| (x - avg) * (x - avg)).sum::<f64>() / n as f64;
    let pct = |p: f64| s[((p * n as f64).ceil() as usize).min(n - 1)];
    let _ = writeln!(
        out,
        "latency (half round trip, sim device thread, not hardware):"
    );
    let _ = writeln!(
        out,
        " #bytes #iterations t_min[usec] t_max[usec] t_typical[usec] t_avg[usec] t_stdev[usec] 99% percentile[usec] 99.9% percentile[usec]"
    );
    let _ = writeln!(
        out,
        " {:<6} {:<11} {:<11.2} {:<11.2} {:<15.2} {:<11.2} {:<13.2} {:<20.2} {:.2}",
        size,
        raw_n,
        s[0],
        max,
        s[n / 2],
        avg,
        var.sqrt(),
        pct(0.99),
        pct(0.999)
    );
    out
}
