//! One panel of a chart: title, legend, axes, the series with their ranges, fitted curves.
//! The drawing rules are the parent module's contract.

use std::fmt::Write;

use super::{
    esc, fit, marker, sig, text_w, x_exact, x_label_of, Panel, Point, Spread, XKind, YAxis, YScale,
    BOTTOM, COLORS, DASHES, DODGE, FIT_DASH, FIT_GREY, MAX_BANDS, PANEL_HEIGHT, RIGHT, TICK_FONT,
    WIDTH,
};

/// A legend entry.
enum Key {
    /// Data series `i`.
    Series(usize),
    /// The shaded band.
    Band,
    /// The error bars.
    Whisker,
    /// A fitted curve, in this colour.
    Fit(&'static str),
}

/// `stroke-dasharray` attribute text for `dash` ("" for a solid line).
fn dash_attr(dash: &str) -> String {
    if dash.is_empty() {
        String::new()
    } else {
        format!(" stroke-dasharray=\"{dash}\"")
    }
}

/// The colour of a fitted curve modelling series `of`.
fn fit_color(of: Option<usize>, n_series: usize) -> &'static str {
    match of {
        Some(i) if i < n_series => COLORS[i % COLORS.len()],
        _ => FIT_GREY,
    }
}

/// The runs of a series' points its line joins: sorted by x, split at each point whose y is
/// NaN (a gap: the line breaks there), each run holding only the points drawn.
fn line_runs(points: &[Point], yax: &YAxis) -> Vec<Vec<Point>> {
    let mut p: Vec<Point> = points
        .iter()
        .copied()
        .filter(|p| p.x.is_finite() && p.x > 0.0 && (p.y.is_nan() || yax.drawable(p.y)))
        .collect();
    p.sort_by(|a, b| a.x.total_cmp(&b.x));
    p.split(|q| q.y.is_nan())
        .filter(|run| !run.is_empty())
        .map(<[Point]>::to_vec)
        .collect()
}

