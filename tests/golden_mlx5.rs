//! The Rust mlx5 wire layer against the golden bytes that rdma-core's `mlx5dv.h` wrote
//! (`fixtures/mlx5/`, made by `gen.c`, regenerated and diffed by `regen.sh`).
//!
//! - `wqe.txt`: each case is encoded with `emit_send_wqe` into a ring filled with 0xa5 and
//!   compared with the golden ring byte for byte (so bytes the encoder must not touch are
//!   checked too); the golden ring is then parsed with `parse_send_wqe` and every field
//!   compared with the case's inputs.
//! - `cqe.txt`: each case is emitted with `CqeRepr::emit` into a 0xa5-filled CQ buffer and
//!   compared byte for byte; the golden bytes are decoded and compared with the case line.
//! - `recv.txt`: each receive / SRQ WQE is emitted into a 0xa5-filled slot and compared with
//!   the whole golden slot (units after the terminator must stay untouched), then decoded.
//! - `layout.txt`: every struct size, field offset and constant the header defines is checked
//!   against the Rust views' accessors and enums.
//!
//! The test knows the case table: a case in a file that is not in it, or missing from the
//! file, fails the test. No C is compiled at test time.

use std::collections::{BTreeMap, BTreeSet};

use rdma_direct::wire::{
    cqe64_offset, cqe_owner_for, cqe_sw_owned, emit_recv_wqe, emit_send_wqe, emit_srq_wqe,
    fm_ce_se, parse_recv_wqe, parse_send_wqe, parse_srq_wqe, AtomicSeg, Cqe64, CqeOpcode, CqeRepr,
    CtrlSeg, DataItem, DataSeg, DatagramSeg, ErrCqe, InlineSeg, Opcode, RaddrSeg, SendWqe,
    SrqNextSeg, Syndrome, UdAv, WqeSize, MLX5_AV_LEN, MLX5_SEND_WQE_BB,
};
use rdma_direct::wire::{Payload, Sge};

const WQE_CASES: &[&str] = &[
    "nop",
    "rdma_write",
    "rdma_write_imm",
    "send",
    "send_imm",
    "rdma_read",
    "atomic_cs",
    "atomic_fa",
    "ud_send",
    "ud_send_imm",
    "ud_send_inline_16",
    "write_inline_0",
    "write_inline_1",
    "write_inline_8",
    "write_inline_12",
    "write_inline_13",
    "write_inline_28",
    "write_inline_44",
    "write_inline_60",
    "write_inline_220",
    "send_inline_0",
    "send_inline_1",
    "send_inline_12",
    "send_inline_13",
    "send_inline_28",
    "send_inline_44",
    "send_inline_60",
    "send_inline_220",
    "send_imm_inline_8",
    "write_imm_inline_8",
    "send_sge_2",
    "send_sge_max",
    "write_sge_2",
    "write_sge_max",
    "read_sge_2",
    "read_sge_max",
    "send_sge_zero_length_skipped",
    "send_sge_0",
    "write_unsignaled",
    "write_fence",
    "write_small_fence",
    "send_solicited",
    "send_imm_solicited_unsignaled",
    "send_all_flags",
    "read_fence",
    "qpn_max",
    "idx_1",
    "idx_fffe",
    "idx_ffff",
    "idx_ffff_atomic_fa",
    "wrap_send_sge_max",
    "wrap_write_sge_5",
    "wrap_write_inline_44",
    "wrap_write_inline_220",
    "wrap_send_inline_60",
    "wrap_ud_send_sge_2",
    "ring_of_one",
];

const CQE_CASES: &[&str] = &[
    "req_rdma_write",
    "req_rdma_write_imm",
    "req_send",
    "req_send_imm",
    "req_rdma_read",
    "req_atomic_cs",
    "req_atomic_fa",
    "req_nop",
    "resp_wr_imm",
    "resp_send",
    "resp_send_imm",
    "resp_send_inv",
    "resize_cq",
    "no_packet",
    "sig_err",
    "invalid",
    "req_send_owner1",
    "resp_send_owner1",
    "resp_wr_imm_owner1",
    "req_write_lap2_owner0",
    "req_write_lap3_owner1",
    "req_write_ci_ffffffff",
    "invalid_owner1",
    "resp_send_ud_grh",
    "resp_send_imm_ud_solicited",
    "resp_send_scatter32",
    "resp_send_scatter64",
    "resp_send_srq",
    "cqe128_req_send",
    "cqe128_req_send_owner1",
    "cqe128_resp_send_imm",
    "cqe128_resp_wr_imm_owner1",
    "cqe128_req_err",
    "cqe128_resp_err_owner1",
    "cqe128_invalid",
    "req_err_local_length",
    "req_err_local_qp_op",
    "req_err_local_prot",
    "req_err_wr_flush",
    "req_err_mw_bind",
    "req_err_bad_resp",
    "req_err_local_access",
    "req_err_remote_inval_req",
    "req_err_remote_access",
    "req_err_remote_op",
    "req_err_transport_retry_exc",
    "req_err_rnr_retry_exc",
    "req_err_remote_aborted",
    "req_err_unknown_syndrome",
    "req_err_wr_flush_owner1",
    "resp_err_local_length",
    "resp_err_local_prot_srq",
    "resp_err_wr_flush_owner1",
];

const RECV_CASES: &[&str] = &[
    "recv_sge_1_max_1",
    "recv_sge_1_max_4",
    "recv_sge_2_max_4",
    "recv_sge_4_max_4",
    "recv_sge_0_max_2",
    "recv_sge_3_max_3",
    "recv_zero_length_skipped",
    "recv_sge_max",
    "srq_sge_1_max_1",
    "srq_sge_1_max_3",
    "srq_sge_0_max_1",
    "srq_sge_3_max_3",
    "srq_next_ffff",
];

