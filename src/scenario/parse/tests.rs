//! The parser's unit tests: a small file in full, the second-edition forms, errors with
//! their lines, malformed and binary input (errors, never panics), numbers.

use super::super::*;
use super::lex::*;
use super::*;
use crate::providers::WcOpcode;

const GOOD: &str = "\
# a comment
name tiny
desc one send
buf src 4K fill=seq
buf dst 4096 fill=byte:0xee access=lw
qp a rc sq=8
qp b rc
connect a b rnr_retry=3
post_recv b wr=1 sge=dst+16:100
ring_recv b
post a send wr=2 sge=src+4:100 signaled   # trailing comment
ring a
expect wr=2 SUCCESS SEND
expect wr=1 SUCCESS RECV len=100
final dst+16 copy=src+4:100
";

fn err(text: &str) -> ParseError {
    match parse("t.scn", "t", text) {
        Ok(_) => panic!("parsed but should not:\n{text}"),
        Err(e) => e,
    }
}

#[test]
fn parses_a_small_scenario() {
    let sc = parse("t.scn", "t", GOOD).unwrap();
    assert_eq!(sc.name, "tiny");
    assert_eq!(sc.bufs.len(), 2);
    assert_eq!(sc.bufs[0].size, 4096);
    assert_eq!(sc.bufs[0].fill, Fill::Seq(0));
    assert_eq!(sc.bufs[1].fill, Fill::Byte(0xee));
    assert_eq!(sc.bufs[1].access, 1);
    assert_eq!(sc.qps[0].sq, 8);
    assert_eq!(sc.steps.len(), 6);
    match &sc.steps[0].kind {
        StepKind::Connect { a: 0, b: 1, opts } => assert_eq!(opts.rnr_retry, Some(3)),
        k => panic!("{k:?}"),
    }
    match &sc.steps[3].kind {
        StepKind::Post(p) => {
            assert_eq!(p.wr_id, 2);
            assert_eq!(p.signal, Signal::All);
            assert_eq!(
                p.sges,
                vec![Range {
                    buf: 0,
                    off: 4,
                    len: 100
                }]
            );
        }
        k => panic!("{k:?}"),
    }
    match &sc.steps[5].kind {
        StepKind::Expect(g) => {
            assert_eq!(g.len(), 2);
            assert_eq!(g[1].len, Some(100));
            assert_eq!(g[1].opcode, Some(WcOpcode::Recv));
            assert_eq!(g[1].line, 14);
        }
        k => panic!("{k:?}"),
    }
    assert_eq!(
        sc.finals[0].kind,
        EditKind::Copy(Range {
            buf: 0,
            off: 4,
            len: 100
        })
    );
    assert_eq!(sc.finals[0].range.off, 16);
}

/// Counted immediates, `repeat=` on expect lines, an any-order block as a group of its
/// own, and tags that exclude each other expecting one wr twice.
#[test]
fn second_edition_forms() {
    let text = "\
buf s 4096
buf d 4096
differs the sim and rxe report it differently
qp a rc
qp b rc
connect a b
post_recv b wr=10 sge=d:64 repeat=4 step=64
ring_recv b
post a send_imm wr=1 sge=s:64 imm=0x100+i*2 repeat=4 step=64 signal=last
ring a
expect wr=4 SUCCESS SEND covered=3
expect any-order {
expect wr=10 SUCCESS RECV len=64 imm=0x100+i*2 repeat=2
expect wr=12 SUCCESS RECV len=64 imm=0x104+i repeat=2
}
expect[sim] wr=12 SUCCESS RECV
expect[!sim] wr=12 SUCCESS RECV
";
    // The two tagged lines after the block would expect wr=12 twice: refused. Without
    // them, the file parses.
    let e = err(text);
    assert!(e.msg.contains("already expected"), "{e}");
    assert_eq!(e.line, 16);
    let text = text.replace(
        "expect[sim] wr=12 SUCCESS RECV\nexpect[!sim] wr=12 SUCCESS RECV\n",
        "",
    );
    let sc = parse("t.scn", "t", &text).unwrap();
    let StepKind::Post(p) = &sc.steps[3].kind else {
        panic!("{:?}", sc.steps[3])
    };
    assert_eq!((p.imm, p.imm_step, p.repeat), (0x100, 2, 4));
    let groups: Vec<Vec<(u64, Option<u32>, bool)>> = sc
        .steps
        .iter()
        .filter_map(|s| match &s.kind {
            StepKind::Expect(g) => Some(g.iter().map(|e| (e.wr_id, e.imm, e.any_order)).collect()),
            _ => None,
        })
        .collect();
    assert_eq!(
        groups,
        vec![
            vec![(4, None, false)],
            vec![
                (10, Some(0x100), true),
                (11, Some(0x102), true),
                (12, Some(0x104), true),
                (13, Some(0x105), true)
            ]
        ]
    );
    // Tags that cannot both apply may each expect the same request.
    for (a, b, ok) in [
        ("sim", "!sim", true),
        ("mlx5,!sim", "sim", true),
        ("rxe", "mlx5", true),
        ("verbs", "sim", true),
        ("verbs", "mlx5", false), // mlx5 hardware through libibverbs is both
        ("mlx5_0", "mlx5", false),
        ("rxe0", "sim", true),
    ] {
        let t = format!(
            "buf s 64\ndiffers x\nqp a rc\nqp b rc\nconnect a b\npost a send wr=1 sge=s:8 signaled\nring a\nexpect[{a}] wr=1 SUCCESS SEND\nexpect[{b}] wr=1 SUCCESS SEND\n"
        );
        let got = parse("t.scn", "t", &t);
        assert_eq!(got.is_ok(), ok, "[{a}] and [{b}]: {got:?}");
    }
}

