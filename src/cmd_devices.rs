//! `rocelab devices`: every RDMA device rocelab can open, emulated and
//! real, in `ibv_devices`' layout (columns "device" and "node GUID"), so
//! the same eyes and parsers read both. `--long` adds the backend and a
//! detail column. Backends that are unavailable here (no libibverbs, no
//! RDMA device) are noted on stderr; that is not an error.
//!
//! `--counters` prints each device's counters instead, like `ethtool -S`:
//! per device a `# host: DEVICE` line, `NIC statistics:`, then one
//! `     name: value` line per counter (mlx5's names, the simulator's), so
//! that `rocelab parse` and `rocelab doctor` read it. It opens every
//! device and reads what it has counted since it was opened: a real
//! device's port counters count since boot (`hw_counters` in sysfs); an
//! emulated device lives in the process that opened it, so this process
//! reads a fresh one (all zeros), and a device another process holds
//! (its address and port in use) is noted on stderr. The counters of an
//! emulated run are the end-of-run block `rocelab perftest` prints.

use std::process::ExitCode;

use verbs_emu::backend::counters::ethtool_text;
use verbs_emu::backend::ibverbs::{device_table, device_table_long, IbverbsProvider};
use verbs_emu::backend::udp::UdpProvider;
use verbs_emu::backend::{BackendKind, DeviceEntry, Provider};
use verbs_emu::verbs::device_list;

/// Arguments of `rocelab devices`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Also print each device's backend and detail.
    #[arg(short, long)]
    long: bool,
    /// Print each device's counters in `ethtool -S` layout instead of the
    /// table.
    #[arg(long)]
    counters: bool,
}

/// Lists the devices of every provider.
pub fn run(args: &Args) -> ExitCode {
    let udp = UdpProvider::default();
    let ibverbs = IbverbsProvider::new();
    let providers: [&dyn Provider; 2] = [&udp, &ibverbs];
    let (devices, errors) = device_list(&providers);
    if args.counters {
        for (kind, error) in &errors {
            eprintln!("note: {kind} devices unavailable: {error}");
        }
        print_counters(&providers, &devices);
        return ExitCode::SUCCESS;
    }
    let table = if args.long {
        device_table_long(devices.iter().map(|device| {
            (
                device.name.as_str(),
                device.node_guid,
                device.kind.as_str(),
                device.detail.as_str(),
            )
        }))
    } else {
        device_table(
            devices
                .iter()
                .map(|device| (device.name.as_str(), device.node_guid)),
        )
    };
    print!("{table}");
    for (kind, error) in &errors {
        eprintln!("note: {kind} devices unavailable: {error}");
    }
    let ibverbs_failed = errors.iter().any(|(kind, _)| *kind == BackendKind::Ibverbs);
    let has_real = devices
        .iter()
        .any(|device| device.kind == BackendKind::Ibverbs);
    if !ibverbs_failed && !has_real {
        eprintln!("note: ibverbs: no RDMA devices");
    }
    ExitCode::SUCCESS
}

/// Open each device and print its counters (`ethtool -S` layout, one
/// `# host:` line before each dump); a device that cannot be opened or
/// read is a note on stderr.
fn print_counters(providers: &[&dyn Provider], devices: &[DeviceEntry]) {
    for device in devices {
        let Some(provider) = providers.iter().find(|p| p.kind() == device.kind) else {
            continue;
        };
        let counters = provider.open(device).and_then(|backend| backend.counters());
        match counters {
            Ok(c) => print!("# host: {}\n{}", device.name, ethtool_text(&c)),
            Err(e) => eprintln!(
                "note: {}: no counters: {e}{}",
                device.name,
                if device.kind == BackendKind::Udp {
                    " (another process may hold the device: its counters are that process's)"
                } else {
                    ""
                }
            ),
        }
    }
}
