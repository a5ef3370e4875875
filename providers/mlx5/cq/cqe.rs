//! Every volatile load the poller makes: the fields of a CQE in CQ memory, and [`late`].
//!
//! A CQE is reached by raw pointer only (the device writes CQ memory behind the compiler's
//! back: no `&` into it). Each field is one volatile load of the field's own width at the
//! offset `crate::wire::offset::cqe64` (or `err_cqe`) gives, through [`load`], the one place
//! that reads CQ memory: the compiler neither merges, splits, elides nor reorders these loads
//! with one another. The functions carry the names `wire::Cqe64` gives the same fields, so
//! the view the sim and the tests write a CQE with reads the same as the poller.
//!
//! Two forms, each said in its name:
//!
//! - `NAME(cqe)`: the field in host order (`byte_cnt`, `flags_rqpn`, `imm_inval_pkey`,
//!   `sop_drop_qpn`, `timestamp`, `hw_err_synd`), or the byte itself (`op_own`);
//! - `NAME_raw(cqe)`: the field as it lies in memory (big-endian bytes in a native integer,
//!   no swap): the fast paths compare it with a constant swapped once (`hot_tag`), or take
//!   the `wqe_counter` with `u16::from_be` where it is used.
//!
//! The `# Safety` of every function here: `cqe` points to a 64-byte CQE of a CQ (64-byte
//! aligned, inside the ring `from_dv` was given). What makes the value meaningful is the
//! caller's job too: `op_own` may be read at any time; any other field of a CQE the poll
//! takes only after `op_own` said it is software-owned and
//! [`from_device_load_barrier`](crate::barrier::from_device_load_barrier) ordered that load
//! before this one (each call site says so).

use crate::wire::offset::{cqe64, err_cqe};

/// One volatile load of a `T` at byte `off` of the CQE at `cqe`.
///
/// # Safety
/// `cqe` points to a 64-byte CQE (64-byte aligned); `off + size_of::<T>() <= 64` and `off`
/// is a multiple of `align_of::<T>()`.
#[inline(always)]
unsafe fn load<T: Copy>(cqe: *const u8, off: usize) -> T {
    // SAFETY: guaranteed by the caller; the CQE's alignment makes `off`'s the pointer's.
    unsafe { core::ptr::read_volatile(cqe.add(off).cast::<T>()) }
}

/// `op_own` (byte 63): opcode in bits 4..7, scatter-to-CQE bits 2..3, SE bit 1, owner bit 0.
///
/// # Safety
/// See the module doc.
#[inline(always)]
pub(super) unsafe fn op_own(cqe: *const u8) -> u8 {
    // SAFETY: a byte of the CQE (module doc).
    unsafe { load::<u8>(cqe, cqe64::OP_OWN) }
}

/// `sop_drop_qpn` (bytes 56..59) as stored: read as a little-endian u32 it is the WQE
/// opcode (byte 56) in bits 0..7 and the big-endian QP number above.
///
/// # Safety
/// See the module doc.
#[inline(always)]
pub(super) unsafe fn sop_drop_qpn_raw(cqe: *const u8) -> u32 {
    // SAFETY: a 4-aligned word of the CQE (module doc).
    unsafe { load::<u32>(cqe, cqe64::SOP_DROP_QPN) }
}

/// `sop_drop_qpn` in host order: the WQE opcode in bits 24..31, the QP number below.
///
/// # Safety
/// See the module doc.
#[inline(always)]
pub(super) unsafe fn sop_drop_qpn(cqe: *const u8) -> u32 {
    // SAFETY: a 4-aligned word of the CQE (module doc).
    u32::from_be(unsafe { load::<u32>(cqe, cqe64::SOP_DROP_QPN) })
}

/// `wqe_counter` (bytes 60..61) as stored (big-endian).
///
/// # Safety
/// See the module doc.
#[inline(always)]
pub(super) unsafe fn wqe_counter_raw(cqe: *const u8) -> u16 {
    // SAFETY: a 2-aligned half-word of the CQE (module doc).
    unsafe { load::<u16>(cqe, cqe64::WQE_COUNTER) }
}

/// `byte_cnt` (bytes 44..47) in host order.
///
/// # Safety
/// See the module doc.
#[inline(always)]
pub(super) unsafe fn byte_cnt(cqe: *const u8) -> u32 {
    // SAFETY: a 4-aligned word of the CQE (module doc).
    u32::from_be(unsafe { load::<u32>(cqe, cqe64::BYTE_CNT) })
}

/// `flags_rqpn` (bytes 24..27) in host order: flags in the top byte, source QP below.
///
/// # Safety
/// See the module doc.
#[inline(always)]
pub(super) unsafe fn flags_rqpn(cqe: *const u8) -> u32 {
    // SAFETY: a 4-aligned word of the CQE (module doc).
    u32::from_be(unsafe { load::<u32>(cqe, cqe64::FLAGS_RQPN) })
}

/// `imm_inval_pkey` (bytes 36..39) in host order.
///
/// # Safety
/// See the module doc.
#[inline(always)]
pub(super) unsafe fn imm_inval_pkey(cqe: *const u8) -> u32 {
    // SAFETY: a 4-aligned word of the CQE (module doc).
    u32::from_be(unsafe { load::<u32>(cqe, cqe64::IMM_INVAL_PKEY) })
}

