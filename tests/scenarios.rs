//! The fixture scenarios of `fixtures/scenarios/`, through the library's runner
//! (`rdma_direct::scenario`) as a team's own test crate would call it.
//!
//! - `every_scenario_parses` (host): all files parse, and every scenario listed below is there.
//! - `every_scenario_passes_on_verbs_device` (device, `#[ignore]`): each scenario runs on the
//!   verbs fallback provider opened on `RDMA_DIRECT_DEVICE` (rxe0 in the guest); any
//!   completion or byte mismatch fails with the runner's diff.

use rdma_direct::scenario::{self, load_dir, Scenario};

fn scenario_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/scenarios")
}

fn all() -> Vec<Scenario> {
    match load_dir(scenario_dir()) {
        Ok(v) => v,
        Err(e) => panic!("scenario file does not parse: {e}"),
    }
}

#[test]
fn every_scenario_parses() {
    let scs = all();
    let names: Vec<&str> = scs.iter().map(|s| s.name.as_str()).collect();
    for want in [
        "send_recv_1b",
        "send_recv_4k",
        "send_recv_1m",
        "write_offsets",
        "read_offsets",
        "write_imm_zero_sge",
        "multi_sge",
        "inline_send",
        "batch64_last_signaled",
        "atomics",
        "srq_two_qps",
        "wrong_rkey_flush",
        "rnr_retry_exceeded",
        "uc_write",
        "ud_send",
        "rejections",
        "cq_full",
        "error_flush",
        "send_too_long",
        "srq_any_order",
        "counted_writes",
        "fault_events",
    ] {
        assert!(
            names.contains(&want),
            "scenario {want} missing; have {names:?}"
        );
    }
    for s in &scs {
        assert!(!s.desc.is_empty(), "{}: no desc line", s.file);
    }
}

mod common;

