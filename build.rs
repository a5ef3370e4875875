//! Records which source tree this build is: `git describe --always --dirty` of the package
//! directory at build time, as the compile-time variable `RDMA_DIRECT_COMMIT` (read by
//! `perf::host::BUILD_COMMIT` for the measurement reports). Without git, or outside a git
//! checkout (a packaged crate), the variable is not set and the reports say "unknown".
//!
//! This script runs `git` and nothing else: it links nothing (rdma-core is loaded at run
//! time with dlopen, never linked) and uses std alone.

use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?;
    let t = s.trim();
    (!t.is_empty()).then(|| t.to_string())
}

fn main() {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dir = Path::new(&dir);
    // Rerun when the sources change (for "-dirty") and when git's HEAD or index moves (a
    // commit, a checkout).
    for watched in ["src", "providers", "benches/rig", "Cargo.toml", "build.rs"] {
        println!("cargo:rerun-if-changed={watched}");
    }
    if let Some(git_dir) = git(dir, &["rev-parse", "--absolute-git-dir"]) {
        let git_dir = Path::new(&git_dir);
        for f in ["HEAD", "index"] {
            println!("cargo:rerun-if-changed={}", git_dir.join(f).display());
        }
        if let Some(r) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
            if let Some(common) = git(dir, &["rev-parse", "--git-common-dir"]) {
                let common = dir.join(common);
                println!("cargo:rerun-if-changed={}", common.join(r).display());
            }
        }
    }
    if let Some(d) = git(dir, &["describe", "--always", "--dirty", "--tags"]) {
        println!("cargo:rustc-env=RDMA_DIRECT_COMMIT={d}");
    }
}
