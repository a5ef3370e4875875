//! The CLI on the stand-in's `mlx5_0`: `selftest` and its planted faults, `pingpong`, `perf`
//! and `bench batching` (a device refusing posts named at once), `events` and scenario events.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{cli, cli_with, on_standin};

/// `rdma-direct selftest ARGS` with the stand-in (`dir`) as libibverbs/libmlx5 when given,
/// and `fault` planted in it: (exit status, stdout).
fn selftest(dir: Option<&PathBuf>, fault: Option<&str>, args: &[&str]) -> (i32, String) {
    let mut c = match dir {
        Some(d) => on_standin(d, fault),
        None => Command::new(env!("CARGO_BIN_EXE_rdma-direct")),
    };
    let out = c.arg("selftest").args(args).output().unwrap();
    let s = String::from_utf8_lossy(&out.stdout).into_owned();
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(!e.contains("panicked"), "{s}\n{e}");
    (out.status.code().unwrap_or(-1), s)
}

#[test]
fn selftest_on_the_sim_passes_every_rung_that_applies() {
    let (rc, s) = selftest(None, None, &[]);
    assert_eq!(rc, 0, "{s}");
    assert!(
        s.contains("selftest: no rung failed: 12 passed, 7 not applicable (of 19)"),
        "{s}"
    );
    assert!(s.contains("[18] ok   arm and wake"), "{s}");
}

#[test]
fn selftest_on_the_standin_passes_every_rung() {
    let dir = standin_or_skip!();
    let (rc, s) = selftest(Some(dir), None, &["-d", "mlx5_0"]);
    assert_eq!(rc, 0, "{s}");
    assert!(
        s.contains("provider mlx5 (auto: mlx5_0 is an mlx5 device)"),
        "{s}"
    );
    assert!(s.contains("selftest: all 19 rungs passed\n"), "{s}");
    let (rc, j) = selftest(Some(dir), None, &["-d", "mlx5_0", "--json"]);
    assert_eq!(rc, 0, "{j}");
    assert!(
        j.starts_with("{\"device\":\"mlx5_0\"") && j.contains("\"stopped_at\":null"),
        "{j}"
    );
    assert_eq!(j.matches("\"result\":\"pass\"").count(), 19, "{j}");
}

#[test]
fn planted_faults_stop_the_selftest_at_their_rung() {
    let dir = standin_or_skip!();
    for (fault, rung, name, says) in [
        ("dbrec_misalign", 9, "init_obj sanity", "not 4-byte aligned"),
        (
            "no_td",
            7,
            "thread and parent domain",
            "ibv_alloc_td: ENOMEM",
        ),
        ("td_busy", 19, "teardown", "ibv_dealloc_td: EBUSY"),
        ("enomem", 5, "PD and MR", "ibv_alloc_pd: ENOMEM"),
    ] {
        let (rc, s) = selftest(Some(dir), Some(fault), &["-d", "mlx5_0"]);
        assert_eq!(rc, 1, "{fault}: {s}");
        assert!(
            s.contains(&format!("selftest: stopped at rung {rung} ({name})")),
            "{fault}: {s}"
        );
        assert!(s.contains(says), "{fault}: {s}");
        assert!(s.contains("send back:"), "{fault}: {s}");
        let (_, j) = selftest(Some(dir), Some(fault), &["-d", "mlx5_0", "--json"]);
        assert!(
            j.contains(&format!("\"stopped_at\":{rung}")),
            "{fault}: {j}"
        );
    }
    // bf.size 0 is not a fault: the BlueFlame rung does not apply, the rest pass.
    let (rc, s) = selftest(Some(dir), Some("bf_size0"), &["-d", "mlx5_0"]);
    assert_eq!(rc, 0, "{s}");
    assert!(
        s.contains("[12] n/a  WRITE, BlueFlame             bf.size 0"),
        "{s}"
    );
}

