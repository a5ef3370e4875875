use super::*;

/// An element's name and attributes.
pub(crate) type Elem = (String, Vec<(String, String)>);

/// A small XML well-formedness check: tags nest and match, attributes are quoted and not
/// repeated, entity references are known, no stray `<` or `&` in text. Returns the element
/// names with their attributes, in document order.
pub(crate) fn check_xml(doc: &str) -> Result<Vec<Elem>, String> {
    let mut stack: Vec<String> = Vec::new();
    let mut elems = Vec::new();
    let mut rest = doc;
    let mut root_done = false;
    let check_text = |t: &str| -> Result<(), String> {
        let mut r = t;
        while let Some(i) = r.find('&') {
            let end = r[i..].find(';').ok_or("'&' without ';'")?;
            let ent = &r[i + 1..i + end];
            let ok = matches!(ent, "amp" | "lt" | "gt" | "quot" | "apos")
                || (ent.starts_with("#x")
                    && ent.len() > 2
                    && ent[2..].chars().all(|c| c.is_ascii_hexdigit()))
                || (ent.starts_with('#')
                    && ent.len() > 1
                    && ent[1..].chars().all(|c| c.is_ascii_digit()));
            if !ok {
                return Err(format!("bad entity &{ent};"));
            }
            r = &r[i + end + 1..];
        }
        if t.contains('>') {
            return Err(format!("raw '>' in text {t:?}"));
        }
        Ok(())
    };
    if let Some(r) = rest.strip_prefix("<?xml") {
        rest = &r[r.find("?>").ok_or("unterminated XML declaration")? + 2..];
    }
    loop {
        let Some(lt) = rest.find('<') else {
            check_text(rest)?;
            if !rest.trim().is_empty() {
                return Err("text after the root element".into());
            }
            break;
        };
        let text = &rest[..lt];
        check_text(text)?;
        if stack.is_empty() && !text.trim().is_empty() {
            return Err(format!("text outside the root: {text:?}"));
        }
        let gt = rest[lt..].find('>').ok_or("unterminated tag")? + lt;
        let tag = &rest[lt + 1..gt];
        rest = &rest[gt + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            let open = stack
                .pop()
                .ok_or(format!("</{name}> without an open tag"))?;
            if open != name.trim() {
                return Err(format!("<{open}> closed by </{name}>"));
            }
            if stack.is_empty() {
                root_done = true;
            }
            continue;
        }
        if root_done {
            return Err("a second root element".into());
        }
        let self_closing = tag.ends_with('/');
        let body = tag.trim_end_matches('/');
        let name_end = body.find(char::is_whitespace).unwrap_or(body.len());
        let name = &body[..name_end];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(format!("bad element name in <{tag}>"));
        }
        let mut attrs: Vec<(String, String)> = Vec::new();
        let mut a = body[name_end..].trim_start();
        while !a.is_empty() {
            let eq = a
                .find('=')
                .ok_or(format!("attribute without '=' in <{tag}>"))?;
            let key = a[..eq].trim();
            let v = &a[eq + 1..];
            let q = v.chars().next().ok_or("attribute without value")?;
            if q != '"' && q != '\'' {
                return Err(format!("unquoted attribute {key} in <{tag}>"));
            }
            let close = v[1..].find(q).ok_or("unterminated attribute value")? + 1;
            let val = &v[1..close];
            if val.contains('<') {
                return Err(format!("'<' in attribute {key}"));
            }
            check_text(val)?;
            if attrs.iter().any(|(k, _)| k == key) {
                return Err(format!("attribute {key} repeated in <{name}>"));
            }
            attrs.push((key.to_string(), val.to_string()));
            a = v[close + 1..].trim_start();
        }
        elems.push((name.to_string(), attrs));
        if !self_closing {
            stack.push(name.to_string());
        } else if stack.is_empty() {
            root_done = true;
        }
    }
    if let Some(open) = stack.pop() {
        return Err(format!("<{open}> never closed"));
    }
    if !root_done {
        return Err("no root element".into());
    }
    Ok(elems)
}

