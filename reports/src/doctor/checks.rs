//! The individual checks of the doctor, one function per playbook symptom.
//! [`run`] runs them all, with those of [`super::platform`],
//! [`super::fabric`], [`super::hosts`] and [`super::switchcfg`], over one
//! scope's [`Context`].

use std::collections::{BTreeMap, BTreeSet};

use super::context::Context;
use super::counters::{prio_names, tags, CounterView, Entity};
use super::finding::{Finding, Severity, Symptom};
use super::names::host_from_path;
use super::wording::{mtu_cost, pct, SENDS_NO_PAUSE};

/// Sum without overflow (counters can be anything in a hostile file).
fn saturating_sum(it: impl Iterator<Item = u64>) -> u64 {
    it.fold(0u64, u64::saturating_add)
}

/// Run every check.
pub(super) fn run(ctx: &Context) -> Vec<Finding> {
    let mut out = Vec::new();
    for v in &ctx.eth {
        storm(v, &mut out);
        pause(v, ctx, &mut out);
        lossy_priority(v, ctx, &mut out);
        link_counters(v, &mut out);
        corruption_eth(v, &mut out);
        mtu_counters(v, &mut out);
        host_buffer(v, &mut out);
    }
    for v in &ctx.rdma {
        corruption_rdma(v, &mut out);
    }
    credit_wait(ctx, &mut out);
    priority_remap(ctx, &mut out);
    loss(ctx, &mut out);
    ack_timeout(ctx, &mut out);
    other_completion_errors(ctx, &mut out);
    ecn(ctx, &mut out);
    link_inventory(ctx, &mut out);
    mtu_inventory(ctx, &mut out);
    gdr(ctx, &mut out);
    qos_mapping(ctx, &mut out);
    gid_choice(ctx, &mut out);
    slow_perftest(ctx, &mut out);
    perftest_latency(ctx, &mut out);
    super::platform::run(ctx, &mut out);
    super::fabric::run(ctx, &mut out);
    super::hosts::run(ctx, &mut out);
    super::switchcfg::run(ctx, &mut out);
    since_boot(ctx, &mut out);
    if out.iter().all(|f| f.severity == Severity::Info) {
        healthy(ctx, &mut out);
    }
    out
}

/// #3: storm counters, or pause nearly all the time with no traffic.
fn storm(v: &CounterView, out: &mut Vec<Finding>) {
    let warn = v.get("tx_pause_storm_warning_events");
    let err = v.get("tx_pause_storm_error_events");
    let mut stuck = Vec::new();
    for p in 0u8..8 {
        let dur = v.get(&format!("tx_prio{p}_pause_duration"));
        let bytes = v
            .get(&format!("rx_prio{p}_bytes"))
            .saturating_add(v.get(&format!("tx_prio{p}_bytes")));
        if let Some(pm) = v.ppm_of_interval(dur) {
            if pm >= 900_000 && bytes < 1_000_000 {
                stuck.push((p, pm, bytes));
            }
        }
    }
    if warn == 0 && err == 0 && stuck.is_empty() {
        return;
    }
    let sev = if err > 0 || !stuck.is_empty() {
        Severity::Critical
    } else {
        Severity::Error
    };
    let mut f = Finding::new(v.cap(sev), Symptom::PfcStorm, v.label());
    f.title = "PFC storm: this port keeps sending pause".into();
    f.evidence.push(format!(
        "tx_pause_storm_warning_events +{warn}, tx_pause_storm_error_events +{err} {}",
        v.how()
    ));
    for (p, pm, bytes) in stuck {
        f.evidence.push(format!(
            "prio{p}: we sent pause {} of the interval (tx_prio{p}_pause +{}, duration +{} us) while prio{p} moved only {bytes} bytes",
            pct(pm),
            v.get(&format!("tx_prio{p}_pause")),
            v.get(&format!("tx_prio{p}_pause_duration")),
        ));
    }
    f.impact = "the job hangs or collapses to near zero throughput; NCCL times out after minutes; every flow sharing the priority, and upstream switches by head-of-line blocking, stall too".into();
    f.check_first = "this host is the source if its tx pause never stops: a stuck NIC/driver, a hung GPU or receiver process; isolate it; then look at the switch PFC watchdog (storm detected/restored)".into();
    f.why = "storm warning/error events count the firmware's stall watermarks: error means the NIC gave up pausing (storm prevention) and drops become possible; pause with no traffic means nothing is draining".into();
    out.push(f);
}

/// #1 and #2: pause received / sent, as a fraction of the interval
/// (measured from the duration counters, or estimated from frame counts
/// when the tool prints none). Since-boot totals are not pause findings:
/// [`since_boot`] lists them as totals.
fn pause(v: &CounterView, ctx: &Context, out: &mut Vec<Finding>) {
    if v.since_boot {
        return;
    }
    let switch = v.is_switch_port();
    for tag in tags() {
        let (rx, rxd, tx, txd) = prio_names(&tag);
        for (dir_rx, frames_n, dur_n) in [(true, &rx, &rxd), (false, &tx, &txd)] {
            let frames = v.get(frames_n);
            let dur = v.get(dur_n);
            if frames == 0 && dur == 0 {
                continue;
            }
            let share = v.pause_share(frames_n, dur_n);
            let pm = share.as_ref().map(|s| s.ppm);
            let sev = match pm {
                Some(pm) if pm >= 100_000 => Severity::Error,
                Some(pm) if pm >= 10_000 => Severity::Warning,
                Some(_) => Severity::Info,
                None if frames >= 100 => Severity::Warning,
                None => Severity::Info,
            };
            let symptom = if dir_rx {
                Symptom::RxPause
            } else {
                Symptom::TxPause
            };
            let mut f = Finding::new(sev, symptom, format!("{} {tag}", v.label()));
            let share_text = match &share {
                None => {
                    "interval unknown: pass --interval or add time metadata to judge it".to_string()
                }
                Some(s) => match &s.estimated {
                    None => format!("paused {} of the interval", pct(s.ppm)),
                    Some(how) => format!("paused about {} of the interval ({how})", pct(s.ppm)),
                },
            };
            let dur_text = if v.has(dur_n) {
                format!(", {dur_n} +{dur} us")
            } else {
                String::new()
            };
            f.evidence.push(format!(
                "{frames_n} +{frames}{dur_text} {}: {share_text}",
                v.how()
            ));
            // Is it on one port only?
            let others: Vec<&CounterView> =
                ctx.eth.iter().filter(|o| o.source != v.source).collect();
            if !others.is_empty() {
                let also = others.iter().filter(|o| o.get(frames_n) > 0).count();
                f.evidence.push(format!(
                    "{also} of {} other source(s) show {frames_n} growing too",
                    others.len()
                ));
            }
            let node = v.node();
            match (dir_rx, switch) {
                (true, false) => {
                    f.title =
                        format!("the peer is pausing our {tag} transmitter (held by the peer)");
                    f.impact = "this rank's sends stall in bursts; ring/tree collectives run at the pace of the slowest link: step time inflates and jitters, with no error anywhere".into();
                    f.check_first = "the switch port facing this NIC and what is downstream of it: incast towards this node's peers, an oversubscribed uplink, or a slow receiver behind the switch (look at ITS tx pause)".into();
                    f.why = "rx pause counts PFC frames received: the next hop's buffer for this priority hit XOFF, so the congestion is downstream, not here".into();
                }
                (true, true) => {
                    f.title = format!(
                        "switch port {} is held by PAUSE from its peer on {tag}",
                        v.label()
                    );
                    f.impact = "the switch cannot send on this port and priority: its queue towards the peer backs up, and when its own ingress buffers fill it pauses upstream in turn (congestion spreading)".into();
                    f.check_first = "the device at the other end of this port: a host NIC that cannot drain (its tx pause, PCIe), or the next switch's congested egress".into();
                    f.why = "a port counts PFC frames received when its peer's buffer for the priority crossed XOFF: the congestion is on the peer's side".into();
                }
                (false, false) => {
                    f.title = format!(
                        "we are pausing the peer on {tag}: this host cannot drain what arrives"
                    );
                    let stalls: Vec<String> = [
                        "outbound_pci_stalled_rd",
                        "outbound_pci_stalled_wr",
                        "rx_buffer_passed_thres_phy",
                    ]
                    .iter()
                    .filter(|n| v.get(n) > 0)
                    .map(|n| format!("{n} +{}", v.get(n)))
                    .collect();
                    if !stalls.is_empty() {
                        f.evidence.push(stalls.join(", "));
                    }
                    f.impact = "everything sending to this host is slowed; its peers see rx pause; with many senders the pause spreads upstream and unrelated flows slow down".into();
                    f.check_first = "host PCIe: outbound_pci_stalled_*, GPU-NIC locality in `nvidia-smi topo -m` (PIX/PXB, not SYS), PCIe width/speed in lspci, IOMMU/ATS; receive buffer sizes and cable_len in `mlnx_qos`; is the receiver posting buffers".into();
                    f.why = "tx pause counts PFC frames we sent: our own receive buffer for this priority crossed XOFF, so the bottleneck is inside this host, after the wire".into();
                }
                (false, true) => {
                    f.title = format!(
                        "switch port {} sends PAUSE on {tag}: a switch queue is congested (its ingress buffer crosses XOFF)",
                        v.label()
                    );
                    f.impact = "the device on this port is held off in bursts: its flows on the priority stall, including flows that never cross the congested egress (head-of-line blocking)".into();
                    f.check_first = format!(
                        "which egress of {node} the traffic arriving on this port converges on (fan-in, incast, an oversubscribed uplink), and whether that egress is itself held by PAUSE from downstream (rx pause on {node}'s other ports); ECN marking below XOFF so senders slow down first"
                    );
                    f.why = "a switch sends PAUSE on an ingress when the buffer it holds for that ingress and priority crosses XOFF: a queue inside the switch is congested, by fan-in or because its egress is paused from downstream; it says nothing about the hosts' PCIe".into();
                }
            }
            if sev == Severity::Info && pm.is_some() {
                f.impact = "negligible at this share of time: a little pause is how a lossless priority absorbs bursts".into();
            }
            out.push(f);
        }
    }
}

