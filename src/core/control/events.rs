//! Asynchronous events: `ibv_get_async_event` on a non-blocking fd, acknowledged before they
//! are returned. A CQ overrun shows up here (`IBV_EVENT_CQ_ERR`) and nowhere else.

use super::device::{last_errno, Context};
use crate::error::{Error, Result};
use crate::ffi::{self, ibv_async_event};

/// `enum ibv_event_type`, the ones this crate distinguishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncEventKind {
    /// A CQ overran (completions were lost).
    CqErr,
    /// A QP hit a fatal error.
    QpFatal,
    /// Invalid request on a QP.
    QpReqErr,
    /// Access error on a QP.
    QpAccessErr,
    /// Communication established.
    CommEst,
    /// SQ drained.
    SqDrained,
    /// The device is dead.
    DeviceFatal,
    /// A port became active.
    PortActive,
    /// A port went down.
    PortErr,
    /// SRQ error.
    SrqErr,
    /// SRQ limit reached.
    SrqLimitReached,
    /// Last WQE reached (SRQ QP in error).
    QpLastWqeReached,
    /// GID table changed.
    GidChange,
    /// Anything else (the raw value).
    Other(u32),
}

enum ElementKind {
    Cq,
    Qp,
    Srq,
    Port,
    Device,
}

impl AsyncEventKind {
    /// From the verbs value.
    pub fn from_ibv(v: u32) -> AsyncEventKind {
        match v {
            ffi::IBV_EVENT_CQ_ERR => AsyncEventKind::CqErr,
            ffi::IBV_EVENT_QP_FATAL => AsyncEventKind::QpFatal,
            ffi::IBV_EVENT_QP_REQ_ERR => AsyncEventKind::QpReqErr,
            ffi::IBV_EVENT_QP_ACCESS_ERR => AsyncEventKind::QpAccessErr,
            ffi::IBV_EVENT_COMM_EST => AsyncEventKind::CommEst,
            ffi::IBV_EVENT_SQ_DRAINED => AsyncEventKind::SqDrained,
            ffi::IBV_EVENT_DEVICE_FATAL => AsyncEventKind::DeviceFatal,
            ffi::IBV_EVENT_PORT_ACTIVE => AsyncEventKind::PortActive,
            ffi::IBV_EVENT_PORT_ERR => AsyncEventKind::PortErr,
            ffi::IBV_EVENT_SRQ_ERR => AsyncEventKind::SrqErr,
            ffi::IBV_EVENT_SRQ_LIMIT_REACHED => AsyncEventKind::SrqLimitReached,
            ffi::IBV_EVENT_QP_LAST_WQE_REACHED => AsyncEventKind::QpLastWqeReached,
            ffi::IBV_EVENT_GID_CHANGE => AsyncEventKind::GidChange,
            x => AsyncEventKind::Other(x),
        }
    }

    fn element_kind(self) -> ElementKind {
        match self {
            AsyncEventKind::CqErr => ElementKind::Cq,
            AsyncEventKind::QpFatal
            | AsyncEventKind::QpReqErr
            | AsyncEventKind::QpAccessErr
            | AsyncEventKind::CommEst
            | AsyncEventKind::SqDrained
            | AsyncEventKind::QpLastWqeReached => ElementKind::Qp,
            AsyncEventKind::SrqErr | AsyncEventKind::SrqLimitReached => ElementKind::Srq,
            AsyncEventKind::PortActive | AsyncEventKind::PortErr | AsyncEventKind::GidChange => {
                ElementKind::Port
            }
            // Path migration, LID/PKey/SM changes and client reregister carry a QP or a
            // port; we do not look at them.
            AsyncEventKind::Other(v) if (6..=7).contains(&v) => ElementKind::Qp,
            AsyncEventKind::Other(v) if (11..=13).contains(&v) || v == 17 => ElementKind::Port,
            AsyncEventKind::DeviceFatal | AsyncEventKind::Other(_) => ElementKind::Device,
        }
    }
}