pub(super) fn panel(s: &mut String, pn: &Panel) {
    let c = &pn.chart;
    let bars = pn.spread == Spread::ErrorBars;
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
    let mut items: Vec<(Key, String)> = c
        .series
        .iter()
        .enumerate()
        .map(|(i, se)| (Key::Series(i), fit(&se.name, 12.0, avail - 40.0)))
        .collect();
    let banded = c
        .series
        .iter()
        .filter(|se| se.points.iter().any(|p| p.band.is_some()))
        .count();
    let bands = !bars && banded <= MAX_BANDS;
    if let (Some(b), true) = (&c.band_label, banded > 0) {
        if bars {
            items.push((Key::Whisker, fit(b, 12.0, avail - 40.0)));
        } else if bands {
            items.push((Key::Band, fit(b, 12.0, avail - 40.0)));
        }
    }
    for f in &pn.curves {
        let color = fit_color(f.of, c.series.len());
        items.push((Key::Fit(color), fit(&f.name, 12.0, avail - 40.0)));
    }
    let mut lx = 20.0;
    let mut ly = y + 16.0;
    s.push_str("<g class=\"legend\" font-size=\"12\" fill=\"#222\">\n");
    for (key, name) in &items {
        let w = 30.0 + text_w(name, 12.0) + 20.0;
        if lx > 20.0 && lx + w > WIDTH - 20.0 {
            lx = 20.0;
            ly += 18.0;
        }
        let mid = ly - 4.0;
        match *key {
            Key::Band => {
                let _ = write!(
                    s,
                    "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"24\" height=\"10\" fill=\"#888\" fill-opacity=\"0.25\"/>",
                    lx,
                    ly - 9.0
                );
            }
            Key::Whisker => {
                let x = lx + 12.0;
                let _ = write!(
                    s,
                    "<path class=\"key-err\" d=\"M{x:.1} {:.1}V{:.1}M{:.1} {:.1}H{:.1}M{:.1} {:.1}H{:.1}\" stroke=\"#444\" stroke-width=\"1.2\" fill=\"none\"/>",
                    ly - 11.0,
                    ly + 3.0,
                    x - 4.0,
                    ly - 11.0,
                    x + 4.0,
                    x - 4.0,
                    ly + 3.0,
                    x + 4.0
                );
            }
            Key::Fit(color) => {
                let _ = write!(
                    s,
                    "<line class=\"key-fit\" x1=\"{:.1}\" y1=\"{mid:.1}\" x2=\"{:.1}\" y2=\"{mid:.1}\" stroke=\"{color}\" stroke-width=\"1.3\" stroke-opacity=\"0.9\" stroke-dasharray=\"{FIT_DASH}\"/>",
                    lx,
                    lx + 24.0
                );
            }
            Key::Series(i) => {
                let color = COLORS[i % COLORS.len()];
                let _ = write!(
                    s,
                    "<line x1=\"{:.1}\" y1=\"{mid:.1}\" x2=\"{:.1}\" y2=\"{mid:.1}\" stroke=\"{color}\" stroke-width=\"2\"{}/>",
                    lx,
                    lx + 24.0,
                    dash_attr(DASHES[i % DASHES.len()])
                );
                marker(s, "key", i, lx + 12.0, mid, color, name);
            }
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
    for f in &pn.curves {
        ys.extend(
            f.points
                .iter()
                .filter(|p| p.x.is_finite() && p.x > 0.0)
                .map(|p| p.y),
        );
    }
    let yax = YAxis::new(&ys, pn.y_scale == YScale::Log);
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
    // Under error bars, series i of n sits (i - (n-1)/2) dodge units right of its x.
    let n = c.series.len();
    let dodge = if bars && n > 1 {
        DODGE.min(0.5 * step_px / n as f64)
    } else {
        0.0
    };
    for (i, (se, pts)) in c.series.iter().zip(&drawn).enumerate() {
        let color = COLORS[i % COLORS.len()];
        let off = (i as f64 - (n as f64 - 1.0) / 2.0) * dodge;
        let _ = writeln!(
            s,
            "<g class=\"series\" data-series=\"{}\" data-points=\"{}\">",
            esc(&se.name),
            pts.len()
        );
        for run in line_runs(&se.points, &yax) {
            if run.len() < 2 {
                continue;
            }
            let mut d = String::new();
            for p in &run {
                let _ = write!(d, "{:.1},{:.1} ", px(p.x.log2()) + off, py(p.y));
            }
            let _ = writeln!(
                s,
                "<polyline class=\"line\" points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" stroke-linejoin=\"round\"{}/>",
                d.trim_end(),
                dash_attr(DASHES[i % DASHES.len()])
            );
        }
        for p in pts {
            let x = px(p.x.log2()) + off;
            if bars {
                if let Some((a, b)) = p.band {
                    if yax.drawable(a) && yax.drawable(b) {
                        let (lo, hi) = (py(a.min(b)), py(a.max(b)));
                        let _ = writeln!(
                            s,
                            "<path class=\"err\" d=\"M{x:.1} {lo:.1}V{hi:.1}M{:.1} {lo:.1}H{:.1}M{:.1} {hi:.1}H{:.1}\" stroke=\"{color}\" stroke-width=\"1.2\" fill=\"none\"/>",
                            x - 3.0,
                            x + 3.0,
                            x - 3.0,
                            x + 3.0
                        );
                    }
                }
            }
            let xl = match c.x_kind {
                XKind::Bytes => format!("{} B", x_exact(p.x)),
                XKind::Count => x_exact(p.x),
            };
            let mut tip = format!("{}: {xl}: {}", se.name, sig(p.y));
            if let Some((a, b)) = p.band {
                let _ = write!(tip, " ({}..{})", sig(a), sig(b));
            }
            marker(s, "pt", i, x, py(p.y), color, &tip);
            s.push('\n');
        }
        s.push_str("</g>\n");
    }
    // Fitted curves over the data.
    for f in &pn.curves {
        let mut pts: Vec<Point> = f
            .points
            .iter()
            .copied()
            .filter(|p| p.x.is_finite() && p.x > 0.0 && yax.drawable(p.y))
            .collect();
        pts.sort_by(|a, b| a.x.total_cmp(&b.x));
        if pts.len() < 2 {
            continue;
        }
        let mut d = String::new();
        for p in &pts {
            let _ = write!(d, "{:.1},{:.1} ", px(p.x.log2()), py(p.y));
        }
        let _ = writeln!(
            s,
            "<polyline class=\"fit\" data-fit=\"{}\" points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.3\" stroke-opacity=\"0.9\" stroke-dasharray=\"{FIT_DASH}\"/>",
            esc(&f.name),
            d.trim_end(),
            fit_color(f.of, n)
        );
    }
    if drawn.iter().all(Vec::is_empty) {
        let _ = writeln!(
            s,
            "<text class=\"no-data\" x=\"{:.1}\" y=\"{cy:.1}\" text-anchor=\"middle\" font-size=\"16\" fill=\"#888\">no data</text>",
            (left + right) / 2.0
        );
    }
}
