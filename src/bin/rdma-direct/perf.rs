//! `rdma-direct perf`.

pub fn run(_args: &[String]) -> i32 {
    eprintln!("rdma-direct perf: not built yet");
    1
}
