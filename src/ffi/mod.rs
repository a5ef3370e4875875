//! `#[repr(C)]` mirrors of rdma-core 44's `verbs.h` and `mlx5dv.h`, and the run-time loader.
