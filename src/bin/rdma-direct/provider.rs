//! `--provider auto|mlx5|verbs|sim` for every command that opens a device, and the one
//! diagnosis of a device that is not there.
//!
//! The rule ([`choose`], a pure function of what the device is):
//! - `auto` (the default): without `-d`, the software mlx5 device (`sim`); with `-d DEV`,
//!   the hand-rolled mlx5 provider when DEV is an mlx5 device (its kernel driver is
//!   `mlx5_core`, or libmlx5 claims it), the verbs provider (libibverbs' post/poll) for any
//!   other device (rxe, ...).
//! - `mlx5`: the mlx5 provider; refused on a device that is not mlx5.
//! - `verbs`: libibverbs on any device, mlx5 included: on a ConnectX NIC `--provider verbs`
//!   measures libmlx5's own `ibv_post_send`/`ibv_poll_cq`, `--provider mlx5` (or `auto`) this
//!   project's path, on the same NIC.
//! - `sim`: the software mlx5 device, which lives in this process; refused with `-d`.

use rdma_direct::providers::mlx5::Mlx5Device;
use rdma_direct::providers::sim::SimDevice;
use rdma_direct::providers::verbs::VerbsDevice;
use rdma_direct::providers::{Provider, ProviderKind};
use rdma_direct::verbs::Device;

/// The software device's name: `-d sim0` means the software device wherever `-d` is taken
/// (as no `-d` does).
pub const SIM_DEVICE: &str = "sim0";

/// `-d DEV` as the commands use it: `None` for [`SIM_DEVICE`] (the software device, which
/// is what no `-d` selects), the device otherwise.
pub fn device_arg(dev: Option<String>) -> Option<String> {
    dev.filter(|d| d != SIM_DEVICE)
}

/// Work generic over the provider, for [`open_and_run`].
pub trait Job {
    /// What the work returns.
    type Out;
    /// Do it on `p`.
    fn run<P: Provider>(&mut self, p: &mut P) -> rdma_direct::Result<Self::Out>
    where
        P::Qp: Send,
        P::Cq: Send;
}

/// Open the provider `kind` (on `dev`; the sim with its device thread when `sim_thread`)
/// and run `job` on it.
pub fn open_and_run<J: Job>(
    kind: ProviderKind,
    dev: Option<&str>,
    sim_thread: bool,
    job: &mut J,
) -> rdma_direct::Result<J::Out> {
    let need = || {
        dev.ok_or_else(|| rdma_direct::Error::InvalidArgument {
            context: "provider",
            detail: format!("the {kind} provider needs -d DEV"),
        })
    };
    match kind {
        ProviderKind::Sim => {
            let mut p = SimDevice::new();
            if sim_thread {
                // Device-thread mode: a thread plays the HCA, polling doorbells, as hardware
                // would; the mlx5 hot path runs against it unchanged.
                p.start_device_thread()?;
            }
            job.run(&mut p)
        }
        ProviderKind::Verbs => job.run(&mut VerbsDevice::open(need()?)?),
        ProviderKind::Mlx5 => job.run(&mut Mlx5Device::open(need()?)?),
    }
}

/// What `--provider` asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Decide from the device ([`choose`]).
    Auto,
    /// One provider, whatever the device.
    Force(ProviderKind),
}

impl Choice {
    /// Parse `auto`, `mlx5`, `verbs` or `sim`.
    pub fn parse(s: &str) -> Result<Choice, String> {
        Ok(match s {
            "auto" => Choice::Auto,
            "mlx5" => Choice::Force(ProviderKind::Mlx5),
            "verbs" => Choice::Force(ProviderKind::Verbs),
            "sim" => Choice::Force(ProviderKind::Sim),
            other => {
                return Err(format!(
                    "--provider: '{other}' is not auto, mlx5, verbs or sim"
                ))
            }
        })
    }
}

/// What decides the provider for a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceFacts {
    /// Device name (`mlx5_0`, `rxe0`).
    pub name: String,
    /// The kernel driver bound to the device's parent (`mlx5_core`; `None` for rxe, which has
    /// no PCI parent, or when sysfs does not say).
    pub kernel_driver: Option<String>,
    /// libmlx5 claims the device (`mlx5dv_is_supported`).
    pub libmlx5: bool,
}

impl DeviceFacts {
    /// True when the device is driven by mlx5.
    pub fn is_mlx5(&self) -> bool {
        self.libmlx5 || self.kernel_driver.as_deref() == Some("mlx5_core")
    }

