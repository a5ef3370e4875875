//! `rdma-direct perf <test> [options]`: perftest's flags in, perftest's header and table out.
//! The measurement is [`rdma_direct::perf`]'s; this module parses the command line, opens the
//! provider (the software mlx5 device in device-thread mode without `-d`, the verbs provider
//! with it) and prints the header, one table line per size as it is measured, and with
//! `--json` one JSON line per size after the table.

use std::fmt::Write as _;

use rdma_direct::perf::stats::BwUnit;
use rdma_direct::perf::{Info, Params, Row, Run, Test, TX_DEPTH};
use rdma_direct::providers::rxe::VerbsDevice;
use rdma_direct::providers::sim::SimDevice;
use rdma_direct::providers::{Provider, ProviderKind, QpType};

use super::table;

/// The usage text.
pub const HELP: &str = "\
usage: rdma-direct perf <test> [options]
tests: write_lat send_lat read_lat atomic_lat write_bw send_bw read_bw
  Client and server QPs in this process, on one device (loopback), one thread.
  -d, --ib-dev <dev>     verbs device (e.g. rxe0); without it: the software mlx5 device (sim)
  -i, --ib-port <n>      port (default 1)
  -x, --gid-index <n>    GID index (default 0; RoCE on rxe needs the IPv4-mapped one)
  -s, --size <n>         message size (default 2; atomics are always 8)
  -n, --iters <n>        iterations (default 1000 latency, 5000 bandwidth)
  -a, --all              every size 2^1 .. 2^23
  -I, --inline_size <n>  send up to n bytes inline (default 220 for write/send latency, 0
                         for bandwidth; refused for READ and atomics)
  -l, --post_list <n>    bandwidth: requests per doorbell (default 1)
  -Q, --cq-mod <n>       bandwidth: signal every n-th request (default 100; with -l: = -l)
  -c, --connection <t>   RC (default), UC, UD
      --report_gbits     bandwidth in Gb/sec instead of MiB/sec
      --json             also one JSON line per size
      --threads <1|2>    write_lat/send_lat: one thread alternating between client and
                         server, or one each (default: 2 with -d, 1 on the sim)
";

/// A parsed command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cli {
    /// What to measure.
    pub params: Params,
    /// `-d`: a verbs device; `None` = the sim.
    pub device: Option<String>,
    /// `--json`.
    pub json: bool,
}

fn num<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, String> {
    v.parse::<T>()
        .map_err(|_| format!("{flag}: '{v}' is not a valid number"))
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
    let mut json = false;
    let mut size: Option<u32> = None;
    let mut all = false;
    let mut cq_mod: Option<u32> = None;
    while let Some(a) = it.next() {
        let (flag, attached) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        let mut val = || -> Result<String, String> {
            match &attached {
                Some(v) => Ok(v.clone()),
                None => it
                    .next()
                    .cloned()
                    .ok_or_else(|| format!("{flag} needs a value")),
            }
        };
        match flag {
            "-h" | "--help" => return Ok(None),
            "-d" | "--ib-dev" => device = Some(val()?),
            "-i" | "--ib-port" => o.port = num(flag, &val()?)?,
            "-x" | "--gid-index" => o.gid_index = num(flag, &val()?)?,
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
            "--json" => json = true,
            "--threads" => o.threads = Some(num(flag, &val()?)?),
            other => return Err(format!("unknown option '{other}'")),
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
        o.sizes = vec![s];
    }
    // perftest's rule: with -l and no -Q, cq_mod = post_list.
    o.cq_mod = match cq_mod {
        Some(q) if o.post_list > 1 => q,
        Some(q) => q.min(TX_DEPTH),
        None if o.post_list > 1 => o.post_list,
        None => o.cq_mod,
    };
    o.check().map_err(|e| match e {
        rdma_direct::Error::InvalidArgument { detail, .. } => detail,
        e => e.to_string(),
    })?;
    Ok(Some(Cli {
        params: o,
        device,
        json,
    }))
}

/// `rdma-direct perf ...`: parse, run on the sim or `-d DEV`, print. Returns the exit code.
pub fn run(args: &[String]) -> i32 {
    let cli = match parse(args) {
        Ok(Some(c)) => c,
        Ok(None) => {
            print!("{HELP}");
            return 0;
        }
        Err(e) => {
            eprintln!("rdma-direct perf: {e}\n\n{HELP}");
            return 2;
        }
    };
    let mut print = |s: &str| {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(s.as_bytes());
        let _ = out.flush();
    };
    let res = match &cli.device {
        Some(d) => VerbsDevice::open(d).and_then(|mut p| report(&mut p, &cli, &mut print)),
        None => {
            // Device-thread mode: a thread plays the HCA, polling doorbells, as hardware
            // would; the mlx5 hot path runs against it unchanged.
            let mut p = SimDevice::new();
            p.start_device_thread()
                .and_then(|()| report(&mut p, &cli, &mut print))
        }
    };
    match res {
        Ok(_) => 0,
        Err(e) => {
            eprintln!("rdma-direct perf {}: {e}", cli.params.test.name());
            1
        }
    }
}

/// Measure `cli.params` on `p`, handing the text to `out` as it is produced (header, then
/// one table line per size, then the JSON lines). Returns the rows.
pub fn report<P: Provider>(
    p: &mut P,
    cli: &Cli,
    out: &mut dyn FnMut(&str),
) -> rdma_direct::Result<Vec<Row>>
where
    P::Qp: Send,
    P::Cq: Send,
{
    let o = &cli.params;
    let mut run = Run::new(p, o)?;
    let info = run.info().clone();
    out(&header(o, &info));
    out(&format!(
        "{}\n",
        if o.test.is_lat() {
            table::lat_header()
        } else {
            table::bw_header(o.unit)
        }
    ));
    let mut rows = Vec::with_capacity(info.sizes.len());
    for row in &mut run {
        let row = row?;
        out(&format!("{}\n", table::row_line(&row)));
        rows.push(row);
    }
    out(&format!("{}\n", table::RULE));
    if cli.json {
        for r in &rows {
            let body = table::row_json(r);
            out(&format!(
                "{{\"test\":\"{}\",\"provider\":\"{}\",\"device\":{},\"transport\":\"{}\",{}\n",
                o.test.name(),
                info.provider,
                super::json::string(&info.device),
                o.qp_type,
                &body[1..]
            ));
        }
    }
    Ok(rows)
}

/// The verb, as perftest's banner names it.
fn verb(t: Test) -> &'static str {
    match t {
        Test::WriteLat | Test::WriteBw => "RDMA_Write",
        Test::SendLat | Test::SendBw => "Send",
        Test::ReadLat | Test::ReadBw => "RDMA_Read",
        Test::AtomicLat => "Atomic (FETCH_AND_ADD)",
    }
}

