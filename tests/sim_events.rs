//! The sim's asynchronous event stream: read without blocking, in order, each event naming
//! its object; raised by the engine (CQ overrun) or on demand; handed out once, whether read
//! for links (`recover::link_events`) or as they are (`Provider::async_events`).

use rdma_direct::prelude::{link_events, LinkEvent, Provider};
use rdma_direct::providers::sim::{AsyncEvent, SimDevice};

#[test]
fn raised_events_come_out_in_order_and_the_stream_never_blocks() {
    let dev = SimDevice::new();
    assert_eq!(dev.poll_async_event(), None);
    let all = [
        AsyncEvent::CqOverrun { cqn: 0x40 },
        AsyncEvent::QpFatal { qpn: 0x100 },
        AsyncEvent::QpReqErr { qpn: 0x101 },
        AsyncEvent::QpAccessErr { qpn: 0x102 },
        AsyncEvent::QpLastWqeReached { qpn: 0x103 },
        AsyncEvent::SrqLimitReached { srqn: 0x20 },
        AsyncEvent::PortActive { port: 1 },
        AsyncEvent::PortErr { port: 1 },
        AsyncEvent::GidChange { port: 1 },
        AsyncEvent::DeviceFatal,
    ];
    for e in all {
        dev.raise_event(e);
    }
    let mut got = Vec::new();
    while let Some(e) = dev.poll_async_event() {
        got.push(e);
    }
    assert_eq!(got, all);
    let names: Vec<_> = got.iter().map(|e| e.describe()).collect();
    assert_eq!(names[0], ("CQ_ERR", "cq 0x40".to_string()));
    assert_eq!(names[4], ("QP_LAST_WQE_REACHED", "qp 0x103".to_string()));
    assert_eq!(names[5], ("SRQ_LIMIT_REACHED", "srq 0x20".to_string()));
    assert_eq!(names[8], ("GID_CHANGE", "port 1".to_string()));
    assert_eq!(names[9], ("DEVICE_FATAL", "device".to_string()));
}

#[test]
fn events_cli_prints_each_kind_with_its_object() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rdma-direct"))
        .arg("events")
        .output()
        .unwrap();
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    for want in [
        "sim0: CQ_ERR cq 0x40",
        "sim0: QP_FATAL qp 0x100",
        "sim0: PORT_ACTIVE port 1",
        "sim0: DEVICE_FATAL device",
    ] {
        assert!(s.contains(want), "{want} missing in:\n{s}");
    }
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_rdma-direct"))
        .args(["events", "--count", "x"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

/// One event stream: a program that reads the device's events for its links
/// (`link_events`) and scenario-style (`Provider::async_events`) in turn sees every event
/// raised exactly once, in the order raised, whichever reader came first.
#[test]
fn events_are_each_seen_once_by_link_and_scenario_readers_together() {
    let mut dev = SimDevice::new();
    let raised = [
        AsyncEvent::PortErr { port: 1 },
        AsyncEvent::QpFatal { qpn: 0x21 },
        AsyncEvent::PortActive { port: 1 },
        AsyncEvent::GidChange { port: 2 },
        AsyncEvent::DeviceFatal,
        AsyncEvent::QpAccessErr { qpn: 0x22 },
    ];
    let mut seen: Vec<LinkEvent> = Vec::new();
    for (i, e) in raised.iter().enumerate() {
        dev.raise_event(*e);
        // Odd steps raise and leave the event for the next reader; each reader takes what
        // is pending.
        if i % 2 == 0 {
            continue;
        }
        if i % 4 == 1 {
            seen.extend(link_events(&mut dev).unwrap());
        } else {
            let v = dev
                .async_events()
                .unwrap()
                .expect("the sim has an event stream");
            seen.extend(v.iter().map(LinkEvent::from));
        }
        assert_eq!(link_events(&mut dev).unwrap(), [], "step {i}: nothing left");
    }
    let want: Vec<LinkEvent> = raised
        .iter()
        .map(|e| LinkEvent::from(&e.to_verbs()))
        .collect();
    assert_eq!(seen, want);
    assert_eq!(
        want,
        [
            LinkEvent::PortDown { port: 1 },
            LinkEvent::QpFailed {
                qpn: 0x21,
                what: "QP_FATAL"
            },
            LinkEvent::PortUp { port: 1 },
            LinkEvent::Other("GID_CHANGE"),
            LinkEvent::DeviceFatal,
            LinkEvent::QpFailed {
                qpn: 0x22,
                what: "QP_ACCESS_ERR"
            },
        ]
    );
}
