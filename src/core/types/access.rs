//! Memory access rights (`enum ibv_access_flags`), shared by MRs and QPs.

/// Memory access rights of an MR or a QP (`enum ibv_access_flags` values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct Access(pub u32);

impl Access {
    /// Local read only.
    pub const LOCAL_READ: Access = Access(0);
    /// The device may write it locally (receives, READ results).
    pub const LOCAL_WRITE: Access = Access(1);
    /// Peers may RDMA WRITE into it.
    pub const REMOTE_WRITE: Access = Access(2);
    /// Peers may RDMA READ it.
    pub const REMOTE_READ: Access = Access(4);
    /// Peers may run atomics on it.
    pub const REMOTE_ATOMIC: Access = Access(8);
    /// All of the above.
    pub const ALL: Access = Access(1 | 2 | 4 | 8);
    /// True if every bit of `other` is set.
    #[inline]
    pub const fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        Access(self.0 | rhs.0)
    }
}
