//! The fuzzer's completions and steps: polling into the ledger, retiring what each
//! completion covers, asynchronous events, drains, one random step, the final figures.

use super::*;

impl Fuzz {
    /// Poll up to `k` completions from a pair's send CQ (`0..PAIRS`) or the receive CQ
    /// (`RCQ`) into the ledger; returns how many.
    fn poll(&mut self, which: usize, k: usize) -> usize {
        let mut wc = [Completion::EMPTY; 16];
        let k = k.clamp(1, 16);
        let cq = match which {
            0..PAIRS => &mut self.scq[which],
            _ => &mut self.rcq,
        };
        let n = cq.poll(&mut wc[..k]);
        if n < k {
            self.stale[which] = false;
        }
        for c in &wc[..n] {
            self.retire(c);
        }
        n
    }

    fn retire(&mut self, c: &Completion) {
        if c.flags.contains(WcFlags::CQ_ERROR) {
            self.fail(format!("a CQ went into error: {c:?}"));
        }
        let Some(i) = self.slot_of(c.qp_num) else {
            self.fail(format!(
                "a completion of no live QP (a stale CQE got through): {c:?}"
            ));
        };
        if c.status == WcStatus::Success && self.slots[i].peer == REMOTE {
            self.f.remote_completed += 1;
        }
        match c.status {
            WcStatus::Success => self.f.completed += 1,
            WcStatus::WrFlushErr => self.f.flushed += 1,
            _ => self.f.errors += 1,
        }
        if c.wr_id & RECV != 0 {
            if self.slots[i].ty == QpType::Ud && c.status == WcStatus::Success {
                self.f.ud_delivered += 1;
            }
            if self.slots[i].on_srq {
                if !self.srq_out.remove(&c.wr_id) {
                    self.fail(format!(
                        "SRQ receive completed twice or never posted: {c:?}"
                    ));
                }
            } else if self.slots[i].recvs.pop_front() != Some(c.wr_id) {
                self.fail(format!(
                    "slot {i}: receive out of order or not outstanding: {c:?}"
                ));
            }
            return;
        }
        let s = &mut self.slots[i];
        for j in 0..c.covered {
            match s.sends.pop_front() {
                Some((id, false)) => {
                    if j == 0 && id != c.covered_from {
                        self.fail(format!(
                            "slot {i}: covered_from {} is not {id}: {c:?}",
                            c.covered_from
                        ));
                    }
                }
                other => self.fail(format!("slot {i}: covers {other:?}: {c:?}")),
            }
        }
        self.f.covered += u64::from(c.covered);
        match self.slots[i].sends.pop_front() {
            Some((id, _)) if id == c.wr_id => {}
            other => self.fail(format!(
                "slot {i}: completion of {} but the oldest outstanding is {other:?}: {c:?}",
                c.wr_id
            )),
        }
    }

    fn check_events(&mut self) {
        for ev in self.dev.take_events() {
            match ev {
                AsyncEvent::QpFatal { qpn } => {
                    if !self.slot_of(qpn).is_some_and(|i| self.slots[i].fatal_ok) {
                        self.fail(format!("QP fatal not injected: {ev:?}"));
                    }
                }
                other => self.fail(format!("device event: {other:?} (a CQ overran?)")),
            }
        }
        for cq in self.scq.iter().chain([&self.rcq]) {
            if self.dev.cq_in_error(cq.cqn()) {
                self.fail(format!("CQ {:#x} in error (overrun)", cq.cqn()));
            }
        }
    }

    /// Run the device and poll both CQs until nothing more comes (a step budget, not a
    /// sleep).
    fn drain(&mut self) {
        let mut quiet = 0;
        for _ in 0..DRAIN_BUDGET {
            self.dev.progress();
            let n = (0..=RCQ).map(|w| self.poll(w, 16)).sum::<usize>();
            self.check_events();
            quiet = if n == 0 { quiet + 1 } else { 0 };
            if quiet >= 4 {
                return;
            }
        }
        self.fail("the CQs did not go quiet within the drain budget (a hang)");
    }

    /// `to_error`, drain, then every request of slot `i` must have ended, but for the
    /// documented unsignaled exception.
    fn quiesce(&mut self, i: usize) {
        let threaded = self.dev.is_threaded();
        self.dev.stop_device_thread();
        let qp = self.slots[i].qp.as_mut().unwrap();
        // Staged, never rung requests are flushed like the rest.
        qp.sq().ring();
        qp.rq().ring();
        if let Err(e) = self.dev.to_error(qp) {
            self.fail(format!("to_error: {e}"));
        }
        self.drain();
        let s = &self.slots[i];
        if let Some(&(id, _)) = s.sends.iter().find(|(_, sig)| *sig) {
            self.fail(format!("slot {i}: signaled request {id} never ended"));
        }
        if let Some(id) = s.recvs.front() {
            self.fail(format!("slot {i}: receive {id} never ended"));
        }
        self.f.unsignaled_exception += s.sends.len() as u64;
        self.slots[i].sends.clear();
        self.f.quiesces += 1;
        if threaded {
            self.dev.start_device_thread().unwrap();
        }
    }

