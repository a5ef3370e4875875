//! `rdma-direct pingpong`: RC/UC ping-pong that speaks `ibv_rc_pingpong`'s protocol.
//!
//! With `-d DEV` it runs on that verbs device through the verbs provider, and either side may
//! be rdma-core's `ibv_rc_pingpong` / `ibv_uc_pingpong`: same TCP port (18515), same 52-byte
//! `LID:QPN:PSN:GID` message (client writes first; the server reads it, brings its QP up,
//! answers; the client reads, writes "done", brings its QP up), same QP parameters (MTU 1024,
//! timeout 14, retry and RNR retry 7, min RNR timer 12, one send outstanding, `rx_depth`
//! receives posted before the peer can send, a GRH only when `-g` is given), same message
//! pattern (the client sends first; a side sends again once its last send and a receive have
//! completed; `iters` each way), and the same two result lines:
//!
//! ```text
//! 8192000 bytes in 0.37 seconds = 177.51 Mbit/sec
//! 1000 iters in 0.37 seconds = 369.18 usec/iter
//! ```
//!
//! plus a latency line of our own: min / median / p99 of the per-iteration round trip (the
//! interval between consecutive sends of one side), in µs.
//!
//! Without `-d` it runs the ping-pong on the software mlx5 device (`simpingpong`).

use std::io::{Read, Write};
use std::net::{Ipv6Addr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use rdma_direct::endpoint::{PingpongMsg, PINGPONG_DONE, PINGPONG_MSG_LEN, PINGPONG_PORT};
use rdma_direct::providers::rxe::VerbsDevice;
use rdma_direct::providers::{
    Access, Completion, CompletionQueue, ConnectOpts, MemoryRegion, Mtu, Provider, QpCaps,
    QpConfig, QpType, QueuePair, RecvQueue, RecvWr, SendQueue, SendWr,
};
use rdma_direct::{Error, Result};

const USAGE: &str = "\
usage: rdma-direct pingpong [-d DEV] [options] [HOST]
  HOST given: client (connects to HOST); none: server (waits for a client)
  -d, --ib-dev DEV      verbs device (rxe0, mlx5_0); without it: the software mlx5 device
  -i, --ib-port PORT    port (default 1)
  -g, --gid-idx IDX     local GID index; without it no GRH is used (needed on RoCE)
  -s, --size BYTES      message size (default 4096, at most 1 MiB)
  -n, --iters N         iterations (default 1000)
  -c, --connection T    RC or UC (default RC)
  -p, --port PORT       TCP port (default 18515)
  -m, --mtu BYTES       path MTU: 256, 512, 1024, 2048, 4096 (default 1024)
  -r, --rx-depth N      receives kept posted (default 500)
  -l, --sl SL           service level (default 0)
Interoperates with rdma-core's ibv_rc_pingpong / ibv_uc_pingpong on either side.
";

const MAX_SIZE: usize = 1 << 20;
/// wr_ids, as rc_pingpong's.
const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;
/// A run with no completion for this long has lost its peer.
const STALL: Duration = Duration::from_secs(20);

#[derive(Debug)]
struct Args {
    dev: String,
    ib_port: u8,
    gid_idx: Option<u8>,
    size: usize,
    iters: u32,
    qp_type: QpType,
    port: u16,
    mtu: Mtu,
    rx_depth: u32,
    sl: u8,
    host: Option<String>,
}

fn parse_args(args: &[String]) -> std::result::Result<Option<Args>, String> {
    let mut a = Args {
        dev: String::new(),
        ib_port: 1,
        gid_idx: None,
        size: 4096,
        iters: 1000,
        qp_type: QpType::Rc,
        port: PINGPONG_PORT,
        mtu: Mtu::Mtu1024,
        rx_depth: 500,
        sl: 0,
        host: None,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut val = |name: &str| -> std::result::Result<String, String> {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        fn num<T: std::str::FromStr>(name: &str, v: &str) -> std::result::Result<T, String> {
            v.parse()
                .map_err(|_| format!("{name}: '{v}' is not a valid number"))
        }
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "-d" | "--ib-dev" => a.dev = val(arg)?,
            "-i" | "--ib-port" => a.ib_port = num(arg, &val(arg)?)?,
            "-g" | "--gid-idx" => a.gid_idx = Some(num(arg, &val(arg)?)?),
            "-s" | "--size" => a.size = num(arg, &val(arg)?)?,
            "-n" | "--iters" => a.iters = num(arg, &val(arg)?)?,
            "-p" | "--port" => a.port = num(arg, &val(arg)?)?,
            "-r" | "--rx-depth" => a.rx_depth = num(arg, &val(arg)?)?,
            "-l" | "--sl" => a.sl = num(arg, &val(arg)?)?,
            "-m" | "--mtu" => {
                let v = val(arg)?;
                a.mtu = Mtu::from_bytes(num(arg, &v)?)
                    .ok_or_else(|| format!("{arg}: MTU {v} is not 256, 512, 1024, 2048 or 4096"))?;
            }
            "-c" | "--connection" => {
                a.qp_type = match val(arg)?.to_ascii_uppercase().as_str() {
                    "RC" => QpType::Rc,
                    "UC" => QpType::Uc,
                    other => return Err(format!("{arg}: '{other}' is not RC or UC")),
                }
            }
            s if s.starts_with('-') => return Err(format!("unknown option '{s}'")),
            host => {
                if a.host.is_some() {
                    return Err(format!("more than one HOST given ('{host}')"));
                }
                a.host = Some(host.to_string());
            }
        }
    }
    if a.size == 0 || a.size > MAX_SIZE {
        return Err(format!("size {} out of range (1 .. {MAX_SIZE})", a.size));
    }
    if a.iters == 0 {
        return Err("iters must be at least 1".into());
    }
    if a.rx_depth < 2 || a.rx_depth > 16384 {
        return Err(format!("rx-depth {} out of range (2 .. 16384)", a.rx_depth));
    }
    if a.ib_port == 0 {
        return Err("ib-port is 1-based".into());
    }
    Ok(Some(a))
}

/// Entry point of `rdma-direct pingpong`.
pub fn run(args: &[String]) -> i32 {
    let has_dev = args.iter().any(|a| a == "-d" || a == "--ib-dev");
    if !has_dev && !args.iter().any(|a| a == "-h" || a == "--help") {
        return super::simpingpong::run(args);
    }
    let a = match parse_args(args) {
        Ok(Some(a)) => a,
        Ok(None) => {
            print!("{USAGE}");
            return 0;
        }
        Err(e) => {
            eprintln!("rdma-direct pingpong: {e}\n\n{USAGE}");
            return 2;
        }
    };
    match pingpong(&a) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("rdma-direct pingpong: {e}");
            1
        }
    }
}

