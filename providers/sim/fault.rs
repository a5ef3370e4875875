//! A seeded fault injector for the software device.
//!
//! Its own small PRNG (splitmix64), so a seed reproduces a run exactly in deterministic mode.
//! Faults it can inject (each a probability in parts per million, 0 = never):
//!
//! - **error CQEs**: a send WQE that would have succeeded fails with a transport error
//!   (`RETRY_EXC`, as if the peer had vanished), which moves the QP to ERR and flushes the rest
//!   of its queue — the path a real link failure takes;
//! - **delayed completions**: a CQE is held inside the device for a few engine passes before
//!   it is written;
//! - **out-of-order completion across QPs**: when held CQEs are released, one whose QP and
//!   queue have no older held CQE may overtake CQEs of *other* queues (never of its own: a
//!   queue's completions stay in order, as on hardware);
//! - **lost packets** across processes: a packet the device sends over the sim fabric
//!   vanishes (the RC requester's go-back-N and timeout recover it; UC and UD lose it);
//! - **damaged packets** across processes: one bit of a packet the device sends (header,
//!   payload or check word) is flipped in the receiver's ring; the receiver's check word
//!   test drops and counts it (`FabricStats::bad_icrc`), so RC recovers it as a lost one;
//! - **delayed packets** across processes: a packet is held by the sender for
//!   1..=`max_delay_passes` engine passes (at most [`HELD_PACKETS`] at once) and then put on
//!   the wire, behind packets sent after it (the responder's sequence NAK and the
//!   requester's go-back-N put them back in order);
//! - **duplicated packets** across processes: a packet goes on the wire twice (the
//!   responder answers a duplicate PSN again without executing it again);
//! - **CQE arrival mid-batch**: a held CQE is released in the middle of a later pass, and in
//!   device-thread mode the CQE body and its `op_own` byte are written with a pause in between,
//!   so a poller that reads the body before checking ownership is caught.

/// splitmix64: tiny, fast, good enough to drive fault decisions; not for cryptography.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        // Multiply-shift reduction; the bias is below 2^-32 for the small n used here.
        ((u128::from(self.next_u64()) * u128::from(n.max(1))) >> 64) as u64
    }
    /// True with probability `ppm` / 1 000 000.
    pub fn chance(&mut self, ppm: u32) -> bool {
        ppm > 0 && self.below(1_000_000) < u64::from(ppm)
    }
}

/// What to inject and how often.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct FaultConfig {
    /// Seed of the PRNG.
    pub seed: u64,
    /// Probability (ppm) that a send WQE fails with an injected `RETRY_EXC` error CQE.
    pub error_ppm: u32,
    /// Probability (ppm) that a CQE is held back inside the device.
    pub delay_ppm: u32,
    /// A held CQE waits 1..=`max_delay_passes` engine passes.
    pub max_delay_passes: u32,
    /// Probability (ppm) that released CQEs are picked out of order across queues.
    pub reorder_ppm: u32,
    /// Device-thread mode: spin this many iterations between a CQE body and its `op_own`
    /// byte (0 = none), so the poller runs mid-write.
    pub torn_write_spins: u32,
    /// Probability (ppm) that a packet this device sends over the sim fabric is lost on
    /// the way (requests, answers, datagrams alike).
    pub packet_drop_ppm: u32,
    /// Probability (ppm) that a packet this device sends over the sim fabric arrives with
    /// one bit flipped.
    pub packet_corrupt_ppm: u32,
    /// Probability (ppm) that a packet this device sends over the sim fabric is held for
    /// 1..=`max_delay_passes` engine passes (1 when that is 0) before it goes on the wire.
    pub packet_delay_ppm: u32,
    /// Probability (ppm) that a packet this device sends over the sim fabric goes twice.
    pub packet_duplicate_ppm: u32,
}

/// Packets the injector holds back at most at once (a delay beyond is not injected).
pub const HELD_PACKETS: usize = 4;

/// A packet held back on its way over the sim fabric.
#[derive(Clone, Debug)]
pub(crate) struct HeldPacket {
    /// The receiving slot.
    pub(crate) to: u8,
    /// Engine passes left before it goes.
    pub(crate) passes: u32,
    /// Its bytes (`len` of them).
    pub(crate) len: usize,
    pub(crate) bytes: Box<[u8; crate::sim::fabric::PACKET_LEN]>,
}

/// The injector: configuration, PRNG and counters of what it did.
#[derive(Clone, Debug)]
pub struct FaultInjector {
    /// The configuration.
    pub cfg: FaultConfig,
    pub(crate) rng: SplitMix64,
    /// Counters, for test reports.
    pub stats: FaultStats,
    /// Packets held back (delayed), in the order they were held.
    pub(crate) held: Vec<HeldPacket>,
    /// Buffers for held packets, allocated when the injector is made (the hot path
    /// allocates nothing).
    pub(crate) spare: Vec<Box<[u8; crate::sim::fabric::PACKET_LEN]>>,
}

/// How many faults of each kind were injected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Injected error CQEs.
    pub errors: u64,
    /// CQEs held back.
    pub delayed: u64,
    /// CQEs released ahead of older CQEs of other queues.
    pub reordered: u64,
    /// Fabric packets lost on purpose.
    pub packets_dropped: u64,
    /// Fabric packets sent with a bit flipped.
    pub packets_corrupted: u64,
    /// Fabric packets held back.
    pub packets_delayed: u64,
    /// Fabric packets sent twice.
    pub packets_duplicated: u64,
}

impl FaultInjector {
    /// A new injector.
    pub fn new(cfg: FaultConfig) -> Self {
        let n = if cfg.packet_delay_ppm > 0 {
            HELD_PACKETS
        } else {
            0
        };
        FaultInjector {
            cfg,
            rng: SplitMix64::new(cfg.seed),
            stats: FaultStats::default(),
            held: Vec::with_capacity(n),
            spare: (0..n)
                .map(|_| Box::new([0; crate::sim::fabric::PACKET_LEN]))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_is_seeded_and_reproducible() {
        let mut a = SplitMix64::new(42);
        let mut b = SplitMix64::new(42);
        let mut c = SplitMix64::new(43);
        let xa: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let xb: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let xc: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        assert_eq!(xa, xb);
        assert_ne!(xa, xc);
        // splitmix64 reference value for seed 0 (first output).
        assert_eq!(SplitMix64::new(0).next_u64(), 0xe220_a839_7b1d_cdaf);
    }

    #[test]
    fn below_and_chance_stay_in_range() {
        let mut r = SplitMix64::new(7);
        let mut hits = 0;
        for _ in 0..10_000 {
            assert!(r.below(13) < 13);
            if r.chance(250_000) {
                hits += 1;
            }
        }
        assert!((2_000..3_000).contains(&hits), "{hits}");
        assert!(!r.chance(0));
    }
}
