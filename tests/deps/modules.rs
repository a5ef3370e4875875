//! The dependency rule between modules: every path a source file names resolves to a module,
//! and a module imports only from the floors below it.

use super::*;

// Every `crate::`, `super::`, `self::`, `rdma_direct_core::`, `rdma_direct_providers::` (and,
// in the CLI, `rdma_direct::`) path in the code of `src/**` and `providers/**` is resolved to
// the module it names, comments and string literals aside, `use` groups
// (`crate::{a, b::{c, self}}`) expanded, `super` resolved through inline modules
// (`mod tests { use super::*; }`). Each rule below says which modules a set of files may (or
// may not) name. The layers, bottom up (the first five are the core crate):
//
//   wire (mlx5 layout facts) · vocabulary (types, error) · endpoint codecs · ffi · control
//   path | data-plane API (providers/lib.rs) · providers (mlx5, verbs, sim) | rdma_cm,
//   tools (perf, doctor) · CLI (src/bin)

/// Which files a rule applies to, and what they may name.
struct Rule {
    name: &'static str,
    /// Files (path relative to the crate root, `/`-separated) the rule applies to.
    applies: fn(&str) -> bool,
    /// True when the file may name the module `target` (path segments in the one namespace
    /// of [`module_of`]).
    allowed: fn(&[String]) -> bool,
}

fn under(target: &[String], prefix: &[&str]) -> bool {
    target.len() >= prefix.len() && target.iter().zip(prefix).all(|(a, b)| a == b)
}

fn under_any(target: &[String], prefixes: &[&[&str]]) -> bool {
    prefixes.iter().any(|p| under(target, p))
}

const VOCABULARY: &[&[&str]] = &[&["types"], &["error"]];
const CODECS: &[&[&str]] = &[&["endpoint", "codec"], &["endpoint", "rc_pingpong"]];
const VERBS_PROVIDER: &[&[&str]] = &[&["providers", "verbs"]];

fn is_lib(f: &str) -> bool {
    (f.starts_with("src/") && !f.starts_with("src/bin/")) || f.starts_with("providers/")
}

fn rules() -> Vec<Rule> {
    vec![
        Rule {
            name: "wire imports nothing above it (only itself, std and core)",
            applies: |f| f.starts_with("src/core/wire/"),
            allowed: |t| under(t, &["wire"]),
        },
        Rule {
            name: "the vocabulary (types, error) imports only itself",
            applies: |f| f.starts_with("src/core/types/") || f == "src/core/error.rs",
            allowed: |t| under_any(t, VOCABULARY),
        },
        Rule {
            name: "the endpoint codecs import only the vocabulary and each other",
            applies: |f| {
                f == "src/core/endpoint/codec.rs" || f == "src/core/endpoint/rc_pingpong.rs"
            },
            allowed: |t| under_any(t, VOCABULARY) || under_any(t, CODECS),
        },
        Rule {
            name: "ffi and the control path import neither the data plane, the TCP exchange \
                   nor the tools",
            applies: |f| f.starts_with("src/core/ffi/") || f.starts_with("src/core/control/"),
            allowed: |t| {
                under_any(
                    t,
                    &[&["ffi"], &["control"], &["wire"], &["barrier"], &["mmio"]],
                ) || under_any(t, VOCABULARY)
                    || under_any(t, CODECS)
            },
        },
        Rule {
            name: "the mlx5 provider never imports the sim or the verbs provider",
            applies: |f| f.starts_with("providers/mlx5/"),
            allowed: |t| !under(t, &["providers", "sim"]) && !under_any(t, VERBS_PROVIDER),
        },
        Rule {
            name: "the verbs provider never imports the mlx5 provider or the sim",
            applies: |f| f.starts_with("providers/verbs/"),
            allowed: |t| !under_any(t, &[&["providers", "mlx5"], &["providers", "sim"]]),
        },
        Rule {
            name: "the sim never imports the verbs provider (it may build on mlx5)",
            applies: |f| f.starts_with("providers/sim/"),
            allowed: |t| !under_any(t, VERBS_PROVIDER),
        },
        Rule {
            name: "the CLI uses the safe API, never ffi",
            applies: |f| f.starts_with("src/bin/"),
            allowed: |t| !under(t, &["ffi"]),
        },
    ]
}

