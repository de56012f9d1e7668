//! The plain-language explanation: sentences computed from a run's numbers.
//!
//! Every sentence states figures taken from the results; which sentences
//! appear depends on them (no drops anywhere, drops without
//! retransmissions, a port held off for most of the run, unfinished
//! flows, ECN marks without CNPs, ...). The text is plain (no markup); the
//! HTML and Markdown writers escape it.

use sim::results::RunResult;

use super::format::{fmt_rate, fmt_time};

/// A port held off for at least this share of the run has long pauses.
const LONG_SHARE: f64 = 0.5;
/// A port held off for at least this share of the run is in a pause storm.
const STORM_SHARE: f64 = 0.9;

/// Sentences about one variant, in reading order.
pub fn variant(r: &RunResult) -> Vec<String> {
    let s = &r.summary;
    let v = &s.variant;
    let mut out = Vec::new();
    // Completion.
    if s.flows_total == 0 {
        out.push(format!("{v}: the workload had no flows."));
    } else if s.flows_completed == s.flows_total {
        out.push(format!(
            "{v}: all {} flows completed; the last finished at {}, for {} of goodput.",
            s.flows_total,
            fmt_time(s.makespan_ps),
            fmt_rate(s.goodput_bps)
        ));
    } else {
        let failed = r.flows.iter().filter(|f| f.failed).count();
        let mut t = format!(
            "{v}: only {} of {} flows completed before the run stopped ({}) at {}",
            s.flows_completed,
            s.flows_total,
            stop_reason(&s.stop_reason),
            fmt_time(s.sim_time_ps)
        );
        if failed > 0 {
            t.push_str(&format!("; {failed} ended in error (retries exhausted)"));
        }
        t.push('.');
        out.push(t);
    }
    // Step time of dependent groups (a training step's collective).
    for g in &r.groups {
        match (g.step_time_ps, g.ideal_ps) {
            (Some(st), Some(ideal)) if ideal > 0 => out.push(format!(
                "{v}: the {} step ({} flows, each waiting for the ones before it) took {}, \
                 {:.3} times the bandwidth-only bound of {}; the rest is per-step latency, \
                 headers and whatever the fabric added.",
                g.name,
                g.flows,
                fmt_time(st),
                st as f64 / ideal as f64,
                fmt_time(ideal)
            )),
            (Some(st), _) => out.push(format!(
                "{v}: the {} step ({} dependent flows) took {}.",
                g.name,
                g.flows,
                fmt_time(st)
            )),
            (None, _) => out.push(format!(
                "{v}: the {} step did not finish: {} of its {} flows completed.",
                g.name, g.flows_completed, g.flows
            )),
        }
    }
    // Drops and what they cost.
    if s.drops == 0 {
        if s.pause_frames_sent > 0 {
            out.push(pause_sentence(r));
            if let Some(storm) = storm_sentence(r) {
                out.push(storm);
            }
        } else {
            out.push(format!(
                "{v}: 0 drops and no PAUSE frames: no buffer filled up enough to act."
            ));
        }
    } else {
        let mut t = format!(
            "{v}: {} frames were dropped{}",
            s.drops,
            top_drop_port(r)
                .map(|(n, p, d)| format!(" ({d} of them arriving at {n} port {p})"))
                .unwrap_or_default()
        );
        if s.retransmitted_packets > 0 {
            let per_drop = s.retransmitted_packets as f64 / s.drops as f64;
            t.push_str(&format!(
                ", which caused {} retransmitted data packets ({per_drop:.1} per drop{})",
                s.retransmitted_packets,
                if per_drop >= 1.5 {
                    ": go-back-N resends everything after a loss, including packets \
                     that had arrived"
                } else {
                    ""
                }
            ));
        } else {
            t.push_str(
                ", yet no data packet was retransmitted (no NAK or ACK timeout had triggered \
                 a resend by the end of the run)",
            );
        }
        t.push('.');
        out.push(t);
        let timeouts: u64 = r.nics.iter().map(|n| n.local_ack_timeout_err).sum();
        if timeouts > 0 {
            out.push(format!(
                "{v}: {timeouts} ACK timeout{} occurred: a flow that lost its last packets \
                 gets no NAK and waits for the retransmission timer, which sets its FCT.",
                if timeouts == 1 { "" } else { "s" }
            ));
        }
        if s.pause_frames_sent > 0 {
            out.push(format!(
                "{v}: PFC was active too ({} PAUSE frames), but frames were still lost: \
                 headroom or a lossy priority let them through.",
                s.pause_frames_sent
            ));
        }
    }
    if s.drops == 0 && s.retransmitted_packets > 0 {
        out.push(format!(
            "{v}: {} data packets were retransmitted although nothing was dropped: \
             acknowledgements came later than the ACK timeout.",
            s.retransmitted_packets
        ));
    }
    // ECN and congestion control.
    if s.ecn_marked > 0 {
        if s.cnps_sent > 0 {
            out.push(format!(
                "{v}: switches marked {} packets with ECN and receivers answered with {} \
                 CNPs, slowing the senders down.",
                s.ecn_marked, s.cnps_sent
            ));
        } else {
            out.push(format!(
                "{v}: switches marked {} packets with ECN but no CNP was sent: congestion \
                 control is off, so the marks had no effect.",
                s.ecn_marked
            ));
        }
    }
    // Spread of the FCT distribution: tail, unevenness or neither.
    let mut fcts: Vec<u64> = r.flows.iter().filter_map(|f| f.fct_ps).collect();
    fcts.sort_unstable();
    let fastest = fcts.first().copied().unwrap_or(0);
    if let (true, Some(p50), Some(p99)) = (s.flows_completed > 1, s.fct_p50_ps, s.fct_p99_ps) {
        let p50 = p50.max(1);
        let tail = p99 as f64 / p50 as f64;
        let uneven = fastest > 0 && p50 as f64 >= 2.0 * fastest as f64;
        if tail >= 2.0 {
            let sizes = r
                .flows
                .iter()
                .filter(|f| f.fct_ps.is_some())
                .map(|f| f.size);
            let (lo, hi) = sizes.fold((u64::MAX, 0), |(a, b), x| (a.min(x), b.max(x)));
            let mut t = format!(
                "{v}: the tail is long: p99 FCT {} is {} the median {}",
                fmt_time(p99),
                times(tail),
                fmt_time(p50)
            );
            if hi >= 2 * lo.max(1) {
                t.push_str(&format!(
                    " (flow sizes range from {lo} B to {hi} B, so part of the spread is size; \
                     the slowdowns below allow for it)"
                ));
            }
            t.push('.');
            out.push(t);
        } else if uneven {
            let slow = fcts.iter().filter(|&&t| t >= 2 * fastest).count();
            out.push(format!(
                "{v}: flows were treated unevenly: the fastest finished in {}, the median \
                 took {} and {slow} of {} completed flows took at least twice the fastest.",
                fmt_time(fastest),
                fmt_time(p50),
                fcts.len()
            ));
        } else {
            out.push(format!(
                "{v}: flows finished close together: fastest {}, p50 {}, p99 {}.",
                fmt_time(fastest),
                fmt_time(p50),
                fmt_time(p99)
            ));
        }
    }
    if let Some((median, p99)) = slowdowns(r) {
        if median >= 1.5 || p99 >= 2.0 {
            out.push(format!(
                "{v}: slowdown (FCT over the FCT alone on the fabric): the median completed \
                 flow took {} as long, the p99 {}.",
                times(median),
                times(p99)
            ));
        }
    }
    out
}

