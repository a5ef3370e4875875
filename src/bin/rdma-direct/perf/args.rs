//! `perf`'s command line: [`HELP`], and [`parse`], which turns the arguments after `perf`
//! into a [`Cli`] (what to measure, where the other side is, which files to write) or an error
//! naming the option. perftest's flags are accepted as perftest spells them; what changes the
//! wire protocol and is not spoken here, and what a mode or the software device cannot do, is
//! refused with the reason. Nothing here opens a device.

use std::path::PathBuf;

use rdma_direct::perf::stats::BwUnit;
use rdma_direct::perf::wire::PERFTEST_PORT;
use rdma_direct::perf::{Params, Test, MAX_SIZE, TX_DEPTH};
use rdma_direct::providers::sim::fabric::MAX_MESSAGE;
use rdma_direct::providers::{ProviderKind, QpType};

use super::super::provider::Choice;

/// Each `Params` field `Params::check` names, as this command line spells it.
const FIELD_FLAGS: [(&str, &str); 9] = [
    ("Params::port", "port (-i)"),
    ("Params::inline", "inline (-I)"),
    ("Params::post_list", "post list (-l)"),
    ("Params::cq_mod", "cq_mod (-Q)"),
    ("Params::sizes", "size (-s)"),
    ("Params::iters", "iterations (-n)"),
    ("Params::hw_ts", "--hw-ts"),
    ("Params::outlier_x", "--outlier-x"),
    ("Params::threads", "--threads"),
];

/// `detail` (a message of `Params::check`) with each field named by its flag.
fn in_flags(detail: &str) -> String {
    FIELD_FLAGS
        .iter()
        .fold(detail.to_string(), |d, (field, flag)| {
            d.replace(field, flag)
        })
}

/// The usage text.
pub const HELP: &str = "\
usage: rdma-direct perf <test> [options] [HOST]
tests: write_lat send_lat read_lat atomic_lat write_bw send_bw read_bw
  Two processes, as perftest: with -d DEV and no HOST this is the server (waits for a
  client on TCP port -p); with a HOST it is the client. Either side may be perftest 4.5's
  ib_<test> (RC; write/send/read, lat and bw). Both sides must run the same test, -s/-a, -n.
  Without -d (the software mlx5 device) or with --loopback: client and server QPs in this
  process, on one device; without -d but with HOST or -p: one side per process, the sim
  devices connected over the sim fabric (RC).
  -d, --ib-dev <dev>     RDMA device (e.g. rxe0, mlx5_0); without it: the software device
      --provider <p>     auto (default: mlx5 on an mlx5 device, verbs on any other, sim
                         without -d), mlx5, verbs (libibverbs, also on mlx5: to compare
                         libmlx5 with the direct path), sim
      --loopback         client and server QPs in this process (the default without -d)
  -p, --port <n>         TCP port of the server (default 18515)
  -i, --ib-port <n>      port (default 1)
  -x, --gid-index <n>    GID index (default 0; RoCE on rxe needs the IPv4-mapped one)
  -s, --size <n>         message size (default 2 latency, 65536 bandwidth, as perftest;
                         atomics are always 8)
  -n, --iters <n>        iterations (default 5000 write_bw, 1000 the others, as perftest;
                         at most 16777216)
  -a, --all              every size 2^1 .. 2^23 (progress on stderr when it is a terminal)
  -I, --inline_size <n>  send up to n bytes inline (default 220 for write/send latency, 0
                         for bandwidth; refused for READ and atomics)
  -l, --post_list <n>    bandwidth: requests per doorbell (default 1)
  -Q, --cq-mod <n>       bandwidth: signal every n-th request (default 100; with -l: = -l)
  -c, --connection <t>   RC (default), UC, UD (UC/UD in loopback only)
  -R, --rdma_cm          as perftest's -R: the exchange and the QPs through the RDMA CM
                         (CM port -p; HOST an IPv4 address of the peer's RDMA device);
                         either side may be ib_<test> -R
      --report_gbits     bandwidth in Gb/sec instead of MiB/sec
      --histogram        latency: a log2 histogram of the samples under each row (and in
                         the JSON file)
      --json <file>      write the results as a JSON result file (see `rdma-direct plot`)
      --svg <file>       write the curve(s) as SVG (latency vs size; bandwidth and message
                         rate vs size)
  -F, --CPU-freq         accepted for perftest's command lines; no effect (the clock is
                         calibrated against the monotonic clock, not the CPU frequency)
      --threads <1|2>    loopback write_lat/send_lat: one thread alternating between client
                         and server, or one each (default: 2 with -d, 1 on the sim)
      --hw-ts            loopback write_lat/read_lat/atomic_lat: also the latency in the
                         device's time, from completion timestamps (sim, mlx5; not verbs)
      --attribute        loopback latency: after each row, the samples above 10x the median
                         and how many coincided with the polling CPU taken away (host) rather
                         than a late answer (network), and what the kernel counted on that
                         CPU meanwhile (always in the JSON file)
      --outlier-x <n>    with --attribute: an outlier is above n times the median (default 10)
