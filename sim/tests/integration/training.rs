//! Training jobs: step-time arithmetic against the collectives measured
//! alone, the overlap of bucketed gradient all-reduces with the
//! backward pass, and bad job descriptions.

use std::path::Path;

use sim::results::{RunResult, StepRecord};
use sim::run::simulate;
use sim::scenario;
use sim::topology::Routes;

/// Four 8-GPU servers, 8 x 400G NICs each, one leaf per rail: a job's
/// data-parallel groups (one GPU per server) each keep to their rail and
/// its tensor-parallel groups to NVLink, so nothing contends.
const FABRIC: &str = "[topology.defaults]\nrate = \"400Gbps\"\ndelay = \"1us\"\nmtu = 4096\n\
     [topology.gpu]\ngpus = 8\nnics = 8\n\
     [topology.generator]\nkind = \"gpu-leaf-spine\"\nservers = 4\nservers_per_leaf = 4\nspines = 2\n\
     [nic]\nmtu = 4096\n";

fn run(workloads: &str) -> RunResult {
    crate::support::run_text(&format!("name = \"t\"\nseed = 1\n{FABRIC}{workloads}"))
}

/// The time of one collective measured alone: nccl-tests of `bytes` on
/// `ranks` (its `servers`/`gpus`/`channels` keys), picoseconds.
fn alone(ranks: &str, bytes: u64) -> u64 {
    let r = run(&format!(
        "[[workload]]\nkind = \"nccl-tests\"\ncollective = \"all_reduce\"\nmin_bytes = {bytes}\n{ranks}\n"
    ));
    r.groups[0].step_time_ps.expect("the collective completed")
}

/// The step the overlap rule gives for `layers` layers of forward and
/// backward compute `f`, `b` (per step), a tensor-parallel all-reduce
/// of `tp` ps after each half layer, `buckets` gradient all-reduces of
/// `ar` ps each on their own stream, and optimizer `o`: returns the step
/// time and each bucket's exposed time.
fn closed_form(
    (layers, buckets): (u64, u64),
    (f, b, o): (u64, u64, u64),
    (tp, ar): (u64, u64),
) -> (u64, Vec<u64>) {
    let mut t = 0;
    for _ in 0..layers {
        t += 2 * (f / (2 * layers) + tp);
    }
    let mut ends = Vec::new();
    let mut dp_end = 0;
    for idx in 1..=layers {
        t += 2 * (b / (2 * layers) + tp);
        if idx * buckets / layers != (idx - 1) * buckets / layers {
            let start = t.max(dp_end);
            dp_end = start + ar;
            ends.push(dp_end);
        }
    }
    let backward_end = t;
    let step = t.max(dp_end) + o;
    // Only what runs past the backward is exposed: the tensor-parallel
    // all-reduces cover nothing of a bucket's (they hold the compute
    // stream, and a bucket never waits on them past its start).
    let mut covered = backward_end;
    let exposed = ends
        .iter()
        .map(|&e| {
            let x = e.saturating_sub(covered);
            covered = covered.max(e);
            x
        })
        .collect();
    (step, exposed)
}

fn job(extra: &str) -> String {
    format!(
        "[[workload]]\nkind = \"training\"\nname = \"job\"\nsteps = 2\nlayers = 4\ntp = 8\n\
         tp_bytes = \"1MiB\"\ngrad_bytes = \"64MiB\"\nbuckets = 4\nchannels = 2\n{extra}"
    )
}

fn within(a: u64, b: u64, tol: f64) -> bool {
    (a as f64 - b as f64).abs() <= tol * b as f64
}

