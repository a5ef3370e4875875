//! Connect any provider's QP over TCP in one call: [`connect_qp_server`] /
//! [`connect_qp_client`].
//!
//! One call swaps endpoints (and the memory window each side chooses to share), moves the QP
//! RESET → INIT → RTR → RTS towards the peer through the provider, and syncs both sides, so
//! that when it returns the peer's QP is in RTS too and may be sent to. When it fails after
//! the QP left RESET (the transitions, or the sync: the peer sent no sync, a wrong sync byte,
//! or closed), the QP is moved to ERR before the error is returned: it is never left
//! connected to a peer that did not confirm. Connect it again (through RESET) to retry. The whole exchange
//! has one deadline (see [`crate::endpoint`]'s exchange). The TCP connection is handed back
//! in the [`Connection`] for a later sync or an orderly teardown.

use crate::endpoint::{exchange_client_by, exchange_server_by, sync_by, Deadline};
use crate::endpoint::{QpEndpoint, RemoteMr};
use crate::error::Result;
use crate::types::{ConnectOpts, QpState};
use crate::{Provider, QueuePair};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// A connected QP's two endpoints and the TCP connection used to exchange them.
#[derive(Debug)]
pub struct Connection {
    /// What we sent.
    pub local: QpEndpoint,
    /// What the peer sent; `remote.mr` is the window it shared, if any.
    pub remote: QpEndpoint,
    /// The exchange's connection, still open (one more [`Connection::sync`] is possible).
    pub stream: TcpStream,
}

impl Connection {
    /// The memory window the peer shared, if it shared one.
    pub fn remote_mr(&self) -> Option<RemoteMr> {
        self.remote.mr
    }

    /// Waits (at most `timeout`) until the peer calls `sync` too: e.g. before teardown, so
    /// neither side destroys its QP while the other still sends.
    pub fn sync(&mut self, timeout: Duration) -> Result<()> {
        sync_by(&mut self.stream, &Deadline::after(timeout))
    }
}

/// Server side: accept one peer on `listener`, swap endpoints (ours carries `share`),
/// connect `qp`, sync. Everything within `timeout`.
pub fn connect_qp_server<P: Provider>(
    p: &mut P,
    qp: &mut P::Qp,
    listener: &TcpListener,
    opts: &ConnectOpts,
    share: Option<RemoteMr>,
    timeout: Duration,
) -> Result<Connection> {
    connect_by(p, qp, opts, share, timeout, |local, dl| {
        exchange_server_by(listener, local, dl)
    })
}

/// Client side: connect to `addr`, swap endpoints (ours carries `share`), connect `qp`,
/// sync. Everything within `timeout`.
pub fn connect_qp_client<P: Provider>(
    p: &mut P,
    qp: &mut P::Qp,
    addr: impl ToSocketAddrs,
    opts: &ConnectOpts,
    share: Option<RemoteMr>,
    timeout: Duration,
) -> Result<Connection> {
    connect_by(p, qp, opts, share, timeout, |local, dl| {
        exchange_client_by(addr, local, dl)
    })
}

/// Both sides: our endpoint (carrying `share`) swapped by `exchange`, the peer's checked,
/// `qp` connected, both sides synced; one deadline for all of it.
fn connect_by<P: Provider>(
    p: &mut P,
    qp: &mut P::Qp,
    opts: &ConnectOpts,
    share: Option<RemoteMr>,
    timeout: Duration,
    exchange: impl FnOnce(&QpEndpoint, &Deadline) -> Result<(QpEndpoint, TcpStream)>,
) -> Result<Connection> {
    let dl = Deadline::after(timeout);
    let local = QpEndpoint {
        mr: share,
        ..p.endpoint(qp, opts)?
    };
    let (remote, mut stream) = exchange(&local, &dl)?;
    remote.validate()?;
    if let Err(e) = p
        .connect(qp, &local, &remote, opts)
        .and_then(|()| sync_by(&mut stream, &dl))
    {
        // A bring-up that did not finish leaves no QP connected to a peer that never
        // confirmed it (no sync, a wrong sync byte, a closed connection): the QP goes to ERR,
        // which flushes anything posted meanwhile; the next connect takes it through RESET.
        if qp.state() != QpState::Reset && qp.state() != QpState::Err {
            if let Err(e2) = p.to_error(qp) {
                return Err(crate::Error::Protocol {
                    context: "connect_qp",
                    detail: format!(
                        "{e}; moving the QP to ERR failed too ({e2}): drop the QP, do not post \
                         to it"
                    ),
                });
            }
        }
        return Err(e);
    }
    Ok(Connection {
        local,
        remote,
        stream,
    })
}
