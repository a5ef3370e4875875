//! `rdma-direct pingpong`: RC/UC ping-pong that speaks `ibv_rc_pingpong`'s protocol, one
//! loop over any provider.
//!
//! The protocol is rc_pingpong's: one buffer per end for sends and receives, a CQ of
//! `rx_depth + 1`, one send outstanding, `rx_depth` receives posted before the peer can send
//! (re-posted when one is left), QP parameters MTU 1024, timeout 14, retry and RNR retry 7,
//! min RNR timer 12 (timeout and retry count settable, as perftest's `-u` and `--retry_count`;
//! rxe retries forever at 7, so a bounded run needs fewer); the client sends first, and an end sends again once its last send and
//! a receive have completed; each end sends and receives `iters` messages. The loop body is
//! the library's [`Flow::step`](rdma_direct::perf::rc_pingpong::Flow::step), written once,
//! generic over the provider's queue types.
//!
//! Two ways to run it:
//!
//! - **two processes** (`-d DEV`, the verbs provider): this process is one end; without a
//!   HOST it is the server and waits on the TCP port (`-p`, 18515), with one it is the
//!   client. Either side may be rdma-core's `ibv_rc_pingpong` / `ibv_uc_pingpong`: same
//!   52-byte `LID:QPN:PSN:GID` message (client writes first; the server reads it, brings its
//!   QP up, answers; the client reads, writes "done", brings its QP up), a GRH only when `-g`
//!   is given (without it the GID sent is zero, as rc_pingpong's).
//! - **loopback** (no `-d`: the software mlx5 device, which lives in this process; or
//!   `-d DEV --loopback`: both ends on DEV, e.g. a first check of a NIC alone): both ends
//!   on the device, connected to each other, driven by one thread that alternates between
//!   them; the device thread plays the HCA, and the production mlx5 hot path (WQE writing,
//!   doorbell / BlueFlame, CQE polling) runs against it. No TCP, so a HOST and `-p` are
//!   refused; the device has one port and one GID, so `-i` and `-g` accept only those.
//!
//! Output: rc_pingpong's address lines and the header of perftest's latency table of half
//! the round trip, before the run (flushed: a long run shows it is under way); after it the
//! table's row (a round trip is the interval between two consecutive sends of the measuring
//! end: the client in loopback, this process otherwise; its last one ends when the loop
//! does), then rc_pingpong's two result lines,
//!
//! ```text
//! 8192000 bytes in 0.37 seconds = 177.51 Mbit/sec
//! 1000 iters in 0.37 seconds = 369.18 usec/iter
//! ```
//!
//! A failed completion ends the run, but first the CQ is drained: every request outstanding
//! at that moment (the send in flight and the posted receives) must complete, the failing one
//! with its error, the others flushed (`WR_FLUSH_ERR`) once the QP is in the error state. The
//! error then reads, for example,
//!
//! ```text
//! failed status RETRY_EXC_ERR (12) for wr_id 2 (vendor_err 0x0) after 41 sends and 41
//! receives completed; drain: 9 outstanding at the first error (1 send, 8 receives): 1
//! RETRY_EXC_ERR, 8 WR_FLUSH_ERR, 0 without a completion (0.00 s)
//! ```
//!
//! (one line), so a test can check that nothing outstanding was lost. The drain waits at
//! most [`DRAIN`](rdma_direct::perf::rc_pingpong::DRAIN).

mod args;
mod bring_up;
mod flow;
mod loopback;
mod report;
mod two_process;

use rdma_direct::providers::ProviderKind;
use rdma_direct::Error;

use super::provider;
use args::{parse_args, USAGE};
use loopback::{on_the_sim, Loopback};
use two_process::TwoProcess;

/// Entry point of `rdma-direct pingpong`.
pub fn run(args: &[String]) -> i32 {
    let a = match crate::options_or_exit("pingpong", USAGE, parse_args(args)) {
        Ok(a) => a,
        Err(status) => return status,
    };
    let (kind, why) = match provider::select("pingpong", a.provider, a.dev.as_deref()) {
        Ok(k) => k,
        Err(status) => return status,
    };
    let res = match kind {
        // A peer (HOST) or a server port (-p): this process is one end, through the fabric.
        ProviderKind::Sim if a.host.is_some() || a.port.is_some() => {
            provider::open_and_run(kind, None, false, &mut TwoProcess(&a))
        }
        ProviderKind::Sim => on_the_sim(&a),
        _ if a.loopback => provider::open_and_run(kind, a.dev.as_deref(), false, &mut Loopback(&a)),
        _ if a.rdma_cm => provider::open_and_run(kind, a.dev.as_deref(), false, &mut rping(&a)),
        _ => provider::open_and_run(kind, a.dev.as_deref(), false, &mut TwoProcess(&a)),
    };
    match res {
        Ok(text) => {
            // The first line names the provider; how it was chosen closes the output.
            outln!("{text}provider choice: {why}");
            0
        }
        Err(e) => {
            errln!("rdma-direct pingpong: {e}");
            1
        }
    }
}

/// The busy-threads warning ([`super::cpu_room`]) of a run on `kind`, printed once the run
/// is set up (after its address lines), not before a refusal.
fn warn_busy(kind: ProviderKind) {
    let (busy, what) = super::cpu_room::busy(1, super::cpu_room::device_thread(kind));
    super::cpu_room::warn("pingpong", busy, what);
}

fn io_err(ctx: &str, e: std::io::Error) -> Error {
    Error::io(ctx.to_string(), &e)
}

/// `-R`'s parameters for [`rdma_direct::perf::rping`].
fn rping(a: &args::Args) -> rdma_direct::perf::rping::Opts {
    rdma_direct::perf::rping::Opts {
        host: a.host.clone(),
        port: a.port.unwrap_or(rdma_direct::perf::rping::RPING_PORT),
        iters: a.iters,
        size: a.size,
        retry_cnt: a.retry_cnt,
        timeout: a.timeout,
    }
}
