//! Connect any provider's RC QP by IP address through the RDMA connection manager
//! (librdmacm, loaded at run time: [`crate::ffi::rdmacm`]).
//!
//! ```no_run
//! # use rdma_direct::prelude::*;
//! # fn client<P: Provider>(dev: &mut P, qp: &mut P::Qp, opts: &ConnectOpts, mine: RemoteMr) -> Result<()> {
//! let t = std::time::Duration::from_secs(10);
//! let mut conn = rdma_direct::cm::connect(dev, qp, "10.0.0.2:7471", opts, Some(mine), t)?;
//! let theirs = conn.remote_mr(); // the window the server shared, if it did
//! conn.check(dev, qp)?; // never blocks; Err once the peer disconnected (the QP is then in ERR)
//! conn.disconnect(dev, qp, t)?;
//! # let _ = theirs; Ok(()) }
//! # fn server<P: Provider>(dev: &mut P, qp: &mut P::Qp, opts: &ConnectOpts, mine: RemoteMr) -> Result<()> {
//! # let t = std::time::Duration::from_secs(10);
//! let mut listener = rdma_direct::cm::Listener::bind("0.0.0.0:7471")?;
//! let conn = listener.accept(dev, qp, opts, Some(mine), t)?;
//! # let _ = conn; Ok(()) }
//! ```
//!
//! (`tests/cm_device.rs` runs both sides over rxe and writes each other's windows.)
//!
//! ## Contract
//! - The QP stays the provider's own (the mlx5 direct QP included); the CM only resolves the
//!   address and route and carries the connection exchange. Its `rdma_cm_id` has no QP: the
//!   QP's number travels in the connection parameters, and the attributes of each transition
//!   come from `rdma_init_qp_attr` (INIT: port; RTR: path, path MTU, destination QPN, receive
//!   PSN; RTS: send PSN, ACK timeout, retry counts), applied by the provider's own
//!   [`Provider::connect`]. Three values stay the caller's ([`ConnectOpts`]): the access
//!   flags, the minimal RNR timer (the CM's is 0, i.e. 655 ms) and the RDMA READ/atomic depths,
//!   which are offered in the request (`initiator_depth` / `responder_resources`) and, on the
//!   server, lowered to what the client asked.
//! - The client moves its QP to RTS on the peer's reply and then sends the CM's RTU
//!   (`rdma_establish`); the server moves its QP to RTS before it accepts. When either call
//!   returns, both QPs are in RTS.
//! - Private data carries one optional memory window each way ([`private`]); a peer sending
//!   none (perftest, rping) gives [`Connection::remote_mr`] `None`.
//! - One deadline covers the whole exchange (resolution, request, reply, establishment). The
//!   errors name the cause: `REJECTED` (with the reject reason: no listener on that port, or
//!   the peer refused), `UNREACHABLE`, address or route errors, the deadline.
//! - RC only (`RDMA_PS_TCP`); a UD or UC QP is refused. The sim has no CM (no kernel device).
//! - [`Connection::fd`] is the CM event channel's descriptor (non-blocking): poll it, then
//!   [`Connection::check`], which never blocks; the peer's disconnect moves the QP to ERR
//!   through the provider and is reported as an error of kind `ConnectionReset`.

mod id;
pub mod private;

use crate::endpoint::{QpEndpoint, RemoteMr};
use crate::error::{Error, Result};
use crate::ffi::{self, rdma_conn_param};
use crate::providers::{Provider, QueuePair};
use crate::types::{ConnectOpts, Mtu, QpType};
use id::{Channel, Event, Id};
use std::io::ErrorKind;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// A deadline for one connection exchange that suits a peer already listening (resolution,
/// request, reply and establishment take milliseconds on a LAN; seconds under emulation).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// One deadline over a whole CM exchange.
pub(crate) struct Deadline {
    at: Instant,
    total: Duration,
    context: String,
}

