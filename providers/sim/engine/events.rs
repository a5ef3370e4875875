//! What the device reports besides CQEs: asynchronous events and the engine's counters.
//!
//! Pure data. The engine appends events (CQ overrun, QP fatal) and bumps counters; the
//! [`SimDevice`](crate::providers::sim::SimDevice) hands them out (`take_events`, `stats`).
/// Something the device reports outside the CQs (an `ibv_async_event`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncEvent {
    /// A CQ would have overrun: the CQE was not written and the CQ is in error
    /// (`IBV_EVENT_CQ_ERR`).
    CqOverrun {
        /// The CQ.
        cqn: u32,
    },
    /// A QP moved to ERR because of a local error (`IBV_EVENT_QP_FATAL` class).
    QpFatal {
        /// The QP.
        qpn: u32,
    },
}

/// Counters of what the engine did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Engine passes.
    pub passes: u64,
    /// Doorbells seen (UAR / BlueFlame words that changed).
    pub doorbells: u64,
    /// Deterministic mode: BlueFlame copies whose bytes were compared with the WQE in the
    /// ring and matched.
    pub bf_copies: u64,
    /// Deterministic mode: BlueFlame copies that did *not* match the WQE in the ring (a host
    /// bug: hardware would execute the BlueFlame bytes).
    pub bf_mismatches: u64,
    /// Send WQEs consumed (executed, failed or flushed).
    pub wqes: u64,
    /// CQEs written.
    pub cqes: u64,
    /// CQEs dropped because their CQ was in error.
    pub cqes_dropped: u64,
    /// Bytes moved between MRs.
    pub bytes: u64,
    /// CQ arms accepted.
    pub arms: u64,
    /// CQ arms ignored (stale `sn` or wrong CQN).
    pub stale_arms: u64,
    /// Completion events sent.
    pub events: u64,
}
