//! `rdma-direct plot A.json B.json ... --svg FILE`: overlay result files as curves.
//!
//! Contract: every file is read with [`results::read_file`] (this tool's files and perftest's
//! `--out_json` files); all must be latency runs or all bandwidth runs, else the command
//! refuses and names one file of each kind. Files of the same tool, provider, device, test and
//! transport whose sizes do not overlap are joined into one curve (perftest leaves one size per
//! file); each other file is its own curve. Latency runs give one chart of the chosen metric
//! against message size (default `typical`: t_typical with a t_min..p99 band); bandwidth runs
//! give BW average and message rate against size (two panels), or the one chosen by
//! `--metric bw|rate`. [`charts`] and [`svg`] are the same drawing for `perf --svg`.

use std::path::Path;

use crate::plot::{self, Chart, Point, Series, XKind};
use crate::results::{self, Rows, RunFile};

const HELP: &str = "\
usage: rdma-direct plot FILE.json... --svg OUT.svg [--title T] [--metric M]

Draw the result files of `perf --json` runs, and perftest `--out_json` files, as curves
against message size (log2 axis) in one SVG; several files are overlaid, one line each.

  --svg OUT.svg      where to write the SVG (required)
  --title T          the chart title (default: test, tools, providers and devices)
  --metric M         latency files: typical (default: t_typical, shaded t_min..p99),
                     avg (t_avg, shaded +-t_stdev) or p99;
                     bandwidth files: bw (BW average) or rate (MsgRate);
                     default for bandwidth: both, as two charts
  -h, --help         this text

perftest keeps only the last size in its --out_json file (it rewrites the file for every
size): run it once per size with --out_json_file=NAME and give all the files; files of the
same tool, provider, device and test join into one curve. Latency and bandwidth files cannot
be mixed in one plot.
";

/// What the y axis shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Latency t_typical (median), band t_min..p99.
    Typical,
    /// Latency t_avg, band t_avg +- t_stdev.
    Avg,
    /// Latency 99th percentile.
    P99,
    /// Bandwidth, BW average in MiB/s.
    Bw,
    /// Message rate in Mpps.
    Rate,
}

impl Metric {
    /// Parse `typical|avg|p99|bw|rate`.
    pub fn from_name(s: &str) -> Option<Metric> {
        Some(match s {
            "typical" => Metric::Typical,
            "avg" => Metric::Avg,
            "p99" => Metric::P99,
            "bw" => Metric::Bw,
            "rate" => Metric::Rate,
            _ => return None,
        })
    }
    fn is_lat(self) -> bool {
        matches!(self, Metric::Typical | Metric::Avg | Metric::P99)
    }
    fn name(self) -> &'static str {
        match self {
            Metric::Typical => "typical",
            Metric::Avg => "avg",
            Metric::P99 => "p99",
            Metric::Bw => "bw",
            Metric::Rate => "rate",
        }
    }
}

