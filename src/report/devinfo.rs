//! A device's and its ports' attributes laid out as `ibv_devinfo` prints them (with
//! verbose, the same extra fields as `ibv_devinfo -v`): what `rdma-direct info` shows.
//!
//! Contract: each function returns its lines (tab-indented as ibv_devinfo's,
//! newline-terminated) and prints nothing; a code the tables do not know is shown as
//! `invalid ...` with the raw code, never a panic. [`port`] reads the GID table through the
//! caller's [`Context`].

use std::fmt::Write as _;

use crate::control::{self, Context, DeviceAttr, PortAttr};

/// `ibv_devinfo -v`'s extra device lines.
pub fn device_verbose(a: &DeviceAttr) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "\tmax_mr_size:\t\t\t0x{:x}", a.max_mr_size);
    let _ = writeln!(s, "\tpage_size_cap:\t\t\t0x{:x}", a.page_size_cap);
    let _ = writeln!(s, "\tmax_qp:\t\t\t\t{}", a.max_qp);
    let _ = writeln!(s, "\tmax_qp_wr:\t\t\t{}", a.max_qp_wr);
    let _ = writeln!(s, "\tdevice_cap_flags:\t\t0x{:08x}", a.device_cap_flags);
    let _ = writeln!(s, "\tmax_sge:\t\t\t{}", a.max_sge);
    let _ = writeln!(s, "\tmax_sge_rd:\t\t\t{}", a.max_sge_rd);
    let _ = writeln!(s, "\tmax_cq:\t\t\t\t{}", a.max_cq);
    let _ = writeln!(s, "\tmax_cqe:\t\t\t{}", a.max_cqe);
    let _ = writeln!(s, "\tmax_mr:\t\t\t\t{}", a.max_mr);
    let _ = writeln!(s, "\tmax_pd:\t\t\t\t{}", a.max_pd);
    let _ = writeln!(s, "\tmax_qp_rd_atom:\t\t\t{}", a.max_qp_rd_atom);
    let _ = writeln!(s, "\tmax_res_rd_atom:\t\t{}", a.max_res_rd_atom);
    let _ = writeln!(s, "\tmax_qp_init_rd_atom:\t\t{}", a.max_qp_init_rd_atom);
    let _ = writeln!(
        s,
        "\tatomic_cap:\t\t\t{} ({})",
        a.atomic_cap_str(),
        a.atomic_cap
    );
    let _ = writeln!(s, "\tmax_mw:\t\t\t\t{}", a.max_mw);
    let _ = writeln!(s, "\tmax_ah:\t\t\t\t{}", a.max_ah);
    let _ = writeln!(s, "\tmax_srq:\t\t\t{}", a.max_srq);
    let _ = writeln!(s, "\tmax_srq_wr:\t\t\t{}", a.max_srq_wr);
    let _ = writeln!(s, "\tmax_srq_sge:\t\t\t{}", a.max_srq_sge);
    let _ = writeln!(s, "\tmax_pkeys:\t\t\t{}", a.max_pkeys);
    let _ = writeln!(s, "\tlocal_ca_ack_delay:\t\t{}", a.local_ca_ack_delay);
    s
}

fn mtu_str(raw: u32) -> String {
    match crate::endpoint::Mtu::from_ibv(raw) {
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
    match control::width_lanes(code) {
        Some(n) => format!("{n}X ({code})"),
        None => format!("invalid width ({code})"),
    }
}

fn speed_str(code: u8) -> String {
    match control::lane_gbps(code) {
        Some(g) => format!("{g:.1} Gbps ({code})"),
        None => format!("invalid speed ({code})"),
    }
}

/// A port's lines (with `verbose`, `ibv_devinfo -v`'s extra ones), its GID table last.
pub fn port(ctx: &Context, p: u8, pa: &PortAttr, verbose: bool) -> crate::Result<String> {
    let mut s = String::new();
    let _ = writeln!(s, "\t\tport:\t{p}");
    let _ = writeln!(s, "\t\t\tstate:\t\t\t{} ({})", pa.state, pa.state.to_ibv());
    let _ = writeln!(s, "\t\t\tmax_mtu:\t\t{}", mtu_str(pa.max_mtu_raw));
    let _ = writeln!(s, "\t\t\tactive_mtu:\t\t{}", mtu_str(pa.active_mtu_raw));
    let _ = writeln!(s, "\t\t\tsm_lid:\t\t\t{}", pa.sm_lid);
    let _ = writeln!(s, "\t\t\tport_lid:\t\t{}", pa.lid);
    let _ = writeln!(s, "\t\t\tport_lmc:\t\t0x{:02x}", pa.lmc);
    let _ = writeln!(s, "\t\t\tlink_layer:\t\t{}", pa.link_layer);
    let _ = match pa.rate_gbps() {
        Some(r) => writeln!(
            s,
            "\t\t\trate:\t\t\t{r} Gb/sec ({} x {} Gb/sec)",
            pa.width_lanes().unwrap_or(0),
            pa.lane_gbps().unwrap_or(0.0)
        ),
        None => writeln!(
            s,
            "\t\t\trate:\t\t\tunknown (width code {}, speed code {})",
            pa.active_width, pa.active_speed
        ),
    };
    if verbose {
        let _ = writeln!(s, "\t\t\tmax_msg_sz:\t\t0x{:x}", pa.max_msg_sz);
        let _ = writeln!(s, "\t\t\tport_cap_flags:\t\t0x{:08x}", pa.port_cap_flags);
        let _ = writeln!(s, "\t\t\tmax_vl_num:\t\t{}", vl_str(pa.max_vl_num));
        let _ = writeln!(s, "\t\t\tsm_sl:\t\t\t{}", pa.sm_sl);
        let _ = writeln!(s, "\t\t\tpkey_tbl_len:\t\t{}", pa.pkey_tbl_len);
        let _ = writeln!(s, "\t\t\tgid_tbl_len:\t\t{}", pa.gid_tbl_len);
        let _ = writeln!(s, "\t\t\tsubnet_timeout:\t\t{}", pa.subnet_timeout);
        let _ = writeln!(s, "\t\t\tactive_width:\t\t{}", width_str(pa.active_width));
        let _ = writeln!(s, "\t\t\tactive_speed:\t\t{}", speed_str(pa.active_speed));
        let _ = writeln!(
            s,
            "\t\t\tphys_state:\t\t{} ({})",
            pa.phys_state_str(),
            pa.phys_state
        );
    }
    let gids = ctx.gid_table(p)?;
    if gids.is_empty() {
        let _ = writeln!(s, "\t\t\tGID table:\t\tempty");
    }
    for g in gids {
        // The address form ibv_devinfo prints (inet_ntop): fe80::..., ::ffff:127.0.0.1.
        let addr = std::net::Ipv6Addr::from(g.gid.0);
        let mut line = format!("\t\t\tGID[{:>3}]:\t\t{addr}, {}", g.index, g.gid_type);
        if let Some(n) = &g.netdev {
            line.push_str(&format!(", {n}"));
        }
        let _ = writeln!(s, "{line}");
    }
    Ok(s)
}
