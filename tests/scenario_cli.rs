//! Scenarios as a team uses them: a `.scn` file outside the repository, run with
//! `rdma-direct scenario FILE` and through the library (`rdma_direct::scenario::run_file`) on
//! the sim; planted mistakes fail at their line with every mismatch under `--keep-going`;
//! the second edition of the language (any-order blocks, counted immediates, `repeat=` on
//! expect lines, `sim`/`!sim` tags) passes when right and fails when wrong. Host tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rdma_direct::providers::sim::SimDevice;
use rdma_direct::providers::ProviderKind;
use rdma_direct::scenario::{run_file, RunError, RunOpts};

fn bin() -> Command {
    match std::env::var_os("RDMA_DIRECT_BIN") {
        Some(p) if !p.is_empty() => Command::new(p),
        _ => Command::new(env!("CARGO_BIN_EXE_rdma-direct")),
    }
}

fn run(args: &[&str]) -> Output {
    bin()
        .env_remove("RDMA_DIRECT_SCENARIO")
        .args(args)
        .output()
        .expect("run rdma-direct")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A fresh directory outside the repository, removed when dropped.
struct TmpDir(PathBuf);

impl std::ops::Deref for TmpDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tmpdir(tag: &str) -> TmpDir {
    let d = std::env::temp_dir().join(format!("rdma-direct-scn-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    TmpDir(d)
}

fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

/// A team's scenario: a WRITE WITH IMMEDIATE of 64 bytes. Line 11 is the expect line of
/// the receive, line 13 the `final` line of the written bytes.
const TEAM: &str = "\
desc a team's own scenario: WRITE_IMM of 64 bytes
buf src 4K fill=seq
buf dst 4K fill=zero
qp a rc
qp b rc
connect a b
post_recv b wr=100
ring_recv b
post a write_imm wr=1 sge=src+0:64 remote=dst+128 imm=0x1234 signaled
ring a
expect wr=100 SUCCESS RECV_RDMA_WITH_IMM len=64 imm=0x1234
expect wr=1 SUCCESS RDMA_WRITE
final dst+128 copy=src+0:64
";

#[test]
fn a_file_outside_the_repository_passes() {
    let d = tmpdir("pass");
    let f = write(&d, "team.scn", TEAM);
    let out = run(&["scenario", f.to_str().unwrap()]);
    let s = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{s}{}", text(&out.stderr));
    let first = s.lines().next().unwrap_or("");
    assert!(first.starts_with("PASS team "), "{s}");
    assert!(
        first.contains("on sim0 [sim,mlx5,sim0], deterministic"),
        "{s}"
    );
    assert!(s.contains("scenarios: 1 passed, 0 failed"), "{s}");
    // The directory stands for its files; both sim modes.
    let out = run(&["scenario", d.to_str().unwrap(), "--mode", "all"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("scenarios: 2 passed, 0 failed"));
    // And through the library, as a team's test crate calls it.
    let opts = RunOpts::new(ProviderKind::Sim, "sim0");
    let r = run_file(&mut SimDevice::new(), &f, &opts).unwrap();
    assert_eq!((r.name.as_str(), r.posted, r.completions), ("team", 2, 2));
}

#[test]
fn one_wrong_byte_and_one_wrong_immediate_are_both_reported() {
    let d = tmpdir("wrong");
    let bad = TEAM
        .replace(
            "imm=0x1234\nexpect wr=1",
            "imm=0x1235\nexpect wr=1", // the expect line (11)
        )
        .replace(
            "final dst+128 copy=src+0:64\n",
            "final dst+128 copy=src+0:64\nfinal dst+150 hex=ff\n", // line 14
        );
    let f = write(&d, "team.scn", &bad);
    let path = f.to_str().unwrap();
    let out = run(&["scenario", path, "--keep-going"]);
    let s = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{s}");
    assert!(s.starts_with("FAIL team "), "{s}");
    assert!(s.contains("2 mismatch(es)"), "{s}");
    assert!(s.contains(&format!("{path}:11 (expect)")), "{s}");
    assert!(s.contains("imm=0x1234, expected 0x1235"), "{s}");
    assert!(s.contains(&format!("{path}:14 (final buffers)")), "{s}");
    assert!(
        s.contains("buffer 'dst': bytes 150..151 (0x96..0x97, 1 B) differ"),
        "{s}"
    );
    // Without --keep-going the run stops at the first.
    let out = run(&["scenario", path]);
    let s1 = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        s1.contains("1 mismatch(es)") && s1.contains(":11 (expect)"),
        "{s1}"
    );
    assert!(!s1.contains(":14 (final"), "{s1}");
    // --json: one object per scenario, both mismatches with their lines.
    let out = run(&["scenario", path, "--keep-going", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let j = text(&out.stdout);
    let lines: Vec<&str> = j.lines().collect();
    assert_eq!(lines.len(), 1, "{j}");
    assert_eq!(check_json(lines[0]), Ok(()), "{}", lines[0]);
    assert!(lines[0].contains("\"result\":\"fail\""), "{j}");
    assert!(lines[0].contains("\"line\":11,\"step\":\"expect\""), "{j}");
    assert!(
        lines[0].contains("\"line\":14,\"step\":\"final buffers\""),
        "{j}"
    );
    // The library says the same.
    let mut opts = RunOpts::new(ProviderKind::Sim, "sim0");
    opts.keep_going = true;
    match run_file(&mut SimDevice::new(), &f, &opts) {
        Err(RunError::Failed(fl)) => {
            let lines: Vec<usize> = fl.mismatches.iter().map(|m| m.line).collect();
            assert_eq!(lines, [11, 14], "{fl}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn every_differing_range_is_reported() {
    let d = tmpdir("ranges");
    // Three separate wrong ranges: two in the written window, one elsewhere.
    let bad = TEAM.replace(
        "final dst+128 copy=src+0:64\n",
        "final dst+128 copy=src+0:64\nfinal dst+130 hex=ffff\nfinal dst+180 hex=ee\nfinal dst+4000 u32=7\n",
    );
    let f = write(&d, "ranges.scn", &bad);
    let opts = RunOpts::new(ProviderKind::Sim, "sim0");
    let fl = match run_file(&mut SimDevice::new(), &f, &opts) {
        Err(RunError::Failed(fl)) => fl,
        other => panic!("{other:?}"),
    };
    let got: Vec<(usize, bool)> = fl
        .mismatches
        .iter()
        .map(|m| (m.line, m.detail.contains("4 B in 3 range(s) in all")))
        .collect();
    assert_eq!(got, [(14, true), (15, true), (16, true)], "{fl}");
    assert!(fl.mismatches[2].detail.contains("bytes 4000..4001"), "{fl}");
}

#[test]
fn a_file_that_does_not_parse_names_its_line_and_the_others_run() {
    let d = tmpdir("parse");
    write(&d, "a_good.scn", TEAM);
    let bad = write(&d, "b_bad.scn", &TEAM.replace("ring a\n", "ring nosuch\n"));
    let out = run(&["scenario", d.to_str().unwrap()]);
    let s = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{s}");
    assert!(s.contains("PASS a_good "), "{s}");
    assert!(
        s.contains(&format!(
            "FAIL {}: does not parse: {}:10: 'nosuch' is not declared",
            bad.display(),
            bad.display()
        )),
        "{s}"
    );
    // The filter: only the scenario named.
    let out = bin()
        .env("RDMA_DIRECT_SCENARIO", "a_good")
        .args(["scenario", d.join("a_good.scn").to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let out = bin()
        .env("RDMA_DIRECT_SCENARIO", "nope")
        .args(["scenario", d.join("a_good.scn").to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains("no scenario is called 'nope'"));
    // Usage errors are status 2.
    let out = run(&["scenario"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("rdma-direct scenario: no scenario given"));
}

/// The fixture's any-order block, with the two senders' receives listed in either order:
/// both pass (the receives are matched by content). Without the block one of the two
/// listings must fail (wr=100 carries only one sender's message).
#[test]
fn any_order_blocks_match_srq_receives_by_content() {
    let fixture = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/scenarios/srq_any_order.scn"),
    )
    .unwrap();
    let b_first = "expect wr=100 SUCCESS RECV len=64 imm=0x10+i qp=b repeat=4\n\
                   expect wr=104 SUCCESS RECV len=64 imm=0x20+i*2 qp=d repeat=4\n";
    assert!(fixture.contains(b_first));
    let d_first = "expect wr=100 SUCCESS RECV len=64 imm=0x20+i*2 qp=d repeat=4\n\
                   expect wr=104 SUCCESS RECV len=64 imm=0x10+i qp=b repeat=4\n";
    let d = tmpdir("anyorder");
    let mut strict_failures = 0;
    for (name, listing) in [("b_first", b_first), ("d_first", d_first)] {
        for threaded in [false, true] {
            let body = fixture.replace(b_first, listing);
            let f = write(&d, &format!("{name}.scn"), &body);
            let mut dev = SimDevice::new();
            if threaded {
                dev.start_device_thread().unwrap();
            }
            let opts = RunOpts::new(ProviderKind::Sim, "sim0");
            if let Err(e) = run_file(&mut dev, &f, &opts) {
                panic!("{name} (thread: {threaded}): {e}");
            }
            // The same listing as a plain group: order by wr_id within the SRQ.
            let strict = body.replace("expect any-order {\n", "").replace("}\n", "");
            let f = write(&d, &format!("{name}_strict.scn"), &strict);
            let mut dev = SimDevice::new();
            if threaded {
                dev.start_device_thread().unwrap();
            }
            if run_file(&mut dev, &f, &opts).is_err() {
                strict_failures += 1;
            }
        }
    }
    assert!(
        strict_failures >= 2,
        "without the block, one of the two listings must fail in each mode"
    );
    // A planted mistake inside the block still fails, at its line: d's immediates counted
    // by 1 instead of 2.
    let wrong = fixture.replace("imm=0x20+i*2 qp=d", "imm=0x20+i qp=d");
    let f = write(&d, "wrong.scn", &wrong);
    let line = wrong
        .lines()
        .position(|l| l.contains("imm=0x20+i qp=d"))
        .unwrap()
        + 1;
    let opts = RunOpts::new(ProviderKind::Sim, "sim0");
    match run_file(&mut SimDevice::new(), &f, &opts) {
        Err(RunError::Failed(fl)) => {
            assert_eq!(fl.line(), line, "{fl}");
            assert!(fl.to_string().contains("imm="), "{fl}");
        }
        other => panic!("{other:?}"),
    }
}

/// The fixture of counted repeats with its final counter wrong (3 per step written as 2)
/// and its immediates counted by 2: under keep-going, seven receive mismatches at the
/// expect line and seven byte ranges at the final line.
#[test]
fn counted_repeats_fail_at_their_lines() {
    let fixture = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/scenarios/counted_writes.scn"),
    )
    .unwrap();
    let at = |needle: &str| fixture.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let (expect_line, final_line) = (at("expect wr=100"), at("final dst"));
    let wrong = fixture
        .replace(
            "final dst+0:8 u64=0x1000+i*3",
            "final dst+0:8 u64=0x1000+i*2",
        )
        .replace("imm=0x500+i repeat=8\n", "imm=0x500+i*2 repeat=8\n");
    assert_ne!(wrong, fixture);
    let d = tmpdir("counted");
    let f = write(&d, "counted.scn", &wrong);
    let mut opts = RunOpts::new(ProviderKind::Sim, "sim0");
    opts.keep_going = true;
    let fl = match run_file(&mut SimDevice::new(), &f, &opts) {
        Err(RunError::Failed(fl)) => fl,
        other => panic!("{other:?}"),
    };
    let lines: Vec<usize> = fl.mismatches.iter().map(|m| m.line).collect();
    let mut want = vec![expect_line; 7];
    want.extend([final_line; 7]);
    assert_eq!(lines, want, "{fl}");
    assert!(
        fl.mismatches[0]
            .detail
            .contains("imm=0x501, expected 0x502"),
        "{fl}"
    );
    assert!(fl.mismatches[7].detail.contains("bytes 16..17"), "{fl}");
}

/// `state QP STATE` lines: the fixture of a wrong rkey checks both QPs in RTS after
/// `connect` and in ERR after their error completions; claiming the responder still in RTS
/// fails at that line.
#[test]
fn qp_state_lines() {
    let fixture = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/scenarios/wrong_rkey_flush.scn"),
    )
    .unwrap();
    assert!(fixture.contains("state a RTS\nstate b RTS\n"));
    let wrong = fixture.replace("state b ERR", "state b RTS");
    let lines: Vec<&str> = wrong.lines().collect();
    let line = lines.iter().rposition(|l| *l == "state b RTS").unwrap() + 1;
    let d = tmpdir("state");
    let f = write(&d, "state.scn", &wrong);
    let opts = RunOpts::new(ProviderKind::Sim, "sim0");
    match run_file(&mut SimDevice::new(), &f, &opts) {
        Err(RunError::Failed(fl)) => {
            assert_eq!(fl.line(), line, "{fl}");
            assert!(
                fl.to_string().contains("QP 'b' is ERR, expected RTS"),
                "{fl}"
            );
        }
        other => panic!("{other:?}"),
    }
}

/// `[sim]` lines apply on the sim only, `[!sim]` everywhere else: swapping two tagged
/// expectations makes the sim run fail.
#[test]
fn sim_and_not_sim_tags() {
    let d = tmpdir("tags");
    let body = "\
desc tags: the sim sees the [sim] line
differs a planted difference, to show which line applies
buf src 4K fill=seq
buf dst 4K
qp a rc
qp b rc
connect a b
post_recv b wr=100 sge=dst:64
ring_recv b
post a send wr=1 sge=src:48 signaled
ring a
expect wr=1 SUCCESS SEND
expect[sim] wr=100 SUCCESS RECV len=48
expect[!sim] wr=100 SUCCESS RECV len=47
final dst:48 copy=src
";
    let f = write(&d, "tags.scn", body);
    let opts = RunOpts::new(ProviderKind::Sim, "sim0");
    run_file(&mut SimDevice::new(), &f, &opts).unwrap();
    let swapped = body
        .replace("expect[sim]", "expect[TMP]")
        .replace("expect[!sim]", "expect[sim]")
        .replace("expect[TMP]", "expect[!sim]");
    let f = write(&d, "swapped.scn", &swapped);
    match run_file(&mut SimDevice::new(), &f, &opts) {
        Err(RunError::Failed(fl)) => {
            assert_eq!(fl.line(), 14, "{fl}");
            assert!(fl.to_string().contains("byte_len 48, expected 47"), "{fl}");
        }
        other => panic!("{other:?}"),
    }
    // On a verbs device called rxe0 the [!sim] line applies, the [sim] one does not.
    let rxe = RunOpts::new(ProviderKind::Verbs, "rxe0");
    assert_eq!(rxe.tags, ["verbs", "rxe", "rxe0"]);
    assert!(rxe.applies(&Some("!sim".into())) && !rxe.applies(&Some("sim".into())));
    assert!(rxe.applies(&Some("verbs,!mlx5".into())));
    let hw = RunOpts::new(ProviderKind::Mlx5, "mlx5_0");
    assert!(hw.applies(&Some("mlx5,!sim".into())) && !hw.applies(&Some("verbs".into())));
}

/// A completion that arrives in the same poll as the group's last one, and that nothing
/// expects: the message says the group was complete and lists it.
#[test]
fn an_unexpected_completion_says_what_was_awaited() {
    let d = tmpdir("unexpected");
    let body = "\
desc two signaled sends, only one expected
buf src 4K fill=seq
buf dst 4K
qp a rc
qp b rc
connect a b
post a write wr=1 sge=src:8 remote=dst signaled
post a write wr=2 sge=src+8:8 remote=dst+8 signaled
ring a
expect wr=1 SUCCESS RDMA_WRITE
final dst:16 copy=src
";
    let f = write(&d, "unexpected.scn", body);
    let opts = RunOpts::new(ProviderKind::Sim, "sim0");
    let fl = match run_file(&mut SimDevice::new(), &f, &opts) {
        Err(RunError::Failed(fl)) => fl,
        other => panic!("{other:?}"),
    };
    let s = fl.to_string();
    assert!(s.contains("wr=2 SUCCESS"), "{s}");
    // On the deterministic sim both completions come in one poll.
    assert!(
        s.contains("waiting for: nothing more: every completion of this group had arrived (wr=1 SUCCESS RDMA_WRITE (line 10))"),
        "{s}"
    );
    assert!(!s.contains("waiting for: )"), "{s}");
}

/// Checks that `s` is one JSON value (RFC 8259 grammar, no extensions).
fn check_json(s: &str) -> Result<(), String> {
    let b = s.as_bytes();
    let mut i = 0;
    value(b, &mut i)?;
    ws(b, &mut i);
    if i == b.len() {
        Ok(())
    } else {
        Err(format!("trailing text at {i}"))
    }
}

fn ws(b: &[u8], i: &mut usize) {
    while *i < b.len() && b" \t\r\n".contains(&b[*i]) {
        *i += 1;
    }
}

fn value(b: &[u8], i: &mut usize) -> Result<(), String> {
    ws(b, i);
    match b.get(*i) {
        Some(b'{') => seq(b, i, b'}', true),
        Some(b'[') => seq(b, i, b']', false),
        Some(b'"') => string(b, i),
        Some(c) if c.is_ascii_digit() || *c == b'-' => {
            *i += 1;
            while *i < b.len() && (b[*i].is_ascii_digit() || b".eE+-".contains(&b[*i])) {
                *i += 1;
            }
            Ok(())
        }
        _ => {
            for lit in ["true", "false", "null"] {
                if b[*i..].starts_with(lit.as_bytes()) {
                    *i += lit.len();
                    return Ok(());
                }
            }
            Err(format!("no value at {i}"))
        }
    }
}

fn seq(b: &[u8], i: &mut usize, close: u8, object: bool) -> Result<(), String> {
    *i += 1;
    ws(b, i);
    if b.get(*i) == Some(&close) {
        *i += 1;
        return Ok(());
    }
    loop {
        if object {
            ws(b, i);
            string(b, i)?;
            ws(b, i);
            if b.get(*i) != Some(&b':') {
                return Err(format!("no ':' at {i}"));
            }
            *i += 1;
        }
        value(b, i)?;
        ws(b, i);
        match b.get(*i) {
            Some(b',') => *i += 1,
            Some(c) if *c == close => {
                *i += 1;
                return Ok(());
            }
            _ => return Err(format!("no ',' or close at {i}")),
        }
    }
}

fn string(b: &[u8], i: &mut usize) -> Result<(), String> {
    if b.get(*i) != Some(&b'"') {
        return Err(format!("no string at {i}"));
    }
    *i += 1;
    while let Some(&c) = b.get(*i) {
        *i += 1;
        match c {
            b'"' => return Ok(()),
            b'\\' => *i += 1,
            c if c < 0x20 => return Err(format!("control character in a string at {i}")),
            _ => {}
        }
    }
    Err("unterminated string".into())
}

#[test]
fn the_json_check_refuses_what_is_not_json() {
    assert_eq!(
        check_json("{\"a\":[1,\"x\\\"\",true,null],\"b\":{}}"),
        Ok(())
    );
    for bad in [
        "{\"a\":1,}",
        "{a:1}",
        "[1 2]",
        "{\"a\":\"x\n\"}",
        "{\"a\":1} x",
        "\"x",
    ] {
        assert!(check_json(bad).is_err(), "{bad}");
    }
}
