//! The UDP backend's packets as the kernel puts them on loopback: captured
//! with an AF_PACKET socket, every ICRC recomputed from the real IPv4
//! header (identification, flags, lengths), and decoded by tshark as RoCE
//! with no error.
//!
//! Needs root for AF_PACKET (skipped otherwise, failed under `CI=true`);
//! tshark is optional locally (skipped with a message) and required under
//! `CI=true`.

use crate::mr_bytes::edit;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use verbs_emu::backend::capture::PcapWriter;
use verbs_emu::backend::udp::{UdpBackend, UdpConfig};
use verbs_emu::verbs::{
    AccessFlags, Context, Mtu, QpType, RecvWr, SendFlags, SendOp, SendWr, WcStatus,
};
use verbs_emu::wire::icrc::verify_ip_packet;
use verbs_emu::wire::Rkey;

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// A raw AF_PACKET socket on `lo`, collecting IPv4 frames in a thread.
struct Sniffer {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<Vec<u8>>>,
}

const ETH_P_ALL: u16 = 0x0003;
const PACKET_OUTGOING: u8 = 4;

impl Sniffer {
    fn start() -> Option<Sniffer> {
        // SAFETY: socket(2) with constant arguments.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW,
                i32::from(ETH_P_ALL.to_be()),
            )
        };
        if fd < 0 {
            return None;
        }
        // SAFETY: a NUL-terminated interface name.
        let ifindex = unsafe { libc::if_nametoindex(c"lo".as_ptr()) };
        // SAFETY: zeroed sockaddr_ll is valid; fields set below.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL.to_be();
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: sll is a valid sockaddr_ll of the given size.
        let r = unsafe {
            libc::bind(
                fd,
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert_eq!(r, 0, "bind AF_PACKET to lo");
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 20_000,
        };
        // SAFETY: a valid timeval for SO_RCVTIMEO.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as u32,
            )
        };
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut frames = Vec::new();
            let mut buf = vec![0u8; 70000];
            while !s2.load(Ordering::Relaxed) {
                // SAFETY: zeroed sockaddr_ll is a valid out-parameter.
                let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
                let mut len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
                // SAFETY: buf and from are writable for their lengths.
                let n = unsafe {
                    libc::recvfrom(
                        fd,
                        buf.as_mut_ptr().cast(),
                        buf.len(),
                        0,
                        (&mut from as *mut libc::sockaddr_ll).cast(),
                        &mut len,
                    )
                };
                // Loopback shows each packet twice; keep the incoming copy.
                if n > 0 && from.sll_pkttype != PACKET_OUTGOING {
                    frames.push(buf[..n as usize].to_vec());
                }
            }
            // SAFETY: closing our own descriptor.
            unsafe { libc::close(fd) };
            frames
        });
        Some(Sniffer { stop, thread })
    }

    fn finish(self) -> Vec<Vec<u8>> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// The IP packet of a frame that is UDP between our two test addresses.
fn ours(frame: &[u8], a: Ipv4Addr, b: Ipv4Addr) -> Option<&[u8]> {
    if frame.len() < 14 + 28 || frame[12..14] != [0x08, 0x00] {
        return None;
    }
    let ip = &frame[14..];
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    let pair = (src == a && dst == b) || (src == b && dst == a);
    (ip[9] == 17 && pair).then_some(ip)
}

