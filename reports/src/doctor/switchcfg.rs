//! Checks on a switch's own configuration (SONiC `mmuconfig -l` and
//! `ecnconfig -l` / `-q`, the files named after the switch:
//! `leaf0.mmuconfig.txt`) against what its counters show. The counters
//! alone cannot tell an incast into a small buffer, or into a switch that
//! does not mark, from any incast; the configuration can.
//!
//! Rules (units: bytes; a switch's counters are its `<switch>-pN` ports):
//!
//! * **buffer-too-small**: under the dynamic threshold a lossless
//!   priority group may hold alpha / (1 + alpha) of the shared pool
//!   before XOFF (alpha = 2^dynamic_th; the share one congested queue
//!   settles at). When that is less than the group's own headroom
//!   (`xoff`, sized for the data one round trip brings after PAUSE), the
//!   switch pauses a sender before it has buffered one round trip of
//!   data. The pool is too small when it is under
//!   [`MIN_POOL_BYTES_PER_GBPS`] per Gbit/s of the switch's ports (known
//!   when the capture has the switch's port counters and the lossless
//!   profiles name their speed), or, without the ports, when that share
//!   is less than half the headroom. On a switch that sends PAUSE: an
//!   error; without PAUSE in the capture: a warning.
//! * **ecn-not-marking** (origin the switch): a priority the switch
//!   pauses on has ECN off (`queue N: off`, or no profile that marks
//!   green), or its Kmin sits above the deepest an egress queue can get
//!   before PFC stops every port feeding it (the switch's other ports in
//!   the capture, each up to its pause point: the static threshold, or the
//!   dynamic share above) while no host saw a mark: the queue never
//!   reaches Kmin, DCQCN never hears of the congestion and PFC does all
//!   the work. An error when the switch pauses on that priority and
//!   marks would have counted (CNPs in the capture: DCQCN at work; or,
//!   for ECN off, other switches mark the queue), else a warning: the NICs' DCQCN state
//!   is not in any dump.
//! * **ecn-too-early**: a marking profile whose Kmin is at most
//!   [`EARLY_KMIN_BYTES`] (a few frames: marking starts before a queue
//!   can absorb one round trip of rate mismatch) while the receivers get
//!   CE marks on at least [`EARLY_MARKED_PPM`] of their packets and no
//!   port is paused 1 % of the time or more: DCQCN cuts the senders' rates
//!   while queues are short, so links run underused. A warning; the
//!   receivers' rates against line rate (when the profiles give it) are
//!   evidence.

use std::collections::{BTreeMap, BTreeSet};

use super::context::Context;
use super::counters::{format_bps, CounterView};
use super::finding::{Finding, Severity, Symptom};
use super::names::host_from_path;
use super::wording::pct;
use crate::realnic::swconfig::{EcnConfig, MmuConfig, WredProfile};

/// Smallest shared pool, bytes per Gbit/s of the switch's ports, that is
/// not small: merchant switch ASICs carry about 3 to 10 KB per Gbit/s
/// (32 MB for 3.2 Tbit/s, 64 MB for 12.8 Tbit/s); under 1 KB per Gbit/s
/// an incast fills it within microseconds.
pub(super) const MIN_POOL_BYTES_PER_GBPS: u64 = 1_000;

/// Kmin at or below which ECN marks while a queue is a few frames deep.
pub(super) const EARLY_KMIN_BYTES: u64 = 16 * 1024;

/// Share of a receiver's packets (ppm) carrying CE from which marking is
/// heavy: 5 %.
pub(super) const EARLY_MARKED_PPM: u64 = 50_000;

/// What one switch's listings and counters say.
struct Switch<'a> {
    name: String,
    mmu: Option<(&'a str, &'a MmuConfig)>,
    ecn: Option<(&'a str, &'a EcnConfig)>,
    ports: Vec<&'a CounterView>,
}

