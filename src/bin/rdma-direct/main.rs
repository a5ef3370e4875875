//! `rdma-direct`: the command-line tool.
//!
//! The entry point is C's `main`, not Rust's: Rust's start-up would point a closed stdout at
//! /dev/null (the output lost and nothing said, where out.rs reports it) and ignore SIGPIPE.

// (Not in the unit-test build, whose harness brings its own main.)
#![cfg_attr(not(test), no_main)]

// First: the output macros (`out!`, `outln!`, `err!`, `errln!`) every module below prints with.
#[macro_use]
mod out;

mod batching;
mod bench;
mod cpu_room;
mod devices;
mod doctor;
mod events;
mod info;
mod jitter;
mod perf;
mod pingpong;
mod plotcmd;
mod provider;
mod scenario;
mod selftest;
mod stop;

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
                       NUMA/CPU affinity, PCIe width; --latency: the polling core's tuning
  jitter [-c CPUS]     host noise: how often and how long each CPU is taken from a
                       spinning thread, and by what (interrupts, softirqs, other tasks)
  selftest [-d DEV]    the first-light ladder: small real operations, stopping at the
                       first that fails with what to send back (--json for a report)
  events [-d DEV]      print asynchronous events live (CQ error, QP fatal, port
                       changes, ...); a demonstration on the sim without -d
  scenario PATH... [-d DEV]  run .scn transfer scenarios (files or directories), one
                       PASS/FAIL line each (see `scenario --help`)
  --version            the version
  help [COMMAND]       this text, or COMMAND's options (as COMMAND --help)

Providers (--provider on pingpong, perf, info): auto picks the direct mlx5 path on an mlx5
device, libibverbs (verbs) on any other, the software mlx5 device (sim) without -d.
";

/// What a subcommand's parser made of its arguments: the options, or the exit status once
/// the usage is printed (`Ok(None)`, asked for with `--help`: status 0 on stdout) or the
/// parse error (status 2, [`usage_error`]).
fn options_or_exit<O>(cmd: &str, usage: &str, parsed: Result<Option<O>, String>) -> Result<O, i32> {
    match parsed {
        Ok(Some(o)) => Ok(o),
        Ok(None) => {
            out!("{usage}");
            Err(0)
        }
        Err(e) => Err(usage_error(cmd, &e)),
    }
}

/// A bad command line: one line on stderr, `rdma-direct CMD: PROBLEM`, and where the options
/// are listed (the usage itself would bury the line). Returns the exit status, 2.
fn usage_error(cmd: &str, problem: &str) -> i32 {
    errln!("rdma-direct {cmd}: {problem} (`rdma-direct {cmd} --help` lists the options)");
    2
}

/// Check, before a run, that the output file of `flag` (`--json`, `--svg`) can be written,
/// so a run is not made only to fail at its end: the file is opened for writing (created
/// and removed again when it did not exist; an existing file is not changed).
fn check_output(flag: &str, path: &std::path::Path) -> Result<(), String> {
    let existed = path.exists();
    if path.is_dir() {
        return Err(format!("{flag} {}: is a directory", path.display()));
    }
    match std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
    {
        Ok(_) => {
            if !existed {
                let _ = std::fs::remove_file(path);
            }
            Ok(())
        }
        Err(e) => {
            let dir_missing = path
                .parent()
                .is_some_and(|d| !d.as_os_str().is_empty() && !d.is_dir());
            let hint = match e.kind() {
                std::io::ErrorKind::NotFound if dir_missing => " (the directory does not exist)",
                std::io::ErrorKind::NotFound => " (no file can be created there)",
                std::io::ErrorKind::PermissionDenied => " (not writable)",
                _ => "",
            };
            Err(format!("{flag} {}: {e}{hint}", path.display()))
        }
    }
}

/// The integer types [`number`] parses.
trait Bounded: std::str::FromStr + Copy {
    /// The largest value, as text for the message.
    const MAX: u64;
}
macro_rules! bounded {
    ($($t:ty),*) => { $(impl Bounded for $t { const MAX: u64 = <$t>::MAX as u64; })* };
}
bounded!(u8, u16, u32, u64, usize);

