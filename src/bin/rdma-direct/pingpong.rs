//! `rdma-direct pingpong`.

pub fn run(_args: &[String]) -> i32 {
    eprintln!("rdma-direct pingpong: not built yet");
    1
}
