//! What a run returns: one [`Row`] per message size, the setup it ran on ([`Info`]), both
//! together ([`Report`]), and the device-time figures of `--hw-ts` ([`NicTime`]).
//!
//! Contract: plain data (no device, no allocation beyond the vectors); the statistics in a
//! row are [`stats`](super::stats)' and mean what perftest's do.

use crate::providers::{ProviderKind, QpEndpoint};

use super::stats::{BwRow, LatRow};

/// One result row.
// A latency row carries its histogram inline (Copy, no allocation): rows are few (one per
// size) and made after the measured loop, so their size costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Row {
    /// A latency test's row.
    Lat(LatRow),
    /// A bandwidth test's row.
    Bw(BwRow),
}

impl Row {
    /// The message size of the row.
    pub fn bytes(&self) -> u64 {
        match self {
            Row::Lat(r) => r.bytes,
            Row::Bw(r) => r.bytes,
        }
    }
}

/// What a run set up: the facts a report of it states besides its rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Info {
    /// Which provider ran.
    pub provider: ProviderKind,
    /// Its device name.
    pub device: String,
    /// Path MTU in bytes.
    pub mtu: u32,
    /// Inline bytes the QPs grant.
    pub max_inline: u32,
    /// Client and server each on its own thread (`write_lat` / `send_lat`).
    pub two_threads: bool,
    /// The client QP's endpoint (the measuring side).
    pub client: QpEndpoint,
    /// The server QP's endpoint.
    pub server: QpEndpoint,
    /// The sizes that will be measured, in order (on UD with [`Params::clip_to_mtu`]: those
    /// that fit the path MTU).
    ///
    /// [`Params::clip_to_mtu`]: super::Params::clip_to_mtu
    pub sizes: Vec<u32>,
}

/// The result of [`run`](super::run): the setup and one row per size.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// What was set up.
    pub info: Info,
    /// One row per size of [`Info::sizes`].
    pub rows: Vec<Row>,
    /// With [`Params::hw_ts`]: the device-time figures of each row, in the same order.
    ///
    /// [`Params::hw_ts`]: super::Params::hw_ts
    pub nic: Vec<NicTime>,
    /// Latency tests: the outliers of each row, in the same order (see
    /// [`Outliers`](super::Outliers)); empty for bandwidth and two-process runs.
    pub outliers: Vec<super::Outliers>,
}

/// The device-time figures of one latency row ([`Params::hw_ts`](super::Params::hw_ts)).
///
/// A sample is the time between the client's send completions of two consecutive iterations
/// as the device stamped them: one round trip (the request, the peer's answer, the client's
/// next post), halved for `write_lat` as the software figure is. The breakdown puts the
/// host's post stamp on the device's real-time scale (host `CLOCK_REALTIME` at the start
/// plus the loop clock's offset): on the sim the device clock is the host's
/// `CLOCK_REALTIME`, so it holds to the loop clock's conversion (well under a microsecond
/// over a run); on hardware only as far as the NIC clock follows the host's (PTP / phc2sys).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NicTime {
    /// perftest's statistics of the device-time samples.
    pub row: LatRow,
    /// Median time from the client's post to its send completion's timestamp, ns.
    pub post_to_cqe_ns: u64,
}
