//! The rungs, per provider: the mlx5 ladder on an mlx5 device, the same data rungs on the
//! sim (no libraries, no thread domains) and on the verbs provider (the mlx5-only rungs
//! not applicable).

use std::time::Duration;

use crate::clock::TimestampKind;
use crate::control::{Context, Device, PortState};
use crate::providers::helpers::Stall;
use crate::providers::mlx5::{DoorbellMode, Mlx5Cq, Mlx5Device, Mlx5Qp, Owners};
use crate::providers::sim::SimDevice;
use crate::providers::verbs::VerbsDevice;
use crate::providers::{
    Access, Completion, CompletionQueue, ConnectOpts, MemoryRegion, Pages, Provider, ProviderKind,
    QpConfig, QpType, QueuePair, RecvQueue, RecvWr, RegisteredBuf, SendQueue, SendWr, WcOpcode,
};

use super::{dv, Failed, Ladder};

/// How long a rung waits for its completions.
const WAIT: Duration = Duration::from_secs(5);

/// Climb the ladder on `kind` (the device `dev`; none for the sim).
pub(super) fn climb(l: &mut Ladder, kind: ProviderKind, dev: Option<&str>, gid: Option<u8>) {
    match (kind, dev) {
        (ProviderKind::Mlx5, Some(d)) => mlx5(l, d, gid),
        (ProviderKind::Verbs, Some(d)) => verbs(l, d, gid),
        _ => sim(l),
    }
}

/// The ladder for a device that is not there (`-d mlx5_0` on a host without it): libibverbs
/// loaded, then the list rung failing with `why` (the one "no RDMA device" diagnosis).
pub(super) fn missing(l: &mut Ladder, why: &str) {
    l.rung(
        "load libraries",
        "libibverbs.so.1 loads and exports every entry point used",
        || loaded(false),
    );
    l.rung::<()>("list", E_LIST, || Err(why.to_string()));
}

const E_LOAD: &str = "libibverbs.so.1 and libmlx5.so.1 load and export every entry point used";
const E_LIST: &str = "ibv_get_device_list names the device";
const E_OPEN: &str = "ibv_open_device, mlx5dv_is_supported true, mlx5dv_query_device 0";
const E_PORT: &str = "port 1 ACTIVE with an active MTU, a non-zero GID at the index used";
const E_TD: &str = "a thread domain and a parent domain (mlx5 only)";
const E_DVQP: &str = "mlx5dv_create_qp (mlx5 only)";
const E_SANITY: &str = "mlx5dv_init_obj's rings, strides, dbrec, bfreg (mlx5 only)";

/// libibverbs (and with `mlx5` libmlx5) loaded with every entry point; says which files.
fn loaded(mlx5: bool) -> Result<((), String), Failed> {
    crate::control::loaded_libraries(mlx5)
        .map(|v| ((), v.join(", ")))
        .map_err(|e| e.to_string())
}

fn listed(dev: &str) -> Result<((), String), Failed> {
    let names: Vec<String> = Device::list()
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|d| d.name)
        .collect();
    if names.iter().any(|n| n == dev) {
        Ok((
            (),
            format!("{} device(s): {}", names.len(), names.join(", ")),
        ))
    } else {
        Err(format!("'{dev}' not in the list ({})", names.join(", ")))
    }
}

/// Port 1 and the GID to self-connect through (the given index, or the first non-zero).
fn port_and_gid(ctx: &Context, gid: Option<u8>) -> Result<(u8, String), Failed> {
    let p = ctx.query_port(1).map_err(|e| e.to_string())?;
    if p.state != PortState::Active {
        return Err(format!(
            "port 1 is {:?}, not ACTIVE (cable? link partner?)",
            p.state
        ));
    }
    let mtu = p
        .active_mtu()
        .ok_or_else(|| "port 1 has no active MTU".to_string())?;
    let pick = match gid {
        Some(i) => i,
        None => (0..=255u8)
            .take(usize::try_from(p.gid_tbl_len).unwrap_or(0).min(256))
            .find(|&i| {
                ctx.query_gid(1, u32::from(i))
                    .map(|g| !g.is_zero())
                    .unwrap_or(false)
            })
            .ok_or_else(|| {
                "no non-zero GID on port 1 (no IP address on the netdev?)".to_string()
            })?,
    };
    let g = ctx
        .query_gid(1, u32::from(pick))
        .map_err(|e| e.to_string())?;
    if g.is_zero() {
        return Err(format!("GID index {pick} is zero"));
    }
    Ok((
        pick,
        format!(
            "port 1 ACTIVE, MTU {}, GID[{pick}] {}",
            mtu.bytes(),
            std::net::Ipv6Addr::from(g.0)
        ),
    ))
}

