//! What the device reports besides CQEs: asynchronous events and the engine's counters.
//!
//! Pure data. The engine appends events (CQ overrun, QP fatal) and bumps counters; the
//! [`SimDevice`](crate::sim::SimDevice) hands them out (`take_events`, `stats`).
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
    /// Invalid request on a QP (`IBV_EVENT_QP_REQ_ERR`).
    QpReqErr {
        /// The QP.
        qpn: u32,
    },
    /// Access violation on a QP (`IBV_EVENT_QP_ACCESS_ERR`).
    QpAccessErr {
        /// The QP.
        qpn: u32,
    },
    /// An SRQ-attached QP in ERR has no more WQEs (`IBV_EVENT_QP_LAST_WQE_REACHED`).
    QpLastWqeReached {
        /// The QP.
        qpn: u32,
    },
    /// The SRQ fell below its limit (`IBV_EVENT_SRQ_LIMIT_REACHED`).
    SrqLimitReached {
        /// The SRQ.
        srqn: u32,
    },
    /// The port became active (`IBV_EVENT_PORT_ACTIVE`).
    PortActive {
        /// Port number.
        port: u8,
    },
    /// The port went down (`IBV_EVENT_PORT_ERR`).
    PortErr {
        /// Port number.
        port: u8,
    },
    /// The port's GID table changed (`IBV_EVENT_GID_CHANGE`).
    GidChange {
        /// Port number.
        port: u8,
    },
    /// The device is dead (`IBV_EVENT_DEVICE_FATAL`).
    DeviceFatal,
}

impl AsyncEvent {
    /// The same event in the verbs vocabulary every provider reports
    /// ([`Provider::async_events`](crate::Provider::async_events)): a QP by its number (no
    /// pointer: 0), a CQ or SRQ by its number in place of an address, a port by its number.
    pub fn to_verbs(&self) -> crate::AsyncEvent {
        use crate::{AsyncElement as E, AsyncEventKind as K};
        let (kind, element) = match *self {
            AsyncEvent::CqOverrun { cqn } => (K::CqErr, E::Cq(cqn as usize)),
            AsyncEvent::QpFatal { qpn } => (K::QpFatal, E::Qp { ptr: 0, qpn }),
            AsyncEvent::QpReqErr { qpn } => (K::QpReqErr, E::Qp { ptr: 0, qpn }),
            AsyncEvent::QpAccessErr { qpn } => (K::QpAccessErr, E::Qp { ptr: 0, qpn }),
            AsyncEvent::QpLastWqeReached { qpn } => (K::QpLastWqeReached, E::Qp { ptr: 0, qpn }),
            AsyncEvent::SrqLimitReached { srqn } => (K::SrqLimitReached, E::Srq(srqn as usize)),
            AsyncEvent::PortActive { port } => (K::PortActive, E::Port(port.into())),
            AsyncEvent::PortErr { port } => (K::PortErr, E::Port(port.into())),
            AsyncEvent::GidChange { port } => (K::GidChange, E::Port(port.into())),
            AsyncEvent::DeviceFatal => (K::DeviceFatal, E::Device),
        };
        crate::AsyncEvent { kind, element }
    }

    /// The `enum ibv_event_type` name (`IBV_EVENT_*`) and the object it concerns, for
    /// printing: `("CQ_ERR", "cq 0x40")`.
    pub fn describe(&self) -> (&'static str, String) {
        match *self {
            AsyncEvent::CqOverrun { cqn } => ("CQ_ERR", format!("cq {cqn:#x}")),
            AsyncEvent::QpFatal { qpn } => ("QP_FATAL", format!("qp {qpn:#x}")),
            AsyncEvent::QpReqErr { qpn } => ("QP_REQ_ERR", format!("qp {qpn:#x}")),
            AsyncEvent::QpAccessErr { qpn } => ("QP_ACCESS_ERR", format!("qp {qpn:#x}")),
            AsyncEvent::QpLastWqeReached { qpn } => ("QP_LAST_WQE_REACHED", format!("qp {qpn:#x}")),
            AsyncEvent::SrqLimitReached { srqn } => ("SRQ_LIMIT_REACHED", format!("srq {srqn:#x}")),
            AsyncEvent::PortActive { port } => ("PORT_ACTIVE", format!("port {port}")),
            AsyncEvent::PortErr { port } => ("PORT_ERR", format!("port {port}")),
            AsyncEvent::GidChange { port } => ("GID_CHANGE", format!("port {port}")),
            AsyncEvent::DeviceFatal => ("DEVICE_FATAL", "device".into()),
        }
    }
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
