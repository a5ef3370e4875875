//! Result files drawn as charts: the curves `rdma-direct plot` and `perf --svg` draw.
//!
//! Contract: [`charts`] takes runs that are all latency or all bandwidth (else an error naming
//! one of each). Runs of the same tool, provider, device, test and transport whose sizes do
//! not overlap are joined into one curve (perftest leaves one size per file); each other run
//! is its own curve, named by tool, provider and device (plus test and transport where those
//! differ between curves). Latency runs give one chart of the chosen [`Metric`] against
//! message size (default [`Metric::Typical`]: t_typical with a t_min..p99 band); bandwidth
//! runs give BW average and message rate (two charts), or the one chosen. [`svg`] renders
//! them with [`plot::render_panels`] on the y scale the caller gives (a size sweep spans
//! decades: the CLI asks for log unless told otherwise). Errors are returned as text;
//! nothing is printed.

use super::{Rows, RunFile};
use crate::report::plot::{self, Chart, Panel, Point, Series, XKind, YScale};

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
    /// Whether this is a latency metric.
    pub fn is_lat(self) -> bool {
        matches!(self, Metric::Typical | Metric::Avg | Metric::P99)
    }
    /// The name `from_name` reads.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Typical => "typical",
            Metric::Avg => "avg",
            Metric::P99 => "p99",
            Metric::Bw => "bw",
            Metric::Rate => "rate",
        }
    }
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

/// How many curves [`charts`] draws for `runs` (runs joined as the module doc says).
pub fn curves(runs: &[RunFile]) -> usize {
    groups(runs).len()
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

/// The SVG document of [`charts`], its y axis on `scale`.
pub fn svg(
    runs: &[RunFile],
    metric: Option<Metric>,
    title: Option<&str>,
    scale: YScale,
) -> Result<String, String> {
    let panels: Vec<Panel> = charts(runs, metric, title)?
        .into_iter()
        .map(|c| Panel {
            y_scale: scale,
            ..Panel::from(c)
        })
        .collect();
    Ok(plot::render_panels(&panels))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::stats::{BwRow, BwUnit, Histogram, LatRow};
    use crate::report::plot::tests::check_xml;

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
