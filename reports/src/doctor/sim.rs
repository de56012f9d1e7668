//! rocelab's own `results.json`, read for the doctor.
//!
//! The file is read leniently as JSON (older or newer files, hand-edited
//! ones): every object with a `summary` holding `goodput_bps` is one
//! variant. Its `ports` become counter snapshots under the names mlx5's
//! `ethtool -S` uses (`rx_prioN_discards`, `rx_prioN_pause`,
//! `*_pause_duration` in microseconds, ...), exactly what the simulator's
//! own `counters/<variant>/` dumps print, so one set of checks reads both;
//! pause rows are given for the priorities on which some port of the run
//! enabled: a port's own `pfc_priorities` when the file records them, else
//! the priorities on which some port of the run paused (older files). Its
//! `nics` become RDMA counter snapshots. The ports' effective settings
//! (`pfc_priorities`, the switches' `ecn` marking thresholds) and their
//! `ecn_marked` / `max_queue_bytes` are kept for the configuration checks.
//! Flow outcomes (unfinished, failed), retransmissions and step times are
//! kept as [`SimVariant`] facts for the findings' impact lines.

use std::collections::BTreeMap;

use serde_json::Value;

/// One port of a simulated run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimPort {
    /// Source name as the counter dumps name it: the host for a NIC port,
    /// `<switch>-p<port>` for a switch port.
    pub source: String,
    /// Node.
    pub node: String,
    /// Node at the other end of the link.
    pub peer: String,
    /// A host NIC port.
    pub is_nic: bool,
    /// Counters in mlx5 names.
    pub counters: BTreeMap<String, u64>,
    /// Deepest egress queue seen (bytes).
    pub max_queue_bytes: u64,
    /// Port number on its node.
    pub port: u64,
    /// Frames this port marked CE on the way out.
    pub ecn_marked: u64,
    /// Priorities with PFC on this port at the end of the run; `None`
    /// when the file does not say.
    pub pfc_priorities: Option<Vec<u8>>,
    /// Switch ports: the switch's ECN marking settings at the end of the
    /// run (empty: it marks nothing); `None` for NIC ports and files that
    /// do not say.
    pub ecn: Option<Vec<SimEcn>>,
    /// Switch ports: the switch's per-frame load balancing mode
    /// (`spray`, `adaptive`, ...); `None` under per-flow ECMP, for NIC
    /// ports and files that do not say.
    pub load_balancing: Option<String>,
}

/// One priority's ECN marking thresholds on a switch (bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimEcn {
    /// Priority whose queues mark.
    pub priority: u8,
    /// Queue depth where marking starts.
    pub kmin_bytes: u64,
    /// Queue depth where marking reaches its highest probability.
    pub kmax_bytes: u64,
}

/// One unfinished or failed flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimFlow {
    /// Flow id.
    pub id: u64,
    /// Sender host.
    pub src: String,
    /// Receiver host.
    pub dst: String,
    /// Bytes to move.
    pub size: u64,
    /// Bytes acknowledged by the end.
    pub acked: u64,
    /// Completed in error (retries exhausted).
    pub failed: bool,
}

/// One PFC deadlock the simulator's detector reported.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimDeadlock {
    /// Priority of the paused queues.
    pub priority: u64,
    /// Simulated time the cycle formed (ps).
    pub formed_ps: u64,
    /// Simulated time it was detected (ps).
    pub detected_ps: u64,
    /// Members as `<switch>-p<port>` (toward `peer`), in cycle order.
    pub members: Vec<(String, String)>,
}

/// One variant of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SimVariant {
    /// Variant name.
    pub name: String,
    /// Simulated time at the end (ps).
    pub sim_time_ps: u64,
    /// Flows in the workload.
    pub flows_total: u64,
    /// Flows completed.
    pub flows_completed: u64,
    /// Frames dropped anywhere.
    pub drops: u64,
    /// PAUSE frames sent.
    pub pause_frames_sent: u64,
    /// Data packets resent.
    pub retransmitted_packets: u64,
    /// Frames put on links.
    pub frames_sent: u64,
    /// Aggregate goodput (bit/s).
    pub goodput_bps: f64,
    /// Why the run stopped.
    pub stop_reason: String,
    /// Flows not completed (unfinished or failed).
    pub unfinished: Vec<SimFlow>,
    /// Ports.
    pub ports: Vec<SimPort>,
    /// Host RDMA counters: (host, counters).
    pub nics: Vec<(String, BTreeMap<String, u64>)>,
    /// Dependent workloads: (name, step time ps, ideal ps).
    pub groups: Vec<(String, Option<u64>, Option<u64>)>,
    /// PFC deadlocks (cycles of paused queues) the run reported.
    pub deadlocks: Vec<SimDeadlock>,
}

