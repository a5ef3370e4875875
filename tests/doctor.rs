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
        "device_memlock_largest_registration_is_what_doctor_says",
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

// ---- doctor --latency: the polling core's tuning checks on fake trees ----

use rdma_direct::doctor::latency::{
    self, check_cstates, check_governor, check_irq_affinity, check_irqbalance, check_isolated,
    check_nohz_full, check_rcu_nocbs, check_smt, check_swap, check_thp, check_timer_migration,
};

fn finding(level: Level, check: &'static str, saw: &str, fix: Option<&str>) -> Finding {
    Finding {
        level,
        check,
        saw: saw.into(),
        fix: fix.map(String::from),
    }
}

#[test]
fn latency_isolation_tick_and_rcu_from_the_command_line() {
    let t = Tree::new("lat-cmdline");
    let sys = t.sys();
    let tuned = "ro isolcpus=managed_irq,domain,2-3 nohz_full=2-3";
    assert_eq!(
        check_isolated(&sys, tuned, 3),
        finding(Level::Ok, "isolcpus", "CPU 3 isolated (isolcpus 2-3)", None)
    );
    assert_eq!(
        check_isolated(&sys, "ro quiet", 3),
        finding(
            Level::Warn,
            "isolcpus",
            "CPU 3 is not isolated (isolcpus: none): the scheduler may run other tasks on it",
            Some(
                "kernel parameter isolcpus=3, or without a reboot a cgroup v2 isolated \
                 partition: mkdir /sys/fs/cgroup/rt; echo +cpuset > \
                 /sys/fs/cgroup/cgroup.subtree_control; echo 3 > \
                 /sys/fs/cgroup/rt/cpuset.cpus.exclusive; echo 3 > /sys/fs/cgroup/rt/cpuset.cpus; \
                 echo isolated > /sys/fs/cgroup/rt/cpuset.cpus.partition (then move the engine \
                 into it: echo $PID > /sys/fs/cgroup/rt/cgroup.procs)"
            )
        )
    );
    // A cgroup v2 cpuset partition "isolated" isolates as isolcpus does; "root" or an
    // invalid partition does not.
    let cg = "sys/fs/cgroup/trading/engine";
    t.file(&format!("{cg}/cpuset.cpus.partition"), "root\n")
        .file(&format!("{cg}/cpuset.cpus.effective"), "2-3\n");
    assert_eq!(check_isolated(&sys, "ro", 3).level, Level::Warn);
    t.file(
        &format!("{cg}/cpuset.cpus.partition"),
        "isolated invalid (Cpu list in cpuset.cpus not exclusive)\n",
    );
    assert_eq!(check_isolated(&sys, "ro", 3).level, Level::Warn);
    t.file(&format!("{cg}/cpuset.cpus.partition"), "isolated\n");
    assert_eq!(
        check_isolated(&sys, "ro", 3),
        finding(
            Level::Ok,
            "isolcpus",
            "CPU 3 isolated by the cgroup v2 cpuset partition /sys/fs/cgroup/trading/engine \
             (isolated)",
            None
        )
    );
    assert_eq!(check_isolated(&sys, "ro", 1).level, Level::Warn);
    assert_eq!(
        latency::cpuset_isolated(&sys, 2).as_deref(),
        Some("/trading/engine")
    );
    // The root's summary of every isolated partition (Linux 6.7+).
    t.file("sys/fs/cgroup/cpuset.cpus.isolated", "1\n");
    assert_eq!(latency::cpuset_isolated(&sys, 1).as_deref(), Some(""));
    assert_eq!(check_isolated(&sys, "ro", 1).level, Level::Ok);
    std::fs::remove_dir_all(t.root.join("sys/fs/cgroup")).unwrap();
    // The sysfs mirror counts when the command line says nothing.
    t.file("sys/devices/system/cpu/isolated", "1,3\n");
    assert_eq!(check_isolated(&sys, "ro", 3).level, Level::Ok);
    assert_eq!(check_isolated(&sys, "ro", 2).level, Level::Warn);

    assert_eq!(
        check_nohz_full(&sys, tuned, 2),
        finding(Level::Ok, "nohz_full", "CPU 2 in nohz_full", None)
    );
    assert_eq!(
        check_nohz_full(&sys, tuned, 1),
        finding(
            Level::Warn,
            "nohz_full",
            "CPU 1 not in nohz_full: the timer tick interrupts it 100-1000 times a second",
            Some("kernel parameter nohz_full=1")
        )
    );
    assert_eq!(
        check_rcu_nocbs("rcu_nocbs=1-7", 1),
        finding(Level::Ok, "rcu_nocbs", "CPU 1 in rcu_nocbs", None)
    );
    assert_eq!(
        check_rcu_nocbs(tuned, 2),
        finding(
            Level::Ok,
            "rcu_nocbs",
            "CPU 2 in nohz_full, which offloads its RCU callbacks",
            None
        )
    );
    assert_eq!(
        check_rcu_nocbs(tuned, 0),
        finding(
            Level::Warn,
            "rcu_nocbs",
            "CPU 0 runs its own RCU callbacks (not in rcu_nocbs or nohz_full)",
            Some("kernel parameter rcu_nocbs=0")
        )
    );
}

