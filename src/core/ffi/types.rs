//! `#[repr(C)]` mirrors of the structs of rdma-core 44's `verbs.h` and `mlx5dv.h` that this
//! crate touches, and the enum values it uses, one file per concern: [`consts`] (enum values
//! and flags), [`device`] (devices, contexts, device and port attributes), [`queues`] (PDs,
//! MRs, CQs, SRQs, QPs and their attribute and init structs), [`wr`] (work requests,
//! completions, AHs, async events) and [`mlx5dv`]. Everything is re-exported here, so a type's
//! path is `ffi::types::NAME` (and `ffi::NAME`) whichever file holds it.
//!
//! Names are the C names, so a reader of `verbs.h` finds their way. C enums are `c_uint`
//! (`u32`) fields plus constants: a Rust `enum` would be undefined behaviour the day a newer
//! library returns a value we do not know. Every size and every offset the code relies on is
//! asserted with `const_assert_eq!` beside its type (a `layout` module at the end of each
//! file, for x86_64 / aarch64 Linux, LP64) and checked again by `tests/abi.rs` against
//! `fixtures/abi/abi.txt`, which `fixtures/abi/abi.c` prints from the real headers (one column
//! per architecture; the test compares the column of the architecture being compiled). The
//! structs that embed a glibc `pthread_mutex_t` (40 bytes on x86_64, 48 on aarch64;
//! `pthread_cond_t` is 48 on both) differ in size between the two and are asserted per
//! architecture (`layout::arch`).
//!
//! Only the layout matters here; nothing in these files dereferences anything.
#![allow(non_camel_case_types)]

pub mod consts;
pub mod device;
pub mod mlx5dv;
pub mod queues;
pub mod wr;

pub use consts::*;
pub use device::*;
pub use mlx5dv::*;
pub use queues::*;
pub use wr::*;

macro_rules! zeroed_ctor {
    ($($t:ty),* $(,)?) => {$(
        impl $t {
            /// All fields zero / null, as the C API expects before filling.
            pub fn zeroed() -> Self {
                // SAFETY: this type is plain C data (integers, raw pointers, `Option` of
                // function pointers, unions of those): the all-zero bit pattern is valid
                // (null pointers, `None`, zero).
                unsafe { std::mem::zeroed() }
            }
        }
    )*};
}

zeroed_ctor!(
    ibv_device_attr,
    ibv_port_attr,
    ibv_gid,
    ibv_srq_init_attr,
    ibv_qp_init_attr,
    ibv_global_route,
    ibv_ah_attr,
    ibv_qp_attr,
    ibv_send_wr,
    ibv_recv_wr,
    ibv_async_event,
    mlx5dv_qp,
    mlx5dv_cq,
    mlx5dv_srq,
    mlx5dv_ah,
    mlx5dv_obj,
    mlx5dv_context,
);
