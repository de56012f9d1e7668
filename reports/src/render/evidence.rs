//! What the explanation reads from one run's records before it writes a
//! sentence: where and why frames were dropped, how each transmitter was
//! held off by PAUSE (how long in all, in how many episodes, the longest
//! without a break) and what the PFC watchdog did.
//!
//! Every figure comes from `results.json`: per-port counters (`ports`, only
//! when the scenario records them), the PAUSE intervals (`pauses`) and the
//! watchdog's events and counters (`pfcwd_events`, `pfcwd_stats`). A drop
//! is given a cause only when a counter names it; what no counter names
//! stays [`DropCauses::unexplained`]. Times are picoseconds.

use sim::results::RunResult;

/// Why a frame was dropped, as the counters tell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DropCause {
    /// Discarded by the PFC watchdog's `drop` action on a stormed queue
    /// (`pfcwd_stats` `tx_drop` and `rx_drop`): deliberate.
    Watchdog,
    /// Dropped at ingress on a priority the port treats as lossless: its
    /// PFC headroom (or buffer) was exhausted (`rx_prioN_buf_discard`).
    Lossless,
    /// Dropped at a switch ingress on a priority that port runs no PFC on
    /// (tail drop of a lossy priority).
    LossyPriority,
    /// Dropped by a host NIC whose receive buffer was full (the host took
    /// frames in slower than they arrived).
    NicBuffer,
    /// Dropped at a switch ingress on a priority the port runs PFC on, but
    /// not for lack of headroom: the switch had no route for the frame.
    NoRoute,
    /// Dropped at a switch ingress on a priority, where the port's PFC
    /// priorities are not recorded (older files).
    Ingress,
    /// Dropped at ingress with no priority counted (no queue pair for it).
    Unroutable,
    /// Lost on the link leaving the port by an injected fault.
    LinkFault,
    /// Lost because the link was down (`tx_discards`).
    LinkDown,
    /// Received with a bad FCS (`rx_crc_errors`).
    BadFcs,
    /// Received larger than the port's MTU (`rx_oversize`).
    Oversize,
}

/// The drops of one cause: how many, on which priorities, and the port
/// with the most of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropShare {
    /// The cause.
    pub cause: DropCause,
    /// Frames.
    pub frames: u64,
    /// The priorities they were counted on (sorted; empty where the
    /// counter has none).
    pub priorities: Vec<u8>,
    /// The port with the most of them: node, port, frames.
    pub top: Option<(String, u16, u64)>,
}

/// A run's drops by cause.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DropCauses {
    /// One entry per cause with drops, largest first.
    pub shares: Vec<DropShare>,
    /// Drops of the summary that no recorded counter explains (all of
    /// them but the watchdog's when `ports` is not recorded).
    pub unexplained: u64,
    /// True when the run's per-port counters are in the results.
    pub ports_recorded: bool,
}

impl DropCauses {
    /// The frames of `cause`.
    pub fn frames(&self, cause: DropCause) -> u64 {
        self.shares
            .iter()
            .filter(|s| s.cause == cause)
            .map(|s| s.frames)
            .sum()
    }
}

