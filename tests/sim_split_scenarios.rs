//! The fixture scenarios of `fixtures/scenarios/` split across two processes on the sim
//! fabric: the requester side (A) of each scenario in a child process, the responder side
//! (B) in this one, each on its own software mlx5 device (device thread: each end answers
//! on its own while the other waits in the lockstep), connected through the fabric in
//! shared memory (`providers/sim/fabric`), byte for byte as in one process. The runner's
//! two-process mode (`rdma_direct::scenario::split`) is the one the two-guest bed drives on
//! rxe; here the test binary runs itself again as side A (`RDMA_DIRECT_SPLIT_PEER` holds
//! B's two addresses), with a fabric of this run only, removed at the end.
//!
//! A scenario is skipped, with its reason printed, when it cannot split (the runner's
//! [`plan`] says why: a UD QP, a queue or buffer used by both sides, ...) or needs what the
//! fabric does not carry ([`fabric_limit`]: connected QPs, RC and UC, messages up to `MAX_MESSAGE`).

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rdma_direct::providers::sim::fabric::MAX_MESSAGE;
use rdma_direct::providers::sim::SimDevice;
use rdma_direct::providers::{ProviderKind, QpType};
use rdma_direct::scenario::split::{plan, Link, Side};
use rdma_direct::scenario::{load_dir, run_scenario_split, RunOpts, Scenario, StepKind};

const PEER: &str = "RDMA_DIRECT_SPLIT_PEER";
const FABRIC: &str = "RDMA_DIRECT_SIM_FABRIC";
/// Liveness bound of every wait (a hang becomes a failure, never a timing claim).
const STALL: Duration = Duration::from_secs(60);

fn all() -> Vec<Scenario> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/scenarios");
    load_dir(dir).unwrap_or_else(|e| panic!("scenario file does not parse: {e}"))
}

/// Why the fabric cannot carry `sc` today, if it cannot.
fn fabric_limit(sc: &Scenario) -> Option<String> {
    if let Some(q) = sc
        .qps
        .iter()
        .find(|q| !matches!(q.qp_type, QpType::Rc | QpType::Uc))
    {
        return Some(format!(
            "QP '{}' is {:?}: the split runs connected QPs (RC, UC) only",
            q.name, q.qp_type
        ));
    }
    for st in &sc.steps {
        if let StepKind::Post(p) = &st.kind {
            let len: usize =
                p.sges.iter().map(|r| r.len).sum::<usize>() + p.inline.map_or(0, |r| r.len);
            if len as u64 > MAX_MESSAGE {
                return Some(format!(
                    "line {}: a {len} B message; the fabric carries messages up to {MAX_MESSAGE} B",
                    st.line
                ));
            }
        }
    }
    None
}

/// What this side runs: every scenario that splits and fits the fabric, in file order
/// (both sides compute the same list); the others with their reason.
fn selection() -> (
    Vec<(Scenario, rdma_direct::scenario::split::Plan)>,
    Vec<String>,
) {
    let only = std::env::var("RDMA_DIRECT_SCENARIO").ok();
    let (mut run, mut skipped) = (Vec::new(), Vec::new());
    for sc in all() {
        if only.as_deref().is_some_and(|o| o != sc.name) {
            continue;
        }
        match plan(&sc).map_err(|why| format!("cannot split: {why}")) {
            Ok(pl) => match fabric_limit(&sc) {
                None => run.push((sc, pl)),
                Some(why) => skipped.push(format!("{}: {why}", sc.name)),
            },
            Err(why) => skipped.push(format!("{}: {why}", sc.name)),
        }
    }
    (run, skipped)
}

fn device(fabric: &str) -> SimDevice {
    let mut dev = SimDevice::new();
    dev.start_device_thread().unwrap();
    dev.join_fabric(Some(fabric))
        .unwrap_or_else(|e| panic!("join the sim fabric: {e}"));
    dev
}

fn opts() -> RunOpts {
    let mut o = RunOpts::new(ProviderKind::Sim, "sim0");
    o.poll_timeout = Duration::from_secs(20);
    o.settle = Duration::from_millis(20);
    o
}