/// Sentences comparing the variants (empty for a single one).
pub fn comparison(rs: &[RunResult]) -> Vec<String> {
    let mut out = Vec::new();
    if rs.len() < 2 {
        return out;
    }
    let names = |it: &mut dyn Iterator<Item = &RunResult>| {
        it.map(|r| r.summary.variant.clone())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let lossless: Vec<&RunResult> = rs.iter().filter(|r| r.summary.drops == 0).collect();
    let lossy: Vec<&RunResult> = rs.iter().filter(|r| r.summary.drops > 0).collect();
    let same = |a: &RunResult, b: &RunResult| {
        let (x, y) = (&a.summary, &b.summary);
        (
            x.drops,
            x.pause_frames_sent,
            x.pause_time_ps,
            x.ecn_marked,
            x.cnps_sent,
            x.retransmitted_packets,
            x.fct_p50_ps,
            x.fct_p99_ps,
            x.max_fct_ps,
            x.flows_completed,
            x.bytes_delivered,
        ) == (
            y.drops,
            y.pause_frames_sent,
            y.pause_time_ps,
            y.ecn_marked,
            y.cnps_sent,
            y.retransmitted_packets,
            y.fct_p50_ps,
            y.fct_p99_ps,
            y.max_fct_ps,
            y.flows_completed,
            y.bytes_delivered,
        )
    };
    if rs.iter().all(|r| same(r, &rs[0])) {
        out.push(format!(
            "The variants ({}) gave the same numbers: {}.",
            names(&mut rs.iter()),
            if rs[0].summary.drops == 0 && rs[0].summary.pause_frames_sent == 0 {
                "no buffer filled far enough to drop or pause, so the settings that differ \
                 never came into play"
            } else {
                "the settings that differ did not change what happened"
            }
        ));
        return out;
    }
    if lossy.is_empty() {
        out.push(format!(
            "No variant dropped a frame ({}): the differences below come from queueing, \
             pauses and congestion control, not from loss.",
            names(&mut rs.iter())
        ));
    } else if lossless.is_empty() {
        out.push(format!(
            "Every variant dropped frames ({}).",
            names(&mut rs.iter())
        ));
    } else {
        for a in &lossless {
            for b in &lossy {
                let (sa, sb) = (&a.summary, &b.summary);
                let mut t = format!(
                    "{} avoided loss ({} PAUSE frames, senders held off {} in total) \
                     while {} dropped {} frames and resent {} packets",
                    sa.variant,
                    sa.pause_frames_sent,
                    fmt_time(sa.pause_time_ps),
                    sb.variant,
                    sb.drops,
                    sb.retransmitted_packets
                );
                let unfinished = [sa, sb]
                    .into_iter()
                    .find(|x| x.flows_completed < x.flows_total);
                if let Some(u) = unfinished {
                    t.push_str(&format!(
                        "; FCTs do not compare: {} completed only {} of {} flows",
                        u.variant, u.flows_completed, u.flows_total
                    ));
                } else if let (Some(a99), Some(b99)) = (
                    sa.fct_p99_ps.filter(|&x| x > 0),
                    sb.fct_p99_ps.filter(|&x| x > 0),
                ) {
                    let ratio = b99 as f64 / a99 as f64;
                    if ratio >= 1.1 {
                        t.push_str(&format!(
                            "; p99 FCT of {} is {} worse ({} vs {})",
                            sb.variant,
                            times(ratio),
                            fmt_time(b99),
                            fmt_time(a99)
                        ));
                    } else if ratio <= 1.0 / 1.1 {
                        t.push_str(&format!(
                            "; even so, p99 FCT of {} is {} better ({} vs {}): the pauses \
                             cost more than the losses",
                            sb.variant,
                            times(1.0 / ratio),
                            fmt_time(b99),
                            fmt_time(a99)
                        ));
                    } else {
                        t.push_str(&format!(
                            "; p99 FCT is about the same ({} vs {})",
                            fmt_time(b99),
                            fmt_time(a99)
                        ));
                    }
                }
                t.push('.');
                out.push(t);
            }
        }
    }
    // Goodput: best against worst.
    let best = rs.iter().max_by(|a, b| {
        a.summary
            .goodput_bps
            .total_cmp(&b.summary.goodput_bps)
            .then(b.summary.variant.cmp(&a.summary.variant))
    });
    let worst = rs.iter().min_by(|a, b| {
        a.summary
            .goodput_bps
            .total_cmp(&b.summary.goodput_bps)
            .then(a.summary.variant.cmp(&b.summary.variant))
    });
    if let (Some(b), Some(w)) = (best, worst) {
        let (gb, gw) = (b.summary.goodput_bps, w.summary.goodput_bps);
        if gw > 0.0 && gb / gw >= 1.1 {
            out.push(format!(
                "Goodput: {} reached {}, {} that of {} ({}).",
                b.summary.variant,
                fmt_rate(gb),
                times(gb / gw),
                w.summary.variant,
                fmt_rate(gw)
            ));
        } else if gw > 0.0 {
            out.push(format!(
                "Goodput is within 10 % across variants ({} to {}).",
                fmt_rate(gw),
                fmt_rate(gb)
            ));
        } else if gb > 0.0 {
            out.push(format!(
                "Goodput: {} reached {} while {} delivered nothing.",
                b.summary.variant,
                fmt_rate(gb),
                w.summary.variant
            ));
        }
    }
    out
}

fn pause_sentence(r: &RunResult) -> String {
    let s = &r.summary;
    let paused: Vec<(&str, u16, u64)> = r
        .ports
        .iter()
        .map(|p| {
            (
                p.node.as_str(),
                p.port,
                p.prio.iter().map(|c| c.rx_pause_duration_ps).sum::<u64>(),
            )
        })
        .filter(|x| x.2 > 0)
        .collect();
    let mut t = format!(
        "{}: 0 drops; {} PAUSE frames held senders off for {} in total",
        s.variant,
        s.pause_frames_sent,
        fmt_time(s.pause_time_ps)
    );
    if let Some(top) = paused
        .iter()
        .max_by(|a, b| a.2.cmp(&b.2).then(b.0.cmp(a.0)).then(b.1.cmp(&a.1)))
    {
        t.push_str(&format!(
            ", on {} port{} (longest: {} port {}, {})",
            paused.len(),
            if paused.len() == 1 { "" } else { "s" },
            top.0,
            top.1,
            fmt_time(top.2)
        ));
    }
    t.push('.');
    t
}

fn storm_sentence(r: &RunResult) -> Option<String> {
    let s = &r.summary;
    if s.sim_time_ps == 0 {
        return None;
    }
    let mut long: Vec<(&str, u16, f64)> = r
        .ports
        .iter()
        .filter_map(|p| {
            let held = p.prio.iter().map(|c| c.rx_pause_duration_ps).max()?;
            let share = held as f64 / s.sim_time_ps as f64;
            (share >= LONG_SHARE).then_some((p.node.as_str(), p.port, share))
        })
        .collect();
    long.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(b.0)).then(a.1.cmp(&b.1)));
    let top = *long.first()?;
    let what = if top.2 >= STORM_SHARE {
        format!(
            "a pause storm: {} port {} was held off for {:.0} % of the run",
            top.0,
            top.1,
            top.2 * 100.0
        )
    } else {
        format!(
            "long pauses: {} port{} held off for more than half of the run (most: {} port \
             {}, {:.0} %)",
            long.len(),
            if long.len() == 1 { " was" } else { "s were" },
            top.0,
            top.1,
            top.2 * 100.0
        )
    };
    Some(format!(
        "{}: {what}; back-pressure spreads upstream and also stalls traffic that never \
         crosses the congested link (head-of-line blocking).",
        s.variant
    ))
}