/// The core modules, named at the root of the core crate and imported at the providers
/// crate's root (`crate::wire` in a provider file is the core's `wire`).
const CORE: [&str; 12] = [
    "barrier", "clock", "endpoint", "error", "ffi", "mmio", "pcie", "types", "control", "wire",
    "Error", "Result",
];

/// Which crate a file belongs to.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Floor {
    Core,
    Providers,
    /// The facade and the tools (`src/lib.rs`, cm, perf, doctor, prelude).
    Top,
    /// The binary.
    Cli,
}

fn floor_of(file: &str) -> Floor {
    if file.starts_with("src/core/") {
        Floor::Core
    } else if file.starts_with("providers/") {
        Floor::Providers
    } else if file.starts_with("src/bin/") {
        Floor::Cli
    } else {
        Floor::Top
    }
}

/// The module a library file is, in one namespace for the whole workspace: the core's
/// modules at the top (`wire`, `control`, ...), the providers crate under `providers`, the
/// tools at the top (`perf`, `cm`, ...) as the facade names them. `None` for the CLI.
fn module_of(file: &str) -> Option<Vec<String>> {
    let rest = match floor_of(file) {
        Floor::Cli => return None,
        Floor::Core => file.strip_prefix("src/core/")?.to_string(),
        Floor::Providers => file.to_string(),
        Floor::Top => file.strip_prefix("src/")?.to_string(),
    };
    let rest = rest.strip_suffix(".rs")?;
    let mut segs: Vec<String> = rest.split('/').map(str::to_string).collect();
    if matches!(segs.last().map(String::as_str), Some("mod" | "lib")) {
        segs.pop();
    }
    Some(segs)
}

/// A path written as `crate::segs` in a file of `floor`, in [`module_of`]'s namespace.
fn from_crate_root(floor: Floor, segs: Vec<String>) -> Vec<String> {
    match floor {
        Floor::Providers => normalise(
            std::iter::once("providers".to_string())
                .chain(segs)
                .collect(),
        ),
        _ => segs,
    }
}

/// `providers::wire::..` (a core module through the providers crate's root imports) is the
/// core's `wire`.
fn normalise(mut t: Vec<String>) -> Vec<String> {
    if t.len() >= 2 && t[0] == "providers" && CORE.contains(&t[1].as_str()) {
        t.remove(0);
    }
    t
}

/// Byte ranges of the bodies of inline modules (`mod name { ... }`), with their names.
fn inline_modules(code: &str) -> Vec<(usize, usize, String)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(p) = code[from..].find("mod ") {
        let at = from + p;
        from = at + 4;
        if at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_') {
            continue;
        }
        let rest = &code[at + 4..];
        let name: String = rest
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let after = rest.trim_start()[name.len()..].trim_start();
        if name.is_empty() || !after.starts_with('{') {
            continue;
        }
        let open = code.len() - after.len();
        let mut depth = 0;
        let mut close = code.len();
        for (k, &c) in b.iter().enumerate().skip(open) {
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = k;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.push((open, close, name));
    }
    out
}

/// One path as written: its root (`crate`, `super`, `self` or a workspace crate), the number of
/// `super`s, the segments after them, and where it starts.
struct RawPath {
    root: &'static str,
    supers: usize,
    segs: Vec<String>,
    at: usize,
}

fn ident_at(s: &str) -> (String, &str) {
    let s = s.trim_start();
    let id: String = s
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    let rest = &s[id.len()..];
    (id, rest)
}

