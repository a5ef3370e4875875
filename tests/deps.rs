//! The workspace depends on exactly libc, memmap2, crossbeam-utils and static_assertions
//! (besides its own path crates), and has no build script (rdma-core is loaded at run time,
//! never linked). Each Cargo.toml is parsed by hand: every dependency table counts, whatever
//! its spelling (`[dependencies]`, `[dev-dependencies]`, `[build-dependencies]`,
//! `[target.'cfg(..)'.dependencies]`, `[dependencies.name]`, `[workspace.dependencies]`).
//!
//! The floors are crates, so Cargo itself refuses an upward import between them:
//! `rdma-direct-core` (src/core) depends on no crate of the workspace, `rdma-direct-providers`
//! (providers/) on the core alone, the rig (benches/rig) on those two, and `rdma-direct` (the
//! facade, rdma_cm, the tools and the CLI) on all. `the_floors_are_crates` checks the
//! manifests say exactly that. Inside a floor, modules import only downwards:
//! `modules_import_only_downwards` checks every source file of `src/` and `providers/` against
//! the rules of `rules()`, and the tests after it prove each rule fires on a forbidden import
//! and stays quiet on allowed ones.

mod common;

use std::collections::BTreeSet;

const ALLOWED: [&str; 4] = ["libc", "memmap2", "crossbeam-utils", "static_assertions"];

/// Dependency names per table, from the text of a Cargo.toml.
fn dependencies(toml: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut table = String::new();
    for raw in toml.lines() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        if line.starts_with('[') {
            table = line
                .trim_matches(|c| c == '[' || c == ']')
                .trim()
                .to_string();
            // `[dependencies.foo]` / `[target.x.dev-dependencies.foo]`: the table names one.
            let parts: Vec<&str> = table.split('.').collect();
            if let Some(pos) = parts.iter().rposition(|p| is_dep_table(p)) {
                if pos + 1 < parts.len() {
                    out.push((parts[..=pos].join("."), parts[pos + 1..].join(".")));
                }
            }
            continue;
        }
        let last = table.split('.').next_back().unwrap_or("");
        if is_dep_table(last) {
            if let Some((key, _)) = line.split_once('=') {
                let key = key.trim().trim_matches('"');
                // `foo.workspace = true` names `foo`.
                let name = key.split('.').next().unwrap_or(key).to_string();
                out.push((table.clone(), name));
            }
        }
    }
    out
}

fn is_dep_table(s: &str) -> bool {
    matches!(
        s.trim_matches(|c| c == '\'' || c == '"'),
        "dependencies"
            | "dev-dependencies"
            | "build-dependencies"
            | "dev_dependencies"
            | "build_dependencies"
    )
}

/// The workspace's manifests, relative to the root, and the crates they name.
const MANIFESTS: [(&str, &str); 4] = [
    ("Cargo.toml", "rdma-direct"),
    ("src/core/Cargo.toml", "rdma-direct-core"),
    ("providers/Cargo.toml", "rdma-direct-providers"),
    ("benches/rig/Cargo.toml", "rdma-direct-rig"),
];

fn manifest(rel: &str) -> String {
    std::fs::read_to_string(format!("{}/{rel}", env!("CARGO_MANIFEST_DIR")))
        .unwrap_or_else(|e| panic!("read {rel}: {e}"))
}

fn is_workspace_crate(name: &str) -> bool {
    MANIFESTS.iter().any(|(_, n)| *n == name)
}

#[test]
fn only_the_four_dependencies() {
    for (rel, _) in MANIFESTS {
        let deps = dependencies(&manifest(rel));
        let extra: Vec<String> = deps
            .iter()
            .filter(|(_, n)| !ALLOWED.contains(&n.as_str()) && !is_workspace_crate(n))
            .map(|(t, n)| format!("[{t}] {n}"))
            .collect();
        assert!(
            extra.is_empty(),
            "{rel} may depend only on {ALLOWED:?} and the workspace's crates; found {extra:?}"
        );
    }
    let normal: BTreeSet<&str> = MANIFESTS
        .iter()
        .flat_map(|(rel, _)| dependencies(&manifest(rel)))
        .filter(|(t, n)| t == "dependencies" && !is_workspace_crate(n))
        .map(|(_, n)| ALLOWED.iter().copied().find(|a| *a == n).unwrap_or("?"))
        .collect();
    assert_eq!(normal, ALLOWED.iter().copied().collect::<BTreeSet<_>>());
}

#[test]
fn the_floors_are_crates() {
    let floors: [(&str, &[&str]); 4] = [
        ("src/core/Cargo.toml", &[]),
        ("providers/Cargo.toml", &["rdma-direct-core"]),
        (
            "benches/rig/Cargo.toml",
            &["rdma-direct-core", "rdma-direct-providers"],
        ),
        (
            "Cargo.toml",
            &[
                "rdma-direct-core",
                "rdma-direct-providers",
                "rdma-direct-rig",
            ],
        ),
    ];
    for (rel, want) in floors {
        let got: BTreeSet<String> = dependencies(&manifest(rel))
            .into_iter()
            .filter(|(t, n)| t == "dependencies" && is_workspace_crate(n))
            .map(|(_, n)| n)
            .collect();
        let want: BTreeSet<String> = want.iter().map(|s| s.to_string()).collect();
        assert_eq!(got, want, "{rel}: the workspace crates it builds on");
    }
}

#[test]
fn no_build_script_links_rdma_core() {
    let dir = env!("CARGO_MANIFEST_DIR");
    for (rel, _) in MANIFESTS {
        let at = Path::new(dir).join(rel);
        let build = at
            .parent()
            .expect("a manifest has a directory")
            .join("build.rs");
        // The one build script allowed is the top package's, which records the source tree
        // (git describe) for the reports: it must link nothing and ask for no crate.
        if build.exists() {
            assert_eq!(
                rel,
                "Cargo.toml",
                "{} exists: rdma-core must be loaded with dlopen, not linked",
                build.display()
            );
            let text = std::fs::read_to_string(&build).unwrap();
            for banned in ["rustc-link", "extern crate", "cargo:rustc-cdylib"] {
                assert!(
                    !text.contains(banned),
                    "{} says {banned:?}: a build script links nothing",
                    build.display()
                );
            }
        }
        for line in manifest(rel).lines() {
            let key = line.split('=').next().unwrap_or("").trim();
            assert!(key != "build" && key != "links", "{rel} sets {key:?}");
        }
    }
}

#[test]
fn the_parser_sees_every_kind_of_table() {
    let toml = r#"
[package]
name = "x"
build = "b.rs"

[dependencies]
libc = "0.2"
serde = { version = "1", features = ["derive"] } # not allowed

[dev-dependencies]
proptest = "1"

[build-dependencies]
cc = "1"

[target.'cfg(unix)'.dependencies]
nix = "0.27"

[dependencies.tokio]
version = "1"

[workspace.dependencies]
anyhow = "1"

[features]
default = []
"#;
    let names: Vec<String> = dependencies(toml).into_iter().map(|(_, n)| n).collect();
    assert_eq!(
        names,
        ["libc", "serde", "proptest", "cc", "nix", "tokio", "anyhow"]
    );
}

// ---------------------------------------------------------------------------------------------
// The dependency rule between modules
// ---------------------------------------------------------------------------------------------
//
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

use std::path::{Path, PathBuf};

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
