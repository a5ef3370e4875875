//! rc_pingpong's loop is the library's ([`rdma_direct::perf::rc_pingpong::Flow`]); this
//! gives it the run's parameters from [`Args`].

use rdma_direct::perf::rc_pingpong::{End, Loop};
pub(super) use rdma_direct::perf::rc_pingpong::{Flow, Stall, STALL};
use rdma_direct::providers::Provider;

use super::args::Args;

/// One end's loop for `a` (`measure`: the end whose send times make the table).
pub(super) fn flow<P: Provider>(end: &End<P>, a: &Args, measure: bool) -> Flow {
    let run = Loop {
        iters: a.iters,
        rx_depth: a.rx_depth,
        size: a.size,
        chk: a.chk,
        attribute: a.attribute,
    };
    Flow::new(end, &run, measure)
}
