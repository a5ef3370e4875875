//! Owned librdmacm objects: an event channel whose fd never blocks, an id, and events copied
//! out and acked at once.
//!
//! Every event is copied into an [`Event`] (private data included) and acked before it is
//! returned, so `rdma_destroy_id`, which waits until each event of its id is acked, never
//! blocks on us, and `rdma_migrate_id` may follow a `CONNECT_REQUEST` right away.

use super::Deadline;
use crate::error::{Error, Result};
use crate::ffi::{self, rdma_cm_event, rdma_cm_id, rdma_conn_param, rdma_event_channel, Rdmacm};
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::os::fd::RawFd;

/// The errno of the last failed librdmacm call, as a verb error.
pub(super) fn last_err(verb: &'static str, hint: impl Into<String>) -> Error {
    let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    Error::verb(verb, errno, hint)
}

/// `rdma_create_event_channel`, made non-blocking.
pub(super) struct Channel {
    cm: &'static Rdmacm,
    ch: *mut rdma_event_channel,
}

// SAFETY: the channel is a file descriptor wrapped by librdmacm; it may be used from any thread
// (one at a time: `&mut` or ownership is required to read events).
unsafe impl Send for Channel {}

impl Channel {
    pub(super) fn new() -> Result<Channel> {
        let cm = ffi::rdmacm()?;
        // SAFETY: no preconditions.
        let ch = unsafe { (cm.rdma_create_event_channel)() };
        if ch.is_null() {
            return Err(last_err(
                "rdma_create_event_channel",
                "is /dev/infiniband/rdma_cm present (rdma_ucm kernel module loaded)?",
            ));
        }
        let c = Channel { cm, ch };
        let fd = c.fd();
        // SAFETY: `fd` is the channel's open descriptor; F_GETFL/F_SETFL have no other
        // precondition.
        let ok = unsafe {
            let fl = libc::fcntl(fd, libc::F_GETFL);
            fl >= 0 && libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) == 0
        };
        if !ok {
            return Err(last_err("fcntl(O_NONBLOCK) on the rdma_cm channel", ""));
        }
        Ok(c)
    }

    /// The channel's descriptor: readable when an event is pending.
    pub(super) fn fd(&self) -> RawFd {
        // SAFETY: `ch` is the live channel librdmacm returned.
        unsafe { (*self.ch).fd }
    }

    /// The next event if one is pending, without blocking.
    pub(super) fn try_event(&self) -> Result<Option<Event>> {
        let mut ev: *mut rdma_cm_event = std::ptr::null_mut();
        // SAFETY: `ch` is live; `ev` receives an event we ack below.
        let rc = unsafe { (self.cm.rdma_get_cm_event)(self.ch, &mut ev) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == ErrorKind::WouldBlock {
                return Ok(None);
            }
            return Err(Error::verb(
                "rdma_get_cm_event",
                e.raw_os_error().unwrap_or(0),
                "",
            ));
        }
        // SAFETY: rdma_get_cm_event succeeded: `ev` points to a valid event until acked; its
        // private data pointer is valid for `private_data_len` bytes (or null).
        let out = unsafe {
            let e = &*ev;
            let conn = e.param.conn;
            let private = if conn.private_data.is_null() || conn.private_data_len == 0 {
                Vec::new()
            } else {
                std::slice::from_raw_parts(
                    conn.private_data.cast::<u8>(),
                    usize::from(conn.private_data_len),
                )
                .to_vec()
            };
            Event {
                kind: e.event,
                status: e.status,
                id: e.id,
                listen_id: e.listen_id,
                responder_resources: conn.responder_resources,
                initiator_depth: conn.initiator_depth,
                private,
            }
        };
        // SAFETY: `ev` came from rdma_get_cm_event and is acked once.
        unsafe { (self.cm.rdma_ack_cm_event)(ev) };
        Ok(Some(out))
    }

    /// Waits (within `dl`) for the next event; running out names `waiting_for`.
    pub(super) fn wait(&self, dl: &Deadline, waiting_for: &str) -> Result<Event> {
        loop {
            if let Some(e) = self.try_event()? {
                return Ok(e);
            }
            let left = dl.left(waiting_for)?;
            let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
            let mut p = libc::pollfd {
                fd: self.fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let rc = unsafe { libc::poll(&mut p, 1, ms) };
            if rc < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() != ErrorKind::Interrupted {
                    return Err(Error::io("poll on the rdma_cm channel", &e));
                }
            }
        }
    }

    pub(super) fn raw(&self) -> *mut rdma_event_channel {
        self.ch
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        // SAFETY: every id on this channel is destroyed before it (owners drop ids first).
        unsafe { (self.cm.rdma_destroy_event_channel)(self.ch) };
    }
}