impl Switch<'_> {
    /// Priorities the switch sends PAUSE on (its ports' tx_prioN_pause),
    /// with the frames.
    fn paused(&self) -> BTreeMap<u8, u64> {
        let mut out = BTreeMap::new();
        for v in &self.ports {
            for p in 0u8..8 {
                let n = v.get(&format!("tx_prio{p}_pause"));
                if n > 0 {
                    let e: &mut u64 = out.entry(p).or_default();
                    *e = e.saturating_add(n);
                }
            }
        }
        out
    }

    /// The lossless buffer facts, when the listing gives them.
    fn buffer(&self) -> Option<Buffer> {
        let (file, m) = self.mmu?;
        let pool = m.lossless_pool()?;
        let size = pool.size?;
        let pgs: Vec<_> = m.profiles.iter().filter(|p| p.is_lossless_pg()).collect();
        let pg = pgs.first()?;
        let headroom = pgs.iter().filter_map(|p| p.xoff).max();
        // Several lossless profiles name a switch with ports of several
        // speeds (host ports and faster uplinks): the slowest is the
        // host ports' and the safe one to count every port at, where the
        // fastest would claim a capacity the switch does not have and
        // call a normal buffer too small.
        let speed_mbps = pgs.iter().filter_map(|p| p.speed_mbps).min();
        let pause_at = match (pg.static_th, pg.dynamic_th) {
            (Some(t), _) => PauseAt::Static(t),
            (None, Some(th)) => {
                let th = th.clamp(-16, 16);
                let at = if th >= 0 {
                    let a = 1u128 << th;
                    u128::from(size) * a / (a + 1)
                } else {
                    u128::from(size) / ((1u128 << -th) + 1)
                };
                PauseAt::Dynamic(th, u64::try_from(at).unwrap_or(u64::MAX))
            }
            _ => return None,
        };
        Some(Buffer {
            file: file.to_string(),
            pool: size,
            pool_line: pool.block.line,
            profile: pg.block.name.clone(),
            headroom,
            speed_mbps,
            pause_at,
        })
    }

    /// The WRED profile of queue `q`: the only one, else the one named
    /// after the queue (`..._3`), else the first.
    fn profile(&self, q: u8) -> Option<&WredProfile> {
        let (_, e) = self.ecn?;
        match e.profiles.as_slice() {
            [] => None,
            [one] => Some(one),
            all => all
                .iter()
                .find(|p| p.block.name.ends_with(&format!("_{q}")))
                .or_else(|| all.first()),
        }
    }

    /// Whether ECN marks RoCE on queue `q`: the queue line when listed,
    /// else whether its profile marks green.
    fn marks(&self, q: u8) -> Option<(bool, String)> {
        let (file, e) = self.ecn?;
        if let Some(line) = e.queues.iter().rev().find(|x| x.queue == q) {
            return Some((
                line.on && self.profile(q).map_or(true, WredProfile::marks_green),
                format!(
                    "{file} line {}: queue {q}: {}",
                    line.line,
                    if line.on { "on" } else { "off" }
                ),
            ));
        }
        let p = self.profile(q)?;
        Some((
            p.marks_green(),
            format!(
                "{file} line {}: profile {} ecn {}, wred_green_enable {}",
                p.block.line,
                p.block.name,
                p.ecn.as_deref().unwrap_or("(none)"),
                p.green_enabled
                    .map(|b| b.to_string())
                    .unwrap_or_else(|| "(unset)".into())
            ),
        ))
    }
}

/// Where a lossless priority group pauses.
#[derive(Debug, Clone, Copy)]
enum PauseAt {
    /// `static_th` bytes.
    Static(u64),
    /// `dynamic_th` and the bytes alpha / (1 + alpha) of the pool make.
    Dynamic(i32, u64),
}

impl PauseAt {
    fn bytes(self) -> u64 {
        match self {
            PauseAt::Static(b) | PauseAt::Dynamic(_, b) => b,
        }
    }

    fn describe(self, pool: u64) -> String {
        match self {
            PauseAt::Static(b) => format!("static_th {b} bytes"),
            PauseAt::Dynamic(th, b) => format!(
                "dynamic_th {th} (alpha 2^{th}): one priority group may hold alpha / (1 + alpha) of the {pool}-byte pool, {b} bytes, before XOFF"
            ),
        }
    }
}