/// The value of numeric option `flag`: "not a number" for text, "negative" and "out of
/// range (at most MAX)" for integers the type cannot hold, so a huge value is never called
/// "not a number".
fn number<T: Bounded>(flag: &str, v: &str) -> Result<T, String> {
    if let Ok(n) = v.parse::<T>() {
        return Ok(n);
    }
    let digits = v.strip_prefix(['-', '+']).unwrap_or(v);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{flag}: '{v}' is not a number"));
    }
    if v.starts_with('-') {
        return Err(format!("{flag}: {v} is negative"));
    }
    Err(format!("{flag}: {v} is out of range (at most {})", T::MAX))
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

/// The process's entry point (see the crate doc): the tool, with a panic ending it with
/// status 101 as Rust's start-up would (never unwinding into C).
#[cfg(not(test))]
#[no_mangle]
extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    std::panic::catch_unwind(tool).unwrap_or(101)
}

/// The command line's command, run; exits through [`out::finish`].
#[cfg_attr(test, allow(dead_code))]
fn tool() -> i32 {
    // A reader that goes away (`rdma-direct devices | head -1`) ends the tool quietly, as it
    // ends C tools; SIGPIPE keeps its default action (see out.rs for the other failures).
    // SAFETY: setting the default disposition of one signal, before any thread is started;
    // no handler is installed.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let args: Vec<String> = std::env::args().collect();
    let Some(cmd) = args.get(1).map(String::as_str) else {
        out::start("");
        errln!("rdma-direct: which command? (`rdma-direct help` lists the commands)");
        out::finish(2);
    };
    let rest = if args.len() > 2 { &args[2..] } else { &[][..] };
    // `help CMD` is `CMD --help`.
    let help_of = ["--help".to_string()];
    let (cmd, rest) = match (cmd, rest.first()) {
        ("help", Some(c)) if rest.len() == 1 => (c.as_str(), &help_of[..]),
        _ => (cmd, rest),
    };
    out::start(match cmd {
        "devices" | "info" | "pingpong" | "perf" | "doctor" | "events" | "bench" | "plot"
        | "selftest" | "scenario" | "jitter" => cmd,
        _ => "",
    });
    // With RDMA_DIRECT_LIBIBVERBS naming tests/standin's library, the sim is its device.
    let _ = rdma_direct::providers::sim::standin::attach_if_standin();
    let code = match cmd {
        "devices" => devices::run(rest),
        "info" => info::run(rest),
        "pingpong" => pingpong::run(rest),
        "perf" => perf::run(rest),
        "doctor" => doctor::run(rest),
        "jitter" => jitter::run(rest),
        "events" => events::run(rest),
        "bench" => bench::run(rest),
        "plot" => plotcmd::run(rest),
        "selftest" => selftest::run(rest),
        "scenario" => scenario::run(rest),
        "--version" | "-V" | "version" => {
            outln!("rdma-direct {}", env!("CARGO_PKG_VERSION"));
            0
        }
        "help" | "-h" | "--help" => {
            out!("{USAGE}");
            0
        }
        other => {
            errln!(
                "rdma-direct: unknown command '{other}' (`rdma-direct help` lists the commands)"
            );
            2
        }
    };
    out::finish(stop::exit_code(code));
}

#[cfg(test)]
mod tests {
    use super::number;

    #[test]
    fn numbers_name_the_flag_and_the_problem() {
        assert_eq!(number::<u32>("-n", "12"), Ok(12));
        assert_eq!(
            number::<u8>("-i", "x1").unwrap_err(),
            "-i: 'x1' is not a number"
        );
        assert_eq!(
            number::<u8>("-i", "").unwrap_err(),
            "-i: '' is not a number"
        );
        assert_eq!(number::<u32>("-n", "-3").unwrap_err(), "-n: -3 is negative");
        assert_eq!(
            number::<u32>("-s", "99999999999").unwrap_err(),
            "-s: 99999999999 is out of range (at most 4294967295)"
        );
        assert!(number::<u64>("-s", "999999999999999999999")
            .unwrap_err()
            .contains("out of range"));
    }
}
