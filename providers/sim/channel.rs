//! The sim's completion channel: a pipe the device writes one event (the CQN, 4 bytes) into
//! per fired arm, and the host reads (`ibv_get_cq_event` on hardware).
//!
//! The read end is non-blocking; [`EventChannel::get_event`] with `block` sleeps in
//! `poll(2)` until it is readable. The fd ([`AsRawFd`]) can be handed to epoll or an async
//! runtime instead. Acknowledging is counted only (nothing to release in the sim).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::mlx5::EventChannel;

/// A completion channel of the sim (see the module doc).
#[derive(Debug)]
pub struct SimChannel {
    rd: OwnedFd,
    pub(crate) wr: Arc<OwnedFd>,
    acked: AtomicU64,
}

impl SimChannel {
    pub(crate) fn new() -> crate::Result<SimChannel> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` has room for the two descriptors pipe2 writes.
        let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) };
        if rc != 0 {
            return Err(crate::Error::io(
                "sim: pipe2 for a completion channel",
                &std::io::Error::last_os_error(),
            ));
        }
        // SAFETY: pipe2 succeeded: both fds are open and owned by nobody else.
        let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok(SimChannel {
            rd,
            wr: Arc::new(wr),
            acked: AtomicU64::new(0),
        })
    }

    /// Events acknowledged so far.
    pub fn acked(&self) -> u64 {
        self.acked.load(Ordering::Relaxed)
    }
}

impl AsRawFd for SimChannel {
    fn as_raw_fd(&self) -> RawFd {
        self.rd.as_raw_fd()
    }
}

impl EventChannel for SimChannel {
    fn get_event(&self, block: bool) -> crate::Result<Option<u32>> {
        loop {
            let mut b = [0u8; 4];
            // SAFETY: reading at most 4 bytes into a live 4-byte buffer from our fd.
            let n = unsafe { libc::read(self.rd.as_raw_fd(), b.as_mut_ptr().cast(), 4) };
            if n == 4 {
                return Ok(Some(u32::from_ne_bytes(b)));
            }
            let err = std::io::Error::last_os_error();
            if n >= 0 || err.raw_os_error() != Some(libc::EAGAIN) {
                return Err(crate::Error::io(
                    "sim: reading the completion channel",
                    &err,
                ));
            }
            if !block {
                return Ok(None);
            }
            let mut p = libc::pollfd {
                fd: self.rd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd; no timeout.
            let rc = unsafe { libc::poll(&mut p, 1, -1) };
            if rc < 0 {
                let err = std::io::Error::last_os_error();
                if err.raw_os_error() == Some(libc::EINTR) {
                    return Ok(None);
                }
                return Err(crate::Error::io(
                    "sim: poll on the completion channel",
                    &err,
                ));
            }
        }
    }

    fn ack(&self, n: u32) {
        self.acked.fetch_add(u64::from(n), Ordering::Relaxed);
    }
}
