//! After a failed completion: [`Flow::drain`], the library's drain
//! ([`rdma_direct::perf::rc_pingpong::drain`]) over this end's outstanding requests.

use rdma_direct::perf::rc_pingpong::{drain, DRAIN};
use rdma_direct::providers::{Completion, Provider};

use super::flow::Flow;

impl Flow {
    /// After a failed completion (`first[0]`; the rest of its poll follows it): the line
    /// that says how every request outstanding at that moment completed.
    pub(super) fn drain<P: Provider>(
        &self,
        p: &mut P,
        cq: &mut P::Cq,
        first: &[Completion],
    ) -> String {
        drain(p, cq, self.souts, self.routs, first, DRAIN)
    }
}