#[test]
fn latency_irq_affinity_fails_on_the_nics_irqs() {
    let t = Tree::new("lat-irq");
    let sys = t.sys();
    assert_eq!(
        check_irq_affinity(&sys, 1, None),
        finding(
            Level::Skip,
            "irq affinity",
            "/proc/irq cannot be read",
            None
        )
    );
    t.file("sys/devices/system/cpu/online", "0-3\n")
        .file("proc/irq/24/smp_affinity_list", "0-3\n")
        .file("proc/irq/24/effective_affinity_list", "0\n")
        .file("proc/irq/36/smp_affinity_list", "0-3\n")
        .file("proc/irq/98/smp_affinity_list", "1\n")
        .file("proc/irq/99/smp_affinity_list", "2\n")
        .file("sys/class/infiniband/mlx5_0/device/msi_irqs/98", "msix")
        .file("sys/class/infiniband/mlx5_0/device/msi_irqs/99", "msix");
    assert_eq!(
        check_irq_affinity(&sys, 1, Some("mlx5_0")),
        finding(
            Level::Fail,
            "irq affinity",
            "the RDMA device's IRQs 98 may land on CPU 1; mlx5_0's IRQs 98-99",
            Some("for IRQ in 98; do echo 0,2-3 > /proc/irq/$IRQ/smp_affinity_list; done")
        )
    );
    // Not the NIC's: a warn (24 goes to CPU 0 only, by its effective affinity).
    assert_eq!(
        check_irq_affinity(&sys, 3, Some("mlx5_0")),
        finding(
            Level::Warn,
            "irq affinity",
            "1 IRQs may land on CPU 3 (36); mlx5_0's IRQs 98-99",
            Some("for IRQ in 36; do echo 0-2 > /proc/irq/$IRQ/smp_affinity_list; done")
        )
    );
    t.file("proc/irq/36/smp_affinity_list", "0\n");
    assert_eq!(
        check_irq_affinity(&sys, 3, None),
        finding(
            Level::Ok,
            "irq affinity",
            "no IRQ may land on CPU 3; no device given: the RDMA device's IRQs not known",
            None
        )
    );
}

#[test]
fn latency_irqbalance_and_timer_migration() {
    let t = Tree::new("lat-irqbalance");
    let sys = t.sys();
    t.file("proc/1/comm", "systemd\n");
    assert_eq!(
        check_irqbalance(&sys, "", 2),
        finding(Level::Ok, "irqbalance", "not running", None)
    );
    t.file("proc/812/comm", "irqbalance\n");
    assert_eq!(
        check_irqbalance(&sys, "", 2),
        finding(
            Level::Warn,
            "irqbalance",
            "running, and free to move IRQs onto CPU 2",
            Some(
                "IRQBALANCE_BANNED_CPULIST=2 in /etc/default/irqbalance (or \
                 /etc/sysconfig/irqbalance) and restart it, or systemctl stop irqbalance"
            )
        )
    );
    assert_eq!(
        check_irqbalance(&sys, "nohz_full=2", 2).saw,
        "running; it leaves CPU 2 alone (isolcpus/nohz_full)"
    );
    t.file(
        "etc/sysconfig/irqbalance",
        "# comment\nIRQBALANCE_BANNED_CPULIST=\"2-3\"\n",
    );
    assert_eq!(
        check_irqbalance(&sys, "", 2),
        finding(
            Level::Ok,
            "irqbalance",
            "running, CPU 2 in IRQBALANCE_BANNED_CPULIST",
            None
        )
    );

    assert_eq!(check_timer_migration(&sys).level, Level::Skip);
    t.file("proc/sys/kernel/timer_migration", "1\n");
    assert_eq!(
        check_timer_migration(&sys),
        finding(
            Level::Warn,
            "timer migration",
            "kernel.timer_migration = 1: idle CPUs' timers move to busy ones",
            Some("sysctl kernel.timer_migration=0")
        )
    );
    t.file("proc/sys/kernel/timer_migration", "0\n");
    assert_eq!(check_timer_migration(&sys).level, Level::Ok);
}

