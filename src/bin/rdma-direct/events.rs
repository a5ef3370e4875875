//! `rdma-direct events [-d DEV]`: print a context's asynchronous events as they arrive.
//!
//! With `-d DEV`: opens the device and prints each event (`ibv_get_async_event` on the
//! non-blocking async fd, acknowledged at once) with the object it concerns, sleeping in
//! `poll(2)` between them, until interrupted or `--count N` events were printed. Without a
//! device: a demonstration on the software mlx5 device, which is made to raise one event of
//! each kind (the sim raises CQ overruns and QP fatal errors by itself; see `tests/sim_events.rs`).

use rdma_direct::providers::sim::{AsyncEvent, SimDevice};
use rdma_direct::verbs::Context;

const USAGE: &str = "\
usage: rdma-direct events [-d DEV] [--count N]

Prints the device's asynchronous events live (CQ error/overrun, QP fatal, request and access
errors, last WQE reached, SRQ limit, port active/error, GID change, device fatal), each with
the object it concerns. Without -d: a demonstration on the software mlx5 device, made to
raise one event of each kind.
";

pub fn run(args: &[String]) -> i32 {
    let mut dev = None;
    let mut count = u64::MAX;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "-h" | "--help" => {
                print!("{USAGE}");
                return 0;
            }
            "-d" | "--ib-dev" if i + 1 < args.len() => {
                dev = Some(args[i + 1].clone());
                i += 1;
            }
            "--count" if i + 1 < args.len() => match args[i + 1].parse() {
                Ok(n) => {
                    count = n;
                    i += 1;
                }
                Err(_) => {
                    eprintln!(
                        "rdma-direct events: bad --count '{}'\n\n{USAGE}",
                        args[i + 1]
                    );
                    return 2;
                }
            },
            a => {
                eprintln!("rdma-direct events: unexpected argument '{a}'\n\n{USAGE}");
                return 2;
            }
        }
        i += 1;
    }
    match dev {
        Some(name) => live(&name, count),
        None => sim_demo(),
    }
}

fn live(name: &str, count: u64) -> i32 {
    let ctx = match Context::open(name) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rdma-direct events: {e}");
            return 1;
        }
    };
    println!("{name}: waiting for asynchronous events (Ctrl-C to stop)");
    let mut seen = 0;
    while seen < count {
        match ctx.poll_async_event() {
            Ok(Some(ev)) => {
                println!("{name}: {ev}");
                seen += 1;
            }
            Ok(None) => {
                let mut p = libc::pollfd {
                    fd: ctx.async_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd; sleeps until the async fd is readable.
                unsafe { libc::poll(&mut p, 1, -1) };
            }
            Err(e) => {
                eprintln!("rdma-direct events: {e}");
                return 1;
            }
        }
    }
    0
}

fn print_sim(ev: &AsyncEvent) {
    let (kind, what) = ev.describe();
    println!("sim0: {kind} {what}");
}

fn sim_demo() -> i32 {
    println!("provider: sim (software mlx5 device; not hardware)");
    println!("sim0: raising one event of each kind (no -d given)");
    let dev = SimDevice::new();
    for ev in [
        AsyncEvent::PortActive { port: 1 },
        AsyncEvent::GidChange { port: 1 },
        AsyncEvent::CqOverrun { cqn: 0x40 },
        AsyncEvent::QpFatal { qpn: 0x100 },
        AsyncEvent::QpReqErr { qpn: 0x100 },
        AsyncEvent::QpAccessErr { qpn: 0x100 },
        AsyncEvent::QpLastWqeReached { qpn: 0x101 },
        AsyncEvent::SrqLimitReached { srqn: 0x20 },
        AsyncEvent::PortErr { port: 1 },
        AsyncEvent::DeviceFatal,
    ] {
        dev.raise_event(ev);
    }
    while let Some(ev) = dev.poll_async_event() {
        print_sim(&ev);
    }
    0
}
