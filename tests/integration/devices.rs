//! `rocelab devices`: the ibv_devices layout, and a clean answer on a
//! machine without RDMA hardware.

use std::process::Command;

#[test]
fn devices_prints_the_ibv_devices_header_and_exits_zero() {
    let out = Command::new(env!("CARGO_BIN_EXE_rocelab"))
        .arg("devices")
        .output()
        .expect("run rocelab devices");
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some("    device          \t   node GUID"));
    assert_eq!(lines.next(), Some("    ------          \t----------------"));
    for row in lines {
        let (name, guid) = row.trim_start().split_once('\t').expect("name<TAB>guid");
        assert!(!name.trim().is_empty(), "{row:?}");
        assert_eq!(guid.len(), 16, "{row:?}");
        assert!(u64::from_str_radix(guid, 16).is_ok(), "{row:?}");
    }
    // Without RDMA hardware (or without libibverbs) the reason is a note on
    // stderr, never a failure.
    let stderr = String::from_utf8(out.stderr).unwrap();
    for line in stderr.lines() {
        assert!(line.starts_with("note: "), "{line:?}");
    }
}

#[test]
fn devices_long_adds_backend_and_detail_columns() {
    let out = Command::new(env!("CARGO_BIN_EXE_rocelab"))
        .args(["devices", "--long"])
        .output()
        .expect("run rocelab devices --long");
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let header = stdout.lines().next().unwrap();
    assert!(header.ends_with("\tbackend\tdetail"), "{header:?}");
    for row in stdout.lines().skip(2) {
        let columns: Vec<&str> = row.split('\t').collect();
        assert_eq!(columns.len(), 4, "{row:?}");
        assert!(["udp", "ibverbs"].contains(&columns[2]), "{row:?}");
    }
}

/// Builds the loopback stand-in for libibverbs (the one the hardware
/// backend's tests use) as `DIR/libibverbs.so.1`, so that the dynamic
/// loader finds it first through `LD_LIBRARY_PATH`. `None` when no C
/// compiler or `<infiniband/verbs.h>` is present (a failure under CI).
fn fake_libibverbs_dir() -> Option<std::path::PathBuf> {
    const SOURCE: &str = include_str!("../../verbs-emu/tests/data/fake_ibverbs.c");
    let strict = std::env::var_os("CI").is_some_and(|value| !value.is_empty() && value != "false");
    let dir = std::env::temp_dir().join(format!("rocelab-cli-fake-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("fake_ibverbs.c");
    std::fs::write(&src, SOURCE).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let out = Command::new(&cc)
        .args(["-std=gnu11", "-shared", "-fPIC", "-o"])
        .arg(dir.join("libibverbs.so.1"))
        .arg(&src)
        .output();
    match out {
        Ok(out) if out.status.success() => Some(dir),
        other => {
            let why = format!("cannot build the stand-in libibverbs with {cc}: {other:?}");
            assert!(!strict, "CI is set, so this cannot be skipped: {why}");
            eprintln!("skipping: {why}");
            None
        }
    }
}

#[test]
fn devices_lists_a_real_device_as_ibv_devices_would() {
    let Some(dir) = fake_libibverbs_dir() else {
        return;
    };
    let out = Command::new(env!("CARGO_BIN_EXE_rocelab"))
        .arg("devices")
        .env("LD_LIBRARY_PATH", &dir)
        .output()
        .expect("run rocelab devices");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let row = "    fake0           \t0002c90300a1b2c3";
    assert!(stdout.lines().any(|line| line == row), "{stdout}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(!stderr.contains("ibverbs: no RDMA devices"), "{stderr}");
}

#[test]
fn devices_counters_prints_ethtool_dumps_that_parse_and_doctor_read() {
    let out = Command::new(env!("CARGO_BIN_EXE_rocelab"))
        .args(["devices", "--counters"])
        .output()
        .expect("run rocelab devices --counters");
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    // Every emulated device listed either prints a dump or says why not
    // (another process may hold its address).
    let listed = Command::new(env!("CARGO_BIN_EXE_rocelab"))
        .args(["devices", "--long"])
        .output()
        .unwrap();
    let listed = String::from_utf8(listed.stdout).unwrap();
    let udp: Vec<&str> = listed
        .lines()
        .skip(2)
        .filter(|r| r.contains("\tudp\t"))
        .map(|r| r.trim_start().split('\t').next().unwrap().trim())
        .collect();
    assert!(!udp.is_empty(), "no emulated device: {listed}");
    for name in &udp {
        let dumped = stdout.contains(&format!("# host: {name}\nNIC statistics:\n"));
        let noted = stderr.contains(&format!("note: {name}: no counters: "));
        assert!(dumped || noted, "{name}:\n{stdout}\n{stderr}");
    }
    // A dump: `     name: value` lines under `NIC statistics:`, the
    // transport's mlx5 names first; a freshly opened device counted
    // nothing.
    let mut dumps = 0;
    for dump in stdout.split("# host: ").skip(1) {
        dumps += 1;
        let mut lines = dump.lines().skip(1);
        assert_eq!(lines.next(), Some("NIC statistics:"));
        let names: Vec<&str> = lines
            .map(|l| {
                let (name, v) = l.strip_prefix("     ").unwrap().split_once(": ").unwrap();
                assert_eq!(v, "0", "{l}");
                name
            })
            .collect();
        assert_eq!(names[0], "out_of_sequence");
        for n in [
            "np_ecn_marked_roce_packets",
            "np_cnp_sent",
            "rp_cnp_handled",
            "rx_icrc_encapsulated",
        ] {
            assert!(names.contains(&n), "{n} missing: {names:?}");
        }
    }
    if dumps == 0 {
        return;
    }
    let file = std::env::temp_dir().join(format!("rocelab-devices-{}.txt", std::process::id()));
    std::fs::write(&file, &stdout).unwrap();
    let parsed = Command::new(env!("CARGO_BIN_EXE_rocelab"))
        .args(["parse", "auto"])
        .arg(&file)
        .output()
        .unwrap();
    let p = String::from_utf8(parsed.stdout).unwrap();
    assert!(p.lines().next().unwrap().ends_with(": ethtool"), "{p}");
    assert_eq!(p.matches("snapshot ").count(), dumps, "{p}");
    let doc = Command::new(env!("CARGO_BIN_EXE_rocelab"))
        .args(["doctor"])
        .arg(&file)
        .output()
        .unwrap();
    let d = String::from_utf8(doc.stdout).unwrap();
    let _ = std::fs::remove_file(&file);
    assert!(doc.status.success(), "{d}");
    // The transport counters are read as RDMA counters.
    assert!(
        d.contains("counters (rdma 1 snapshot: totals since boot, not a rate): "),
        "{d}"
    );
}

#[test]
fn the_loopback_device_has_the_name_the_drop_in_library_gives_it() {
    // One device, one name: `ibv_devices` under `rocelab exec` shows the
    // loopback device as rocelab0, and so does `rocelab devices`.
    let out = Command::new(env!("CARGO_BIN_EXE_rocelab"))
        .args(["devices", "--long"])
        .output()
        .expect("run rocelab devices --long");
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lo: Vec<&str> = stdout
        .lines()
        .filter(|row| row.contains("\tudp\t127."))
        .collect();
    assert_eq!(lo.len(), 1, "{stdout}");
    assert_eq!(
        lo[0].split('\t').next().unwrap().trim(),
        "rocelab0",
        "{stdout}"
    );
    assert!(!stdout.contains("udp_lo"), "{stdout}");
}