    /// The facts of the device `name`, which must exist ([`find_device`]).
    pub fn read(name: &str) -> DeviceFacts {
        let kernel_driver =
            std::fs::read_link(format!("/sys/class/infiniband/{name}/device/driver"))
                .ok()
                .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()));
        let libmlx5 = rdma_direct::verbs::Context::open(name)
            .map(|c| c.is_mlx5())
            .unwrap_or(false);
        DeviceFacts {
            name: name.to_string(),
            kernel_driver,
            libmlx5,
        }
    }
}

/// The provider that runs: see the module doc. `Err` says why the combination is refused.
pub fn choose(choice: Choice, dev: Option<&DeviceFacts>) -> Result<ProviderKind, String> {
    match (choice, dev) {
        (Choice::Auto, None) | (Choice::Force(ProviderKind::Sim), None) => Ok(ProviderKind::Sim),
        (Choice::Auto, Some(d)) if d.is_mlx5() => Ok(ProviderKind::Mlx5),
        (Choice::Auto, Some(_)) => Ok(ProviderKind::Verbs),
        (Choice::Force(ProviderKind::Sim), Some(d)) => Err(format!(
            "--provider sim: the software mlx5 device lives in this process and is not '{}'; \
             drop -d {} (or choose --provider verbs/mlx5 for the device)",
            d.name, d.name
        )),
        (Choice::Force(k), None) => Err(format!(
            "--provider {k} needs a device: -d DEV (without -d only the software device, sim, \
             is there)"
        )),
        (Choice::Force(ProviderKind::Mlx5), Some(d)) if !d.is_mlx5() => Err(format!(
            "--provider mlx5: '{}' is not an mlx5 device (kernel driver {}): the hand-rolled \
             mlx5 provider needs ConnectX hardware; use --provider verbs (or auto)",
            d.name,
            d.kernel_driver.as_deref().unwrap_or("none")
        )),
        (Choice::Force(k), Some(_)) => Ok(k),
    }
}

/// Why `auto` picked what it picked, for headers (`verbs (auto: rxe0 is not an mlx5 device)`).
pub fn reason(choice: Choice, kind: ProviderKind, dev: Option<&DeviceFacts>) -> String {
    match (choice, dev) {
        (Choice::Force(_), _) => format!("{kind} (forced by --provider)"),
        (Choice::Auto, None) => format!("{kind} (auto: no -d or -d sim0, the software device)"),
        (Choice::Auto, Some(d)) if kind == ProviderKind::Mlx5 => {
            format!("{kind} (auto: {} is an mlx5 device)", d.name)
        }
        (Choice::Auto, Some(d)) => format!("{kind} (auto: {} is not an mlx5 device)", d.name),
    }
}

/// The provider a command runs on, and why (for its header): the device checked first (one
/// "no such device" diagnosis), then [`choose`] and [`reason`]. On failure, the message
/// (prefixed `rdma-direct CMD: `) is printed and the exit status returned: 1 for a missing
/// device, 2 for a provider the device cannot have.
pub fn select(cmd: &str, choice: Choice, dev: Option<&str>) -> Result<(ProviderKind, String), i32> {
    let facts = match dev {
        Some(d) => {
            if let Err(e) = find_device(d) {
                errln!("rdma-direct {cmd}: {e}");
                return Err(1);
            }
            Some(DeviceFacts::read(d))
        }
        None => None,
    };
    match choose(choice, facts.as_ref()) {
        Ok(kind) => Ok((kind, reason(choice, kind, facts.as_ref()))),
        Err(e) => {
            errln!("rdma-direct {cmd}: {e}");
            Err(2)
        }
    }
}

/// Two processes (server and client) on `dev` when `dev` is a device of tests/standin's
/// libibverbs: refused in one line before any exchange (`Err` the exit status, 1), as the
/// software device refuses a HOST. The stand-in's devices are the sim behind a libibverbs of
/// this process, so a peer process has its own and the two would wait on each other forever.
pub fn refuse_two_processes_on_standin(cmd: &str, dev: &str) -> Result<(), i32> {
    if !matches!(
        rdma_direct::providers::sim::standin::attach_if_standin(),
        Ok(true)
    ) {
        return Ok(());
    }
    errln!(
        "rdma-direct {cmd}: {dev} is a device of the stand-in libibverbs \
         (RDMA_DIRECT_LIBIBVERBS): it lives in this process, so no other process can reach it \
         and two processes would wait on each other forever; run both ends here with \
         --loopback, or unset RDMA_DIRECT_LIBIBVERBS for a real device"
    );
    Err(1)
}

