//! `rdma-direct events [-d DEV]`: print a context's asynchronous events as they arrive.
//!
//! With `-d DEV`: opens the device and prints each event (`ibv_get_async_event` on the
//! non-blocking async fd, acknowledged at once) with the object it concerns, sleeping in
//! `poll(2)` between them, until interrupted or `--count N` events were printed. Without a
//! device: a demonstration on the software mlx5 device, which is made to raise one event of
//! each kind (the sim raises CQ overruns and QP fatal errors by itself; see `tests/sim_events.rs`).

use rdma_direct::control::Context;
use rdma_direct::providers::sim::{AsyncEvent, SimDevice};

use super::provider::{find_device, SIM_DEVICE};

const USAGE: &str = "\
usage: rdma-direct events [-d DEV] [--count N]

  -d, --ib-dev DEV  the device (sim0: the software device, as without -d)
  --count N         stop after N events (at least 1; default: until interrupted, on the
                    software device: all of them)

Prints the device's asynchronous events live (CQ error/overrun, QP fatal, request and access
errors, last WQE reached, SRQ limit, port active/error, GID change, device fatal), each with
the object it concerns. Without -d: a demonstration on the software mlx5 device, made to
raise one event of each kind.
";

/// `-d DEV` and `--count N` (at least 1; `None`: until interrupted).
type Opts = (Option<String>, Option<u64>);

/// The options; `Ok(None)`: help was asked for.
fn parse(args: &[String]) -> Result<Option<Opts>, String> {
    let (mut dev, mut count) = (None, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (flag, attached) = crate::split_flag(a);
        let mut val = || crate::flag_value(flag, attached, &mut it);
        match flag {
            "-h" | "--help" => return Ok(None),
            "-d" | "--ib-dev" => dev = Some(val()?),
            "--count" => {
                let n: u64 = crate::number(flag, &val()?)?;
                if n == 0 {
                    return Err("--count 0: at least 1 event".into());
                }
                count = Some(n);
            }
            other if other.starts_with('-') => return Err(format!("unknown option '{other}'")),
            other => return Err(format!("unexpected argument '{other}'")),
        }
    }
    Ok(Some((dev, count)))
}

pub fn run(args: &[String]) -> i32 {
    let (dev, count) = match crate::options_or_exit("events", USAGE, parse(args)) {
        Ok(o) => o,
        Err(status) => return status,
    };
    match dev.as_deref() {
        None | Some(SIM_DEVICE) => sim_demo(count),
        Some(name) => {
            // The diagnosis every command gives for a device that is not there.
            if let Err(e) = find_device(name) {
                errln!("rdma-direct events: {e}");
                return 1;
            }
            live(name, count.unwrap_or(u64::MAX))
        }
    }
}

fn live(name: &str, count: u64) -> i32 {
    let ctx = match Context::open(name) {
        Ok(c) => c,
        Err(e) => {
            errln!("rdma-direct events: {e}");
            return 1;
        }
    };
    outln!("{name}: waiting for asynchronous events (Ctrl-C to stop)");
    let mut seen = 0;
    // A stdout that cannot be written ends the watch (out.rs reports it).
    while seen < count && !crate::out::stdout_failed() {
        match ctx.poll_async_event() {
            Ok(Some(ev)) => {
                outln!("{name}: {ev}");
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
                errln!("rdma-direct events: {e}");
                return 1;
            }
        }
    }
    0
}

fn print_sim(ev: &AsyncEvent) {
    let (kind, what) = ev.describe();
    outln!("sim0: {kind} {what}");
}

/// The sim raises one event of each kind; the first `count` are printed (all without one).
fn sim_demo(count: Option<u64>) -> i32 {
    outln!("provider: sim (software mlx5 device; not hardware)");
    outln!("sim0: raising one event of each kind");
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
    let mut left = count.unwrap_or(u64::MAX);
    while left > 0 {
        let Some(ev) = dev.poll_async_event() else {
            break;
        };
        print_sim(&ev);
        left -= 1;
    }
    0
}