/// perftest's header block, between two rules.
fn header(o: &Params, info: &Info) -> String {
    let mut h = String::new();
    let kind = if o.test.is_lat() { "Latency" } else { "BW" };
    let _ = writeln!(h, "{}", table::RULE);
    let _ = writeln!(h, "                    {} {} Test", verb(o.test), kind);
    let _ = writeln!(
        h,
        " Provider        : {}",
        table::provider_label(info.provider, &info.device)
    );
    let _ = writeln!(h, " Device          : {}", info.device);
    let _ = writeln!(h, " Test            : {}", o.test.name());
    let _ = writeln!(
        h,
        " Connection type : {}   (client and server QPs in this process, loopback)",
        o.qp_type
    );
    let _ = writeln!(h, " Number of qps   : 1 pair");
    if matches!(o.test, Test::WriteLat | Test::SendLat) {
        let _ = writeln!(
            h,
            " Threads         : {}",
            if info.two_threads {
                "2 (client and server each on its own thread)"
            } else {
                "1 (alternating between client and server)"
            }
        );
    }
    if o.test.is_lat() {
        let _ = writeln!(
            h,
            " Latency         : {}",
            if o.test.rtt_factor() == 2 {
                "half the round trip"
            } else {
                "full round trip"
            }
        );
    } else {
        let _ = writeln!(h, " TX depth        : {TX_DEPTH}");
        let _ = writeln!(h, " Post list       : {}", o.post_list);
        let _ = writeln!(h, " CQ Moderation   : {}", o.cq_mod);
    }
    let _ = writeln!(h, " Mtu             : {}[B]", info.mtu);
    let _ = writeln!(
        h,
        " Inline data     : {}",
        if o.inline > 0 {
            format!("up to {} B", o.inline)
        } else {
            "not used".into()
        }
    );
    if info.provider == ProviderKind::Verbs {
        let _ = writeln!(h, " GID index       : {}", o.gid_index);
    }
    for (name, ep) in [("local ", &info.client), ("remote", &info.server)] {
        let _ = writeln!(
            h,
            " {name} address: LID {:#06x} QPN {:#08x} PSN {:#08x} GID {}",
            ep.lid,
            ep.qpn,
            ep.psn,
            gid_text(&ep.gid)
        );
    }
    let _ = writeln!(h, "{}", table::RULE);
    h
}

