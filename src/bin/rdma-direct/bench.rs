//! `rdma-direct bench`.

pub fn run(_args: &[String]) -> i32 {
    eprintln!("rdma-direct bench: not built yet");
    1
}