#[test]
fn errors_name_the_line() {
    let bad = GOOD.replace("ring a\n", "ring nosuch\n");
    let e = err(&bad);
    assert_eq!(e.line, 12);
    assert!(e.msg.contains("'nosuch' is not declared"), "{e}");
    assert!(e.to_string().starts_with("t.scn:12: "), "{e}");
}

#[test]
fn malformed_inputs_are_errors_not_panics() {
    let cases: &[(&str, &str)] = &[
        ("buf x 0", "out of range"),
        ("buf x 1G", "bad number"),
        ("buf x 0xffffffffffffffffff", "bad number"),
        ("buf x 99999999999999999M", "overflows"),
        ("buf x 8 fill=seq:300", "not a byte"),
        ("buf x 8 fill=wat", "bad fill"),
        ("buf 9x 8", "bad name"),
        ("buf x 8\nbuf x 8", "already declared"),
        ("qp a xx", "QP type"),
        ("qp a rc sq=0", "out of range"),
        ("qp a rc\npost a send wr=1 sge=nope:4", "not declared"),
        ("buf s 8\nqp a rc\npost a send wr=1 sge=s+4:8", "outside"),
        (
            "buf s 8\nqp a rc\npost a send wr=1 sge=s+18446744073709551615:8",
            "outside",
        ),
        ("buf s 8\nqp a rc\npost a send wr=1 sge=s", "needs a length"),
        (
            "buf s 8\nqp a rc\npost a write wr=1 sge=s:8",
            "needs remote",
        ),
        ("buf s 8\nqp a rc\npost a send wr=1 imm=3", "no immediate"),
        (
            "buf s 64\nqp a rc\npost a send wr=1 sge=s:8 repeat=9 step=8",
            "outside",
        ),
        (
            "buf s 64\nqp a rc\npost a send wr=18446744073709551615 sge=s:8 repeat=2",
            "overflows",
        ),
        (
            "qp a rc\npost a send wr=1\npost a send wr=1",
            "already used",
        ),
        ("qp a rc\npost a send wr=1 reject=nope", "unknown rejection"),
        ("qp a rc\nexpect wr=1 SUCCESS SEND", "not posted"),
        (
            "qp a rc\npost a send wr=1\nexpect wr=1 SUCCESS",
            "needs its opcode",
        ),
        (
            "qp a rc\npost a send wr=1\nexpect wr=1 WR_FLUSH_ERR SEND",
            "only wr=",
        ),
        (
            "qp a rc\npost a send wr=1\nexpect wr=1 SUCCESS RECV",
            "send request",
        ),
        (
            "qp a rc\npost a send wr=1\nexpect wr=1 BOGUS",
            "unknown status",
        ),
        (
            "qp a rc\npost[rxe] a send wr=1\nexpect wr=1 SUCCESS SEND",
            "differs",
        ),
        ("qp a rc\nqp[rxe] b rc", "takes no [variant]"),
        ("qp a rc\npost[RXE] a send wr=1", "bad variant"),
        ("qp a rc\npost[rxe a send wr=1", "variant is written"),
        ("qp a rc\nfrobnicate", "unknown keyword"),
        ("qp a rc\npost[sim,!mlx5] a send wr=1", "applies on no device"),
        ("qp a rc\npost[rxe,!verbs] a send wr=1", "applies on no device"),
        ("qp a rc\npost[sim,] a send wr=1", "bad variant"),
        ("qp a rc\nexpect any-order {", "never closed"),
        ("qp a rc\nexpect any-order {\n}", "is empty"),
        ("qp a rc\n}", "without an open"),
        (
            "qp a rc\nexpect any-order {\nring a\n}",
            "only expect lines",
        ),
        (
            "qp a rc\nexpect any-order {\nexpect any-order {",
            "only expect lines",
        ),
        ("qp a rc\nexpect[rxe] any-order {", "not the block"),
        ("qp a rc\nstate a", "usage: state QP"),
        ("qp a rc\nstate a BROKEN", "unknown QP state"),
        ("qp a rc\nstate nope RTS", "not declared"),
        ("buf s 64\nfinal s:8 u64=1 repeat=2", "needs step="),
        ("buf s 64\nfinal s:8 u64=1+i", "repeat= of at least 2"),
        ("buf s 64\nfinal s:8 u64=1+i repeat=9 step=8", "outside"),
        ("buf s 64\nbuf t 64\nfinal s:8 copy=t+60 repeat=2 step=8", "outside"),
        ("buf s 64\nfinal s:4 u32=0xffffffff+i repeat=2 step=4", "does not fit in 32 bits"),
        ("buf s 8\nqp a rc\npost a send_imm wr=1 sge=s:8 imm=1+i", "repeat= of at least 2"),
        ("buf s 8\nqp a rc\npost a send_imm wr=1 sge=s:4 imm=1+j repeat=2", "bad number"),
        ("buf s 8\nqp a rc\npost a send_imm wr=1 sge=s:4 imm=1+ix2 repeat=2", "V+i*K"),
        (
            "buf s 64\nqp a rc\nqp b rc\nconnect a b\npost_recv b wr=1 sge=s:8 repeat=2 step=8\nexpect wr=1 SUCCESS RECV repeat=3",
            "wr=3 was not posted",
        ),
        ("qp a rc\nqp b uc\nconnect a b", "different types"),
        ("qp a rc\nconnect a a", "two different"),
        ("qp a rc\nconnect a nope", "not declared"),
        ("qp a rc\nqp b rc\nconnect a b rnr_retry=8", "0..=7"),
        ("buf s 8\nset s+4 u64=1", "outside"),
        ("buf s 8\nset s hex=abc", "even number"),
        ("buf s 8\nset s any", "only for final"),
        ("buf s 8\nbuf t 8\nfinal s copy=t", "give the length"),
        ("buf s 8\nbuf t 4\nfinal s copy=t:8", "outside"),
        (
            "srq s\nqp a rc srq=s\npost_recv a wr=1",
            "post its receives to the SRQ",
        ),
        ("", "no 'qp' line"),
        ("qp a rc", "no 'expect' or 'event' line"),
    ];
    for (text, want) in cases {
        let e = err(text);
        assert!(
            e.msg.contains(want),
            "input {text:?}: error {e} does not mention {want:?}"
        );
    }
}

