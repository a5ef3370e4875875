//! The GID table: `ibv_query_gid`, each entry's RoCE type read from sysfs, and the choice and
//! checking of a GID index.

use super::device::{last_errno_or, Context, SYSFS_INFINIBAND};
use super::port::LinkLayer;
use crate::error::{Error, Result};
use crate::ffi::ibv_gid;
use std::fmt;

/// A GID: 16 bytes in network order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// All zero (an empty table entry, or "no GID").
    pub fn is_zero(&self) -> bool {
        self.0.iter().all(|&b| b == 0)
    }
    /// The IPv4 address of an IPv4-mapped GID (`::ffff:a.b.c.d`).
    pub fn ipv4_mapped(&self) -> Option<std::net::Ipv4Addr> {
        std::net::Ipv6Addr::from(self.0).to_ipv4_mapped()
    }
}

impl From<[u8; 16]> for Gid {
    fn from(b: [u8; 16]) -> Gid {
        Gid(b)
    }
}

impl fmt::Display for Gid {
    /// As `ibv_devinfo -v`: eight groups of four hex digits, `fe80:0000:...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, pair) in self.0.chunks(2).enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{:02x}{:02x}", pair[0], pair[1])?;
        }
        Ok(())
    }
}

/// The type of a GID table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GidType {
    /// InfiniBand.
    Ib,
    /// RoCE v1 (Ethernet, no IP header).
    RoceV1,
    /// RoCE v2 (UDP/IP).
    RoceV2,
    /// sysfs did not say.
    Unknown,
}

impl GidType {
    /// From the text of sysfs `gid_attrs/types/<i>` ("IB/RoCE v1" or "RoCE v2") and the port's
    /// link layer ("IB/RoCE v1" is IB on an InfiniBand port, RoCE v1 on Ethernet).
    pub fn from_sysfs(s: &str, link: LinkLayer) -> GidType {
        match s.trim() {
            "RoCE v2" => GidType::RoceV2,
            "IB/RoCE v1" | "RoCE v1" | "IB" => {
                if link == LinkLayer::Ethernet {
                    GidType::RoceV1
                } else {
                    GidType::Ib
                }
            }
            _ => GidType::Unknown,
        }
    }
}

impl fmt::Display for GidType {
    /// As `ibv_devinfo -v` prints it after the GID.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GidType::Ib => "IB",
            GidType::RoceV1 => "RoCE v1",
            GidType::RoceV2 => "RoCE v2",
            GidType::Unknown => "unknown",
        })
    }
}

/// One populated GID table entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GidEntry {
    /// Index in the table.
    pub index: u32,
    /// The GID.
    pub gid: Gid,
    /// Its type.
    pub gid_type: GidType,
    /// The network device it belongs to (RoCE).
    pub netdev: Option<String>,
}

impl Context {
    /// `ibv_query_gid` for one index.
    pub fn query_gid(&self, port: u8, index: u32) -> Result<Gid> {
        let idx = libc::c_int::try_from(index).map_err(|_| Error::InvalidArgument {
            context: "ibv_query_gid",
            detail: format!("GID index {index} out of range"),
        })?;
        let mut g = ibv_gid::zeroed();
        // SAFETY: live context; `g` is writable.
        let rc = unsafe { (self.inner.verbs.ibv_query_gid)(self.inner.raw, port, idx, &mut g) };
        if rc != 0 {
            return Err(Error::verb(
                "ibv_query_gid",
                last_errno_or(rc),
                format!("port {port}, GID index {index}"),
            ));
        }
        // SAFETY: every bit pattern of the union is a valid `[u8; 16]`.
        Ok(Gid(unsafe { g.raw }))
    }

    /// The non-empty entries of the port's GID table, with their types (from sysfs
    /// `gid_attrs/types/<i>`) and network devices (`gid_attrs/ndevs/<i>`).
    pub fn gid_table(&self, port: u8) -> Result<Vec<GidEntry>> {
        let pa = self.query_port(port)?;
        let len = u32::try_from(pa.gid_tbl_len).unwrap_or(0);
        Ok((0..len)
            .filter_map(|i| self.gid_entry_with(port, i, pa.link_layer))
            .collect())
    }

