//! Two processes on the stand-in's `mlx5_0`, server and client, reaching each other over the
//! sim fabric.

use std::path::Path;

use super::{cli, on_standin};

/// A server and a client of `args` (`-p PORT` added to both, `127.0.0.1` to the client) on
/// the stand-in, on the fabric `fabric`: their outputs, client first. A side still running
/// after the liveness bound is killed (its status then says so).
fn two_processes(
    dir: &Path,
    fabric: &str,
    args: &[&str],
) -> (std::process::Output, std::process::Output) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let spawn = |extra: &[&str]| {
        on_standin(dir, None)
            .args(args)
            .args(["-p", &port])
            .args(extra)
            .env("RDMA_DIRECT_SIM_FABRIC", fabric)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let server = spawn(&[]);
    let client = spawn(&["127.0.0.1"]);
    // A liveness bound only: a side still running after it is a hang, killed and failed.
    let t0 = std::time::Instant::now();
    let finish = |mut c: std::process::Child| {
        while c.try_wait().unwrap().is_none() && t0.elapsed().as_secs() < 180 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = c.kill();
        c.wait_with_output().unwrap()
    };
    let c = finish(client);
    (c, finish(server))
}

/// Two processes on the stand-in's `mlx5_0`, server and client as perftest's: each process's
/// `mlx5_0` is its own device (its own GIDs), and the two reach each other over the sim
/// fabric, so `pingpong` (`--chk`: every message's bytes checked on receipt) and every
/// `perf` test run to the end on both sides (before, the two ends could not connect and the
/// CLI refused the run).
#[test]
fn two_processes_on_mlx5_0_reach_each_other_over_the_sim_fabric() {
    let dir = standin_or_skip!();
    let fabric = format!("rdma-direct-test-{}-standin2p", std::process::id());
    struct Removed(String);
    impl Drop for Removed {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(Path::new("/dev/shm").join(&self.0));
        }
    }
    let _rm = Removed(fabric.clone());
    let (c, s) = two_processes(
        dir,
        &fabric,
        &["pingpong", "-d", "mlx5_0", "-n", "20", "--chk"],
    );
    let mut gids = Vec::new();
    for (who, out) in [("client", &c), ("server", &s)] {
        let text = String::from_utf8_lossy(&out.stdout);
        let why = format!(
            "pingpong {who}: {}\n{text}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{why}");
        assert_eq!(
            text.lines().next(),
            Some("provider: mlx5_0: direct mlx5 WQE writing"),
            "{why}"
        );
        assert!(text.contains("20 iters in "), "{why}");
        let gid = |which: &str| {
            let l = text.lines().find(|l| l.contains(which)).expect(which);
            l.rsplit("GID ").next().unwrap().to_string()
        };
        let (local, remote) = (gid("local address:"), gid("remote address:"));
        assert_ne!(local, remote, "{why}");
        gids.push((local, remote));
    }
    // Each side's peer is the other process's device.
    assert_eq!(gids[0].0, gids[1].1);
    assert_eq!(gids[0].1, gids[1].0);
    // The sim GID itself (index 2) reaches the peer as its link-local one (index 0) does.
    let (c, s) = two_processes(
        dir,
        &fabric,
        &["pingpong", "-d", "mlx5_0", "-n", "5", "-g", "2", "--chk"],
    );
    for (who, out) in [("client", &c), ("server", &s)] {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success()
                && text.contains("5 iters in ")
                && text.contains("GID fd73:696d::"),
            "pingpong -g 2 {who}: {}\n{text}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    for test in [
        "write_lat",
        "send_lat",
        "read_lat",
        "atomic_lat",
        "write_bw",
        "send_bw",
        "read_bw",
    ] {
        let (c, s) = two_processes(dir, &fabric, &["perf", test, "-d", "mlx5_0", "-n", "20"]);
        for (who, out) in [("client", &c), ("server", &s)] {
            let text = String::from_utf8_lossy(&out.stdout);
            let why = format!(
                "{test} {who}: {}\n{text}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(out.status.success(), "{why}");
            assert!(
                text.contains(" Provider        : mlx5_0: direct mlx5 WQE writing\n"),
                "{why}"
            );
            assert!(
                text.contains(&format!(" Test            : {test}\n")),
                "{why}"
            );
            assert!(text.contains("#bytes"), "{why}");
        }
        let text = String::from_utf8_lossy(&c.stdout);
        let first = text.lines().next().unwrap_or("");
        assert!(
            first.contains("mlx5_0") && first.contains("stand-in") && first.contains("sim fabric"),
            "{test}: {text}"
        );
        // The client measures: its table has the row of 20 iterations.
        assert!(
            text.lines().any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.len() >= 5 && f[0].parse::<u32>().is_ok() && f[1] == "20"
            }),
            "{test}: {text}"
        );
    }
    // Loopback on one device still runs.
    let s = cli(dir, &["pingpong", "-d", "mlx5_0", "--loopback", "-n", "20"]);
    assert!(s.contains("20 iters in"), "{s}");
}