fn mlx5(l: &mut Ladder, name: &str, gid: Option<u8>) {
    l.rung("load libraries", E_LOAD, || loaded(true));
    l.rung("list", E_LIST, || listed(name));
    let Some(mut p) = l.rung("open", E_OPEN, || {
        Mlx5Device::open(name)
            .map(|p| (p, "an mlx5 device (libmlx5 claims it)".to_string()))
            .map_err(|e| e.to_string())
    }) else {
        return;
    };
    let Some(gid_index) = l.rung("port and GID", E_PORT, || port_and_gid(p.context(), gid)) else {
        return;
    };
    let opts = ConnectOpts {
        gid_index,
        retry_cnt: 3,
        rnr_retry: 3,
        ..ConnectOpts::default()
    };
    // The raw mlx5 rungs sit between CQ and the self-loop; see `data_rungs`.
    let mut raw = None;
    let bed = data_rungs(l, &mut p, &opts, |l, p| {
        let (r, bf_size) = dv::rungs(l, p)?;
        raw = Some(r);
        Some(Some(bf_size))
    });
    let Some(bed) = bed else { return };
    l.rung(
        "timestamps and clock page",
        "a CQ with device timestamps (free-running, converted with mlx5dv_get_clock_info's \
         page; else real-time) stamps an inline WRITE",
        || {
            let kind = TimestampKind::FreeRunning;
            let cq = match p.create_cq_ts(256, kind) {
                Ok(cq) => cq,
                Err(_) => p
                    .create_cq_ts(256, TimestampKind::RealTime)
                    .map_err(|e| e.to_string())?,
            };
            stamped_write(&mut p, &bed, cq, &opts)
        },
    );
    l.rung(
        "arm and wake",
        "the CQ armed by hand through its UAR raises a completion-channel event that wakes a \
         sleeping waiter",
        || {
            let ch = crate::control::CompChannel::new(p.context()).map_err(|e| e.to_string())?;
            let (mut cq, mut waiter) = p.create_cq_waiter(256, &ch).map_err(|e| e.to_string())?;
            let qp = self_connected(&mut p, &bed, &mut cq, &opts)?;
            wake(qp, &bed, |cq, out| waiter.wait(cq, out), &mut cq)?;
            Ok((
                (),
                format!("slept {} time(s) on the channel", waiter.sleeps()),
            ))
        },
    );
    drop(bed);
    if let Some(r) = raw {
        dv::teardown(l, r);
    }
}

fn sim(l: &mut Ladder) {
    l.not_applicable(
        "load libraries",
        E_LOAD,
        "the software device needs no library",
    );
    l.not_applicable(
        "list",
        E_LIST,
        "the software device is not listed by libibverbs",
    );
    let Some(mut p) = l.rung(
        "open",
        "a software mlx5 device with its device thread",
        || {
            let mut p = SimDevice::new();
            p.start_device_thread().map_err(|e| e.to_string())?;
            Ok((p, "sim0, device thread running".to_string()))
        },
    ) else {
        return;
    };
    l.not_applicable("port and GID", E_PORT, "one port, one GID (sim)");
    let opts = ConnectOpts::default();
    let Some(bed) = data_rungs(l, &mut p, &opts, |l, _| {
        for (n, e) in [
            ("thread and parent domain", E_TD),
            ("DV QP", E_DVQP),
            ("init_obj sanity", E_SANITY),
        ] {
            l.not_applicable(n, e, "the sim hands out its descriptors itself");
        }
        Some(Some(crate::wire::MLX5_BF_SIZE))
    }) else {
        return;
    };
    l.rung(
        "timestamps and clock page",
        "a CQ with device timestamps (the sim clock, its clock-info page) stamps a WRITE",
        || {
            let cq = p
                .create_cq_ts(256, TimestampKind::FreeRunning)
                .map_err(|e| e.to_string())?;
            stamped_write(&mut p, &bed, cq, &opts)
        },
    );
    l.rung(
        "arm and wake",
        "the CQ armed through its UAR raises a channel event that wakes a sleeping waiter",
        || {
            let ch = p.create_comp_channel().map_err(|e| e.to_string())?;
            let mut cq = p.create_cq(256).map_err(|e| e.to_string())?;
            let mut waiter = p.cq_waiter(&cq, ch).map_err(|e| e.to_string())?;
            let qp = self_connected(&mut p, &bed, &mut cq, &opts)?;
            wake(qp, &bed, |cq, out| waiter.wait(cq, out), &mut cq)?;
            Ok((
                (),
                format!("slept {} time(s) on the channel", waiter.sleeps()),
            ))
        },
    );
    l.not_applicable(
        "teardown",
        "libmlx5's destroy order (mlx5 only)",
        "no libmlx5 objects",
    );
}

