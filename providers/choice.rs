//! Which provider drives a device: the one rule every tool and example follows, and the
//! opening of the chosen provider.
//!
//! Contract:
//! - [`choose`] is a pure function of what was asked ([`Choice`]) and what the device is
//!   ([`DeviceFacts`]); it opens nothing. The rule:
//!   - [`Choice::Auto`] without a device: the software mlx5 device (`sim`); with a device,
//!     the hand-rolled mlx5 provider when the device is an mlx5 device (its kernel driver is
//!     `mlx5_core`, or libmlx5 claims it), the verbs provider (libibverbs' post/poll) for any
//!     other device (rxe, ...).
//!   - [`Choice::Force`]`(Mlx5)`: the mlx5 provider; refused on a device that is not mlx5.
//!   - [`Choice::Force`]`(Verbs)`: libibverbs on any device, mlx5 included (on a ConnectX NIC
//!     this measures libmlx5's own post/poll, and `Mlx5` this crate's path, on the same NIC).
//!   - [`Choice::Force`]`(Sim)`: the software mlx5 device, which lives in this process;
//!     refused with a device name.
//!   - A refusal is a [`Refusal`], which says why and what to ask for instead.
//! - [`DeviceFacts::read`] reads the facts from sysfs and libibverbs (a device that does not
//!   exist reads as "not mlx5": opening it then fails with the provider's own error).
//! - [`open_and_run`] opens the provider of a [`ProviderKind`] and runs a [`Job`] (work
//!   generic over the provider) on it; [`run_chosen`] is [`choose`] then [`open_and_run`],
//!   the whole of it for a program that takes an optional device name.
//! - The software device's name, [`SIM_DEVICE`] (`sim0`), names no libibverbs device: it
//!   means what no device name means ([`device_name`]), wherever a name is taken.
//! - Nothing here is on the data path; it allocates and makes system calls freely.

use std::fmt;

use crate::mlx5::Mlx5Device;
#[cfg(feature = "sim")]
use crate::sim::SimDevice;
use crate::verbs::VerbsDevice;
use crate::{Error, Provider, ProviderKind, Result};

/// The software device's name: naming it is the same as naming no device.
pub const SIM_DEVICE: &str = "sim0";

/// A device name as a program takes it: `None` for no name and for [`SIM_DEVICE`] (the
/// software device, which is what no name selects), the name otherwise.
pub fn device_name(dev: Option<&str>) -> Option<&str> {
    dev.filter(|d| *d != SIM_DEVICE)
}

/// What was asked for: a provider, or the rule's choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Decide from the device ([`choose`]).
    Auto,
    /// One provider, whatever the device.
    Force(ProviderKind),
}

impl Choice {
    /// Parse `auto`, `mlx5`, `verbs` or `sim`; `None` for anything else.
    pub fn parse(s: &str) -> Option<Choice> {
        Some(match s {
            "auto" => Choice::Auto,
            "mlx5" => Choice::Force(ProviderKind::Mlx5),
            "verbs" => Choice::Force(ProviderKind::Verbs),
            "sim" => Choice::Force(ProviderKind::Sim),
            _ => return None,
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

    /// The facts of the device `name`, from sysfs and libibverbs.
    pub fn read(name: &str) -> DeviceFacts {
        let kernel_driver =
            std::fs::read_link(format!("/sys/class/infiniband/{name}/device/driver"))
                .ok()
                .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()));
        let libmlx5 = rdma_direct_core::control::Context::open(name)
            .map(|c| c.is_mlx5())
            .unwrap_or(false);
        DeviceFacts {
            name: name.to_string(),
            kernel_driver,
            libmlx5,
        }
    }
}

/// Why [`choose`] refuses a combination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The software device was asked for together with the device `dev`.
    SimWithDevice {
        /// The device named.
        dev: String,
    },
    /// A hardware provider (mlx5 or verbs) was asked for without a device.
    NeedsDevice(ProviderKind),
    /// The mlx5 provider was asked for on a device that is not mlx5.
    NotMlx5 {
        /// The device named.
        dev: String,
        /// Its kernel driver, if sysfs names one.
        kernel_driver: Option<String>,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::SimWithDevice { dev } => write!(
                f,
                "the sim provider: the software mlx5 device lives in this process and is not \
                 '{dev}'; name no device (or choose the verbs or mlx5 provider for '{dev}')"
            ),
            Refusal::NeedsDevice(k) => write!(
                f,
                "the {k} provider needs a device name (without one only the software device, \
                 sim, is there)"
            ),
            Refusal::NotMlx5 { dev, kernel_driver } => write!(
                f,
                "the mlx5 provider: '{dev}' is not an mlx5 device (kernel driver {}): the \
                 hand-rolled mlx5 provider needs ConnectX hardware; choose the verbs provider \
                 (or auto)",
                kernel_driver.as_deref().unwrap_or("none")
            ),
        }
    }
}

