//! The library is what an embedding program compiles: it parses no command line and prints
//! nothing (it returns results and errors; the `rdma-direct` binary in `src/bin/` parses,
//! prints and exits). This scans the library's sources, `src/` without `src/bin/` and
//! `providers/`, up to each file's first `#[cfg(test)]`.

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

/// `(file, line number, line)` of every line of `text` before `#[cfg(test)]` that names the
/// stand-in or holds a string literal naming a command-line
/// flag (` --word`, as in "run without --hw-ts").
fn tool_words(file: &str, text: &str) -> Vec<String> {
    text.lines()
        .take_while(|l| l.trim() != "#[cfg(test)]")
        .enumerate()
        .filter(|(_, l)| {
            let lower = l.to_ascii_lowercase();
            // The word, not inside another (`outstanding`, `understanding`).
            let standin = lower
                .match_indices("standin")
                .any(|(i, _)| !lower[..i].ends_with(|c: char| c.is_ascii_alphabetic()))
                || lower.contains("stand-in");
            let code = l.split("//").next().unwrap_or("");
            let flag = code.contains('"')
                && code
                    .match_indices(" --")
                    .any(|(i, _)| code[i + 3..].starts_with(|c: char| c.is_ascii_lowercase()));
            standin || flag
        })
        .map(|(i, l)| format!("{file}:{}: {}", i + 1, l.trim()))
        .collect()
}

/// The data plane knows neither the test stand-in nor the tool's flags: the core floor
/// (`src/core`) never names the stand-in, and no error text of the core or the providers
/// names a CLI flag (a library text names the library's option). The sim's `standin.rs` is
/// the stand-in's other half and is exempt from the first rule only.
#[test]
fn the_data_plane_names_neither_the_stand_in_nor_a_cli_flag() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src/core"), &mut files);
    rust_files(&root.join("providers"), &mut files);
    let found: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let name = f.strip_prefix(root).unwrap().display().to_string();
            let text = std::fs::read_to_string(f).unwrap();
            let mut v = tool_words(&name, &text);
            if name.starts_with("providers/") {
                // The providers may name the stand-in (the sim attaches to it), not a flag.
                v.retain(|l| {
                    !l.to_ascii_lowercase().contains("standin")
                        && !l.to_ascii_lowercase().contains("stand-in")
                });
            }
            v
        })
        .collect();
    assert!(
        found.is_empty(),
        "tool words in the data plane:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_tool_word_scan_sees_what_it_forbids() {
    let text = "let n = outstanding; // understanding\nfn standin_attach() {}\nErr(\"run without --hw-ts\")\n// a --flag in a comment\nlet x = a --b;\n";
    assert_eq!(
        tool_words("a.rs", text),
        [
            "a.rs:2: fn standin_attach() {}",
            "a.rs:3: Err(\"run without --hw-ts\")"
        ]
    );
}