#[test]
fn pingpong_loopback_on_mlx5_0_picks_mlx5_and_a_refused_doorbell_is_named() {
    let dir = standin_or_skip!();
    let s = cli(dir, &["pingpong", "-d", "mlx5_0", "--loopback", "-n", "50"]);
    assert!(
        s.contains("provider: mlx5_0: direct mlx5 WQE writing"),
        "{s}"
    );
    assert!(s.contains("50 iters in "), "{s}");
    assert!(
        s.contains("provider choice: mlx5 (auto: mlx5_0 is an mlx5 device)"),
        "{s}"
    );
    // The non-mlx5 device's data path refuses every post (EOPNOTSUPP): the run ends at
    // once naming the refused doorbell, not after a stall.
    refused_at_once(
        dir,
        &["pingpong", "-d", "rxe_standin0", "--loopback", "-n", "5"],
        "post receive: ibv_post_recv: EOPNOTSUPP",
    );
}

/// `rdma-direct ARGS` on the stand-in, whose libibverbs refuses every post: status 1 at once,
/// its stderr naming the refused verb and errno (`named`), never a stall ("no completion
/// for").
fn refused_at_once(dir: &Path, args: &[&str], named: &str) {
    let out = on_standin(dir, None).args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert!(err.contains(named), "{args:?}: {err}");
    assert!(!err.contains("no completion for"), "{args:?}: {err}");
}

/// `perf` on the verbs provider names the refused verb and errno at once (not after a stall).
#[test]
fn perf_on_a_device_that_refuses_posts_names_the_verb_and_errno() {
    let dir = standin_or_skip!();
    let args = [
        "perf",
        "write_lat",
        "-d",
        "mlx5_0",
        "--loopback",
        "--provider",
        "verbs",
    ];
    refused_at_once(dir, &args, "post WRITE: ibv_post_send: EOPNOTSUPP");
}

/// `bench batching --provider verbs` names the refused doorbell (libibverbs' post) and errno
/// at once, not "no completion for 10 s".
#[test]
fn batching_on_a_device_that_refuses_posts_names_the_verb_and_errno() {
    let dir = standin_or_skip!();
    let args: Vec<&str> = "bench batching -d mlx5_0 --provider verbs -l 1 -Q 1 -r 2 -w 0 -n 8"
        .split(' ')
        .collect();
    refused_at_once(dir, &args, "ring after WRITE #0: ibv_post_send: EOPNOTSUPP");
}

/// `bench batching --provider mlx5,verbs`: the verbs baseline in the same sweep. The
/// stand-in's libibverbs refuses to post (EOPNOTSUPP), so one line says the baseline was not
/// measured and why, and the mlx5 points stand (in the table and the JSON, whose `skipped`
/// holds the line).
#[test]
fn batching_verbs_baseline_refused_is_one_line_and_the_mlx5_points_stand() {
    let dir = standin_or_skip!();
    let js = Path::new(env!("CARGO_TARGET_TMPDIR")).join("batching-baseline.json");
    let _ = std::fs::remove_file(&js);
    let s = cli(
        dir,
        &[
            "bench",
            "batching",
            "--provider",
            "mlx5,verbs",
            "-d",
            "mlx5_0",
            "-l",
            "1,8",
            "-m",
            "db8",
            "-Q",
            "1",
            "-r",
            "2",
            "-w",
            "0",
            "-n",
            "16",
            "--json",
            js.to_str().unwrap(),
        ],
    );
    let notes: Vec<&str> = s
        .lines()
        .filter(|l| l.contains("verbs baseline on mlx5_0 not measured"))
        .collect();
    assert_eq!(notes.len(), 1, "{s}");
    assert!(notes[0].contains("EOPNOTSUPP"), "{s}");
    assert!(s.contains("ns/WQE") && s.contains("doorbell: db8"), "{s}");
    assert!(!s.contains("ibv_post_send |"), "{s}");
    let j = std::fs::read_to_string(&js).unwrap();
    assert!(
        j.contains("\"skipped\":[\"verbs baseline on mlx5_0 not measured"),
        "{j}"
    );
    assert_eq!(j.matches("\"mode\":\"db8\",\"signal\"").count(), 1, "{j}");
    assert!(!j.contains("\"mode\":\"ibv_post_send\""), "{j}");
}

