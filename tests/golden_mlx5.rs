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

#[path = "golden_mlx5/layout.rs"]
mod layout;
