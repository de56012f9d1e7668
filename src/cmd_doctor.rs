//! `rocelab doctor FILE... [--interval 10s] [--json]`: findings from NIC
//! counter captures and inventory files.

use std::path::PathBuf;
use std::process::ExitCode;

use reports::doctor::{self, Options, Severity};
use roce::time::Duration;

/// Arguments of `doctor`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = PAIRING_HELP)]
pub struct Args {
    /// Captures: ethtool -S and rdma statistic dumps (two snapshots of one
    /// source make a delta), topo -m, ibv_devinfo/ibstat, mlnx_qos,
    /// show_gids, perftest, NCCL logs, a simulation's results.json. The
    /// format is detected. A directory stands for every file below it
    /// (files not recognised are listed as skipped); `-` reads standard
    /// input.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Time between consecutive snapshots of one port: `60` (seconds),
    /// `60s`, `1m`, `500ms`, `1.5s`. Applied where a port has two or more
    /// snapshots; where it cannot be (one snapshot, simulated counters)
    /// the report says so. See "How snapshots pair" in --help.
    #[arg(long, value_parser = parse_interval)]
    pub interval: Option<Duration>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Exit with status 1 when a finding reaches this severity
    /// (info, warning, error, critical).
    #[arg(long)]
    pub fail_on: Option<String>,
}

/// How snapshots pair, for `--help`.
const PAIRING_HELP: &str = "\
How snapshots pair:
  Counters are cumulative, so rates need a before and an after snapshot
  of the same port. Snapshots pair when they name the same host or port
  (`# host: NAME`, an `ethtool -S IFACE` command line, a switch table's
  port), or when their file names differ only by a snapshot word
  (`ethtool_before.txt`/`ethtool_after.txt`, `snap1.txt`/`snap2.txt`,
  `node7-t0.log`/`node7-t1.log`). Files of different folders never pair:
  per-host folders (`node1/ethtool_before.txt`, `node2/...`) stay per
  host, named by their folder. Two lone snapshots of one folder that name
  no common host pair by content when unambiguous: the same counters, and
  every counter of one at least that of the other. Several dumps in one
  file are snapshots in order. A lone snapshot is totals since boot: it
  gives no rate, and its totals are never ranked as a live fault.
  Switch dumps (SONiC `show pfc counters`, Cumulus/NVUE, switch SDK dumps,
  the simulator's `SWITCH-pN` dumps) are switch ports.";

/// `--interval`: a duration with a unit (`60s`, `500ms`), a bare number of
/// seconds (`60`), or minutes (`1m`, `2.5min`).
fn parse_interval(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let err = || format!("{s:?}: expected a time between snapshots such as 60, 60s, 1m or 500ms");
    if let Ok(d) = t.parse::<Duration>() {
        return Ok(d);
    }
    let (num, scale) = if let Some(n) = t.strip_suffix("min").or_else(|| t.strip_suffix('m')) {
        (n.trim(), 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n.trim(), 3600.0)
    } else {
        (t, 1.0)
    };
    let secs: f64 = num.parse().map_err(|_| err())?;
    if !secs.is_finite() || secs <= 0.0 || secs * scale > 1e7 {
        return Err(err());
    }
    let ps = (secs * scale * 1e12).round();
    Ok(Duration::from_ps(ps as u64))
}

/// Run the subcommand.
pub fn run(args: Args) -> ExitCode {
    let fail_on = match args.fail_on.as_deref() {
        None => None,
        Some("info") => Some(Severity::Info),
        Some("warning") => Some(Severity::Warning),
        Some("error") => Some(Severity::Error),
        Some("critical") => Some(Severity::Critical),
        Some(other) => {
            eprintln!(
                "rocelab doctor: --fail-on {other:?}: expected info, warning, error or critical"
            );
            return ExitCode::from(2);
        }
    };
    let loaded = doctor::load(&args.files, &mut std::io::stdin().lock());
    if loaded.inputs.is_empty() {
        for k in &loaded.skipped {
            eprintln!("rocelab doctor: skipped {}: {}", k.path, k.reason);
        }
        eprintln!("rocelab doctor: nothing to diagnose: no input was recognised");
        return ExitCode::from(2);
    }
    let mut diagnosis = doctor::diagnose(
        &loaded.inputs,
        &Options {
            interval: args.interval,
        },
    );
    diagnosis.skipped = loaded.skipped;
    if args.json {
        match serde_json::to_string_pretty(&diagnosis) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("rocelab doctor: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        print!("{}", diagnosis.render_text());
        if let Some(note) = perftest_only_note(&loaded.inputs) {
            print!("{note}");
        }
    }
    match fail_on {
        Some(level) if !diagnosis.findings.is_empty() && diagnosis.worst() >= level => {
            ExitCode::FAILURE
        }
        _ => ExitCode::SUCCESS,
    }
}

/// When every input is perftest results without a counter block (its
/// text output, or an `--out_json` report of perftest's own), the
/// doctor has performance numbers but nothing to diagnose them with: say
/// so, and what would help, rather than leave a bare "No findings".
fn perftest_only_note(inputs: &[doctor::Input]) -> Option<String> {
    use reports::realnic::Parsed;
    let mut rows = 0;
    for i in inputs {
        let Parsed::Perftest(p) = &i.parsed else {
            return None;
        };
        if p.runs.iter().any(|r| r.counters.is_some()) {
            return None;
        }
        rows += p
            .runs
            .iter()
            .map(|r| r.bw.len() + r.lat.len() + r.lat_duration.len())
            .sum::<usize>();
    }
    (!inputs.is_empty()).then(|| {
        format!(
            "\nNot enough data: the input holds perftest results ({rows} result row(s)) but no NIC counters, \
             so nothing says why a run was fast or slow. Add `ethtool -S IFACE` or `rdma statistic show` \
             snapshots taken before and after the run, or run `rocelab perftest`, whose output and \
             --out_json report carry the run's counter delta.\n"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::parse_interval;
    use roce::time::Duration;

    #[test]
    fn intervals_take_seconds_minutes_and_units() {
        for (text, secs) in [
            ("60", 60),
            ("60s", 60),
            ("1m", 60),
            ("2min", 120),
            ("1h", 3600),
        ] {
            assert_eq!(
                parse_interval(text),
                Ok(Duration::from_secs(secs)),
                "{text}"
            );
        }
        assert_eq!(parse_interval("500ms"), Ok(Duration::from_ms(500)));
        assert_eq!(parse_interval("1.5"), Ok(Duration::from_ms(1500)));
        for bad in ["", "x", "-5", "0", "1e30", "nan"] {
            assert!(parse_interval(bad).is_err(), "{bad}");
        }
    }
}