/// With nothing contending, a step takes its compute plus the exposed
/// part of each collective as the overlap rule says: the closed form
/// built from the collectives' times measured alone (each within 1 %),
/// and the record adds up (step = compute + exposed). With enough
/// backward compute the bucketed all-reduce hides behind it, all but
/// the last bucket; when the compute shrinks, the buckets queue behind
/// each other and most of their time is exposed.
#[test]
fn step_time_is_compute_plus_what_the_overlap_rule_exposes() {
    let tp = alone("servers = [0]\ngpus = 8\nchannels = 2", 1 << 20);
    let ar = alone("gpus = 1\nchannels = 2", 16 << 20);
    let ms = 1_000_000_000u64;
    // Enough compute: each layer's backward (1/4 of it) lasts twice a
    // bucket's all-reduce.
    let big_b = 8 * ar;
    let cases = [
        ("hidden", 2 * ms, big_b, ms / 2),
        ("exposed", 2 * ms, ar / 2, ms / 2),
    ];
    let mut exposed_share = Vec::new();
    for (name, f, b, o) in cases {
        let r = run(&job(&format!(
            "forward = \"{}ns\"\nbackward = \"{}ns\"\noptimizer = \"{}ns\"\n",
            f / 1000,
            b / 1000,
            o / 1000
        )));
        let (f, b, o) = (f / 1000 * 1000, b / 1000 * 1000, o / 1000 * 1000);
        let (want, want_exposed) = closed_form((4, 4), (f, b, o), (tp, ar));
        let jobrec = &r.training[0];
        assert_eq!(jobrec.steps.len(), 2);
        for s in &jobrec.steps {
            let got = s.time_ps.expect("the step completed");
            assert!(
                within(got, want, 0.01),
                "{name} step {}: {got} ps against the closed form's {want}",
                s.step
            );
            // The record adds up.
            // The phases split the durations in whole picoseconds.
            assert!(
                s.compute_ps.abs_diff(f + b + o) <= 16,
                "{name}: {}",
                s.compute_ps
            );
            assert_eq!(
                s.compute_ps + s.exposed_ps,
                got,
                "{name}: compute {} + exposed {}",
                s.compute_ps,
                s.exposed_ps
            );
            let buckets = bucket_exposure(s);
            assert_eq!(buckets.len(), 4);
            for (k, (&g, &w)) in buckets.iter().zip(&want_exposed).enumerate() {
                assert!(
                    g.abs_diff(w) <= ar / 50,
                    "{name} bucket {k}: exposed {g} ps against {w} (all-reduce {ar})"
                );
            }
        }
        let s = &jobrec.steps[1];
        exposed_share.push(bucket_exposure(s).iter().sum::<u64>() as f64 / (4 * ar) as f64);
        if name == "hidden" {
            // All but the last bucket hide; the last is the critical part.
            assert_eq!(
                s.critical.as_deref(),
                Some("dp all_reduce bucket 3"),
                "{s:?}"
            );
        }
    }
    // Hidden: one bucket of four shows; exposed: well over two.
    assert!(
        exposed_share[0] < 0.3 && exposed_share[1] > 0.6,
        "{exposed_share:?}"
    );
}

fn bucket_exposure(s: &StepRecord) -> Vec<u64> {
    s.collectives
        .iter()
        .filter(|c| c.label.starts_with("dp all_reduce bucket"))
        .map(|c| c.exposed_ps)
        .collect()
}

/// A step's compute from FLOPs: the forward a third of `step_flops /
/// gpu_flops`, the backward two thirds.
#[test]
fn compute_follows_from_flops_and_the_gpus_rate() {
    let r = run(&job("step_flops = 3e12\ngpu_flops = 1e15\n"));
    // 3 ms: forward 1 ms, backward 2 ms, per step.
    assert_eq!(r.training[0].steps[0].compute_ps, 3_000_000_000);
}