/// Expands the path tail at `s` (after `root::`) into full segment lists: `a::b`,
/// `a::{b, c::d, self}`, `a::*`.
fn expand(prefix: Vec<String>, s: &str, out: &mut Vec<Vec<String>>) {
    let s = s.trim_start();
    if let Some(body) = s.strip_prefix('{') {
        // Split the group at top-level commas.
        let mut depth = 0;
        let mut start = 0;
        let mut end = body.len();
        let mut items = Vec::new();
        for (k, c) in body.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    end = k;
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    items.push(&body[start..k]);
                    start = k + 1;
                }
                _ => {}
            }
        }
        items.push(&body[start..end]);
        for item in items {
            let item = item.trim();
            // `*`, `self` and `self as x` name the group's prefix itself.
            if item.is_empty() || item == "*" || item == "self" || item.starts_with("self ") {
                out.push(prefix.clone());
            } else {
                expand(prefix.clone(), item, out);
            }
        }
        return;
    }
    let (id, rest) = ident_at(s);
    if id.is_empty() {
        out.push(prefix);
        return;
    }
    let mut p = prefix;
    p.push(id);
    match rest.trim_start().strip_prefix("::") {
        Some(tail) if !tail.trim_start().starts_with('*') => expand(p, tail, out),
        _ => out.push(p),
    }
}

/// Every path rooted at `crate`, `super`, `self` or a workspace crate in `code` (comments and
/// literals already blanked).
fn raw_paths(code: &str) -> Vec<RawPath> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    for root in [
        "crate",
        "super",
        "self",
        "rdma_direct",
        "rdma_direct_core",
        "rdma_direct_providers",
    ] {
        let mut from = 0;
        while let Some(p) = code[from..].find(root) {
            let at = from + p;
            from = at + root.len();
            if at > 0
                && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_' || b[at - 1] == b':')
            {
                continue; // part of a longer identifier, or not a path root (`a::self`)
            }
            let mut rest = &code[at + root.len()..];
            if b.get(at + root.len())
                .is_some_and(|&c| c.is_ascii_alphanumeric() || c == b'_')
            {
                continue;
            }
            let mut supers = usize::from(root == "super");
            while let Some(tail) = rest.trim_start().strip_prefix("::") {
                rest = tail;
                if root == "super" {
                    let (id, r) = ident_at(rest);
                    if id == "super" {
                        supers += 1;
                        rest = r;
                        continue;
                    }
                }
                let mut expanded = Vec::new();
                expand(Vec::new(), rest, &mut expanded);
                for segs in expanded {
                    out.push(RawPath {
                        root,
                        supers,
                        segs,
                        at,
                    });
                }
                break;
            }
        }
    }
    out
}

/// The modules `file` names, in [`module_of`]'s namespace: the library's own paths resolved
/// through `crate`, `super` and the workspace's crate names; a CLI file's paths through
/// `rdma_direct::` only (its own modules are not the library's).
fn targets(file: &str, src: &str) -> Vec<Vec<String>> {
    let code = common::strip_rust(src, false);
    let floor = floor_of(file);
    let module = module_of(file);
    let inline = inline_modules(&code);
    let mut out = Vec::new();
    for p in raw_paths(&code) {
        let resolved = match (&module, p.root) {
            (_, "rdma_direct_core") => Some(p.segs),
            (_, "rdma_direct_providers") => Some(from_crate_root(Floor::Providers, p.segs)),
            (None, "rdma_direct") => Some(p.segs),
            (None, _) => None, // the CLI's own modules
            (Some(_), "rdma_direct") => None,
            (Some(_), "crate") => Some(from_crate_root(floor, p.segs)),
            (Some(m), _) => {
                let mut here = m.clone();
                for (open, close, name) in &inline {
                    if *open < p.at && p.at < *close {
                        here.push(name.clone());
                    }
                }
                if p.supers > here.len() {
                    None
                } else {
                    here.truncate(here.len() - p.supers);
                    here.extend(p.segs);
                    Some(normalise(here))
                }
            }
        };
        if let Some(mut t) = resolved.filter(|t| !t.is_empty()) {
            // `crate::{Error, Result}` are the root's re-exports of the error module.
            if matches!(t[0].as_str(), "Error" | "Result") {
                t.insert(0, "error".to_string());
            }
            out.push(t);
        }
    }
    out
}

