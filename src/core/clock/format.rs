//! Reading a CQE timestamp: [`RealTime`] decodes the real-time format
//! (`seconds << 32 | nanoseconds`), [`TimestampFormat`] converts a raw timestamp either way,
//! and [`TimestampKind`] is what a CQ's timestamps carry, chosen when it is created.

use super::{ClockInfo, NSEC_PER_SEC};

/// A real-time CQE timestamp: `seconds << 32 | nanoseconds` of the device's real-time clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RealTime {
    /// Seconds (the high 32 bits).
    pub secs: u32,
    /// Nanoseconds within the second (the low 32 bits; below 10^9 from a device).
    pub nanos: u32,
}

impl RealTime {
    /// Splits the raw 64-bit CQE value.
    #[inline]
    pub const fn from_raw(raw: u64) -> RealTime {
        RealTime {
            secs: (raw >> 32) as u32,
            nanos: raw as u32,
        }
    }

    /// The raw 64-bit value the device writes.
    #[inline]
    pub const fn to_raw(self) -> u64 {
        ((self.secs as u64) << 32) | self.nanos as u64
    }

    /// `secs * 10^9 + nanos`, as the kernel (`REAL_TIME_TO_NS`) and DPDK
    /// (`mlx5_txpp_convert_rx_ts`) compute it; never overflows.
    #[inline]
    pub const fn as_ns(self) -> u64 {
        self.secs as u64 * NSEC_PER_SEC + self.nanos as u64
    }

    /// Whether `nanos` is below 10^9. A raw value that is not (about three quarters of raw
    /// nanosecond counts) was not written in the real-time format.
    #[inline]
    pub const fn is_normalized(self) -> bool {
        (self.nanos as u64) < NSEC_PER_SEC
    }

    /// Encodes `ns` since the epoch; `None` past 2^32 seconds (year 2106).
    pub const fn from_ns(ns: u64) -> Option<RealTime> {
        let secs = ns / NSEC_PER_SEC;
        if secs > u32::MAX as u64 {
            return None;
        }
        Some(RealTime {
            secs: secs as u32,
            nanos: (ns % NSEC_PER_SEC) as u32,
        })
    }
}

/// Raw real-time CQE timestamp → ns (`(raw >> 32) * 10^9 + (raw & 0xffffffff)`).
#[inline]
pub const fn real_time_to_ns(raw: u64) -> u64 {
    RealTime::from_raw(raw).as_ns()
}

/// How a queue's CQE timestamps are to be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampFormat {
    /// Device cycles, converted with this clock info.
    FreeRunning(ClockInfo),
    /// `seconds << 32 | nanoseconds`.
    RealTime,
}

impl TimestampFormat {
    /// The raw CQE timestamp in ns.
    #[inline]
    pub fn to_ns(&self, raw: u64) -> u64 {
        match self {
            TimestampFormat::FreeRunning(info) => info.ts_to_ns(raw),
            TimestampFormat::RealTime => real_time_to_ns(raw),
        }
    }
}

/// What a CQ's CQEs carry in their timestamp field, chosen when the CQ is created (on
/// hardware: `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP` for free-running cycles,
/// `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK` alone for real time; both CQs of a QP
/// must agree, or the kernel refuses the QP).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimestampKind {
    /// The device's free-running cycle counter (convert with the clock info).
    FreeRunning,
    /// The device's real-time clock, `seconds << 32 | nanoseconds`.
    RealTime,
}

#[cfg(test)]
mod tests {
    use super::super::tests::{clock_156, NS0};
    use super::*;

    #[test]
    fn real_time_decodes_seconds_and_nanoseconds() {
        let raw = 0x6930_1a2b_3b9a_c9ff;
        let t = RealTime::from_raw(raw);
        assert_eq!(t.secs, 0x6930_1a2b);
        assert_eq!(t.nanos, 999_999_999);
        assert!(t.is_normalized());
        assert_eq!(t.as_ns(), 0x6930_1a2b * NSEC_PER_SEC + 999_999_999);
        assert_eq!(real_time_to_ns(raw), t.as_ns());
        assert_eq!(t.to_raw(), raw);
        assert_eq!(RealTime::from_ns(t.as_ns()), Some(t));
        assert_eq!(RealTime::from_ns(u64::MAX), None);
        assert_eq!(
            real_time_to_ns(u64::MAX),
            u64::from(u32::MAX) * (NSEC_PER_SEC + 1)
        );
        // A raw nanosecond count is usually not normalized in this format.
        assert!(!RealTime::from_raw(NS0).is_normalized());
        assert_eq!(TimestampFormat::RealTime.to_ns(raw), t.as_ns());
        let c = clock_156();
        assert_eq!(
            TimestampFormat::FreeRunning(c).to_ns(c.last_cycles),
            c.ts_to_ns(c.last_cycles)
        );
    }
}
