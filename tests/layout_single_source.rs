//! Every mlx5 layout fact has one source, `src/core/wire/`: no provider, no part of the
//! software device, no bench and no tool keeps its own copy of an opcode, a byte offset, a
//! flag bit or the CQE ownership rule, and `src/core/wire/` itself imports nothing from the
//! crate above it.
//!
//! # How the guard reads the code
//!
//! Each file is lexed after blanking comments, string and char literals and every item under
//! `#[cfg(test)]` (unit tests spell bytes out on purpose). Then, in the data plane
//! (`providers/`, `benches/`):
//!
//! - **hex**: a hex literal whose value is a number of `wire`'s table (`src/core/wire/consts.rs`,
//!   every `const` with a literal value: opcodes, masks, flag bits, sizes, field offsets) is a
//!   copy: `== 0x08`, `& 0xffffff`, `off + 0x3c`. A number that only happens to be equal (a
//!   first CQ number, a PSN mask) is given a name of its own, a `const` that is not layout
//!   vocabulary, and is not flagged there.
//! - **pointer offset**: `.add(8)` / `.offset(8)` / `.byte_add(8)`: a pointer moved by a literal
//!   number of bytes (2 or more) is a field offset written by hand.
//! - **offset arithmetic**: a `wire::offset` name or an `MLX5_*` size plus or minus a literal
//!   (`RKEY + 4`, `cqe64::TIMESTAMP + 4`, `MLX5_WQE_DS_UNITS - 4`): the field after it, named
//!   by hand.
//! - **ownership**: the CQE ownership rule outside `wire` (`MLX5_CQE_OWNER_MASK`, or `& 1` on a
//!   line about the owner bit): pollers use `wire::cqe_sw_owned`, `cqe_parity`,
//!   `cqe_sw_owned_x`, `CQE_PLAIN_OWNED_MASK`.
//! - **opcode literal**: something named `*opcode*` compared with an integer literal, or a
//!   `match` on it with integer arms.
//!
//! and everywhere scanned (data plane, CLI, examples):
//!
//! - **const**: a `const` with a literal value whose name is layout vocabulary (`MLX5_*`,
//!   opcodes, syndromes, `fm_ce_se` / `op_own` bits, segment sizes), or any literal `const` in
//!   a module named like a table of them (`op`, `cqe_op`, `syndrome`, `fm_ce_se`, ...);
//! - **CQE bytes**: in a file about CQEs, a field at literal bytes (`b[56..60]`, `c[63]`,
//!   `be32_at(cqe, 56)`); an lkey compared with `0x100`.
//!
//! [`ALLOWED`] names the sites that may still hold a copy, each with its reason; an entry that
//! no longer matches anything fails the test, so the list only shrinks.
//!
//! # Shown failing
//!
//! A scratch commit planted one copy of each kind in the software device
//! (`providers/sim/engine/fetch.rs`, in `Engine::parse`: an opcode written as `0x08`, the
//! owner bit tested with `& 1`, a CQE field read at `+ 0x3c`) and
//! `cargo test --test layout_single_source` failed with:
//!
//! ```text
//! mlx5 layout facts outside src/core/wire:
//! providers/sim/engine/fetch.rs:192: [hex] hex literal 0x8 is an mlx5 layout number (wire::MLX5_OPCODE_RDMA_WRITE)
//!     if p.opcode == Opcode::from(0x08) && q.sq_ci & 1 == 0 {
//! providers/sim/engine/fetch.rs:194: [ownership] the CQE owner bit outside wire: use wire::cqe_sw_owned, cqe_parity, cqe_sw_owned_x or CQE_PLAIN_OWNED_MASK
//!     let _owned = op_own & 1 == (q.sq_ci & 1) as u8;
//! providers/sim/engine/fetch.rs:195: [hex] hex literal 0x3c is an mlx5 layout number (wire::offset::cqe64::WQE_COUNTER)
//!     let _wqe_counter = q.mem.load_be32(q.uar_off + 0x3c);
//! test result: FAILED. 2 passed; 1 failed
//! ```
//!
//! (`q.sq_ci & 1` on line 192 is not flagged: nothing there is about the owner bit.) The
//! commit was then dropped. The other rules (pointer offset, offset arithmetic, opcode
//! literal, const, CQE bytes) are shown failing on planted text by `each_rule_finds_its_copy`.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Sites that may still hold a copy: (file, rule, a piece of the line's code, why).
const ALLOWED: &[(&str, &str, &str, &str)] = &[
    // A 24-bit PSN (IBA): the same mask as the 24-bit QPN field, not an mlx5 field.
    (
        "providers/mlx5/device.rs",
        "hex",
        "0x9e37_79b1",
        "a 24-bit PSN",
    ),
    (
        "providers/sim/provider.rs",
        "hex",
        "0x9e37_79b9",
        "a 24-bit PSN",
    ),
    // The rig's owner write: it plays the device, which sets the owner bit.
    (
        "benches/rig/plain.rs",
        "ownership",
        "& !MLX5_CQE_OWNER_MASK) | owner",
        "the device side's owner write (the rig plays the device), not the poller's test",
    ),
];

