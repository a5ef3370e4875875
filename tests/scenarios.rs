//! The fixture scenarios of `fixtures/scenarios/`.
//!
//! - `every_scenario_parses` (host): all files parse, and every scenario listed below is there.
//! - `every_scenario_passes_on_verbs_device` (device, `#[ignore]`): each scenario runs on the
//!   verbs fallback provider opened on `RDMA_DIRECT_DEVICE` (rxe0 in the guest); any
//!   completion or byte mismatch fails with the runner's diff.

mod scenario;

use scenario::{load_dir, Scenario};

fn scenario_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/scenarios")
}

fn all() -> Vec<Scenario> {
    match load_dir(scenario_dir()) {
        Ok(v) => v,
        Err(e) => panic!("scenario file does not parse: {e}"),
    }
}

#[test]
fn every_scenario_parses() {
    let scs = all();
    let names: Vec<&str> = scs.iter().map(|s| s.name.as_str()).collect();
    for want in [
        "send_recv_1b",
        "send_recv_4k",
        "send_recv_1m",
        "write_offsets",
        "read_offsets",
        "write_imm_zero_sge",
        "multi_sge",
        "inline_send",
        "batch64_last_signaled",
        "atomics",
        "srq_two_qps",
        "wrong_rkey_flush",
        "rnr_retry_exceeded",
        "uc_write",
        "ud_send",
        "rejections",
        "cq_full",
        "error_flush",
        "send_too_long",
    ] {
        assert!(
            names.contains(&want),
            "scenario {want} missing; have {names:?}"
        );
    }
    for s in &scs {
        assert!(!s.desc.is_empty(), "{}: no desc line", s.file);
    }
}

mod common;

/// Every scenario on the verbs provider (rxe0 in the guest). Runs them all, prints one line
/// per scenario, and fails at the end with every failure's diff.
#[test]
#[ignore = "device test: needs RDMA_DIRECT_DEVICE (rxe0 in the guest, tests/guest/run)"]
fn every_scenario_passes_on_verbs_device() {
    use rdma_direct::providers::verbs::VerbsDevice;
    use rdma_direct::providers::{Provider, ProviderKind};
    use scenario::{run_scenario, RunOpts};

    let dev = common::device();
    let mut p = match VerbsDevice::open(&dev) {
        Ok(p) => p,
        Err(e) => panic!("cannot open {dev}: {e}"),
    };
    let mut opts = RunOpts::new(ProviderKind::Verbs);
    opts.gid_index = match common::gid_index() {
        Some(g) => g,
        None => p
            .context()
            .default_gid_index(1)
            .unwrap_or_else(|e| panic!("no GID index: {e}")),
    };
    let only = std::env::var("RDMA_DIRECT_SCENARIO").ok();
    let mut failures = Vec::new();
    let mut ran = 0;
    for sc in all() {
        if only.as_deref().is_some_and(|o| o != sc.name) {
            continue;
        }
        ran += 1;
        match run_scenario(&mut p, &sc, &opts) {
            Ok(r) => println!(
                "scenario {:<24} PASS on {} ({}): {} posted, {} rejected, {} completions, {} bytes checked, {:?}",
                r.name,
                p.device_name(),
                opts.variant,
                r.posted,
                r.rejected,
                r.completions,
                r.bytes_checked,
                r.elapsed
            ),
            Err(f) => {
                println!("scenario {:<24} FAIL", sc.name);
                failures.push(f.to_string());
            }
        }
    }
    let cq_errors = p.check_async().map(|_| p.cq_errors()).unwrap_or(0);
    assert_eq!(cq_errors, 0, "CQ overruns reported by the device");
    assert!(ran > 0, "no scenario selected");
    assert!(
        failures.is_empty(),
        "{} of {ran} scenarios failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