/// The drops of `r`, by cause.
pub fn drop_causes(r: &RunResult) -> DropCauses {
    let mut acc: Vec<(DropCause, u8, String, u16, u64)> = Vec::new();
    for q in &r.pfcwd_stats {
        let n = q.tx_drop.saturating_add(q.rx_drop);
        acc.push((DropCause::Watchdog, q.priority, q.node.clone(), q.port, n));
    }
    for p in &r.ports {
        let mut counted = 0u64;
        for (i, c) in p.prio.iter().enumerate() {
            let prio = u8::try_from(i).unwrap_or(u8::MAX);
            let buf = c.rx_buf_discard.min(c.rx_discards);
            let rest = c.rx_discards - buf;
            counted = counted.saturating_add(c.rx_discards);
            acc.push((DropCause::Lossless, prio, p.node.clone(), p.port, buf));
            let cause = match &p.pfc_priorities {
                _ if p.is_nic => DropCause::NicBuffer,
                Some(lossless) if lossless.contains(&prio) => DropCause::NoRoute,
                Some(_) => DropCause::LossyPriority,
                None => DropCause::Ingress,
            };
            acc.push((cause, prio, p.node.clone(), p.port, rest));
        }
        let e = &p.errors;
        for (cause, n) in [
            (DropCause::Unroutable, p.rx_discards.saturating_sub(counted)),
            (DropCause::LinkFault, p.fault_drops),
            (DropCause::LinkDown, e.tx_discards),
            (DropCause::BadFcs, e.rx_crc_errors),
            (DropCause::Oversize, e.rx_oversize),
        ] {
            acc.push((cause, u8::MAX, p.node.clone(), p.port, n));
        }
    }
    acc.retain(|x| x.4 > 0);
    let mut shares: Vec<DropShare> = Vec::new();
    for (cause, prio, node, port, n) in acc {
        let i = match shares.iter().position(|s| s.cause == cause) {
            Some(i) => i,
            None => {
                shares.push(DropShare {
                    cause,
                    frames: 0,
                    priorities: Vec::new(),
                    top: None,
                });
                shares.len() - 1
            }
        };
        let s = &mut shares[i];
        s.frames = s.frames.saturating_add(n);
        if prio != u8::MAX && !s.priorities.contains(&prio) {
            s.priorities.push(prio);
            s.priorities.sort_unstable();
        }
        // Per port: the same port may appear once per priority.
        let here: u64 = n + match &s.top {
            Some((tn, tp, tc)) if *tn == node && *tp == port => *tc,
            _ => 0,
        };
        let better = match &s.top {
            Some((tn, tp, tc)) => here > *tc || (here == *tc && (&node, port) < (tn, *tp)),
            None => true,
        };
        if better {
            s.top = Some((node, port, here));
        }
    }
    shares.sort_by(|a, b| b.frames.cmp(&a.frames).then(a.cause.cmp(&b.cause)));
    let explained: u64 = shares.iter().map(|s| s.frames).sum();
    DropCauses {
        shares,
        unexplained: r.summary.drops.saturating_sub(explained),
        ports_recorded: !r.ports.is_empty(),
    }
}

/// How one transmitter (a port and priority) was held off by PAUSE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// Node of the held transmitter.
    pub node: String,
    /// Its port.
    pub port: u16,
    /// The node that sent the PAUSE frames (empty when not recorded).
    pub peer: String,
    /// The priority held.
    pub priority: u8,
    /// Time held off in all, ps.
    pub total_ps: u64,
    /// Held-off episodes (XOFF until XON or expiry), counted or recorded.
    pub episodes: u64,
    /// The longest episode without a break, ps (0 when the intervals are
    /// not recorded).
    pub longest_ps: u64,
}

/// Every transmitter held off by PAUSE in `r`, from the recorded
/// intervals and, where present, the port counters (the larger total
/// wins: the intervals may be capped); largest total first.
pub fn held(r: &RunResult) -> Vec<Held> {
    let mut out: Vec<Held> = r
        .pauses
        .iter()
        .map(|s| Held {
            node: s.node.clone(),
            port: s.port,
            peer: s.peer.clone(),
            priority: s.priority,
            total_ps: s
                .intervals
                .iter()
                .map(|(a, b)| b.saturating_sub(*a))
                .fold(0u64, u64::saturating_add),
            episodes: s.intervals.len() as u64 + s.dropped_intervals,
            longest_ps: s
                .intervals
                .iter()
                .map(|(a, b)| b.saturating_sub(*a))
                .max()
                .unwrap_or(0),
        })
        .filter(|h| h.total_ps > 0)
        .collect();
    for p in &r.ports {
        for (i, c) in p.prio.iter().enumerate() {
            if c.rx_pause_duration_ps == 0 {
                continue;
            }
            let prio = u8::try_from(i).unwrap_or(u8::MAX);
            match out
                .iter_mut()
                .find(|h| h.node == p.node && h.port == p.port && h.priority == prio)
            {
                Some(h) => {
                    h.total_ps = h.total_ps.max(c.rx_pause_duration_ps);
                    h.episodes = h.episodes.max(c.rx_pause_transition);
                }
                None => out.push(Held {
                    node: p.node.clone(),
                    port: p.port,
                    peer: p.peer.clone(),
                    priority: prio,
                    total_ps: c.rx_pause_duration_ps,
                    episodes: c.rx_pause_transition,
                    longest_ps: 0,
                }),
            }
        }
    }
    out.sort_by(|a, b| {
        b.total_ps
            .cmp(&a.total_ps)
            .then(a.node.cmp(&b.node))
            .then(a.port.cmp(&b.port))
            .then(a.priority.cmp(&b.priority))
    });
    out
}

