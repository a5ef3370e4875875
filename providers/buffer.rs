//! Registered memory the library owns: [`RegisteredBuf`], and the rule for when the device may
//! write into it.
//!
//! [`Provider::alloc_buf`](super::Provider::alloc_buf) maps fresh anonymous memory
//! (page-aligned, zeroed; on 2 MiB huge pages when asked and available), registers it and
//! returns both as one value. Nothing is `unsafe` for the caller: the mapping outlives the
//! memory region because the buffer drops the region first, and the buffer is `Send` when the
//! provider's region is.
//!
//! ## When the device may write
//!
//! The device writes into the buffer only
//!
//! - through a request *you* posted whose local SGE points into it (a receive, the local
//!   side of a READ or an atomic), from the `ring` until you poll its completion (or a
//!   later signaled completion that covers it), and
//! - through the peer's RDMA WRITE / atomics, at any time, but only when the buffer was
//!   registered with [`Access::REMOTE_WRITE`](super::Access::REMOTE_WRITE) /
//!   [`Access::REMOTE_ATOMIC`](super::Access::REMOTE_ATOMIC) and only in the
//!   ranges you shared with the peer.
//!
//! Everything else is yours. [`RegisteredBuf::as_mut_slice`] and [`RegisteredBuf::as_slice`]
//! hand out ordinary slices; read or write only the bytes the device does not own at that
//! moment: a receive's bytes after its completion, a ring slot after the completion (or
//! message) that tells you the peer finished writing it. Bytes the device is writing
//! concurrently have no defined value. Out-of-range offsets are errors, never panics.
//!
//! ## Remote views
//!
//! [`RegisteredBuf::remote`] describes a range of the buffer for the peer as a
//! [`RemoteMr`] (address, rkey, length). It travels in the endpoint message
//! ([`crate::connect::connect_qp_server`] and [`crate::connect::connect_qp_client`] share
//! it) and the receiver narrows it with [`RemoteMr::slice`], which checks bounds.

use super::{MemoryRegion, RemoteMr, Sge};
use crate::error::{Error, Result};

/// The size of a huge page `alloc_buf` asks for.
pub const HUGE_PAGE: usize = 2 << 20;
const PAGE: usize = 4096;

/// Which pages back a [`RegisteredBuf`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Pages {
    /// Ordinary 4 KiB pages.
    #[default]
    Normal,
    /// 2 MiB huge pages (fewer TLB and device translation misses) when the system has some
    /// reserved (`vm.nr_hugepages`); otherwise ordinary pages, with
    /// [`RegisteredBuf::note`] saying why.
    HugeOrNormal,
}

/// Owned, page-aligned, registered memory. Dropping it deregisters, then unmaps.
pub struct RegisteredBuf<M: MemoryRegion> {
    // Field order is drop order: the region is deregistered before the memory goes away.
    mr: M,
    map: memmap2::MmapMut,
    len: usize,
    huge: bool,
    note: Option<String>,
}

impl<M: MemoryRegion> std::fmt::Debug for RegisteredBuf<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisteredBuf")
            .field("addr", &format_args!("{:#x}", self.mr.addr()))
            .field("len", &self.len)
            .field("lkey", &self.mr.lkey())
            .field("rkey", &self.mr.rkey())
            .field("huge", &self.huge)
            .finish()
    }
}

fn round_up(n: usize, to: usize) -> Option<usize> {
    n.checked_add(to - 1).map(|v| v / to * to)
}

/// Maps `len` bytes as asked; returns (mapping, huge?, note).
pub(crate) fn map(len: usize, pages: Pages) -> Result<(memmap2::MmapMut, bool, Option<String>)> {
    if len == 0 {
        return Err(Error::InvalidArgument {
            context: "alloc_buf",
            detail: "length 0; a registered buffer needs at least one byte".into(),
        });
    }
    let normal = |note: Option<String>| {
        let n = round_up(len, PAGE).ok_or_else(|| too_large(len))?;
        memmap2::MmapOptions::new()
            .len(n)
            .map_anon()
            .map(|m| (m, false, note))
            .map_err(|e| Error::io(format!("alloc_buf: mmap of {n} bytes"), &e))
    };
    match pages {
        Pages::Normal => normal(None),
        Pages::HugeOrNormal => {
            let n = round_up(len, HUGE_PAGE).ok_or_else(|| too_large(len))?;
            match memmap2::MmapOptions::new().len(n).huge(Some(21)).map_anon() {
                Ok(m) => Ok((m, true, None)),
                Err(e) => normal(Some(format!(
                    "huge pages unavailable ({e}); using 4 KiB pages. Reserve some with \
                     `sysctl vm.nr_hugepages=N` ({} needed for this buffer)",
                    n / HUGE_PAGE
                ))),
            }
        }
    }
}

