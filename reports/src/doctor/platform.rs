//! Checks on the platform around the NICs, from the tools beyond NIC
//! counters: a PFC deadlock a simulated run's detector found, the
//! switches' PFC watchdog and queue drops, PCIe links, link settings,
//! kernel/UCX events, nccl-tests results, and the kinds of GID the two ends
//! of a perftest run used.
//!
//! Thresholds and where they come from are listed in docs/NIC-DOCTOR.md.

use super::context::Context;
use super::counters::{prio_names, tags};
use super::finding::{Finding, Severity, Symptom};
use super::names::host_from_path;
use super::wording::pct;
use std::collections::{BTreeMap, BTreeSet};

use crate::realnic::tools::{Event, EventKind, PciLink};

/// Run these checks.
pub(super) fn run(ctx: &Context, out: &mut Vec<Finding>) {
    deadlock(ctx, out);
    watchdog(ctx, out);
    queue_drops(ctx, out);
    pcie(ctx, out);
    eth_links(ctx, out);
    events(ctx, out);
    nccl_tests(ctx, out);
    gid_mismatch(ctx, out);
    nccl_host_side(ctx, out);
    pg_drops(ctx, out);
}

/// PFC deadlocks a simulated run's detector reported (`deadlocks` in
/// results.json): each is a cycle of (port, priority) queues that pause
/// one another, so none drains and the traffic on the priority stops for
/// good. One finding per cycle, its members as the affected ports.
fn deadlock(ctx: &Context, out: &mut Vec<Finding>) {
    for v in &ctx.sim {
        for d in &v.deadlocks {
            let Some((first, _)) = d.members.first() else {
                continue;
            };
            let mut f = Finding::new(Severity::Critical, Symptom::PfcDeadlock, first.clone());
            f.origin = first.split_once("-p").map(|(n, _)| n.to_string());
            f.affects = d.members.iter().map(|(m, _)| m.clone()).collect();
            f.title = format!(
                "PFC deadlock on prio{}: {} switch ports pause each other in a cycle",
                d.priority,
                d.members.len()
            );
            let cycle: Vec<String> = d
                .members
                .iter()
                .map(|(m, peer)| format!("{m} -> {peer}"))
                .collect();
            f.evidence.push(format!(
                "cycle of paused queues on prio{}: {}",
                d.priority,
                cycle.join(", ")
            ));
            f.evidence.push(format!(
                "formed at {} ns, detected at {} ns of simulated time",
                d.formed_ps / 1000,
                d.detected_ps / 1000
            ));
            f.evidence.push(format!(
                "{} of {} flows unfinished",
                v.flows_total.saturating_sub(v.flows_completed),
                v.flows_total
            ));
            f.impact = "every flow whose path crosses the cycle stops for good: throughput on the priority goes to zero and the job hangs until its QPs time out (retry exceeded) and NCCL aborts".into();
            f.check_first = "the routes through the cycle's switches (a routing loop, or a bounce route left after a link failure); then enable the PFC watchdog on those ports so a storm is broken by dropping".into();
            f.why = "each member's egress is paused by the next member, whose buffer is full of frames waiting on the member after it: a cyclic buffer dependency, which PFC alone never resolves".into();
            out.push(f);
        }
    }
}

/// What a GID says about the RoCE flavour: an IPv4-mapped address
/// (`::ffff:a.b.c.d`, RoCEv2 over IPv4), a link-local `fe80::` one (RoCEv1
/// or the default IB GID), or another IPv6 address (RoCEv2 over IPv6).
fn gid_family(gid: &[u8]) -> &'static str {
    if gid.len() == 16 && gid[..10].iter().all(|b| *b == 0) && gid[10] == 0xff && gid[11] == 0xff {
        "IPv4-mapped (RoCEv2 over IPv4)"
    } else if gid.len() == 16 && gid[0] == 0xfe && gid[1] & 0xc0 == 0x80 {
        "link-local fe80:: (RoCEv1 or the default GID)"
    } else {
        "IPv6"
    }
}

/// The two ends of a perftest run use GIDs of different kinds: the GID
/// index (or RoCE version behind it) differs between the hosts.
fn gid_mismatch(ctx: &Context, out: &mut Vec<Finding>) {
    for (file, p) in &ctx.perftest {
        for run in &p.runs {
            if run.link_type.as_deref() != Some("Ethernet") {
                continue;
            }
            for (l, r) in run.local.iter().zip(run.remote.iter()) {
                let (Some(lg), Some(rg)) = (l.gid.as_deref(), r.gid.as_deref()) else {
                    continue;
                };
                let zero = |g: &[u8]| g.iter().all(|b| *b == 0);
                if zero(lg) || zero(rg) {
                    let side = match (zero(lg), zero(rg)) {
                        (true, true) => "both the local and the remote GID are",
                        (true, false) => "the local GID is",
                        _ => "the remote GID is",
                    };
                    let mut f =
                        Finding::new(Severity::Error, Symptom::GidMisconfigured, file.clone());
                    f.title = format!(
                        "{side} all zeros: GID index {} holds no address on that port",
                        run.gid_index
                            .map(|i| i.to_string())
                            .unwrap_or_else(|| "?".into())
                    );
                    f.evidence.push(format!(
                        "{file}: Link type Ethernet, GID index {}, {side} 00:00:...:00",
                        run.gid_index
                            .map(|i| i.to_string())
                            .unwrap_or_else(|| "?".into())
                    ));
                    if !p.errors.is_empty()
                        || p.runs.iter().all(|r| r.bw.is_empty() && r.lat.is_empty())
                    {
                        f.evidence.push("the test did not get to a result: the QP could not be connected (modify QP to RTR fails with an empty address)".into());
                    }
                    f.impact = "on RoCE the GID is the packet's IP address: with an empty one the QP cannot be moved to RTR and no transfer starts".into();
                    f.check_first = "show_gids in the same container or host: the index whose VER is v2 and whose IPv4 is the RoCE interface's address (in a pod, the interface of the secondary network, e.g. macvlan), then perftest -x INDEX; an interface with no IPv4 address has no such entry".into();
                    f.why = "perftest prints the GID of the index it uses; all zeros means the entry is empty: no netdev address behind it in this namespace".into();
                    out.push(f);
                    continue;
                }
                let (lf, rf) = (gid_family(lg), gid_family(rg));
                if lf == rf {
                    continue;
                }
                let mut f = Finding::new(Severity::Error, Symptom::GidMisconfigured, file.clone());
                f.title =
                    "the two hosts use GIDs of different kinds: GID index or RoCE version mismatch"
                        .into();
                f.evidence.push(format!(
                    "{file}: local GID is {lf}{}, remote GID is {rf}{} (GID index {})",
                    l.gid_ipv4
                        .as_deref()
                        .map(|a| format!(" {a}"))
                        .unwrap_or_default(),
                    r.gid_ipv4
                        .as_deref()
                        .map(|a| format!(" {a}"))
                        .unwrap_or_default(),
                    run.gid_index
                        .map(|i| i.to_string())
                        .unwrap_or_else(|| "?".into())
                ));
                f.impact = "packets of one side are RoCEv1 (Ethernet-only, unroutable) or address a GID the peer does not answer on: the connection never completes a transfer; the job fails with retry exceeded (status 12) at its first collective".into();
                f.check_first = "show_gids on both hosts: pick the index whose VER is v2 and whose IPv4 is the RoCE interface's address on each (it may differ per host), and pass it explicitly (perftest -x, NCCL_IB_GID_INDEX)".into();
                f.why = "the GID in each address line is the one that side's QP uses as its source; both must be RoCEv2 entries of the same address family for the packets to route".into();
                out.push(f);
            }
        }
    }
}

