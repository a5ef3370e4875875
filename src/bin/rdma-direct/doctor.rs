//! `rdma-direct doctor [-d DEV] [-i PORT] [--peer-mtu N] [--json]`: the troubleshooting order
//! (link, MTU, QP caps, memlock, NUMA/CPU affinity, PCIe) of [`rdma_direct::doctor`], printed
//! one line per finding: `[ ok ]`, `[warn]`, `[FAIL]` or `[skip]`, the check's name, what it
//! saw and, for `[warn]`/`[FAIL]`, the fix; or one JSON object with `--json`. Exit status 0
//! without a `[FAIL]`, 1 with one or without any device. With `--latency [--cpu N]`: the
//! tuning checks of [`rdma_direct::doctor::latency`] for the CPU that will poll instead, in
//! the same form, and the verdict (ready, or the first thing to fix).

use super::devices::{why_no_device, DevPort};
use rdma_direct::control::{Context, Device};
use rdma_direct::doctor::report::{render_json, render_text};
use rdma_direct::doctor::{self, Finding, HostFacts, Level, Section, Sysfs};
use rdma_direct::endpoint::Mtu;
use rdma_direct::report::json;

const USAGE: &str = "\
usage: rdma-direct doctor [-d DEV] [-i PORT] [--peer-mtu N] [--json]
       rdma-direct doctor --latency [-d DEV] [--cpu N] [--json]

Walks the troubleshooting order for each device and port: physical link, MTU, QP caps,
locked-memory limit, NUMA/CPU affinity, PCIe width and speed. One line per check:
[ ok ], [warn], [FAIL] or [skip], what it saw and, for warn/FAIL, the fix.

  -d, --ib-dev DEV    only this device (default: all; sim0: the host checks only)
  -i, --ib-port PORT  only this port (default: all)
  --peer-mtu N        the peer's active MTU in bytes (256..4096), to compare with ours
  --json              one JSON object instead of the text report
  --latency           the tuning checks for the CPU that will poll instead: isolcpus or
                      an isolated cpuset, nohz_full, rcu_nocbs, IRQ affinity (DEV's IRQs:
                      FAIL), irqbalance, timer migration, watchdogs, vm.stat_interval,
                      governor, C-states, SMT sibling (busy: FAIL), NUMA, THP, swap, memlock
  --cpu N             with --latency: that CPU (default: one of DEV's local CPUs, else the
                      last CPU this process may run on)

exit status: 0 no FAIL, 1 some FAIL (or no device), 2 bad arguments
";

struct Opts {
    /// `-d`, `-i`.
    at: DevPort,
    peer_mtu: Option<Mtu>,
    json: bool,
    /// `--latency`, `--cpu`.
    latency: bool,
    cpu: Option<u32>,
}

fn parse(args: &[String]) -> Result<Option<Opts>, String> {
    let mut o = Opts {
        at: DevPort::default(),
        peer_mtu: None,
        json: false,
        latency: false,
        cpu: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-h" | "--help" => return Ok(None),
            "--json" => o.json = true,
            "--latency" => o.latency = true,
            "--cpu" => {
                let v = it.next().ok_or("--cpu needs a CPU number")?;
                o.cpu = Some(crate::number("--cpu", v)?);
            }
            "--peer-mtu" => {
                let m = it.next().ok_or("--peer-mtu needs an MTU in bytes")?;
                o.peer_mtu = Some(
                    m.parse()
                        .ok()
                        .and_then(Mtu::from_bytes)
                        .ok_or(format!("bad MTU '{m}' (256, 512, 1024, 2048 or 4096)"))?,
                );
            }
            other if o.at.take(other, &mut it)? => {}
            other => return Err(format!("unexpected argument '{other}'")),
        }
    }
    if o.cpu.is_some() && !o.latency {
        return Err("--cpu is for --latency".into());
    }
    Ok(Some(o))
}