#[test]
fn latency_governor_and_cstates() {
    let t = Tree::new("lat-power");
    let sys = t.sys();
    assert_eq!(
        check_governor(&sys, 1),
        finding(
            Level::Skip,
            "governor",
            "no cpufreq for CPU 1 (a virtual machine, or the frequency is not under the \
             kernel's control)",
            None
        )
    );
    t.file(
        "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor",
        "powersave\n",
    )
    .file("sys/devices/system/cpu/intel_pstate/no_turbo", "0\n");
    assert_eq!(
        check_governor(&sys, 1),
        finding(
            Level::Warn,
            "governor",
            "CPU 1 governor powersave, turbo on",
            Some("cpupower -c 1 frequency-set -g performance")
        )
    );
    t.file(
        "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor",
        "performance\n",
    );
    assert_eq!(
        check_governor(&sys, 1),
        finding(
            Level::Ok,
            "governor",
            "CPU 1 governor performance, turbo on",
            None
        )
    );

    assert_eq!(check_cstates(&sys, 1).level, Level::Skip);
    let st = "sys/devices/system/cpu/cpu1/cpuidle";
    t.file(
        "sys/devices/system/cpu/cpuidle/current_driver",
        "intel_idle\n",
    )
    .file(&format!("{st}/state0/name"), "POLL\n")
    .file(&format!("{st}/state0/latency"), "0\n")
    .file(&format!("{st}/state0/disable"), "0\n")
    .file(&format!("{st}/state1/name"), "C1\n")
    .file(&format!("{st}/state1/latency"), "2\n")
    .file(&format!("{st}/state1/disable"), "0\n")
    .file(&format!("{st}/state2/name"), "C6\n")
    .file(&format!("{st}/state2/latency"), "133\n")
    .file(&format!("{st}/state2/disable"), "0\n");
    assert_eq!(
        check_cstates(&sys, 1),
        finding(
            Level::Warn,
            "c-states",
            "idle driver intel_idle; POLL 0 us, C1 2 us, C6 133 us: deep states enabled (C6)",
            Some(
                "cpupower -c 1 idle-set -D 10 (or kernel parameters intel_idle.max_cstate=1 \
                 processor.max_cstate=1, or hold /dev/cpu_dma_latency open with 0)"
            )
        )
    );
    // A latency target held on /dev/cpu_dma_latency keeps C6 out of reach; the limits on
    // the command line are evidence.
    t.file("proc/cmdline", "ro intel_idle.max_cstate=1 quiet");
    t.file("dev/cpu_dma_latency", "");
    std::fs::write(t.root.join("dev/cpu_dma_latency"), 0i32.to_ne_bytes()).unwrap();
    assert_eq!(latency::cpu_dma_latency_us(&sys), Some(0));
    assert_eq!(
        check_cstates(&sys, 1),
        finding(
            Level::Ok,
            "c-states",
            "idle driver intel_idle; POLL 0 us, C1 2 us, C6 133 us; intel_idle.max_cstate=1; \
             /dev/cpu_dma_latency 0 us",
            None
        )
    );
    // Nobody holding it: the default target reaches every state.
    std::fs::write(
        t.root.join("dev/cpu_dma_latency"),
        2_000_000_000i32.to_ne_bytes(),
    )
    .unwrap();
    assert_eq!(check_cstates(&sys, 1).level, Level::Warn);
    std::fs::remove_file(t.root.join("dev/cpu_dma_latency")).unwrap();
    std::fs::remove_file(t.root.join("proc/cmdline")).unwrap();
    t.file(&format!("{st}/state2/disable"), "1\n");
    assert_eq!(
        check_cstates(&sys, 1),
        finding(
            Level::Ok,
            "c-states",
            "idle driver intel_idle; POLL 0 us, C1 2 us, C6 133 us (disabled)",
            None
        )
    );
}

