//! Packet capture of simulated links (`record.pcap`): every frame is a
//! real RoCEv2 or PFC frame of the length the fabric moved, every ICRC
//! checks (the core's and an independent computation agree), and tshark
//! decodes every frame with no malformed or expert error.
//!
//! The tshark part skips with a message when tshark is missing, except
//! under CI (`CI` set and not `false`/`0`), where a missing tshark fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use roce::time::{Duration, Rate, Size};
use roce::wire::{PcapReader, PfcRepr, RocePacket, RoceRepr};
use sim::config::{CaptureSelector, CcAlgorithm, PfcThreshold, SimConfig};
use sim::results::RunResult;
use sim::run::{simulate, RunOptions};

use crate::support::{star, write};

fn link(from: &str, to: &str) -> CaptureSelector {
    CaptureSelector {
        from: Some(from.into()),
        to: Some(to.into()),
        node: None,
        port: None,
        max_frames: 100_000,
    }
}

/// Two senders into h0 on a star at 100 Gbit/s: congestion gives ECN
/// marks, CNPs and PFC frames on the captured links.
fn captured_incast() -> RunResult {
    let (t, r) = star(3, Rate::from_gbps(100), Duration::from_us(1));
    let mut cfg = SimConfig::default();
    cfg.nic.cc.algorithm = CcAlgorithm::Dcqcn;
    cfg.fabric.ecn[0].kmin = Size::from_bytes(5_000);
    cfg.fabric.ecn[0].kmax = Size::from_bytes(40_000);
    cfg.fabric.pfc.threshold = PfcThreshold::Static {
        xoff: Size::from_bytes(30_000),
        xon: Size::from_bytes(20_000),
    };
    cfg.record.pcap = vec![
        link("sw", "h0"),
        link("h0", "sw"),
        CaptureSelector {
            from: None,
            to: None,
            node: Some("sw".into()),
            port: Some(1),
            max_frames: 100_000,
        },
    ];
    let flows = [write(0, 2, 1, 300_000), write(1, 3, 1, 300_000)];
    let res = simulate(&t, &r, &cfg, &flows, &RunOptions::default())
        .unwrap()
        .0;
    assert_eq!(res.summary.flows_completed, 2);
    res
}

/// The ICRC of an IPv4 RoCEv2 packet computed from the spec (IBA A17.8,
/// ROCEV2.md §3), without the core: CRC-32 over 8 bytes of ones, the IP
/// header with TOS, TTL and checksum set to ones, the UDP header with its
/// checksum set to ones, the BTH with its reserved byte 4 set to ones,
/// and the rest up to the ICRC.
fn independent_icrc(ip: &[u8]) -> u32 {
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let mut masked = vec![0xFFu8; 8];
    masked.extend_from_slice(&ip[..total - 4]);
    let m = &mut masked[8..];
    m[1] = 0xFF; // TOS (DSCP, ECN)
    m[8] = 0xFF; // TTL
    m[10] = 0xFF; // header checksum
    m[11] = 0xFF;
    m[26] = 0xFF; // UDP checksum
    m[27] = 0xFF;
    m[28 + 4] = 0xFF; // BTH resv8a
    crc32fast::hash(&masked)
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sim-capture-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[test]
fn captured_frames_are_real_roce_and_pfc_with_the_simulated_lengths() {
    let res = captured_incast();
    assert_eq!(res.captures.len(), 3);
    let names: Vec<&str> = res.captures.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["sw-h0", "h0-sw", "sw-h1"]);
    let port = |node: &str, peer: &str| {
        res.ports
            .iter()
            .find(|p| p.node == node && p.peer == peer)
            .unwrap()
    };
    let (mut pfc_frames, mut ce, mut cnps) = (0u64, 0u64, 0u64);
    for c in &res.captures {
        assert_eq!(c.frames_not_written, 0);
        let (node, peer) = c.name.split_once('-').unwrap();
        let p = port(node, peer);
        let reader = PcapReader::new(&c.pcap).unwrap();
        let mut last = 0u64;
        let (mut roce, mut roce_bytes, mut pfc) = (0u64, 0u64, 0u64);
        for rec in reader {
            let rec = rec.unwrap();
            let ts = rec.timestamp.as_ps();
            assert!(ts >= last, "{}: timestamps in simulated-time order", c.name);
            last = ts;
            let f = rec.data;
            assert_eq!(rec.orig_len as usize, f.len());
            match u16::from_be_bytes([f[12], f[13]]) {
                0x0800 => {
                    let pkt = RocePacket::new_checked(&f[14..]).unwrap();
                    pkt.verify_icrc().expect("the core checks the ICRC");
                    assert_eq!(pkt.icrc(), pkt.compute_icrc());
                    let carried = u32::from_le_bytes(
                        pkt.ip_packet()[pkt.ip_packet().len() - 4..]
                            .try_into()
                            .unwrap(),
                    );
                    assert_eq!(
                        independent_icrc(&f[14..]),
                        carried,
                        "{}: ICRC of frame at {ts} ps",
                        c.name
                    );
                    let repr = RoceRepr::parse(&pkt).unwrap();
                    assert!(
                        repr.payload_len == 0 || pkt.payload().iter().all(|&b| b == 0),
                        "payload bytes are zeros"
                    );
                    if repr.ip.ecn() == roce::wire::Ecn::Ce {
                        ce += 1;
                    }
                    if repr.headers.bth.opcode == roce::wire::Opcode::Cnp {
                        cnps += 1;
                    }
                    roce += 1;
                    // On the wire: the frame plus its 4-byte FCS.
                    roce_bytes += f.len() as u64 + 4;
                }
                0x8808 => {
                    let (_, repr) = PfcRepr::parse_frame(f).unwrap();
                    assert!(matches!(repr, PfcRepr::Pfc { .. }));
                    assert_eq!(f.len(), 60);
                    pfc += 1;
                }
                other => panic!("{}: unexpected EtherType {other:#06x}", c.name),
            }
        }
        // The capture holds exactly what the port's counters say it sent.
        let tx: u64 = p.prio.iter().map(|x| x.tx_packets).sum();
        let tx_bytes: u64 = p.prio.iter().map(|x| x.tx_bytes).sum();
        let tx_pause: u64 = p.prio.iter().map(|x| x.tx_pause).sum();
        assert_eq!(roce, tx, "{}: RoCE frames", c.name);
        assert_eq!(roce_bytes, tx_bytes, "{}: RoCE bytes", c.name);
        assert_eq!(pfc, tx_pause, "{}: PFC frames", c.name);
        assert_eq!(c.frames, roce + pfc);
        pfc_frames += pfc;
    }
    assert!(pfc_frames > 0, "the incast paused a sender");
    assert!(ce > 0, "the incast marked frames CE");
    assert!(cnps > 0, "the receiver sent CNPs");
}

