//! A hand-written SVG line-chart renderer for size sweeps and batch sweeps.
//!
//! Contract:
//! - [`render`] turns one or more [`Chart`]s into one SVG document: each chart is a panel
//!   [`WIDTH`] x [`PANEL_HEIGHT`] (900 x 540) user units, panels stacked top to bottom, with a
//!   `viewBox` so the file scales to any size.
//! - The x axis is log2 ([`XKind::Bytes`]: ticks at every power of two, labelled 2, 4, ...,
//!   512, 1K, ..., 8M; [`XKind::Count`]: 1, 2, 4, ..., 64). Labels are thinned to every
//!   second, third, ... power only when they would not fit side by side.
//! - The y axis is log10 when every value is positive and the largest is at least 20 times
//!   the smallest, else linear (from 0 when no value is negative); ticks at 1, 2, 5 x 10^k.
//! - Each series is a `<g class="series">` holding its optional band (a shaded polygon from
//!   each point's `band.0` to `band.1`, class `band`), one `<polyline class="line">` and one
//!   marker (class `pt`, with a `<title>` tooltip) per point drawn. Points with a non-finite
//!   x or y, a non-positive x, or (on a log y axis) a non-positive y are left out.
//! - Bands are drawn only when at most [`MAX_BANDS`] series have one (more would cover each
//!   other and the lines); otherwise neither the bands nor their legend entry appear.
//! - A title, a subtitle, a legend above the plot area (never over the data), both axes
//!   labelled (classes `title`, `x-label`, `y-label`).
//! - Output is well-formed XML (all text escaped), UTF-8, and a pure function of the input:
//!   the same charts give the same bytes. Nothing here panics on any input.

use std::fmt::Write;

mod axis;
use axis::YAxis;

/// Width of a panel, SVG user units (pixels at 100 %).
pub const WIDTH: f64 = 900.0;
/// Height of a panel.
pub const PANEL_HEIGHT: f64 = 540.0;

/// Most series that get their band drawn (see the module doc).
pub const MAX_BANDS: usize = 3;

const RIGHT: f64 = 28.0;
const BOTTOM: f64 = 62.0;
const TICK_FONT: f64 = 11.0;
const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// What the log2 x axis counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XKind {
    /// Message sizes in bytes: labels 2, 4, ..., 512, 1K, ..., 8M.
    Bytes,
    /// Counts (batch sizes): labels 1, 2, 4, ..., 64 (1K, ... beyond 512).
    Count,
}

/// One point: `x` (a size or count), `y`, and an optional band `(low, high)` drawn shaded
/// behind the line.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    /// Position on the log2 axis.
    pub x: f64,
    /// Value.
    pub y: f64,
    /// Shaded range at this x, e.g. latency t_min..p99.
    pub band: Option<(f64, f64)>,
}

/// One line.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Points, any order (drawn sorted by x).
    pub points: Vec<Point>,
}

/// One panel.
#[derive(Clone, Debug, PartialEq)]
pub struct Chart {
    /// Title line (test, provider, device).
    pub title: String,
    /// Smaller line under the title; empty for none.
    pub subtitle: String,
    /// X axis label with unit, e.g. `message size [bytes]`.
    pub x_label: String,
    /// What x counts.
    pub x_kind: XKind,
    /// Y axis label with unit, e.g. `latency t_typical [µs]`.
    pub y_label: String,
    /// Legend entry for the bands, e.g. `shaded: t_min..p99`; `None` when no band is drawn.
    pub band_label: Option<String>,
    /// The lines.
    pub series: Vec<Series>,
}

/// The SVG document of `charts` (see the module doc). No charts give an empty white panel.
pub fn render(charts: &[Chart]) -> String {
    let n = charts.len().max(1);
    let h = PANEL_HEIGHT * n as f64;
    let mut s = String::new();
    s.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"DejaVu Sans, Verdana, Arial, sans-serif\">",
        w = WIDTH,
    );
    let doc_title: Vec<&str> = charts.iter().map(|c| c.title.as_str()).collect();
    let _ = writeln!(s, "<title>{}</title>", esc(&doc_title.join(" / ")));
    let _ = writeln!(
        s,
        "<rect x=\"0\" y=\"0\" width=\"{WIDTH}\" height=\"{h}\" fill=\"#ffffff\"/>"
    );
    for (i, c) in charts.iter().enumerate() {
        let _ = writeln!(
            s,
            "<g class=\"chart\" transform=\"translate(0 {})\">",
            PANEL_HEIGHT * i as f64
        );
        panel(&mut s, c);
        s.push_str("</g>\n");
    }
    s.push_str("</svg>\n");
    s
}

