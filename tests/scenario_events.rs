//! Second-edition expectations on the software device: `event` lines (asynchronous events
//! raised by `fault` lines), `within=` bounds on waiting, and the `version` line. Each
//! planted mistake must fail at its line with the message that names it. (The passing
//! fixture, fixtures/scenarios/fault_events.scn, runs in tests/sim_scenarios.rs.)

use std::time::Duration;

use rdma_direct::providers::sim::SimDevice;
use rdma_direct::providers::ProviderKind;
use rdma_direct::scenario::{parse, run_scenario, Failure, RunOpts};

const HEAD: &str = "\
version 2
desc events
buf src 256 fill=seq
buf dst 256 fill=byte:0
qp a rc
qp b rc
connect a b
";

fn run(body: &str) -> Result<(), Failure> {
    let text = format!("{HEAD}{body}");
    let sc = parse("t.scn", "t", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mut opts = RunOpts::new(ProviderKind::Sim, "sim0");
    // A liveness bound only: the `within=` of the lines below is what these tests exercise.
    opts.poll_timeout = Duration::from_secs(20);
    opts.settle = Duration::from_millis(1);
    let mut dev = SimDevice::new();
    run_scenario(&mut dev, &sc, &opts).map(|_| ())
}

fn failure(body: &str) -> (usize, String) {
    let f = run(body).expect_err("the scenario passed but should not");
    assert_eq!(f.mismatches.len(), 1, "{f}");
    (f.mismatches[0].line, f.mismatches[0].detail.clone())
}

const HEAD_LINES: usize = 7;

#[test]
fn a_qp_fault_raises_qp_fatal_for_that_qp_and_moves_it_to_err() {
    let ok = "\
post_recv b wr=1 sge=dst:8
ring_recv b
fault qp b
event QP_FATAL b within=5s
state b ERR
state a RTS
expect wr=1 WR_FLUSH_ERR
";
    run(ok).unwrap_or_else(|f| panic!("{f}"));
    // The event of the other QP is not this one's: the wait ends at its bound and lists
    // what arrived.
    let (line, d) = failure(&ok.replace("QP_FATAL b within=5s", "QP_FATAL a within 50ms"));
    assert_eq!(line, HEAD_LINES + 4, "{d}");
    assert!(
        d.contains("timed out after 50ms waiting for the asynchronous event QP_FATAL qp a"),
        "{d}"
    );
    assert!(d.contains("arrived (not taken): QP_FATAL qp b"), "{d}");
    // And the state check sees the fault.
    let (line, d) = failure(&ok.replace("state b ERR", "state b RTS"));
    assert_eq!(line, HEAD_LINES + 5, "{d}");
    assert!(d.contains("QP 'b' is ERR, expected RTS"), "{d}");
}

#[test]
fn every_event_must_be_expected_once_a_scenario_lists_events() {
    let body = "\
fault port 1 down
event PORT_ERR port=1
fault port 1 up
";
    let f = run(body).expect_err("an unlisted PORT_ACTIVE must fail");
    let d = f.to_string();
    assert!(
        d.contains("asynchronous event nobody expected: PORT_ACTIVE port 1"),
        "{d}"
    );
    run(&format!("{body}event PORT_ACTIVE port=1\n")).unwrap_or_else(|f| panic!("{f}"));
    // The port must be the one named.
    let (line, d) = failure("fault port 1 down\nevent PORT_ERR port=2 within=30ms\n");
    assert_eq!(line, HEAD_LINES + 2, "{d}");
    assert!(d.contains("PORT_ERR port 2"), "{d}");
}

#[test]
fn within_bounds_the_wait_of_an_expect_group() {
    // A receive with no sender never completes: the group gives up at its own bound.
    let (line, d) =
        failure("post_recv b wr=1 sge=dst:8\nring_recv b\nexpect wr=1 SUCCESS RECV within=30ms\n");
    assert_eq!(line, HEAD_LINES + 3, "{d}");
    assert!(
        d.contains("timed out after 30ms waiting for completions"),
        "{d}"
    );
    assert!(d.contains("missing:  wr=1 SUCCESS RECV"), "{d}");
}

#[test]
fn bad_event_fault_within_and_version_lines_are_errors_with_their_line() {
    for (body, line, msg) in [
        ("event QP_BROKEN a\n", 8, "unknown event 'QP_BROKEN'"),
        ("event PORT_ERR a\n", 8, "PORT_ERR concerns no QP"),
        ("event QP_FATAL port=1\n", 8, "QP_FATAL concerns no port"),
        ("event QP_FATAL zz\n", 8, "zz"),
        ("fault qp\n", 8, "usage: fault qp QP"),
        ("fault port 1 sideways\n", 8, "usage: fault qp QP"),
        ("expect wr=1 SUCCESS SEND within=5h\n", 8, "duration '5h'"),
        ("event PORT_ERR within=0ms\n", 8, "more than 0"),
        ("event PORT_ERR within=601s\n", 8, "at most 600s"),
    ] {
        let e = parse("t.scn", "t", &format!("{HEAD}{body}")).expect_err(body);
        assert_eq!(e.line, line, "{body}: {e}");
        assert!(e.msg.contains(msg), "{body}: {e}");
    }
    let e = parse("t.scn", "t", &HEAD.replace("version 2", "version 3")).unwrap_err();
    assert_eq!(e.line, 1);
    assert!(e.msg.contains("this runner reads versions 1 to 2"), "{e}");
    let e = parse(
        "t.scn",
        "t",
        &format!("{}version 2\n", HEAD.replace("version 2\n", "")),
    )
    .unwrap_err();
    assert!(e.msg.contains("before any declaration"), "{e}");
}