impl Deadline {
    fn after(total: Duration, context: String) -> Deadline {
        Deadline {
            at: Instant::now() + total,
            total,
            context,
        }
    }

    /// Time left, or the timeout error naming what we were waiting for.
    pub(crate) fn left(&self, waiting_for: &str) -> Result<Duration> {
        let left = self.at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::Io {
                context: self.context.clone(),
                kind: ErrorKind::TimedOut,
                detail: format!(
                    "timed out after {} s waiting for {waiting_for}",
                    self.total.as_secs_f64()
                ),
            });
        }
        Ok(left)
    }

    fn left_ms(&self, waiting_for: &str) -> Result<i32> {
        Ok(self
            .left(waiting_for)?
            .as_millis()
            .clamp(1, i32::MAX as u128) as i32)
    }

    fn io(&self, kind: ErrorKind, detail: String) -> Error {
        Error::Io {
            context: self.context.clone(),
            kind,
            detail,
        }
    }
}

/// What an IB CM reject reason (the status of `RDMA_CM_EVENT_REJECTED`) means.
pub fn reject_reason(status: i32) -> &'static str {
    match status {
        1 => "no QP available at the peer",
        2 => "no EEC available",
        3 => "no resources at the peer",
        4 => "timeout at the peer",
        5 => "the peer does not support the request",
        6 => "invalid communication ID",
        7 => "invalid communication instance",
        8 => "no listener on that port (invalid service ID)",
        9 => "invalid transport type",
        10 => "stale connection",
        11 => "RDC not present",
        13 => "invalid LID",
        26 => "invalid MTU",
        27 => "insufficient responder resources",
        28 => "refused by the peer (consumer reject)",
        _ => "see the IBA reject reasons",
    }
}

/// The error an unexpected or failure event stands for.
fn event_error(dl: &Deadline, cm: &ffi::Rdmacm, e: &Event, waiting_for: &str) -> Error {
    let name = cm.event_str(e.kind);
    match e.kind {
        ffi::RDMA_CM_EVENT_REJECTED => dl.io(
            ErrorKind::ConnectionRefused,
            format!(
                "{name}: {} (reject reason {})",
                reject_reason(e.status),
                e.status
            ),
        ),
        ffi::RDMA_CM_EVENT_UNREACHABLE => dl.io(
            ErrorKind::TimedOut,
            format!(
                "{name}: the peer's CM did not answer ({}): is the address right and the peer running?",
                errno_text(e.status)
            ),
        ),
        ffi::RDMA_CM_EVENT_ADDR_ERROR => dl.io(
            ErrorKind::AddrNotAvailable,
            format!(
                "{name}: the address did not resolve to an RDMA device ({}): is it reachable through an rxe/RoCE/IB interface?",
                errno_text(e.status)
            ),
        ),
        ffi::RDMA_CM_EVENT_ROUTE_ERROR => dl.io(
            ErrorKind::AddrNotAvailable,
            format!("{name}: no route to the peer ({})", errno_text(e.status)),
        ),
        ffi::RDMA_CM_EVENT_DISCONNECTED => dl.io(
            ErrorKind::ConnectionReset,
            format!("{name}: the peer disconnected while we waited for {waiting_for}"),
        ),
        _ => dl.io(
            ErrorKind::Other,
            format!(
                "{name} (status {}) while waiting for {waiting_for}",
                e.status
            ),
        ),
    }
}

fn errno_text(status: i32) -> String {
    if status < 0 {
        let e = -status;
        format!("{} {}", crate::error::errno_name(e), e)
    } else {
        format!("status {status}")
    }
}

/// Waits for `want`; any other event is the error it stands for.
fn expect(ch: &Channel, dl: &Deadline, want: u32, waiting_for: &str) -> Result<Event> {
    let e = ch.wait(dl, waiting_for)?;
    if e.kind == want && (e.status == 0 || want == ffi::RDMA_CM_EVENT_CONNECT_REQUEST) {
        return Ok(e);
    }
    Err(event_error(dl, ffi::rdmacm()?, &e, waiting_for))
}