/// Check that the RDMA device `name` exists. The one "no such device" diagnosis every
/// command prints (after its own `rdma-direct CMD: ` prefix).
pub fn find_device(name: &str) -> Result<(), String> {
    match Device::list() {
        Ok(list) => {
            let names: Vec<String> = list.into_iter().map(|d| d.name).collect();
            no_such_device(name, Ok(&names))
        }
        Err(e @ rdma_direct::Error::LibraryMissing { .. }) => {
            no_such_device(name, Err(e.to_string()))
        }
        Err(e) => no_such_device(
            name,
            Err(super::devices::no_device_reason().unwrap_or_else(|| e.to_string())),
        ),
    }
}

/// [`find_device`] over a device list (or the reason there is none).
pub fn no_such_device(name: &str, list: Result<&[String], String>) -> Result<(), String> {
    let why = match list {
        Ok(names) if names.iter().any(|n| n == name) => return Ok(()),
        Ok(names) if !names.is_empty() => format!("available: {}", names.join(", ")),
        Ok(_) => super::devices::no_device_reason()
            .unwrap_or_else(|| "libibverbs lists no device".into()),
        Err(e) => e,
    };
    Err(format!(
        "no RDMA device '{name}': {why} (without -d the software mlx5 device, sim0, runs)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(name: &str, driver: Option<&str>, libmlx5: bool) -> DeviceFacts {
        DeviceFacts {
            name: name.into(),
            kernel_driver: driver.map(String::from),
            libmlx5,
        }
    }

    #[test]
    fn auto_picks_mlx5_on_an_mlx5_device_verbs_elsewhere_sim_without_a_device() {
        let cx = dev("mlx5_0", Some("mlx5_core"), false);
        let cx_lib = dev("mlx5_1", None, true);
        let rxe = dev("rxe0", None, false);
        let other = dev("irdma0", Some("irdma"), false);
        assert_eq!(choose(Choice::Auto, Some(&cx)), Ok(ProviderKind::Mlx5));
        assert_eq!(choose(Choice::Auto, Some(&cx_lib)), Ok(ProviderKind::Mlx5));
        assert_eq!(choose(Choice::Auto, Some(&rxe)), Ok(ProviderKind::Verbs));
        assert_eq!(choose(Choice::Auto, Some(&other)), Ok(ProviderKind::Verbs));
        assert_eq!(choose(Choice::Auto, None), Ok(ProviderKind::Sim));
        assert_eq!(
            reason(Choice::Auto, ProviderKind::Verbs, Some(&rxe)),
            "verbs (auto: rxe0 is not an mlx5 device)"
        );
        assert_eq!(
            reason(Choice::Auto, ProviderKind::Mlx5, Some(&cx)),
            "mlx5 (auto: mlx5_0 is an mlx5 device)"
        );
    }

    #[test]
    fn forcing_verbs_on_mlx5_compares_libmlx5_with_our_path() {
        let cx = dev("mlx5_0", Some("mlx5_core"), true);
        let v = Choice::parse("verbs").unwrap();
        assert_eq!(choose(v, Some(&cx)), Ok(ProviderKind::Verbs));
        assert_eq!(
            choose(Choice::parse("mlx5").unwrap(), Some(&cx)),
            Ok(ProviderKind::Mlx5)
        );
        assert_eq!(
            reason(v, ProviderKind::Verbs, Some(&cx)),
            "verbs (forced by --provider)"
        );
    }

    #[test]
    fn impossible_combinations_are_refused_with_a_reason() {
        let rxe = dev("rxe0", None, false);
        let e = choose(Choice::parse("mlx5").unwrap(), Some(&rxe)).unwrap_err();
        assert!(
            e.contains("not an mlx5 device") && e.contains("verbs"),
            "{e}"
        );
        let e = choose(Choice::parse("sim").unwrap(), Some(&rxe)).unwrap_err();
        assert!(e.contains("drop -d"), "{e}");
        for k in ["mlx5", "verbs"] {
            let e = choose(Choice::parse(k).unwrap(), None).unwrap_err();
            assert!(e.contains("needs a device"), "{e}");
        }
        assert!(Choice::parse("rxe")
            .unwrap_err()
            .contains("auto, mlx5, verbs or sim"));
    }

    #[test]
    fn no_such_device_names_the_device_and_what_there_is() {
        let names = vec!["rxe0".to_string()];
        assert_eq!(no_such_device("rxe0", Ok(&names)), Ok(()));
        let e = no_such_device("nonexistent", Ok(&names)).unwrap_err();
        assert!(
            e.starts_with("no RDMA device 'nonexistent': available: rxe0"),
            "{e}"
        );
        let e = no_such_device("x", Err("libibverbs.so.1 not found".into())).unwrap_err();
        assert!(e.contains("libibverbs.so.1 not found"), "{e}");
    }
}
