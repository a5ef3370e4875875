//! The endpoint exchange formats, on the host: the binary message byte for byte, every bad
//! input a peer can send, the TCP exchange over loopback, and `ibv_rc_pingpong`'s text format.

use rdma_direct::endpoint::*;
use rdma_direct::Error;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

fn ep(mr: Option<RemoteMr>) -> QpEndpoint {
    QpEndpoint {
        lid: 0x1234,
        gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1],
        gid_index: 1,
        qpn: 0x00ab_cdef,
        psn: 0x0012_3456,
        mtu: Mtu::Mtu1024,
        mr,
    }
}

fn window() -> RemoteMr {
    RemoteMr {
        addr: 0x7f00_0000_1000,
        len: 4096,
        rkey: 0xdead_beef,
    }
}

fn protocol_detail(r: Result<QpEndpoint, Error>) -> String {
    match r {
        Err(Error::Protocol { detail, .. }) => detail,
        other => panic!("expected a protocol error, got {other:?}"),
    }
}

#[test]
fn encodes_byte_for_byte() {
    let b = ep(None).encode().unwrap();
    #[rustfmt::skip]
    let want: Vec<u8> = vec![
        b'R', b'D', b'E', b'P', 0, 1, 0, 32,       // magic, version 1, body length 32
        0x12, 0x34,                                 // LID
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1, // GID
        1,                                          // GID index
        3,                                          // MTU 1024
        0x00, 0xab, 0xcd, 0xef,                     // QPN
        0x00, 0x12, 0x34, 0x56,                     // PSN
        0, 0, 0, 0,                                 // flags, reserved
    ];
    assert_eq!(b, want);

    let b = ep(Some(window())).encode().unwrap();
    assert_eq!(b.len(), MAX_MESSAGE_LEN);
    assert_eq!(&b[6..8], &[0, 52]);
    assert_eq!(b[36], 1, "window flag");
    assert_eq!(&b[40..48], &0x7f00_0000_1000u64.to_be_bytes());
    assert_eq!(&b[48..56], &4096u64.to_be_bytes());
    assert_eq!(&b[56..60], &[0xde, 0xad, 0xbe, 0xef]);
}

#[test]
fn round_trips_with_and_without_a_window() {
    for e in [ep(None), ep(Some(window()))] {
        assert_eq!(QpEndpoint::decode(&e.encode().unwrap()).unwrap(), e);
    }
    for mtu in [Mtu::Mtu256, Mtu::Mtu512, Mtu::Mtu2048, Mtu::Mtu4096] {
        let mut e = ep(None);
        e.mtu = mtu;
        e.qpn = 0xff_ffff;
        e.psn = 0;
        assert_eq!(QpEndpoint::decode(&e.encode().unwrap()).unwrap(), e);
    }
}

#[test]
fn truncated_messages_are_refused_at_every_length() {
    let full = ep(Some(window())).encode().unwrap();
    for n in 0..full.len() {
        let d = protocol_detail(QpEndpoint::decode(&full[..n]));
        assert!(d.contains("truncated"), "{n} bytes: {d}");
    }
}

#[test]
fn trailing_bytes_are_refused() {
    let mut b = ep(None).encode().unwrap();
    b.push(0);
    assert!(protocol_detail(QpEndpoint::decode(&b)).contains("trailing"));
}

#[test]
fn wrong_magic_and_version_are_named() {
    let mut b = ep(None).encode().unwrap();
    b[0] = b'X';
    assert!(protocol_detail(QpEndpoint::decode(&b)).contains("wrong magic"));
    let mut b = ep(None).encode().unwrap();
    b[5] = 2;
    let d = protocol_detail(QpEndpoint::decode(&b));
    assert!(d.contains("unsupported version 2"), "{d}");
    let e = QpEndpoint::decode(&b).unwrap_err().to_string();
    assert!(e.starts_with("endpoint message: bad peer message:"), "{e}");
}

#[test]
fn absurd_lengths_are_refused_from_the_header_alone() {
    for len in [0u16, 1, 31, 33, 51, 53, 1000, 0xffff] {
        let mut h = ep(None).encode().unwrap()[..HEADER_LEN].to_vec();
        h[6..8].copy_from_slice(&len.to_be_bytes());
        let e = QpEndpoint::decode_header(&h).unwrap_err();
        assert!(e.to_string().contains(&format!("body length {len}")), "{e}");
    }
}

