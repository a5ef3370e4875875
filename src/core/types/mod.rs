//! The shared vocabulary of the data plane and the control path: work requests, completions,
//! QP parameters, access flags, path MTU and post errors.
//!
//! These are plain values. The modules here import only `std`, each other and
//! [`crate::error`]; everything else in the workspace (control path, endpoint codec,
//! providers, tools) builds on them, never the other way round. `tests/deps.rs` enforces it.
//!
//! The provider traits that consume these types are in the providers crate
//! (`rdma_direct::providers`), which also re-exports every name here.

/// Declares a mirror of a C enum from one table of (variant, C value, name): the enum, plus
/// a catch-all variant holding any value this crate does not know, `from_ibv`, `to_ibv`,
/// `name`, `from_name`, `ALL` and (when given) `Default`. The conversions are plain `match`es,
/// as fast as hand-written ones.
macro_rules! ibv_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident = $cname:literal, $(default $default:ident,)? other $other:ident $other_doc:literal {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal, $text:literal; )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
            #[doc = $other_doc]
            $other(u32),
        }

        $(
            impl Default for $name {
                fn default() -> Self {
                    $name::$default
                }
            }
        )?

        impl $name {
            /// Every known value: (variant, C value, name), in C value order.
            pub const ALL: &'static [($name, u32, &'static str)] =
                &[$(($name::$variant, $value, $text)),+];

            #[doc = concat!("From `", $cname, "`.")]
            pub fn from_ibv(v: u32) -> $name {
                match v {
                    $($value => $name::$variant,)+
                    x => $name::$other(x),
                }
            }

            #[doc = concat!("To `", $cname, "`.")]
            pub fn to_ibv(self) -> u32 {
                match self {
                    $($name::$variant => $value,)+
                    $name::$other(x) => x,
                }
            }

            /// The C name without its `IBV_WC_` / `IBV_QPS_` prefix (`REM_ACCESS_ERR`, `RDMA_WRITE`,
            /// `RTS`), as scenario files and error messages spell it; `UNKNOWN` for a value this
            /// crate does not know.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                    $name::$other(_) => "UNKNOWN",
                }
            }

            /// Parse [`Self::name`] back (case-insensitive); `None` for anything else.
            pub fn from_name(s: &str) -> Option<$name> {
                Self::ALL
                    .iter()
                    .find(|e| e.2.eq_ignore_ascii_case(s))
                    .map(|e| e.0)
            }
        }
    };
}

mod access;
mod completion;
mod error;
mod qp;
mod target;
mod wr;

pub use access::Access;
pub use completion::{Completion, WcFlags, WcOpcode, WcStatus};
pub use error::{post_errno_hint, PostError, PostListError, Rejected, RingError, RingVerb};
pub use qp::{ConnectOpts, Mtu, QpCaps, QpConfig, QpState, QpType};
pub use target::RemoteTarget;
pub use wr::{Payload, RecvWr, SendBatch, SendFlags, SendOp, SendWr, Sge, UdDest};
