//! Protection domains, memory regions, completion queues, shared receive queues, address
//! handles.
//!
//! Each object holds an `Arc` of what it was created from (an MR its PD, a PD its context),
//! so the C objects are destroyed child-first whatever order the Rust values are dropped in.

use super::device::{last_errno, last_errno_or, Context};
use crate::endpoint::codec::QpEndpoint;
use crate::error::{Error, Result};
use crate::ffi::{self, ibv_ah, ibv_cq, ibv_mr, ibv_pd, ibv_srq, ibv_wc};
use crate::types::Access;
use std::fmt;
use std::sync::Arc;

// ---------------------------------------------------------------------------------------------
// PD
// ---------------------------------------------------------------------------------------------

pub(crate) struct PdInner {
    raw: *mut ibv_pd,
    pub(crate) ctx: Context,
}

// SAFETY: verbs objects may be used from any thread; freed only in Drop (last owner).
unsafe impl Send for PdInner {}
// SAFETY: as above.
unsafe impl Sync for PdInner {}

impl Drop for PdInner {
    fn drop(&mut self) {
        // SAFETY: `raw` came from ibv_alloc_pd; every MR/QP/SRQ/AH on it holds an Arc of this
        // struct, so none is left.
        unsafe { (self.ctx.verbs().ibv_dealloc_pd)(self.raw) };
    }
}

/// A protection domain. Cheap to clone.
#[derive(Clone)]
pub struct Pd {
    pub(crate) inner: Arc<PdInner>,
}

impl fmt::Debug for Pd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pd").field("raw", &self.inner.raw).finish()
    }
}

impl Pd {
    /// `ibv_alloc_pd`.
    pub fn new(ctx: &Context) -> Result<Pd> {
        // SAFETY: live context.
        let raw = unsafe { (ctx.verbs().ibv_alloc_pd)(ctx.as_ptr()) };
        if raw.is_null() {
            return Err(Error::verb("ibv_alloc_pd", last_errno(), ""));
        }
        Ok(Pd {
            inner: Arc::new(PdInner {
                raw,
                ctx: ctx.clone(),
            }),
        })
    }

    /// `struct ibv_pd *`, valid while `self` lives.
    pub fn as_ptr(&self) -> *mut ibv_pd {
        self.inner.raw
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.inner.ctx
    }
}

// ---------------------------------------------------------------------------------------------
// MR
// ---------------------------------------------------------------------------------------------

/// The memory behind an [`Mr`]: owned (a private anonymous mapping) or the caller's.
enum Backing {
    Owned { _map: memmap2::MmapMut },
    External,
}

/// A registered memory region. Access rights are explicit: nothing is remote unless asked.
pub struct Mr {
    raw: *mut ibv_mr,
    pd: Pd,
    backing: Backing,
    access: Access,
}

// SAFETY: the MR is a kernel object usable from any thread; the owned mapping moves with it.
unsafe impl Send for Mr {}
// SAFETY: `&Mr` only reads the descriptor; buffer access goes through bounds-checked copies.
unsafe impl Sync for Mr {}

impl fmt::Debug for Mr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: live MR; its fields are written once at registration.
        let m = unsafe { &*self.raw };
        f.debug_struct("Mr")
            .field("addr", &format_args!("{:#x}", m.addr as u64))
            .field("len", &m.length)
            .field("lkey", &format_args!("{:#x}", m.lkey))
            .field("rkey", &format_args!("{:#x}", m.rkey))
            .field("access", &self.access)
            .finish()
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: `raw` came from ibv_reg_mr and is deregistered once, before the owned
        // mapping (a field dropped after this) is unmapped.
        unsafe { (self.pd.context().verbs().ibv_dereg_mr)(self.raw) };
    }
}

fn memlock_limit() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid out-pointer.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) };
    if rc != 0 || r.rlim_cur == libc::RLIM_INFINITY {
        None
    } else {
        Some(r.rlim_cur)
    }
}

