//! A noise [`Report`] as a report (feature `report`): the text table (count, p99, p99.9,
//! max of the interruptions per CPU), each CPU's log2 histogram and what its interruptions
//! most likely were ([`render_text`]); the whole report as JSON ([`render_json`]); the
//! histograms as an SVG plot ([`render_svg`]). What `rdma-direct jitter` prints and writes.
//!
//! Contract: pure functions of the [`Report`]; each returns its text and prints nothing.
//! Durations read `850 ns`, `12.3 us`, `1.23 ms`, `1.20 s`; the JSON carries the raw
//! nanoseconds.

use crate::doctor::format_cpulist;
use crate::noise::{self, CpuNoise, Report};
use crate::report::json;
use crate::report::plot::{self, Chart, Panel, Point, Series, XKind};

/// `850 ns`, `12.3 us`, `1.23 ms`, `1.20 s`.
fn dur(ns: u64) -> String {
    let n = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.1} us", n / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2} ms", n / 1e6)
    } else {
        format!("{:.2} s", n / 1e9)
    }
}

/// The text report: a header, the table, then per CPU its histogram and attribution.
pub fn render_text(r: &Report, fixed_threshold: bool) -> String {
    let mut s = format!(
        "jitter: CPUs {}, {:.3} s each, threshold {}\n",
        format_cpulist(&r.cpus.iter().map(|c| c.spin.cpu).collect::<Vec<_>>()),
        r.duration.as_secs_f64(),
        if fixed_threshold {
            "as given"
        } else {
            "10 x the loop's smallest gap, at least 100 ns"
        }
    );
    s.push_str(&format!(
        "{:>4} {:>12} {:>8} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10}\n",
        "cpu", "loops", "min gap", "threshold", "count", "lost", "p99", "p99.9", "max"
    ));
    for c in &r.cpus {
        let p = &c.spin;
        s.push_str(&format!(
            "{:>4} {:>12} {:>8} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10}\n",
            p.cpu,
            p.loops,
            format!("{:.1} ns", p.min_gap_ns),
            dur(p.threshold_ns),
            p.count,
            dur(p.lost_ns),
            dur(p.percentile(99.0)),
            dur(p.percentile(99.9)),
            dur(p.max_ns)
        ));
    }
    for c in &r.cpus {
        s.push_str(&cpu_detail(c));
    }
    match &r.nic_irqs {
        Some(Ok(v)) => s.push_str(&format!("NIC IRQs: {}\n", format_cpulist(v))),
        Some(Err(e)) => s.push_str(&format!("NIC IRQs: not found: {e}\n")),
        None => {}
    }
    match &r.osnoise {
        Ok(()) => s.push_str("osnoise: traced\n"),
        Err(why) => s.push_str(&format!("osnoise: {why}\n")),
    }
    s
}

/// One CPU's histogram (bars scaled to the largest bucket) and attribution.
fn cpu_detail(c: &CpuNoise) -> String {
    let p = &c.spin;
    let mut s = format!("cpu {}:\n", p.cpu);
    if let Some(e) = &p.pin_error {
        s.push_str(&format!("  not pinned: {e}\n"));
    }
    let buckets = p.hist.nonempty();
    let top = buckets.iter().map(|b| b.1).max().unwrap_or(1);
    for (lo, n) in &buckets {
        let bar = ((*n as f64 / top as f64) * 40.0).ceil() as usize;
        s.push_str(&format!(
            "  {:>10} .. {:>10} {:>9} {}\n",
            dur(*lo),
            dur(lo.saturating_mul(2).saturating_sub(1)),
            n,
            "#".repeat(bar.max(1))
        ));
    }
    let list = |v: Vec<String>| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    s.push_str(&format!(
        "  irqs: {}\n",
        list(
            c.irqs
                .iter()
                .take(6)
                .map(|i| format!(
                    "{}{} {} {}",
                    if i.nic { "NIC " } else { "" },
                    i.key,
                    i.desc,
                    i.count
                ))
                .collect()
        )
    ));
    s.push_str(&format!(
        "  softirqs: {}\n",
        list(
            c.softirqs
                .iter()
                .take(6)
                .map(|i| format!("{} {}", i.key, i.count))
                .collect()
        )
    ));
    s.push_str(&format!(
        "  context switches: {}; steal: {}\n",
        p.ctx.map_or("unknown".to_string(), |x| format!(
            "{} voluntary, {} involuntary",
            x.voluntary, x.involuntary
        )),
        c.steal_ns.map_or("unknown".to_string(), dur)
    ));
    s.push_str(&format!("  {}\n", c.likely()));
    s
}

fn opt_num(v: Option<u64>) -> String {
    v.map_or("null".to_string(), |n| n.to_string())
}