fn io_err(ctx: &str, e: std::io::Error) -> Error {
    Error::io(ctx.to_string(), &e)
}

fn gid_str(g: &[u8; 16]) -> String {
    Ipv6Addr::from(*g).to_string()
}

fn print_dest(which: &str, m: &PingpongMsg) {
    // rc_pingpong's columns: "  local address:  LID ..." / "  remote address: LID ...".
    println!(
        "  {:<16}LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}",
        format!("{which} address:"),
        m.lid,
        m.qpn,
        m.psn,
        gid_str(&m.gid)
    );
}

/// Client side of the exchange: connect (retrying for a few seconds while the server comes
/// up), write ours, read theirs, write "done".
fn client_exchange(host: &str, port: u16, mine: &PingpongMsg) -> Result<PingpongMsg> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut s = loop {
        match TcpStream::connect((host, port)) {
            Ok(s) => break s,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(io_err(&format!("connect to {host}:{port}"), e)),
        }
    };
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| io_err("set_read_timeout", e))?;
    s.write_all(&mine.format()?)
        .map_err(|e| io_err("write local address", e))?;
    let mut buf = [0u8; PINGPONG_MSG_LEN];
    s.read_exact(&mut buf)
        .map_err(|e| io_err("read remote address", e))?;
    let rem = PingpongMsg::parse(&buf)?;
    s.write_all(PINGPONG_DONE)
        .map_err(|e| io_err("write \"done\"", e))?;
    Ok(rem)
}

fn pingpong(a: &Args) -> Result<()> {
    let mut p = VerbsDevice::open(&a.dev)?;
    run_pingpong(&mut p, a)
}