/// A switch's lossless buffer, from its listing.
struct Buffer {
    file: String,
    pool: u64,
    pool_line: usize,
    profile: String,
    headroom: Option<u64>,
    speed_mbps: Option<u64>,
    pause_at: PauseAt,
}

/// The switches of one scope with a configuration listing.
fn switches(ctx: &Context) -> Vec<Switch<'_>> {
    let mut by: BTreeMap<String, Switch<'_>> = BTreeMap::new();
    let mut entry = |file: &str| {
        let name = host_from_path(file);
        by.entry(name.clone())
            .or_insert_with(|| Switch {
                name,
                mmu: None,
                ecn: None,
                ports: Vec::new(),
            })
            .name
            .clone()
    };
    let mut mmu = Vec::new();
    for (file, m) in &ctx.mmu {
        mmu.push((entry(file), file.as_str(), m));
    }
    let mut ecn = Vec::new();
    for (file, e) in &ctx.ecncfg {
        ecn.push((entry(file), file.as_str(), e));
    }
    for (name, file, m) in mmu {
        if let Some(s) = by.get_mut(&name) {
            s.mmu = Some((file, m));
        }
    }
    for (name, file, e) in ecn {
        if let Some(s) = by.get_mut(&name) {
            s.ecn = Some((file, e));
        }
    }
    for v in ctx.eth.iter().filter(|v| v.is_switch_port()) {
        if let Some(s) = by.get_mut(&v.node()) {
            s.ports.push(v);
        }
    }
    by.into_values().collect()
}

/// Run these checks.
pub(super) fn run(ctx: &Context, out: &mut Vec<Finding>) {
    let hosts: Vec<&CounterView> = ctx.eth.iter().filter(|v| !v.is_switch_port()).collect();
    let marks = host_marks(ctx, &hosts);
    // DCQCN at work somewhere in the capture: CNPs sent or acted on.
    let cnps = ctx
        .rdma
        .iter()
        .map(|r| r.get("np_cnp_sent").saturating_add(r.get("rp_cnp_handled")))
        .fold(0u64, u64::saturating_add);
    let all = switches(ctx);
    for s in &all {
        let small = buffer_too_small(s, out);
        // Another switch of the capture marks the queue.
        let marked_elsewhere = |q: u8| {
            all.iter()
                .any(|o| o.name != s.name && o.marks(q).is_some_and(|(on, _)| on))
        };
        ecn_not_marking(s, small, &marks, cnps, &marked_elsewhere, out);
        ecn_too_early(s, ctx, &hosts, &marks, out);
    }
}

/// Per receiving host: (CE-marked packets, packets received).
fn host_marks(ctx: &Context, hosts: &[&CounterView]) -> Vec<(String, u64, u64)> {
    ctx.rdma
        .iter()
        .map(|r| {
            let rx = hosts
                .iter()
                .find(|v| v.label() == r.label())
                .map_or(0, |v| v.get("rx_packets_phy"));
            (r.label(), r.get("np_ecn_marked_roce_packets"), rx)
        })
        .collect()
}

/// The pause evidence line of a switch, or why there is none.
fn pause_line(s: &Switch<'_>, paused: &BTreeMap<u8, u64>) -> String {
    if paused.is_empty() {
        if s.ports.is_empty() {
            format!(
                "the capture has no port counters of {}: whether it pauses is not known",
                s.name
            )
        } else {
            format!(
                "{}'s {} port(s) in the capture sent no PAUSE",
                s.name,
                s.ports.len()
            )
        }
    } else {
        let list: Vec<String> = paused
            .iter()
            .map(|(p, n)| format!("tx_prio{p}_pause +{n}"))
            .collect();
        format!(
            "{} sends PAUSE upstream: {} over its {} port(s) {}",
            s.name,
            list.join(", "),
            s.ports.len(),
            s.ports.first().map(|v| v.how()).unwrap_or_default()
        )
    }
}

/// Severity of a configuration cause on a switch: an error when the
/// counters show its consequence (PAUSE, not totals since boot), else a
/// warning.
fn severity(s: &Switch<'_>, shows: bool) -> Severity {
    if shows && s.ports.iter().any(|v| !v.since_boot) {
        Severity::Error
    } else {
        Severity::Warning
    }
}

