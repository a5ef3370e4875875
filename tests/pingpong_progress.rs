//! `pingpong` prints its provider and address lines before the run, as `ibv_rc_pingpong`
//! does, and the header of its latency table (perftest's, with the columns the row will
//! have), so a long run shows it is under way (it printed nothing until its end).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Longest the address lines may take (debug build, busy machine): a liveness bound, which
/// turns "printed only at the end" into a failure instead of a hang.
const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn address_lines_and_table_header_come_before_the_run() {
    // The most iterations pingpong takes: the run outlasts the test by far.
    let mut child = Command::new(env!("CARGO_BIN_EXE_rdma-direct"))
        .args(["pingpong", "-n", "16777216"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines() {
            if tx.send(l.unwrap_or_default()).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    let got = loop {
        match rx.recv_timeout(LIMIT) {
            Ok(l) => {
                let header = l.starts_with(" #bytes");
                lines.push(l);
                if header {
                    break Ok(());
                }
            }
            Err(e) => break Err(e),
        }
    };
    let running = child.try_wait().expect("try_wait").is_none();
    let _ = child.kill();
    let _ = child.wait();
    got.unwrap_or_else(|e| panic!("no table header ({e}): {lines:?}"));
    assert!(running, "the run had ended: {lines:?}");
    assert!(lines[0].starts_with("provider: sim"), "{lines:?}");
    assert!(lines[1].contains("local address:"), "{lines:?}");
    assert!(lines[2].contains("remote address:"), "{lines:?}");
    assert!(
        lines[3].starts_with("latency (half round trip"),
        "{lines:?}"
    );
    // 16777216 iterations keep over 100 000 samples: both deep percentiles, as the row.
    assert!(lines[4].contains("99.99% percentile[usec]"), "{lines:?}");
    assert!(lines[4].contains("99.999% percentile[usec]"), "{lines:?}");
    assert!(!lines.iter().any(|l| l.contains("iters in")), "{lines:?}");
}