fn attr<'a>(e: &'a Elem, k: &str) -> Option<&'a str> {
    e.1.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str())
}

fn sizes() -> Vec<f64> {
    (1..=23).map(|k| 2f64.powi(k)).collect()
}

fn lat_chart(n_series: usize) -> Chart {
    Chart {
        title: "write_lat <latency> & \"quotes\" — sim sim0".into(),
        subtitle: "RC, 1000 iterations".into(),
        x_label: "message size [bytes]".into(),
        x_kind: XKind::Bytes,
        y_label: "latency t_typical [µs]".into(),
        band_label: Some("shaded: t_min..p99".into()),
        series: (0..n_series)
            .map(|s| Series {
                name: format!("series {s} <&>"),
                points: sizes()
                    .iter()
                    .map(|&x| {
                        let y = 0.5 * (s + 1) as f64 + x / 10000.0;
                        Point {
                            x,
                            y,
                            band: Some((y * 0.9, y * 1.5)),
                        }
                    })
                    .collect(),
            })
            .collect(),
    }
}

#[test]
fn svg_is_well_formed_with_one_marker_per_size_per_series() {
    let svg = render(&[lat_chart(3)]);
    let elems = check_xml(&svg).unwrap();
    assert_eq!(elems[0].0, "svg");
    assert_eq!(attr(&elems[0], "viewBox"), Some("0 0 900 540"));
    let groups: Vec<usize> = elems
        .iter()
        .enumerate()
        .filter(|(_, e)| attr(e, "class") == Some("series"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(groups.len(), 3);
    // Markers between one series group and the next.
    for (g, &start) in groups.iter().enumerate() {
        let end = groups.get(g + 1).copied().unwrap_or(elems.len());
        let pts = elems[start..end]
            .iter()
            .filter(|e| attr(e, "class") == Some("pt"))
            .count();
        assert_eq!(pts, 23, "series {g}");
        assert_eq!(attr(&elems[start], "data-points"), Some("23"));
    }
    for class in ["title", "x-label", "y-label", "subtitle", "band", "line"] {
        assert!(
            elems.iter().any(|e| attr(e, "class") == Some(class)),
            "no {class}"
        );
    }
    assert!(svg.contains("message size [bytes]</text>"));
    assert!(svg.contains("latency t_typical [µs]</text>"));
    assert!(svg.contains("write_lat &lt;latency&gt; &amp; &quot;quotes&quot; — sim sim0"));
}

#[test]
fn x_axis_labels_powers_of_two() {
    let svg = render(&[lat_chart(1)]);
    let xt = &svg[svg.find("class=\"x-ticks\"").unwrap()..];
    let xt = &xt[..xt.find("</g>").unwrap()];
    let labels: Vec<&str> = xt
        .split("<text ")
        .skip(1)
        .map(|t| &t[t.find('>').unwrap() + 1..t.find("</text>").unwrap()])
        .collect();
    assert_eq!(labels.first(), Some(&"2"));
    assert_eq!(labels.last(), Some(&"8M"));
    assert!(labels.contains(&"1K") || labels.contains(&"512"));
    assert_eq!(
        xt.matches("<line").count(),
        23,
        "a tick at every power of two"
    );
    assert_eq!(pow2_label(1024.0), "1K");
    assert_eq!(pow2_label(8_388_608.0), "8M");
    assert_eq!(pow2_label(64.0), "64");
    let batch = Chart {
        x_kind: XKind::Count,
        x_label: "batch size [WQEs per doorbell]".into(),
        band_label: None,
        series: vec![Series {
            name: "bf".into(),
            points: (0..7)
                .map(|k| Point {
                    x: 2f64.powi(k),
                    y: 10.0 + f64::from(k),
                    band: None,
                })
                .collect(),
        }],
        ..lat_chart(0)
    };
    let svg = render(&[batch]);
    check_xml(&svg).unwrap();
    for l in ["1", "2", "4", "8", "16", "32", "64"] {
        assert!(svg.contains(&format!(">{l}</text>")), "label {l}");
    }
    assert!(!svg.contains("class=\"band\""));
}

#[test]
fn bad_input_never_panics_and_stays_well_formed() {
    let odd = Chart {
        series: vec![
            Series {
                name: String::new(),
                points: vec![],
            },
            Series {
                name: "\u{1}ctl".into(),
                points: vec![
                    Point {
                        x: f64::NAN,
                        y: 1.0,
                        band: None,
                    },
                    Point {
                        x: 0.0,
                        y: 1.0,
                        band: None,
                    },
                    Point {
                        x: 4.0,
                        y: f64::INFINITY,
                        band: Some((f64::NAN, -1.0)),
                    },
                    Point {
                        x: 1e300,
                        y: -5.0,
                        band: None,
                    },
                    Point {
                        x: 1e-300,
                        y: 1e300,
                        band: None,
                    },
                ],
            },
        ],
        title: "x".repeat(500),
        ..lat_chart(0)
    };
    for c in [odd.clone(), lat_chart(0)] {
        let svg = render(&[c]);
        check_xml(&svg).unwrap();
    }
    check_xml(&render(&[])).unwrap();
    let empty = render(&[lat_chart(0)]);
    assert!(empty.contains("no data"));
}

#[test]
fn bands_only_for_few_series() {
    let few = render(&[lat_chart(MAX_BANDS)]);
    assert_eq!(few.matches("class=\"band\"").count(), MAX_BANDS);
    assert!(few.contains("shaded: t_min..p99"));
    let many = render(&[lat_chart(MAX_BANDS + 1)]);
    check_xml(&many).unwrap();
    assert!(!many.contains("class=\"band\""));
    assert!(!many.contains("shaded:"));
}

#[test]
fn output_is_deterministic_and_panels_stack() {
    let c = [lat_chart(2), lat_chart(1)];
    let a = render(&c);
    assert_eq!(a, render(&c));
    let elems = check_xml(&a).unwrap();
    assert_eq!(attr(&elems[0], "viewBox"), Some("0 0 900 1080"));
    assert_eq!(
        elems
            .iter()
            .filter(|e| attr(e, "class") == Some("chart"))
            .count(),
        2
    );
}

#[test]
fn xml_checker_rejects_broken_documents() {
    for bad in [
        "<svg><g></svg>",
        "<svg>a & b</svg>",
        "<svg x=1/>",
        "<svg></svg><svg/>",
        "<svg><text>&bogus;</text></svg>",
        "<svg a=\"1\" a=\"2\"/>",
        "<svg",
        "",
    ] {
        assert!(check_xml(bad).is_err(), "{bad}");
    }
    assert!(check_xml("<?xml version=\"1.0\"?>\n<svg a='1'><t>&amp;&#233;</t></svg>\n").is_ok());
}

/// The ticks of the group `class` (`y-ticks` or `x-ticks`) as (position, label): the tick
/// line's y (or x) and its label text ("" when unlabelled).
fn ticks(svg: &str, class: &str) -> Vec<(f64, String)> {
    let g = &svg[svg.find(&format!("class=\"{class}\"")).unwrap()..];
    let g = &g[g.find('\n').unwrap() + 1..g.find("</g>").unwrap()];
    let coord = if class == "y-ticks" { "y1=\"" } else { "x1=\"" };
    g.lines()
        .map(|l| {
            let v = &l[l.find(coord).unwrap() + coord.len()..];
            let pos: f64 = v[..v.find('"').unwrap()].parse().unwrap();
            let label = match l.find("<text") {
                Some(t) => {
                    let t = &l[t..];
                    t[t.find('>').unwrap() + 1..t.find("</text>").unwrap()].to_string()
                }
                None => String::new(),
            };
            (pos, label)
        })
        .collect()
}

/// The linear map value -> SVG y read off two labelled y ticks (a linear axis).
fn y_of(svg: &str) -> impl Fn(f64) -> f64 {
    let t: Vec<(f64, f64)> = ticks(svg, "y-ticks")
        .into_iter()
        .filter(|(_, l)| !l.is_empty())
        .map(|(p, l)| (p, l.parse::<f64>().unwrap()))
        .collect();
    let ((p0, v0), (p1, v1)) = (t[0], t[t.len() - 1]);
    move |v| p0 + (v - v0) / (v1 - v0) * (p1 - p0)
}

/// The map x -> SVG x read off the x ticks of a Count axis starting at 1 (each tick at a
/// power of two; between two, linear in log2 x).
fn x_of(svg: &str) -> impl Fn(f64) -> f64 {
    let t = ticks(svg, "x-ticks");
    assert_eq!(t[0].1, "1");
    move |x| {
        let l = x.log2();
        let k = (l.floor() as usize).min(t.len() - 2);
        t[k].0 + (l - k as f64) * (t[k + 1].0 - t[k].0)
    }
}

/// Numbers of an attribute like `points="1,2 3,4"` or `d="M1 2V3..."`.
fn nums(v: &str) -> Vec<f64> {
    v.split(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
        .filter(|t| !t.is_empty())
        .map(|t| t.parse().unwrap())
        .collect()
}

/// Two series of equal values at batch 1..64 with p10..p90-like ranges.
fn batch_chart() -> Chart {
    let series = |name: &str| Series {
        name: name.into(),
        points: (0..7)
            .map(|k| {
                let y = 10.0 + 20.0 / 2f64.powi(k);
                Point {
                    x: 2f64.powi(k),
                    y,
                    band: Some((y - 1.0, y + 2.0)),
                }
            })
            .collect(),
    };
    Chart {
        title: "batching".into(),
        subtitle: String::new(),
        x_label: "batch size".into(),
        x_kind: XKind::Count,
        y_label: "time per WQE [ns]".into(),
        band_label: Some("bars: p10..p90".into()),
        series: vec![series("db8"), series("bf-single")],
    }
}

#[test]
fn error_bars_span_the_range_at_each_marker_and_equal_series_are_dodged_apart() {
    let svg = render_panels(&[Panel::from(batch_chart()).error_bars()]);
    let elems = check_xml(&svg).unwrap();
    let (x_at, y_at) = (x_of(&svg), y_of(&svg));
    let step = x_at(2.0) - x_at(1.0);
    let dodge = DODGE.min(0.5 * step / 2.0);
    assert!(dodge > 1.0, "{dodge}");
    // Series 0 (circles) sits half a dodge left of x, series 1 (squares) half a dodge right.
    let circles: Vec<(f64, f64)> = elems
        .iter()
        .filter(|e| e.0 == "circle" && attr(e, "class") == Some("pt"))
        .map(|e| {
            let n = |k| attr(e, k).unwrap().parse::<f64>().unwrap();
            (n("cx"), n("cy"))
        })
        .collect();
    let squares: Vec<f64> = elems
        .iter()
        .filter(|e| e.0 == "rect" && attr(e, "class") == Some("pt"))
        .map(|e| attr(e, "x").unwrap().parse::<f64>().unwrap() + 3.3)
        .collect();
    let errs: Vec<Vec<f64>> = elems
        .iter()
        .filter(|e| attr(e, "class") == Some("err"))
        .map(|e| nums(attr(e, "d").unwrap()))
        .collect();
    assert_eq!((circles.len(), squares.len(), errs.len()), (7, 7, 14));
    for k in 0..7 {
        let x = 2f64.powi(k);
        let y = 10.0 + 20.0 / x;
        let (cx, cy) = circles[k as usize];
        assert!((cx - (x_at(x) - dodge / 2.0)).abs() < 0.16, "k {k}: {cx}");
        assert!((squares[k as usize] - (x_at(x) + dodge / 2.0)).abs() < 0.16);
        assert!((cy - y_at(y)).abs() < 0.11);
        // d = M x lo V hi M x-3 lo H x+3 M x-3 hi H x+3: the whisker at the marker's x.
        let d = &errs[k as usize];
        assert!((d[0] - cx).abs() < 0.11, "{d:?} vs {cx}");
        assert!((d[1] - y_at(y - 1.0)).abs() < 0.11, "{d:?}");
        assert!((d[2] - y_at(y + 2.0)).abs() < 0.11, "{d:?}");
        assert!((d[3] - (cx - 3.0)).abs() < 0.11 && (d[5] - (cx + 3.0)).abs() < 0.11);
        assert!((errs[7 + k as usize][0] - squares[k as usize]).abs() < 0.11);
    }
    // No shaded band; the legend shows the whisker with the caller's label.
    assert!(!svg.contains("class=\"band\""));
    assert!(svg.contains("class=\"key-err\""));
    assert!(svg.contains(">bars: p10..p90</text>"));
    // Shaded bands (the default) are not dodged: the two lines coincide.
    let plain = render(&[batch_chart()]);
    assert_eq!(plain.matches("class=\"band\"").count(), 2);
    assert!(!plain.contains("class=\"err\""));
}

#[test]
fn a_fitted_curve_is_drawn_through_its_points_in_its_series_colour() {
    let fit_pts: Vec<Point> = (0..=24)
        .map(|i| {
            let b = 2f64.powf(f64::from(i) / 4.0);
            Point {
                x: b,
                y: 9.5 + 21.0 / b,
                band: None,
            }
        })
        .collect();
    let panel = Panel::from(batch_chart())
        .error_bars()
        .with_curve(Curve {
            name: "fit db8: t = 9.5 + 21/b ns".into(),
            of: Some(0),
            points: fit_pts.clone(),
        })
        .with_curve(Curve {
            name: "model".into(),
            of: None,
            points: vec![fit_pts[0], fit_pts[24]],
        });
    let svg = render_panels(&[panel]);
    let elems = check_xml(&svg).unwrap();
    let (x_at, y_at) = (x_of(&svg), y_of(&svg));
    let fits: Vec<&Elem> = elems
        .iter()
        .filter(|e| attr(e, "class") == Some("fit"))
        .collect();
    assert_eq!(fits.len(), 2);
    assert_eq!(attr(fits[0], "stroke"), Some(COLORS[0]));
    assert_eq!(attr(fits[1], "stroke"), Some(FIT_GREY));
    assert_eq!(attr(fits[0], "stroke-dasharray"), Some(FIT_DASH));
    let v = nums(attr(fits[0], "points").unwrap());
    assert_eq!(v.len(), 2 * 25);
    for (i, p) in fit_pts.iter().enumerate() {
        // (Ticks and vertices are written to 0.1: up to 0.05 off each.)
        assert!((v[2 * i] - x_at(p.x)).abs() < 0.16, "point {i}");
        assert!((v[2 * i + 1] - y_at(p.y)).abs() < 0.11, "point {i}");
    }
    // One legend entry per fit, no markers on the curve.
    assert_eq!(svg.matches("class=\"key-fit\"").count(), 2);
    assert!(svg.contains(">fit db8: t = 9.5 + 21/b ns</text>"));
    assert_eq!(
        elems
            .iter()
            .filter(|e| attr(e, "class") == Some("pt"))
            .count(),
        14
    );
}

#[test]
fn a_spike_keeps_the_axis_linear_unless_log_is_asked() {
    let mut c = batch_chart();
    c.series[0].points[3].y = 900.0;
    let lin = render(&[c.clone()]);
    let labels: Vec<f64> = ticks(&lin, "y-ticks")
        .iter()
        .map(|(_, l)| l.parse().unwrap())
        .collect();
    assert_eq!(labels[0], 0.0);
    let step = labels[1] - labels[0];
    assert!(labels.windows(2).all(|w| (w[1] - w[0] - step).abs() < 1e-9));
    assert!(*labels.last().unwrap() >= 900.0);
    let log = render_panels(&[Panel::from(c).log_y()]);
    let l: Vec<String> = ticks(&log, "y-ticks").into_iter().map(|t| t.1).collect();
    assert!(l.contains(&"10".to_string()) && l.contains(&"100".to_string()));
}

#[test]
fn series_differ_in_dash_and_marker_on_the_line_and_in_the_legend() {
    let svg = render(&[lat_chart(6)]);
    let elems = check_xml(&svg).unwrap();
    let dash_of = |e: &Elem| attr(e, "stroke-dasharray").unwrap_or("").to_string();
    let lines: Vec<String> = elems
        .iter()
        .filter(|e| attr(e, "class") == Some("line"))
        .map(dash_of)
        .collect();
    assert_eq!(lines, ["", "2 3", "10 3 2 3", "10 3 2 3 2 3", "16 4", ""]);
    // Legend: a line with the same dash and the same marker shape as the series.
    let legend = &elems[elems
        .iter()
        .position(|e| attr(e, "class") == Some("legend"))
        .unwrap()..];
    let keys: Vec<String> = legend
        .iter()
        .filter(|e| e.0 == "line")
        .take(6)
        .map(dash_of)
        .collect();
    assert_eq!(keys, lines);
    let shapes: Vec<&str> = legend
        .iter()
        .filter(|e| attr(e, "class") == Some("key"))
        .map(|e| e.0.as_str())
        .collect();
    assert_eq!(shapes, ["circle", "rect", "path", "path", "circle", "rect"]);
    // Series 4 shares series 0's shape, not its dash or its colour.
    assert_ne!(COLORS[0], COLORS[4]);
}

#[test]
fn a_sampled_curve_is_even_in_log2_x() {
    let c = Curve::sampled("t = 2 + 8/b", Some(1), 1.0, 64.0, 13, |b| 2.0 + 8.0 / b);
    assert_eq!(
        (c.name.as_str(), c.of, c.points.len()),
        ("t = 2 + 8/b", Some(1), 13)
    );
    for (i, p) in c.points.iter().enumerate() {
        let x = 2f64.powf(i as f64 / 2.0);
        assert!((p.x - x).abs() < 1e-9 * x, "{i}: {}", p.x);
        assert!((p.y - (2.0 + 8.0 / x)).abs() < 1e-12);
    }
    assert!(Curve::sampled("x", None, 0.0, 64.0, 9, |b| b)
        .points
        .is_empty());
    assert_eq!(
        Curve::sampled("x", None, 1.0, 4.0, 0, |b| b).points.len(),
        2
    );
    let holes = Curve::sampled(
        "x",
        None,
        1.0,
        4.0,
        3,
        |b| if b == 2.0 { f64::NAN } else { b },
    );
    assert_eq!(holes.points.len(), 2);
}

/// A NaN y is a gap: the line breaks there (a polyline per run of two or more points, none
/// for a lone point, whose marker stays); a point left out for another reason (0 on a log
/// axis) does not break it.
#[test]
fn a_nan_point_breaks_the_line_and_other_left_out_points_do_not() {
    let pt = |x: f64, y: f64| Point { x, y, band: None };
    let chart = |ys: &[f64]| Chart {
        title: "gaps".into(),
        subtitle: String::new(),
        x_label: "x".into(),
        x_kind: XKind::Count,
        y_label: "y".into(),
        band_label: None,
        series: vec![Series {
            name: "s".into(),
            points: ys
                .iter()
                .enumerate()
                .map(|(k, &y)| pt(2f64.powi(k as i32), y))
                .collect(),
        }],
    };
    let lines = |svg: &str| -> Vec<usize> {
        check_xml(svg)
            .unwrap()
            .iter()
            .filter(|e| attr(e, "class") == Some("line"))
            .map(|e| nums(attr(e, "points").unwrap()).len() / 2)
            .collect()
    };
    let markers = |svg: &str| svg.matches("class=\"pt\"").count();
    let n = f64::NAN;
    // Runs [1, 2], [8, 16, 32], [128]: two lines, six markers.
    let svg = render_panels(&[Panel::from(chart(&[3.0, 4.0, n, 5.0, 6.0, 7.0, n, 8.0])).log_y()]);
    assert_eq!(lines(&svg), [2, 3]);
    assert_eq!(markers(&svg), 6);
    // The same with 0 in place of NaN on the log axis: the zeros are left out, one line.
    let svg =
        render_panels(&[Panel::from(chart(&[3.0, 4.0, 0.0, 5.0, 6.0, 7.0, 0.0, 8.0])).log_y()]);
    assert_eq!(lines(&svg), [6]);
    assert_eq!(markers(&svg), 6);
}
