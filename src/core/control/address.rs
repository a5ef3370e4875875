//! The address vector (`ibv_ah_attr`) towards a remote port: what an RC QP's RTR transition
//! and an address handle both carry.
//!
//! Contract: pure functions, no verbs called; a GRH (`is_global`, the destination GID, the
//! local GID index, hop limit 1) exactly when the remote names a non-zero GID, which it
//! always does on RoCE.

use crate::endpoint::codec::QpEndpoint;
use crate::ffi::ibv_ah_attr;

/// The address vector from its parts: `dgid` `None` or all zero means no GRH (InfiniBand,
/// same subnet).
pub(crate) fn ah_attr_raw(
    dlid: u16,
    dgid: Option<[u8; 16]>,
    port: u8,
    sgid_index: u8,
    sl: u8,
) -> ibv_ah_attr {
    let mut ah = ibv_ah_attr::zeroed();
    ah.dlid = dlid;
    ah.sl = sl;
    ah.src_path_bits = 0;
    ah.port_num = port;
    if let Some(g) = dgid.filter(|g| g.iter().any(|&b| b != 0)) {
        ah.is_global = 1;
        ah.grh.dgid.raw = g;
        ah.grh.sgid_index = sgid_index;
        ah.grh.hop_limit = 1;
    }
    ah
}

/// The address vector towards `remote`: a GRH when the remote has a GID.
pub(crate) fn ah_attr(remote: &QpEndpoint, port: u8, sgid_index: u8, sl: u8) -> ibv_ah_attr {
    ah_attr_raw(remote.lid, Some(remote.gid), port, sgid_index, sl)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Mtu;

    #[test]
    fn the_address_vector_has_a_grh_only_with_a_gid() {
        let mut ep = QpEndpoint {
            lid: 7,
            gid: [0; 16],
            gid_index: 0,
            qpn: 1,
            psn: 2,
            mtu: Mtu::Mtu1024,
            mr: None,
        };
        let a = ah_attr(&ep, 1, 3, 0);
        assert_eq!((a.is_global, a.dlid, a.port_num), (0, 7, 1));
        ep.gid[15] = 1;
        let a = ah_attr(&ep, 1, 3, 0);
        assert_eq!(a.is_global, 1);
        assert_eq!(a.grh.sgid_index, 3);
        assert_eq!(a.grh.hop_limit, 1);
        // SAFETY: reading the byte view of a plain union.
        assert_eq!(unsafe { a.grh.dgid.raw }, ep.gid);
    }
}
