//! How a scenario run is set up and what it returns: [`RunOpts`] (the `[tag]` lines that
//! apply, GID index, port, poll and settle bounds, keep-going) with [`tags_for`], the
//! [`Report`] of a scenario that passed, and the [`Failure`] (every [`Mismatch`] with its
//! line) or [`RunError`] of one that did not. Plain data: nothing here touches a device
//! except [`RunOpts::for_provider`], which reads the device's default GID index.

use std::fmt;

use crate::providers::{Provider, ProviderKind};

use super::ParseError;

/// How to run scenarios.
#[derive(Clone, Debug)]
pub struct RunOpts {
    /// What the provider is, as `[tag]` lines name it ([`RunOpts::for_provider`]): a line
    /// tagged `[t]` applies when `t` is in this list (`[!t]`: when it is not; `[a,b]`: both).
    pub tags: Vec<String>,
    /// GID index for the loopback connections.
    pub gid_index: u8,
    /// Port.
    pub port: u8,
    /// How long one `expect` group may wait for its completions.
    pub poll_timeout: std::time::Duration,
    /// How long the runner watches for extra completions after the last step.
    pub settle: std::time::Duration,
    /// Record a completion that arrived with wrong fields and go on, so one run reports
    /// every such mismatch (see the module doc).
    pub keep_going: bool,
}

impl RunOpts {
    /// Defaults for a provider kind on device `device`: the tags [`tags_for`] gives, GID
    /// index 0, port 1, 10 s per expect group, 50 ms settle, stop at the first mismatch.
    pub fn new(kind: ProviderKind, device: &str) -> RunOpts {
        RunOpts {
            tags: tags_for(kind, device),
            gid_index: 0,
            port: 1,
            poll_timeout: std::time::Duration::from_secs(10),
            settle: std::time::Duration::from_millis(50),
            keep_going: false,
        }
    }

    /// Defaults for the opened provider `p` ([`RunOpts::new`]), with the GID index a
    /// loopback connection on port 1 goes through: on a device, its default
    /// ([`Context::default_gid_index`](crate::control::Context::default_gid_index), the
    /// first RoCE v2 IPv4 entry); on the software device, 0.
    pub fn for_provider<P: Provider>(p: &P) -> crate::Result<RunOpts> {
        let mut o = RunOpts::new(p.kind(), p.device_name());
        if p.kind() != ProviderKind::Sim {
            let ctx = crate::control::Context::open(p.device_name())?;
            o.gid_index = ctx.default_gid_index(o.port)?;
        }
        Ok(o)
    }

    /// True when a line tagged `variant` applies (untagged lines always do).
    pub fn applies(&self, variant: &Option<String>) -> bool {
        variant.as_deref().is_none_or(|v| {
            v.split(',').all(|t| match t.strip_prefix('!') {
                Some(not) => !self.tags.iter().any(|x| x == not),
                None => self.tags.iter().any(|x| x == t),
            })
        })
    }
}

/// The tags a provider answers to: the software device `sim` and `mlx5` (it models mlx5)
/// and its name; the mlx5 provider `mlx5` and the device name; the verbs provider `verbs`,
/// the device name, and `rxe` on an rxe device (name `rxe*`) or `mlx5` on an mlx5 one
/// (`mlx5*`: the completions are the NIC's, whichever library polls them).
pub fn tags_for(kind: ProviderKind, device: &str) -> Vec<String> {
    let mut t: Vec<&str> = match kind {
        ProviderKind::Sim => vec!["sim", "mlx5"],
        ProviderKind::Mlx5 => vec!["mlx5"],
        ProviderKind::Verbs if device.starts_with("rxe") => vec!["verbs", "rxe"],
        ProviderKind::Verbs if device.starts_with("mlx5") => vec!["verbs", "mlx5"],
        ProviderKind::Verbs => vec!["verbs"],
    };
    if !device.is_empty() && !t.contains(&device) {
        t.push(device);
    }
    t.into_iter().map(str::to_string).collect()
}

/// A scenario that passed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// Scenario name.
    pub name: String,
    /// Requests posted (and accepted).
    pub posted: u32,
    /// Requests rejected as the file expected.
    pub rejected: u32,
    /// Completions checked.
    pub completions: u32,
    /// Bytes compared.
    pub bytes_checked: u64,
    /// Wall time.
    pub elapsed: std::time::Duration,
}

/// Most differing ranges reported per buffer (the count of differing bytes is always
/// exact).
pub const MAX_RANGES: usize = 16;

/// One thing that did not go as the file says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// Line of the step or `final` edit concerned (0: setup or the end checks).
    pub line: usize,
    /// The step, e.g. `expect`, `post`, `final buffers`.
    pub step: String,
    /// Expected vs got.
    pub detail: String,
}

/// A scenario that failed: every mismatch found, in the order found (at least one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// Scenario name.
    pub scenario: String,
    /// File.
    pub file: String,
    /// What went wrong, where.
    pub mismatches: Vec<Mismatch>,
}

impl Failure {
    /// The first mismatch's line (0 when there is none).
    pub fn line(&self) -> usize {
        self.mismatches.first().map_or(0, |m| m.line)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.mismatches.len();
        write!(f, "scenario '{}' FAILED", self.scenario)?;
        if n > 1 {
            write!(f, " ({n} mismatches)")?;
        }
        for m in &self.mismatches {
            write!(f, "\n{}:{} ({}):\n{}", self.file, m.line, m.step, m.detail)?;
        }
        Ok(())
    }
}

impl std::error::Error for Failure {}

/// Why [`run_file`](super::run_file) did not pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunError {
    /// The file could not be read or parsed.
    Parse(ParseError),
    /// The scenario ran and something did not match.
    Failed(Failure),
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Parse(e) => e.fmt(f),
            RunError::Failed(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for RunError {}
