//! `rdma-direct perf` in every mode on the software device: each test × {`-s`, `-a`} × {RC,
//! UC where it applies, UD where it applies} × {inline default, `-I 0` where inline applies}
//! × {no post list, `-l 4`, `-Q 16`} for the bandwidth tests, each with `--json` and
//! `--svg`. Every run must exit 0 with sane rows (every figure finite and above zero, the
//! sizes the options ask for, in increasing order), a JSON file `rdma-direct plot` reads back
//! and a well-formed SVG. This is the test `perf send_lat -a` (receives sized for the previous
//! size) failed.
//!
//! Run time: short `-n` (5 for the `-a` sweeps, 50 for the SEND sweeps, so they consume more
//! receives than are kept posted; 20 for one size); the runs go two at a time.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_rdma-direct")
}

/// The software device's path MTU: UD's `-a` stops there.
const SIM_MTU: u32 = 4096;

/// Every command line of the matrix, and the sizes its table must show.
fn matrix() -> Vec<(String, Vec<u32>)> {
    let all: Vec<u32> = (1..=23).map(|k| 1u32 << k).collect();
    let mut v = Vec::new();
    for test in [
        "write_lat",
        "send_lat",
        "read_lat",
        "atomic_lat",
        "write_bw",
        "send_bw",
        "read_bw",
    ] {
        let read_like = matches!(test, "read_lat" | "atomic_lat" | "read_bw");
        let bw = test.ends_with("_bw");
        let transports: &[&str] = match test {
            "send_lat" | "send_bw" => &["RC", "UC", "UD"],
            "write_lat" | "write_bw" => &["RC", "UC"],
            _ => &["RC"],
        };
        let inlines: &[&str] = if read_like { &[""] } else { &["", "-I 0"] };
        let lists: &[&str] = if bw { &["", "-l 4", "-Q 16"] } else { &[""] };
        let sizes: &[&str] = if test == "atomic_lat" {
            &["-s 8"]
        } else {
            &["-s 64", "-a"]
        };
        for &c in transports {
            for &i in inlines {
                for &l in lists {
                    for &s in sizes {
                        // SEND sweeps consume more than the 512 receives kept posted, so
                        // later sizes take receives re-posted during earlier ones.
                        let n = match s {
                            "-a" if test.starts_with("send") => 50,
                            "-a" => 5,
                            _ => 20,
                        };
                        let want = match s {
                            "-a" if c == "UD" => {
                                all.iter().copied().filter(|&x| x <= SIM_MTU).collect()
                            }
                            "-a" => all.clone(),
                            _ => vec![s[3..].parse().unwrap()],
                        };
                        let line = format!("{test} {s} -n {n} -c {c} {i} {l}");
                        v.push((line.split_whitespace().collect::<Vec<_>>().join(" "), want));
                    }
                }
            }
        }
    }
    v
}

/// The table rows of a run's stdout: the cells under the ` #bytes` header, up to the rule.
fn rows(out: &str) -> Result<Vec<Vec<f64>>, String> {
    let mut lines = out.lines().skip_while(|l| !l.starts_with(" #bytes"));
    let head = lines.next().ok_or("no table header")?;
    let cols = head.split("  ").filter(|c| !c.trim().is_empty()).count();
    let mut rows = Vec::new();
    for l in lines.take_while(|l| !l.starts_with("---")) {
        let cells: Vec<f64> = l
            .split_whitespace()
            .map(|c| c.parse::<f64>().map_err(|_| format!("cell '{c}' in '{l}'")))
            .collect::<Result<_, _>>()?;
        if cells.len() != cols {
            return Err(format!("{} cells under {cols} titles: '{l}'", cells.len()));
        }
        rows.push(cells);
    }
    Ok(rows)
}

/// What is wrong with the table rows of a run that asked for `want`. Latency figures
/// (microseconds, two decimals) must be above zero, t_stdev (column 6) may be 0; bandwidth
/// cells may print 0.00 (2 bytes at `-n 5` is under 0.005 MiB/s), so their figures are
/// checked at full precision in the JSON file ([`json_figures`]).
fn check_rows(rows: &[Vec<f64>], want: &[u32], lat: bool) -> Result<(), String> {
    let sizes: Vec<u32> = rows.iter().map(|r| r[0] as u32).collect();
    if sizes != want {
        return Err(format!("sizes {sizes:?}, expected {want:?}"));
    }
    for r in rows {
        for (k, &x) in r.iter().enumerate() {
            let may_be_zero = (lat && k == 6) || (!lat && k >= 2);
            if !x.is_finite() || x < 0.0 || (x == 0.0 && !may_be_zero) {
                return Err(format!("figure {x} in column {k} of {r:?}"));
            }
        }
    }
    Ok(())
}

/// Every value of `"key": NUMBER` in a JSON text, in order.
fn json_figures(text: &str, key: &str) -> Result<Vec<f64>, String> {
    let pat = format!("\"{key}\": ");
    text.match_indices(&pat)
        .map(|(i, _)| {
            let v = &text[i + pat.len()..];
            let end = v.find([',', '}']).unwrap_or(v.len());
            v[..end]
                .trim()
                .parse::<f64>()
                .map_err(|_| format!("{key}: '{}'", &v[..end]))
        })
        .collect()
}

