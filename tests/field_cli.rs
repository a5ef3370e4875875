//! The command line as a new user meets it: one diagnosis of a missing device for every
//! command, `--version`, bounded `-n`, the sim's options, result files beside (not inside)
//! the table. Host tests: the sim or no device at all.

use std::process::{Command, Output};

fn bin() -> Command {
    match std::env::var_os("RDMA_DIRECT_BIN") {
        Some(p) if !p.is_empty() => Command::new(p),
        _ => Command::new(env!("CARGO_BIN_EXE_rdma-direct")),
    }
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run rdma-direct")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `info -d nonexistent` and `perf -d nonexistent` gave two different diagnoses of the same
/// host; every command that takes `-d` now says the same after its own prefix.
#[test]
fn every_command_diagnoses_a_missing_device_the_same_way() {
    let mut seen = Vec::new();
    for (cmd, args) in [
        ("info", vec!["info", "-d", "nonexistent"]),
        ("perf", vec!["perf", "write_lat", "-d", "nonexistent"]),
        ("pingpong", vec!["pingpong", "-d", "nonexistent"]),
        ("doctor", vec!["doctor", "-d", "nonexistent"]),
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(1), "{cmd}: {}", text(&out.stderr));
        let err = text(&out.stderr);
        let prefix = format!("rdma-direct {cmd}: ");
        // The first line (doctor goes on to report what it can of the host).
        let rest = err
            .strip_prefix(&prefix)
            .unwrap_or_else(|| panic!("{cmd}: {err}"))
            .lines()
            .next()
            .unwrap_or_default()
            .to_string();
        assert!(
            rest.starts_with("no RDMA device 'nonexistent'"),
            "{cmd}: {err}"
        );
        seen.push(rest);
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:#?}");
}

#[test]
fn version() {
    let out = run(&["--version"]);
    assert!(out.status.success());
    assert_eq!(
        text(&out.stdout),
        format!("rdma-direct {}\n", env!("CARGO_PKG_VERSION"))
    );
}

/// `perf write_lat -n 4294967295` aborted on a 32 GiB allocation (rc 134).
#[test]
fn huge_iteration_counts_are_refused_with_the_limit() {
    let out = run(&["perf", "write_lat", "-n", "4294967295"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("at most 16777216"), "{err}");
}

/// `pingpong` without `-d` accepted neither `-c UC` nor what its help lists; now the sim runs
/// UC, and what needs a peer is refused with the reason.
#[test]
fn pingpong_on_the_sim_runs_uc_and_says_why_it_refuses_a_host() {
    let out = run(&["pingpong", "-c", "UC", "-n", "20", "-s", "64"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("20 iters in"),
        "{}",
        text(&out.stdout)
    );
    assert!(text(&out.stdout).contains("provider choice: sim"));
}

/// The header names the provider that ran; `--json FILE` writes the file and nothing but
/// the table reaches stdout; `--svg FILE` writes a curve.
#[test]
fn perf_on_the_sim_names_its_provider_and_writes_files_beside_the_table() {
    let dir = std::env::temp_dir().join(format!("rdma-direct-field-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("r.json");
    let svg = dir.join("r.svg");
    let out = run(&[
        "perf",
        "write_lat",
        "-s",
        "8",
        "-n",
        "50",
        "--json",
        json.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    let so = text(&out.stdout);
    assert!(out.status.success(), "{so}{}", text(&out.stderr));
    assert!(
        so.contains(" Provider choice : sim (auto: no -d or -d sim0, the software device)"),
        "{so}"
    );
    assert!(!so.lines().any(|l| l.trim_start().starts_with('{')), "{so}");
    let j = std::fs::read_to_string(&json).unwrap();
    assert!(
        j.contains("\"provider\": \"sim\"") || j.contains("\"provider\":\"sim\""),
        "{j}"
    );
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.starts_with("<?xml") && s.contains("<svg"), "{s}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// What the sim cannot do is refused with a reason, never "unknown option".
#[test]
fn perf_refusals_on_the_sim_and_of_perftest_options_we_do_not_speak() {
    for (args, want) in [
        (vec!["perf", "write_lat", "-x", "3"], "one GID"),
        (
            vec!["perf", "write_lat", "--provider", "mlx5"],
            "needs a device",
        ),
        (vec!["perf", "write_bw", "-q", "2"], "one pair only"),
        (vec!["perf", "write_bw", "-R"], "RDMA CM"),
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = text(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn info_lists_the_software_device_marked_as_such() {
    let out = run(&["info", "-d", "sim0"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let so = text(&out.stdout);
    assert!(so.contains("hca_id:\tsim0"), "{so}");
    assert!(so.contains("software (not hardware)"), "{so}");
}
