//! `rdma-direct doctor [-d DEV] [-i PORT] [--peer-mtu N] [--json]`: the troubleshooting order
//! (link, MTU, QP caps, memlock, NUMA/CPU affinity, PCIe) as one line per check. Exit status 0
//! without a `[FAIL]`, 1 with one or without any device.

use super::devices::report_no_devices;
use rdma_direct::doctor::{self, Finding, HostFacts, Level, Section, Sysfs};
use rdma_direct::endpoint::Mtu;
use rdma_direct::verbs::{self, Context, Device};

const USAGE: &str = "\
usage: rdma-direct doctor [-d DEV] [-i PORT] [--peer-mtu N] [--json]

Walks the troubleshooting order for each device and port: physical link, MTU, QP caps,
locked-memory limit, NUMA/CPU affinity, PCIe width and speed. One line per check:
[ ok ], [warn], [FAIL] or [skip], what it saw and, for warn/FAIL, the fix.

  -d, --ib-dev DEV    only this device (default: all)
  -i, --ib-port PORT  only this port (default: all)
  --peer-mtu N        the peer's active MTU in bytes (256..4096), to compare with ours
  --json              one JSON object instead of the text report

exit status: 0 no FAIL, 1 some FAIL (or no device), 2 bad arguments
";

struct Opts {
    dev: Option<String>,
    port: Option<u8>,
    peer_mtu: Option<Mtu>,
    json: bool,
}

fn parse(args: &[String]) -> Result<Option<Opts>, String> {
    let mut o = Opts {
        dev: None,
        port: None,
        peer_mtu: None,
        json: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-h" | "--help" => return Ok(None),
            "--json" => o.json = true,
            "-d" | "--ib-dev" => o.dev = Some(it.next().ok_or("-d needs a device name")?.clone()),
            "-i" | "--ib-port" => {
                let p = it.next().ok_or("-i needs a port number")?;
                o.port = Some(
                    p.parse()
                        .ok()
                        .filter(|&p: &u8| p > 0)
                        .ok_or(format!("bad port '{p}'"))?,
                );
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
            s if s.starts_with("-d") && s.len() > 2 => o.dev = Some(s[2..].to_string()),
            other => return Err(format!("unexpected argument '{other}'")),
        }
    }
    Ok(Some(o))
}

pub fn run(args: &[String]) -> i32 {
    let o = match parse(args) {
        Ok(Some(o)) => o,
        Ok(None) => {
            print!("{USAGE}");
            return 0;
        }
        Err(e) => {
            eprintln!("rdma-direct doctor: {e}\n\n{USAGE}");
            return 2;
        }
    };
    let host = HostFacts::probe();
    let sys = Sysfs::system();
    let mut sections = Vec::new();
    let mut code = 0;

    let devices = match Device::list() {
        Ok(l) if !l.is_empty() => l,
        Ok(_) => {
            report_no_devices(None);
            return finish(no_device_sections(&host), &o, 1);
        }
        Err(e) => {
            report_no_devices(Some(&e));
            return finish(no_device_sections(&host), &o, 1);
        }
    };
    let chosen: Vec<&Device> = match &o.dev {
        Some(name) => match devices.iter().find(|d| &d.name == name) {
            Some(d) => vec![d],
            None => {
                let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
                eprintln!(
                    "rdma-direct doctor: RDMA device '{name}' not found (available: {})",
                    names.join(", ")
                );
                return finish(no_device_sections(&host), &o, 1);
            }
        },
        None => devices.iter().collect(),
    };
    for d in chosen {
        let ports = Context::open(&d.name).and_then(|ctx| doctor::probe_device(&ctx, o.port));
        match ports {
            Ok(ports) => {
                for p in ports {
                    let f = doctor::check_port(&sys, &p, &host, o.peer_mtu);
                    sections.push(Section::for_port(&p, f));
                }
            }
            Err(e) => {
                eprintln!("rdma-direct doctor: {}: {e}", d.name);
                code = 1;
            }
        }
    }
    finish(sections, &o, code)
}

/// Without a device, the host-only checks still run, after a FAIL line that says why.
fn no_device_sections(host: &HostFacts) -> Vec<Section> {
    let why = verbs::no_device_reason().unwrap_or_else(|| {
        "libibverbs lists no device although the kernel has RDMA: check the driver \
         (`rdma link`) and the permissions of /dev/infiniband"
            .to_string()
    });
    let mut findings = vec![Finding {
        level: Level::Fail,
        check: "device",
        saw: "no usable RDMA device".to_string(),
        fix: Some(why),
    }];
    findings.extend(doctor::check_host(host));
    vec![Section {
        title: "host".to_string(),
        device: None,
        port: None,
        findings,
    }]
}

fn finish(sections: Vec<Section>, o: &Opts, code: i32) -> i32 {
    if o.json {
        print!("{}", doctor::render_json(&sections));
    } else {
        print!("{}", doctor::render_text(&sections));
    }
    if doctor::count(&sections, Level::Fail) > 0 {
        1
    } else {
        code
    }
}
