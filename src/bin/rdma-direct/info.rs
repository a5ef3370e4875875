//! `rdma-direct info [-d DEV] [-i PORT] [-v]`: device and port attributes and the GID table,
//! laid out like `ibv_devinfo` (with `-v`, the same extra fields as `ibv_devinfo -v`), with
//! the provider `--provider auto` would run on each device. The software mlx5 device (`sim0`)
//! is listed after the hardware, marked as software; `-d sim0` (or `--provider sim`) shows it
//! alone.

use super::devices::{note_no_devices, DevPort};
use super::provider::{self, Choice, DeviceFacts, SIM_DEVICE};
use rdma_direct::verbs::{self, Context, Device, DeviceAttr, PortAttr};

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
         calling process (other processes reach it over the sim fabric, RC and UC; \
         perf/pingpong without -d)"
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
    outln!("\tnode_guid:\t\t\t{}", verbs::format_guid(a.node_guid));
    outln!(
        "\tsys_image_guid:\t\t\t{}",
        verbs::format_guid(a.sys_image_guid)
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
        print_device_verbose(&a);
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
        print_port(&ctx, p, &pa, o.verbose)?;
    }
    Ok(())
}

fn print_device_verbose(a: &DeviceAttr) {
    outln!("\tmax_mr_size:\t\t\t0x{:x}", a.max_mr_size);
    outln!("\tpage_size_cap:\t\t\t0x{:x}", a.page_size_cap);
    outln!("\tmax_qp:\t\t\t\t{}", a.max_qp);
    outln!("\tmax_qp_wr:\t\t\t{}", a.max_qp_wr);
    outln!("\tdevice_cap_flags:\t\t0x{:08x}", a.device_cap_flags);
    outln!("\tmax_sge:\t\t\t{}", a.max_sge);
    outln!("\tmax_sge_rd:\t\t\t{}", a.max_sge_rd);
    outln!("\tmax_cq:\t\t\t\t{}", a.max_cq);
    outln!("\tmax_cqe:\t\t\t{}", a.max_cqe);
    outln!("\tmax_mr:\t\t\t\t{}", a.max_mr);
    outln!("\tmax_pd:\t\t\t\t{}", a.max_pd);
    outln!("\tmax_qp_rd_atom:\t\t\t{}", a.max_qp_rd_atom);
    outln!("\tmax_res_rd_atom:\t\t{}", a.max_res_rd_atom);
    outln!("\tmax_qp_init_rd_atom:\t\t{}", a.max_qp_init_rd_atom);
    outln!(
        "\tatomic_cap:\t\t\t{} ({})",
        a.atomic_cap_str(),
        a.atomic_cap
    );
    outln!("\tmax_mw:\t\t\t\t{}", a.max_mw);
    outln!("\tmax_ah:\t\t\t\t{}", a.max_ah);
    outln!("\tmax_srq:\t\t\t{}", a.max_srq);
    outln!("\tmax_srq_wr:\t\t\t{}", a.max_srq_wr);
    outln!("\tmax_srq_sge:\t\t\t{}", a.max_srq_sge);
    outln!("\tmax_pkeys:\t\t\t{}", a.max_pkeys);
    outln!("\tlocal_ca_ack_delay:\t\t{}", a.local_ca_ack_delay);
}

fn mtu_str(raw: u32) -> String {
    match rdma_direct::endpoint::Mtu::from_ibv(raw) {
        Some(m) => format!("{} ({raw})", m.bytes()),
        None => format!("invalid MTU ({raw})"),
    }
}

fn vl_str(code: u8) -> String {
    let n = match code {
        1 => "1",
        2 => "2",
        3 => "4",
        4 => "8",
        5 => "15",
        _ => "invalid value",
    };
    format!("{n} ({code})")
}

fn width_str(code: u8) -> String {
    match verbs::width_lanes(code) {
        Some(n) => format!("{n}X ({code})"),
        None => format!("invalid width ({code})"),
    }
}

fn speed_str(code: u8) -> String {
    match verbs::lane_gbps(code) {
        Some(g) => format!("{g:.1} Gbps ({code})"),
        None => format!("invalid speed ({code})"),
    }
}

fn print_port(ctx: &Context, p: u8, pa: &PortAttr, verbose: bool) -> rdma_direct::Result<()> {
    outln!("\t\tport:\t{p}");
    outln!("\t\t\tstate:\t\t\t{} ({})", pa.state, pa.state.to_ibv());
    outln!("\t\t\tmax_mtu:\t\t{}", mtu_str(pa.max_mtu_raw));
    outln!("\t\t\tactive_mtu:\t\t{}", mtu_str(pa.active_mtu_raw));
    outln!("\t\t\tsm_lid:\t\t\t{}", pa.sm_lid);
    outln!("\t\t\tport_lid:\t\t{}", pa.lid);
    outln!("\t\t\tport_lmc:\t\t0x{:02x}", pa.lmc);
    outln!("\t\t\tlink_layer:\t\t{}", pa.link_layer);
    match pa.rate_gbps() {
        Some(r) => outln!(
            "\t\t\trate:\t\t\t{r} Gb/sec ({} x {} Gb/sec)",
            pa.width_lanes().unwrap_or(0),
            pa.lane_gbps().unwrap_or(0.0)
        ),
        None => outln!(
            "\t\t\trate:\t\t\tunknown (width code {}, speed code {})",
            pa.active_width,
            pa.active_speed
        ),
    }
    if verbose {
        outln!("\t\t\tmax_msg_sz:\t\t0x{:x}", pa.max_msg_sz);
        outln!("\t\t\tport_cap_flags:\t\t0x{:08x}", pa.port_cap_flags);
        outln!("\t\t\tmax_vl_num:\t\t{}", vl_str(pa.max_vl_num));
        outln!("\t\t\tsm_sl:\t\t\t{}", pa.sm_sl);
        outln!("\t\t\tpkey_tbl_len:\t\t{}", pa.pkey_tbl_len);
        outln!("\t\t\tgid_tbl_len:\t\t{}", pa.gid_tbl_len);
        outln!("\t\t\tsubnet_timeout:\t\t{}", pa.subnet_timeout);
        outln!("\t\t\tactive_width:\t\t{}", width_str(pa.active_width));
        outln!("\t\t\tactive_speed:\t\t{}", speed_str(pa.active_speed));
        outln!(
            "\t\t\tphys_state:\t\t{} ({})",
            pa.phys_state_str(),
            pa.phys_state
        );
    }
    let gids = ctx.gid_table(p)?;
    if gids.is_empty() {
        outln!("\t\t\tGID table:\t\tempty");
    }
    for g in gids {
        // The address form ibv_devinfo prints (inet_ntop): fe80::..., ::ffff:127.0.0.1.
        let addr = std::net::Ipv6Addr::from(g.gid.0);
        let mut line = format!("\t\t\tGID[{:>3}]:\t\t{addr}, {}", g.index, g.gid_type);
        if let Some(n) = &g.netdev {
            line.push_str(&format!(", {n}"));
        }
        outln!("{line}");
    }
    Ok(())
}