fn top_drop_port(r: &RunResult) -> Option<(&str, u16, u64)> {
    r.ports
        .iter()
        .map(|p| {
            let e = &p.errors;
            let faults = p.fault_drops + e.rx_crc_errors + e.rx_oversize + e.tx_discards;
            (p.node.as_str(), p.port, p.rx_discards + faults)
        })
        .filter(|x| x.2 > 0)
        .max_by(|a, b| a.2.cmp(&b.2).then(b.0.cmp(a.0)).then(b.1.cmp(&a.1)))
}

/// Median and p99 (nearest rank) slowdown of the completed flows.
fn slowdowns(r: &RunResult) -> Option<(f64, f64)> {
    let mut v: Vec<f64> = r.flows.iter().filter_map(|f| f.slowdown).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let rank = |p: usize| v[(p * v.len()).div_ceil(100).max(1) - 1];
    Some((rank(50), rank(99)))
}

fn stop_reason(s: &str) -> &str {
    match s {
        "duration" => "its duration was reached",
        "event_budget" => "the event budget ran out",
        "idle" => "nothing was left to do",
        "flows_done" => "every flow had completed or failed",
        other => other,
    }
}

/// `3.2x` style ratio text.
fn times(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0} times")
    } else {
        format!("{x:.1} times")
    }
}