fn too_large(len: usize) -> Error {
    Error::InvalidArgument {
        context: "alloc_buf",
        detail: format!("length {len} overflows when rounded to a page"),
    }
}

fn out_of_range(what: &'static str, offset: usize, len: usize, size: usize) -> Error {
    Error::InvalidArgument {
        context: what,
        detail: format!("range {offset}+{len} is outside the {size}-byte buffer"),
    }
}

impl<M: MemoryRegion> RegisteredBuf<M> {
    /// Wraps a fresh mapping and the region registered over it. The caller (the provider's
    /// `alloc_buf`) guarantees `mr` covers exactly `map`.
    pub(crate) fn new(
        mr: M,
        map: memmap2::MmapMut,
        len: usize,
        huge: bool,
        note: Option<String>,
    ) -> Self {
        RegisteredBuf {
            mr,
            map,
            len,
            huge,
            note,
        }
    }

    /// Usable length in bytes (the length asked for; the mapping may be a little larger).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty buffer (never, `alloc_buf` refuses 0).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True when the buffer sits on 2 MiB huge pages.
    pub fn huge_pages(&self) -> bool {
        self.huge
    }

    /// Why huge pages were asked for and not used, if they were not.
    pub fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// The memory region (for its keys).
    pub fn mr(&self) -> &M {
        &self.mr
    }

    /// The whole buffer, read-only. See the module doc for which bytes are yours to read.
    pub fn as_slice(&self) -> &[u8] {
        &self.map[..self.len]
    }

    /// The whole buffer, writable. See the module doc for which bytes are yours to write.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.map[..self.len]
    }

    /// `len` bytes at `offset`, read-only; an error when the range leaves the buffer.
    pub fn get(&self, offset: usize, len: usize) -> Result<&[u8]> {
        let end = self.check("RegisteredBuf::get", offset, len)?;
        Ok(&self.map[offset..end])
    }

    /// `len` bytes at `offset`, writable; an error when the range leaves the buffer.
    pub fn get_mut(&mut self, offset: usize, len: usize) -> Result<&mut [u8]> {
        let end = self.check("RegisteredBuf::get_mut", offset, len)?;
        Ok(&mut self.map[offset..end])
    }

    fn check(&self, what: &'static str, offset: usize, len: usize) -> Result<usize> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(end),
            _ => Err(out_of_range(what, offset, len, self.len)),
        }
    }

    /// A local SGE over `len` bytes at `offset`; an error when the range leaves the buffer or
    /// `len` does not fit an SGE (4 GiB).
    pub fn sge(&self, offset: usize, len: usize) -> Result<Sge> {
        self.check("RegisteredBuf::sge", offset, len)?;
        let length = u32::try_from(len)
            .map_err(|_| out_of_range("RegisteredBuf::sge", offset, len, self.len))?;
        Ok(self.mr.sge(offset, length))
    }

    /// A view of `len` bytes at `offset` for the peer (address, rkey, length); an error when
    /// the range leaves the buffer or is empty. Share it only for memory registered with the
    /// remote access the peer will use.
    pub fn remote(&self, offset: usize, len: usize) -> Result<RemoteMr> {
        self.check("RegisteredBuf::remote", offset, len)?;
        if len == 0 {
            return Err(out_of_range("RegisteredBuf::remote", offset, len, self.len));
        }
        Ok(RemoteMr {
            addr: self.mr.addr() + offset as u64,
            len: len as u64,
            rkey: self.mr.rkey(),
        })
    }
}

impl<M: MemoryRegion> MemoryRegion for RegisteredBuf<M> {
    fn addr(&self) -> u64 {
        self.mr.addr()
    }
    fn len(&self) -> usize {
        self.len
    }
    fn lkey(&self) -> u32 {
        self.mr.lkey()
    }
    fn rkey(&self) -> u32 {
        self.mr.rkey()
    }
}
