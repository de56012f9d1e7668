//! What a run produces: the `results.json` structure of one variant.
//!
//! [`RunResult`] holds simulated quantities only (no wall-clock figures),
//! so serialising it gives the same bytes for the same inputs and seed.
//! Wall-clock and memory figures come back separately as [`RunStats`].
//!
//! Units: times are integer picoseconds (`*_ps`), sizes bytes, rates bits
//! per second, durations of PAUSE as the mlx5 counters give them
//! (microseconds) only in the text dumps of [`crate::stats`].

use serde::{Deserialize, Serialize};

/// Everything one variant of a scenario produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// The headline numbers.
    pub summary: Summary,
    /// One record per dependent workload (ring all-reduce, htsim import
    /// with triggers), in workload order: its step time.
    #[serde(default)]
    pub groups: Vec<GroupRecord>,
    /// One record per flow, in flow id order (empty when not recorded).
    pub flows: Vec<FlowRecord>,
    /// Per-port counters of every node, in (node, port) order (empty when
    /// not recorded).
    pub ports: Vec<PortRecord>,
    /// RDMA (transport) counters per host, in node order.
    pub nics: Vec<NicRecord>,
    /// Sampled egress queue depths.
    pub queues: Vec<QueueSeries>,
    /// When transmitters were held off by PAUSE: one entry per (port,
    /// priority) that was paused at least once, in (node, port, priority)
    /// order; at most `record.pause_intervals` intervals per port. Absent
    /// in files written before it existed (read back as empty).
    #[serde(default)]
    pub pauses: Vec<PauseSeries>,
    /// PFC watchdog storm events of the switches, in time order (empty
    /// when the watchdog is off or saw no storm).
    #[serde(default)]
    pub pfcwd_events: Vec<PfcwdEvent>,
    /// PFC watchdog counters of every queue that saw a storm, in (node,
    /// port, priority) order: the rows of `pfcwd show stats`.
    #[serde(default)]
    pub pfcwd_stats: Vec<PfcwdStats>,
    /// PFC deadlocks found during the run, in the order they were found.
    #[serde(default)]
    pub deadlocks: Vec<DeadlockRecord>,
    /// Per-flow delivery rate over time, one series per flow in flow id
    /// order, when `record.flow_rates` asks for it; absent (and empty)
    /// otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flow_rates: Vec<FlowRateSeries>,
    /// One record per size of every perftest workload with a `test`, in
    /// workload and size order (absent when there is none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub perftest: Vec<PerftestRecord>,
    /// One record per training job, in workload order: its steps (absent
    /// when there is none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub training: Vec<TrainingRecord>,
    /// Fluid mode's account of itself (`fidelity = "fluid"`): what it
    /// leaves out, and its error against the packet model when the
    /// scenario asked for the check (absent in packet mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fluid: Option<FluidRecord>,
    /// The pcap files of the captured link directions (`record.pcap`), in
    /// that order. Never in `results.json`: `rocelab run` writes each to
    /// `pcap/<variant>/<name>.pcap`.
    #[serde(skip)]
    pub captures: Vec<CaptureFile>,
}

/// What a fluid-mode run says of itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FluidRecord {
    /// What fluid mode does not model.
    pub leaves_out: Vec<String>,
    /// The same variant run in packet mode beside it
    /// (`fidelity_check = true`): the error of fluid mode's numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<FluidCheck>,
}

/// Fluid mode against the packet model on the same variant. Errors are
/// relative, (fluid - packet) / packet; `_abs` means are of their
/// absolute values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FluidCheck {
    /// Wall-clock seconds of the packet run's event loop.
    pub packet_wall_s: f64,
    /// Wall-clock seconds of the fluid run's loop.
    pub fluid_wall_s: f64,
    /// `packet_wall_s / fluid_wall_s`.
    pub speedup: f64,
    /// Fabric flows that completed in both.
    pub flows: u64,
    /// Error of their mean FCT.
    pub fct_mean_error: f64,
    /// Error of their 99th percentile FCT.
    pub fct_p99_error: f64,
    /// Mean absolute FCT error over those flows, flow by flow (a FIFO
    /// queue serves flows unequally where fluid mode shares fairly, so
    /// single flows differ more than the distribution).
    pub fct_error_mean_abs: f64,
    /// The largest absolute FCT error.
    pub fct_error_max_abs: f64,
    /// Error of the makespan (last completion).
    pub makespan_error: f64,
    /// Groups (collective sizes, training phases) timed in both, those
    /// of under a nanosecond left out.
    pub groups: u64,
    /// The largest absolute error of a group's time (`None`: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_error_max_abs: Option<f64>,
    /// Training steps timed in both.
    pub steps: u64,
    /// The largest absolute error of a step time (`None`: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_error_max_abs: Option<f64>,
    /// PAUSE frames the packet run sent.
    pub packet_pause_frames: u64,
    /// Frames the packet run dropped.
    pub packet_drops: u64,
    /// What the numbers mean: whether PFC or loss, which fluid mode does
    /// not model, was at work in the packet run.
    pub verdict: String,
}