#[test]
fn perf_loopback_sweeps_pick_mlx5_by_themselves() {
    let dir = standin_or_skip!();
    for t in ["write_lat", "send_lat", "read_lat", "write_bw", "send_bw"] {
        let s = cli(
            dir,
            &["perf", t, "-d", "mlx5_0", "--loopback", "-a", "-n", "5"],
        );
        assert!(
            s.contains("Provider choice : mlx5 (auto: mlx5_0 is an mlx5 device)"),
            "{t}: {s}"
        );
        // The sweep's first and last sizes (2 B .. 8 MiB) both ran.
        assert!(s.contains("\n 2 ") && s.contains("\n 8388608 "), "{t}: {s}");
    }
    let s = cli(
        dir,
        &[
            "perf",
            "write_lat",
            "-d",
            "mlx5_0",
            "--loopback",
            "--hw-ts",
            "-n",
            "50",
        ],
    );
    assert!(s.contains("NIC time (device clock)"), "{s}");
    let s = cli(
        dir,
        &[
            "bench",
            "batching",
            "--provider",
            "mlx5",
            "-d",
            "mlx5_0",
            "-l",
            "1,8",
            "-r",
            "2",
        ],
    );
    assert!(s.contains("ns/WQE"), "{s}");
}

#[test]
fn events_reads_the_devices_asynchronous_event() {
    let dir = standin_or_skip!();
    let s = cli_with(
        dir,
        Some("port_event"),
        &["events", "-d", "mlx5_0", "--count", "1"],
    );
    assert!(s.contains("mlx5_0: PortActive port 1"), "{s}");
}

/// `events -d DEV` watches until Ctrl-C, but a stdout it cannot write ends the watch at once
/// with the one failure line and status 1 (it waited for events no one could read).
#[test]
fn events_on_a_full_stdout_ends_the_watch() {
    let dir = standin_or_skip!();
    let out = on_standin(dir, None)
        .args(["events", "-d", "mlx5_0"])
        .stdout(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        )
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.trim_end()
            .ends_with("cannot write to stdout: No space left on device (os error 28) (the results printed are lost)"),
        "{err}"
    );
}

/// A scenario's `event` line on mlx5_0 reads the device's own asynchronous events (the
/// stand-in's planted `PORT_ACTIVE`, through `Provider::async_events`), an event the file
/// does not list fails the run, and a `fault` line is refused naming the fix (only the sim
/// injects faults).
#[test]
fn scenario_events_on_mlx5_0_are_the_devices_and_faults_are_refused() {
    let dir = standin_or_skip!();
    let tmp = std::env::temp_dir().join(format!("rdma-direct-standin-scn-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let head = "version 2\ndesc events on mlx5_0\nqp a rc\nqp b rc\nconnect a b\n";
    let run = |name: &str, body: &str, fault: Option<&str>| {
        let f = tmp.join(format!("{name}.scn"));
        std::fs::write(&f, format!("{head}{body}")).unwrap();
        let out = on_standin(dir, fault)
            .args(["scenario", f.to_str().unwrap(), "-d", "mlx5_0"])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (st, s) = run(
        "port",
        "event PORT_ACTIVE port=1 within=10s\n",
        Some("port_event"),
    );
    assert_eq!(st, Some(0), "{s}");
    assert!(s.contains("PASS port"), "{s}");
    // Without the planted event the wait ends at its bound, naming the line.
    let (st, s) = run("none", "event PORT_ACTIVE port=1 within=50ms\n", None);
    assert_eq!(st, Some(1), "{s}");
    assert!(s.contains("none.scn:6 (event)"), "{s}");
    // The device's event is not the one listed: unexpected at the end.
    let (st, s) = run(
        "other",
        "event PORT_ERR port=1 within=50ms\n",
        Some("port_event"),
    );
    assert_eq!(st, Some(1), "{s}");
    assert!(s.contains("arrived (not taken): PORT_ACTIVE port 1"), "{s}");
    let (st, s) = run("fault", "fault qp a\nevent QP_FATAL a\n", None);
    assert_eq!(st, Some(1), "{s}");
    assert!(s.contains("fault.scn:6 (fault)"), "{s}");
    assert!(
        s.contains("only the software device (sim0) injects faults; tag the line [sim]"),
        "{s}"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}