/// The JSON report, one line (see the README's jitter section for the fields).
pub fn render_json(r: &Report) -> String {
    let cpus: Vec<String> = r.cpus.iter().map(cpu_json).collect();
    let nic = match &r.nic_irqs {
        None => "null".to_string(),
        Some(Ok(v)) => format!(
            "[{}]",
            v.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
        ),
        Some(Err(e)) => format!("{{\"error\":{}}}", json::string(e)),
    };
    format!(
        "{{\"duration_s\":{},\"nic_irqs\":{nic},\"osnoise\":{},\"cpus\":[{}]}}\n",
        r.duration.as_secs_f64(),
        match &r.osnoise {
            Ok(()) => "\"traced\"".to_string(),
            Err(why) => json::string(why),
        },
        cpus.join(",")
    )
}

fn cpu_json(c: &CpuNoise) -> String {
    let p = &c.spin;
    let hist: Vec<String> = p
        .hist
        .nonempty()
        .iter()
        .map(|(lo, n)| {
            format!(
                "{{\"from_ns\":{lo},\"to_ns\":{},\"count\":{n}}}",
                lo.saturating_mul(2).saturating_sub(1)
            )
        })
        .collect();
    let counted = |v: &[noise::Counted], irq: bool| -> String {
        let items: Vec<String> = v
            .iter()
            .map(|i| {
                if irq {
                    format!(
                        "{{\"irq\":{},\"desc\":{},\"nic\":{},\"count\":{}}}",
                        json::string(&i.key),
                        json::string(&i.desc),
                        i.nic,
                        i.count
                    )
                } else {
                    format!(
                        "{{\"name\":{},\"count\":{}}}",
                        json::string(&i.key),
                        i.count
                    )
                }
            })
            .collect();
        format!("[{}]", items.join(","))
    };
    let osn: Vec<String> = c
        .osnoise
        .iter()
        .map(|n| {
            format!(
                "{{\"kind\":{},\"name\":{},\"count\":{},\"total_ns\":{}}}",
                json::string(&n.kind),
                json::string(&n.name),
                n.count,
                n.total_ns
            )
        })
        .collect();
    format!(
        "{{\"cpu\":{},\"pin_error\":{},\"loops\":{},\"spun_ns\":{},\"min_gap_ns\":{:.1},\
         \"threshold_ns\":{},\"count\":{},\"lost_ns\":{},\"p99_ns\":{},\"p999_ns\":{},\
         \"max_ns\":{},\"histogram\":[{}],\"ctx_switches\":{},\"steal_ns\":{},\"irqs\":{},\
         \"softirqs\":{},\"osnoise\":[{}],\"likely\":{}}}",
        p.cpu,
        p.pin_error
            .as_deref()
            .map_or("null".to_string(), json::string),
        p.loops,
        p.spun_ns,
        p.min_gap_ns,
        p.threshold_ns,
        p.count,
        p.lost_ns,
        p.percentile(99.0),
        p.percentile(99.9),
        p.max_ns,
        hist.join(","),
        p.ctx.map_or("null".to_string(), |x| format!(
            "{{\"voluntary\":{},\"involuntary\":{}}}",
            x.voluntary, x.involuntary
        )),
        opt_num(c.steal_ns),
        counted(&c.irqs, true),
        counted(&c.softirqs, false),
        osn.join(","),
        json::string(&c.likely())
    )
}

/// A histogram's points for the chart: every bucket from the first non-empty one to the
/// last, x its lowest duration; an empty bucket is a gap (y NaN), so the line breaks there
/// instead of joining the buckets on either side as if the durations between had counts.
fn hist_points(h: &noise::Histogram) -> Vec<Point> {
    let used = |k: &usize| h.counts[*k] > 0;
    let (Some(first), Some(last)) = (
        (0..h.counts.len()).find(used),
        (0..h.counts.len()).rev().find(used),
    ) else {
        return Vec::new();
    };
    (first..=last)
        .map(|k| Point {
            x: (1u64 << k) as f64,
            y: match h.counts[k] {
                0 => f64::NAN,
                n => n as f64,
            },
            band: None,
        })
        .collect()
}