/// The tolerance fluid mode is held to where the packet run neither
/// paused nor dropped: 10 % on flow, group and step times.
pub const FLUID_TOLERANCE: f64 = 0.10;

impl FluidCheck {
    /// Compare a fluid run with the packet run of the same variant.
    pub fn compare(
        fluid: &RunResult,
        packet: &RunResult,
        fluid_wall_s: f64,
        packet_wall_s: f64,
    ) -> FluidCheck {
        let rel = |a: u64, b: u64| {
            if b == 0 {
                0.0
            } else {
                (a as f64 - b as f64) / b as f64
            }
        };
        let mut errs = Vec::new();
        let (mut fa, mut fb) = (Vec::new(), Vec::new());
        for (f, p) in fluid.flows.iter().zip(&packet.flows) {
            if let (Some(a), Some(b), true) = (f.fct_ps, p.fct_ps, f.id == p.id) {
                errs.push(rel(a, b).abs());
                fa.push(a);
                fb.push(b);
            }
        }
        let mean = |v: &[u64]| v.iter().sum::<u64>() / (v.len() as u64).max(1);
        let fct_mean_error = rel(mean(&fa), mean(&fb));
        fa.sort_unstable();
        fb.sort_unstable();
        let p99 = |v: &[u64]| if v.is_empty() { 0 } else { percentile(v, 99) };
        let fct_p99_error = rel(p99(&fa), p99(&fb));
        let max_abs = |v: &[f64]| {
            v.iter()
                .copied()
                .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))))
        };
        let mut gerr = Vec::new();
        for (f, p) in fluid.groups.iter().zip(&packet.groups) {
            // Phases that take no time (a zero-length optimizer: a marker
            // copy of a few ps) have no error worth a ratio.
            if let (Some(a), Some(b), true) = (
                f.step_time_ps,
                p.step_time_ps,
                p.step_time_ps >= Some(1_000),
            ) {
                gerr.push(rel(a, b).abs());
            }
        }
        let mut serr = Vec::new();
        for (f, p) in fluid.training.iter().zip(&packet.training) {
            for (a, b) in f.steps.iter().zip(&p.steps) {
                if let (Some(a), Some(b)) = (a.time_ps, b.time_ps) {
                    serr.push(rel(a, b).abs());
                }
            }
        }
        let pauses = packet.summary.pause_frames_sent;
        let drops = packet.summary.drops;
        let makespan_error = rel(fluid.summary.makespan_ps, packet.summary.makespan_ps);
        // Judged on what the run is about: collective and step times
        // where it has them (their flows are chunks a queue pair serves
        // in turn), else the flows' FCT distribution and the makespan.
        let worst = if gerr.is_empty() && serr.is_empty() {
            [fct_mean_error, fct_p99_error, makespan_error]
                .iter()
                .fold(0.0, |m: f64, x| m.max(x.abs()))
        } else {
            [max_abs(&gerr), max_abs(&serr)]
                .into_iter()
                .flatten()
                .fold(0.0, f64::max)
        };
        let verdict = if pauses == 0 && drops == 0 {
            if worst <= FLUID_TOLERANCE {
                format!(
                    "no PAUSE and no drop in packet mode: fluid mode is within {:.0} % (worst {:.1} %)",
                    FLUID_TOLERANCE * 100.0,
                    worst * 100.0
                )
            } else {
                format!(
                    "no PAUSE and no drop in packet mode, yet fluid mode is off by up to {:.1} %: outside its {:.0} % tolerance",
                    worst * 100.0,
                    FLUID_TOLERANCE * 100.0
                )
            }
        } else {
            format!(
                "packet mode sent {pauses} PAUSE frames and dropped {drops}: fluid mode models neither, and is off by up to {:.1} %",
                worst * 100.0
            )
        };
        FluidCheck {
            packet_wall_s,
            fluid_wall_s,
            speedup: packet_wall_s / fluid_wall_s.max(1e-9),
            flows: errs.len() as u64,
            fct_mean_error,
            fct_p99_error,
            fct_error_mean_abs: if errs.is_empty() {
                0.0
            } else {
                errs.iter().sum::<f64>() / errs.len() as f64
            },
            fct_error_max_abs: max_abs(&errs).unwrap_or(0.0),
            makespan_error,
            groups: gerr.len() as u64,
            group_error_max_abs: max_abs(&gerr),
            steps: serr.len() as u64,
            step_error_max_abs: max_abs(&serr),
            packet_pause_frames: pauses,
            packet_drops: drops,
            verdict,
        }
    }
}

