//! Ports: `ibv_query_port`, the port state and link layer, MTUs, and the link rate from the
//! width and speed codes.

use super::device::Context;
use crate::error::{Error, Result};
use crate::ffi::{self, ibv_port_attr};
use crate::types::Mtu;
use std::fmt;

/// `enum ibv_port_state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortState {
    /// 0.
    Nop,
    /// 1: no link.
    Down,
    /// 2: link up, not configured by the SM.
    Init,
    /// 3.
    Armed,
    /// 4: usable.
    Active,
    /// 5.
    ActiveDefer,
    /// Anything else.
    Unknown(u32),
}

impl PortState {
    /// From the verbs value.
    pub fn from_ibv(v: u32) -> PortState {
        match v {
            ffi::IBV_PORT_NOP => PortState::Nop,
            ffi::IBV_PORT_DOWN => PortState::Down,
            ffi::IBV_PORT_INIT => PortState::Init,
            ffi::IBV_PORT_ARMED => PortState::Armed,
            ffi::IBV_PORT_ACTIVE => PortState::Active,
            ffi::IBV_PORT_ACTIVE_DEFER => PortState::ActiveDefer,
            x => PortState::Unknown(x),
        }
    }
    /// The verbs value.
    pub fn to_ibv(self) -> u32 {
        match self {
            PortState::Nop => ffi::IBV_PORT_NOP,
            PortState::Down => ffi::IBV_PORT_DOWN,
            PortState::Init => ffi::IBV_PORT_INIT,
            PortState::Armed => ffi::IBV_PORT_ARMED,
            PortState::Active => ffi::IBV_PORT_ACTIVE,
            PortState::ActiveDefer => ffi::IBV_PORT_ACTIVE_DEFER,
            PortState::Unknown(x) => x,
        }
    }
}

impl fmt::Display for PortState {
    /// As `ibv_port_state_str`: `PORT_ACTIVE`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PortState::Nop => "PORT_NOP",
            PortState::Down => "PORT_DOWN",
            PortState::Init => "PORT_INIT",
            PortState::Armed => "PORT_ARMED",
            PortState::Active => "PORT_ACTIVE",
            PortState::ActiveDefer => "PORT_ACTIVE_DEFER",
            PortState::Unknown(_) => "invalid state",
        })
    }
}

/// The link layer of a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkLayer {
    /// Not reported (older drivers; means InfiniBand).
    Unspecified,
    /// InfiniBand.
    InfiniBand,
    /// Ethernet (RoCE).
    Ethernet,
    /// Anything else.
    Unknown(u8),
}

impl LinkLayer {
    /// From `ibv_port_attr.link_layer`.
    pub fn from_ibv(v: u8) -> LinkLayer {
        match v {
            ffi::IBV_LINK_LAYER_UNSPECIFIED => LinkLayer::Unspecified,
            ffi::IBV_LINK_LAYER_INFINIBAND => LinkLayer::InfiniBand,
            ffi::IBV_LINK_LAYER_ETHERNET => LinkLayer::Ethernet,
            x => LinkLayer::Unknown(x),
        }
    }
}

impl fmt::Display for LinkLayer {
    /// As `ibv_devinfo`: `InfiniBand`, `Ethernet`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkLayer::Unspecified | LinkLayer::InfiniBand => f.write_str("InfiniBand"),
            LinkLayer::Ethernet => f.write_str("Ethernet"),
            LinkLayer::Unknown(x) => write!(f, "Unknown ({x})"),
        }
    }
}

/// `struct ibv_port_attr`, copied into Rust types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortAttr {
    /// Logical state.
    pub state: PortState,
    /// Largest MTU the port supports (raw `enum ibv_mtu`).
    pub max_mtu_raw: u32,
    /// Active MTU (raw `enum ibv_mtu`).
    pub active_mtu_raw: u32,
    /// GID table length.
    pub gid_tbl_len: i32,
    /// Capability bits.
    pub port_cap_flags: u32,
    /// Largest message.
    pub max_msg_sz: u32,
    /// P_Key table length.
    pub pkey_tbl_len: u16,
    /// Base LID (0 on RoCE).
    pub lid: u16,
    /// Subnet manager LID.
    pub sm_lid: u16,
    /// LID mask control.
    pub lmc: u8,
    /// Max virtual lanes.
    pub max_vl_num: u8,
    /// SM service level.
    pub sm_sl: u8,
    /// Subnet timeout.
    pub subnet_timeout: u8,
    /// Active width code.
    pub active_width: u8,
    /// Active speed code.
    pub active_speed: u8,
    /// Physical state code.
    pub phys_state: u8,
    /// Link layer.
    pub link_layer: LinkLayer,
}

