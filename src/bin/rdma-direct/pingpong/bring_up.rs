//! One end's bring-up, as rc_pingpong's: the connection parameters of [`Args`]
//! ([`connect_opts`]), the resources of an end ([`open_end`]: buffer, PD, MR, a CQ of
//! `rx_depth + 1`, a QP with one send and `rx_depth` receives), and rc_pingpong's address lines
//! that print an end's LID, QPN, PSN and GID.

use std::net::Ipv6Addr;

use rdma_direct::endpoint::PingpongMsg;
use rdma_direct::providers::{
    Access, ConnectOpts, Pages, Provider, QpCaps, QpConfig, QpEndpoint, RegisteredBuf,
};
use rdma_direct::Result;

use super::args::Args;

/// rc_pingpong's address line: `  local address:  LID 0x0000, QPN 0x000100, ...`.
fn dest_line(which: &str, lid: u16, qpn: u32, psn: u32, gid: &[u8; 16]) -> String {
    format!(
        "  {:<16}LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}\n",
        format!("{which} address:"),
        lid,
        qpn,
        psn,
        Ipv6Addr::from(*gid)
    )
}

pub(super) fn ep_line(which: &str, e: &QpEndpoint) -> String {
    dest_line(which, e.lid, e.qpn, e.psn, &e.gid)
}

pub(super) fn msg_line(which: &str, m: &PingpongMsg) -> String {
    dest_line(which, m.lid, m.qpn, m.psn, &m.gid)
}

/// The bring-up parameters of `a` (rc_pingpong's, with its MTU, port, GID index and SL).
pub(super) fn connect_opts(a: &Args) -> ConnectOpts {
    ConnectOpts {
        port: a.ib_port,
        gid_index: a.gid_idx.unwrap_or(0),
        path_mtu: Some(a.mtu),
        sl: a.sl,
        // rc_pingpong's (retry forever; its receives are posted before the first send).
        rnr_retry: 7,
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        ..ConnectOpts::default()
    }
}

/// One end's resources, as rc_pingpong's `pp_init_ctx`. Field order is drop order: the QP
/// before its CQ, the registered buffer before the PD.
pub(super) struct End<P: Provider> {
    pub(super) qp: P::Qp,
    pub(super) cq: P::Cq,
    /// `size` bytes of page-aligned memory, registered for local write (rc_pingpong's buffer,
    /// filled with 0x7b as its is).
    pub(super) buf: RegisteredBuf<P::Mr>,
    pub(super) _pd: P::Pd,
}

pub(super) fn open_end<P: Provider>(p: &mut P, a: &Args) -> Result<End<P>> {
    let pd = p.alloc_pd()?;
    let mut buf = p.alloc_buf(&pd, a.size, Access::LOCAL_WRITE, Pages::Normal)?;
    buf.as_mut_slice().fill(0x7b);
    let mut cq = p.create_cq(a.rx_depth + 1)?;
    let cfg = QpConfig {
        qp_type: a.qp_type,
        caps: QpCaps {
            max_send_wr: 1,
            max_recv_wr: a.rx_depth,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        sq_sig_all: false,
    };
    let qp = p.create_qp(&pd, &mut cq, None, None, &cfg)?;
    Ok(End {
        qp,
        cq,
        buf,
        _pd: pd,
    })
}

#[cfg(test)]
mod tests {
    use super::super::args::parse_args;
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn retry_count_and_timeout_reach_the_bring_up() {
        let d = parse_args(&args("-d rxe0")).unwrap().unwrap();
        let o = connect_opts(&d);
        assert_eq!((o.timeout, o.retry_cnt), (14, 6));
        for s in [
            "-d rxe0 --retry-cnt 1 -u 12",
            "-d rxe0 --retry_count=1 --timeout=12",
        ] {
            let a = parse_args(&args(s)).unwrap().unwrap();
            let o = connect_opts(&a);
            assert_eq!((o.timeout, o.retry_cnt), (12, 1), "{s}");
            // Nothing else moves.
            assert_eq!(
                ConnectOpts {
                    timeout: 14,
                    retry_cnt: 6,
                    ..o
                },
                connect_opts(&d),
                "{s}"
            );
        }
    }
}
