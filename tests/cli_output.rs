//! Every command of `rdma-direct` with a stdout it cannot write: a full device (`> /dev/full`,
//! ENOSPC), a closed descriptor (`>&-`, EBADF) and a pipe whose reader is gone (EPIPE).
//!
//! A full or closed stdout: the run ends with status 1 and exactly one line on stderr naming
//! the failure (`rdma-direct CMD: cannot write to stdout: ...`), never a panic (status 101)
//! and never status 0 with the results lost. A closed pipe: SIGPIPE ends the tool quietly, as
//! it ends C tools; where SIGPIPE is blocked the write's EPIPE ends it with status 1 and no
//! line. Other stderr lines a command prints anyway (the host's "no RDMA device" note of
//! `devices`) are allowed before the failure line.

mod common;

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

/// Longest a command may run (debug build, busy machine); a hang is killed and fails.
const LIMIT: Duration = Duration::from_secs(120);

/// One command line per command (and the help texts), each making its command print.
/// `{tmp}`: a scratch directory; `{fx}`: the fixtures.
const COMMANDS: &[&str] = &[
    "help",
    "help perf",
    "--help",
    "--version",
    "devices",
    "devices --help",
    "info",
    "info -v",
    "info --help",
    "doctor",
    "doctor --json",
    "doctor --help",
    "doctor --latency",
    "doctor --latency --json",
    "jitter -D 0.02",
    "jitter --help",
    "selftest",
    "selftest --json",
    "selftest --help",
    "pingpong -n 20",
    "pingpong --help",
    "events",
    "events --help",
    "perf write_lat -n 20",
    "perf write_lat -s 2 -n 20 --json {tmp}/lat.json",
    "perf write_bw -n 1000",
    "perf --help",
    "bench post -n 1000",
    "bench poll -n 1000",
    "bench --help",
    "bench batching -l 1,2 -m db8 -Q 1 -r 3 -w 1 -n 64",
    "bench batching --help",
    "plot {fx}/perftest/ib_write_lat_rxe0_2.json --svg {tmp}/p.svg",
    "plot --help",
    "scenario {fx}/scenarios/atomics.scn",
    "scenario --help",
];

/// How the child's stdout is set up.
#[derive(Clone, Copy, Debug)]
enum Sink {
    /// /dev/full: every write fails with ENOSPC.
    Full,
    /// Descriptor 1 closed.
    Closed,
    /// A pipe whose read end is closed before the child starts.
    Widowed,
    /// As `Widowed`, with SIGPIPE blocked in the child (the write returns EPIPE).
    WidowedBlocked,
}

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_rdma-direct")
}

/// A pipe's write end whose read end is already closed.
fn widowed_pipe() -> std::os::fd::OwnedFd {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2(2) returns.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: pipe2 succeeded: both descriptors are open and owned by nobody else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    write
}

/// Run `args` with stdout set up as `sink`: (status, stderr).
fn run(args: &[String], sink: Sink) -> Result<(ExitStatus, String), String> {
    let mut cmd = Command::new(exe());
    cmd.args(args)
        .env("RUST_BACKTRACE", "1")
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    match sink {
        Sink::Full => {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .map_err(|e| format!("/dev/full: {e}"))?;
            cmd.stdout(f);
        }
        Sink::Closed => {
            cmd.stdout(Stdio::null());
            // SAFETY: close(2) in the child between fork and exec: async-signal-safe, and
            // only descriptor 1 of the child is touched.
            unsafe {
                cmd.pre_exec(|| {
                    libc::close(1);
                    Ok(())
                });
            }
        }
        Sink::Widowed => {
            cmd.stdout(widowed_pipe());
        }
        Sink::WidowedBlocked => {
            cmd.stdout(widowed_pipe());
            // SAFETY: sigemptyset/sigaddset on a local set and sigprocmask in the child
            // between fork and exec: async-signal-safe; the mask survives exec.
            unsafe {
                cmd.pre_exec(|| {
                    let mut set: libc::sigset_t = std::mem::zeroed();
                    libc::sigemptyset(&mut set);
                    libc::sigaddset(&mut set, libc::SIGPIPE);
                    libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
                    Ok(())
                });
            }
        }
    }
    let mut child = cmd.spawn().map_err(|e| format!("spawn: {e}"))?;
    let t_err = common::drain(child.stderr.take().expect("stderr"));
    let status = common::wait_or_kill(&mut child, LIMIT)?;
    let err = String::from_utf8_lossy(&t_err.join().unwrap_or_default()).into_owned();
    Ok((status, err))
}

