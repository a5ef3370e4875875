//! The software mlx5 device.