";

/// Where the other side is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Both QPs in this process.
    Loopback,
    /// Wait for a client (perftest's server).
    Server,
    /// Connect to a server at this host.
    Client(String),
}

/// A parsed command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cli {
    /// What to measure.
    pub params: Params,
    /// `-d`: a device; `None` = the sim.
    pub device: Option<String>,
    /// `--provider`.
    pub provider: Choice,
    /// Loopback, server or client.
    pub mode: Mode,
    /// `-p`.
    pub port: u16,
    /// `-x` was given.
    pub gid_given: bool,
    /// `--json FILE`.
    pub json: Option<PathBuf>,
    /// `--svg FILE`.
    pub svg: Option<PathBuf>,
    /// `--histogram`.
    pub histogram: bool,
    /// `-R`: connect the QPs through the RDMA CM (two processes).
    pub rdma_cm: bool,
    /// `--attribute`.
    pub attribute: bool,
}

fn num<T: crate::Bounded>(flag: &str, v: &str) -> Result<T, String> {
    crate::number(flag, v)
}

/// perftest options that change what goes over the wire (or the QP setup the peer expects)
/// and are not spoken here: refused with the reason.
fn perftest_unsupported(flag: &str) -> Option<&'static str> {
    Some(match flag {
        "-q" | "--qp" => "more than one QP pair changes perftest's exchange; one pair only",
        "-z" | "--comm_rdma_cm" => {
            "perftest's exchange over a CM connection separate from -R is not spoken here (-R \
             runs both the exchange and the QPs through the CM)"
        }
        "-b" | "--bidirectional" => "bidirectional runs exchange reports per size; not supported",
        "-D" | "--duration" => "duration mode changes the run's end; use -n",
        "--dont_xchg_versions" => "the version exchange is always made (perftest 4.5 needs it)",
        "-o" | "--outs" => "outstanding READs are fixed at 16 (announced in the exchange)",
        "--report_both" | "--report-per-port" => "per-port reports change the exchange",
        "-e" | "--events" | "--use_event" => {
            "completion events are not used; the queues are polled"
        }
        "-m" | "--mtu" => "the MTU is the port's active MTU, negotiated with the peer",
        _ => return None,
    })
}