#[test]
fn latency_smt_sibling_busy_time_from_proc_stat() {
    let t = Tree::new("lat-smt-busy");
    let sys = t.sys();
    t.file(
        "sys/devices/system/cpu/cpu2/topology/thread_siblings_list",
        "2,6\n",
    );
    // user nice system idle iowait irq softirq steal: cpu6 busy 40 of 100 ticks, idle 1 of
    // 100 in the second pair.
    let a = "cpu  0 0 0 0 0 0 0 0\ncpu2 10 0 10 100 0 0 0 0\ncpu6 100 0 50 1000 10 0 0 0\n";
    let busy = "cpu  0 0 0 0 0 0 0 0\ncpu2 10 0 10 200 0 0 0 0\ncpu6 130 0 60 1050 20 0 0 0\n";
    let idle = "cpu  0 0 0 0 0 0 0 0\ncpu2 10 0 10 200 0 0 0 0\ncpu6 100 0 51 1099 10 0 0 0\n";
    assert_eq!(latency::cpu_busy_pct(a, busy, 6), Some(40.0));
    assert_eq!(latency::cpu_busy_pct(a, idle, 6), Some(1.0));
    assert_eq!(latency::cpu_busy_pct(a, a, 6), None);
    assert_eq!(latency::cpu_busy_pct(a, busy, 7), None);
    assert_eq!(
        latency::check_smt_sampled(&sys, "isolcpus=2,6", 2, Some(a), Some(busy)),
        finding(
            Level::Fail,
            "smt sibling",
            "CPU 2's SMT sibling 6 is 40% busy over 250 ms: it takes the core's execution \
             units and caches from the polling loop",
            Some(
                "echo 0 > /sys/devices/system/cpu/cpu6/online (or kernel parameter nosmt); or \
                 move what runs there away (ps -eLo pid,psr,comm | awk '$2==6')"
            )
        )
    );
    assert_eq!(
        latency::check_smt_sampled(&sys, "isolcpus=2,6", 2, Some(a), Some(idle)),
        finding(
            Level::Ok,
            "smt sibling",
            "CPU 2's SMT sibling 6 online and isolated, 1% busy over 250 ms",
            None
        )
    );
    let w = latency::check_smt_sampled(&sys, "", 2, Some(a), Some(idle));
    assert_eq!(w.level, Level::Warn);
    assert_eq!(
        w.saw,
        "CPU 2's SMT sibling 6 is online and not isolated: it shares the core, 1% busy over 250 ms"
    );
}

#[test]
fn latency_watchdogs_stat_interval_and_numa() {
    let t = Tree::new("lat-wd");
    let sys = t.sys();
    assert_eq!(latency::check_watchdogs(&sys, 3).level, Level::Skip);
    t.file("proc/sys/kernel/nmi_watchdog", "1\n")
        .file("sys/devices/system/cpu/online", "0-7\n")
        .file("proc/sys/kernel/watchdog", "1\n")
        .file("proc/sys/kernel/watchdog_cpumask", "0-7\n");
    assert_eq!(
        latency::check_watchdogs(&sys, 3),
        finding(
            Level::Warn,
            "watchdogs",
            "kernel.nmi_watchdog 1, soft lockup watchdog 1, watchdog_cpumask 0-7: they \
             interrupt CPU 3 periodically",
            Some(
                "sysctl kernel.nmi_watchdog=0 (or kernel parameter nmi_watchdog=0); sysctl \
                 kernel.watchdog_cpumask=0-2,4-7 (or kernel parameter nowatchdog)"
            )
        )
    );
    t.file("proc/sys/kernel/nmi_watchdog", "0\n")
        .file("proc/sys/kernel/watchdog_cpumask", "0-2,4-7\n");
    assert_eq!(
        latency::check_watchdogs(&sys, 3),
        finding(
            Level::Ok,
            "watchdogs",
            "kernel.nmi_watchdog 0, soft lockup watchdog 1, watchdog_cpumask 0-2,4-7: none \
             runs on CPU 3",
            None
        )
    );
    assert_eq!(latency::check_watchdogs(&sys, 4).level, Level::Warn);

    assert_eq!(latency::check_stat_interval(&sys).level, Level::Skip);
    t.file("proc/sys/vm/stat_interval", "1\n");
    assert_eq!(
        latency::check_stat_interval(&sys),
        finding(
            Level::Warn,
            "vmstat interval",
            "vm.stat_interval = 1: the vmstat work interrupts the CPU that often",
            Some("sysctl vm.stat_interval=10")
        )
    );
    t.file("proc/sys/vm/stat_interval", "120\n");
    assert_eq!(
        latency::check_stat_interval(&sys),
        finding(
            Level::Ok,
            "vmstat interval",
            "vm.stat_interval = 120 s",
            None
        )
    );

    assert_eq!(
        latency::check_numa_latency(&sys, 3, None).level,
        Level::Skip
    );
    t.file("sys/class/infiniband/mlx5_0/device/numa_node", "-1\n");
    assert_eq!(
        latency::check_numa_latency(&sys, 3, Some("mlx5_0")).level,
        Level::Skip
    );
    t.file("sys/class/infiniband/mlx5_0/device/numa_node", "1\n")
        .file("sys/devices/system/node/node1/cpulist", "8-15\n")
        .file("proc/self/status", "Name:\tx\nMems_allowed_list:\t0-1\n");
    assert_eq!(
        latency::check_numa_latency(&sys, 3, Some("mlx5_0")),
        finding(
            Level::Fail,
            "numa",
            "CPU 3 is not on mlx5_0's NUMA node 1 (CPUs 8-15): every DMA and doorbell crosses \
             the interconnect",
            Some("poll on a CPU of node 1, e.g. CPU 8")
        )
    );
    assert_eq!(
        latency::check_numa_latency(&sys, 9, Some("mlx5_0")),
        finding(
            Level::Warn,
            "numa",
            "CPU 9 on mlx5_0's node 1; memory may come from nodes 0-1",
            Some("numactl --cpunodebind=1 --membind=1 <engine>")
        )
    );
    t.file("proc/self/status", "Name:\tx\nMems_allowed_list:\t1\n");
    assert_eq!(
        latency::check_numa_latency(&sys, 9, Some("mlx5_0")),
        finding(
            Level::Ok,
            "numa",
            "CPU 9 and the process's memory on mlx5_0's NUMA node 1",
            None
        )
    );
}