/// What the PFC watchdog did on one queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchdogQueue {
    /// Switch.
    pub node: String,
    /// Its port.
    pub port: u16,
    /// The node whose PAUSE frames stormed it.
    pub peer: String,
    /// Priority.
    pub priority: u8,
    /// The configured action (`drop`, `forward`, `alert`).
    pub action: String,
    /// When each storm was declared, ps.
    pub detected_ps: Vec<u64>,
    /// When each storm was restored, ps.
    pub restored_ps: Vec<u64>,
    /// Frames it dropped (`tx_drop` + `rx_drop`).
    pub dropped: u64,
}

/// The queues the PFC watchdog declared a storm on, in the order of the
/// first declaration.
pub fn watchdog(r: &RunResult) -> Vec<WatchdogQueue> {
    let mut out: Vec<WatchdogQueue> = Vec::new();
    for e in &r.pfcwd_events {
        let i = match out
            .iter()
            .position(|q| q.node == e.node && q.port == e.port && q.priority == e.priority)
        {
            Some(i) => i,
            None => {
                out.push(WatchdogQueue {
                    node: e.node.clone(),
                    port: e.port,
                    peer: e.peer.clone(),
                    priority: e.priority,
                    action: e.action.clone(),
                    detected_ps: Vec::new(),
                    restored_ps: Vec::new(),
                    dropped: 0,
                });
                out.len() - 1
            }
        };
        match e.event.as_str() {
            "storm_detected" => out[i].detected_ps.push(e.time_ps),
            "storm_restored" => out[i].restored_ps.push(e.time_ps),
            _ => {}
        }
    }
    for s in &r.pfcwd_stats {
        if let Some(q) = out
            .iter_mut()
            .find(|q| q.node == s.node && q.port == s.port && q.priority == s.priority)
        {
            q.dropped = s.tx_drop.saturating_add(s.rx_drop);
        }
    }
    out.retain(|q| !q.detected_ps.is_empty());
    out
}

