//! `rdma-direct perf`: perftest-style runs; everything lives in [`rdma_direct::perf`].

pub fn run(args: &[String]) -> i32 {
    rdma_direct::perf::main(args)
}
