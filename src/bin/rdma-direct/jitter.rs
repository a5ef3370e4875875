//! `rdma-direct jitter [-c CPUS] [-D SECONDS] [--threshold NS] [-d DEV] [--no-osnoise]
//! [--json FILE] [--svg FILE]`: host noise per CPU, measured by
//! [`rdma_direct::noise::measure`], worded by [`rdma_direct::noise::report`] and printed
//! here: a table (count, p99, p99.9, max of the interruptions), each CPU's log2 histogram
//! and what its interruptions most likely were; the whole report as JSON with `--json`, the
//! histograms as an SVG plot with `--svg`.
//! Exit status 0 after a run, 1 when the run could not be made, 2 on bad arguments.

use std::path::PathBuf;
use std::time::Duration;

use rdma_direct::doctor::{parse_cpulist, Sysfs};
use rdma_direct::noise::report::{render_json, render_svg, render_text};
use rdma_direct::noise::{self, Config};

const USAGE: &str = "\
usage: rdma-direct jitter [-c CPUS] [-D SECONDS] [--threshold NS] [-d DEV] [--no-osnoise]
                          [--json FILE] [--svg FILE]

One spinning thread per CPU reads the time-stamp counter in a tight loop; every gap above
the threshold is an interruption. Per CPU: their count, p99, p99.9 and maximum, a log2
histogram, and what the kernel counted on that CPU meanwhile (interrupts by name, softirqs,
steal time, the thread's context switches, the osnoise tracer's sources where it is
available), summed up as what the interruptions most likely were.

  -c, --cpus CPUS     the CPUs, as a list: 0,1 or 2-5,8 (default: those this process may
                      run on)
  -D, -t, --duration S
                      seconds to measure on each CPU, all at once (default 5; 0.05 is fine)
  --threshold NS      a gap above NS nanoseconds is an interruption (default: 10 x the
                      loop's smallest gap, at least 100 ns)
  -d, --ib-dev DEV    name this RDMA device's IRQs as the NIC's
  --no-osnoise        do not take the kernel's osnoise tracer even when it is free
  --json FILE         the whole report as JSON
  --svg FILE          the histograms as a plot

exit status: 0 measured, 1 the measurement could not run, 2 bad arguments
";

struct Opts {
    cfg: Config,
    json: Option<PathBuf>,
    svg: Option<PathBuf>,
}

/// `-D`'s seconds: a positive decimal number.
fn seconds(v: &str) -> Result<Duration, String> {
    let s: f64 = v
        .parse()
        .map_err(|_| format!("-D: '{v}' is not a number of seconds"))?;
    if !(s > 0.0 && s <= 86_400.0) {
        return Err(format!(
            "-D: {v} is out of range (above 0, at most 86400 seconds)"
        ));
    }
    Ok(Duration::from_secs_f64(s))
}

fn parse(args: &[String]) -> Result<Option<Opts>, String> {
    let mut o = Opts {
        cfg: Config::default(),
        json: None,
        svg: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (flag, attached) = crate::split_flag(a);
        let mut val = || crate::flag_value(flag, attached, &mut it);
        match flag {
            "-h" | "--help" => return Ok(None),
            "-c" | "--cpus" => {
                let v = val()?;
                o.cfg.cpus = parse_cpulist(&v)
                    .filter(|l| !l.is_empty())
                    .ok_or(format!("{flag}: '{v}' is not a CPU list (0,1 or 2-5,8)"))?;
                o.cfg.cpus.dedup();
            }
            "-D" | "-t" | "--duration" => o.cfg.duration = seconds(&val()?)?,
            "--threshold" => {
                let n: u64 = crate::number(flag, &val()?)?;
                if n == 0 {
                    return Err("--threshold 0: every gap would be an interruption".into());
                }
                o.cfg.threshold_ns = Some(n);
            }
            "-d" | "--ib-dev" => o.cfg.device = Some(val()?),
            "--no-osnoise" => o.cfg.osnoise = false,
            "--json" => o.json = Some(PathBuf::from(val()?)),
            "--svg" => o.svg = Some(PathBuf::from(val()?)),
            other if other.starts_with('-') => return Err(format!("unknown option '{other}'")),
            other => return Err(format!("unexpected argument '{other}'")),
        }
    }
    for (flag, p) in [("--json", &o.json), ("--svg", &o.svg)] {
        if let Some(p) = p {
            crate::check_output(flag, p)?;
        }
    }
    Ok(Some(o))
}

pub fn run(args: &[String]) -> i32 {
    let o = match crate::options_or_exit("jitter", USAGE, parse(args)) {
        Ok(o) => o,
        Err(status) => return status,
    };
    let report = match noise::measure(&Sysfs::system(), &o.cfg) {
        Ok(r) => r,
        Err(e) => {
            // The library names its field; here the flag that sets it.
            let e = e.to_string().replace("Config::cpus", "--cpus");
            errln!("rdma-direct jitter: {e}");
            return 1;
        }
    };
    let mut out = render_text(&report, o.cfg.threshold_ns.is_some());
    let files = [
        (&o.json, render_json(&report)),
        (&o.svg, render_svg(&report)),
    ];
    let mut code = 0;
    for (path, text) in files {
        if let Some(p) = path {
            match std::fs::write(p, text) {
                Ok(()) => out.push_str(&format!("wrote {}\n", p.display())),
                Err(e) => {
                    errln!("rdma-direct jitter: {}: {e}", p.display());
                    code = 1;
                }
            }
        }
    }
    out!("{out}");
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments() {
        assert_eq!(seconds("0.05"), Ok(Duration::from_millis(50)));
        assert!(seconds("0").unwrap_err().contains("out of range"));
        assert!(seconds("x").unwrap_err().contains("not a number"));
        let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let o = parse(&args(&[
            "-c",
            "0-1,3",
            "-D",
            "2",
            "--threshold=500",
            "-d",
            "mlx5_0",
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(o.cfg.cpus, vec![0, 1, 3]);
        assert_eq!(o.cfg.duration, Duration::from_secs(2));
        assert_eq!(o.cfg.threshold_ns, Some(500));
        assert_eq!(o.cfg.device.as_deref(), Some("mlx5_0"));
        assert_eq!(
            parse(&args(&["-c", "1-0"])).err().unwrap(),
            "-c: '1-0' is not a CPU list (0,1 or 2-5,8)"
        );
        assert_eq!(
            parse(&args(&["--threshold", "0"])).err().unwrap(),
            "--threshold 0: every gap would be an interruption"
        );
        assert!(parse(&args(&["-h"])).unwrap().is_none());
    }
}
