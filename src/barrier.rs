//! Memory barriers, one name per purpose (as rdma-core's `util/udma_barrier.h`).
//!
//! | barrier | orders | x86_64 | aarch64 |
//! |---|---|---|---|
//! | [`to_device_store_barrier`] | our stores to DMA-visible host memory (WQEs, dbrec) before later stores the device may observe first | compiler barrier | `dmb oshst` |
//! | [`from_device_load_barrier`] | the load that saw a device-written valid bit (CQE owner) before the loads of the rest of the entry | `lfence` | `dmb oshld` |
//! | [`wc_start`] | all earlier stores (dbrec) before the first store to write-combining memory (BlueFlame) | `sfence` | `dsb st` |
//! | [`wc_flush`] | the write-combining stores out of the CPU's WC buffer, before any later store | `sfence` | `dsb st` |
//!
//! The bodies mirror rdma-core 44 (`udma_to_device_barrier`, `udma_from_device_barrier`,
//! `mmio_wc_start` = `mmio_flush_writes`). x86_64 keeps stores to write-back memory in order,
//! so the to-device barrier only has to stop the compiler; loads after a device-written flag
//! need `lfence` there, and write-combining stores need `sfence` to leave the WC buffer.
//!
//! Every barrier is also a compiler barrier: the `asm!` blocks are not `nomem`, so the
//! compiler may not move memory accesses across them.
//!
//! On other architectures the bodies fall back to `SeqCst` fences, which are at least as
//! strong for cacheable memory (no device is supported there; the sim still works).

/// Orders earlier stores to host memory the device reads by DMA (WQEs, doorbell records)
/// before later stores (`udma_to_device_barrier`).
#[inline(always)]
pub fn to_device_store_barrier() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: an empty asm block with a memory clobber: no instruction, no register or stack
    // use; it only forbids the compiler to reorder memory accesses across it.
    unsafe {
        core::arch::asm!("", options(nostack, preserves_flags));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: `dmb oshst` is a store-store barrier over the outer shareable domain; it touches
    // no register or memory operand.
    unsafe {
        core::arch::asm!("dmb oshst", options(nostack, preserves_flags));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// Orders the load that observed a device-written valid indication (a CQE's owner bit)
/// before the loads of the data it guards (`udma_from_device_barrier`).
#[inline(always)]
pub fn from_device_load_barrier() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `lfence` takes no operands and has no effect beyond load ordering.
    unsafe {
        core::arch::asm!("lfence", options(nostack, preserves_flags));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: `dmb oshld` is a load barrier over the outer shareable domain; no operands.
    unsafe {
        core::arch::asm!("dmb oshld", options(nostack, preserves_flags));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// Before the first store to write-combining memory (BlueFlame register): earlier stores
/// (the doorbell record) are visible first (`mmio_wc_start`).
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

/// After the stores to write-combining memory: push them out of the WC buffer before any
/// later store (`mmio_flush_writes`).
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
        v[3] = v[0] + v[1] + v[2];
        assert_eq!(v, [1, 2, 3, 6]);
    }
}