/// Library files that pull in a CLI file (`#[path = ".../bin/..."]`, `include!`).
fn includes_cli(src: &str) -> bool {
    let code = common::strip_rust(src, true);
    code.lines().any(|l| {
        let l = l.replace(' ', "");
        (l.contains("#[path=") || l.contains("include!(") || l.contains("include_str!("))
            && l.contains("bin/")
    })
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// Violations of each rule in `files` (relative path, text).
fn violations(files: &[(String, String)]) -> Vec<(&'static str, String)> {
    let rules = rules();
    let mut out = Vec::new();
    for (file, src) in files {
        if is_lib(file) && includes_cli(src) {
            out.push((
                "the library never includes the CLI",
                format!("{file}: #[path]/include! of a src/bin file"),
            ));
        }
        let ts = targets(file, src);
        for r in rules.iter().filter(|r| (r.applies)(file)) {
            for t in ts.iter().filter(|t| !(r.allowed)(t)) {
                out.push((r.name, format!("{file}: names {}", t.join("::"))));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

fn tree() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = Vec::new();
    rust_files(&root.join("src"), &mut paths);
    rust_files(&root.join("providers"), &mut paths);
    paths
        .into_iter()
        .map(|p| {
            let rel = p
                .strip_prefix(root)
                .expect("under the crate root")
                .to_string_lossy()
                .replace('\\', "/");
            let text = std::fs::read_to_string(&p).expect("read source");
            (rel, text)
        })
        .collect()
}

#[test]
fn modules_import_only_downwards() {
    let files = tree();
    assert!(
        files.iter().any(|(f, _)| f == "providers/mlx5/sq.rs"),
        "the walk found no provider files"
    );
    let failing: Vec<String> = violations(&files)
        .iter()
        .map(|(rule, what)| format!("{rule}: {what}"))
        .collect();
    assert!(
        failing.is_empty(),
        "forbidden imports:\n  {}",
        failing.join("\n  ")
    );
}

fn check(file: &str, src: &str) -> Vec<String> {
    violations(&[(file.to_string(), src.to_string())])
        .into_iter()
        .map(|(_, w)| w)
        .collect()
}

#[test]
fn each_rule_catches_a_forbidden_import() {
    let cases = [
        ("src/core/wire/cqe.rs", "use crate::types::WcStatus;"),
        ("src/core/types/wr.rs", "use crate::endpoint::QpEndpoint;"),
        (
            "src/core/error.rs",
            "fn f() -> crate::control::Context { todo!() }",
        ),
        ("src/core/endpoint/codec.rs", "use crate::control::Qp;"),
        (
            "src/core/control/qp.rs",
            "use crate::endpoint::exchange::sync;",
        ),
        ("src/core/ffi/ops.rs", "use crate::perf::Opts;"),
        ("providers/mlx5/cq.rs", "use crate::sim;"),
        ("providers/mlx5/cq.rs", "use super::super::sim::SimDevice;"),
        ("providers/mlx5/mod.rs", "use super::{verbs::VerbsCq, Sge};"),
        ("providers/mlx5/mod.rs", "use crate::verbs::VerbsDevice;"),
        (
            "providers/mlx5/ts.rs",
            "use rdma_direct_providers::verbs::VerbsDevice;",
        ),
        // The hardware glue builds on the control path, not on the verbs provider.
        ("providers/mlx5/device.rs", "use crate::verbs::VerbsAh;"),
        ("providers/mlx5/ts.rs", "use super::super::verbs::VerbsCq;"),
        (
            "providers/verbs/cq.rs",
            "use crate::{mlx5::Mlx5Cq, Completion};",
        ),
        ("providers/verbs/mod.rs", "mod t { use super::super::sim; }"),
        ("providers/sim/engine.rs", "use crate::verbs::VerbsQp;"),
        (
            "src/bin/rdma-direct/info.rs",
            "use rdma_direct::{control::Device, ffi};",
        ),
        (
            "src/perf.rs",
            "#[path = \"bin/rdma-direct/perf.rs\"] mod cli;",
        ),
    ];
    for (file, src) in cases {
        assert_eq!(check(file, src).len(), 1, "{file}: {src}");
    }
}

#[test]
fn allowed_imports_and_non_code_pass() {
    let cases = [
        (
            "src/core/wire/cqe.rs",
            "use super::seg::Ctrl; use crate::wire::wqe::{self, Opcode};",
        ),
        (
            "src/core/wire/cqe.rs",
            "#[cfg(test)]\nmod tests {\n    use super::*;\n}",
        ),
        (
            "src/core/types/error.rs",
            "use super::{QpState, QpType}; crate::error::errno_name(1);",
        ),
        (
            "src/core/endpoint/rc_pingpong.rs",
            "use super::codec::QpEndpoint; use crate::types::Mtu;",
        ),
        (
            "src/core/control/qp.rs",
            "use crate::endpoint::codec::QpEndpoint; use crate::ffi::{self};",
        ),
        (
            "providers/mlx5/cq.rs",
            "use crate::{Completion, CompletionQueue};",
        ),
        (
            "providers/mlx5/cq.rs",
            "// see crate::sim\n/* crate::verbs::VerbsCq */",
        ),
        (
            "providers/mlx5/cq.rs",
            "let s = \"crate::sim\"; let c = '\"';",
        ),
        (
            "providers/mlx5/device.rs",
            "use rdma_direct_core::control::{self, Context}; use crate::wire::Cqe64;",
        ),
        (
            "providers/sim/provider.rs",
            "use crate::mlx5::{Mlx5Cq, Mlx5Qp};",
        ),
        (
            "providers/verbs/cq.rs",
            "mod tests { use super::super::shared::SqRing; }",
        ),
        (
            "src/bin/rdma-direct/info.rs",
            "use rdma_direct::control::Device; use crate::cli::ffi;",
        ),
        ("src/lib.rs", "pub use rdma_direct_providers as providers;"),
        ("src/core/ffi/ext.rs", "use crate::{Error, Result};"),
        (
            "providers/mlx5/device.rs",
            "use rdma_direct_core::control::{self, Ah, Context, Cq}; use crate::ffi::mlx5dv_ah;",
        ),
    ];
    for (file, src) in cases {
        assert_eq!(check(file, src), Vec::<String>::new(), "{file}: {src}");
    }
}

#[test]
fn paths_resolve_through_groups_supers_crates_and_inline_modules() {
    let t = targets(
        "providers/mlx5/cq.rs",
        "use crate::{a::{b, c::d}, e};\nuse super::f;\nmod tests { use super::*; use super::super::g; }\n\
         use crate::wire::Cqe64; use crate::verbs::VerbsCq; use rdma_direct_core::control::Qp;",
    );
    let t: Vec<String> = t.iter().map(|t| t.join("::")).collect();
    assert_eq!(
        t,
        [
            "providers::a::b",
            "providers::a::c::d",
            "providers::e",
            "wire::Cqe64",
            "providers::verbs::VerbsCq",
            "providers::mlx5::f",
            "providers::mlx5::cq",
            "providers::mlx5::g",
            "control::Qp",
        ]
    );
    let core = targets(
        "src/core/control/qp.rs",
        "use crate::ffi::ibv_qp; use super::Pd;",
    );
    let core: Vec<String> = core.iter().map(|t| t.join("::")).collect();
    assert_eq!(core, ["ffi::ibv_qp", "control::Pd"]);
}

#[test]
fn the_source_stripper_blanks_what_is_not_code() {
    let src = "let a = '\\''; let b = '\"'; // x \"y\"\nlet c = \"use q::r\"; /* use s /* t */ */ let d: &'static str = r#\"z\"#; let e = 'é';\n";
    let code = common::strip_rust(src, false);
    // Same length and lines; only the code words are left.
    assert_eq!(code.len(), src.len());
    assert_eq!(code.lines().count(), 2);
    let words: Vec<&str> = code.split_whitespace().collect();
    assert_eq!(
        words,
        [
            "let", "a", "=", ";", "let", "b", "=", ";", "let", "c", "=", ";", "let", "d:",
            "&'static", "str", "=", ";", "let", "e", "=", ";"
        ]
    );
    // Kept strings: the literals stay, comments still go.
    let kept = common::strip_rust(src, true);
    assert!(kept.contains("\"use q::r\"") && kept.contains("'\\''") && !kept.contains("/*"));
}