#[test]
fn every_field_is_range_checked() {
    let base = ep(Some(window())).encode().unwrap();
    let cases: Vec<(usize, Vec<u8>, &str)> = vec![
        (27, vec![0], "MTU code 0"),
        (27, vec![6], "MTU code 6"),
        (28, vec![0x01, 0, 0, 0], "QPN 0x1000000"),
        (32, vec![0xff, 0, 0, 0], "PSN 0xff000000"),
        (36, vec![0x03], "unknown flags"),
        (38, vec![1], "reserved"),
        (48, vec![0; 8], "length 0"),
        (48, vec![0, 1, 0, 0, 0, 0, 0, 1], "> 2^48"),
        (40, vec![0xff; 8], "wraps"),
    ];
    for (at, bytes, want) in cases {
        let mut b = base.clone();
        b[at..at + bytes.len()].copy_from_slice(&bytes);
        let d = protocol_detail(QpEndpoint::decode(&b));
        assert!(d.contains(want), "patch at {at}: {d}");
    }
    // The window flag and the body length must agree.
    let mut b = ep(None).encode().unwrap();
    b[36] = 1;
    assert!(protocol_detail(QpEndpoint::decode(&b)).contains("disagrees"));
}

#[test]
fn garbage_is_refused() {
    let mut x: u32 = 0x1234_5678;
    for _ in 0..200 {
        let mut b = vec![0u8; MAX_MESSAGE_LEN];
        for byte in b.iter_mut() {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            *byte = x as u8;
        }
        assert!(QpEndpoint::decode(&b).is_err());
    }
    assert!(QpEndpoint::decode(b"GET / HTTP/1.1\r\n\r\n").is_err());
}

#[test]
fn encode_refuses_out_of_range_fields() {
    let mut e = ep(None);
    e.qpn = 0x100_0000;
    assert!(matches!(e.encode(), Err(Error::InvalidArgument { .. })));
    let mut e = ep(None);
    e.psn = u32::MAX;
    assert!(e.encode().is_err());
    let e = ep(Some(RemoteMr {
        addr: 1,
        len: 0,
        rkey: 1,
    }));
    assert!(e.encode().is_err());
}

#[test]
fn exchange_over_loopback_tcp() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server_ep = ep(Some(window()));
    let mut client_ep = ep(None);
    client_ep.qpn = 0x42;
    client_ep.psn = 0x77;
    let s = std::thread::spawn(move || {
        let (remote, mut stream) =
            exchange_server(&listener, &server_ep, Duration::from_secs(5)).unwrap();
        sync(&mut stream).unwrap();
        remote
    });
    let (remote, mut stream) = exchange_client(addr, &client_ep, Duration::from_secs(5)).unwrap();
    sync(&mut stream).unwrap();
    assert_eq!(remote, ep(Some(window())));
    assert_eq!(s.join().unwrap(), client_ep);
}

fn serve_bad_peer(payload: Vec<u8>) -> Result<QpEndpoint, Error> {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = std::thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        let _ = s.write_all(&payload);
        // Closing the connection ends the message.
    });
    let r = exchange_server(&listener, &ep(None), Duration::from_secs(5)).map(|(e, _)| e);
    peer.join().unwrap();
    r
}

#[test]
fn bad_peers_over_tcp_get_clear_errors() {
    let good = ep(Some(window())).encode().unwrap();

    let d = protocol_detail(serve_bad_peer(good[..5].to_vec()));
    assert!(d.contains("truncated header"), "{d}");

    let d = protocol_detail(serve_bad_peer(good[..40].to_vec()));
    assert!(d.contains("truncated body"), "{d}");

    let mut huge = good[..HEADER_LEN].to_vec();
    huge[6..8].copy_from_slice(&0xffffu16.to_be_bytes());
    let d = protocol_detail(serve_bad_peer(huge));
    assert!(d.contains("body length 65535"), "{d}");

    let d = protocol_detail(serve_bad_peer(b"hello, this is not an endpoint".to_vec()));
    assert!(d.contains("wrong magic"), "{d}");

    let mut v2 = good.clone();
    v2[4..6].copy_from_slice(&9u16.to_be_bytes());
    let d = protocol_detail(serve_bad_peer(v2));
    assert!(d.contains("unsupported version 9"), "{d}");
}