pub fn run(args: &[String]) -> i32 {
    let o = match crate::options_or_exit("doctor", USAGE, parse(args)) {
        Ok(o) => o,
        Err(status) => return status,
    };
    let host = HostFacts::probe();
    let sys = Sysfs::system();
    if o.latency {
        return latency(&sys, &host, &o);
    }
    let mut sections = Vec::new();
    let mut code = 0;

    if o.at.dev.as_deref() == Some(super::provider::SIM_DEVICE) {
        return finish(sim_sections(&host), &o, 0);
    }
    if let Some(name) = &o.at.dev {
        // The diagnosis every command gives for a device that is not there; the checks
        // below still run and say what they can of the host.
        if let Err(e) = super::provider::find_device(name) {
            errln!("rdma-direct doctor: {e}");
        }
    }
    let devices = match Device::list() {
        Ok(l) if !l.is_empty() => l,
        // The FAIL line of the device check says why, once.
        Ok(_) => return finish(no_device_sections(&host, None), &o, 1),
        Err(e) => return finish(no_device_sections(&host, Some(&e)), &o, 1),
    };
    let chosen = o.at.chosen(&devices);
    if chosen.is_empty() {
        // `-d` names another device: said above, in the words every command uses.
        return finish(no_device_sections(&host, None), &o, 1);
    }
    for d in chosen {
        let ports = Context::open(&d.name).and_then(|ctx| doctor::probe_device(&ctx, o.at.port));
        match ports {
            Ok(ports) => {
                for p in ports {
                    let mut f = doctor::check_port(&sys, &p, &host, o.peer_mtu);
                    if o.peer_mtu.is_none() {
                        name_peer_mtu_flag(&mut f);
                    }
                    sections.push(Section::for_port(&p, f));
                }
            }
            Err(e) => {
                errln!("rdma-direct doctor: {}: {e}", d.name);
                code = 1;
            }
        }
    }
    finish(sections, &o, code)
}

/// Without a device, the host-only checks still run, after a FAIL line that says why (the
/// reason every command gives; `err`: what listing the devices returned).
fn no_device_sections(host: &HostFacts, err: Option<&rdma_direct::Error>) -> Vec<Section> {
    // A listing error other than a missing library is not the reason: the kernel's is.
    let err = err.filter(|e| matches!(e, rdma_direct::Error::LibraryMissing { .. }));
    let why = why_no_device(
        err,
        "libibverbs lists no device although the kernel has RDMA: check the driver \
         (`rdma link`) and the permissions of /dev/infiniband",
    );
    let device = Finding {
        level: Level::Fail,
        check: "device",
        saw: "no usable RDMA device".to_string(),
        fix: Some(why),
    };
    host_sections(device, host)
}

/// One section, "host": `device` (what stands for the device checks), then the host's.
fn host_sections(device: Finding, host: &HostFacts) -> Vec<Section> {
    let mut findings = vec![device];
    findings.extend(doctor::check_host(host));
    vec![Section {
        title: "host".to_string(),
        device: None,
        port: None,
        findings,
    }]
}

/// The skipped peer-MTU check, in this command's words: the flag that gives the MTU.
fn name_peer_mtu_flag(findings: &mut [Finding]) {
    for f in findings.iter_mut() {
        if f.check == "peer mtu" && f.level == Level::Skip {
            f.saw =
                "no --peer-mtu given (the peer's active_mtu from its `rdma-direct info`)".into();
        }
    }
}

/// `-d sim0`: the software device has no link, MTU, PCIe slot or NUMA node to check; the
/// host's checks run.
fn sim_sections(host: &HostFacts) -> Vec<Section> {
    let device = Finding {
        level: Level::Skip,
        check: "device",
        saw: format!(
            "{} is the software mlx5 device in this process: no link, MTU, PCIe or NUMA \
             placement to check",
            super::provider::SIM_DEVICE
        ),
        fix: None,
    };
    host_sections(device, host)
}

/// `--latency`: the polling CPU's tuning checks as one section, then the verdict (text: a
/// last line; JSON: a `verdict` field).
fn latency(sys: &Sysfs, host: &HostFacts, o: &Opts) -> i32 {
    // The software device has no IRQs.
    let dev =
        o.at.dev
            .as_deref()
            .filter(|d| *d != super::provider::SIM_DEVICE);
    let Some(cpu) = o
        .cpu
        .or_else(|| doctor::latency::default_cpu(sys, dev, &host.allowed_cpus))
    else {
        errln!(
            "rdma-direct doctor: this process's CPU list is unreadable: name the CPU with --cpu"
        );
        return 1;
    };
    let findings = doctor::latency::check_latency(sys, cpu, dev, host);
    let verdict = doctor::latency::latency_verdict(cpu, &findings);
    let sections = vec![Section {
        title: format!(
            "latency: CPU {cpu}{}",
            dev.map_or(String::new(), |d| format!(" ({d})"))
        ),
        device: dev.map(String::from),
        port: None,
        findings,
    }];
    let out = if o.json {
        let j = render_json(&sections);
        let j = j.trim_end().strip_suffix('}').unwrap_or(&j);
        format!("{j},\"verdict\":{}}}\n", json::string(&verdict))
    } else {
        format!("{}{verdict}\n", render_text(&sections))
    };
    out!("{out}");
    i32::from(doctor::count(&sections, Level::Fail) > 0)
}

fn finish(sections: Vec<Section>, o: &Opts, code: i32) -> i32 {
    if o.json {
        out!("{}", render_json(&sections));
    } else {
        out!("{}", render_text(&sections));
    }
    if doctor::count(&sections, Level::Fail) > 0 {
        1
    } else {
        code
    }
}