/// `rdma-direct plot ...`. Returns the exit code (2 for a usage error, 1 when a file cannot be
/// read or written).
pub fn run(args: &[String]) -> i32 {
    let mut files = Vec::new();
    let mut out: Option<String> = None;
    let mut title: Option<String> = None;
    let mut metric = None;
    let mut it = args.iter();
    let usage = |msg: String| crate::usage_error("plot", &msg);
    while let Some(a) = it.next() {
        match a.as_str() {
            "-h" | "--help" => {
                out!("{HELP}");
                return 0;
            }
            "--svg" | "--title" | "--metric" => {
                let Some(v) = it.next() else {
                    return usage(format!("{a} needs a value"));
                };
                match a.as_str() {
                    "--svg" => out = Some(v.clone()),
                    "--title" => title = Some(v.clone()),
                    _ => match Metric::from_name(v) {
                        Some(m) => metric = Some(m),
                        None => {
                            return usage(format!(
                                "--metric {v}: expected typical, avg, p99, bw or rate"
                            ))
                        }
                    },
                }
            }
            s if s.starts_with('-') && s.len() > 1 => {
                return usage(format!("unknown option '{s}'"))
            }
            f => files.push(f.to_string()),
        }
    }
    let Some(out) = out else {
        return usage("--svg OUT.svg is required".into());
    };
    if files.is_empty() {
        return usage("no result files given".into());
    }
    if let Err(e) = crate::check_output("--svg", Path::new(&out)) {
        errln!("rdma-direct plot: {e}");
        return 1;
    }
    let mut runs = Vec::with_capacity(files.len());
    for f in &files {
        match results::read_file(Path::new(f)) {
            Ok(r) => runs.push(r),
            Err(e) => {
                errln!("rdma-direct plot: {e}");
                return 1;
            }
        }
    }
    if let Some(j) = runs
        .iter()
        .position(|r| r.rows.kind() != runs[0].rows.kind())
    {
        errln!(
            "rdma-direct plot: cannot mix latency and bandwidth results in one plot: {} is {} ({}), {} is {} ({}); plot them separately",
            files[0],
            runs[0].test,
            runs[0].rows.kind(),
            files[j],
            runs[j].test,
            runs[j].rows.kind()
        );
        return 2;
    }
    if let Some(m) = metric {
        if m.is_lat() != matches!(runs[0].rows, Rows::Lat(_)) {
            return usage(format!(
                "--metric {} does not apply to {} results (latency: typical, avg, p99; bandwidth: bw, rate)",
                m.name(),
                runs[0].rows.kind()
            ));
        }
    }
    let doc = match svg(&runs, metric, title.as_deref()) {
        Ok(d) => d,
        Err(e) => {
            errln!("rdma-direct plot: {e}");
            return 2;
        }
    };
    if let Err(e) = std::fs::write(&out, doc) {
        errln!("rdma-direct plot: {out}: {e}");
        return 1;
    }
    let curves = groups(&runs).len();
    outln!(
        "wrote {out}: {curves} curve{} from {} file{}",
        if curves == 1 { "" } else { "s" },
        runs.len(),
        if runs.len() == 1 { "" } else { "s" }
    );
    0
}

/// One curve: a name and the runs joined into it.
struct Group<'a> {
    name: String,
    runs: Vec<&'a RunFile>,
}

fn key(r: &RunFile) -> (&str, &str, &str, &str, &str) {
    (&r.tool, &r.provider, &r.device, &r.test, &r.transport)
}

/// Join runs of the same key with disjoint sizes; name each curve by tool, provider and
/// device (plus test and transport when those differ between curves).
fn groups(runs: &[RunFile]) -> Vec<Group<'_>> {
    let mut gs: Vec<(Vec<&RunFile>, Vec<u64>)> = Vec::new();
    for r in runs {
        let sizes = r.rows.sizes();
        let slot = gs
            .iter_mut()
            .find(|(g, have)| key(g[0]) == key(r) && !sizes.iter().any(|s| have.contains(s)));
        match slot {
            Some((g, have)) => {
                g.push(r);
                have.extend(sizes);
            }
            None => gs.push((vec![r], sizes)),
        }
    }
    let differ = |f: fn(&RunFile) -> &str| gs.iter().any(|(g, _)| f(g[0]) != f(gs[0].0[0]));
    let show_test = differ(|r| &r.test);
    let show_tr = differ(|r| &r.transport);
    let mut out: Vec<Group<'_>> = Vec::new();
    for (g, _) in gs {
        let r = g[0];
        let mut name = format!("{} {} {}", r.tool, r.provider, r.device);
        if show_test {
            name = format!("{name} {}", r.test);
        }
        if show_tr && !r.transport.is_empty() {
            name = format!("{name} {}", r.transport);
        }
        let same = out.iter().filter(|o| o.name.starts_with(&name)).count();
        if same > 0 {
            name = format!("{name} ({})", same + 1);
        }
        out.push(Group { name, runs: g });
    }
    out
}

