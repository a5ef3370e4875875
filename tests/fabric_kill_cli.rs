//! `kill -9` of the server mid-run, through the CLI on the sim fabric: the client's requests
//! to the dead peer end in RETRY_EXC_ERR within the retry budget, and the client exits
//! non-zero naming it (no hang, no exit 0); a pingpong client caught waiting only to
//! receive has nothing in flight to fail and ends at its stall limit instead. The time from the kill to the client's exit is
//! measured and printed (the acceptance bound is the retry budget plus 2 s); the test
//! itself asserts only a liveness limit, never a speed.

use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_rdma-direct");
/// Liveness only: what is still running after this is a hang, killed and failed.
const HANG: Duration = Duration::from_secs(60);

struct Removed(String);
impl Drop for Removed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(std::path::Path::new("/dev/shm").join(&self.0));
    }
}

/// Kills (SIGKILL) and reaps a child left behind by a failed assertion.
struct Reaped(Option<Child>);
impl Drop for Reaped {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn spawn(fabric: &str, args: &[&str], stdout: Stdio) -> Child {
    Command::new(EXE)
        .args(args)
        .env("RDMA_DIRECT_SIM_FABRIC", fabric)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Runs `args` (a long run of a two-process command) as server and client on sim0, kills
/// the server with SIGKILL once the client's table header shows the run is under way, and
/// checks how the client ends: status 1, one of `says` in its error. `budget` describes the
/// retry budget, for the printed figure.
fn server_killed_mid_run(name: &str, args: &[&str], budget: &str, says: &[&str]) {
    let fabric = format!("rdma-direct-test-{}-kill-{name}", std::process::id());
    let _rm = Removed(fabric.clone());
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let server_args: Vec<&str> = args.iter().copied().chain(["-p", &port]).collect();
    let mut server = Reaped(Some(spawn(&fabric, &server_args, Stdio::null())));
    let client_args: Vec<&str> = server_args.iter().copied().chain(["127.0.0.1"]).collect();
    let mut client = Reaped(Some(spawn(&fabric, &client_args, Stdio::piped())));
    let out = client.0.as_mut().unwrap().stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines() {
            if tx.send(l.unwrap_or_default()).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    loop {
        match rx.recv_timeout(HANG) {
            Ok(l) => {
                let header = l.starts_with(" #bytes");
                lines.push(l);
                if header {
                    break;
                }
            }
            Err(e) => panic!("{name}: no table header from the client ({e}): {lines:?}"),
        }
    }
    // The header comes once both QPs are up; let some messages flow before the kill.
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        client.0.as_mut().unwrap().try_wait().unwrap().is_none(),
        "{name}: the client ended before the kill: {lines:?}"
    );
    let mut s = server.0.take().unwrap();
    s.kill().unwrap(); // SIGKILL
    let killed = Instant::now();
    let _ = s.wait();
    let mut c = client.0.take().unwrap();
    let status = loop {
        if let Some(st) = c.try_wait().unwrap() {
            break st;
        }
        if killed.elapsed() > HANG {
            let _ = c.kill();
            let _ = c.wait();
            panic!("{name}: the client still runs {HANG:?} after the server's kill -9: {lines:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let took = killed.elapsed();
    let mut err = String::new();
    c.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    lines.extend(rx.try_iter());
    println!(
        "{name}: kill -9 of the server -> client {status}: {:.0} ms (retry budget {budget}; \
         acceptance: budget + 2 s)",
        took.as_secs_f64() * 1e3
    );
    assert!(
        !status.success(),
        "{name}: exit 0 after the peer died: {err}\n{lines:?}"
    );
    assert_eq!(status.code(), Some(1), "{name}: {err}");
    assert!(
        says.iter().any(|s| err.contains(s)),
        "{name}: none of {says:?}: {err}\n{lines:?}"
    );
}

/// pingpong's client alternates: a kill that lands while its SEND is in flight ends that
/// SEND in RETRY_EXC_ERR within the budget; one that lands while it only waits for the
/// server's next message leaves nothing on the wire to fail (as on hardware), so its stall
/// limit (20 s) ends the run, naming a gone peer. Either way: status 1, no hang.
#[test]
fn pingpong_client_ends_non_zero_when_the_server_is_killed() {
    // rc_pingpong's defaults: timeout 14 (4.096 us << 14 = 67 ms), retry_cnt 6: 7 tries.
    server_killed_mid_run(
        "pingpong",
        &["pingpong", "-n", "16777216"],
        "7 x 67 ms = 470 ms",
        &[
            "RETRY_EXC_ERR (12) for wr_id",
            "while owed the peer's next message",
        ],
    );
}

/// A bandwidth client always has WRITEs in flight: the kill ends them in RETRY_EXC_ERR
/// within the retry budget, and the error says the peer is gone.
#[test]
fn perf_write_bw_client_ends_in_retry_exc_err_when_the_server_is_killed() {
    // The library's connection defaults (ConnectOpts): timeout 14, retry_cnt 6: 7 tries.
    server_killed_mid_run(
        "write_bw",
        &["perf", "write_bw", "-n", "16000000"],
        "7 x 67 ms = 470 ms",
        &["RETRY_EXC_ERR (vendor_err 0x15): no acknowledgement from the peer"],
    );
}
