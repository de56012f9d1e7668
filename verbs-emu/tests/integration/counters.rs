//! Counters through the common API: per device (`Context::counters`) and
//! per QP (`QueuePair::counters`), under mlx5's names, after runs with
//! injected loss and CE marks, on the side of the transfer that counts
//! each.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::time::{Duration, Instant};

use verbs_emu::backend::counters::QpCounters;
use verbs_emu::backend::fault::{FaultConfig, FaultInjector};
use verbs_emu::backend::udp::{UdpBackend, UdpConfig};
use verbs_emu::cc::{CcConfig, DcqcnParams};
use verbs_emu::time::Rate;
use verbs_emu::verbs::{
    CompletionQueue, Context, MemoryRegion, Mtu, ProtectionDomain, QpType, QueuePair,
};

use super::{write_and_wait, ALL};
const T: Duration = Duration::from_secs(20);

struct Side {
    ctx: Context,
    backend: Arc<UdpBackend>,
    _pd: ProtectionDomain,
    cq: CompletionQueue,
    mr: MemoryRegion,
    qp: QueuePair,
}

/// A device on `ip` whose transmit path injects `faults`, with one RC QP.
fn side(ip: Ipv4Addr, faults: FaultConfig, cc: CcConfig) -> Side {
    let mut cfg = UdpConfig::new(SocketAddrV4::new(ip, 4791));
    cfg.cc = cc;
    let backend = Arc::new(
        UdpBackend::open_with(cfg, move |s| Ok(Box::new(FaultInjector::new(s, faults)))).unwrap(),
    );
    let ctx = Context::from_backend(backend.clone());
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(256).unwrap();
    let mr = pd.alloc_mr(1 << 20, ALL).unwrap();
    let qp = pd
        .qp_builder(QpType::Rc)
        .cq(&cq)
        .max_send_wr(64)
        .build()
        .unwrap();
    Side {
        ctx,
        backend,
        _pd: pd,
        cq,
        mr,
        qp,
    }
}

fn connect(a: &Side, b: &Side) {
    let ea = a.qp.endpoint(7, 0, Some(&a.mr)).unwrap();
    let eb = b.qp.endpoint(0x00FF_FFF0, 0, Some(&b.mr)).unwrap();
    a.qp.connect(ea.psn, &eb, Mtu::Mtu1024, ALL).unwrap();
    b.qp.connect(eb.psn, &ea, Mtu::Mtu1024, ALL).unwrap();
}

/// `n` signaled WRITEs of `len` bytes from `a` into `b`, one at a time.
fn writes(a: &Side, b: &Side, n: u64, len: u32) {
    let rm = b.mr.remote();
    for i in 0..n {
        write_and_wait(&a.qp, &a.cq, &a.mr, &rm, len, i, T);
    }
}

fn c(q: &QpCounters, name: &str) -> u64 {
    q.get(name)
        .unwrap_or_else(|| panic!("no counter {name} in {:?}", q.counters))
}

fn dev(ctx: &Context, name: &str) -> u64 {
    ctx.counter(name)
        .unwrap()
        .unwrap_or_else(|| panic!("the device has no counter {name}"))
}

#[test]
fn loss_is_counted_per_qp_on_the_side_that_sees_it() {
    let lossy = FaultConfig {
        loss: 0.05,
        seed: 11,
        ..FaultConfig::default()
    };
    let a = side(Ipv4Addr::new(127, 71, 0, 1), lossy, CcConfig::None);
    let b = side(
        Ipv4Addr::new(127, 71, 0, 2),
        FaultConfig::default(),
        CcConfig::None,
    );
    connect(&a, &b);
    writes(&a, &b, 40, 16384);
    let dropped = a.backend.io_stats().fault_dropped;
    assert!(dropped > 0, "the sender's path dropped packets");
    let (qa, qb) = (a.qp.counters().unwrap(), b.qp.counters().unwrap());
    // The requester (a) retransmitted after sequence NAKs or timeouts; the
    // responder (b) saw the gaps. Nothing flows the other way to lose.
    assert!(c(&qa, "roce_adp_retrans") > 0, "{qa:?}");
    assert!(
        c(&qa, "packet_seq_err") + c(&qa, "local_ack_timeout_err") > 0,
        "{qa:?}"
    );
    assert!(c(&qb, "out_of_sequence") > 0, "{qb:?}");
    for n in ["out_of_sequence", "duplicate_request"] {
        assert_eq!(c(&qa, n), 0, "{n} on the requester: {qa:?}");
    }
    for n in [
        "roce_adp_retrans",
        "packet_seq_err",
        "local_ack_timeout_err",
        "implied_nak_seq_err",
    ] {
        assert_eq!(c(&qb, n), 0, "{n} on the responder: {qb:?}");
    }
    // Every sequence NAK the requester counted is one the responder sent
    // (b's path loses nothing), and each gap (one NAK) holds at least one
    // out-of-sequence packet.
    let nak_sent = b.backend.qp_stats(b.qp.handle()).unwrap().tx_nak_seq;
    assert!(c(&qa, "packet_seq_err") <= nak_sent, "{qa:?} vs {nak_sent}");
    assert!(nak_sent <= c(&qb, "out_of_sequence"));
    // No congestion control: no rate limit.
    assert_eq!(qa.rate, None);
    // The device's counters are the sum over its QPs (one here), and
    // survive the QP's destruction.
    let retrans = c(&qa, "roce_adp_retrans");
    assert_eq!(dev(&a.ctx, "roce_adp_retrans"), retrans);
    assert_eq!(dev(&b.ctx, "out_of_sequence"), c(&qb, "out_of_sequence"));
    assert_eq!(dev(&a.ctx, "fault_dropped"), dropped);
    let Side { ctx, qp, .. } = a;
    drop(qp);
    assert_eq!(dev(&ctx, "roce_adp_retrans"), retrans);
}

