//! `rocelab wire`: write sample RoCEv2 captures and decode pcap files.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use roce::wire::dissect::{decode_frame, Decoded};
use roce::wire::pcap::LINKTYPE_ETHERNET;
use roce::wire::{samples, PcapReader};

/// Arguments of `rocelab wire`.
#[derive(Debug, Args)]
pub struct WireArgs {
    #[command(subcommand)]
    command: WireCommand,
}

#[derive(Debug, Subcommand)]
enum WireCommand {
    /// Write a pcap with one packet of every RC, UC and UD opcode, a CNP,
    /// NAK and IPv6 variants, and PFC/PAUSE frames.
    Samples {
        /// The pcap file to write.
        #[arg(long)]
        out: PathBuf,
    },
    /// Print one line per frame of a pcap: RoCEv2 fields, lengths and the
    /// ICRC check, PFC and PAUSE frames.
    Decode {
        /// The pcap file to read (Ethernet link type).
        file: PathBuf,
    },
}

/// Run `rocelab wire`.
pub fn run(args: WireArgs) -> ExitCode {
    let result = match args.command {
        WireCommand::Samples { out } => write_samples(&out),
        WireCommand::Decode { file } => decode(&file),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("rocelab wire: {msg}");
            ExitCode::FAILURE
        }
    }
}

fn write_samples(out: &PathBuf) -> Result<(), String> {
    let file = File::create(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let n = samples::write_pcap(BufWriter::new(file))
        .map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    eprintln!("wrote {n} frames to {}", out.display());
    Ok(())
}

fn decode(path: &PathBuf) -> Result<(), String> {
    let name = path.display();
    let data = std::fs::read(path).map_err(|e| format!("cannot read {name}: {e}"))?;
    let reader = PcapReader::new(&data).map_err(|e| format!("{name}: {e}"))?;
    if reader.link_type() != LINKTYPE_ETHERNET {
        return Err(format!(
            "{name}: link type {} is not Ethernet (1); only Ethernet captures are decoded",
            reader.link_type()
        ));
    }
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let (mut frames, mut roce, mut bad_icrc, mut mac_control) = (0usize, 0usize, 0usize, 0usize);
    for (i, record) in reader.enumerate() {
        let record = record.map_err(|e| format!("{name}: {e}"))?;
        let decoded = decode_frame(record.data);
        frames += 1;
        match &decoded {
            Decoded::Roce { icrc, .. } => {
                roce += 1;
                bad_icrc += usize::from(icrc.is_err());
            }
            Decoded::MacControl(_) => mac_control += 1,
            _ => {}
        }
        let ps = record.timestamp.as_ps();
        let line = writeln!(
            out,
            "{:>5} {}.{:09} {decoded}",
            i + 1,
            ps / 1_000_000_000_000,
            (ps % 1_000_000_000_000) / 1_000
        );
        if line.is_err() {
            // The reader went away (e.g. `| head`): stop quietly.
            return Ok(());
        }
    }
    let _ = out.flush();
    eprintln!(
        "{frames} frames: {roce} RoCEv2 ({bad_icrc} with a bad ICRC), {mac_control} PFC/PAUSE"
    );
    Ok(())
}
