//! The crate depends on exactly libc, memmap2, crossbeam-utils and static_assertions, and
//! has no build script (rdma-core is loaded at run time, never linked). Cargo.toml is parsed
//! by hand: every dependency table counts, whatever its spelling (`[dependencies]`,
//! `[dev-dependencies]`, `[build-dependencies]`, `[target.'cfg(..)'.dependencies]`,
//! `[dependencies.name]`, `[workspace.dependencies]`).

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

#[test]
fn only_the_four_dependencies() {
    let toml = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .expect("read Cargo.toml");
    let deps = dependencies(&toml);
    let extra: Vec<String> = deps
        .iter()
        .filter(|(_, n)| !ALLOWED.contains(&n.as_str()))
        .map(|(t, n)| format!("[{t}] {n}"))
        .collect();
    assert!(
        extra.is_empty(),
        "Cargo.toml may depend only on {ALLOWED:?}; found {extra:?}"
    );
    let normal: BTreeSet<&str> = deps
        .iter()
        .filter(|(t, _)| t == "dependencies")
        .map(|(_, n)| n.as_str())
        .collect();
    assert_eq!(normal, ALLOWED.iter().copied().collect::<BTreeSet<_>>());
}

#[test]
fn no_build_script_links_rdma_core() {
    let dir = env!("CARGO_MANIFEST_DIR");
    assert!(
        !std::path::Path::new(&format!("{dir}/build.rs")).exists(),
        "build.rs exists: rdma-core must be loaded with dlopen, not linked"
    );
    let toml = std::fs::read_to_string(format!("{dir}/Cargo.toml")).unwrap();
    for line in toml.lines() {
        let key = line.split('=').next().unwrap_or("").trim();
        assert!(key != "build" && key != "links", "Cargo.toml sets {key:?}");
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
