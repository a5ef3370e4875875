//! The kernel's counters, as text in and numbers out: `/proc/interrupts`, `/proc/softirqs`,
//! the `cpuN` rows of `/proc/stat`, a thread's context switches (`/proc/self/task/TID/status`)
//! and a device's MSI IRQs (`/sys/class/infiniband/DEV/device/msi_irqs`).
//!
//! Contract: the `parse_*` functions are pure (text in, values out), never panic, and skip a
//! row they cannot read rather than fail the whole file; [`Counters::read`] is the only
//! function here that reads files (below a [`Sysfs`] root), and [`Counters::delta`] subtracts
//! two readings (a counter that went backwards counts 0).

use super::Sysfs;

/// A table of per-CPU counters: `/proc/interrupts` or `/proc/softirqs`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PerCpuTable {
    /// The CPU of each column (`CPU0 CPU1 ...` of the header line; offline CPUs have none).
    pub cpus: Vec<u32>,
    /// The rows, in file order.
    pub rows: Vec<CounterRow>,
}

/// One row of a [`PerCpuTable`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterRow {
    /// The key before the colon: an IRQ number (`36`), or a name (`LOC`, `TIMER`).
    pub key: String,
    /// One count per column of [`PerCpuTable::cpus`] (missing ones 0: `ERR`, `MIS` have one).
    pub counts: Vec<u64>,
    /// The text after the counts, whitespace runs made one space: for a numbered IRQ the
    /// chip, hardware IRQ and trigger and the handlers' names (`PCI-MSIX-0000:00:02.0 1-edge
    /// virtio1-req.0`), for the others what it is (`Local timer interrupts`); empty for
    /// softirqs.
    pub desc: String,
}

impl PerCpuTable {
    /// The count of row `key` on `cpu` (0 if either is absent).
    pub fn count(&self, key: &str, cpu: u32) -> u64 {
        let Some(col) = self.cpus.iter().position(|&c| c == cpu) else {
            return 0;
        };
        self.rows
            .iter()
            .find(|r| r.key == key)
            .and_then(|r| r.counts.get(col).copied())
            .unwrap_or(0)
    }

    /// `after - self`, row by row and CPU by CPU (rows matched by key; a row or CPU only in
    /// `after` counts from 0; a counter that went backwards counts 0). The rows and
    /// descriptions are `after`'s.
    pub fn delta(&self, after: &PerCpuTable) -> PerCpuTable {
        let rows = after
            .rows
            .iter()
            .map(|r| CounterRow {
                key: r.key.clone(),
                counts: after
                    .cpus
                    .iter()
                    .zip(&r.counts)
                    .map(|(&cpu, &n)| n.saturating_sub(self.count(&r.key, cpu)))
                    .collect(),
                desc: r.desc.clone(),
            })
            .collect();
        PerCpuTable {
            cpus: after.cpus.clone(),
            rows,
        }
    }
}

/// The CPU numbers of a `CPU0 CPU1 ...` header line.
fn header_cpus(line: &str) -> Vec<u32> {
    line.split_whitespace()
        .filter_map(|w| w.strip_prefix("CPU")?.parse().ok())
        .collect()
}

/// `/proc/interrupts` or `/proc/softirqs`: a header of CPUs, then `KEY: count... [desc]` rows.
/// A row's counts are the leading numeric words after the colon, at most one per CPU; the
/// rest is its description.
pub fn parse_per_cpu(text: &str) -> PerCpuTable {
    let mut lines = text.lines();
    let cpus = lines.next().map(header_cpus).unwrap_or_default();
    let mut rows = Vec::new();
    for line in lines {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim();
        if key.is_empty() || key.contains(char::is_whitespace) {
            continue;
        }
        let mut words = rest.split_whitespace().peekable();
        let mut counts = Vec::with_capacity(cpus.len());
        while counts.len() < cpus.len() {
            match words.peek().and_then(|w| w.parse::<u64>().ok()) {
                Some(n) => {
                    counts.push(n);
                    words.next();
                }
                None => break,
            }
        }
        counts.resize(cpus.len(), 0);
        rows.push(CounterRow {
            key: key.to_string(),
            counts,
            desc: words.collect::<Vec<_>>().join(" "),
        });
    }
    PerCpuTable { cpus, rows }
}

