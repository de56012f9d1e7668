//! Flows that wait for other flows (`FlowSpec::after`) and the step time of
//! a ring all-reduce.

use roce::time::{Duration, Instant, Rate};
use sim::config::SimConfig;
use sim::results::{FlowRecord, RunResult};
use sim::run::{simulate, RunOptions};
use sim::topology::NodeId;
use sim::workload::generate::{ring_allreduce, FlowBuilder, FlowTemplate};
use sim::workload::FlowSpec;

use crate::support::{star, write};

/// Run `flows` on an `n`-host star at 100 Gbit/s, 1 us per link.
fn run_star(n: usize, flows: &[FlowSpec], opts: &RunOptions) -> RunResult {
    let (t, r) = star(n, Rate::from_gbps(100), Duration::from_us(1));
    simulate(&t, &r, &SimConfig::default(), flows, opts)
        .unwrap()
        .0
}

fn record(res: &RunResult, id: u32) -> &FlowRecord {
    &res.flows[id as usize]
}

#[test]
fn ring_allreduce_steps_run_in_sequence_near_the_bandwidth_bound() {
    // 8 hosts on one switch (non-blocking), 8 MiB per host: 14 steps of
    // one 1 MiB chunk (256 packets of 4096 B) per host.
    let n = 8u64;
    let size = 8 << 20;
    let hosts: Vec<NodeId> = (1..=n as u32).map(NodeId).collect();
    let mut b = FlowBuilder::new();
    let t = FlowTemplate {
        size,
        ..FlowTemplate::default()
    };
    ring_allreduce(&mut b, &hosts, &t);
    let groups = b.groups().to_vec();
    let flows = b.finish().unwrap();
    assert_eq!(flows.len() as u64, 2 * (n - 1) * n);
    let opts = RunOptions {
        groups,
        ..RunOptions::default()
    };
    let res = run_star(n as usize, &flows, &opts);
    assert_eq!(res.summary.flows_completed, flows.len() as u64);

    // Every flow is posted exactly when the last of its dependencies
    // finished (all starts are 0), never earlier.
    for f in &flows {
        let r = record(&res, f.id);
        let posted = r.posted_ps.expect("every flow posted");
        let ready = f
            .after
            .iter()
            .map(|&a| record(&res, a).finish_ps.expect("dependency finished"))
            .max()
            .unwrap_or(0);
        assert_eq!(posted, ready, "flow {} posted at {posted}", f.id);
        assert_eq!(r.fct_ps, Some(r.finish_ps.unwrap() - posted));
    }

    // One step: the chunk's wire bytes at line rate (62 B of headers per
    // packet, 16 B RETH once), then the last frame's second hop, the ACK's
    // two hops back, and four link delays.
    let g = &res.groups[0];
    assert_eq!(g.kind, "ring-allreduce");
    assert_eq!((g.flows, g.flows_completed), (112, 112));
    let chunk = size / n;
    let packets = chunk.div_ceil(4096);
    let wire = chunk + packets * 62 + 16;
    let ps_per_byte = 80; // 100 Gbit/s
    let ack = 62 + 4; // headers plus AETH
    let per_step =
        wire * ps_per_byte + (4096 + 62) * ps_per_byte + 2 * ack * ps_per_byte + 4 * 1_000_000;
    let expected = 2 * (n - 1) * per_step;
    // 10 ps per bit at 100 Gbit/s.
    let ideal = 2 * (n - 1) * size * 8 * 10 / n;
    assert_eq!(g.ideal_ps, Some(ideal));
    let step = g.step_time_ps.expect("all completed");
    assert_eq!(g.start_ps, Some(0));
    assert_eq!(g.finish_ps, Some(step));
    assert!(step > ideal, "step {step} below the bound {ideal}");
    let err = (step as f64 / expected as f64 - 1.0).abs();
    assert!(
        err < 0.01,
        "step {step} ps, expected {expected} ps (ideal {ideal} ps): off by {:.2} %",
        err * 100.0
    );

    // Same inputs, same bytes.
    assert_eq!(res.to_json(), run_star(n as usize, &flows, &opts).to_json());
}