impl From<Refusal> for Error {
    fn from(r: Refusal) -> Error {
        Error::InvalidArgument {
            context: "provider choice",
            detail: r.to_string(),
        }
    }
}

/// The provider that runs for `choice` on `dev` (`None`: no device named): see the module
/// doc.
pub fn choose(
    choice: Choice,
    dev: Option<&DeviceFacts>,
) -> std::result::Result<ProviderKind, Refusal> {
    match (choice, dev) {
        (Choice::Auto, None) | (Choice::Force(ProviderKind::Sim), None) => Ok(ProviderKind::Sim),
        (Choice::Auto, Some(d)) if d.is_mlx5() => Ok(ProviderKind::Mlx5),
        (Choice::Auto, Some(_)) => Ok(ProviderKind::Verbs),
        (Choice::Force(ProviderKind::Sim), Some(d)) => Err(Refusal::SimWithDevice {
            dev: d.name.clone(),
        }),
        (Choice::Force(k), None) => Err(Refusal::NeedsDevice(k)),
        (Choice::Force(ProviderKind::Mlx5), Some(d)) if !d.is_mlx5() => Err(Refusal::NotMlx5 {
            dev: d.name.clone(),
            kernel_driver: d.kernel_driver.clone(),
        }),
        (Choice::Force(k), Some(_)) => Ok(k),
    }
}

/// Work generic over the provider, for [`open_and_run`].
pub trait Job {
    /// What the work returns.
    type Out;
    /// Do it on `p`.
    fn run<P: Provider>(&mut self, p: &mut P) -> Result<Self::Out>
    where
        P::Qp: Send,
        P::Cq: Send;
}

/// Open the provider `kind` (on `dev`; the sim with its device thread when `sim_thread`)
/// and run `job` on it. The mlx5 and verbs providers need `dev`; the sim takes none (and
/// needs the `sim` feature).
pub fn open_and_run<J: Job>(
    kind: ProviderKind,
    dev: Option<&str>,
    sim_thread: bool,
    job: &mut J,
) -> Result<J::Out> {
    let need = || dev.ok_or_else(|| Error::from(Refusal::NeedsDevice(kind)));
    match kind {
        #[cfg(feature = "sim")]
        ProviderKind::Sim => {
            let mut p = SimDevice::new();
            if sim_thread {
                // Device-thread mode: a thread plays the HCA, polling doorbells, as hardware
                // would; the mlx5 hot path runs against it unchanged.
                p.start_device_thread()?;
            }
            job.run(&mut p)
        }
        #[cfg(not(feature = "sim"))]
        ProviderKind::Sim => {
            let _ = sim_thread;
            Err(Error::Unsupported {
                what: "the software mlx5 device (this build has no `sim` feature)".into(),
            })
        }
        ProviderKind::Verbs => job.run(&mut VerbsDevice::open(need()?)?),
        ProviderKind::Mlx5 => job.run(&mut Mlx5Device::open(need()?)?),
    }
}

