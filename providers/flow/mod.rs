//! The glue between the queues and an application's message loop, owned by the library so an
//! embedder does not write it again: how many requests a QP has in flight
//! ([`SendWindow`], [`SendWindows`]), receives kept posted ([`RecvReplenisher`]), the
//! WRITE-into-the-peer's-ring pattern with its credits ([`RingWriter`], [`RingReader`]),
//! polling several CQs with one stall deadline ([`wait_each`], [`poll_any`]) and connecting
//! two QPs of one device ([`connect_pair`]).
//!
//! Every helper here is written against the provider traits, so it works the same on mlx5,
//! verbs and the sim. Their per-message methods (`posted`, `retire`, `consumed`, `replenish`,
//! `claim`, `ack`, `poll_any`, `wait_each` while completions arrive) allocate nothing, take no
//! lock and make no system call beyond what the provider's own post / ring / poll do
//! (`tests/hot_path_alloc.rs` holds them to it on the sim); construction may allocate.
//!
//! RC is point to point: one QP talks to one peer QP. A fan-out to N peers is N QPs, which may
//! share one send CQ; the completions then tell the QPs apart by [`Completion::qp_num`],
//! which is what [`SendWindows::retire`] keys on.
//!
//! Error completions: the helpers count what completions retire, successful or not, as
//! [`Completion::covered`] says: a send completion ends `1 + covered` requests (the covered
//! ones ran; the one it names ended with its status), a receive completion one receive. On
//! an error only `wr_id`, `qp_num`, `vendor_err`, `covered` and the queue `opcode` names
//! are meaningful: every provider reports a receive's error completion with a receive
//! opcode (rxe's own says SEND), so [`SendWindow::retire`] leaves a flushed receive alone;
//! a receive is also told by its wr_id when the receives have an id base above the send
//! ids ([`RecvReplenisher::with_id_base`], [`RecvReplenisher::owns`]). Check each completion
//! first ([`Completion::check`]) and treat an error as the end of that QP until it is
//! recovered ([`crate::recover`]: drained, the helpers reset — [`SendWindow::reset`],
//! [`RecvReplenisher::reset`], [`RingWriter::reset`] / [`RingReader::reset`] — and
//! reconnected).

mod ring;
mod wait;
mod window;

pub use ring::{RingReader, RingWriter};
pub use wait::{poll_any, wait_each};
pub use window::{RecvReplenisher, SendWindow, SendWindows};

#[cfg(doc)]
use super::Completion;
use super::{ConnectOpts, Provider, QpEndpoint};

/// Connects two QPs of one device to each other (RESET → INIT → RTR → RTS on both): the
/// loopback pair of tests, of a process talking to itself, of an example on the sim. Returns
/// the endpoints `a` and `b` were connected with (QPN, PSN, GID: what a tool prints), in that
/// order. Between processes use [`crate::connect::connect_qp_server`] /
/// [`crate::connect::connect_qp_client`].
pub fn connect_pair<P: Provider>(
    p: &mut P,
    a: &mut P::Qp,
    b: &mut P::Qp,
    opts: &ConnectOpts,
) -> crate::Result<(QpEndpoint, QpEndpoint)> {
    let (ea, eb) = (p.endpoint(a, opts)?, p.endpoint(b, opts)?);
    p.connect(a, &ea, &eb, opts)?;
    p.connect(b, &eb, &ea, opts)?;
    Ok((ea, eb))
}
