//! `rdma-direct devices`: the RDMA devices libibverbs sees, like `ibv_devices`, then the
//! software mlx5 device (`sim0`), which is always there. Without an RDMA device a note on
//! stderr says why ([`rdma_direct::doctor::no_device::no_device_reason`], the one reason
//! every command gives).

use rdma_direct::control::Device;
pub use rdma_direct::doctor::no_device::why_no_device;
use rdma_direct::Error;

use super::provider::SIM_DEVICE;

const USAGE: &str = "usage: rdma-direct devices\n\nLists RDMA devices and their node GUIDs \
                     (like ibv_devices), then the software mlx5 device sim0.\n";

pub fn run(args: &[String]) -> i32 {
    if let Some(a) = args.first() {
        if a == "-h" || a == "--help" {
            out!("{USAGE}");
            return 0;
        }
        let what = if a.starts_with('-') {
            "unknown option"
        } else {
            "unexpected argument"
        };
        return crate::usage_error("devices", &format!("{what} '{a}'"));
    }
    let list = match Device::list() {
        Ok(l) => {
            if l.is_empty() {
                note_no_devices(None);
            }
            l
        }
        Err(e) => {
            note_no_devices(Some(&e));
            Vec::new()
        }
    };
    outln!("    {:<16}\t   node GUID", "device");
    outln!("    {:<16}\t----------------", "------");
    for d in &list {
        outln!("    {:<16}\t{:016x}", d.name, d.node_guid);
    }
    outln!("    {SIM_DEVICE:<16}\t(software mlx5 device in this process, not hardware)");
    0
}

/// Says plainly, on one line of stderr, that there is no RDMA device but the software one,
/// and why ([`why_no_device`]).
pub fn note_no_devices(err: Option<&Error>) {
    let why = why_no_device(err, "libibverbs lists no device");
    errln!("rdma-direct: no RDMA device but the software device {SIM_DEVICE}: {why}");
}

/// The device and port options `info` and `doctor` share: `-d DEV` (`--ib-dev DEV`,
/// `-dDEV`) and `-i PORT` (`--ib-port PORT`, 1 or more).
#[derive(Default)]
pub struct DevPort {
    /// `-d`: only this device.
    pub dev: Option<String>,
    /// `-i`: only this port.
    pub port: Option<u8>,
}

impl DevPort {
    /// Takes `a` (and its value from `rest`) when it is one of these options: `Ok(true)`;
    /// `Ok(false)` for any other argument.
    pub fn take(
        &mut self,
        a: &str,
        rest: &mut std::slice::Iter<'_, String>,
    ) -> Result<bool, String> {
        match a {
            "-d" | "--ib-dev" => {
                self.dev = Some(rest.next().ok_or("-d needs a device name")?.clone())
            }
            "-i" | "--ib-port" => {
                let p = rest.next().ok_or("-i needs a port number")?;
                let port = p.parse().ok().filter(|&p: &u8| p > 0);
                self.port = Some(port.ok_or(format!("bad port '{p}'"))?);
            }
            s if s.starts_with("-d") && s.len() > 2 => self.dev = Some(s[2..].to_string()),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The devices of `list` that `-d` names: all of them without `-d`, none when it names
    /// another.
    pub fn chosen<'a>(&self, list: &'a [Device]) -> Vec<&'a Device> {
        list.iter()
            .filter(|d| self.dev.as_ref().is_none_or(|n| *n == d.name))
            .collect()
    }
}
