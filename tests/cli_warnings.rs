//! The warning a run prints when its busy threads outnumber the CPUs free to it (on the sim:
//! the poller and the device thread), before its results, on stderr.
//!
//! The run is pinned to one CPU (its affinity mask, set between fork and exec), so two busy
//! threads cannot fit whatever the host's load: the warning must appear. The arithmetic
//! against the load is unit-tested in src/bin/rdma-direct/cpu_room.rs.

use std::os::unix::process::CommandExt;
use std::process::Command;

/// `args` run on CPU 0 alone: (exit code, stdout, stderr).
fn on_one_cpu(args: &[&str]) -> (Option<i32>, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rdma-direct"));
    c.args(args);
    // SAFETY: CPU_ZERO/CPU_SET on a local set and sched_setaffinity(0, ...) of the child
    // between fork and exec: no allocation, no lock; the mask survives exec.
    unsafe {
        c.pre_exec(|| {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_ZERO(&mut set);
            libc::CPU_SET(0, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = c.output().expect("run");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn two_busy_threads_on_one_cpu_are_warned_of() {
    for (args, cmd) in [
        (&["pingpong", "-n", "20"][..], "pingpong"),
        (&["perf", "write_lat", "-n", "20"][..], "perf write_lat"),
        (
            &[
                "bench",
                "batching",
                "--provider",
                "sim",
                "-l",
                "1",
                "-m",
                "db8",
                "-Q",
                "1",
                "-r",
                "1",
                "-w",
                "0",
            ][..],
            "bench batching",
        ),
    ] {
        let (code, out, err) = on_one_cpu(args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        let want = format!(
            "rdma-direct {cmd}: warning: 2 busy threads (the poller and the software device's \
             thread) for "
        );
        let line = err
            .lines()
            .find(|l| l.starts_with(&want))
            .unwrap_or_else(|| panic!("{args:?}: no warning: {err}"));
        assert!(
            line.contains("(1 in this process's affinity mask"),
            "{line}"
        );
        assert!(line.contains("taskset -c LIST"), "{line}");
        // The warning is not in the results.
        assert!(!out.contains("warning"), "{out}");
    }
}
