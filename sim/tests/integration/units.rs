//! Times and rates in the files users write carry their unit: a bare
//! number (`duration = 20`) is refused with the file, the line, the key
//! and the units the key takes, never read as picoseconds or bits per
//! second. A bare `0` stays (zero is zero in every unit); sizes keep bare
//! numbers as bytes.

use std::path::{Path, PathBuf};

use roce::time::Duration;
use sim::scenario::{self, check_file, Overrides};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rocelab-units-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(repo().join("topologies/star-4.toml"), dir.join("star.toml")).unwrap();
    dir
}

const BASE: &str = "topology = \"star.toml\"\n";
const INCAST: &str = "[[workload]]\nkind = \"incast\"\nreceiver = \"h0\"\nsize = \"1MB\"\n";
const TIME_UNITS: &str = "ps, ns, us, ms or s";
const RATE_UNITS: &str = "bps, Kbps, Mbps, Gbps or Tbps";

/// `(text after BASE, dotted key, is a time (else a rate), line of the key)`:
/// every key of a scenario that holds a time or a rate.
fn cases() -> Vec<(String, &'static str, bool, usize)> {
    let w = |extra: &str| format!("{INCAST}{extra}");
    vec![
        ("duration = 20\n".into(), "duration", true, 2),
        (
            "[fabric.pfc]\nrefresh = 100\n".into(),
            "fabric.pfc.refresh",
            true,
            3,
        ),
        (
            "[fabric.pfc]\nresponse_time = 3\n".into(),
            "fabric.pfc.response_time",
            true,
            3,
        ),
        (
            "[fabric.pfc.watchdog]\ndetection_time = 1\n".into(),
            "fabric.pfc.watchdog.detection_time",
            true,
            3,
        ),
        (
            "[fabric.pfc.watchdog]\nrestoration_time = 1\n".into(),
            "fabric.pfc.watchdog.restoration_time",
            true,
            3,
        ),
        (
            "[fabric.pfc.watchdog]\npoll_interval = 500\n".into(),
            "fabric.pfc.watchdog.poll_interval",
            true,
            3,
        ),
        (
            "[fabric.pfc.deadlock]\ncheck_interval = 100\n".into(),
            "fabric.pfc.deadlock.check_interval",
            true,
            3,
        ),
        (
            "[nic]\nrx_drain_rate = 25\n".into(),
            "nic.rx_drain_rate",
            false,
            3,
        ),
        (
            "[nic.pause_storm]\ncritical = 100\n".into(),
            "nic.pause_storm.critical",
            true,
            3,
        ),
        (
            "[nic.pause_storm]\nminor = 80\n".into(),
            "nic.pause_storm.minor",
            true,
            3,
        ),
        (
            "[nic.cc.dcqcn]\nalpha_update_interval = 55\n".into(),
            "nic.cc.dcqcn.alpha_update_interval",
            true,
            3,
        ),
        (
            "[nic.cc.dcqcn]\nrate_decrease_interval = 4\n".into(),
            "nic.cc.dcqcn.rate_decrease_interval",
            true,
            3,
        ),
        (
            "[nic.cc.dcqcn]\nrate_increase_timer = 300\n".into(),
            "nic.cc.dcqcn.rate_increase_timer",
            true,
            3,
        ),
        (
            "[nic.cc.dcqcn]\nrate_ai = 40\n".into(),
            "nic.cc.dcqcn.rate_ai",
            false,
            3,
        ),
        (
            "[nic.cc.dcqcn]\nrate_hai = 400\n".into(),
            "nic.cc.dcqcn.rate_hai",
            false,
            3,
        ),
        (
            "[nic.cc.dcqcn]\nmin_rate = 1\n".into(),
            "nic.cc.dcqcn.min_rate",
            false,
            3,
        ),
        (
            "[nic.cc.dcqcn]\nmin_time_between_cnps = 4\n".into(),
            "nic.cc.dcqcn.min_time_between_cnps",
            true,
            3,
        ),
        (
            "[record]\ninterval = 10\n".into(),
            "record.interval",
            true,
            3,
        ),
        (
            "[record]\nflow_rate_interval = 10\n".into(),
            "record.flow_rate_interval",
            true,
            3,
        ),
        // A rate written as a string without a unit is a bare number too.
        (
            "[nic]\nrx_drain_rate = \"25\"\n".into(),
            "nic.rx_drain_rate",
            false,
            3,
        ),
        (w("start = 100\n"), "workload[0].start", true, 6),
        (
            w("cc = { algorithm = \"dcqcn\", dcqcn = { rate_ai = 5 } }\n"),
            "workload[0].cc.dcqcn.rate_ai",
            false,
            6,
        ),
        (
            "[[workload]]\nkind = \"poisson\"\ncdf = \"websearch\"\nload = 0.5\nwindow = 1\n"
                .into(),
            "workload[0].window",
            true,
            6,
        ),
        (
            "[[faults]]\nkind = \"slow-receiver\"\nnode = \"h0\"\nrate = 25\n".into(),
            "faults[0].rate",
            false,
            5,
        ),
        (
            "[[faults]]\nfrom = \"h0\"\nto = \"sw0\"\nloss = 0.1\nstart = 50\n".into(),
            "faults[0].start",
            true,
            6,
        ),
        (
            "[[faults]]\nfrom = \"h0\"\nto = \"sw0\"\nloss = 0.1\nend = 50\n".into(),
            "faults[0].end",
            true,
            6,
        ),
        (
            "[[faults]]\nkind = \"link-down\"\nfrom = \"h0\"\nto = \"sw0\"\nconvergence = 50\n"
                .into(),
            "faults[0].convergence",
            true,
            6,
        ),
        (
            "[[faults]]\nkind = \"link-flap\"\nfrom = \"h0\"\nto = \"sw0\"\nperiod = 50\n".into(),
            "faults[0].period",
            true,
            6,
        ),
        (
            "[[faults]]\nkind = \"link-flap\"\nfrom = \"h0\"\nto = \"sw0\"\ndown_for = 50\n".into(),
            "faults[0].down_for",
            true,
            6,
        ),
        (
            "[[override]]\nnodes = \"sw0\"\nstart = 100\n".into(),
            "override[0].start",
            true,
            4,
        ),
        (
            "[[override]]\nnodes = \"sw0\"\nend = 100\n".into(),
            "override[0].end",
            true,
            4,
        ),
        (
            "[[override]]\nnodes = \"sw0\"\nfabric = { pfc = { response_time = 3 } }\n".into(),
            "override[0].fabric.pfc.response_time",
            true,
            4,
        ),
        (
            "[[override]]\nnodes = \"h0\"\nnic = { rx_drain_rate = 25 }\n".into(),
            "override[0].nic.rx_drain_rate",
            false,
            4,
        ),
    ]
}

