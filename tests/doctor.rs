//! `rdma-direct doctor`: every check against a fake sysfs tree and plain query results
//! (host tests), and against the real device in the rxe guest (`#[ignore]`d device tests).

mod common;

use rdma_direct::control::{LinkLayer, PortAttr, PortState};
use rdma_direct::doctor::{
    self, check_caps, check_link, check_memlock, check_mtu, check_numa, check_pcie, DeviceCaps,
    Finding, HostFacts, Level, MemlockLimit, PortFacts, Sysfs,
};
use rdma_direct::endpoint::Mtu;
use rdma_direct::ffi;
use rdma_direct::providers::mlx5::PollBarrier;
use std::path::PathBuf;
use std::process::Command;
#[path = "doctor/command.rs"]
mod command;
#[path = "doctor/latency.rs"]
mod latency;

/// A temporary directory tree, removed on drop.
struct Tree {
    root: PathBuf,
}

impl Tree {
    fn new(name: &str) -> Tree {
        let root =
            std::env::temp_dir().join(format!("rdma-direct-doctor-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        Tree { root }
    }
    fn file(&self, rel: &str, contents: &str) -> &Tree {
        let p = self.root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, contents).unwrap();
        self
    }
    fn sys(&self) -> Sysfs {
        Sysfs::new(&self.root)
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// A healthy 4X EDR (100 Gb/s) port, MTU 4096.
fn port_attr(link: LinkLayer) -> PortAttr {
    PortAttr {
        state: PortState::Active,
        max_mtu_raw: 5,
        active_mtu_raw: 5,
        gid_tbl_len: 16,
        port_cap_flags: 0,
        max_msg_sz: 1 << 30,
        pkey_tbl_len: 1,
        lid: if link == LinkLayer::Ethernet { 0 } else { 3 },
        sm_lid: if link == LinkLayer::Ethernet { 0 } else { 1 },
        lmc: 0,
        max_vl_num: 4,
        sm_sl: 0,
        subnet_timeout: 18,
        active_width: 2,
        active_speed: 32,
        phys_state: 5,
        link_layer: link,
    }
}

fn caps() -> DeviceCaps {
    DeviceCaps {
        max_qp_wr: 32768,
        max_sge: 30,
        max_cqe: 4_194_303,
        atomic_cap: ffi::IBV_ATOMIC_HCA,
        max_inline: Some(512),
    }
}

fn facts(dev: &str, link: LinkLayer) -> PortFacts {
    PortFacts {
        device: dev.to_string(),
        port: 1,
        attr: port_attr(link),
        caps: caps(),
    }
}

fn host() -> HostFacts {
    HostFacts {
        memlock: Some(MemlockLimit {
            soft: None,
            hard: None,
        }),
        pinned_now: 0,
        euid: 1000,
        cap_ipc_lock: false,
        allowed_cpus: (0..8).collect(),
        poll_barrier: PollBarrier::Membarrier,
    }
}

fn find<'a>(fs: &'a [Finding], check: &str) -> &'a Finding {
    fs.iter()
        .find(|f| f.check == check)
        .unwrap_or_else(|| panic!("no '{check}' finding in {fs:#?}"))
}

/// An mlx5-like PCIe card: Gen3, x16 capable, on NUMA node `node` whose CPUs are `cpus`.
fn pci_card(t: &Tree, dev: &str, cur_width: &str, node: &str, cpus: &str) {
    let d = format!("sys/class/infiniband/{dev}/device");
    t.file(
        &format!("{d}/current_link_width"),
        &format!("{cur_width}\n"),
    )
    .file(&format!("{d}/max_link_width"), "16\n")
    .file(&format!("{d}/current_link_speed"), "8.0 GT/s PCIe\n")
    .file(&format!("{d}/max_link_speed"), "8.0 GT/s PCIe\n")
    .file(&format!("{d}/numa_node"), &format!("{node}\n"))
    .file(
        &format!("sys/devices/system/node/node{node}/cpulist"),
        &format!("{cpus}\n"),
    );
}

// ---------------------------------------------------------------------------------------------
// 1. physical link
// ---------------------------------------------------------------------------------------------

#[test]
fn port_down_fails_with_the_cable_hint() {
    let t = Tree::new("down");
    let mut p = facts("mlx5_0", LinkLayer::Ethernet);
    p.attr.state = PortState::Down;
    p.attr.phys_state = 3;
    let fs = check_link(&t.sys(), &p);
    let f = find(&fs, "link");
    assert_eq!(f.level, Level::Fail);
    assert_eq!(f.saw, "PORT_DOWN, phys DISABLED (3)");
    assert!(f
        .fix
        .as_deref()
        .unwrap()
        .starts_with("check cable/switch port before tuning software"));
    assert_eq!(find(&fs, "link rate").level, Level::Skip);
}

#[test]
fn active_port_with_phys_polling_still_fails() {
    let t = Tree::new("polling");
    let mut p = facts("mlx5_0", LinkLayer::Ethernet);
    p.attr.phys_state = 2;
    assert_eq!(find(&check_link(&t.sys(), &p), "link").level, Level::Fail);
}

#[test]
fn healthy_link_is_ok_and_roce_skips_the_subnet_manager() {
    let t = Tree::new("linkok");
    t.file(
        "sys/class/infiniband/mlx5_0/ports/1/rate",
        "100 Gb/sec (4X EDR)\n",
    );
    let fs = check_link(&t.sys(), &facts("mlx5_0", LinkLayer::Ethernet));
    assert_eq!(
        fs.iter().map(|f| (f.check, f.level)).collect::<Vec<_>>(),
        vec![
            ("link", Level::Ok),
            ("link rate", Level::Ok),
            ("subnet manager", Level::Skip)
        ]
    );
    assert_eq!(find(&fs, "link").saw, "PORT_ACTIVE, phys LINK_UP (5)");
    assert!(find(&fs, "link rate")
        .saw
        .starts_with("100 Gb/s (4X x 25 Gb/s); sysfs rate \"100 Gb/sec (4X EDR)\""));
}

#[test]
fn ib_port_without_subnet_manager_fails_start_opensm() {
    let t = Tree::new("nosm");
    let mut p = facts("mlx5_0", LinkLayer::InfiniBand);
    p.attr.sm_lid = 0;
    p.attr.lid = 0;
    let fs = check_link(&t.sys(), &p);
    let f = find(&fs, "subnet manager");
    assert_eq!(f.level, Level::Fail);
    assert_eq!(f.saw, "sm_lid 0, port lid 0");
    assert!(f.fix.as_deref().unwrap().contains("start opensm"));
    let mut ok = facts("mlx5_0", LinkLayer::InfiniBand);
    ok.attr.sm_lid = 1;
    assert_eq!(
        find(&check_link(&t.sys(), &ok), "subnet manager").level,
        Level::Ok
    );
}

#[test]
fn ib_port_trained_at_1x_warns() {
    let t = Tree::new("1x");
    let mut p = facts("mlx5_0", LinkLayer::InfiniBand);
    p.attr.active_width = 1;
    let f = find(&check_link(&t.sys(), &p), "link rate").clone();
    assert_eq!(f.level, Level::Warn);
    assert!(f.saw.starts_with("25 Gb/s (1X x 25 Gb/s)"), "{}", f.saw);
    assert!(f.fix.unwrap().contains("a quarter of the bandwidth"));
}

#[test]
fn sysfs_rate_disagreeing_with_query_port_warns() {
    let t = Tree::new("ratediff");
    t.file(
        "sys/class/infiniband/mlx5_0/ports/1/rate",
        "40 Gb/sec (4X QDR)\n",
    );
    let f = find(
        &check_link(&t.sys(), &facts("mlx5_0", LinkLayer::Ethernet)),
        "link rate",
    )
    .clone();
    assert_eq!(f.level, Level::Warn);
    assert!(f.fix.unwrap().contains("disagree"));
}

#[test]
fn invalid_rate_codes_warn_instead_of_panicking() {
    let t = Tree::new("badrate");
    let mut p = facts("mlx5_0", LinkLayer::Ethernet);
    p.attr.active_width = 3;
    p.attr.active_speed = 0;
    let f = find(&check_link(&t.sys(), &p), "link rate").clone();
    assert_eq!(f.level, Level::Warn);
    assert_eq!(f.saw, "unknown width code 3 / speed code 0");
}

// ---------------------------------------------------------------------------------------------
// 2. MTU
// ---------------------------------------------------------------------------------------------

#[test]
fn roce_mtu_is_the_largest_ib_mtu_that_fits_the_netdev() {
    assert_eq!(doctor::roce_mtu_for_netdev(65536), Some(Mtu::Mtu4096));
    assert_eq!(doctor::roce_mtu_for_netdev(9000), Some(Mtu::Mtu4096));
    assert_eq!(doctor::roce_mtu_for_netdev(4192), Some(Mtu::Mtu4096));
    assert_eq!(doctor::roce_mtu_for_netdev(4191), Some(Mtu::Mtu2048));
    assert_eq!(doctor::roce_mtu_for_netdev(1500), Some(Mtu::Mtu1024));
    assert_eq!(doctor::roce_mtu_for_netdev(352), Some(Mtu::Mtu256));
    assert_eq!(doctor::roce_mtu_for_netdev(351), None);
    assert_eq!(doctor::roce_mtu_for_netdev(0), None);
}

#[test]
fn netdev_mtu_1500_under_a_4096_port_warns_and_says_which() {
    let t = Tree::new("nd1500");
    t.file(
        "sys/class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs/0",
        "eth2\n",
    )
    .file("sys/class/net/eth2/mtu", "1500\n");
    let mut p = facts("mlx5_0", LinkLayer::Ethernet);
    p.attr.active_mtu_raw = 3;
    let fs = check_mtu(&t.sys(), &p, None);
    let mtu = find(&fs, "mtu");
    assert_eq!(mtu.level, Level::Warn);
    assert_eq!(mtu.saw, "active_mtu 1024 of max_mtu 4096");
    let nd = find(&fs, "netdev mtu");
    assert_eq!(nd.level, Level::Warn);
    assert_eq!(
        nd.saw,
        "eth2 mtu 1500: fits IB MTU 1024 after 96 B of RoCE headers"
    );
    assert!(nd
        .fix
        .as_deref()
        .unwrap()
        .starts_with("`ip link set eth2 mtu 9000` (at least 4192)"));
    assert_eq!(find(&fs, "peer mtu").level, Level::Skip);
}

#[test]
fn netdev_found_past_empty_gid_slots_and_9000_is_ok() {
    let t = Tree::new("nd9000");
    // Slots 0 and 1 absent (empty GID slots cannot be read on a real host either); the
    // lowest readable index wins, numerically (2 before 10).
    t.file(
        "sys/class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs/10",
        "wrong\n",
    )
    .file(
        "sys/class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs/2",
        "ens1f0\n",
    )
    .file("sys/class/net/ens1f0/mtu", "9000\n");
    assert_eq!(
        doctor::port_netdev(&t.sys(), "mlx5_0", 1).as_deref(),
        Some("ens1f0")
    );
    let fs = check_mtu(&t.sys(), &facts("mlx5_0", LinkLayer::Ethernet), None);
    assert_eq!(find(&fs, "mtu").level, Level::Ok);
    let nd = find(&fs, "netdev mtu");
    assert_eq!(nd.level, Level::Ok);
    assert_eq!(
        nd.saw,
        "ens1f0 mtu 9000: fits IB MTU 4096 after 96 B of RoCE headers"
    );
}

#[test]
fn missing_netdev_is_skipped_and_ib_has_no_netdev_line() {
    let t = Tree::new("nond");
    let fs = check_mtu(&t.sys(), &facts("mlx5_0", LinkLayer::Ethernet), None);
    assert_eq!(find(&fs, "netdev mtu").level, Level::Skip);
    let ib = check_mtu(&t.sys(), &facts("mlx5_0", LinkLayer::InfiniBand), None);
    assert!(ib.iter().all(|f| f.check != "netdev mtu"));
}

#[test]
fn peer_mtu_mismatch_warns_with_the_smaller_path_mtu() {
    let t = Tree::new("peer");
    let p = facts("mlx5_0", LinkLayer::InfiniBand);
    let fs = check_mtu(&t.sys(), &p, Some(Mtu::Mtu1024));
    let f = find(&fs, "peer mtu");
    assert_eq!(f.level, Level::Warn);
    assert_eq!(f.saw, "ours 4096, peer 1024");
    assert!(f
        .fix
        .as_deref()
        .unwrap()
        .contains("the path MTU will be the smaller, 1024"));
    let same = check_mtu(&t.sys(), &p, Some(Mtu::Mtu4096));
    assert_eq!(find(&same, "peer mtu").level, Level::Ok);
}

// ---------------------------------------------------------------------------------------------
// 3. caps
// ---------------------------------------------------------------------------------------------

#[test]
fn caps_report_sizing_inline_atomics_and_message_size() {
    let fs = check_caps(&port_attr(LinkLayer::Ethernet), &caps());
    assert_eq!(
        fs.iter().map(|f| (f.check, f.level)).collect::<Vec<_>>(),
        vec![
            ("qp caps", Level::Ok),
            ("inline", Level::Ok),
            ("atomics", Level::Ok),
            ("message size", Level::Ok)
        ]
    );
    assert!(find(&fs, "qp caps")
        .saw
        .starts_with("max_qp_wr 32768, max_sge 30, max_cqe 4194303: a CQ must hold"));
    assert!(find(&fs, "qp caps")
        .saw
        .contains("allows a depth of at most 32768 each"));
    assert!(find(&fs, "inline").saw.starts_with("512 B granted"));
    assert!(find(&fs, "atomics").saw.starts_with("ATOMIC_HCA"));
    assert!(find(&fs, "message size")
        .saw
        .starts_with("max_msg_sz 1 GiB;"));
}

#[test]
fn small_cq_no_atomics_no_inline() {
    let mut c = caps();
    c.max_qp_wr = 16384;
    c.max_cqe = 8192;
    c.atomic_cap = ffi::IBV_ATOMIC_NONE;
    c.max_inline = Some(0);
    let fs = check_caps(&port_attr(LinkLayer::Ethernet), &c);
    // rxe's shape: deep queues, a small CQ: the shared depth is what the CQ allows.
    assert_eq!(find(&fs, "qp caps").level, Level::Ok);
    assert!(find(&fs, "qp caps")
        .saw
        .contains("allows a depth of at most 4096 each"));
    assert_eq!(find(&fs, "atomics").level, Level::Warn);
    assert_eq!(find(&fs, "atomics").saw, "ATOMIC_NONE");
    assert_eq!(find(&fs, "inline").level, Level::Warn);
    c.max_inline = None;
    let fs = check_caps(&port_attr(LinkLayer::Ethernet), &c);
    assert_eq!(find(&fs, "inline").level, Level::Skip);
    c.max_cqe = 0;
    assert_eq!(
        find(&check_caps(&port_attr(LinkLayer::Ethernet), &c), "qp caps").level,
        Level::Fail
    );
}

// ---------------------------------------------------------------------------------------------
// 4. memlock
// ---------------------------------------------------------------------------------------------

#[test]
fn the_poll_barrier_is_reported_and_the_seqcst_fallback_warns_with_the_fix() {
    let mut h = host();
    let f = doctor::check_poll_barrier(&h);
    assert_eq!((f.check, f.level), ("poll barrier", Level::Ok));
    assert!(f.saw.contains("takes no locked instruction"), "{}", f.saw);
    h.poll_barrier = PollBarrier::SeqCst;
    let f = doctor::check_poll_barrier(&h);
    assert_eq!(f.level, Level::Warn);
    assert!(f.saw.contains("locked instruction"), "{}", f.saw);
    assert!(f.fix.unwrap().contains("4.16"));
    // Both lists carry it: the host's alone and every port's.
    assert!(doctor::check_host(&h)
        .iter()
        .any(|f| f.check == "poll barrier"));
}

#[test]
fn memlock_64_kib_for_a_user_warns_with_the_largest_registration() {
    let mut h = host();
    h.memlock = Some(MemlockLimit {
        soft: Some(64 << 10),
        hard: Some(64 << 10),
    });
    h.pinned_now = 8 << 10;
    let f = check_memlock(&h);
    assert_eq!(f.level, Level::Warn);
    assert_eq!(
        f.saw,
        "RLIMIT_MEMLOCK soft 64 KiB, hard 64 KiB; uid 1000; 8 KiB pinned already, the largest \
         registration that would work is about 56 KiB"
    );
    let fix = f.fix.unwrap();
    assert!(
        fix.starts_with(
            "ibv_reg_mr will fail with ENOMEM beyond 56 KiB: ulimit -l unlimited or \
             /etc/security/limits.conf memlock"
        ),
        "{fix}"
    );
    assert!(!fix.contains("hard limit allows"));
    h.memlock = Some(MemlockLimit {
        soft: Some(64 << 10),
        hard: None,
    });
    assert!(check_memlock(&h).fix.unwrap().contains("hard limit allows"));
}

#[test]
fn memlock_unlimited_large_or_cap_ipc_lock_is_ok_unknown_is_skipped() {
    let mut h = host();
    assert_eq!(check_memlock(&h).level, Level::Ok);
    h.memlock = Some(MemlockLimit {
        soft: Some(1 << 30),
        hard: Some(1 << 30),
    });
    assert_eq!(check_memlock(&h).level, Level::Ok);
    h.memlock = Some(MemlockLimit {
        soft: Some(64 << 10),
        hard: Some(64 << 10),
    });
    h.euid = 0;
    h.cap_ipc_lock = true;
    let f = check_memlock(&h);
    assert_eq!(f.level, Level::Ok);
    assert!(f.saw.contains("CAP_IPC_LOCK"));
    // Root without CAP_IPC_LOCK (a container dropping it) is limited like anyone.
    h.cap_ipc_lock = false;
    assert_eq!(check_memlock(&h).level, Level::Warn);
    h.memlock = None;
    assert_eq!(check_memlock(&h).level, Level::Skip);
}

#[test]
fn host_facts_from_a_fake_proc() {
    let t = Tree::new("proc");
    t.file(
        "proc/self/limits",
        "Limit                     Soft Limit           Hard Limit           Units     \n\
         Max cpu time              unlimited            unlimited            seconds   \n\
         Max locked memory         65536                unlimited            bytes     \n",
    )
    .file(
        "proc/self/status",
        "Name:\tx\nUid:\t1000\t1001\t1000\t1000\nVmPin:\t       8 kB\n\
         CapEff:\t0000000000000000\nCpus_allowed_list:\t0-3,8\n",
    );
    let h = HostFacts::read(&t.sys());
    assert_eq!(
        h,
        HostFacts {
            memlock: Some(MemlockLimit {
                soft: Some(65536),
                hard: None
            }),
            pinned_now: 8192,
            euid: 1001,
            cap_ipc_lock: false,
            allowed_cpus: vec![0, 1, 2, 3, 8],
            poll_barrier: rdma_direct::providers::mlx5::poll_barrier(),
        }
    );
    t.file("proc/self/status", "CapEff:\t0000000000004000\n");
    assert!(HostFacts::read(&t.sys()).cap_ipc_lock);
    let empty = Tree::new("noproc");
    let h = HostFacts::read(&empty.sys());
    assert_eq!(h.memlock, None);
    assert!(h.allowed_cpus.is_empty());
    assert_eq!(
        doctor::parse_memlock_limit("Max locked memory  64k  x  bytes"),
        None
    );
}

#[test]
fn host_probe_matches_getrlimit_and_sched_getaffinity() {
    let h = HostFacts::probe();
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit.
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) },
        0
    );
    let conv = |v: libc::rlim_t| (v != libc::RLIM_INFINITY).then_some(v);
    assert_eq!(
        h.memlock,
        Some(MemlockLimit {
            soft: conv(lim.rlim_cur),
            hard: conv(lim.rlim_max)
        })
    );
    // SAFETY: geteuid cannot fail.
    assert_eq!(h.euid, unsafe { libc::geteuid() });
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is writable and its size is passed; the test harness does not change
    // thread affinities, so this thread's mask is the process's.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    assert_eq!(rc, 0);
    let cpus: Vec<u32> = (0..8 * std::mem::size_of_val(&set))
        // SAFETY: `c` is below the bit count of `set`.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .filter_map(|c| u32::try_from(c).ok())
        .collect();
    assert_eq!(h.allowed_cpus, cpus);
}

