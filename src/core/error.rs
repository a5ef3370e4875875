//! Control-path errors.
//!
//! Every error names what failed (the verb, or the step), the errno where there is one, and a
//! hint a person can act on, e.g.
//! `ibv_reg_mr: ENOMEM (Cannot allocate memory) — locked-memory limit is 64 KiB, see ulimit -l`.
//! Hot-path errors are not here: they are small `Copy` enums next to the queues
//! ([`crate::types::PostError`]).

use std::fmt;

/// Result alias for the control path.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A control-path error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A shared library could not be loaded (`dlopen` failed).
    LibraryMissing {
        /// The soname that was tried, e.g. `libibverbs.so.1`.
        lib: &'static str,
        /// What `dlerror` said.
        detail: String,
        /// What to install.
        hint: &'static str,
    },
    /// A symbol was missing from a loaded library.
    SymbolMissing {
        /// The library.
        lib: &'static str,
        /// The symbol.
        symbol: &'static str,
    },
    /// A verb failed with an errno.
    Verb {
        /// The verb or step, e.g. `ibv_modify_qp(RTR)`.
        verb: &'static str,
        /// The errno (positive).
        errno: i32,
        /// What is most likely wrong and how to fix it; may be empty.
        hint: String,
    },
    /// No such device, port, GID index, ...
    NotFound {
        /// What was looked for.
        what: String,
        /// Why it may be missing.
        hint: String,
    },
    /// Bad input from the caller (a configuration out of range, ...).
    InvalidArgument {
        /// Where.
        context: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// Bad input from the network (a malformed endpoint message, ...).
    Protocol {
        /// Where.
        context: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// A transfer this process drove failed: a work request completed in error or a post
    /// was refused mid-run (the measured loops of `perf` and the pingpong runs).
    Failed {
        /// Where.
        context: &'static str,
        /// What failed.
        detail: String,
    },
    /// A wait for completions made no progress: nothing completed for `waited` while
    /// something was still owed. A receive not posted, a dead peer or a QP in ERR ends a wait
    /// this way instead of hanging it (every wait loop counts idle turns with
    /// `rdma_direct_providers::helpers::Stall`).
    Stalled {
        /// Who waited (`poll`, `drain`, `wait_each`, `perf`, `pingpong`, `rping`, ...).
        context: &'static str,
        /// How long nothing completed.
        waited: std::time::Duration,
        /// What was still owed when the wait gave up (`2 requests`, `the peer's WRITE`).
        owed: String,
    },
    /// An I/O error (TCP exchange, sysfs).
    Io {
        /// Where.
        context: String,
        /// The error kind.
        kind: std::io::ErrorKind,
        /// The message.
        detail: String,
    },
    /// The operation is not supported by this provider or device.
    Unsupported {
        /// What.
        what: String,
    },
    /// A post was refused (`?` on a [`crate::types::Rejected`] or a post list error lands
    /// here; the request itself is dropped, use the hot-path error to keep it).
    Post {
        /// Index in the list, for a post list; `None` for a single post.
        index: Option<usize>,
        /// Why.
        error: crate::types::PostError,
    },
    /// A doorbell the device refused (verbs provider only).
    Ring(crate::types::RingError),
    /// A work request completed with an error status ([`crate::types::Completion::check`]).
    /// Its message names the likely cause and fix ([`crate::types::WcStatus::hint`]).
    Completion {
        /// The status.
        status: crate::types::WcStatus,
        /// The vendor syndrome (mlx5: `syndrome | vendor_syndrome << 8`; verbs: `vendor_err`).
        vendor_err: u32,
        /// The opcode as the completion gave it (rxe reports 0, SEND, on errors).
        opcode: crate::types::WcOpcode,
        /// The local QP.
        qp_num: u32,
        /// The request's wr_id.
        wr_id: u64,
    },
}

impl Error {
    /// A verb failure with the errno from `errno` (the C library's thread-local value) or a
    /// returned positive errno.
    pub fn verb(verb: &'static str, errno: i32, hint: impl Into<String>) -> Self {
        Error::Verb {
            verb,
            errno: errno.abs(),
            hint: hint.into(),
        }
    }

    /// An I/O error with context.
    pub fn io(context: impl Into<String>, e: &std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            kind: e.kind(),
            detail: e.to_string(),
        }
    }

    /// The errno carried by a verb error, if any.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Verb { errno, .. } => Some(*errno),
            _ => None,
        }
    }
}