/// A GID as eight groups of four hex digits.
fn gid_text(g: &[u8; 16]) -> String {
    let mut s = String::new();
    for (i, b) in g.iter().enumerate() {
        if i > 0 && i % 2 == 0 {
            s.push(':');
        }
        let _ = write!(s, "{b:02x}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdma_direct::perf::{two_threads, DEFAULT_CQ_MOD, DEFAULT_LAT_INLINE};

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
        assert_eq!(ok("atomic_lat").sizes, vec![8]);
        assert!(p("--help").unwrap().is_none());
        assert!(p("write_bw -h").unwrap().is_none());
    }

    #[test]
    fn perftest_flags() {
        let c = p("write_bw -d rxe0 -i 1 -x 3 -s 64 -n 2000 -l 32 -c UC --report_gbits --json")
            .unwrap()
            .unwrap();
        let o = &c.params;
        assert_eq!(c.device.as_deref(), Some("rxe0"));
        assert_eq!((o.gid_index, o.sizes[0], o.iters), (3, 64, 2000));
        // -l without -Q: cq_mod = post_list.
        assert_eq!((o.post_list, o.cq_mod), (32, 32));
        assert_eq!(o.qp_type, QpType::Uc);
        assert!(o.unit == BwUnit::Gbps && c.json);
        assert_eq!(ok("write_bw -l 32 -Q 8").cq_mod, 8);
        assert_eq!(ok("send_bw --size=128").sizes, vec![128]);
        let a = ok("read_bw -a");
        assert_eq!(a.sizes.first(), Some(&2));
        assert_eq!(a.sizes.last(), Some(&(1 << 23)));
        assert_eq!(a.sizes.len(), 23);
        assert!(a.clip_to_mtu);
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
        assert!(err("write_bw -n x").contains("not a valid number"));
        assert!(err("write_bw -n").contains("needs a value"));
        assert!(err("flood").contains("unknown test"));
        assert!(err("write_bw --bogus").contains("unknown option"));
        assert!(err("").contains("which test"));
        assert!(err("write_bw -i 0").contains("-i"));
        assert!(err("write_bw -c XRC").contains("XRC"));
    }

    /// `report` on the deterministic sim (no device thread; the one-thread loops call
    /// `progress`): the text and the rows.
    fn sim(args: &str) -> (Vec<Row>, String) {
        let c = p(args).unwrap().unwrap();
        let mut dev = SimDevice::new();
        let mut text = String::new();
        let rows = report(&mut dev, &c, &mut |s| text.push_str(s))
            .unwrap_or_else(|e| panic!("{args}: {e}"));
        assert_eq!(rows.len(), c.params.sizes.len(), "{text}");
        for row in &rows {
            assert!(text.contains(&table::row_line(row)), "{text}");
        }
        (rows, text)
    }

    #[test]
    fn prints_perftests_header_and_a_line_per_row() {
        let (_, t) = sim("write_lat -s 2 -n 50");
        assert!(
            t.contains(" Provider        : sim: software mlx5 device (sim0), not hardware\n"),
            "{t}"
        );
        assert!(t.contains("half the round trip"), "{t}");
        assert!(t.contains(&table::lat_header()), "{t}");
        assert!(
            t.contains("1 (alternating between client and server)"),
            "{t}"
        );
        let (_, t) = sim("read_lat -s 64 -n 20");
        assert!(t.contains("full round trip"), "{t}");
        let (rows, t) = sim("write_bw -s 64 -n 100 -l 4 --report_gbits");
        assert!(t.contains(&table::bw_header(BwUnit::Gbps)), "{t}");
        assert!(t.contains(" Post list       : 4\n"), "{t}");
        assert_eq!(rows.len(), 1);
        assert!(t.ends_with(&format!("{}\n", table::RULE)), "{t}");
    }

    #[test]
    fn two_threads_are_named_in_the_header() {
        let c = p("write_lat -s 2 -n 50 --threads 2").unwrap().unwrap();
        let mut dev = SimDevice::new();
        dev.start_device_thread().expect("device thread");
        let mut text = String::new();
        report(&mut dev, &c, &mut |s| text.push_str(s)).expect("run");
        assert!(
            text.contains("2 (client and server each on its own thread)"),
            "{text}"
        );
    }

    #[test]
    fn json_lines_follow_the_table() {
        let (_, text) = sim("write_lat -s 2 -n 10 --json");
        let json: Vec<&str> = text.lines().filter(|l| l.starts_with('{')).collect();
        assert_eq!(json.len(), 1, "{text}");
        assert!(
            json[0].starts_with(
                "{\"test\":\"write_lat\",\"provider\":\"sim\",\"device\":\"sim0\",\"transport\":\"RC\",\"bytes\":2,\"iterations\":10,"
            ),
            "{}",
            json[0]
        );
    }
}