/// The `cpuN` rows of `/proc/stat`: `(cpu, steal ticks)`, where steal (the eighth number) is
/// time the hypervisor ran something else while this virtual CPU wanted to run, in
/// `USER_HZ` ticks (1/100 s). Rows without a steal field are left out.
pub fn parse_stat_steal(text: &str) -> Vec<(u32, u64)> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let cpu = w.next()?.strip_prefix("cpu")?.parse().ok()?;
            let steal = w.nth(7)?.parse().ok()?;
            Some((cpu, steal))
        })
        .collect()
}

/// A thread's context switches, from its `status` file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtxSwitches {
    /// `voluntary_ctxt_switches`: the thread blocked (a page fault on I/O, a lock, a sleep).
    pub voluntary: u64,
    /// `nonvoluntary_ctxt_switches`: the scheduler took the CPU from it for another task.
    pub involuntary: u64,
}

impl CtxSwitches {
    /// `after - self` (0 where a counter went backwards).
    pub fn delta(&self, after: &CtxSwitches) -> CtxSwitches {
        CtxSwitches {
            voluntary: after.voluntary.saturating_sub(self.voluntary),
            involuntary: after.involuntary.saturating_sub(self.involuntary),
        }
    }
}

/// The two context-switch counters of a `/proc/PID/task/TID/status` text; `None` if either
/// is missing.
pub fn parse_ctxt_switches(status: &str) -> Option<CtxSwitches> {
    let field = |k: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(k)?.trim().parse::<u64>().ok())
    };
    Some(CtxSwitches {
        voluntary: field("voluntary_ctxt_switches:")?,
        involuntary: field("nonvoluntary_ctxt_switches:")?,
    })
}

/// The IRQ numbers of RDMA device `dev` (the entries of its PCI function's `msi_irqs`
/// directory), ascending; an error saying why when there are none to find.
pub fn device_irqs(sys: &Sysfs, dev: &str) -> Result<Vec<u32>, String> {
    let rel = format!("sys/class/infiniband/{dev}/device/msi_irqs");
    let dir = sys.path(&rel);
    let rd = std::fs::read_dir(&dir).map_err(|e| {
        if sys.exists(&format!("sys/class/infiniband/{dev}")) {
            format!("/{rel}: {e} ({dev} has no MSI IRQs: a virtual device such as rxe)")
        } else {
            format!("/{rel}: {e} (no RDMA device '{dev}' in /sys/class/infiniband)")
        }
    })?;
    let mut irqs: Vec<u32> = rd
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    irqs.sort_unstable();
    if irqs.is_empty() {
        return Err(format!("/{rel} is empty"));
    }
    Ok(irqs)
}

/// One reading of the host's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// `/proc/interrupts` (empty if unreadable).
    pub interrupts: PerCpuTable,
    /// `/proc/softirqs` (empty if unreadable).
    pub softirqs: PerCpuTable,
    /// `/proc/stat`'s steal ticks per CPU (empty if unreadable).
    pub steal: Vec<(u32, u64)>,
}

impl Counters {
    /// Reads the three files below `sys`'s root.
    pub fn read(sys: &Sysfs) -> Counters {
        let table = |rel: &str| sys.read(rel).map(|t| parse_per_cpu(&t)).unwrap_or_default();
        Counters {
            interrupts: table("proc/interrupts"),
            softirqs: table("proc/softirqs"),
            steal: sys
                .read("proc/stat")
                .map(|t| parse_stat_steal(&t))
                .unwrap_or_default(),
        }
    }

