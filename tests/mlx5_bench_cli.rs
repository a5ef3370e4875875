//! `rdma-direct bench post|poll` prints a perftest-style table and refuses bad options with
//! a clear message (exit 2), never a panic.

use std::process::Command;

/// The binary cargo built; elsewhere (the rxe guest) `RDMA_DIRECT_BIN` or `rdma-direct` on
/// PATH.
fn exe() -> String {
    let built = env!("CARGO_BIN_EXE_rdma-direct");
    if std::path::Path::new(built).exists() {
        return built.to_string();
    }
    std::env::var("RDMA_DIRECT_BIN").unwrap_or_else(|_| "rdma-direct".to_string())
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(exe())
        .arg("bench")
        .args(args)
        .output()
        .expect("run rdma-direct");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn data_row(stdout: &str) -> Vec<String> {
    let lines: Vec<&str> = stdout.lines().collect();
    let h = lines
        .iter()
        .position(|l| l.trim_start().starts_with("#bytes"))
        .expect("header row");
    lines[h + 1]
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

#[test]
fn post_table_has_perftest_columns_and_the_requested_counts() {
    let (code, out, err) = run(&["post", "-s", "16", "-n", "2000", "-l", "8"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("plain memory, not hardware"), "{out}");
    for col in [
        "t_min[nsec]",
        "t_max[nsec]",
        "t_typical[nsec]",
        "t_avg[nsec]",
        "t_stdev[nsec]",
        "99% percentile[nsec]",
        "99.9% percentile[nsec]",
        "MsgRate[Mpps]",
    ] {
        assert!(out.contains(col), "missing {col}: {out}");
    }
    let row = data_row(&out);
    assert_eq!(row[0], "16");
    assert_eq!(row[1], "2000");
    let t: Vec<f64> = row[2..].iter().map(|v| v.parse().unwrap()).collect();
    assert!(
        t[0] <= t[2] && t[2] <= t[1].max(t[2]),
        "min <= typical: {row:?}"
    );
}

/// Every cell starts where its title starts (the perf tables' rule: a title's width, two
/// spaces between cells).
#[test]
fn post_and_poll_rows_line_up_under_their_titles() {
    for which in ["post", "poll"] {
        let (code, out, err) = run(&[which, "-n", "1000"]);
        assert_eq!(code, 0, "{err}");
        let lines: Vec<&str> = out.lines().collect();
        let h = lines
            .iter()
            .position(|l| l.starts_with(" #bytes"))
            .expect("header row");
        let starts = |l: &str| -> Vec<usize> {
            let b = l.as_bytes();
            (1..b.len())
                .filter(|&i| b[i] != b' ' && b[i - 1] == b' ' && (i < 2 || b[i - 2] == b' '))
                .collect()
        };
        let (head, row) = (lines[h], lines[h + 1]);
        assert_eq!(starts(head), starts(row), "{which}:\n{head}\n{row}");
        assert_eq!(starts(head).len(), 10, "{which}: {head}");
        assert!(
            !head.ends_with(' ') && !row.ends_with(' '),
            "{which}: trailing blanks"
        );
    }
}

#[test]
fn poll_and_every_op_run() {
    let (code, out, err) = run(&["poll", "-n", "3000", "-l", "4"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(data_row(&out)[1], "3000");
    for op in [
        "write",
        "send",
        "send_inline",
        "read",
        "fetch_add",
        "cmp_swap",
    ] {
        let (code, _, err) = run(&["post", "-o", op, "-n", "500", "--bf"]);
        assert_eq!(code, 0, "{op}: {err}");
    }
}

#[test]
fn bad_options_are_refused_clearly() {
    for (args, msg) in [
        (
            &["post", "-s", "300"][..],
            "inline payloads are at most 256 bytes",
        ),
        (&["post", "-l", "0"][..], "-l 0: must be 1..=64"),
        (&["post", "-o", "nope"][..], "unknown op 'nope'"),
        (&["post", "-n"][..], "-n needs a value"),
        (&["post", "-n", "x"][..], "'x' is not a number"),
        (&["frobnicate"][..], "unknown benchmark 'frobnicate'"),
    ] {
        let (code, _, err) = run(args);
        assert_eq!(code, 2, "{args:?}");
        assert!(err.contains(msg), "{args:?}: {err}");
    }
}

#[test]
fn json_goes_to_its_file_one_object_per_line_and_not_to_stdout() {
    let path = std::env::temp_dir().join(format!("rdma-direct-bench-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let p = path.to_str().unwrap();
    let (code, out, err) = run(&["post", "-n", "500", "--json", p]);
    assert_eq!(code, 0, "{err}");
    let (code, out2, err) = run(&["poll", "-n", "500", "-l", "1", "--json", p]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains('{') && !out2.contains('{'), "{out}{out2}");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].starts_with("{\"bench\":\"post\"") && lines[0].ends_with('}'));
    assert!(lines[0].contains("\"iters\":500") && lines[0].contains("\"t_typical_ns\":"));
    assert!(lines[1].starts_with("{\"bench\":\"poll\"") && lines[1].contains("\"batch\":1"));
    let _ = std::fs::remove_file(&path);
    // An unwritable path is a clear error naming the option.
    let (code, _, err) = run(&["post", "-n", "10", "--json", "/nonexistent-dir/x.json"]);
    assert_eq!(code, 1);
    assert!(err.contains("--json /nonexistent-dir/x.json"), "{err}");
}

/// The value of `"key":` in a one-line JSON object (numbers only).
fn json_num(line: &str, key: &str) -> u64 {
    let k = format!("\"{key}\":");
    let at = line
        .find(&k)
        .unwrap_or_else(|| panic!("no {key} in {line}"))
        + k.len();
    line[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{key} is not a count in {line}"))
}

#[test]
fn every_sample_times_many_operations_not_one() {
    // A 3 ns post timed one per clock read would measure the clock: each sample (the
    // operations between two clock reads, as the bench counted them) holds at least 64.
    let path =
        std::env::temp_dir().join(format!("rdma-direct-bench-ops-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let p = path.to_str().unwrap();
    // (args, samples, operations per sample)
    let cases: [(&[&str], u64, u64); 5] = [
        (&["post", "-n", "640", "-l", "1"], 10, 64),
        (&["post", "-n", "960", "-l", "48"], 10, 96),
        (
            &["post", "-n", "1280", "-l", "1", "--per-sample", "128"],
            10,
            128,
        ),
        (&["poll", "-n", "640", "-l", "1"], 10, 64),
        (&["poll", "-n", "640", "-l", "16"], 10, 64),
    ];
    for (args, _, _) in cases {
        let mut a = args.to_vec();
        a.extend(["--json", p]);
        let (code, _, err) = run(&a);
        assert_eq!(code, 0, "{args:?}: {err}");
    }
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), cases.len(), "{text}");
    for ((args, samples, per), line) in cases.iter().zip(&lines) {
        assert_eq!(json_num(line, "samples"), *samples, "{args:?}: {line}");
        assert_eq!(json_num(line, "ops_per_sample"), *per, "{args:?}: {line}");
        assert_eq!(
            json_num(line, "min_ops_per_sample"),
            *per,
            "{args:?}: {line}"
        );
    }
    let _ = std::fs::remove_file(&path);
    let (code, _, err) = run(&["post", "--per-sample", "1"]);
    assert_eq!(code, 2);
    assert!(err.contains("--per-sample 1: must be 64..=512"), "{err}");
}
