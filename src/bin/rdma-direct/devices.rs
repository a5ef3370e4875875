//! `rdma-direct devices`.

pub fn run(_args: &[String]) -> i32 {
    eprintln!("rdma-direct devices: not built yet");
    1
}
