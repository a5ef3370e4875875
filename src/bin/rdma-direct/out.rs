//! The tool's standard output and standard error: every byte the commands print goes through
//! `out!`/`outln!` (stdout) and `err!`/`errln!` (stderr), defined below, never through `print!`.
//!
//! Contract:
//! - A failed write never panics. The first failure on stdout (a full disk, `> /dev/full`,
//!   a closed descriptor) is kept, later writes to stdout are dropped, and [`stop::requested`]
//!   turns true so a sweep ends at its next size with its result files written; [`finish`]
//!   then prints one line, `rdma-direct CMD: cannot write to stdout: ERROR`, and the tool
//!   exits 1.
//! - A reader that goes away (`| head -1`) ends the tool by SIGPIPE, quietly, as it ends C
//!   tools (shell status 141). Where SIGPIPE is blocked the write fails with EPIPE instead:
//!   the tool ends at [`finish`] with status 1 and no line (the reader asked for no more).
//! - A closed stdout (`>&-`) is a failure too (EBADF), found at [`start`]; the descriptor is
//!   pointed at /dev/null so no file the tool opens later takes its number. Stderr alike.
//! - A failed write to stderr cannot be reported anywhere: it is dropped, and a run that
//!   would have exited 0 exits 1.
//!
//! [`stop::requested`]: crate::stop::requested

use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

/// The command line's first word (`perf`, `devices`), for the failure line.
static COMMAND: OnceLock<String> = OnceLock::new();
/// The first stdout failure.
static OUT_FAILED: Mutex<Option<io::Error>> = Mutex::new(None);
/// Whether [`OUT_FAILED`] is set (read without the lock on every write).
static OUT_DEAD: AtomicBool = AtomicBool::new(false);
/// Whether a write to stderr failed.
static ERR_DEAD: AtomicBool = AtomicBool::new(false);

/// Print to stdout (as `print!`, see the module doc).
macro_rules! out {
    ($($a:tt)*) => { $crate::out::stdout(format_args!($($a)*)) };
}

/// Print a line to stdout (as `println!`, see the module doc).
macro_rules! outln {
    () => { $crate::out::stdout(format_args!("\n")) };
    ($($a:tt)*) => { $crate::out::stdout(format_args!("{}\n", format_args!($($a)*))) };
}

/// Print to stderr (as `eprint!`, see the module doc).
macro_rules! err {
    ($($a:tt)*) => { $crate::out::stderr(format_args!($($a)*)) };
}

/// Print a line to stderr (as `eprintln!`, see the module doc).
macro_rules! errln {
    () => { $crate::out::stderr(format_args!("\n")) };
    ($($a:tt)*) => { $crate::out::stderr(format_args!("{}\n", format_args!($($a)*))) };
}

/// Before anything is printed or opened: note the command for the failure line (empty for
/// the top level), and find a closed stdout or stderr (see the module doc; stdin closed is
/// pointed at /dev/null too, without complaint).
pub fn start(command: &str) {
    let _ = COMMAND.set(command.to_string());
    for fd in [libc::STDIN_FILENO, libc::STDOUT_FILENO, libc::STDERR_FILENO] {
        // SAFETY: F_GETFD on a descriptor number only reads the descriptor table.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } != -1 {
            continue;
        }
        // SAFETY: opening /dev/null with a NUL-terminated path.
        let null = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
        if null >= 0 && null != fd {
            // SAFETY: both are descriptors of this process; dup2 onto the closed number.
            unsafe {
                libc::dup2(null, fd);
                libc::close(null);
            }
        }
        if fd == libc::STDIN_FILENO {
            continue;
        }
        if fd == libc::STDOUT_FILENO {
            failed_out(io::Error::from_raw_os_error(libc::EBADF));
        } else {
            ERR_DEAD.store(true, Ordering::Relaxed);
        }
    }
}

fn failed_out(e: io::Error) {
    let mut f = OUT_FAILED.lock().unwrap_or_else(|p| p.into_inner());
    if f.is_none() {
        *f = Some(e);
    }
    OUT_DEAD.store(true, Ordering::Release);
}

/// Whether stdout has failed (the run's printed results are lost).
pub fn stdout_failed() -> bool {
    OUT_DEAD.load(Ordering::Acquire)
}

/// Write `args` to stdout (line buffered, as `print!`); see the module doc for a failure.
pub fn stdout(args: fmt::Arguments<'_>) {
    if stdout_failed() {
        return;
    }
    let mut o = io::stdout().lock();
    if let Err(e) = o.write_fmt(args) {
        failed_out(e);
    }
}

/// Write what stdout holds now (a line without its newline, a prompt) to its file.
pub fn flush() {
    if stdout_failed() {
        return;
    }
    if let Err(e) = io::stdout().lock().flush() {
        failed_out(e);
    }
}

/// Stdout as an [`io::Write`], for code that writes through one (`scenario`'s lines): the
/// same failure handling as [`stdout`] (the first failure is kept and reported by
/// [`finish`]); a failed write also returns its error, so the writer's loop ends.
pub struct Stdout;

impl Write for Stdout {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        if stdout_failed() {
            return Err(io::Error::other("stdout failed before"));
        }
        io::stdout().lock().write(b).inspect_err(|e| {
            failed_out(io::Error::new(e.kind(), e.to_string()));
        })
    }

    fn flush(&mut self) -> io::Result<()> {
        if stdout_failed() {
            return Err(io::Error::other("stdout failed before"));
        }
        io::stdout().lock().flush().inspect_err(|e| {
            failed_out(io::Error::new(e.kind(), e.to_string()));
        })
    }
}

/// Write `args` to stderr (unbuffered, as `eprint!`); a failure is dropped (module doc).
pub fn stderr(args: fmt::Arguments<'_>) {
    if io::stderr().lock().write_fmt(args).is_err() {
        ERR_DEAD.store(true, Ordering::Relaxed);
    }
}

/// The tool's end: flush stdout and exit with `code`, or with 1 and the failure line when
/// stdout failed (see the module doc).
pub fn finish(code: i32) -> ! {
    flush();
    let failure = OUT_FAILED.lock().unwrap_or_else(|p| p.into_inner()).take();
    let code = match failure {
        Some(e) if e.kind() == io::ErrorKind::BrokenPipe => code.max(1),
        Some(e) => {
            let cmd = COMMAND.get().map(String::as_str).unwrap_or("");
            let sep = if cmd.is_empty() { "" } else { " " };
            stderr(format_args!(
                "rdma-direct{sep}{cmd}: cannot write to stdout: {e} (the results printed are lost)\n"
            ));
            code.max(1)
        }
        None if code == 0 && ERR_DEAD.load(Ordering::Relaxed) => 1,
        None => code,
    };
    std::process::exit(code)
}
