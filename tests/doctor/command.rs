//! The command (`rdma-direct doctor`: arguments, exit status, what it prints) and the device
//! tests in the rxe guest.

use super::*;

// ---------------------------------------------------------------------------------------------
// The command
// ---------------------------------------------------------------------------------------------

/// The CLI: `RDMA_DIRECT_BIN` in the guest (where cargo's target directory is not carried),
/// else the one cargo built for this test.
fn bin() -> Command {
    match std::env::var_os("RDMA_DIRECT_BIN") {
        Some(b) if !b.is_empty() => Command::new(b),
        _ => Command::new(env!("CARGO_BIN_EXE_rdma-direct")),
    }
}

#[test]
fn cli_rejects_bad_arguments_with_status_2() {
    for args in [
        &["doctor", "--peer-mtu", "1500"][..],
        &["doctor", "-i", "0"],
        &["doctor", "--bogus"],
        &["doctor", "-d"],
    ] {
        let out = bin().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        // One line naming the problem and where the options are, not the usage.
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("rdma-direct doctor: "), "{err}");
        assert!(err.contains("rdma-direct doctor --help"), "{err}");
    }
}

#[test]
fn cli_without_the_device_fails_but_still_checks_memlock() {
    let out = bin()
        .args(["doctor", "-d", "no-such-device-0", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let json = String::from_utf8_lossy(&out.stdout);
    assert!(
        json.starts_with(
            "{\"sections\":[{\"title\":\"host\",\"device\":null,\"port\":null,\
                          \"checks\":[{\"level\":\"fail\",\"check\":\"device\""
        ),
        "{json}"
    );
    assert!(json.contains("\"check\":\"memlock\""), "{json}");
    assert!(!String::from_utf8_lossy(&out.stderr).is_empty());
}

// ---------------------------------------------------------------------------------------------
// Device tests (rxe guest)
// ---------------------------------------------------------------------------------------------

#[test]
#[ignore = "needs an RDMA device: RDMA_DIRECT_DEVICE=<dev> (tests/guest/run)"]
fn device_doctor_finds_link_active_and_skips_pcie_numa_on_rxe() {
    let dev = common::device();
    let ctx = rdma_direct::control::Context::open(&dev).unwrap();
    let ports = doctor::probe_device(&ctx, Some(1)).unwrap();
    assert_eq!(ports.len(), 1);
    let p = &ports[0];
    let fs = doctor::check_port(&Sysfs::system(), p, &HostFacts::probe(), None);
    for f in &fs {
        eprintln!("{f:?}");
    }
    assert_eq!(find(&fs, "link").level, Level::Ok);
    assert_eq!(find(&fs, "link").saw, "PORT_ACTIVE, phys LINK_UP (5)");
    assert!(
        fs.iter().all(|f| f.level != Level::Fail),
        "a FAIL on {dev}: {fs:#?}"
    );
    // The inline probe ran for real: rxe grants at most 512 bytes.
    let inline = p.caps.max_inline.expect("inline probe failed");
    assert!(inline > 0);
    if dev.starts_with("rxe") {
        assert!(inline <= 512, "{inline}");
        assert_eq!(find(&fs, "numa").level, Level::Skip);
        assert_eq!(find(&fs, "pcie").level, Level::Skip);
        assert_eq!(find(&fs, "subnet manager").level, Level::Skip);
        // rxe on lo (MTU 65536) runs at IB MTU 4096.
        assert_eq!(find(&fs, "netdev mtu").level, Level::Ok);
    }
}

#[test]
#[ignore = "needs an RDMA device: RDMA_DIRECT_DEVICE=<dev> (tests/guest/run)"]
fn device_cli_doctor_exits_0_on_a_healthy_device() {
    let dev = common::device();
    let out = bin().args(["doctor", "-d", &dev]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}");
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.starts_with(&format!("{dev} port 1 (")), "{text}");
    assert!(text.contains("\t[ ok ] link            PORT_ACTIVE, phys LINK_UP (5)\n"));
    assert!(text.contains("\n\t[skip] pcie"), "{text}");
    assert!(text.contains("\ndoctor: 0 FAIL, "), "{text}");
}

/// Set in the child process of the memlock device test.
const MEMLOCK_CHILD: &str = "RDMA_DIRECT_DOCTOR_MEMLOCK_CHILD";
/// The child's locked-memory limit.
const CHILD_MEMLOCK: u64 = 64 << 10;

/// The "largest registration that would work" doctor prints is exact: as an unprivileged
/// process with `ulimit -l 64`, registering that many bytes succeeds and one page more fails
/// with ENOMEM. The test re-runs itself as user 65534 (no capabilities) in a child process.
#[test]
#[ignore = "needs an RDMA device: RDMA_DIRECT_DEVICE=<dev> (tests/guest/run)"]
fn device_memlock_largest_registration_is_what_doctor_says() {
    let dev = common::device();
    if std::env::var_os(MEMLOCK_CHILD).is_some() {
        let h = HostFacts::probe();
        assert!(!h.cap_ipc_lock, "the child still has CAP_IPC_LOCK: {h:?}");
        let f = check_memlock(&h);
        eprintln!("{f:?}");
        assert_eq!(f.level, Level::Warn);
        let ctx = rdma_direct::control::Context::open(&dev).unwrap();
        let pd = rdma_direct::control::Pd::new(&ctx).unwrap();
        let room = (CHILD_MEMLOCK - HostFacts::probe().pinned_now) / 4096 * 4096;
        assert!(f.saw.ends_with(&format!(
            "the largest registration that would work is about {} KiB",
            room >> 10
        )));
        let access = rdma_direct::providers::Access::LOCAL_WRITE;
        let mr = rdma_direct::control::Mr::alloc(&pd, room as usize, access);
        assert!(mr.is_ok(), "registering {room} B: {:?}", mr.err());
        drop(mr);
        let err = rdma_direct::control::Mr::alloc(&pd, room as usize + 4096, access)
            .expect_err("one page beyond the limit registered");
        assert!(err.to_string().contains("ENOMEM"), "{err}");
        return;
    }
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--ignored",
        "--exact",
        "command::device_memlock_largest_registration_is_what_doctor_says",
        "--test-threads",
        "1",
        "--nocapture",
    ])
    .env(MEMLOCK_CHILD, "1");
    // SAFETY: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions (setrlimit, setgroups, setgid, setuid) on plain values.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: CHILD_MEMLOCK,
                rlim_max: CHILD_MEMLOCK,
            };
            if libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) != 0
                || libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(65534) != 0
                || libc::setuid(65534) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{text}");
    assert!(out.status.success(), "child failed: {text}");
    assert!(text.contains("test result: ok. 1 passed"), "{text}");
}

/// Without a device, the one reason every command gives, once: a kernel built without RDMA
/// support is not told to `modprobe` a driver it cannot load.
#[test]
fn cli_without_any_device_gives_one_reason() {
    let has_devices = rdma_direct::control::Device::list()
        .map(|l| !l.is_empty())
        .unwrap_or(false);
    if has_devices {
        println!("skipped: this host has RDMA devices");
        return;
    }
    let out = bin().arg("doctor").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(all.matches("[FAIL] device").count(), 1, "{all}");
    assert!(
        !(all.contains("CONFIG_INFINIBAND is not set") && all.contains("modprobe")),
        "contradictory reasons: {all}"
    );
    assert!(
        out.stderr.is_empty(),
        "the FAIL line says it; stderr repeats: {all}"
    );
}

/// `-d sim0`: the software device has nothing of a NIC to check; the host checks run.
#[test]
fn cli_on_the_software_device_checks_the_host_only() {
    let out = bin().args(["doctor", "-d", "sim0"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("[skip] device") && text.contains("software mlx5 device"),
        "{text}"
    );
    assert!(text.contains("memlock"), "{text}");
    assert!(!text.contains("[FAIL] device"), "{text}");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
