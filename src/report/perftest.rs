//! The text of a [`crate::perf`] run as perftest prints it: the header block between two
//! rules ([`header`]), the table header and one line per row ([`table_header`],
//! [`row_text`]), the device-time table of a run with device timestamps ([`nic_text`]).
//!
//! Contract: formatting only, each function returns its lines (newline-terminated); nothing
//! here measures or prints.

use std::fmt::Write as _;

use crate::perf::{Info, NicTime, Params, Row, Test, TX_DEPTH};
use crate::providers::ProviderKind;

use crate::report::table;

/// The table lines of a row (with `histogram`, the histogram under a latency row).
pub fn row_text(r: &Row, histogram: bool) -> String {
    let mut s = format!("{}\n", table::row_line(r));
    if let (true, Row::Lat(l)) = (histogram, r) {
        s.push_str(&table::histogram_lines(&l.hist));
    }
    s
}

pub fn table_header(o: &Params) -> String {
    if o.test.is_lat() {
        table::lat_header_for(o.iters)
    } else {
        table::bw_header(o.unit)
    }
}

/// The device-time table of a run with device timestamps and its breakdown line (see [`NicTime`]).
pub fn nic_text(o: &Params, info: &Info, nic: &[NicTime]) -> String {
    let label = if info.provider == ProviderKind::Sim {
        "NIC time (device clock, sim: not hardware)"
    } else {
        "NIC time (device clock)"
    };
    let mut s = format!(
        " {label}: send completion to send completion of consecutive iterations{}\n{}\n",
        if o.test.rtt_factor() == 2 {
            ", halved"
        } else {
            ""
        },
        table_header(o)
    );
    for t in nic {
        s.push_str(&row_text(&Row::Lat(t.row), false));
    }
    s.push_str(&format!("{}\n", table::RULE));
    let bound = if info.provider == ProviderKind::Sim {
        "the sim's device clock is the host's CLOCK_REALTIME: exact to the loop clock's \
         conversion, well under 1 usec"
    } else {
        "host and NIC clocks agree only as far as PTP/phc2sys keeps them"
    };
    for t in nic {
        s.push_str(&format!(
            " breakdown {} B: post -> send CQE on the requester, median {:.2} usec ({bound})\n",
            t.row.bytes,
            t.post_to_cqe_ns as f64 / 1000.0
        ));
    }
    s
}

/// The verb, as perftest's banner names it.
fn verb(t: Test) -> &'static str {
    match t {
        Test::WriteLat | Test::WriteBw => "RDMA_Write",
        Test::SendLat | Test::SendBw => "Send",
        Test::ReadLat | Test::ReadBw => "RDMA_Read",
        Test::AtomicLat => "Atomic (FETCH_AND_ADD)",
    }
}

/// perftest's header block, between two rules. `why`: how the provider was chosen; `role`:
/// where the other side is.
pub fn header(o: &Params, info: &Info, why: &str, role: &str) -> String {
    let mut h = String::new();
    let kind = if o.test.is_lat() { "Latency" } else { "BW" };
    let _ = writeln!(h, "{}", table::RULE);
    let _ = writeln!(h, "                    {} {} Test", verb(o.test), kind);
    let _ = writeln!(
        h,
        " Provider        : {}",
        table::provider_label(info.provider, &info.device)
    );
    let _ = writeln!(h, " Provider choice : {why}");
    let _ = writeln!(h, " Device          : {}", info.device);
    let _ = writeln!(h, " Test            : {}", o.test.name());
    let _ = writeln!(h, " Connection type : {}   ({role})", o.qp_type);
    let _ = writeln!(h, " Number of qps   : 1 pair");
    let loopback = role.contains("loopback");
    if !loopback {
        let _ = writeln!(
            h,
            " Threads         : 1 (this side; the peer is another process)"
        );
    } else if matches!(o.test, Test::WriteLat | Test::SendLat) {
        let _ = writeln!(
            h,
            " Threads         : {}",
            if info.two_threads {
                "2 (client and server each on its own thread)"
            } else {
                "1 (alternating between client and server)"
            }
        );
    }
    if o.test.is_lat() {
        let _ = writeln!(
            h,
            " Latency         : {}",
            if o.test.rtt_factor() == 2 {
                "half the round trip"
            } else {
                "full round trip"
            }
        );
    } else {
        let _ = writeln!(h, " TX depth        : {TX_DEPTH}");
        let _ = writeln!(h, " Post list       : {}", o.post_list);
        let _ = writeln!(h, " CQ Moderation   : {}", o.cq_mod);
    }
    let _ = writeln!(h, " Mtu             : {}[B]", info.mtu);
    let _ = writeln!(
        h,
        " Inline data     : {}",
        if o.inline > 0 {
            format!("up to {} B", o.inline)
        } else {
            "not used".into()
        }
    );
    if info.provider == ProviderKind::Verbs {
        let _ = writeln!(h, " GID index       : {}", o.gid_index);
    }
    for (name, ep) in [("local ", &info.client), ("remote", &info.server)] {
        // In loopback "local" is the client QP and "remote" the server QP of this process.
        let _ = writeln!(
            h,
            " {name} address: LID {:#06x} QPN {:#08x} PSN {:#08x} GID {}",
            ep.lid,
            ep.qpn,
            ep.psn,
            gid_text(&ep.gid)
        );
    }
    let _ = writeln!(h, "{}", table::RULE);
    h
}

/// A GID as eight groups of four hex digits.
fn gid_text(g: &[u8; 16]) -> String {
    let mut s = String::new();
    for (i, b) in g.iter().enumerate() {
        if i > 0 && i % 2 == 0 {
            s.push(':');
        }
        let _ = write!(s, "{b:02x}");
    }
    s
}
