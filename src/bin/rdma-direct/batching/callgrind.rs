//! `bench batching --instructions`: instructions per WQE on plain memory, counted by
//! callgrind.
//!
//! Contract: the command re-runs itself under valgrind once per point with one sample and no
//! warm-up, counting only inside the plain-memory post and poll loops; it refuses with the
//! fix when valgrind is missing.

use std::fmt::Write as _;

use super::options::{Config, Opts};
use rdma_direct::bench::batching::setup::series_name;

/// Instructions per WQE for each configuration at each batch: the command runs itself under
/// callgrind, one round per point, counting only inside the post and poll loops
/// (`--toggle-collect`; the rig's device work and the setup are not counted), and divides by
/// the WQEs those loops handled.
pub(super) fn instructions(o: &Opts) -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let have = std::process::Command::new("valgrind")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !have {
        return Err(
            "--instructions needs valgrind (apt-get install valgrind); without it the \
             ns/WQE table is the measure"
                .into(),
        );
    }
    let run = |c: &Config, batch: u32| -> Result<f64, String> {
        let out = std::process::Command::new("valgrind")
            .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
            // One pattern for post_all and poll_all: callgrind honours one --toggle-collect.
            .args(["--toggle-collect=*PlainPoint*po??_all*"])
            .arg(&exe)
            .args([
                "bench",
                "batching",
                "--provider",
                "plain",
                "-r",
                "1",
                "-w",
                "0",
            ])
            .args(["-l", &batch.to_string(), "-n", &o.wqes.to_string()])
            .args(["-m", c.mode.name(), "-Q", &c.signal.key()])
            .args(["-p", c.payload.name(), "-s", &c.size.to_string()])
            .output()
            .map_err(|e| format!("valgrind: {e}"))?;
        let err = String::from_utf8_lossy(&out.stderr);
        let collected = err
            .lines()
            .find_map(|l| l.split("Collected :").nth(1))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .ok_or_else(|| format!("valgrind printed no 'Collected :' line:\n{err}"))?;
        let total = o.sample_wqes(batch);
        let warm = (2 * total.next_power_of_two().max(64)).div_ceil(total);
        Ok(collected / f64::from((warm + 1) * total))
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        " instructions per WQE (callgrind, plain memory; post + ring + poll, {} WQEs per \
         sample):",
        o.wqes
    );
    let _ = write!(s, " {:<44}", "configuration");
    for b in &o.batches {
        let _ = write!(s, " {:>8}", format!("b={b}"));
    }
    s.push('\n');
    for c in o.configs() {
        let _ = write!(s, " {:<44}", series_name(o, &c));
        for &b in &o.batches {
            let _ = write!(s, " {:>8.1}", run(&c, b)?);
        }
        s.push('\n');
    }
    Ok(s)
}
