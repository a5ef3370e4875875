//! Device time and the CQ arm doorbell against the golden files that rdma-core's headers
//! wrote (`fixtures/mlx5/`, made by `gen.c`, regenerated and diffed by `regen.sh`).
//!
//! - `clock.txt`: every conversion case is converted by `ClockInfo::ts_to_ns` and compared
//!   bit for bit with what the header's `mlx5dv_ts_to_ns` returned, branch included; the
//!   layout lines pin `clock::page` and `ClockInfo` to `struct mlx5_ib_clock_info` /
//!   `struct mlx5dv_clock_info`, the constant lines to the values used here.
//! - `cqe_ts.txt`: each CQE with a timestamp is emitted with `CqeRepr::emit` into a
//!   0xa5-filled CQ buffer and compared byte for byte, then decoded; the timestamp is also
//!   read straight from bytes 48..56 (big-endian) and, for the real-time case, decoded.
//! - `arm.txt`: the doorbell record and UAR bytes of `mlx5_arm_cq`, against the arm
//!   computation below (the one the mlx5 provider must implement).
//!
//! The test knows the case table of each file: a case not listed, or a listed case missing,
//! fails it. No C is compiled at test time.

use std::collections::{BTreeMap, BTreeSet};

use rdma_direct::clock::{self, ClockInfo, RealTime};
use rdma_direct::providers::mlx5::{arm_doorbell, CqArm};
use rdma_direct::wire::{cqe64_offset, Cqe64, CqeOpcode, CqeRepr};

const CLOCK_CASES: &[&str] = &[
    "same_cycle",
    "one_cycle_later",
    "one_second_later_156mhz",
    "one_second_later_1ghz",
    "ten_minutes_later_1ghz",
    "one_cycle_older",
    "one_ms_older_156mhz",
    "wrapped_counter",
    "older_across_wrap",
    "ts_bits_above_mask",
    "half_mask_ahead_is_new",
    "half_mask_plus_one_ahead_is_old",
    "product_overflows_64_bits",
    "mask_64_bits",
    "old_frac_above_product",
    "shift_0",
    "mask_0",
    "nsec_wraps",
];

const CQE_TS_CASES: &[&str] = &[
    "ts_req_send",
    "ts_req_rdma_write_owner1",
    "ts_resp_send",
    "ts_resp_send_imm_real_time",
    "ts_cqe128_resp_wr_imm_owner1",
    "ts_req_rdma_read_all_ones",
];

const ARM_CASES: &[&str] = &[
    "arm_any_sn0_ci0",
    "arm_sol_sn0_ci0",
    "arm_any_sn1",
    "arm_sol_sn2",
    "arm_any_sn3_ci_ffffff_cqn_ffffff",
    "arm_sol_sn3_ci_ffffff_cqn_ffffff",
    "arm_any_sn4_wraps_ci_1000000_wraps",
    "arm_sol_sn5_ci_fffffffe",
    "arm_any_sn_ffffffff",
];

/// `MLX5_CQ_DOORBELL`: the CQ doorbell's offset in the UAR page.
const CQ_DOORBELL: usize = rdma_direct::wire::MLX5_CQ_DOORBELL;

/// What the mlx5 provider's `CqArm::arm` stores: the doorbell record (pre-filled with 0xa5)
/// and the 8 bytes at `uar + 0x20` of a 0xa5-filled UAR stub, byte for byte.
fn arm_bytes(arm_sn: u32, cons_index: u32, cqn: u32, solicited: bool) -> ([u8; 8], [u8; 8]) {
    #[repr(C, align(64))]
    struct Mem([u8; 64]);
    let mut dbrec = Mem([0xa5; 64]);
    let mut uar = Mem([0xa5; 64]);
    // SAFETY: both buffers are live, aligned and larger than what the arm writes.
    let mut arm = unsafe { CqArm::new(cqn, dbrec.0.as_mut_ptr().cast(), uar.0.as_mut_ptr()) };
    // Only the low two bits of the event count reach the doorbell (sn = arm_sn & 3), so
    // counting arm_sn & 3 events gives the same bytes without billions of calls.
    assert_eq!(arm.arm_sn(), 0, "a new CQ has received no event");
    for _ in 0..(arm_sn & 3) {
        arm.event_received();
    }
    assert_eq!(arm.arm_sn(), arm_sn & 3, "each event taken counts once");
    arm.arm(cons_index, solicited);
    let mut d = [0u8; 8];
    d.copy_from_slice(&dbrec.0[..8]);
    let mut u = [0u8; 8];
    u.copy_from_slice(&uar.0[CQ_DOORBELL..CQ_DOORBELL + 8]);
    assert!(uar.0[..CQ_DOORBELL].iter().all(|&b| b == 0xa5));
    (d, u)
}