/// Escape text for XML content and attribute values.
pub fn esc(t: &str) -> String {
    let mut o = String::with_capacity(t.len());
    for c in t.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            // XML 1.0 allows no other control characters.
            c if (c as u32) < 0x20 && c != '\t' && c != '\n' => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

/// Estimated rendered width of `t` at `size` (DejaVu Sans averages about 0.6 em).
fn text_w(t: &str, size: f64) -> f64 {
    t.chars().count() as f64 * 0.62 * size
}

/// `t`, shortened with an ellipsis to fit `max` units at `size`.
fn fit(t: &str, size: f64, max: f64) -> String {
    if text_w(t, size) <= max {
        return t.to_string();
    }
    let keep = ((max / (0.62 * size)) as usize).saturating_sub(1);
    let mut o: String = t.chars().take(keep).collect();
    o.push('…');
    o
}

/// The label of a power of two: 2, ..., 512, 1K, ..., 512K, 1M, ..., 1G.
pub fn pow2_label(v: f64) -> String {
    let v = v.round();
    if v >= 1024.0 * 1024.0 * 1024.0 {
        format!("{}G", v / (1024.0 * 1024.0 * 1024.0))
    } else if v >= 1024.0 * 1024.0 {
        format!("{}M", v / (1024.0 * 1024.0))
    } else if v >= 1024.0 {
        format!("{}K", v / 1024.0)
    } else {
        format!("{v}")
    }
}

fn marker(s: &mut String, class: &str, shape: usize, x: f64, y: f64, color: &str, tip: &str) {
    let tip = esc(tip);
    match shape % 4 {
        0 => {
            let _ = write!(
                s,
                "<circle class=\"{class}\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3.6\" fill=\"{color}\"><title>{tip}</title></circle>"
            );
        }
        1 => {
            let _ = write!(
                s,
                "<rect class=\"{class}\" x=\"{:.1}\" y=\"{:.1}\" width=\"6.6\" height=\"6.6\" fill=\"{color}\"><title>{tip}</title></rect>",
                x - 3.3,
                y - 3.3
            );
        }
        2 => {
            let _ = write!(
                s,
                "<path class=\"{class}\" d=\"M{:.1} {:.1}L{:.1} {:.1}L{:.1} {:.1}Z\" fill=\"{color}\"><title>{tip}</title></path>",
                x,
                y - 4.4,
                x + 4.0,
                y + 3.0,
                x - 4.0,
                y + 3.0
            );
        }
        _ => {
            let _ = write!(
                s,
                "<path class=\"{class}\" d=\"M{:.1} {:.1}L{:.1} {:.1}L{:.1} {:.1}L{:.1} {:.1}Z\" fill=\"{color}\"><title>{tip}</title></path>",
                x,
                y - 4.6,
                x + 4.6,
                y,
                x,
                y + 4.6,
                x - 4.6,
                y
            );
        }
    }
}

/// Significant-digit formatting for tooltips.
fn sig(v: f64) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    let a = v.abs();
    let d = if a >= 100.0 || a == 0.0 {
        1
    } else if a >= 1.0 {
        3
    } else {
        (4 - a.log10().floor() as i32).clamp(3, 12) as usize
    };
    format!("{v:.d$}")
}