/// Directories of the data plane (every rule).
const DATA_PLANE: &[&str] = &["providers", "benches"];
/// Directories of the tools (the `const` and CQE-bytes rules).
const TOOLS: &[&str] = &["src/bin", "examples"];

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

/// The modules of `wire::offset` (and the names code imports them as).
const OFFSET_MODULES: &[&str] = &[
    "ctrl", "raddr", "data", "atomic", "inline", "av", "srq_next", "cqe64", "err_cqe", "offset",
    "off",
];

/// Byte offsets of `struct mlx5_cqe64` / `mlx5_err_cqe` fields as a CQE reader spells them.
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

/// Blanks every item under `#[cfg(test)]`: from the attribute to the end of the item (its
/// matching `}`, or its `;`).
fn drop_test_items(code: &str) -> String {
    let mut out = code.as_bytes().to_vec();
    let mut from = 0;
    while let Some(p) = code[from..].find("#[cfg(test)]") {
        let start = from + p;
        let b = code.as_bytes();
        let mut j = start + "#[cfg(test)]".len();
        let mut depth = 0i64;
        while j < b.len() {
            match b[j] {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        j += 1;
                        break;
                    }
                }
                b';' if depth == 0 => {
                    j += 1;
                    break;
                }
                _ => {}
            }
            j += 1;
        }
        for c in &mut out[start..j.min(b.len())] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
        from = j.min(b.len());
    }
    String::from_utf8(out).expect("ASCII blanks")
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// Value and whether it was written in hex.
    Int(u64, bool),
    Punct(&'static str),
}

const PUNCTS: &[&str] = &[
    "::", "==", "!=", "<=", ">=", "=>", "->", "&&", "||", "<<", ">>", "..", "+=", "-=", "|=", "&=",
    "{", "}", "(", ")", "[", "]", ";", ":", ",", ".", "+", "-", "*", "/", "%", "&", "|", "^", "!",
    "<", ">", "=", "#", "?", "@", "$", "~",
];

/// Tokens with their 1-based line numbers.
fn lex(code: &str) -> Vec<(usize, Tok)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line += 1;
            i += 1;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push((line, Tok::Ident(code[s..i].to_string())));
        } else if c.is_ascii_digit() {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            // A float (`1.5`) is not an integer: skip its fraction.
            if i + 1 < b.len() && b[i] == b'.' && b[i + 1].is_ascii_digit() {
                i += 1;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                continue;
            }
            let text: String = code[s..i].chars().filter(|&c| c != '_').collect();
            let (hex, digits) = match text.strip_prefix("0x") {
                Some(h) => (true, h.to_string()),
                None => (false, text.clone()),
            };
            // Drop a type suffix (u8, usize, i64, ...).
            let digits = digits
                .find(['u', 'i'])
                .map_or(digits.as_str(), |p| &digits[..p]);
            let v = if hex {
                u64::from_str_radix(digits, 16)
            } else {
                digits.parse()
            };
            if let Ok(v) = v {
                out.push((line, Tok::Int(v, hex)));
            }
        } else {
            match PUNCTS.iter().find(|p| b[i..].starts_with(p.as_bytes())) {
                Some(p) => {
                    out.push((line, Tok::Punct(p)));
                    i += p.len();
                }
                None => i += 1,
            }
        }
    }
    out
}