/// The charts for `runs` (all latency or all bandwidth; see the module doc). `title`
/// replaces the generated title.
pub fn charts(
    runs: &[RunFile],
    metric: Option<Metric>,
    title: Option<&str>,
) -> Result<Vec<Chart>, String> {
    let first = runs.first().ok_or("no runs to plot")?;
    let lat = matches!(first.rows, Rows::Lat(_));
    if let Some(r) = runs.iter().find(|r| matches!(r.rows, Rows::Lat(_)) != lat) {
        return Err(format!(
            "cannot mix latency and bandwidth results in one plot ({} is {}, {} is {})",
            first.test,
            first.rows.kind(),
            r.test,
            r.rows.kind()
        ));
    }
    let metrics: Vec<Metric> = match metric {
        Some(m) if m.is_lat() != lat => {
            return Err(format!(
                "metric {} does not apply to {} results",
                m.name(),
                first.rows.kind()
            ))
        }
        Some(m) => vec![m],
        None if lat => vec![Metric::Typical],
        None => vec![Metric::Bw, Metric::Rate],
    };
    let gs = groups(runs);
    let mut tests: Vec<&str> = Vec::new();
    for r in runs {
        if !tests.contains(&r.test.as_str()) {
            tests.push(&r.test);
        }
    }
    let who = if gs.len() == 1 {
        let r = gs[0].runs[0];
        format!("{}, provider {}, device {}", r.tool, r.provider, r.device)
    } else if gs.len() == 2 {
        format!("{} vs {}", gs[0].name, gs[1].name)
    } else {
        format!("{} runs", gs.len())
    };
    let mut transports: Vec<&str> = Vec::new();
    for r in runs {
        if !r.transport.is_empty() && !transports.contains(&r.transport.as_str()) {
            transports.push(&r.transport);
        }
    }
    let mut iters: Vec<u64> = Vec::new();
    for r in runs {
        let it = match &r.rows {
            Rows::Lat(p) => p.iter().map(|p| p.iters).collect::<Vec<_>>(),
            Rows::Bw(p) => p.iter().map(|p| p.iters).collect(),
        };
        for i in it {
            if !iters.contains(&i) {
                iters.push(i);
            }
        }
    }
    let mut sub = Vec::new();
    if !transports.is_empty() {
        sub.push(transports.join("/"));
    }
    match iters.as_slice() {
        [] => {}
        [one] => sub.push(format!("{one} iterations per size")),
        _ => sub.push("iterations differ per size or run".to_string()),
    }
    if lat {
        sub.push("write/send: half the round trip; read/atomic: full round trip".to_string());
    }
    Ok(metrics
        .iter()
        .map(|&m| {
            let (what, y_label, band_label) = match m {
                Metric::Typical => (
                    "latency",
                    "latency: t_typical (median) [µs]",
                    Some("shaded: t_min .. p99"),
                ),
                Metric::Avg => (
                    "latency",
                    "latency: t_avg [µs]",
                    Some("shaded: t_avg ± t_stdev"),
                ),
                Metric::P99 => ("latency", "latency: 99th percentile [µs]", None),
                Metric::Bw => ("bandwidth", "BW average [MiB/s]", None),
                Metric::Rate => ("message rate", "message rate [Mpps]", None),
            };
            let series = gs
                .iter()
                .map(|g| Series {
                    name: g.name.clone(),
                    points: g.runs.iter().flat_map(|r| points(&r.rows, m)).collect(),
                })
                .collect();
            Chart {
                title: match title {
                    Some(t) if metrics.len() == 1 => t.to_string(),
                    Some(t) => format!("{t} — {what}"),
                    None => format!("{} {what} vs message size — {who}", tests.join("/")),
                },
                subtitle: sub.join(" · "),
                x_label: "message size [bytes]".to_string(),
                x_kind: XKind::Bytes,
                y_label: y_label.to_string(),
                band_label: band_label.map(str::to_string),
                series,
            }
        })
        .collect())
}

fn points(rows: &Rows, m: Metric) -> Vec<Point> {
    match rows {
        Rows::Lat(r) => r
            .iter()
            .map(|p| {
                let (y, band) = match m {
                    Metric::Avg => (p.t_avg, Some((p.t_avg - p.t_stdev, p.t_avg + p.t_stdev))),
                    Metric::P99 => (p.p99, None),
                    _ => (p.t_typical, Some((p.t_min, p.p99))),
                };
                Point {
                    x: p.bytes as f64,
                    y,
                    band,
                }
            })
            .collect(),
        Rows::Bw(r) => r
            .iter()
            .map(|p| Point {
                x: p.bytes as f64,
                y: if m == Metric::Rate {
                    p.msg_rate_mpps
                } else {
                    p.bw_avg
                },
                band: None,
            })
            .collect(),
    }
}

