//! `rdma-direct bench batching` end to end, with tiny sweeps: the table names the provider
//! and says the figures are not hardware figures; `--json` holds one config per doorbell
//! mode x signaling period with one point per batch size, each with its spread; `--svg`
//! draws one line per config with one marker per batch size in two panels; bad options are
//! refused with a message, never a panic. (Structure only: no timing is asserted; the PCIe
//! counts per message, which do not depend on timing, are checked against hand counts.)

use std::path::{Path, PathBuf};
use std::process::Command;
#[path = "batching_cli/modes.rs"]
mod modes;

/// `git describe --always --dirty --tags` of this source tree, as the build script asks it;
/// `None` without git or outside a checkout.
fn git_describe() -> Option<String> {
    let out = Command::new("git")
        .args(["-C", env!("CARGO_MANIFEST_DIR")])
        .args(["describe", "--always", "--dirty", "--tags"])
        .output()
        .ok()?;
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !s.is_empty()).then_some(s)
}

/// A description without its "-dirty" (the tree may have changed between build and test).
fn undirty(d: &str) -> &str {
    d.strip_suffix("-dirty").unwrap_or(d)
}

/// A JSON value, read by [`parse`]: just what this test needs of the file the binary writes
/// (the test shares no code with the CLI, so a fault in the CLI's writer cannot hide itself).
#[derive(Debug, PartialEq)]
enum Value {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<Value>),
    Obj(Vec<(String, Value)>),
}

impl Value {
    fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Obj(kv) => kv.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
    fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
    fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Num(v) => Some(*v),
            _ => None,
        }
    }
    fn as_u64(&self) -> Option<u64> {
        self.as_f64()
            .filter(|v| *v >= 0.0 && v.fract() == 0.0)
            .map(|v| v as u64)
    }
}

/// RFC 8259 JSON without `\u` escapes (the batching file has none); `None` when the text
/// is not that.
fn parse(text: &str) -> Option<Value> {
    let mut r = Reader {
        b: text.as_bytes(),
        i: 0,
    };
    let v = r.value()?;
    r.ws();
    (r.i == r.b.len()).then_some(v)
}

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

impl Reader<'_> {
    fn ws(&mut self) {
        while self.b.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
    }
    /// Skips white space, then takes `c` if it comes next.
    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        let hit = self.b.get(self.i) == Some(&c);
        self.i += usize::from(hit);
        hit
    }
    fn value(&mut self) -> Option<Value> {
        self.ws();
        let rest = &self.b[self.i..];
        for (word, v) in [
            ("null", Value::Null),
            ("true", Value::Bool(true)),
            ("false", Value::Bool(false)),
        ] {
            if rest.starts_with(word.as_bytes()) {
                self.i += word.len();
                return Some(v);
            }
        }
        match rest.first()? {
            b'"' => self.string().map(Value::Str),
            b'[' => {
                self.i += 1;
                let mut a = Vec::new();
                if !self.eat(b']') {
                    loop {
                        a.push(self.value()?);
                        if self.eat(b']') {
                            break;
                        }
                        self.eat(b',').then_some(())?;
                    }
                }
                Some(Value::Arr(a))
            }
            b'{' => {
                self.i += 1;
                let mut kv = Vec::new();
                if !self.eat(b'}') {
                    loop {
                        self.ws();
                        let k = self.string()?;
                        self.eat(b':').then_some(())?;
                        kv.push((k, self.value()?));
                        if self.eat(b'}') {
                            break;
                        }
                        self.eat(b',').then_some(())?;
                    }
                }
                Some(Value::Obj(kv))
            }
            _ => {
                let n = rest
                    .iter()
                    .take_while(|c| b"+-.eE0123456789".contains(c))
                    .count();
                let v = std::str::from_utf8(&rest[..n]).ok()?.parse().ok()?;
                self.i += n;
                Some(Value::Num(v))
            }
        }
    }
    fn string(&mut self) -> Option<String> {
        (self.b.get(self.i) == Some(&b'"')).then_some(())?;
        let mut out = Vec::new();
        self.i += 1;
        loop {
            match *self.b.get(self.i)? {
                b'"' => break,
                b'\\' => {
                    self.i += 1;
                    out.push(match *self.b.get(self.i)? {
                        b'n' => b'\n',
                        b't' => b'\t',
                        c @ (b'"' | b'\\' | b'/') => c,
                        _ => return None,
                    });
                }
                c => out.push(c),
            }
            self.i += 1;
        }
        self.i += 1;
        String::from_utf8(out).ok()
    }
}