fn verbs(l: &mut Ladder, name: &str, gid: Option<u8>) {
    l.rung(
        "load libraries",
        "libibverbs.so.1 loads and exports every entry point used",
        || loaded(false),
    );
    l.rung("list", E_LIST, || listed(name));
    let Some(mut p) = l.rung("open", "ibv_open_device", || {
        VerbsDevice::open(name)
            .map(|p| {
                (
                    p,
                    "not an mlx5 device: the verbs provider runs the ladder".to_string(),
                )
            })
            .map_err(|e| e.to_string())
    }) else {
        return;
    };
    let Some(gid_index) = l.rung("port and GID", E_PORT, || port_and_gid(p.context(), gid)) else {
        return;
    };
    let opts = ConnectOpts {
        gid_index,
        retry_cnt: 3,
        rnr_retry: 3,
        ..ConnectOpts::default()
    };
    let why = "mlx5 only (this device is driven through libibverbs' own post/poll)";
    let Some(_bed) = data_rungs(l, &mut p, &opts, |l, _| {
        for (n, e) in [
            ("thread and parent domain", E_TD),
            ("DV QP", E_DVQP),
            ("init_obj sanity", E_SANITY),
        ] {
            l.not_applicable(n, e, why);
        }
        Some(None)
    }) else {
        return;
    };
    l.not_applicable(
        "timestamps and clock page",
        "mlx5 CQE timestamps",
        "the verbs provider reads no CQE timestamps",
    );
    l.not_applicable("arm and wake", "the mlx5 arm through the UAR", why);
    l.not_applicable("teardown", "libmlx5's destroy order", why);
}

/// What the data rungs share: a registered buffer, one CQ and a self-connected RC QP.
/// Fields drop in order: the QP before its CQ, the registered buffer before its PD.
struct Bed<P: Provider> {
    qp: P::Qp,
    cq: P::Cq,
    buf: RegisteredBuf<P::Mr>,
    pd: P::Pd,
}

/// Doorbell modes, where the provider has them (the mlx5 hot path, on hardware or the sim).
trait Modes: Provider {
    fn set_mode(_qp: &mut Self::Qp, _m: DoorbellMode) -> bool {
        false
    }
}
impl Modes for Mlx5Device {
    fn set_mode(qp: &mut Mlx5Qp<Mlx5Device>, m: DoorbellMode) -> bool {
        qp.set_doorbell_mode(m);
        true
    }
}
impl Modes for SimDevice {
    fn set_mode(qp: &mut Mlx5Qp<SimDevice>, m: DoorbellMode) -> bool {
        qp.set_doorbell_mode(m);
        true
    }
}
impl Modes for VerbsDevice {}

fn poll<P: Provider>(p: &mut P, cq: &mut P::Cq, n: usize) -> Result<Vec<Completion>, Failed> {
    let mut got = Vec::new();
    let mut stalled = Stall::new(WAIT);
    let mut out = [Completion::EMPTY; 8];
    while got.len() < n {
        p.progress();
        let k = cq.poll(&mut out);
        got.extend_from_slice(&out[..k]);
        if k > 0 {
            stalled.progressed();
            continue;
        }
        stalled
            .idle("selftest", || {
                format!("{} of {n} completion(s)", n - got.len())
            })
            .map_err(|e| format!("{e}: the device did not execute the WQE (no doorbell seen?)"))?;
    }
    if let Some(c) = got.iter().find(|c| !c.is_ok()) {
        return Err(format!(
            "completion wr_id {} failed: {} (vendor_err {:#x})",
            c.wr_id, c.status, c.vendor_err
        ));
    }
    Ok(got)
}