/// What a training job's steps cost (see
/// [`crate::workload::training`] for the overlap rule).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainingRecord {
    /// The job (its workload's name).
    pub job: String,
    /// Its steps in order.
    pub steps: Vec<StepRecord>,
    /// Mean step time when every step completed, picoseconds.
    pub mean_step_ps: Option<u64>,
    /// The collective call (by label) with the most exposed time summed
    /// over the steps (`None`: nothing was exposed): where the step time
    /// went that compute did not take.
    pub critical: Option<String>,
    /// With other jobs on the fabric: its mean step time when it runs
    /// alone on the same fabric (filled by the runner; `None` otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alone_mean_step_ps: Option<u64>,
    /// `mean_step_ps / alone_mean_step_ps`: how much the other jobs
    /// slowed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slowdown: Option<f64>,
    /// With other jobs on the fabric: the links its flows share with
    /// theirs, as `NODE:PORT -> PEER: X MB of it, Y MB of others`, most
    /// shared first (at most 8; counted on the paths ECMP hashed the
    /// flows onto).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_links: Vec<String>,
    /// Ports on its paths PAUSE held while it ran, most held first (at
    /// most 8), as `NODE:PORT by PEER for TIME`, with `(also carries
    /// JOB)` when another job's flows cross the port too: where PAUSE
    /// crossed between jobs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paused: Vec<String>,
    /// In a variant with faults: its mean step time with the faults
    /// taken out, on the same fabric (filled by the runner).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy_mean_step_ps: Option<u64>,
}

/// One step of a training job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepRecord {
    /// Step, from 0.
    pub step: u32,
    /// First post of its first forward compute, picoseconds.
    pub start_ps: Option<u64>,
    /// End of its last optimizer compute, picoseconds.
    pub finish_ps: Option<u64>,
    /// `finish - start` when every part completed.
    pub time_ps: Option<u64>,
    /// Compute per rank in the step (forward, backward, optimizer),
    /// picoseconds.
    pub compute_ps: u64,
    /// Communication no compute covered: the sum of `collectives`'
    /// exposed times, picoseconds.
    pub exposed_ps: u64,
    /// With pipeline stages: the time the step's last rank waited for
    /// another stage to send it activations or gradients (the
    /// pipeline's bubble), picoseconds; step = compute + exposed +
    /// bubble. Absent when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bubble_ps: u64,
    /// The collective exposed longest in the step (its label; `None`:
    /// nothing was): what set the step time beyond compute.
    pub critical: Option<String>,
    /// Its collective calls in the order they were issued.
    pub collectives: Vec<StepCollective>,
    /// In a variant with faults: the same step's time with the faults
    /// taken out, on the same fabric (filled by the runner).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy_time_ps: Option<u64>,
    /// `time_ps - healthy_time_ps`: what the faults cost this step
    /// (negative when the step ran faster with them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault_cost_ps: Option<i64>,
}

/// One collective call of a training step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepCollective {
    /// What it is (`backward L3 mlp tp all_reduce`, `dp all_reduce
    /// bucket 0`).
    pub label: String,
    /// First post to last finish over all ranks, picoseconds.
    pub time_ps: u64,
    /// Its span that neither compute nor an earlier collective covered,
    /// picoseconds.
    pub exposed_ps: u64,
    /// What held it back (as [`GroupRecord::limit`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
    /// Where (as [`GroupRecord::bottleneck`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bottleneck: Option<String>,
    /// The host whose transfer finished last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_host: Option<String>,
}

/// What one size of a perftest run measured (what perftest prints is
/// computed from it: bandwidth = `bytes x 8 / (finish - start)`, message
/// rate = `messages / (finish - start)`, latency statistics from the
/// samples).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PerftestRecord {
    /// The group: the workload's name and the size (`perftest-0-65536`).
    pub group: String,
    /// The program (`write_bw`).
    pub test: crate::workload::perftest::PerftestTest,
    /// Message size, bytes.
    pub size: u64,
    /// QPs.
    pub qps: u32,
    /// Both directions.
    pub bidirectional: bool,
    /// Outstanding work requests per QP (`-t`).
    pub tx_depth: u32,
    /// A completion every this many work requests (`-Q`).
    pub cq_mod: u32,
    /// Largest inline payload, bytes (`-I`).
    pub inline: u32,
    /// Ran for a duration (`-D`).
    pub timed: bool,
    /// Messages completed, all QPs and directions.
    pub messages: u64,
    /// Payload bytes delivered, all QPs and directions.
    pub bytes: u64,
    /// First post.
    pub start_ps: Option<u64>,
    /// Last completion.
    pub finish_ps: Option<u64>,
    /// Every flow of the size completed.
    pub completed: bool,
    /// What limits this size in the closed forms of
    /// [`crate::hostmodel`] (the client's host side, the path between
    /// the two hosts).
    pub limit: crate::hostmodel::Limit,
    /// Bandwidth tests: the closed-form bound, bits/s (both directions
    /// with `-b`); latency tests: 0.
    pub bound_bps: u64,
    /// Latency tests: the closed-form unloaded latency perftest would
    /// print (half the round trip for WRITE and SEND), ps; else 0.
    pub unloaded_latency_ps: u64,
    /// Latency tests: the intervals between the client's posts (one
    /// round trip each), picoseconds; perftest halves them for WRITE and
    /// SEND.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency_samples_ps: Vec<u64>,
}

