//! The main job: `rdma-direct pingpong` without a device runs two RC QPs on the sim
//! (device-thread mode) through the production mlx5 hot path. Run as the user runs it, the
//! CLI binary; its option parsing and latency table are unit-tested in
//! `src/bin/rdma-direct/pingpong/`.

use std::process::{Command, Output};

fn pingpong(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rdma-direct"))
        .arg("pingpong")
        .args(args)
        .output()
        .expect("run rdma-direct")
}

/// The standard output of a run that must succeed.
fn ok(args: &[&str]) -> String {
    let out = pingpong(args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{args:?}: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn pingpong_on_the_sim_prints_rc_pingpong_lines_and_latency() {
    let out = ok(&["-s", "4096", "-n", "200"]);
    println!("{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "provider: sim: software mlx5 device (sim0), not hardware"
    );
    assert!(
        lines[1].starts_with("  local address:  LID 0x0000, QPN 0x"),
        "{out}"
    );
    // The sim device's GID, printed as IPv6: `fd73:696d::` with the process id and the
    // device's number (unique per device and per process).
    let gid: std::net::Ipv6Addr = lines[1].rsplit("GID ").next().unwrap().parse().unwrap();
    assert_eq!(gid.octets()[..4], [0xfd, 0x73, 0x69, 0x6d], "{out}");
    assert!(
        lines[2].starts_with("  remote address: LID 0x0000, QPN 0x"),
        "{out}"
    );
    // The latency table's title and header (printed before the run), its row, then
    // rc_pingpong's result lines.
    assert!(lines[3].starts_with("latency (half round trip"), "{out}");
    assert!(lines[4].contains("t_typical[usec]"), "{out}");
    let row: Vec<&str> = lines[5].split_whitespace().collect();
    assert_eq!(row[..2], ["4096", "200"], "{out}");
    assert!(lines[6].starts_with("1638400 bytes in "), "{out}");
    // On the sim the rate is memory copies, and the line says so.
    assert!(
        lines[6].ends_with(
            " Mbit/sec (software device: memory copies in this process, not a link rate)"
        ),
        "{out}"
    );
    assert!(lines[7].starts_with("200 iters in "), "{out}");
    assert!(lines[7].ends_with(" usec/iter"), "{out}");
    // Every iteration went through the device: 2 x 200 sends, each a doorbell + WQE + 2 CQEs.
    let dev = lines[8];
    assert!(dev.starts_with("sim device: "), "{out}");
    let nums: Vec<u64> = dev
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    assert_eq!(nums[1], 400, "WQEs: {out}");
    assert_eq!(nums[2], 800, "CQEs: {out}");
}

#[test]
fn small_messages_and_odd_iteration_counts() {
    let out = ok(&["-s", "1", "-n", "3", "-r", "2"]);
    assert!(out.contains("6 bytes in "), "{out}");
    assert!(out.contains("3 iters in "), "{out}");
}

#[test]
fn uc_on_the_sim() {
    let out = ok(&["-c", "UC", "-s", "64", "-n", "100"]);
    assert!(out.contains("12800 bytes in "), "{out}");
}

#[test]
fn the_cli_without_a_device_runs_on_the_sim() {
    let text = ok(&["-s", "64", "-n", "100"]);
    assert!(
        text.starts_with("provider: sim: software mlx5 device (sim0), not hardware\n"),
        "{text}"
    );
    assert!(text.contains("12800 bytes in "), "{text}");
    assert!(text.contains("100 iters in "), "{text}");
    let bad = pingpong(&["-s", "zero"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not a number"));
}
