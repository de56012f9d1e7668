//! Checks on the platform around the NICs, from the tools beyond NIC
//! counters: a PFC deadlock a simulated run's detector found, the
//! switches' PFC watchdog and queue drops, PCIe links, link settings,
//! kernel/UCX events, nccl-tests results, and the kinds of GID the two ends
//! of a perftest run used.
//!
//! Thresholds and where they come from are listed in docs/NIC-DOCTOR.md.

use super::context::Context;
use super::finding::{Finding, Severity, Symptom};
use super::wording::pct;
use crate::realnic::tools::{EventKind, PciLink};

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
                let (lf, rf) = (gid_family(lg), gid_family(rg));
                if lf == rf {
                    continue;
                }
                let mut f = Finding::new(Severity::Error, Symptom::AckTimeout, file.clone());
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
    for (file, r) in &ctx.switch {
        for w in &r.watchdog {
            let det = w.detected.unwrap_or(0);
            let now = w.status.eq_ignore_ascii_case("stormed");
            if det == 0 && !now {
                continue;
            }
            stormed_now |= now;
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
    let mut f = Finding::new(
        if stormed_now {
            Severity::Critical
        } else {
            Severity::Error
        },
        Symptom::PfcStorm,
        affects[0].clone(),
    );
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

/// SONiC `show queue counters`: drops on a queue.
fn queue_drops(ctx: &Context, out: &mut Vec<Finding>) {
    let mut ev = Vec::new();
    let mut affects = Vec::new();
    for (file, r) in &ctx.switch {
        for q in &r.queues {
            let d = q.drop_packets.unwrap_or(0);
            if d == 0 {
                continue;
            }
            affects.push(format!("{} {}", q.port, q.queue));
            ev.push(format!(
                "{file} line {}: {} {} dropped {} packets ({} bytes) of {}",
                q.line,
                q.port,
                q.queue,
                d,
                q.drop_bytes
                    .map(|b| b.to_string())
                    .unwrap_or_else(|| "?".into()),
                q.packets.unwrap_or(0)
            ));
        }
    }
    if ev.is_empty() {
        return;
    }
    let mut f = Finding::new(Severity::Warning, Symptom::PacketLoss, affects[0].clone());
    f.origin = Some(affects[0].split(' ').next().unwrap_or("").to_string());
    f.affects = affects;
    f.title = "switch queues dropped packets (totals: check whether they still grow)".into();
    f.evidence = ev;
    f.impact = "drops on the RoCE queue cost go-back-N windows and ACK timeouts; on other queues they are TCP's problem".into();
    f.check_first = "which queue carries RoCE (its PFC priority) and whether PFC is enabled on it on this switch; buffer profile and headroom".into();
    f.why = "queue counters are cumulative since clear; drops on a lossless queue mean PFC failed or is off".into();
    out.push(f);
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

/// Kernel and UCX events.
fn events(ctx: &Context, out: &mut Vec<Finding>) {
    use std::collections::BTreeMap;
    let mut by: BTreeMap<EventKind, Vec<(String, &crate::realnic::tools::Event)>> = BTreeMap::new();
    for (file, es) in &ctx.events {
        for e in es {
            by.entry(e.kind).or_default().push((file.clone(), e));
        }
    }
    for (kind, es) in by {
        let devs: Vec<String> = {
            let mut d: Vec<String> = es
                .iter()
                .filter_map(|(_, e)| e.device.clone().or_else(|| e.pci.clone()))
                .collect();
            d.sort();
            d.dedup();
            d
        };
        let subject = devs.first().cloned().unwrap_or_else(|| es[0].0.clone());
        let (sev, symptom, title, impact, check, why) = match kind {
            EventKind::LinkUp => continue,
            EventKind::LinkDown => (
                Severity::Error,
                Symptom::LinkDegraded,
                "the kernel logged link down events",
                "each flap stalls every QP on the port for the ACK timeout and can fail the collective (status 12)",
                "cable/optic and the switch port's error counters; link_down_events_phy; the module's temperature and power",
                "a link that goes down and up is a physical-layer problem until shown otherwise",
            ),
            EventKind::PauseStorm => (
                Severity::Critical,
                Symptom::PfcStorm,
                "the NIC driver logged a PFC pause storm",
                "the NIC stopped honouring or sending pause to protect the fabric: drops and timeouts on the lossless priority follow",
                "what stopped draining on this host (hung process, GPU, PCIe); tx_pause_storm_*_events; the switch PFC watchdog",
                "mlx5 and ice log a storm when a port stays in pause beyond the driver's stall threshold",
            ),
            EventKind::PcieError => (
                Severity::Error,
                Symptom::PcieDegraded,
                "PCIe errors or a reduced PCIe link in the kernel log",
                "corrected errors cost replays and bandwidth; uncorrected ones reset the device; a limited link caps the NIC below line rate",
                "lspci -vv LnkSta against LnkCap, the riser and slot, BIOS PCIe settings",
                "the kernel prints AER errors and 'limited by' bandwidth notices at probe time",
            ),
            EventKind::RetryExceeded => (
                Severity::Critical,
                Symptom::AckTimeout,
                "transport retry counter exceeded (UCX/verbs): the QP gave up",
                "the collective aborts; the job restarts from its last checkpoint",
                "in order: (1) at the first transfer, addressing: GID index and RoCE version the same on both ends, VLAN/routing/MTU; (2) under load, packet loss: PFC on the RoCE priority end to end, drops and discards; (3) a link flap or port down during the run; (4) the peer process died or hung; (5) a too-short timeout (NCCL_IB_TIMEOUT / UCX_RC_TIMEOUT)",
                "retry exceeded means the requester's ACK timer expired retry_cnt + 1 times: nothing came back from the peer",
            ),
            EventKind::TxTimeout => (
                Severity::Warning,
                Symptom::LinkDegraded,
                "netdev TX timeouts or CQE errors",
                "the driver resets the queue; traffic on it stalls meanwhile",
                "firmware version, the port's pause (a long pause stalls TX), dmesg around the event",
                "a TX timeout means a send queue made no progress for the watchdog period",
            ),
        };
        let mut f = Finding::new(sev, symptom, subject.clone());
        f.origin = Some(subject);
        f.affects = devs;
        f.title = title.into();
        f.evidence = es
            .iter()
            .take(8)
            .map(|(file, e)| format!("{file} line {}: {}", e.line, e.text))
            .collect();
        if es.len() > 8 {
            f.evidence
                .push(format!("... {} such lines in all", es.len()));
        }
        f.impact = impact.into();
        f.check_first = check.into();
        f.why = why.into();
        out.push(f);
    }
}

/// nccl-tests: wrong results, and bus bandwidth against what the NICs
/// allow.
fn nccl_tests(ctx: &Context, out: &mut Vec<Finding>) {
    let rate = line_rate_bps(ctx);
    let nics = ctx
        .devinfo
        .iter()
        .flat_map(|(_, d)| d.iter())
        .filter(|h| h.ports.iter().any(|p| p.active))
        .count()
        .max(
            ctx.nccl
                .iter()
                .map(|(_, n)| n.net_devs.len())
                .max()
                .unwrap_or(0),
        ) as u64;
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
        let (Some(peak), Some(rate)) = (t.peak_busbw_mbps(), rate) else {
            continue;
        };
        let per_host = t.ranks_per_host();
        let hosts = per_host.len() as u64;
        if hosts < 2 {
            continue;
        }
        let gpus = per_host.values().copied().max().unwrap_or(1).max(1);
        let nics = nics.max(1);
        // Inter-node ring all-reduce: every byte of busbw (algbw x
        // 2(n-1)/n, nccl-tests doc/PERFORMANCE.md) crosses a node
        // boundary once, so a node's NIC bandwidth bounds it.
        let expect_mbps = (rate / 8 / 1_000_000).saturating_mul(nics).max(1);
        let share = u64::try_from(u128::from(peak) * 1_000_000 / u128::from(expect_mbps))
            .unwrap_or(u64::MAX);
        let sev = if share < 500_000 {
            Severity::Warning
        } else {
            Severity::Info
        };
        let mut f = Finding::new(sev, Symptom::SlowCollective, file.clone());
        f.title = format!(
            "{} peak busbw {}.{:02} GB/s is {} of the {}.{:02} GB/s the NICs allow",
            t.test.as_deref().unwrap_or("nccl-tests"),
            peak / 1000,
            (peak % 1000) / 10,
            pct(share),
            expect_mbps / 1000,
            (expect_mbps % 1000) / 10
        );
        f.evidence.push(format!(
            "{} ranks on {hosts} hosts (up to {gpus} per host), {nics} active NIC(s) per host at {} Gbit/s; peak busbw {peak} MB/s, avg busbw {:?} MB/s",
            t.ranks.len(),
            rate / 1_000_000_000,
            t.avg_busbw_mbps
        ));
        f.impact = format!(
            "an all-reduce of S bytes takes 2(n-1)/n x S / busbw: at {}.{:02} GB/s a 1 GB all-reduce takes about {} ms instead of {} ms",
            peak / 1000,
            (peak % 1000) / 10,
            1_000_000 / peak.max(1),
            1_000_000 / expect_mbps
        );
        f.check_first = "pause and drops on the ports during the run, NCCL using NET/IB with GDRDMA on every NIC, NCCL_IB_HCA listing all rails, GPU-NIC affinity".into();
        f.why = "nccl-tests' busbw (algbw x 2(n-1)/n for all-reduce, doc/PERFORMANCE.md) is defined to be comparable to the bottleneck bandwidth; between nodes that is the node's NIC bandwidth (NIC count x speed / 8)".into();
        out.push(f);
    }
}
