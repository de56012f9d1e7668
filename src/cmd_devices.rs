//! `rocelab devices`: the devices the verbs API can open, as `ibv_devices`
//! lists them: emulated UDP devices (one per IPv4 interface) and real RDMA
//! devices through libibverbs.

use std::process::ExitCode;

use clap::Args;
use verbs_emu::backend::udp::UdpProvider;
use verbs_emu::backend::{ibverbs, Provider};

/// Options of `rocelab devices`.
#[derive(Debug, Args)]
pub struct DevicesArgs {
    /// Also say where each emulated device binds and why real devices are
    /// missing.
    #[arg(short = 'v', long)]
    verbose: bool,
}

/// Run it.
pub fn run(a: DevicesArgs) -> ExitCode {
    let mut rows: Vec<(String, u64, String)> = Vec::new();
    match UdpProvider::default().devices() {
        Ok(d) => rows.extend(d.into_iter().map(|e| (e.name, e.node_guid, e.detail))),
        Err(e) => eprintln!("emulated devices: {e}"),
    }
    let real = ibverbs::list_devices();
    if let Ok(d) = &real {
        rows.extend(
            d.iter()
                .map(|i| (i.name.clone(), i.node_guid, "libibverbs".into())),
        );
    }
    print!(
        "{}",
        ibverbs::device_table(rows.iter().map(|(n, g, _)| (n.as_str(), *g)))
    );
    if a.verbose {
        for (n, _, d) in &rows {
            println!("    {n:<16}\t{d}");
        }
        if let Err(e) = real {
            println!("    real devices: {e}");
        }
    }
    ExitCode::SUCCESS
}