/// NCCL logs, host side: GPUDirect RDMA disabled on the HCAs NCCL uses,
/// and verbs calls that failed while connecting.
fn nccl_host_side(ctx: &Context, out: &mut Vec<Finding>) {
    for (file, n) in &ctx.nccl {
        let ib = n.network.as_deref().is_some_and(|x| x.starts_with("IB"))
            || n.net_devs
                .iter()
                .any(|d| d.link == "RoCE" || d.link == "IB");
        if ib && !n.gdr_disabled.is_empty() {
            let mut f = Finding::new(Severity::Warning, Symptom::GdrNotUsed, file.clone());
            f.origin = Some(host_from_path(file));
            f.title = format!(
                "NCCL has GPUDirect RDMA disabled on {}: network data is staged through host memory",
                n.gdr_disabled.join(", ")
            );
            f.evidence.push(format!(
                "{file}: `GPU Direct RDMA Disabled for HCA` on {}; network {}",
                n.gdr_disabled.join(", "),
                n.network.as_deref().unwrap_or("?")
            ));
            f.impact = "every network transfer is copied between GPU and host memory: lower busbw (often far below line rate at large messages), more CPU and PCIe load".into();
            f.check_first = "the peer-memory path: nvidia-peermem loaded (lsmod) or dma-buf support (kernel 5.12+, NCCL_DMABUF_ENABLE), in a container the module on the host; then NCCL_NET_GDR_LEVEL against the GPU-NIC distance in `nvidia-smi topo -m`, and ACS/IOMMU settings".into();
            f.why = "NCCL probes GPUDirect RDMA per HCA at start-up (it needs the peer-memory module or dma-buf) and prints Disabled when the probe fails".into();
            out.push(f);
        }
        let timeouts: Vec<_> = n
            .setup_errors
            .iter()
            .filter(|e| e.errno == Some(110))
            .collect();
        if let Some(e) = timeouts.first() {
            let mut f = Finding::new(Severity::Error, Symptom::AckTimeout, file.clone());
            f.origin = Some(host_from_path(file));
            f.title = format!(
                "NCCL could not connect: {} timed out{}",
                e.call,
                e.next_state
                    .as_deref()
                    .map(|s| format!(" moving the QP to {s}"))
                    .unwrap_or_default()
            );
            f.evidence = timeouts
                .iter()
                .take(4)
                .map(|e| format!("{file} line {}: {}", e.line, e.text))
                .collect();
            f.impact = "the communicator never forms: the job hangs or aborts at start-up".into();
            f.check_first = "whether the two NICs can reach each other at all: on a rail-optimised fabric NICs of different rails share no network (NCCL_CROSS_NIC=0 keeps each rail to itself); then the GID index and its address on both ends, the VLAN, routes and ARP for the peer's address".into();
            f.why = "moving a RoCE QP to RTR resolves the peer's GID to a MAC address; a timeout (errno 110) means the peer's address was not reachable from this NIC".into();
            out.push(f);
        }
    }
}

/// SONiC ingress priority-group drops.
fn pg_drops(ctx: &Context, out: &mut Vec<Finding>) {
    let mut ev = Vec::new();
    let mut affects = Vec::new();
    let mut pgs: BTreeSet<usize> = BTreeSet::new();
    for (file, r) in &ctx.switch {
        for p in &r.pg_drops {
            let hit: Vec<(usize, u64)> = p
                .drops
                .iter()
                .enumerate()
                .filter_map(|(i, d)| d.filter(|d| *d > 0).map(|d| (i, d)))
                .collect();
            if hit.is_empty() {
                continue;
            }
            pgs.extend(hit.iter().map(|(i, _)| *i));
            affects.push(p.port.clone());
            let list: Vec<String> = hit.iter().map(|(i, d)| format!("PG{i} {d}")).collect();
            ev.push(format!(
                "{file} line {}: {} ingress drops {}",
                p.line,
                p.port,
                list.join(", ")
            ));
        }
    }
    if ev.is_empty() {
        return;
    }
    let list: Vec<String> = pgs.iter().map(|p| format!("PG{p}")).collect();
    let mut f = Finding::new(
        Severity::Warning,
        Symptom::SwitchCongestion,
        affects[0].clone(),
    );
    f.origin = Some(affects[0].clone());
    f.affects = affects;
    f.title = format!(
        "switch ports dropped packets at ingress in priority groups {} (totals since the counters were cleared)",
        list.join(", ")
    );
    f.evidence = ev;
    f.impact = "on a lossless priority group an ingress drop means PFC did not stop the sender in time: RoCE on it loses packets and pays go-back-N or timeouts; on a lossy group it is ordinary congestion loss".into();
    f.check_first = "which priority groups are lossless on this switch (SONiC's defaults are PG3 and PG4) and whether the drops still grow; for lossless ones the headroom size against cable length and MTU, PFC honoured by the sender, a port held paused by its egress (watchdog)".into();
    f.why = "ingress PG drops count packets discarded because the group's buffer (shared share plus headroom) was full".into();
    out.push(f);
}

/// The fastest link rate known from the inputs, bit/s.
fn line_rate_bps(ctx: &Context) -> Option<u64> {
    let dev = ctx
        .devinfo
        .iter()
        .flat_map(|(_, d)| d.iter().flat_map(|h| h.ports.iter()))
        .filter(|p| p.active)
        .filter_map(|p| p.rate_bps)
        .max();
    let eth = ctx
        .links
        .iter()
        .flat_map(|(_, l)| l.iter())
        .filter_map(|l| l.speed_mbps)
        .map(|m| m.saturating_mul(1_000_000))
        .max();
    dev.max(eth)
}

