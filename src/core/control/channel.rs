//! Completion channels: `ibv_create_comp_channel`, CQs that report to one, and the events.
//!
//! Contract: [`CompChannel`] owns the channel (destroyed on drop, after every CQ using it:
//! each such [`Cq`] keeps a clone). Its fd ([`AsRawFd`]) is set `O_NONBLOCK` at creation;
//! [`CompChannel::get_event`] returns `None` when nothing is pending, or with `block` sleeps
//! in `poll(2)` first. Each event read is acknowledged before it is returned
//! (`ibv_ack_cq_events` with 1), so destroying a CQ never waits. Arm with [`Cq::req_notify`]
//! (`ibv_req_notify_cq`), then poll once more before sleeping: one arm gives at most one
//! event, and a completion that landed before the arm gives none.

use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use super::device::{last_errno, Context};
use super::resources::{Cq, CqInner};
use crate::error::{Error, Result};
use crate::ffi::{self, ibv_comp_channel, ibv_cq};

struct ChannelInner {
    raw: *mut ibv_comp_channel,
    fd: RawFd,
    ctx: Context,
}

// SAFETY: libibverbs channels may be used from any thread; freed only in Drop.
unsafe impl Send for ChannelInner {}
// SAFETY: as above.
unsafe impl Sync for ChannelInner {}

impl Drop for ChannelInner {
    fn drop(&mut self) {
        // SAFETY: `raw` came from ibv_create_comp_channel; every CQ using it holds an Arc.
        unsafe { (self.ctx.verbs().ibv_destroy_comp_channel)(self.raw) };
    }
}

/// A completion channel (see the module doc). Cheap to clone.
#[derive(Clone)]
pub struct CompChannel {
    inner: Arc<ChannelInner>,
}

impl std::fmt::Debug for CompChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompChannel")
            .field("fd", &self.inner.fd)
            .finish()
    }
}

impl AsRawFd for CompChannel {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.fd
    }
}

impl CompChannel {
    /// `ibv_create_comp_channel`, its fd made non-blocking.
    pub fn new(ctx: &Context) -> Result<CompChannel> {
        // SAFETY: a live context.
        let raw = unsafe { (ctx.verbs().ibv_create_comp_channel)(ctx.as_ptr()) };
        if raw.is_null() {
            return Err(Error::verb("ibv_create_comp_channel", last_errno(), ""));
        }
        // `struct ibv_comp_channel { struct ibv_context *context; int fd; int refcnt; }`:
        // the fd is the int after the pointer.
        // SAFETY: `raw` is a live channel; the fd field is at that offset (verbs.h).
        let fd = unsafe {
            raw.cast::<u8>()
                .add(std::mem::size_of::<usize>())
                .cast::<i32>()
                .read()
        };
        let inner = Arc::new(ChannelInner {
            raw,
            fd,
            ctx: ctx.clone(),
        });
        // SAFETY: fcntl on the channel's fd; ibv_get_cq_event handles EAGAIN.
        let rc = unsafe {
            let fl = libc::fcntl(fd, libc::F_GETFL);
            if fl < 0 {
                fl
            } else {
                libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK)
            }
        };
        if rc < 0 {
            return Err(Error::verb(
                "fcntl(comp channel fd, O_NONBLOCK)",
                last_errno(),
                "",
            ));
        }
        Ok(CompChannel { inner })
    }

    /// The next event: the `struct ibv_cq *` address it is for (compare with
    /// [`Cq::as_ptr`]), or `None` (nothing pending, or a signal interrupted the sleep).
    /// Acknowledged before it is returned.
    pub fn get_event(&self, block: bool) -> Result<Option<usize>> {
        loop {
            let mut cq: *mut ibv_cq = std::ptr::null_mut();
            let mut cq_ctx: *mut libc::c_void = std::ptr::null_mut();
            // SAFETY: a live channel; both out pointers are writable. Non-blocking fd.
            let rc = unsafe {
                (self.inner.ctx.verbs().ibv_get_cq_event)(self.inner.raw, &mut cq, &mut cq_ctx)
            };
            if rc == 0 {
                // SAFETY: `cq` is the live CQ the event was for (its owner holds this
                // channel, so the CQ cannot have been destroyed with an event pending).
                unsafe { (self.inner.ctx.verbs().ibv_ack_cq_events)(cq, 1) };
                return Ok(Some(cq as usize));
            }
            let errno = last_errno();
            if errno != libc::EAGAIN {
                return Err(Error::verb("ibv_get_cq_event", errno, ""));
            }
            if !block {
                return Ok(None);
            }
            let mut p = libc::pollfd {
                fd: self.inner.fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd; no timeout.
            if unsafe { libc::poll(&mut p, 1, -1) } < 0 {
                let errno = last_errno();
                if errno == libc::EINTR {
                    return Ok(None);
                }
                return Err(Error::verb("poll(comp channel fd)", errno, ""));
            }
        }
    }
}

impl Cq {
    /// `ibv_create_cq` with at least `cqe` entries reporting its events to `channel`.
    pub fn with_channel(ctx: &Context, cqe: u32, channel: &CompChannel) -> Result<Cq> {
        let n = libc::c_int::try_from(cqe)
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| Error::InvalidArgument {
                context: "ibv_create_cq",
                detail: format!("cqe {cqe} must be 1..=i32::MAX"),
            })?;
        // SAFETY: a live context and channel of that context.
        let raw = unsafe {
            (ctx.verbs().ibv_create_cq)(ctx.as_ptr(), n, std::ptr::null_mut(), channel.inner.raw, 0)
        };
        if raw.is_null() {
            return Err(Error::verb("ibv_create_cq", last_errno(), ""));
        }
        Ok(Cq {
            inner: Arc::new(CqInner {
                raw,
                ctx: ctx.clone(),
                _channel: Some(Box::new(channel.clone())),
            }),
        })
    }

    /// `ibv_req_notify_cq`: arm for the next completion (`solicited`: the next solicited one).
    pub fn req_notify(&self, solicited: bool) -> Result<()> {
        // SAFETY: a live CQ.
        let rc = unsafe { ffi::ops::req_notify_cq(self.as_ptr(), solicited) };
        if rc != 0 {
            return Err(Error::verb("ibv_req_notify_cq", rc, ""));
        }
        Ok(())
    }
}