/// `timestamp` (bytes 48..55) in host order, read as 8 bytes (a byte array: no alignment
/// asked of the field).
///
/// # Safety
/// See the module doc.
#[inline(always)]
pub(super) unsafe fn timestamp(cqe: *const u8) -> u64 {
    // SAFETY: 8 bytes of the CQE (module doc).
    u64::from_be_bytes(unsafe { load::<[u8; 8]>(cqe, cqe64::TIMESTAMP) })
}

/// An error CQE's word at `hw_err_synd` (bytes 52..55) in host order: `hw_err_synd` in bits
/// 24..31, `hw_synd_type` 16..23, `vendor_err_synd` 8..15, `syndrome` 0..7.
///
/// # Safety
/// See the module doc.
#[inline(always)]
pub(super) unsafe fn hw_err_synd(cqe: *const u8) -> u32 {
    // SAFETY: a 4-aligned word of the CQE (module doc).
    u32::from_be(unsafe { load::<u32>(cqe, err_cqe::HW_ERR_SYND) })
}

/// `*v`, read where this call stands: the compiler neither moves the read earlier nor reuses
/// an earlier read of the same field (not CQ memory: the poller's own state). For a value a
/// single-CQE way needs only at its end (`ci`, the CQE address, the hot QP): read at the
/// top, it would hold a register across the CQE's checks, and a caller that inlines the way
/// would then save callee-saved registers on every call.
#[inline(always)]
pub(super) fn late<T: Copy>(v: &T) -> T {
    // SAFETY: `v` is a reference: valid, aligned, initialised.
    unsafe { core::ptr::read_volatile(v) }
}

#[cfg(test)]
mod tests {
    use super::{
        byte_cnt, flags_rqpn, hw_err_synd, imm_inval_pkey, late, op_own, sop_drop_qpn,
        sop_drop_qpn_raw, timestamp, wqe_counter_raw,
    };
    use crate::wire::{Cqe64, CqeOpcode, ErrCqe, Syndrome};

    /// A CQE slot as CQ memory holds it: 64-byte aligned.
    #[repr(C, align(64))]
    struct Slot([u8; 64]);

    #[test]
    fn every_field_reads_what_the_wire_view_wrote() {
        let mut s = Slot([0xa5; 64]);
        {
            let mut c = Cqe64::new_unchecked(&mut s.0[..]);
            c.set_op_own(CqeOpcode::RespSendImm, 1, true, true);
            c.set_sop_qpn(0x0a, 0x12_3456);
            c.set_wqe_counter(0xbeef);
            c.set_byte_cnt(0x0102_0304);
            c.set_flags_rqpn(0x30, 0xab_cdef);
            c.set_imm_inval_pkey(0xdead_f00d);
            c.set_timestamp(0x1122_3344_5566_7788);
        }
        let p = s.0.as_ptr();
        let c = Cqe64::new_unchecked(&s.0[..]);
        // SAFETY: `p` is a 64-byte aligned, 64-byte CQE (`Slot`).
        unsafe {
            assert_eq!(op_own(p), c.op_own());
            // RESP_SEND_IMM (3) << 4, format 1 << 2, SE 0x2, owner 0x1.
            assert_eq!(op_own(p), 0x37);
            assert_eq!(sop_drop_qpn(p), 0x0a12_3456);
            assert_eq!(sop_drop_qpn(p) >> 24, u32::from(c.s_wqe_opcode()));
            assert_eq!(sop_drop_qpn(p) & 0xff_ffff, c.qpn());
            // As stored: byte 56 (the WQE opcode) lowest when read little-endian.
            assert_eq!(u32::from_le(sop_drop_qpn_raw(p)), 0x5634_120a);
            assert_eq!(u16::from_be(wqe_counter_raw(p)), c.wqe_counter());
            assert_eq!(u16::from_be(wqe_counter_raw(p)), 0xbeef);
            assert_eq!(byte_cnt(p), c.byte_cnt());
            assert_eq!(byte_cnt(p), 0x0102_0304);
            assert_eq!(flags_rqpn(p), c.flags_rqpn());
            assert_eq!(flags_rqpn(p), 0x30ab_cdef);
            assert_eq!(imm_inval_pkey(p), c.imm_inval_pkey());
            assert_eq!(timestamp(p), c.timestamp());
            assert_eq!(timestamp(p), 0x1122_3344_5566_7788);
        }
    }

    #[test]
    fn the_error_word_holds_vendor_syndrome_and_syndrome() {
        let mut s = Slot([0; 64]);
        {
            let mut e = ErrCqe::new_unchecked(&mut s.0[..]);
            e.set_vendor_err_synd(0x42);
            e.set_syndrome(Syndrome::RemAccess);
        }
        // SAFETY: a 64-byte aligned, 64-byte CQE (`Slot`).
        let w = unsafe { hw_err_synd(s.0.as_ptr()) };
        assert_eq!((w >> 8) as u8, 0x42);
        assert_eq!(w as u8, u8::from(Syndrome::RemAccess));
    }

    #[test]
    fn late_reads_the_current_value() {
        let mut v = 7u32;
        assert_eq!(late(&v), 7);
        v += 1;
        assert_eq!(late(&v), 8);
    }
}
