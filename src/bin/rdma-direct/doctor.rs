//! `rdma-direct doctor`.

pub fn run(_args: &[String]) -> i32 {
    eprintln!("rdma-direct doctor: not built yet");
    1
}
