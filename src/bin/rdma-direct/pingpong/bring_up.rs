//! One end's bring-up, as rc_pingpong's: the connection parameters of [`Args`]
//! ([`connect_opts`]) and the resources of an end ([`open_end`]); the end, its address lines
//! and its drain are the library's ([`rdma_direct::perf::rc_pingpong`]).

pub(super) use rdma_direct::perf::rc_pingpong::{ep_line, msg_line, End};
use rdma_direct::providers::{ConnectOpts, Provider};
use rdma_direct::Result;

use super::args::Args;

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

/// One end's resources for `a` (message size, receive depth, QP type).
pub(super) fn open_end<P: Provider>(p: &mut P, a: &Args) -> Result<End<P>> {
    rdma_direct::perf::rc_pingpong::open_end(p, a.size, a.rx_depth, a.qp_type)
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