/// The buffer-too-small rule (module docs). Returns whether it fired.
fn buffer_too_small(s: &Switch<'_>, out: &mut Vec<Finding>) -> bool {
    let Some(b) = s.buffer() else {
        return false;
    };
    let PauseAt::Dynamic(..) = b.pause_at else {
        return false;
    };
    let mut why = Vec::new();
    let ports = s.ports.len() as u64;
    let per_gbps = match (b.speed_mbps, ports > 0) {
        (Some(mbps), true) => Some((b.pool / (ports.saturating_mul(mbps) / 1000).max(1), mbps)),
        _ => None,
    };
    let half_round_trip = b.headroom.filter(|h| b.pause_at.bytes() < h / 2);
    let small = match per_gbps {
        Some((per, _)) => per < MIN_POOL_BYTES_PER_GBPS,
        None => half_round_trip.is_some(),
    };
    if !small {
        return false;
    }
    if let Some((per, mbps)) = per_gbps {
        why.push(format!(
            "a {}-byte shared pool for {ports} port(s) at {}: {per} bytes per Gbit/s, where switch ASICs carry about 3,000 to 10,000 (32 MB for 3.2 Tbit/s)",
            b.pool,
            format_bps(mbps.saturating_mul(1_000_000))
        ));
    }
    match half_round_trip {
        Some(h) => why.push(format!(
            "{}; that is less than half the {h}-byte headroom (xoff) of {}, the data one round trip brings after PAUSE: the switch pauses a sender before it has buffered half a round trip",
            b.pause_at.describe(b.pool),
            b.profile
        )),
        None => why.push(b.pause_at.describe(b.pool)),
    }
    let paused = s.paused();
    let mut f = Finding::new(
        severity(s, !paused.is_empty()),
        Symptom::BufferTooSmall,
        s.name.clone(),
    );
    f.origin = Some(s.name.clone());
    f.title = format!(
        "switch {}'s shared buffer is too small: a {}-byte lossless pool makes it pause senders almost at once{}",
        s.name,
        b.pool,
        if paused.is_empty() { "" } else { ", and it does send PAUSE upstream" }
    );
    f.evidence.push(format!(
        "{} line {}: ingress lossless pool size {}",
        b.file, b.pool_line, b.pool
    ));
    f.evidence.extend(why);
    f.evidence.push(pause_line(s, &paused));
    f.impact = "every burst into the switch turns into PAUSE within microseconds: the senders are held off most of the time although nothing is really full, and every flow sharing those links and the priority waits with them (head-of-line blocking); ECN never gets a queue deep enough to mark".into();
    f.check_first = format!(
        "{}'s buffer configuration (`mmuconfig -l`, `show buffer configuration`): the shared pool size against the platform's buffer and the ports it serves, and the lossless profile's dynamic_th (alpha); restore the platform's buffer template, then check that ECN's Kmin sits below the pause point",
        s.name
    );
    f.why = "a switch pauses a lossless priority group when it holds its share of the shared pool (alpha / (1 + alpha) of it under the dynamic threshold); a pool that small leaves each group less room than one round trip of data, so PFC fires on any burst a normal buffer absorbs".into();
    out.push(f);
    true
}