fn run_pingpong<P: Provider>(p: &mut P, a: &Args) -> Result<()> {
    // Resources, as rc_pingpong's pp_init_ctx: one buffer for sends and receives, a CQ of
    // rx_depth + 1, a QP with one send and rx_depth receives.
    let page = 4096;
    let mut buf = memmap2::MmapMut::map_anon(a.size.div_ceil(page) * page)
        .map_err(|e| io_err("mmap buffer", e))?;
    buf.fill(0x7b);
    let pd = p.alloc_pd()?;
    // SAFETY: `buf` outlives `mr` (declared before it, so dropped after it).
    let mr = unsafe { p.reg_mr(&pd, buf.as_mut_ptr(), a.size, Access::LOCAL_WRITE)? };
    let mut cq = p.create_cq(a.rx_depth + 1)?;
    let cfg = QpConfig {
        qp_type: a.qp_type,
        caps: QpCaps {
            max_send_wr: 1,
            max_recv_wr: a.rx_depth,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        sq_sig_all: false,
    };
    let mut qp = p.create_qp(&pd, &mut cq, None, None, &cfg)?;
    let opts = ConnectOpts {
        port: a.ib_port,
        gid_index: a.gid_idx.unwrap_or(0),
        path_mtu: Some(a.mtu),
        sl: a.sl,
        ..ConnectOpts::default()
    };
    let mut local = p.endpoint(&qp, &opts)?;
    if a.gid_idx.is_none() {
        local.gid = [0; 16];
    }
    let mine = PingpongMsg::from_endpoint(&local);
    print_dest("local", &mine);

    let sge = [mr.sge(0, a.size as u32)];
    let post_recvs = |qp: &mut P::Qp, n: u32| -> u32 {
        let rq = qp.rq();
        let mut done = 0;
        for _ in 0..n {
            if rq
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
        rq.ring();
        done
    };

    // The exchange, and the bring-up at the point rc_pingpong does it. Our receives are
    // posted right after the QP reaches RTS and before the peer can send to us.
    let (rem, mut routs) = match &a.host {
        Some(host) => {
            let rem = client_exchange(host, a.port, &mine)?;
            let remote = rem.to_endpoint(a.mtu, opts.gid_index);
            p.connect(&mut qp, &local, &remote, &opts)?;
            let routs = post_recvs(&mut qp, a.rx_depth);
            (rem, routs)
        }
        None => {
            let l = TcpListener::bind(("0.0.0.0", a.port))
                .map_err(|e| io_err(&format!("listen on port {}", a.port), e))?;
            let (mut s, _) = l.accept().map_err(|e| io_err("accept", e))?;
            s.set_read_timeout(Some(Duration::from_secs(30)))
                .map_err(|e| io_err("set_read_timeout", e))?;
            let mut m = [0u8; PINGPONG_MSG_LEN];
            s.read_exact(&mut m)
                .map_err(|e| io_err("read remote address", e))?;
            let rem = PingpongMsg::parse(&m)?;
            let remote = rem.to_endpoint(a.mtu, opts.gid_index);
            p.connect(&mut qp, &local, &remote, &opts)?;
            let routs = post_recvs(&mut qp, a.rx_depth);
            s.write_all(&mine.format()?)
                .map_err(|e| io_err("write local address", e))?;
            let mut done = [0u8; 5];
            s.read_exact(&mut done)
                .map_err(|e| io_err("read \"done\"", e))?;
            if &done != PINGPONG_DONE {
                return Err(Error::Protocol {
                    context: "rc_pingpong exchange",
                    detail: format!("expected \"done\\0\", got {done:?}"),
                });
            }
            (rem, routs)
        }
    };
    print_dest("remote", &rem);
    if routs < a.rx_depth {
        return Err(Error::InvalidArgument {
            context: "pingpong",
            detail: format!("could only post {routs} of {} receives", a.rx_depth),
        });
    }

    // The loop, as rc_pingpong's: `pending` holds what must complete before the next send.
    let send_wr = SendWr::send(SEND_WRID, &sge).signaled();
    let mut samples: Vec<u64> = Vec::with_capacity(a.iters as usize);
    let mut last_send: Option<Instant> = None;
    let mut post_send = |qp: &mut P::Qp, last: &mut Option<Instant>| -> Result<()> {
        let now = Instant::now();
        if let Some(t) = *last {
            samples.push(now.duration_since(t).as_nanos() as u64);
        }
        *last = Some(now);
        let sq = qp.sq();
        sq.post(send_wr).map_err(|r| Error::InvalidArgument {
            context: "post send",
            detail: r.error.to_string(),
        })?;
        sq.ring();
        Ok(())
    };
    let start = Instant::now();
    let mut pending = RECV_WRID;
    if a.host.is_some() {
        post_send(&mut qp, &mut last_send)?;
        pending |= SEND_WRID;
    }
    let (mut scnt, mut rcnt) = (0u32, 0u32);
    let mut wc = [Completion::EMPTY; 16];
    let mut last_progress = Instant::now();
    while rcnt < a.iters || scnt < a.iters {
        let n = cq.poll(&mut wc);
        if n == 0 {
            p.progress();
            if last_progress.elapsed() > STALL {
                return Err(Error::Protocol {
                    context: "pingpong",
                    detail: format!(
                        "no completion for {STALL:?} after {scnt} sends and {rcnt} receives: \
                         is the peer still running?"
                    ),
                });
            }
            continue;
        }
        last_progress = Instant::now();
        for c in &wc[..n] {
            if !c.is_ok() {
                return Err(Error::Protocol {
                    context: "pingpong",
                    detail: format!(
                        "failed status {} ({}) for wr_id {} (vendor_err {:#x})",
                        c.status,
                        c.status.to_ibv(),
                        c.wr_id,
                        c.vendor_err
                    ),
                });
            }
            match c.wr_id {
                SEND_WRID => scnt += 1,
                RECV_WRID => {
                    routs -= 1;
                    if routs <= 1 {
                        routs += post_recvs(&mut qp, a.rx_depth - routs);
                        if routs < a.rx_depth {
                            return Err(Error::InvalidArgument {
                                context: "pingpong",
                                detail: format!("could only repost to {routs} receives"),
                            });
                        }
                    }
                    rcnt += 1;
                }
                other => {
                    return Err(Error::Protocol {
                        context: "pingpong",
                        detail: format!("completion for unknown wr_id {other}"),
                    })
                }
            }
            pending &= !c.wr_id;
            if scnt < a.iters && pending == 0 {
                post_send(&mut qp, &mut last_send)?;
                pending = RECV_WRID | SEND_WRID;
            }
        }
    }
    let usec = start.elapsed().as_secs_f64() * 1e6;
    let bytes = a.size as u64 * u64::from(a.iters) * 2;
    println!(
        "{bytes} bytes in {:.2} seconds = {:.2} Mbit/sec",
        usec / 1e6,
        bytes as f64 * 8.0 / usec
    );
    println!(
        "{} iters in {:.2} seconds = {:.2} usec/iter",
        a.iters,
        usec / 1e6,
        usec / f64::from(a.iters)
    );
    samples.sort_unstable();
    if let Some(&min) = samples.first() {
        let pct = |q: f64| {
            samples[((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len()) - 1]
        };
        println!(
            "round trip per iteration [usec] ({} samples, {}): min {:.2} median {:.2} p99 {:.2}",
            samples.len(),
            p.device_name(),
            min as f64 / 1e3,
            pct(0.5) as f64 / 1e3,
            pct(0.99) as f64 / 1e3
        );
    }
    drop(qp);
    drop(cq);
    drop(mr);
    drop(pd);
    drop(buf);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_rc_pingpong_options() {
        let a = parse_args(&args(
            "-d rxe0 -g 1 -s 65536 -n 50 -c uc -p 19000 -m 2048 -r 64 127.0.0.1",
        ))
        .unwrap()
        .unwrap();
        assert_eq!(a.dev, "rxe0");
        assert_eq!(a.gid_idx, Some(1));
        assert_eq!(a.size, 65536);
        assert_eq!(a.iters, 50);
        assert_eq!(a.qp_type, QpType::Uc);
        assert_eq!(a.port, 19000);
        assert_eq!(a.mtu, Mtu::Mtu2048);
        assert_eq!(a.rx_depth, 64);
        assert_eq!(a.host.as_deref(), Some("127.0.0.1"));
        let d = parse_args(&args("-d rxe0")).unwrap().unwrap();
        assert_eq!(
            (d.size, d.iters, d.port, d.rx_depth),
            (4096, 1000, 18515, 500)
        );
        assert_eq!(d.mtu, Mtu::Mtu1024);
        assert!(d.host.is_none());
    }

    #[test]
    fn bad_options_are_errors() {
        for (s, want) in [
            ("-d rxe0 -s 0", "out of range"),
            ("-d rxe0 -s 2000000", "out of range"),
            ("-d rxe0 -m 1000", "not 256"),
            ("-d rxe0 -c XRC", "not RC or UC"),
            ("-d rxe0 -n x", "not a valid number"),
            ("-d rxe0 -n", "needs a value"),
            ("-d rxe0 --frob", "unknown option"),
            ("-d rxe0 a b", "more than one HOST"),
            ("-d rxe0 -r 1", "rx-depth"),
        ] {
            let e = parse_args(&args(s)).unwrap_err();
            assert!(e.contains(want), "{s}: {e}");
        }
    }
}
