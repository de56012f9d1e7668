//! `rocelab devices`: every RDMA device rocelab can open, emulated and
//! real, in `ibv_devices`' layout (columns "device" and "node GUID"), so
//! the same eyes and parsers read both. `--long` adds the backend and a
//! detail column. Backends that are unavailable here (no libibverbs, no
//! RDMA device) are noted on stderr; that is not an error.

use std::process::ExitCode;

use verbs_emu::backend::ibverbs::{device_table, device_table_long, IbverbsProvider};
use verbs_emu::backend::udp::UdpProvider;
use verbs_emu::backend::{BackendKind, Provider};
use verbs_emu::verbs::device_list;

/// Arguments of `rocelab devices`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Also print each device's backend and detail.
    #[arg(short, long)]
    long: bool,
}

/// Lists the devices of every provider.
pub fn run(args: &Args) -> ExitCode {
    let udp = UdpProvider::default();
    let ibverbs = IbverbsProvider::new();
    let providers: [&dyn Provider; 2] = [&udp, &ibverbs];
    let (devices, errors) = device_list(&providers);
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