impl PerftestRecord {
    /// Seconds from the first post to the last completion.
    pub fn seconds(&self) -> Option<f64> {
        let (a, b) = (self.start_ps?, self.finish_ps?);
        (b > a).then(|| (b - a) as f64 / 1e12)
    }

    /// Average payload bandwidth, bits per second.
    pub fn bw_bps(&self) -> Option<f64> {
        Some(self.bytes as f64 * 8.0 / self.seconds()?)
    }

    /// Messages per second.
    pub fn msg_rate(&self) -> Option<f64> {
        Some(self.messages as f64 / self.seconds()?)
    }

    /// Iterations per QP and direction, as perftest's `#iterations`.
    pub fn iterations(&self) -> u64 {
        let dirs = if self.bidirectional { 2 } else { 1 };
        let per = u64::from(self.qps.max(1)) * dirs;
        if self.test.is_bw() {
            self.messages / per
        } else {
            self.latency_samples_ps.len() as u64 + 1
        }
    }
}

/// The capture of one link direction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CaptureFile {
    /// `<from>-<to>`: the transmitting node and its peer.
    pub name: String,
    /// Frames written.
    pub frames: u64,
    /// Frames past `max_frames`, counted only.
    pub frames_not_written: u64,
    /// The whole pcap file (nanosecond timestamps, link type Ethernet).
    pub pcap: Vec<u8>,
}

/// A PFC watchdog state change of one egress queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PfcwdEvent {
    /// When the watchdog's poll saw it.
    pub time_ps: u64,
    /// Switch name.
    pub node: String,
    /// Port number on that switch.
    pub port: u16,
    /// Node at the other end of the link (the one sending PAUSE).
    pub peer: String,
    /// Priority (queue) of the storm.
    pub priority: u8,
    /// `storm_detected` or `storm_restored`.
    pub event: String,
    /// The configured action (`drop`, `forward`, `alert`).
    pub action: String,
}

/// The `pfcwd show stats` counters of one queue. `tx_*`: frames the queue
/// sent (`ok`) or dropped during storms; `rx_*`: frames of the priority
/// that arrived on the port during storms; `*_last`: the same for the
/// latest storm only.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PfcwdStats {
    /// Switch name.
    pub node: String,
    /// Port number on that switch.
    pub port: u16,
    /// Priority (queue).
    pub priority: u8,
    /// `stormed` or `operational` at the end of the run.
    pub status: String,
    /// Storms detected.
    pub storms_detected: u64,
    /// Storms restored.
    pub storms_restored: u64,
    /// Frames sent while stormed.
    pub tx_ok: u64,
    /// Frames dropped from the queue while stormed.
    pub tx_drop: u64,
    /// Frames received on the port and priority while stormed.
    pub rx_ok: u64,
    /// Frames of the priority dropped on arrival while stormed.
    pub rx_drop: u64,
    /// `tx_ok` of the latest storm.
    pub tx_last_ok: u64,
    /// `tx_drop` of the latest storm.
    pub tx_last_drop: u64,
    /// `rx_ok` of the latest storm.
    pub rx_last_ok: u64,
    /// `rx_drop` of the latest storm.
    pub rx_last_drop: u64,
}

/// A PFC deadlock: egress queues held off by PAUSE whose frames can only
/// leave through each other (a cycle of the buffer dependency graph).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadlockRecord {
    /// The lossless priority that deadlocked.
    pub priority: u8,
    /// When the last member was held off: the deadlock's onset.
    pub formed_ps: u64,
    /// When the check found it.
    pub detected_ps: u64,
    /// The stuck egress queues (a cycle, or cycles sharing queues), in
    /// (node, port) order.
    pub members: Vec<QueueRef>,
}