/// One CM event, copied out and already acked.
#[derive(Debug)]
pub(super) struct Event {
    /// `enum rdma_cm_event_type`.
    pub kind: u32,
    /// 0, a negative errno, or the reject reason.
    pub status: i32,
    /// The id it is for (on `CONNECT_REQUEST`, a new id we now own).
    pub id: *mut rdma_cm_id,
    /// On `CONNECT_REQUEST`, the listener.
    pub listen_id: *mut rdma_cm_id,
    /// Connection parameters as the peer's side sees them swapped to ours.
    pub responder_resources: u8,
    /// As above.
    pub initiator_depth: u8,
    /// The private data (padded by the CM).
    pub private: Vec<u8>,
}

/// An owned `rdma_cm_id` (RDMA_PS_TCP).
pub(super) struct Id {
    pub(super) cm: &'static Rdmacm,
    pub(super) id: *mut rdma_cm_id,
}

// SAFETY: an id is a handle into librdmacm, which locks its own state; we use it from one
// thread at a time (`&mut`/ownership).
unsafe impl Send for Id {}

impl Id {
    pub(super) fn new(ch: &Channel) -> Result<Id> {
        let mut id = std::ptr::null_mut();
        // SAFETY: `ch` is live; `id` receives the new id.
        let rc = unsafe {
            (ch.cm.rdma_create_id)(ch.raw(), &mut id, std::ptr::null_mut(), ffi::RDMA_PS_TCP)
        };
        if rc != 0 {
            return Err(last_err("rdma_create_id", ""));
        }
        Ok(Id { cm: ch.cm, id })
    }

    /// Takes ownership of the id a `CONNECT_REQUEST` carried.
    pub(super) fn adopt(cm: &'static Rdmacm, id: *mut rdma_cm_id) -> Id {
        Id { cm, id }
    }

    /// The device name and port the id's address resolved to, if it has one.
    pub(super) fn device(&self) -> Option<(String, u8)> {
        // SAFETY: `id` is live; `verbs` is null or librdmacm's open context.
        let (ctx, port) = unsafe { ((*self.id).verbs, (*self.id).port_num) };
        if ctx.is_null() {
            return None;
        }
        let v = ffi::verbs().ok()?;
        // SAFETY: `ctx` is a live context; its device pointer is valid while it is open, and
        // ibv_get_device_name returns a NUL-terminated string owned by the device.
        let name = unsafe {
            let n = (v.ibv_get_device_name)((*ctx).device);
            if n.is_null() {
                return None;
            }
            std::ffi::CStr::from_ptr(n).to_string_lossy().into_owned()
        };
        Some((name, port))
    }

    /// Moves the id to `ch` (a connection request's id leaves the listener's channel).
    pub(super) fn migrate(&self, ch: &Channel) -> Result<()> {
        // SAFETY: `id` and `ch` are live; every event of the id was acked when read.
        if unsafe { (self.cm.rdma_migrate_id)(self.id, ch.raw()) } != 0 {
            return Err(last_err("rdma_migrate_id", ""));
        }
        Ok(())
    }

    pub(super) fn bind(&self, addr: SocketAddr) -> Result<()> {
        let mut sa = SockAddr::from(addr);
        // SAFETY: `id` is live; `sa` is a valid sockaddr of its family.
        let rc = unsafe { (self.cm.rdma_bind_addr)(self.id, sa.as_mut_ptr()) };
        if rc != 0 {
            return Err(last_err(
                "rdma_bind_addr",
                format!("{addr}: is it an address of an RDMA device (e.g. rxe on that interface) and the port free?"),
            ));
        }
        Ok(())
    }

    pub(super) fn resolve_addr(&self, dst: SocketAddr, timeout_ms: i32) -> Result<()> {
        let mut sa = SockAddr::from(dst);
        // SAFETY: `id` is live; `sa` is a valid sockaddr; a null source lets the CM choose.
        let rc = unsafe {
            (self.cm.rdma_resolve_addr)(self.id, std::ptr::null_mut(), sa.as_mut_ptr(), timeout_ms)
        };
        if rc != 0 {
            return Err(last_err(
                "rdma_resolve_addr",
                format!("{dst}: no route to it through an RDMA device?"),
            ));
        }
        Ok(())
    }