#[test]
fn binary_garbage_does_not_panic() {
    for seed in 1u64..=200 {
        let mut bytes = [0u8; 96];
        Fill::Rand(seed).apply(&mut bytes);
        let text = String::from_utf8_lossy(&bytes).replace('\u{0}', "\n");
        let _ = parse("g.scn", "g", &text);
        let with_kw = format!("qp a rc\npost a {text}\nexpect {text}\nbuf {text}");
        let _ = parse("g.scn", "g", &with_kw);
    }
}

#[test]
fn variants_may_reuse_a_wr_id() {
    let text = "\
differs rxe reports the local error differently
buf s 8
qp a rc
qp b rc
connect a b
post[rxe] a send wr=1 sge=s:8 signaled
post[mlx5] a send wr=1 sge=s:4 signaled
ring a
expect[rxe] wr=1 LOC_QP_OP_ERR
expect[mlx5] wr=1 LOC_LEN_ERR
";
    let sc = parse("v.scn", "v", text).unwrap();
    assert_eq!(sc.differs.len(), 1);
    match &sc.steps.last().unwrap().kind {
        StepKind::Expect(g) => {
            assert_eq!(g.len(), 2);
            assert_eq!(g[0].variant.as_deref(), Some("rxe"));
        }
        k => panic!("{k:?}"),
    }
}

#[test]
fn numbers() {
    assert_eq!(parse_u64("1M").unwrap(), 1 << 20);
    assert_eq!(parse_u64("0x10").unwrap(), 16);
    assert_eq!(parse_u64("1_000").unwrap(), 1000);
    assert!(parse_u64("").is_err());
    assert!(parse_u64("-1").is_err());
    assert_eq!(parse_hex("0a0B").unwrap(), vec![0x0a, 0x0b]);
}
