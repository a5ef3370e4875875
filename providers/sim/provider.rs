//! PD and MR of the sim, and the [`Provider`](crate::providers::Provider) implementation that
//! puts the mlx5 hot-path types on sim memory.

use std::sync::Arc;

use super::{Shared, SimDevice};
use crate::providers::{Access, MemoryRegion};

/// A protection domain of the sim.
#[derive(Debug)]
pub struct SimPd {
    pub(crate) id: u32,
}

impl SimPd {
    /// The PD number.
    pub fn id(&self) -> u32 {
        self.id
    }
}

/// A memory region registered with the sim (lkey == rkey, as on mlx5). Dropping it
/// deregisters it: later WQEs naming its key fail with LOC_PROT / REM_ACCESS.
pub struct SimMr {
    addr: u64,
    len: usize,
    key: u32,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for SimMr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimMr")
            .field("addr", &format_args!("{:#x}", self.addr))
            .field("len", &self.len)
            .field("key", &format_args!("{:#x}", self.key))
            .finish()
    }
}

impl Drop for SimMr {
    fn drop(&mut self) {
        self.shared.lock().dereg_mr(self.key);
    }
}

impl MemoryRegion for SimMr {
    fn addr(&self) -> u64 {
        self.addr
    }
    fn len(&self) -> usize {
        self.len
    }
    fn lkey(&self) -> u32 {
        self.key
    }
    fn rkey(&self) -> u32 {
        self.key
    }
}

impl SimDevice {
    /// Allocate a PD.
    pub fn alloc_sim_pd(&self) -> SimPd {
        SimPd {
            id: self.alloc_pd_raw(),
        }
    }

    /// Register `len` bytes at `addr` in `pd`.
    ///
    /// # Safety
    /// The memory must stay valid until the MR is dropped; the device reads and writes it as
    /// `access` allows, from the device thread too.
    pub unsafe fn reg_sim_mr(
        &self,
        pd: &SimPd,
        addr: *mut u8,
        len: usize,
        access: Access,
    ) -> crate::Result<SimMr> {
        if addr.is_null() || len == 0 {
            return Err(crate::Error::InvalidArgument {
                context: "sim reg_mr",
                detail: format!("empty or null region ({addr:p}, {len} B)"),
            });
        }
        let key = self
            .shared
            .lock()
            .reg_mr(pd.id, addr as u64, len as u64, access);
        Ok(SimMr {
            addr: addr as u64,
            len,
            key,
            shared: Arc::clone(&self.shared),
        })
    }
}