/// What is wrong with the outcome of one command line on `sink`, if anything.
fn check(sink: Sink, line: &str, got: Result<(ExitStatus, String), String>) -> Option<String> {
    let (st, err) = match got {
        Ok(g) => g,
        Err(e) => return Some(e),
    };
    for bad in ["panicked", "stack backtrace", "RUST_BACKTRACE"] {
        if err.contains(bad) {
            return Some(format!("'{bad}' on stderr: {err}"));
        }
    }
    let failure_lines = err
        .lines()
        .filter(|l| l.contains("cannot write to stdout"))
        .count();
    match sink {
        Sink::Full | Sink::Closed => {
            let errno = match sink {
                Sink::Full => "No space left on device",
                _ => "Bad file descriptor",
            };
            if st.code() != Some(1) {
                return Some(format!("{st:?}, expected exit status 1; stderr: {err}"));
            }
            let last = err.lines().last().unwrap_or("");
            // The line names the command that failed to write (`rdma-direct perf: ...`).
            let word = line.split_whitespace().next().unwrap_or("");
            let prefix = if word.starts_with('-') || word == "help" {
                "rdma-direct".to_string()
            } else {
                format!("rdma-direct {word}: ")
            };
            if failure_lines != 1
                || !last.starts_with(&prefix)
                || !last.contains("cannot write to stdout")
                || !last.contains(errno)
            {
                return Some(format!(
                    "the last stderr line is not the one failure line ({errno}): {err}"
                ));
            }
        }
        Sink::Widowed => {
            if st.signal() != Some(libc::SIGPIPE) {
                return Some(format!(
                    "{st:?}, expected the end by SIGPIPE; stderr: {err}"
                ));
            }
        }
        Sink::WidowedBlocked => {
            if st.code() != Some(1) || failure_lines != 0 {
                return Some(format!(
                    "{st:?}, expected exit status 1 and no failure line; stderr: {err}"
                ));
            }
        }
    }
    None
}

fn every_command(sink: Sink) {
    let tmp = std::env::temp_dir().join(format!(
        "rdma-direct-cli-output-{}-{sink:?}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).expect("scratch dir");
    let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut failures = Vec::new();
    for line in COMMANDS {
        let args: Vec<String> = line
            .split_whitespace()
            .map(|a| {
                a.replace("{tmp}", &tmp.display().to_string())
                    .replace("{fx}", &fx.display().to_string())
            })
            .collect();
        if let Some(why) = check(sink, line, run(&args, sink)) {
            failures.push(format!("rdma-direct {line}: {why}"));
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(
        failures.is_empty(),
        "{sink:?}: {} of {} commands failed:\n{}",
        failures.len(),
        COMMANDS.len(),
        failures.join("\n")
    );
}

#[test]
fn a_full_stdout_is_one_line_and_status_1() {
    every_command(Sink::Full);
}

#[test]
fn a_closed_stdout_is_one_line_and_status_1() {
    every_command(Sink::Closed);
}

#[test]
fn a_reader_gone_ends_the_tool_by_sigpipe() {
    every_command(Sink::Widowed);
}

#[test]
fn a_reader_gone_with_sigpipe_blocked_ends_with_status_1_quietly() {
    every_command(Sink::WidowedBlocked);
}

/// Results written to a file survive a stdout that cannot be written: the run still writes
/// its `--json` file.
#[test]
fn a_full_stdout_keeps_the_result_file() {
    let f = std::env::temp_dir().join(format!(
        "rdma-direct-cli-output-{}.json",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&f);
    let args: Vec<String> = ["perf", "write_lat", "-s", "2", "-n", "20", "--json"]
        .iter()
        .map(|s| s.to_string())
        .chain([f.display().to_string()])
        .collect();
    let (st, err) = run(&args, Sink::Full).expect("run");
    assert_eq!(st.code(), Some(1), "{err}");
    let text =
        std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}; {err}", f.display()));
    let _ = std::fs::remove_file(&f);
    assert!(text.contains("\"bytes\": 2,"), "{text}");
}

/// The tool prints through its one writer (src/bin/rdma-direct/out.rs): no `print!`,
/// `println!`, `eprint!`, `eprintln!` or `std::io::stdout()` elsewhere in its source (a
/// `println!` panics on a full stdout, and bypasses the failure line).
#[test]
fn the_tool_prints_only_through_its_writer() {
    fn walk(dir: &Path, found: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, found);
                continue;
            }
            // out.rs is the writer; plot/tests.rs is a #[cfg(test)] module.
            if p.extension().is_none_or(|x| x != "rs")
                || p.ends_with("out.rs")
                || p.ends_with("plot/tests.rs")
            {
                continue;
            }
            let src = std::fs::read_to_string(&p).expect("read");
            let code = common::strip_rust(&src, false);
            for (n, l) in code.lines().enumerate() {
                for bad in ["print!(", "println!(", "io::stdout()", "io::stderr().lock"] {
                    if l.contains(bad) {
                        found.push(format!("{}:{}: {}", p.display(), n + 1, l.trim()));
                    }
                }
            }
        }
    }
    let mut found = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bin/rdma-direct"),
        &mut found,
    );
    assert!(
        found.is_empty(),
        "printing around out.rs:\n{}",
        found.join("\n")
    );
}
