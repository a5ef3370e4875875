//! Out-of-band endpoint exchange.
//!
//! A [`QpEndpoint`] is what a peer needs to connect to one of our QPs: LID, GID and GID index,
//! QPN, starting PSN, the port's active MTU, and optionally one memory window (addr, len,
//! rkey) the peer may target with RDMA WRITE/READ/atomics.

/// An IB path MTU (the only five values the wire allows).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mtu {
    /// 256 bytes (`IBV_MTU_256` = 1).
    Mtu256 = 1,
    /// 512 bytes.
    Mtu512 = 2,
    /// 1024 bytes.
    Mtu1024 = 3,
    /// 2048 bytes.
    Mtu2048 = 4,
    /// 4096 bytes.
    Mtu4096 = 5,
}

impl Mtu {
    /// The MTU in bytes.
    pub fn bytes(self) -> u32 {
        128 << (self as u32)
    }
    /// From the verbs enum value (1..=5).
    pub fn from_ibv(v: u32) -> Option<Mtu> {
        Some(match v {
            1 => Mtu::Mtu256,
            2 => Mtu::Mtu512,
            3 => Mtu::Mtu1024,
            4 => Mtu::Mtu2048,
            5 => Mtu::Mtu4096,
            _ => return None,
        })
    }
    /// From a size in bytes (256, 512, 1024, 2048, 4096).
    pub fn from_bytes(b: u32) -> Option<Mtu> {
        Some(match b {
            256 => Mtu::Mtu256,
            512 => Mtu::Mtu512,
            1024 => Mtu::Mtu1024,
            2048 => Mtu::Mtu2048,
            4096 => Mtu::Mtu4096,
            _ => return None,
        })
    }
}

/// One remote memory window a peer may access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RemoteMr {
    /// Virtual address of the window's first byte.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// The rkey.
    pub rkey: u32,
}

/// What a peer needs to connect to one of our QPs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpEndpoint {
    /// Port LID (0 on RoCE).
    pub lid: u16,
    /// GID (network order, as in the GID table). All zero when the port has none in use.
    pub gid: [u8; 16],
    /// The local GID index the GID came from.
    pub gid_index: u8,
    /// QP number (24 bits).
    pub qpn: u32,
    /// Starting packet sequence number (24 bits).
    pub psn: u32,
    /// The port's active MTU.
    pub mtu: Mtu,
    /// An optional memory window.
    pub mr: Option<RemoteMr>,
}
