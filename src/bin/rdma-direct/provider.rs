//! `--provider auto|mlx5|verbs|sim` for every command that opens a device, and the one
//! diagnosis of a device that is not there.
//!
//! The rule itself is the library's ([`rdma_direct::providers::choice`]); this module parses
//! the flag, words a refusal in the CLI's flags, and explains the choice in headers.

use rdma_direct::control::Device;
use rdma_direct::providers::choice::{choose, device_name, Refusal};
pub use rdma_direct::providers::choice::{open_and_run, Choice, DeviceFacts, Job};
use rdma_direct::providers::ProviderKind;

pub use rdma_direct::providers::choice::SIM_DEVICE;

/// `-d DEV` as the commands use it: the library's [`device_name`] (`-d sim0` is the
/// software device, as no `-d` is).
pub fn device_arg(dev: Option<String>) -> Option<String> {
    device_name(dev.as_deref()).map(String::from)
}

/// Parse `--provider`'s value: `auto`, `mlx5`, `verbs` or `sim`.
pub fn parse_choice(s: &str) -> Result<Choice, String> {
    Choice::parse(s).ok_or_else(|| format!("--provider: '{s}' is not auto, mlx5, verbs or sim"))
}

/// A refusal of [`choose`] in the CLI's words (`--provider`, `-d`).
fn refusal(r: &Refusal) -> String {
    match r {
        Refusal::SimWithDevice { dev } => format!(
            "--provider sim: the software mlx5 device lives in this process and is not \
             '{dev}'; drop -d {dev} (or choose --provider verbs/mlx5 for the device)"
        ),
        Refusal::NeedsDevice(k) => format!(
            "--provider {k} needs a device: -d DEV (without -d only the software device, sim, \
             is there)"
        ),
        Refusal::NotMlx5 { dev, kernel_driver } => format!(
            "--provider mlx5: '{dev}' is not an mlx5 device (kernel driver {}): the hand-rolled \
             mlx5 provider needs ConnectX hardware; use --provider verbs (or auto)",
            kernel_driver.as_deref().unwrap_or("none")
        ),
    }
}

/// The library's [`choose`], with the [`reason`] for a header or the refusal in the CLI's
/// words.
pub fn explained(
    choice: Choice,
    dev: Option<&DeviceFacts>,
) -> Result<(ProviderKind, String), String> {
    match choose(choice, dev) {
        Ok(kind) => Ok((kind, reason(choice, kind, dev))),
        Err(r) => Err(refusal(&r)),
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
    match explained(choice, facts.as_ref()) {
        Ok(chosen) => Ok(chosen),
        Err(e) => {
            errln!("rdma-direct {cmd}: {e}");
            Err(2)
        }
    }
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
            Err(rdma_direct::doctor::no_device::no_device_reason().unwrap_or_else(|| e.to_string())),
        ),
    }
}

/// [`find_device`] over a device list (or the reason there is none).
pub fn no_such_device(name: &str, list: Result<&[String], String>) -> Result<(), String> {
    let why = match list {
        Ok(names) if names.iter().any(|n| n == name) => return Ok(()),
        Ok(names) if !names.is_empty() => format!("available: {}", names.join(", ")),
        Ok(_) => rdma_direct::doctor::no_device::no_device_reason()
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
    fn the_choice_is_explained_in_the_header() {
        let cx = dev("mlx5_0", Some("mlx5_core"), false);
        let rxe = dev("rxe0", None, false);
        assert_eq!(
            reason(Choice::Auto, ProviderKind::Verbs, Some(&rxe)),
            "verbs (auto: rxe0 is not an mlx5 device)"
        );
        assert_eq!(
            reason(Choice::Auto, ProviderKind::Mlx5, Some(&cx)),
            "mlx5 (auto: mlx5_0 is an mlx5 device)"
        );
        assert_eq!(
            reason(
                parse_choice("verbs").unwrap(),
                ProviderKind::Verbs,
                Some(&cx)
            ),
            "verbs (forced by --provider)"
        );
    }

    #[test]
    fn refusals_name_the_flags() {
        let rxe = dev("rxe0", None, false);
        let words = |c: &str, d: Option<&DeviceFacts>| {
            refusal(&choose(parse_choice(c).unwrap(), d).unwrap_err())
        };
        let e = words("mlx5", Some(&rxe));
        assert!(
            e.contains("not an mlx5 device") && e.contains("--provider verbs"),
            "{e}"
        );
        let e = words("sim", Some(&rxe));
        assert!(e.contains("drop -d rxe0"), "{e}");
        for k in ["mlx5", "verbs"] {
            let e = words(k, None);
            assert!(
                e.contains(&format!("--provider {k} needs a device: -d DEV")),
                "{e}"
            );
        }
        assert!(parse_choice("rxe")
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
