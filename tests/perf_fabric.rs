//! `rdma-direct perf <test>` in perftest's two-process model on the sim: the server
//! (`-p PORT`) and the client (`-p PORT 127.0.0.1`) are two processes whose sim devices
//! reach each other over the sim fabric (shared memory under /dev/shm). Every test of the
//! family runs as server + client with a small `-n`; both exit 0, the client's first line
//! names the sim, and each side prints the table perftest's side prints. What the fabric
//! does not carry is refused in one line before anything runs.

use std::net::TcpListener;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const FABRIC: &str = "RDMA_DIRECT_SIM_FABRIC";
const EXE: &str = env!("CARGO_BIN_EXE_rdma-direct");
/// Liveness only: a side still running after this is a hang, killed and reported.
const HANG: Duration = Duration::from_secs(180);
const ITERS: &str = "50";

struct Removed(String);
impl Drop for Removed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(std::path::Path::new("/dev/shm").join(&self.0));
    }
}

fn free_port() -> String {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string()
}

fn spawn(fabric: &str, args: &[&str]) -> Child {
    Command::new(EXE)
        .args(args)
        .env(FABRIC, fabric)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Wait for `c`, killing it if it outlives [`HANG`].
fn finish(mut c: Child, started: Instant) -> Output {
    while c.try_wait().unwrap().is_none() {
        if started.elapsed() > HANG {
            let _ = c.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    c.wait_with_output().unwrap()
}

/// The table rows of `text` (lines whose first two fields are a size and `iters`).
fn rows(text: &str, iters: &str) -> Vec<Vec<String>> {
    text.lines()
        .map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>())
        .filter(|f| f.len() >= 5 && f[0].parse::<u32>().is_ok() && f[1] == iters)
        .collect()
}

#[test]
fn every_perf_test_runs_as_server_and_client_over_the_sim_fabric() {
    // (test, size of its row, whether the server prints a row: perftest's read_lat and
    // atomic_lat servers only wait; the write_bw/read_bw server prints the client's report)
    let family = [
        ("write_lat", "2", true),
        ("send_lat", "2", true),
        ("read_lat", "2", false),
        ("atomic_lat", "8", false),
        // The bandwidth tests' default size (65536): messages of many packets.
        ("write_bw", "65536", true),
        ("send_bw", "65536", true),
        ("read_bw", "65536", true),
    ];
    for (test, size, server_row) in family {
        let fabric = format!("rdma-direct-test-{}-perf-{test}", std::process::id());
        let _rm = Removed(fabric.clone());
        let port = free_port();
        let started = Instant::now();
        let server = spawn(&fabric, &["perf", test, "-n", ITERS, "-p", &port]);
        let client = spawn(
            &fabric,
            &["perf", test, "-n", ITERS, "-p", &port, "127.0.0.1"],
        );
        let c = finish(client, started);
        let s = finish(server, started);
        for (who, out, want_row) in [("client", &c, true), ("server", &s, server_row)] {
            let text = String::from_utf8_lossy(&out.stdout);
            let why = format!(
                "{test} {who}: {}\n{text}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(out.status.success(), "{why}");
            assert!(text.contains(" Provider        : sim: "), "{why}");
            assert!(
                text.contains(&format!(" Test            : {test}\n")),
                "{why}"
            );
            assert!(text.contains("#bytes"), "{why}");
            let r = rows(&text, ITERS);
            assert_eq!(r.len(), usize::from(want_row), "{why}");
            if want_row {
                assert_eq!(r[0][0], size, "{why}");
                // Every figure of the row is a positive number.
                for f in &r[0][2..] {
                    assert!(f.parse::<f64>().is_ok_and(|x| x > 0.0), "{f}: {why}");
                }
            }
        }
        let text = String::from_utf8_lossy(&c.stdout);
        let first = text.lines().next().unwrap_or("");
        assert!(
            first.contains("sim") && first.contains("sim fabric"),
            "{test}: {text}"
        );
        assert!(text.contains("(client of 127.0.0.1:"), "{test}: {text}");
    }
}

/// What the fabric does not carry is a usage error (status 2) of one line naming the
/// limit, before a device is opened or a port is listened on.
#[test]
fn what_the_fabric_does_not_carry_is_refused_in_one_line() {
    for (args, says) in [
        (
            &["perf", "write_bw", "-c", "UC", "-p", "19999"][..],
            "RC only",
        ),
        (
            &["perf", "send_lat", "-c", "UD", "127.0.0.1"][..],
            "RC only",
        ),
    ] {
        let out = Command::new(EXE).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
        let first = err.lines().next().unwrap_or("");
        assert!(first.contains(says), "{args:?}: {err}");
    }
}
