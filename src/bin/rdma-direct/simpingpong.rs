//! `rdma-direct pingpong` without `-d`: two RC QPs on the software mlx5 device.

pub fn run(_args: &[String]) -> i32 {
    eprintln!("rdma-direct pingpong (sim): not built yet");
    1
}