fn resolve(addr: impl ToSocketAddrs, ctx: &str) -> Result<SocketAddr> {
    addr.to_socket_addrs()
        .map_err(|e| Error::io(format!("{ctx}: resolving the address"), &e))?
        .next()
        .ok_or_else(|| Error::InvalidArgument {
            context: "rdma_cm",
            detail: format!("{ctx}: the address resolved to nothing"),
        })
}

/// A QP connected through the CM: the connection's id and its own event channel.
pub struct Connection {
    // Field order is drop order: the id before its channel.
    id: Id,
    ch: Channel,
    /// Our side, as applied to the QP (PSN and GID index are the CM's).
    pub local: QpEndpoint,
    /// The peer's side: QPN, PSN, path; `remote.mr` is the window it shared, if any.
    pub remote: QpEndpoint,
    disconnected: bool,
    context: String,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("cm::Connection")
            .field("local", &self.local)
            .field("remote", &self.remote)
            .field("disconnected", &self.disconnected)
            .finish()
    }
}

impl Connection {
    /// The memory window the peer shared in its private data, if any.
    pub fn remote_mr(&self) -> Option<RemoteMr> {
        self.remote.mr
    }

    /// The CM event channel's descriptor (non-blocking): readable when [`Connection::check`]
    /// has something to handle.
    pub fn fd(&self) -> RawFd {
        self.ch.fd()
    }

    /// True once the peer's disconnect was seen (and the QP moved to ERR).
    pub fn is_disconnected(&self) -> bool {
        self.disconnected
    }

    /// Handles pending CM events without blocking. `Ok(())` while the connection is up; the
    /// peer's disconnect moves `qp` to ERR (everything outstanding is flushed) and returns an
    /// [`Error::Io`] of kind `ConnectionReset` naming it (again on every later call).
    pub fn check<P: Provider>(&mut self, p: &mut P, qp: &mut P::Qp) -> Result<()> {
        while !self.disconnected {
            let Some(e) = self.ch.try_event()? else {
                break;
            };
            match e.kind {
                ffi::RDMA_CM_EVENT_DISCONNECTED | ffi::RDMA_CM_EVENT_DEVICE_REMOVAL => {
                    self.disconnected = true;
                    p.to_error(qp)?;
                }
                _ => {} // TIMEWAIT_EXIT, ADDR_CHANGE, ...: nothing to do.
            }
        }
        if self.disconnected {
            return Err(Error::Io {
                context: self.context.clone(),
                kind: ErrorKind::ConnectionReset,
                detail:
                    "RDMA_CM_EVENT_DISCONNECTED: the peer disconnected; the QP was moved to ERR"
                        .into(),
            });
        }
        Ok(())
    }

    /// Orderly teardown: `rdma_disconnect`, the QP to ERR, then wait (at most `timeout`) for
    /// the CM's `DISCONNECTED`. A peer that disconnected first is not an error.
    pub fn disconnect<P: Provider>(
        mut self,
        p: &mut P,
        qp: &mut P::Qp,
        timeout: Duration,
    ) -> Result<()> {
        if self.disconnected {
            return Ok(());
        }
        let dl = Deadline::after(timeout, self.context.clone());
        self.id.disconnect()?;
        p.to_error(qp)?;
        loop {
            let e = self.ch.wait(&dl, "the CM's DISCONNECTED event")?;
            if e.kind == ffi::RDMA_CM_EVENT_DISCONNECTED {
                self.disconnected = true;
                return Ok(());
            }
        }
    }
}

/// A listening CM id on its own event channel.
pub struct Listener {
    id: Id,
    ch: Channel,
    addr: SocketAddr,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("cm::Listener")
            .field("addr", &self.addr)
            .finish()
    }
}

