//! The plain-language explanation: sentences computed from a run's numbers
//! and, where the scenario states it, its ground truth.
//!
//! Every sentence states figures taken from the results; which sentences
//! appear depends on them (no drops anywhere, drops and the counters that
//! say why, a port held off for most of the run or without a break,
//! unfinished flows, ECN marks without CNPs, ...). A cause is named only
//! when a counter names it ([`evidence`]: a headroom drop is one counted as
//! `rx_prioN_buf_discard`, a watchdog's drop one in `pfcwd_stats`, a storm
//! a PAUSE held without a break) or when the scenario's [`Diagnosis`]
//! states it, and then as the scenario's: a variant whose stated cause is
//! a slow receiver is never called a pause storm.
//!
//! Comparisons are made against one baseline: the variant the scenario
//! calls healthy, else the first. They are judged on the victim workload's
//! completion time when the scenario names a victim, else on each
//! workload's slowest flow (or the p99 FCT of a single workload); a `fix`
//! variant is set against the `fault` variant with the same cause, as
//! what it saves and what it costs. The text is plain (no markup); the
//! HTML and Markdown writers escape it.

use sim::results::RunResult;
use sim::scenario::{Diagnosis, Role};

use super::evidence::{self, DropCause, DropCauses, Held};
use super::format::{fmt_rate, fmt_time};

/// A port held off for at least this share of the run has long pauses.
const LONG_SHARE: f64 = 0.5;
/// A PAUSE held without a break for at least this share of the run, and
/// at least [`UNBROKEN_MIN_PS`], is a storm (PAUSE with no XON).
const UNBROKEN_SHARE: f64 = 0.25;
/// The shortest unbroken PAUSE called a storm: 200 us.
const UNBROKEN_MIN_PS: u64 = 200_000_000;
/// Completed flows whose slowdowns (or FCTs, for flows of one size) lie
/// within this ratio of each other finished close together.
const CLOSE_RATIO: f64 = 1.25;
/// A ratio of at least this much (or at most its inverse) is a difference.
const DIFFERENT: f64 = 1.1;

/// The cause id of a slow receiver (the doctor's finding id).
const SLOW_RECEIVER: &str = "slow-receiver";

/// Sentences about one variant, in reading order, without ground truth.
pub fn variant(r: &RunResult) -> Vec<String> {
    variant_with(r, None)
}

