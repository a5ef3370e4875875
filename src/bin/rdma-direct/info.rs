//! `rdma-direct info`.

pub fn run(_args: &[String]) -> i32 {
    eprintln!("rdma-direct info: not built yet");
    1
}