/// The binary cargo built; elsewhere `RDMA_DIRECT_BIN` or `rdma-direct` on PATH.
fn exe() -> String {
    let built = env!("CARGO_BIN_EXE_rdma-direct");
    if Path::new(built).exists() {
        return built.to_string();
    }
    std::env::var("RDMA_DIRECT_BIN").unwrap_or_else(|_| "rdma-direct".to_string())
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "rdma-direct-batching-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create scratch dir");
    d
}

fn batching(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(exe())
        .args(["bench", "batching"])
        .args(args)
        .output()
        .expect("run rdma-direct");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Run a tiny sweep on `provider`; check the table, the JSON and the SVG.
fn sweep(provider: &str, describe: &str) {
    let d = scratch(provider);
    let (js, svg) = (d.join("b.json"), d.join("b.svg"));
    let (code, out, err) = batching(&[
        "--provider",
        provider,
        "-l",
        "1,2,4",
        "-m",
        "db8,bf-single",
        "-Q",
        "1,batch",
        "-r",
        "3",
        "-w",
        "1",
        "-n",
        "64",
        "--explain",
        "--json",
        js.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains(&format!("provider: {describe}")), "{out}");
    assert!(
        out.contains("plain-memory and sim figures are not hardware figures"),
        "{out}"
    );
    assert!(out.contains("Where the cost goes"), "{out}");
    // One table per config, one row per batch size.
    let tables = out.lines().filter(|l| l.starts_with(" doorbell: ")).count();
    assert_eq!(tables, 4, "{out}");
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() >= 9 && ["1", "2", "4"].contains(&f[0]) && f[2].parse::<f64>().is_ok()
        })
        .collect();
    assert_eq!(rows.len(), 12, "{out}");

    let v = parse(&std::fs::read_to_string(&js).unwrap()).expect("valid JSON");
    assert_eq!(
        v.get("tool").and_then(Value::as_str),
        Some("rdma-direct bench batching")
    );
    assert_eq!(v.get("provider").and_then(Value::as_str), Some(provider));
    assert_eq!(v.get("hardware"), Some(&Value::Bool(false)));
    let Some(Value::Arr(configs)) = v.get("configs") else {
        panic!("no configs array: {v:?}");
    };
    let mut names = Vec::new();
    for c in configs {
        let mode = c.get("mode").and_then(Value::as_str).unwrap();
        let signal = c.get("signal").and_then(Value::as_str).unwrap();
        names.push(format!("{mode}/{signal}"));
        assert_eq!(c.get("payload").and_then(Value::as_str), Some("inline"));
        assert_eq!(c.get("size").and_then(Value::as_u64), Some(8));
        let Some(Value::Arr(points)) = c.get("points") else {
            panic!("no points: {c:?}");
        };
        let batches: Vec<u64> = points
            .iter()
            .map(|p| p.get("batch").and_then(Value::as_u64).unwrap())
            .collect();
        assert_eq!(batches, [1, 2, 4]);
        for p in points {
            assert_eq!(p.get("samples").and_then(Value::as_u64), Some(3));
            let ns = p.get("ns_per_wqe").expect("ns_per_wqe");
            let f = |k: &str| ns.get(k).and_then(Value::as_f64).unwrap();
            assert!(f("min") <= f("p10") && f("p10") <= f("median"), "{ns:?}");
            assert!(f("median") <= f("p90") && f("p90") <= f("max"), "{ns:?}");
            assert!(f("min") > 0.0);
            let mpps = p.get("mpps").and_then(Value::as_f64).unwrap();
            assert!((mpps - 1e3 / f("median")).abs() < 1e-6 * mpps);
            assert!(p.get("doorbells_per_s").and_then(Value::as_f64).unwrap() > 0.0);
            assert_eq!(
                p.get("device_wqes_per_doorbell").is_some(),
                provider == "sim",
                "{p:?}"
            );
        }
    }
    assert_eq!(
        names,
        ["db8/1", "db8/batch", "bf-single/1", "bf-single/batch"]
    );
    // The host and the command line; the least-squares model per doorbell mode (-Q 1,batch:
    // every WR keeps q at 1 while b varies, so the per-completion term is identified).
    let host = v.get("host").expect("host metadata");
    let Some(Value::Arr(argv)) = host.get("command_line") else {
        panic!("no command line: {host:?}");
    };
    assert!(
        argv.iter().any(|a| a.as_str() == Some("--explain")),
        "{argv:?}"
    );
    assert!(host.get("kernel").is_some() && host.get("load_1min_after").is_some());
    // The commit: what `git describe` says of this source tree (the build script's), else null.
    assert_eq!(
        host.get("commit").and_then(Value::as_str).map(undirty),
        git_describe().as_deref().map(undirty),
        "{host:?}"
    );
    let Some(Value::Arr(fits)) = v.get("fits") else {
        panic!("no fits: {v:?}");
    };
    assert_eq!(fits.len(), 2);
    for f in fits {
        assert_eq!(
            f.get("model").and_then(Value::as_str),
            Some("t = w + d/b + c*q")
        );
        let coef = f.get("coefficients").expect("coefficients");
        for k in ["w_ns_per_wqe", "d_ns_per_doorbell", "c_ns_per_completion"] {
            let ci = coef
                .get(k)
                .and_then(|c| c.get("ci95"))
                .and_then(Value::as_f64);
            assert!(ci.is_some_and(|h| h >= 0.0), "{k}: {coef:?}");
        }
        let Some(Value::Arr(r)) = f.get("residuals") else {
            panic!("no residuals: {f:?}");
        };
        assert_eq!(r.len(), 6, "one residual per point of the mode's curves");
    }

    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.starts_with("<?xml") && s.trim_end().ends_with("</svg>"));
    assert_eq!(s.matches("<g class=\"chart\"").count(), 2, "two panels");
    assert_eq!(
        s.matches("<polyline class=\"line\"").count(),
        8,
        "4 lines x 2"
    );
    assert_eq!(s.matches("data-points=\"3\"").count(), 8);
    assert!(s.contains("message rate [Mpps]") && s.contains("time per WQE [ns]"));
    assert!(s.contains("batch size [WQEs per doorbell]"));
    assert!(s.contains("db8, signal every WR") && s.contains("bf-single, signal once per batch"));
    // Every point's p10..p90 as an error bar (2 panels x 4 series x 3 points), no bands; the
    // cost panel draws the model fitted per doorbell mode along each configuration's batches.
    assert_eq!(s.matches("<path class=\"err\"").count(), 24, "error bars");
    assert_eq!(s.matches("class=\"band\"").count(), 0, "bars, not bands");
    assert_eq!(
        s.matches("<polyline class=\"fit\"").count(),
        4,
        "one fit per curve"
    );
    for c in ["db8, signal every WR", "bf-single, signal once per batch"] {
        assert!(s.contains(&format!("fit {c}: ")), "fit legend for {c}");
    }
    let title = if provider == "sim" {
        "sim, device thread"
    } else {
        "plain memory"
    };
    assert!(s.contains(title), "provider in the title");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn plain_memory_sweep_writes_table_json_and_svg() {
    sweep("plain", "plain memory (mlx5 driver");
}

