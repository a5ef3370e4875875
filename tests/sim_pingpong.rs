//! The main job: `rdma-direct pingpong` without a device runs two RC QPs on the sim
//! (device-thread mode) through the production mlx5 hot path.

#[allow(dead_code)]
#[path = "../src/bin/rdma-direct/simpingpong.rs"]
mod simpingpong;

use simpingpong::{latency_summary, parse, run_opts, Opts};

#[test]
fn pingpong_on_the_sim_prints_rc_pingpong_lines_and_latency() {
    let o = Opts {
        size: 4096,
        iters: 200,
        ..Opts::default()
    };
    let out = run_opts(&o).expect("pingpong on the sim");
    println!("{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "provider: sim (software mlx5 device; not hardware)"
    );
    assert!(
        lines[1].starts_with("  local address:  LID 0x0000, QPN 0x"),
        "{out}"
    );
    // The sim device's GID: an IPv4-mapped loopback address, printed as IPv6 (each device of
    // the process has its own, `::ffff:127.0.0.1` for the first).
    let gid: std::net::Ipv6Addr = lines[1].rsplit("GID ").next().unwrap().parse().unwrap();
    assert!(
        gid.to_ipv4_mapped().is_some_and(|ip| ip.is_loopback()),
        "{out}"
    );
    assert!(
        lines[2].starts_with("  remote address: LID 0x0000, QPN 0x"),
        "{out}"
    );
    assert!(lines[3].starts_with("1638400 bytes in "), "{out}");
    assert!(lines[3].ends_with(" Mbit/sec"), "{out}");
    assert!(lines[4].starts_with("200 iters in "), "{out}");
    assert!(lines[4].ends_with(" usec/iter"), "{out}");
    assert!(lines[5].starts_with("latency (half round trip"), "{out}");
    assert!(lines[6].contains("t_typical[usec]"), "{out}");
    assert!(lines[7].trim_start().starts_with("4096   200"), "{out}");
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
    let o = Opts {
        size: 1,
        iters: 3,
        rx_depth: 2,
        ..Opts::default()
    };
    let out = run_opts(&o).unwrap();
    assert!(out.contains("6 bytes in "), "{out}");
    assert!(out.contains("3 iters in "), "{out}");
}

#[test]
fn options_parse_like_rc_pingpong() {
    let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(parse(&a(&[])).unwrap(), Some(Opts::default()));
    let o = parse(&a(&["-s", "64", "--iters=10", "-r", "8", "-m", "2048"]))
        .unwrap()
        .unwrap();
    assert_eq!(
        (o.size, o.iters, o.rx_depth, o.mtu.bytes()),
        (64, 10, 8, 2048)
    );
    assert_eq!(parse(&a(&["-h"])).unwrap(), None);
    assert!(parse(&a(&["-s"])).unwrap_err().contains("needs a value"));
    assert!(parse(&a(&["-s", "x"]))
        .unwrap_err()
        .contains("not a number"));
    assert!(parse(&a(&["-m", "1000"])).unwrap_err().contains("1000"));
    assert!(parse(&a(&["-n", "0"])).is_err());
    assert!(parse(&a(&["--bogus"])).unwrap_err().contains("--bogus"));
}

#[test]
fn latency_summary_is_perftest_shaped() {
    // 10 samples 1..=10: the two largest are dropped → 8 left; median s[4] = 5,
    // t_max = second largest raw = 9, p99 = s[min(ceil(7.92), 7)] = 8.
    let mut s: Vec<f64> = (1..=10).rev().map(f64::from).collect();
    let t = latency_summary(&mut s, 2);
    let row: Vec<&str> = t.lines().nth(2).unwrap().split_whitespace().collect();
    assert_eq!(
        row,
        ["2", "10", "1.00", "9.00", "5.00", "4.50", "2.29", "8.00", "8.00"]
    );
}

#[test]
fn the_cli_without_a_device_runs_on_the_sim() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rdma-direct"))
        .args(["pingpong", "-s", "64", "-n", "100"])
        .output()
        .expect("run rdma-direct");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.starts_with("provider: sim (software mlx5 device; not hardware)\n"),
        "{text}"
    );
    assert!(text.contains("12800 bytes in "), "{text}");
    assert!(text.contains("100 iters in "), "{text}");
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_rdma-direct"))
        .args(["pingpong", "-s", "zero"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not a number"));
}
