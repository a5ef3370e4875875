//! The embedder's typed remote targets and completion errors, on the software device:
//! WRITE / WRITE WITH IMM / READ / atomics through a [`RemoteTarget`] checked once against
//! the peer's window, `Completion::check` whose message names the cause and fix, and posts
//! whose errors go up with `?` into `Box<dyn Error>` in code generic over the provider.

use rdma_direct::prelude::*;
use std::error::Error as StdError;

/// Two connected RC QPs on one device, each with its own CQ.
fn pair<P: Provider>(p: &mut P, pd: &P::Pd, opts: &ConnectOpts) -> Result<[(P::Qp, P::Cq); 2]> {
    let mut cfg = QpConfig::new(QpType::Rc);
    (cfg.caps.max_send_wr, cfg.caps.max_recv_wr) = (16, 16);
    let (mut ca, mut cb) = (p.create_cq(64)?, p.create_cq(64)?);
    let mut a = p.create_qp(pd, &mut ca, None, None, &cfg)?;
    let mut b = p.create_qp(pd, &mut cb, None, None, &cfg)?;
    let (ea, eb) = (p.endpoint(&a, opts)?, p.endpoint(&b, opts)?);
    p.connect(&mut a, &ea, &eb, opts)?;
    p.connect(&mut b, &eb, &ea, opts)?;
    Ok([(a, ca), (b, cb)])
}

fn one<P: Provider>(p: &mut P, cq: &mut P::Cq) -> Completion {
    let mut wc = [Completion::EMPTY];
    let n = poll_wait(p, cq, &mut wc, std::time::Duration::from_secs(5)).unwrap();
    assert_eq!(n, 1);
    wc[0]
}

#[test]
fn typed_targets_carry_write_imm_read_and_atomics_to_the_window() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let [(mut a, mut ca), (mut b, mut cb)] = pair(&mut dev, &pd, &ConnectOpts::default()).unwrap();
    let mut mine = dev
        .alloc_buf(&pd, 4096, Access::LOCAL_WRITE, Pages::Normal)
        .unwrap();
    let theirs = dev
        .alloc_buf(&pd, 4096, Access::ALL, Pages::Normal)
        .unwrap();
    let window = theirs.remote(1024, 1024).unwrap();

    // WRITE WITH IMM through a target: bytes at the target, the immediate at the peer.
    mine.get_mut(0, 8).unwrap().copy_from_slice(b"typed-ok");
    let sge = [mine.sge(0, 8).unwrap()];
    let at = window.target(64, 8).unwrap();
    assert_eq!(
        (at.addr(), at.rkey(), at.len()),
        (window.addr + 64, window.rkey, 8)
    );
    b.rq().post_recv(RecvWr::new(9, &[])).unwrap();
    b.rq().ring();
    let wr = SendWr::write_imm_to(1, &sge, at, 0xfeed).signaled();
    a.sq().post(wr).unwrap();
    a.sq().ring();
    assert!(one(&mut dev, &mut ca).is_ok());
    let r = one(&mut dev, &mut cb);
    assert_eq!(
        (r.wr_id, r.imm, r.opcode),
        (9, 0xfeed, WcOpcode::RecvRdmaWithImm)
    );
    assert_eq!(theirs.get(1024 + 64, 8).unwrap(), b"typed-ok");

    // WRITE, then READ it back into another place of ours.
    let at2 = window.target(128, 8).unwrap();
    a.sq().post(SendWr::write_to(2, &sge, at2)).unwrap();
    let back = [mine.sge(256, 8).unwrap()];
    a.sq()
        .post(SendWr::read_from(3, &back, at2).signaled())
        .unwrap();
    a.sq().ring();
    let c = one(&mut dev, &mut ca);
    assert_eq!((c.wr_id, c.covered, c.status), (3, 1, WcStatus::Success));
    assert_eq!(mine.get(256, 8).unwrap(), b"typed-ok");

    // Fetch-and-add then compare-and-swap on one 8-byte word of the window.
    let word = window.target(512, 8).unwrap();
    let old = [mine.sge(512, 8).unwrap()];
    a.sq()
        .post(SendWr::faa_at(4, &old, word, 5).signaled())
        .unwrap();
    a.sq().ring();
    assert!(one(&mut dev, &mut ca).is_ok());
    a.sq()
        .post(SendWr::cas_at(5, &old, word, 5, 40).signaled())
        .unwrap();
    a.sq().ring();
    assert!(one(&mut dev, &mut ca).is_ok());
    assert_eq!(mine.get(512, 8).unwrap(), 5u64.to_ne_bytes());
    assert_eq!(theirs.get(1024 + 512, 8).unwrap(), 40u64.to_ne_bytes());

    // The window's edge: the last 8 bytes are a target, one byte further is refused, and a
    // target narrows only inside itself.
    assert!(window.target(1016, 8).is_ok());
    let e = window.target(1017, 8).unwrap_err();
    let msg = e.to_string();
    assert!(msg.starts_with("RemoteMr::target: invalid argument: 8 B at offset 1017 is outside the peer's window of 1024 B"), "{msg}");
    assert!(window.target(0, 0).is_err());
    assert!(window.target(u64::MAX, 2).is_err());
    assert_eq!(at.sub(4, 4).map(|t| t.addr()), Some(at.addr() + 4));
    assert_eq!(at.sub(4, 5), None);
}

