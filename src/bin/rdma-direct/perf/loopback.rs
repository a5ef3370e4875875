//! Loopback (`--loopback`, the software device's default): client and server QPs in
//! this process; [`report`] measures every size, handing the header and each table line to
//! its output as they are produced (and the rows so far to `--json`'s file), and returns the
//! report. A stop asked for ([`crate::stop`]: Ctrl-C, a failed stdout) ends the sweep after
//! the size being measured, with a note: the report holds the sizes done.

use rdma_direct::doctor::Sysfs;
use rdma_direct::noise::Watch;
use rdma_direct::perf::{Report, Run};
use rdma_direct::providers::Provider;

use super::args::Cli;
use super::keep;
use super::progress;
use rdma_direct::report::perftest::{header, nic_text, row_text, table_header};
use rdma_direct::report::table;

/// Loopback: measure `cli.params` on `p`, handing the text to `out` as it is produced
/// (header, then one table line per size). Returns the report.
pub fn report<P: Provider>(
    p: &mut P,
    cli: &Cli,
    why: &str,
    out: &mut dyn FnMut(&str),
    prog: bool,
) -> rdma_direct::Result<Report>
where
    P::Qp: Send,
    P::Cq: Send,
{
    let o = &cli.params;
    let mut run = Run::new(p, o)?;
    let info = run.info().clone();
    out(&header(
        o,
        &info,
        why,
        "client and server QPs in this process, loopback",
    ));
    out(&format!("{}\n", table_header(o)));
    let n = info.sizes.len();
    let mut rows = Vec::with_capacity(n);
    let mut nic = Vec::new();
    let mut outliers = Vec::new();
    // --attribute: the kernel's counters of this thread's CPU, read around the measured
    // loops (never inside them).
    let sys = Sysfs::system();
    let watch = cli.attribute.then(|| Watch::start(&sys));
    progress(prog, 0, n, info.sizes.first().copied().unwrap_or(0));
    while let Some(row) = run.next() {
        let row = row?;
        out(&row_text(&row, cli.histogram));
        if let (true, Some(o)) = (cli.attribute, run.outliers()) {
            out(&format!(
                " outliers: {}
",
                o.summary()
            ));
        }
        rows.push(row);
        nic.extend(run.nic_time());
        outliers.extend(run.outliers().cloned());
        keep(cli, &info, &rows);
        if crate::stop::requested() && rows.len() < n {
            progress(prog, n, n, 0);
            crate::stop::note(&format!("perf {}", o.test.name()), rows.len(), n);
            break;
        }
        progress(
            prog,
            rows.len(),
            n,
            info.sizes.get(rows.len()).copied().unwrap_or(0),
        );
    }
    out(&format!("{}\n", table::RULE));
    if let Some(w) = watch {
        let nic_irqs = cli
            .device
            .as_deref()
            .and_then(|d| rdma_direct::noise::procfs::device_irqs(&sys, d).ok())
            .unwrap_or_default();
        out(&format!(
            " polling CPU over the run: {}\n",
            w.finish(&sys, &nic_irqs).likely()
        ));
    }
    if !nic.is_empty() {
        out(&nic_text(o, &info, &nic));
    }
    Ok(Report {
        info,
        rows,
        nic,
        outliers,
    })
}

#[cfg(test)]
mod tests {
    use super::super::args::parse;
    use super::*;
    use rdma_direct::perf::stats::BwUnit;
    use rdma_direct::perf::Row;
    use rdma_direct::providers::sim::SimDevice;
    use rdma_direct::report::results;

    fn p(s: &str) -> Result<Option<Cli>, String> {
        let v: Vec<String> = s.split_whitespace().map(String::from).collect();
        parse(&v)
    }

    /// `report` on the deterministic sim (no device thread; the one-thread loops call
    /// `progress`): the text and the rows.
    fn sim(args: &str) -> (Vec<Row>, String) {
        let c = p(args).unwrap().unwrap();
        let mut dev = SimDevice::new();
        let mut text = String::new();
        let rows = report(&mut dev, &c, "sim (auto)", &mut |s| text.push_str(s), false)
            .unwrap_or_else(|e| panic!("{args}: {e}"))
            .rows;
        assert_eq!(rows.len(), c.params.sizes.len(), "{text}");
        for row in &rows {
            assert!(text.contains(&table::row_line(row)), "{text}");
        }
        (rows, text)
    }

    #[test]
    fn prints_perftests_header_and_a_line_per_row() {
        let (_, t) = sim("write_lat -s 2 -n 50");
        assert!(
            t.contains(" Provider        : sim: software mlx5 device (sim0), not hardware\n"),
            "{t}"
        );
        assert!(t.contains("half the round trip"), "{t}");
        assert!(t.contains(&table::lat_header()), "{t}");
        assert!(
            t.contains("1 (alternating between client and server)"),
            "{t}"
        );
        let (_, t) = sim("read_lat -s 64 -n 20");
        assert!(t.contains("full round trip"), "{t}");
        let (rows, t) = sim("write_bw -s 64 -n 100 -l 4 --report_gbits");
        assert!(t.contains(&table::bw_header(BwUnit::Gbps)), "{t}");
        assert!(t.contains(" Post list       : 4\n"), "{t}");
        assert_eq!(rows.len(), 1);
        assert!(t.ends_with(&format!("{}\n", table::RULE)), "{t}");
    }