/// One egress queue of a switch port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueRef {
    /// Switch name.
    pub node: String,
    /// Port number on that switch.
    pub port: u16,
    /// Node at the other end of the link.
    pub peer: String,
}

/// Headline numbers of one variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Variant name (`lossless`, `lossy`, ...).
    pub variant: String,
    /// Simulated time at the end of the run.
    pub sim_time_ps: u64,
    /// Events processed.
    pub events: u64,
    /// Flows whose last byte was acknowledged.
    pub flows_completed: u64,
    /// Flows in the workload.
    pub flows_total: u64,
    /// Aggregate goodput: application bytes acknowledged (all flows, as
    /// `bytes_delivered` counts them) times 8, divided by the time from
    /// the first flow start to the last flow completion (or the end of the
    /// run when some flow did not finish).
    pub goodput_bps: f64,
    /// Frames dropped anywhere (buffer overflow, headroom overflow, link
    /// faults, bad FCS, oversize, link down).
    pub drops: u64,
    /// Data frames switches cut to their headers instead of dropping them
    /// (`[fabric.trim]`; not in `drops`). Absent when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub trimmed: u64,
    /// PFC frames sent by all ports (XOFF and XON).
    pub pause_frames_sent: u64,
    /// Time transmitters were held off by PAUSE, summed over ports and
    /// priorities.
    pub pause_time_ps: u64,
    /// Frames marked CE by switches.
    pub ecn_marked: u64,
    /// CNPs sent by notification points.
    pub cnps_sent: u64,
    /// Data packets sent again by requesters.
    pub retransmitted_packets: u64,
    /// Median flow completion time of completed flows; FCTs count from
    /// each flow's post time (see [`FlowRecord`]). `None` (`null`) when no
    /// flow finished: a percentile of nothing is absent, not zero.
    pub fct_p50_ps: Option<u64>,
    /// 99th percentile flow completion time (nearest rank); `None` when no
    /// flow finished.
    pub fct_p99_ps: Option<u64>,
    /// Largest flow completion time; `None` when no flow finished.
    pub max_fct_ps: Option<u64>,
    /// Time the last flow completed (0 when none).
    pub makespan_ps: u64,
    /// Application (payload) bytes the receivers acknowledged, all flows:
    /// completed messages plus the acknowledged packets of messages still
    /// in progress (see [`FlowRecord::bytes_acked`]).
    pub bytes_delivered: u64,
    /// Frames put on links (all kinds).
    pub frames_sent: u64,
    /// Why the run stopped: `flows_done` (every flow completed or failed,
    /// before the duration if one is set), `idle` (nothing left to do),
    /// `duration`, `event_budget`, `deadlock` (`on_deadlock = "stop"`)
    /// or `interrupted` (Ctrl-C: what was measured so far).
    pub stop_reason: String,
}

/// One flow's outcome. Only flows over the fabric have one: copies
/// inside a GPU server (NVLink, PCIe) count in the summary's flow totals
/// and their groups' step times, not here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowRecord {
    /// Flow id (as in the workload).
    pub id: u32,
    /// Requester host name.
    pub src: String,
    /// Responder host name.
    pub dst: String,
    /// Name of the workload that made it (its `name`, or its kind and
    /// index such as `incast-0`). Empty in files written before it existed.
    #[serde(default)]
    pub workload: String,
    /// Bytes of the flow.
    pub size: u64,
    /// Configured start time.
    pub start_ps: u64,
    /// When its first work requests were actually posted: `start`, or
    /// later when it waited for other flows (`None`: never posted, because
    /// a flow it waits for did not complete or the run ended first).
    #[serde(default)]
    pub posted_ps: Option<u64>,
    /// Completion time of the last work request, if it completed.
    pub finish_ps: Option<u64>,
    /// `finish - posted`: the flow completion time counts from the post,
    /// not from the configured start.
    pub fct_ps: Option<u64>,
    /// FCT divided by the stand-alone FCT (base RTT plus wire bytes at the
    /// bottleneck rate), floored at 1.
    pub slowdown: Option<f64>,
    /// Application (payload) bytes the receiver acknowledged by the end of
    /// the run: the flow's completed messages plus, for the message in
    /// progress, its packets below the requester's oldest unacknowledged
    /// PSN (ACKs are cumulative; a READ counts its responses received) at
    /// one path MTU of payload each. A flow cut off by the duration shows
    /// what got through, not only its completed messages.
    pub bytes_acked: u64,
    /// Whether a work request ended in error (retry exhaustion ...).
    pub failed: bool,
}