#[test]
fn bare_numbers_for_times_and_rates_are_refused_naming_file_line_key_and_units() {
    let dir = scratch("bare");
    for (i, (tail, key, time, line)) in cases().into_iter().enumerate() {
        let text = if tail.contains("[[workload]]") {
            format!("{BASE}{tail}")
        } else {
            format!("{BASE}{tail}{INCAST}")
        };
        let path = dir.join(format!("case{i}.toml"));
        std::fs::write(&path, &text).unwrap();
        let e = scenario::load(&path).unwrap_err();
        let shown = e.to_string();
        assert!(
            e.key.as_deref().is_some_and(|k| k.ends_with(key)),
            "case {i} ({key}): {shown}"
        );
        assert!(shown.contains("no unit"), "case {i}: {shown}");
        let units = if time { TIME_UNITS } else { RATE_UNITS };
        assert!(shown.contains(units), "case {i}: {shown}");
        assert!(
            shown.starts_with(&format!("{}:", path.display())),
            "case {i}: {shown}"
        );
        assert_eq!(e.position.map(|p| p.0), Some(line), "case {i}: {shown}");
        // The same value with a unit loads, or fails for another reason.
        let fixed = text.replace("= \"25\"", "= \"25Gbps\"");
        let fixed = fix_units(&fixed, time);
        std::fs::write(&path, &fixed).unwrap();
        if let Err(e) = scenario::load(&path) {
            assert!(!e.to_string().contains("no unit"), "case {i}: {e}\n{fixed}");
        }
    }
}