/// Run this side of every selected scenario; one line each. Stops at the first failure
/// (the sides are in lockstep: a failure ends the pair).
fn run_side(link: &mut Link, fabric: &str) -> Vec<String> {
    let (run, _) = selection();
    let mut dev = device(fabric);
    let o = opts();
    let mut passed = Vec::new();
    for (sc, pl) in &run {
        match run_scenario_split(&mut dev, sc, &o, pl, link) {
            Ok(r) => {
                println!(
                    "scenario {:<24} PASS split, side {:?}: {} posted, {} completions, {} bytes checked",
                    r.name, link.side, r.posted, r.completions, r.bytes_checked
                );
                passed.push(r.name);
            }
            Err(f) => panic!("side {:?}: {f}", link.side),
        }
        let ev = dev.take_events();
        assert!(ev.is_empty(), "{}: unexpected async events {ev:?}", sc.name);
    }
    // The traffic went through the fabric (not a loop back inside one device), and
    // nothing was dropped as malformed.
    let (_, _, st) = dev
        .fabric_stats()
        .unwrap_or_else(|| panic!("side {:?}: the device never joined the fabric", link.side));
    println!("side {:?} fabric: {st:?}", link.side);
    if !passed.is_empty() {
        assert!(
            st.sent > 0 && st.received > 0,
            "side {:?}: no packets: {st:?}",
            link.side
        );
    }
    assert_eq!(st.corrupt_cells, 0, "{st:?}");
    passed
}

/// Side A, in the child process.
#[test]
#[ignore = "side A of sim_split_scenarios (run by every_scenario_splits_across_two_processes)"]
fn split_peer() {
    let Ok(addrs) = std::env::var(PEER) else {
        println!("skipped: side A of the split scenarios, run by the test");
        return;
    };
    let (ctl, qp) = addrs.split_once(' ').unwrap();
    let (ctl, qp): (SocketAddr, SocketAddr) = (ctl.parse().unwrap(), qp.parse().unwrap());
    let s = TcpStream::connect(ctl).unwrap();
    s.set_read_timeout(Some(STALL)).unwrap();
    s.set_nodelay(true).unwrap();
    let mut link = Link {
        side: Side::A,
        ctl: s,
        listener: None,
        peer: Some(qp),
    };
    let fabric = std::env::var(FABRIC).expect("the test names the fabric");
    let passed = run_side(&mut link, &fabric);
    println!("side A passed: {}", passed.join(" "));
}

#[test]
fn every_scenario_splits_across_two_processes() {
    let fabric = format!("rdma-direct-test-{}-split", std::process::id());
    struct Removed(String);
    impl Drop for Removed {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(std::path::Path::new("/dev/shm").join(&self.0));
        }
    }
    let _rm = Removed(fabric.clone());
    let ctl = TcpListener::bind("127.0.0.1:0").unwrap();
    let qpl = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "split_peer", "--ignored", "--nocapture"])
        .env(
            PEER,
            format!(
                "{} {}",
                ctl.local_addr().unwrap(),
                qpl.local_addr().unwrap()
            ),
        )
        .env(FABRIC, &fabric)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    ctl.set_nonblocking(true).unwrap();
    let start = Instant::now();
    let s = loop {
        match ctl.accept() {
            Ok((s, _)) => break s,
            Err(_) if start.elapsed() < STALL => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => {
                let _ = child.kill();
                panic!("side A never connected: {e}");
            }
        }
    };
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(STALL)).unwrap();
    s.set_nodelay(true).unwrap();
    let mut link = Link {
        side: Side::B,
        ctl: s,
        listener: Some(qpl),
        peer: None,
    };
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_side(&mut link, &fabric)
    }));
    drop(link);
    if res.is_err() {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    let passed_b = match res {
        Ok(p) => p,
        Err(_) => panic!("side B failed (above); side A printed:\n{text}\n{err}"),
    };
    assert!(out.status.success(), "side A failed:\n{text}\n{err}");
    let line_a = BufReader::new(text.as_bytes())
        .lines()
        .map_while(Result::ok)
        .find_map(|l| l.split_once("side A passed: ").map(|(_, r)| r.to_string()))
        .unwrap_or_else(|| panic!("side A printed no result:\n{text}"));
    assert_eq!(
        line_a,
        passed_b.join(" "),
        "the sides passed different scenarios"
    );
    let (_, skipped) = selection();
    println!(
        "split across two processes on the sim fabric: {} passed ({}); skipped: {}",
        passed_b.len(),
        passed_b.join(" "),
        if skipped.is_empty() {
            "none".into()
        } else {
            skipped.join("; ")
        }
    );
    if std::env::var("RDMA_DIRECT_SCENARIO").is_err() {
        assert!(
            passed_b.len() >= 10,
            "only {} scenarios split",
            passed_b.len()
        );
    }
}
