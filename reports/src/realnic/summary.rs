//! Short human-readable summaries of parsed files (what `rocelab parse`
//! prints without `--json`).

use std::fmt::Write as _;

use super::Parsed;

/// `bits/s` as `97.39 Gb/s`.
pub fn gbps(bps: u64) -> String {
    format!(
        "{}.{:02} Gb/s",
        bps / 1_000_000_000,
        (bps % 1_000_000_000) / 10_000_000
    )
}

/// Nanoseconds as `0.94 us`.
pub fn usec(ns: u64) -> String {
    format!("{}.{:02} us", ns / 1000, (ns % 1000) / 10)
}

fn opt<T: ToString>(v: &Option<T>) -> String {
    v.as_ref()
        .map_or_else(|| "?".to_string(), ToString::to_string)
}

/// A few lines saying what was understood.
pub fn summarize(p: &Parsed) -> String {
    let mut s = String::new();
    match p {
        Parsed::Perftest(r) => {
            for run in &r.runs {
                let _ = writeln!(
                    s,
                    "{} [{:?}] device {} {} qps {} MTU {} link {} GID index {}{}{}",
                    run.title.as_deref().unwrap_or("(untitled excerpt)"),
                    run.side,
                    opt(&run.device),
                    opt(&run.connection),
                    opt(&run.qps),
                    opt(&run.mtu_bytes),
                    opt(&run.link_type),
                    opt(&run.gid_index),
                    if run.duration_mode {
                        ", duration mode"
                    } else {
                        ""
                    },
                    if run.truncated { ", TRUNCATED" } else { "" },
                );
                for (l, r) in run.local.iter().zip(run.remote.iter()) {
                    let _ = writeln!(
                        s,
                        "  QPN {:#x} -> {:#x}  {} -> {}",
                        l.qpn.unwrap_or(0),
                        r.qpn.unwrap_or(0),
                        l.gid_ipv4.as_deref().unwrap_or("-"),
                        r.gid_ipv4.as_deref().unwrap_or("-")
                    );
                }
                for b in &run.bw {
                    let _ = writeln!(
                        s,
                        "  {:>8} B x {:>9}: avg {:>12}  peak {:>12}  {} msg/s",
                        b.bytes,
                        b.iterations,
                        gbps(b.avg_bps),
                        if b.peak_bps > 0 {
                            gbps(b.peak_bps)
                        } else {
                            "-".into()
                        },
                        opt(&b.msg_rate_per_s)
                    );
                }
                for l in &run.lat {
                    let _ = writeln!(
                        s,
                        "  {:>8} B x {:>9}: min {} typical {} avg {} p99 {} max {}",
                        l.bytes,
                        l.iterations,
                        usec(l.min_ns),
                        usec(l.typical_ns),
                        usec(l.avg_ns),
                        l.p99_ns.map_or_else(|| "?".into(), usec),
                        usec(l.max_ns)
                    );
                }
                for l in &run.lat_duration {
                    let _ = writeln!(
                        s,
                        "  {:>8} B x {:>9}: avg {} at {} transactions/s",
                        l.bytes,
                        l.iterations,
                        usec(l.avg_ns),
                        l.tps
                    );
                }
                if let Some(c) = &run.counters {
                    let _ = writeln!(
                        s,
                        "  counter delta of the run (line {}): device {}, {} counters, over {}",
                        c.line,
                        opt(&c.device),
                        c.counters.len(),
                        c.duration_ns
                            .map_or_else(|| "?".into(), |n| format!("{n} ns"))
                    );
                    for (k, v) in c.counters.iter().filter(|(_, v)| **v > 0) {
                        let _ = writeln!(s, "    {k}: {v}");
                    }
                }
            }
            for e in &r.errors {
                let _ = writeln!(
                    s,
                    "line {}: completion error status {} {} syndrome {}",
                    e.line,
                    opt(&e.status),
                    e.status_text.as_deref().unwrap_or(""),
                    e.vendor_err
                        .map_or_else(|| "?".into(), |v| format!("{v:#x}"))
                );
            }
            let _ = writeln!(s, "{} warning line(s) skipped", r.warnings.len());
        }
        Parsed::Ethtool(snaps) => {
            for (i, d) in snaps.iter().enumerate() {
                let _ = writeln!(
                    s,
                    "snapshot {} (line {}): {:?}, {} counters, host {}, time {}",
                    i + 1,
                    d.line,
                    d.vendor,
                    d.raw.len(),
                    opt(&d.host),
                    d.time_ns.map_or_else(|| "-".into(), |t| format!("{t} ns"))
                );
                for (k, v) in d.counters.iter().filter(|(k, v)| **v > 0 && is_key(k)) {
                    let _ = writeln!(s, "  {k}: {v}");
                }
            }
        }
        Parsed::Rdma(snaps) => {
            for (i, snap) in snaps.iter().enumerate() {
                for l in &snap.links {
                    let _ = writeln!(
                        s,
                        "snapshot {} {}/{}: {} counters, host {}",
                        i + 1,
                        l.device,
                        l.port,
                        l.raw.len(),
                        opt(&snap.host)
                    );
                    for (k, v) in l.counters.iter().filter(|(_, v)| **v > 0) {
                        let _ = writeln!(s, "  {k}: {v}");
                    }
                }
            }
        }
        Parsed::Topo(t) => {
            let _ = writeln!(s, "devices: {}", t.devices.join(" "));
            for g in t.nearest_nics() {
                let _ = writeln!(
                    s,
                    "  {} -> {}{}: {}{}",
                    g.gpu,
                    g.nic,
                    g.nic_device
                        .as_deref()
                        .map(|d| format!(" ({d})"))
                        .unwrap_or_default(),
                    g.link.code(),
                    if g.link.gdr_by_default() {
                        " (GPUDirect RDMA by default)"
                    } else {
                        " (no GPUDirect RDMA by default)"
                    }
                );
            }
        }
        Parsed::Devinfo(devs) => {
            for d in devs {
                let _ = writeln!(
                    s,
                    "{} [{}] fw {} part {}{}",
                    d.name,
                    d.tool,
                    opt(&d.fw_ver),
                    opt(&d.part_id),
                    if d.config.is_empty() {
                        String::new()
                    } else {
                        format!(", {} configuration parameters", d.config.len())
                    }
                );
                for c in &d.config {
                    let _ = writeln!(
                        s,
                        "  {}{} = {}",
                        if c.modified { "*" } else { "" },
                        c.name,
                        c.current().unwrap_or("?")
                    );
                }
                for p in &d.ports {
                    let _ = writeln!(
                        s,
                        "  port {}: {} / {} {} MTU {} of {} rate {}{}{}",
                        p.port,
                        opt(&p.state),
                        opt(&p.phys_state),
                        opt(&p.link_layer),
                        opt(&p.active_mtu),
                        opt(&p.max_mtu),
                        p.rate_bps.map_or_else(|| "?".into(), gbps),
                        match (p.max_width_lanes, p.max_lane_bps) {
                            (None, None) => String::new(),
                            (w, l) => format!(
                                " (capable of {}X at {} per lane)",
                                opt(&w),
                                l.map_or_else(|| "?".into(), gbps)
                            ),
                        },
                        p.attributes
                            .get("peer")
                            .or_else(|| p.attributes.get("netdev"))
                            .map(|x| format!(" -> {x}"))
                            .unwrap_or_default()
                    );
                }
            }
        }
        Parsed::MlnxQos(q) => {
            let _ = writeln!(
                s,
                "trust {} PFC on {:?}, DSCP 26 -> prio {}, {} traffic classes",
                opt(&q.trust),
                q.pfc_priorities(),
                q.dscp2prio
                    .get(&26)
                    .map_or_else(|| "?".into(), ToString::to_string),
                q.tcs.len()
            );
        }
        Parsed::ShowGids(g) => {
            for e in g {
                let _ = writeln!(
                    s,
                    "{}{}/{} index {}: {} {} {}",
                    e.host
                        .as_deref()
                        .map(|h| format!("{h}: "))
                        .unwrap_or_default(),
                    e.device,
                    e.port,
                    e.index,
                    e.version,
                    e.ipv4.as_deref().unwrap_or("(no IPv4)"),
                    if e.is_rocev2_ipv4() {
                        "<- routable RoCEv2"
                    } else {
                        ""
                    }
                );
            }
        }
        Parsed::Nccl(n) => {
            let _ = writeln!(
                s,
                "NCCL {} network {} devices [{}]",
                opt(&n.version),
                opt(&n.network),
                n.net_devs
                    .iter()
                    .map(|d| format!("{}:{}:{}/{}", d.index, d.device, d.port, d.link))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            let net: Vec<_> = n.net_channels().collect();
            let gdr = net.iter().filter(|c| c.gdr).count();
            let _ = writeln!(
                s,
                "  {} network channel connections, {} with GPUDirect RDMA",
                net.len(),
                gdr
            );
            for e in &n.errors {
                let _ = writeln!(s, "  line {}: completion status {}", e.line, opt(&e.status));
            }
        }
        Parsed::SimResults(v) => {
            let _ = writeln!(
                s,
                "JSON document ({} top-level keys)",
                v.as_object().map_or(0, |m| m.len())
            );
        }
        Parsed::NcclTests(n) => {
            let _ = writeln!(
                s,
                "{}: {} rank(s) on {} host(s), {} row(s), peak busbw {} MB/s, avg busbw {} MB/s, #wrong {}",
                n.test.as_deref().unwrap_or("nccl-tests"),
                n.ranks.len(),
                n.ranks_per_host().len(),
                n.rows.len(),
                opt(&n.peak_busbw_mbps()),
                opt(&n.avg_busbw_mbps),
                n.wrong()
            );
            for r in &n.ranks {
                let _ = writeln!(
                    s,
                    "  rank {} on {} device {} {}",
                    r.rank,
                    r.host,
                    opt(&r.device),
                    r.gpu.as_deref().unwrap_or("")
                );
            }
        }
        Parsed::Switch(r) => {
            for p in &r.pfc {
                let _ = writeln!(s, "{} PFC rx {:?} tx {:?}", p.port, p.rx, p.tx);
            }
            for w in &r.watchdog {
                let _ = writeln!(
                    s,
                    "{}:{} {} storms detected {} restored {}, tx drop {}, rx drop {}",
                    w.port,
                    opt(&w.queue),
                    w.status,
                    opt(&w.detected),
                    opt(&w.restored),
                    opt(&w.tx_drop),
                    opt(&w.rx_drop)
                );
            }
            for q in &r.queues {
                let _ = writeln!(
                    s,
                    "{} {} packets {} drops {}",
                    q.port,
                    q.queue,
                    opt(&q.packets),
                    opt(&q.drop_packets)
                );
            }
        }
        Parsed::Lspci(ls) => {
            for p in ls {
                let _ = writeln!(
                    s,
                    "{} {}: LnkCap {} MT/s x{}, LnkSta {} MT/s x{}{}",
                    p.address,
                    p.description,
                    opt(&p.cap_speed_mts),
                    opt(&p.cap_width),
                    opt(&p.sta_speed_mts),
                    opt(&p.sta_width),
                    if p.degraded() { " DEGRADED" } else { "" }
                );
            }
        }
        Parsed::EthtoolLink(ls) => {
            for e in ls {
                let _ = writeln!(
                    s,
                    "{}: speed {} Mb/s (max supported {}), duplex {}, link {}, pause rx {} tx {}",
                    e.interface.as_deref().unwrap_or("?"),
                    opt(&e.speed_mbps),
                    opt(&e.max_supported_mbps),
                    e.duplex.as_deref().unwrap_or("-"),
                    opt(&e.link_detected),
                    opt(&e.pause_rx),
                    opt(&e.pause_tx)
                );
            }
        }
        Parsed::MmuConfig(c) => {
            for b in &c.pools {
                let _ = writeln!(
                    s,
                    "pool {}: size {} type {} mode {}",
                    b.block.name,
                    opt(&b.size),
                    b.block.text("type").unwrap_or("-"),
                    b.block.text("mode").unwrap_or("-")
                );
            }
            for p in &c.profiles {
                let _ = writeln!(
                    s,
                    "profile {}: pool {} dynamic_th {} static_th {} xoff {}",
                    p.block.name,
                    p.pool().unwrap_or("-"),
                    opt(&p.dynamic_th),
                    opt(&p.static_th),
                    opt(&p.xoff)
                );
            }
        }
        Parsed::EcnConfig(c) => {
            for p in &c.profiles {
                let _ = writeln!(
                    s,
                    "WRED profile {}: ecn {} green min {} max {} probability {} %",
                    p.block.name,
                    p.ecn.as_deref().unwrap_or("-"),
                    opt(&p.green_min),
                    opt(&p.green_max),
                    opt(&p.green_probability)
                );
            }
            for q in &c.queues {
                let _ = writeln!(
                    s,
                    "queue {}: ECN {}",
                    q.queue,
                    if q.on { "on" } else { "off" }
                );
            }
        }
        Parsed::Events(es) => {
            for e in es {
                let _ = writeln!(
                    s,
                    "line {}: {:?} {} {}",
                    e.line,
                    e.kind,
                    e.device.as_deref().unwrap_or("-"),
                    e.pci.as_deref().unwrap_or("")
                );
            }
        }
    }
    s
}

/// Counters worth showing in a summary.
fn is_key(k: &str) -> bool {
    k.contains("pause")
        || k.contains("discard")
        || k.contains("storm")
        || k.contains("err")
        || k.contains("oversize")
        || k.contains("out_of")
        || k.contains("link_down")
        || (k.contains("prio") && k.ends_with("_bytes"))
        || k.contains("rdma_unicast_bytes")
}
