//! Finding and reading scenario files: a path names a file or a directory of `*.scn`
//! files; every error is a [`ParseError`] naming the file (and the line, for the parser's
//! errors). Reading is all this module does; [`run_file`] hands the parsed scenario to the
//! runner.

use std::path::{Path, PathBuf};

use super::parse::parse;
use super::run::run_scenario;
use super::{ParseError, Report, RunError, RunOpts, Scenario};
use crate::providers::Provider;

/// Parse the scenario file at `path` and run it on `p`.
pub fn run_file<P: Provider>(
    p: &mut P,
    path: impl AsRef<Path>,
    opts: &RunOpts,
) -> Result<Report, RunError> {
    let sc = load_file(path).map_err(RunError::Parse)?;
    run_scenario(p, &sc, opts).map_err(RunError::Failed)
}

/// The scenario files `paths` name: a file as itself, a directory as its `*.scn` files
/// (sorted by name), in the order given. A path that is neither is an error naming it.
pub fn files<I>(paths: I) -> Result<Vec<PathBuf>, ParseError>
where
    I: IntoIterator,
    I::Item: AsRef<Path>,
{
    let mut out = Vec::new();
    for p in paths {
        let p = p.as_ref();
        if p.is_dir() {
            out.extend(dir_files(p)?);
        } else if p.is_file() {
            out.push(p.to_path_buf());
        } else {
            return Err(ParseError {
                file: p.display().to_string(),
                line: 0,
                msg: "no such file or directory".into(),
            });
        }
    }
    Ok(out)
}

/// Parse every scenario `paths` name ([`files`]). Stops at the first file that does not
/// parse.
pub fn load_paths<I>(paths: I) -> Result<Vec<Scenario>, ParseError>
where
    I: IntoIterator,
    I::Item: AsRef<Path>,
{
    files(paths)?.iter().map(load_file).collect()
}

/// The `*.scn` files of `dir`, sorted by name.
fn dir_files(dir: &Path) -> Result<Vec<PathBuf>, ParseError> {
    let rd = std::fs::read_dir(dir).map_err(|e| ParseError {
        file: dir.display().to_string(),
        line: 0,
        msg: format!("cannot read directory: {e}"),
    })?;
    let mut paths = Vec::new();
    for ent in rd {
        let ent = ent.map_err(|e| ParseError {
            file: dir.display().to_string(),
            line: 0,
            msg: format!("cannot read directory entry: {e}"),
        })?;
        let p = ent.path();
        if p.extension().is_some_and(|e| e == "scn") {
            paths.push(p);
        }
    }
    paths.sort();
    Ok(paths)
}

/// Parse every `*.scn` file of `dir`, sorted by file name.
pub fn load_dir(dir: impl AsRef<Path>) -> Result<Vec<Scenario>, ParseError> {
    dir_files(dir.as_ref())?.iter().map(load_file).collect()
}

/// Parse one scenario file.
pub fn load_file(path: impl AsRef<Path>) -> Result<Scenario, ParseError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|e| ParseError {
        file: path.display().to_string(),
        line: 0,
        msg: format!("cannot read: {e}"),
    })?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    parse(&path.display().to_string(), &stem, &text)
}