#[test]
fn an_after_chain_across_hosts_runs_in_order() {
    // h0 -> h1, then h2 -> h3 (no earlier than 200 us), then h1 -> h0.
    let mut a = write(0, 1, 2, 1_000_000);
    a.start = Instant::ZERO + Duration::from_us(5);
    let mut b = write(1, 3, 4, 1_000_000);
    b.start = Instant::ZERO + Duration::from_us(200);
    b.after = vec![0];
    let mut c = write(2, 2, 1, 500_000);
    c.after = vec![1];
    let flows = vec![a, b, c];
    let res = run_star(4, &flows, &RunOptions::default());
    assert_eq!(res.summary.flows_completed, 3);
    let (ra, rb, rc) = (record(&res, 0), record(&res, 1), record(&res, 2));
    assert_eq!(ra.posted_ps, Some(5_000_000));
    // A finishes near 91 us, before B's own start: B waits for its start.
    let fa = ra.finish_ps.unwrap();
    assert!(fa < 200_000_000, "a finished at {fa}");
    assert_eq!(rb.posted_ps, Some(200_000_000));
    // C waits for B: posted the instant B finished, on another host.
    let fb = rb.finish_ps.unwrap();
    assert_eq!(rc.posted_ps, Some(fb));
    assert_eq!(rc.start_ps, 0, "the configured start stays");
    assert_eq!(rc.fct_ps, Some(rc.finish_ps.unwrap() - fb));
    // Each FCT counts from its post: about the stand-alone time.
    assert!((85_000_000..87_000_000).contains(&rb.fct_ps.unwrap()));

    // Ending the run before B completes: C is never posted and does not
    // count as completed.
    let short = RunOptions {
        duration: Some(Duration::from_us(250)),
        ..RunOptions::default()
    };
    let res = run_star(4, &flows, &short);
    assert_eq!(res.summary.flows_completed, 1);
    assert_eq!(record(&res, 1).finish_ps, None);
    assert_eq!(record(&res, 2).posted_ps, None);
    assert_eq!(record(&res, 2).fct_ps, None);
}

#[test]
fn a_dependency_on_a_later_flow_is_an_error() {
    let mut a = write(0, 1, 2, 1000);
    a.after = vec![1];
    let flows = vec![a, write(1, 2, 1, 1000)];
    let (t, r) = star(2, Rate::from_gbps(100), Duration::from_us(1));
    let e = simulate(
        &t,
        &r,
        &SimConfig::default(),
        &flows,
        &RunOptions::default(),
    );
    let msg = e.unwrap_err().to_string();
    assert!(msg.contains("flow 0: waits for flow 1"), "{msg}");
}

#[test]
fn flows_waiting_for_a_failed_flow_are_never_posted_and_the_run_ends() {
    // Every frame from h0 to the switch is lost: A exhausts its retries
    // and fails; B waits for A, C for B.
    let (t, r) = star(4, Rate::from_gbps(100), Duration::from_us(1));
    let mut cfg = SimConfig::default();
    cfg.nic.retry_cnt = 1;
    cfg.nic.ack_timeout = 4;
    cfg.faults.push(sim::config::FaultConfig {
        from: Some("h0".into()),
        to: Some("sw".into()),
        loss: None,
        drop_every: Some(1),
        ..Default::default()
    });
    let a = write(0, 1, 2, 10_000);
    let mut b = write(1, 3, 4, 10_000);
    b.after = vec![0];
    let mut c = write(2, 2, 3, 10_000);
    c.after = vec![1];
    let d = write(3, 4, 3, 10_000);
    let flows = vec![a, b, c, d];
    let res = simulate(&t, &r, &cfg, &flows, &RunOptions::default())
        .unwrap()
        .0;
    assert!(res.flows[0].failed, "{:?}", res.flows[0]);
    assert_eq!(res.summary.flows_completed, 1, "only d");
    assert_eq!(res.flows[1].posted_ps, None);
    assert_eq!(res.flows[2].posted_ps, None);
    assert_eq!(res.summary.flows_total, 4);
}

#[test]
fn queue_samples_stop_at_the_end_of_the_run() {
    let (t, r) = star(3, Rate::from_gbps(100), Duration::from_us(1));
    let mut cfg = SimConfig::default();
    cfg.record.interval = Duration::from_us(1);
    cfg.record.queues.push(sim::config::QueueSelector {
        node: "sw".into(),
        port: 0,
        priority: None,
    });
    let flows = vec![write(0, 2, 1, 200_000), write(1, 3, 1, 200_000)];
    let res = simulate(&t, &r, &cfg, &flows, &RunOptions::default())
        .unwrap()
        .0;
    let end = res.summary.sim_time_ps;
    let s = &res.queues[0].samples;
    let last = s.last().unwrap().0;
    assert!(last <= end, "sample at {last} after the end {end}");
    // One sample per microsecond from zero up to the end.
    assert_eq!(s.len() as u64, end / 1_000_000 + 1);
    assert!(s.iter().any(|&(_, b)| b > 0), "the incast queued");
}