    pub(super) fn resolve_route(&self, timeout_ms: i32) -> Result<()> {
        // SAFETY: `id` is live with a resolved address.
        if unsafe { (self.cm.rdma_resolve_route)(self.id, timeout_ms) } != 0 {
            return Err(last_err("rdma_resolve_route", ""));
        }
        Ok(())
    }

    pub(super) fn listen(&self, backlog: i32) -> Result<()> {
        // SAFETY: `id` is live and bound.
        if unsafe { (self.cm.rdma_listen)(self.id, backlog) } != 0 {
            return Err(last_err("rdma_listen", ""));
        }
        Ok(())
    }

    pub(super) fn connect(&self, p: &mut rdma_conn_param) -> Result<()> {
        // SAFETY: `id` is live with a resolved route; `p` and its private data outlive the call
        // (librdmacm copies them into the command).
        if unsafe { (self.cm.rdma_connect)(self.id, p) } != 0 {
            return Err(last_err(
                "rdma_connect",
                "responder_resources / initiator_depth above the device's max_qp_rd_atom?",
            ));
        }
        Ok(())
    }

    pub(super) fn accept(&self, p: &mut rdma_conn_param) -> Result<()> {
        // SAFETY: as for `connect`, on a connection request's id.
        if unsafe { (self.cm.rdma_accept)(self.id, p) } != 0 {
            return Err(last_err("rdma_accept", ""));
        }
        Ok(())
    }

    /// Best effort (the id is abandoned afterwards either way).
    pub(super) fn reject(&self) {
        // SAFETY: `id` is live; no private data.
        unsafe { (self.cm.rdma_reject)(self.id, std::ptr::null(), 0) };
    }

    pub(super) fn establish(&self) -> Result<()> {
        // SAFETY: `id` is live, has no QP, and got CONNECT_RESPONSE.
        if unsafe { (self.cm.rdma_establish)(self.id) } != 0 {
            return Err(last_err("rdma_establish", ""));
        }
        Ok(())
    }

    pub(super) fn disconnect(&self) -> Result<()> {
        // SAFETY: `id` is live.
        if unsafe { (self.cm.rdma_disconnect)(self.id) } != 0 {
            return Err(last_err("rdma_disconnect", ""));
        }
        Ok(())
    }

    /// `rdma_init_qp_attr` for the transition to `state`: the attributes and their mask.
    pub(super) fn qp_attr(&self, state: u32) -> Result<(ffi::ibv_qp_attr, i32)> {
        let mut a = ffi::ibv_qp_attr::zeroed();
        a.qp_state = state;
        let mut mask = 0;
        // SAFETY: `id` is live; `a` and `mask` are valid for writes.
        if unsafe { (self.cm.rdma_init_qp_attr)(self.id, &mut a, &mut mask) } != 0 {
            return Err(last_err("rdma_init_qp_attr", ""));
        }
        Ok((a, mask))
    }
}

impl Drop for Id {
    fn drop(&mut self) {
        // SAFETY: `id` is live and owned; every event for it was acked when read.
        unsafe { (self.cm.rdma_destroy_id)(self.id) };
    }
}

/// A socket address in C form.
pub(super) enum SockAddr {
    V4(libc::sockaddr_in),
    V6(libc::sockaddr_in6),
}

impl From<SocketAddr> for SockAddr {
    fn from(a: SocketAddr) -> SockAddr {
        match a {
            SocketAddr::V4(a) => {
                // SAFETY: plain integers; all-zero is valid.
                let mut s: libc::sockaddr_in = unsafe { std::mem::zeroed() };
                s.sin_family = libc::AF_INET as libc::sa_family_t;
                s.sin_port = a.port().to_be();
                s.sin_addr.s_addr = u32::from_ne_bytes(a.ip().octets());
                SockAddr::V4(s)
            }
            SocketAddr::V6(a) => {
                // SAFETY: as above.
                let mut s: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
                s.sin6_family = libc::AF_INET6 as libc::sa_family_t;
                s.sin6_port = a.port().to_be();
                s.sin6_addr.s6_addr = a.ip().octets();
                s.sin6_flowinfo = a.flowinfo();
                s.sin6_scope_id = a.scope_id();
                SockAddr::V6(s)
            }
        }
    }
}

impl SockAddr {
    pub(super) fn as_mut_ptr(&mut self) -> *mut libc::sockaddr {
        match self {
            SockAddr::V4(s) => (s as *mut libc::sockaddr_in).cast(),
            SockAddr::V6(s) => (s as *mut libc::sockaddr_in6).cast(),
        }
    }
}