#[test]
fn ce_marks_cnps_and_the_rate_cut_are_counted_at_each_hop() {
    // The sender's path marks every ECT packet CE (a congested ECN
    // switch); the sender runs DCQCN.
    let marks = FaultConfig {
        ce_mark: 1.0,
        ..FaultConfig::default()
    };
    let line = Rate::from_gbps(100);
    let a = side(
        Ipv4Addr::new(127, 72, 0, 1),
        marks,
        CcConfig::Dcqcn(DcqcnParams::connectx(line)),
    );
    let b = side(
        Ipv4Addr::new(127, 72, 0, 2),
        FaultConfig::default(),
        CcConfig::None,
    );
    connect(&a, &b);
    writes(&a, &b, 20, 8192);
    let marked = a.backend.io_stats().fault_ce_marked;
    assert!(marked > 0);
    // Every mark reached the receiver's QP, which answered with CNPs (at
    // most one per 50 us, fewer than the marks); the sender acted on each
    // CNP that arrived. CNPs may still be on the way: wait for them.
    let qb = b.qp.counters().unwrap();
    assert_eq!(c(&qb, "np_ecn_marked_roce_packets"), marked, "{qb:?}");
    assert_eq!(b.backend.stats().rx_ecn_ce, marked);
    let sent = c(&qb, "np_cnp_sent");
    assert!(sent > 0 && sent < marked, "{sent} CNPs for {marked} marks");
    let end = Instant::now() + T;
    let qa = loop {
        let qa = a.qp.counters().unwrap();
        if c(&qa, "rp_cnp_handled") == sent || Instant::now() > end {
            break qa;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(c(&qa, "rp_cnp_handled"), sent, "{qa:?}");
    assert_eq!(c(&qa, "rp_cnp_ignored"), 0);
    let rate = qa.rate.expect("DCQCN sets a rate");
    assert!(rate.bps() < line.bps(), "the rate was cut: {rate:?}");
    // The device's counters under the same names.
    assert_eq!(dev(&b.ctx, "np_ecn_marked_roce_packets"), marked);
    assert_eq!(dev(&b.ctx, "np_cnp_sent"), sent);
    assert_eq!(dev(&a.ctx, "rp_cnp_handled"), sent);
    assert_eq!(dev(&a.ctx, "fault_ce_marked"), marked);
}

#[test]
fn cnps_to_a_qp_without_congestion_control_are_ignored() {
    let marks = FaultConfig {
        ce_mark: 1.0,
        ..FaultConfig::default()
    };
    let a = side(Ipv4Addr::new(127, 73, 0, 1), marks, CcConfig::None);
    let b = side(
        Ipv4Addr::new(127, 73, 0, 2),
        FaultConfig::default(),
        CcConfig::None,
    );
    connect(&a, &b);
    writes(&a, &b, 10, 8192);
    let sent = c(&b.qp.counters().unwrap(), "np_cnp_sent");
    assert!(sent > 0);
    let end = Instant::now() + T;
    let qa = loop {
        let qa = a.qp.counters().unwrap();
        if c(&qa, "rp_cnp_ignored") == sent || Instant::now() > end {
            break qa;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(
        (c(&qa, "rp_cnp_handled"), c(&qa, "rp_cnp_ignored")),
        (0, sent)
    );
    assert_eq!(qa.rate, None);
}
