//! The shared vocabulary of the data plane and the control path: work requests, completions,
//! QP parameters, access flags, path MTU and post errors.
//!
//! These are plain values. The modules here import only `std`, each other and
//! [`crate::error`]; everything else in the crate (control path, endpoint codec, providers,
//! tools) builds on them, never the other way round. `tests/deps.rs` enforces it.
//!
//! The provider traits that consume these types are in [`crate::providers`], which also
//! re-exports every name here.

mod access;
mod completion;
mod error;
mod qp;
mod wr;

pub use access::Access;
pub use completion::{Completion, WcFlags, WcOpcode, WcStatus};
pub use error::{PostError, Rejected};
pub use qp::{ConnectOpts, Mtu, QpCaps, QpConfig, QpState, QpType};
pub use wr::{AddressHandle, Payload, RecvWr, SendFlags, SendOp, SendWr, Sge, UdDest};
