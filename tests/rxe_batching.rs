//! Device test (run in the guest on rxe0): `bench batching -d DEV --provider verbs`, rdma-core's
//! own post path (one `ibv_post_send` per batch), runs a brief sweep to the end: one table per
//! signaling period, one row per batch, the JSON's points each with their samples, and no
//! point set skipped (libibverbs posts on rxe, unlike the stand-in). Structure only: no
//! timing is asserted. Elsewhere (no `RDMA_DIRECT_DEVICE`) it fails saying "skipped".

mod common;

use std::process::Command;

/// The CLI: the guest's copy (`RDMA_DIRECT_BIN`, set by its /init), else cargo's.
fn exe() -> String {
    std::env::var("RDMA_DIRECT_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_rdma-direct").into())
}

#[test]
#[ignore = "device test: needs RDMA_DIRECT_DEVICE (tests/guest/run)"]
fn rxe_batching_verbs_sweep_runs_briefly() {
    let dev = common::device();
    let js = std::env::temp_dir().join(format!("rxe-batching-{}.json", std::process::id()));
    let mut args: Vec<String> = [
        "bench",
        "batching",
        "-d",
        &dev,
        "--provider",
        "verbs",
        "-l",
        "1,4",
        "-Q",
        "1,batch",
        "-r",
        "2",
        "-w",
        "1",
        "-n",
        "64",
        "--json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(js.to_str().unwrap().into());
    if let Some(g) = common::gid_index() {
        args.extend(["-x".into(), g.to_string()]);
    }
    let out = Command::new(exe()).args(&args).output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{args:?}\n{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!(" provider: verbs on {dev} ")),
        "{stdout}"
    );
    for period in ["signal every WR", "signal once per batch"] {
        let head = format!(" doorbell: ibv_post_send | {period} ");
        assert!(stdout.contains(&head), "{head}: {stdout}");
    }
    let rows = stdout
        .lines()
        .filter(|l| l.starts_with(" 1 ") || l.starts_with(" 4 "))
        .count();
    assert_eq!(rows, 4, "{stdout}");
    let j = std::fs::read_to_string(&js).unwrap();
    let _ = std::fs::remove_file(&js);
    assert!(j.contains("\"provider\":\"verbs\""), "{j}");
    assert_eq!(
        j.matches("\"mode\":\"ibv_post_send\",\"signal\"").count(),
        2,
        "{j}"
    );
    assert_eq!(j.matches("\"samples\":2,").count(), 4, "{j}");
    assert!(j.contains("\"skipped\":[]"), "{j}");
}
