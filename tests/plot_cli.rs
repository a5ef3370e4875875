//! `rdma-direct plot` end to end: result files (ours and perftest's `--out_json`, from
//! fixtures/) in, a well-formed SVG out with one marker per size per curve; mixed or broken
//! inputs refused with a message naming the file, never a panic.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The binary cargo built; elsewhere `RDMA_DIRECT_BIN` or `rdma-direct` on PATH.
fn exe() -> String {
    let built = env!("CARGO_BIN_EXE_rdma-direct");
    if Path::new(built).exists() {
        return built.to_string();
    }
    std::env::var("RDMA_DIRECT_BIN").unwrap_or_else(|_| "rdma-direct".to_string())
}

fn fixture(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(rel)
        .display()
        .to_string()
}

/// A fresh directory for one test's files.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rdma-direct-plot-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create scratch dir");
    d
}

fn plot(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(exe())
        .arg("plot")
        .args(args)
        .output()
        .expect("run rdma-direct");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// An element: its name and attributes.
type Elem = (String, Vec<(String, String)>);

/// Element names and attributes of a well-formed XML document, or why it is not one: tags
/// nest and match, attribute values are quoted and free of `<`, entities are known, one root.
fn xml_elements(doc: &str) -> Result<Vec<Elem>, String> {
    fn text_ok(t: &str) -> Result<(), String> {
        let mut r = t;
        while let Some(i) = r.find('&') {
            let end = r[i..].find(';').ok_or("'&' without ';'")?;
            let ent = &r[i + 1..i + end];
            let known = matches!(ent, "amp" | "lt" | "gt" | "quot" | "apos")
                || (ent.len() > 1
                    && ent.starts_with('#')
                    && ent[1..].chars().all(|c| c.is_ascii_alphanumeric()));
            if !known {
                return Err(format!("unknown entity &{ent};"));
            }
            r = &r[i + end + 1..];
        }
        Ok(())
    }
    let mut rest = doc;
    if let Some(r) = rest.strip_prefix("<?xml") {
        rest = &r[r.find("?>").ok_or("unterminated declaration")? + 2..];
    }
    let mut stack: Vec<String> = Vec::new();
    let mut elems = Vec::new();
    let mut roots = 0;
    while let Some(lt) = rest.find('<') {
        let text = &rest[..lt];
        text_ok(text)?;
        if stack.is_empty() && !text.trim().is_empty() {
            return Err("text outside the root element".into());
        }
        let gt = lt + rest[lt..].find('>').ok_or("unterminated tag")?;
        let tag = &rest[lt + 1..gt];
        rest = &rest[gt + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            match stack.pop() {
                Some(open) if open == name => continue,
                other => return Err(format!("</{name}> closes {other:?}")),
            }
        }
        if stack.is_empty() {
            roots += 1;
        }
        let body = tag.trim_end_matches('/');
        let n = body.find(char::is_whitespace).unwrap_or(body.len());
        let name = &body[..n];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(format!("bad tag <{tag}>"));
        }
        let mut attrs = Vec::new();
        let mut a = body[n..].trim_start();
        while !a.is_empty() {
            let eq = a
                .find('=')
                .ok_or(format!("attribute without value in <{name}>"))?;
            let v = &a[eq + 1..];
            if !v.starts_with('"') {
                return Err(format!("unquoted attribute in <{name}>"));
            }
            let close = 1 + v[1..].find('"').ok_or("unterminated attribute")?;
            let val = &v[1..close];
            if val.contains('<') {
                return Err("'<' in an attribute".into());
            }
            text_ok(val)?;
            attrs.push((a[..eq].trim().to_string(), val.to_string()));
            a = v[close + 1..].trim_start();
        }
        elems.push((name.to_string(), attrs));
        if !tag.ends_with('/') {
            stack.push(name.to_string());
        }
    }
    if !rest.trim().is_empty() || !stack.is_empty() || roots != 1 {
        return Err(format!("unclosed {stack:?} or {roots} roots"));
    }
    Ok(elems)
}

fn class_count(elems: &[Elem], class: &str) -> usize {
    elems
        .iter()
        .filter(|e| e.1.iter().any(|(k, v)| k == "class" && v == class))
        .count()
}