/// Parse the arguments after `perf`. `Ok(None)` = help was asked for.
pub fn parse(args: &[String]) -> Result<Option<Cli>, String> {
    let mut it = args.iter();
    let Some(first) = it.next() else {
        return Err(
            "which test? (write_lat, send_lat, read_lat, atomic_lat, write_bw, send_bw, read_bw)"
                .into(),
        );
    };
    if first == "-h" || first == "--help" || first == "help" {
        return Ok(None);
    }
    let test = Test::from_name(first).ok_or_else(|| format!("unknown test '{first}'"))?;
    let mut o = Params::new(test);
    let mut device = None;
    let mut json = None;
    let mut svg = None;
    let mut histogram = false;
    let mut attribute = false;
    let mut rdma_cm = false;
    // Wider than a size can be, so a huge -s gets the range of a size (`Params::check`).
    let mut size: Option<u64> = None;
    let mut all = false;
    let mut cq_mod: Option<u32> = None;
    let mut provider = Choice::Auto;
    let mut loopback = false;
    let mut port: Option<u16> = None;
    let mut host: Option<String> = None;
    let mut gid_given = false;
    while let Some(a) = it.next() {
        let (flag, attached) = crate::split_flag(a);
        let mut val = || crate::flag_value(flag, attached, &mut it);
        match flag {
            "-h" | "--help" => return Ok(None),
            "-d" | "--ib-dev" => device = Some(val()?),
            "--provider" => provider = crate::provider::parse_choice(&val()?)?,
            "--loopback" => loopback = true,
            "-p" | "--port" => port = Some(num(flag, &val()?)?),
            "-i" | "--ib-port" => o.port = num(flag, &val()?)?,
            "-x" | "--gid-index" => {
                o.gid_index = num(flag, &val()?)?;
                gid_given = true;
            }
            "-s" | "--size" => size = Some(num(flag, &val()?)?),
            "-n" | "--iters" => o.iters = num(flag, &val()?)?,
            "-a" | "--all" => all = true,
            "-I" | "--inline_size" => o.inline = num(flag, &val()?)?,
            "-l" | "--post_list" => o.post_list = num(flag, &val()?)?,
            "-Q" | "--cq-mod" => cq_mod = Some(num(flag, &val()?)?),
            "-c" | "--connection" => {
                let v = val()?;
                o.qp_type = match v.to_ascii_uppercase().as_str() {
                    "RC" => QpType::Rc,
                    "UC" => QpType::Uc,
                    "UD" => QpType::Ud,
                    _ => return Err(format!("-c: '{v}' is not RC, UC or UD")),
                };
            }
            "--report_gbits" => o.unit = BwUnit::Gbps,
            "--json" => json = Some(PathBuf::from(val()?)),
            "--svg" => svg = Some(PathBuf::from(val()?)),
            "--histogram" => histogram = true,
            // perftest's "do not fail on a CPU frequency mismatch": no CPU frequency is
            // used here (the clock is calibrated against the monotonic clock).
            "-F" | "--CPU-freq" => {}
            "--threads" => o.threads = Some(num(flag, &val()?)?),
            "--hw-ts" => o.hw_ts = true,
            "--attribute" => attribute = true,
            "--outlier-x" => o.outlier_x = num(flag, &val()?)?,
            "-R" | "--rdma_cm" => rdma_cm = true,
            f if perftest_unsupported(f).is_some() => {
                return Err(format!(
                    "{f}: {}",
                    perftest_unsupported(f).unwrap_or_default()
                ))
            }
            other if other.starts_with('-') => return Err(format!("unknown option '{other}'")),
            h => {
                if let Some(prev) = &host {
                    return Err(format!("more than one HOST given ('{prev}', '{h}')"));
                }
                host = Some(h.to_string());
            }
        }
    }
    if all {
        if size.is_some() {
            return Err("-a and -s exclude each other".into());
        }
        o.sizes = Params::all_sizes();
        // As perftest's -a: on UD the sizes stop at the path MTU.
        o.clip_to_mtu = true;
    } else if let Some(s) = size {
        // `Params::check` refuses a u32 size out of range; a larger one gets its words.
        o.sizes =
            vec![u32::try_from(s)
                .map_err(|_| format!("size (-s) {s}: out of range 1..={MAX_SIZE}"))?];
    }
    // perftest's rule: with -l and no -Q, cq_mod = post_list.
    o.cq_mod = match cq_mod {
        Some(q) if o.post_list > 1 => q,
        Some(q) => q.min(TX_DEPTH),
        None if o.post_list > 1 => o.post_list,
        None => o.cq_mod,
    };
    o.check().map_err(|e| match e {
        rdma_direct::Error::InvalidArgument { detail, .. } => in_flags(&detail),
        e => e.to_string(),
    })?;
    let device = super::super::provider::device_arg(device);
    let sim =
        device.is_none() && matches!(provider, Choice::Auto | Choice::Force(ProviderKind::Sim));
    // On the sim, HOST (client) or -p (server): one side per process, the two processes'
    // sim devices connected through the sim fabric, which carries RC messages of up to 2 GiB.
    let fabric = sim && !loopback && (host.is_some() || port.is_some());
    if fabric {
        // Every size -s and -a take (MAX_SIZE) is a message the fabric carries.
        const _: () = assert!(MAX_SIZE as u64 <= MAX_MESSAGE);
        if rdma_cm {
            return Err(
                "-R: the software mlx5 device has no RDMA CM; drop -R (the exchange goes over \
                 TCP, the QPs over the sim fabric)"
                    .into(),
            );
        }
    }
    if sim {
        if o.port != 1 {
            return Err(format!(
                "-i {}: the software mlx5 device has one port (1)",
                o.port
            ));
        }
        if o.gid_index != 0 {
            return Err(format!(
                "-x {}: the software mlx5 device has one GID (index 0)",
                o.gid_index
            ));
        }
    }
    let mode = if loopback || (sim && !fabric) {
        if rdma_cm {
            return Err(
                "-R: two processes only: the RDMA CM connects this process to another one \
                 (add -d DEV, without --loopback)"
                    .into(),
            );
        }
        if let Some(h) = &host {
            return Err(format!("HOST '{h}' and --loopback exclude each other"));
        }
        if port.is_some() {
            return Err("-p and --loopback exclude each other (no TCP in loopback)".into());
        }
        Mode::Loopback
    } else {
        if o.qp_type != QpType::Rc {
            return Err(format!(
                "-c {}: two processes run RC only (perftest's UC/UD exchange is not spoken \
                 here); add --loopback for {} in this process",
                o.qp_type, o.qp_type
            ));
        }
        if o.hw_ts {
            return Err("--hw-ts: loopback only (add --loopback)".into());
        }
        if attribute {
            return Err("--attribute: loopback only (add --loopback)".into());
        }
        if o.threads.is_some() {
            return Err(
                "--threads: one side per process in a two-process run; --threads is for \
                 --loopback"
                    .into(),
            );
        }
        match host {
            Some(h) => Mode::Client(h),
            None => Mode::Server,
        }
    };
    if histogram && !test.is_lat() {
        return Err("--histogram: latency tests only".into());
    }
    if attribute && !test.is_lat() {
        return Err("--attribute: latency tests only".into());
    }
    Ok(Some(Cli {
        params: o,
        device,
        provider,
        mode,
        port: port.unwrap_or(PERFTEST_PORT),
        gid_given,
        json,
        svg,
        histogram,
        rdma_cm,
        attribute,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdma_direct::perf::{two_threads, DEFAULT_CQ_MOD, DEFAULT_LAT_INLINE, MAX_ITERS};

    fn p(s: &str) -> Result<Option<Cli>, String> {
        let v: Vec<String> = s.split_whitespace().map(String::from).collect();
        parse(&v)
    }
    fn ok(s: &str) -> Params {
        p(s).unwrap().unwrap().params
    }
    fn err(s: &str) -> String {
        p(s).unwrap_err()
    }

    #[test]
    fn defaults() {
        let o = ok("write_lat");
        assert_eq!(o.threads, None);
        assert!(two_threads(ProviderKind::Verbs, &o));
        assert!(!two_threads(ProviderKind::Sim, &o));
        assert_eq!(ok("write_lat --threads 2").threads, Some(2));
        assert!(two_threads(ProviderKind::Sim, &ok("send_lat --threads=2")));
        assert!(!two_threads(
            ProviderKind::Verbs,
            &ok("send_lat --threads 1")
        ));
        assert!(err("write_lat --threads 3").contains("1 or 2"));
        assert_eq!(o.sizes, vec![2]);
        assert_eq!(
            (o.iters, o.inline, o.post_list),
            (1000, DEFAULT_LAT_INLINE, 1)
        );
        let c = p("write_lat").unwrap().unwrap();
        assert_eq!(
            (o.qp_type, c.device.as_deref(), o.port),
            (QpType::Rc, None, 1)
        );
        let o = ok("write_bw");
        assert_eq!((o.iters, o.inline, o.cq_mod), (5000, 0, DEFAULT_CQ_MOD));
        // perftest's defaults: 65536 B for bandwidth; 5000 iterations for write_bw only.
        assert_eq!(o.sizes, vec![65536]);
        assert_eq!((ok("send_bw").iters, ok("read_bw").iters), (1000, 1000));
        assert_eq!(ok("atomic_lat").sizes, vec![8]);
        assert!(p("--help").unwrap().is_none());
        assert!(p("write_bw -h").unwrap().is_none());
    }

    #[test]
    fn perftest_flags() {
        let c = p("write_bw -d rxe0 -i 1 -x 3 -s 64 -n 2000 -l 32 -c UC --report_gbits --json r.json --loopback")
            .unwrap()
            .unwrap();
        let o = &c.params;
        assert_eq!(c.device.as_deref(), Some("rxe0"));
        assert_eq!((o.gid_index, o.sizes[0], o.iters), (3, 64, 2000));
        // -l without -Q: cq_mod = post_list.
        assert_eq!((o.post_list, o.cq_mod), (32, 32));
        assert_eq!(o.qp_type, QpType::Uc);
        assert!(o.unit == BwUnit::Gbps && c.json == Some(PathBuf::from("r.json")));
        assert_eq!(c.mode, Mode::Loopback);
        assert_eq!(ok("write_bw -l 32 -Q 8").cq_mod, 8);
        assert_eq!(ok("send_bw --size=128").sizes, vec![128]);
        let a = ok("read_bw -a");
        assert_eq!(a.sizes.first(), Some(&2));
        assert_eq!(a.sizes.last(), Some(&(1 << 23)));
        assert_eq!(a.sizes.len(), 23);
        assert!(a.clip_to_mtu);
    }

    #[test]
    fn check_messages_name_the_flags_not_the_fields() {
        assert_eq!(
            err("write_bw -l 32 -Q 5"),
            "post list (-l) 32 must be a multiple of cq_mod (-Q) 5"
        );
        assert!(err("send_lat --hw-ts").starts_with("send_lat: --hw-ts needs"));
        for bad in [
            "write_lat -i 0",
            "read_lat -I 16",
            "write_lat -I 2000",
            "write_lat -l 4",
            "write_bw -l 200",
            "write_bw -Q 0",
            "write_lat -n 3",
            "write_lat -n 0",
            "send_lat --hw-ts",
            "write_lat --attribute --outlier-x 1",
            "write_lat --threads 3",
        ] {
            let e = err(bad);
            assert!(!e.contains("Params::"), "{bad}: {e}");
        }
    }

    #[test]
    fn refusals() {
        assert!(err("read_lat -I 16").contains("inline"));
        assert!(err("atomic_lat -I 8").contains("inline"));
        assert!(err("read_bw -c UC").contains("UC"));
        assert!(err("atomic_lat -c UC").contains("UC"));
        assert!(err("write_lat -c UD").contains("UD"));
        assert!(err("read_bw -c UD").contains("UD"));
        assert!(err("write_lat -l 4").contains("bandwidth"));
        assert!(err("send_lat -Q 4").contains("bandwidth"));
        assert!(err("write_bw -l 32 -Q 5").contains("multiple"));
        assert!(err("write_bw -Q 0").contains("-Q"));
        assert!(err("write_bw -l 0").contains("-l"));
        assert!(err("atomic_lat -s 64").contains("8 bytes"));
        assert!(err("atomic_lat -a").contains("8 bytes"));
        assert!(err("write_lat -n 3").contains("4 iterations"));
        assert!(err("write_bw -s 0").contains("-s"));
        assert!(err("write_bw -s 16777216").contains("-s"));
        assert!(err("write_bw -a -s 4").contains("-a"));
        assert!(err("write_bw -n x").contains("not a number"));
        // A size too large for any type is out of range, as pingpong says.
        assert_eq!(
            err("write_lat -s 99999999999"),
            format!("size (-s) 99999999999: out of range 1..={MAX_SIZE}")
        );
        assert!(err("write_lat -n 99999999999").contains("out of range"));
        assert!(err("write_bw -n").contains("needs a value"));
        assert!(err("flood").contains("unknown test"));
        assert!(err("write_bw --bogus").contains("unknown option"));
        assert!(err("").contains("which test"));
        assert!(err("write_bw -i 0").contains("-i"));
        assert!(err("write_bw -c XRC").contains("XRC"));
    }

    #[test]
    fn modes_server_client_loopback() {
        let c = p("write_lat -d rxe0 -x 1").unwrap().unwrap();
        assert_eq!(
            (c.mode.clone(), c.port, c.gid_given),
            (Mode::Server, 18515, true)
        );
        let c = p("write_lat -d rxe0 127.0.0.1 -p 19000").unwrap().unwrap();
        assert_eq!(
            (c.mode.clone(), c.port),
            (Mode::Client("127.0.0.1".into()), 19000)
        );
        assert_eq!(
            p("write_lat -d rxe0 --loopback").unwrap().unwrap().mode,
            Mode::Loopback
        );
        assert_eq!(p("write_lat").unwrap().unwrap().mode, Mode::Loopback);
        assert_eq!(
            p("write_lat --loopback").unwrap().unwrap().mode,
            Mode::Loopback
        );
        assert!(HELP.contains("server") && HELP.contains("client"));
    }

    #[test]
    fn what_a_mode_or_provider_cannot_do_is_refused_with_a_reason() {
        assert!(err("write_lat --loopback 127.0.0.1").contains("exclude"));
        assert!(err("write_lat -x 1").contains("one GID"));
        assert!(err("write_lat -i 2").contains("one port"));
        assert!(err("write_lat -d rxe0 --loopback 10.0.0.1").contains("exclude"));
        assert!(err("write_lat -d rxe0 -c UC 10.0.0.1").contains("RC only"));
        assert!(err("write_lat -d rxe0 --threads 2").contains("--loopback"));
        assert!(err("write_lat -d rxe0 a b").contains("more than one HOST"));
        assert!(err("write_bw --histogram").contains("latency"));
        assert!(err("write_bw --attribute").contains("latency tests only"));
        assert!(err("write_lat --attribute -d rxe0 host").contains("loopback only"));
        assert!(err("write_lat --provider rxe").contains("auto, mlx5, verbs or sim"));
        assert!(err("write_lat -R").contains("two processes only"));
        assert!(err("write_lat -d rxe0 --loopback -R").contains("two processes only"));
        assert!(ok("write_lat -d rxe0 -R 10.0.0.1").iters > 0);
        for f in [
            "-q 2",
            "-z",
            "-b",
            "-D 5",
            "--dont_xchg_versions",
            "-o 4",
            "-e",
            "-m 1024",
        ] {
            let e = err(&format!("write_bw -d rxe0 {f}"));
            assert!(!e.contains("unknown option"), "{f}: {e}");
        }
    }

    /// On the sim, HOST or -p is one side of a two-process run over the sim fabric: RC,
    /// messages up to its packet; -a and the bandwidth default stop there.
    #[test]
    fn the_sim_across_two_processes_runs_what_the_fabric_carries() {
        let c = p("write_lat -p 19000").unwrap().unwrap();
        assert_eq!((c.mode, c.port, c.device), (Mode::Server, 19000, None));
        let c = p("atomic_lat 127.0.0.1").unwrap().unwrap();
        assert_eq!(c.mode, Mode::Client("127.0.0.1".into()));
        // Messages of many packets: the sizes of one process.
        assert_eq!(ok("write_bw -p 19000").sizes, vec![65536]);
        assert_eq!(ok("read_bw 127.0.0.1 -s 100000").sizes, vec![100000]);
        let all = ok("send_lat -a 127.0.0.1").sizes;
        assert_eq!((all[0], *all.last().unwrap(), all.len()), (2, 1 << 23, 23));
        assert!(err("write_bw -c UC -p 19000").contains("RC only"));
        assert!(err("send_lat -c UD 127.0.0.1").contains("RC only"));
        assert!(err("write_lat -R 127.0.0.1").contains("no RDMA CM"));
        assert!(err("write_lat -x 1 127.0.0.1").contains("one GID"));
        assert!(err("write_lat --threads 2 127.0.0.1").contains("--loopback"));
    }

    /// `-n 4294967295` aborted on a 32 GiB allocation; it is refused with the limit.
    #[test]
    fn iterations_beyond_the_sample_buffers_are_refused_with_the_limit() {
        let e = err("write_lat -n 4294967295");
        assert!(e.contains(&MAX_ITERS.to_string()), "{e}");
        assert!(err("write_bw -n 16777217").contains("at most"));
        assert_eq!(ok("write_lat -n 16777216").iters, MAX_ITERS);
    }
}
