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
