//! Every mlx5 layout fact has one source, `src/core/wire/`: no provider, no part of the software
//! device, no bench rig and no tool defines its own copy of an opcode, syndrome, flag bit,
//! `MLX5_INVALID_LKEY` or CQE field offset, and `src/core/wire/` itself imports nothing from the
//! crate above it.
//!
//! The scan reads the source text (unit-test modules, after `#[cfg(test)]`, are skipped: a
//! byte-for-byte assertion spells offsets out on purpose) and flags:
//!
//! - a `const` with a literal value whose name is mlx5 layout vocabulary (`MLX5_*`, opcodes,
//!   syndromes, `fm_ce_se` / `op_own` bits, segment sizes), or any literal `const` inside a
//!   module named like a table of them (`op`, `wqe_op`, `cqe_op`, `syndrome`, `fm_ce_se`);
//! - in a file about CQEs, a field read or written at a literal offset (`be32_at(cqe, 56)`,
//!   `cqe.add(63)`, `b[56..60]`, `c.0[55]`, ...);
//! - an lkey compared with the literal `0x100`.

use std::path::{Path, PathBuf};

/// Files that still hold a copy, each with the reason. Remove an entry when its file moves to
/// the `wire` names; the test fails when an entry no longer has anything to allow.
const ALLOWED: &[(&str, &str)] = &[];

/// Directories scanned, relative to the crate root.
const ROOTS: &[&str] = &["providers", "benches", "src/bin", "examples"];

/// Words that make a constant's name mlx5 layout vocabulary.
const VOCABULARY: &[&str] = &[
    "MLX5",
    "OPCODE",
    "SYNDROME",
    "INVALID_LKEY",
    "INLINE_SEG",
    "INLINE_SCATTER",
    "CQ_UPDATE",
    "SOLICITED",
    "FENCE",
    "OWNER",
    "WQEBB",
    "WQE_BB",
    "CQE",
    "DBR",
    "RDMA_WRITE",
    "RDMA_READ",
    "ATOMIC_CS",
    "ATOMIC_FA",
    "SEND_IMM",
    "RESP_SEND",
    "RESP_WR_IMM",
    "REQ_ERR",
    "RESP_ERR",
    "LOC_LEN",
    "LOC_QP_OP",
    "LOC_PROT",
    "WR_FLUSH",
    "REM_ACCESS",
    "RETRY_EXC",
    "FLAGS_GRH",
    "EXTENDED_UD_AV",
    "BF_OFFSET",
    "BF_SIZE",
];

/// Module names that hold tables of layout numbers.
const TABLE_MODULES: &[&str] = &["op", "wqe_op", "cqe_op", "syndrome", "fm_ce_se", "opcode"];

/// Byte offsets of `struct mlx5_cqe64` / `mlx5_err_cqe` fields that hot code reads.
const CQE_OFFSETS: &[&str] = &[
    "24", "32", "36", "44", "48", "52", "54", "55", "56", "60", "62", "63",
];

/// Byte ranges / indices of those fields as slice indexing spells them.
const CQE_RANGES: &[&str] = &[
    "[24..28]", "[32..36]", "[36..40]", "[44..48]", "[48..56]", "[56..60]", "[60..62]", "[52]",
    "[54]", "[55]", "[56]", "[62]", "[63]",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a line: without its `//` comment, trimmed.
fn code(line: &str) -> &str {
    line.split("//").next().unwrap_or("").trim()
}

fn is_literal(v: &str) -> bool {
    let v = v.trim().trim_end_matches(';').trim();
    let v = v.split(" as ").next().unwrap_or(v).trim();
    let first = v.chars().next();
    first.is_some_and(|c| c.is_ascii_digit())
        || (v.starts_with('(') && v[1..].chars().next().is_some_and(|c| c.is_ascii_digit()))
}

/// `const NAME: TYPE = VALUE` → (NAME, VALUE).
fn const_def(line: &str) -> Option<(&str, &str)> {
    let at = line.find("const ")?;
    let before = line[..at].trim();
    if !(before.is_empty() || before == "pub" || before.starts_with("pub(")) {
        return None;
    }
    let rest = &line[at + 6..];
    let (name, rest) = rest.split_once(':')?;
    let (_, value) = rest.split_once('=')?;
    Some((name.trim(), value))
}

/// The module a `mod NAME {` line opens.
fn mod_open(line: &str) -> Option<&str> {
    let at = line.find("mod ")?;
    let before = line[..at].trim();
    if !(before.is_empty() || before == "pub" || before.starts_with("pub(")) {
        return None;
    }
    let rest = line[at + 4..].trim();
    let name = rest.strip_suffix('{')?.trim();
    Some(name)
}

/// Copies of layout facts in one file's text: (line number, reason).
fn findings(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mentions_cqe = text.to_ascii_lowercase().contains("cqe");
    // Stack of (module name, brace depth at which it opened).
    let mut mods: Vec<(String, i64)> = Vec::new();
    let mut depth: i64 = 0;
    for (i, raw) in text.lines().enumerate() {
        let line = code(raw);
        if line.starts_with("#[cfg(test)]") {
            break;
        }
        if let Some(m) = mod_open(line) {
            mods.push((m.to_string(), depth));
        }
        if let Some((name, value)) = const_def(line) {
            let in_table = mods
                .last()
                .is_some_and(|(m, _)| TABLE_MODULES.contains(&m.as_str()));
            let upper = name.to_ascii_uppercase();
            // `MLX5DV_*` values belong to the mlx5dv API (object types, flags), not the layout.
            let vocab =
                !upper.starts_with("MLX5DV_") && VOCABULARY.iter().any(|w| upper.contains(w));
            if is_literal(value) && (in_table || vocab) {
                out.push((i + 1, format!("defines `{name}` with a literal value")));
            }
        }
        if line.contains("lkey == 0x100") || line.contains("0x100 == lkey") {
            out.push((i + 1, "compares an lkey with 0x100".into()));
        }
        if mentions_cqe {
            for off in CQE_OFFSETS {
                let pats = [format!("_at(cqe, {off})"), format!("cqe.add({off})")];
                if pats.iter().any(|p| line.contains(p.as_str())) {
                    out.push((i + 1, format!("CQE access at literal offset {off}")));
                }
            }
            if let Some(r) = CQE_RANGES.iter().find(|r| line.contains(*r)) {
                out.push((i + 1, format!("CQE field at literal bytes {r}")));
            }
        }
        for c in line.chars() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    while mods.last().is_some_and(|(_, d)| *d >= depth) {
                        mods.pop();
                    }
                }
                _ => {}
            }
        }
    }
    out
}

