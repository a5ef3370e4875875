//! Unit tests of the fabric's segment, slots and rings (the parent module's contract).

use super::*;

/// Removes the test's segment file, pass or fail.
struct Removed(std::path::PathBuf);
impl Drop for Removed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A fresh fabric named after `test` and this process, removed when the guard goes.
fn fabric(test: &str) -> (Arc<Segment>, Removed) {
    let seg = Segment::open(Some(&format!("{test}-{}", std::process::id()))).unwrap();
    let rm = Removed(seg.path().to_path_buf());
    (seg, rm)
}

/// [`fabric`] and two members of it (GIDs all 1s and all 2s).
fn two_members(test: &str) -> (Arc<Segment>, Removed, Member, Member) {
    let (seg, rm) = fabric(test);
    let a = Member::join(Arc::clone(&seg), [1; 16]).unwrap();
    let b = Member::join(Arc::clone(&seg), [2; 16]).unwrap();
    (seg, rm, a, b)
}

#[test]
fn the_tail_table_names_the_rings_with_something_new() {
    let (_seg, _rm, mut a, mut b) = two_members("rdma-direct-fabric-unit");
    let (sa, sb) = (a.slot(), b.slot());
    assert_ne!(sa, sb);
    assert_eq!((a.pending(), b.pending()), (0, 0));
    // A header with no payload (length 0): the check word covers its 64 bytes.
    let pkt = [0u8; packet::HEADER_LEN];
    let mut out = Box::new([0u8; CELL_LEN]);
    assert!(a.send(sb, &pkt));
    assert!(a.send(sb, &pkt));
    assert_eq!((a.pending(), b.pending()), (0, 1 << sa));
    assert_eq!(b.recv(sa, &mut out), Some(packet::HEADER_LEN));
    // Still named while packets are left ...
    assert_eq!(b.pending(), 1 << sa);
    assert_eq!(b.recv(sa, &mut out), Some(packet::HEADER_LEN));
    // ... and not once the consumer has taken up to the tail.
    assert_eq!(b.pending(), 0);
    assert_eq!(b.recv(sa, &mut out), None);
    assert_eq!(b.pending(), 0);
    // The other direction has its own table.
    assert!(b.send(sa, &pkt));
    assert_eq!((a.pending(), b.pending()), (1 << sb, 0));
    // A producer scribbling over its indices: named; the two cells whose words still
    // match their indices come again (duplicates, as the producer could forge), the
    // rest is discarded and counted.
    a.corrupt_ring_to(sb, 0, 1000);
    assert_eq!(b.pending(), 1 << sa);
    assert_eq!(b.recv(sa, &mut out), Some(packet::HEADER_LEN));
    assert_eq!(b.recv(sa, &mut out), Some(packet::HEADER_LEN));
    assert_eq!(b.recv(sa, &mut out), None);
    assert_eq!(b.stats.corrupt_cells, 998);
    assert_eq!(b.pending(), 0);
    assert_eq!(a.recv(sb, &mut out), Some(packet::HEADER_LEN));
    assert_eq!(a.stats.bad_icrc + b.stats.bad_icrc, 0);
}

#[test]
fn a_cell_is_taken_by_its_sequence_word_and_a_spoiled_word_is_counted() {
    let (seg, _rm, mut a, mut b) = two_members("rdma-direct-fabric-seq");
    let (sa, sb) = (a.slot(), b.slot());
    let mut out = Box::new([0u8; CELL_LEN]);
    let mut pkt = [0u8; packet::HEADER_LEN + 8];
    let mut h = packet::Header::new(packet::Op::Write);
    h.len = 8;
    h.write(&mut pkt);
    pkt[packet::HEADER_LEN..].copy_from_slice(b"8 bytes!");
    assert_eq!(b.hot(), 0);
    assert_eq!(b.recv_probed(sa, &mut out, false), None, "nothing there");
    assert!(a.send(sb, &pkt));
    // The tail table not looked at (as in a pass where it showed nothing new): the
    // cell's word alone makes the packet visible, and the ring hot.
    assert_eq!(b.recv_probed(sa, &mut out, false), Some(pkt.len()));
    assert_eq!(&out[..pkt.len()], &pkt[..]);
    assert_eq!(b.hot(), 1 << sa);
    assert!(a.send(sb, &pkt));
    let r = seg.ring(usize::from(sb), usize::from(sa));
    let tail = seg.tail(usize::from(sb), usize::from(sa));
    // The tail lagging behind the word (the producer stores the word first).
    tail.store(1, Ordering::Release);
    assert_eq!(b.recv_probed(sa, &mut out, false), Some(pkt.len()));
    assert_eq!(
        b.recv(sa, &mut out),
        None,
        "a lagging tail is an empty ring"
    );
    assert_eq!(b.stats.corrupt_cells, 0);
    tail.store(2, Ordering::Release);
    // A cell the tail publishes whose word is spoiled: discarded, counted as damaged.
    assert!(a.send(sb, &pkt));
    let cell = r + RING_CELLS_OFF + 2 * CELL_SPAN;
    seg.u32_at(cell).store(77, Ordering::Release);
    assert_eq!(b.recv(sa, &mut out), None);
    assert_eq!(b.stats.bad_icrc, 1);
    assert_eq!(
        seg.u32_at(r).load(Ordering::Acquire),
        3,
        "the head moved past it"
    );
    assert_eq!((b.stats.corrupt_cells, a.stats.sent), (0, 3));
}