impl Listener {
    /// `rdma_bind_addr` + `rdma_listen` on `addr` (`0.0.0.0:port` listens on every RDMA
    /// device).
    pub fn bind(addr: impl ToSocketAddrs) -> Result<Listener> {
        let addr = resolve(addr, "rdma_cm listen")?;
        let ch = Channel::new()?;
        let id = Id::new(&ch)?;
        id.bind(addr)?;
        id.listen(8)?;
        Ok(Listener { id, ch, addr })
    }

    /// The address listened on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The listener's descriptor (non-blocking): readable when a request is pending.
    pub fn fd(&self) -> RawFd {
        self.ch.fd()
    }

    /// Accepts one connection request into `qp` (which must be an RC QP in RESET): its QP goes
    /// to RTS through the provider with the CM's attributes, then the CM accepts, and we wait
    /// for `ESTABLISHED`. `share` travels to the client in the reply. All within `timeout`.
    pub fn accept<P: Provider>(
        &mut self,
        p: &mut P,
        qp: &mut P::Qp,
        opts: &ConnectOpts,
        share: Option<RemoteMr>,
        timeout: Duration,
    ) -> Result<Connection> {
        self.accept_with(p, qp, opts, share, timeout, |_, _| Ok(()))
    }

    /// [`Listener::accept`], calling `ready` once the QP is in RTS and before the CM accepts:
    /// receives posted there are in place before the client can send.
    pub fn accept_with<P: Provider>(
        &mut self,
        p: &mut P,
        qp: &mut P::Qp,
        opts: &ConnectOpts,
        share: Option<RemoteMr>,
        timeout: Duration,
        ready: impl FnOnce(&mut P, &mut P::Qp) -> Result<()>,
    ) -> Result<Connection> {
        let context = format!("rdma_cm accept on {}", self.addr);
        check_qp::<P>(qp, &context)?;
        let dl = Deadline::after(timeout, context.clone());
        let req = expect(
            &self.ch,
            &dl,
            ffi::RDMA_CM_EVENT_CONNECT_REQUEST,
            "a connection request",
        )?;
        let id = Id::adopt(self.id.cm, req.id);
        let ch = Channel::new()?;
        id.migrate(&ch)?;
        let _ = req.listen_id;
        let remote_mr = match private::decode(&req.private) {
            Ok(m) => m,
            Err(e) => {
                id.reject();
                return Err(e);
            }
        };
        let rd = ReadDepths {
            responder_resources: opts.max_dest_rd_atomic.min(req.responder_resources),
            initiator_depth: opts.max_rd_atomic.min(req.initiator_depth),
        };
        let up = bring_up(p, qp, &id, opts, Some(rd), remote_mr, &context)
            .and_then(|v| ready(p, qp).map(|()| v));
        let (local, remote) = match up {
            Ok(v) => v,
            Err(e) => {
                id.reject();
                return Err(e);
            }
        };
        let pd = private::encode(share);
        let mut cp = conn_param(&pd, local.qpn, rd, opts);
        id.accept(&mut cp)?;
        expect(
            &ch,
            &dl,
            ffi::RDMA_CM_EVENT_ESTABLISHED,
            "the client's ESTABLISHED (RTU)",
        )?;
        Ok(Connection {
            id,
            ch,
            local: QpEndpoint { mr: share, ..local },
            remote,
            disconnected: false,
            context,
        })
    }
}

/// Client side: resolve `addr` (an IP address and CM port, e.g. `10.0.0.2:7471`), send the
/// request carrying `qp`'s number and `share`, move `qp` (an RC QP in RESET) to RTS on the
/// reply, send the RTU. All within `timeout`.
pub fn connect<P: Provider>(
    p: &mut P,
    qp: &mut P::Qp,
    addr: impl ToSocketAddrs,
    opts: &ConnectOpts,
    share: Option<RemoteMr>,
    timeout: Duration,
) -> Result<Connection> {
    connect_with(p, qp, addr, opts, share, timeout, |_, _| Ok(()))
}