// ---------------------------------------------------------------------------------------------
// 5. NUMA / affinity
// ---------------------------------------------------------------------------------------------

#[test]
fn cpulists_parse_and_format() {
    assert_eq!(
        doctor::parse_cpulist("0-3,8,10-11\n"),
        Some(vec![0, 1, 2, 3, 8, 10, 11])
    );
    assert_eq!(doctor::parse_cpulist(""), Some(vec![]));
    assert_eq!(doctor::parse_cpulist("3-1"), None);
    assert_eq!(doctor::parse_cpulist("a"), None);
    assert_eq!(doctor::parse_cpulist("0-4294967295"), None);
    assert_eq!(
        doctor::format_cpulist(&[11, 0, 1, 2, 3, 8, 10]),
        "0-3,8,10-11"
    );
    assert_eq!(doctor::format_cpulist(&[5]), "5");
    assert_eq!(doctor::format_cpulist(&[]), "");
}

#[test]
fn device_on_node_1_with_process_pinned_to_node_0_warns_taskset() {
    let t = Tree::new("numa1");
    pci_card(&t, "mlx5_0", "16", "1", "8-15");
    let f = check_numa(&t.sys(), "mlx5_0", &[0, 1, 2, 3]);
    assert_eq!(f.level, Level::Warn);
    assert_eq!(
        f.saw,
        "mlx5_0 on NUMA node 1 (CPUs 8-15); this process may run on 0-3"
    );
    let fix = f.fix.unwrap();
    assert!(
        fix.starts_with("all allowed CPUs are on another node"),
        "{fix}"
    );
    assert!(fix.contains("`taskset -c 8-15 <cmd>`"));
    let partly = check_numa(&t.sys(), "mlx5_0", &[6, 7, 8, 9]);
    assert_eq!(partly.level, Level::Warn);
    assert!(partly.fix.unwrap().starts_with("some allowed"));
    assert_eq!(check_numa(&t.sys(), "mlx5_0", &[9, 10]).level, Level::Ok);
}

