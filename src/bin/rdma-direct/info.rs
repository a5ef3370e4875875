//! `rdma-direct info [-d DEV] [-i PORT] [-v]`: device and port attributes and the GID table,
//! laid out like `ibv_devinfo` (with `-v`, the same extra fields as `ibv_devinfo -v`), with
//! the provider `--provider auto` would run on each device. The software mlx5 device (`sim0`)
//! is listed after the hardware, marked as software; `-d sim0` (or `--provider sim`) shows it
//! alone.

use super::devices::{note_no_devices, DevPort};
use super::provider::{self, Choice, DeviceFacts, SIM_DEVICE};
use rdma_direct::control::{self, Context, Device};
use rdma_direct::report::devinfo;

const USAGE: &str = "\
usage: rdma-direct info [-d DEV] [-i PORT] [-v] [--provider P]

  -d, --ib-dev DEV    only this device (default: all, then the software device sim0)
  -i, --ib-port PORT  only this port (default: all)
  -v, --verbose       all device and port attributes
      --provider P    auto (default), mlx5, verbs: the provider line of each device says
                      what perf/pingpong would run with P (refused where they would
                      refuse); sim: only the software device
";

struct Opts {
    /// `-d`, `-i`.
    at: DevPort,
    verbose: bool,
    provider: Choice,
}

fn parse(args: &[String]) -> Result<Option<Opts>, String> {
    let mut o = Opts {
        at: DevPort::default(),
        verbose: false,
        provider: Choice::Auto,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-h" | "--help" => return Ok(None),
            "-v" | "--verbose" => o.verbose = true,
            "--provider" => {
                o.provider =
                    crate::provider::parse_choice(it.next().ok_or("--provider needs a value")?)?;
            }
            other if o.at.take(other, &mut it)? => {}
            other => return Err(format!("unexpected argument '{other}'")),
        }
    }
    Ok(Some(o))
}

pub fn run(args: &[String]) -> i32 {
    let o = match crate::options_or_exit("info", USAGE, parse(args)) {
        Ok(o) => o,
        Err(status) => return status,
    };
    let sim_only = o.at.dev.as_deref() == Some(SIM_DEVICE)
        || o.provider == Choice::Force(rdma_direct::providers::ProviderKind::Sim);
    if sim_only {
        if let Some(d) = o.at.dev.as_deref().filter(|d| *d != SIM_DEVICE) {
            errln!("rdma-direct info: --provider sim shows the software device; not '{d}'");
            return 2;
        }
        return match print_sim(&o) {
            Ok(()) => 0,
            Err(e) => {
                errln!("rdma-direct info: {SIM_DEVICE}: {e}");
                1
            }
        };
    }
    if let Some(name) = &o.at.dev {
        if let Err(e) = provider::find_device(name) {
            errln!("rdma-direct info: {e}");
            return 1;
        }
    }
    // Without RDMA devices the software device is still listed (exit status 0); a note on
    // stderr says why there is no other.
    let (list, listing_error) = match Device::list() {
        Ok(l) => (l, None),
        Err(e) => (Vec::new(), Some(e)),
    };
    let mut code = 0;
    for d in o.at.chosen(&list) {
        if let Err(e) = print_device(d, &o) {
            errln!("rdma-direct info: {}: {e}", d.name);
            code = 1;
        }
    }
    if o.at.dev.is_none() {
        if !list.is_empty() {
            outln!();
        }
        match print_sim(&o) {
            // Only the software device: a note says why there is no other.
            Ok(()) if list.is_empty() => note_no_devices(listing_error.as_ref()),
            Ok(()) => {}
            Err(e) => {
                errln!("rdma-direct info: {SIM_DEVICE}: {e}");
                code = 1;
            }
        }
    }
    code
}

/// The software device, clearly marked: its port's MTU and GID come from a QP's endpoint.
fn print_sim(o: &Opts) -> rdma_direct::Result<()> {
    use rdma_direct::providers::sim::SimDevice;
    use rdma_direct::providers::{ConnectOpts, Provider, QpConfig, QpType};
    if matches!(o.at.port, Some(p) if p != 1) {
        return Err(rdma_direct::Error::NotFound {
            what: format!("port {}", o.at.port.unwrap_or(0)),
            hint: format!("{SIM_DEVICE} has one port (1)"),
        });
    }
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd()?;
    // Room for the default QP's queues (create_qp refuses a CQ that cannot absorb them).
    let mut cq = dev.create_cq(256)?;
    let qp = dev.create_qp(&pd, &mut cq, None, None, &QpConfig::new(QpType::Rc))?;
    let ep = dev.endpoint(&qp, &ConnectOpts::default())?;
    outln!("hca_id:\t{}", dev.device_name());
    outln!("\ttransport:\t\t\tsoftware (not hardware)");
    outln!(
        "\tprovider:\t\t\tsim: the direct mlx5 path against a software mlx5 device in the \
         calling process (other processes reach it over the sim fabric: RC, UC and UD; \
         two-process pingpong and perf without -d)"
    );
    outln!("\tphys_port_cnt:\t\t\t1");
    outln!("\t\tport:\t1");
    outln!("\t\t\tstate:\t\t\tPORT_ACTIVE (4)");
    outln!(
        "\t\t\tactive_mtu:\t\t{} ({})",
        ep.mtu.bytes(),
        ep.mtu as u32
    );
    outln!("\t\t\tGID[  0]:\t\t{}", std::net::Ipv6Addr::from(ep.gid));
    Ok(())
}

fn print_device(d: &Device, o: &Opts) -> rdma_direct::Result<()> {
    let ctx = Context::open(&d.name)?;
    let a = ctx.query_device()?;
    outln!("hca_id:\t{}", d.name);
    outln!(
        "\ttransport:\t\t\t{} ({})",
        d.transport_str(),
        d.transport_type
    );
    if !a.fw_ver.is_empty() {
        outln!("\tfw_ver:\t\t\t\t{}", a.fw_ver);
    }
    outln!("\tnode_guid:\t\t\t{}", control::format_guid(a.node_guid));
    outln!(
        "\tsys_image_guid:\t\t\t{}",
        control::format_guid(a.sys_image_guid)
    );
    outln!("\tvendor_id:\t\t\t0x{:04x}", a.vendor_id);
    outln!("\tvendor_part_id:\t\t\t{}", a.vendor_part_id);
    outln!("\thw_ver:\t\t\t\t0x{:X}", a.hw_ver);
    outln!("\tphys_port_cnt:\t\t\t{}", a.phys_port_cnt);
    let facts = DeviceFacts::read(&d.name);
    match provider::explained(o.provider, Some(&facts)) {
        Ok((_, why)) => outln!("\tprovider:\t\t\t{why}"),
        Err(e) => outln!("\tprovider:\t\t\trefused: {e}"),
    }
    if o.verbose {
        out!("{}", devinfo::device_verbose(&a));
    }
    let ports: Vec<u8> = match o.at.port {
        Some(p) if p <= a.phys_port_cnt => vec![p],
        Some(p) => {
            return Err(rdma_direct::Error::NotFound {
                what: format!("port {p}"),
                hint: format!("{} has ports 1..={}", d.name, a.phys_port_cnt),
            })
        }
        None => (1..=a.phys_port_cnt).collect(),
    };
    for p in ports {
        let pa = ctx.query_port(p)?;
        out!("{}", devinfo::port(&ctx, p, &pa, o.verbose)?);
    }
    Ok(())
}
