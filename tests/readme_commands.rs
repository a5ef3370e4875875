//! The command lines of README.md and benches/README.md that need no device, run: a claim
//! such as "`info` lists the software device `sim0`" cannot drift from the code.
//!
//! Extraction ([`command_lines`]): every code span and indented code line that starts with
//! `rdma-direct `, `taskset -c LIST target/release/rdma-direct ` or `cargo run [--release] -- `
//! (run as `rdma-direct ...`). A line that
//! names a device other than `sim0` (`-d DEV`, `-d mlx5_0`, ...) needs hardware and is left
//! out (printed as "skipped"); so is a line whose comment says it needs valgrind when
//! valgrind is not installed (or the test is not x86_64 code), and `cargo run --example` lines (tests/examples.rs runs the
//! examples). A synopsis (`[-s SIZE]`, `<test>`, `post|poll`) is run in its minimal form, once
//! per alternative, after checking that every option it shows is in the command's `--help`.
//!
//! Running ([`shorten`]): files the line writes go to a scratch directory (never over the
//! repository's plots), `-n` of perf and pingpong is capped at 20, jitter spins for 50 ms
//! (`-D 0.05`) and a batching sweep gets few samples. Each line must exit 0 (`doctor` 1 on a host without RDMA, where its device
//! check fails) without a panic.

use std::path::{Path, PathBuf};
use std::process::Command;

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_rdma-direct")
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Code spans (`` `...` ``, table cells' `\|` unescaped) and indented code lines of `text`.
fn code_of(text: &str) -> Vec<String> {
    let mut v = Vec::new();
    for line in text.lines() {
        if let Some(code) = line.strip_prefix("    ") {
            v.push(code.trim().to_string());
            continue;
        }
        let mut parts = line.split('`');
        parts.next();
        while let Some(span) = parts.next() {
            v.push(span.replace("\\|", "|"));
            parts.next();
        }
    }
    v
}

/// The tool's command lines of `text`, as arguments after `rdma-direct` (comments dropped),
/// each with the reason it is not run, if any.
fn command_lines(text: &str) -> Vec<(Vec<String>, Option<String>)> {
    let mut v = Vec::new();
    for code in code_of(text) {
        let (cmd, comment) = match code.split_once('#') {
            Some((c, k)) if c.ends_with(' ') => (c.trim(), k.trim()),
            _ => (code.trim(), ""),
        };
        // `taskset -c LIST target/release/rdma-direct ...` runs as the tool alone (the pinning
        // is for the figure, and the CPUs it names may not exist where the test runs).
        let cmd = match cmd.strip_prefix("taskset -c ") {
            Some(r) => r
                .split_once(' ')
                .map_or(cmd, |(_, tool)| tool)
                .trim_start_matches("target/release/"),
            None => cmd,
        };
        let rest = if let Some(r) = cmd.strip_prefix("rdma-direct ") {
            r
        } else if let Some(r) = cmd
            .strip_prefix("cargo run --release -- ")
            .or_else(|| cmd.strip_prefix("cargo run -- "))
        {
            r
        } else {
            continue;
        };
        let args: Vec<String> = rest.split_whitespace().map(String::from).collect();
        let device = args
            .windows(2)
            .find(|w| w[0] == "-d" && w[1] != "sim0")
            .map(|w| w[1].clone());
        let skip = if let Some(d) = device {
            Some(format!("needs the device {d}"))
        } else if comment.contains("valgrind")
            && !(on_path("valgrind") && cfg!(target_arch = "x86_64"))
        {
            // valgrind is installed for x86_64 only; under qemu-aarch64 it cannot run this
            // binary.
            Some("needs valgrind (x86_64)".into())
        } else {
            None
        };
        v.push((args, skip));
    }
    v
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

/// A synopsis (`[...]`, `<...>`, `a|b`, `...`) in its minimal forms, one per alternative of
/// the subcommand; the options it shows. A concrete line is its own single form.
fn forms(args: &[String]) -> (Vec<Vec<String>>, Vec<String>) {
    let line = args.join(" ");
    if !line.contains(['[', '<', '|']) && !line.contains("...") {
        return (vec![args.to_vec()], Vec::new());
    }
    let options: Vec<String> = line
        .split(|c: char| c.is_whitespace() || matches!(c, '[' | ']' | '|'))
        .filter(|w| w.starts_with('-') && w.len() > 1)
        .map(String::from)
        .collect();
    // Drop the optional groups, then the placeholders.
    let mut minimal = String::new();
    let mut depth = 0;
    for c in line.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            c if depth == 0 => minimal.push(c),
            _ => {}
        }
    }
    let words: Vec<&str> = minimal.split_whitespace().filter(|w| *w != "...").collect();
    let mut out = Vec::new();
    let alternatives: Vec<&str> = words.get(1).map_or(vec![], |w| w.split('|').collect());
    for alt in if alternatives.is_empty() {
        vec![""]
    } else {
        alternatives
    } {
        let mut f: Vec<String> = Vec::new();
        for (k, w) in words.iter().enumerate() {
            let w = if k == 1 && !alt.is_empty() { alt } else { w };
            f.push(match w {
                "<test>" => "write_lat".into(),
                "A.json" | "B.json" => root()
                    .join("fixtures/perftest/ib_write_lat_rxe0_2.json")
                    .display()
                    .to_string(),
                w => w.to_string(),
            });
        }
        out.push(f);
    }
    (out, options)
}