/// #10: traffic on a priority without PFC.
fn lossy_priority(v: &CounterView, ctx: &Context, out: &mut Vec<Finding>) {
    let bytes: Vec<u64> = (0..8)
        .map(|p| {
            v.get(&format!("rx_prio{p}_bytes"))
                .saturating_add(v.get(&format!("tx_prio{p}_bytes")))
        })
        .collect();
    let total: u64 = saturating_sum(bytes.iter().copied());
    if total == 0 {
        return;
    }
    let mut pfc: BTreeSet<u8> = v.pfc_prios().into_iter().collect();
    let qos_pfc: Vec<u8> = ctx
        .qos
        .iter()
        .flat_map(|(_, q)| q.pfc_priorities())
        .collect();
    let from_qos = pfc.is_empty() && !qos_pfc.is_empty();
    if from_qos {
        pfc.extend(qos_pfc);
    }
    let pfc_bytes: u64 = saturating_sum(pfc.iter().map(|p| bytes[usize::from(*p)]));
    let (top, top_bytes) = (0u8..8)
        .filter(|p| !pfc.contains(p))
        .map(|p| (p, bytes[usize::from(p)]))
        .max_by_key(|(_, b)| *b)
        .unwrap_or((0, 0));
    let roce_bytes = v
        .get("rx_vport_rdma_unicast_bytes")
        .saturating_add(v.get("tx_vport_rdma_unicast_bytes"));
    let sev = if roce_bytes > 0 {
        // Most RoCE bytes cannot be on a PFC priority.
        if u128::from(pfc_bytes) * 2 >= u128::from(roce_bytes) {
            return;
        }
        Severity::Error
    } else {
        // No RoCE byte counters: a dominant non-PFC priority carrying real
        // volume is suspicious, no more.
        if u128::from(top_bytes) * 10 < u128::from(total) * 9 || total < 1_000_000_000 {
            return;
        }
        Severity::Warning
    };
    let mut f = Finding::new(
        v.cap(sev),
        Symptom::LossyPriority,
        format!("{} prio{top}", v.label()),
    );
    f.title = format!("traffic runs on prio{top}, which has no PFC: RoCE is on a lossy priority");
    f.evidence.push(format!(
        "prio{top} carried {top_bytes} of {total} bytes {} ({}); PFC priorities carried {pfc_bytes}",
        v.how(),
        pct(u64::try_from(u128::from(top_bytes) * 1_000_000 / u128::from(total)).unwrap_or(1_000_000))
    ));
    if pfc.is_empty() {
        f.evidence.push(
            "no rx_prioN_pause / tx_prioN_pause rows at all: PFC is enabled on no priority".into(),
        );
    } else {
        let list: Vec<String> = pfc.iter().map(|p| format!("prio{p}")).collect();
        f.evidence.push(format!(
            "PFC is enabled on {}{}",
            list.join(", "),
            if from_qos { " (from mlnx_qos)" } else { "" }
        ));
    }
    if roce_bytes > 0 {
        f.evidence.push(format!(
            "RoCE is flowing: rx/tx_vport_rdma_unicast_bytes +{roce_bytes}"
        ));
    }
    f.impact = "any congestion on this priority becomes drops instead of pause, and every drop costs a go-back-N window: bandwidth collapses under incast".into();
    f.check_first = "`mlnx_qos -i`: trust mode (dscp/pcp), PFC enabled bits and dscp2prio; the traffic class the job sets (NCCL_IB_TC, perftest --tclass / -S); VLAN PCP when trusting pcp".into();
    f.why = "mlx5 prints per-priority pause rows only for priorities with PFC enabled; the bytes per priority show where RoCE actually lands".into();
    out.push(f);
}

/// Smallest volume (bytes) received on a priority that no host sent on
/// before the doctor calls it re-prioritised by the fabric.
const REMAP_MIN_BYTES: u64 = 64 * 1024;