/// Give every bare integer after `=` a unit (`us` or `Gbps`), leaving
/// other numbers (loads, probabilities) alone.
fn fix_units(text: &str, time: bool) -> String {
    let unit = if time { "us" } else { "Gbps" };
    let mut out = String::new();
    for line in text.lines() {
        let mut l = line.to_string();
        for key in [
            "duration",
            "refresh",
            "response_time",
            "detection_time",
            "restoration_time",
            "poll_interval",
            "check_interval",
            "rx_drain_rate",
            "critical",
            "minor",
            "alpha_update_interval",
            "rate_decrease_interval",
            "rate_increase_timer",
            "rate_ai",
            "rate_hai",
            "min_rate",
            "min_time_between_cnps",
            "interval",
            "flow_rate_interval",
            "start",
            "window",
            "rate",
            "end",
            "convergence",
            "period",
            "down_for",
        ] {
            for sep in ["", " "] {
                let pat = format!("{key} = ");
                if let Some(at) = l.find(&format!("{sep}{pat}")) {
                    let from = at + sep.len() + pat.len();
                    let digits = l[from..].chars().take_while(char::is_ascii_digit).count();
                    if digits > 0 {
                        l = format!(
                            "{}\"{}{unit}\"{}",
                            &l[..from],
                            &l[from..from + digits],
                            &l[from + digits..]
                        );
                    }
                }
            }
        }
        out.push_str(&l);
        out.push('\n');
    }
    out
}

#[test]
fn a_bare_zero_stays_zero() {
    let dir = scratch("zero");
    let path = dir.join("zero.toml");
    let text = format!(
        "{BASE}[fabric.pfc]\nresponse_time = 0\n[record]\ninterval = \"10us\"\n{INCAST}start = 0\n"
    );
    std::fs::write(&path, text).unwrap();
    let s = scenario::load(&path).unwrap();
    assert_eq!(
        s.variants[0].config.fabric.pfc.response_time,
        Duration::ZERO
    );
    assert!(s.variants[0].flows.iter().all(|f| f.start.as_ps() == 0));
}

#[test]
fn a_topology_file_refuses_bare_rates_and_delays() {
    let dir = scratch("topo");
    for (i, (text, key, units, line)) in [
        ("hosts = [\"a\", \"b\"]\nswitches = [\"s\"]\n[defaults]\nrate = 100\n[[link]]\na = \"a\"\nb = \"s\"\n[[link]]\na = \"b\"\nb = \"s\"\n", "defaults.rate", RATE_UNITS, 4),
        ("hosts = [\"a\", \"b\"]\nswitches = [\"s\"]\n[[link]]\na = \"a\"\nb = \"s\"\ndelay = 1\n[[link]]\na = \"b\"\nb = \"s\"\n", "link[0].delay", TIME_UNITS, 6),
        ("[generator]\nkind = \"leaf-spine\"\nleaves = 2\nspines = 1\nhosts_per_leaf = 2\nfabric_link = { rate = 400 }\n", "generator.fabric_link.rate", RATE_UNITS, 6),
    ]
    .into_iter()
    .enumerate()
    {
        let path = dir.join(format!("topo{i}.toml"));
        std::fs::write(&path, text).unwrap();
        let e = check_file(&path).unwrap_err();
        let shown = e.to_string();
        assert_eq!(e.key.as_deref(), Some(key), "{shown}");
        assert!(shown.contains("no unit") && shown.contains(units), "{shown}");
        assert_eq!(e.position.map(|p| p.0), Some(line), "{shown}");
    }
}

#[test]
fn command_line_changes_refuse_bare_times_too() {
    let dir = scratch("set");
    let path = dir.join("s.toml");
    let text = format!("{BASE}duration = \"1ms\"\n{INCAST}");
    std::fs::write(&path, &text).unwrap();
    for (arg, key) in [
        ("duration=20", "duration"),
        (
            "fabric.pfc.watchdog.detection_time=1",
            "fabric.pfc.watchdog.detection_time",
        ),
        ("nic.rx_drain_rate=25", "nic.rx_drain_rate"),
    ] {
        let ov = Overrides {
            set: vec![Overrides::parse_set(arg).unwrap()],
            variant: None,
        };
        let e = scenario::from_str_with(&path, &text, &ov).unwrap_err();
        let shown = e.to_string();
        assert_eq!(e.key.as_deref(), Some(key), "{shown}");
        assert!(
            shown.contains("no unit") && shown.contains("command line"),
            "{shown}"
        );
    }
    // With a unit it loads.
    let ov = Overrides {
        set: vec![Overrides::parse_set("duration=20us").unwrap()],
        variant: None,
    };
    let s = scenario::from_str_with(&path, &text, &ov).unwrap();
    assert_eq!(s.variants[0].duration, Some(Duration::from_us(20)));
}
