//! The sim's asynchronous event stream: read without blocking, in order, each event naming
//! its object; raised by the engine (CQ overrun) or on demand.

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