/// Every scenario on the verbs provider (rxe0 in the guest). Runs them all, prints one line
/// per scenario, and fails at the end with every failure's diff.
#[test]
#[ignore = "device test: needs RDMA_DIRECT_DEVICE (rxe0 in the guest, tests/guest/run)"]
fn every_scenario_passes_on_verbs_device() {
    use rdma_direct::providers::verbs::VerbsDevice;
    use rdma_direct::providers::Provider;
    use scenario::{run_scenario, RunOpts};

    let dev = common::device();
    let mut p = match VerbsDevice::open(&dev) {
        Ok(p) => p,
        Err(e) => panic!("cannot open {dev}: {e}"),
    };
    let mut opts = RunOpts::new(p.kind(), p.device_name());
    opts.gid_index = match common::gid_index() {
        Some(g) => g,
        None => p
            .context()
            .default_gid_index(1)
            .unwrap_or_else(|e| panic!("no GID index: {e}")),
    };
    let only = std::env::var("RDMA_DIRECT_SCENARIO").ok();
    let mut failures = Vec::new();
    let mut ran = 0;
    for sc in all() {
        if only.as_deref().is_some_and(|o| o != sc.name) {
            continue;
        }
        ran += 1;
        match run_scenario(&mut p, &sc, &opts) {
            Ok(r) => println!(
                "scenario {:<24} PASS on {} ({}): {} posted, {} rejected, {} completions, {} bytes checked, {:?}",
                r.name,
                p.device_name(),
                opts.tags.join(","),
                r.posted,
                r.rejected,
                r.completions,
                r.bytes_checked,
                r.elapsed
            ),
            Err(f) => {
                println!("scenario {:<24} FAIL", sc.name);
                failures.push(f.to_string());
            }
        }
    }
    let cq_errors = p.check_async().map(|_| p.cq_errors()).unwrap_or(0);
    assert_eq!(cq_errors, 0, "CQ overruns reported by the device");
    assert!(ran > 0, "no scenario selected");
    assert!(
        failures.is_empty(),
        "{} of {ran} scenarios failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// One side of every scenario that can split, across two hosts: the requester side (A) here
/// and the responder side (B) in another process, normally on the other guest of the
/// two-guest bed (tests/guest/pair/40-scenarios.sh runs it there). Env:
/// `RDMA_DIRECT_SCENARIO_SIDE` = `a` (connects to `RDMA_DIRECT_SCENARIO_PEER`) or `b`
/// (listens), `RDMA_DIRECT_SCENARIO_PORT` (control connection; QP exchanges on the next
/// port; default 18950), optionally `RDMA_DIRECT_SCENARIO` (one scenario). Without
/// `RDMA_DIRECT_SCENARIO_SIDE` it does nothing (the single-host device run has no peer).
/// Prints one line per scenario: PASS, or why it cannot split; stops at the first failure
/// (the two sides are in lockstep, a failure ends the pair).
#[test]
#[ignore = "two-process device test: needs RDMA_DIRECT_SCENARIO_SIDE and a peer process"]
fn split_scenarios_across_hosts() {
    use rdma_direct::providers::verbs::VerbsDevice;
    use rdma_direct::providers::Provider;
    use scenario::split::{plan, Link, Side};
    use scenario::{run_scenario_split, RunOpts};
    use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
    use std::time::{Duration, Instant};

    let side = match std::env::var("RDMA_DIRECT_SCENARIO_SIDE").as_deref() {
        Ok("a") => Side::A,
        Ok("b") => Side::B,
        Ok(other) => panic!("RDMA_DIRECT_SCENARIO_SIDE={other}: a or b"),
        Err(_) => {
            println!("split_scenarios_across_hosts: no RDMA_DIRECT_SCENARIO_SIDE, nothing to do");
            return;
        }
    };
    let port: u16 = std::env::var("RDMA_DIRECT_SCENARIO_PORT")
        .ok()
        .map(|p| p.parse().expect("RDMA_DIRECT_SCENARIO_PORT: a port number"))
        .unwrap_or(18950);
    let dev = common::device();
    let mut p = match VerbsDevice::open(&dev) {
        Ok(p) => p,
        Err(e) => panic!("cannot open {dev}: {e}"),
    };
    let mut opts = RunOpts::new(p.kind(), p.device_name());
    opts.gid_index = match common::gid_index() {
        Some(g) => g,
        None => p
            .context()
            .default_gid_index(1)
            .unwrap_or_else(|e| panic!("no GID index: {e}")),
    };
    let mut link = match side {
        Side::B => {
            let ctl = TcpListener::bind(("0.0.0.0", port))
                .unwrap_or_else(|e| panic!("listen on port {port}: {e}"));
            let qpl = TcpListener::bind(("0.0.0.0", port + 1))
                .unwrap_or_else(|e| panic!("listen on port {}: {e}", port + 1));
            let (s, from) = ctl.accept().unwrap_or_else(|e| panic!("accept: {e}"));
            println!("side b: peer {from}");
            Link {
                side,
                ctl: s,
                listener: Some(qpl),
                peer: None,
            }
        }
        Side::A => {
            let host = std::env::var("RDMA_DIRECT_SCENARIO_PEER")
                .expect("side a needs RDMA_DIRECT_SCENARIO_PEER (the other host)");
            let ctl_addr: SocketAddr = (host.as_str(), port)
                .to_socket_addrs()
                .ok()
                .and_then(|mut a| a.next())
                .unwrap_or_else(|| panic!("RDMA_DIRECT_SCENARIO_PEER={host}: no address"));
            let deadline = Instant::now() + Duration::from_secs(30);
            let s = loop {
                match TcpStream::connect(ctl_addr) {
                    Ok(s) => break s,
                    Err(e) if Instant::now() > deadline => panic!("connect to {ctl_addr}: {e}"),
                    Err(_) => std::thread::sleep(Duration::from_millis(100)),
                }
            };
            let mut qp_addr = ctl_addr;
            qp_addr.set_port(port + 1);
            Link {
                side,
                ctl: s,
                listener: None,
                peer: Some(qp_addr),
            }
        }
    };
    link.ctl
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("set_read_timeout");
    link.ctl.set_nodelay(true).expect("set_nodelay");
    let only = std::env::var("RDMA_DIRECT_SCENARIO").ok();
    let (mut ran, mut unsplit) = (0, 0);
    for sc in all() {
        if only.as_deref().is_some_and(|o| o != sc.name) {
            continue;
        }
        let pl = match plan(&sc) {
            Ok(pl) => pl,
            Err(why) => {
                unsplit += 1;
                println!("scenario {:<24} CANNOT SPLIT: {why}", sc.name);
                continue;
            }
        };
        ran += 1;
        match run_scenario_split(&mut p, &sc, &opts, &pl, &mut link) {
            Ok(r) => println!(
                "scenario {:<24} PASS across hosts, side {} on {}: {} posted, {} rejected, {} completions, {} bytes checked, {:?}",
                r.name,
                if side == Side::A { "a (requester)" } else { "b (responder)" },
                p.device_name(),
                r.posted,
                r.rejected,
                r.completions,
                r.bytes_checked,
                r.elapsed
            ),
            Err(f) => {
                println!("scenario {:<24} FAIL", sc.name);
                panic!("{f}");
            }
        }
    }
    println!("split scenarios: {ran} run across hosts, {unsplit} cannot split");
    assert!(ran > 0, "no scenario could split");
}
