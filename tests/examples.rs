//! Every example runs on the software device with no device argument, briefly (`-n`), and
//! refuses a device that does not exist with an error. (Over a real device they run in the
//! rxe guest: `tests/guest/checks/40-examples.sh`.)
//! The examples are built first (a no-op when `cargo test` already built them).

use std::path::PathBuf;
use std::process::Command;

fn examples_dir() -> PathBuf {
    // target/<profile>/deps/examples-<hash> -> target/<profile>/examples
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("examples")
}

fn build(name: &str) {
    let mut build = Command::new(env!("CARGO"));
    build.args(["build", "--quiet", "--example", name]);
    if !cfg!(debug_assertions) {
        build.arg("--release");
    }
    let st = build
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .unwrap();
    assert!(st.success(), "building example {name} failed");
}

fn run(name: &str, args: &[&str]) -> String {
    build(name);
    let out = Command::new(examples_dir().join(name))
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{name} failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn order_gateway_runs_on_the_sim_and_prints_percentiles() {
    let out = run("order_gateway", &["-n", "20"]);
    assert!(out.contains("20 rounds: p50 "), "{out}");
    assert!(out.contains(" p99 "), "{out}");
}

/// `-d sim0` names the software device in the examples as in the CLI (the library's
/// choice maps it; libibverbs has no such device).
#[test]
fn order_gateway_takes_sim0_as_the_software_device() {
    let out = run("order_gateway", &["-d", "sim0", "-n", "20"]);
    assert!(out.contains("20 rounds: p50 "), "{out}");
}

#[test]
fn order_gateway_has_no_unsafe() {
    let src = include_str!("../examples/order_gateway.rs");
    let code = src.lines().filter(|l| !l.trim_start().starts_with("//"));
    for l in code {
        assert!(
            !l.contains("unsafe"),
            "the order gateway must need no unsafe: {l}"
        );
    }
}

fn assert_no_unsafe(name: &str, src: &str) {
    let code = src.lines().filter(|l| !l.trim_start().starts_with("//"));
    for l in code {
        assert!(!l.contains("unsafe"), "{name} must need no unsafe: {l}");
    }
}

#[test]
fn pingpong_runs_on_the_sim_and_prints_half_round_trips() {
    let out = run("pingpong", &["-n", "50"]);
    assert!(
        out.contains("50 iterations, 64-byte SEND: half round trip median "),
        "{out}"
    );
    assert!(out.contains(" us  p99 "), "{out}");
}

#[test]
fn pingpong_has_no_unsafe() {
    assert_no_unsafe("pingpong", include_str!("../examples/pingpong.rs"));
}

#[test]
fn batching_runs_on_the_sim_for_each_batch_size() {
    let out = run("batching", &["-n", "64"]);
    for size in [1, 2, 4, 8, 16, 32, 64] {
        let doorbells = 64 / size;
        let line = format!("batch {size:>2}:       64 writes, {doorbells:>7} doorbells, ");
        assert!(out.contains(&line), "{line:?} missing in\n{out}");
    }
    assert!(out.contains(" Mmsg/s"), "{out}");
}

#[test]
fn batching_has_no_unsafe() {
    assert_no_unsafe("batching", include_str!("../examples/batching.rs"));
}

#[test]
fn fanout_runs_on_the_sim_and_checks_every_sequence() {
    let out = run("fanout", &["-n", "300", "-s", "3"]);
    assert!(
        out.starts_with("3 subscribers, 300 messages each, every sequence checked: one-way p50 "),
        "{out}"
    );
    assert!(
        out.contains(" us  p99 ") && out.contains(" Mmsg/s delivered)"),
        "{out}"
    );
    // The defaults: 4 subscribers (a short run of them).
    let out = run("fanout", &["-n", "100"]);
    assert!(out.starts_with("4 subscribers, 100 messages each"), "{out}");
}

#[test]
fn fanout_has_no_unsafe() {
    assert_no_unsafe("fanout", include_str!("../examples/fanout.rs"));
}

/// `-d` with a device that does not exist: exit status 1 and one error line naming the
/// example, no panic, nothing on stdout.
#[test]
fn every_example_refuses_a_missing_device_with_an_error() {
    for name in ["order_gateway", "pingpong", "batching", "fanout"] {
        build(name);
        let out = Command::new(examples_dir().join(name))
            .args(["-d", "nosuchdev0", "-n", "1"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(out.stdout.is_empty(), "{name} printed to stdout");
        assert!(stderr.starts_with(&format!("{name}: ")), "{name}: {stderr}");
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
    }
}

/// A command line an example cannot honour (an unknown option, a value that is not a number,
/// a HOST on the sim, which runs both ends in one process) is refused: exit status 2 and one
/// line naming the example and the argument, nothing run (before, each was ignored and the
/// example ran its defaults on the sim).
#[test]
fn every_example_refuses_a_bad_command_line() {
    let cases: [(&str, &[&str], &str); 8] = [
        ("order_gateway", &["--help"], "unknown option \"--help\""),
        (
            "order_gateway",
            &["-n", "abc"],
            "-n needs a number, not \"abc\"",
        ),
        ("order_gateway", &["127.0.0.1"], "HOST needs -d DEV"),
        ("pingpong", &["-n"], "-n needs a value"),
        ("pingpong", &["127.0.0.1"], "HOST needs -d DEV"),
        ("batching", &["--bogus"], "unknown argument \"--bogus\""),
        ("fanout", &["-s", "x"], "-s needs a number, not \"x\""),
        (
            "reconnect",
            &["--help"],
            "unknown argument \"--help\" (usage: reconnect",
        ),
    ];
    for (name, args, text) in cases {
        build(name);
        let out = Command::new(examples_dir().join(name))
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name} {args:?}: {stderr}");
        assert!(
            out.stdout.is_empty(),
            "{name} {args:?} ran: stdout not empty"
        );
        assert!(
            stderr.starts_with(&format!("{name}: ")) && stderr.contains(text),
            "{name} {args:?}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{name} {args:?}: {stderr}");
    }
}

#[test]
fn reconnect_survives_peer_restarts_and_counts_what_was_lost() {
    let out = run("reconnect", &["-n", "40", "-r", "10"]);
    assert!(
        out.contains(
            "40 batches of 16 orders: 4 peer restarts, 64 orders lost in flight (detected from \
             error completions, resent), 640 orders acknowledged, 640 delivered in sequence to \
             the peers"
        ),
        "{out}"
    );
}

/// The reconnect example's files.
const RECONNECT: [(&str, &str); 4] = [
    ("main.rs", include_str!("../examples/reconnect/main.rs")),
    ("sim.rs", include_str!("../examples/reconnect/sim.rs")),
    (
        "receiver.rs",
        include_str!("../examples/reconnect/receiver.rs"),
    ),
    (
        "gateway.rs",
        include_str!("../examples/reconnect/gateway.rs"),
    ),
];

#[test]
fn reconnect_has_no_unsafe() {
    for (file, src) in RECONNECT {
        assert_no_unsafe(&format!("reconnect/{file}"), src);
    }
}

/// The recovery lives in the library, so the example is the application and the calls
/// into it: at most half of the 881 code lines (neither blank nor only a comment) it took
/// when it wrote its own drain, tally and heartbeat.
#[test]
fn reconnect_is_at_most_half_its_old_size() {
    let code = |src: &str| {
        src.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("//"))
            .count()
    };
    let lines: usize = RECONNECT.iter().map(|(_, src)| code(src)).sum();
    assert!(
        lines <= 881 / 2,
        "examples/reconnect: {lines} code lines, at most 440"
    );
}
