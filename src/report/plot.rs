//! A hand-written SVG line-chart renderer for size sweeps and batch sweeps.
//!
//! Contract:
//! - [`render_panels`] turns one or more [`Panel`]s into one SVG document: each is a panel
//!   [`WIDTH`] x [`PANEL_HEIGHT`] (900 x 540) user units, panels stacked top to bottom, with a
//!   `viewBox` so the file scales to any size. [`render`] draws bare [`Chart`]s with a
//!   [`Panel`]'s defaults (linear y, shaded bands, no fitted curves).
//! - The x axis is log2 ([`XKind::Bytes`]: ticks at every power of two, labelled 2, 4, ...,
//!   512, 1K, ..., 8M; [`XKind::Count`]: 1, 2, 4, ..., 64). Labels are thinned to every
//!   second, third, ... power only when they would not fit side by side.
//! - The y axis is what the caller asks ([`YScale`]): linear (from 0 when no value is
//!   negative) unless log10 is asked; the data never switches it. A log axis with no positive
//!   value falls back to linear. Ticks at 1, 2, 5 x 10^k.
//! - Each series is a `<g class="series">` holding a `<polyline class="line">` and one
//!   marker (class `pt`, with a `<title>` tooltip) per point drawn. A point whose y is NaN is
//!   a gap: nothing is drawn for it and the line breaks there (one polyline per run of two or
//!   more points between gaps); the other points left out (below) do not break it. Series `i` has marker shape
//!   `i % 4` and dash pattern `i % 5` (0: solid), so no two of the first 20 series look alike
//!   even where their values coincide; the legend shows each series' line, dash and marker.
//!   Points with a non-finite x or y, a non-positive x, or (on a log y axis) a non-positive y
//!   are left out.
//! - A point's `(low, high)` range is drawn as [`Spread`] says. [`Spread::Band`]: a shaded
//!   polygon per series (class `band`), drawn only when at most [`MAX_BANDS`] series have one
//!   (more would cover each other and the lines; otherwise neither bands nor their legend entry
//!   appear). [`Spread::ErrorBars`]: a whisker with caps per point (a `<path class="err">`,
//!   from low to high at the marker's x), for any number of series; each series' markers,
//!   whiskers and line are then shifted sideways by a few units (series `i` of `n` by
//!   `(i - (n-1)/2)` x [`DODGE`], less when the x ticks are narrow) so equal values stay apart.
//! - Curves over the data ([`Panel::curves`], e.g. a fitted model evaluated by
//!   [`Curve::sampled`]) are drawn after the data as `<polyline class="fit">`, thinner,
//!   dashed, without markers, in the colour of the series they model (grey for none), each
//!   with a legend entry; their values count in the y range.
//! - A title, a subtitle, a legend above the plot area (never over the data), both axes
//!   labelled (classes `title`, `x-label`, `y-label`).
//! - Output is well-formed XML (all text escaped), UTF-8, and a pure function of the input:
//!   the same panels give the same bytes. Nothing here panics on any input.

use std::fmt::Write;

mod axis;
mod panel;
use axis::YAxis;
use panel::panel;

/// Width of a panel, SVG user units (pixels at 100 %).
pub const WIDTH: f64 = 900.0;
/// Height of a panel.
pub const PANEL_HEIGHT: f64 = 540.0;

/// Most series that get their band drawn (see the module doc).
pub const MAX_BANDS: usize = 3;

/// Sideways shift between neighbouring series' markers under [`Spread::ErrorBars`], user units.
pub const DODGE: f64 = 5.0;

const RIGHT: f64 = 28.0;
const BOTTOM: f64 = 62.0;
const TICK_FONT: f64 = 11.0;
const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];
/// Dash patterns of the data lines (`stroke-dasharray`; "" for solid), by series index.
const DASHES: [&str; 5] = ["", "2 3", "10 3 2 3", "10 3 2 3 2 3", "16 4"];
/// The fitted curves' pattern and colour when they model no series.
const FIT_DASH: &str = "5 3";
const FIT_GREY: &str = "#555555";

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