/// The histograms as one chart: a line per CPU, x the bucket's lowest duration (log2), y
/// the interruptions in it; the line breaks at empty buckets.
pub fn render_svg(r: &Report) -> String {
    let series = r
        .cpus
        .iter()
        .map(|c| Series {
            name: format!(
                "CPU {} ({} interruptions, max {})",
                c.spin.cpu,
                c.spin.count,
                dur(c.spin.max_ns)
            ),
            points: hist_points(&c.spin.hist),
        })
        .collect();
    // Counts per bucket span decades: a log axis.
    plot::render_panels(&[Panel::from(Chart {
        title: "host noise: interruptions of a spinning thread, per CPU".to_string(),
        subtitle: format!(
            "{:.3} s per CPU; a gap above the threshold is an interruption",
            r.duration.as_secs_f64()
        ),
        x_label: "interruption duration [ns, log2 buckets; 1K = 1024]".to_string(),
        x_kind: XKind::Bytes,
        y_label: "interruptions in the bucket".to_string(),
        band_label: None,
        series,
    })
    .log_y()])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn durations() {
        assert_eq!(dur(850), "850 ns");
        assert_eq!(dur(12_345), "12.3 us");
        assert_eq!(dur(1_234_567), "1.23 ms");
        assert_eq!(dur(1_200_000_000), "1.20 s");
    }

    fn report() -> Report {
        use crate::noise::{Counted, CtxSwitches, Histogram, Spin};
        let mut hist = Histogram::default();
        for g in [150, 180, 5000] {
            hist.add(g);
        }
        Report {
            cpus: vec![CpuNoise {
                spin: Spin {
                    cpu: 1,
                    pin_error: None,
                    loops: 1000,
                    spun_ns: 20_000_000,
                    min_gap_ns: 12.5,
                    threshold_ns: 125,
                    count: 3,
                    lost_ns: 5330,
                    max_ns: 5000,
                    hist,
                    gaps_ns: vec![150, 5000, 180],
                    ctx: Some(CtxSwitches {
                        voluntary: 0,
                        involuntary: 1,
                    }),
                },
                irqs: vec![Counted {
                    key: "98".into(),
                    desc: "PCI-MSIX-0000:3b:00.0 0-edge mlx5_comp0".into(),
                    nic: true,
                    count: 2,
                }],
                softirqs: vec![],
                steal_ns: Some(0),
                osnoise: vec![],
            }],
            duration: Duration::from_millis(20),
            nic_irqs: Some(Ok(vec![98, 99])),
            osnoise: Err("not available: tracefs is not mounted".into()),
        }
    }

    #[test]
    fn text_report() {
        assert_eq!(
            render_text(&report(), false),
            "jitter: CPUs 1, 0.020 s each, threshold 10 x the loop's smallest gap, at least \
             100 ns\n \
             cpu        loops  min gap threshold     count       lost        p99      p99.9        max\n   \
             1         1000  12.5 ns    125 ns         3     5.3 us     5.0 us     5.0 us     5.0 us\n\
             cpu 1:\n      \
             128 ns ..     255 ns         2 ########################################\n      \
             4.1 us ..     8.2 us         1 ####################\n  \
             irqs: NIC 98 PCI-MSIX-0000:3b:00.0 0-edge mlx5_comp0 2\n  \
             softirqs: none\n  \
             context switches: 0 voluntary, 1 involuntary; steal: 0 ns\n  \
             most likely: another task took this CPU (1 involuntary context switches: a \
             process shares the CPU); the NIC's IRQ 98 PCI-MSIX-0000:3b:00.0 0-edge \
             mlx5_comp0 (2)\n\
             NIC IRQs: 98-99\n\
             osnoise: not available: tracefs is not mounted\n"
        );
    }

    #[test]
    fn json_report_reads_back() {
        let v = crate::report::json::parse(&render_json(&report())).unwrap();
        assert_eq!(v.get("duration_s").and_then(|d| d.as_f64()), Some(0.02));
        assert_eq!(
            v.get("osnoise").and_then(|d| d.as_str()),
            Some("not available: tracefs is not mounted")
        );
        let crate::report::json::Value::Arr(cpus) = v.get("cpus").unwrap() else {
            panic!("cpus is an array")
        };
        let c = &cpus[0];
        let n = |k: &str| c.get(k).and_then(|x| x.as_u64());
        assert_eq!(n("cpu"), Some(1));
        assert_eq!(n("count"), Some(3));
        assert_eq!(n("p99_ns"), Some(5000));
        assert_eq!(n("max_ns"), Some(5000));
        let crate::report::json::Value::Arr(h) = c.get("histogram").unwrap() else {
            panic!("histogram is an array")
        };
        let buckets: Vec<(u64, u64, u64)> = h
            .iter()
            .map(|b| {
                let f = |k: &str| b.get(k).and_then(|x| x.as_u64()).unwrap();
                (f("from_ns"), f("to_ns"), f("count"))
            })
            .collect();
        assert_eq!(buckets, [(128, 255, 2), (4096, 8191, 1)]);
        let crate::report::json::Value::Arr(irqs) = c.get("irqs").unwrap() else {
            panic!("irqs is an array")
        };
        assert_eq!(
            irqs[0].get("nic"),
            Some(&crate::report::json::Value::Bool(true))
        );
        assert!(render_svg(&report()).contains("CPU 1 (3 interruptions, max 5.0 us)"));
    }

    /// The chart's line breaks at empty buckets: interruptions in the 16 and 32 ns buckets,
    /// then in 256 and 512 ns (three empty buckets between) draw two lines of two points,
    /// not one of four; every non-empty bucket keeps its marker.
    #[test]
    fn svg_line_breaks_at_empty_buckets() {
        let mut r = report();
        let mut h = crate::noise::Histogram::default();
        for g in [20, 40, 40, 300, 600] {
            h.add(g);
        }
        r.cpus[0].spin.hist = h;
        let svg = render_svg(&r);
        let lines: Vec<usize> = svg
            .match_indices("<polyline class=\"line\" points=\"")
            .map(|(i, m)| {
                let pts = &svg[i + m.len()..];
                pts[..pts.find('"').unwrap()].split(' ').count()
            })
            .collect();
        assert_eq!(lines, [2, 2]);
        assert_eq!(svg.matches("class=\"pt\"").count(), 4);
    }
}
