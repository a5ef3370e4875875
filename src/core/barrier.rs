//! Memory barriers, one name per purpose (as rdma-core's `util/udma_barrier.h`).
//!
//! | barrier | rdma-core 44 | x86_64 | aarch64 |
//! |---|---|---|---|
//! | [`to_device_store_barrier`] | `udma_to_device_barrier` | compiler barrier | `dsb st` |
//! | [`from_device_load_barrier`] | `udma_from_device_barrier` | `lfence` | `dsb ld` |
//! | [`wc_start`] | `mmio_wc_start` (= `mmio_flush_writes`) | `sfence` | `dsb st` |
//! | [`wc_flush`] | `mmio_flush_writes` | `sfence` | `dsb st` |
//! | [`consumer_index_barrier`] | none (see below) | compiler barrier | `dsb ld` |
//!
//! The bodies are rdma-core 44's (the version the FFI mirrors). rdma-core 55 relaxed the two
//! udma barriers on aarch64 to `dmb oshst` and `dmb oshld`; this crate does not.
//!
//! What each instruction orders, and nothing more:
//! - `dsb st` (aarch64): the stores before it complete before any instruction after it
//!   executes. Loads before it are not waited for, so it does not order an earlier load
//!   against a later store.
//! - `dsb ld` (aarch64): the loads before it complete before any instruction after it
//!   executes, so earlier loads are ordered against later loads and later stores. Stores
//!   before it are not waited for.
//! - compiler barrier (x86_64): no instruction. x86_64 keeps stores to write-back memory in
//!   order with each other and never moves a store before an earlier load, so only the
//!   compiler has to be stopped.
//! - `lfence` (x86_64): later instructions start only once every earlier one has completed
//!   locally; rdma-core uses it after seeing a device-written valid bit.
//! - `sfence` (x86_64): every earlier store, write-combining and non-temporal ones included,
//!   is globally visible before any later store.
//!
//! Before the CQ doorbell record store (the consumer index that hands CQE slots back to the
//! device), rdma-core 44's mlx5 poller issues no barrier at all (`update_cons_index` right
//! after the last CQE is read, in `mlx5_poll_cq` and `mlx5_end_poll`); its CQ clean path issues
//! `udma_to_device_barrier` there, to order its own rewrites of CQEs (stores) before it.
//! Here that store is preceded by [`consumer_index_barrier`]: the CQE loads must be complete
//! before the store lets the device write their slots again, an earlier load ordered before
//! a later store. [`to_device_store_barrier`] does not give that on aarch64 (`dsb st` waits
//! for stores only); `dsb ld` does, and on x86_64 the compiler barrier already does.
//!
//! Every barrier is also a compiler barrier: the `asm!` blocks are not `nomem`, so the
//! compiler may not move memory accesses across them.
//!
//! On other architectures the bodies fall back to `SeqCst` fences, which are at least as
//! strong for cacheable memory (no device is supported there; the sim still works).

/// `udma_to_device_barrier`: the stores before it (WQEs, doorbell records in host memory the
/// device reads by DMA) are ordered before the stores after it.
#[inline(always)]
pub fn to_device_store_barrier() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: an empty asm block with a memory clobber: no instruction, no register or stack
    // use; it only forbids the compiler to reorder memory accesses across it.
    unsafe {
        core::arch::asm!("", options(nostack, preserves_flags));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: `dsb st` waits for earlier stores to complete; no operands, no register or
    // memory effect of its own.
    unsafe {
        core::arch::asm!("dsb st", options(nostack, preserves_flags));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// `udma_from_device_barrier`: the load that observed a device-written valid indication (a
/// CQE's owner bit) is ordered before the loads after it (the data it guards).
#[inline(always)]
pub fn from_device_load_barrier() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `lfence` takes no operands; it only waits for earlier instructions.
    unsafe {
        core::arch::asm!("lfence", options(nostack, preserves_flags));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: `dsb ld` waits for earlier loads to complete; no operands, no register or
    // memory effect of its own.
    unsafe {
        core::arch::asm!("dsb ld", options(nostack, preserves_flags));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// `mmio_wc_start`: before the first store to write-combining memory (the BlueFlame
/// register), the stores before it (the doorbell record) are ordered first.
#[inline(always)]
pub fn wc_start() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `sfence` takes no operands and only orders stores.
    unsafe {
        core::arch::asm!("sfence", options(nostack, preserves_flags));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: `dsb st` waits for earlier stores to complete; no operands.
    unsafe {
        core::arch::asm!("dsb st", options(nostack, preserves_flags));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// `mmio_flush_writes`: after the stores to write-combining memory, they are complete (out of
/// the CPU's write-combining buffer) before any later store.
#[inline(always)]
pub fn wc_flush() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `sfence` takes no operands and only orders stores.
    unsafe {
        core::arch::asm!("sfence", options(nostack, preserves_flags));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: `dsb st` waits for earlier stores to complete; no operands.
    unsafe {
        core::arch::asm!("dsb st", options(nostack, preserves_flags));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// Before the CQ doorbell record store that hands consumed CQE slots back to the device
/// (the consumer index): the loads of those CQEs are ordered before that store, so the
/// device cannot overwrite a slot the poller is still reading. x86_64 never moves a store
/// before an earlier load, so a compiler barrier; aarch64 `dsb ld` (earlier loads complete
/// before any later instruction; `dsb st` would not wait for them).
#[inline(always)]
pub fn consumer_index_barrier() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: an empty asm block with a memory clobber: no instruction, no register or stack
    // use; it only forbids the compiler to reorder memory accesses across it.
    unsafe {
        core::arch::asm!("", options(nostack, preserves_flags));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: `dsb ld` waits for earlier loads to complete; no operands, no register or
    // memory effect of its own.
    unsafe {
        core::arch::asm!("dsb ld", options(nostack, preserves_flags));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn barriers_keep_program_order_of_plain_memory() {
        // The barriers must not fault or clobber anything; stores around them stay in order.
        let mut v = [0u32; 4];
        v[0] = 1;
        to_device_store_barrier();
        v[1] = 2;
        wc_start();
        v[2] = 3;
        wc_flush();
        from_device_load_barrier();
        consumer_index_barrier();
        v[3] = v[0] + v[1] + v[2];
        assert_eq!(v, [1, 2, 3, 6]);
    }
}
