//! Ending a sweep early and cleanly: Ctrl-C (SIGINT) or SIGTERM during a sweep (`perf -a`,
//! `bench batching`), or a stdout that can no longer be written ([`crate::out`]).
//!
//! Contract: while an [`Armed`] guard lives, the first SIGINT or SIGTERM only sets a flag
//! (the handler stores one atomic, nothing else); the sweep asks [`requested`] between sizes,
//! stops measuring, prints and writes what it has measured (text, `--json`, `--svg`) with a
//! note, and the tool exits 128 + the signal's number (130 for SIGINT) by [`exit_code`]. A
//! second signal while the first is pending ends the tool at once, as without the guard.
//! Outside a guard the signals keep their default action (a command waiting for a peer ends
//! at Ctrl-C as any C tool).

use std::sync::atomic::{AtomicI32, Ordering};

/// The signal that asked the sweep to stop, 0 for none.
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// The signals a sweep catches.
const CAUGHT: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

extern "C" fn on_signal(sig: libc::c_int) {
    if SIGNAL
        .compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        // The second signal: its default action, now. signal(2) and raise(3) are
        // async-signal-safe.
        // SAFETY: restoring the default disposition and raising the signal again.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
    }
}

/// Catches SIGINT and SIGTERM while it lives (see the module doc); their default action
/// again once dropped.
pub struct Armed(());

impl Armed {
    /// Catch SIGINT and SIGTERM from now on.
    pub fn new() -> Armed {
        for sig in CAUGHT {
            // SAFETY: a zeroed sigaction is a valid value (empty mask, no flags); the
            // handler only stores an atomic or restores the default action (both
            // async-signal-safe). std's I/O retries a call the signal interrupted, so the
            // run goes on and the sweep sees the flag at its next size.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
        Armed(())
    }
}

impl Drop for Armed {
    fn drop(&mut self) {
        for sig in CAUGHT {
            // SAFETY: restoring the default disposition of a signal this guard caught.
            unsafe {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
    }
}

/// The signal that interrupted the sweep, if one did.
pub fn signal() -> Option<i32> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Whether a sweep should stop at its next size: a caught signal, or a stdout that failed.
pub fn requested() -> bool {
    signal().is_some() || crate::out::stdout_failed()
}

/// The signal's name for a note: `SIGINT`, `SIGTERM`.
pub fn name(sig: i32) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        _ => "a signal",
    }
}

/// The note a sweep prints (stderr) when it stopped early: `done` of `total` sizes kept.
pub fn note(cmd: &str, done: usize, total: usize) {
    if let Some(s) = signal() {
        errln!(
            "rdma-direct {cmd}: interrupted ({}) after {done} of {total} sizes; the sizes \
             measured are kept (text and result files)",
            name(s)
        );
    }
}

/// The exit status of a run that returned `code`: 128 + the signal's number when a signal
/// stopped it, else `code`.
pub fn exit_code(code: i32) -> i32 {
    signal().map_or(code, |s| 128 + s)
}