/// How the y axis maps values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum YScale {
    /// Linear, from 0 when no value is negative (the default).
    #[default]
    Linear,
    /// Log10 (non-positive values are left out).
    Log,
}

/// How a point's `(low, high)` range ([`Point::band`]) is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Spread {
    /// A shaded band behind each series' line (at most [`MAX_BANDS`] series).
    #[default]
    Band,
    /// A whisker with caps at each point, series shifted apart sideways.
    ErrorBars,
}

/// A curve drawn over the data, e.g. a model fitted to a series evaluated at many x.
#[derive(Clone, Debug, PartialEq)]
pub struct Curve {
    /// Legend text, e.g. `fit: t = 3.1 + 40.2/b ns`.
    pub name: String,
    /// The index in [`Chart::series`] of the series it models: drawn in its colour.
    pub of: Option<usize>,
    /// The curve's points (their bands are ignored), any order.
    pub points: Vec<Point>,
}

impl Curve {
    /// `f` at `n` points (at least 2) evenly spaced in log2 x from `x0` to `x1`: smooth on the
    /// log2 axis. Points where `f` is not finite are left out; a non-positive or non-finite
    /// `x0`/`x1` gives no points.
    pub fn sampled(
        name: &str,
        of: Option<usize>,
        x0: f64,
        x1: f64,
        n: usize,
        f: impl Fn(f64) -> f64,
    ) -> Curve {
        let ok = x0 > 0.0 && x1 > 0.0 && x0.is_finite() && x1.is_finite();
        let n = if ok { n.clamp(2, 10_000) } else { 0 };
        let (l0, l1) = (x0.log2(), x1.log2());
        let points = (0..n)
            .map(|i| {
                let x = 2f64.powf(l0 + (l1 - l0) * i as f64 / (n - 1) as f64);
                Point {
                    x,
                    y: f(x),
                    band: None,
                }
            })
            .filter(|p| p.y.is_finite())
            .collect();
        Curve {
            name: name.to_string(),
            of,
            points,
        }
    }
}

/// A chart and how to draw it. `Panel::from(chart)` gives the defaults: linear y, shaded
/// bands, no fitted curves.
#[derive(Clone, Debug, PartialEq)]
pub struct Panel {
    /// The data.
    pub chart: Chart,
    /// The y axis' scale.
    pub y_scale: YScale,
    /// How point ranges are drawn.
    pub spread: Spread,
    /// Curves drawn over the data.
    pub curves: Vec<Curve>,
}

impl From<Chart> for Panel {
    fn from(chart: Chart) -> Panel {
        Panel {
            chart,
            y_scale: YScale::Linear,
            spread: Spread::Band,
            curves: Vec::new(),
        }
    }
}

impl Panel {
    /// The same panel with a log10 y axis.
    pub fn log_y(self) -> Panel {
        Panel {
            y_scale: YScale::Log,
            ..self
        }
    }
    /// The same panel with point ranges drawn as error bars.
    pub fn error_bars(self) -> Panel {
        Panel {
            spread: Spread::ErrorBars,
            ..self
        }
    }
    /// The same panel with `curve` drawn over the data.
    pub fn with_curve(mut self, curve: Curve) -> Panel {
        self.curves.push(curve);
        self
    }
}

/// The SVG document of `charts` drawn as [`Panel`]'s defaults (see the module doc).
pub fn render(charts: &[Chart]) -> String {
    let panels: Vec<Panel> = charts.iter().cloned().map(Panel::from).collect();
    render_panels(&panels)
}

/// The SVG document of `panels` (see the module doc). No panels give an empty white panel.
pub fn render_panels(panels: &[Panel]) -> String {
    let charts = panels;
    let n = charts.len().max(1);
    let h = PANEL_HEIGHT * n as f64;
    let mut s = String::new();
    s.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"DejaVu Sans, Verdana, Arial, sans-serif\">",
        w = WIDTH,
    );
    let doc_title: Vec<&str> = charts.iter().map(|c| c.chart.title.as_str()).collect();
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