/// The step time of one dependent workload (a group of flows).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupRecord {
    /// The workload's `name`, or its kind and index (`ring-allreduce-0`).
    pub name: String,
    /// Workload kind (`ring-allreduce`, `htsim`).
    pub kind: String,
    /// Flows in the group.
    pub flows: u64,
    /// Flows of the group that completed.
    pub flows_completed: u64,
    /// First post of any of its flows (`None`: none was posted).
    pub start_ps: Option<u64>,
    /// Last finish of any of its flows (`None`: none finished).
    pub finish_ps: Option<u64>,
    /// `finish - start` when every flow completed, else `None`.
    pub step_time_ps: Option<u64>,
    /// Ring all-reduce only: the bandwidth-only bound
    /// `2(N-1)/N x size x 8 / rate` at the slowest host link of the ring,
    /// rounded down (no latency, no header bytes).
    pub ideal_ps: Option<u64>,
    /// Ring all-reduce and nccl-tests sizes: ranks (hosts). Absent in
    /// files written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<u32>,
    /// Ring all-reduce: bytes reduced per rank (the workload's `size`);
    /// nccl-tests: bytes per rank passed to NCCL. nccl-tests' algbw and
    /// busbw follow from them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// nccl-tests sizes: the collective (`all_reduce`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collective: Option<String>,
    /// nccl-tests sizes: the table's `size` column, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// nccl-tests sizes: the table's `count` column, elements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// nccl-tests sizes: NCCL's algorithm that ran (`Ring`, `Tree`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<String>,
    /// nccl-tests sizes: NCCL's protocol (`LL`, `LL128`, `Simple`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// nccl-tests sizes: the time NCCL's tuning model predicts for the
    /// collective on this topology, picoseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_ps: Option<u64>,
    /// nccl-tests sizes: what held the collective back. `latency` (NCCL's
    /// latency term is the largest part), `nic`, `nvlink` or `pcie` (the
    /// busiest such link's bytes at its rate are: a host's link to its
    /// switch, a GPU's NVLink or PCIe egress), `pause` (PAUSE held a port
    /// during it and it took over 10 % longer than latency plus its
    /// busiest link) or `congestion` (a fabric link on its hashed paths
    /// carries more than any host link, or it took over 50 % longer than
    /// latency plus its busiest link, no PAUSE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
    /// nccl-tests sizes: where `limit` acted. A link as `NODE:PORT ->
    /// PEER` (the egress; for `nic` and `congestion`, the link whose
    /// bytes at its rate are the most, counted on the paths ECMP hashed
    /// the collective's flows onto); `pause`: the port PAUSE held
    /// longest on those paths (else anywhere), `NODE:PORT -> PEER paused`
    /// (the peer sent the PAUSE); `nvlink`/`pcie`: `server S GPU G NVLink out` (or
    /// `PCIe to host memory`, `PCIe from host memory`). Absent for
    /// `latency`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bottleneck: Option<String>,
    /// nccl-tests sizes: the host (NIC) whose transfer of the collective
    /// finished last, the rank the collective waited for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_host: Option<String>,
    /// nccl-tests sizes: ports held off by PAUSE while the collective ran,
    /// most held first (at most 8; held time from 10 us bins of every
    /// interval): `NODE:PORT by PEER for TIME` (the peer sent the PAUSE).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paused: Vec<String>,
}

/// Counters of one port (one side of a link).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortRecord {
    /// Node name.
    pub node: String,
    /// Port number on that node.
    pub port: u16,
    /// Node at the other end of the link.
    pub peer: String,
    /// True for host NIC ports.
    pub is_nic: bool,
    /// Counters per priority 0-7.
    pub prio: Vec<PrioCounters>,
    /// Frames dropped at this port's ingress for lack of buffer (or
    /// headroom), all priorities (`rx_discards_phy`).
    pub rx_discards: u64,
    /// Frames lost by a fault on the link direction leaving this port.
    pub fault_drops: u64,
    /// Frames marked CE when leaving this port.
    pub ecn_marked: u64,
    /// Largest egress queue seen, all priorities, bytes.
    pub max_queue_bytes: u64,
    /// Most PFC headroom one ingress priority of this (switch) port used,
    /// bytes: the smallest headroom that would have avoided drops here.
    pub max_headroom_bytes: u64,
    /// NIC ports: times the NIC held XOFF past the minor stall watermark
    /// (mlx5 `tx_pause_storm_warning_events`).
    #[serde(default)]
    pub tx_pause_storm_warning_events: u64,
    /// NIC ports: times it reached the critical watermark and stopped
    /// sending PAUSE (mlx5 `tx_pause_storm_error_events`).
    #[serde(default)]
    pub tx_pause_storm_error_events: u64,
    /// Fault counters: bad frames received, frames lost to a down link.
    /// Absent in files written before they existed (read back as zero).
    #[serde(default)]
    pub errors: PortErrors,
    /// Priorities this port runs PFC on at the end of the run, after
    /// overrides and their time windows: the priorities a capture taken
    /// then would print pause rows for (`mlnx_qos -i` PFC bits on a NIC,
    /// the port's PFC priorities on a switch). `None` (absent) in files
    /// written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pfc_priorities: Option<Vec<u8>>,
    /// Switch ports: the switch's ECN marking settings at the end of the
    /// run, after overrides, one entry per marking priority (empty: the
    /// switch marks nothing). `None` (absent) for NIC ports, which never
    /// mark, and in files written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn: Option<Vec<EcnSetting>>,
    /// Switch ports whose switch picks a next hop per frame: its
    /// `fabric.load_balancing` mode (`spray`, `spray_round_robin`,
    /// `flowlet`, `adaptive`), which reorders a queue pair's frames.
    /// `None` (absent) under per-flow ECMP, for NIC ports and in files
    /// written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_balancing: Option<String>,
    /// InfiniBand links (`fabric.link_layer = "infiniband"`): the port's
    /// credit counters. `None` (absent) on Ethernet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infiniband: Option<IbPortRecord>,
}

