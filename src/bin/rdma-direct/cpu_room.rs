//! The busy-threads warning line of a run (stderr, before its results): the rule is the
//! library's ([`rdma_direct::noise::room`]); this prints it.

pub use rdma_direct::noise::room::{busy, device_thread};
use rdma_direct::noise::room::{warning, Room};

/// Print the library's warning for this host, prefixed `rdma-direct CMD: `, when it applies.
pub fn warn(cmd: &str, busy: usize, what: &str) {
    if let Some(w) = warning(busy, what, &Room::probe()) {
        errln!("rdma-direct {cmd}: {w}");
    }
}