/// [`choose`] for `choice` on the device `dev` (its facts read with [`DeviceFacts::read`];
/// [`SIM_DEVICE`] is the software device, as no name is), then [`open_and_run`] without
/// the sim's device thread. A refusal is an [`Error::InvalidArgument`] carrying the
/// [`Refusal`]'s text.
pub fn run_chosen<J: Job>(choice: Choice, dev: Option<&str>, job: &mut J) -> Result<J::Out> {
    let dev = device_name(dev);
    let facts = dev.map(DeviceFacts::read);
    let kind = choose(choice, facts.as_ref())?;
    open_and_run(kind, dev, false, job)
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
    fn sim0_names_no_device() {
        assert_eq!(device_name(Some(SIM_DEVICE)), None);
        assert_eq!(device_name(None), None);
        assert_eq!(device_name(Some("mlx5_0")), Some("mlx5_0"));
        assert_eq!(device_name(Some("sim1")), Some("sim1"));
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
    }

    #[test]
    fn forcing_a_provider_wins_where_the_device_can_have_it() {
        let cx = dev("mlx5_0", Some("mlx5_core"), true);
        let rxe = dev("rxe0", None, false);
        let force = |s| Choice::parse(s).unwrap();
        // verbs on mlx5: libmlx5's own path on the same NIC.
        assert_eq!(choose(force("verbs"), Some(&cx)), Ok(ProviderKind::Verbs));
        assert_eq!(choose(force("verbs"), Some(&rxe)), Ok(ProviderKind::Verbs));
        assert_eq!(choose(force("mlx5"), Some(&cx)), Ok(ProviderKind::Mlx5));
        assert_eq!(choose(force("sim"), None), Ok(ProviderKind::Sim));
        assert_eq!(Choice::parse("auto"), Some(Choice::Auto));
        assert_eq!(Choice::parse("rxe"), None);
    }

    #[test]
    fn impossible_combinations_are_refused_with_the_reason() {
        let rxe = dev("rxe0", Some("irdma"), false);
        let force = |s| Choice::parse(s).unwrap();
        assert_eq!(
            choose(force("mlx5"), Some(&rxe)),
            Err(Refusal::NotMlx5 {
                dev: "rxe0".into(),
                kernel_driver: Some("irdma".into())
            })
        );
        assert_eq!(
            choose(force("sim"), Some(&rxe)),
            Err(Refusal::SimWithDevice { dev: "rxe0".into() })
        );
        for k in [ProviderKind::Mlx5, ProviderKind::Verbs] {
            assert_eq!(choose(Choice::Force(k), None), Err(Refusal::NeedsDevice(k)));
        }
        let e = Error::from(Refusal::NotMlx5 {
            dev: "rxe0".into(),
            kernel_driver: None,
        })
        .to_string();
        assert!(
            e.contains("'rxe0' is not an mlx5 device (kernel driver none)")
                && e.contains("choose the verbs provider"),
            "{e}"
        );
    }

    /// A job that reports which provider it ran on.
    struct Kind;
    impl Job for Kind {
        type Out = ProviderKind;
        fn run<P: Provider>(&mut self, p: &mut P) -> Result<ProviderKind>
        where
            P::Qp: Send,
            P::Cq: Send,
        {
            Ok(p.kind())
        }
    }

    #[cfg(feature = "sim")]
    #[test]
    fn run_chosen_opens_the_chosen_provider_or_returns_the_refusal() {
        assert_eq!(
            run_chosen(Choice::Auto, None, &mut Kind),
            Ok(ProviderKind::Sim)
        );
        let e = run_chosen(Choice::Force(ProviderKind::Verbs), None, &mut Kind).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument { context: "provider choice", detail }
                if detail.contains("the verbs provider needs a device name")),
            "{e}"
        );
    }
}
