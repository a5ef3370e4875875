//! The sweep's other modes end to end: `--latency`, `--report`, UD SEND and several QPs,
//! 4 KiB payloads, measuring threads side by side.

use super::*;

/// `--latency`: one request at a time, batch 1, every request signaled, for both doorbell
/// modes and both payloads. Per message by hand: the 8-byte doorbell is one 8-byte MMIO
/// write and the NIC reads the WQE (1 read); BlueFlame is one 64-byte chunk and no WQE read;
/// one CQE each; a gathered payload one payload read, an inline one none. The summary sets
/// BlueFlame against the doorbell: one WQE read less per message.
fn latency(provider: &str) {
    let d = scratch(&format!("lat-{provider}"));
    let js = d.join("l.json");
    let (code, out, err) = batching(&[
        "--provider",
        provider,
        "--latency",
        "-l",
        "1,8",
        "-Q",
        "16",
        "-p",
        "inline,sge",
        "-r",
        "3",
        "-w",
        "1",
        "-n",
        "64",
        "--json",
        js.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("latency (one request at a time"), "{out}");
    assert_eq!(
        out.matches("bf-single - db8:").count(),
        2,
        "one comparison per payload: {out}"
    );
    assert!(
        out.contains("BlueFlame moves -1 WQE read(s) per message"),
        "{out}"
    );
    let v = parse(&std::fs::read_to_string(&js).unwrap()).expect("valid JSON");
    let Some(Value::Arr(configs)) = v.get("configs") else {
        panic!("no configs: {v:?}");
    };
    assert_eq!(configs.len(), 4, "2 modes x 2 payloads: {configs:?}");
    for c in configs {
        assert_eq!(c.get("signal").and_then(Value::as_str), Some("1"));
        let mode = c.get("mode").and_then(Value::as_str).unwrap();
        let inline = c.get("payload").and_then(Value::as_str) == Some("inline");
        let Some(Value::Arr(pts)) = c.get("points") else {
            panic!("no points: {c:?}");
        };
        assert_eq!(pts.len(), 1, "batch 1 only: {pts:?}");
        assert_eq!(pts[0].get("batch").and_then(Value::as_u64), Some(1));
        let k = pts[0]
            .get("pcie")
            .and_then(|p| p.get("per_message"))
            .expect("PCIe counts");
        let f = |key: &str| k.get(key).and_then(Value::as_f64).unwrap();
        let bf = mode == "bf-single";
        assert_eq!(f("mmio_doorbell_8B"), if bf { 0.0 } else { 1.0 }, "{mode}");
        assert_eq!(
            f("mmio_blueflame_64B"),
            if bf { 1.0 } else { 0.0 },
            "{mode}"
        );
        assert_eq!(f("wqe_dma_reads"), if bf { 0.0 } else { 1.0 }, "{mode}");
        assert_eq!(
            f("payload_dma_reads"),
            if inline { 0.0 } else { 1.0 },
            "{mode}"
        );
        assert_eq!(f("cqe_dma_writes"), 1.0, "{mode}");
    }
}

#[test]
fn plain_latency_sets_blueflame_against_the_doorbell() {
    latency("plain");
}

#[test]
fn sim_latency_sets_blueflame_against_the_doorbell() {
    latency("sim");
}

/// `--report DIR`: DIR holds the JSON (the same document `--json` writes), the SVG and a
/// Markdown summary with its sections, one table per configuration with one row per batch,
/// the fitted model and the caveat that plain memory is not hardware.
#[test]
fn report_writes_json_svg_and_a_summary() {
    let d = scratch("report");
    let dir = d.join("out");
    let (code, out, err) = batching(&[
        "-l",
        "1,4",
        "-m",
        "db8",
        "-Q",
        "1,4",
        "-r",
        "3",
        "-w",
        "1",
        "-n",
        "64",
        "--report",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("report: "), "{out}");
    let v = parse(&std::fs::read_to_string(dir.join("batching.json")).unwrap()).expect("JSON");
    assert_eq!(v.get("provider").and_then(Value::as_str), Some("plain"));
    let svg = std::fs::read_to_string(dir.join("batching.svg")).unwrap();
    assert!(
        svg.starts_with("<svg") || svg.starts_with("<?xml"),
        "{svg:.80}"
    );
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    for section in [
        "## Setup",
        "## Host",
        "## Results",
        "## Model",
        "## Caveats",
    ] {
        assert!(md.contains(section), "{section}: {md}");
    }
    assert_eq!(md.matches("\n### db8, ").count(), 2, "{md}");
    let rows = md
        .lines()
        .filter(|l| l.starts_with("| 1 |") || l.starts_with("| 4 |"))
        .count();
    assert_eq!(rows, 4, "{md}");
    assert!(md.contains("Least-squares fit"), "{md}");
    let tool = md
        .lines()
        .find(|l| l.starts_with("- Tool: "))
        .expect("a tool line");
    let commit = tool.rsplit_once(", commit ").expect("the commit").1;
    match git_describe() {
        Some(d) => assert_eq!(undirty(commit), undirty(&d), "{tool}"),
        None => assert_eq!(commit, "unknown", "{tool}"),
    }
    assert!(md.contains("not hardware"), "{md}");
    // A report directory that cannot be made is refused before anything is measured.
    let file = d.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let (code, out, err) = batching(&["--report", file.join("sub").to_str().unwrap()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("--report"), "{err}");
    assert!(!out.contains("ns/WQE"), "{out}");
}

/// UD SEND and two QPs on the sim: one config per operation, and the CQEs the device wrote
/// per request show that each QP signals by its own count. By hand, 256 requests per sample
/// in batches of 1 or 4 alternating between 2 QPs: 128 per QP, signaled at its 100th and
/// (always) its last: 2 per QP, 4 per sample = 4/256 CQEs per request (one QP would make 3:
/// the 100th, 200th and 256th). Every point carries PCIe counts; a UD SEND of 8 inline
/// bytes is ctrl 16 + datagram 48 + inline 16 = 80 bytes, two WQEBBs (the WRITE one), and
/// the receiver takes each datagram: one receive WQE read, the 40-byte GRH and 8 payload
/// bytes written, one CQE (the sweep itself fails if a datagram does not arrive).
#[test]
fn sim_runs_ud_send_and_two_qps() {
    let d = scratch("ud");
    let js = d.join("u.json");
    let (code, out, err) = batching(&[
        "--provider",
        "sim",
        "-o",
        "write,ud-send",
        "--qps",
        "2",
        "-l",
        "1,4",
        "-m",
        "db8",
        "-Q",
        "100",
        "-r",
        "2",
        "-w",
        "1",
        "-n",
        "256",
        "--json",
        js.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("RDMA WRITE, RC / SEND, UD, 2 QPs"), "{out}");
    assert!(out.contains("| UD SEND inline 8 B |"), "{out}");
    let v = parse(&std::fs::read_to_string(&js).unwrap()).expect("valid JSON");
    assert_eq!(v.get("qps").and_then(Value::as_u64), Some(2));
    let Some(Value::Arr(configs)) = v.get("configs") else {
        panic!("no configs: {v:?}");
    };
    let ops: Vec<&str> = configs
        .iter()
        .map(|c| c.get("op").and_then(Value::as_str).unwrap())
        .collect();
    assert_eq!(ops, ["write", "ud-send"]);
    for c in configs {
        let ud = c.get("op").and_then(Value::as_str) == Some("ud-send");
        let Some(Value::Arr(pts)) = c.get("points") else {
            panic!("no points: {c:?}");
        };
        assert_eq!(pts.len(), 2);
        for p in pts {
            // The device's CQEs: the sender's, and for UD one per datagram received.
            let cqes = p.get("device_cqes_per_wqe").and_then(Value::as_f64);
            let recvd = if ud { 1.0 } else { 0.0 };
            assert_eq!(cqes, Some(4.0 / 256.0 + recvd), "{p:?}");
            let per = p
                .get("pcie")
                .and_then(|x| x.get("per_message"))
                .expect("PCIe counts on every point");
            let f = |k: &str| per.get(k).and_then(Value::as_f64).unwrap();
            let b = p.get("batch").and_then(Value::as_f64).unwrap();
            // db8: every WQEBB of a batch fetched, in one read per doorbell.
            assert_eq!(f("wqe_dma_reads"), 1.0 / b, "{p:?}");
            assert_eq!(
                f("wqe_dma_read_wqebbs"),
                if ud { 2.0 } else { 1.0 },
                "{p:?}"
            );
            let (recv, bytes) = if ud { (1.0, 48.0) } else { (0.0, 8.0) };
            assert_eq!(f("responder_recv_wqe_reads"), recv, "{p:?}");
            assert_eq!(f("responder_cqe_writes"), recv, "{p:?}");
            assert_eq!(f("responder_payload_bytes"), bytes, "{p:?}");
        }
    }
}

/// A 4 KiB gathered WRITE on plain memory and the sim: the payload fetched and written per
/// message is 4096 bytes, by hand.
#[test]
fn four_kib_payloads_run() {
    for provider in ["plain", "sim"] {
        let d = scratch(&format!("4k-{provider}"));
        let js = d.join("k.json");
        let (code, out, err) = batching(&[
            "--provider",
            provider,
            "-p",
            "sge",
            "-s",
            "4096",
            "-l",
            "1,64",
            "-m",
            "db8",
            "-Q",
            "1",
            "-r",
            "2",
            "-w",
            "1",
            "-n",
            "128",
            "--json",
            js.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
        let v = parse(&std::fs::read_to_string(&js).unwrap()).expect("valid JSON");
        let Some(Value::Arr(configs)) = v.get("configs") else {
            panic!("no configs: {v:?}");
        };
        let Some(Value::Arr(pts)) = configs[0].get("points") else {
            panic!("no points");
        };
        assert_eq!(pts.len(), 2);
        for p in pts {
            let k = p.get("pcie").and_then(|x| x.get("per_message")).unwrap();
            let f = |key: &str| k.get(key).and_then(Value::as_f64).unwrap();
            assert_eq!(f("payload_dma_read_bytes"), 4096.0, "{p:?}");
            assert_eq!(f("responder_payload_bytes"), 4096.0, "{p:?}");
        }
    }
}

/// CPUs this test process may run on (the binary inherits the mask).
fn allowed_cpus() -> usize {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = s
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string();
    list.split(',')
        .map(|r| match r.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
            None => 1,
        })
        .sum()
}

/// `--threads 2` on plain memory and the sim: the JSON holds each thread's points, each
/// thread pinned to a CPU of its own, and the total is the sum of the threads' median Mpps
/// per point (arithmetic, not timing). Where fewer than 2 CPUs are allowed, the sweep is
/// refused with a message naming --threads.
#[test]
fn threads_run_side_by_side() {
    for provider in ["plain", "sim"] {
        let d = scratch(&format!("threads-{provider}"));
        let js = d.join("t.json");
        let (code, out, err) = batching(&[
            "--provider",
            provider,
            "--threads",
            "2",
            "-l",
            "1,4",
            "-m",
            "db8",
            "-Q",
            "4",
            "-r",
            "2",
            "-w",
            "1",
            "-n",
            "64",
            "--json",
            js.to_str().unwrap(),
        ]);
        if allowed_cpus() < 2 {
            assert_eq!(code, 1, "{out}{err}");
            assert!(err.contains("--threads 2"), "{err}");
            continue;
        }
        assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
        assert!(out.contains("2 measuring threads"), "{out}");
        let v = parse(&std::fs::read_to_string(&js).unwrap()).expect("valid JSON");
        assert_eq!(v.get("threads").and_then(Value::as_u64), Some(2));
        let Some(Value::Arr(threads)) = v.get("per_thread") else {
            panic!("no per_thread: {v:?}");
        };
        assert_eq!(threads.len(), 2);
        let cpus: Vec<u64> = threads
            .iter()
            .map(|t| t.get("cpu").and_then(Value::as_u64).expect("pinned"))
            .collect();
        assert_ne!(cpus[0], cpus[1], "{cpus:?}");
        // Thread 0's points are the main table's.
        let Some(Value::Arr(configs)) = v.get("configs") else {
            panic!("no configs");
        };
        let Some(Value::Arr(main)) = configs[0].get("points") else {
            panic!("no points");
        };
        let mpps = |t: &Value, i: usize| -> f64 {
            let Some(Value::Arr(cs)) = t.get("configs") else {
                panic!("no configs: {t:?}");
            };
            let Some(Value::Arr(ps)) = cs[0].get("points") else {
                panic!("no points");
            };
            assert_eq!(ps.len(), 2);
            assert_eq!(ps[i].get("samples").and_then(Value::as_u64), Some(2));
            ps[i].get("mpps").and_then(Value::as_f64).unwrap()
        };
        let Some(Value::Arr(total)) = v.get("total") else {
            panic!("no total: {v:?}");
        };
        assert_eq!(total.len(), 1);
        let Some(Value::Arr(tp)) = total[0].get("points") else {
            panic!("no total points");
        };
        for (i, b) in [1u64, 4].into_iter().enumerate() {
            assert_eq!(tp[i].get("batch").and_then(Value::as_u64), Some(b));
            let sum = mpps(&threads[0], i) + mpps(&threads[1], i);
            let got = tp[i].get("mpps").and_then(Value::as_f64).unwrap();
            assert!((got - sum).abs() <= 1e-9 * sum, "{got} vs {sum}");
            let m = main[i].get("mpps").and_then(Value::as_f64).unwrap();
            assert_eq!(m, mpps(&threads[0], i));
        }
        let _ = std::fs::remove_dir_all(&d);
    }
    for bad in ["0", "65"] {
        let (code, out, err) = batching(&["--threads", bad]);
        assert_eq!(code, 2, "{out}{err}");
        assert!(err.contains("--threads"), "{err}");
    }
}