/// Sentences about one variant, in reading order; `truth` is the
/// variant's ground truth, when the scenario states one.
pub fn variant_with(r: &RunResult, truth: Option<&Diagnosis>) -> Vec<String> {
    let s = &r.summary;
    let v = &s.variant;
    let mut out = vec![completion_sentence(r)];
    if let Some(d) = truth {
        out.push(truth_sentence(v, d));
    }
    out.extend(group_sentences(r));
    out.extend(deadlock_sentences(r));
    if let Some(w) = watchdog_sentence(r) {
        out.push(w);
    }
    let held = evidence::held(r);
    if s.drops == 0 {
        if s.pause_frames_sent > 0 {
            out.push(pause_sentence(r, &held));
        } else if s.ecn_marked > 0 {
            out.push(format!(
                "{v}: 0 drops and no PAUSE frames: queues grew enough to be marked (below) \
                 but none reached PFC's threshold or overflowed."
            ));
        } else {
            out.push(format!(
                "{v}: 0 drops and no PAUSE frames: no buffer filled up enough to act."
            ));
        }
    } else {
        out.extend(drop_sentences(r));
        if s.pause_frames_sent > 0 {
            out.push(format!(
                "{v}: PFC was active too: {} PAUSE frames held senders off for {} in total.",
                s.pause_frames_sent,
                fmt_time(s.pause_time_ps)
            ));
        }
    }
    if let Some(p) = pause_pattern(r, truth, &held) {
        out.push(p);
    }
    if s.drops == 0 && s.retransmitted_packets > 0 {
        out.push(format!(
            "{v}: {} data packets were retransmitted although nothing was dropped: \
             acknowledgements came later than the ACK timeout.",
            s.retransmitted_packets
        ));
    }
    out.extend(ecn_sentences(r));
    out.extend(spread_sentence(r));
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

fn completion_sentence(r: &RunResult) -> String {
    let s = &r.summary;
    let v = &s.variant;
    if s.flows_total == 0 {
        return format!("{v}: the workload had no flows.");
    }
    if s.flows_completed == s.flows_total {
        return format!(
            "{v}: all {} flows completed; the last finished at {}, for {} of goodput.",
            s.flows_total,
            fmt_time(s.makespan_ps),
            fmt_rate(s.goodput_bps)
        );
    }
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
    t
}

/// What the scenario says it injects into this variant.
fn truth_sentence(v: &str, d: &Diagnosis) -> String {
    let at =
        d.at.as_deref()
            .map(|a| format!(" at {a}"))
            .unwrap_or_default();
    let summary = d
        .summary
        .as_deref()
        .map(|s| format!(": {}", s.trim().trim_end_matches('.')))
        .unwrap_or_default();
    match d.role() {
        Role::Healthy
            if d.summary
                .as_deref()
                .is_some_and(|s| s.trim().to_ascii_lowercase().starts_with("no fault")) =>
        {
            format!("{v}: the scenario's healthy variant{summary}.")
        }
        Role::Healthy => format!("{v}: no fault (the scenario's healthy variant){summary}."),
        Role::Fault => format!("{v}: the scenario injects {}{at}{summary}.", d.cause),
        Role::Fix => format!(
            "{v}: the scenario injects {}{at} with a remedy on{summary}.",
            d.cause
        ),
    }
}

/// Step time of dependent groups (a training step's collective); a
/// perftest workload's sizes are said per workload instead
/// ([`super::perftest::sentences`]).
fn group_sentences(r: &RunResult) -> Vec<String> {
    let v = &r.summary.variant;
    let mut out: Vec<String> = r
        .groups
        .iter()
        .filter(|g| g.kind != super::perftest::PERFTEST_GROUP)
        .map(|g| match (g.step_time_ps, g.ideal_ps) {
            (Some(st), Some(ideal)) if ideal > 0 => format!(
                "{v}: the {} step ({} flows, each waiting for the ones before it) took {}, \
                 {:.3} times the bandwidth-only bound of {}; the rest is per-step latency, \
                 headers and whatever the fabric added.",
                g.name,
                g.flows,
                fmt_time(st),
                st as f64 / ideal as f64,
                fmt_time(ideal)
            ),
            (Some(st), _) => format!(
                "{v}: the {} step ({} dependent flows) took {}.",
                g.name,
                g.flows,
                fmt_time(st)
            ),
            (None, _) => format!(
                "{v}: the {} step did not finish: {} of its {} flows completed.",
                g.name, g.flows_completed, g.flows
            ),
        })
        .collect();
    out.extend(super::perftest::sentences(r));
    out
}

/// One sentence per PFC deadlock the run found.
fn deadlock_sentences(r: &RunResult) -> Vec<String> {
    let v = &r.summary.variant;
    r.deadlocks
        .iter()
        .map(|d| {
            let members: Vec<String> = d
                .members
                .iter()
                .map(|m| format!("{} port {} -> {}", m.node, m.port, m.peer))
                .collect();
            format!(
                "{v}: a PFC deadlock on priority {} formed at {} and was found at {}: {} \
                 queues ({}) each wait for the next to drain, so none can until something \
                 breaks the cycle.",
                d.priority,
                fmt_time(d.formed_ps),
                fmt_time(d.detected_ps),
                d.members.len(),
                members.join(", ")
            )
        })
        .collect()
}

/// What the PFC watchdog declared and did, if it declared anything.
fn watchdog_sentence(r: &RunResult) -> Option<String> {
    let v = &r.summary.variant;
    let qs = evidence::watchdog(r);
    let first = qs.iter().flat_map(|q| q.detected_ps.iter()).min()?;
    let what = match qs.as_slice() {
        [q] => format!(
            "{} port {} priority {} (PAUSE from {})",
            q.node, q.port, q.priority, q.peer
        ),
        _ => {
            let mut names: Vec<String> = qs
                .iter()
                .take(4)
                .map(|q| format!("{} port {} from {}", q.node, q.port, q.peer))
                .collect();
            if qs.len() > 4 {
                names.push(format!("{} more", qs.len() - 4));
            }
            let mut prios: Vec<u8> = qs.iter().map(|q| q.priority).collect();
            prios.sort_unstable();
            prios.dedup();
            let prios: Vec<String> = prios.iter().map(u8::to_string).collect();
            format!(
                "{} queues of priority {} ({})",
                qs.len(),
                prios.join(", "),
                names.join(", ")
            )
        }
    };
    let mut t = format!(
        "{v}: the PFC watchdog declared a storm on {what} at {}",
        fmt_time(*first)
    );
    let actions: Vec<&str> = {
        let mut a: Vec<&str> = qs.iter().map(|q| q.action.as_str()).collect();
        a.sort_unstable();
        a.dedup();
        a
    };
    for a in actions {
        match a {
            "drop" => {
                let n: u64 = qs.iter().map(|q| q.dropped).sum();
                t.push_str(&format!(
                    "; action drop: it discarded what was queued for and arriving at the \
                     stormed queue ({n} frames), so that what waited behind it could move"
                ));
            }
            "forward" => t.push_str(
                "; action forward: the stormed queues ignore PAUSE and keep sending, so \
                 what waited behind them moves and the buffers they feed may overflow",
            ),
            "alert" => t.push_str("; action alert: it only reported the storm"),
            other => t.push_str(&format!("; action {other}")),
        }
    }
    let open = qs
        .iter()
        .filter(|q| q.restored_ps.len() < q.detected_ps.len())
        .count();
    let last = qs.iter().flat_map(|q| q.restored_ps.iter()).max();
    match (open, last) {
        (0, Some(t_end)) => t.push_str(&format!("; restored at {}", fmt_time(*t_end))),
        (0, None) => {}
        (n, _) => t.push_str(&format!(
            "; {n} queue{} still stormed at the end of the run",
            if n == 1 { " was" } else { "s were" }
        )),
    }
    t.push('.');
    Some(t)
}

fn pause_sentence(r: &RunResult, held: &[Held]) -> String {
    let s = &r.summary;
    let mut ports: Vec<(&str, u16)> = held.iter().map(|h| (h.node.as_str(), h.port)).collect();
    ports.sort_unstable();
    ports.dedup();
    let mut t = format!(
        "{}: 0 drops; {} PAUSE frames held senders off for {} in total",
        s.variant,
        s.pause_frames_sent,
        fmt_time(s.pause_time_ps)
    );
    if let Some(top) = held.first() {
        t.push_str(&format!(
            ", on {} port{} (longest: {} port {}, {})",
            ports.len(),
            if ports.len() == 1 { "" } else { "s" },
            top.node,
            top.port,
            fmt_time(top.total_ps)
        ));
    }
    t.push('.');
    t
}

/// The drops, then one sentence per cause the counters give, then what
/// no counter explains.
fn drop_sentences(r: &RunResult) -> Vec<String> {
    let s = &r.summary;
    let v = &s.variant;
    let mut out = Vec::new();
    let mut t = format!("{v}: {} frames were dropped", s.drops);
    if s.retransmitted_packets > 0 {
        let per_drop = s.retransmitted_packets as f64 / s.drops as f64;
        t.push_str(&format!(
            ", which caused {} retransmitted data packets ({per_drop:.1} per drop{})",
            s.retransmitted_packets,
            if per_drop >= 1.5 {
                ": the transport resends from the lost packet on (go-back-N) or the whole \
                 message (go-back-0), including packets that had arrived"
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
    let causes = evidence::drop_causes(r);
    let forwarded = r.pfcwd_events.iter().any(|e| e.action == "forward");
    for sh in &causes.shares {
        out.push(drop_cause_sentence(v, sh, s.drops, forwarded));
    }
    if let Some(t) = unexplained_sentence(v, &causes) {
        out.push(t);
    }
    let timeouts: u64 = r.nics.iter().map(|n| n.local_ack_timeout_err).sum();
    if timeouts > 0 {
        out.push(format!(
            "{v}: {timeouts} ACK timeout{} occurred: a flow that lost its last packets \
             gets no NAK and waits for the retransmission timer, which sets its FCT.",
            if timeouts == 1 { "" } else { "s" }
        ));
    }
    out
}

fn drop_cause_sentence(v: &str, sh: &evidence::DropShare, total: u64, forwarded: bool) -> String {
    let n = sh.frames;
    let share = if n == total {
        format!("all {n}")
    } else {
        format!("{n}")
    };
    let prios = sh
        .priorities
        .iter()
        .map(u8::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let plural = if sh.priorities.len() == 1 { "y" } else { "ies" };
    let at = sh
        .top
        .as_ref()
        .map(|(node, port, k)| {
            if *k == n {
                format!("at {node} port {port}")
            } else {
                format!("most at {node} port {port}, {k}")
            }
        })
        .unwrap_or_default();
    match sh.cause {
        DropCause::Watchdog => format!(
            "{v}: {share} of them were dropped by the PFC watchdog, on purpose ({at}): it \
             sacrifices a stormed queue's frames so that the traffic held behind it moves \
             again."
        ),
        DropCause::Lossless if forwarded => format!(
            "{v}: {share} were dropped at ingress on lossless priorit{plural} {prios} \
             ({at}): queues the PFC watchdog set to ignore PAUSE (action forward) kept \
             sending into buffers that had asked them to stop."
        ),
        DropCause::Lossless => format!(
            "{v}: {share} were dropped at ingress on lossless priorit{plural} {prios} ({at}; \
             rx_prio{}_buf_discard): the port's PFC headroom ran out, so frames still in \
             flight after it sent PAUSE found no room.",
            sh.priorities.first().copied().unwrap_or(0)
        ),
        DropCause::LossyPriority => format!(
            "{v}: {share} were tail-dropped on priorit{plural} {prios} ({at}), which that \
             port runs no PFC on: traffic on a lossy priority is dropped, not paused."
        ),
        DropCause::NicBuffer => format!(
            "{v}: {share} were dropped by a receiving NIC whose buffer was full ({at}): the \
             host took frames in slower than they arrived."
        ),
        DropCause::NoRoute => format!(
            "{v}: {share} were discarded at a switch ingress on priorit{plural} {prios} \
             ({at}) with no buffer shortage counted: the switch had no route for them (as \
             while routes converge after a link failure)."
        ),
        DropCause::Ingress => {
            format!("{v}: {share} were discarded at ingress on priorit{plural} {prios} ({at}).")
        }
        DropCause::Unroutable => {
            format!("{v}: {share} arrived for no queue pair the receiver knew ({at}).")
        }
        DropCause::LinkFault => {
            format!("{v}: {share} were lost by a fault on a link ({at}, on the link it sends on).")
        }
        DropCause::LinkDown => {
            format!("{v}: {share} were lost to links going down (tx_discards, {at}).")
        }
        DropCause::BadFcs => {
            format!("{v}: {share} arrived with a bad FCS and were discarded ({at}).")
        }
        DropCause::Oversize => {
            format!("{v}: {share} were larger than the receiving port's MTU ({at}).")
        }
    }
}

fn unexplained_sentence(v: &str, c: &DropCauses) -> Option<String> {
    let n = c.unexplained;
    if n == 0 {
        return None;
    }
    let which = if c.shares.is_empty() {
        format!("the {n}")
    } else {
        format!("the other {n}")
    };
    Some(if c.ports_recorded {
        format!("{v}: for {which} dropped frames no recorded counter says why.")
    } else {
        format!(
            "{v}: results.json holds no per-port counters ([record] ports), so where and why \
             {which} frames were lost is not known here."
        )
    })
}

/// How the pauses looked: a storm (a PAUSE held without a break), long
/// pauses that came and went, or, for a variant whose stated cause is a
/// slow receiver, that one. `None` when there is nothing to say or a
/// deadlock sentence already says it.
fn pause_pattern(r: &RunResult, truth: Option<&Diagnosis>, held: &[Held]) -> Option<String> {
    let s = &r.summary;
    let v = &s.variant;
    let run = s.sim_time_ps;
    if run == 0 || held.is_empty() || !r.deadlocks.is_empty() {
        return None;
    }
    let slow = truth.filter(|d| d.cause == SLOW_RECEIVER);
    let unbroken_min = UNBROKEN_MIN_PS.max((run as f64 * UNBROKEN_SHARE) as u64);
    let mut unbroken: Vec<&Held> = held
        .iter()
        .filter(|h| h.longest_ps >= unbroken_min)
        .collect();
    unbroken.sort_by_key(|h| std::cmp::Reverse(h.longest_ps));
    let pct = |ps: u64| ps as f64 * 100.0 / run as f64;
    let name = |h: &Held| {
        if h.peer.is_empty() {
            format!("{} port {}", h.node, h.port)
        } else {
            format!("{} port {} (PAUSE from {})", h.node, h.port, h.peer)
        }
    };
    if let (Some(top), None) = (unbroken.first(), slow) {
        let mut t = format!(
            "{v}: a pause storm: {} was held off without a break for {} ({:.0} % of the \
             run): PAUSE kept coming and no XON; every frame of priority {} behind it waits",
            name(top),
            fmt_time(top.longest_ps),
            pct(top.longest_ps),
            top.priority
        );
        let others: Vec<String> = unbroken
            .iter()
            .skip(1)
            .take(3)
            .map(|h| format!("{} port {} ({})", h.node, h.port, fmt_time(h.longest_ps)))
            .collect();
        if !others.is_empty() {
            t.push_str(&format!(
                ", and the back-pressure held {} just as long",
                others.join(", ")
            ));
        }
        t.push('.');
        return Some(t);
    }
    let top = held.first()?;
    let share = pct(top.total_ps) / 100.0;
    let episodes = if top.longest_ps > 0 && top.episodes > 0 {
        format!(
            " in {} episode{}, the longest {}",
            top.episodes,
            if top.episodes == 1 { "" } else { "s" },
            fmt_time(top.longest_ps)
        )
    } else {
        String::new()
    };
    // XON followed XOFF: known only from recorded intervals.
    let came_and_went = top.longest_ps > 0 && top.longest_ps < unbroken_min;
    if let Some(d) = slow {
        let at =
            d.at.as_deref()
                .map(|a| format!(" at {a}"))
                .unwrap_or_default();
        return Some(format!(
            "{v}: {} was held off for {:.0} % of the run{episodes}{}: that is the scenario's \
             slow receiver{at} draining slower than frames arrive, not a pause storm (a PFC \
             watchdog waits for PAUSE with no XON); the back-pressure still slows every flow \
             that shares the paused priority upstream.",
            name(top),
            share * 100.0,
            if came_and_went {
                ", XON following every XOFF"
            } else {
                ""
            }
        ));
    }
    if share < LONG_SHARE {
        return None;
    }
    let long = held
        .iter()
        .filter(|h| h.total_ps as f64 >= LONG_SHARE * run as f64)
        .count();
    Some(format!(
        "{v}: long pauses: {long} port{} held off for more than half of the run (most: {}, \
         {:.0} %{episodes}){}; back-pressure spreads upstream and also stalls traffic that \
         never crosses the congested link (head-of-line blocking).",
        if long == 1 { " was" } else { "s were" },
        name(top),
        share * 100.0,
        if came_and_went {
            ": XON followed XOFF, so this is congestion or a slow drain, not a storm"
        } else {
            ""
        }
    ))
}

fn ecn_sentences(r: &RunResult) -> Vec<String> {
    let s = &r.summary;
    let v = &s.variant;
    if s.ecn_marked == 0 {
        return Vec::new();
    }
    vec![if s.cnps_sent > 0 {
        format!(
            "{v}: switches marked {} packets with ECN and receivers answered with {} \
             CNPs, slowing the senders down.",
            s.ecn_marked, s.cnps_sent
        )
    } else {
        format!(
            "{v}: switches marked {} packets with ECN but no CNP was sent: congestion \
             control is off, so the marks had no effect.",
            s.ecn_marked
        )
    }]
}

/// Spread of the FCT distribution: a long tail, uneven treatment (by
/// slowdown when sizes differ) or close together.
fn spread_sentence(r: &RunResult) -> Option<String> {
    let s = &r.summary;
    let v = &s.variant;
    let (p50, p99) = (s.fct_p50_ps?, s.fct_p99_ps?);
    if s.flows_completed < 2 {
        return None;
    }
    let done: Vec<_> = r.flows.iter().filter(|f| f.fct_ps.is_some()).collect();
    let fcts: Vec<u64> = done.iter().filter_map(|f| f.fct_ps).collect();
    let fastest = fcts.iter().copied().min().unwrap_or(0);
    let slowest = fcts.iter().copied().max().unwrap_or(0);
    let (lo, hi) = done
        .iter()
        .map(|f| f.size)
        .fold((u64::MAX, 0), |(a, b), x| (a.min(x), b.max(x)));
    let tail = p99 as f64 / p50.max(1) as f64;
    if tail >= 2.0 {
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
        return Some(t);
    }
    let sds: Vec<f64> = done
        .iter()
        .filter_map(|f| f.slowdown.filter(|x| x.is_finite() && *x > 0.0))
        .collect();
    let by_size = hi != lo && !done.is_empty() && sds.len() == done.len();
    if by_size {
        let a = sds.iter().copied().fold(f64::MAX, f64::min);
        let b = sds.iter().copied().fold(0.0, f64::max);
        return Some(if b / a >= CLOSE_RATIO {
            format!(
                "{v}: flows were treated unevenly, even allowing for their sizes: slowdowns \
                 from {a:.1} to {} (FCTs {} to {}).",
                times(b),
                fmt_time(fastest),
                fmt_time(slowest)
            )
        } else {
            format!(
                "{v}: allowing for their sizes, flows fared alike: slowdowns from {a:.1} to {} \
                 (FCTs {} to {}).",
                times(b),
                fmt_time(fastest),
                fmt_time(slowest)
            )
        });
    }
    if fastest > 0 && slowest as f64 >= CLOSE_RATIO * fastest as f64 {
        return Some(format!(
            "{v}: flows were treated unevenly: the fastest finished in {}, the median took \
             {} and the slowest {} ({} the fastest).",
            fmt_time(fastest),
            fmt_time(p50),
            fmt_time(slowest),
            times(slowest as f64 / fastest as f64)
        ));
    }
    Some(format!(
        "{v}: flows finished close together: fastest {}, p50 {}, p99 {}.",
        fmt_time(fastest),
        fmt_time(p50),
        fmt_time(p99)
    ))
}

/// Sentences comparing the variants (empty for a single one), without
/// ground truth: the first variant is the baseline.
pub fn comparison(rs: &[RunResult]) -> Vec<String> {
    comparison_with(rs, &[])
}

/// The ground truth of variant `i`, if stated.
fn truth_of(truth: &[Option<Diagnosis>], i: usize) -> Option<&Diagnosis> {
    truth.get(i).and_then(Option::as_ref)
}

/// Sentences comparing the variants (empty for a single one); `truth[i]`
/// is variant `i`'s ground truth, when stated (shorter or empty: none).
pub fn comparison_with(rs: &[RunResult], truth: &[Option<Diagnosis>]) -> Vec<String> {
    let mut out = Vec::new();
    if rs.len() < 2 {
        return out;
    }
    let names = |it: &mut dyn Iterator<Item = &RunResult>| {
        it.map(|r| r.summary.variant.clone())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if rs.iter().all(|r| same_numbers(r, &rs[0])) {
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
    if rs.iter().all(|r| r.summary.drops == 0) {
        out.push(format!(
            "No variant dropped a frame ({}): the differences below come from queueing, \
             pauses and congestion control, not from loss.",
            names(&mut rs.iter())
        ));
    } else if rs.iter().all(|r| r.summary.drops > 0) {
        out.push(format!(
            "Every variant dropped frames ({}).",
            names(&mut rs.iter())
        ));
    }
    let (b, label) =
        match (0..rs.len()).find(|&i| truth_of(truth, i).is_some_and(Diagnosis::is_healthy)) {
            Some(i) => (i, "the healthy baseline"),
            None => (0, "the first variant"),
        };
    for i in (0..rs.len()).filter(|&i| i != b) {
        let victim = truth_of(truth, i)
            .and_then(|d| d.victim.as_deref())
            .or_else(|| truth_of(truth, b).and_then(|d| d.victim.as_deref()));
        let fix = truth_of(truth, i).filter(|d| d.role() == Role::Fix);
        let fault = fix.and_then(|d| {
            (0..rs.len()).find(|&j| {
                j != i
                    && truth_of(truth, j)
                        .is_some_and(|e| e.role() == Role::Fault && e.cause == d.cause)
            })
        });
        match (fix, fault) {
            (Some(d), Some(j)) => out.push(fix_sentence(&rs[i], &rs[j], &d.cause, victim)),
            _ => out.push(versus(&rs[i], &rs[b], label, victim)),
        }
    }
    out.extend(goodput_sentence(rs));
    out
}

fn same_numbers(a: &RunResult, b: &RunResult) -> bool {
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
}

/// True when the two runs ran the same flows (source, destination, size
/// and start, in id order), or when neither recorded its flows and the
/// counts agree.
fn same_workload(a: &RunResult, b: &RunResult) -> bool {
    let key = |r: &RunResult| {
        r.flows
            .iter()
            .map(|f| (f.src.clone(), f.dst.clone(), f.size, f.start_ps))
            .collect::<Vec<_>>()
    };
    a.summary.flows_total == b.summary.flows_total && key(a) == key(b)
}

/// The workloads of `r`, in order of first flow.
fn workloads(r: &RunResult) -> Vec<&str> {
    let mut w: Vec<&str> = Vec::new();
    for f in &r.flows {
        if !w.contains(&f.workload.as_str()) {
            w.push(&f.workload);
        }
    }
    w
}

/// How workload `w` of `r` did: `Ok(slowest FCT)` when all its flows
/// completed, `Err((completed, flows))` otherwise; `None` without flows.
fn workload_fct(r: &RunResult, w: &str) -> Option<Result<u64, (usize, usize)>> {
    let fs: Vec<_> = r.flows.iter().filter(|f| f.workload == w).collect();
    if fs.is_empty() {
        return None;
    }
    let done: Vec<u64> = fs.iter().filter_map(|f| f.fct_ps).collect();
    if done.len() == fs.len() {
        done.into_iter().max().map(Ok)
    } else {
        Some(Err((done.len(), fs.len())))
    }
}

/// `x` against `y` (times, lower is better) as words.
fn judged(x: u64, y: u64) -> String {
    let r = x as f64 / y.max(1) as f64;
    if r >= DIFFERENT {
        format!("{} worse", times(r))
    } else if r <= 1.0 / DIFFERENT {
        format!("{} better", times(1.0 / r))
    } else {
        "about the same".to_string()
    }
}

/// How workload `w` of `a` compares with `b`'s, as a clause.
fn workload_clause(a: &RunResult, b: &RunResult, w: &str, what: &str) -> Option<String> {
    let (va, vb) = (&a.summary.variant, &b.summary.variant);
    Some(match (workload_fct(a, w)?, workload_fct(b, w)?) {
        (Ok(x), Ok(y)) => format!(
            "{what} took {} against {}: {}",
            fmt_time(x),
            fmt_time(y),
            judged(x, y)
        ),
        (Err((d, n)), Ok(_)) => format!("{what} did not finish in {va} ({d} of {n} flows)"),
        (Ok(x), Err(_)) => format!("{what} finished in {va} ({}) but not in {vb}", fmt_time(x)),
        (Err((d, n)), Err((e, _))) => {
            format!("{what} finished in neither ({d} and {e} of {n} flows)")
        }
    })
}

/// Variant `a` against the baseline `b`: loss, then completion (the
/// victim's when named, else each workload's slowest flow, else the p99
/// FCT; bytes delivered when flows did not finish).
fn versus(a: &RunResult, b: &RunResult, label: &str, victim: Option<&str>) -> String {
    let (sa, sb) = (&a.summary, &b.summary);
    let (va, vb) = (&sa.variant, &sb.variant);
    if !same_workload(a, b) {
        return format!(
            "{va} runs a different workload from {vb} ({label}: {} flow{} against {}), so \
             its completion times do not compare with {vb}'s.",
            sa.flows_total,
            if sa.flows_total == 1 { "" } else { "s" },
            sb.flows_total
        );
    }
    let mut parts = Vec::new();
    match (sa.drops > 0, sb.drops > 0) {
        (true, false) => parts.push(format!(
            "{va} dropped {} frames and resent {} packets where {vb} dropped none",
            sa.drops, sa.retransmitted_packets
        )),
        (false, true) => parts.push(format!(
            "{va} avoided the loss of {vb} ({} frames dropped there){}",
            sb.drops,
            if sa.pause_frames_sent > 0 {
                format!(
                    " with {} PAUSE frames, senders held off {} in total",
                    sa.pause_frames_sent,
                    fmt_time(sa.pause_time_ps)
                )
            } else {
                String::new()
            }
        )),
        (true, true) => parts.push(format!(
            "{va} dropped {} frames against {}",
            sa.drops, sb.drops
        )),
        (false, false) if sa.pause_frames_sent != sb.pause_frames_sent => parts.push(format!(
            "{va} sent {} PAUSE frames against {}",
            sa.pause_frames_sent, sb.pause_frames_sent
        )),
        (false, false) => {}
    }
    let ws = workloads(a);
    let all = |s: &sim::results::Summary| s.flows_completed == s.flows_total;
    let victim_clause = victim.and_then(|w| workload_clause(a, b, w, &format!("the victim ({w})")));
    if let Some(c) = victim_clause {
        parts.push(c);
    } else if ws.len() > 1 && all(sa) && all(sb) {
        let cs: Vec<String> = ws
            .iter()
            .filter_map(|w| workload_clause(a, b, w, &format!("the slowest flow of {w}")))
            .collect();
        parts.extend(cs);
    } else if let Some(c) = completion_clause(a, b) {
        parts.push(c);
    }
    if parts.is_empty() {
        parts.push("the same outcome in these numbers".to_string());
    }
    format!("{va} against {vb} ({label}): {}.", parts.join("; "))
}

/// p99 FCT when both completed every flow, else what each delivered.
fn completion_clause(a: &RunResult, b: &RunResult) -> Option<String> {
    let (sa, sb) = (&a.summary, &b.summary);
    let all = |s: &sim::results::Summary| s.flows_completed == s.flows_total;
    if all(sa) && all(sb) {
        let (x, y) = (sa.fct_p99_ps?, sb.fct_p99_ps?);
        return Some(format!(
            "p99 FCT {} against {}: {}",
            fmt_time(x),
            fmt_time(y),
            judged(x, y)
        ));
    }
    let (x, y) = (sa.bytes_delivered, sb.bytes_delivered);
    Some(format!(
        "FCTs do not compare ({} of {} flows completed against {}); {} delivered {x} bytes \
         against {y}{}",
        sa.flows_completed,
        sa.flows_total,
        sb.flows_completed,
        sa.variant,
        as_much(x, y)
    ))
}

/// A `fix` variant against the `fault` variant it remedies: what it saves
/// (the victim's completion, else each workload's or the bytes delivered)
/// and what it costs (drops, resends, workloads that got slower).
fn fix_sentence(f: &RunResult, u: &RunResult, cause: &str, victim: Option<&str>) -> String {
    let (sf, su) = (&f.summary, &u.summary);
    let (vf, vu) = (&sf.variant, &su.variant);
    let mut t = format!("{vf} is {vu} ({cause}) with the remedy on: ");
    if !same_workload(f, u) {
        t.push_str("it runs a different workload, so the two do not compare.");
        return t;
    }
    let saved = match victim.and_then(|w| Some((w, workload_fct(f, w)?, workload_fct(u, w)?))) {
        Some((w, Ok(x), Ok(y))) => {
            let r = y as f64 / x.max(1) as f64;
            let how = if r >= DIFFERENT {
                format!("{} sooner", times(r))
            } else if r <= 1.0 / DIFFERENT {
                format!("{} later: the remedy did not save it", times(1.0 / r))
            } else {
                "about the same".to_string()
            };
            format!(
                "the victim ({w}) finished in {} instead of {} ({how})",
                fmt_time(x),
                fmt_time(y)
            )
        }
        Some((w, Ok(x), Err(_))) => format!(
            "the victim ({w}) finished ({}) where without the remedy it did not",
            fmt_time(x)
        ),
        Some((w, Err((d, n)), _)) => {
            format!("the victim ({w}) still did not finish ({d} of {n} flows)")
        }
        None if sf.flows_completed == sf.flows_total && su.flows_completed == su.flows_total => {
            match (sf.fct_p99_ps, su.fct_p99_ps) {
                (Some(x), Some(y)) => format!(
                    "p99 FCT {} instead of {} ({})",
                    fmt_time(x),
                    fmt_time(y),
                    judged(x, y)
                ),
                _ => "no flow finished in either".to_string(),
            }
        }
        None => {
            let (x, y) = (sf.bytes_delivered, su.bytes_delivered);
            let worse = y > 0 && (x as f64) * DIFFERENT <= y as f64;
            format!(
                "it delivered {x} bytes instead of {y}{}{}",
                as_much(x, y),
                if worse {
                    ": the remedy did not save it"
                } else {
                    ""
                }
            )
        }
    };
    t.push_str(&saved);
    let mut price = Vec::new();
    if sf.drops > su.drops && (sf.drops - su.drops).saturating_mul(10) > su.drops {
        let wd = evidence::drop_causes(f).frames(DropCause::Watchdog);
        let mut notes = Vec::new();
        if su.drops > 0 {
            notes.push(format!("against {}", su.drops));
        }
        if wd > 0 {
            notes.push(format!("{wd} of them by the PFC watchdog, on purpose"));
        }
        price.push(format!(
            "{} frames dropped{} and {} packets resent",
            sf.drops,
            if notes.is_empty() {
                String::new()
            } else {
                format!(" ({})", notes.join("; "))
            },
            sf.retransmitted_packets
        ));
    }
    for w in workloads(f).into_iter().filter(|w| Some(*w) != victim) {
        match (workload_fct(f, w), workload_fct(u, w)) {
            (Some(Ok(x)), Some(Ok(y))) if x as f64 >= DIFFERENT * y as f64 => price.push(format!(
                "{w} took {} instead of {} ({} as long)",
                fmt_time(x),
                fmt_time(y),
                times(x as f64 / y.max(1) as f64)
            )),
            (Some(Err((d, n))), Some(Ok(_))) => {
                price.push(format!("{w} did not finish ({d} of {n} flows)"))
            }
            _ => {}
        }
    }
    if price.is_empty() {
        t.push_str("; no price shows in these numbers.");
    } else {
        t.push_str(&format!("; the price: {}.", price.join(", and ")));
    }
    t
}

/// ` (R times as much)` or ` (R times less)` for `x` against `y`, or
/// nothing when they are within [`DIFFERENT`] or `y` is zero.
fn as_much(x: u64, y: u64) -> String {
    if y == 0 {
        return String::new();
    }
    let r = x as f64 / y as f64;
    if r >= DIFFERENT {
        format!(" ({} as much)", times(r))
    } else if r <= 1.0 / DIFFERENT {
        format!(" ({} less)", times(1.0 / r))
    } else {
        String::new()
    }
}

/// Goodput: best against worst.
fn goodput_sentence(rs: &[RunResult]) -> Option<String> {
    let best = rs.iter().max_by(|a, b| {
        a.summary
            .goodput_bps
            .total_cmp(&b.summary.goodput_bps)
            .then(b.summary.variant.cmp(&a.summary.variant))
    })?;
    let worst = rs.iter().min_by(|a, b| {
        a.summary
            .goodput_bps
            .total_cmp(&b.summary.goodput_bps)
            .then(a.summary.variant.cmp(&b.summary.variant))
    })?;
    let (gb, gw) = (best.summary.goodput_bps, worst.summary.goodput_bps);
    if gw > 0.0 && gb / gw >= DIFFERENT {
        Some(format!(
            "Goodput: {} reached {}, {} that of {} ({}).",
            best.summary.variant,
            fmt_rate(gb),
            times(gb / gw),
            worst.summary.variant,
            fmt_rate(gw)
        ))
    } else if gw > 0.0 {
        Some(format!(
            "Goodput is within 10 % across variants ({} to {}).",
            fmt_rate(gw),
            fmt_rate(gb)
        ))
    } else if gb > 0.0 {
        Some(format!(
            "Goodput: {} reached {} while {} delivered nothing.",
            best.summary.variant,
            fmt_rate(gb),
            worst.summary.variant
        ))
    } else {
        None
    }
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