fn fixture(name: &str) -> String {
    let path = format!("{}/fixtures/mlx5/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// One case of wqe.txt or cqe.txt: its inputs and its 16-byte units.
struct Case {
    name: String,
    kv: BTreeMap<String, String>,
    flags: BTreeSet<String>,
    units: Vec<(usize, [u8; 16])>,
}

impl Case {
    fn get(&self, k: &str) -> &str {
        self.kv
            .get(k)
            .unwrap_or_else(|| panic!("case {}: no {k}=", self.name))
    }
    fn num(&self, k: &str) -> u64 {
        parse_num(self.get(k)).unwrap_or_else(|| panic!("case {}: bad {k}", self.name))
    }
    fn opt(&self, k: &str) -> Option<u64> {
        self.kv.get(k).map(|_| self.num(k))
    }
}

fn parse_num(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

fn parse_cases(text: &str) -> Vec<Case> {
    let mut cases: Vec<Case> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("case ") {
            let mut words = rest.split_whitespace();
            let name = words.next().expect("case name").to_string();
            let mut kv = BTreeMap::new();
            let mut flags = BTreeSet::new();
            for w in words.filter(|w| *w != "=>") {
                match w.split_once('=') {
                    Some((k, v)) => {
                        assert!(
                            kv.insert(k.to_string(), v.to_string()).is_none(),
                            "{name}: {k} twice"
                        );
                    }
                    None => {
                        flags.insert(w.to_string());
                    }
                }
            }
            cases.push(Case {
                name,
                kv,
                flags,
                units: Vec::new(),
            });
            continue;
        }
        let mut words = line.split_whitespace();
        let off = usize::from_str_radix(words.next().unwrap(), 16)
            .unwrap_or_else(|e| panic!("line {}: offset: {e}", n + 1));
        let mut unit = [0u8; 16];
        for b in unit.iter_mut() {
            let w = words
                .next()
                .unwrap_or_else(|| panic!("line {}: short", n + 1));
            *b = u8::from_str_radix(w, 16).unwrap_or_else(|e| panic!("line {}: {e}", n + 1));
        }
        cases
            .last_mut()
            .unwrap_or_else(|| panic!("line {}: unit before any case", n + 1))
            .units
            .push((off, unit));
    }
    cases
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

fn opcode_named(name: &str) -> Opcode {
    (0..=255u8)
        .map(Opcode::from)
        .find(|o| !matches!(o, Opcode::Unknown(_)) && o.name() == name)
        .unwrap_or_else(|| panic!("unknown opcode name {name}"))
}

fn cqe_opcode_named(name: &str) -> CqeOpcode {
    (0..16u8)
        .map(CqeOpcode::from)
        .find(|o| !matches!(o, CqeOpcode::Unknown(_)) && o.name() == name)
        .unwrap_or_else(|| panic!("unknown CQE opcode name {name}"))
}

fn hex_bytes<const N: usize>(s: &str) -> [u8; N] {
    let s: String = s.chars().filter(|c| *c != ':').collect();
    assert_eq!(s.len(), 2 * N, "{s}");
    let mut out = [0u8; N];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
    }
    out
}

fn sges_of(c: &Case) -> Vec<Sge> {
    let s = c.get("sges");
    if s == "-" {
        return Vec::new();
    }
    s.split(',')
        .map(|t| {
            let p: Vec<u64> = t.split('/').map(|x| parse_num(x).unwrap()).collect();
            assert_eq!(p.len(), 3, "case {}: sge {t}", c.name);
            Sge {
                addr: p[0],
                length: p[1] as u32,
                lkey: p[2] as u32,
            }
        })
        .collect()
}

fn av_of(c: &Case) -> [u8; MLX5_AV_LEN] {
    let mut av = [0u8; MLX5_AV_LEN];
    let mut v = DatagramSeg::new_unchecked(&mut av[..]);
    v.set_qkey(c.num("qkey") as u32);
    v.set_dqp_dct(c.num("dqpn") as u32, c.num("ext") == 1);
    v.set_stat_rate_sl(c.num("stat_rate_sl") as u8);
    v.set_fl_mlid(c.num("fl_mlid") as u8);
    v.set_rlid(c.num("rlid") as u16);
    v.clear_reserved();
    v.set_rmac(hex_bytes(c.get("rmac")));
    v.set_tclass(c.num("tclass") as u8);
    v.set_hop_limit(c.num("hop_limit") as u8);
    v.set_grh_gid_fl(c.num("grh_gid_fl") as u32);
    v.set_rgid(hex_bytes(c.get("rgid")));
    av
}

#[test]
fn golden_wqes_match_byte_for_byte() {
    let cases = parse_cases(&fixture("wqe.txt"));
    check_case_names(&cases, WQE_CASES, "wqe.txt");
    for c in &cases {
        let name = &c.name;
        let opcode = opcode_named(c.get("opcode"));
        let wqe_cnt = c.num("wqe_cnt") as usize;
        let wqe_idx = c.num("wqe_idx") as u16;
        let ud = c.flags.contains("ud");
        let av = ud.then(|| av_of(c));
        let sges = if c.kv.contains_key("sges") {
            sges_of(c)
        } else {
            Vec::new()
        };
        let inline: Option<Vec<u8>> = c
            .opt("inline")
            .map(|n| (0..n).map(|i| (i + 1) as u8).collect());
        let raddr = c.opt("raddr").map(|r| (r, c.num("rkey") as u32));
        let atomic = c.opt("swap_add").map(|s| (s, c.num("compare")));
        let wqe = SendWqe {
            opcode,
            opmod: c.num("opmod") as u8,
            wqe_idx,
            qpn: c.num("qpn") as u32,
            fm_ce_se: c.num("fm_ce_se") as u8,
            imm: c.num("imm") as u32,
            raddr,
            atomic,
            ud: av.as_ref().map(|av| UdAv {
                av,
                qkey: c.num("qkey") as u32,
                dqpn: c.num("dqpn") as u32,
            }),
            data: match &inline {
                Some(b) => Payload::Inline(b),
                None => Payload::Sges(&sges),
            },
        };

        // Encode into a 0xa5 ring and compare the whole ring with the golden one.
        let mut golden = vec![0xa5u8; wqe_cnt * MLX5_SEND_WQE_BB];
        for (off, unit) in &c.units {
            golden[*off..*off + 16].copy_from_slice(unit);
        }
        let mut ring = vec![0xa5u8; wqe_cnt * MLX5_SEND_WQE_BB];
        let size = emit_send_wqe(&mut ring, &wqe).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = WqeSize {
            ds: c.num("ds") as u8,
            wqebbs: c.num("wqebbs") as u8,
        };
        assert_eq!(size, want, "{name}: size");
        assert_eq!(usize::from(size.ds), c.units.len(), "{name}: units listed");
        for (i, (a, b)) in ring.iter().zip(&golden).enumerate() {
            assert_eq!(
                a, b,
                "{name}: ring byte {i:#x}: rust {a:#04x}, mlx5dv.h {b:#04x}"
            );
        }
        // The first unit sits at the slot of wqe_idx.
        let slot_off = (usize::from(wqe_idx) % wqe_cnt) * MLX5_SEND_WQE_BB;
        assert_eq!(c.units[0].0, slot_off, "{name}");

        // Decode the golden ring and compare with the inputs.
        let p = parse_send_wqe(&golden, u32::from(wqe_idx), ud)
            .unwrap_or_else(|e| panic!("{name}: parse: {e}"));
        assert_eq!(p.opcode, opcode, "{name}");
        assert_eq!(p.wqe_idx, wqe_idx, "{name}");
        assert_eq!(p.qpn, wqe.qpn, "{name}");
        assert_eq!((p.ds, p.wqebbs), (want.ds, want.wqebbs), "{name}");
        assert_eq!(p.fm_ce_se, wqe.fm_ce_se, "{name}");
        assert_eq!(p.imm, wqe.imm, "{name}");
        assert_eq!((p.signature, p.dci_stream_channel_id), (0, 0), "{name}");
        assert_eq!(p.raddr, raddr, "{name}");
        assert_eq!(p.atomic, atomic, "{name}");
        assert_eq!(p.av, av, "{name}");
        if let Some(seg) = p.av_seg() {
            assert_eq!(seg.qkey() as u64, c.num("qkey"), "{name}");
            assert_eq!(seg.dqpn() as u64, c.num("dqpn"), "{name}");
            assert!(seg.extended(), "{name}");
            assert_eq!(seg.rlid() as u64, c.num("rlid"), "{name}");
            assert_eq!(seg.grh_gid_fl() as u64, c.num("grh_gid_fl"), "{name}");
            assert_eq!(seg.rgid(), hex_bytes::<16>(c.get("rgid")), "{name}");
        }
        let items: Vec<DataItem> = p.data_segs().collect();
        match &inline {
            Some(b) if b.is_empty() => assert!(items.is_empty(), "{name}"),
            Some(b) => {
                assert_eq!(items.len(), 1, "{name}");
                let DataItem::Inline(d) = items[0] else {
                    panic!("{name}: not inline");
                };
                assert_eq!(d.bytes().collect::<Vec<u8>>(), *b, "{name}");
                assert_eq!(p.data_len, b.len() as u64, "{name}");
            }
            None => {
                let want: Vec<DataItem> = sges
                    .iter()
                    .filter(|s| s.length != 0)
                    .map(|s| DataItem::Sge(*s))
                    .collect();
                assert_eq!(items, want, "{name}");
            }
        }
    }
}

fn cqe_repr_of(c: &Case) -> CqeRepr {
    let opcode = cqe_opcode_named(c.get("opcode"));
    let mut r = CqeRepr {
        opcode,
        owner: c.num("owner") == 1,
        se: c.num("se") == 1,
        format: c.num("format") as u8,
        s_wqe_opcode: c.num("s_wqe_opcode") as u8,
        qpn: c.num("qpn") as u32,
        wqe_counter: c.num("wqe_counter") as u16,
        signature: c.num("signature") as u8,
        srqn: c.num("srqn") as u32,
        ..CqeRepr::default()
    };
    if opcode.is_error() {
        r.syndrome = Syndrome::from(c.num("syndrome") as u8);
        r.vendor_syndrome = c.num("vendor_syndrome") as u8;
    } else {
        r.byte_cnt = c.num("byte_cnt") as u32;
        r.imm_inval_pkey = c.num("imm_inval_pkey") as u32;
        r.src_qp = c.num("src_qp") as u32;
        r.flags = c.num("flags") as u8;
        r.slid = c.num("slid") as u16;
        r.ml_path = c.num("ml_path") as u8;
        r.timestamp = c.num("timestamp");
    }
    r
}

#[test]
fn golden_cqes_match_byte_for_byte() {
    let cases = parse_cases(&fixture("cqe.txt"));
    check_case_names(&cases, CQE_CASES, "cqe.txt");
    for c in &cases {
        let name = &c.name;
        let cqe_size = c.num("cqe_size") as usize;
        let cqe_cnt = c.num("cqe_cnt") as u32;
        let index = c.num("index") as u32;
        let r = cqe_repr_of(c);
        assert_eq!(c.units.len(), 4, "{name}");

        let off = cqe64_offset(index, cqe_cnt, cqe_size);
        assert_eq!(off, c.units[0].0, "{name}: CQE offset");
        assert_eq!(
            r.owner,
            cqe_owner_for(index, cqe_cnt),
            "{name}: owner parity"
        );

        let len = cqe_cnt as usize * cqe_size;
        let mut golden = vec![0xa5u8; len];
        for (o, unit) in &c.units {
            golden[*o..*o + 16].copy_from_slice(unit);
        }
        let mut buf = vec![0xa5u8; len];
        r.emit(&mut Cqe64::new_unchecked(&mut buf[off..off + 64]))
            .unwrap();
        for (i, (a, b)) in buf.iter().zip(&golden).enumerate() {
            assert_eq!(
                a, b,
                "{name}: CQ byte {i:#x}: rust {a:#04x}, mlx5dv.h {b:#04x}"
            );
        }

        let cqe = Cqe64::new_checked(&golden[off..off + 64]).unwrap();
        assert_eq!(CqeRepr::parse(&cqe).unwrap(), r, "{name}: decode");
        assert_eq!(cqe.opcode(), r.opcode, "{name}");
        assert_eq!(cqe.owner(), r.owner, "{name}");
        assert_eq!(cqe.se(), r.se, "{name}");
        assert_eq!(cqe.format(), r.format, "{name}");
        assert_eq!(cqe.qpn(), r.qpn, "{name}");
        assert_eq!(cqe.wqe_counter(), r.wqe_counter, "{name}");
        if r.opcode.is_error() {
            let e = ErrCqe::new_checked(&golden[off..off + 64]).unwrap();
            assert_eq!(e.syndrome(), r.syndrome, "{name}");
            assert_eq!(e.vendor_err_synd(), r.vendor_syndrome, "{name}");
            assert_eq!(e.s_wqe_opcode(), r.s_wqe_opcode, "{name}");
        } else {
            assert_eq!(cqe.byte_cnt(), r.byte_cnt, "{name}");
            assert_eq!(cqe.imm_inval_pkey(), r.imm_inval_pkey, "{name}");
            assert_eq!(cqe.src_qp(), r.src_qp, "{name}");
        }
        // Ownership: software owns it at its own index, not one lap earlier or later;
        // an INVALID CQE never.
        let op_own = golden[off + 63];
        let owned = r.opcode != CqeOpcode::Invalid;
        assert_eq!(cqe_sw_owned(op_own, index, cqe_cnt), owned, "{name}");
        assert!(
            !cqe_sw_owned(op_own, index.wrapping_add(cqe_cnt), cqe_cnt),
            "{name}"
        );
        assert!(
            !cqe_sw_owned(op_own, index.wrapping_sub(cqe_cnt), cqe_cnt),
            "{name}"
        );
        assert_eq!(
            cqe_sw_owned(op_own, index.wrapping_add(2 * cqe_cnt), cqe_cnt),
            owned,
            "{name}"
        );
    }
}

#[test]
fn golden_receive_and_srq_wqes_match_byte_for_byte() {
    let cases = parse_cases(&fixture("recv.txt"));
    check_case_names(&cases, RECV_CASES, "recv.txt");
    for c in &cases {
        let name = &c.name;
        let stride = c.num("stride") as usize;
        let max_sge = c.num("max_sge") as usize;
        let sges = sges_of(c);
        assert_eq!(
            c.units.len() * 16,
            stride,
            "{name}: the whole slot is listed"
        );
        let mut golden = vec![0u8; stride];
        for (off, unit) in &c.units {
            golden[*off..*off + 16].copy_from_slice(unit);
        }
        let mut slot = vec![0xa5u8; stride];
        let want: Vec<Sge> = sges.iter().copied().filter(|s| s.length != 0).collect();
        let (n, back): (usize, Vec<Sge>) = match c.get("kind") {
            "recv" => {
                let n = emit_recv_wqe(&mut slot, &sges, max_sge)
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                (n, parse_recv_wqe(&golden, max_sge).unwrap().collect())
            }
            "srq" => {
                let next = c.num("next_wqe_index") as u16;
                let n = emit_srq_wqe(&mut slot, next, &sges, max_sge)
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                let (got_next, list) = parse_srq_wqe(&golden, max_sge).unwrap();
                assert_eq!(got_next, next, "{name}");
                (n, list.collect())
            }
            other => panic!("{name}: kind {other}"),
        };
        assert_eq!(n as u64, c.num("segs"), "{name}");
        for (i, (a, b)) in slot.iter().zip(&golden).enumerate() {
            assert_eq!(
                a, b,
                "{name}: slot byte {i:#x}: rust {a:#04x}, mlx5dv.h {b:#04x}"
            );
        }
        assert_eq!(back, want, "{name}: decode");
    }
}

/// Reads a field through the Rust accessor, widened to u128.
type Getter = fn(&[u8]) -> u128;

fn getter(structure: &str, member: &str) -> Option<Getter> {
    let g: Getter = match (structure, member) {
        ("mlx5_wqe_ctrl_seg", "opmod_idx_opcode") => |b| {
            let c = CtrlSeg::new_unchecked(b);
            (u128::from(c.opmod()) << 24)
                | (u128::from(c.wqe_idx()) << 8)
                | u128::from(u8::from(c.opcode()))
        },
        ("mlx5_wqe_ctrl_seg", "qpn_ds") => |b| {
            let c = CtrlSeg::new_unchecked(b);
            (u128::from(c.qpn()) << 8) | u128::from(c.ds())
        },
        ("mlx5_wqe_ctrl_seg", "signature") => |b| CtrlSeg::new_unchecked(b).signature().into(),
        ("mlx5_wqe_ctrl_seg", "dci_stream_channel_id") => {
            |b| CtrlSeg::new_unchecked(b).dci_stream_channel_id().into()
        }
        ("mlx5_wqe_ctrl_seg", "fm_ce_se") => |b| CtrlSeg::new_unchecked(b).fm_ce_se().into(),
        ("mlx5_wqe_ctrl_seg", "imm") => |b| CtrlSeg::new_unchecked(b).imm().into(),
        ("mlx5_wqe_raddr_seg", "raddr") => |b| RaddrSeg::new_unchecked(b).raddr().into(),
        ("mlx5_wqe_raddr_seg", "rkey") => |b| RaddrSeg::new_unchecked(b).rkey().into(),
        ("mlx5_wqe_raddr_seg", "reserved") => |b| RaddrSeg::new_unchecked(b).reserved().into(),
        ("mlx5_wqe_data_seg", "byte_count") => |b| DataSeg::new_unchecked(b).byte_count().into(),
        ("mlx5_wqe_data_seg", "lkey") => |b| DataSeg::new_unchecked(b).lkey().into(),
        ("mlx5_wqe_data_seg", "addr") => |b| DataSeg::new_unchecked(b).addr().into(),
        ("mlx5_wqe_inl_data_seg", "byte_count") => {
            |b| InlineSeg::new_unchecked(b).byte_count().into()
        }
        ("mlx5_wqe_atomic_seg", "swap_add") => |b| AtomicSeg::new_unchecked(b).swap_add().into(),
        ("mlx5_wqe_atomic_seg", "compare") => |b| AtomicSeg::new_unchecked(b).compare().into(),
        ("mlx5_wqe_srq_next_seg", "next_wqe_index") => {
            |b| SrqNextSeg::new_unchecked(b).next_wqe_index().into()
        }
        ("mlx5_wqe_srq_next_seg", "signature") => {
            |b| SrqNextSeg::new_unchecked(b).signature().into()
        }
        ("mlx5_wqe_av", "key.qkey.qkey") => |b| DatagramSeg::new_unchecked(b).qkey().into(),
        ("mlx5_wqe_av", "key.dc_key") => |b| DatagramSeg::new_unchecked(b).key().into(),
        ("mlx5_wqe_av", "dqp_dct") => |b| DatagramSeg::new_unchecked(b).dqp_dct().into(),
        ("mlx5_wqe_av", "stat_rate_sl") => |b| DatagramSeg::new_unchecked(b).stat_rate_sl().into(),
        ("mlx5_wqe_av", "fl_mlid") => |b| DatagramSeg::new_unchecked(b).fl_mlid().into(),
        ("mlx5_wqe_av", "rlid") => |b| DatagramSeg::new_unchecked(b).rlid().into(),
        ("mlx5_wqe_av", "reserved0") => |b| {
            // No getter: the bytes clear_reserved zeroes are the field.
            let mut c = b.to_vec();
            DatagramSeg::new_unchecked(&mut c[..]).clear_reserved();
            b.iter()
                .zip(&c)
                .filter(|(x, y)| x != y)
                .fold(0u128, |acc, (x, _)| (acc << 8) | u128::from(*x))
        },
        ("mlx5_wqe_av", "rmac") => |b| be_u128(&DatagramSeg::new_unchecked(b).rmac()),
        ("mlx5_wqe_av", "tclass") => |b| DatagramSeg::new_unchecked(b).tclass().into(),
        ("mlx5_wqe_av", "hop_limit") => |b| DatagramSeg::new_unchecked(b).hop_limit().into(),
        ("mlx5_wqe_av", "grh_gid_fl") => |b| DatagramSeg::new_unchecked(b).grh_gid_fl().into(),
        ("mlx5_wqe_av", "rgid") => |b| be_u128(&DatagramSeg::new_unchecked(b).rgid()),
        ("mlx5_cqe64", "wqe_id") => |b| Cqe64::new_unchecked(b).wqe_id().into(),
        ("mlx5_cqe64", "ml_path") => |b| Cqe64::new_unchecked(b).ml_path().into(),
        ("mlx5_cqe64", "slid") => |b| Cqe64::new_unchecked(b).slid().into(),
        ("mlx5_cqe64", "flags_rqpn") => |b| Cqe64::new_unchecked(b).flags_rqpn().into(),
        ("mlx5_cqe64", "srqn_uidx") => |b| Cqe64::new_unchecked(b).srqn_uidx().into(),
        ("mlx5_cqe64", "imm_inval_pkey") => |b| Cqe64::new_unchecked(b).imm_inval_pkey().into(),
        ("mlx5_cqe64", "byte_cnt") => |b| Cqe64::new_unchecked(b).byte_cnt().into(),
        ("mlx5_cqe64", "timestamp") => |b| Cqe64::new_unchecked(b).timestamp().into(),
        ("mlx5_cqe64", "sop_drop_qpn") => |b| {
            let c = Cqe64::new_unchecked(b);
            (u128::from(c.s_wqe_opcode()) << 24) | u128::from(c.qpn())
        },
        ("mlx5_cqe64", "wqe_counter") => |b| Cqe64::new_unchecked(b).wqe_counter().into(),
        ("mlx5_cqe64", "signature") => |b| Cqe64::new_unchecked(b).signature().into(),
        ("mlx5_cqe64", "op_own") => |b| Cqe64::new_unchecked(b).op_own().into(),
        ("mlx5_err_cqe", "srqn") => |b| ErrCqe::new_unchecked(b).srqn().into(),
        ("mlx5_err_cqe", "vendor_err_synd") => {
            |b| ErrCqe::new_unchecked(b).vendor_err_synd().into()
        }
        ("mlx5_err_cqe", "syndrome") => |b| u8::from(ErrCqe::new_unchecked(b).syndrome()).into(),
        ("mlx5_err_cqe", "s_wqe_opcode_qpn") => |b| {
            let c = ErrCqe::new_unchecked(b);
            (u128::from(c.s_wqe_opcode()) << 24) | u128::from(c.qpn())
        },
        ("mlx5_err_cqe", "wqe_counter") => |b| ErrCqe::new_unchecked(b).wqe_counter().into(),
        ("mlx5_err_cqe", "signature") => |b| ErrCqe::new_unchecked(b).signature().into(),
        ("mlx5_err_cqe", "op_own") => |b| ErrCqe::new_unchecked(b).op_own().into(),
        _ => return None,
    };
    Some(g)
}

fn be_u128(b: &[u8]) -> u128 {
    b.iter().fold(0, |acc, x| (acc << 8) | u128::from(*x))
}

fn rust_size(structure: &str) -> Option<usize> {
    Some(match structure {
        "mlx5_wqe_ctrl_seg" => CtrlSeg::<&[u8]>::LEN,
        "mlx5_wqe_raddr_seg" => RaddrSeg::<&[u8]>::LEN,
        "mlx5_wqe_data_seg" => DataSeg::<&[u8]>::LEN,
        "mlx5_wqe_inl_data_seg" => InlineSeg::<&[u8]>::LEN,
        "mlx5_wqe_atomic_seg" => AtomicSeg::<&[u8]>::LEN,
        "mlx5_wqe_srq_next_seg" => SrqNextSeg::<&[u8]>::LEN,
        "mlx5_wqe_av" => DatagramSeg::<&[u8]>::LEN,
        "mlx5_cqe64" => Cqe64::<&[u8]>::LEN,
        "mlx5_err_cqe" => ErrCqe::<&[u8]>::LEN,
        _ => return None,
    })
}

fn rust_const(name: &str) -> Option<u64> {
    let op = |o: Opcode| u64::from(u8::from(o));
    let cq = |o: CqeOpcode| u64::from(u8::from(o));
    let sy = |s: Syndrome| u64::from(u8::from(s));
    Some(match name {
        "MLX5_OPCODE_NOP" => op(Opcode::Nop),
        "MLX5_OPCODE_RDMA_WRITE" => op(Opcode::RdmaWrite),
        "MLX5_OPCODE_RDMA_WRITE_IMM" => op(Opcode::RdmaWriteImm),
        "MLX5_OPCODE_SEND" => op(Opcode::Send),
        "MLX5_OPCODE_SEND_IMM" => op(Opcode::SendImm),
        "MLX5_OPCODE_RDMA_READ" => op(Opcode::RdmaRead),
        "MLX5_OPCODE_ATOMIC_CS" => op(Opcode::AtomicCs),
        "MLX5_OPCODE_ATOMIC_FA" => op(Opcode::AtomicFa),
        "MLX5_CQE_REQ" => cq(CqeOpcode::Req),
        "MLX5_CQE_RESP_WR_IMM" => cq(CqeOpcode::RespWrImm),
        "MLX5_CQE_RESP_SEND" => cq(CqeOpcode::RespSend),
        "MLX5_CQE_RESP_SEND_IMM" => cq(CqeOpcode::RespSendImm),
        "MLX5_CQE_RESP_SEND_INV" => cq(CqeOpcode::RespSendInv),
        "MLX5_CQE_RESIZE_CQ" => cq(CqeOpcode::ResizeCq),
        "MLX5_CQE_NO_PACKET" => cq(CqeOpcode::NoPacket),
        "MLX5_CQE_SIG_ERR" => cq(CqeOpcode::SigErr),
        "MLX5_CQE_REQ_ERR" => cq(CqeOpcode::ReqErr),
        "MLX5_CQE_RESP_ERR" => cq(CqeOpcode::RespErr),
        "MLX5_CQE_INVALID" => cq(CqeOpcode::Invalid),
        "MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR" => sy(Syndrome::LocLen),
        "MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR" => sy(Syndrome::LocQpOp),
        "MLX5_CQE_SYNDROME_LOCAL_PROT_ERR" => sy(Syndrome::LocProt),
        "MLX5_CQE_SYNDROME_WR_FLUSH_ERR" => sy(Syndrome::WrFlush),
        "MLX5_CQE_SYNDROME_MW_BIND_ERR" => sy(Syndrome::MwBind),
        "MLX5_CQE_SYNDROME_BAD_RESP_ERR" => sy(Syndrome::BadResp),
        "MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR" => sy(Syndrome::LocAccess),
        "MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR" => sy(Syndrome::RemInvReq),
        "MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR" => sy(Syndrome::RemAccess),
        "MLX5_CQE_SYNDROME_REMOTE_OP_ERR" => sy(Syndrome::RemOp),
        "MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR" => sy(Syndrome::RetryExc),
        "MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR" => sy(Syndrome::RnrRetryExc),
        "MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR" => sy(Syndrome::RemAbort),
        // The request-flags map gives each bit alone.
        "MLX5_WQE_CTRL_CQ_UPDATE" => fm_ce_se::of(fm_ce_se::FLAG_SIGNALED).into(),
        "MLX5_WQE_CTRL_SOLICITED" => fm_ce_se::of(fm_ce_se::FLAG_SOLICITED).into(),
        "MLX5_WQE_CTRL_FENCE" => fm_ce_se::of(fm_ce_se::FLAG_FENCE).into(),
        "MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE" => {
            rdma_direct::wire::MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE.into()
        }
        // What the views write for these, not the names (wire_named checks those).
        "MLX5_INVALID_LKEY" => {
            let mut b = [0u8; 16];
            DataSeg::new_unchecked(&mut b).set_terminator();
            DataSeg::new_unchecked(&b).lkey().into()
        }
        "MLX5_EXTENDED_UD_AV" => {
            let mut b = [0u8; MLX5_AV_LEN];
            DatagramSeg::new_unchecked(&mut b).set_dqp_dct(0, true);
            DatagramSeg::new_unchecked(&b).dqp_dct().into()
        }
        "MLX5_INLINE_SEG" => {
            let mut b = [0u8; 4];
            InlineSeg::new_unchecked(&mut b).set_len(0);
            InlineSeg::new_unchecked(&b).byte_count().into()
        }
        "MLX5_SEND_WQE_BB" => {
            // The smallest ring the encoder takes is one WQEBB.
            let fits = |n: usize| {
                emit_send_wqe(&mut vec![0u8; n], &SendWqe::new(Opcode::Nop, 0, 0)).is_ok()
            };
            (1..=4096).find(|&n| fits(n)).unwrap() as u64
        }
        "MLX5_INLINE_SCATTER_32" => rdma_direct::wire::MLX5_INLINE_SCATTER_32.into(),
        "MLX5_INLINE_SCATTER_64" => rdma_direct::wire::MLX5_INLINE_SCATTER_64.into(),
        _ => return None,
    })
}

#[test]
fn layouts_and_constants_match_the_header() {
    let text = fixture("layout.txt");
    let (mut fields, mut sizes, mut consts) = (0, 0, 0);
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w[..] {
            ["size", s, n] => {
                let want: usize = n.parse().unwrap();
                let got = rust_size(s).unwrap_or_else(|| panic!("no Rust view for {s}"));
                assert_eq!(got, want, "sizeof {s}");
                sizes += 1;
            }
            ["field", s, m, off, size] => {
                let (off, size): (usize, usize) = (off.parse().unwrap(), size.parse().unwrap());
                let g = getter(s, m).unwrap_or_else(|| panic!("no Rust accessor for {s}.{m}"));
                let len = rust_size(s).unwrap();
                let ones = if size == 16 {
                    u128::MAX
                } else {
                    (1u128 << (8 * size)) - 1
                };
                // Only the field's bytes set: the accessor reads all ones.
                let mut b = vec![0u8; len];
                b[off..off + size].fill(0xff);
                assert_eq!(g(&b), ones, "{s}.{m} at {off}+{size}");
                // Everything but the field's bytes set: the accessor reads zero.
                let mut b = vec![0xffu8; len];
                b[off..off + size].fill(0);
                assert_eq!(g(&b), 0, "{s}.{m} at {off}+{size}");
                fields += 1;
            }
            ["const", name, v] => {
                let want = parse_num(v).unwrap();
                let got = rust_const(name).unwrap_or_else(|| panic!("no Rust value for {name}"));
                assert_eq!(got, want, "{name}");
                consts += 1;
            }
            _ => panic!("layout.txt: cannot read {line:?}"),
        }
    }
    assert_eq!((sizes, fields, consts), (9, 48, 42), "layout.txt entries");
}

/// The named constant of `rdma_direct::wire` with the header's name, as a number.
fn wire_named(name: &str) -> Option<u64> {
    use rdma_direct::wire as w;
    Some(match name {
        "MLX5_OPCODE_NOP" => w::MLX5_OPCODE_NOP.into(),
        "MLX5_OPCODE_RDMA_WRITE" => w::MLX5_OPCODE_RDMA_WRITE.into(),
        "MLX5_OPCODE_RDMA_WRITE_IMM" => w::MLX5_OPCODE_RDMA_WRITE_IMM.into(),
        "MLX5_OPCODE_SEND" => w::MLX5_OPCODE_SEND.into(),
        "MLX5_OPCODE_SEND_IMM" => w::MLX5_OPCODE_SEND_IMM.into(),
        "MLX5_OPCODE_RDMA_READ" => w::MLX5_OPCODE_RDMA_READ.into(),
        "MLX5_OPCODE_ATOMIC_CS" => w::MLX5_OPCODE_ATOMIC_CS.into(),
        "MLX5_OPCODE_ATOMIC_FA" => w::MLX5_OPCODE_ATOMIC_FA.into(),
        "MLX5_CQE_REQ" => w::MLX5_CQE_REQ.into(),
        "MLX5_CQE_RESP_WR_IMM" => w::MLX5_CQE_RESP_WR_IMM.into(),
        "MLX5_CQE_RESP_SEND" => w::MLX5_CQE_RESP_SEND.into(),
        "MLX5_CQE_RESP_SEND_IMM" => w::MLX5_CQE_RESP_SEND_IMM.into(),
        "MLX5_CQE_RESP_SEND_INV" => w::MLX5_CQE_RESP_SEND_INV.into(),
        "MLX5_CQE_RESIZE_CQ" => w::MLX5_CQE_RESIZE_CQ.into(),
        "MLX5_CQE_NO_PACKET" => w::MLX5_CQE_NO_PACKET.into(),
        "MLX5_CQE_SIG_ERR" => w::MLX5_CQE_SIG_ERR.into(),
        "MLX5_CQE_REQ_ERR" => w::MLX5_CQE_REQ_ERR.into(),
        "MLX5_CQE_RESP_ERR" => w::MLX5_CQE_RESP_ERR.into(),
        "MLX5_CQE_INVALID" => w::MLX5_CQE_INVALID.into(),
        "MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR" => w::MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR.into(),
        "MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR" => w::MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR.into(),
        "MLX5_CQE_SYNDROME_LOCAL_PROT_ERR" => w::MLX5_CQE_SYNDROME_LOCAL_PROT_ERR.into(),
        "MLX5_CQE_SYNDROME_WR_FLUSH_ERR" => w::MLX5_CQE_SYNDROME_WR_FLUSH_ERR.into(),
        "MLX5_CQE_SYNDROME_MW_BIND_ERR" => w::MLX5_CQE_SYNDROME_MW_BIND_ERR.into(),
        "MLX5_CQE_SYNDROME_BAD_RESP_ERR" => w::MLX5_CQE_SYNDROME_BAD_RESP_ERR.into(),
        "MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR" => w::MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR.into(),
        "MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR" => {
            w::MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR.into()
        }
        "MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR" => w::MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR.into(),
        "MLX5_CQE_SYNDROME_REMOTE_OP_ERR" => w::MLX5_CQE_SYNDROME_REMOTE_OP_ERR.into(),
        "MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR" => {
            w::MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR.into()
        }
        "MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR" => w::MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR.into(),
        "MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR" => w::MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR.into(),
        "MLX5_WQE_CTRL_CQ_UPDATE" => w::MLX5_WQE_CTRL_CQ_UPDATE.into(),
        "MLX5_WQE_CTRL_SOLICITED" => w::MLX5_WQE_CTRL_SOLICITED.into(),
        "MLX5_WQE_CTRL_FENCE" => w::MLX5_WQE_CTRL_FENCE.into(),
        "MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE" => w::MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE.into(),
        "MLX5_INVALID_LKEY" => w::MLX5_INVALID_LKEY.into(),
        "MLX5_EXTENDED_UD_AV" => w::MLX5_EXTENDED_UD_AV.into(),
        "MLX5_INLINE_SEG" => w::MLX5_INLINE_SEG.into(),
        "MLX5_SEND_WQE_BB" => w::MLX5_SEND_WQE_BB as u64,
        "MLX5_INLINE_SCATTER_32" => w::MLX5_INLINE_SCATTER_32.into(),
        "MLX5_INLINE_SCATTER_64" => w::MLX5_INLINE_SCATTER_64.into(),
        _ => return None,
    })
}

/// The `wire::offset` constant of a header field, where the wire layer names one.
fn wire_offset(s: &str, m: &str) -> Option<usize> {
    use rdma_direct::wire::offset::*;
    Some(match (s, m) {
        ("mlx5_wqe_ctrl_seg", "opmod_idx_opcode") => ctrl::OPMOD_IDX_OPCODE,
        ("mlx5_wqe_ctrl_seg", "qpn_ds") => ctrl::QPN_DS,
        ("mlx5_wqe_ctrl_seg", "signature") => ctrl::SIGNATURE,
        ("mlx5_wqe_ctrl_seg", "dci_stream_channel_id") => ctrl::DCI_STREAM_CHANNEL_ID,
        ("mlx5_wqe_ctrl_seg", "fm_ce_se") => ctrl::FM_CE_SE,
        ("mlx5_wqe_ctrl_seg", "imm") => ctrl::IMM,
        ("mlx5_wqe_raddr_seg", "raddr") => raddr::RADDR,
        ("mlx5_wqe_raddr_seg", "rkey") => raddr::RKEY,
        ("mlx5_wqe_raddr_seg", "reserved") => raddr::RESERVED,
        ("mlx5_wqe_data_seg", "byte_count") => data::BYTE_COUNT,
        ("mlx5_wqe_data_seg", "lkey") => data::LKEY,
        ("mlx5_wqe_data_seg", "addr") => data::ADDR,
        ("mlx5_wqe_inl_data_seg", "byte_count") => inline::BYTE_COUNT,
        ("mlx5_wqe_atomic_seg", "swap_add") => atomic::SWAP_ADD,
        ("mlx5_wqe_atomic_seg", "compare") => atomic::COMPARE,
        ("mlx5_wqe_srq_next_seg", "next_wqe_index") => srq_next::NEXT_WQE_INDEX,
        ("mlx5_wqe_srq_next_seg", "signature") => srq_next::SIGNATURE,
        ("mlx5_wqe_av", "key.qkey.qkey") => av::QKEY,
        ("mlx5_wqe_av", "key.dc_key") => av::KEY,
        ("mlx5_wqe_av", "dqp_dct") => av::DQP_DCT,
        ("mlx5_wqe_av", "stat_rate_sl") => av::STAT_RATE_SL,
        ("mlx5_wqe_av", "fl_mlid") => av::FL_MLID,
        ("mlx5_wqe_av", "rlid") => av::RLID,
        ("mlx5_wqe_av", "reserved0") => av::RESERVED0,
        ("mlx5_wqe_av", "rmac") => av::RMAC,
        ("mlx5_wqe_av", "tclass") => av::TCLASS,
        ("mlx5_wqe_av", "hop_limit") => av::HOP_LIMIT,
        ("mlx5_wqe_av", "grh_gid_fl") => av::GRH_GID_FL,
        ("mlx5_wqe_av", "rgid") => av::RGID,
        ("mlx5_cqe64", "wqe_id") => cqe64::WQE_ID,
        ("mlx5_cqe64", "ml_path") => cqe64::ML_PATH,
        ("mlx5_cqe64", "slid") => cqe64::SLID,
        ("mlx5_cqe64", "flags_rqpn") => cqe64::FLAGS_RQPN,
        ("mlx5_cqe64", "srqn_uidx") => cqe64::SRQN_UIDX,
        ("mlx5_cqe64", "imm_inval_pkey") => cqe64::IMM_INVAL_PKEY,
        ("mlx5_cqe64", "byte_cnt") => cqe64::BYTE_CNT,
        ("mlx5_cqe64", "timestamp") => cqe64::TIMESTAMP,
        ("mlx5_cqe64", "sop_drop_qpn") => cqe64::SOP_DROP_QPN,
        ("mlx5_cqe64", "wqe_counter") => cqe64::WQE_COUNTER,
        ("mlx5_cqe64", "signature") => cqe64::SIGNATURE,
        ("mlx5_cqe64", "op_own") => cqe64::OP_OWN,
        ("mlx5_err_cqe", "srqn") => err_cqe::SRQN,
        ("mlx5_err_cqe", "vendor_err_synd") => err_cqe::VENDOR_ERR_SYND,
        ("mlx5_err_cqe", "syndrome") => err_cqe::SYNDROME,
        ("mlx5_err_cqe", "s_wqe_opcode_qpn") => err_cqe::S_WQE_OPCODE_QPN,
        // The error CQE's tail is the CQE's tail.
        ("mlx5_err_cqe", "wqe_counter") => cqe64::WQE_COUNTER,
        ("mlx5_err_cqe", "signature") => cqe64::SIGNATURE,
        ("mlx5_err_cqe", "op_own") => cqe64::OP_OWN,
        _ => return None,
    })
}

#[test]
fn named_constants_and_offsets_match_the_header() {
    let text = fixture("layout.txt");
    let (mut offsets, mut consts) = (0, 0);
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w[..] {
            ["field", s, m, off, _] => {
                // Every field the header has is in the wire layer's one table of offsets,
                // which the views derive their byte ranges from.
                let got =
                    wire_offset(s, m).unwrap_or_else(|| panic!("no wire::offset for {s}.{m}"));
                assert_eq!(got, off.parse::<usize>().unwrap(), "offset of {s}.{m}");
                offsets += 1;
            }
            ["const", name, v] => {
                let got = wire_named(name).unwrap_or_else(|| panic!("no wire::{name}"));
                assert_eq!(got, parse_num(v).unwrap(), "{name}");
                consts += 1;
            }
            _ => {}
        }
    }
    assert_eq!((offsets, consts), (48, 42), "layout.txt entries checked");
}