/// The numbers of `wire`'s table: every `const NAME: T = <integer literal>;` of
/// `src/core/wire/consts.rs`, value → names. Of the field offsets (`mod offset`), only those
/// of 16 and more: the small ones (0..15, the first unit of every segment) coincide with
/// every small number a program writes.
fn layout_values() -> BTreeMap<u64, Vec<String>> {
    let text = std::fs::read_to_string(root().join("src/core/wire/consts.rs")).unwrap();
    let code = drop_test_items(&common::strip_rust(&text, false));
    let at = code.find("pub mod offset").expect("wire::offset");
    let mut m: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for (v, name) in literal_consts(&code[..at]) {
        m.entry(v).or_default().push(name);
    }
    // `pub mod offset { pub mod ctrl { .. } pub mod raddr { .. } .. }`: one chunk per struct.
    for chunk in code[at..].split("pub mod ").skip(2) {
        let module = chunk.split_whitespace().next().unwrap_or("");
        for (v, name) in literal_consts(chunk) {
            if v >= 16 {
                m.entry(v)
                    .or_default()
                    .push(format!("offset::{module}::{name}"));
            }
        }
    }
    m
}

/// `const NAME: T = <integer literal>;` in `code`: (value, NAME).
fn literal_consts(code: &str) -> Vec<(u64, String)> {
    let toks = lex(code);
    let mut m = Vec::new();
    for w in toks.windows(7) {
        if let (
            Tok::Ident(k),
            Tok::Ident(name),
            Tok::Punct(":"),
            Tok::Ident(_),
            Tok::Punct("="),
            Tok::Int(v, _),
            Tok::Punct(";"),
        ) = (
            &w[0].1, &w[1].1, &w[2].1, &w[3].1, &w[4].1, &w[5].1, &w[6].1,
        ) {
            if k == "const" {
                m.push((*v, name.clone()));
            }
        }
    }
    m
}

fn is_vocabulary(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    // `MLX5DV_*` values belong to the mlx5dv API (object types, flags), not the layout.
    !upper.starts_with("MLX5DV_") && VOCABULARY.iter().any(|w| upper.contains(w))
}