    pub(super) fn step(&mut self) {
        self.step += 1;
        self.f.steps += 1;
        let i = self.rng.below(self.slots.len() as u64) as usize;
        let mut action = self.rng.below(100);
        if self.poll_shy && (65..=79).contains(&action) && self.rng.below(10) != 0 {
            action = 0;
        }
        if self.step >= self.trace_from {
            let st: Vec<String> = self
                .slots
                .iter()
                .map(|s| {
                    let q = s.qp.as_ref().unwrap();
                    format!("{:#x}:{}:{}", q.qpn(), q.state(), s.sends.len())
                })
                .collect();
            let rs: Vec<u32> = self.scq.iter().map(|c| c.reserved()).collect();
            println!(
                "step {} slot {i} action {action} {st:?} reserved {rs:?}",
                self.step
            );
        }
        match action {
            0..=29 => self.post_send(i),
            30..=44 => self.post_recv(i),
            45..=49 => {
                let qp = self.slots[i].qp.as_mut().unwrap();
                qp.sq().ring();
                qp.rq().ring();
            }
            50..=59 => {
                self.dev.process();
            }
            60..=64 => self.dev.progress(),
            65..=79 => {
                let which = self.rng.below(RCQ as u64 + 1) as usize;
                let k = 1 + self.rng.below(16) as usize;
                self.poll(which, k);
            }
            80..=82 => {
                let qp = self.slots[i].qp.as_mut().unwrap();
                if let Err(e) = self.dev.to_error(qp) {
                    self.fail(format!("to_error: {e}"));
                }
            }
            83..=86 => {
                // Quiesce, then reconnect (the usual recovery).
                self.quiesce(i);
                self.connect(i);
            }
            87..=89 => {
                // Reconnect now, whatever is outstanding or unpolled.
                self.connect(i);
            }
            90..=91 => {
                // Drop the QP and create a new one on the same CQs; both ends reconnect.
                self.discard(i);
                self.slots[i].qp = None;
                self.f.drops += 1;
                self.create(i);
                let p = self.slots[i].peer;
                self.connect(i);
                if p != REMOTE {
                    self.connect(p);
                }
            }
            92 => {
                let qpn = self.slots[i].qp.as_ref().unwrap().qpn();
                self.slots[i].fatal_ok = true;
                self.dev.fail_qp(qpn);
                self.f.injected += 1;
            }
            93..=94 => {
                let on = self.rng.below(2) == 0;
                self.dev.set_faults(on.then(|| FaultConfig {
                    seed: self.rng.next_u64(),
                    error_ppm: 20_000,
                    delay_ppm: 100_000,
                    max_delay_passes: 4,
                    reorder_ppm: 100_000,
                    torn_write_spins: 0,
                    // Packets cross only to the child: they touch the last pair alone.
                    packet_drop_ppm: 10_000,
                    packet_corrupt_ppm: 10_000,
                    packet_delay_ppm: 20_000,
                    packet_duplicate_ppm: 10_000,
                }));
            }
            95 => {
                if self.dev.is_threaded() {
                    self.dev.stop_device_thread();
                } else if self.rng.below(4) == 0 {
                    self.dev.start_device_thread().unwrap();
                }
            }
            96 => self.drop_send_cq(i / 2),
            _ => {
                let k = 1 + self.rng.below(16) as usize;
                for w in 0..=RCQ {
                    self.poll(w, k);
                }
            }
        }
        self.check_events();
    }

    /// Drop pair `p`'s send CQ while both its QPs still use it, run the device (it may still
    /// write CQEs there: the QPs keep the ring alive), then drop the QPs (their drop scans
    /// the ring after the handle is gone) and bring the pair back on a new CQ. What was
    /// outstanding on the pair is discarded by the drop, and counted.
    fn drop_send_cq(&mut self, p: usize) {
        let fresh = self
            .dev
            .create_cq(2 * MAX_WR)
            .unwrap_or_else(|e| self.fail(format!("create_cq: {e}")));
        drop(std::mem::replace(&mut self.scq[p], fresh));
        self.f.cq_drops += 1;
        self.dev.process();
        for i in [2 * p, 2 * p + 1] {
            self.discard(i);
            self.slots[i].qp = None;
            self.f.drops += 1;
        }
        for i in [2 * p, 2 * p + 1] {
            self.create(i);
        }
        self.stale[p] = false;
        self.connect_pair(2 * p);
    }

    /// The end of a run: every QP quiesced, so every request is accounted for.
    pub(super) fn finish(mut self) -> Figures {
        for i in 0..self.slots.len() {
            self.quiesce(i);
        }
        self.dev.stop_device_thread();
        if let Some(mut peer) = self.child.take() {
            // Closing the control connection ends the child; it says how it went.
            let _ = peer.ctl.shutdown(std::net::Shutdown::Both);
            let mut text = String::new();
            let _ = peer.proc.stdout.take().unwrap().read_to_string(&mut text);
            let status = peer.proc.wait().unwrap();
            if !(status.success() && text.contains("peer ok")) {
                self.fail(format!("the child process: {status}\n{text}"));
            }
        }
        self.f
    }
}