/// SONiC `pfcwd show stats`: storms detected.
fn watchdog(ctx: &Context, out: &mut Vec<Finding>) {
    let mut ev = Vec::new();
    let mut affects = Vec::new();
    let mut stormed_now = false;
    let mut switches: BTreeSet<String> = BTreeSet::new();
    for (file, r) in &ctx.switch {
        for w in &r.watchdog {
            let det = w.detected.unwrap_or(0);
            let now = w.status.eq_ignore_ascii_case("stormed");
            if det == 0 && !now {
                continue;
            }
            stormed_now |= now;
            switches.insert(host_from_path(file));
            affects.push(format!(
                "{}:{}",
                w.port,
                w.queue.map(|q| q.to_string()).unwrap_or_default()
            ));
            ev.push(format!(
                "{file} line {}: {} queue {} status {}, storm detected/restored {}/{}, tx ok/drop {}/{}, rx ok/drop {}/{}",
                w.line,
                w.port,
                w.queue.map(|q| q.to_string()).unwrap_or_else(|| "?".into()),
                w.status,
                det,
                w.restored.unwrap_or(0),
                w.tx_ok.unwrap_or(0),
                w.tx_drop.unwrap_or(0),
                w.rx_ok.unwrap_or(0),
                w.rx_drop.unwrap_or(0)
            ));
        }
    }
    if ev.is_empty() {
        return;
    }
    let sev = if stormed_now {
        Severity::Critical
    } else {
        Severity::Error
    };
    if let Some(f) = watchdog_deadlock(ctx, &switches, &affects, &ev, sev) {
        out.push(f);
        return;
    }
    let mut f = Finding::new(sev, Symptom::PfcStorm, affects[0].clone());
    f.affects = affects;
    f.title = if stormed_now {
        "the switch's PFC watchdog holds a queue in storm state now: the device behind it keeps pausing".into()
    } else {
        "the switch's PFC watchdog detected PFC storms".into()
    };
    f.evidence = ev;
    f.impact = "while stormed the watchdog drops (or forwards without PFC) that queue's traffic: RoCE on it loses packets, QPs time out and NCCL aborts after its retries; before detection (200 ms by default on SONiC) the storm froze every flow on the priority".into();
    f.check_first = "the device on the stormed port (a host NIC stuck sending XOFF: hung driver, firmware, a receiver that stopped draining); its tx_prioN_pause and tx_pause_storm_*_events counters; dmesg on that host".into();
    f.why = "SONiC's PFC watchdog declares a storm when a queue is paused continuously for its detection time with nothing draining, then drops the queue's packets until restoration".into();
    out.push(f);
}

/// Watchdog storms that are a deadlock being broken: the watchdogs of two
/// or more switches found stormed queues while the capture's host NICs
/// sent no PAUSE at all (no `tx_prioN_pause`, no storm events). A storm
/// is a queue held by PAUSE that never ends; with no host asserting
/// PAUSE, the only devices that can hold the switches' queues are the
/// switches themselves, each waiting on the next: a cycle of paused
/// queues (a PFC deadlock) that the watchdogs break by ignoring PAUSE.
/// None when the capture has no host NIC counters (the hosts cannot be
/// ruled out) or a host sent PAUSE.
fn watchdog_deadlock(
    ctx: &Context,
    switches: &BTreeSet<String>,
    affects: &[String],
    ev: &[String],
    sev: Severity,
) -> Option<Finding> {
    let hosts: Vec<_> = ctx.eth.iter().filter(|v| !v.is_switch_port()).collect();
    if switches.len() < 2 || hosts.is_empty() {
        return None;
    }
    let host_pause: u64 = hosts
        .iter()
        .flat_map(|v| {
            tags()
                .map(|t| v.get(&prio_names(&t).2))
                .chain(
                    [
                        "tx_pause_storm_warning_events",
                        "tx_pause_storm_error_events",
                    ]
                    .map(|n| v.get(n)),
                )
                .collect::<Vec<_>>()
        })
        .fold(0u64, u64::saturating_add);
    if host_pause > 0 {
        return None;
    }
    let names: Vec<&str> = switches.iter().map(String::as_str).collect();
    let mut f = Finding::new(sev, Symptom::PfcDeadlock, names[0].to_string());
    f.origin = Some(names[0].to_string());
    f.affects = affects.to_vec();
    f.title = format!(
        "PFC deadlock broken by the watchdog: switches {} each had a queue stormed while no host NIC sent PAUSE, so there is no origin outside the switches: their paused queues held each other in a cycle",
        names.join(", ")
    );
    f.evidence = ev.to_vec();
    f.evidence.push(format!(
        "{} host NIC port(s) in the capture: tx_prioN_pause +0 and tx_pause_storm_*_events +0 on every one",
        hosts.len()
    ));
    f.impact = "the traffic on the priority froze until each watchdog's detection time ran out; while the queues stay stormed the watchdog drops (or forwards without PFC) their frames, so RoCE loses packets and pays go-back-N and timeouts; the cycle forms again as soon as the watchdog restores the queues".into();
    f.check_first = "the routes through the stormed switch ports: which paused queues wait on each other in a loop (traffic going down to a leaf and up again, stale or static routes after a link failure, routes not in up-down order); make routing deadlock-free. The watchdog breaks a deadlock that has formed, not its cause".into();
    f.why = "SONiC's PFC watchdog declares a storm on a queue held by PAUSE for its detection time with nothing draining; a host NIC stuck sending PAUSE is the usual source, but here no host sent any, so the PAUSE came from the switches themselves: with stormed queues on several switches that is a cyclic buffer dependency (Hu et al., HotNets 2016), a deadlock".into();
    Some(f)
}

/// Switch queue counters (SONiC `show queue counters`, EOS queue
/// counters): drops per egress queue of a switch port. Contract: one
/// finding per switch port with drops, on the switch port (never a
/// host), naming the queues; multicast queues are told apart from the
/// unicast ones RoCE uses; the counters are totals since they were
/// cleared, so the severity is at most a warning.
fn queue_drops(ctx: &Context, out: &mut Vec<Finding>) {
    let mut by_port: BTreeMap<String, Vec<(&str, &crate::realnic::tools::QueueRow)>> =
        BTreeMap::new();
    for (file, r) in &ctx.switch {
        for q in &r.queues {
            by_port
                .entry(q.port.clone())
                .or_default()
                .push((file.as_str(), q));
        }
    }
    for (port, qs) in by_port {
        let dropped: Vec<_> = qs
            .iter()
            .filter(|(_, q)| q.drop_packets.unwrap_or(0) > 0)
            .collect();
        if dropped.is_empty() {
            continue;
        }
        let multicast = |q: &str| q.starts_with("MC") || q.ends_with(" MC");
        let uc: Vec<_> = dropped
            .iter()
            .filter(|(_, q)| !multicast(&q.queue))
            .collect();
        let names: Vec<&str> = dropped.iter().map(|(_, q)| q.queue.as_str()).collect();
        // Saturating: the counts are as printed, any size.
        let total: u64 = dropped
            .iter()
            .map(|(_, q)| q.drop_packets.unwrap_or(0))
            .fold(0u64, u64::saturating_add);
        // A switch queue's drops: congestion at the switch, its own
        // finding kind (never a host's, never a PFC setting guessed).
        let mut f = Finding::new(
            Severity::Warning,
            Symptom::SwitchCongestion,
            format!("{port} {}", names.first().copied().unwrap_or("")),
        );
        f.origin = Some(port.clone());
        f.affects = names.iter().map(|n| format!("{port} {n}")).collect();
        f.title = if uc.is_empty() {
            format!(
                "switch port {port} dropped {total} packets on multicast queue(s) {}: not RoCE traffic (RoCE is unicast)",
                names.join(", ")
            )
        } else {
            format!(
                "switch port {port} dropped {total} packets on egress queue(s) {} (totals since the counters were cleared)",
                names.join(", ")
            )
        };
        for (file, q) in &dropped {
            let sent = q.packets.unwrap_or(0);
            let d = q.drop_packets.unwrap_or(0);
            let share = u64::try_from(
                u128::from(d) * 1_000_000 / u128::from(sent.saturating_add(d).max(1)),
            )
            .unwrap_or(0);
            f.evidence.push(format!(
                "{file} line {}: {port} {} dropped {d} packets ({} bytes), sent {sent}: {} of what reached the queue",
                q.line,
                q.queue,
                q.drop_bytes.map(|b| b.to_string()).unwrap_or_else(|| "?".into()),
                pct(share)
            ));
        }
        let clean: Vec<String> = qs
            .iter()
            .filter(|(_, q)| q.drop_packets == Some(0) && q.packets.unwrap_or(0) > 0)
            .map(|(_, q)| q.queue.clone())
            .collect();
        if !clean.is_empty() {
            f.evidence.push(format!(
                "queues that carried traffic without a drop: {}",
                clean.join(", ")
            ));
        }
        f.impact = if uc.is_empty() {
            "flooded, broadcast or multicast traffic is lost at this port; RoCE (unicast) is not affected by these queues".into()
        } else {
            "a drop on the queue that carries RoCE costs a go-back-N window or an ACK timeout per lost packet; on a queue of other traffic it is that traffic's (TCP's) loss".into()
        };
        f.check_first = "which priority the dropping queue serves (its DSCP/PCP to queue map) and whether it is meant to be lossless: if RoCE rides it, PFC on that priority on this switch and on the sender, and the buffer profile; if not, the queue's share of the buffer and the fan-in towards this port; whether the counters still grow (clear and read again)".into();
        f.why = "egress queue drops are counted when the queue's buffer is full: congestion on that queue at this switch port, not a host NIC problem".into();
        out.push(f);
    }
}

