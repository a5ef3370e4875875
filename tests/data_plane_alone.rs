//! An embedder's build of the data plane alone: `default-features = false` compiles wire,
//! types, ffi, the control path, the mlx5 and verbs providers and the endpoint exchange,
//! and nothing of the tools (the `sim`, `perf`, `doctor`, `scenario`, `report` and `cli`
//! features).
//!
//! The test builds the library that way into its own target directory and reads the symbols
//! the compiler emitted (`nm -C` on the facade's rlib and the floors' rlibs it was built on):
//! no function of `perf`, `doctor`, `scenario` or the sim may be there, and the data plane's own
//! functions must be (so the check cannot pass on an empty or unreadable archive). Neither the
//! binary nor the bench rig may be built at all.

use std::path::PathBuf;
use std::process::Command;

fn target_dir() -> PathBuf {
    let base = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    base.join("data-plane-alone")
}

#[test]
fn no_default_features_builds_the_data_plane_and_nothing_else() {
    let dir = target_dir();
    // A rig or binary left by an older build must not decide the checks below.
    let _ = std::fs::remove_file(dir.join("debug").join("rdma-direct"));
    if let Ok(rd) = std::fs::read_dir(dir.join("debug").join("deps")) {
        for e in rd.flatten() {
            if e.file_name()
                .to_string_lossy()
                .starts_with("librdma_direct_rig")
            {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let st = Command::new(env!("CARGO"))
        .args([
            "build",
            "--quiet",
            "-p",
            "rdma-direct",
            "--no-default-features",
            "--target-dir",
        ])
        .arg(&dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        // A host build whatever the outer run's target: the symbols are the same.
        .env_remove("CARGO_BUILD_TARGET")
        .status()
        .expect("cargo runs");
    assert!(st.success(), "cargo build --no-default-features failed");

    let out = dir.join("debug");
    assert!(
        !out.join("rdma-direct").exists(),
        "the CLI binary was built without the cli feature"
    );
    // The facade's rlib, and the floors it was built on (in deps/, named with a hash).
    let mut rlibs = vec![out.join("librdma_direct.rlib")];
    for e in std::fs::read_dir(out.join("deps"))
        .expect("deps/ exists")
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("librdma_direct_") && name.ends_with(".rlib") {
            assert!(
                !name.starts_with("librdma_direct_rig"),
                "the bench rig was built without the cli feature: {name}"
            );
            rlibs.push(e.path());
        }
    }
    let mut syms = String::new();
    for rlib in &rlibs {
        let nm = Command::new("nm")
            .args(["-C", "--defined-only"])
            .arg(rlib)
            .output()
            .expect("nm (binutils) runs");
        assert!(nm.status.success(), "nm {} failed", rlib.display());
        syms.push_str(&String::from_utf8_lossy(&nm.stdout));
    }

    for present in [
        "rdma_direct_core::wire::",
        "rdma_direct_core::control::",
        "rdma_direct_core::endpoint::",
        "rdma_direct_providers::mlx5::",
        "rdma_direct_providers::verbs::",
        "rdma_direct_providers::connect::",
    ] {
        assert!(
            syms.contains(present),
            "the data plane build lacks {present} (the symbol scan reads nothing?)"
        );
    }
    for absent in [
        "rdma_direct::perf::",
        "rdma_direct::doctor::",
        "rdma_direct::scenario::",
        "rdma_direct::report::",
        "rdma_direct_providers::sim::",
    ] {
        let hits: Vec<&str> = syms
            .lines()
            .filter(|l| l.contains(absent))
            .take(3)
            .collect();
        assert!(
            hits.is_empty(),
            "the data plane build holds {absent}: {hits:#?}"
        );
    }
}