fn is_caps(s: &str) -> bool {
    s.chars().any(|c| c.is_ascii_uppercase())
        && s.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// What an ownership finding says.
const OWNERSHIP: &str = "the CQE owner bit outside wire: use wire::cqe_sw_owned, cqe_parity, \
                         cqe_sw_owned_x or CQE_PLAIN_OWNED_MASK";

/// Copies of layout facts in one file's text: (line, rule, why). `data_plane` turns on the
/// rules that read values (hex, pointer offset, offset arithmetic, ownership, opcode literal).
fn findings(
    text: &str,
    data_plane: bool,
    values: &BTreeMap<u64, Vec<String>>,
) -> Vec<(usize, &'static str, String)> {
    let code = drop_test_items(&common::strip_rust(text, false));
    let lines: Vec<&str> = code.lines().collect();
    let line_of = |l: usize| lines.get(l - 1).copied().unwrap_or("");
    let toks = lex(&code);
    let mut out: Vec<(usize, &'static str, String)> = Vec::new();
    let tok = |k: usize| toks.get(k).map(|t| &t.1);
    let ident = |k: usize| match tok(k) {
        Some(Tok::Ident(s)) => Some(s.as_str()),
        _ => None,
    };
    let punct = |k: usize, p: &str| matches!(tok(k), Some(Tok::Punct(q)) if *q == p);
    let int = |k: usize| match tok(k) {
        Some(Tok::Int(v, _)) => Some(*v),
        _ => None,
    };

    // Module stack for the table-module rule: (name, brace depth inside it).
    let mut mods: Vec<(String, i64)> = Vec::new();
    let mut depth = 0i64;
    // The `const` being defined: (name, brace depth, bracket nesting) until its `;`.
    let mut in_const: Option<(String, i64, i64)> = None;
    // Nesting of `(` and `[`.
    let mut nest = 0i64;
    // `match` on an opcode: the depth of its braces.
    let mut opcode_match: Vec<i64> = Vec::new();
    let mut pending_match: Option<bool> = None;
    // Inside a `use` declaration (an import is not a copy; its uses are).
    let mut in_use = false;

    for k in 0..toks.len() {
        let (line, t) = (toks[k].0, &toks[k].1);
        match t {
            Tok::Ident(s) if s == "mod" => {
                if let (Some(name), true) = (ident(k + 1), punct(k + 2, "{")) {
                    mods.push((name.to_string(), depth + 1));
                }
            }
            Tok::Ident(s) if s == "const" => {
                if let (Some(name), true) = (ident(k + 1), punct(k + 2, ":")) {
                    in_const = Some((name.to_string(), depth, nest));
                    // `const NAME: T = <literal>`: the const rule.
                    let (mut j, mut n) = (k + 3, 0);
                    while j < toks.len() {
                        match tok(j) {
                            Some(Tok::Punct("(" | "[")) => n += 1,
                            Some(Tok::Punct(")" | "]")) => n -= 1,
                            Some(Tok::Punct("=" | ";")) if n == 0 => break,
                            _ => {}
                        }
                        j += 1;
                    }
                    let literal =
                        int(j + 1).is_some() || (punct(j + 1, "(") && int(j + 2).is_some());
                    let in_table = mods
                        .last()
                        .is_some_and(|(m, _)| TABLE_MODULES.contains(&m.as_str()));
                    if punct(j, "=") && literal && (in_table || is_vocabulary(name)) {
                        out.push((
                            line,
                            "const",
                            format!("defines `{name}` with a literal value"),
                        ));
                    }
                }
            }
            Tok::Ident(s) if s == "match" => pending_match = Some(false),
            Tok::Ident(s) if s == "use" => in_use = true,
            Tok::Ident(s)
                if pending_match.is_some() && s.to_ascii_lowercase().contains("opcode") =>
            {
                pending_match = Some(true);
            }
            Tok::Punct("{") => {
                depth += 1;
                if let Some(on_opcode) = pending_match.take() {
                    if on_opcode {
                        opcode_match.push(depth);
                    }
                }
            }
            Tok::Punct("}") => {
                if opcode_match.last() == Some(&depth) {
                    opcode_match.pop();
                }
                depth -= 1;
                while mods.last().is_some_and(|(_, d)| *d > depth) {
                    mods.pop();
                }
            }
            Tok::Punct("(" | "[") => nest += 1,
            Tok::Punct(")" | "]") => nest -= 1,
            Tok::Punct(";") => {
                if in_const
                    .as_ref()
                    .is_some_and(|c| c.1 == depth && c.2 == nest)
                {
                    in_const = None;
                }
                pending_match = None;
                in_use = false;
            }
            _ => {}
        }
        if !data_plane || in_use {
            continue;
        }
        match t {
            Tok::Int(v, true) => {
                let named = in_const.as_ref().is_some_and(|c| !is_vocabulary(&c.0));
                if let (Some(names), false) = (values.get(v), named) {
                    out.push((
                        line,
                        "hex",
                        format!(
                            "hex literal {v:#x} is an mlx5 layout number (wire::{})",
                            names[0]
                        ),
                    ));
                }
            }
            Tok::Ident(s)
                if matches!(s.as_str(), "add" | "offset" | "byte_add")
                    && punct(k.wrapping_sub(1), ".")
                    && punct(k + 1, "(")
                    && punct(k + 3, ")")
                    && int(k + 2).is_some_and(|n| n >= 2) =>
            {
                let why = "a pointer moved by a literal number of bytes: name the field";
                out.push((line, "pointer offset", why.into()));
            }
            Tok::Ident(s) if s == "MLX5_CQE_OWNER_MASK" => {
                out.push((line, "ownership", OWNERSHIP.into()));
            }
            Tok::Punct("&") if int(k + 1) == Some(1) && line_of(line).contains("own") => {
                out.push((line, "ownership", OWNERSHIP.into()));
            }
            _ => {}
        }
        // Offset arithmetic: `<offset module>::NAME ± n`, `MLX5_* ± n` (n >= 2), `MAX_DS ± n`.
        if let (Some(name), true) = (ident(k), punct(k + 1, "+") || punct(k + 1, "-")) {
            if let Some(n) = int(k + 2) {
                let in_offset_module = punct(k.wrapping_sub(1), "::")
                    && ident(k.wrapping_sub(2))
                        .is_some_and(|m| OFFSET_MODULES.contains(&m) || m.ends_with("_off"));
                let size = name.starts_with("MLX5_") || name == "MAX_DS";
                if is_caps(name) && ((in_offset_module && n >= 1) || (size && n >= 2)) {
                    out.push((
                        line,
                        "offset arithmetic",
                        format!(
                            "`{name} {} {n}` names a field by hand: add it to wire::offset",
                            if punct(k + 1, "+") { "+" } else { "-" }
                        ),
                    ));
                }
            }
        }
        // An opcode compared with a literal, or a literal arm of a match on an opcode.
        if let Some(name) = ident(k) {
            if name.to_ascii_lowercase().contains("opcode") {
                for p in ["==", "!=", "<=", ">=", "<", ">"] {
                    if punct(k + 1, p) && int(k + 2).is_some() {
                        out.push((
                            line,
                            "opcode literal",
                            format!(
                                "`{name} {p} <literal>`: use the wire::Opcode / MLX5_OPCODE_* name"
                            ),
                        ));
                    }
                }
            }
        }
        let arm_start = ["{", ",", "|", "}"]
            .iter()
            .any(|p| punct(k.wrapping_sub(1), p));
        let arm_end = ["=>", "|", ".."].iter().any(|p| punct(k + 1, p));
        if int(k).is_some() && !opcode_match.is_empty() && arm_start && arm_end {
            let why = "a match on an opcode with a literal arm: use the wire::Opcode name";
            out.push((line, "opcode literal", why.into()));
        }
    }

    // The CQE-bytes rules read lines.
    let mentions_cqe = text.to_ascii_lowercase().contains("cqe");
    for (i, line) in lines.iter().enumerate() {
        if line.contains("lkey == 0x100") || line.contains("0x100 == lkey") {
            out.push((i + 1, "lkey", "compares an lkey with 0x100".into()));
        }
        if mentions_cqe {
            for off in CQE_OFFSETS {
                let pats = [format!("_at(cqe, {off})"), format!("cqe.add({off})")];
                if pats.iter().any(|p| line.contains(p.as_str())) {
                    out.push((
                        i + 1,
                        "CQE bytes",
                        format!("CQE access at literal offset {off}"),
                    ));
                }
            }
            if let Some(r) = CQE_RANGES.iter().find(|r| line.contains(*r)) {
                out.push((
                    i + 1,
                    "CQE bytes",
                    format!("CQE field at literal bytes {r}"),
                ));
            }
        }
    }
    out.sort_by_key(|f| f.0);
    out.dedup();
    out
}

fn relative(p: &Path) -> String {
    p.strip_prefix(root())
        .unwrap_or(p)
        .to_string_lossy()
        .replace('\\', "/")
}

#[test]
fn no_provider_bench_or_tool_keeps_its_own_layout_fact() {
    let values = layout_values();
    assert!(
        values.contains_key(&0x0a) && values.contains_key(&63),
        "the wire table was not read"
    );
    let mut files = Vec::new();
    for (roots, data_plane) in [(DATA_PLANE, true), (TOOLS, false)] {
        for r in roots {
            let mut f = Vec::new();
            rust_files(&root().join(r), &mut f);
            files.extend(f.into_iter().map(|p| (p, data_plane)));
        }
    }
    files.sort();
    assert!(
        files
            .iter()
            .any(|(f, _)| relative(f) == "providers/mlx5/cq.rs"),
        "the scan did not find the mlx5 provider"
    );
    let mut bad = Vec::new();
    let mut allowed_hit = vec![false; ALLOWED.len()];
    for (f, data_plane) in &files {
        let rel = relative(f);
        let text = std::fs::read_to_string(f).unwrap();
        let code = drop_test_items(&common::strip_rust(&text, false));
        let lines: Vec<&str> = code.lines().collect();
        for (line, rule, why) in findings(&text, *data_plane, &values) {
            let src = lines.get(line - 1).copied().unwrap_or("");
            let allowed = ALLOWED
                .iter()
                .position(|(p, r, piece, _)| *p == rel && *r == rule && src.contains(piece));
            match allowed {
                Some(k) => allowed_hit[k] = true,
                None => bad.push(format!("{rel}:{line}: [{rule}] {why}\n    {}", src.trim())),
            }
        }
    }
    assert!(
        bad.is_empty(),
        "mlx5 layout facts outside src/core/wire:\n{}",
        bad.join("\n")
    );
    for (k, hit) in allowed_hit.iter().enumerate() {
        let (file, rule, piece, _) = ALLOWED[k];
        assert!(
            hit,
            "ALLOWED entry ({file}, {rule}, {piece:?}) matches nothing any more: remove it"
        );
    }
}

#[test]
fn wire_imports_nothing_above_it() {
    let mut files = Vec::new();
    rust_files(&root().join("src/core/wire"), &mut files);
    assert!(!files.is_empty());
    for f in files {
        let text = common::strip_rust(&std::fs::read_to_string(&f).unwrap(), false);
        for (i, line) in text.lines().enumerate() {
            let up = line
                .match_indices("crate::")
                .any(|(at, _)| !line[at..].starts_with("crate::wire"));
            assert!(
                !up && !line.contains("super::super::super"),
                "{}:{}: src/core/wire is a leaf and may not use `{}`",
                relative(&f),
                i + 1,
                line.trim()
            );
        }
    }
}

#[test]
fn each_rule_finds_its_copy() {
    let values = layout_values();
    let rules = |src: &str| -> Vec<(usize, &'static str)> {
        findings(src, true, &values)
            .into_iter()
            .map(|(l, r, _)| (l, r))
            .collect()
    };
    let copies = "\
pub const MLX5_OPCODE_SEND: u8 = 0x0a;
pub(crate) mod cqe_op {
    pub const REQ: u8 = 0;
}
const INVALID_LKEY: u32 = 0x100;
fn f(cqe: *const u8) -> u32 { unsafe { be32_at(cqe, 56) } }
fn g(lkey: u32) -> bool { lkey == 0x100 }
fn h(w: &Wqe) -> bool { w.opcode == Opcode::from(0x08) }
fn i(op_own: u8, p: u8) -> bool { op_own & 1 == p }
fn j(q: &Q) { q.mem.read(off + 0x3c, &mut b) }
unsafe fn k(a: *mut u8) { put64(a.add(8), 0) }
unsafe fn l(r: *mut u8) { put32(r.add(raddr_off::RKEY + 4), 0) }
fn m(x: u8) -> bool { x & MLX5_CQE_OWNER_MASK != 0 }
fn n(opcode: u8) -> bool { opcode >= 16 }
fn o(w: &Wqe) -> u32 { match w.opcode { 8 | 9 => 1, _ => 0 } }
const MAX_INLINE: usize = MAX_DS * MLX5_WQE_DS_UNITS - 4;
";
    assert_eq!(
        rules(copies),
        vec![
            (1, "const"),
            (1, "hex"),
            (3, "const"),
            (5, "const"),
            (5, "hex"),
            (6, "CQE bytes"),
            (7, "hex"),
            (7, "lkey"),
            (8, "hex"),
            (9, "ownership"),
            (10, "hex"),
            (11, "pointer offset"),
            (12, "offset arithmetic"),
            (13, "ownership"),
            (14, "opcode literal"),
            (15, "opcode literal"),
            (16, "offset arithmetic"),
        ]
    );
    // The same text in a tool: only the const / CQE-bytes / lkey rules.
    let tool: Vec<usize> = findings(copies, false, &values)
        .into_iter()
        .map(|(l, _, _)| l)
        .collect();
    assert_eq!(tool, vec![1, 3, 5, 6, 7]);

    let fine = "\
use rdma_direct::wire::MLX5_OPCODE_SEND;
const FAST_INLINE_MAX: u32 = 12;
const FIRST_CQN: u32 = 0x40;
const OP: u8 = MLX5_OPCODE_SEND;
fn f(cqe: *const u8) -> u32 { unsafe { be32_at(cqe, cqe64::SOP_DROP_QPN) } }
fn g(x: u8) -> bool { cqe_sw_owned_x(x) && x & CQE_PLAIN_OWNED_MASK == 0 }
unsafe fn h(a: *mut u8, n: usize) { put64(a.add(atomic::COMPARE), 0); a.add(n - 8); a.add(1) }
fn i(w: &Wqe) -> bool { w.opcode == Opcode::RdmaWrite && MLX5_SEND_WQE_BB - 1 > 0 }
fn j() -> u32 { 0x1234 + 0x10_0000 } // 0x08 in a comment
fn k() -> &'static str { \"0x08 & 1 a.add(8)\" }
#[cfg(test)]
const MLX5_X: u8 = 0x0a;
fn l() -> u8 { 0 }
#[cfg(test)]
mod tests { const CQE_X: u8 = 1; fn t(op_own: u8) -> bool { op_own & 1 == 0 } }
fn m(c: char) -> bool { c == '{' }
";
    assert_eq!(rules(fine), vec![], "{:?}", findings(fine, true, &values));
}