/// `lspci -vv`: link below capability.
fn pcie(ctx: &Context, out: &mut Vec<Finding>) {
    let rate = line_rate_bps(ctx);
    for (file, links) in &ctx.lspci {
        for p in links.iter().filter(|p| p.degraded()) {
            let who = if p.address.is_empty() {
                format!("{file} (device at line {})", p.line)
            } else {
                p.address.clone()
            };
            let mut f = Finding::new(Severity::Error, Symptom::PcieDegraded, who.clone());
            f.title = format!("PCIe link of {who} runs below its capability");
            f.evidence.push(format!(
                "{file} line {}: {} LnkCap {} MT/s x{}, LnkSta {} MT/s x{}{}",
                p.line,
                p.description,
                p.cap_speed_mts.unwrap_or(0),
                p.cap_width.unwrap_or(0),
                p.sta_speed_mts.unwrap_or(0),
                p.sta_width.unwrap_or(0),
                if p.downgraded { " (downgraded)" } else { "" }
            ));
            let have = match (p.sta_speed_mts, p.sta_width) {
                (Some(s), Some(w)) => Some(PciLink::mbps(s, w)),
                _ => None,
            };
            let cap = match (p.cap_speed_mts, p.cap_width) {
                (Some(s), Some(w)) => Some(PciLink::mbps(s, w)),
                _ => None,
            };
            f.impact = match (have, cap, rate) {
                (Some(h), Some(c), Some(r)) => format!(
                    "the slot now carries about {} Gbit/s per direction (capable of {} Gbit/s) for a {} Gbit/s port: {}",
                    h / 1000,
                    c / 1000,
                    r / 1_000_000_000,
                    if u128::from(h) * 1_000_000 < u128::from(r) {
                        "the NIC cannot reach line rate; it sends PAUSE when its receive buffer backs up"
                    } else {
                        "enough for the port alone, but with GPUDirect and host traffic sharing it the margin is gone"
                    }
                ),
                (Some(h), Some(c), None) => format!(
                    "about {} Gbit/s per direction instead of {} Gbit/s (transfer rate x lanes x 128/130 coding)",
                    h / 1000,
                    c / 1000
                ),
                _ => "less PCIe bandwidth than the slot and device can do".into(),
            };
            f.check_first = "reseat the card or riser, the slot's wiring (x8 electrical in an x16 slot), BIOS lane bifurcation and ASPM settings; AER errors in dmesg".into();
            f.why = "LnkCap is what both the device can do, LnkSta what was trained; a lower speed or width is a signal-integrity or slot problem, and the NIC's receive path drains over this link".into();
            out.push(f);
        }
    }
}

/// Plain ethtool: link down, or speed below the fastest supported mode.
fn eth_links(ctx: &Context, out: &mut Vec<Finding>) {
    for (file, links) in &ctx.links {
        for l in links {
            let name = l.interface.clone().unwrap_or_else(|| file.clone());
            if l.link_detected == Some(false) {
                let mut f = Finding::new(Severity::Error, Symptom::LinkDegraded, name.clone());
                f.origin = Some(name.clone());
                f.title = format!("{name}: no link");
                f.evidence.push(format!(
                    "{file}: Link detected: no, Speed {:?} Mb/s",
                    l.speed_mbps
                ));
                f.impact =
                    "every QP over this port fails: NCCL aborts or falls back to other rails"
                        .into();
                f.check_first = "cable and optic seated, the switch port admin up, ethtool --show-module for the transceiver".into();
                f.why = "without link the port carries nothing".into();
                out.push(f);
                continue;
            }
            if let (Some(s), Some(m)) = (l.speed_mbps, l.max_supported_mbps) {
                if s < m {
                    let mut f =
                        Finding::new(Severity::Warning, Symptom::LinkDegraded, name.clone());
                    f.origin = Some(name.clone());
                    f.title = format!(
                        "{name} links at {} Gb/s but supports {} Gb/s",
                        s / 1000,
                        m / 1000
                    );
                    f.evidence.push(format!(
                        "{file}: Speed {s}Mb/s, fastest supported/advertised link mode {m}baseXX"
                    ));
                    f.impact = format!(
                        "this rank's network bandwidth is {} of what the NIC can do; a ring all-reduce runs at the pace of its slowest link",
                        pct(s.saturating_mul(1_000_000) / m.max(1))
                    );
                    f.check_first = "cable/optic type and length against the speed, the switch port speed and FEC setting, auto-negotiation on both ends".into();
                    f.why =
                        "a port that negotiates a lower speed still passes traffic, only slower"
                            .into();
                    out.push(f);
                }
            }
        }
    }
}

/// The evidence lines of some events: `file line N: text`, at most eight.
fn event_evidence(es: &[(&str, &Event)]) -> Vec<String> {
    let mut ev: Vec<String> = es
        .iter()
        .take(8)
        .map(|(file, e)| format!("{file} line {}: {}", e.line, e.text))
        .collect();
    if es.len() > 8 {
        ev.push(format!("... {} such lines in all", es.len()));
    }
    ev
}