    /// One populated GID entry, or `None` when the entry is empty or unreadable.
    fn gid_entry_with(&self, port: u8, i: u32, link: LinkLayer) -> Option<GidEntry> {
        // Unpopulated RoCE entries may fail to read; they are empty.
        let gid = self.query_gid(port, i).ok().filter(|g| !g.is_zero())?;
        let base = format!(
            "{SYSFS_INFINIBAND}/{}/ports/{port}/gid_attrs",
            self.inner.name
        );
        let ty = std::fs::read_to_string(format!("{base}/types/{i}"))
            .ok()
            .map(|s| GidType::from_sysfs(s.trim(), link))
            .unwrap_or(if link == LinkLayer::Ethernet {
                GidType::Unknown
            } else {
                GidType::Ib
            });
        let netdev = std::fs::read_to_string(format!("{base}/ndevs/{i}"))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty());
        Some(GidEntry {
            index: i,
            gid,
            gid_type: ty,
            netdev,
        })
    }

    /// Checks that `index` names a populated GID of `port`, and returns it. The error says how
    /// big the table is and which indexes are valid.
    pub fn check_gid_index(&self, port: u8, index: u8) -> Result<GidEntry> {
        let pa = self.query_port(port)?;
        if i64::from(index) < i64::from(pa.gid_tbl_len) {
            if let Some(e) = self.gid_entry_with(port, u32::from(index), pa.link_layer) {
                return Ok(e);
            }
        }
        // Only on failure: the whole table, for the message.
        let table = self.gid_table(port)?;
        let valid: Vec<String> = table
            .iter()
            .map(|e| format!("{} ({}, {})", e.index, e.gid, e.gid_type))
            .collect();
        let why = if i64::from(index) >= i64::from(pa.gid_tbl_len) {
            format!("the table has {} entries", pa.gid_tbl_len)
        } else {
            "that entry is empty".to_string()
        };
        Err(Error::NotFound {
            what: format!("GID index {index} on {} port {port}", self.name()),
            hint: format!(
                "{why}; populated: {}",
                if valid.is_empty() {
                    "none".to_string()
                } else {
                    valid.join(", ")
                }
            ),
        })
    }

    /// A sensible default GID index: the first RoCE v2 entry with an IPv4-mapped address,
    /// else the first RoCE v2 entry, else the first populated entry.
    pub fn default_gid_index(&self, port: u8) -> Result<u8> {
        let table = self.gid_table(port)?;
        let pick = table
            .iter()
            .find(|e| e.gid_type == GidType::RoceV2 && e.gid.ipv4_mapped().is_some())
            .or_else(|| table.iter().find(|e| e.gid_type == GidType::RoceV2))
            .or_else(|| table.first());
        match pick {
            Some(e) => u8::try_from(e.index).map_err(|_| Error::InvalidArgument {
                context: "default_gid_index",
                detail: format!("GID index {} does not fit the wire format", e.index),
            }),
            None => Err(Error::NotFound {
                what: format!("a GID on {} port {port}", self.name()),
                hint: "the GID table is empty: on RoCE, is the network device up with an \
                       address?"
                    .into(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gid_prints_like_ibv_devinfo() {
        let mut b = [0u8; 16];
        b[10] = 0xff;
        b[11] = 0xff;
        b[12..].copy_from_slice(&[127, 0, 0, 1]);
        let g = Gid(b);
        assert_eq!(g.to_string(), "0000:0000:0000:0000:0000:ffff:7f00:0001");
        assert_eq!(g.ipv4_mapped(), Some(std::net::Ipv4Addr::new(127, 0, 0, 1)));
        assert!(!g.is_zero());
        assert!(Gid::default().is_zero());
    }

    #[test]
    fn gid_types_follow_sysfs_and_link_layer() {
        assert_eq!(
            GidType::from_sysfs("RoCE v2\n", LinkLayer::Ethernet),
            GidType::RoceV2
        );
        assert_eq!(
            GidType::from_sysfs("IB/RoCE v1", LinkLayer::Ethernet),
            GidType::RoceV1
        );
        assert_eq!(
            GidType::from_sysfs("IB/RoCE v1", LinkLayer::InfiniBand),
            GidType::Ib
        );
        assert_eq!(
            GidType::from_sysfs("what", LinkLayer::Ethernet),
            GidType::Unknown
        );
    }
}