#[test]
fn virtual_or_unknown_numa_is_skipped() {
    let t = Tree::new("numavirt");
    // rxe: the class directory exists, but no device/ link.
    t.file(
        "sys/class/infiniband/rxe0/ports/1/rate",
        "2.5 Gb/sec (1X SDR)\n",
    );
    let f = check_numa(&t.sys(), "rxe0", &[0, 1]);
    assert_eq!(f.level, Level::Skip);
    assert!(f.saw.contains("virtual device"));
    pci_card(&t, "mlx5_1", "16", "-1", "0-1");
    let f = check_numa(&t.sys(), "mlx5_1", &[0, 1]);
    assert_eq!(f.level, Level::Skip);
    assert!(f.saw.contains("numa_node -1"));
}

// ---------------------------------------------------------------------------------------------
// 6. PCIe
// ---------------------------------------------------------------------------------------------

#[test]
fn x16_card_at_x8_fails_half_bandwidth_and_cannot_feed_100g() {
    let t = Tree::new("x8");
    pci_card(&t, "mlx5_0", "8", "0", "0-7");
    let fs = check_pcie(&t.sys(), "mlx5_0", Some(100.0));
    let w = find(&fs, "pcie width");
    assert_eq!(w.level, Level::Fail);
    assert_eq!(w.saw, "x8 of x16");
    assert!(w.fix.as_deref().unwrap().starts_with(
        "card runs at x8 of x16: half the bandwidth — reseat it in a full-width slot"
    ));
    assert_eq!(find(&fs, "pcie speed").level, Level::Ok);
    assert_eq!(
        find(&fs, "pcie speed").saw,
        "8 GT/s (Gen3) of 8 GT/s (Gen3)"
    );
    let b = find(&fs, "pcie bandwidth");
    assert_eq!(b.level, Level::Warn);
    assert_eq!(b.saw, "Gen3 x8 ≈ 63 Gb/s usable < 100 Gb/s port");
}