/// Where an event happened: `host DEVICE`, the device alone, or the file.
fn event_where(file: &str, e: &Event) -> String {
    let dev = e.device.clone().or_else(|| e.pci.clone());
    match (&e.host, dev) {
        (Some(h), Some(d)) => format!("{h} {d}"),
        (None, Some(d)) => d,
        (Some(h), None) => h.clone(),
        (None, None) => file.to_string(),
    }
}

/// A finding about log events, its subject and origin the first place.
fn event_finding(
    sev: Severity,
    symptom: Symptom,
    es: &[(&str, &Event)],
    title: String,
) -> Option<Finding> {
    let (file, first) = es.first()?;
    let subject = event_where(file, first);
    let mut f = Finding::new(sev, symptom, subject.clone());
    f.origin = Some(first.host.clone().unwrap_or(subject));
    let mut affects: Vec<String> = es.iter().map(|(file, e)| event_where(file, e)).collect();
    affects.dedup();
    f.affects = affects;
    f.title = title;
    f.evidence = event_evidence(es);
    Some(f)
}

/// `12.345 Gb/s` of a value in Mbit/s.
fn gbps(mbps: u64) -> String {
    format!("{}.{:03} Gb/s", mbps / 1000, mbps % 1000)
}

/// Kernel and UCX events: link flaps, the PCIe link and slot, driver and
/// firmware failures, pause storms, TX timeouts, UCX transports and retry
/// exceeded. Contract: one finding per kind of event and place; a single
/// link down and up (as at boot) is no finding, and a log that only
/// describes a healthy PCIe link or an RDMA endpoint says nothing.
fn events(ctx: &Context, out: &mut Vec<Finding>) {
    let all: Vec<(&str, &Event)> = ctx
        .events
        .iter()
        .flat_map(|(file, es)| es.iter().map(move |e| (file.as_str(), e)))
        .collect();
    let of = |k: EventKind| -> Vec<(&str, &Event)> {
        all.iter().filter(|(_, e)| e.kind == k).copied().collect()
    };
    link_flaps(&all, out);
    pcie_events(ctx, &all, out);
    driver_failures(&all, out);
    ucx_transports(&all, out);
    if let Some(mut f) = event_finding(
        Severity::Critical,
        Symptom::PfcStorm,
        &of(EventKind::PauseStorm),
        "the NIC driver logged a PFC pause storm".into(),
    ) {
        f.impact = "the NIC stopped honouring or sending pause to protect the fabric: drops and timeouts on the lossless priority follow".into();
        f.check_first = "what stopped draining on this host (hung process, GPU, PCIe); tx_pause_storm_*_events; the switch PFC watchdog".into();
        f.why = "mlx5 and ice log a storm when a port stays in pause beyond the driver's stall threshold".into();
        out.push(f);
    }
    let retry = of(EventKind::RetryExceeded);
    if let Some(mut f) = event_finding(
        Severity::Critical,
        Symptom::AckTimeout,
        &retry,
        "transport retry counter exceeded (UCX/verbs): the QP gave up".into(),
    ) {
        f.impact = "the collective aborts; the job restarts from its last checkpoint".into();
        f.check_first = "in order: (1) at the first transfer, addressing: GID index and RoCE version the same on both ends, VLAN/routing/MTU; (2) under load, packet loss: PFC on the RoCE priority end to end, drops and discards; (3) a link flap or port down during the run; (4) the peer process died or hung; (5) a too-short timeout (NCCL_IB_TIMEOUT / UCX_RC_TIMEOUT)".into();
        f.why = "retry exceeded (completion status 12, mlx5 syndrome 0x15, vendor error 0x81) means the requester's ACK timer expired retry_cnt + 1 times: nothing came back from the peer".into();
        out.push(f);
    }
    // The failing sends' addressing, when UCX prints it (`sgix N dgid G`).
    let linklocal: Vec<(&str, &Event)> = all
        .iter()
        .filter(|(_, e)| {
            e.dgid
                .as_deref()
                .is_some_and(|g| g.to_ascii_lowercase().starts_with("fe80"))
                && e.text.contains("RoCE") | e.text.contains("rmac")
        })
        .copied()
        .collect();
    if let Some(mut f) = event_finding(
        Severity::Error,
        Symptom::GidMisconfigured,
        &linklocal,
        format!(
            "RoCE sends addressed a link-local GID{}: such a GID only reaches hosts on the same L2 segment",
            linklocal
                .first()
                .and_then(|(_, e)| e.gid_index)
                .map(|i| format!(" (source GID index {i})"))
                .unwrap_or_default()
        ),
    ) {
        f.impact = "across a router (a routed RoCE fabric, another subnet) the packets never arrive: every QP to such a peer ends in retry exceeded".into();
        f.check_first = "show_gids on both hosts: use the RoCE v2 entry with the interface's IPv4 address (UCX_IB_GID_INDEX, NCCL_IB_GID_INDEX, perftest -x); an interface without an IPv4 address has none".into();
        f.why = "fe80:: GIDs come from the netdev's link-local IPv6 address; routable RoCE v2 traffic needs an IPv4-mapped (or global IPv6) GID".into();
        out.push(f);
    }
    if let Some(mut f) = event_finding(
        Severity::Warning,
        Symptom::LinkDegraded,
        &of(EventKind::TxTimeout),
        "netdev TX timeouts or CQE errors".into(),
    ) {
        f.impact = "the driver resets the queue; traffic on it stalls meanwhile".into();
        f.check_first =
            "firmware version, the port's pause (a long pause stalls TX), dmesg around the event"
                .into();
        f.why = "a TX timeout means a send queue made no progress for the watchdog period".into();
        out.push(f);
    }
}

/// Link down events per place: several downs are a flapping link; one
/// down with no up after it is noted; one down and up is bring-up.
fn link_flaps(all: &[(&str, &Event)], out: &mut Vec<Finding>) {
    let mut by: BTreeMap<String, Vec<(&str, &Event)>> = BTreeMap::new();
    for (file, e) in all {
        if matches!(e.kind, EventKind::LinkDown | EventKind::LinkUp) {
            by.entry(event_where(file, e)).or_default().push((file, e));
        }
    }
    for (place, es) in by {
        let downs = es
            .iter()
            .filter(|(_, e)| e.kind == EventKind::LinkDown)
            .count();
        let last_down = es.iter().rposition(|(_, e)| e.kind == EventKind::LinkDown);
        let up_after =
            last_down.is_some_and(|i| es[i..].iter().any(|(_, e)| e.kind == EventKind::LinkUp));
        let (sev, title) = match downs {
            0 => continue,
            1 if up_after => continue,
            1 => (
                Severity::Info,
                format!(
                    "{place}: the log ends with the link down (one down event, no up after it)"
                ),
            ),
            n => (
                Severity::Error,
                format!("{place}: the link went down {n} times: it flaps"),
            ),
        };
        let mut f = Finding::new(sev, Symptom::LinkDegraded, place.clone());
        f.origin = Some(place.clone());
        f.title = title;
        f.evidence = event_evidence(&es);
        f.impact = if sev == Severity::Info {
            "if the port is still down, every QP over it fails; one down at start-up before the peer negotiates is normal".into()
        } else {
            "each flap stalls every QP on the port for the ACK timeout and can fail the collective (status 12); NCCL aborts when a flap outlasts its retries".into()
        };
        f.check_first = "cable and optic (reseat, swap), the module's temperature and power (ethtool -m), the switch port's error and flap counters, link_down_events_phy".into();
        f.why = "a link that goes down and up again and again is a physical-layer problem until shown otherwise".into();
        out.push(f);
    }
}