/// One InfiniBand port's credit counters over a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IbPortRecord {
    /// `PortXmitWait`: ticks the port had frames to send but no credit
    /// for any of them and sent nothing; a tick is the time one 64-byte
    /// block takes at the port's rate.
    pub xmit_wait: u64,
    /// Flow-control packets the port sent (credit updates to its peer).
    pub fcps_sent: u64,
    /// Most 64-byte blocks its receive buffer held on any one lane.
    pub max_blocks_held: u64,
    /// The blocks of receive buffer it advertises per lane.
    pub blocks_per_lane: u64,
}

/// The ECN (RED) marking settings of one priority of a switch, as the
/// egress queues apply them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EcnSetting {
    /// Priority whose egress queues mark.
    pub priority: u8,
    /// Queue depth (bytes) below which nothing is marked.
    pub kmin_bytes: u64,
    /// Queue depth (bytes) at which the marking probability reaches
    /// `pmax` (above it every ECN-capable frame is marked).
    pub kmax_bytes: u64,
    /// Marking probability at `kmax_bytes`.
    pub pmax: f64,
}

/// What faults leave on a port, as the real counters name them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortErrors {
    /// Frames received with a bad FCS and dropped by the MAC
    /// (`rx_crc_errors_phy`; a switch's FCS / RX_ERR counter).
    pub rx_crc_errors: u64,
    /// Frames received larger than the port's MTU and dropped
    /// (`rx_oversize_pkts_phy`; a switch's oversize counter).
    pub rx_oversize: u64,
    /// Frames lost because the link was down: queued for it, on the wire
    /// when it went down, or sent while it was down (`tx_discards_phy`).
    pub tx_discards: u64,
    /// Times the link went down (`link_down_events_phy`).
    pub link_down_events: u64,
}

/// One priority's counters on a port.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PrioCounters {
    /// Frames sent (data, ACKs, CNPs; not PFC frames).
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Frames received.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// PFC frames sent for this priority (XOFF and XON).
    pub tx_pause: u64,
    /// Time this port asked its peer to stop (XOFF held), ps.
    pub tx_pause_duration_ps: u64,
    /// PFC frames received for this priority.
    pub rx_pause: u64,
    /// Time this port's transmitter was held off, ps.
    pub rx_pause_duration_ps: u64,
    /// Pause episodes ended (XOFF to XON) on the receive side.
    pub rx_pause_transition: u64,
    /// Frames of this priority dropped at ingress.
    pub rx_discards: u64,
    /// Of those, frames dropped on a priority the port treats as lossless
    /// (headroom or buffer exhausted: a misconfiguration,
    /// `rx_prioN_buf_discard`). Absent in older files (zero).
    #[serde(default)]
    pub rx_buf_discard: u64,
}