fn series_points(elems: &[Elem]) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for e in elems {
        let class =
            e.1.iter()
                .find(|(k, _)| k == "class")
                .map(|(_, v)| v.as_str());
        match class {
            Some("series") => {
                let name = e.1.iter().find(|(k, _)| k == "data-series").unwrap();
                out.push((name.1.clone(), 0));
            }
            Some("pt") => out.last_mut().expect("marker outside a series").1 += 1,
            _ => {}
        }
    }
    out
}

#[test]
fn latency_overlay_of_two_runs() {
    let d = scratch("overlay");
    let svg = d.join("o.svg");
    let (code, out, err) = plot(&[
        &fixture("results/sim_write_lat.json"),
        &fixture("results/rxe_write_lat.json"),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("2 curves from 2 files"), "{out}");
    let doc = std::fs::read_to_string(&svg).unwrap();
    let elems = xml_elements(&doc).unwrap();
    assert_eq!(
        series_points(&elems),
        [
            ("rdma-direct sim sim0".to_string(), 23),
            ("rdma-direct verbs rxe0".to_string(), 23)
        ]
    );
    assert_eq!(class_count(&elems, "band"), 2);
    assert_eq!(class_count(&elems, "title"), 1);
    assert!(doc.contains(">message size [bytes]</text>"));
    assert!(doc.contains(">latency: t_typical (median) [µs]</text>"));
    assert!(doc.contains("write_lat latency vs message size"));
    for label in [">2</text>", ">1K</text>", ">8M</text>"] {
        assert!(doc.contains(label), "x label {label}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// The y tick labels of the first chart.
fn y_labels(doc: &str) -> Vec<f64> {
    let g = &doc[doc.find("class=\"y-ticks\"").unwrap()..];
    let g = &g[..g.find("</g>").unwrap()];
    g.split("<text ")
        .skip(1)
        .map(|t| {
            t[t.find('>').unwrap() + 1..t.find("</text>").unwrap()]
                .parse()
                .unwrap()
        })
        .collect()
}

#[test]
fn y_scale_is_log_for_a_size_sweep_unless_linear_is_asked() {
    let d = scratch("yscale");
    let svg = d.join("y.svg");
    let lat = fixture("results/sim_write_lat.json");
    let run = |extra: &[&str]| {
        let mut a = vec![lat.as_str(), "--svg", svg.to_str().unwrap()];
        a.extend_from_slice(extra);
        let (code, _, err) = plot(&a);
        assert_eq!(code, 0, "{err}");
        y_labels(&std::fs::read_to_string(&svg).unwrap())
    };
    // Log: labelled ticks grow by a factor each (1, 2, 5, 10, ...), never from 0.
    let log = run(&[]);
    assert!(
        log[0] > 0.0 && log.windows(2).all(|w| w[1] > w[0]),
        "{log:?}"
    );
    assert_eq!(run(&["--y-scale", "log"]), log);
    // Linear: from 0 in equal steps.
    let lin = run(&["--y-scale", "linear"]);
    assert_eq!(lin[0], 0.0, "{lin:?}");
    let step = lin[1] - lin[0];
    assert!(
        lin.windows(2).all(|w| (w[1] - w[0] - step).abs() < 1e-9),
        "{lin:?}"
    );
    let (code, _, err) = plot(&[&lat, "--svg", svg.to_str().unwrap(), "--y-scale", "ln"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--y-scale ln: expected log or linear"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn ours_against_perftest_files_one_size_each() {
    let d = scratch("perftest");
    let svg = d.join("p.svg");
    let mut args = vec![fixture("results/rxe_write_lat.json")];
    let dir = fixture("perftest");
    let mut pf: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .filter(|p| p.contains("ib_write_lat_rxe0_"))
        .collect();
    pf.sort();
    assert_eq!(pf.len(), 8);
    args.extend(pf);
    args.extend(["--svg".to_string(), svg.display().to_string()]);
    args.extend(["--title".to_string(), "ours & perftest <rxe>".to_string()]);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, _, err) = plot(&argv);
    assert_eq!(code, 0, "{err}");
    let doc = std::fs::read_to_string(&svg).unwrap();
    let elems = xml_elements(&doc).unwrap();
    assert_eq!(
        series_points(&elems),
        [
            ("rdma-direct verbs rxe0".to_string(), 23),
            ("perftest verbs rxe0".to_string(), 8)
        ]
    );
    assert!(doc.contains("ours &amp; perftest &lt;rxe&gt;"));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bandwidth_gives_bandwidth_and_message_rate() {
    let d = scratch("bw");
    let svg = d.join("b.svg");
    let (code, _, err) = plot(&[
        &fixture("results/sim_write_bw.json"),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let doc = std::fs::read_to_string(&svg).unwrap();
    let elems = xml_elements(&doc).unwrap();
    assert_eq!(class_count(&elems, "chart"), 2);
    assert_eq!(class_count(&elems, "pt"), 46);
    assert!(doc.contains(">BW average [MiB/s]</text>"));
    assert!(doc.contains(">message rate [Mpps]</text>"));
    let (code, _, err) = plot(&[
        &fixture("results/sim_write_bw.json"),
        &fixture("perftest/ib_write_bw_rxe0_65536.json"),
        "--metric",
        "rate",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let elems = xml_elements(&std::fs::read_to_string(&svg).unwrap()).unwrap();
    assert_eq!(class_count(&elems, "chart"), 1);
    assert_eq!(
        series_points(&elems),
        [
            ("rdma-direct sim sim0".to_string(), 23),
            ("perftest verbs rxe0".to_string(), 1)
        ]
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn refusals_name_the_problem() {
    let d = scratch("refuse");
    let svg = d.join("x.svg");
    let svg = svg.to_str().unwrap();
    let lat = fixture("results/sim_write_lat.json");
    let bw = fixture("results/sim_write_bw.json");
    let (code, _, err) = plot(&[&lat, &bw, "--svg", svg]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot mix latency and bandwidth"), "{err}");
    assert!(
        err.contains("sim_write_bw.json is write_bw (bandwidth)"),
        "{err}"
    );
    assert!(!Path::new(svg).exists(), "nothing written on refusal");

    let (code, _, err) = plot(&[&lat, "--metric", "rate", "--svg", svg]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--metric rate does not apply to latency"),
        "{err}"
    );
    let (code, _, err) = plot(&[&lat]);
    assert_eq!(code, 2);
    assert!(err.contains("--svg OUT.svg is required"), "{err}");
    let (code, _, err) = plot(&["--svg", svg]);
    assert_eq!(code, 2);
    assert!(err.contains("no result files"), "{err}");
    let (code, _, err) = plot(&[&lat, "--svg"]);
    assert_eq!(code, 2);
    assert!(err.contains("--svg needs a value"), "{err}");
    let (code, _, err) = plot(&[&lat, "--colour", "red", "--svg", svg]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown option '--colour'"), "{err}");

    // Truncated, garbage, binary and missing files: exit 1, the file and position named.
    let text = std::fs::read_to_string(&lat).unwrap();
    let cut = d.join("cut.json");
    std::fs::write(&cut, &text[..text.len() / 2]).unwrap();
    let (code, _, err) = plot(&[cut.to_str().unwrap(), "--svg", svg]);
    assert_eq!(code, 1);
    assert!(
        err.contains("cut.json: line ") && err.contains("end of file"),
        "{err}"
    );
    let junk = d.join("junk.json");
    std::fs::write(&junk, "{\"tool\": \"rdma-direct\", \"results\": [}").unwrap();
    let (code, _, err) = plot(&[junk.to_str().unwrap(), "--svg", svg]);
    assert_eq!(code, 1);
    assert!(err.contains("junk.json: line 1, column 37"), "{err}");
    let bin = d.join("bin.json");
    std::fs::write(&bin, [0x7b, 0xff, 0xfe, 0x00]).unwrap();
    let (code, _, err) = plot(&[bin.to_str().unwrap(), "--svg", svg]);
    assert_eq!(code, 1);
    assert!(err.contains("bin.json: not UTF-8"), "{err}");
    let (code, _, err) = plot(&["/nonexistent/r.json", "--svg", svg]);
    assert_eq!(code, 1);
    assert!(err.contains("/nonexistent/r.json:"), "{err}");
    assert!(!err.contains("panicked"));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn help_and_top_level_usage_list_plot() {
    let (code, out, _) = plot(&["--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("usage: rdma-direct plot"));
    let top = Command::new(exe()).arg("help").output().unwrap();
    assert!(String::from_utf8_lossy(&top.stdout).contains("plot FILE.json"));
}