/// PCIe from the kernel log: the driver's bandwidth notice against the
/// device's capability and the port's rate, slot power, a slot that lost
/// the device, AER errors.
fn pcie_events(ctx: &Context, all: &[(&str, &Event)], out: &mut Vec<Finding>) {
    let rate_mbps = line_rate_bps(ctx).map(|b| b / 1_000_000);
    let power: Vec<(&str, &Event)> = all
        .iter()
        .filter(|(_, e)| e.kind == EventKind::PcieInsufficientPower)
        .copied()
        .collect();
    let mut power_used = false;
    for (file, e) in all
        .iter()
        .filter(|(_, e)| e.kind == EventKind::PcieBandwidth)
    {
        let Some(p) = &e.pcie else { continue };
        let below_cap =
            p.limited || matches!((p.available_mbps, p.capable_mbps), (Some(a), Some(c)) if a < c);
        let below_port = matches!((p.available_mbps, rate_mbps), (Some(a), Some(r)) if a < r);
        if !below_cap && !below_port {
            continue;
        }
        let who = event_where(file, e);
        let mut f = Finding::new(Severity::Error, Symptom::PcieDegraded, who.clone());
        f.origin = Some(e.host.clone().unwrap_or_else(|| who.clone()));
        let link = |s: Option<u64>, w: Option<u64>| match (s, w) {
            (Some(s), Some(w)) => format!("{}.{} GT/s x{w}", s / 1000, (s % 1000) / 100),
            _ => "?".into(),
        };
        f.title = match (p.available_mbps, p.capable_mbps) {
            (Some(a), Some(c)) => format!(
                "PCIe link of {who} gives {} ({}) of the {} ({}) the NIC can use",
                gbps(a),
                link(p.speed_mts, p.width),
                gbps(c),
                link(p.capable_speed_mts, p.capable_width)
            ),
            (Some(a), None) => format!("PCIe link of {who} gives only {}", gbps(a)),
            _ => format!("PCIe link of {who} runs below its capability"),
        };
        f.evidence
            .push(format!("{file} line {}: {}", e.line, e.text));
        if let Some(at) = &p.limited_at {
            f.evidence.push(format!(
                "the limit is the link at {at} (the slot's upstream port or a bridge), not the NIC itself"
            ));
        }
        for (pf, pe) in power.iter().filter(|(_, pe)| pe.pci == e.pci) {
            f.evidence
                .push(format!("{pf} line {}: {}", pe.line, pe.text));
            power_used = true;
        }
        f.impact = match (p.available_mbps, rate_mbps) {
            (Some(a), Some(r)) if a < r => format!(
                "the NIC cannot move more than about {} per direction to or from memory, less than its {} port: it sends PAUSE when its receive buffer backs up and transmits below line rate",
                gbps(a),
                gbps(r)
            ),
            (Some(a), _) => format!(
                "the NIC cannot move more than about {} per direction to or from memory: a port faster than that never reaches line rate, and the NIC sends PAUSE when its receive buffer backs up",
                gbps(a)
            ),
            _ => "less PCIe bandwidth than the slot and device can do".into(),
        };
        f.check_first = "the slot and riser (reseat the card; an x16 card in an x8 or x4 slot, an adapter or riser that degrades the signal), BIOS lane bifurcation and PCIe generation settings, slot power; then lspci -vv LnkSta against LnkCap of the NIC and the port above it".into();
        f.why = "the driver compares the trained PCIe link with the device's capability at probe time and prints `limited by` when the link is slower or narrower; the receive path drains over this link".into();
        out.push(f);
    }
    if !power_used {
        if let Some(mut f) = event_finding(
            Severity::Warning,
            Symptom::PcieDegraded,
            &power,
            "the PCIe slot does not give the NIC the power it needs".into(),
        ) {
            f.impact =
                "the card may throttle, fail to bring up its optics, or train a slower PCIe link"
                    .into();
            f.check_first = "the slot's power rating against the card's (an x16 card in a low-power slot or adapter), the server's PCIe slot power settings".into();
            f.why = "mlx5 reads the slot power limit the platform advertises and warns when it is below what the card needs".into();
            out.push(f);
        }
    }
    let slot: Vec<(&str, &Event)> = all
        .iter()
        .filter(|(_, e)| e.kind == EventKind::PcieSlotDown)
        .copied()
        .collect();
    if let Some(mut f) = event_finding(
        Severity::Critical,
        Symptom::PcieDegraded,
        &slot,
        "the PCIe slot lost the NIC (surprise link down): the device is gone from the bus".into(),
    ) {
        f.impact = "every QP and netdev on the NIC fails at once; processes blocked on it (memory deregistration, commands) hang until the driver gives up; the job dies and the host may need a reboot".into();
        f.check_first = "the slot, riser and card seating, the PCIe link's AER errors before the drop, the card's power and temperature; whether someone hot-unplugged or reset it".into();
        f.why = "pciehp reports the slot's data link down or the card absent; the driver's health poll then finds the PCI device unreadable".into();
        out.push(f);
    }
    let aer: Vec<(&str, &Event)> = all
        .iter()
        .filter(|(_, e)| e.kind == EventKind::PcieError)
        .copied()
        .collect();
    if let Some(mut f) = event_finding(
        Severity::Error,
        Symptom::PcieDegraded,
        &aer,
        "PCIe errors or a reduced PCIe link in the kernel log".into(),
    ) {
        f.impact = "corrected errors cost replays and bandwidth; uncorrected ones reset the device; a limited link caps the NIC below line rate".into();
        f.check_first =
            "lspci -vv LnkSta against LnkCap, the riser and slot, BIOS PCIe settings".into();
        f.why = "the kernel prints AER errors and reduced-link notices when it sees them".into();
        out.push(f);
    }
}