/// The symbolic name of an errno (`EINVAL`), for messages.
pub fn errno_name(errno: i32) -> &'static str {
    match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EIO => "EIO",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::ENOSPC => "ENOSPC",
        libc::ENOSYS => "ENOSYS",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
        _ => "E?",
    }
}

fn strerror(errno: i32) -> String {
    std::io::Error::from_raw_os_error(errno).to_string()
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::LibraryMissing { lib, detail, hint } => {
                write!(f, "{lib} not found: {hint} ({detail})")
            }
            Error::SymbolMissing { lib, symbol } => {
                write!(f, "{lib}: symbol {symbol} missing (rdma-core too old? rdma-direct needs rdma-core >= 44)")
            }
            Error::Verb { verb, errno, hint } => {
                let msg = strerror(*errno);
                // strerror already ends with "(os error N)"; keep it short.
                let msg = msg.split(" (os error").next().unwrap_or(&msg);
                write!(f, "{verb}: {} ({msg})", errno_name(*errno))?;
                if !hint.is_empty() {
                    write!(f, " — {hint}")?;
                }
                Ok(())
            }
            Error::NotFound { what, hint } => {
                write!(f, "{what} not found")?;
                if !hint.is_empty() {
                    write!(f, ": {hint}")?;
                }
                Ok(())
            }
            Error::InvalidArgument { context, detail } => {
                write!(f, "{context}: invalid argument: {detail}")
            }
            Error::Protocol { context, detail } => {
                write!(f, "{context}: bad peer message: {detail}")
            }
            Error::Failed { context, detail } => write!(f, "{context}: {detail}"),
            Error::Stalled {
                context,
                waited,
                owed,
            } => write!(
                f,
                "{context}: no completion for {} s while owed {owed} (a receive not posted? \
                 the peer gone? the QP in ERR?)",
                waited.as_secs_f64()
            ),
            Error::Io {
                context, detail, ..
            } => write!(f, "{context}: {detail}"),
            Error::Unsupported { what } => write!(f, "unsupported: {what}"),
            Error::Post {
                index: Some(i),
                error,
            } => write!(f, "post of request {i} in the list refused: {error}"),
            Error::Post { index: None, error } => write!(f, "post refused: {error}"),
            Error::Ring(e) => e.fmt(f),
            Error::Completion {
                status,
                vendor_err,
                opcode,
                qp_num,
                wr_id,
            } => write!(
                f,
                "work request {wr_id} on QP {qp_num:#x} completed with {status} (opcode {}, \
                 vendor syndrome {vendor_err:#x}): {}",
                opcode.name(),
                status.hint()
            ),
        }
    }
}

impl std::error::Error for Error {}

impl From<crate::types::PostError> for Error {
    fn from(error: crate::types::PostError) -> Self {
        Error::Post { index: None, error }
    }
}

impl<W> From<crate::types::Rejected<W>> for Error {
    fn from(r: crate::types::Rejected<W>) -> Self {
        Error::Post {
            index: None,
            error: r.error,
        }
    }
}

impl<W> From<crate::types::PostListError<'_, W>> for Error {
    fn from(e: crate::types::PostListError<'_, W>) -> Self {
        Error::Post {
            index: Some(e.index),
            error: e.error,
        }
    }
}

impl From<crate::types::RingError> for Error {
    fn from(e: crate::types::RingError) -> Self {
        Error::Ring(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verb_error_names_verb_errno_and_hint() {
        let e = Error::verb(
            "ibv_reg_mr",
            libc::ENOMEM,
            "locked-memory limit is 64 KiB, see ulimit -l",
        );
        let s = e.to_string();
        assert!(
            s.starts_with("ibv_reg_mr: ENOMEM (Cannot allocate memory) — locked-memory"),
            "{s}"
        );
        assert_eq!(e.errno(), Some(libc::ENOMEM));
    }

    #[test]
    fn negative_errno_is_normalised() {
        assert_eq!(
            Error::verb("x", -libc::EINVAL, "").errno(),
            Some(libc::EINVAL)
        );
        assert_eq!(
            Error::verb("x", -libc::EINVAL, "").to_string(),
            "x: EINVAL (Invalid argument)"
        );
    }
}