#[test]
fn latency_smt_thp_and_swap() {
    let t = Tree::new("lat-mem");
    let sys = t.sys();
    assert_eq!(check_smt(&sys, "", 2).level, Level::Skip);
    t.file(
        "sys/devices/system/cpu/cpu2/topology/thread_siblings_list",
        "2,6\n",
    )
    .file(
        "sys/devices/system/cpu/cpu3/topology/thread_siblings_list",
        "3\n",
    );
    assert_eq!(
        check_smt(&sys, "", 2),
        finding(
            Level::Warn,
            "smt sibling",
            "CPU 2's SMT sibling 6 is online and not isolated: it shares the core",
            Some("echo 0 > /sys/devices/system/cpu/cpu6/online (or kernel parameter nosmt)")
        )
    );
    assert_eq!(
        check_smt(&sys, "isolcpus=2,6", 2).saw,
        "CPU 2's SMT sibling 6 online and isolated"
    );
    assert_eq!(check_smt(&sys, "isolcpus=2,6", 2).level, Level::Ok);
    t.file("sys/devices/system/cpu/cpu6/online", "0\n");
    assert_eq!(
        check_smt(&sys, "", 2),
        finding(
            Level::Ok,
            "smt sibling",
            "CPU 2 has no online SMT sibling",
            None
        )
    );
    assert_eq!(check_smt(&sys, "", 3).level, Level::Ok);

    let thp = "sys/kernel/mm/transparent_hugepage";
    assert_eq!(check_thp(&sys).level, Level::Skip);
    t.file(&format!("{thp}/enabled"), "[always] madvise never\n")
        .file(
            &format!("{thp}/defrag"),
            "always defer defer+madvise [madvise] never\n",
        );
    assert_eq!(
        check_thp(&sys),
        finding(
            Level::Warn,
            "thp",
            "enabled always, defrag madvise: khugepaged and page faults may stall on compaction",
            Some(
                "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled (or kernel \
                 parameter transparent_hugepage=madvise)"
            )
        )
    );
    t.file(&format!("{thp}/enabled"), "always [madvise] never\n")
        .file(
            &format!("{thp}/defrag"),
            "[always] defer defer+madvise madvise never\n",
        );
    assert_eq!(
        check_thp(&sys).fix.as_deref(),
        Some("echo defer+madvise > /sys/kernel/mm/transparent_hugepage/defrag")
    );
    t.file(
        &format!("{thp}/defrag"),
        "always defer [defer+madvise] madvise never\n",
    );
    assert_eq!(
        check_thp(&sys),
        finding(
            Level::Ok,
            "thp",
            "enabled madvise, defrag defer+madvise",
            None
        )
    );
    t.file(&format!("{thp}/khugepaged/defrag"), "1\n");
    assert_eq!(
        check_thp(&sys),
        finding(
            Level::Warn,
            "thp",
            "enabled madvise, defrag defer+madvise, khugepaged defrag 1: khugepaged compacts \
             memory to collapse huge pages",
            Some("echo 0 > /sys/kernel/mm/transparent_hugepage/khugepaged/defrag")
        )
    );
    t.file(&format!("{thp}/khugepaged/defrag"), "0\n");
    assert_eq!(check_thp(&sys).level, Level::Ok);

    assert_eq!(check_swap(&sys).level, Level::Skip);
    let header = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n";
    t.file("proc/swaps", header);
    assert_eq!(
        check_swap(&sys),
        finding(Level::Ok, "swap", "no swap", None)
    );
    t.file(
        "proc/swaps",
        &format!("{header}/dev/sda2  partition\t8388604\t\t0\t\t-2\n"),
    );
    assert_eq!(
        check_swap(&sys),
        finding(
            Level::Warn,
            "swap",
            "swap on /dev/sda2: an idle page of the engine may be swapped out and fault back \
             in on the hot path",
            Some("swapoff -a, or mlockall(MCL_CURRENT | MCL_FUTURE) in the engine")
        )
    );
}