/// [`connect`], calling `ready` once the QP is in RTS and before the RTU tells the server
/// the connection is up: receives posted there are in place before the server can send.
pub fn connect_with<P: Provider>(
    p: &mut P,
    qp: &mut P::Qp,
    addr: impl ToSocketAddrs,
    opts: &ConnectOpts,
    share: Option<RemoteMr>,
    timeout: Duration,
    ready: impl FnOnce(&mut P, &mut P::Qp) -> Result<()>,
) -> Result<Connection> {
    let dst = resolve(addr, "rdma_cm connect")?;
    let context = format!("rdma_cm connect to {dst}");
    check_qp::<P>(qp, &context)?;
    let dl = Deadline::after(timeout, context.clone());
    let ch = Channel::new()?;
    let id = Id::new(&ch)?;
    id.resolve_addr(dst, dl.left_ms("address resolution")?)?;
    expect(
        &ch,
        &dl,
        ffi::RDMA_CM_EVENT_ADDR_RESOLVED,
        "address resolution",
    )?;
    check_device(p, &id, &context)?;
    id.resolve_route(dl.left_ms("route resolution")?)?;
    expect(
        &ch,
        &dl,
        ffi::RDMA_CM_EVENT_ROUTE_RESOLVED,
        "route resolution",
    )?;
    let rd = ReadDepths {
        responder_resources: opts.max_dest_rd_atomic,
        initiator_depth: opts.max_rd_atomic,
    };
    let pd = private::encode(share);
    let mut cp = conn_param(&pd, qp.qpn(), rd, opts);
    id.connect(&mut cp)?;
    let rep = expect(
        &ch,
        &dl,
        ffi::RDMA_CM_EVENT_CONNECT_RESPONSE,
        "the server's reply",
    )?;
    // The reply's depths are final: the CM's RTR/RTS attributes carry them.
    let up = private::decode(&rep.private)
        .and_then(|m| bring_up(p, qp, &id, opts, None, m, &context))
        .and_then(|v| ready(p, qp).map(|()| v));
    let (local, remote) = match up {
        Ok(v) => v,
        Err(e) => {
            id.reject();
            return Err(e);
        }
    };
    id.establish()?;
    Ok(Connection {
        id,
        ch,
        local: QpEndpoint { mr: share, ..local },
        remote,
        disconnected: false,
        context,
    })
}

#[derive(Clone, Copy)]
struct ReadDepths {
    responder_resources: u8,
    initiator_depth: u8,
}

fn conn_param(pd: &[u8], qpn: u32, rd: ReadDepths, opts: &ConnectOpts) -> rdma_conn_param {
    let mut cp = rdma_conn_param::zeroed();
    cp.private_data = pd.as_ptr().cast();
    cp.private_data_len = pd.len() as u8;
    cp.responder_resources = rd.responder_resources;
    cp.initiator_depth = rd.initiator_depth;
    cp.retry_count = opts.retry_cnt.min(7);
    cp.rnr_retry_count = opts.rnr_retry.min(7);
    cp.qp_num = qpn;
    cp
}

fn check_qp<P: Provider>(qp: &P::Qp, context: &str) -> Result<()> {
    if qp.qp_type() != QpType::Rc {
        return Err(Error::Unsupported {
            what: format!(
                "{context}: a {:?} QP; connecting by address supports RC QPs (RDMA_PS_TCP)",
                qp.qp_type()
            ),
        });
    }
    Ok(())
}

/// The address must have resolved to the device the provider's QP lives on.
fn check_device<P: Provider>(p: &P, id: &Id, context: &str) -> Result<()> {
    let Some((dev, port)) = id.device() else {
        return Ok(());
    };
    if dev != p.device_name() {
        return Err(Error::InvalidArgument {
            context: "rdma_cm",
            detail: format!(
                "{context}: the address is reached through {dev} port {port}, but the QP is on {}: \
                 open {dev}, or use an address routed through {}",
                p.device_name(),
                p.device_name()
            ),
        });
    }
    Ok(())
}

