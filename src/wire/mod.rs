//! Typed views over mlx5 WQE segments and CQEs (smoltcp style). No unsafe code.
#![forbid(unsafe_code)]