    /// `after - self`, counter by counter.
    pub fn delta(&self, after: &Counters) -> Counters {
        Counters {
            interrupts: self.interrupts.delta(&after.interrupts),
            softirqs: self.softirqs.delta(&after.softirqs),
            steal: after
                .steal
                .iter()
                .map(|&(cpu, n)| {
                    let was = self
                        .steal
                        .iter()
                        .find(|&&(c, _)| c == cpu)
                        .map_or(0, |&(_, w)| w);
                    (cpu, n.saturating_sub(was))
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERRUPTS: &str = "           CPU0       CPU1       \n  \
0:         41          0   IO-APIC   2-edge      timer\n \
24:          1          0  IO-APIC   5-edge      ACPI:Ged\n \
36:          0       7546 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\n \
98:        120          7  PCI-MSIX-0000:3b:00.0   0-edge      mlx5_comp0@pci:0000:3b:00.0\n\
NMI:          0          0   Non-maskable interrupts\n\
LOC:      39012      40122   Local timer interrupts\n\
ERR:          0\n\
MIS:          0\n";

    #[test]
    fn interrupts_rows_counts_and_names() {
        let t = parse_per_cpu(INTERRUPTS);
        assert_eq!(t.cpus, vec![0, 1]);
        let keys: Vec<&str> = t.rows.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["0", "24", "36", "98", "NMI", "LOC", "ERR", "MIS"]);
        assert_eq!(
            t.rows[2],
            CounterRow {
                key: "36".into(),
                counts: vec![0, 7546],
                desc: "PCI-MSIX-0000:00:02.0 1-edge virtio1-req.0".into(),
            }
        );
        assert_eq!(t.rows[1].desc, "IO-APIC 5-edge ACPI:Ged");
        assert_eq!(t.rows[5].desc, "Local timer interrupts");
        assert_eq!(t.rows[5].counts, vec![39012, 40122]);
        // One count for the whole machine, the other column 0.
        assert_eq!(t.rows[6].counts, vec![0, 0]);
        assert_eq!(t.rows[6].desc, "");
        assert_eq!(t.count("98", 1), 7);
        assert_eq!(t.count("98", 5), 0);
        assert_eq!(t.count("nope", 0), 0);
    }

    #[test]
    fn interrupts_with_offline_cpu_columns_and_junk() {
        // CPU1 offline: the header names the columns that exist.
        let t = parse_per_cpu(
            "           CPU0       CPU2\n  1:  5  6  IO-APIC 1-edge i8042\nnot a row\n\
             two words: x\n 77:  abc\n",
        );
        assert_eq!(t.cpus, vec![0, 2]);
        assert_eq!(t.count("1", 2), 6);
        assert_eq!(t.rows.len(), 2);
        assert_eq!(t.rows[1].key, "77");
        assert_eq!(t.rows[1].counts, vec![0, 0]);
        assert_eq!(t.rows[1].desc, "abc");
        assert_eq!(parse_per_cpu(""), PerCpuTable::default());
    }

    const SOFTIRQS: &str = "                    CPU0       CPU1       \n          \
HI:          0          0\n       \
TIMER:       5421       5821\n      \
NET_RX:        167        231\n       \
SCHED:      11042       9945\n         \
RCU:      14106      14012\n";

    #[test]
    fn softirqs_and_their_delta() {
        let a = parse_per_cpu(SOFTIRQS);
        assert_eq!(a.cpus, vec![0, 1]);
        assert_eq!(a.rows.len(), 5);
        assert_eq!(a.rows[1].key, "TIMER");
        assert_eq!(a.rows[1].desc, "");
        let b = parse_per_cpu(&SOFTIRQS.replace("5421", "5500").replace("14012", "14000"));
        let d = a.delta(&b);
        assert_eq!(d.count("TIMER", 0), 79);
        assert_eq!(d.count("TIMER", 1), 0);
        // Went backwards (a counter reset): 0, not a wrapped huge number.
        assert_eq!(d.count("RCU", 1), 0);
    }

    #[test]
    fn stat_steal_per_cpu() {
        let stat = "cpu  100 0 50 9000 3 0 2 77 0 0\n\
                    cpu0 50 0 25 4500 1 0 1 30 0 0\n\
                    cpu1 50 0 25 4500 2 0 1 47 0 0\n\
                    cpu2 1 2 3\n\
                    intr 12345 0 0\nctxt 999\n";
        assert_eq!(parse_stat_steal(stat), vec![(0, 30), (1, 47)]);
    }

    #[test]
    fn status_context_switches() {
        let status = "Name:\trdma-direct\nState:\tR (running)\nTgid:\t4242\n\
                      Cpus_allowed_list:\t0-1\n\
                      voluntary_ctxt_switches:\t12\n\
                      nonvoluntary_ctxt_switches:\t345\n";
        let c = parse_ctxt_switches(status).unwrap();
        assert_eq!(
            c,
            CtxSwitches {
                voluntary: 12,
                involuntary: 345
            }
        );
        let later = CtxSwitches {
            voluntary: 12,
            involuntary: 400,
        };
        assert_eq!(
            c.delta(&later),
            CtxSwitches {
                voluntary: 0,
                involuntary: 55
            }
        );
        assert_eq!(
            parse_ctxt_switches("Name:\tx\nvoluntary_ctxt_switches:\t1\n"),
            None
        );
    }
}
