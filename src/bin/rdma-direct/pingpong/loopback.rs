//! Loopback: both ends on one provider (the software mlx5 device, with its device thread, for
//! `rdma-direct pingpong` without `-d`; any device with `-d DEV --loopback`), connected to each other and driven by one thread that
//! alternates between them; prints the provider and address lines and the latency table's
//! header before the run (flushed) and returns the result text.

use std::time::{Duration, Instant};

use rdma_direct::providers::flow::connect_pair;
use rdma_direct::providers::sim::SimDevice;
use rdma_direct::providers::{Completion, Provider};
use rdma_direct::Result;

use super::args::Args;
use super::bring_up::{connect_opts, ep_line, open_end};
use super::flow::{flow, Stall, STALL};
use super::report::results;
use rdma_direct::report::table;

/// Loopback on the software mlx5 device, with its device thread; the text to print.
pub(super) fn on_the_sim(a: &Args) -> Result<String> {
    let mut dev = SimDevice::new();
    let mut text = loopback(&mut dev, a, &mut |dev: &mut SimDevice| {
        dev.start_device_thread()?;
        // Start the clock once the device thread runs (a pass done), so thread start-up is
        // not counted as the first round trip.
        let t0 = Instant::now();
        while dev.stats().passes == 0 && t0.elapsed() < Duration::from_secs(10) {
            std::thread::yield_now();
        }
        Ok(())
    })?;
    dev.stop_device_thread();
    let st = dev.stats();
    text.push_str(&format!(
        "sim device: {} doorbells, {} WQEs, {} CQEs, {} engine passes\n",
        st.doorbells, st.wqes, st.cqes, st.passes
    ));
    Ok(text)
}

/// `-d DEV --loopback`: both ends on the device.
pub(super) struct Loopback<'a>(pub(super) &'a Args);

impl super::super::provider::Job for Loopback<'_> {
    type Out = String;
    fn run<P: Provider>(&mut self, p: &mut P) -> Result<String>
    where
        P::Qp: Send,
        P::Cq: Send,
    {
        loopback(p, self.0, &mut |_| Ok(()))
    }
}