#[test]
fn full_width_gen3_x16_feeds_100g() {
    let t = Tree::new("x16");
    pci_card(&t, "mlx5_0", "16", "0", "0-7");
    let fs = check_pcie(&t.sys(), "mlx5_0", Some(100.0));
    assert!(fs.iter().all(|f| f.level == Level::Ok), "{fs:#?}");
    assert_eq!(
        find(&fs, "pcie bandwidth").saw,
        "Gen3 x16 ≈ 126 Gb/s usable ≥ 100 Gb/s port"
    );
}

#[test]
fn pcie_speed_below_max_warns() {
    let t = Tree::new("gen2");
    pci_card(&t, "mlx5_0", "16", "0", "0-7");
    t.file(
        "sys/class/infiniband/mlx5_0/device/current_link_speed",
        "5.0 GT/s PCIe\n",
    );
    let fs = check_pcie(&t.sys(), "mlx5_0", Some(100.0));
    assert_eq!(find(&fs, "pcie speed").level, Level::Warn);
    assert_eq!(
        find(&fs, "pcie bandwidth").saw,
        "Gen2 x16 ≈ 64 Gb/s usable < 100 Gb/s port"
    );
}

#[test]
fn pcie_lane_rates_after_encoding() {
    let g = |gts| doctor::pcie_lane_gbps(gts).unwrap();
    assert!((g(2.5) - 2.0).abs() < 1e-9);
    assert!((g(5.0) - 4.0).abs() < 1e-9);
    assert!((g(8.0) * 8.0 - 63.015).abs() < 0.01);
    assert!((g(16.0) - 15.754).abs() < 0.001);
    assert_eq!(doctor::pcie_lane_gbps(0.0), None);
}