#[test]
fn loopback_capture_has_valid_icrcs_and_decodes_as_roce() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        assert!(!ci(), "the capture test needs root (AF_PACKET) under CI");
        eprintln!("skipping the loopback capture: AF_PACKET needs root");
        return;
    }
    let (ia, ib) = (Ipv4Addr::new(127, 49, 0, 1), Ipv4Addr::new(127, 49, 0, 2));
    let open = |ip| {
        let mut cfg = UdpConfig::new(SocketAddrV4::new(ip, 4791));
        // One kernel packet per RoCE packet, so the capture sees each one
        // (loopback keeps GSO runs whole).
        cfg.socket.gso = false;
        Context::from_backend(Arc::new(UdpBackend::open(cfg).unwrap()))
    };
    let sniffer = Sniffer::start().expect("AF_PACKET socket as root");
    std::thread::sleep(Duration::from_millis(50));
    let (ca, cb) = (open(ia), open(ib));
    let all = AccessFlags::LOCAL_WRITE
        | AccessFlags::REMOTE_WRITE
        | AccessFlags::REMOTE_READ
        | AccessFlags::REMOTE_ATOMIC;
    let (pa, pb) = (ca.alloc_pd().unwrap(), cb.alloc_pd().unwrap());
    let (qa_cq, qb_cq) = (ca.create_cq(64).unwrap(), cb.create_cq(64).unwrap());
    let (ma, mb) = (
        pa.alloc_mr(1 << 16, all).unwrap(),
        pb.alloc_mr(1 << 16, all).unwrap(),
    );
    let qa = pa.qp_builder(QpType::Rc).cq(&qa_cq).build().unwrap();
    let qb = pb.qp_builder(QpType::Rc).cq(&qb_cq).build().unwrap();
    let (ea, eb) = (
        qa.endpoint(1, 0, Some(&ma)).unwrap(),
        qb.endpoint(2, 0, Some(&mb)).unwrap(),
    );
    qa.connect(ea.psn, &eb, Mtu::Mtu1024, all).unwrap();
    qb.connect(eb.psn, &ea, Mtu::Mtu1024, all).unwrap();
    for (i, b) in edit(&ma).iter_mut().enumerate() {
        *b = i as u8;
    }
    let rsge = [mb.sge(0, 5000).unwrap()];
    // SAFETY: SGEs are in registered regions kept until the completions.
    unsafe {
        qb.post_recv(&[RecvWr {
            wr_id: 1,
            sg_list: &rsge,
        }])
    }
    .unwrap();
    let s1 = [ma.sge(0, 3000).unwrap()];
    let s2 = [ma.sge(8192, 8).unwrap()];
    let rm = mb.remote();
    let wrs = [
        SendWr {
            wr_id: 1,
            sg_list: &s1,
            op: SendOp::Write {
                remote_addr: rm.addr + 100,
                rkey: Rkey::new(rm.rkey),
            },
            flags: SendFlags::SIGNALED,
            ud: None,
        },
        SendWr {
            wr_id: 2,
            sg_list: &s1,
            op: SendOp::SendWithImm(7),
            flags: SendFlags::SIGNALED,
            ud: None,
        },
        SendWr {
            wr_id: 3,
            sg_list: &s1,
            op: SendOp::Read {
                remote_addr: rm.addr,
                rkey: Rkey::new(rm.rkey),
            },
            flags: SendFlags::SIGNALED,
            ud: None,
        },
        SendWr {
            wr_id: 4,
            sg_list: &s2,
            op: SendOp::FetchAdd {
                remote_addr: rm.addr + 4096,
                rkey: Rkey::new(rm.rkey),
                add: 1,
            },
            flags: SendFlags::SIGNALED,
            ud: None,
        },
    ];
    // SAFETY: as above.
    unsafe { qa.post_send(&wrs) }.unwrap();
    for wc in qa_cq.poll_n(4, Duration::from_secs(10)).unwrap() {
        assert_eq!(wc.status, WcStatus::Success);
    }
    assert_eq!(
        qb_cq.poll_n(1, Duration::from_secs(10)).unwrap()[0].status,
        WcStatus::Success
    );
    std::thread::sleep(Duration::from_millis(60));
    let frames = sniffer.finish();
    let ip_packets: Vec<&[u8]> = frames.iter().filter_map(|f| ours(f, ia, ib)).collect();
    // WRITE 3 + SEND 3 + READ request + 3 responses + atomic + ACKs.
    assert!(
        ip_packets.len() >= 10,
        "captured {} packets",
        ip_packets.len()
    );
    for ip in &ip_packets {
        assert_eq!(&ip[4..6], &[0, 0], "IPv4 identification 0");
        assert_eq!(ip[6] & 0x40, 0x40, "DF set");
        assert_eq!(u16::from_be_bytes([ip[22], ip[23]]), 4791);
        verify_ip_packet(ip).unwrap_or_else(|e| panic!("ICRC of a captured packet: {e}"));
        assert_eq!(ip[1] & 3, 2, "ECT(0)");
    }
    // Hand the same frames to tshark.
    let dir = std::env::temp_dir().join(format!("rocelab-capture-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("lo.pcap");
    {
        let mut w = PcapWriter::new(std::fs::File::create(&pcap).unwrap()).unwrap();
        for ip in &ip_packets {
            let src = SocketAddrV4::new(
                Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]),
                u16::from_be_bytes([ip[20], ip[21]]),
            );
            let dst = SocketAddrV4::new(
                Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]),
                u16::from_be_bytes([ip[22], ip[23]]),
            );
            w.write_udp(
                src,
                dst,
                ip[1],
                u16::from_be_bytes([ip[4], ip[5]]),
                &ip[28..],
            )
            .unwrap();
        }
        w.flush().unwrap();
    }
    let tshark = Command::new("tshark").arg("--version").output();
    if tshark.is_err() {
        assert!(!ci(), "tshark is required under CI=true");
        eprintln!("skipping the tshark half of the capture test: tshark not installed");
        return;
    }
    let bad = Command::new("tshark")
        .args(["-r"])
        .arg(&pcap)
        .args([
            "--disable-protocol",
            "rpcordma",
            "-Y",
            "!infiniband || _ws.malformed || _ws.expert.severity >= \"error\"",
        ])
        .output()
        .unwrap();
    assert!(
        bad.status.success(),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&bad.stdout).trim(),
        "",
        "tshark found non-RoCE or broken packets"
    );
    let rows = Command::new("tshark")
        .args(["-r"])
        .arg(&pcap)
        .args([
            "--disable-protocol",
            "rpcordma",
            "-Y",
            "infiniband",
            "-T",
            "fields",
            "-e",
            "infiniband.bth.opcode",
            "-e",
            "infiniband.invariant.crc",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&rows.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.len(),
        ip_packets.len(),
        "every packet decodes as RoCE"
    );
    for (line, ip) in lines.iter().zip(&ip_packets) {
        let crc = line.split('\t').nth(1).unwrap_or("");
        let wire = &ip[ip.len() - 4..];
        let want = format!(
            "0x{:02x}{:02x}{:02x}{:02x}",
            wire[0], wire[1], wire[2], wire[3]
        );
        assert_eq!(crc, want, "tshark's ICRC field is the wire bytes");
    }
    let opcodes: Vec<u32> = lines
        .iter()
        .filter_map(|l| l.split('\t').next()?.parse().ok())
        .collect();
    for op in [6u32, 8, 3, 12, 13, 15, 20, 17, 18] {
        assert!(opcodes.contains(&op), "opcode {op} captured: {opcodes:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