fn panel(s: &mut String, c: &Chart) {
    // Title and subtitle, shrunk and then shortened to fit the width.
    let avail = WIDTH - 40.0;
    let mut tsize = 17.0;
    while tsize > 12.0 && text_w(&c.title, tsize) > avail {
        tsize -= 1.0;
    }
    let _ = writeln!(
        s,
        "<text class=\"title\" x=\"{:.1}\" y=\"26\" text-anchor=\"middle\" font-size=\"{tsize}\" font-weight=\"bold\" fill=\"#222\">{}</text>",
        WIDTH / 2.0,
        esc(&fit(&c.title, tsize, avail))
    );
    let mut y = 30.0;
    if !c.subtitle.is_empty() {
        let _ = writeln!(
            s,
            "<text class=\"subtitle\" x=\"{:.1}\" y=\"46\" text-anchor=\"middle\" font-size=\"12\" fill=\"#555\">{}</text>",
            WIDTH / 2.0,
            esc(&fit(&c.subtitle, 12.0, avail))
        );
        y = 50.0;
    }

    // Legend: one row after another above the plot area.
    let mut items: Vec<(usize, String)> = c
        .series
        .iter()
        .enumerate()
        .map(|(i, se)| (i, fit(&se.name, 12.0, avail - 40.0)))
        .collect();
    let banded = c
        .series
        .iter()
        .filter(|se| se.points.iter().any(|p| p.band.is_some()))
        .count();
    let bands = banded <= MAX_BANDS;
    if let (Some(b), true, true) = (&c.band_label, bands, banded > 0) {
        items.push((usize::MAX, fit(b, 12.0, avail - 40.0)));
    }
    let mut lx = 20.0;
    let mut ly = y + 16.0;
    s.push_str("<g class=\"legend\" font-size=\"12\" fill=\"#222\">\n");
    for (i, name) in &items {
        let w = 30.0 + text_w(name, 12.0) + 20.0;
        if lx > 20.0 && lx + w > WIDTH - 20.0 {
            lx = 20.0;
            ly += 18.0;
        }
        if *i == usize::MAX {
            let _ = write!(
                s,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"24\" height=\"10\" fill=\"#888\" fill-opacity=\"0.25\"/>",
                lx,
                ly - 9.0
            );
        } else {
            let color = COLORS[i % COLORS.len()];
            let _ = write!(
                s,
                "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{color}\" stroke-width=\"2\"/>",
                lx,
                ly - 4.0,
                lx + 24.0,
                ly - 4.0
            );
            marker(s, "key", *i, lx + 12.0, ly - 4.0, color, name);
        }
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{ly:.1}\">{}</text>",
            lx + 30.0,
            esc(name)
        );
        lx += w;
    }
    s.push_str("</g>\n");
    let top = if items.is_empty() {
        y + 12.0
    } else {
        ly + 14.0
    };
    let bottom = PANEL_HEIGHT - BOTTOM;

    // Data: drawable points per series, sorted by x.
    let mut ys = Vec::new();
    let mut xs = Vec::new();
    for se in &c.series {
        for p in &se.points {
            if p.x.is_finite() && p.x > 0.0 && p.y.is_finite() {
                xs.push(p.x.log2());
                ys.push(p.y);
                if let Some((a, b)) = p.band {
                    ys.push(a);
                    ys.push(b);
                }
            }
        }
    }
    let yax = YAxis::new(&ys);
    let left = {
        let widest = yax
            .ticks
            .iter()
            .map(|(_, l, _)| text_w(l, TICK_FONT))
            .fold(0.0, f64::max);
        (widest + 44.0).max(64.0)
    };
    let right = WIDTH - RIGHT;
    let (mut x0, mut x1) = (
        xs.iter().copied().fold(f64::INFINITY, f64::min),
        xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    );
    if xs.is_empty() {
        (x0, x1) = (1.0, 6.0);
    }
    if x1 - x0 < 1.0 {
        x0 -= 0.5;
        x1 += 0.5;
    }
    let pad = (x1 - x0) * 0.03 + 0.2;
    let (d0, d1) = (x0 - pad, x1 + pad);
    let px = |l2: f64| left + (l2 - d0) / (d1 - d0) * (right - left);
    let py = |v: f64| bottom - yax.frac(v) * (bottom - top);

    // Grid and y ticks.
    s.push_str("<g class=\"grid\" stroke-width=\"1\">\n");
    for (v, _, major) in &yax.ticks {
        let _ = writeln!(
            s,
            "<line x1=\"{left:.1}\" y1=\"{y:.1}\" x2=\"{right:.1}\" y2=\"{y:.1}\" stroke=\"{}\"/>",
            if *major { "#d8d8d8" } else { "#efefef" },
            y = py(*v)
        );
    }
    let k0 = x0.ceil().clamp(-1100.0, 1100.0) as i32;
    let k1 = x1.floor().clamp(-1100.0, 1100.0) as i32;
    for k in k0..=k1.min(k0 + 200) {
        let _ = writeln!(
            s,
            "<line x1=\"{x:.1}\" y1=\"{top:.1}\" x2=\"{x:.1}\" y2=\"{bottom:.1}\" stroke=\"#efefef\"/>",
            x = px(f64::from(k))
        );
    }
    s.push_str("</g>\n");
    let _ = writeln!(
        s,
        "<rect class=\"frame\" x=\"{left:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" stroke=\"#444\"/>",
        right - left,
        bottom - top
    );

    // Axis ticks and labels.
    let _ = writeln!(
        s,
        "<g class=\"y-ticks\" font-size=\"{TICK_FONT}\" fill=\"#333\" text-anchor=\"end\">"
    );
    for (v, label, _) in &yax.ticks {
        let y = py(*v);
        let _ = write!(
            s,
            "<line x1=\"{:.1}\" y1=\"{y:.1}\" x2=\"{left:.1}\" y2=\"{y:.1}\" stroke=\"#444\"/>",
            left - 4.0
        );
        if !label.is_empty() {
            let _ = write!(
                s,
                "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                left - 7.0,
                y + 4.0,
                esc(label)
            );
        }
        s.push('\n');
    }
    s.push_str("</g>\n");
    let step_px = px(1.0) - px(0.0);
    let widest = (k0..=k1.min(k0 + 200))
        .map(|k| text_w(&x_label_of(c.x_kind, k), TICK_FONT))
        .fold(0.0, f64::max)
        + 6.0;
    let stride = ((widest / step_px).ceil() as i32).max(1);
    let _ = writeln!(
        s,
        "<g class=\"x-ticks\" font-size=\"{TICK_FONT}\" fill=\"#333\" text-anchor=\"middle\">"
    );
    for k in k0..=k1.min(k0 + 200) {
        let x = px(f64::from(k));
        let _ = write!(
            s,
            "<line x1=\"{x:.1}\" y1=\"{bottom:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#444\"/>",
            bottom + 4.0
        );
        if (k - k0) % stride == 0 {
            let _ = write!(
                s,
                "<text x=\"{x:.1}\" y=\"{:.1}\">{}</text>",
                bottom + 17.0,
                esc(&x_label_of(c.x_kind, k))
            );
        }
        s.push('\n');
    }
    s.push_str("</g>\n");
    let _ = writeln!(
        s,
        "<text class=\"x-label\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"13\" fill=\"#222\">{}</text>",
        (left + right) / 2.0,
        PANEL_HEIGHT - 18.0,
        esc(&fit(&c.x_label, 13.0, right - left))
    );
    let cy = (top + bottom) / 2.0;
    let _ = writeln!(
        s,
        "<text class=\"y-label\" x=\"20\" y=\"{cy:.1}\" transform=\"rotate(-90 20 {cy:.1})\" text-anchor=\"middle\" font-size=\"13\" fill=\"#222\">{}</text>",
        esc(&fit(&c.y_label, 13.0, bottom - top))
    );

    // Series: bands first (all of them), then lines and markers, so no band hides a line.
    let drawn: Vec<Vec<Point>> = c
        .series
        .iter()
        .map(|se| {
            let mut p: Vec<Point> = se
                .points
                .iter()
                .copied()
                .filter(|p| p.x.is_finite() && p.x > 0.0 && yax.drawable(p.y))
                .collect();
            p.sort_by(|a, b| a.x.total_cmp(&b.x));
            p
        })
        .collect();
    for (i, pts) in drawn.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let band: Vec<(f64, f64, f64)> = pts
            .iter()
            .filter_map(|p| {
                let (a, b) = p.band?;
                (yax.drawable(a) && yax.drawable(b)).then_some((p.x, a.min(b), a.max(b)))
            })
            .collect();
        if bands && band.len() >= 2 {
            let mut d = String::new();
            for (x, _, hi) in &band {
                let _ = write!(d, "{:.1},{:.1} ", px(x.log2()), py(*hi));
            }
            for (x, lo, _) in band.iter().rev() {
                let _ = write!(d, "{:.1},{:.1} ", px(x.log2()), py(*lo));
            }
            let _ = writeln!(
                s,
                "<polygon class=\"band\" points=\"{}\" fill=\"{color}\" fill-opacity=\"0.16\" stroke=\"none\"/>",
                d.trim_end()
            );
        }
    }
    for (i, (se, pts)) in c.series.iter().zip(&drawn).enumerate() {
        let color = COLORS[i % COLORS.len()];
        let _ = writeln!(
            s,
            "<g class=\"series\" data-series=\"{}\" data-points=\"{}\">",
            esc(&se.name),
            pts.len()
        );
        if pts.len() >= 2 {
            let mut d = String::new();
            for p in pts {
                let _ = write!(d, "{:.1},{:.1} ", px(p.x.log2()), py(p.y));
            }
            let _ = writeln!(
                s,
                "<polyline class=\"line\" points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" stroke-linejoin=\"round\"/>",
                d.trim_end()
            );
        }
        for p in pts {
            let xl = match c.x_kind {
                XKind::Bytes => format!("{} B", x_exact(p.x)),
                XKind::Count => x_exact(p.x),
            };
            let mut tip = format!("{}: {xl}: {}", se.name, sig(p.y));
            if let Some((a, b)) = p.band {
                let _ = write!(tip, " ({}..{})", sig(a), sig(b));
            }
            marker(s, "pt", i, px(p.x.log2()), py(p.y), color, &tip);
            s.push('\n');
        }
        s.push_str("</g>\n");
    }
    if drawn.iter().all(Vec::is_empty) {
        let _ = writeln!(
            s,
            "<text class=\"no-data\" x=\"{:.1}\" y=\"{cy:.1}\" text-anchor=\"middle\" font-size=\"16\" fill=\"#888\">no data</text>",
            (left + right) / 2.0
        );
    }
}

fn x_label_of(kind: XKind, k: i32) -> String {
    let v = 2f64.powi(k);
    match kind {
        XKind::Bytes | XKind::Count if v >= 1.0 => pow2_label(v),
        _ => format!("{v}"),
    }
}

/// An x value in a tooltip: a power of two as 1K, 8M, other values as they are.
fn x_exact(x: f64) -> String {
    let k = x.log2();
    if k.fract() == 0.0 && x >= 1.0 {
        pow2_label(x)
    } else {
        format!("{x}")
    }
}

#[cfg(test)]
pub(crate) mod tests;