#[test]
fn a_missing_receive_fails_with_a_message_naming_the_fix() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let [(mut a, mut ca), (b, _cb)] = pair(&mut dev, &pd, &ConnectOpts::default()).unwrap();
    let theirs = dev.alloc_buf(&pd, 64, Access::ALL, Pages::Normal).unwrap();
    let at = theirs.remote(0, 64).unwrap().target(0, 8).unwrap();
    // No receive posted at `b`: the WRITE WITH IMM runs out of RNR retries.
    a.sq()
        .post(SendWr::write_imm_to(77, &[], at, 1).signaled())
        .unwrap();
    a.sq().ring();
    let c = one(&mut dev, &mut ca);
    let e = c.check().unwrap_err();
    match e {
        Error::Completion {
            status,
            qp_num,
            wr_id,
            ..
        } => {
            assert_eq!(
                (status, qp_num, wr_id),
                (WcStatus::RnrRetryExcErr, a.qpn(), 77)
            );
        }
        ref other => panic!("not a completion error: {other:?}"),
    }
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!(
            "work request 77 on QP {:#x} completed with RNR_RETRY_EXC_ERR",
            a.qpn()
        )),
        "{msg}"
    );
    assert!(msg.contains("no receive posted at the peer"), "{msg}");
    assert!(msg.contains("rnr_retry"), "{msg}");
    drop(b);
}

#[test]
fn a_window_without_remote_write_fails_naming_access_flags() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let [(mut a, mut ca), _b] = pair(&mut dev, &pd, &ConnectOpts::default()).unwrap();
    let mine = dev
        .alloc_buf(&pd, 64, Access::LOCAL_WRITE, Pages::Normal)
        .unwrap();
    // Registered for local access only: the peer may not write it.
    let theirs = dev
        .alloc_buf(&pd, 64, Access::LOCAL_WRITE, Pages::Normal)
        .unwrap();
    let at = theirs.remote(0, 64).unwrap().target(0, 8).unwrap();
    let sge = [mine.sge(0, 8).unwrap()];
    a.sq()
        .post(SendWr::write_to(5, &sge, at).signaled())
        .unwrap();
    a.sq().ring();
    let c = one(&mut dev, &mut ca);
    assert_eq!(c.status, WcStatus::RemAccessErr);
    let msg = c.check().unwrap_err().to_string();
    assert!(msg.contains("completed with REM_ACCESS_ERR"), "{msg}");
    assert!(
        msg.contains("remote access flag") && msg.contains("window"),
        "{msg}"
    );
}

#[test]
fn every_error_status_has_a_message_and_success_checks_ok() {
    assert_eq!(Completion::EMPTY.check(), Ok(()));
    let with = |status| Completion {
        status,
        wr_id: 3,
        qp_num: 0x11,
        vendor_err: 0x81,
        ..Completion::EMPTY
    };
    let named = [
        (WcStatus::RetryExcErr, "the peer is gone"),
        (WcStatus::LocLenErr, "receive is too small"),
        (WcStatus::WrFlushErr, "the QP is in ERR"),
        (WcStatus::GeneralErr, "vendor syndrome narrows it down"),
    ];
    for (s, cause) in named {
        let msg = with(s).check().unwrap_err().to_string();
        assert!(
            msg.contains(&format!("completed with {}", s.name())),
            "{msg}"
        );
        assert!(msg.contains("vendor syndrome 0x81"), "{msg}");
        assert!(msg.contains(cause), "{s}: {msg}");
    }
    for &(s, _, _) in WcStatus::ALL.iter().skip(1) {
        assert!(!s.hint().is_empty(), "{s} has no hint");
    }
}

/// The generic code of the issue: `?` on a post, a post list and a completion into
/// `Box<dyn Error>` with no bound beyond `P: Provider`.
fn generic_send<P: Provider>(p: &mut P) -> std::result::Result<u64, Box<dyn StdError>> {
    let pd = p.alloc_pd()?;
    let [(mut a, mut ca), (mut b, _cb)] = pair(p, &pd, &ConnectOpts::default())?;
    let buf = p.alloc_buf(&pd, 256, Access::ALL, Pages::Normal)?;
    let sge = [buf.sge(0, 8)?];
    let at = buf.remote(0, 256)?.target(64, 8)?;
    b.rq().post_recv(RecvWr::new(1, &[]))?;
    b.rq().ring();
    a.sq().post(SendWr::write_to(1, &sge, at))?;
    let wrs = [SendWr::write_imm_to(2, &sge, at, 7).signaled()];
    a.sq().post_list(&wrs)?;
    let mut wc = [Completion::EMPTY];
    poll_wait(p, &mut ca, &mut wc, std::time::Duration::from_secs(5))?;
    wc[0].check()?;
    // A request the queue refuses goes up as the boxed error too.
    let too_many = [sge[0]; 64];
    a.sq().post(SendWr::write_to(3, &too_many, at))?;
    Ok(wc[0].covered_from)
}

#[test]
fn post_errors_go_up_into_box_dyn_error_in_generic_code() {
    let e = generic_send(&mut SimDevice::new()).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("post refused: 64 SGEs exceed the queue's max_sge"),
        "{e}"
    );
    let e: Box<dyn StdError + Send + Sync> = PostListError::<'_, u8> {
        index: 2,
        error: PostError::ZeroLengthRead,
        rest: &[],
    }
    .into();
    assert_eq!(
        e.to_string(),
        "post of request 2 in the list refused: zero-length RDMA READ"
    );
}