/// The ecn-not-marking rule (module docs), for the priorities the switch
/// pauses on (its lossless queues when it pauses on none).
fn ecn_not_marking(
    s: &Switch<'_>,
    small: bool,
    marks: &[(String, u64, u64)],
    cnps: u64,
    marked_elsewhere: &dyn Fn(u8) -> bool,
    out: &mut Vec<Finding>,
) {
    let Some((file, e)) = s.ecn else {
        return;
    };
    let paused = s.paused();
    let queues: BTreeSet<u8> = if paused.is_empty() {
        e.queues.iter().map(|q| q.queue).collect()
    } else {
        paused.keys().copied().collect()
    };
    let marked: u64 = marks.iter().map(|m| m.1).fold(0, u64::saturating_add);
    for q in queues {
        let Some((on, line)) = s.marks(q) else {
            continue;
        };
        // Marks would have counted: DCQCN answers them somewhere in the
        // capture, or the other switches mark this queue.
        let elsewhere = !on && marked_elsewhere(q);
        let would_count = cnps > 0 || elsewhere;
        let mut f = Finding::new(
            severity(s, paused.contains_key(&q) && would_count),
            Symptom::EcnNotMarking,
            s.name.clone(),
        );
        // ECN off is a misconfiguration named as the origin (ranked
        // before the PAUSE it leaves to PFC) when marks would count here:
        // off everywhere with nothing answering marks is how this fabric
        // is run, a warning that ranks after what the counters measure.
        if on || would_count {
            f.origin = Some(s.name.clone());
        }
        if !on {
            f.title = format!(
                "ECN is off on switch {}'s queue {q}: the congested queue never marks, so DCQCN cannot slow the senders and PFC does all the work",
                s.name
            );
            f.evidence.push(line);
        } else {
            // Kmin above the pause point: the queue never gets there.
            let (Some(b), Some(p)) = (s.buffer(), s.profile(q)) else {
                continue;
            };
            // The deepest an egress queue gets before every port feeding
            // it is paused: all the switch's other ports, each holding up
            // to its pause point.
            let feeders = (s.ports.len() as u64).saturating_sub(1);
            let reach = b.pause_at.bytes().saturating_mul(feeders);
            let Some(kmin) = p.green_min.filter(|k| feeders > 0 && *k > reach) else {
                continue;
            };
            if small || marked > 0 {
                // The buffer is the cause (its finding says so), or
                // queues do reach Kmin somewhere.
                continue;
            }
            f.title = format!(
                "switch {}'s ECN Kmin on queue {q} ({kmin} bytes) is above what its queues can hold before PFC pauses them ({feeders} feeding port(s) x {} bytes = {reach} bytes): the queue never reaches Kmin, so ECN never marks",
                s.name,
                b.pause_at.bytes()
            );
            f.evidence.push(format!(
                "{file} line {}: profile {} green_min_threshold {kmin}, green_max_threshold {}",
                p.block.line,
                p.block.name,
                p.green_max
                    .map(|k| k.to_string())
                    .unwrap_or_else(|| "?".into())
            ));
            f.evidence.push(format!(
                "{} line {}: {} {}",
                b.file,
                b.pool_line,
                b.profile,
                b.pause_at.describe(b.pool)
            ));
        }
        f.evidence.push(pause_line(s, &paused));
        if !marks.is_empty() {
            f.evidence.push(format!(
                "np_ecn_marked_roce_packets +{marked} over the {} host(s) in the capture",
                marks.len()
            ));
        }
        f.evidence.push(if would_count {
            format!("DCQCN is at work in this fabric (CNPs +{cnps}{}): marks from {} would slow the senders", if elsewhere { ", other switches mark this queue" } else { "" }, s.name)
        } else {
            "no CNP anywhere in the capture and no other switch marks this queue: whether the NICs run DCQCN cannot be seen, so this is a warning; it is the cause of the PAUSE only if they do".to_string()
        });
        f.impact = "DCQCN is blind to this switch's congestion: senders keep their rate until PFC holds them, so queues stand deep, PAUSE spreads upstream and unrelated flows on the same links wait (head-of-line blocking)".into();
        f.check_first = format!(
            "ECN/WRED on {}'s RoCE queue (`ecnconfig -l`, `ecnconfig -q {q}`): the WRED profile bound to queue {q} with ECN on, and Kmin/Kmax below the point where the switch pauses; compare with the switches that do mark",
            s.name
        );
        f.why = "ECN marks a queue once it is deeper than Kmin and PFC pauses once a priority group crosses its threshold; with marking off, or Kmin beyond the pause point, the queue is paused first every time and DCQCN never hears of the congestion (Zhu et al., SIGCOMM 2015: Kmin must sit below the PFC threshold)".into();
        out.push(f);
    }
}