fn fixture(name: &str) -> String {
    let path = format!("{}/fixtures/mlx5/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn parse_num(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// A `case` line's name and `key=value` pairs, and the lines under it.
struct Case {
    name: String,
    kv: BTreeMap<String, String>,
    lines: Vec<String>,
}

impl Case {
    fn num(&self, k: &str) -> u64 {
        let v = self
            .kv
            .get(k)
            .unwrap_or_else(|| panic!("case {}: no {k}=", self.name));
        parse_num(v).unwrap_or_else(|| panic!("case {}: bad {k}={v}", self.name))
    }
    fn get(&self, k: &str) -> &str {
        self.kv
            .get(k)
            .unwrap_or_else(|| panic!("case {}: no {k}=", self.name))
    }
}

/// The cases of a file, and its other non-comment lines (layout and constants).
fn parse(text: &str) -> (Vec<Case>, Vec<String>) {
    let mut cases: Vec<Case> = Vec::new();
    let mut other = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("case ") {
            let mut words = rest.split_whitespace();
            let name = words.next().expect("case name").to_string();
            let mut kv = BTreeMap::new();
            for w in words.filter(|w| *w != "=>") {
                let (k, v) = w
                    .split_once('=')
                    .unwrap_or_else(|| panic!("{name}: {w} is not key=value"));
                assert!(
                    kv.insert(k.to_string(), v.to_string()).is_none(),
                    "{name}: {k} twice"
                );
            }
            cases.push(Case {
                name,
                kv,
                lines: Vec::new(),
            });
        } else if line.starts_with(' ') {
            cases
                .last_mut()
                .expect("indented line before any case")
                .lines
                .push(line.trim().to_string());
        } else {
            other.push(line.to_string());
        }
    }
    (cases, other)
}

fn check_case_names(cases: &[Case], known: &[&str], file: &str) {
    let in_file: BTreeSet<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(in_file.len(), cases.len(), "{file}: a case name repeats");
    let known: BTreeSet<&str> = known.iter().copied().collect();
    let unknown: Vec<_> = in_file.difference(&known).collect();
    let missing: Vec<_> = known.difference(&in_file).collect();
    assert!(
        unknown.is_empty(),
        "{file}: cases the test does not know: {unknown:?}"
    );
    assert!(
        missing.is_empty(),
        "{file}: cases missing from the file: {missing:?}"
    );
}

/// Hex bytes after `skip` leading words of a line.
fn bytes_of(line: &str, skip: usize, n: usize) -> Vec<u8> {
    line.split_whitespace()
        .skip(skip)
        .take(n)
        .map(|w| u8::from_str_radix(w, 16).unwrap_or_else(|e| panic!("{line}: {e}")))
        .collect()
}

#[test]
fn ts_to_ns_matches_mlx5dv_ts_to_ns_bit_for_bit() {
    let (cases, _) = parse(&fixture("clock.txt"));
    check_case_names(&cases, CLOCK_CASES, "clock.txt");
    for c in &cases {
        let info = ClockInfo {
            nsec: c.num("nsec"),
            last_cycles: c.num("last_cycles"),
            frac: c.num("frac"),
            mult: c.num("mult") as u32,
            shift: c.num("shift") as u32,
            mask: c.num("mask"),
        };
        let ts = c.num("ts");
        let name = &c.name;
        assert_eq!(
            info.ts_to_ns(ts),
            c.num("ns"),
            "{name}: rust {:#x}, mlx5dv_ts_to_ns {:#x}",
            info.ts_to_ns(ts),
            c.num("ns")
        );
        assert_eq!(info.is_older(ts), c.num("old") == 1, "{name}: branch");
        // Where no step wraps, the checked conversion agrees; where one does, it refuses.
        if let Some(ns) = info.ts_to_ns_checked(ts) {
            assert_eq!(ns, c.num("ns"), "{name}: checked");
        }
    }
    // The cases whose C arithmetic wraps are refused by the checked conversion.
    for name in [
        "product_overflows_64_bits",
        "old_frac_above_product",
        "nsec_wraps",
    ] {
        let c = cases.iter().find(|c| c.name == name).unwrap();
        let info = ClockInfo {
            nsec: c.num("nsec"),
            last_cycles: c.num("last_cycles"),
            frac: c.num("frac"),
            mult: c.num("mult") as u32,
            shift: c.num("shift") as u32,
            mask: c.num("mask"),
        };
        assert_eq!(info.ts_to_ns_checked(c.num("ts")), None, "{name}");
    }
}

#[test]
fn clock_layouts_and_constants_match_the_headers() {
    let (_, lines) = parse(&fixture("clock.txt"));
    let info = ClockInfo::default();
    let mut seen = BTreeSet::new();
    for line in &lines {
        let w: Vec<&str> = line.split_whitespace().collect();
        let n = |i: usize| parse_num(w[i]).unwrap_or_else(|| panic!("{line}"));
        match (w[0], w[1]) {
            ("size", "mlx5dv_clock_info") => assert_eq!(n(2), 40),
            ("size", "mlx5_ib_clock_info") => assert_eq!(n(2) as usize, clock::page::LEN),
            ("field", "mlx5dv_clock_info") => {
                // The Rust struct has the header's fields under the header's names, with the
                // header's widths (its own layout is not C's: it is a value, not a mirror).
                let width = match w[2] {
                    "nsec" => std::mem::size_of_val(&info.nsec),
                    "last_cycles" => std::mem::size_of_val(&info.last_cycles),
                    "frac" => std::mem::size_of_val(&info.frac),
                    "mult" => std::mem::size_of_val(&info.mult),
                    "shift" => std::mem::size_of_val(&info.shift),
                    "mask" => std::mem::size_of_val(&info.mask),
                    other => panic!("mlx5dv_clock_info.{other} unknown"),
                };
                assert_eq!(n(4) as usize, width, "{line}");
            }
            ("field", "mlx5_ib_clock_info") => {
                let (off, width) = match w[2] {
                    "sign" => (clock::page::SIGN, 4),
                    "resv" => (clock::page::RESV, 4),
                    "nsec" => (clock::page::NSEC, 8),
                    "cycles" => (clock::page::CYCLES, 8),
                    "frac" => (clock::page::FRAC, 8),
                    "mult" => (clock::page::MULT, 4),
                    "shift" => (clock::page::SHIFT, 4),
                    "mask" => (clock::page::MASK, 8),
                    "overflow_period" => (clock::page::OVERFLOW_PERIOD, 8),
                    other => panic!("mlx5_ib_clock_info.{other} unknown"),
                };
                assert_eq!((n(3) as usize, n(4) as usize), (off, width), "{line}");
            }
            ("field", "mlx5_cqe64") => {
                assert_eq!(w[2], "timestamp");
                assert_eq!((n(3), n(4)), (48, 8), "{line}");
            }
            ("const", name) => {
                let want: u64 = match name {
                    "MLX5_IB_CLOCK_INFO_KERNEL_UPDATING" => {
                        u64::from(clock::CLOCK_INFO_KERNEL_UPDATING)
                    }
                    "MLX5_CQ_DOORBELL" => CQ_DOORBELL as u64,
                    "MLX5_CQ_DB_REQ_NOT_SOL" => {
                        u64::from(rdma_direct::wire::MLX5_CQ_DB_REQ_NOT_SOL)
                    }
                    "MLX5_CQ_DB_REQ_NOT" => u64::from(rdma_direct::wire::MLX5_CQ_DB_REQ_NOT),
                    // For the next step's control path (mmap of the page, capability bits,
                    // CQ creation flags); pinned here so the values are checked once.
                    "MLX5_IB_MMAP_CLOCK_INFO" => 7,
                    "MLX5_IB_CLOCK_INFO_V1" => 0,
                    "MLX5_IB_MMAP_CORE_CLOCK" => 5,
                    "MLX5DV_CONTEXT_FLAGS_REAL_TIME_TS" => 1 << 7,
                    "MLX5DV_CONTEXT_MASK_CLOCK_INFO_UPDATE" => 1 << 5,
                    "MLX5DV_CONTEXT_MASK_HCA_CORE_CLOCK" => 1 << 8,
                    "IBV_WC_EX_WITH_COMPLETION_TIMESTAMP" => 1 << 7,
                    "IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK" => 1 << 11,
                    "IBV_VALUES_MASK_RAW_CLOCK" => 1,
                    other => panic!("constant {other} unknown to the test"),
                };
                assert_eq!(n(2), want, "{line}");
            }
            _ => panic!("clock.txt: line not understood: {line}"),
        }
        assert!(seen.insert(line.clone()), "{line} twice");
    }
    assert_eq!(seen.len(), 31, "clock.txt: layout and constant lines");
}

#[test]
fn timestamp_cqes_match_byte_for_byte() {
    let (cases, _) = parse(&fixture("cqe_ts.txt"));
    check_case_names(&cases, CQE_TS_CASES, "cqe_ts.txt");
    for c in &cases {
        let name = &c.name;
        let opcode = (0..16u8)
            .map(CqeOpcode::from)
            .find(|o| !matches!(o, CqeOpcode::Unknown(_)) && o.name() == c.get("opcode"))
            .unwrap_or_else(|| panic!("{name}: opcode"));
        assert!(!opcode.is_error(), "{name}");
        let r = CqeRepr {
            opcode,
            owner: c.num("owner") == 1,
            se: c.num("se") == 1,
            format: c.num("format") as u8,
            s_wqe_opcode: c.num("s_wqe_opcode") as u8,
            qpn: c.num("qpn") as u32,
            wqe_counter: c.num("wqe_counter") as u16,
            signature: c.num("signature") as u8,
            srqn: c.num("srqn") as u32,
            byte_cnt: c.num("byte_cnt") as u32,
            imm_inval_pkey: c.num("imm_inval_pkey") as u32,
            src_qp: c.num("src_qp") as u32,
            flags: c.num("flags") as u8,
            slid: c.num("slid") as u16,
            ml_path: c.num("ml_path") as u8,
            timestamp: c.num("timestamp"),
            ..CqeRepr::default()
        };
        let cqe_size = c.num("cqe_size") as usize;
        let cqe_cnt = c.num("cqe_cnt") as u32;
        let off = cqe64_offset(c.num("index") as u32, cqe_cnt, cqe_size);
        let len = cqe_cnt as usize * cqe_size;
        let mut golden = vec![0xa5u8; len];
        assert_eq!(c.lines.len(), 4, "{name}");
        for line in &c.lines {
            let o = usize::from_str_radix(line.split_whitespace().next().unwrap(), 16).unwrap();
            golden[o..o + 16].copy_from_slice(&bytes_of(line, 1, 16));
        }
        let mut buf = vec![0xa5u8; len];
        r.emit(&mut Cqe64::new_unchecked(&mut buf[off..off + 64]))
            .unwrap();
        assert_eq!(buf, golden, "{name}: emitted CQ buffer");

        let cqe = Cqe64::new_checked(&golden[off..off + 64]).unwrap();
        assert_eq!(CqeRepr::parse(&cqe).unwrap(), r, "{name}: decode");
        let raw = u64::from_be_bytes(golden[off + 48..off + 56].try_into().unwrap());
        assert_eq!(raw, r.timestamp, "{name}: bytes 48..56 big-endian");
        assert_eq!(cqe.timestamp(), raw, "{name}: accessor");
        if name.ends_with("_real_time") {
            let t = RealTime::from_raw(raw);
            assert!(t.is_normalized(), "{name}");
            assert_eq!(
                (t.secs, t.nanos),
                ((raw >> 32) as u32, 999_999_999),
                "{name}"
            );
            assert_eq!(clock::real_time_to_ns(raw), t.as_ns(), "{name}");
        }
    }
}

#[test]
fn arm_doorbell_matches_mlx5_arm_cq() {
    let (cases, _) = parse(&fixture("arm.txt"));
    check_case_names(&cases, ARM_CASES, "arm.txt");
    for c in &cases {
        let name = &c.name;
        let solicited = c.num("solicited") == 1;
        let (rec_bytes, uar_bytes) = arm_bytes(
            c.num("arm_sn") as u32,
            c.num("cons_index") as u32,
            c.num("cqn") as u32,
            solicited,
        );
        let (word, db) = arm_doorbell(
            c.num("arm_sn") as u32,
            c.num("cons_index") as u32,
            c.num("cqn") as u32,
            solicited,
        );
        assert_eq!(u64::from(word), c.num("dbrec_arm"), "{name}: dbrec[1]");
        assert_eq!(db, c.num("doorbell"), "{name}: doorbell");
        assert_eq!(u64::from(word >> 28), c.num("sn"), "{name}: sn");
        assert_eq!(u64::from(word & (1 << 24)), c.num("cmd"), "{name}: cmd");
        assert_eq!(u64::from(word & 0xff_ffff), c.num("ci"), "{name}: ci");

        assert_eq!(c.lines.len(), 2, "{name}");
        let rec = &c.lines[0];
        assert!(rec.starts_with("dbrec "), "{name}: {rec}");
        let mut want = vec![0xa5u8; 4];
        want.extend_from_slice(&word.to_be_bytes());
        assert_eq!(bytes_of(rec, 1, 8), want, "{name}: doorbell record bytes");
        assert_eq!(rec_bytes.to_vec(), want, "{name}: CqArm's doorbell record");
        let uar = &c.lines[1];
        assert_eq!(
            uar.split_whitespace().next(),
            Some(format!("uar+{CQ_DOORBELL:04x}").as_str()),
            "{name}"
        );
        assert_eq!(
            bytes_of(uar, 1, 8),
            db.to_be_bytes().to_vec(),
            "{name}: UAR doorbell bytes"
        );
        assert_eq!(
            uar_bytes.to_vec(),
            db.to_be_bytes().to_vec(),
            "{name}: CqArm's UAR bytes"
        );
    }
}