#[test]
fn virtual_device_or_missing_link_files_skip_pcie() {
    let t = Tree::new("pcivirt");
    let fs = check_pcie(&t.sys(), "rxe0", Some(2.5));
    assert_eq!(fs.len(), 1);
    assert_eq!(fs[0].level, Level::Skip);
    assert!(fs[0].saw.contains("virtual device"));
    t.file("sys/class/infiniband/odd0/device/numa_node", "0\n")
        .file(
            "sys/class/infiniband/odd0/device/current_link_width",
            "garbage\n",
        );
    let fs = check_pcie(&t.sys(), "odd0", None);
    assert_eq!(fs.len(), 1);
    assert_eq!(fs[0].level, Level::Skip);
}

// ---------------------------------------------------------------------------------------------
// The whole walk and the report
// ---------------------------------------------------------------------------------------------

#[test]
fn whole_walk_is_in_the_troubleshooting_order() {
    let t = Tree::new("walk");
    pci_card(&t, "mlx5_0", "16", "0", "0-7");
    t.file(
        "sys/class/infiniband/mlx5_0/ports/1/rate",
        "100 Gb/sec (4X EDR)\n",
    )
    .file(
        "sys/class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs/0",
        "eth0\n",
    )
    .file("sys/class/net/eth0/mtu", "9000\n");
    let fs = doctor::check_port(
        &t.sys(),
        &facts("mlx5_0", LinkLayer::Ethernet),
        &host(),
        Some(Mtu::Mtu4096),
    );
    let order: Vec<&str> = fs.iter().map(|f| f.check).collect();
    assert_eq!(
        order,
        vec![
            "link",
            "link rate",
            "subnet manager",
            "mtu",
            "netdev mtu",
            "peer mtu",
            "qp caps",
            "inline",
            "atomics",
            "message size",
            "memlock",
            "poll barrier",
            "numa",
            "pcie width",
            "pcie speed",
            "pcie bandwidth",
            "modify_qp attrs",
            "path mtu",
        ]
    );
    let bad: Vec<&Finding> = fs
        .iter()
        .filter(|f| f.level != Level::Ok && f.check != "subnet manager")
        .collect();
    assert!(bad.is_empty(), "{bad:#?}");
}