fn expect_op(c: &Completion, op: WcOpcode, len: u32, qpn: u32) -> Result<(), Failed> {
    if c.opcode != op || c.byte_len != len || c.qp_num != qpn {
        return Err(format!(
            "CQE of wr_id {}: opcode {:?} byte_len {} qpn {:#x}, expected {:?} {} {:#x}",
            c.wr_id, c.opcode, c.byte_len, c.qp_num, op, len, qpn
        ));
    }
    Ok(())
}

/// PD/MR, CQ, then `mid` (the mlx5 rungs; returns `bf.size`, `None` where BlueFlame does not
/// apply), then the self-loop and the operations through it.
fn data_rungs<P: Modes>(
    l: &mut Ladder,
    p: &mut P,
    opts: &ConnectOpts,
    mid: impl FnOnce(&mut Ladder, &P) -> Option<Option<u32>>,
) -> Option<Bed<P>> {
    let (pd, buf) = l.rung(
        "PD and MR",
        "ibv_alloc_pd, ibv_reg_mr of 64 KiB (local write, remote read/write/atomic)",
        || {
            let pd = p.alloc_pd().map_err(|e| e.to_string())?;
            let buf = p
                .alloc_buf(&pd, 64 << 10, Access::ALL, Pages::Normal)
                .map_err(|e| e.to_string())?;
            let seen = format!("lkey {:#x}", buf.lkey());
            Ok(((pd, buf), seen))
        },
    )?;
    let mut cq = l.rung("CQ", "a CQ of 256 entries", || {
        p.create_cq(256)
            .map(|c| (c, "256 entries".to_string()))
            .map_err(|e| e.to_string())
    })?;
    let bf_size = mid(l, p)?;
    let qp = l.rung(
        "RESET to RTS",
        "an RC QP connected to itself: RESET, INIT, RTR, RTS",
        || {
            let mut qp = p
                .create_qp(&pd, &mut cq, None, None, &QpConfig::new(QpType::Rc))
                .map_err(|e| e.to_string())?;
            let me = p.endpoint(&qp, opts).map_err(|e| e.to_string())?;
            p.connect(&mut qp, &me, &me, opts)
                .map_err(|e| e.to_string())?;
            let seen = format!("QPN {:#x} in RTS", qp.qpn());
            Ok((qp, seen))
        },
    )?;
    let qpn = qp.qpn();
    let mut b: Bed<P> = Bed { qp, cq, buf, pd };
    let mut all: Vec<Completion> = Vec::new();
    let base = b.buf.addr();
    let rkey = b.buf.rkey();
    l.rung(
        "WRITE, doorbell",
        "one inline RDMA WRITE rung with the 8-byte doorbell (verbs: one ibv_post_send) lands byte for byte",
        || {
            let db = P::set_mode(&mut b.qp, DoorbellMode::Doorbell);
            let data = *b"first light, 8B";
            b.qp.sq()
                .post_and_ring(SendWr::write(1, &[], base, rkey).inline(&data).signaled())
                .map_err(|e| format!("post: {e}"))?;
            let c = poll(p, &mut b.cq, 1)?;
            expect_op(&c[0], WcOpcode::RdmaWrite, 0, qpn)
                .or_else(|_| expect_op(&c[0], WcOpcode::RdmaWrite, data.len() as u32, qpn))?;
            all.extend_from_slice(&c);
            if b.buf.as_slice()[..data.len()] != data {
                return Err(format!(
                    "the CQE came but the bytes did not: {:?}",
                    &b.buf.as_slice()[..16]
                ));
            }
            Ok((
                (),
                if db {
                    "8-byte doorbell"
                } else {
                    "ibv_post_send"
                }
                .to_string(),
            ))
        },
    )?;
    match bf_size {
        None => l.not_applicable(
            "WRITE, BlueFlame",
            "one WQE copied through the BlueFlame register",
            "mlx5 only",
        ),
        Some(0) => l.not_applicable(
            "WRITE, BlueFlame",
            "one WQE copied through the BlueFlame register",
            "bf.size 0: libmlx5 gave this QP's bfreg no BlueFlame (doorbell only; fine, a \
             little more latency)",
        ),
        Some(size) => l.rung(
            "WRITE, BlueFlame",
            "one inline RDMA WRITE (ds > 1) copied through the BlueFlame register lands byte \
             for byte",
            || {
                P::set_mode(&mut b.qp, DoorbellMode::BlueFlame);
                let data = [0xbfu8; 48];
                b.qp.sq()
                    .post_and_ring(
                        SendWr::write(2, &[], base + 64, rkey)
                            .inline(&data)
                            .signaled(),
                    )
                    .map_err(|e| format!("post: {e}"))?;
                P::set_mode(&mut b.qp, DoorbellMode::Auto);
                let c = poll(p, &mut b.cq, 1)?;
                all.extend_from_slice(&c);
                if b.buf.as_slice()[64..112] != data {
                    return Err("the CQE came but the bytes did not".into());
                }
                Ok(((), format!("bf.size {size}")))
            },
        )?,
    }
    l.rung(
        "SEND/RECV",
        "an inline SEND into a posted receive: both CQEs, the bytes",
        || {
            let sge = [b.buf.mr().sge(1024, 64)];
            b.qp.rq()
                .post_recv(RecvWr::new(3, &sge))
                .map_err(|e| format!("post_recv: {e}"))?;
            b.qp.rq()
                .try_ring()
                .map_err(|e| format!("post_recv: {e}"))?;
            b.qp.sq()
                .post_and_ring(SendWr::send(4, &[]).inline(b"ping pong ladder").signaled())
                .map_err(|e| format!("post: {e}"))?;
            let c = poll(p, &mut b.cq, 2)?;
            let recv = c.iter().find(|c| c.wr_id == 3).ok_or("no receive CQE")?;
            expect_op(recv, WcOpcode::Recv, 16, qpn)?;
            all.extend_from_slice(&c);
            if &b.buf.as_slice()[1024..1040] != b"ping pong ladder" {
                return Err("the receive CQE came but the bytes did not".into());
            }
            Ok(((), "16 bytes received".to_string()))
        },
    )?;
    l.rung("READ", "an RDMA READ of 16 bytes lands", || {
        b.buf.as_mut_slice()[2048..2064].copy_from_slice(b"read me back....");
        let sge = [b.buf.mr().sge(3072, 16)];
        b.qp.sq()
            .post_and_ring(SendWr::read(5, &sge, base + 2048, rkey).signaled())
            .map_err(|e| format!("post: {e}"))?;
        let c = poll(p, &mut b.cq, 1)?;
        expect_op(&c[0], WcOpcode::RdmaRead, 16, qpn)?;
        all.extend_from_slice(&c);
        if &b.buf.as_slice()[3072..3088] != b"read me back...." {
            return Err("the CQE came but the bytes did not".into());
        }
        Ok(((), "16 bytes read".to_string()))
    })?;
    l.rung(
        "atomics",
        "fetch-and-add then compare-and-swap: old values in host order, the new value in memory",
        || {
            // 8-byte aligned, as atomics need: the buffer is page-aligned.
            let off = 4096;
            b.buf.as_mut_slice()[off..off + 8].copy_from_slice(&10u64.to_ne_bytes());
            let old = [b.buf.mr().sge(off + 64, 8)];
            b.qp.sq()
                .post_and_ring(SendWr::faa(6, &old, base + off as u64, rkey, 5).signaled())
                .map_err(|e| format!("post: {e}"))?;
            let c = poll(p, &mut b.cq, 1)?;
            expect_op(&c[0], WcOpcode::FetchAdd, 8, qpn)?;
            all.extend_from_slice(&c);
            let got =
                u64::from_ne_bytes(b.buf.as_slice()[off + 64..off + 72].try_into().expect("8"));
            let now = u64::from_ne_bytes(b.buf.as_slice()[off..off + 8].try_into().expect("8"));
            if (got, now) != (10, 15) {
                return Err(format!(
                    "fetch-and-add: old {got} (10 expected), now {now} (15)"
                ));
            }
            b.qp.sq()
                .post_and_ring(SendWr::cas(7, &old, base + off as u64, rkey, 15, 99).signaled())
                .map_err(|e| format!("post: {e}"))?;
            let c = poll(p, &mut b.cq, 1)?;
            expect_op(&c[0], WcOpcode::CompSwap, 8, qpn)?;
            all.extend_from_slice(&c);
            let got =
                u64::from_ne_bytes(b.buf.as_slice()[off + 64..off + 72].try_into().expect("8"));
            let now = u64::from_ne_bytes(b.buf.as_slice()[off..off + 8].try_into().expect("8"));
            if (got, now) != (15, 99) {
                return Err(format!(
                    "compare-and-swap: old {got} (15 expected), now {now} (99)"
                ));
            }
            Ok(((), "10 +5 -> 15, cas 15 -> 99".to_string()))
        },
    )?;
    l.rung(
        "CQE fields",
        "every CQE above: its QPN, success, one per request, wr_ids in posting order",
        || {
            let ids: Vec<u64> = all.iter().map(|c| c.wr_id).collect();
            let mut sorted = ids.clone();
            sorted.sort_unstable();
            sorted.dedup();
            if sorted.len() != ids.len() || all.iter().any(|c| c.qp_num != qpn || !c.is_ok()) {
                return Err(format!("{all:?}"));
            }
            Ok(((), format!("{} CQEs", all.len())))
        },
    )?;
    Some(b)
}

