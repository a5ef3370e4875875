//! `rdma-direct scenario PATH...`: run `.scn` transfer scenarios (files, or directories of
//! them) on the sim, a verbs device or mlx5, through the library's runner
//! (`rdma_direct::scenario`); this file parses the command line, opens the provider for each
//! scenario and prints.
//!
//! Contract: one line per scenario run, `PASS` or `FAIL` first, then the scenario, its file
//! and where it ran; under a `FAIL` line every mismatch with its `file:line`. A file that
//! does not parse is a `FAIL` line with its `file:line: problem`, and the other files still
//! run. `--json` prints one JSON object per scenario instead (JSON lines). Exit status 0 when
//! every scenario passed, 1 when any failed or none was selected, 2 for a bad command line.
//! `RDMA_DIRECT_SCENARIO=NAME` runs only the scenarios called NAME (the `name` line, else the
//! file name without `.scn`). Each scenario gets a freshly opened provider (on the sim: a new
//! device), so no state leaks from one into the next.

use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Duration;

use rdma_direct::providers::{Provider, ProviderKind};
use rdma_direct::scenario::{self, Failure, Report, RunOpts, Scenario};

use super::provider::{self, Choice, Job};
use rdma_direct::report::json;

const USAGE: &str = "\
usage: rdma-direct scenario PATH... [-d DEV] [--provider P] [--mode M] [-x GID_INDEX]
                            [--keep-going] [--json] [--timeout SECS]

Runs .scn transfer scenarios (format: fixtures/scenarios/README.md) given as files or
directories (a directory stands for its *.scn files); one PASS/FAIL line per scenario.

  -d, --ib-dev DEV     run on this RDMA device (rxe0, mlx5_0); without it, the software
                       mlx5 device (sim)
  --provider P         auto (default), mlx5, verbs or sim (see `rdma-direct help`)
  --mode M             on the sim: deterministic (default: the device runs when the runner
                       polls), thread (a device thread, as hardware), or all (both in turn)
  -x, --gid-index N    GID index of the loopback connections (default: the device's first
                       RoCE v2 IPv4 entry)
  --keep-going         report every mismatch of a scenario, not only the first
  --json               one JSON object per scenario on stdout (JSON lines)
  --timeout SECS       how long one group of expected completions or an event may take
                       (default 10) unless its line gives within=

Env: RDMA_DIRECT_SCENARIO=NAME runs only the scenarios called NAME.
Exit status: 0 all passed, 1 a scenario failed (or none selected), 2 bad command line.
";

/// How the sim runs its device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Deterministic,
    Thread,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Deterministic => "deterministic",
            Mode::Thread => "thread",
        }
    }
}

struct Opts {
    paths: Vec<PathBuf>,
    dev: Option<String>,
    choice: Choice,
    modes: Vec<Mode>,
    gid_index: Option<u8>,
    keep_going: bool,
    json: bool,
    timeout: Duration,
}

fn parse(args: &[String]) -> Result<Option<Opts>, String> {
    let mut o = Opts {
        paths: Vec::new(),
        dev: None,
        choice: Choice::Auto,
        modes: vec![Mode::Deterministic],
        gid_index: None,
        keep_going: false,
        json: false,
        timeout: Duration::from_secs(10),
    };
    let mut mode_given = false;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let (flag, attached) = crate::split_flag(arg);
        match flag {
            "-h" | "--help" => return Ok(None),
            "--keep-going" => o.keep_going = true,
            "--json" => o.json = true,
            "-d" | "--ib-dev" => o.dev = Some(crate::flag_value(flag, attached, &mut rest)?),
            "--provider" => {
                o.choice =
                    crate::provider::parse_choice(&crate::flag_value(flag, attached, &mut rest)?)?
            }
            "--mode" => {
                mode_given = true;
                o.modes = match crate::flag_value(flag, attached, &mut rest)?.as_str() {
                    "deterministic" => vec![Mode::Deterministic],
                    "thread" => vec![Mode::Thread],
                    "all" => vec![Mode::Deterministic, Mode::Thread],
                    other => {
                        return Err(format!(
                            "--mode: '{other}' is not deterministic, thread or all"
                        ))
                    }
                }
            }
            "-x" | "--gid-index" => {
                let v = crate::flag_value(flag, attached, &mut rest)?;
                o.gid_index = Some(crate::number(flag, &v)?);
            }
            "--timeout" => {
                let v = crate::flag_value(flag, attached, &mut rest)?;
                let secs: u64 = crate::number(flag, &v)?;
                if secs == 0 {
                    return Err("--timeout: at least 1 second".into());
                }
                o.timeout = Duration::from_secs(secs);
            }
            f if f.starts_with('-') && f.len() > 1 => return Err(format!("unknown option '{f}'")),
            _ => o.paths.push(PathBuf::from(arg)),
        }
    }
    if o.paths.is_empty() {
        return Err("no scenario given: name .scn files or directories".into());
    }
    o.dev = provider::device_arg(o.dev);
    if mode_given && o.dev.is_some() {
        return Err("--mode is for the sim (without -d): a device runs itself".into());
    }
    Ok(Some(o))
}