/// A host's transport counters, named as mlx5 `hw_counters` name them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NicRecord {
    /// Host name.
    pub node: String,
    /// CNPs sent (notification point).
    pub np_cnp_sent: u64,
    /// RoCE packets received with CE.
    pub np_ecn_marked_roce_packets: u64,
    /// CNPs received and acted on (reaction point).
    pub rp_cnp_handled: u64,
    /// Packets received with an unexpected PSN (responder).
    pub out_of_sequence: u64,
    /// NAK sequence errors received (requester).
    pub packet_seq_err: u64,
    /// ACK timeouts (requester).
    pub local_ack_timeout_err: u64,
    /// Duplicate requests received (responder).
    pub duplicate_request: u64,
    /// Implied NAKs (requester).
    pub implied_nak_seq_err: u64,
    /// RNR NAKs received.
    pub rnr_nak_retry_err: u64,
    /// Data packets retransmitted.
    pub retransmitted_packets: u64,
    /// RDMA WRITE requests received.
    pub rx_write_requests: u64,
    /// RDMA READ requests received.
    pub rx_read_requests: u64,
    /// WQEs completed in error on the requester.
    pub req_cqe_error: u64,
    /// Requests past a gap held and placed out of order by the responder,
    /// and READ responses past a gap placed by the requester under
    /// selective repeat (`nic.reorder_window`; not in `out_of_sequence`,
    /// which counts the ones dropped). Absent when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rx_ooo_placed: u64,
    /// Requests past a gap the responder dropped although it has a
    /// reorder window (beyond it, or not placeable before the gap fills).
    /// Absent when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rx_ooo_dropped: u64,
    /// Selective acknowledgements sent (responder). Absent when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tx_sacks: u64,
    /// Packets resent by selective repeat, holes only (requester; also
    /// in `retransmitted_packets`). Absent when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub selective_retransmits: u64,
    /// Times a QP started avoiding one of its paths after a loss on it
    /// (`[nic.multipath]`). Absent when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub path_failovers: u64,
    /// Trimmed requests received, answered with a NAK at once under
    /// selective repeat (`[fabric.trim]`). Absent when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rx_trimmed: u64,
}

/// Depth of one egress queue over time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueSeries {
    /// Node name.
    pub node: String,
    /// Port number.
    pub port: u16,
    /// Priority, or `None` for all priorities summed.
    pub priority: Option<u8>,
    /// Sample period.
    pub interval_ps: u64,
    /// `(time_ps, bytes)` samples.
    pub samples: Vec<(u64, u64)>,
}

/// The delivery rate of one flow over time (`record.flow_rates`).
///
/// Sample `(t, bps)` is the flow's acknowledged payload bytes (as
/// [`FlowRecord::bytes_acked`] counts them) gained in `(t - interval, t]`,
/// times 8, divided by the interval: bits per second, rounded down.
/// Samples are taken at `interval, 2 x interval, ...` up to the end of the
/// run, for every flow (zero before it starts and after it finishes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowRateSeries {
    /// Flow id.
    pub id: u32,
    /// Name of the workload that made it.
    pub workload: String,
    /// Sample period.
    pub interval_ps: u64,
    /// `(time_ps, bits_per_second)` samples.
    pub samples: Vec<(u64, u64)>,
}

/// The held-off intervals of one port's transmitter for one priority: the
/// times the peer's PAUSE (XOFF) stopped it until XON or quanta expiry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PauseSeries {
    /// Node name of the paused transmitter.
    pub node: String,
    /// Port number on that node.
    pub port: u16,
    /// Node at the other end of the link (the one that sent PAUSE).
    pub peer: String,
    /// Priority held off.
    pub priority: u8,
    /// `(start_ps, end_ps)` intervals in time order; an interval still
    /// open when the run stopped ends at the end of the run.
    pub intervals: Vec<(u64, u64)>,
    /// Intervals of this priority not kept because the port's cap was
    /// reached (their time still counts in `rx_pause_duration_ps`).
    pub dropped_intervals: u64,
}

/// Wall-clock and memory figures of a run: printed, never written into
/// results (they differ between runs).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RunStats {
    /// Seconds spent building the model (ports, routes, QPs).
    pub setup_secs: f64,
    /// Seconds spent in the event loop.
    pub run_secs: f64,
    /// Events processed.
    pub events: u64,
    /// Events per wall-clock second of the event loop.
    pub events_per_sec: f64,
    /// Simulated seconds per wall-clock second.
    pub sim_secs_per_wall_sec: f64,
    /// Peak resident memory of the process (VmHWM), bytes, when the OS
    /// reports it.
    pub peak_rss_bytes: Option<u64>,
}

impl RunResult {
    /// The JSON text of this result (pretty, stable field order).
    pub fn to_json(&self) -> String {
        // Serialising plain structs of numbers and strings cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

/// Serde's test for counts left out of the file when 0.
fn is_zero(x: &u64) -> bool {
    *x == 0
}

/// Percentile by nearest rank of sorted `v` (`p` in 0..=100); 0 for empty.
pub fn percentile(sorted: &[u64], p: u32) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let n = sorted.len() as u64;
    let rank = (u64::from(p) * n).div_ceil(100).max(1);
    sorted[(rank - 1) as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_is_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50), 50);
        assert_eq!(percentile(&v, 99), 99);
        assert_eq!(percentile(&v, 100), 100);
        assert_eq!(percentile(&[7], 99), 7);
        assert_eq!(percentile(&[], 50), 0);
    }
}