/// A new RC QP on `cq`, connected to itself (the Bed's PD).
fn self_connected<P: Provider>(
    p: &mut P,
    bed: &Bed<P>,
    cq: &mut P::Cq,
    opts: &ConnectOpts,
) -> Result<P::Qp, Failed> {
    let mut qp = p
        .create_qp(&bed.pd, cq, None, None, &QpConfig::new(QpType::Rc))
        .map_err(|e| e.to_string())?;
    let me = p.endpoint(&qp, opts).map_err(|e| e.to_string())?;
    p.connect(&mut qp, &me, &me, opts)
        .map_err(|e| e.to_string())?;
    Ok(qp)
}

/// One inline WRITE on a new self-connected QP over the timestamped `cq`; says the CQE's
/// time in ns.
fn stamped_write<D>(
    p: &mut D,
    bed: &Bed<D>,
    mut cq: Mlx5Cq<D>,
    opts: &ConnectOpts,
) -> Result<((), String), Failed>
where
    D: Provider<Cq = Mlx5Cq<D>, Qp = Mlx5Qp<D>> + Owners,
{
    let mut qp = self_connected(p, bed, &mut cq, opts)?;
    qp.sq()
        .post_and_ring(
            SendWr::write(9, &[], bed.buf.addr() + 8192 + 64, bed.buf.rkey())
                .inline(b"stamp")
                .signaled(),
        )
        .map_err(|e| format!("post: {e}"))?;
    let (mut out, mut ns) = ([Completion::EMPTY; 2], [0u64; 2]);
    let mut stalled = Stall::new(WAIT);
    loop {
        p.progress();
        if cq.poll_ts(&mut out, &mut ns) > 0 {
            break;
        }
        stalled
            .idle("selftest", || "1 completion on the timestamped CQ".into())
            .map_err(|e| e.to_string())?;
    }
    if !out[0].is_ok() {
        return Err(format!("completion failed: {}", out[0].status));
    }
    if ns[0] == 0 {
        return Err("the CQE carries no timestamp (0)".into());
    }
    let kind = match cq.clock().map(|c| c.kind()) {
        Some(TimestampKind::FreeRunning) => "free-running",
        Some(TimestampKind::RealTime) => "real-time",
        None => "no",
    };
    Ok(((), format!("{kind} clock, CQE stamped {} ns", ns[0])))
}

/// Post one signaled WRITE from another thread after a pause while `wait` sleeps on `cq`;
/// returns how many times the wait slept.
fn wake<P: Provider, W>(
    mut qp: P::Qp,
    bed: &Bed<P>,
    mut wait: W,
    cq: &mut P::Cq,
) -> Result<(), Failed>
where
    P::Qp: Send + 'static,
    W: FnMut(&mut P::Cq, &mut [Completion]) -> crate::Result<usize>,
{
    let (addr, rkey) = (bed.buf.addr() + 8192, bed.buf.rkey());
    let poster = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        let r = qp
            .sq()
            .post_and_ring(SendWr::write(8, &[], addr, rkey).inline(b"wake").signaled())
            .map_err(|e| e.to_string());
        (qp, r)
    });
    let mut out = [Completion::EMPTY; 4];
    let n = wait(cq, &mut out).map_err(|e| e.to_string())?;
    let (_qp, posted) = poster.join().map_err(|_| "the posting thread panicked")?;
    posted.map_err(|e| format!("post: {e}"))?;
    if n != 1 || !out[0].is_ok() {
        return Err(format!("woke with {n} completion(s): {:?}", &out[..n]));
    }
    Ok(())
}