    #[test]
    fn two_threads_are_named_in_the_header() {
        let c = p("write_lat -s 2 -n 50 --threads 2").unwrap().unwrap();
        let mut dev = SimDevice::new();
        dev.start_device_thread().expect("device thread");
        let mut text = String::new();
        report(&mut dev, &c, "sim (auto)", &mut |s| text.push_str(s), false).expect("run");
        assert!(
            text.contains("2 (client and server each on its own thread)"),
            "{text}"
        );
    }

    #[test]
    fn hw_ts_prints_the_device_time_table_after_the_software_one() {
        let (rows, text) = sim("write_lat -s 2 -n 200 --hw-ts");
        assert_eq!(rows.len(), 1);
        let sw = text.find(" #bytes").expect("the software table");
        let nic = text
            .find("NIC time (device clock, sim: not hardware)")
            .unwrap_or_else(|| panic!("no device-time table: {text}"));
        assert!(sw < nic, "{text}");
        assert_eq!(text.matches(" #bytes").count(), 2, "{text}");
        assert!(text.contains("post -> send CQE on the requester"), "{text}");
        let e = p("write_lat --hw-ts -d rxe0 otherhost").unwrap_err();
        assert!(e.contains("--hw-ts: loopback only"), "{e}");
    }

    /// `--json FILE` writes a result file; nothing but the table goes to the text stream.
    #[test]
    fn json_goes_to_its_file_never_into_the_table() {
        let (rows, text) = sim("write_lat -s 2 -n 10 --histogram");
        assert!(!text.lines().any(|l| l.starts_with('{')), "{text}");
        assert!(text.contains("histogram of 7 kept samples"), "{text}");
        let c = p("write_lat -s 2 -n 10 --histogram").unwrap().unwrap();
        let info = Run::new(&mut SimDevice::new(), &c.params)
            .unwrap()
            .info()
            .clone();
        let f = results::from_report(
            &c.params,
            &Report {
                info,
                rows,
                nic: Vec::new(),
                outliers: Vec::new(),
            },
            true,
        );
        let json = f.to_json();
        assert!(
            json.contains("\"test\": \"write_lat\"") || json.contains("\"test\":\"write_lat\""),
            "{json}"
        );
        assert!(json.contains("histogram"), "{json}");
        let back = results::RunFile::from_text(&json).unwrap();
        assert_eq!(back.rows.sizes(), vec![2]);
    }

    /// `--attribute`: under each latency row its outliers, after the table what the kernel
    /// counted on the polling CPU; the counts go to `--json` with or without it.
    #[test]
    fn attribute_prints_outliers_under_each_row_and_the_cpu_after() {
        let (rows, t) = sim("read_lat -s 8 -s 64 -n 300 --attribute");
        assert_eq!(rows.len(), 1);
        let row = t.find(&table::row_line(&rows[0])).unwrap();
        let o = t.find(" outliers: 64 B: ").unwrap_or_else(|| panic!("{t}"));
        assert!(row < o, "{t}");
        assert!(t[o..].contains("above 10x the median"), "{t}");
        assert!(t[o..].contains(" of 299"), "{t}");
        assert!(t.contains("\n polling CPU over the run: CPU "), "{t}");
        let (_, t) = sim("read_lat -s 64 -n 300");
        assert!(!t.contains("outliers") && !t.contains("polling CPU"), "{t}");
        let c = p("read_lat -s 64 -n 300 --outlier-x 4").unwrap().unwrap();
        let mut dev = SimDevice::new();
        let r = rdma_direct::perf::run(&mut dev, &c.params).unwrap();
        assert_eq!((r.outliers.len(), r.outliers[0].x), (1, 4));
        let json = results::from_report(&c.params, &r, false).to_json();
        assert!(json.contains("\"outliers\""), "{json}");
        assert!(
            json.contains("\"x\":4") || json.contains("\"x\": 4"),
            "{json}"
        );
    }

    /// 7-digit sizes do not shift the columns.
    #[test]
    fn seven_digit_sizes_keep_the_columns() {
        let (_, t) = sim("write_bw -a -n 8");
        let header = t.lines().find(|l| l.starts_with(" #bytes")).unwrap();
        let col = header.find("#iterations").unwrap();
        for l in t
            .lines()
            .filter(|l| l.starts_with(" 2 ") || l.starts_with(" 8388608"))
        {
            assert_eq!(&l[col..col + 1], "8", "{header}\n{l}");
        }
    }
}