/// What an async event is about. Pointers are given as addresses, to compare with
/// `as_ptr()` of the crate's objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncElement {
    /// A CQ (`struct ibv_cq *` address).
    Cq(usize),
    /// A QP (`struct ibv_qp *` address and its QPN).
    Qp {
        /// Address.
        ptr: usize,
        /// QP number.
        qpn: u32,
    },
    /// An SRQ (`struct ibv_srq *` address).
    Srq(usize),
    /// A port number.
    Port(i32),
    /// The whole device.
    Device,
}

/// One asynchronous event (already acknowledged).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AsyncEvent {
    /// Which event.
    pub kind: AsyncEventKind,
    /// What it is about.
    pub element: AsyncElement,
}

impl std::fmt::Display for AsyncEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            AsyncEventKind::Other(v) => write!(f, "EVENT_{v}")?,
            k => write!(f, "{k:?}")?,
        }
        match self.element {
            AsyncElement::Cq(p) => write!(f, " cq {p:#x}"),
            AsyncElement::Qp { ptr, qpn } => write!(f, " qp {qpn:#x} ({ptr:#x})"),
            AsyncElement::Srq(p) => write!(f, " srq {p:#x}"),
            AsyncElement::Port(n) => write!(f, " port {n}"),
            AsyncElement::Device => write!(f, " device"),
        }
    }
}

impl Context {
    /// The context's async event fd (`ibv_context.async_fd`): readable when an event is
    /// pending, for poll/epoll; read events with [`Context::poll_async_event`].
    pub fn async_fd(&self) -> std::os::fd::RawFd {
        // SAFETY: live context: reading its async_fd field.
        unsafe { (*self.inner.raw).async_fd }
    }

    /// The next asynchronous event, if one is pending (never blocks). The event is
    /// acknowledged before this returns. CQ overruns show up as [`AsyncEventKind::CqErr`].
    pub fn poll_async_event(&self) -> Result<Option<AsyncEvent>> {
        use std::sync::atomic::Ordering;
        if !self.inner.async_nonblocking.load(Ordering::Acquire) {
            // SAFETY: live context: reading its async_fd field.
            let fd = unsafe { (*self.inner.raw).async_fd };
            // SAFETY: fcntl on an fd libibverbs owns; we only add O_NONBLOCK, which
            // ibv_get_async_event handles (returns -1 with EAGAIN).
            let rc = unsafe {
                let fl = libc::fcntl(fd, libc::F_GETFL);
                if fl < 0 {
                    fl
                } else {
                    libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK)
                }
            };
            if rc < 0 {
                return Err(Error::verb("fcntl(async_fd, O_NONBLOCK)", last_errno(), ""));
            }
            self.inner.async_nonblocking.store(true, Ordering::Release);
        }
        let mut ev = ibv_async_event::zeroed();
        // SAFETY: live context; `ev` is writable. The fd is non-blocking.
        let rc = unsafe { (self.inner.verbs.ibv_get_async_event)(self.inner.raw, &mut ev) };
        if rc != 0 {
            let errno = last_errno();
            if errno == libc::EAGAIN || errno == libc::EWOULDBLOCK {
                return Ok(None);
            }
            return Err(Error::verb("ibv_get_async_event", errno, ""));
        }
        let kind = AsyncEventKind::from_ibv(ev.event_type);
        // SAFETY: the union member read matches the event type (verbs.h documents which
        // element each event carries); reading a pointer member only copies its address.
        let element = unsafe {
            match kind.element_kind() {
                ElementKind::Cq => AsyncElement::Cq(ev.element.cq as usize),
                ElementKind::Qp => AsyncElement::Qp {
                    ptr: ev.element.qp as usize,
                    qpn: if ev.element.qp.is_null() {
                        0
                    } else {
                        (*ev.element.qp).qp_num
                    },
                },
                ElementKind::Srq => AsyncElement::Srq(ev.element.srq as usize),
                ElementKind::Port => AsyncElement::Port(ev.element.port_num),
                ElementKind::Device => AsyncElement::Device,
            }
        };
        // SAFETY: `ev` was filled by ibv_get_async_event and is acknowledged once.
        unsafe { (self.inner.verbs.ibv_ack_async_event)(&mut ev) };
        Ok(Some(AsyncEvent { kind, element }))
    }
}