#[test]
fn no_peer_is_a_timeout_not_a_hang() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    match exchange_server(&listener, &ep(None), Duration::from_millis(100)) {
        Err(Error::Io { kind, detail, .. }) => {
            assert_eq!(kind, std::io::ErrorKind::TimedOut);
            assert!(detail.contains("no peer connected"), "{detail}");
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    // A peer that connects and says nothing times out on the read.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let _silent = TcpStream::connect(addr).unwrap();
    let r = exchange_server(&listener, &ep(None), Duration::from_millis(100));
    assert!(matches!(r, Err(Error::Io { .. })), "{r:?}");
}

#[test]
fn connecting_to_nobody_is_an_io_error() {
    // Bind then drop, so the port is (very likely) closed.
    let addr = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let r = exchange_client(addr, &ep(None), Duration::from_millis(500));
    assert!(matches!(r, Err(Error::Io { .. })), "{r:?}");
}

#[test]
fn rc_pingpong_message_is_52_bytes_with_nul() {
    let m = PingpongMsg::from_endpoint(&ep(None));
    let b = m.format().unwrap();
    assert_eq!(b.len(), PINGPONG_MSG_LEN);
    assert_eq!(
        &b[..51],
        b"1234:abcdef:123456:00000000000000000000ffff7f000001"
    );
    assert_eq!(b[51], 0);
    assert_eq!(PingpongMsg::parse(&b).unwrap(), m);
    assert_eq!(PingpongMsg::parse(&b[..51]).unwrap(), m);
    let e = m.to_endpoint(Mtu::Mtu1024, 1);
    assert_eq!(e, ep(None));
}

#[test]
fn rc_pingpong_parse_accepts_uppercase_and_zero_gid() {
    let m = PingpongMsg::parse(b"0000:00ABCD:FFFFFF:00000000000000000000000000000000\0").unwrap();
    assert_eq!(
        (m.lid, m.qpn, m.psn, m.gid),
        (0, 0xabcd, 0xff_ffff, [0; 16])
    );
}

#[test]
fn rc_pingpong_bad_messages_are_named() {
    let ok = *b"1234:abcdef:123456:00000000000000000000ffff7f000001\0";
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (ok[..30].to_vec(), "30 bytes"),
        ([&ok[..], b"x"].concat(), "53 bytes"),
        (
            {
                let mut b = ok;
                b[51] = b'1';
                b.to_vec()
            },
            "NUL",
        ),
        (
            {
                let mut b = ok;
                b[2] = b'g';
                b.to_vec()
            },
            "LID",
        ),
        (
            {
                let mut b = ok;
                b[7] = b' ';
                b.to_vec()
            },
            "QPN",
        ),
        (
            {
                let mut b = ok;
                b[18] = b'-';
                b.to_vec()
            },
            "fields",
        ),
        (
            {
                let mut b = ok;
                b[40] = b'z';
                b.to_vec()
            },
            "GID",
        ),
        (
            {
                let mut b = ok;
                b[20] = 0xff;
                b.to_vec()
            },
            "ASCII",
        ),
    ];
    for (msg, want) in cases {
        match PingpongMsg::parse(&msg) {
            Err(Error::Protocol { detail, .. }) => {
                assert!(detail.contains(want), "{want}: {detail}")
            }
            other => panic!("{want}: expected a protocol error, got {other:?}"),
        }
    }
}

#[test]
fn rc_pingpong_format_refuses_wide_fields() {
    let mut m = PingpongMsg::from_endpoint(&ep(None));
    m.qpn = 0x100_0000;
    assert!(m.format().is_err());
}

#[test]
fn random_psns_fit_24_bits_and_vary() {
    let v: Vec<u32> = (0..16).map(|_| random_psn()).collect();
    assert!(v.iter().all(|&p| p <= 0xff_ffff));
    assert!(v.iter().any(|&p| p != v[0]), "16 equal PSNs: {v:?}");
}