#[test]
fn a_capture_cap_counts_the_frames_it_does_not_write() {
    let (t, r) = star(2, Rate::from_gbps(100), Duration::from_us(1));
    let mut cfg = SimConfig::default();
    let mut sel = link("h1", "sw");
    sel.max_frames = 10;
    cfg.record.pcap = vec![sel];
    let res = simulate(
        &t,
        &r,
        &cfg,
        &[write(0, 2, 1, 100_000)],
        &RunOptions::default(),
    )
    .unwrap()
    .0;
    let c = &res.captures[0];
    assert_eq!(c.frames, 10);
    let sent = res.ports.iter().find(|p| p.node == "h1").unwrap().prio[3].tx_packets;
    assert_eq!(c.frames + c.frames_not_written, sent);
    assert_eq!(PcapReader::new(&c.pcap).unwrap().count(), 10);
}

#[test]
fn a_capture_naming_a_missing_link_is_an_error_that_names_it() {
    let (t, r) = star(2, Rate::from_gbps(100), Duration::from_us(1));
    let mut cfg = SimConfig::default();
    cfg.record.pcap = vec![link("h0", "h1")];
    let err = simulate(
        &t,
        &r,
        &cfg,
        &[write(0, 2, 1, 1000)],
        &RunOptions::default(),
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("record.pcap[0].to") && msg.contains("no link joins"),
        "{msg}"
    );
}

fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

fn tshark_found() -> bool {
    let found = Command::new("tshark")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found || !under_ci(),
        "tshark is required under CI (apt-get install tshark)"
    );
    if !found {
        eprintln!("skipping the tshark check of simulated captures: tshark is not installed");
    }
    found
}

fn tshark(pcap: &Path, args: &[&str]) -> String {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args(args)
        .output()
        .expect("tshark runs");
    assert!(
        out.status.success(),
        "tshark {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("tshark prints UTF-8")
}

#[test]
fn tshark_decodes_every_simulated_frame_as_roce_or_pfc() {
    if !tshark_found() {
        return;
    }
    let res = captured_incast();
    for c in &res.captures {
        let path = scratch(&format!("{}.pcap", c.name));
        std::fs::write(&path, &c.pcap).unwrap();
        // Nothing that is neither InfiniBand (RoCE) nor PFC (MAC control
        // with a class-enable vector), nothing
        // malformed, no expert error.
        let bad = tshark(
            &path,
            &[
                "--disable-protocol",
                "rpcordma",
                "-Y",
                "!(infiniband || macc.cbfc.enbv) || _ws.malformed || _ws.expert.severity >= \"error\"",
            ],
        );
        assert!(
            bad.trim().is_empty(),
            "{}: tshark flagged frames:\n{bad}",
            c.name
        );
        // tshark sees every frame, and the RoCE ones as InfiniBand.
        let all = tshark(&path, &["-T", "fields", "-e", "frame.number"]);
        assert_eq!(all.lines().count() as u64, c.frames, "{}", c.name);
        let ib = tshark(
            &path,
            &["-Y", "infiniband", "-T", "fields", "-e", "frame.number"],
        );
        let pfc = tshark(
            &path,
            &[
                "-Y",
                "macc.opcode == 0x0101",
                "-T",
                "fields",
                "-e",
                "frame.number",
            ],
        );
        assert_eq!(
            (ib.lines().count() + pfc.lines().count()) as u64,
            c.frames,
            "{}",
            c.name
        );
    }
}
