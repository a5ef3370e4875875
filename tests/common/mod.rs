//! Helpers shared by the integration tests.
//!
//! Device tests are `#[ignore]`d: a plain `cargo test` lists them as ignored (never as passed).
//! They run with `--ignored` and `RDMA_DIRECT_DEVICE=<dev>` (the rxe guest harness sets it to
//! `rxe0`). Run with `--ignored` but without the variable, they fail and say why, so a skipped
//! device test is never counted as a pass.
#![allow(dead_code)]

/// The device named by `RDMA_DIRECT_DEVICE`; panics (failing the test) when it is unset.
pub fn device() -> String {
    // Against tests/standin's libibverbs (RDMA_DIRECT_LIBIBVERBS), the sim is the device.
    #[cfg(feature = "sim")]
    if let Err(e) = rdma_direct::providers::sim::standin::attach_if_standin() {
        panic!("the stand-in for libibverbs: {e}");
    }
    match std::env::var("RDMA_DIRECT_DEVICE") {
        Ok(d) if !d.is_empty() => d,
        _ => panic!(
            "skipped: no RDMA device — this #[ignore]d device test needs RDMA_DIRECT_DEVICE=<dev> \
             (e.g. rxe0 in the guest: tests/guest/run); it is reported as failed, not passed"
        ),
    }
}

/// The GID index to use: `RDMA_DIRECT_GID_INDEX` if set (the guest harness reads it from
/// sysfs), else `None` (the caller picks one from the GID table).
pub fn gid_index() -> Option<u8> {
    std::env::var("RDMA_DIRECT_GID_INDEX")
        .ok()
        .and_then(|s| s.parse().ok())
}

/// Rust source with its comments blanked (newlines kept), and its string and char literals
/// blanked too unless `keep_strings`: what the source-reading tests (tests/deps.rs,
/// tests/layout_single_source.rs) match code against.
pub fn strip_rust(src: &str, keep_strings: bool) -> String {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            let end = b[i..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |p| i + p);
            blank(&mut out, i, end);
            i = end;
        } else if b[i..].starts_with(b"/*") {
            let (mut depth, mut j) = (1, i + 2);
            while j < b.len() && depth > 0 {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if b[i] == b'r' && (i == 0 || !ident(b[i - 1])) && {
            let h = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
            b.get(i + 1 + h) == Some(&b'"')
        } {
            let h = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', h))
                .collect();
            let start = i + 2 + h;
            let end = b[start..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(b.len(), |p| start + p + close.len());
            if !keep_strings {
                blank(&mut out, i, end);
            }
            i = end;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(b.len());
            if !keep_strings {
                blank(&mut out, i, end);
            }
            i = end;
        } else if b[i] == b'\'' {
            // A char literal ('x', '\n', '\u{..}'), or a lifetime ('a), left alone.
            let end = if b.get(i + 1) == Some(&b'\\') {
                // The escaped character is at i + 2 (a quote or backslash too: '\'', '\\').
                b.get(i + 3..)
                    .and_then(|r| r.iter().position(|&c| c == b'\''))
                    .map(|p| i + 3 + p + 1)
            } else {
                let ch = src[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + ch) == Some(&b'\'')).then_some(i + 2 + ch)
            };
            match end {
                Some(e) => {
                    if !keep_strings {
                        blank(&mut out, i, e);
                    }
                    i = e;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    String::from_utf8(out).expect("blanking keeps UTF-8 boundaries")
}

/// Read all of `r` on a thread of its own (so a chatty child never blocks on a full pipe).
#[allow(dead_code)]
pub fn drain<R: std::io::Read + Send + 'static>(mut r: R) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = r.read_to_end(&mut s);
        s
    })
}

/// Wait for `child`, killing it after `limit`: its status, or why it failed to end by itself.
/// The limit only turns a hang into a failure; it times nothing.
#[allow(dead_code)]
pub fn wait_or_kill(
    child: &mut std::process::Child,
    limit: std::time::Duration,
) -> Result<std::process::ExitStatus, String> {
    let start = std::time::Instant::now();
    loop {
        if let Some(st) = child.try_wait().map_err(|e| format!("wait: {e}"))? {
            return Ok(st);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("still running after {limit:?}: killed (a hang)"));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// One end of [`sim_pair`]: a QP and the CQ it alone completes into.
#[cfg(feature = "sim")]
pub type SimSide = (
    rdma_direct::providers::sim::SimQp,
    rdma_direct::providers::sim::SimCq,
);

/// A configuration of `qp_type` with `send` and `recv` outstanding requests (the other caps
/// at their defaults).
pub fn qp_cfg(
    qp_type: rdma_direct::types::QpType,
    send: u32,
    recv: u32,
) -> rdma_direct::types::QpConfig {
    let mut c = rdma_direct::types::QpConfig::new(qp_type);
    (c.caps.max_send_wr, c.caps.max_recv_wr) = (send, recv);
    c
}

/// The setup most tests start from: two QPs of `cfg` on the software device `dev`, each on
/// its own CQ of `cqe` entries, connected to each other with `opts` (`connect_pair`).
#[cfg(feature = "sim")]
pub fn sim_pair(
    dev: &mut rdma_direct::providers::sim::SimDevice,
    pd: &rdma_direct::providers::sim::SimPd,
    cqe: u32,
    cfg: &rdma_direct::types::QpConfig,
    opts: &rdma_direct::types::ConnectOpts,
) -> (SimSide, SimSide) {
    use rdma_direct::providers::Provider;
    let (mut ca, mut cb) = (dev.create_cq(cqe).unwrap(), dev.create_cq(cqe).unwrap());
    let mut a = dev.create_qp(pd, &mut ca, None, None, cfg).unwrap();
    let mut b = dev.create_qp(pd, &mut cb, None, None, cfg).unwrap();
    rdma_direct::providers::flow::connect_pair(dev, &mut a, &mut b, opts).unwrap();
    ((a, ca), (b, cb))
}

#[cfg(feature = "sim")]
pub mod fabric;
pub mod marker;
pub mod retire;