fn human_bytes(n: u64) -> String {
    if n >= 1 << 30 && n % (1 << 30) == 0 {
        format!("{} GiB", n >> 30)
    } else if n >= 1 << 20 && n % (1 << 20) == 0 {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n % (1 << 10) == 0 {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}

/// Checks an access mask the way the kernel does, with a clearer message: remote write and
/// remote atomic need local write.
pub fn check_access(access: Access) -> Result<()> {
    let known = ffi::IBV_ACCESS_LOCAL_WRITE
        | ffi::IBV_ACCESS_REMOTE_WRITE
        | ffi::IBV_ACCESS_REMOTE_READ
        | ffi::IBV_ACCESS_REMOTE_ATOMIC
        | ffi::IBV_ACCESS_MW_BIND
        | ffi::IBV_ACCESS_ZERO_BASED
        | ffi::IBV_ACCESS_ON_DEMAND
        | ffi::IBV_ACCESS_HUGETLB
        | ffi::IBV_ACCESS_RELAXED_ORDERING;
    if access.0 & !known != 0 {
        return Err(Error::InvalidArgument {
            context: "ibv_reg_mr",
            detail: format!("unknown access bits {:#x}", access.0 & !known),
        });
    }
    let needs_local = ffi::IBV_ACCESS_REMOTE_WRITE | ffi::IBV_ACCESS_REMOTE_ATOMIC;
    if access.0 & needs_local != 0 && access.0 & ffi::IBV_ACCESS_LOCAL_WRITE == 0 {
        return Err(Error::InvalidArgument {
            context: "ibv_reg_mr",
            detail: "REMOTE_WRITE and REMOTE_ATOMIC require LOCAL_WRITE".into(),
        });
    }
    Ok(())
}

impl Mr {
    /// Registers `len` bytes at `addr`.
    ///
    /// # Safety
    /// The memory must stay mapped and valid until the MR is dropped, and the caller must not
    /// rely on its contents while the device may write it (as `access` allows).
    pub unsafe fn register(pd: &Pd, addr: *mut u8, len: usize, access: Access) -> Result<Mr> {
        // SAFETY: forwarded caller contract.
        unsafe { Self::register_inner(pd, addr, len, access, Backing::External) }
    }

    /// Allocates `len` bytes (zeroed, page aligned) and registers them; the memory lives as
    /// long as the MR.
    pub fn alloc(pd: &Pd, len: usize, access: Access) -> Result<Mr> {
        if len == 0 {
            return Err(Error::InvalidArgument {
                context: "Mr::alloc",
                detail: "length 0".into(),
            });
        }
        let mut map = memmap2::MmapMut::map_anon(len).map_err(|e| Error::io("mmap", &e))?;
        let addr = map.as_mut_ptr();
        // SAFETY: the mapping is owned by the MR (moved into `Backing::Owned`) and unmapped
        // only after deregistration (see Drop); moving an MmapMut does not move the mapping.
        unsafe { Self::register_inner(pd, addr, len, access, Backing::Owned { _map: map }) }
    }

    /// # Safety
    /// As for [`Mr::register`].
    unsafe fn register_inner(
        pd: &Pd,
        addr: *mut u8,
        len: usize,
        access: Access,
        backing: Backing,
    ) -> Result<Mr> {
        check_access(access)?;
        let verbs = pd.context().verbs();
        let raw = if access.0 & ffi::IBV_ACCESS_RELAXED_ORDERING != 0 {
            // SAFETY: live PD; the caller guarantees the memory range.
            unsafe {
                (verbs.ibv_reg_mr_iova2)(pd.as_ptr(), addr.cast(), len, addr as u64, access.0)
            }
        } else {
            // SAFETY: as above. `access` fits an int (checked against the known bits).
            unsafe { (verbs.ibv_reg_mr)(pd.as_ptr(), addr.cast(), len, access.0 as libc::c_int) }
        };
        if raw.is_null() {
            let errno = last_errno();
            let hint = match (errno, memlock_limit()) {
                (libc::ENOMEM | libc::EPERM, Some(lim)) => format!(
                    "locked-memory limit is {}, registering {}: see ulimit -l (raise it: \
                     `ulimit -l unlimited`, LimitMEMLOCK= in systemd, or limits.conf memlock)",
                    human_bytes(lim),
                    human_bytes(len as u64)
                ),
                (libc::ENOMEM | libc::EPERM, None) => format!(
                    "registering {} failed with no locked-memory limit: the device or the \
                     system is out of memory",
                    human_bytes(len as u64)
                ),
                (libc::EINVAL, _) => {
                    "check the access flags and that the range is mapped".to_string()
                }
                (libc::EFAULT, _) => "the range is not mapped in this process".to_string(),
                _ => String::new(),
            };
            return Err(Error::verb("ibv_reg_mr", errno, hint));
        }
        Ok(Mr {
            raw,
            pd: pd.clone(),
            backing,
            access,
        })
    }

    /// `struct ibv_mr *`, valid while `self` lives.
    pub fn as_ptr(&self) -> *mut ibv_mr {
        self.raw
    }

    /// The access rights it was registered with.
    pub fn access(&self) -> Access {
        self.access
    }

    /// The PD.
    pub fn pd(&self) -> &Pd {
        &self.pd
    }

    /// First byte of the region.
    pub fn as_mut_ptr(&self) -> *mut u8 {
        // SAFETY: `raw` is a live MR; its fields are written once at registration.
        unsafe { (*self.raw).addr.cast() }
    }

    /// Whether the memory belongs to the MR ([`Mr::alloc`]) rather than the caller.
    pub fn owns_memory(&self) -> bool {
        matches!(self.backing, Backing::Owned { .. })
    }

    /// Length of the region in bytes.
    fn region_len(&self) -> usize {
        // SAFETY: live MR, field written once at registration.
        unsafe { (*self.raw).length }
    }

    fn check_range(&self, offset: usize, n: usize) -> Result<()> {
        match offset.checked_add(n) {
            Some(end) if end <= self.region_len() => Ok(()),
            _ => Err(Error::InvalidArgument {
                context: "Mr",
                detail: format!(
                    "range {offset}+{n} outside the {}-byte region",
                    self.region_len()
                ),
            }),
        }
    }

    /// Copies `src` into the region at `offset` (bounds checked). Volatile byte stores: the
    /// device may be reading or writing the region concurrently.
    pub fn write_at(&self, offset: usize, src: &[u8]) -> Result<()> {
        self.check_range(offset, src.len())?;
        let base = self.as_mut_ptr();
        for (i, &b) in src.iter().enumerate() {
            // SAFETY: in bounds (checked); the region is mapped while the MR lives.
            unsafe { base.add(offset + i).write_volatile(b) };
        }
        Ok(())
    }

    /// Copies bytes at `offset` into `dst` (bounds checked, volatile loads).
    pub fn read_at(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.check_range(offset, dst.len())?;
        let base = self.as_mut_ptr();
        for (i, b) in dst.iter_mut().enumerate() {
            // SAFETY: in bounds (checked); the region is mapped while the MR lives.
            *b = unsafe { base.add(offset + i).read_volatile() };
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// CQ
// ---------------------------------------------------------------------------------------------

pub(crate) struct CqInner {
    pub(super) raw: *mut ibv_cq,
    pub(super) ctx: Context,
    /// The completion channel the CQ reports to, kept alive until after the CQ.
    pub(super) _channel: Option<Box<dyn std::any::Any + Send + Sync>>,
}

// SAFETY: verbs objects may be used from any thread; freed only in Drop (last owner).
unsafe impl Send for CqInner {}
// SAFETY: as above.
unsafe impl Sync for CqInner {}

impl Drop for CqInner {
    fn drop(&mut self) {
        // SAFETY: `raw` came from ibv_create_cq; every QP using it holds an Arc of this.
        unsafe { (self.ctx.verbs().ibv_destroy_cq)(self.raw) };
    }
}

/// A completion queue. Cheap to clone; destroyed when the last clone and the last QP using
/// it are gone.
#[derive(Clone)]
pub struct Cq {
    pub(crate) inner: Arc<CqInner>,
}

impl fmt::Debug for Cq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cq")
            .field("raw", &self.inner.raw)
            .field("cqe", &self.cqe())
            .finish()
    }
}

impl Cq {
    /// `ibv_create_cq` with at least `cqe` entries (no completion channel, vector 0).
    pub fn new(ctx: &Context, cqe: u32) -> Result<Cq> {
        let n = libc::c_int::try_from(cqe)
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| Error::InvalidArgument {
                context: "ibv_create_cq",
                detail: format!("cqe {cqe} must be 1..=i32::MAX"),
            })?;
        // SAFETY: live context; null channel and context are allowed.
        let raw = unsafe {
            (ctx.verbs().ibv_create_cq)(
                ctx.as_ptr(),
                n,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            )
        };
        if raw.is_null() {
            let errno = last_errno();
            let hint = match ctx.query_device() {
                Ok(d) if i64::from(cqe) > i64::from(d.max_cqe) => {
                    format!("cqe {cqe} > device max_cqe {}", d.max_cqe)
                }
                _ => String::new(),
            };
            return Err(Error::verb("ibv_create_cq", errno, hint));
        }
        Ok(Cq {
            inner: Arc::new(CqInner {
                raw,
                ctx: ctx.clone(),
                _channel: None,
            }),
        })
    }

    /// `struct ibv_cq *`, valid while `self` lives.
    pub fn as_ptr(&self) -> *mut ibv_cq {
        self.inner.raw
    }

    /// Entries the device granted (≥ asked).
    pub fn cqe(&self) -> u32 {
        // SAFETY: live CQ; `cqe` is written by create (and resize, which we never call).
        u32::try_from(unsafe { (*self.inner.raw).cqe }).unwrap_or(0)
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.inner.ctx
    }

    /// `ibv_poll_cq` into `out`; returns how many completions were written.
    pub fn poll(&self, out: &mut [ibv_wc]) -> Result<usize> {
        let n = libc::c_int::try_from(out.len()).unwrap_or(libc::c_int::MAX);
        // SAFETY: live CQ; `out` has room for `n` entries.
        let rc = unsafe { ffi::ops::poll_cq(self.inner.raw, n, out.as_mut_ptr()) };
        if rc < 0 {
            return Err(Error::verb("ibv_poll_cq", -rc, ""));
        }
        Ok(rc as usize)
    }
}

impl PartialEq for Cq {
    fn eq(&self, other: &Cq) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

// ---------------------------------------------------------------------------------------------
// SRQ
// ---------------------------------------------------------------------------------------------

pub(crate) struct SrqInner {
    raw: *mut ibv_srq,
    pd: Pd,
    granted: ffi::ibv_srq_attr,
}

// SAFETY: verbs objects may be used from any thread; freed only in Drop (last owner).
unsafe impl Send for SrqInner {}
// SAFETY: as above.
unsafe impl Sync for SrqInner {}

impl Drop for SrqInner {
    fn drop(&mut self) {
        // SAFETY: `raw` came from ibv_create_srq; every QP using it holds an Arc of this.
        unsafe { (self.pd.context().verbs().ibv_destroy_srq)(self.raw) };
    }
}

/// A shared receive queue. Cheap to clone.
#[derive(Clone)]
pub struct Srq {
    pub(crate) inner: Arc<SrqInner>,
}

impl fmt::Debug for Srq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Srq")
            .field("raw", &self.inner.raw)
            .field("max_wr", &self.inner.granted.max_wr)
            .field("max_sge", &self.inner.granted.max_sge)
            .finish()
    }
}

impl Srq {
    /// `ibv_create_srq` with room for `max_wr` receives of `max_sge` SGEs; the granted sizes
    /// are read back with `ibv_query_srq`.
    pub fn new(pd: &Pd, max_wr: u32, max_sge: u32) -> Result<Srq> {
        let verbs = pd.context().verbs();
        let mut init = ffi::ibv_srq_init_attr::zeroed();
        init.attr.max_wr = max_wr;
        init.attr.max_sge = max_sge;
        // SAFETY: live PD; `init` is a zeroed, filled init attr.
        let raw = unsafe { (verbs.ibv_create_srq)(pd.as_ptr(), &mut init) };
        if raw.is_null() {
            let errno = last_errno();
            let hint = match pd.context().query_device() {
                Ok(d) => format!(
                    "asked max_wr {max_wr}, max_sge {max_sge}; device max_srq_wr {}, \
                     max_srq_sge {}",
                    d.max_srq_wr, d.max_srq_sge
                ),
                Err(_) => String::new(),
            };
            return Err(Error::verb("ibv_create_srq", errno, hint));
        }
        let mut granted = ffi::ibv_srq_attr::default();
        // SAFETY: live SRQ; `granted` is writable.
        let rc = unsafe { (verbs.ibv_query_srq)(raw, &mut granted) };
        if rc != 0 {
            // Fall back on what create wrote back into `init.attr`.
            granted = init.attr;
        }
        Ok(Srq {
            inner: Arc::new(SrqInner {
                raw,
                pd: pd.clone(),
                granted,
            }),
        })
    }

    /// `struct ibv_srq *`, valid while `self` lives.
    pub fn as_ptr(&self) -> *mut ibv_srq {
        self.inner.raw
    }

    /// Granted receive capacity.
    pub fn max_wr(&self) -> u32 {
        self.inner.granted.max_wr
    }

    /// Granted SGEs per receive.
    pub fn max_sge(&self) -> u32 {
        self.inner.granted.max_sge
    }

    /// The PD.
    pub fn pd(&self) -> &Pd {
        &self.inner.pd
    }

    /// Arms the limit event: `IBV_EVENT_SRQ_LIMIT_REACHED` fires once fewer than `limit`
    /// receives remain posted.
    pub fn arm_limit(&self, limit: u32) -> Result<()> {
        let mut a = ffi::ibv_srq_attr {
            srq_limit: limit,
            ..Default::default()
        };
        // SAFETY: live SRQ; `a` is a valid attr.
        let rc = unsafe {
            (self.inner.pd.context().verbs().ibv_modify_srq)(
                self.inner.raw,
                &mut a,
                ffi::IBV_SRQ_LIMIT,
            )
        };
        if rc != 0 {
            return Err(Error::verb(
                "ibv_modify_srq(LIMIT)",
                last_errno_or(rc),
                format!("limit {limit} must be below max_wr {}", self.max_wr()),
            ));
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// AH
// ---------------------------------------------------------------------------------------------

/// An address handle (UD destination).
pub struct Ah {
    raw: *mut ibv_ah,
    pd: Pd,
}

// SAFETY: verbs objects may be used from any thread; freed only in Drop.
unsafe impl Send for Ah {}
// SAFETY: as above; only read through `&`.
unsafe impl Sync for Ah {}

impl fmt::Debug for Ah {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ah").field("raw", &self.raw).finish()
    }
}

impl Drop for Ah {
    fn drop(&mut self) {
        // SAFETY: `raw` came from ibv_create_ah and is destroyed once.
        unsafe { (self.pd.context().verbs().ibv_destroy_ah)(self.raw) };
    }
}

impl Ah {
    /// `ibv_create_ah` towards `remote` from local `port`, using local GID `sgid_index` when
    /// the remote has a GID (always on RoCE).
    pub fn new(pd: &Pd, remote: &QpEndpoint, port: u8, sgid_index: u8, sl: u8) -> Result<Ah> {
        let mut a = super::address::ah_attr(remote, port, sgid_index, sl);
        // SAFETY: live PD; `a` is a zeroed, filled attr.
        let raw = unsafe { (pd.context().verbs().ibv_create_ah)(pd.as_ptr(), &mut a) };
        if raw.is_null() {
            return Err(Error::verb(
                "ibv_create_ah",
                last_errno(),
                format!("check the remote GID/LID and local GID index {sgid_index} on port {port}"),
            ));
        }
        Ok(Ah {
            raw,
            pd: pd.clone(),
        })
    }

    /// `struct ibv_ah *`, valid while `self` lives.
    pub fn as_ptr(&self) -> *mut ibv_ah {
        self.raw
    }

    /// The PD.
    pub fn pd(&self) -> &Pd {
        &self.pd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_write_without_local_write_is_refused_before_the_kernel() {
        let e = check_access(Access::REMOTE_WRITE).unwrap_err();
        assert!(e.to_string().contains("require LOCAL_WRITE"), "{e}");
        assert!(check_access(Access::REMOTE_ATOMIC).is_err());
        assert!(check_access(Access::LOCAL_WRITE | Access::REMOTE_WRITE).is_ok());
        assert!(check_access(Access::REMOTE_READ).is_ok());
        assert!(check_access(Access::LOCAL_READ).is_ok());
        assert!(check_access(Access(1 << 30)).is_err());
    }

    #[test]
    fn sizes_print_in_binary_units() {
        assert_eq!(human_bytes(64 << 10), "64 KiB");
        assert_eq!(human_bytes(1 << 20), "1 MiB");
        assert_eq!(human_bytes(1000), "1000 bytes");
        assert_eq!(human_bytes(8 << 30), "8 GiB");
    }
}
