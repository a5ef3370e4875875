//! What a batching report says about its run besides the points: the [`Setup`] (the sweep's
//! parameters, the PCIe link, the command line) and the name each configuration's series
//! carries in tables, charts, fits and JSON.
//!
//! Contract: plain data and a pure naming function; the report, the model fit and the
//! summary all name series through [`series_name`], so one configuration reads the same
//! everywhere.

use std::fmt::Write as _;

use super::{Config, Params};
use crate::pcie::Link;

/// What a report says about the run besides its points: the sweep's parameters (reached
/// through `Deref`), the PCIe link whose rate bounds each point, and the command line the
/// JSON records (the arguments after `rdma-direct bench batching`).
#[derive(Clone, Debug)]
pub struct Setup {
    pub params: Params,
    pub pcie: Link,
    pub argv: Vec<String>,
}

impl std::ops::Deref for Setup {
    type Target = Params;
    fn deref(&self) -> &Params {
        &self.params
    }
}

impl std::ops::DerefMut for Setup {
    fn deref_mut(&mut self) -> &mut Params {
        &mut self.params
    }
}

/// The series name of configuration `c`: the doorbell mode and the signaling, then the
/// operation when the sweep has several (or it is not WRITE), then the payload when the
/// sweep varies it.
pub fn series_name(o: &Setup, c: &Config) -> String {
    let mut s = format!("{}, {}", c.mode.name(), c.signal.name());
    if o.ops.len() > 1 || c.op != crate::bench::batching::Op::Write {
        s = format!("{}, {s}", c.op.name());
    }
    if o.many_payloads() {
        let _ = write!(s, ", {} {} B", c.payload.name(), c.size);
    }
    s
}
