//! Where the vocabulary meets the wire layer: the few values both floors name, converted.
//! `wire` imports nothing and `types` only `error`, so the conversions live here, beside them.

use crate::types::Sge;
use crate::wire;

impl From<Sge> for wire::Sge {
    #[inline]
    fn from(s: Sge) -> wire::Sge {
        wire::Sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        }
    }
}

impl From<wire::Sge> for Sge {
    #[inline]
    fn from(s: wire::Sge) -> Sge {
        Sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        }
    }
}