/// The SVG document of [`charts`].
pub fn svg(
    runs: &[RunFile],
    metric: Option<Metric>,
    title: Option<&str>,
) -> Result<String, String> {
    charts(runs, metric, title).map(|c| plot::render(&c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::tests::check_xml;
    use rdma_direct::perf::stats::{BwRow, BwUnit, Histogram, LatRow};

    fn lat(tool: &str, provider: &str, sizes: &[u64], base: f64) -> RunFile {
        let mut r = RunFile::new(
            "write_lat",
            provider,
            if provider == "sim" { "sim0" } else { "rxe0" },
            "RC",
            Rows::Lat(
                sizes
                    .iter()
                    .map(|&b| {
                        let t = base + b as f64 / 1000.0;
                        LatRow {
                            bytes: b,
                            iters: 1000,
                            t_min: t * 0.9,
                            t_max: t * 3.0,
                            t_typical: t,
                            t_avg: t * 1.05,
                            t_stdev: t * 0.1,
                            p99: t * 1.6,
                            p99_9: t * 2.0,
                            p99_99: None,
                            p99_999: None,
                            hist: Histogram::EMPTY,
                        }
                    })
                    .collect(),
            ),
        );
        r.tool = tool.to_string();
        r
    }

    fn bw() -> RunFile {
        RunFile::new(
            "write_bw",
            "sim",
            "sim0",
            "RC",
            Rows::Bw(vec![BwRow {
                bytes: 64,
                iters: 5000,
                bw_peak: 100.0,
                bw_avg: 90.0,
                msg_rate_mpps: 1.4,
                unit: BwUnit::MiBps,
            }]),
        )
    }

    #[test]
    fn perftest_single_size_files_join_into_one_curve() {
        let all: Vec<u64> = (1..=23).map(|k| 1u64 << k).collect();
        let mut runs = vec![lat("rdma-direct", "sim", &all, 0.5)];
        for &s in &all {
            runs.push(lat("perftest", "verbs", &[s], 20.0));
        }
        // A second sweep of ours overlaps the first: its own curve.
        runs.push(lat("rdma-direct", "sim", &all[..4], 0.7));
        let c = charts(&runs, None, None).unwrap();
        assert_eq!(c.len(), 1);
        let names: Vec<&str> = c[0].series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "rdma-direct sim sim0",
                "perftest verbs rxe0",
                "rdma-direct sim sim0 (2)"
            ]
        );
        assert_eq!(c[0].series[1].points.len(), 23);
        let svg = plot::render(&c);
        let elems = check_xml(&svg).unwrap();
        let pts = elems
            .iter()
            .filter(|e| e.1.iter().any(|(k, v)| k == "class" && v == "pt"))
            .count();
        assert_eq!(pts, 23 + 23 + 4);
        assert!(c[0].title.contains("write_lat latency vs message size"));
    }

    #[test]
    fn bandwidth_gives_two_panels_or_the_chosen_metric() {
        let c = charts(&[bw()], None, Some("T")).unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].y_label, "BW average [MiB/s]");
        assert_eq!(c[1].y_label, "message rate [Mpps]");
        assert_eq!(c[1].series[0].points[0].y, 1.4);
        assert_eq!(c[0].title, "T — bandwidth");
        let c = charts(&[bw()], Some(Metric::Rate), Some("T")).unwrap();
        assert_eq!((c.len(), c[0].title.as_str()), (1, "T"));
        assert!(charts(&[bw()], Some(Metric::P99), None)
            .unwrap_err()
            .contains("does not apply"));
    }

    #[test]
    fn mixing_latency_and_bandwidth_is_refused() {
        let e = charts(&[lat("rdma-direct", "sim", &[2], 1.0), bw()], None, None).unwrap_err();
        assert!(e.contains("cannot mix latency and bandwidth"), "{e}");
        assert!(charts(&[], None, None).is_err());
    }

    #[test]
    fn metric_avg_band_is_stdev() {
        let c = charts(
            &[lat("rdma-direct", "sim", &[2], 1.0)],
            Some(Metric::Avg),
            None,
        )
        .unwrap();
        let p = c[0].series[0].points[0];
        assert!((p.y - 1.0521).abs() < 1e-9);
        let (lo, hi) = p.band.unwrap();
        assert!((hi - lo - 2.0 * 0.1002).abs() < 1e-9);
        assert!(c[0].title.contains("provider sim, device sim0"));
    }
}