/// What lies in the cell a packet was put into: its bytes and check word.
fn cell_bytes(seg: &Segment, to: u8, from: u8, idx: u32, len: usize) -> Vec<u8> {
    let r = seg.ring(usize::from(to), usize::from(from));
    let cell = r + RING_CELLS_OFF + (idx % CELLS) as usize * CELL_SPAN + SEQ_LEN;
    let mut v = vec![0u8; len + packet::ICRC_LEN];
    // SAFETY: the cell lies in the mapping; the test's members are idle.
    unsafe { std::ptr::copy_nonoverlapping(seg.map.as_ptr().add(cell), v.as_mut_ptr(), v.len()) };
    v
}

#[test]
fn every_length_travels_byte_exact_with_its_check_word() {
    let (seg, _rm, mut a, mut b) = two_members("rdma-direct-fabric-len");
    let (sa, sb) = (a.slot(), b.slot());
    let mut out = Box::new([0u8; CELL_LEN]);
    let lens = (0..=130).chain([1000, 4095, packet::MAX_PAYLOAD]);
    for (k, len) in lens.enumerate() {
        let mut pkt = vec![0u8; packet::HEADER_LEN + len];
        let mut h = packet::Header::new(packet::Op::Write);
        h.len = len as u32;
        h.psn = k as u32;
        h.write(&mut pkt);
        for (i, x) in pkt[packet::HEADER_LEN..].iter_mut().enumerate() {
            *x = (i * 7 + k) as u8;
        }
        let mut want = pkt.clone();
        want.extend_from_slice(&packet::icrc(&pkt).to_be_bytes());
        // Through a packet buffer, and header and payload apart: the same cell bytes.
        let idx = 2 * k as u32;
        assert!(a.send(sb, &pkt));
        assert_eq!(cell_bytes(&seg, sb, sa, idx, pkt.len()), want, "len {len}");
        assert_eq!(b.recv(sa, &mut out), Some(pkt.len()), "len {len}");
        assert_eq!(&out[..want.len()], &want[..], "len {len}");
        assert!(a.send_header(sb, &h.to_bytes(), &pkt[packet::HEADER_LEN..]));
        assert_eq!(
            cell_bytes(&seg, sb, sa, idx + 1, pkt.len()),
            want,
            "len {len}"
        );
        assert_eq!(b.recv(sa, &mut out), Some(pkt.len()), "len {len}");
        assert_eq!(&out[..pkt.len()], &pkt[..], "len {len}");
    }
    // Any byte of a packet or its check word damaged: discarded and counted.
    let mut pkt = [0u8; packet::HEADER_LEN + 13];
    let mut h = packet::Header::new(packet::Op::Write);
    h.len = 13;
    h.write(&mut pkt);
    for at in 0..pkt.len() + packet::ICRC_LEN {
        // Bit 4 of byte `at` flipped on the way.
        assert!(a.send_damaged(sb, &pkt, Some((at, 1 << 4))));
        assert_eq!(b.recv(sa, &mut out), None, "damage at {at}");
    }
    assert_eq!(b.stats.bad_icrc, (pkt.len() + packet::ICRC_LEN) as u64);
    // A length field claiming more than was sent: the bytes after it are not its
    // check word.
    h.len = 200;
    h.write(&mut pkt);
    assert!(a.send(sb, &pkt));
    assert_eq!(b.recv(sa, &mut out), None);
    assert_eq!(b.stats.bad_icrc, (pkt.len() + packet::ICRC_LEN) as u64 + 1);
    // Longer than a cell, or to no slot: refused.
    assert!(!a.send(sb, &vec![0u8; PACKET_LEN + 1]));
    assert!(!a.send_header(sb, &h.to_bytes(), &[0u8; packet::MAX_PAYLOAD + 1]));
    assert!(!a.send(MAX_DEVICES as u8, &pkt));
}

#[test]
fn the_default_name_carries_the_layout() {
    assert!(Segment::default_name().starts_with(&format!("rdma-direct-sim-fabric-v{LAYOUT}-")));
    assert_eq!(MAGIC.to_le_bytes()[7], b'0' + LAYOUT);
}

#[test]
fn the_tail_table_is_swept_every_pass_until_hot_rings_are_busy() {
    let (_seg, _rm, mut a, mut b) = two_members("rdma-direct-fabric-sweep");
    // No hot ring: every pass, whatever the probes took.
    assert!((0..3).all(|i| b.sweep_due(i % 2 == 0)));
    assert!(a.send(b.slot(), &[0u8; packet::HEADER_LEN]));
    let mut out = Box::new([0u8; CELL_LEN]);
    assert_eq!(b.recv(a.slot(), &mut out), Some(packet::HEADER_LEN));
    assert_eq!(b.hot(), 1 << a.slot());
    // Busy hot rings: every SWEEP_EVERY-th pass.
    let due: Vec<u32> = (1..=3 * SWEEP_EVERY)
        .filter(|_| b.sweep_due(true))
        .collect();
    assert_eq!(due, [SWEEP_EVERY, 2 * SWEEP_EVERY, 3 * SWEEP_EVERY]);
    // Going quiet: still every SWEEP_EVERY-th pass, then every pass once more than
    // SWEEP_EVERY have brought nothing.
    let due: Vec<u32> = (1..=SWEEP_EVERY + 3)
        .filter(|_| b.sweep_due(false))
        .collect();
    assert_eq!(
        due,
        [
            SWEEP_EVERY,
            SWEEP_EVERY + 1,
            SWEEP_EVERY + 2,
            SWEEP_EVERY + 3
        ]
    );
    // A packet again: back to every SWEEP_EVERY-th pass.
    let due: Vec<u32> = (1..=SWEEP_EVERY).filter(|_| b.sweep_due(true)).collect();
    assert_eq!(due, [SWEEP_EVERY]);
}