/// One scenario on a freshly opened provider.
struct RunOne<'a> {
    sc: &'a Scenario,
    o: &'a Opts,
    mode: Mode,
}

/// Where it ran, and how it went.
struct Ran {
    device: String,
    tags: Vec<String>,
    result: Result<Report, Failure>,
}

impl Job for RunOne<'_> {
    type Out = Ran;
    fn run<P: Provider>(&mut self, p: &mut P) -> rdma_direct::Result<Ran> {
        let mut opts = match self.o.gid_index {
            // An explicit index needs no look at the device's GID table.
            Some(g) => {
                let mut r = RunOpts::new(p.kind(), p.device_name());
                r.gid_index = g;
                r
            }
            None => RunOpts::for_provider(p)?,
        };
        opts.keep_going = self.o.keep_going;
        opts.poll_timeout = self.o.timeout;
        if p.kind() == ProviderKind::Sim && self.mode == Mode::Deterministic {
            // Nothing runs between the runner's polls: no straggler can come later.
            opts.settle = Duration::from_millis(1);
        }
        Ok(Ran {
            device: p.device_name().to_string(),
            tags: opts.tags.clone(),
            result: scenario::run_scenario(p, self.sc, &opts),
        })
    }
}

/// Entry point of `rdma-direct scenario`.
pub fn run(args: &[String]) -> i32 {
    let o = match crate::options_or_exit("scenario", USAGE, parse(args)) {
        Ok(o) => o,
        Err(status) => return status,
    };
    let (kind, _why) = match provider::select("scenario", o.choice, o.dev.as_deref()) {
        Ok(k) => k,
        Err(status) => return status,
    };
    let files = match scenario::files(&o.paths) {
        Ok(f) => f,
        Err(e) => {
            errln!("rdma-direct scenario: {e}");
            return 1;
        }
    };
    let only = std::env::var("RDMA_DIRECT_SCENARIO").ok();
    let modes: &[Mode] = if kind == ProviderKind::Sim {
        &o.modes
    } else {
        &[Mode::Deterministic]
    };
    let mut out = crate::out::Stdout;
    match run_all(&mut out, &o, kind, modes, &files, only.as_deref()) {
        Ok(status) => status,
        // The failure line is the tool's (out.rs), at its end.
        Err(_) if crate::out::stdout_failed() => 1,
        Err(e) => {
            errln!("rdma-direct scenario: writing the results: {e}");
            1
        }
    }
}

/// Every file, every mode; the exit status.
fn run_all(
    out: &mut impl Write,
    o: &Opts,
    kind: ProviderKind,
    modes: &[Mode],
    files: &[PathBuf],
    only: Option<&str>,
) -> io::Result<i32> {
    let (mut passed, mut failed) = (0u32, 0u32);
    for f in files {
        let sc = match scenario::load_file(f) {
            Ok(sc) => sc,
            Err(e) => {
                failed += 1;
                if o.json {
                    writeln!(
                        out,
                        "{{\"file\":{},\"result\":\"parse_error\",\"line\":{},\"error\":{}}}",
                        json::string(&e.file),
                        e.line,
                        json::string(&e.msg)
                    )?;
                } else {
                    writeln!(out, "FAIL {}: does not parse: {e}", f.display())?;
                }
                continue;
            }
        };
        if only.is_some_and(|n| n != sc.name) {
            continue;
        }
        for &mode in modes {
            let mut job = RunOne { sc: &sc, o, mode };
            let ran =
                provider::open_and_run(kind, o.dev.as_deref(), mode == Mode::Thread, &mut job);
            let ok = match &ran {
                Ok(r) => r.result.is_ok(),
                Err(_) => false,
            };
            if ok {
                passed += 1;
            } else {
                failed += 1;
            }
            let mode_name = (kind == ProviderKind::Sim).then(|| mode.name());
            if o.json {
                writeln!(out, "{}", to_json(&sc, mode_name, &ran))?;
            } else {
                write_line(out, &sc, mode_name, &ran)?;
            }
        }
    }
    if passed + failed == 0 {
        let why = match only {
            Some(n) => format!("no scenario is called '{n}' (RDMA_DIRECT_SCENARIO)"),
            None => "no .scn file found".to_string(),
        };
        if o.json {
            writeln!(
                out,
                "{{\"result\":\"none\",\"error\":{}}}",
                json::string(&why)
            )?;
        } else {
            writeln!(out, "scenarios: none run: {why}")?;
        }
        return Ok(1);
    }
    if !o.json {
        writeln!(out, "scenarios: {passed} passed, {failed} failed")?;
    }
    out.flush()?;
    Ok(i32::from(failed > 0))
}

