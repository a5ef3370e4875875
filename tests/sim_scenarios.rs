//! Every fixture scenario of `fixtures/scenarios/` on the software mlx5 device through the
//! production mlx5 provider (the `mlx5` variant lines apply), in deterministic mode and with
//! the device thread. Same files, same expectations as on rxe: a scenario that fails fails
//! the test.

use rdma_direct::providers::sim::SimDevice;
use rdma_direct::providers::ProviderKind;
use rdma_direct::scenario::{load_dir, run_scenario, RunOpts, Scenario};

fn all() -> Vec<Scenario> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/scenarios");
    load_dir(dir).unwrap_or_else(|e| panic!("scenario file does not parse: {e}"))
}

fn run_all(threaded: bool, cqe_size: u32) {
    let mut opts = RunOpts::new(ProviderKind::Sim, "sim0");
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
        dev.set_cqe_size(cqe_size).unwrap();
        if threaded {
            dev.start_device_thread().unwrap();
        }
        ran += 1;
        match run_scenario(&mut dev, &sc, &opts) {
            Ok(r) => {
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
                println!("scenario {:<24} FAIL", sc.name);
                failures.push(f.to_string());
                continue;
            }
        }
        let ev = dev.take_events();
        assert!(ev.is_empty(), "{}: unexpected async events {ev:?}", sc.name);
        let st = dev.stats();
        assert_eq!(
            st.bf_mismatches, 0,
            "{}: BlueFlame copy differed from its WQE",
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
    run_all(false, 64);
}

#[test]
fn every_scenario_passes_on_the_sim_with_128_byte_cqes() {
    run_all(false, 128);
}

#[test]
fn every_scenario_passes_on_the_sim_device_thread() {
    run_all(true, 64);
}