/// NIC driver and firmware failures, per device; lines that only follow a
/// slot that lost the device are part of that finding.
fn driver_failures(all: &[(&str, &Event)], out: &mut Vec<Finding>) {
    let slot_lost = all.iter().any(|(_, e)| e.kind == EventKind::PcieSlotDown);
    let mut by: BTreeMap<String, Vec<(&str, &Event)>> = BTreeMap::new();
    for (file, e) in all
        .iter()
        .filter(|(_, e)| e.kind == EventKind::DriverFailure)
    {
        let l = e.text.to_ascii_lowercase();
        if slot_lost && (l.contains("fatal error") || l.contains("slot")) {
            continue;
        }
        let key = e
            .pci
            .clone()
            .or_else(|| e.device.clone())
            .unwrap_or_else(|| file.to_string());
        by.entry(key).or_default().push((file, e));
    }
    for (_, es) in by {
        let text: String = es
            .iter()
            .map(|(_, e)| e.text.to_ascii_lowercase())
            .collect::<Vec<_>>()
            .join("\n");
        let health = text.contains("health compromised")
            || text.contains("firmware internal error")
            || text.contains("fatal error");
        let probe = text.contains("probe of")
            || text.contains("load_one failed")
            || text.contains("init_one failed")
            || text.contains("handle_hca_cap failed");
        let (sev, title, impact, check) = if health {
            (
                Severity::Critical,
                "the NIC firmware reported a fatal health error: the device stops working until it is reset",
                "every QP and netdev on the device fails; the driver resets the device (or leaves it dead), and jobs on it abort",
                "the health syndrome in the log against the firmware's release notes, the firmware version (upgrade to the current one for the card), what the host did to the device just before (VF/vDPA set-up, resets); the vendor's support with the health dump",
            )
        } else if probe {
            (
                Severity::Error,
                "the NIC driver failed to initialise the device: no netdev and no RDMA device appear",
                "the host has no RDMA port on this NIC: jobs fall back to TCP or fail at start-up",
                "the driver against the firmware (a driver module from another kernel build, firmware too old or too new for it), the firmware version, then the device's PCIe link and power",
            )
        } else {
            (
                Severity::Warning,
                "the NIC firmware does not support what the driver asks: firmware older than the driver expects",
                "features the driver needs may be missing: devices can fail to appear (RDMA devices absent from /sys/class/infiniband) or run without offloads",
                "update the NIC firmware to a release that supports this kernel's driver (or use the driver matching the firmware)",
            )
        };
        let Some(mut f) = event_finding(sev, Symptom::DriverFailure, &es, title.into()) else {
            continue;
        };
        f.impact = impact.into();
        f.check_first = check.into();
        f.why = "the driver logs these lines when the device does not answer its commands as expected at probe time or when its health poll finds the firmware stopped".into();
        out.push(f);
    }
}

/// UCX: none of the requested transports exist, or an endpoint carries
/// everything over TCP.
fn ucx_transports(all: &[(&str, &Event)], out: &mut Vec<Finding>) {
    let none: Vec<(&str, &Event)> = all
        .iter()
        .filter(|(_, e)| e.kind == EventKind::NoTransports)
        .copied()
        .collect();
    let avail: Vec<String> = none
        .iter()
        .flat_map(|(_, e)| e.transports.iter().cloned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let rdma = |t: &str| {
        ["rc", "ud", "dc", "ib", "mlx5", "verbs"]
            .iter()
            .any(|k| t.split(['_', '/']).next().is_some_and(|p| p.starts_with(k)))
    };
    if let Some(mut f) = event_finding(
        Severity::Error,
        Symptom::SocketFallback,
        &none,
        if avail.is_empty() {
            "UCX found none of the transports it was asked for".into()
        } else {
            format!(
                "UCX sees no RDMA transport: only {} are available",
                avail.join(", ")
            )
        },
    ) {
        f.impact = if avail.iter().any(|t| rdma(t)) {
            "the job cannot start with the transports it asked for".into()
        } else {
            "no RDMA: the job fails at start-up, or runs over TCP at a fraction of the bandwidth when TCP is allowed".into()
        };
        f.check_first = "`ucx_info -d` on the host: the RDMA devices UCX sees; whether UCX was built with verbs/mlx5 support, the container exposes /dev/infiniband, UCX_NET_DEVICES/UCX_TLS name devices that exist".into();
        f.why = "UCX lists the transports it could open; without rc/dc/ud it has found no usable RDMA device".into();
        out.push(f);
    }
    let local = |t: &str| {
        let tl = t.split('/').next().unwrap_or(t);
        matches!(
            tl,
            "self"
                | "knem"
                | "xpmem"
                | "mm"
                | "posix"
                | "sysv"
                | "cma"
                | "cuda_ipc"
                | "cuda_copy"
                | "rocm_copy"
                | "rocm_ipc"
                | "gdr_copy"
        )
    };
    let tcp_only: Vec<(&str, &Event)> = all
        .iter()
        .filter(|(_, e)| e.kind == EventKind::UcxLanes)
        .filter(|(_, e)| {
            let net: Vec<&String> = e.transports.iter().filter(|t| !local(t)).collect();
            !net.is_empty() && net.iter().all(|t| t.starts_with("tcp"))
        })
        .copied()
        .collect();
    if let Some(mut f) = event_finding(
        Severity::Warning,
        Symptom::SocketFallback,
        &tcp_only,
        "a UCX endpoint carries its traffic over TCP only: no RDMA lane".into(),
    ) {
        f.impact = "transfers to that peer run over TCP sockets: a fraction of RDMA bandwidth, with more latency and CPU".into();
        f.check_first = "`ucx_info -d` for the RDMA devices, UCX_TLS and UCX_NET_DEVICES, whether the peer is reachable over the RDMA port (same subnet, GID), the connection set-up path (a TCP sockaddr connection still uses RDMA lanes when they exist)".into();
        f.why = "UCX prints each endpoint's lanes (`ep_cfg`); a network lane other than tcp (rc_mlx5, dc_mlx5, ud) means RDMA is used".into();
        out.push(f);
    }
}

/// The bus bandwidth factor of a collective: busbw = algbw x factor
/// (nccl-tests doc/PERFORMANCE.md), as (numerator, denominator, formula).
fn busbw_factor(test: &str, n: u64) -> (u64, u64, String) {
    let n = n.max(1);
    let t = test.to_ascii_lowercase();
    if t.contains("all_reduce") || t.contains("allreduce") {
        (2 * (n - 1), n, format!("2(n-1)/n = 2x{}/{n}", n - 1))
    } else if t.contains("all_gather")
        || t.contains("allgather")
        || t.contains("reduce_scatter")
        || t.contains("reducescatter")
        || t.contains("alltoall")
    {
        (n - 1, n, format!("(n-1)/n = {}/{n}", n - 1))
    } else if t.contains("broadcast")
        || t.contains("reduce")
        || t.contains("sendrecv")
        || t.contains("hypercube")
    {
        (1, 1, "1".into())
    } else {
        (
            1,
            1,
            "1 (the test's name was not printed: busbw taken as algbw)".into(),
        )
    }
}

/// The active NICs of each host, from the devinfo files (one host per
/// file, see [`host_from_path`]) or, failing that, the NET/IB devices of
/// the NCCL logs (one host per log).
fn nics_per_host(ctx: &Context) -> BTreeMap<String, u64> {
    let mut per: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, devs) in &ctx.devinfo {
        for d in devs.iter().filter(|d| d.ports.iter().any(|p| p.active)) {
            per.entry(host_from_path(file))
                .or_default()
                .insert(d.name.clone());
        }
    }
    if per.is_empty() {
        for (file, n) in &ctx.nccl {
            for d in &n.net_devs {
                per.entry(host_from_path(file))
                    .or_default()
                    .insert(format!("{}:{}", d.device, d.port));
            }
        }
    }
    per.into_iter().map(|(h, s)| (h, s.len() as u64)).collect()
}