fn u(v: &Value, k: &str) -> u64 {
    match v.get(k) {
        Some(Value::Number(n)) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
            .unwrap_or(0),
        _ => 0,
    }
}

fn s(v: &Value, k: &str) -> String {
    v.get(k)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Every variant in a results file (empty when there is none).
pub fn variants(j: &Value) -> Vec<SimVariant> {
    let mut out = Vec::new();
    walk(j, 0, &mut out);
    out
}

fn walk(v: &Value, depth: usize, out: &mut Vec<SimVariant>) {
    if depth > 8 {
        return;
    }
    match v {
        Value::Object(m) => {
            if let Some(sum) = m.get("summary").filter(|s| s.get("goodput_bps").is_some()) {
                out.push(variant(sum, v, out.len()));
                return;
            }
            for x in m.values() {
                walk(x, depth + 1, out);
            }
        }
        Value::Array(a) => {
            for x in a {
                walk(x, depth + 1, out);
            }
        }
        _ => {}
    }
}

fn variant(sum: &Value, v: &Value, index: usize) -> SimVariant {
    let mut name = s(sum, "variant");
    if name.is_empty() {
        name = format!("variant{index}");
    }
    let mut r = SimVariant {
        name,
        sim_time_ps: u(sum, "sim_time_ps"),
        flows_total: u(sum, "flows_total"),
        flows_completed: u(sum, "flows_completed"),
        drops: u(sum, "drops"),
        pause_frames_sent: u(sum, "pause_frames_sent"),
        retransmitted_packets: u(sum, "retransmitted_packets"),
        frames_sent: u(sum, "frames_sent"),
        goodput_bps: sum
            .get("goodput_bps")
            .and_then(Value::as_f64)
            .unwrap_or(0.0),
        stop_reason: s(sum, "stop_reason"),
        ..SimVariant::default()
    };
    let empty = Vec::new();
    let arr = |k: &str| v.get(k).and_then(Value::as_array).unwrap_or(&empty).clone();
    for f in arr("flows") {
        let finished = f.get("finish_ps").is_some_and(|x| !x.is_null())
            || f.get("fct_ps").is_some_and(|x| !x.is_null());
        let failed = f.get("failed").and_then(Value::as_bool).unwrap_or(false);
        if !finished || failed {
            r.unfinished.push(SimFlow {
                id: u(&f, "id"),
                src: s(&f, "src"),
                dst: s(&f, "dst"),
                size: u(&f, "size").max(u(&f, "size_bytes")),
                acked: u(&f, "bytes_acked"),
                failed,
            });
        }
    }
    // Older files: the priorities on which some port paused stand in for
    // the PFC priorities (their pause rows are printed).
    let ports = arr("ports");
    let mut paused = [false; 8];
    for p in &ports {
        for (i, c) in p
            .get("prio")
            .and_then(Value::as_array)
            .unwrap_or(&empty)
            .iter()
            .take(8)
            .enumerate()
        {
            if u(c, "tx_pause") > 0 || u(c, "rx_pause") > 0 {
                paused[i] = true;
            }
        }
    }
    for p in &ports {
        let node = s(p, "node");
        let is_nic = p.get("is_nic").and_then(Value::as_bool).unwrap_or(false);
        let source = if is_nic {
            node.clone()
        } else {
            format!("{node}-p{}", u(p, "port"))
        };
        let pfc_priorities: Option<Vec<u8>> =
            p.get("pfc_priorities").and_then(Value::as_array).map(|a| {
                a.iter()
                    .filter_map(Value::as_u64)
                    .filter(|x| *x < 8)
                    .map(|x| x as u8)
                    .collect()
            });
        let ecn: Option<Vec<SimEcn>> = p.get("ecn").and_then(Value::as_array).map(|a| {
            a.iter()
                .filter(|e| u(e, "priority") < 8)
                .map(|e| SimEcn {
                    priority: u(e, "priority") as u8,
                    kmin_bytes: u(e, "kmin_bytes"),
                    kmax_bytes: u(e, "kmax_bytes"),
                })
                .collect()
        });
        let pause_rows = |i: usize| match &pfc_priorities {
            Some(list) => list.iter().any(|x| usize::from(*x) == i),
            None => paused[i],
        };
        let mut c = BTreeMap::new();
        let prios = p
            .get("prio")
            .and_then(Value::as_array)
            .unwrap_or(&empty)
            .clone();
        let sum = |k: &str| prios.iter().fold(0u64, |a, x| a.saturating_add(u(x, k)));
        c.insert("rx_packets_phy".into(), sum("rx_packets"));
        c.insert("tx_packets_phy".into(), sum("tx_packets"));
        c.insert("rx_bytes_phy".into(), sum("rx_bytes"));
        c.insert("tx_bytes_phy".into(), sum("tx_bytes"));
        c.insert("rx_discards_phy".into(), u(p, "rx_discards"));
        c.insert("tx_discards_phy".into(), 0);
        let fault = u(p, "fault_drops");
        if fault > 0 {
            // The simulator's link faults: frames lost on the wire, which
            // a real port counts as FCS errors.
            c.insert("rx_crc_errors_phy".into(), fault);
        }
        for (i, x) in prios.iter().take(8).enumerate() {
            for k in [
                "rx_bytes",
                "rx_packets",
                "rx_discards",
                "tx_bytes",
                "tx_packets",
            ] {
                let (dir, what) = k.split_once('_').unwrap_or((k, ""));
                c.insert(format!("{dir}_prio{i}_{what}"), u(x, k));
            }
            if pause_rows(i) {
                c.insert(format!("rx_prio{i}_pause"), u(x, "rx_pause"));
                c.insert(
                    format!("rx_prio{i}_pause_duration"),
                    u(x, "rx_pause_duration_ps") / 1_000_000,
                );
                c.insert(format!("tx_prio{i}_pause"), u(x, "tx_pause"));
                c.insert(
                    format!("tx_prio{i}_pause_duration"),
                    u(x, "tx_pause_duration_ps") / 1_000_000,
                );
            }
        }
        r.ports.push(SimPort {
            source,
            node,
            peer: s(p, "peer"),
            is_nic,
            counters: c,
            max_queue_bytes: u(p, "max_queue_bytes"),
            port: u(p, "port"),
            ecn_marked: u(p, "ecn_marked"),
            pfc_priorities,
            ecn,
            load_balancing: p
                .get("load_balancing")
                .and_then(Value::as_str)
                .map(String::from),
        });
    }
    for n in arr("nics") {
        let mut c = BTreeMap::new();
        if let Some(m) = n.as_object() {
            for (k, x) in m {
                if let Some(x) = x.as_u64() {
                    c.insert(k.clone(), x);
                }
            }
        }
        if let Some(x) = c.remove("retransmitted_packets") {
            c.insert("roce_adp_retrans".into(), x);
        }
        r.nics.push((s(&n, "node"), c));
    }
    for d in arr("deadlocks") {
        let members = d
            .get("members")
            .and_then(Value::as_array)
            .unwrap_or(&empty)
            .iter()
            .map(|m| (format!("{}-p{}", s(m, "node"), u(m, "port")), s(m, "peer")))
            .collect();
        r.deadlocks.push(SimDeadlock {
            priority: u(&d, "priority"),
            formed_ps: u(&d, "formed_ps"),
            detected_ps: u(&d, "detected_ps"),
            members,
        });
    }
    for g in arr("groups") {
        let opt = |k: &str| g.get(k).and_then(Value::as_u64);
        r.groups
            .push((s(&g, "name"), opt("step_time_ps"), opt("ideal_ps")));
    }
    r
}