/// The ecn-too-early rule (module docs).
fn ecn_too_early(
    s: &Switch<'_>,
    ctx: &Context,
    hosts: &[&CounterView],
    marks: &[(String, u64, u64)],
    out: &mut Vec<Finding>,
) {
    let Some((file, e)) = s.ecn else {
        return;
    };
    let queues: BTreeSet<u8> = e.queues.iter().filter(|q| q.on).map(|q| q.queue).collect();
    let queues: BTreeSet<u8> = if queues.is_empty() && e.queues.is_empty() {
        (0u8..8).collect()
    } else {
        queues
    };
    let Some((q, p)) = queues
        .iter()
        .filter_map(|q| Some((*q, s.profile(*q)?)))
        .find(|(_, p)| p.marks_green() && p.green_min.is_some_and(|k| k <= EARLY_KMIN_BYTES))
    else {
        return;
    };
    let Some((host, m, rx)) = marks
        .iter()
        .filter(|(_, m, rx)| {
            *rx > 0 && u128::from(*m) * 1_000_000 >= u128::from(EARLY_MARKED_PPM) * u128::from(*rx)
        })
        .max_by_key(|(_, m, _)| *m)
    else {
        return;
    };
    // Heavy PAUSE means the queues are deep: not marking too early.
    let heavy_pause = ctx.eth.iter().any(|v| {
        (0u8..8).any(|p| {
            let d = v.get(&format!("tx_prio{p}_pause_duration"));
            v.ppm_of_interval(d).is_some_and(|ppm| ppm >= 10_000)
        })
    });
    if heavy_pause {
        return;
    }
    let mut f = Finding::new(Severity::Warning, Symptom::EcnTooEarly, s.name.clone());
    f.origin = Some(s.name.clone());
    f.title = format!(
        "switch {} marks ECN from {} bytes on queue {q}: marks start while the queue is a few frames deep, so DCQCN throttles the senders and links run underused",
        s.name,
        p.green_min.unwrap_or(0)
    );
    f.evidence.push(format!(
        "{file} line {}: profile {} green_min_threshold {}, green_max_threshold {}, green_drop_probability {} %",
        p.block.line,
        p.block.name,
        p.green_min.unwrap_or(0),
        p.green_max.map(|k| k.to_string()).unwrap_or_else(|| "?".into()),
        p.green_probability.map(|k| k.to_string()).unwrap_or_else(|| "?".into())
    ));
    let ppm = u64::try_from(u128::from(*m) * 1_000_000 / u128::from(*rx)).unwrap_or(0);
    f.evidence.push(format!(
        "{host}: {} of the packets it received carry a CE mark (np_ecn_marked_roce_packets +{m} of rx_packets_phy +{rx}); no port paused 1 % of the time or more",
        pct(ppm)
    ));
    let speed = s.buffer().and_then(|b| b.speed_mbps);
    if let (Some(mbps), Some(v)) = (speed, hosts.iter().find(|v| v.label() == *host)) {
        if let Some(ps) = v.interval_ps.filter(|p| *p > 0) {
            let bps = u128::from(v.get("rx_bytes_phy")) * 8 * 1_000_000_000_000 / u128::from(ps);
            let line = u128::from(mbps) * 1_000_000;
            let share = u64::try_from(bps * 1_000_000 / line.max(1)).unwrap_or(u64::MAX);
            f.evidence.push(format!(
                "{host} received at {} of its {} link {}",
                pct(share.min(1_000_000)),
                format_bps(mbps.saturating_mul(1_000_000)),
                v.how()
            ));
        }
    }
    f.impact = "transfers take longer than the links allow, with no drops and little PAUSE: the senders cut their rates on every short burst and climb back slowly, so the bottleneck link idles between cuts".into();
    f.check_first = format!(
        "{}'s WRED/ECN profile (`ecnconfig -l`): Kmin (green_min_threshold) high enough for the queue to absorb one round trip of rate mismatch (tens to hundreds of KB at 100 Gbit/s), Kmax well above it and a low marking probability, all below the PFC pause point",
        s.name
    );
    f.why = "DCQCN cuts a sender's rate for every CNP, and receivers send a CNP for marked packets; a Kmin of a few KB marks queues that any two packets arriving together create, so the senders are slowed although the link is not congested".into();
    out.push(f);
}
