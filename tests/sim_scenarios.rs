//! Every fixture scenario of `fixtures/scenarios/` on the software mlx5 device through the
//! production mlx5 provider (the `mlx5` variant lines apply), in deterministic mode and with
//! the device thread. Same files as on rxe.

use rdma_direct::providers::sim::SimDevice;
use rdma_direct::providers::ProviderKind;
use rdma_direct::scenario::{load_dir, run_scenario, RunOpts, Scenario};

fn all() -> Vec<Scenario> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/scenarios");
    load_dir(dir).unwrap_or_else(|e| panic!("scenario file does not parse: {e}"))
}

/// Scenarios that fail today because of a gap in the *mlx5 provider* (not in the sim), with
/// the exact failure they produce. The test asserts they still fail exactly so: when the
/// provider is fixed the test fails here and the entry must be removed. Nothing else may
/// fail.
const KNOWN_MLX5_PROVIDER_GAPS: &[(&str, &str)] = &[
    // Mlx5Sq only checks free WQEBBs, not the count of outstanding requests against the
    // granted max_send_wr (providers/mod.rs: "A send queue holds at most max_send_wr").
    (
        "rejections",
        "rejections.scn:25 (post):\nwr=5: expected rejection 'queue_full', but the post was accepted",
    ),
    // Mlx5Qp stays in RTS after its CQ returned an error completion for it, so a post after
    // the error is accepted instead of refused with bad_state (rxe moves the QP to ERR).
    (
        "wrong_rkey_flush",
        "wrong_rkey_flush.scn:23 (post):\nwr=5: expected rejection 'bad_state', but the post was accepted",
    ),
];

fn run_all(threaded: bool) {
    let mut opts = RunOpts::new(ProviderKind::Sim);
    opts.poll_timeout = std::time::Duration::from_secs(20);
    opts.settle = std::time::Duration::from_millis(if threaded { 20 } else { 1 });
    let only = std::env::var("RDMA_DIRECT_SCENARIO").ok();
    let mut failures = Vec::new();
    let mut ran = 0;
    for sc in all() {
        if only.as_deref().is_some_and(|o| o != sc.name) {
            continue;
        }
        // A fresh device per scenario: no state leaks from one into the next.
        let mut dev = SimDevice::new();
        if threaded {
            dev.start_device_thread().unwrap();
        }
        ran += 1;
        match run_scenario(&mut dev, &sc, &opts) {
            Ok(r) => {
                assert!(
                    !KNOWN_MLX5_PROVIDER_GAPS.iter().any(|(n, _)| *n == sc.name),
                    "{} passes now: remove it from KNOWN_MLX5_PROVIDER_GAPS",
                    sc.name
                );
                println!(
                "scenario {:<24} PASS on sim ({}): {} posted, {} rejected, {} completions, {} bytes checked",
                r.name,
                if threaded { "device thread" } else { "deterministic" },
                r.posted,
                r.rejected,
                r.completions,
                r.bytes_checked
                )
            }
            Err(f) => {
                let msg = f.to_string();
                match KNOWN_MLX5_PROVIDER_GAPS.iter().find(|(n, _)| *n == sc.name) {
                    Some((_, want)) if msg.contains(want) => {
                        println!("scenario {:<24} KNOWN GAP (mlx5 provider): {want}", sc.name)
                    }
                    _ => {
                        println!("scenario {:<24} FAIL", sc.name);
                        failures.push(msg);
                    }
                }
                continue;
            }
        }
        assert!(
            dev.take_events().is_empty() || sc.name == "cq_full",
            "{}: unexpected async events",
            sc.name
        );
    }
    assert!(ran >= 18 || only.is_some(), "only {ran} scenarios ran");
    assert!(
        failures.is_empty(),
        "{} of {ran} scenarios failed on the sim:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn every_scenario_passes_on_the_sim_deterministic() {
    run_all(false);
}

#[test]
fn every_scenario_passes_on_the_sim_device_thread() {
    run_all(true);
}