/// The figures of the JSON file: one per size, each finite and above zero.
fn check_json(text: &str, want: &[u32], lat: bool) -> Result<(), String> {
    let keys: &[&str] = if lat {
        &["t_min", "t_typical", "t_avg"]
    } else {
        &["bw_peak", "bw_avg", "msg_rate"]
    };
    // The rows only (the header's "units" names the columns too).
    let at = text.find("\"results\"").ok_or("no \"results\"")?;
    let text = &text[at..];
    let bytes = json_figures(text, "bytes")?;
    let sizes: Vec<u32> = bytes.iter().map(|&b| b as u32).collect();
    if sizes != want {
        return Err(format!("JSON sizes {sizes:?}, expected {want:?}"));
    }
    for key in keys {
        let v = json_figures(text, key)?;
        if v.len() != want.len() || v.iter().any(|x| !x.is_finite() || *x <= 0.0) {
            return Err(format!("JSON {key}: {v:?}"));
        }
    }
    Ok(())
}

/// Tags nest and match, one root `svg` element: enough to say a viewer can open it.
fn svg_well_formed(doc: &str) -> Result<(), String> {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = doc;
    let mut roots = 0;
    while let Some(i) = rest.find('<') {
        let end = rest[i..].find('>').ok_or("'<' without '>'")? + i;
        let tag = &rest[i + 1..end];
        rest = &rest[end + 1..];
        if tag.starts_with('?') || tag.starts_with('!') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            match stack.pop() {
                Some(open) if open == name.trim() => {}
                other => return Err(format!("</{name}> closes {other:?}")),
            }
            continue;
        }
        let name = tag
            .split_whitespace()
            .next()
            .unwrap_or("")
            .trim_end_matches('/');
        if stack.is_empty() {
            roots += 1;
            if name != "svg" {
                return Err(format!("root element <{name}>"));
            }
        }
        if !tag.ends_with('/') {
            stack.push(name.to_string());
        }
    }
    match (stack.is_empty(), roots) {
        (true, 1) => Ok(()),
        _ => Err(format!("unclosed {stack:?}, {roots} roots")),
    }
}

/// Run one command line of the matrix; what is wrong with it, if anything.
fn run_one(dir: &Path, k: usize, line: &str, want: &[u32]) -> Option<String> {
    let json = dir.join(format!("{k}.json"));
    let svg = dir.join(format!("{k}.svg"));
    let mut args = vec!["perf".to_string()];
    args.extend(line.split_whitespace().map(String::from));
    args.extend([
        "--json".into(),
        json.display().to_string(),
        "--svg".into(),
        svg.display().to_string(),
    ]);
    let out = Command::new(exe()).args(&args).output().expect("spawn");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    if !out.status.success() || stderr.contains("panicked") {
        return Some(format!("{:?}: {stderr}", out.status.code()));
    }
    let lat = line.contains("_lat");
    if let Err(e) = rows(&stdout).and_then(|r| check_rows(&r, want, lat)) {
        return Some(format!("{e}\n{stdout}"));
    }
    let text = std::fs::read_to_string(&json).unwrap_or_default();
    if let Err(e) = check_json(&text, want, lat) {
        return Some(format!("--json: {e}\n{text}"));
    }
    let doc = std::fs::read_to_string(&svg).unwrap_or_default();
    if let Err(e) = svg_well_formed(&doc) {
        return Some(format!("--svg: {e}"));
    }
    // The JSON file read back by the project's own reader (plot refuses a file it cannot
    // parse, naming the field).
    let back = dir.join(format!("{k}.back.svg"));
    let p = Command::new(exe())
        .arg("plot")
        .arg(&json)
        .arg("--svg")
        .arg(&back)
        .output()
        .expect("spawn plot");
    if !p.status.success() {
        return Some(format!(
            "--json: plot: {}",
            String::from_utf8_lossy(&p.stderr)
        ));
    }
    None
}

#[test]
fn every_perf_test_in_every_mode_on_the_sim_with_json_and_svg() {
    let m = matrix();
    assert!(m.len() >= 80, "{} runs", m.len());
    let dir: PathBuf =
        std::env::temp_dir().join(format!("rdma-direct-perf-matrix-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some((line, want)) = m.get(k) else { break };
                if let Some(e) = run_one(&dir, k, line, want) {
                    failures.lock().unwrap().push(format!("perf {line}: {e}"));
                }
            });
        }
    });
    let _ = std::fs::remove_dir_all(&dir);
    let f = failures.into_inner().unwrap();
    assert!(
        f.is_empty(),
        "{} of {} runs failed:\n{}",
        f.len(),
        m.len(),
        f.join("\n")
    );
}

#[test]
fn the_matrix_covers_every_test_transport_and_option() {
    let m = matrix();
    let lines: Vec<&str> = m.iter().map(|(l, _)| l.as_str()).collect();
    for must in [
        "send_lat -a -n 50 -c RC",
        "send_bw -a -n 50 -c RC",
        "send_lat -a -n 50 -c UD -I 0",
        "send_bw -a -n 50 -c UD -I 0 -l 4",
        "write_bw -s 64 -n 20 -c UC -Q 16",
        "read_bw -a -n 5 -c RC -l 4",
        "atomic_lat -s 8 -n 20 -c RC",
        "read_lat -a -n 5 -c RC",
    ] {
        assert!(lines.contains(&must), "{must} missing");
    }
}