#[test]
fn latency_walk_default_cpu_and_verdict() {
    let t = Tree::new("lat-walk");
    let sys = t.sys();
    t.file("proc/cmdline", "ro isolcpus=3 nohz_full=3 -- isolcpus=1")
        .file("proc/irq/5/smp_affinity_list", "0\n")
        .file("proc/sys/kernel/timer_migration", "0\n")
        .file("proc/sys/kernel/nmi_watchdog", "0\n")
        .file("proc/sys/kernel/watchdog", "0\n")
        .file("proc/sys/vm/stat_interval", "10\n")
        .file("proc/swaps", "Filename Type Size Used Priority\n")
        .file(
            "sys/devices/system/cpu/cpu3/cpufreq/scaling_governor",
            "performance\n",
        )
        .file("sys/devices/system/cpu/cpufreq/boost", "0\n")
        .file(
            "sys/devices/system/cpu/cpu3/topology/thread_siblings_list",
            "3\n",
        )
        .file(
            "sys/kernel/mm/transparent_hugepage/enabled",
            "always [madvise] never\n",
        )
        .file("sys/class/infiniband/mlx5_0/device/local_cpulist", "0-3\n")
        .file("sys/class/infiniband/mlx5_0/device/msi_irqs/5", "msix");
    let f = latency::check_latency(&sys, 3, Some("mlx5_0"), &host());
    let names: Vec<&str> = f.iter().map(|f| f.check).collect();
    assert_eq!(
        names,
        [
            "isolcpus",
            "nohz_full",
            "rcu_nocbs",
            "irq affinity",
            "irqbalance",
            "timer migration",
            "watchdogs",
            "vmstat interval",
            "governor",
            "c-states",
            "smt sibling",
            "numa",
            "thp",
            "swap",
            "memlock"
        ]
    );
    let levels: Vec<Level> = f.iter().map(|f| f.level).collect();
    use Level::*;
    assert_eq!(
        levels,
        [Ok, Ok, Ok, Ok, Ok, Ok, Ok, Ok, Ok, Skip, Ok, Skip, Ok, Ok, Ok],
        "{f:#?}"
    );
    assert_eq!(
        latency::latency_verdict(3, &f),
        "CPU 3 is ready for a polling loop"
    );
    // CPU 0: the NIC's IRQ 5 goes there (the FAIL comes first in the verdict, after warns).
    let f0 = latency::check_latency(&sys, 0, Some("mlx5_0"), &host());
    assert_eq!(f0[0].level, Warn);
    assert_eq!(
        latency::latency_verdict(0, &f0),
        "CPU 0 is not ready: first fix irq affinity: for IRQ in 5; do echo <the other CPUs> > \
         /proc/irq/$IRQ/smp_affinity_list; done"
    );

    // The device's local CPUs, not 0 when there is a choice; else the last allowed CPU.
    assert_eq!(
        latency::default_cpu(&sys, Some("mlx5_0"), &[0, 1, 2]),
        Some(1)
    );
    assert_eq!(latency::default_cpu(&sys, Some("mlx5_0"), &[0]), Some(0));
    assert_eq!(latency::default_cpu(&sys, None, &[0, 1, 2]), Some(2));
    assert_eq!(latency::default_cpu(&sys, Some("nope"), &[4, 5]), Some(5));
    assert_eq!(latency::default_cpu(&sys, None, &[]), None);
}