/// Bad jobs name the key: tensor parallelism that does not divide the
/// GPUs, more buckets than layers, servers held by an earlier job, both
/// durations and FLOPs, pipeline stages that do not divide the servers
/// or the layers or send nothing, a plain topology.
#[test]
fn bad_jobs_name_the_key() {
    let err = |w: &str| {
        let text = format!("name = \"t\"\n{FABRIC}{w}");
        scenario::from_str(Path::new("t.toml"), &text).unwrap_err()
    };
    let base = "[[workload]]\nkind = \"training\"\nforward = \"1ms\"\nbackward = \"2ms\"\n";
    for (w, key, says) in [
        ("tp = 3", "workload[0].tp", "divisor"),
        ("layers = 2\nbuckets = 3", "workload[0].buckets", "at most"),
        (
            "step_flops = 1e12\ngpu_flops = 1e15",
            "workload[0].step_flops",
            "not both",
        ),
        ("servers = 5", "workload[0].servers", "free"),
        (
            "pp = 3\nlayers = 3\npp_bytes = \"1MiB\"",
            "workload[0].pp",
            "divisor",
        ),
        (
            "pp = 2\nlayers = 2",
            "workload[0].pp_bytes",
            "next pipeline stage",
        ),
        (
            "pp = 4\nlayers = 2\npp_bytes = \"1MiB\"",
            "workload[0].pp",
            "at most",
        ),
        ("pp_bytes = \"1MiB\"", "workload[0].pp_bytes", "pp of 2"),
        (
            "pp = 2\nlayers = 4\nbuckets = 3\npp_bytes = \"1MiB\"",
            "workload[0].buckets",
            "of a stage",
        ),
        ("microbatches = 0", "workload[0].microbatches", "at least 1"),
        (
            "placement = \"spread\"\nservers = [0, 1]",
            "workload[0].placement",
            "count",
        ),
    ] {
        let e = err(&format!("{base}{w}\n"));
        assert_eq!(e.key.as_deref(), Some(key), "{w}: {e}");
        assert!(e.to_string().contains(says), "{w}: {e}");
        assert!(e.to_string().contains("t.toml:"), "{w}: {e}");
    }
    // A second job cannot take the first one's servers.
    let two = format!("{base}servers = [0, 1]\n{base}servers = [1, 2]\n");
    let e = err(&two);
    assert_eq!(e.key.as_deref(), Some("workload[1].servers"), "{e}");
    assert!(e.to_string().contains("earlier training job"), "{e}");
    let plain = format!(
        "name = \"t\"\n[topology.generator]\nkind = \"leaf-spine\"\nleaves = 1\nspines = 1\nhosts_per_leaf = 4\n{base}"
    );
    let e = scenario::from_str(Path::new("t.toml"), &plain).unwrap_err();
    assert!(e.to_string().contains("GPU servers"), "{e}");
}

/// A pipeline of `p` stages with `m` microbatches in the
/// one-forward-one-backward order: with transfers between stages small
/// beside the compute, a step takes `(m + p - 1) / m` of a rank's
/// compute plus the optimizer (the textbook bubble, `(p - 1) / m` of
/// the compute); the record adds up to compute + exposed + bubble, the
/// bubble shrinks as microbatches grow, and the wait for the gradients
/// on the wire (not the bubble) is what the step exposes.
#[test]
fn a_pipeline_step_pays_the_one_f_one_b_bubble() {
    let (f, b, o) = (4_000_000_000u64, 8_000_000_000u64, 500_000_000u64);
    let p = 4u64;
    let mut bubbles = Vec::new();
    for m in [2u64, 8] {
        let r = run(&format!(
            "[[workload]]\nkind = \"training\"\nname = \"job\"\nsteps = 2\nlayers = 8\ntp = 8\n\
             pp = {p}\nmicrobatches = {m}\npp_bytes = \"64KiB\"\n\
             forward = \"4ms\"\nbackward = \"8ms\"\noptimizer = \"0.5ms\"\n"
        ));
        let want = (m + p - 1) * (f + b) / m + o;
        let want_bubble = (p - 1) * (f + b) / m;
        for s in &r.training[0].steps {
            let got = s.time_ps.expect("the step completed");
            assert!(within(got, want, 0.01), "m = {m}: {got} ps against {want}");
            assert_eq!(s.compute_ps, f + b + o, "m = {m}");
            assert_eq!(
                s.compute_ps + s.exposed_ps + s.bubble_ps,
                got,
                "m = {m}: {s:?}"
            );
            assert!(
                within(s.bubble_ps, want_bubble, 0.03),
                "m = {m}: bubble {} ps against {want_bubble}",
                s.bubble_ps
            );
            // What is exposed is the stages' transfers, a few
            // microseconds each.
            assert!(
                s.exposed_ps > 0 && s.exposed_ps < want / 100,
                "m = {m}: {s:?}"
            );
            let top = s.critical.as_deref().unwrap_or_default();
            assert!(top.contains("pp gradients 1->0"), "m = {m}: {top}");
        }
        bubbles.push(r.training[0].steps[1].bubble_ps);
    }
    assert!(bubbles[1] * 3 < bubbles[0], "{bubbles:?}");
}

