//! `rdma-direct`: the command-line tool.

mod bench;
mod devices;
mod doctor;
mod events;
mod info;
mod json;
mod json_value;
mod perf;
mod pingpong;
mod plot;
mod plotcmd;
mod provider;
mod results;
mod table;

const USAGE: &str = "\
rdma-direct — kernel-bypass RDMA data plane (mlx5 direct, verbs fallback, software mlx5 device)

usage: rdma-direct <command> [options]

commands:
  devices              list RDMA devices (like ibv_devices)
  info [-d DEV] [-v]   device and port attributes, GID table (like ibv_devinfo / ibstat)
  pingpong [opts]      RC/UC ping-pong; speaks ibv_rc_pingpong's protocol with -d DEV,
                       runs on the software mlx5 device without one
  perf <test> [opts]   perftest-style latency/bandwidth (write_lat, send_lat, read_lat,
                       atomic_lat, write_bw, send_bw, read_bw): server and client in two
                       processes with -d DEV (either may be perftest), loopback on the sim
  bench <name> [opts]  hot-path benchmarks (see `rdma-direct bench --help`)
  plot FILE.json... --svg OUT   curves of perf/perftest result files (see `plot --help`)
  doctor [-d DEV]      walk the troubleshooting order: link, MTU, caps, memlock,
                       NUMA/CPU affinity, PCIe width
  events [-d DEV]      print asynchronous events live (CQ error, QP fatal, port
                       changes, ...); a demonstration on the sim without -d
  --version            the version
  help                 this text

Providers (--provider on pingpong, perf, info): auto picks the direct mlx5 path on an mlx5
device, libibverbs (verbs) on any other, the software mlx5 device (sim) without -d.
";

/// What a subcommand's parser made of its arguments: the options, or the exit status once
/// the usage is printed (`Ok(None)`, asked for with `--help`: status 0 on stdout) or the
/// parse error with the usage (status 2 on stderr, prefixed `rdma-direct CMD:`).
fn options_or_exit<O>(cmd: &str, usage: &str, parsed: Result<Option<O>, String>) -> Result<O, i32> {
    match parsed {
        Ok(Some(o)) => Ok(o),
        Ok(None) => {
            print!("{usage}");
            Err(0)
        }
        Err(e) => {
            eprintln!("rdma-direct {cmd}: {e}\n\n{usage}");
            Err(2)
        }
    }
}

/// `--flag=value` as the flag and its attached value; any other argument is a flag alone
/// (short flags take their value from the next argument).
fn split_flag(arg: &str) -> (&str, Option<&str>) {
    match arg.split_once('=') {
        Some((f, v)) if f.starts_with("--") => (f, Some(v)),
        _ => (arg, None),
    }
}

/// The value of `flag`: the attached one, else the next argument ("FLAG needs a value"
/// when there is none).
fn flag_value(
    flag: &str,
    attached: Option<&str>,
    rest: &mut std::slice::Iter<'_, String>,
) -> Result<String, String> {
    match attached {
        Some(v) => Ok(v.to_string()),
        None => rest
            .next()
            .cloned()
            .ok_or_else(|| format!("{flag} needs a value")),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let cmd = args.get(1).map(String::as_str).unwrap_or("help");
    let rest = if args.len() > 2 { &args[2..] } else { &[][..] };
    let code = match cmd {
        "devices" => devices::run(rest),
        "info" => info::run(rest),
        "pingpong" => pingpong::run(rest),
        "perf" => perf::run(rest),
        "doctor" => doctor::run(rest),
        "events" => events::run(rest),
        "bench" => bench::run(rest),
        "plot" => plotcmd::run(rest),
        "--version" | "-V" | "version" => {
            println!("rdma-direct {}", env!("CARGO_PKG_VERSION"));
            0
        }
        "help" | "-h" | "--help" => {
            print!("{USAGE}");
            0
        }
        other => {
            eprintln!("rdma-direct: unknown command '{other}'\n\n{USAGE}");
            2
        }
    };
    std::process::exit(code);
}