/// The text line (and, on failure, the mismatches) of one run.
fn write_line(
    out: &mut impl Write,
    sc: &Scenario,
    mode: Option<&str>,
    ran: &rdma_direct::Result<Ran>,
) -> io::Result<()> {
    let how = |r: &Ran| match mode {
        Some(m) => format!("{} [{}], {m}", r.device, r.tags.join(",")),
        None => format!("{} [{}]", r.device, r.tags.join(",")),
    };
    match ran {
        Ok(r) => match &r.result {
            Ok(rep) => writeln!(
                out,
                "PASS {:<24} {} on {}: {} posted, {} rejected, {} completions, {} bytes checked",
                sc.name,
                sc.file,
                how(r),
                rep.posted,
                rep.rejected,
                rep.completions,
                rep.bytes_checked
            ),
            Err(f) => {
                writeln!(
                    out,
                    "FAIL {:<24} {} on {}: {} mismatch(es)",
                    sc.name,
                    sc.file,
                    how(r),
                    f.mismatches.len()
                )?;
                for m in &f.mismatches {
                    writeln!(out, "  {}:{} ({}):", f.file, m.line, m.step)?;
                    for l in m.detail.lines() {
                        writeln!(out, "    {l}")?;
                    }
                }
                Ok(())
            }
        },
        Err(e) => writeln!(
            out,
            "FAIL {:<24} {}: cannot open the provider: {e}",
            sc.name, sc.file
        ),
    }
}

/// One run as a JSON object.
fn to_json(sc: &Scenario, mode: Option<&str>, ran: &rdma_direct::Result<Ran>) -> String {
    let mut s = format!(
        "{{\"scenario\":{},\"file\":{}",
        json::string(&sc.name),
        json::string(&sc.file)
    );
    if let Some(m) = mode {
        s.push_str(&format!(",\"mode\":{}", json::string(m)));
    }
    match ran {
        Err(e) => s.push_str(&format!(
            ",\"result\":\"error\",\"error\":{}",
            json::string(&e.to_string())
        )),
        Ok(r) => {
            let tags: Vec<String> = r.tags.iter().map(|t| json::string(t)).collect();
            s.push_str(&format!(
                ",\"device\":{},\"tags\":[{}]",
                json::string(&r.device),
                tags.join(",")
            ));
            match &r.result {
                Ok(rep) => s.push_str(&format!(
                    ",\"result\":\"pass\",\"posted\":{},\"rejected\":{},\"completions\":{},\"bytes_checked\":{}",
                    rep.posted, rep.rejected, rep.completions, rep.bytes_checked
                )),
                Err(f) => {
                    let ms: Vec<String> = f
                        .mismatches
                        .iter()
                        .map(|m| {
                            format!(
                                "{{\"line\":{},\"step\":{},\"detail\":{}}}",
                                m.line,
                                json::string(&m.step),
                                json::string(&m.detail)
                            )
                        })
                        .collect();
                    s.push_str(&format!(
                        ",\"result\":\"fail\",\"mismatches\":[{}]",
                        ms.join(",")
                    ));
                }
            }
        }
    }
    s.push('}');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn the_command_line() {
        let o = parse(&args(
            "a.scn dir --keep-going --json --mode=all -x 3 --timeout 5",
        ))
        .unwrap()
        .unwrap();
        assert_eq!(o.paths, [PathBuf::from("a.scn"), PathBuf::from("dir")]);
        assert!(o.keep_going && o.json);
        assert_eq!(o.modes, [Mode::Deterministic, Mode::Thread]);
        assert_eq!(o.gid_index, Some(3));
        assert_eq!(o.timeout, Duration::from_secs(5));
        assert!(parse(&args("--help")).unwrap().is_none());
        for (bad, why) in [
            ("", "no scenario given"),
            ("a.scn --mode fast", "not deterministic"),
            ("a.scn --frob", "unknown option"),
            ("a.scn -d rxe0 --mode thread", "--mode is for the sim"),
            ("a.scn --timeout 0", "at least 1"),
            ("a.scn -x 300", "out of range"),
        ] {
            let e = parse(&args(bad)).err().unwrap_or_default();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
        // -d sim0 is the software device, as no -d.
        let o = parse(&args("a.scn -d sim0 --mode thread"))
            .unwrap()
            .unwrap();
        assert_eq!(o.dev, None);
    }
}
