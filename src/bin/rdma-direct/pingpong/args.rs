//! `pingpong`'s command line: [`USAGE`], and [`parse_args`], which turns the arguments into
//! [`Args`] (`None` for `-h`) or an error naming the option. It checks every range, and without
//! a device (loopback on the software mlx5 device) refuses with a reason what needs a peer or a
//! second port. Nothing here opens a device.

use rdma_direct::endpoint::Mtu;
use rdma_direct::perf::MAX_ITERS;
use rdma_direct::providers::{ProviderKind, QpType};

use super::provider::Choice;

pub(super) const USAGE: &str = "\
usage: rdma-direct pingpong [-d DEV] [options] [HOST]
  with -d: HOST given: client (connects to HOST); none: server (waits for a client)
  without -d: both ends on the software mlx5 device in this process (no HOST, no -p);
  with HOST (client) or -p PORT (server): one end per process, over the sim fabric
  -d, --ib-dev DEV      RDMA device (rxe0, mlx5_0); without it: the software mlx5 device
      --provider P      auto (default: mlx5 on an mlx5 device, verbs on any other, sim
                        without -d), mlx5, verbs (libibverbs, also on mlx5), sim
  -i, --ib-port PORT    port (default 1)
  -g, --gid-idx IDX     local GID index; without it no GRH is used, except on a port
                        without a LID (RoCE), which sends index 0's GID
  -s, --size BYTES      message size (default 4096, at most 1 GiB)
  -n, --iters N         iterations (default 1000)
  -c, --connection T    RC or UC (default RC; perftest's -c, not ibv_rc_pingpong's)
      --chk             check every message received: each carries its sequence number
                        in every byte (a peer that echoes what it received passes)
      --attribute       after the row: the round trips above 10x the median and how many
                        coincided with this CPU taken away (host) rather than a late answer
                        (network), and what the kernel counted on this CPU meanwhile
  -e, --events          not supported: the CQ is polled
  -p, --port PORT       TCP port (default 18515)
      --loopback        with -d: both ends on DEV in this process, connected to each
                        other (no HOST, no -p); without -d, HOST or -p it is so
  -m, --mtu BYTES       path MTU: 256, 512, 1024, 2048, 4096 (default 1024)
  -r, --rx-depth N      receives kept posted (default 500)
  -l, --sl SL           service level (default 0)
  -u, --timeout T       local ACK timeout exponent: 4.096 us x 2^T (default 14, 0..31)
      --retry-cnt N     transport retries before RETRY_EXC_ERR (default 6, 0..7; rxe
                        retries forever at 7, so a dead peer is never noticed there);
                        also --retry_count
  -R, --rdma_cm         connect by address through the RDMA CM (HOST: the server's IP
                        address; -p: CM port, default 7174) and speak rping's protocol
                        (READ of the client's buffer, WRITE back, verified byte for byte);
                        the peer may be rdma-core's rping -s / rping -c (same -s as its -S)
  A failed completion ends the run after the CQ is drained: the error line counts how every
  request outstanding at that moment completed (the others must be WR_FLUSH_ERR).
Interoperates with rdma-core's ibv_rc_pingpong / ibv_uc_pingpong on either side.
";

const MAX_SIZE: usize = 1 << 30;

#[derive(Debug, PartialEq, Eq)]
pub(super) struct Args {
    pub(super) dev: Option<String>,
    pub(super) ib_port: u8,
    pub(super) gid_idx: Option<u8>,
    pub(super) size: usize,
    pub(super) iters: u32,
    pub(super) qp_type: QpType,
    /// `-p`; `None` = [`PINGPONG_PORT`](rdma_direct::endpoint::PINGPONG_PORT).
    pub(super) port: Option<u16>,
    pub(super) mtu: Mtu,
    pub(super) rx_depth: u32,
    pub(super) sl: u8,
    /// `-u`: local ACK timeout exponent.
    pub(super) timeout: u8,
    /// `--retry-cnt`: transport retries.
    pub(super) retry_cnt: u8,
    pub(super) host: Option<String>,
    pub(super) provider: Choice,
    /// `--loopback`: both ends in this process on the device (implied without `-d`).
    pub(super) loopback: bool,
    /// `-R`: connect by address through the RDMA CM and speak rping's protocol.
    pub(super) rdma_cm: bool,
    /// `--chk`: every message carries its sequence number in every byte, checked on receipt.
    pub(super) chk: bool,
    /// `--attribute`: the outliers and what took the CPU ([`super::report::attribution`]).
    pub(super) attribute: bool,
}

impl Default for Args {
    fn default() -> Args {
        Args {
            dev: None,
            ib_port: 1,
            gid_idx: None,
            size: 4096,
            iters: 1000,
            qp_type: QpType::Rc,
            port: None,
            mtu: Mtu::Mtu1024,
            rx_depth: 500,
            sl: 0,
            timeout: 14,
            // ibv_rc_pingpong's 7, less one: the library's default, so a dead peer ends the
            // run on every provider (see `ConnectOpts::retry_cnt`).
            retry_cnt: rdma_direct::providers::ConnectOpts::default().retry_cnt,
            host: None,
            provider: Choice::Auto,
            loopback: false,
            chk: false,
            attribute: false,
            rdma_cm: false,
        }
    }
}

fn num<T: crate::Bounded>(name: &str, v: &str) -> std::result::Result<T, String> {
    crate::number(name, v)
}

pub(super) fn parse_args(args: &[String]) -> std::result::Result<Option<Args>, String> {
    let mut a = Args::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (flag, attached) = crate::split_flag(arg);
        let mut val = || crate::flag_value(flag, attached, &mut it);
        match flag {
            "-h" | "--help" => return Ok(None),
            "-d" | "--ib-dev" => a.dev = Some(val()?),
            "--provider" => a.provider = crate::provider::parse_choice(&val()?)?,
            "-i" | "--ib-port" => a.ib_port = num(flag, &val()?)?,
            "-g" | "--gid-idx" => a.gid_idx = Some(num(flag, &val()?)?),
            "-s" | "--size" => a.size = num(flag, &val()?)?,
            "-n" | "--iters" => a.iters = num(flag, &val()?)?,
            "-p" | "--port" => a.port = Some(num(flag, &val()?)?),
            "-r" | "--rx-depth" => a.rx_depth = num(flag, &val()?)?,
            "-l" | "--sl" => a.sl = num(flag, &val()?)?,
            "-u" | "--timeout" | "--qp-timeout" => a.timeout = num(flag, &val()?)?,
            "--retry-cnt" | "--retry_count" => a.retry_cnt = num(flag, &val()?)?,
            "-R" | "--rdma_cm" => a.rdma_cm = true,
            "-m" | "--mtu" => {
                let v = val()?;
                a.mtu = Mtu::from_bytes(num(flag, &v)?).ok_or_else(|| {
                    format!("{flag}: MTU {v} is not 256, 512, 1024, 2048 or 4096")
                })?;
            }
            "-c" | "--connection" => {
                let v = val()?;
                a.qp_type = match v.to_ascii_uppercase().as_str() {
                    "RC" => QpType::Rc,
                    "UC" => QpType::Uc,
                    _ if v.starts_with('-') => {
                        return Err(format!(
                            "{flag}: '{v}' is not RC or UC: -c takes the connection type here \
                             (perftest's -c); ibv_rc_pingpong's -c is --chk"
                        ))
                    }
                    other => return Err(format!("{flag}: '{other}' is not RC or UC")),
                }
            }
            "--chk" => a.chk = true,
            "--attribute" => a.attribute = true,
            "-e" | "--events" => {
                return Err(format!(
                    "{flag}: not supported: sleeping on completion events; the CQ is polled \
                     (`rdma-direct events` shows a device's event channel at work)"
                ))
            }
            "--loopback" => a.loopback = true,
            s if s.starts_with('-') => return Err(format!("unknown option '{s}'")),
            host => {
                if a.host.is_some() {
                    return Err(format!("more than one HOST given ('{host}')"));
                }
                a.host = Some(host.to_string());
            }
        }
    }
    a.dev = super::provider::device_arg(a.dev.take());
    if a.size == 0 || a.size > MAX_SIZE {
        return Err(format!("size (-s) {}: out of range 1..={MAX_SIZE}", a.size));
    }
    // The stamps of every iteration are kept in memory: perf's limit, for the same reason.
    if a.iters == 0 || a.iters > MAX_ITERS {
        return Err(format!(
            "iterations (-n) {}: out of range 1..={MAX_ITERS} (the timestamps of every \
             iteration are kept in memory)",
            a.iters
        ));
    }
    if a.rx_depth < 2 || a.rx_depth > 16384 {
        return Err(format!("rx-depth {} out of range (2 .. 16384)", a.rx_depth));
    }
    if a.ib_port == 0 {
        return Err("ib-port is 1-based".into());
    }
    if a.timeout > 31 {
        return Err(format!(
            "timeout {} out of range (0 .. 31: 4.096 us x 2^T)",
            a.timeout
        ));
    }
    if a.retry_cnt > 7 {
        return Err(format!("retry-cnt {} out of range (0 .. 7)", a.retry_cnt));
    }
    if a.loopback {
        // Both ends in this process: nothing travels over TCP or through the RDMA CM.
        if let Some(h) = &a.host {
            return Err(format!(
                "HOST '{h}': --loopback runs both ends in this process; drop HOST or \
                 --loopback"
            ));
        }
        if a.port.is_some() {
            return Err(
                "-p: --loopback exchanges no TCP message; the TCP port is for two \
                 processes"
                    .into(),
            );
        }
        if a.rdma_cm {
            return Err(
                "-R: --loopback runs both ends in this process; -R connects to a peer \
                 by address"
                    .into(),
            );
        }
    }
    if a.rdma_cm && a.qp_type != QpType::Rc {
        return Err("-R: the RDMA CM connects RC QPs only (rping's protocol is RC)".into());
    }
    if a.dev.is_none() && matches!(a.provider, Choice::Auto | Choice::Force(ProviderKind::Sim)) {
        if a.rdma_cm {
            return Err(
                "-R: the software mlx5 device has no RDMA CM; connecting by address needs -d DEV"
                    .into(),
            );
        }
        // HOST (client) or -p (server): two processes' sim devices over the sim fabric,
        // which carries RC and UC (see providers/sim/fabric).
        if a.host.is_some() || a.port.is_some() {
            // Every size -s takes (MAX_SIZE) is a message the fabric carries.
            const _: () =
                assert!(MAX_SIZE as u64 <= rdma_direct::providers::sim::fabric::MAX_MESSAGE);
        }
        if a.ib_port != 1 {
            return Err(format!(
                "-i {}: the software mlx5 device has one port (1)",
                a.ib_port
            ));
        }
        if a.gid_idx.is_some_and(|g| g != 0) {
            return Err(format!(
                "-g {}: the software mlx5 device has one GID (index 0)",
                a.gid_idx.unwrap_or(0)
            ));
        }
    }
    Ok(Some(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_rc_pingpong_options() {
        let a = parse_args(&args(
            "-d rxe0 -g 1 -s 65536 -n 50 -c uc -p 19000 -m 2048 -r 64 127.0.0.1",
        ))
        .unwrap()
        .unwrap();
        assert_eq!(a.dev.as_deref(), Some("rxe0"));
        assert_eq!(a.gid_idx, Some(1));
        assert_eq!(a.size, 65536);
        assert_eq!(a.iters, 50);
        assert_eq!(a.qp_type, QpType::Uc);
        assert_eq!(a.port, Some(19000));
        assert_eq!(a.mtu, Mtu::Mtu2048);
        assert_eq!(a.rx_depth, 64);
        assert_eq!(a.host.as_deref(), Some("127.0.0.1"));
        let d = parse_args(&args("-d rxe0")).unwrap().unwrap();
        assert_eq!(
            (d.size, d.iters, d.port, d.rx_depth),
            (4096, 1000, None, 500)
        );
        assert_eq!(d.mtu, Mtu::Mtu1024);
        assert!(d.host.is_none());
    }

    #[test]
    fn bad_options_are_errors() {
        for (s, want) in [
            ("-d rxe0 -s 0", "out of range"),
            ("-d rxe0 -s 2000000000", "out of range"),
            ("-d rxe0 -m 1000", "not 256"),
            ("-d rxe0 -c XRC", "not RC or UC"),
            ("-d rxe0 -n x", "not a number"),
            ("-d rxe0 -n", "needs a value"),
            ("-d rxe0 --frob", "unknown option"),
            ("-d rxe0 a b", "more than one HOST"),
            ("-d rxe0 -r 1", "rx-depth"),
            ("-d rxe0 --retry-cnt 8", "retry-cnt 8 out of range"),
            ("-d rxe0 -u 32", "timeout 32 out of range"),
        ] {
            let e = parse_args(&args(s)).unwrap_err();
            assert!(e.contains(want), "{s}: {e}");
        }
    }

    #[test]
    fn without_a_device_options_parse_like_rc_pingpong() {
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(parse_args(&a(&[])).unwrap(), Some(Args::default()));
        let o = parse_args(&a(&["-s", "64", "--iters=10", "-r", "8", "-m", "2048"]))
            .unwrap()
            .unwrap();
        assert_eq!(
            (o.size, o.iters, o.rx_depth, o.mtu.bytes()),
            (64, 10, 8, 2048)
        );
        assert_eq!(parse_args(&a(&["-h"])).unwrap(), None);
        assert!(parse_args(&a(&["-s"]))
            .unwrap_err()
            .contains("needs a value"));
        assert!(parse_args(&a(&["-s", "x"]))
            .unwrap_err()
            .contains("not a number"));
        assert!(parse_args(&a(&["-m", "1000"]))
            .unwrap_err()
            .contains("1000"));
        assert!(parse_args(&a(&["-n", "0"])).is_err());
        assert!(parse_args(&a(&["--bogus"]))
            .unwrap_err()
            .contains("--bogus"));
    }

    #[test]
    fn without_a_device_what_makes_sense_is_accepted_the_rest_refused_with_a_reason() {
        let ok = parse_args(&args("-c UC -g 0 -i 1 -l 3")).unwrap().unwrap();
        assert_eq!((ok.qp_type, ok.gid_idx, ok.sl), (QpType::Uc, Some(0), 3));
        // A peer or a server port: one end per process, over the sim fabric (RC).
        let ok = parse_args(&args("-p 19000 127.0.0.1")).unwrap().unwrap();
        assert_eq!(
            (ok.port, ok.host.as_deref()),
            (Some(19000), Some("127.0.0.1"))
        );
        for (s, want) in [("-i 2", "one port"), ("-g 1", "one GID")] {
            let e = parse_args(&args(s)).unwrap_err();
            assert!(e.contains(want), "{s}: {e}");
        }
    }
}
