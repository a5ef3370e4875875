//! The library is what an embedding program compiles: it parses no command line and prints
//! nothing (it returns results and errors; the `rdma-direct` binary in `src/bin/` parses,
//! prints and exits). This scans the library's sources, `src/` without `src/bin/` and
//! `providers/`, up to each file's first `#[cfg(test)]`.

mod common;

use std::path::{Path, PathBuf};

/// What only a tool does.
const FORBIDDEN: [&str; 8] = [
    "println!",
    "print!(",
    "eprintln!",
    "eprint!(",
    "std::env::args",
    "std::process::exit",
    "fn main(",
    "std::io::stdout",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.unwrap().path();
        if p.is_dir() {
            if !p.ends_with("src/bin") {
                rust_files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `(file, line number, line)` of every forbidden use in `text` before `#[cfg(test)]`.
fn offences(file: &str, text: &str) -> Vec<String> {
    text.lines()
        .take_while(|l| l.trim() != "#[cfg(test)]")
        .enumerate()
        .filter(|(_, l)| {
            let code = l.split("//").next().unwrap_or("");
            FORBIDDEN.iter().any(|f| code.contains(f))
        })
        .map(|(i, l)| format!("{file}:{}: {}", i + 1, l.trim()))
        .collect()
}

#[test]
fn the_library_neither_parses_arguments_nor_prints() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("providers"), &mut files);
    assert!(files.len() > 20, "found only {} files", files.len());
    let found: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            offences(&f.strip_prefix(root).unwrap().display().to_string(), &text)
        })
        .collect();
    assert!(
        found.is_empty(),
        "tool code in the library (it belongs in src/bin/):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scan_sees_what_it_forbids() {
    let text = "fn f() {\n    println!(\"x\");\n    // eprintln! in a comment is fine\n}\n#[cfg(test)]\nmod tests { fn t() { println!(); } }\n";
    assert_eq!(offences("a.rs", text), ["a.rs:2: println!(\"x\");"]);
    assert!(offences("b.rs", "let a = std::env::args();").len() == 1);
}

/// Commands other than ours whose flags a library text may name (`numactl --membind`,
/// `ulimit -l`, perftest's own `-R`): advice about another tool, not our command line.
const OTHER_TOOLS: [&str; 10] = [
    "numactl",
    "taskset",
    "cpupower",
    "ulimit",
    "mount",
    "swapoff",
    "ibv_devinfo",
    "perftest",
    "modprobe",
    "rdma link",
];

/// The string-literal bytes of `src` (comments and code blanked to spaces, newlines kept).
fn literals(src: &str) -> String {
    let keep = common::strip_rust(src, true);
    let blank = common::strip_rust(src, false);
    let b: Vec<u8> = keep
        .bytes()
        .zip(blank.bytes())
        .map(|(k, c)| if k == c && k != b'\n' { b' ' } else { k })
        .collect();
    String::from_utf8_lossy(&b).into_owned()
}

/// Byte offsets in `lit` (literal text of one line) of what reads as a command-line flag:
/// `--word`, or `-X` (one letter, then no letter or digit), after a space, `(`, `/` or a
/// backtick.
fn flags(lit: &str) -> Vec<usize> {
    let b = lit.as_bytes();
    (0..b.len())
        .filter(|&i| {
            let after_gap = i == 0 || matches!(b[i - 1], b' ' | b'(' | b'/' | b'`');
            let long =
                b[i..].starts_with(b"--") && b.get(i + 2).is_some_and(u8::is_ascii_lowercase);
            let short = b[i] == b'-'
                && b.get(i + 1).is_some_and(u8::is_ascii_alphabetic)
                && !b
                    .get(i + 2)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_');
            after_gap && (long || short)
        })
        .collect()
}

/// `(file, line number, line)` of every line of `text` before `#[cfg(test)]` that names the
/// stand-in (`standin`, anywhere), or whose string literals name a command-line flag (one not
/// preceded on that line by another tool's name, [`OTHER_TOOLS`]) or a path under `tests/`.
fn tool_words(file: &str, text: &str) -> Vec<String> {
    let lits = literals(text);
    text.lines()
        .zip(lits.lines())
        .take_while(|(l, _)| l.trim() != "#[cfg(test)]")
        .enumerate()
        .filter(|(_, (l, lit))| {
            let lower = l.to_ascii_lowercase();
            // The word, not inside another (`outstanding`, `understanding`).
            let standin = lower
                .match_indices("standin")
                .any(|(i, _)| !lower[..i].ends_with(|c: char| c.is_ascii_alphabetic()))
                || lower.contains("stand-in");
            let flag = flags(lit)
                .into_iter()
                .any(|at| !OTHER_TOOLS.iter().any(|t| lit[..at].contains(t)));
            standin || flag || lit.contains("tests/")
        })
        .map(|(i, (l, _))| format!("{file}:{}: {}", i + 1, l.trim()))
        .collect()
}

/// The library knows neither the test stand-in nor the tool's flags nor the repository's test
/// paths: the core floor (`src/core`) never names the stand-in, and no text of the library
/// (`src/` without `src/bin/`, `providers/`) names a CLI flag or a path under `tests/` (a
/// library text names the library's field or function; the CLI maps it to its flag where the
/// user needs one). The sim's `standin.rs` is the stand-in's other half and is exempt from the
/// stand-in and test-path rules.
#[test]
fn the_library_names_neither_the_stand_in_nor_a_cli_flag() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("providers"), &mut files);
    assert!(files.len() > 100, "found only {} files", files.len());
    let found: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let name = f.strip_prefix(root).unwrap().display().to_string();
            let text = std::fs::read_to_string(f).unwrap();
            let mut v = tool_words(&name, &text);
            if !name.starts_with("src/core/") {
                // Above the core the stand-in may be named (the sim attaches to it), not a flag.
                v.retain(|l| {
                    !l.to_ascii_lowercase().contains("standin")
                        && !l.to_ascii_lowercase().contains("stand-in")
                });
            }
            if name == "providers/sim/standin.rs" {
                v.retain(|l| !l.contains("tests/"));
            }
            v
        })
        .collect();
    assert!(
        found.is_empty(),
        "tool words in the library:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_tool_word_scan_sees_what_it_forbids() {
    let text = "let n = outstanding; // understanding\nfn standin_attach() {}\n\
                Err(\"run without --hw-ts\")\n// a --flag in a comment\nlet x = a --b;\n\
                bad(\"post list (-l) must be\")\nok(\"non-zero, -1, `numactl --membind=0`\")\n\
                bad(\"a line \\\n  then -Q 4\")\nbad(\"see tests/guest/run\")\nok(\"ulimit -l\");\n";
    assert_eq!(
        tool_words("a.rs", text),
        [
            "a.rs:2: fn standin_attach() {}",
            "a.rs:3: Err(\"run without --hw-ts\")",
            "a.rs:6: bad(\"post list (-l) must be\")",
            "a.rs:9: then -Q 4\")",
            "a.rs:10: bad(\"see tests/guest/run\")",
        ]
    );
}
