//! Scenario files: the repository's files load, variants merge, and bad
//! files name file, key and expectation.

use std::path::{Path, PathBuf};

use roce::time::Size;
use sim::config::PfcThreshold;
use sim::scenario::{self, check_file, CheckedFile};
use sim::topology::NodeId;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A scratch directory for this test, holding a copy of a small topology.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rocelab-scn-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(repo().join("topologies/star-4.toml"), dir.join("star.toml")).unwrap();
    dir
}

fn toml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            toml_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "toml") {
            out.push(p);
        }
    }
    out.sort();
}

#[test]
fn every_scenario_and_topology_in_the_repository_checks() {
    let mut files = Vec::new();
    toml_files(&repo().join("scenarios"), &mut files);
    toml_files(&repo().join("topologies"), &mut files);
    assert!(files.len() >= 15, "{files:?}");
    for f in &files {
        match check_file(f) {
            Ok(CheckedFile::Scenario(s)) => {
                assert!(!s.variants.is_empty());
                assert!(
                    s.variants.iter().all(|v| !v.flows.is_empty()),
                    "{}",
                    f.display()
                );
            }
            Ok(CheckedFile::Topology(t)) => assert!(t.host_count() >= 2),
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn lesson_variants_differ_only_in_pfc() {
    let s =
        scenario::load(&repo().join("scenarios/lessons/01-incast-lossless-vs-lossy.toml")).unwrap();
    assert_eq!(s.name, "incast-lossless-vs-lossy");
    let names: Vec<&str> = s.variants.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["lossless", "lossy"]);
    let (a, b) = (&s.variants[0], &s.variants[1]);
    assert!(a.config.fabric.pfc.enabled && !b.config.fabric.pfc.enabled);
    assert_eq!(a.flows, b.flows);
    assert_eq!(a.config.nic, b.config.nic);
    assert_eq!(a.config.fabric.buffer, b.config.fabric.buffer);
    assert_eq!(a.flows.len(), 16);
    let h0 = s.topologies[0].find("h0").unwrap();
    assert!(a.flows.iter().all(|f| f.dst == h0 && f.size == 1_000_000));
}

#[test]
fn benchmark_scenarios_follow_the_reference_setup() {
    for k in [8u32, 16] {
        let hosts = k * k * k / 4;
        let inc =
            scenario::load(&repo().join(format!("scenarios/bench/fat-tree-k{k}-incast.toml")))
                .unwrap();
        let perm =
            scenario::load(&repo().join(format!("scenarios/bench/fat-tree-k{k}-permutation.toml")))
                .unwrap();
        for s in [&inc, &perm] {
            let t = &s.topologies[0];
            assert_eq!(t.host_count() as u32, hosts);
            assert!(t
                .links
                .iter()
                .all(|l| l.rate.bps() == 100_000_000_000 && l.delay.as_ps() == 1_000_000));
            let v = &s.variants[0];
            assert_eq!(
                v.config.fabric.pfc.threshold,
                PfcThreshold::Static {
                    xoff: Size::from_bytes(320_000),
                    xon: Size::from_bytes(200_000)
                }
            );
            assert!(v.config.fabric.ecn.is_empty());
            assert!(v
                .flows
                .iter()
                .all(|f| f.size == 2_000_000 && f.start.as_ps() == 0));
        }
        let v = &inc.variants[0];
        assert_eq!(v.flows.len() as u32, hosts - 1);
        assert!(v.flows.iter().all(|f| f.dst == NodeId(0)));
        let v = &perm.variants[0];
        assert_eq!(v.flows.len() as u32, hosts);
        assert!(v.flows.iter().all(|f| f.src != f.dst));
        // Seed 1, every time.
        let again =
            scenario::load(&repo().join(format!("scenarios/bench/fat-tree-k{k}-permutation.toml")))
                .unwrap();
        assert_eq!(again.variants[0].flows, v.flows);
    }
}

#[test]
fn bad_scenarios_name_file_key_and_expectation() {
    let dir = scratch("bad");
    let base = "topology = \"star.toml\"\n";
    let to_a = "[[workload]]\nkind = \"incast\"\nreceiver = \"a\"\nsize = \"1MB\"\n";
    let incast = "[[workload]]\nkind = \"incast\"\nreceiver = \"h0\"\nsize = \"1MB\"\n";
    let cases: Vec<(String, &str, &str, Option<usize>)> = vec![
        // (file text, key, words in the message, line)
        (format!("{base}[fabric.pfc]\nenabeld = true\n{incast}"), "fabric.pfc.enabeld", "expected one of", Some(3)),
        (format!("{base}[fabric.buffer]\nsize = \"lots\"\n{incast}"), "fabric.buffer.size", "expected", Some(3)),
        (format!("{base}seed = \"one\"\n{incast}"), "seed", "expected", Some(2)),
        (format!("{base}[[workload]]\nkind = \"incats\"\n"), "workload[0].kind", "expected one of", Some(3)),
        (format!("{base}[[workload]]\nkind = \"incast\"\nreceiver = \"h9\"\nsize = \"1MB\"\n"), "workload[0].receiver", "expected the name of a host", None),
        (format!("{base}[[workload]]\nkind = \"incast\"\nreceiver = \"sw0\"\nsize = \"1MB\"\n"), "workload[0].receiver", "expected a host", None),
        (format!("{base}[[workload]]\nkind = \"incast\"\nreceiver = 0\n"), "workload[0].size", "expected the bytes", None),
        (format!("{base}[[workload]]\nkind = \"permutation\"\nsize = \"1MB\"\nload = 0.5\n"), "workload[0].load", "not used by kind", None),
        (format!("{base}[[workload]]\nkind = \"poisson\"\ncdf = \"nope\"\nload = 0.5\nwindow = \"1ms\"\n"), "workload[0].cdf", "expected one of", None),
        (format!("{base}[[workload]]\nkind = \"poisson\"\ncdf = \"websearch\"\nload = 1.5\nwindow = \"1ms\"\n"), "workload[0].load", "expected a fraction", None),
        (format!("{base}[[faults]]\nfrom = \"h0\"\nto = \"h1\"\nloss = 0.1\n{incast}"), "faults[0].to", "expected the two ends of a link", None),
        (format!("{base}[[faults]]\nfrom = \"h0\"\nto = \"sw0\"\nloss = 2.0\n{incast}"), "faults[0].loss", "probability", Some(2)),
        (format!("{base}[fabric.pfc]\nthreshold = {{ mode = \"static\", xoff = \"100KB\", xon = \"200KB\" }}\n{incast}"), "fabric.pfc.threshold.xon", "xon <= xoff", None),
        (format!("{base}[record]\nqueues = [{{ node = \"sw0\", port = 9 }}]\n{incast}"), "record.queues[0].port", "has ports", None),
        (format!("topology = \"missing.toml\"\n{incast}"), "topology", "does not exist", None),
        (format!("topology = 5\n{incast}"), "topology", "expected a file path", None),
        (format!("{base}{incast}[[variant]]\nname = \"x\"\nfabric.pfc.enabled = \"no\"\n"), "variant[0].fabric.pfc.enabled", "expected a boolean", Some(6)),
        (format!("{base}{incast}[[variant]]\nfabric.pfc.enabled = false\n"), "variant[0].name", "expected a name", None),
        (format!("{base}{incast}[[variant]]\nname = \"a\"\n[[variant]]\nname = \"a\"\n"), "variant[1].name", "unique", None),
        (base.to_string(), "workload", "at least one", None),
        (format!("{base}{incast}name = \" \"\n"), "workload[0].name", "empty", None),
        (format!("{base}{incast}name = \"a\"\n{incast}name = \"a\"\n"), "workload[1].name", "also the name of workload[0]", None),
        (format!("{base}{incast}[[workload]]\nkind = \"incast\"\nreceiver = \"h1\"\nsize = \"1MB\"\nname = \"incast-0\"\n"), "workload[1].name", "expected distinct names", None),
        (format!("{base}{incast}cc = {{ algorithm = \"dcqcn\", dcqcn = {{ g = 2.0 }} }}\n"), "workload[0].cc.dcqcn.g", "expected a gain in (0, 1]", Some(6)),
        (format!("{base}{incast}cc = {{ algoritm = \"none\" }}\n"), "workload[0].cc.algoritm", "expected one of", Some(6)),
        (format!("{base}[nic.cc.dcqcn]\ninitial_alpha = -1.0\n{incast}"), "nic.cc.dcqcn.initial_alpha", "expected a value in [0, 1]", Some(3)),
        (format!("{base}[record]\nflow_rates = true\nflow_rate_interval = \"0us\"\n{incast}"), "record.flow_rate_interval", "positive duration", Some(4)),
        (format!("{base}[record]\nflow_rates = 1\n{incast}"), "record.flow_rates", "expected a boolean", Some(3)),
        // What `run` would reject, `validate` rejects, at the key.
        (format!("{base}duration = \"1e30s\"\n{incast}"), "duration", "expected a number with a unit", Some(2)),
        (format!("{base}duration = \"0s\"\n{incast}"), "duration", "positive stop time", Some(2)),
        (format!("{base}[[workload]]\nkind = \"incast\"\nreceiver = \"h0\"\nsize = \"99999999999999999999TB\"\n"), "workload[0].size", "invalid size", Some(5)),
        (format!("{base}[fabric.pfc]\nheadroom = {{ mode = \"fixed\", size = \"64MB\" }}\n{incast}"), "fabric.buffer.size", "headroom", Some(2)),
        (format!("{base}[fabric.buffer]\nsize = \"100KB\"\n{incast}"), "fabric.buffer.size", "expected less than the buffer", Some(3)),
        (format!("{base}[fabric.pfc]\npriorities = [9]\n{incast}"), "fabric.pfc.priorities", "expected 0-7", Some(3)),
        (format!("topology = {{ hosts = [\"a\", \"b\"], switches = [\"s\"], defaults = {{ rate = \"100Gbps\", delay = \"10000000s\" }}, link = [{{ a = \"a\", b = \"s\" }}, {{ a = \"b\", b = \"s\" }}] }}\n{to_a}"), "topology", "add up past", Some(1)),
        (format!("topology = {{ hosts = [\"a\", \"b\"], switches = [\"s\", \"t\"], link = [{{ a = \"a\", b = \"s\" }}, {{ a = \"b\", b = \"t\" }}] }}\n{to_a}"), "topology.link", "cannot reach", Some(1)),
    ];
    for (i, (text, key, words, line)) in cases.iter().enumerate() {
        let path = dir.join(format!("case{i}.toml"));
        std::fs::write(&path, text).unwrap();
        let e = scenario::load(&path).unwrap_err();
        let shown = e.to_string();
        assert_eq!(e.key.as_deref(), Some(*key), "case {i}: {shown}");
        assert!(shown.contains(words), "case {i}: {shown}");
        assert!(
            shown.starts_with(&path.display().to_string()),
            "case {i}: {shown}"
        );
        if let Some(line) = line {
            assert_eq!(e.position.map(|p| p.0), Some(*line), "case {i}: {shown}");
        }
    }
    // A TOML syntax error is reported with its position too.
    let path = dir.join("syntax.toml");
    std::fs::write(&path, "topology = \"star.toml\"\nseed = = 1\n").unwrap();
    let e = check_file(&path).unwrap_err();
    assert_eq!(e.position.map(|p| p.0), Some(2), "{e}");
}

#[test]
fn variants_override_any_setting_and_workloads_have_own_streams() {
    let dir = scratch("variants");
    let path = dir.join("v.toml");
    std::fs::write(
        &path,
        r#"
topology = "star.toml"
seed = 5
[nic]
qps_per_pair = 2
[[workload]]
kind = "permutation"
size = "64KB"
[[workload]]
kind = "perftest"
src = 0
dst = "h3"
size = "10KB"
op = "read"
[[variant]]
name = "one-qp"
nic.qps_per_pair = 1
[[variant]]
name = "other-seed"
seed = 6
"#,
    )
    .unwrap();
    let s = scenario::load(&path).unwrap();
    let (a, b) = (&s.variants[0], &s.variants[1]);
    assert_eq!(a.flows.len(), 4 + 1);
    assert_eq!(b.flows.len(), 2 * 4 + 2);
    assert_eq!(b.seed, 6);
    assert_eq!(s.topologies.len(), 1, "one shared topology");
    // Removing the perftest workload leaves the permutation unchanged
    // (each workload has its own random stream).
    let path2 = dir.join("v2.toml");
    std::fs::write(&path2, "topology = \"star.toml\"\nseed = 5\n[[workload]]\nkind = \"permutation\"\nsize = \"64KB\"\n").unwrap();
    let s2 = scenario::load(&path2).unwrap();
    let pairs = |v: &scenario::Variant| -> Vec<(NodeId, NodeId)> {
        v.flows
            .iter()
            .filter(|f| f.size == 64_000)
            .map(|f| (f.src, f.dst))
            .collect()
    };
    assert_eq!(pairs(a), pairs(&s2.variants[0]));
}

#[test]
fn command_line_changes_set_any_key_over_every_variant() {
    use sim::config::CcAlgorithm;
    use sim::scenario::Overrides;
    let dir = scratch("overrides");
    let path = dir.join("o.toml");
    std::fs::write(
        &path,
        "topology = \"star.toml\"\nseed = 4\n[[workload]]\nkind = \"incast\"\nreceiver = \"h0\"\nsize = \"1MB\"\n\
         [[variant]]\nname = \"a\"\n[[variant]]\nname = \"b\"\nfabric.pfc.enabled = true\nseed = 5\n",
    )
    .unwrap();
    let set = |args: &[&str]| Overrides {
        set: args
            .iter()
            .map(|a| Overrides::parse_set(a).unwrap())
            .collect(),
        variant: None,
    };
    // Bare words are strings, TOML values are values, indexes reach arrays.
    let ov = set(&[
        "fabric.pfc.enabled=false",
        "nic.cc.algorithm=dcqcn",
        "seed=11",
        "workload[0].size=\"2MB\"",
        "fabric.pfc.priorities=[3, 4]",
    ]);
    let s = scenario::load_with(&path, &ov).unwrap();
    assert_eq!(s.seed, 11);
    assert_eq!(s.variants.len(), 2);
    for v in &s.variants {
        assert!(
            !v.config.fabric.pfc.enabled,
            "{}: the command line wins",
            v.name
        );
        assert_eq!(v.config.nic.cc.algorithm, CcAlgorithm::Dcqcn);
        assert_eq!(v.seed, 11, "{}", v.name);
        assert_eq!(v.config.fabric.pfc.priorities, [3, 4]);
        assert!(v.flows.iter().all(|f| f.size == 2_000_000));
    }
    // Only one variant.
    let only = Overrides {
        variant: Some("b".into()),
        ..Overrides::default()
    };
    let s = scenario::load_with(&path, &only).unwrap();
    assert_eq!(s.variants.len(), 1);
    assert_eq!((s.variants[0].name.as_str(), s.variants[0].seed), ("b", 5));
    // Mistakes name the key and say they came from the command line.
    for (args, key, words) in [
        (
            &["fabric.pfc.quanta=\"lots\""][..],
            "fabric.pfc.quanta",
            "command line",
        ),
        (
            &["fabric.pfc.nope=1"][..],
            "fabric.pfc.nope",
            "unknown field",
        ),
        (
            &["workload[3].size=1"][..],
            "workload[3].size",
            "has 1 elements",
        ),
        (&["seed.x=1"][..], "seed.x", "not a table"),
    ] {
        let e = scenario::load_with(&path, &set(args)).unwrap_err();
        assert_eq!(e.key.as_deref(), Some(key), "{e}");
        assert!(e.to_string().contains(words), "{e}");
    }
    let e = scenario::load_with(
        &path,
        &Overrides {
            variant: Some("c".into()),
            ..Overrides::default()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("\"c\": no such variant"), "{e}");
    for bad in ["noequals", "a..b=1", "a[x]=1", "=1"] {
        assert!(Overrides::parse_set(bad).is_err(), "{bad}");
    }
}

#[test]
fn every_flow_record_carries_its_workload_name() {
    use sim::run::{simulate, RunOptions};
    use sim::topology::Routes;
    let dir = scratch("names");
    let path = dir.join("n.toml");
    std::fs::write(
        &path,
        "topology = \"star.toml\"\n\
         [[workload]]\nkind = \"incast\"\nreceiver = \"h0\"\nsenders = [\"h1\", \"h2\"]\nsize = \"20KB\"\nname = \"fan-in\"\n\
         [[workload]]\nkind = \"incast\"\nreceiver = \"h3\"\nsenders = [\"h2\"]\nsize = \"10KB\"\nstart = \"0s\"\n",
    )
    .unwrap();
    let s = scenario::load(&path).unwrap();
    let v = &s.variants[0];
    assert_eq!(v.workloads, ["fan-in", "incast-1"]);
    let topo = &s.topologies[v.topology];
    let opts = RunOptions {
        workloads: v.workloads.clone(),
        groups: v.groups.clone(),
        ..RunOptions::default()
    };
    let res = simulate(topo, &Routes::compute(topo), &v.config, &v.flows, &opts)
        .unwrap()
        .0;
    assert_eq!(res.flows.len(), 3);
    for f in &res.flows {
        let want = if f.dst == "h0" { "fan-in" } else { "incast-1" };
        assert_eq!(f.workload, want, "{f:?}");
    }
}
