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
