//! The mlx5 provider: direct WQE writing, doorbells and CQE parsing.

pub mod dv;