#[test]
fn sim_sweep_writes_table_json_and_svg() {
    sweep("sim", "sim (software mlx5 device");
}

#[test]
fn bad_options_are_refused_with_a_reason() {
    for (args, want) in [
        (&["-l", "0"][..], "a batch is 1..=64"),
        (&["-l", "65"][..], "a batch is 1..=64"),
        (&["-l", "x"][..], "not a valid list"),
        (&["-m", "bf-last"][..], "does not offer"),
        (&["-Q", "0"][..], "not a valid list"),
        (&["-s", "4096"][..], "inline payloads are at most"),
        (&["--provider", "verbs"][..], "needs -d DEV"),
        (&["--provider", "sim", "-d", "rxe0"][..], "drop -d"),
        (
            &["--provider", "sim", "--instructions"][..],
            "plain memory only",
        ),
        (&["--bogus"][..], "unknown option"),
        (&["--pcie", "gen9x8"][..], "--pcie: PCIe link"),
        (&["--pcie", "gen3x8,mps=100"][..], "power of two"),
        (&["--runs", "0"][..], "at least one run"),
        (
            &["-l", "16", "--window", "8"][..],
            "at least the largest batch",
        ),
        (
            &["-l", "1", "-Q", "16", "--window", "8"][..],
            "signaling period",
        ),
        (
            &["--provider", "sim", "--window", "512"][..],
            "at most the send queue depth",
        ),
    ] {
        let (code, _, err) = batching(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

/// Every point carries the PCIe transactions per message: BlueFlame vs doorbell, inline vs
/// gathered, signaling every 1 and 16, batch 1 and 64, counted by hand (64 requests per
/// sample: signaling every 16 signals 4 of them).
fn pcie_counts(provider: &str) {
    let d = scratch(&format!("pcie-{provider}"));
    let js = d.join("p.json");
    let (code, out, err) = batching(&[
        "--provider",
        provider,
        "-l",
        "1,64",
        "-m",
        "db8,bf-single",
        "-Q",
        "1,16",
        "-p",
        "inline,sge",
        "-s",
        "8",
        "-r",
        "1",
        "-w",
        "0",
        "-n",
        "64",
        "--json",
        js.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("Link[Mpps]") && out.contains("bound"), "{out}");
    let v = parse(&std::fs::read_to_string(&js).unwrap()).expect("valid JSON");
    let Some(Value::Arr(configs)) = v.get("configs") else {
        panic!("no configs: {v:?}");
    };
    assert_eq!(configs.len(), 8);
    for c in configs {
        let mode = c.get("mode").and_then(Value::as_str).unwrap();
        let signal = c.get("signal").and_then(Value::as_str).unwrap();
        let payload = c.get("payload").and_then(Value::as_str).unwrap();
        let Some(Value::Arr(points)) = c.get("points") else {
            panic!("no points: {c:?}");
        };
        for p in points {
            let b = p.get("batch").and_then(Value::as_u64).unwrap();
            let pcie = p.get("pcie").expect("pcie counts on every point");
            let per = pcie.get("per_message").expect("per_message");
            let f = |k: &str| per.get(k).and_then(Value::as_f64).unwrap();
            let ctx = format!("{mode}/{signal}/{payload}/b{b}: {per:?}");
            // libmlx5's rule puts a single WQE of ds 3 (ctrl, raddr, data) in BlueFlame.
            let bf = mode == "bf-single" && b == 1;
            let (db, bfc, reads) = if bf {
                (0.0, 1.0, 0.0)
            } else {
                (1.0 / b as f64, 0.0, 1.0 / b as f64)
            };
            assert_eq!(f("mmio_doorbell_8B"), db, "{ctx}");
            assert_eq!(f("mmio_blueflame_64B"), bfc, "{ctx}");
            assert_eq!(f("wqe_dma_reads"), reads, "{ctx}");
            assert_eq!(
                f("wqe_dma_read_wqebbs"),
                if bf { 0.0 } else { 1.0 },
                "{ctx}"
            );
            assert_eq!(f("dbrec_updates"), 1.0 / b as f64, "{ctx}");
            let gathered = if payload == "sge" { 1.0 } else { 0.0 };
            assert_eq!(f("payload_dma_reads"), gathered, "{ctx}");
            assert_eq!(f("payload_dma_read_bytes"), 8.0 * gathered, "{ctx}");
            let cqes = if signal == "1" { 1.0 } else { 4.0 / 64.0 };
            assert_eq!(f("cqe_dma_writes"), cqes, "{ctx}");
            if provider == "sim" {
                // The sim device wrote as many CQEs as the replay counted.
                let dev = p.get("device_cqes_per_wqe").and_then(Value::as_f64);
                assert_eq!(dev, Some(cqes), "{ctx}");
            }
            assert_eq!(f("responder_payload_writes"), 1.0, "{ctx}");
            assert_eq!(f("responder_payload_bytes"), 8.0, "{ctx}");
            let link = pcie.get("link").expect("link");
            let lf = |k: &str| link.get(k).and_then(Value::as_f64).unwrap();
            if bf && signal == "1" && payload == "inline" {
                // One 64-B BlueFlame write down, one 64-B CQE write up: 24 + 64 each way.
                assert_eq!(
                    (lf("requester_bytes_down"), lf("requester_bytes_up")),
                    (88.0, 88.0)
                );
                let mpps = 8e9 * 8.0 * 128.0 / 130.0 / 8.0 / 88.0 / 1e6;
                assert!((lf("link_mpps") - mpps).abs() < 1e-6, "{link:?}");
            }
            let bound = pcie.get("bound").and_then(Value::as_str).unwrap();
            assert!(["cpu", "sim", "link"].contains(&bound), "{bound}");
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn plain_memory_points_carry_pcie_counts() {
    pcie_counts("plain");
}

#[test]
fn sim_points_carry_pcie_counts() {
    pcie_counts("sim");
}

/// `--explain` with two signaling periods prints the least-squares per-completion cost with
/// its interval and the residuals (it used to print a clamped "0.00 ns per completion").
#[test]
fn explain_prints_a_fitted_per_completion_cost_with_an_interval() {
    for q in ["1,2", "1,4"] {
        let (code, out, err) = batching(&[
            "-m",
            "db8",
            "-Q",
            q,
            "-l",
            "1,4,16",
            "-r",
            "3",
            "-w",
            "1",
            "-n",
            "64",
            "--explain",
        ]);
        assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
        let fit = out
            .lines()
            .find(|l| l.contains("Least-squares fit of t = w + d/b + c·q over the 6 points"))
            .unwrap_or_else(|| panic!("no fit line:\n{out}"));
        assert!(
            fit.contains("ns per doorbell") && fit.contains("(95 % intervals)"),
            "{fit}"
        );
        assert!(out.contains("Residuals: rms"), "{out}");
        let line = out
            .lines()
            .find(|l| l.contains("Completion handling:"))
            .unwrap_or_else(|| panic!("no completion line:\n{out}"));
        // "<c> ± <h> ns per completion polled": a number, then its interval.
        let after = line.split("Completion handling: ").nth(1).unwrap();
        let mut words = after.split_whitespace();
        let c: f64 = words.next().unwrap().parse().expect("a number");
        assert!(c.is_finite(), "{line}");
        assert_eq!(words.next(), Some("±"), "{line}");
        let h: f64 = words.next().unwrap().parse().expect("an interval");
        assert!(h >= 0.0, "{line}");
    }
}

/// The numbers an array of the JSON holds.
fn nums(v: Option<&Value>) -> Vec<f64> {
    match v {
        Some(Value::Arr(a)) => a.iter().map(|x| x.as_f64().expect("a number")).collect(),
        other => panic!("not an array: {other:?}"),
    }
}

/// `--runs 2 -r 3`: every point holds 6 raw samples, 2 run medians (each the median of its
/// 3 samples, in the order taken), a bootstrap interval around the median, a spread from
/// the run medians; the method names the pinned CPU (one this process may use) and the
/// runs. Run on the sim and on plain memory with 64-byte inline WRITEs (2 WQEBBs each: the
/// plain ring is sized in WQEBBs, not WQEs; it used to refuse them "queue full").
fn runs_keep_raw_samples(provider: &str, extra: &[&str]) {
    let d = scratch(&format!("runs-{provider}"));
    let js = d.join("r.json");
    let mut args = vec![
        "--provider",
        provider,
        "-l",
        "1,64",
        "-m",
        "db8",
        "-Q",
        "1",
        "-r",
        "3",
        "-w",
        "1",
        "--runs",
        "2",
        "--json",
    ];
    args.push(js.to_str().unwrap());
    args.extend_from_slice(extra);
    let (code, out, err) = batching(&args);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("2 run(s) of 3 samples per point"), "{out}");
    assert!(out.contains("run-spread"), "{out}");
    let v = parse(&std::fs::read_to_string(&js).unwrap()).expect("valid JSON");
    let m = v.get("method").expect("method");
    assert_eq!(m.get("runs").and_then(Value::as_u64), Some(2));
    assert_eq!(m.get("reps_per_run").and_then(Value::as_u64), Some(3));
    let cpu = m
        .get("pinned_cpu")
        .and_then(Value::as_u64)
        .expect("pinned by default");
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string();
    let in_list = allowed.split(',').any(|r| match r.split_once('-') {
        Some((a, b)) => (a.parse().unwrap()..=b.parse().unwrap()).contains(&cpu),
        None => r.parse::<u64>().unwrap() == cpu,
    });
    assert!(in_list, "CPU {cpu} not in {allowed}");
    let Some(Value::Arr(configs)) = v.get("configs") else {
        panic!("no configs: {v:?}");
    };
    // The library's rule: the sorted sample at round((n - 1) / 2) (the upper middle of an
    // even count).
    let median = |s: &[f64]| {
        let mut s = s.to_vec();
        s.sort_by(|a, b| a.total_cmp(b));
        s[((s.len() - 1) as f64 / 2.0).round() as usize]
    };
    let mut points = 0;
    for c in configs {
        let Some(Value::Arr(pts)) = c.get("points") else {
            panic!("no points: {c:?}");
        };
        for p in pts {
            points += 1;
            assert_eq!(p.get("samples").and_then(Value::as_u64), Some(6), "{p:?}");
            let raw = nums(p.get("raw_ns_per_wqe"));
            assert_eq!(raw.len(), 6, "{p:?}");
            let runs = nums(p.get("run_medians"));
            assert_eq!(runs, vec![median(&raw[..3]), median(&raw[3..])], "{p:?}");
            let spread = p.get("run_spread").and_then(Value::as_f64).unwrap();
            let (lo, hi) = (runs[0].min(runs[1]), runs[0].max(runs[1]));
            let want = hi / lo - 1.0;
            assert!((spread - want).abs() < 1e-9, "{spread} vs {want}");
            let ns = p.get("ns_per_wqe").unwrap();
            let med = ns.get("median").and_then(Value::as_f64).unwrap();
            assert_eq!(med, median(&raw), "{p:?}");
            let ci = nums(ns.get("median_ci95"));
            assert!(ci[0] <= med && med <= ci[1], "{ci:?} around {med}");
            let (min, max) = (
                raw.iter().copied().fold(f64::MAX, f64::min),
                raw.iter().copied().fold(0.0, f64::max),
            );
            assert!(min <= ci[0] && ci[1] <= max, "{ci:?} within {min}..{max}");
        }
    }
    assert_eq!(points, 2);
}

#[test]
fn plain_runs_keep_raw_samples_and_inline_64_fits() {
    runs_keep_raw_samples("plain", &["-p", "inline", "-s", "64", "-n", "1024"]);
}

#[test]
fn sim_runs_keep_raw_samples_with_the_same_count() {
    runs_keep_raw_samples("sim", &["-n", "128"]);
}

/// `--window W`: a steady pipeline on plain memory (the rig consumes the outstanding WQEs
/// when the next batch would pass W) and on the sim; every point measured, the method says so.
#[test]
fn window_runs_a_steady_pipeline() {
    for provider in ["plain", "sim"] {
        let (code, out, err) = batching(&[
            "--provider",
            provider,
            "-l",
            "1,8",
            "-m",
            "db8",
            "-Q",
            "1,4",
            "-r",
            "3",
            "-w",
            "1",
            "-n",
            "256",
            "--window",
            "16",
        ]);
        assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
        assert!(
            out.contains("steady pipeline, at most 16 WQEs outstanding"),
            "{out}"
        );
        let rows = out
            .lines()
            .filter(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.len() >= 9 && ["1", "8"].contains(&f[0]) && f[2].parse::<f64>().is_ok()
            })
            .count();
        assert_eq!(rows, 4, "{out}");
    }
}

/// `--unpin`: the JSON says the thread was not pinned.
#[test]
fn unpin_is_recorded() {
    let d = scratch("unpin");
    let js = d.join("u.json");
    let (code, out, err) = batching(&[
        "-l",
        "1",
        "-m",
        "db8",
        "-Q",
        "1",
        "-r",
        "2",
        "-w",
        "0",
        "-n",
        "64",
        "--unpin",
        "--json",
        js.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("not pinned"), "{out}");
    let v = parse(&std::fs::read_to_string(&js).unwrap()).expect("valid JSON");
    assert_eq!(
        v.get("method").unwrap().get("pinned_cpu"),
        Some(&Value::Null)
    );
}