fn relative(p: &Path) -> String {
    p.strip_prefix(root())
        .unwrap_or(p)
        .to_string_lossy()
        .replace('\\', "/")
}

#[test]
fn no_provider_rig_or_tool_defines_its_own_layout_constant() {
    let mut files = Vec::new();
    for r in ROOTS {
        rust_files(&root().join(r), &mut files);
    }
    files.sort();
    assert!(
        files.iter().any(|f| relative(f) == "providers/mlx5/cq.rs"),
        "the scan did not find the mlx5 provider"
    );
    let mut bad = Vec::new();
    let mut allowed_hit = vec![false; ALLOWED.len()];
    for f in &files {
        let rel = relative(f);
        let text = std::fs::read_to_string(f).unwrap();
        let found = findings(&text);
        if found.is_empty() {
            continue;
        }
        if let Some(k) = ALLOWED.iter().position(|(p, _)| *p == rel) {
            allowed_hit[k] = true;
            continue;
        }
        for (line, why) in found {
            bad.push(format!(
                "{rel}:{line}: {why}; use the name in rdma_direct::wire"
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "layout facts outside src/core/wire:\n{}",
        bad.join("\n")
    );
    for (k, hit) in allowed_hit.iter().enumerate() {
        assert!(
            hit,
            "{} is allowed a copy but has none any more: remove its ALLOWED entry",
            ALLOWED[k].0
        );
    }
}

#[test]
fn wire_imports_nothing_above_it() {
    let mut files = Vec::new();
    rust_files(&root().join("src/core/wire"), &mut files);
    assert!(!files.is_empty());
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for (i, raw) in text.lines().enumerate() {
            let line = code(raw);
            let up = line
                .match_indices("crate::")
                .any(|(at, _)| !line[at..].starts_with("crate::wire"));
            assert!(
                !up && !line.contains("super::super::super"),
                "{}:{}: src/core/wire is a leaf and may not use `{line}`",
                relative(&f),
                i + 1
            );
        }
    }
}

#[test]
fn the_scan_finds_copies() {
    let copies = "\
pub const MLX5_OPCODE_SEND: u8 = 0x0a;
pub(crate) mod cqe_op {
    pub const REQ: u8 = 0;
}
const INVALID_LKEY: u32 = 0x100;
fn f(cqe: *const u8) -> u32 { unsafe { be32_at(cqe, 56) } }
fn g(lkey: u32) -> bool { lkey == 0x100 }
";
    let lines: Vec<usize> = findings(copies).into_iter().map(|(l, _)| l).collect();
    assert_eq!(lines, vec![1, 3, 5, 6, 7]);
    let fine = "\
use rdma_direct::wire::MLX5_OPCODE_SEND;
const FAST_INLINE_MAX: u32 = 12;
const OP: u8 = MLX5_OPCODE_SEND;
fn f(cqe: *const u8) -> u32 { unsafe { be32_at(cqe, cqe64::SOP_DROP_QPN) } }
#[cfg(test)]
mod tests { const CQE_X: u8 = 1; }
";
    assert!(findings(fine).is_empty(), "{:?}", findings(fine));
}