/// Both ends on `p`, connected to each other, one thread alternating between them.
/// `ready` runs after the bring-up, before the first send.
fn loopback<P: Provider>(
    p: &mut P,
    a: &Args,
    ready: &mut dyn FnMut(&mut P) -> Result<()>,
) -> Result<String> {
    let opts = connect_opts(a);
    let mut client = open_end(p, a)?;
    let mut server = open_end(p, a)?;
    let (ce, se) = connect_pair(p, &mut client.qp, &mut server.qp, &opts)?;
    let mut cf = flow(&client, a, true);
    let mut sf = flow(&server, a, false);
    cf.fill(&mut client.qp)?;
    sf.fill(&mut server.qp)?;
    // The provider and address lines go out now, before the run (as rc_pingpong's).
    out!(
        "provider: {}\n{}{}",
        table::provider_label(p.kind(), p.device_name()),
        ep_line("local", &ce),
        ep_line("remote", &se)
    );
    crate::out::flush();
    super::warn_busy(p.kind());
    // The latency table's header too: its columns are known before the run.
    out!("{}", super::report::table_head(a.iters));
    crate::out::flush();
    ready(p)?;

    let mut wc = [Completion::EMPTY; 16];
    let mut stall = Stall::new(STALL);
    let watch = a
        .attribute
        .then(|| rdma_direct::noise::Watch::start(&rdma_direct::doctor::Sysfs::system()));
    let start = Instant::now();
    cf.start(&mut client.qp, client.buf.as_mut_slice())?;
    while !cf.done() || !sf.done() {
        let c = cf.step(
            p,
            &mut client.qp,
            &mut client.cq,
            client.buf.as_mut_slice(),
            &mut wc,
            "client: ",
        )?;
        let s = sf.step(
            p,
            &mut server.qp,
            &mut server.cq,
            server.buf.as_mut_slice(),
            &mut wc,
            "server: ",
        )?;
        if c || s {
            stall.progressed();
        } else {
            p.progress();
            std::hint::spin_loop();
            stall.idle("pingpong", || {
                format!(
                    "the next completion of either end (client {}/{} sent/received, server \
                     {}/{})",
                    cf.scnt, cf.rcnt, sf.scnt, sf.rcnt
                )
            })?;
        }
    }
    let end = Instant::now();
    let stamps = cf.stamps.as_deref().unwrap_or(&[]);
    let mut text = results(
        a,
        end.duration_since(start),
        stamps,
        end,
        if p.kind() == rdma_direct::providers::ProviderKind::Sim {
            super::report::SIM_RATE_NOTE
        } else {
            ""
        },
    );
    text.push_str(&super::report::attribution(
        stamps,
        end,
        cf.away.as_ref(),
        watch,
        a.size as u64,
    ));
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::super::args::parse_args;
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn loopback_on_the_deterministic_sim() {
        // No device thread: the loop's `progress` runs the device until idle.
        for c in ["RC", "UC"] {
            let a = parse_args(&args(&format!("-s 64 -n 20 -r 4 -c {c}")))
                .unwrap()
                .unwrap();
            let mut dev = SimDevice::new();
            let out = loopback(&mut dev, &a, &mut |_| Ok(())).expect("loopback");
            assert!(out.contains("2560 bytes in "), "{out}");
            assert!(out.contains("20 iters in "), "{out}");
            assert_eq!(dev.stats().wqes, 40, "{c}: {out}");
        }
    }

    /// `--attribute`: the outliers' line (one per send stamped, the first mark dropped) and
    /// the polling CPU's line after the run's; without it neither.
    #[test]
    fn attribute_adds_the_outliers_and_the_cpus_counts() {
        let a = parse_args(&args("-s 64 -n 50 --attribute"))
            .unwrap()
            .unwrap();
        assert!(a.attribute);
        let mut dev = SimDevice::new();
        let out = loopback(&mut dev, &a, &mut |_| Ok(())).expect("loopback");
        let o = out
            .find("outliers: 64 B: ")
            .unwrap_or_else(|| panic!("{out}"));
        // "N of 50 samples above 10x the median ...", or "no sample above 10x the median
        // (M ns) of 50" on a quiet run.
        assert!(out[o..].contains("above 10x the median"), "{out}");
        assert!(out[o..].contains(" of 50"), "{out}");
        assert!(out.contains("\npolling CPU over the run: CPU "), "{out}");
        assert!(out.find("50 iters in ").unwrap() < o, "{out}");
        let a = parse_args(&args("-s 64 -n 50")).unwrap().unwrap();
        let out = loopback(&mut SimDevice::new(), &a, &mut |_| Ok(())).expect("loopback");
        assert!(
            !out.contains("outliers") && !out.contains("polling CPU"),
            "{out}"
        );
    }

    /// `--chk`: messages carrying their sequence number pass; a client that does not write
    /// it (rc_pingpong's constant 0x7b buffer) is caught by the checking server at the
    /// first message, named. (A peer without `--chk` that echoes what it received passes a
    /// checking client: the round trip returned the bytes sent.)
    #[test]
    fn chk_checks_every_message() {
        let a = parse_args(&args("-s 64 -n 20 -r 4 --chk"))
            .unwrap()
            .unwrap();
        assert!(a.chk);
        let mut dev = SimDevice::new();
        let out = loopback(&mut dev, &a, &mut |_| Ok(())).expect("--chk on both ends");
        assert!(out.contains("20 iters in "), "{out}");

        let mut dev = SimDevice::new();
        let mut client = open_end(&mut dev, &a).unwrap();
        let mut server = open_end(&mut dev, &a).unwrap();
        connect_pair(&mut dev, &mut client.qp, &mut server.qp, &connect_opts(&a)).unwrap();
        let mut cf = flow(&client, &a, true);
        cf.chk = false;
        let mut sf = flow(&server, &a, false);
        cf.fill(&mut client.qp).unwrap();
        sf.fill(&mut server.qp).unwrap();
        let mut wc = [Completion::EMPTY; 16];
        cf.start(&mut client.qp, client.buf.as_mut_slice()).unwrap();
        let e = loop {
            assert!(!sf.done(), "the run ended unchecked");
            cf.step(
                &mut dev,
                &mut client.qp,
                &mut client.cq,
                client.buf.as_mut_slice(),
                &mut wc,
                "client: ",
            )
            .unwrap();
            if let Err(e) = sf.step(
                &mut dev,
                &mut server.qp,
                &mut server.cq,
                server.buf.as_mut_slice(),
                &mut wc,
                "server: ",
            ) {
                break e.to_string();
            }
            dev.progress();
        };
        assert!(
            e.contains("server: checked message 0 holds 0x7b at byte 0, expected 0x00"),
            "{e}"
        );
    }

    /// A failed send ends the run with the drain's line: every request outstanding at the
    /// error completed (the send with its error, the receives flushed), none lost.
    #[test]
    fn a_failed_send_is_drained_and_counted() {
        use rdma_direct::providers::sim::FaultConfig;
        let a = parse_args(&args("-s 64 -n 20 -r 4")).unwrap().unwrap();
        let mut dev = SimDevice::new();
        dev.set_faults(Some(FaultConfig {
            seed: 1,
            error_ppm: 1_000_000,
            ..FaultConfig::default()
        }));
        let e = loopback(&mut dev, &a, &mut |_| Ok(()))
            .unwrap_err()
            .to_string();
        for want in [
            "client: failed status",
            "drain: 5 outstanding at the first error (1 send, 4 receives): ",
            "1 RETRY_EXC_ERR",
            "4 WR_FLUSH_ERR",
            "0 without a completion",
        ] {
            assert!(e.contains(want), "{want}: {e}");
        }
    }
}
