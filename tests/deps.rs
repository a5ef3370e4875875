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
use std::path::{Path, PathBuf};

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

#[path = "deps/modules.rs"]
mod modules;
