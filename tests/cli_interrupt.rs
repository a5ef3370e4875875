//! Ctrl-C (SIGINT) and SIGTERM in the middle of a sweep: `perf -a` and `bench batching` end
//! cleanly with what they measured, in the text and the result files, a note on stderr and
//! exit status 128 + the signal (130, 143).
//!
//! The signal is sent once the first result line is on stdout, so the sweep is under way;
//! the sweeps chosen take many seconds after that on any machine (23 sizes up to 8 MiB; 101
//! rounds), so the signal lands before their end.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_rdma-direct")
}

/// Run `args`, send `sig` once a stdout line satisfies `started`: (exit code, stdout, stderr).
fn interrupt(
    args: &[&str],
    sig: i32,
    started: impl Fn(&str) -> bool,
) -> (Option<i32>, String, String) {
    let mut child = Command::new(exe())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut err = child.stderr.take().expect("stderr");
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut text = String::new();
    let mut sent = false;
    loop {
        let mut l = String::new();
        if out.read_line(&mut l).unwrap_or(0) == 0 {
            break;
        }
        text.push_str(&l);
        if !sent && started(&l) {
            // SAFETY: kill(2) on the child's pid, which has not been waited for (so the pid
            // is still the child's).
            assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, sig) }, 0);
            sent = true;
        }
    }
    let st = child.wait().expect("wait");
    assert!(sent, "the run ended before it started: {text}");
    (st.code(), text, t_err.join().unwrap_or_default())
}

fn scratch(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "rdma-direct-interrupt-{}-{name}",
        std::process::id()
    ))
}

#[test]
fn ctrl_c_mid_perf_sweep_keeps_the_sizes_measured() {
    let json = scratch("lat.json");
    let svg = scratch("lat.svg");
    let (j, s) = (json.display().to_string(), svg.display().to_string());
    let args = ["perf", "write_lat", "-a", "--json", &j, "--svg", &s];
    let (code, text, err) = interrupt(&args, libc::SIGINT, |l| l.starts_with(" 2 "));
    assert_eq!(code, Some(130), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(' ') && l.as_bytes().get(1).is_some_and(u8::is_ascii_digit))
        .collect();
    assert!(!rows.is_empty() && rows.len() < 23, "{text}");
    assert!(
        err.contains(&format!(
            "rdma-direct perf write_lat: interrupted (SIGINT) after {} of 23 sizes",
            rows.len()
        )),
        "{err}"
    );
    // The file holds exactly the sizes printed, the SVG was drawn, the table is closed.
    let f = std::fs::read_to_string(&json).expect("the --json file");
    assert_eq!(f.matches("{\"bytes\": ").count(), rows.len(), "{f}");
    assert!(text.trim_end().ends_with("-----"), "{text}");
    let drawn = std::fs::read_to_string(&svg).expect("the --svg file");
    assert!(
        drawn.starts_with("<svg") || drawn.starts_with("<?xml"),
        "{drawn}"
    );
    let _ = std::fs::remove_file(&json);
    let _ = std::fs::remove_file(&svg);
}

#[test]
fn sigterm_mid_perf_sweep_exits_143() {
    let (code, _, err) = interrupt(&["perf", "write_lat", "-a"], libc::SIGTERM, |l| {
        l.starts_with(" 2 ")
    });
    assert_eq!(code, Some(143), "{err}");
    assert!(err.contains("interrupted (SIGTERM)"), "{err}");
}

#[test]
fn ctrl_c_mid_batching_sweep_keeps_the_samples() {
    let json = scratch("batching.json");
    let j = json.display().to_string();
    // The header goes out before the sweep (its last line names the figures), the table
    // after it, with the samples each point took.
    let args = ["bench", "batching", "-m", "db8", "-Q", "1", "--json", &j];
    let (code, text, err) = interrupt(&args, libc::SIGINT, |l| l.contains("not hardware figures"));
    assert_eq!(code, Some(130), "{err}");
    assert!(
        err.contains("rdma-direct bench batching: interrupted (SIGINT) after"),
        "{err}"
    );
    let rounds = err
        .split("after ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse::<u32>().ok())
        .unwrap_or_else(|| panic!("no round count: {err}"));
    assert!((1..101).contains(&rounds), "{err}");
    assert!(
        text.contains(&format!("| {rounds} samples of")),
        "the table does not say {rounds} samples: {text}"
    );
    assert!(text.contains("\n 2 "), "no table: {text}");
    let f = std::fs::read_to_string(&json).expect("the --json file");
    assert!(f.contains("\"batch\":2,"), "{f}");
    assert!(f.contains(&format!("\"samples\":{rounds},")), "{f}");
    let _ = std::fs::remove_file(&json);
}