/// The line as run: output files into `dir`, short runs.
fn shorten(form: &[String], dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    let mut it = form.iter();
    while let Some(a) = it.next() {
        v.push(a.clone());
        if matches!(a.as_str(), "--svg" | "--json") {
            let name = it
                .next()
                .map_or("out", |f| f.rsplit('/').next().unwrap_or(f));
            let name = if name == "OUT" { "out.svg" } else { name };
            v.push(dir.join(name).display().to_string());
        } else if a == "-n" && matches!(form[0].as_str(), "perf" | "pingpong") {
            let n: u32 = it.next().and_then(|n| n.parse().ok()).unwrap_or(20);
            v.push(n.min(20).to_string());
        } else if a == "-D" && form[0] == "jitter" {
            it.next();
            v.push("0.05".into());
        }
    }
    let has_n = v.iter().any(|a| a == "-n");
    match v.first().map(String::as_str) {
        Some("jitter") if !v.iter().any(|a| a == "-D") => v.extend(["-D".into(), "0.05".into()]),
        Some("perf" | "pingpong") if !has_n => v.extend(["-n".into(), "20".into()]),
        Some("bench") if v.get(1).map(String::as_str) == Some("batching") => {
            v.extend(["-r", "3", "-w", "1", "-n", "64"].map(String::from))
        }
        Some("bench") if !has_n && v.len() > 1 => v.extend(["-n".into(), "2000".into()]),
        _ => {}
    }
    v
}

/// What a line must exit with: 0, except `doctor` on a host without RDMA (its device check
/// fails) and `bench` named alone in prose (it asks which benchmark).
fn expected(form: &[String]) -> &'static [i32] {
    match form {
        [d, ..] if d == "doctor" => &[0, 1],
        [b] if b == "bench" => &[2],
        _ => &[0],
    }
}

fn run(args: &[String]) -> (Option<i32>, String, String) {
    let out = Command::new(exe()).args(args).output().expect("spawn");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn readme_command_lines_run_without_a_device() {
    let dir: PathBuf =
        std::env::temp_dir().join(format!("rdma-direct-readme-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let mut failures = Vec::new();
    let mut ran = 0;
    for file in ["README.md", "benches/README.md"] {
        let text = std::fs::read_to_string(root().join(file)).expect(file);
        for (args, skip) in command_lines(&text) {
            let line = args.join(" ");
            if let Some(why) = skip {
                println!("skipped: {file}: rdma-direct {line} ({why})");
                continue;
            }
            let (forms, options) = forms(&args);
            if !options.is_empty() {
                let cmd: Vec<String> = forms[0].iter().take(2).cloned().collect();
                let mut help_args = cmd.clone();
                if cmd.first().map(String::as_str) != Some("bench") {
                    help_args.truncate(1);
                }
                help_args.push("--help".into());
                let (_, help, _) = run(&help_args);
                for o in &options {
                    if !help.contains(o.as_str()) {
                        failures.push(format!(
                            "{file}: `rdma-direct {line}`: {o} is not in `rdma-direct {}`",
                            help_args.join(" ")
                        ));
                    }
                }
            }
            for form in forms {
                let args = shorten(&form, &dir);
                let t = std::time::Instant::now();
                let (code, out, err) = run(&args);
                println!("ran: rdma-direct {} ({:.1?})", args.join(" "), t.elapsed());
                ran += 1;
                let ok =
                    code.is_some_and(|c| expected(&form).contains(&c)) && !err.contains("panicked");
                if !ok {
                    failures.push(format!(
                        "{file}: `rdma-direct {line}` run as `{}`: status {code:?}\n{err}",
                        args.join(" ")
                    ));
                }
                // The claims the README makes of these lines.
                let claim = match form.first().map(String::as_str) {
                    Some("info" | "devices") => Some("sim0"),
                    Some("pingpong") => {
                        Some("provider: sim: software mlx5 device (sim0), not hardware\n")
                    }
                    _ => None,
                };
                if let Some(c) = claim.filter(|c| !out.contains(c)) {
                    failures.push(format!("{file}: `rdma-direct {line}`: no {c:?} in\n{out}"));
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(ran >= 15, "only {ran} command lines found");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn extraction_finds_spans_blocks_and_skips_devices() {
    let text = "see `rdma-direct info [-d DEV]` and\n\n    cargo run --release -- pingpong   # sim\n`taskset -c 0,1 target/release/rdma-direct pingpong -s 8`\n    rdma-direct perf write_lat -d mlx5_0 --loopback   # mlx5\n| `rdma-direct bench post\\|poll [-n N]` |\n";
    let got = command_lines(text);
    let lines: Vec<String> = got.iter().map(|(a, _)| a.join(" ")).collect();
    assert_eq!(
        lines,
        [
            "info [-d DEV]",
            "pingpong",
            "pingpong -s 8",
            "perf write_lat -d mlx5_0 --loopback",
            "bench post|poll [-n N]"
        ]
    );
    assert!(got[3].1.as_deref() == Some("needs the device mlx5_0"));
    assert!(got[0].1.is_none() && got[1].1.is_none() && got[2].1.is_none());
    let (f, o) = forms(&got[4].0);
    assert_eq!(f, vec![vec!["bench", "post"], vec!["bench", "poll"]]);
    assert_eq!(o, vec!["-n"]);
}