/// Reads the CM's INIT/RTR/RTS attributes and connects `qp` through the provider with them.
fn bring_up<P: Provider>(
    p: &mut P,
    qp: &mut P::Qp,
    id: &Id,
    opts: &ConnectOpts,
    rd: Option<ReadDepths>,
    remote_mr: Option<RemoteMr>,
    context: &str,
) -> Result<(QpEndpoint, QpEndpoint)> {
    check_device(p, id, context)?;
    let (init, _) = id.qp_attr(ffi::IBV_QPS_INIT)?;
    let (rtr, _) = id.qp_attr(ffi::IBV_QPS_RTR)?;
    let (rts, _) = id.qp_attr(ffi::IBV_QPS_RTS)?;
    let mtu = Mtu::from_ibv(rtr.path_mtu).ok_or_else(|| Error::Protocol {
        context: "rdma_init_qp_attr(RTR)",
        detail: format!("path MTU {} is not an ibv_mtu", rtr.path_mtu),
    })?;
    let ah = rtr.ah_attr;
    let o = ConnectOpts {
        port: init.port_num,
        gid_index: ah.grh.sgid_index,
        path_mtu: Some(mtu),
        timeout: rts.timeout,
        retry_cnt: rts.retry_cnt,
        rnr_retry: rts.rnr_retry,
        max_rd_atomic: rd.map_or(rts.max_rd_atomic, |r| r.initiator_depth),
        max_dest_rd_atomic: rd.map_or(rtr.max_dest_rd_atomic, |r| r.responder_resources),
        sl: ah.sl,
        ..*opts
    };
    let local = QpEndpoint {
        psn: rts.sq_psn,
        gid_index: o.gid_index,
        ..p.endpoint(qp, &o)?
    };
    // SAFETY: reading the bytes of a union whose every member is plain bytes.
    let dgid = unsafe { ah.grh.dgid.raw };
    let remote = QpEndpoint {
        lid: ah.dlid,
        gid: if ah.is_global != 0 { dgid } else { [0; 16] },
        gid_index: 0,
        qpn: rtr.dest_qp_num,
        psn: rtr.rq_psn,
        mtu,
        mr: remote_mr,
    };
    p.connect(qp, &local, &remote, &o)?;
    Ok((local, remote))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reject_reasons_name_the_common_causes() {
        assert!(reject_reason(8).contains("no listener"));
        assert!(reject_reason(28).contains("refused by the peer"));
        assert!(reject_reason(999).contains("IBA"));
    }

    #[test]
    fn an_expired_deadline_names_what_was_awaited() {
        let dl = Deadline::after(Duration::ZERO, "rdma_cm connect to 10.0.0.9:7471".into());
        let e = dl.left("the server's reply").unwrap_err();
        assert!(
            matches!(
                e,
                Error::Io {
                    kind: ErrorKind::TimedOut,
                    ..
                }
            ),
            "{e}"
        );
        let s = e.to_string();
        assert!(
            s.contains("rdma_cm connect to 10.0.0.9:7471") && s.contains("the server's reply"),
            "{s}"
        );
    }

    #[test]
    fn conn_param_carries_the_qpn_depths_and_private_data() {
        let pd = private::encode(None);
        let opts = ConnectOpts {
            retry_cnt: 9,
            rnr_retry: 6,
            ..ConnectOpts::default()
        };
        let rd = ReadDepths {
            responder_resources: 4,
            initiator_depth: 2,
        };
        let cp = conn_param(&pd, 0x12_3456, rd, &opts);
        assert_eq!(cp.qp_num, 0x12_3456);
        assert_eq!((cp.responder_resources, cp.initiator_depth), (4, 2));
        assert_eq!((cp.retry_count, cp.rnr_retry_count), (7, 6));
        assert_eq!(usize::from(cp.private_data_len), private::CM_PRIVATE_LEN);
        assert_eq!(cp.private_data, pd.as_ptr().cast());
        assert_eq!(cp.srq, 0);
    }
}
