//! A two-process perf sweep stopped between sizes by its caller ([`Params::stop`], what the
//! CLI's Ctrl-C sets): the run ends with `Ok` after the size being measured, the rows reported
//! being the sizes done, and the peer ends too — at once and cleanly where the protocol has a
//! closing exchange the stopping side can still make (the client of `write_bw`: the server gets
//! the report of the last size done), with an error naming the exchange where it expected the
//! next size (`send_lat`). Two processes, each with its own sim device on a fabric of this
//! test: the test binary runs itself again as the server (`RDMA_DIRECT_PERF_STOP_PEER` names
//! the test, the port and the fabric).

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use rdma_direct::perf::remote::{self, Event};
use rdma_direct::perf::wire::Side;
use rdma_direct::perf::{Params, StopHook, Test};
use rdma_direct::providers::sim::SimDevice;

const PEER: &str = "RDMA_DIRECT_PERF_STOP_PEER";

/// One two-process run at a time: each spins four threads (two pollers, two device threads).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The client's stop request: set once its first row is in.
static STOP: AtomicBool = AtomicBool::new(false);

fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Ten sizes, few iterations: the sweep would take ten rows.
fn params(test: Test) -> Params {
    let mut o = Params::new(test);
    o.sizes = (1..=10).map(|k| 1u32 << k).collect();
    o.iters = 100;
    o
}

fn test_of(name: &str) -> Test {
    match name {
        "write_bw" => Test::WriteBw,
        "send_lat" => Test::SendLat,
        _ => panic!("no test {name}"),
    }
}

/// The server process: runs the test to its end, prints what it saw and how it ended.
#[test]
#[ignore = "the server process of the perf stop tests"]
fn perf_stop_peer() {
    let Ok(what) = std::env::var(PEER) else {
        println!("skipped: the server process of tests/perf_stop.rs");
        return;
    };
    let w: Vec<&str> = what.split(' ').collect();
    let (test, listener_port, fabric) = (test_of(w[0]), w[1], w[2]);
    let mut dev = SimDevice::new();
    dev.start_device_thread().unwrap();
    dev.join_fabric(Some(fabric)).unwrap();
    let s =
        std::net::TcpStream::connect(("127.0.0.1", listener_port.parse::<u16>().unwrap())).unwrap();
    let o = params(test);
    let res = remote::run(&mut dev, &o, s, Side::Server, true, &mut |ev| match ev {
        Event::Ready(_) => {}
        Event::Row(r) => println!("server row {}", r.bytes()),
        Event::PeerReport(r) => println!("server got the report of {} bytes", r.size),
    });
    match res {
        Ok(()) => println!("server ended: ok"),
        Err(e) => println!("server ended: {e}"),
    }
}

/// The client (this process) stops after its first size; the server's output.
fn stopped_after_one(test: &str) -> String {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let fabric = format!("rdma-direct-test-{}-stop-{test}", std::process::id());
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "perf_stop_peer", "--ignored", "--nocapture"])
        .env(
            PEER,
            format!("{test} {} {fabric}", l.local_addr().unwrap().port()),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The child connects to us; we are perftest's client (the side that sweeps).
    let (s, _) = l.accept().unwrap();
    let mut dev = SimDevice::new();
    dev.start_device_thread().unwrap();
    dev.join_fabric(Some(&fabric)).unwrap();
    let mut o = params(test_of(test));
    o.stop = Some(StopHook(stop_requested));
    STOP.store(false, Ordering::SeqCst);
    let mut rows = Vec::new();
    let res = remote::run(&mut dev, &o, s, Side::Client, true, &mut |ev| {
        if let Event::Row(r) = ev {
            rows.push(r.bytes());
            STOP.store(true, Ordering::SeqCst);
        }
    });
    let out = child.wait_with_output().unwrap();
    let _ = std::fs::remove_file(std::path::Path::new("/dev/shm").join(&fabric));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    res.unwrap_or_else(|e| panic!("{test}: the stopped client: {e}\nserver: {text}"));
    assert_eq!(
        rows,
        [2],
        "{test}: the sizes the client measured; server: {text}"
    );
    text
}

#[test]
fn a_stopped_write_bw_client_closes_and_its_server_ends_cleanly() {
    let t = stopped_after_one("write_bw");
    assert!(t.contains("server got the report of 2 bytes"), "{t}");
    assert!(t.contains("server ended: ok"), "{t}");
}

#[test]
fn a_stopped_send_lat_side_drops_the_connection_and_its_peer_says_where() {
    let t = stopped_after_one("send_lat");
    assert!(t.contains("server row 2\n"), "{t}");
    assert!(!t.contains("server row 4\n"), "{t}");
    assert!(t.contains("server ended: "), "{t}");
    assert!(!t.contains("server ended: ok"), "{t}");
}