/// #10 seen from the hosts' own counters, before anything drops: bytes
/// are conserved across a fabric, so what the hosts receive on a priority
/// some host sent on it. When two or more hosts are in the capture, the
/// hosts received a real volume on priority P that none of them sent on
/// (tx_prioP_bytes +0 on every host), P has no PFC on the receivers, and
/// the hosts sent at least as much on a PFC priority Q, then a switch
/// between them classified the frames marked Q into P (a trust mode or
/// DSCP map that differs from the NICs'): RoCE crosses the fabric on a
/// priority that drops instead of pausing. The switch whose ports receive
/// on Q but send on P, with nothing received on P, is named the origin.
/// A warning (nothing dropped yet in what the counters show); drops on P
/// are the loss check's error.
fn priority_remap(ctx: &Context, out: &mut Vec<Finding>) {
    let hosts: Vec<&CounterView> = ctx.eth.iter().filter(|v| !v.is_switch_port()).collect();
    if hosts.len() < 2 {
        return;
    }
    let sum = |views: &[&CounterView], name: &dyn Fn(u8) -> String, p: u8| -> u64 {
        saturating_sum(views.iter().map(|v| v.get(&name(p))))
    };
    let rx = |p: u8| format!("rx_prio{p}_bytes");
    let tx = |p: u8| format!("tx_prio{p}_bytes");
    let qos_pfc: BTreeSet<u8> = ctx
        .qos
        .iter()
        .flat_map(|(_, q)| q.pfc_priorities())
        .collect();
    let pfc_of = |v: &CounterView| -> BTreeSet<u8> {
        let own: BTreeSet<u8> = v.pfc_prios().into_iter().collect();
        if own.is_empty() {
            qos_pfc.clone()
        } else {
            own
        }
    };
    for p in 0u8..8 {
        let got = sum(&hosts, &rx, p);
        if got < REMAP_MIN_BYTES || sum(&hosts, &tx, p) > 0 {
            continue;
        }
        // The receivers of P, none of which runs PFC on it.
        let receivers: Vec<&&CounterView> = hosts.iter().filter(|v| v.get(&rx(p)) > 0).collect();
        if receivers.iter().any(|v| pfc_of(v).contains(&p)) {
            continue;
        }
        // The PFC priority the hosts sent that volume on.
        let Some((q, sent)) = (0u8..8)
            .filter(|q| *q != p && hosts.iter().any(|v| pfc_of(v).contains(q)))
            .map(|q| (q, sum(&hosts, &tx, q)))
            .filter(|(_, sent)| *sent >= got)
            .max_by_key(|(_, sent)| *sent)
        else {
            continue;
        };
        // The switch that receives on Q and sends on P.
        let mut by_switch: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
        for v in ctx.eth.iter().filter(|v| v.is_switch_port()) {
            let e = by_switch.entry(v.node()).or_default();
            e.0 = e.0.saturating_add(v.get(&rx(q)));
            e.1 = e.1.saturating_add(v.get(&tx(p)));
            e.2 = e.2.saturating_add(v.get(&rx(p)));
        }
        let remappers: Vec<(&String, &(u64, u64, u64))> = by_switch
            .iter()
            .filter(|(_, (in_q, out_p, in_p))| *in_q > 0 && *out_p > 0 && *in_p == 0)
            .collect();
        let names: Vec<String> = receivers.iter().map(|v| v.label()).collect();
        let subject = match remappers.as_slice() {
            [(sw, _)] => (*sw).clone(),
            _ => "fabric".to_string(),
        };
        let mut f = Finding::new(Severity::Warning, Symptom::LossyPriority, subject.clone());
        if subject != "fabric" {
            f.origin = Some(subject.clone());
        }
        f.affects = std::iter::once(subject.clone())
            .chain(names.iter().cloned())
            .collect();
        f.title = format!(
            "RoCE sent on prio{q} (PFC) arrives on prio{p} (no PFC): the fabric re-prioritises it{}, so it crosses on a priority that drops instead of pausing",
            if subject == "fabric" {
                String::new()
            } else {
                format!(" at {subject}")
            }
        );
        f.evidence.push(format!(
            "{} host(s) sent {sent} bytes on prio{q} and 0 on prio{p} (tx_prio{p}_bytes +0 on every host) {}",
            hosts.len(),
            hosts[0].how()
        ));
        for v in receivers.iter().take(4) {
            f.evidence.push(format!(
                "{}: rx_prio{p}_bytes +{} on prio{p}, where its PFC is off (PFC on {})",
                v.label(),
                v.get(&rx(p)),
                pfc_of(v)
                    .iter()
                    .map(|x| format!("prio{x}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        for (sw, (in_q, out_p, _)) in &remappers {
            f.evidence.push(format!(
                "switch {sw}: its ports received {in_q} bytes on prio{q} and none on prio{p}, yet sent {out_p} bytes on prio{p}"
            ));
        }
        let dropped = saturating_sum(ctx.eth.iter().map(|v| {
            v.get(&format!("rx_prio{p}_discards"))
                .max(v.get(&format!("rx_prio{p}_buf_discard")))
        }));
        if dropped == 0 {
            f.evidence.push(format!(
                "nothing dropped on prio{p} yet: at this load no queue filled; the first incast or congested link will drop instead of pause"
            ));
        }
        f.impact = "works at light load and fails under congestion: once a queue on the unprotected priority fills, frames are dropped and each drop costs a go-back-N window, so collectives slow down or time out exactly when the job is busiest".into();
        f.check_first = "the switch's trust mode and DSCP-to-priority (or PCP-to-priority) map against the NICs' (`mlnx_qos -i`: trust state and dscp2prio): RoCE's DSCP or PCP must land in the lossless priority on every switch port, with PFC and ECN on that priority".into();
        f.why = "a byte received on a priority was sent on some priority; when the hosts send only on the PFC priority and receive on another, a switch between them classified the frames differently than the NICs marked them".into();
        out.push(f);
    }
}

/// #6 (drops on NICs and retransmission counters) per source, merged.
fn loss(ctx: &Context, out: &mut Vec<Finding>) {
    for v in &ctx.eth {
        let pfc = v.pfc_prios();
        let mut ev: Vec<String> = Vec::new();
        let mut quiet: Vec<String> = Vec::new();
        let mut lossless = false;
        let mut headroom: Vec<String> = Vec::new();
        for p in 0u8..8 {
            let n = format!("rx_prio{p}_discards");
            let d = v.get(&n).max(v.get(&format!("rx_prio{p}_buf_discard")));
            if d > 0 {
                let on_pfc = pfc.contains(&p);
                lossless |= on_pfc;
                ev.push(format!(
                    "{n} +{d}{}",
                    if on_pfc {
                        " on a PFC (lossless) priority"
                    } else {
                        ""
                    }
                ));
                // Paused in time, dropped all the same: what arrived
                // after XOFF did not fit the headroom.
                let paused = v.get(&format!("tx_prio{p}_pause"));
                if on_pfc && paused > 0 && !v.since_boot {
                    headroom.push(format!(
                        "{} sent PAUSE on prio{p} (tx_prio{p}_pause +{paused}) and still dropped +{d} prio{p} frames {}",
                        v.label(),
                        v.how()
                    ));
                }
                quiet.extend(silent_port(v, p, ctx));
            }
        }
        // Discards of a port whose link went down are the link's loss,
        // reported with the link.
        let link_down = v.get("link_down_events_phy") > 0 && !v.since_boot;
        for n in ["rx_discards_phy", "tx_discards_phy"] {
            if v.get(n) > 0 && !(link_down && n == "tx_discards_phy") {
                ev.push(format!("{n} +{}", v.get(n)));
            }
        }
        if !headroom.is_empty() {
            out.push(headroom_short(v, headroom));
            continue;
        }
        if ev.is_empty() {
            continue;
        }
        let rx = v.get("rx_packets_phy");
        let rate = if rx > 0 {
            let d = v.get("rx_discards_phy");
            format!(
                " (rx_discards_phy is {} of rx_packets_phy +{rx})",
                pct(u64::try_from(u128::from(d) * 1_000_000 / u128::from(rx)).unwrap_or(u64::MAX))
            )
        } else {
            String::new()
        };
        let mut ev = vec![format!("{} {}{rate}", ev.join(", "), v.how())];
        ev.extend(quiet);
        let sev = if lossless {
            Severity::Critical
        } else {
            Severity::Error
        };
        let mut f = Finding::new(v.cap(sev), Symptom::PacketLoss, v.label());
        f.origin = Some(v.node());
        f.title = if lossless {
            "frames dropped on a lossless priority".into()
        } else {
            "the NIC port is dropping frames".into()
        };
        f.evidence = ev;
        fill_loss_text(&mut f);
        let dropped = v.get("rx_discards_phy").max(saturating_sum(
            (0..8).map(|p| v.get(&format!("rx_prio{p}_discards"))),
        ));
        if rx > 0 {
            f.impact = format!("{}; {}", go_back_n_cost(dropped, rx), f.impact);
        }
        out.push(f);
    }
    // Sequence errors from frames that overtook others, not from loss:
    // a simulated fabric known to pick next hops per frame, or the
    // signature of late frames: duplicates at the responders beyond what
    // ACK timeouts resent (a go-back-N resend of a frame that arrived
    // late is a duplicate; the resend of a lost one never is; a timeout
    // resends at most a window, bounded here by TIMEOUT_WINDOW_FRAMES)
    // and no drop counted anywhere.
    let discards = ctx.eth.iter().any(|v| {
        v.get("rx_discards_phy") > 0
            || v.get("tx_discards_phy") > 0
            || v.get("rx_crc_errors_phy") > 0
            || (0..8).any(|p| v.get(&format!("rx_prio{p}_discards")) > 0)
    });
    let no_drops = !discards && ctx.sim.iter().all(|v| v.drops == 0);
    let late = no_drops
        && rdma_total(ctx, "out_of_sequence") > 0
        && rdma_total(ctx, "duplicate_request")
            > rdma_total(ctx, "local_ack_timeout_err").saturating_mul(TIMEOUT_WINDOW_FRAMES);
    let spraying = spraying_switches(ctx);
    if late || !spraying.is_empty() {
        let fired = reordering(ctx, &spraying, no_drops, out);
        if fired && no_drops {
            return;
        }
    }
    for v in &ctx.rdma {
        let names = [
            "out_of_sequence",
            "packet_seq_err",
            "duplicate_request",
            "implied_nak_seq_err",
            "roce_adp_retrans",
        ];
        let ev: Vec<String> = names
            .iter()
            .filter(|n| v.get(n) > 0)
            .map(|n| format!("{n} +{}", v.get(n)))
            .collect();
        if ev.is_empty() {
            continue;
        }
        let mut f = Finding::new(v.cap(Severity::Error), Symptom::PacketLoss, v.label());
        f.title = "RoCE packets are being lost: go-back-N retransmissions".into();
        f.evidence = ev;
        f.evidence.push(v.how());
        fill_loss_text(&mut f);
        if !discards && !ctx.eth.is_empty() {
            f.title = "RoCE packets arrive out of sequence (go-back-N retransmissions): lost where no port of the capture counts a drop, or reordered".into();
            f.why = "out_of_sequence (responder) and packet_seq_err / duplicate_request (requester) grow when a packet goes missing or when a later one overtakes it; no port of the capture counted a discard or a CRC error, so the loss is on a port not captured (a switch's queue drops), or the fabric reorders: per-packet spraying or adaptive routing towards NICs that do not place frames out of order".into();
            f.check_first = format!(
                "the drop counters of the switches on the path (queue drops, `show queue counters`); then whether the switches spray packets or route adaptively while the NICs lack out-of-order placement. {}",
                f.check_first
            );
        }
        out.push(f);
    }
}

/// The most frames one ACK timeout makes a go-back-N requester resend, as
/// a bound: its window in flight, at most 16 MB in 4 KB frames (400 Gbit/s
/// over a 300 us round trip).
const TIMEOUT_WINDOW_FRAMES: u64 = 4096;

/// A counter summed over the RDMA views of the scope.
fn rdma_total(ctx: &Context, k: &str) -> u64 {
    saturating_sum(ctx.rdma.iter().map(|v| v.get(k)))
}

/// The switches of a simulated run that pick a next hop per frame, with
/// their mode (`("leaf0", "spray")`), in name order.
fn spraying_switches(ctx: &Context) -> Vec<(&str, &str)> {
    let mut v: Vec<(&str, &str)> = ctx
        .sim
        .iter()
        .flat_map(|s| &s.ports)
        .filter_map(|p| Some((p.node.as_str(), p.load_balancing.as_deref()?)))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Sequence errors where the fabric reorders: switches known to pick
/// next hops per frame (`switches`), or (none known) late frames with no
/// drop anywhere (`no_drops`). A queue pair's frames take paths of
/// different queueing delay and arrive out of order; go-back-N NICs
/// discard what overtook and resend from the missing frame. True when it
/// reported.
fn reordering(
    ctx: &Context,
    switches: &[(&str, &str)],
    no_drops: bool,
    out: &mut Vec<Finding>,
) -> bool {
    let total = |k: &str| rdma_total(ctx, k);
    let oos = total("out_of_sequence");
    let resent = total("roce_adp_retrans");
    if oos == 0 && total("packet_seq_err") == 0 {
        return false;
    }
    let hosts: Vec<String> = ctx
        .rdma
        .iter()
        .filter(|v| v.get("out_of_sequence") > 0)
        .map(CounterView::label)
        .collect();
    // What the resends cost, against what the NICs sent: a few frames
    // out of order are the price of spreading, not a fault.
    let sent = saturating_sum(
        ctx.eth
            .iter()
            .filter(|v| v.entity == Entity::HostPort)
            .map(|v| v.get("tx_packets_phy")),
    );
    let ppm =
        u64::try_from(u128::from(resent) * 1_000_000 / u128::from(sent.max(1))).unwrap_or(u64::MAX);
    let severity = match ppm {
        x if x >= 50_000 => Severity::Error,
        x if x >= 10_000 => Severity::Warning,
        _ => Severity::Info,
    };
    let first = switches.first().map_or("fabric", |s| s.0).to_string();
    let mut f = Finding::new(severity, Symptom::Reordering, first.clone());
    f.origin = (!switches.is_empty()).then_some(first);
    f.affects = switches
        .iter()
        .map(|s| s.0.to_string())
        .chain(hosts.iter().cloned())
        .collect();
    let shown: Vec<String> = switches
        .iter()
        .take(4)
        .map(|(node, mode)| format!("{node} ({mode})"))
        .collect();
    let named = match switches.len() {
        n if n > 4 => format!("{} and {} more", shown.join(", "), n - 4),
        _ => shown.join(", "),
    };
    if switches.is_empty() {
        f.title = "frames arrive late, not lost: the fabric reorders a queue pair's frames and the NICs' go-back-N resends what overtook".into();
        f.evidence.push(format!(
            "duplicate_request +{} with {} ACK timeout(s), each resending at most a window of {TIMEOUT_WINDOW_FRAMES} frames: responders received again frames they already had, which a frame that arrived after a later one (and was resent on its NAK) produces; a lost frame's resend is its first copy",
            total("duplicate_request"),
            total("local_ack_timeout_err")
        ));
        f.evidence.push(format!(
            "no discard, buffer drop or CRC error on any of the {} ports captured",
            ctx.eth.len()
        ));
    } else {
        f.title = format!(
            "{named} pick a next hop per frame: a queue pair's frames arrive out of order and the NICs' go-back-N resends what overtook"
        );
        f.evidence
            .push(format!("per-frame load balancing: {named}"));
    }
    f.evidence.push(format!(
        "out_of_sequence +{oos} at {} host(s), packet_seq_err +{}, frames resent +{resent} ({} of the {sent} frames the NICs sent)",
        hosts.len(),
        total("packet_seq_err"),
        pct(ppm)
    ));
    if no_drops && !switches.is_empty() {
        f.evidence
            .push("no frame was dropped anywhere in the run: every sequence error is a frame that overtook another".into());
    }
    f.impact = if severity == Severity::Info {
        format!(
            "a few frames overtook others: {resent} resent, {} of what the NICs sent; the flows hardly feel it",
            pct(ppm)
        )
    } else {
        format!(
            "each frame that overtakes another costs the window behind it: {resent} frames resent for {oos} out of sequence, {} of what the NICs sent; flows across these switches can finish later than under per-flow ECMP's collisions",
            pct(ppm)
        )
    };
    f.check_first = if switches.is_empty() {
        "the switches' load balancing (per-packet spraying, adaptive routing) and whether the NICs place frames out of order; if the capture misses switch ports on the path, their drop counters first".into()
    } else {
        "per-frame load balancing needs NICs that place frames out of order (and their adaptive-routing setting on); without them use per-flow ECMP, or flowlets whose gap is longer than the paths' delay difference".into()
    };
    f.why = "with nothing dropped, out_of_sequence only grows when a later frame arrives before an earlier one; a switch that picks a path per frame sends consecutive frames through queues of different depth, and a go-back-N responder NAKs every such arrival".into();
    out.push(f);
    true
}

/// Drops on a lossless priority at a port that paused on it: the PFC
/// headroom (the buffer above XOFF for what is still in flight when PAUSE
/// takes effect) is too small for the cable, the speed and the MTU.
fn headroom_short(v: &CounterView, lines: Vec<String>) -> Finding {
    let mut f = Finding::new(v.cap(Severity::Critical), Symptom::HeadroomShort, v.label());
    f.origin = Some(v.node());
    f.title = format!(
        "{} drops frames on a lossless priority although it sends PAUSE: its PFC headroom is too small for what is in flight after XOFF",
        v.label()
    );
    f.evidence = lines;
    let mtu = 4096u64 + 82;
    let example = headroom_bytes(100, 100_000_000_000, mtu);
    f.evidence.push(format!(
        "headroom needed per port and lossless priority = 2 x cable length x 5 ns/m x rate / 8 (data in flight both ways while PAUSE travels) + 2 x the largest frame (one being sent at each end) + the peer's response time; e.g. 100 m at 100 Gbit/s with {mtu}-byte frames: 2 x 500 ns x 12.5 B/ns + 2 x {mtu} = {example} bytes. Missing from the capture: the cable length, the port speed and the configured headroom (`mlnx_qos -i` buffer sizes and cable_len, the switch's buffer profile) to compare with"
    ));
    f.impact = "a \"lossless\" priority loses frames under congestion: each drop costs a go-back-N window or an ACK timeout, so incasts finish late with retransmissions although PFC is on and pausing".into();
    f.check_first = "the PFC headroom of this port's lossless priority against the cable length, the speed and the MTU (let the switch or `mlnx_qos --cable_len` compute it); the per-priority buffer-discard counter must stay at zero".into();
    f.why = "a port that sends PAUSE in time still receives what is on the wire and what the peer sends before the PAUSE takes effect; the headroom above XOFF must hold it, and drops on a priority that pauses mean it did not".into();
    f
}

/// Bytes of PFC headroom a port needs: twice the data in flight on a
/// cable of `meters` at `bps` (5 ns/m of propagation), plus two frames of
/// `frame` bytes.
fn headroom_bytes(meters: u64, bps: u64, frame: u64) -> u64 {
    let flight = u128::from(meters) * 5 * u128::from(bps) / 8 / 1_000_000_000;
    u64::try_from(2 * flight).unwrap_or(u64::MAX) + 2 * frame
}

/// A port that drops priority `p` without sending PAUSE for it while
/// other ports (of its own node when it has several, else of the capture)
/// do pause on `p`: PFC is off (no pause rows) or not acting on that
/// port, so it drops what its peers hold back. One evidence line:
/// `PORT sends no PAUSE on prioP (...) while A (+n), B (+m) pause on prioP`.
fn silent_port(v: &CounterView, p: u8, ctx: &Context) -> Option<String> {
    let tx = format!("tx_prio{p}_pause");
    if v.get(&tx) > 0 {
        return None;
    }
    let pausing = |same_node: bool| -> Vec<&CounterView> {
        ctx.eth
            .iter()
            .filter(|o| o.source != v.source && o.get(&tx) > 0)
            .filter(|o| !same_node || o.node() == v.node())
            .collect()
    };
    let mut peers = pausing(true);
    if peers.is_empty() {
        peers = pausing(false);
    }
    if peers.is_empty() {
        return None;
    }
    let named: Vec<String> = peers
        .iter()
        .take(4)
        .map(|o| format!("{} (+{})", o.label(), o.get(&tx)))
        .collect();
    let more = if peers.len() > 4 {
        format!(" and {} more", peers.len() - 4)
    } else {
        String::new()
    };
    Some(format!(
        "{}{SENDS_NO_PAUSE}prio{p} ({}) while {}{more} pause on prio{p}: PFC is {} on this port, so it drops what the other ports hold back",
        v.label(),
        if v.has(&tx) {
            format!("{tx} +0")
        } else {
            format!("no prio{p} pause rows")
        },
        named.join(", "),
        if v.has(&tx) { "not acting" } else { "off" }
    ))
}

/// Packets a go-back-N sender resends per loss in the cost estimate: a
/// window of about 128 KB in 4 KB packets, the bandwidth-delay product
/// of 100 Gbit/s over a 10 us round trip.
const GBN_WINDOW_PACKETS: u64 = 32;

/// What a drop rate of `dropped` in `received` frames costs a go-back-N
/// sender: each loss resends the window in flight, so goodput is about
/// 1 / (1 + p x W) of the rate and a bandwidth-bound step takes
/// (1 + p x W) as long.
fn go_back_n_cost(dropped: u64, received: u64) -> String {
    let p_ppm = u64::try_from(u128::from(dropped) * 1_000_000 / u128::from(received.max(1)))
        .unwrap_or(u64::MAX)
        .min(1_000_000);
    let cost_ppm = 1_000_000u64.saturating_add(p_ppm.saturating_mul(GBN_WINDOW_PACKETS));
    let good = 1_000_000_000_000u64 / cost_ppm.max(1);
    format!(
        "{} of the frames received here were dropped; go-back-N resends the window in flight per loss, so goodput is about 1 / (1 + p x W) of the rate: with W = {GBN_WINDOW_PACKETS} packets (4 KB packets filling 100 Gbit/s x 10 us) that is {}, and a bandwidth-bound all-reduce step through this port takes {}.{:03}x as long",
        pct(p_ppm),
        pct(good),
        cost_ppm / 1_000_000,
        (cost_ppm % 1_000_000) / 1000
    )
}

fn fill_loss_text(f: &mut Finding) {
    f.impact = "go-back-N resends whole windows, so 0.1% loss can cost a large share of bandwidth: NCCL busbw drops sharply (often below 1 GB/s) and becomes jittery".into();
    f.check_first = "is PFC enabled end to end on the RoCE priority, and is RoCE really on it (rx_prioN_packets, trust mode, dscp2prio)? then rx_discards_phy / rx_prioN_discards on NICs, switch queue drops, and CRC/FEC counters for corruption".into();
    f.why = "out_of_sequence (responder) and packet_seq_err / duplicate_request (requester) only grow when packets go missing; discards are frames the port had no buffer for".into();
}

/// #7: ACK timeouts and retry-exceeded completions.
fn ack_timeout(ctx: &Context, out: &mut Vec<Finding>) {
    let mut errors: Vec<String> = Vec::new();
    for (name, p) in &ctx.perftest {
        for e in p.errors.iter().filter(|e| e.status == Some(12)) {
            errors.push(format!(
                "{name} line {}: perftest completion status 12 (retry exceeded){}",
                e.line,
                e.vendor_err
                    .map(|v| format!(", syndrome {v:#x}"))
                    .unwrap_or_default()
            ));
        }
    }
    for (name, n) in &ctx.nccl {
        for e in n.errors.iter().filter(|e| e.status == Some(12)) {
            errors.push(format!(
                "{name} line {}: NCCL completion status=12{}",
                e.line,
                e.vendor_err
                    .map(|v| format!(" vendor err {v}"))
                    .unwrap_or_default()
            ));
        }
    }
    let mut any_counter = false;
    for v in &ctx.rdma {
        let t = v.get("local_ack_timeout_err");
        if t == 0 {
            continue;
        }
        any_counter = true;
        let sev = if errors.is_empty() {
            Severity::Error
        } else {
            Severity::Critical
        };
        let mut f = Finding::new(v.cap(sev), Symptom::AckTimeout, v.label());
        f.title = "the QP's ACK timer expires: retransmission by timeout".into();
        f.evidence
            .push(format!("local_ack_timeout_err +{t} {}", v.how()));
        let loss = v
            .get("out_of_sequence")
            .saturating_add(v.get("packet_seq_err"));
        let traffic = v
            .get("rx_write_requests")
            .saturating_add(v.get("rx_read_requests"));
        if loss > 0 {
            f.evidence.push(format!("with loss counters out_of_sequence + packet_seq_err = {loss}: timeouts under load, tail drops"));
        } else if traffic == 0 && v.has("rx_write_requests") {
            f.evidence.push(
                "no inbound RDMA requests at all: the two NICs may not be able to exchange RoCE"
                    .into(),
            );
        }
        f.evidence.extend(errors.iter().cloned());
        fill_timeout_text(&mut f);
        out.push(f);
    }
    if !any_counter && !errors.is_empty() {
        let mut f = Finding::new(Severity::Critical, Symptom::AckTimeout, "job log");
        f.title = "work requests failed with transport retry counter exceeded (status 12)".into();
        f.evidence = errors;
        fill_timeout_text(&mut f);
        out.push(f);
    }
}

fn fill_timeout_text(f: &mut Finding) {
    f.impact = "each timeout stalls the QP for the whole ACK timeout (4.096 us x 2^NCCL_IB_TIMEOUT, about 4 s at 20): multi-second hiccups; after NCCL_IB_RETRY_CNT (7) retries the collective aborts with status 12".into();
    f.check_first = "at the very first transfer: GID index (RoCEv2 IPv4 entry from show_gids, NCCL_IB_GID_INDEX), VLAN/route/ACL, path MTU; reproduce with perftest using the same -x and --tclass. Under load: find the drops (see packet-loss)".into();
    f.why = "local_ack_timeout_err counts ACK timer expiries on the requester: lost tail packets, lost ACKs or a peer that never answers; status 12 is what is left when the retries run out".into();
}

/// Share (ppm) of a receiver's packets carrying a CE mark from which the
/// marks are a standing queue rather than a burst: 1 %.
const STANDING_MARKS_PPM: u64 = 10_000;

/// #4 and #5, plus the balance summary.
fn ecn(ctx: &Context, out: &mut Vec<Finding>) {
    let cc: Vec<&CounterView> = ctx
        .rdma
        .iter()
        .filter(|r| {
            r.has("np_ecn_marked_roce_packets") || r.has("np_cnp_sent") || r.has("rp_cnp_handled")
        })
        .collect();
    if cc.is_empty() {
        return;
    }
    let marked: u64 = saturating_sum(cc.iter().map(|r| r.get("np_ecn_marked_roce_packets")));
    let sent: u64 = saturating_sum(cc.iter().map(|r| r.get("np_cnp_sent")));
    let handled: u64 = saturating_sum(cc.iter().map(|r| r.get("rp_cnp_handled")));
    let ignored: u64 = saturating_sum(cc.iter().map(|r| r.get("rp_cnp_ignored")));
    let since_boot = cc.iter().all(|r| r.since_boot);
    // Pause pressure anywhere.
    let mut pause_ev = Vec::new();
    for v in &ctx.eth {
        for tag in tags() {
            let (rx, rxd, tx, txd) = prio_names(&tag);
            for (n, d) in [(&rx, &rxd), (&tx, &txd)] {
                let frames = v.get(n);
                if frames == 0 {
                    continue;
                }
                let heavy = match v.ppm_of_interval(v.get(d)) {
                    Some(pm) => pm >= 10_000,
                    None => frames >= 100,
                };
                if heavy && !v.since_boot {
                    pause_ev.push(format!("{} {n} +{frames}, {d} +{} us", v.label(), v.get(d)));
                }
            }
        }
    }
    let paused = !pause_ev.is_empty();
    if paused && marked == 0 && sent == 0 {
        let cap = if since_boot {
            Severity::Warning
        } else {
            Severity::Error
        };
        let mut f = Finding::new(cap, Symptom::EcnNotMarking, "fabric");
        f.title = "PFC is doing all the work: no ECN marks, no CNPs".into();
        f.evidence = pause_ev;
        f.evidence.push(format!(
            "np_ecn_marked_roce_packets +{marked}, np_cnp_sent +{sent}, rp_cnp_handled +{handled}"
        ));
        f.impact = "DCQCN never engages, so senders never slow down: pause spreads, victim flows stall, and bandwidth shares become unfair (two senders into one port can end up far below line rate in total)".into();
        f.check_first = "switch ECN/WRED on the RoCE queue with thresholds below the PFC XOFF point; packets leaving ECT-capable (ECN bits of NCCL_IB_TC / --tclass); roce_np/enable for the priority; the traffic really on the intended priority".into();
        f.why = "with ECN working, congestion shows first as np_ecn_marked_roce_packets and np_cnp_sent on the receivers; pause with none of them means the switch never marked".into();
        out.push(f);
    }
    let np_present = cc.iter().any(|r| r.has("np_cnp_sent"));
    if marked > 0 && sent == 0 && np_present {
        // Marks nobody answers only cost something when the congestion
        // they signal went on to pause (>= 1 % of the time) or drop.
        let dropped = ctx.eth.iter().any(|v| {
            v.get("rx_discards_phy") > 0
                || (0..8).any(|p| v.get(&format!("rx_prio{p}_discards")) > 0)
        });
        // Marks on a steady share of what a receiver gets: its queue
        // stands above Kmin, and every packet waits behind it.
        let standing = cc
            .iter()
            .filter(|r| r.get("np_ecn_marked_roce_packets") > 0)
            .filter_map(|r| {
                let m = r.get("np_ecn_marked_roce_packets");
                let rx = ctx
                    .eth
                    .iter()
                    .find(|v| !v.is_switch_port() && v.label() == r.label())
                    .map(|v| v.get("rx_packets_phy"))
                    .filter(|p| *p > 0)?;
                let ppm = u64::try_from(u128::from(m) * 1_000_000 / u128::from(rx)).ok()?;
                (ppm >= STANDING_MARKS_PPM).then(|| (r.label(), m, rx, ppm))
            })
            .max_by_key(|x| x.3);
        let hurt = paused || dropped || standing.is_some();
        let mut f = Finding::new(
            if since_boot || !hurt {
                Severity::Info
            } else {
                Severity::Warning
            },
            Symptom::CnpNotHandled,
            "fabric",
        );
        if !hurt {
            f.evidence.push("no port paused 1 % of the time or more and none dropped: the unanswered marks cost nothing in this capture".into());
        }
        if let Some((host, m, rx, ppm)) = &standing {
            f.evidence.push(format!(
                "{host}: {} of the packets it received carry a CE mark (np_ecn_marked_roce_packets +{m} of rx_packets_phy +{rx}): a queue stands above Kmin at its switch and nothing slows the senders down, so every packet to it waits behind that queue",
                pct(*ppm)
            ));
        }
        f.title = "switches mark ECN but no receiver sends CNPs: DCQCN's notification point is off"
            .into();
        let mut hot: Vec<&&CounterView> = cc
            .iter()
            .filter(|r| r.get("np_ecn_marked_roce_packets") > 0)
            .collect();
        hot.sort_by_key(|r| std::cmp::Reverse(r.get("np_ecn_marked_roce_packets")));
        for r in hot.iter().take(4) {
            f.evidence.push(format!(
                "{}: np_ecn_marked_roce_packets +{}, np_cnp_sent +0 {}",
                r.label(),
                r.get("np_ecn_marked_roce_packets"),
                r.how()
            ));
        }
        f.affects = hot.iter().map(|r| r.label()).collect();
        f.impact = "senders never learn of the congestion the switches see, so queues grow until PFC pauses (or, without PFC, until drops): the head-of-line blocking and unfairness DCQCN exists to prevent".into();
        f.check_first = "/sys/class/net/<if>/ecn/roce_np/enable/<prio> on the receivers and roce_rp/enable/<prio> on the senders for the RoCE priority (mlx5), or the vendor's DCQCN switch; the CNP priority (cnp_802p_prio / cnp_dscp)".into();
        f.why = "np_ecn_marked_roce_packets counts CE-marked RoCE packets received; a notification point answers them with CNPs (np_cnp_sent) unless disabled".into();
        out.push(f);
    }
    // One receiver taking most of the marks: a slow or incast receiver.
    if cc.len() >= 3 && marked > 0 {
        if let Some(top) = cc
            .iter()
            .max_by_key(|r| r.get("np_ecn_marked_roce_packets"))
        {
            let m = top.get("np_ecn_marked_roce_packets");
            if u128::from(m) * 2 > u128::from(marked) {
                let mut f = Finding::new(Severity::Info, Symptom::SlowReceiver, top.label());
                f.origin = Some(top.node());
                f.title = format!(
                    "{} receives {} of the fabric's ECN marks: congestion converges on this receiver",
                    top.label(),
                    pct(u64::try_from(u128::from(m) * 1_000_000 / u128::from(marked)).unwrap_or(0))
                );
                f.evidence.push(format!(
                    "{}: np_ecn_marked_roce_packets +{m}, np_cnp_sent +{} of fabric-wide +{marked} marks over {} sources",
                    top.label(),
                    top.get("np_cnp_sent"),
                    cc.len()
                ));
                f.impact = "flows into this host set the pace: with PFC its ToR pauses upstream, without it they lose packets".into();
                f.check_first = "how many senders target this host at once (incast), and whether the host drains at line rate (tx pause from its NIC, PCIe, rx_out_of_buffer)".into();
                f.why = "switches mark packets on the queue that builds; the marks land on the receiver behind it, so one receiver with most marks is the congestion point".into();
                out.push(f);
            }
        }
    }
    let mut cnp_ev = Vec::new();
    if ignored > 0 {
        cnp_ev.push(format!(
            "rp_cnp_ignored +{ignored}: CNPs arrived but the rate was not cut"
        ));
    }
    if cc.len() >= 2 {
        let senders_flat: Vec<&&CounterView> = cc
            .iter()
            .filter(|r| {
                r.get("np_cnp_sent") == 0 && r.has("rp_cnp_handled") && r.get("rp_cnp_handled") == 0
            })
            .collect();
        let receivers: Vec<&&CounterView> =
            cc.iter().filter(|r| r.get("np_cnp_sent") > 0).collect();
        if !receivers.is_empty() && !senders_flat.is_empty() && handled == 0 {
            for r in &receivers {
                cnp_ev.push(format!(
                    "{}: np_cnp_sent +{} {}",
                    r.label(),
                    r.get("np_cnp_sent"),
                    r.how()
                ));
            }
            for s in &senders_flat {
                cnp_ev.push(format!("{}: rp_cnp_handled +0 {}", s.label(), s.how()));
            }
        }
    }
    if !cnp_ev.is_empty() {
        let cap = if since_boot {
            Severity::Warning
        } else {
            Severity::Error
        };
        let mut f = Finding::new(cap, Symptom::CnpNotHandled, "fabric");
        f.title = "receivers send CNPs but senders do not slow down".into();
        f.evidence = cnp_ev;
        f.impact = "senders keep full rate despite congestion: sustained pause or drops and long tails in collective completion times".into();
        f.check_first = "roce_rp/enable/<prio> on the senders for the priority CNPs arrive on; cnp_dscp / cnp_802p_prio must map to an RP-enabled priority and must not be dropped or remarked by the switch; ROCE_CC_PRIO_MASK in firmware".into();
        f.why = "np_cnp_sent counts CNPs leaving the notification point; rp_cnp_handled counts CNPs the reaction point acted on; a gap between them means the CNPs are lost or ignored".into();
        out.push(f);
    }
    let mut f = Finding::new(Severity::Info, Symptom::EcnBalance, "fabric");
    f.title = "ECN/CNP balance".into();
    f.evidence.push(format!(
        "np_ecn_marked_roce_packets +{marked}, np_cnp_sent +{sent}, rp_cnp_handled +{handled}, rp_cnp_ignored +{ignored}"
    ));
    f.why = "CNPs are rate-limited per QP (min_time_between_cnps), so far fewer CNPs than marks is normal; handled should track sent across the fabric".into();
    out.push(f);
}

/// #8 from counters: a link that went down (once: `link-down`) or flaps
/// (more than once: `link-degraded`). Since-boot totals are not a live
/// fault: [`since_boot`] lists them.
fn link_counters(v: &CounterView, out: &mut Vec<Finding>) {
    let flaps = v.get("link_down_events_phy");
    if flaps == 0 || v.since_boot {
        return;
    }
    // Frames queued for a link that goes down are discarded at its
    // egress: loss in the same window is this flap's doing, so it ranks
    // above the loss it causes.
    let lost = v.get("tx_discards_phy");
    let sev = if lost > 0 {
        Severity::Critical
    } else {
        Severity::Error
    };
    let once = flaps == 1;
    let symptom = if once {
        Symptom::LinkDown
    } else {
        Symptom::LinkDegraded
    };
    let mut f = Finding::new(sev, symptom, v.label());
    f.origin = Some(v.node());
    let what = if once {
        "the link went down".to_string()
    } else {
        format!("the link went down and came back {flaps} times (flapping)")
    };
    f.title = if lost > 0 {
        format!("{what}: {lost} frames queued for it were lost")
    } else {
        what
    };
    f.evidence
        .push(format!("link_down_events_phy +{flaps} {}", v.how()));
    if lost > 0 {
        f.evidence.push(format!(
            "tx_discards_phy +{lost} on the same port: frames queued for the link when it failed, or sent its way before the routes moved (link-down discards, not buffer drops)"
        ));
    }
    let bits = v.get("rx_bits_phy");
    let corrected = v.get("rx_corrected_bits_phy");
    if bits > 0 && corrected > 0 {
        f.evidence.push(format!(
            "rx_corrected_bits_phy +{corrected} of rx_bits_phy +{bits}"
        ));
    }
    fill_link_text(&mut f);
    if once {
        f.impact = "flows that crossed the link lose what was queued or in flight and stall until the routes move: recovery by go-back-N, or by an ACK timeout when a message's tail was lost; afterwards the fabric runs with one link fewer".into();
        f.check_first = "the link that went down: link-down events at both ends, the cable and optics, the switch log; then how fast routing moved the traffic off it (convergence time)".into();
        f.why = "link_down_events_phy counts the times the port lost its link; the tx discards of the same port are the frames that had nowhere to go".into();
    }
    out.push(f);
}

fn fill_link_text(f: &mut Finding) {
    f.impact = "one slow or flapping link sets the pace of the whole collective: step time up by as much as the speed ratio, with no error anywhere; flaps add stalls and QP errors".into();
    f.check_first = "ibv_devinfo active_width x active_speed against the other ports; FEC/BER counters (rx_corrected_bits_phy, rx_pcs_symbol_err_phy against rx_bits_phy) and module temperature; reseat or replace the cable/optic".into();
    f.why = "a port that negotiated fewer lanes or a lower lane speed still links up and passes traffic, only slower; link_down_events_phy counts flaps".into();
}

/// #8 from ibv_devinfo / ibstat.
fn link_inventory(ctx: &Context, out: &mut Vec<Finding>) {
    let mut ports = Vec::new();
    for (file, devs) in &ctx.devinfo {
        for d in devs {
            for p in &d.ports {
                ports.push((file, d, p));
            }
        }
    }
    for (file, d, p) in &ports {
        if !p.active && p.state.is_some() {
            let mut f = Finding::new(
                Severity::Error,
                Symptom::LinkDegraded,
                format!("{}/{}", d.name, p.port),
            );
            f.title = "port is not active".into();
            f.evidence.push(format!(
                "{file}: state {}, physical state {}",
                p.state.as_deref().unwrap_or("?"),
                p.phys_state.as_deref().unwrap_or("?")
            ));
            fill_link_text(&mut f);
            out.push(f);
        }
    }
    let mut best: BTreeMap<String, u64> = BTreeMap::new();
    for (_, _, p) in &ports {
        if let (Some(r), true) = (p.rate_bps, p.active) {
            let layer = p.link_layer.clone().unwrap_or_default();
            let e = best.entry(layer).or_insert(0);
            *e = (*e).max(r);
        }
    }
    for (file, d, p) in &ports {
        let layer = p.link_layer.clone().unwrap_or_default();
        let (Some(r), Some(b)) = (p.rate_bps, best.get(&layer)) else {
            continue;
        };
        if p.active && r < *b {
            let mut f = Finding::new(
                Severity::Error,
                Symptom::LinkDegraded,
                format!("{}/{}", d.name, p.port),
            );
            f.title = "link runs below the speed of its peers".into();
            let width = p
                .width_lanes
                .map(|w| format!("{w}X"))
                .unwrap_or_else(|| "?".into());
            f.evidence.push(format!(
                "{file}: {}/{} at {} Gb/s (width {width}) while the fastest {layer} port runs {} Gb/s",
                d.name,
                p.port,
                r / 1_000_000_000,
                b / 1_000_000_000
            ));
            fill_link_text(&mut f);
            // A ring collective moves at its slowest link's pace.
            let milli = u128::from(*b) * 1000 / u128::from(r.max(1));
            f.impact = format!(
                "this port carries {} of the fastest port's rate: a bandwidth-bound ring all-reduce through it (step time ~ 2(n-1)/n x S / B at the slowest link) takes {}.{:03}x as long; {}",
                pct(u64::try_from(u128::from(r) * 1_000_000 / u128::from((*b).max(1))).unwrap_or(0)),
                milli / 1000,
                milli % 1000,
                f.impact
            );
            out.push(f);
        }
    }
}

/// #12 from ethtool.
fn corruption_eth(v: &CounterView, out: &mut Vec<Finding>) {
    let names = ["rx_crc_errors_phy", "rx_symbol_err_phy"];
    let ev: Vec<String> = names
        .iter()
        .filter(|n| v.get(n) > 0)
        .map(|n| format!("{n} +{}", v.get(n)))
        .collect();
    if ev.is_empty() {
        return;
    }
    let mut f = Finding::new(v.cap(Severity::Error), Symptom::Corruption, v.label());
    f.origin = Some(v.node());
    f.title = "corrupted frames on this link".into();
    f.evidence = ev;
    let bits = v.get("rx_bits_phy");
    if bits > 0 {
        let errs = v
            .get("rx_symbol_err_phy")
            .saturating_add(v.get("rx_crc_errors_phy"));
        f.evidence
            .push(format!("{errs} errors over rx_bits_phy +{bits}"));
    }
    f.evidence.push(v.how());
    fill_corruption_text(&mut f);
    let rx = v.get("rx_packets_phy");
    let bad = v.get("rx_crc_errors_phy");
    if rx > 0 && bad > 0 {
        f.impact = format!(
            "{}; {}",
            go_back_n_cost(bad, rx.saturating_add(bad)),
            f.impact
        );
    }
    out.push(f);
}

/// #12 from RDMA counters.
fn corruption_rdma(v: &CounterView, out: &mut Vec<Finding>) {
    let n = v.get("rx_icrc_encapsulated");
    if n == 0 {
        return;
    }
    let mut f = Finding::new(v.cap(Severity::Error), Symptom::Corruption, v.label());
    f.title = "RoCE packets with a bad ICRC".into();
    f.evidence
        .push(format!("rx_icrc_encapsulated +{n} {}", v.how()));
    fill_corruption_text(&mut f);
    out.push(f);
}

/// InfiniBand: `PortXmitWait` (perfquery) climbing. A port waits when it
/// has data and its peer granted no credits: the peer's buffer for the
/// lane is full behind a congested port further on. One finding names the
/// port that waited most, with every waiting port as the congestion tree
/// it belongs to. Severity: an error when the top port waited longer than
/// it sent, reading a tick as one 64-byte block's time (the simulator's
/// tick; hardware ticks vary, so the evidence says what was assumed); a
/// warning otherwise; since-boot totals say nothing about now (info).
fn credit_wait(ctx: &Context, out: &mut Vec<Finding>) {
    let mut waiting: Vec<&CounterView> = ctx
        .rdma
        .iter()
        .filter(|v| v.get("PortXmitWait") > 0)
        .collect();
    if waiting.is_empty() {
        return;
    }
    waiting.sort_by(|a, b| {
        b.get("PortXmitWait")
            .cmp(&a.get("PortXmitWait"))
            .then(a.label().cmp(&b.label()))
    });
    let top = waiting[0];
    let wait = top.get("PortXmitWait");
    let words = top.get("PortXmitData");
    // Ticks of 64 B against 4-byte words: waited longer than it sent.
    let long = u128::from(wait) * 16 > u128::from(words);
    let severity = if top.since_boot {
        Severity::Info
    } else if long {
        Severity::Error
    } else {
        Severity::Warning
    };
    let root = credit_tree_root(ctx, top);
    let subject = root
        .as_ref()
        .map_or_else(|| top.label(), |(r, _)| r.clone());
    let mut f = Finding::new(severity, Symptom::CreditWait, subject.clone());
    f.origin = Some(match &root {
        Some((r, _)) => super::names::node_of(r),
        None => top.node(),
    });
    f.affects = vec![subject.clone()];
    f.affects
        .extend(waiting.iter().map(|v| v.label()).filter(|l| *l != subject));
    f.title = match &root {
        Some((r, _)) => format!(
            "congestion tree on credits rooted at {r}: PortXmitWait climbing on {} port(s) upstream of it, {} most",
            waiting.len(),
            top.label()
        ),
        None => format!(
            "PortXmitWait climbing on {}: it has data to send and no credits from its peer",
            top.label()
        ),
    };
    if let Some((_, path)) = &root {
        f.evidence.push(path.clone());
    }
    for v in waiting.iter().take(4) {
        f.evidence.push(format!(
            "{}: PortXmitWait +{}, PortXmitData +{} words {}",
            v.label(),
            v.get("PortXmitWait"),
            v.get("PortXmitData"),
            v.how()
        ));
    }
    if waiting.len() > 4 {
        f.evidence.push(format!(
            "{} more ports waited for credits",
            waiting.len() - 4
        ));
    }
    f.evidence.push(format!(
        "{}: waited {} it sent (ticks read as one 64-byte block's time each, the simulator's tick; a switch's or HCA's own tick may differ)",
        top.label(),
        if long { "longer than" } else { "less than" }
    ));
    f.impact = "frames wait at these ports for buffer downstream: the flows through them run at what the congested port behind them drains, and the wait spreads hop by hop upstream (a congestion tree) to victim flows that share a port with them; no frame is dropped".into();
    f.check_first = format!(
        "where {}'s credits go: its peer's egress ports; the one busy sending with no PortXmitWait of its own is the congested port (an incast's last hop, a slow HCA). Then the traffic pattern (fan-in), the SL-to-VL mapping (a victim on its own VL keeps its own credits) and InfiniBand congestion control (FECN/BECN)",
        top.label()
    );
    f.why = "PortXmitWait counts ticks a port had data but no flow-control credits for it: the receiver's buffer for that virtual lane was full. It is InfiniBand's PAUSE received: credits never drop a frame, the wait is the whole cost".into();
    out.push(f);
}

/// The port at the root of the credit wait `top` belongs to, when a run's
/// results give each port's peer: from `top`, to its peer node's port
/// that waited most, and so on, until a node none of whose ports wait;
/// its port that sent the most is the congested one. Returns it with the
/// path walked, as evidence. `None` without results or a peer to follow.
fn credit_tree_root(ctx: &Context, top: &CounterView) -> Option<(String, String)> {
    let ports = &ctx.sim.iter().find(|v| !v.ports.is_empty())?.ports;
    let view = |src: &str| ctx.rdma.iter().find(|v| v.label() == src);
    let wait = |src: &str| view(src).map_or(0, |v| v.get("PortXmitWait"));
    let sent = |src: &str| view(src).map_or(0, |v| v.get("PortXmitData"));
    let mut at = top.label();
    let mut path = vec![at.clone()];
    for _ in 0..ports.len() {
        let peer = &ports.iter().find(|p| p.source == at)?.peer;
        let on_peer: Vec<&str> = ports
            .iter()
            .filter(|p| &p.node == peer)
            .map(|p| p.source.as_str())
            .collect();
        let next = on_peer
            .iter()
            .filter(|s| wait(s) > 0 && !path.iter().any(|p| p == *s))
            .max_by_key(|s| (wait(s), std::cmp::Reverse(**s)));
        match next {
            Some(s) => {
                at = s.to_string();
                path.push(at.clone());
            }
            None => {
                let root = on_peer
                    .iter()
                    .max_by_key(|s| (sent(s), std::cmp::Reverse(**s)))?
                    .to_string();
                let text = format!(
                    "{} wait(s) for credits in turn; {root} sent {} words without waiting: the congested port the credits queue behind",
                    path.join(" -> "),
                    sent(&root)
                );
                return Some((root, text));
            }
        }
    }
    None
}

fn fill_corruption_text(f: &mut Finding) {
    f.impact =
        "corrupted packets are dropped: the same go-back-N cost as loss, localised to one link"
            .into();
    f.check_first = "the optic or cable of this port, its FEC mode, and the BER counters (rx_corrected_bits_phy, rx_pcs_symbol_err_phy against rx_bits_phy)".into();
    f.why = "CRC/symbol errors are counted before any buffer decision: they come from the physical layer, not from congestion".into();
}

/// #9 from counters.
fn mtu_counters(v: &CounterView, out: &mut Vec<Finding>) {
    let names = ["rx_oversize_pkts_phy", "rx_out_of_range_len_phy"];
    let ev: Vec<String> = names
        .iter()
        .filter(|n| v.get(n) > 0)
        .map(|n| format!("{n} +{}", v.get(n)))
        .collect();
    if ev.is_empty() {
        return;
    }
    let mut f = Finding::new(v.cap(Severity::Error), Symptom::MtuMismatch, v.label());
    f.origin = Some(v.node());
    f.title = "frames larger than our MTU arrive: the peer's MTU is larger".into();
    f.evidence = ev;
    f.evidence.push(v.how());
    fill_mtu_text(&mut f);
    out.push(f);
}

fn fill_mtu_text(f: &mut Finding) {
    f.impact = "a smaller RoCE MTU means up to 4x more packets and headers and a lower message rate; a hop with an MTU below the QP's path MTU drops large packets silently, which looks like retransmit timeouts".into();
    f.check_first = "netdev MTU on both hosts (RoCE MTU is the largest IB MTU that fits: 1500 -> 1024, 4200 or more -> 4096), switch port MTU on every hop, and the Mtu line of perftest (it negotiates the smaller side)".into();
    f.why = "rx_oversize_pkts_phy counts frames above our MTU; active_mtu below max_mtu or perftest's Mtu below 4096 shows the negotiated RoCE MTU".into();
}

/// #9 from devinfo and perftest.
fn mtu_inventory(ctx: &Context, out: &mut Vec<Finding>) {
    let mut active = BTreeSet::new();
    for (file, devs) in &ctx.devinfo {
        for d in devs {
            for p in &d.ports {
                if let (Some(a), Some(m)) = (p.active_mtu, p.max_mtu) {
                    active.insert(a);
                    if a < m && p.active {
                        let mut f = Finding::new(
                            Severity::Warning,
                            Symptom::MtuMismatch,
                            format!("{}/{}", d.name, p.port),
                        );
                        f.title = "RoCE MTU below what the port supports".into();
                        f.evidence
                            .push(format!("{file}: active_mtu {a} < max_mtu {m}"));
                        fill_mtu_text(&mut f);
                        f.impact = format!("{}; {}", mtu_cost(a), f.impact);
                        out.push(f);
                    }
                }
            }
        }
    }
    // Several hosts: compared host by host (hosts.rs), named there.
    let hosts: BTreeSet<String> = ctx
        .devinfo
        .iter()
        .map(|(file, _)| host_from_path(file))
        .collect();
    if active.len() > 1 && hosts.len() < 2 {
        let mut f = Finding::new(Severity::Warning, Symptom::MtuMismatch, "devices");
        f.title = "ports run different RoCE MTUs".into();
        f.evidence
            .push(format!("active_mtu values seen: {active:?}"));
        fill_mtu_text(&mut f);
        out.push(f);
    }
    for (file, p) in &ctx.perftest {
        for run in &p.runs {
            let eth = run.link_type.as_deref() == Some("Ethernet");
            if let (Some(m), true) = (run.mtu_bytes, eth) {
                if m < 4096 {
                    let mut f = Finding::new(Severity::Warning, Symptom::MtuMismatch, file.clone());
                    f.title = format!("perftest negotiated a {m}-byte RoCE MTU");
                    f.evidence.push(format!(
                        "{file} line {}: Mtu : {m}[B] (4096 expected on a jumbo-frame fabric)",
                        run.line
                    ));
                    fill_mtu_text(&mut f);
                    f.impact = format!("{}; {}", mtu_cost(m), f.impact);
                    out.push(f);
                }
            }
        }
    }
}

/// #11: GPUDirect RDMA.
fn gdr(ctx: &Context, out: &mut Vec<Finding>) {
    for (file, n) in &ctx.nccl {
        if n.no_ib_device || n.network.as_deref() == Some("Socket") {
            let mut f = Finding::new(Severity::Error, Symptom::SocketFallback, file.clone());
            f.title = "NCCL uses TCP sockets, not RDMA".into();
            f.evidence.push(format!(
                "network {}, NET/IB no device found: {}",
                n.network.as_deref().unwrap_or("?"),
                n.no_ib_device
            ));
            f.impact = "inter-node collectives run over TCP: a fraction of RDMA bandwidth and much more CPU".into();
            f.check_first = "NCCL_IB_DISABLE, NCCL_IB_HCA filter, the rdma devices (ibv_devinfo), and that the container sees /dev/infiniband".into();
            f.why = "NCCL falls back to sockets when it finds no usable IB/RoCE device".into();
            out.push(f);
        }
        let net: Vec<_> = n.net_channels().collect();
        let ib: Vec<_> = net.iter().filter(|c| c.transport == "NET/IB").collect();
        let no_gdr = ib.iter().filter(|c| !c.gdr).count();
        if ib.is_empty() || no_gdr == 0 {
            continue;
        }
        let mut f = Finding::new(Severity::Warning, Symptom::GdrNotUsed, file.clone());
        f.title = "NCCL network channels do not use GPUDirect RDMA".into();
        f.evidence.push(format!(
            "{no_gdr} of {} NET/IB channel connections lack /GDRDMA",
            ib.len()
        ));
        for (tfile, t) in &ctx.topo {
            for g in t.nearest_nics() {
                f.evidence.push(format!(
                    "{tfile}: {} nearest NIC {}{} is {}",
                    g.gpu,
                    g.nic,
                    g.nic_device
                        .as_deref()
                        .map(|d| format!(" ({d})"))
                        .unwrap_or_default(),
                    g.link.code()
                ));
            }
        }
        fill_gdr_text(&mut f);
        out.push(f);
    }
    for (tfile, t) in &ctx.topo {
        let far: Vec<_> = t
            .nearest_nics()
            .into_iter()
            .filter(|g| !g.link.gdr_by_default())
            .collect();
        if far.is_empty() {
            continue;
        }
        let mut f = Finding::new(Severity::Warning, Symptom::GdrNotUsed, tfile.clone());
        f.title = "GPUs sit too far from their nearest NIC for GPUDirect RDMA by default".into();
        for g in far {
            f.evidence.push(format!(
                "{} nearest NIC {}{} is {} (NCCL default NCCL_NET_GDR_LEVEL is PXB)",
                g.gpu,
                g.nic,
                g.nic_device
                    .as_deref()
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default(),
                g.link.code()
            ));
        }
        fill_gdr_text(&mut f);
        out.push(f);
    }
}

fn fill_gdr_text(f: &mut Finding) {
    f.impact =
        "data bounces through host memory: extra copies, lower busbw, more CPU and PCIe load"
            .into();
    f.check_first = "`nvidia-smi topo -m` GPU-NIC distance (PIX/PXB get GDR by default; PHB/NODE/SYS do not), the peer-memory module (nvidia-peermem or dma-buf) loaded, NCCL_NET_GDR_LEVEL".into();
    f.why = "NCCL prints /GDRDMA on a channel only when GPUDirect RDMA is used for it, and enables it only when the GPU-NIC path is within NCCL_NET_GDR_LEVEL".into();
}

/// perftest bandwidth against the port rate.
fn slow_perftest(ctx: &Context, out: &mut Vec<Finding>) {
    let rate = ctx
        .devinfo
        .iter()
        .flat_map(|(_, d)| d.iter().flat_map(|h| h.ports.iter()))
        .filter(|p| p.active)
        .filter_map(|p| p.rate_bps)
        .max();
    let Some(rate) = rate else { return };
    for (file, p) in &ctx.perftest {
        for run in &p.runs {
            let Some(row) = run.headline_bw() else {
                continue;
            };
            if run.bidirectional || row.bytes < 65536 {
                continue;
            }
            if u128::from(row.avg_bps) * 2 < u128::from(rate) {
                let mut f = Finding::new(Severity::Warning, Symptom::SlowPerftest, file.clone());
                f.title = "perftest bandwidth is below half the port rate".into();
                f.evidence.push(format!(
                    "line {}: {} bytes average {} Mb/s against a {} Gb/s port",
                    row.line,
                    row.bytes,
                    row.avg_bps / 1_000_000,
                    rate / 1_000_000_000
                ));
                f.impact = "the job cannot get more than this from the link".into();
                f.check_first = "pause and loss counters during the run, QPs (-q), message size, CPU/NUMA pinning, PCIe width".into();
                f.why = "a healthy RoCE link gives large-message write bandwidth close to line rate minus header overhead".into();
                out.push(f);
            }
        }
    }
}

/// Host-side receive buffer shortage.
fn host_buffer(v: &CounterView, out: &mut Vec<Finding>) {
    let n = v.get("rx_out_of_buffer");
    if n == 0 {
        return;
    }
    let mut f = Finding::new(
        v.cap(Severity::Warning),
        Symptom::HostOutOfBuffer,
        v.label(),
    );
    f.title = "receive rings ran out of posted buffers".into();
    f.evidence
        .push(format!("rx_out_of_buffer +{n} {}", v.how()));
    f.impact =
        "netdev (non-RDMA) packets are dropped by the host, e.g. bootstrap/TCP traffic".into();
    f.check_first =
        "the CPU handling this queue, ring sizes (ethtool -g), interrupt moderation".into();
    f.why = "rx_out_of_buffer counts packets arriving when the receive queue had no buffer posted: a host problem, not the fabric".into();
    out.push(f);
}

/// Tell the reader which sources are since-boot totals, with the totals
/// that would be faults if they were rates (PAUSE frames, link-down
/// events): a total since boot says nothing about now.
fn since_boot(ctx: &Context, out: &mut Vec<Finding>) {
    for v in ctx.eth.iter().chain(ctx.rdma.iter()) {
        if v.since_boot {
            let mut f = Finding::new(Severity::Info, Symptom::SinceBoot, v.label());
            f.title = "one snapshot: counters are totals since boot, not rates".into();
            f.evidence.push(format!(
                "{} counters, no earlier snapshot to subtract",
                v.values.len()
            ));
            let mut totals: Vec<String> = Vec::new();
            for tag in tags() {
                let (rx, rxd, tx, txd) = prio_names(&tag);
                for (n, d) in [(&rx, &rxd), (&tx, &txd)] {
                    if v.get(n) > 0 {
                        totals.push(format!("{n} {} ({d} {} us)", v.get(n), v.get(d)));
                    }
                }
            }
            if v.get("link_down_events_phy") > 0 {
                totals.push(format!(
                    "link_down_events_phy {}",
                    v.get("link_down_events_phy")
                ));
            }
            if !totals.is_empty() {
                f.evidence.push(format!(
                    "lifetime totals, not live faults: {}",
                    totals.join(", ")
                ));
            }
            f.why = "counters are cumulative; only a delta over a known interval says what is happening now. Take two snapshots a few seconds apart".into();
            out.push(f);
        }
        if v.reversed {
            let mut f = Finding::new(Severity::Info, Symptom::CounterNote, v.label());
            f.title = "snapshots were given newest first; read in counter order".into();
            f.evidence.push("more counters fell than rose from the first to the last file: the order was swapped".into());
            out.push(f);
        }
        if !v.reset.is_empty() {
            let mut f = Finding::new(Severity::Info, Symptom::CounterNote, v.label());
            f.title = "some counters went backwards between snapshots (reset or reboot)".into();
            f.evidence.push(v.reset.join(", "));
            out.push(f);
        }
        if let Some(p) = v.paired_by.as_deref().filter(|p| p.starts_with("content")) {
            let mut f = Finding::new(Severity::Info, Symptom::CounterNote, v.label());
            f.title = "two files paired as one port's before and after by their content".into();
            f.evidence.push(format!("paired by {p}"));
            f.why = "the files name no common host or port; their counters are the same set and every one grew, as one port's counters do between two snapshots".into();
            out.push(f);
        }
    }
}

/// Summary for captures with nothing above info: per source with a rate
/// (since-boot totals say nothing about now, so they get no verdict).
fn healthy(ctx: &Context, out: &mut Vec<Finding>) {
    for v in ctx.eth.iter().filter(|v| !v.since_boot) {
        let mut f = Finding::new(Severity::Info, Symptom::Healthy, v.label());
        f.title = "no drops, storms, errors or significant pause".into();
        let pfc: Vec<String> = v.pfc_prios().iter().map(|p| format!("prio{p}")).collect();
        let bytes: Vec<String> = (0..8)
            .filter_map(|p| {
                let b = v
                    .get(&format!("rx_prio{p}_bytes"))
                    .saturating_add(v.get(&format!("tx_prio{p}_bytes")));
                (b > 0).then(|| format!("prio{p} {b} bytes"))
            })
            .collect();
        f.evidence.push(format!(
            "PFC on [{}]; traffic {}: {}",
            pfc.join(", "),
            v.how(),
            if bytes.is_empty() {
                "none".to_string()
            } else {
                bytes.join(", ")
            }
        ));
        out.push(f);
    }
}

/// #10 from configuration: the job's traffic class against mlnx_qos.
fn qos_mapping(ctx: &Context, out: &mut Vec<Finding>) {
    for (qfile, q) in &ctx.qos {
        let Some(enabled) = q.pfc_enabled else {
            continue;
        };
        let pfc = q.pfc_priorities();
        if pfc.is_empty() {
            let mut f = Finding::new(Severity::Warning, Symptom::LossyPriority, qfile.clone());
            f.title = "PFC is enabled on no priority".into();
            f.evidence
                .push(format!("{qfile}: PFC enabled bits {enabled:?}"));
            fill_qos_text(&mut f);
            out.push(f);
            continue;
        }
        for (nfile, n) in &ctx.nccl {
            let Some(tc) = n.env.get("NCCL_IB_TC").and_then(|v| v.parse::<u8>().ok()) else {
                continue;
            };
            let trust_dscp = q.trust.as_deref() == Some("dscp");
            if !trust_dscp {
                continue;
            }
            let prio = q.prio_of_tclass(tc);
            if enabled[usize::from(prio)] {
                continue;
            }
            let mut f = Finding::new(
                Severity::Error,
                Symptom::LossyPriority,
                format!("NCCL_IB_TC={tc}"),
            );
            f.title = format!("the job's traffic class lands on prio{prio}, which has no PFC");
            f.evidence.push(format!(
                "{nfile}: NCCL_IB_TC={tc} -> DSCP {} -> prio{prio} (trust dscp, {qfile}); PFC is on {:?}",
                tc >> 2,
                pfc
            ));
            fill_qos_text(&mut f);
            out.push(f);
        }
    }
}

fn fill_qos_text(f: &mut Finding) {
    f.impact =
        "RoCE runs lossy: congestion becomes drops and go-back-N retransmissions instead of pause"
            .into();
    f.check_first = "`mlnx_qos -i`: `--pfc` bits for the RoCE priority, `--trust dscp` and dscp2prio; NCCL_IB_TC (DSCP<<2 | ECN) must map to that priority; the switch must agree".into();
    f.why = "a GRH traffic class byte carries DSCP in its upper six bits; the NIC maps DSCP to a priority, and only PFC-enabled priorities are lossless".into();
}

/// The GID index in use against `show_gids`.
fn gid_choice(ctx: &Context, out: &mut Vec<Finding>) {
    let mut chosen: Vec<(String, u32)> = Vec::new();
    for (file, n) in &ctx.nccl {
        if let Some(i) = n.env.get("NCCL_IB_GID_INDEX").and_then(|v| v.parse().ok()) {
            chosen.push((format!("{file}: NCCL_IB_GID_INDEX={i}"), i));
        }
    }
    for (file, p) in &ctx.perftest {
        for run in &p.runs {
            if let (Some(i), Some("Ethernet")) = (run.gid_index, run.link_type.as_deref()) {
                chosen.push((format!("{file}: perftest GID index {i}"), i));
            }
        }
    }
    for (gfile, gids) in &ctx.gids {
        for (what, idx) in &chosen {
            let entries: Vec<_> = gids.iter().filter(|g| g.index == *idx).collect();
            let Some(e) = entries.first() else { continue };
            if entries.iter().any(|g| g.is_rocev2_ipv4()) {
                continue;
            }
            let good: Vec<String> = gids
                .iter()
                .filter(|g| g.is_rocev2_ipv4() && g.device == e.device)
                .map(|g| g.index.to_string())
                .collect();
            let mut f = Finding::new(Severity::Error, Symptom::AckTimeout, what.clone());
            f.title = "the GID index in use is not the routable RoCEv2 IPv4 entry".into();
            f.evidence.push(format!(
                "{gfile}: index {idx} on {} is {} {}; RoCEv2 IPv4 entries: [{}]",
                e.device,
                e.version,
                e.ipv4.as_deref().unwrap_or("(link-local, no IPv4)"),
                good.join(", ")
            ));
            fill_timeout_text(&mut f);
            out.push(f);
        }
    }
}

/// perftest latency against the usual pass marks (2.5 us write/send,
/// 4.5 us read/atomic, small messages).
fn perftest_latency(ctx: &Context, out: &mut Vec<Finding>) {
    for (file, p) in &ctx.perftest {
        for run in &p.runs {
            let verb = run.verb.as_deref().unwrap_or("");
            let limit_ns = if verb.starts_with("RDMA_Read") || verb.starts_with("Atomic") {
                4500
            } else {
                2500
            };
            for row in run.lat.iter().filter(|r| r.bytes <= 4096) {
                if row.typical_ns > limit_ns {
                    let mut f =
                        Finding::new(Severity::Warning, Symptom::SlowPerftest, file.clone());
                    f.title = format!(
                        "{verb} latency above {}.{} us",
                        limit_ns / 1000,
                        (limit_ns % 1000) / 100
                    );
                    f.evidence.push(format!(
                        "line {}: {} bytes t_typical {} ns (t_avg {} ns, t_max {} ns)",
                        row.line, row.bytes, row.typical_ns, row.avg_ns, row.max_ns
                    ));
                    f.impact = "every small message (NCCL's control messages, small all-reduces) pays this latency".into();
                    f.check_first = "CPU frequency scaling and pinning, the switch path (hops, pause), interrupt moderation; read latency is a full round trip and naturally about twice write latency".into();
                    f.why = "healthy RoCE small-message write latency is a few microseconds or less; perftest prints half the round trip for write/send and the full one for read/atomic".into();
                    out.push(f);
                }
            }
        }
    }
}

/// Completion statuses other than 12, from perftest and NCCL logs.
fn other_completion_errors(ctx: &Context, out: &mut Vec<Finding>) {
    let mut seen: Vec<(u32, String)> = Vec::new();
    for (name, p) in &ctx.perftest {
        for e in &p.errors {
            if let Some(st) = e.status.filter(|s| *s != 12) {
                seen.push((
                    st,
                    format!("{name} line {}: perftest completion status {st}", e.line),
                ));
            }
        }
    }
    for (name, n) in &ctx.nccl {
        for e in &n.errors {
            if let Some(st) = e.status.filter(|s| *s != 12) {
                seen.push((
                    st,
                    format!("{name} line {}: NCCL completion status {st}", e.line),
                ));
            }
        }
    }
    let mut statuses: Vec<u32> = seen.iter().map(|(s, _)| *s).collect();
    statuses.sort_unstable();
    statuses.dedup();
    for st in statuses {
        let (sev, title, impact, check) = match st {
            13 => (
                Severity::Error,
                "RNR retry exceeded: the receiver had no receive posted",
                "the connection fails after its RNR retries; the collective aborts",
                "the receiving application posts receives in time (SRQ/RQ depth, rnr_retry, min RNR timer); out_of_buffer on the responder",
            ),
            4 => (
                Severity::Error,
                "local protection error: a work request used memory it may not",
                "the first transfer fails; with GPU buffers typically at start-up",
                "memory registration of the buffers; for GPU memory the peer-memory module (nvidia-peermem) or dma-buf support",
            ),
            10 => (
                Severity::Error,
                "remote access error: the peer refused the rkey or range",
                "RDMA READ/WRITE to that peer fails",
                "rkey/address exchange between the peers, MR access flags (remote read/write/atomic)",
            ),
            5 => (
                Severity::Info,
                "work requests flushed: collateral of a QP that went to error",
                "nothing by itself; look for the first, non-flush error",
                "the earliest completion error in the log",
            ),
            _ => (
                Severity::Warning,
                "work completions failed",
                "the operations that failed did not happen",
                "the status code against ibv_wc_status",
            ),
        };
        let mut f = Finding::new(sev, Symptom::CompletionError, format!("status {st}"));
        f.title = title.into();
        f.evidence = seen
            .iter()
            .filter(|(s, _)| *s == st)
            .map(|(_, e)| e.clone())
            .collect();
        f.impact = impact.into();
        f.check_first = check.into();
        f.why = "the completion status says which side and which rule stopped the work request; 12 (retry exceeded) is reported as ack-timeout".into();
        out.push(f);
    }
}
