//! `rdma-direct selftest [-d DEV] [--json]`: the first command to run on a new device. A
//! ladder of rungs, each a small real operation; the first that fails stops the ladder with
//! what was expected, what happened, and what to send back.
//!
//! The rungs (see `rungs.rs`): load libibverbs / libmlx5 → list → open → port and GID →
//! PD and MR → CQ → thread domain and parent domain → DV QP (`mlx5dv_create_qp`) →
//! `mlx5dv_init_obj` sanity (ring sizes, strides, dbrec alignment, bfreg size) → RESET→RTS
//! on a self-connected RC QP → one inline WRITE through the 8-byte doorbell → one through
//! BlueFlame → SEND/RECV → READ → atomics → the CQE fields of all of them → a timestamped CQ
//! and the clock-info page → arm and wake through a completion channel → teardown in
//! libmlx5's order. Without `-d` the ladder runs on the software mlx5 device (`sim`); on a
//! device that is not mlx5 (rxe) the verbs provider runs it. Rungs that do not apply (the
//! mlx5-only ones there) are marked `n/a` with the reason. `-d sim0` is the software device
//! (as everywhere). `--json` always prints one document: a device that is not there is the
//! ladder stopped at its list rung with the diagnosis. Exit status: 0 when no rung failed,
//! 1 at the first failure, 2 for bad options.

use rdma_direct::selftest::{self as ladder, Rung};

const USAGE: &str = "\
usage: rdma-direct selftest [-d DEV] [-x GID_INDEX] [--json]
  the first-light ladder: each rung a small real operation, stopping at the first failure
  -d DEV          the device (default, and -d sim0: the software mlx5 device)
  -x GID_INDEX    the GID to self-connect through (default: the first non-zero one)
  --json          one JSON object on stdout (for a bug report) instead of the table
";

/// Print a rung as it ends (the table, not `--json`).
fn show(i: usize, r: &Rung) {
    out!("{}", ladder::text::rung(i, r));
}

struct Opts {
    dev: Option<String>,
    gid_index: Option<u8>,
    json: bool,
}

fn parse(args: &[String]) -> Result<Option<Opts>, String> {
    let mut o = Opts {
        dev: None,
        gid_index: None,
        json: false,
    };
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let mut value = |flag: &str| -> Result<String, String> {
            i += 1;
            args.get(i)
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match a {
            "-h" | "--help" => return Ok(None),
            "--json" => o.json = true,
            "-d" | "--ib-dev" => o.dev = Some(value(a)?),
            "-x" | "--gid-index" => {
                let v = value(a)?;
                o.gid_index = Some(
                    v.parse()
                        .map_err(|_| format!("{a} '{v}': a GID index 0..=255"))?,
                );
            }
            other => return Err(format!("unknown option '{other}'")),
        }
        i += 1;
    }
    Ok(Some(o))
}

/// What a user with hardware sends back.
const SEND_BACK: &str = "send back: this output (`rdma-direct selftest -d DEV --json`), \
`ibv_devinfo -v -d DEV`, the rdma-core version (`dpkg -l libibverbs1 ibverbs-providers` or \
`rpm -q rdma-core`), the kernel version (`uname -r`) and the firmware (fw_ver above)";

/// Entry point of `rdma-direct selftest`.
pub fn run(args: &[String]) -> i32 {
    let o = match crate::options_or_exit("selftest", USAGE, parse(args)) {
        Ok(o) => o,
        Err(status) => return status,
    };
    let name = o
        .dev
        .clone()
        .unwrap_or_else(|| super::provider::SIM_DEVICE.into());
    let dev = super::provider::device_arg(o.dev.clone());
    let mut quiet = |_: usize, _: &Rung| {};
    let seen: &mut dyn FnMut(usize, &Rung) = if o.json { &mut quiet } else { &mut show };
    let (why, report) = match dev.as_deref().map(super::provider::find_device) {
        // `--json` always gives a document: a device that is not there is the ladder
        // stopping at its list rung, with the diagnosis.
        Some(Err(e)) if o.json => (
            "none (no such device)".to_string(),
            ladder::missing(&e, seen),
        ),
        _ => {
            let (kind, why) = match super::provider::select(
                "selftest",
                super::provider::Choice::Auto,
                dev.as_deref(),
            ) {
                Ok(k) => k,
                Err(status) => return status,
            };
            if !o.json {
                outln!("rdma-direct selftest: {name}, provider {why}");
            }
            (why, ladder::climb(kind, dev.as_deref(), o.gid_index, seen))
        }
    };
    let (passed, na, failed) = (report.passed(), report.not_applicable(), report.failed());
    if o.json {
        outln!("{}", ladder::text::json(&name, &why, &report.rungs, failed));
    } else {
        match failed {
            None if na == 0 => outln!("selftest: all {passed} rungs passed"),
            None => outln!(
                "selftest: no rung failed: {passed} passed, {na} not applicable (of {})",
                report.rungs.len()
            ),
            Some(i) => {
                outln!(
                    "selftest: stopped at rung {} ({}) after {passed} passed",
                    i + 1,
                    report.rungs[i].name
                );
                outln!("{}", SEND_BACK.replace("DEV", &name));
            }
        }
    }
    i32::from(failed.is_some())
}