impl PortAttr {
    fn from_raw(a: &ibv_port_attr) -> PortAttr {
        PortAttr {
            state: PortState::from_ibv(a.state),
            max_mtu_raw: a.max_mtu,
            active_mtu_raw: a.active_mtu,
            gid_tbl_len: a.gid_tbl_len,
            port_cap_flags: a.port_cap_flags,
            max_msg_sz: a.max_msg_sz,
            pkey_tbl_len: a.pkey_tbl_len,
            lid: a.lid,
            sm_lid: a.sm_lid,
            lmc: a.lmc,
            max_vl_num: a.max_vl_num,
            sm_sl: a.sm_sl,
            subnet_timeout: a.subnet_timeout,
            active_width: a.active_width,
            active_speed: a.active_speed,
            phys_state: a.phys_state,
            link_layer: LinkLayer::from_ibv(a.link_layer),
        }
    }

    /// The active MTU, if it is one of the five IB values.
    pub fn active_mtu(&self) -> Option<Mtu> {
        Mtu::from_ibv(self.active_mtu_raw)
    }

    /// The largest MTU, if it is one of the five IB values.
    pub fn max_mtu(&self) -> Option<Mtu> {
        Mtu::from_ibv(self.max_mtu_raw)
    }

    /// Number of lanes of the active width code (1x, 4x, 8x, 12x, 2x).
    pub fn width_lanes(&self) -> Option<u32> {
        width_lanes(self.active_width)
    }

    /// Per-lane signalling rate of the active speed code, in Gb/s.
    pub fn lane_gbps(&self) -> Option<f64> {
        lane_gbps(self.active_speed)
    }

    /// The port's rate in Gb/s: lanes × per-lane rate.
    pub fn rate_gbps(&self) -> Option<f64> {
        Some(f64::from(self.width_lanes()?) * self.lane_gbps()?)
    }

    /// Physical state as `ibv_devinfo -v` prints it (`LINK_UP`).
    pub fn phys_state_str(&self) -> &'static str {
        match self.phys_state {
            1 => "SLEEP",
            2 => "POLLING",
            3 => "DISABLED",
            4 => "PORT_CONFIGURATION TRAINNING",
            5 => "LINK_UP",
            6 => "LINK_ERROR_RECOVERY",
            7 => "PHY TEST",
            _ => "invalid physical state",
        }
    }
}

/// Lanes of an `active_width` code.
pub fn width_lanes(code: u8) -> Option<u32> {
    match code {
        1 => Some(1),
        2 => Some(4),
        4 => Some(8),
        8 => Some(12),
        16 => Some(2),
        _ => None,
    }
}

/// Per-lane Gb/s of an `active_speed` code (as `ibv_devinfo` prints them).
pub fn lane_gbps(code: u8) -> Option<f64> {
    match code {
        1 => Some(2.5),
        2 => Some(5.0),
        4 | 8 => Some(10.0),
        16 => Some(14.0),
        32 => Some(25.0),
        64 => Some(50.0),
        128 => Some(100.0),
        _ => None,
    }
}

impl Context {
    /// `ibv_query_port` for `port` (1-based).
    pub fn query_port(&self, port: u8) -> Result<PortAttr> {
        let mut a = ibv_port_attr::zeroed();
        // SAFETY: live context; `a` is a zeroed, writable ibv_port_attr (the exported compat
        // entry point writes a prefix of it, as verbs.h's inline wrapper relies on too).
        let rc = unsafe { (self.inner.verbs.ibv_query_port)(self.inner.raw, port, &mut a) };
        if rc != 0 {
            let hint = match self.query_device() {
                Ok(d) => format!("{} has ports 1..={}", self.name(), d.phys_port_cnt),
                Err(_) => String::new(),
            };
            return Err(Error::verb("ibv_query_port", rc, hint));
        }
        Ok(PortAttr::from_raw(&a))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_is_lanes_times_lane_speed() {
        let mut a = ibv_port_attr::zeroed();
        a.active_width = 2; // 4x
        a.active_speed = 32; // EDR 25 Gb/s per lane
        assert_eq!(PortAttr::from_raw(&a).rate_gbps(), Some(100.0));
        a.active_width = 1;
        a.active_speed = 1;
        assert_eq!(PortAttr::from_raw(&a).rate_gbps(), Some(2.5));
        a.active_width = 3; // not a width code
        assert_eq!(PortAttr::from_raw(&a).rate_gbps(), None);
    }

    #[test]
    fn port_state_names_match_ibv_port_state_str() {
        assert_eq!(PortState::from_ibv(4).to_string(), "PORT_ACTIVE");
        assert_eq!(PortState::from_ibv(1).to_string(), "PORT_DOWN");
        assert_eq!(PortState::from_ibv(9), PortState::Unknown(9));
        assert_eq!(PortState::Active.to_ibv(), 4);
    }
}