/// A result with every count zero and nothing recorded: what the render
/// tests start from.
#[cfg(test)]
pub(super) fn empty_run(name: &str) -> RunResult {
    use sim::results::Summary;
    RunResult {
        summary: Summary {
            variant: name.into(),
            sim_time_ps: 0,
            events: 0,
            flows_completed: 0,
            flows_total: 0,
            goodput_bps: 0.0,
            drops: 0,
            trimmed: 0,
            pause_frames_sent: 0,
            pause_time_ps: 0,
            ecn_marked: 0,
            cnps_sent: 0,
            retransmitted_packets: 0,
            fct_p50_ps: None,
            fct_p99_ps: None,
            max_fct_ps: None,
            makespan_ps: 0,
            bytes_delivered: 0,
            frames_sent: 0,
            stop_reason: "idle".into(),
        },
        groups: Vec::new(),
        flows: Vec::new(),
        ports: Vec::new(),
        nics: Vec::new(),
        queues: Vec::new(),
        pauses: Vec::new(),
        pfcwd_events: Vec::new(),
        pfcwd_stats: Vec::new(),
        deadlocks: Vec::new(),
        flow_rates: Vec::new(),
        perftest: Vec::new(),
        training: Vec::new(),
        fluid: None,
        captures: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sim::results::{PfcwdEvent, PfcwdStats, PortRecord, PrioCounters};

    fn run(drops: u64) -> RunResult {
        let mut r = empty_run("v");
        r.summary.sim_time_ps = 1_000_000_000;
        r.summary.drops = drops;
        r
    }

    fn port(node: &str, n: u16, pfc: Option<Vec<u8>>) -> PortRecord {
        PortRecord {
            node: node.into(),
            port: n,
            peer: "x".into(),
            is_nic: false,
            prio: vec![PrioCounters::default(); 8],
            rx_discards: 0,
            fault_drops: 0,
            ecn_marked: 0,
            max_queue_bytes: 0,
            max_headroom_bytes: 0,
            tx_pause_storm_warning_events: 0,
            tx_pause_storm_error_events: 0,
            errors: Default::default(),
            pfc_priorities: pfc,
            ecn: None,
            load_balancing: None,
            infiniband: None,
        }
    }

    #[test]
    fn each_drop_goes_to_the_counter_that_names_it() {
        let mut r = run(100);
        let mut a = port("sw0", 1, Some(vec![3]));
        a.prio[3].rx_discards = 30;
        a.prio[3].rx_buf_discard = 30;
        a.prio[0].rx_discards = 20;
        a.rx_discards = 50;
        let mut b = port("sw0", 2, None);
        b.prio[3].rx_discards = 5;
        b.rx_discards = 5;
        b.errors.tx_discards = 7;
        let mut c = port("h0", 0, Some(vec![3]));
        c.is_nic = true;
        c.prio[3].rx_discards = 4;
        c.rx_discards = 4;
        let mut n = port("sw1", 1, Some(vec![3]));
        n.prio[3].rx_discards = 2;
        n.rx_discards = 2;
        r.ports = vec![a, b, c, n];
        r.pfcwd_stats = vec![PfcwdStats {
            node: "sw0".into(),
            port: 0,
            priority: 3,
            tx_drop: 11,
            rx_drop: 1,
            ..Default::default()
        }];
        let d = drop_causes(&r);
        assert_eq!(d.frames(DropCause::Lossless), 30);
        assert_eq!(d.frames(DropCause::LossyPriority), 20);
        assert_eq!(d.frames(DropCause::Ingress), 5);
        assert_eq!(d.frames(DropCause::NicBuffer), 4);
        assert_eq!(d.frames(DropCause::NoRoute), 2);
        assert_eq!(d.frames(DropCause::LinkDown), 7);
        assert_eq!(d.frames(DropCause::Watchdog), 12);
        assert_eq!(d.unexplained, 100 - 80);
        assert_eq!(d.shares[0].cause, DropCause::Lossless);
        assert_eq!(d.shares[0].top, Some(("sw0".into(), 1, 30)));
        assert_eq!(d.shares[0].priorities, vec![3]);
        // Without ports only the watchdog's are known.
        r.ports.clear();
        let d = drop_causes(&r);
        assert!(!d.ports_recorded);
        assert_eq!(d.unexplained, 88);
    }

    #[test]
    fn storms_are_told_apart_by_their_longest_episode() {
        let mut r = run(0);
        r.pauses = vec![
            sim::results::PauseSeries {
                node: "sw0".into(),
                port: 0,
                peer: "h0".into(),
                priority: 3,
                intervals: vec![(0, 10), (20, 30), (40, 45)],
                dropped_intervals: 2,
            },
            sim::results::PauseSeries {
                node: "h1".into(),
                port: 0,
                peer: "sw0".into(),
                priority: 3,
                intervals: vec![(5, 500)],
                dropped_intervals: 0,
            },
        ];
        let h = held(&r);
        assert_eq!(h[0].node, "h1");
        assert_eq!(
            (h[0].total_ps, h[0].longest_ps, h[0].episodes),
            (495, 495, 1)
        );
        assert_eq!((h[1].total_ps, h[1].longest_ps, h[1].episodes), (25, 10, 5));
        r.pfcwd_events = ["storm_detected", "storm_restored"]
            .iter()
            .enumerate()
            .map(|(i, e)| PfcwdEvent {
                time_ps: 100 * (i as u64 + 1),
                node: "sw0".into(),
                port: 0,
                peer: "h0".into(),
                priority: 3,
                event: (*e).into(),
                action: "drop".into(),
            })
            .collect();
        r.pfcwd_stats = vec![PfcwdStats {
            node: "sw0".into(),
            port: 0,
            priority: 3,
            tx_drop: 4,
            ..Default::default()
        }];
        let w = watchdog(&r);
        assert_eq!(w.len(), 1);
        assert_eq!(
            (w[0].detected_ps.clone(), w[0].restored_ps.clone()),
            (vec![100], vec![200])
        );
        assert_eq!(w[0].dropped, 4);
    }
}