/// Runs every variant's jobs together and each alone: the together
/// result with each job's slowdown filled (as `rocelab run` does).
fn run_jobs(text: &str) -> RunResult {
    let s = scenario::from_str(Path::new("t.toml"), text).unwrap_or_else(|e| panic!("{e}"));
    let v = &s.variants[0];
    let topo = &s.topologies[v.topology];
    let routes = Routes::compute(topo);
    let go = |v: &scenario::Variant| {
        simulate(topo, &routes, &v.config, &v.flows, &v.run_options())
            .unwrap()
            .0
    };
    let mut r = go(v);
    let jobs = v.training_jobs();
    assert_eq!(jobs.len(), 2);
    for w in jobs {
        let alone = go(&v.alone(w));
        let name = &v.workloads[w as usize];
        let a = alone.training.iter().find(|x| x.job == *name).unwrap();
        let t = r.training.iter_mut().find(|x| x.job == *name).unwrap();
        sim::workload::training::set_alone(t, a);
    }
    r
}

/// Two data-parallel jobs of two servers each on a leaf-spine whose
/// leaves (one per rail and pair of servers) have one uplink as fast as
/// a NIC. Placed on their own leaves, their all-reduces never leave them
/// and neither job slows (within 1 %), with no shared link. Placed
/// across the leaves, each job's ring crosses the uplink the other's
/// crosses too: the fair-share estimate is that each gets half of it, so
/// the communication part of a step (step alone less compute) takes
/// twice as long; each job's slowdown is within 10 % of that, the
/// shared links are named, and each step's exposed all-reduce is held
/// back by congestion on a shared uplink.
#[test]
fn two_jobs_share_a_link_fairly_and_disjoint_ones_do_not_meet() {
    let fabric = "[topology.defaults]\nrate = \"400Gbps\"\ndelay = \"1us\"\nmtu = 4096\n\
         [topology.gpu]\ngpus = 8\nnics = 8\n\
         [topology.generator]\nkind = \"gpu-leaf-spine\"\nservers = 4\nservers_per_leaf = 2\nspines = 1\n\
         [nic]\nmtu = 4096\n";
    let jobs = |a: &str, b: &str| {
        let job = |name: &str, servers: &str| {
            format!(
                "[[workload]]\nkind = \"training\"\nname = \"{name}\"\nservers = {servers}\nsteps = 2\ntp = 8\n\
                 forward = \"10us\"\nbackward = \"20us\"\ngrad_bytes = \"32MiB\"\nchannels = 2\n"
            )
        };
        format!(
            "name = \"t\"\nseed = 1\n{fabric}{}{}",
            job("a", a),
            job("b", b)
        )
    };
    let r = run_jobs(&jobs("[0, 1]", "[2, 3]"));
    for j in &r.training {
        let s = j.slowdown.unwrap();
        assert!((s - 1.0).abs() < 0.01, "{}: slowdown {s}", j.job);
        assert!(j.shared_links.is_empty(), "{:?}", j.shared_links);
    }
    let r = run_jobs(&jobs("[0, 2]", "[1, 3]"));
    let compute = 30_000_000u64;
    for j in &r.training {
        let alone = j.alone_mean_step_ps.unwrap();
        let fair = compute + 2 * (alone - compute);
        let want = fair as f64 / alone as f64;
        let got = j.slowdown.unwrap();
        assert!(
            (got - want).abs() / want < 0.10,
            "{}: slowdown {got:.3} against the fair share's {want:.3}",
            j.job
        );
        assert!(
            j.shared_links.iter().any(|l| l.contains("-> spine0")),
            "{:?}",
            j.shared_links
        );
        // What held each step back: the uplink both jobs cross, counted
        // with the other job's bytes (not the PAUSE it pushes back to the
        // NICs, which is the symptom).
        for s in &j.steps {
            let c = s
                .collectives
                .iter()
                .find(|c| Some(&c.label) == s.critical.as_ref())
                .unwrap();
            assert_eq!(c.limit.as_deref(), Some("congestion"), "{c:?}");
            assert!(
                c.bottleneck.as_deref().unwrap_or("").ends_with("-> spine0"),
                "{c:?}"
            );
        }
    }
}