/// `12.34 GB/s` of MB/s.
fn gbytes(mbps: u64) -> String {
    format!("{}.{:02} GB/s", mbps / 1000, (mbps % 1000) / 10)
}

/// nccl-tests: wrong results; processes that ran as separate tests; bus
/// bandwidth across hosts against what one host's NICs allow.
///
/// Contract: between hosts, every byte of bus bandwidth crosses a host
/// boundary through that host's NICs, so the bound is the NICs of ONE
/// host (their count x link rate / 8), never the sum over hosts; the
/// finding states the formula with its numbers, and its percentage is
/// computed from those same numbers.
fn nccl_tests(ctx: &Context, out: &mut Vec<Finding>) {
    let rate = line_rate_bps(ctx);
    let per_host_nics = nics_per_host(ctx);
    for (file, t) in &ctx.nccl_tests {
        let wrong = t.wrong();
        if wrong > 0 {
            let mut f = Finding::new(Severity::Critical, Symptom::CompletionError, file.clone());
            f.title = format!("nccl-tests found {wrong} wrong result(s)");
            f.evidence = t
                .rows
                .iter()
                .filter(|r| r.oop_wrong.unwrap_or(0) > 0 || r.ip_wrong.unwrap_or(0) > 0)
                .take(6)
                .map(|r| {
                    format!(
                        "line {}: {} bytes #wrong out-of-place {} in-place {}",
                        r.line,
                        r.bytes,
                        r.oop_wrong.unwrap_or(0),
                        r.ip_wrong.unwrap_or(0)
                    )
                })
                .collect();
            f.impact =
                "silent data corruption: training diverges or produces wrong gradients".into();
            f.check_first = "GPU memory errors (nvidia-smi -q ECC, Xid in dmesg), PCIe AER errors, the NCCL version, NCCL_PROTO".into();
            f.why =
                "nccl-tests checks every element of the result; #wrong counts mismatches".into();
            out.push(f);
        }
        separate_runs(file, t, out);
        let per_host = t.ranks_per_host();
        let hosts = per_host.len() as u64;
        let (Some(peak), Some(rate)) = (t.peak_busbw_mbps(), rate) else {
            continue;
        };
        if hosts < 2 {
            continue;
        }
        let ranks = t.ranks.len() as u64;
        let gpus = per_host.values().copied().max().unwrap_or(1).max(1);
        // The NICs of one host: the most any one host has.
        let nics = per_host_nics.values().copied().max().unwrap_or(1).max(1);
        let rate_mbps = rate / 8 / 1_000_000;
        let expect_mbps = rate_mbps.saturating_mul(nics).max(1);
        let share = u64::try_from(u128::from(peak) * 1_000_000 / u128::from(expect_mbps))
            .unwrap_or(u64::MAX);
        let sev = if share < 500_000 {
            Severity::Warning
        } else {
            Severity::Info
        };
        let test = t.test.as_deref().unwrap_or("nccl-tests");
        let (num, den, factor) = busbw_factor(test, ranks);
        let mut f = Finding::new(sev, Symptom::SlowCollective, file.clone());
        f.title = format!(
            "{test} peak busbw {} is {} of the {} one host's NICs allow",
            gbytes(peak),
            pct(share),
            gbytes(expect_mbps)
        );
        f.evidence.push(format!(
            "bound = NICs of one host x link rate / 8 = {nics} x {} Gbit/s / 8 = {} ({expect_mbps} MB/s); peak busbw {peak} MB/s / {expect_mbps} MB/s = {}",
            rate / 1_000_000_000,
            gbytes(expect_mbps),
            pct(share)
        ));
        f.evidence.push(format!(
            "{ranks} ranks on {hosts} hosts (up to {gpus} per host){}",
            match t.avg_busbw_mbps {
                Some(a) => format!(", avg busbw {a} MB/s"),
                None => String::new(),
            }
        ));
        // time = S / algbw = S x factor / busbw, for S = 1 GB = 1000 MB.
        let ms = |busbw: u64| {
            u64::try_from(
                1_000_000u128 * u128::from(num) / u128::from(den.max(1)) / u128::from(busbw.max(1)),
            )
            .unwrap_or(u64::MAX)
        };
        f.impact = format!(
            "a {test} of S bytes takes S x {factor} / busbw: 1 GB takes about {} ms at {} instead of {} ms at the bound",
            ms(peak),
            gbytes(peak),
            ms(expect_mbps)
        );
        f.check_first = "pause and drops on the ports during the run, NCCL using NET/IB with GDRDMA on every NIC, NCCL_IB_HCA listing all rails, GPU-NIC affinity".into();
        f.why = format!(
            "nccl-tests' busbw (algbw x {factor} for this collective, doc/PERFORMANCE.md) is defined to compare with the bottleneck bandwidth; between hosts that is one host's NIC bandwidth, since each host sends and receives its share through its own NICs"
        );
        out.push(f);
    }
}

/// Output that shows processes running as separate single-process tests:
/// several `# nThread` headers or `# Avg bus bandwidth` summaries, or the
/// same rank number on different hosts.
fn separate_runs(file: &str, t: &crate::realnic::tools::NcclTests, out: &mut Vec<Finding>) {
    let mut rank_hosts: BTreeMap<u64, BTreeSet<&str>> = BTreeMap::new();
    for r in &t.ranks {
        rank_hosts
            .entry(r.rank)
            .or_default()
            .insert(r.host.as_str());
    }
    let dup_rank = rank_hosts.iter().find(|(_, h)| h.len() > 1);
    if t.starts < 2 && t.avg_busbw_all.len() < 2 && dup_rank.is_none() {
        return;
    }
    let mut f = Finding::new(Severity::Warning, Symptom::SlowCollective, file.to_string());
    f.title = "the processes ran as separate single-host tests: the numbers measure no traffic between hosts".into();
    if let Some((rank, hosts)) = dup_rank {
        let hs: Vec<&str> = hosts.iter().copied().collect();
        f.evidence.push(format!(
            "rank {rank} on {} hosts: {}",
            hs.len(),
            hs.join(", ")
        ));
    }
    if t.starts > 1 {
        f.evidence
            .push(format!("{} `# nThread` headers in one output", t.starts));
    }
    if t.avg_busbw_all.len() > 1 {
        let v: Vec<String> = t
            .avg_busbw_all
            .iter()
            .map(|m| format!("{m} MB/s"))
            .collect();
        f.evidence.push(format!(
            "{} `# Avg bus bandwidth` summaries: {}",
            v.len(),
            v.join(", ")
        ));
    }
    f.impact = "the bandwidth shown is each host's local result (the same as a one-host run): it says nothing about the network, and a real multi-host job may be much slower".into();
    f.check_first = "rebuild nccl-tests with MPI support (make clean; make MPI=1 MPI_HOME=...) and launch one MPI job across the hosts; the output must list every rank once with one header".into();
    f.why = "built without MPI, each process launched by mpirun initialises its own communicator of its local GPUs and prints its own header and summary".into();
    out.push(f);
}
