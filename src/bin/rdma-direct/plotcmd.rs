//! `rdma-direct plot A.json B.json ... --svg FILE`: overlay result files as curves.
//!
//! Contract: every file is read with [`results::read_file`] (this tool's files and perftest's
//! `--out_json` files); all must be latency runs or all bandwidth runs, else the command
//! refuses and names one file of each kind. Files of the same tool, provider, device, test and
//! transport whose sizes do not overlap are joined into one curve (perftest leaves one size per
//! file); each other file is its own curve. Latency runs give one chart of the chosen metric
//! against message size (default `typical`: t_typical with a t_min..p99 band); bandwidth runs
//! give BW average and message rate against size (two panels), or the one chosen by
//! `--metric bw|rate` (the drawing is [`rdma_direct::report::results::chart`]'s, the same as
//! `perf --svg`'s).

use std::path::Path;

use rdma_direct::report::plot::YScale;
use rdma_direct::report::results::chart::{curves, svg, Metric};
use rdma_direct::report::results::{self, Rows};

const HELP: &str = "\
usage: rdma-direct plot FILE.json... --svg OUT.svg [--title T] [--metric M] [--y-scale S]

Draw the result files of `perf --json` runs, and perftest `--out_json` files, as curves
against message size (log2 axis) in one SVG; several files are overlaid, one line each.

  --svg OUT.svg      where to write the SVG (required)
  --title T          the chart title (default: test, tools, providers and devices)
  --metric M         latency files: typical (default: t_typical, shaded t_min..p99),
                     avg (t_avg, shaded +-t_stdev) or p99;
                     bandwidth files: bw (BW average) or rate (MsgRate);
                     default for bandwidth: both, as two charts
  --y-scale S        log (default: sizes span decades) or linear
  -h, --help         this text

perftest keeps only the last size in its --out_json file (it rewrites the file for every
size): run it once per size with --out_json_file=NAME and give all the files; files of the
same tool, provider, device and test join into one curve. Latency and bandwidth files cannot
be mixed in one plot.
";

/// `rdma-direct plot ...`. Returns the exit code (2 for a usage error, 1 when a file cannot be
/// read or written).
pub fn run(args: &[String]) -> i32 {
    let mut files = Vec::new();
    let mut out: Option<String> = None;
    let mut title: Option<String> = None;
    let mut metric = None;
    let mut scale = YScale::Log;
    let mut it = args.iter();
    let usage = |msg: String| crate::usage_error("plot", &msg);
    while let Some(a) = it.next() {
        match a.as_str() {
            "-h" | "--help" => {
                out!("{HELP}");
                return 0;
            }
            "--svg" | "--title" | "--metric" | "--y-scale" => {
                let Some(v) = it.next() else {
                    return usage(format!("{a} needs a value"));
                };
                match a.as_str() {
                    "--svg" => out = Some(v.clone()),
                    "--title" => title = Some(v.clone()),
                    "--y-scale" => match v.as_str() {
                        "log" => scale = YScale::Log,
                        "linear" => scale = YScale::Linear,
                        _ => return usage(format!("--y-scale {v}: expected log or linear")),
                    },
                    _ => match Metric::from_name(v) {
                        Some(m) => metric = Some(m),
                        None => {
                            return usage(format!(
                                "--metric {v}: expected typical, avg, p99, bw or rate"
                            ))
                        }
                    },
                }
            }
            s if s.starts_with('-') && s.len() > 1 => {
                return usage(format!("unknown option '{s}'"))
            }
            f => files.push(f.to_string()),
        }
    }
    let Some(out) = out else {
        return usage("--svg OUT.svg is required".into());
    };
    if files.is_empty() {
        return usage("no result files given".into());
    }
    if let Err(e) = crate::check_output("--svg", Path::new(&out)) {
        errln!("rdma-direct plot: {e}");
        return 1;
    }
    let mut runs = Vec::with_capacity(files.len());
    for f in &files {
        match results::read_file(Path::new(f)) {
            Ok(r) => runs.push(r),
            Err(e) => {
                errln!("rdma-direct plot: {e}");
                return 1;
            }
        }
    }
    if let Some(j) = runs
        .iter()
        .position(|r| r.rows.kind() != runs[0].rows.kind())
    {
        errln!(
            "rdma-direct plot: cannot mix latency and bandwidth results in one plot: {} is {} ({}), {} is {} ({}); plot them separately",
            files[0],
            runs[0].test,
            runs[0].rows.kind(),
            files[j],
            runs[j].test,
            runs[j].rows.kind()
        );
        return 2;
    }
    if let Some(m) = metric {
        if m.is_lat() != matches!(runs[0].rows, Rows::Lat(_)) {
            return usage(format!(
                "--metric {} does not apply to {} results (latency: typical, avg, p99; bandwidth: bw, rate)",
                m.name(),
                runs[0].rows.kind()
            ));
        }
    }
    let doc = match svg(&runs, metric, title.as_deref(), scale) {
        Ok(d) => d,
        Err(e) => {
            errln!("rdma-direct plot: {e}");
            return 2;
        }
    };
    if let Err(e) = std::fs::write(&out, doc) {
        errln!("rdma-direct plot: {out}: {e}");
        return 1;
    }
    let curves = curves(&runs);
    outln!(
        "wrote {out}: {curves} curve{} from {} file{}",
        if curves == 1 { "" } else { "s" },
        runs.len(),
        if runs.len() == 1 { "" } else { "s" }
    );
    0
}
