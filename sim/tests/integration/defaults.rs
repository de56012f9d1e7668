//! docs/SCENARIO-FILES.md's tables of the model's defaults and of the
//! DCQCN presets agree with the code: each row's value, set as a user
//! would set it, changes nothing, and every `none` row is unset by
//! default. The tables are read from the doc, so it cannot drift.

use std::path::{Path, PathBuf};

use roce::cc::{DcqcnOverrides, DcqcnParams};
use roce::time::Rate;
use sim::config::{CcAlgorithm, DcqcnPreset, SimConfig};
use sim::scenario::{self, Overrides};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The rows (cells, backticks kept) of the table under `heading` in the doc.
fn table(heading: &str) -> Vec<Vec<String>> {
    let doc = std::fs::read_to_string(repo().join("docs/SCENARIO-FILES.md")).unwrap();
    let at = doc
        .find(heading)
        .unwrap_or_else(|| panic!("docs/SCENARIO-FILES.md has no {heading:?}"));
    let rows: Vec<Vec<String>> = doc[at..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| {
            let inner = l.trim().trim_start_matches('|').trim_end_matches('|');
            inner.split(" | ").map(|c| c.trim().to_string()).collect()
        })
        .collect();
    assert!(rows.len() > 5, "{heading}: {rows:?}");
    rows
}

/// The text between the first pair of backticks.
fn code(cell: &str) -> Option<&str> {
    let rest = cell.strip_prefix('`')?;
    Some(&rest[..rest.find('`')?])
}

/// The value under dotted `key` in `v`.
fn lookup<'a>(v: &'a toml::Value, key: &str) -> Option<&'a toml::Value> {
    key.split('.').try_fold(v, |v, k| v.get(k))
}

#[test]
fn the_docs_table_of_defaults_is_what_the_code_does() {
    let dir = std::env::temp_dir().join(format!("rocelab-defaults-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(repo().join("topologies/star-4.toml"), dir.join("star.toml")).unwrap();
    let path = dir.join("s.toml");
    let text = "topology = \"star.toml\"\n[[workload]]\nkind = \"incast\"\nreceiver = \"h0\"\nsize = \"1MB\"\n";
    std::fs::write(&path, text).unwrap();
    let base = scenario::from_str(&path, text).unwrap().variants[0]
        .config
        .clone();
    // What the loader adds per workload aside, it is the default.
    let mut bare = base.clone();
    bare.workload_cc.clear();
    assert_eq!(bare, SimConfig::default());
    let defaults = toml::Value::try_from(SimConfig::default()).unwrap();
    let rows = table("### The model's settings and their defaults");
    let mut seen = Vec::new();
    for row in &rows {
        let key = code(&row[0]).unwrap_or_else(|| panic!("{row:?}"));
        seen.push(key.split('.').next().unwrap().to_string());
        if row[1].starts_with("none") {
            assert!(
                lookup(&defaults, key).is_none(),
                "{key} is documented as none, but is {:?} by default",
                lookup(&defaults, key)
            );
            continue;
        }
        let value = code(&row[1]).unwrap_or_else(|| panic!("{key}: {row:?}"));
        let ov = Overrides {
            set: vec![Overrides::parse_set(&format!("{key}={value}")).unwrap()],
            variant: None,
        };
        let set = scenario::from_str_with(&path, text, &ov)
            .unwrap_or_else(|e| panic!("{key} = {value}: {e}"));
        assert_eq!(
            set.variants[0].config, base,
            "docs/SCENARIO-FILES.md says {key} is {value} by default; it is not"
        );
    }
    // Every setting of the model is in the table.
    let mut leaves = Vec::new();
    leaf_keys(&defaults, "", &mut leaves);
    for leaf in leaves {
        assert!(
            rows.iter()
                .any(|r| code(&r[0])
                    .is_some_and(|k| leaf == k || leaf.starts_with(&format!("{k}.")))),
            "{leaf} has a default but no row in docs/SCENARIO-FILES.md"
        );
    }
}

/// Dotted keys of every value below `v` (tables opened, arrays not).
fn leaf_keys(v: &toml::Value, prefix: &str, out: &mut Vec<String>) {
    match v {
        toml::Value::Table(t) => {
            for (k, v) in t {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaf_keys(v, &key, out);
            }
        }
        _ if prefix == "faults" => {}
        _ => out.push(prefix.to_string()),
    }
}

#[test]
fn the_docs_table_of_dcqcn_presets_is_what_the_presets_are() {
    let rows = table("### DCQCN presets");
    let line = Rate::from_gbps(100);
    let presets = [
        ("paper", DcqcnPreset::Paper),
        ("firmware", DcqcnPreset::Firmware),
        ("hpcc", DcqcnPreset::Hpcc),
    ];
    let mut keys = Vec::new();
    for row in &rows {
        let key = code(&row[0]).unwrap();
        keys.push(key);
        for (col, (name, preset)) in presets.iter().enumerate() {
            let mut cfg = SimConfig::default();
            cfg.nic.cc.algorithm = CcAlgorithm::Dcqcn;
            cfg.nic.cc.preset = *preset;
            let want = sim::fabric::nic::dcqcn_params(&cfg, line);
            let value = code(&row[col + 1]).unwrap();
            let table: toml::Table = format!("{key} = {value}").parse().unwrap();
            let one: DcqcnOverrides = table
                .try_into()
                .unwrap_or_else(|e| panic!("{key} = {value}: {e}"));
            let mut got = want;
            one.apply(&mut got);
            let same_g = got.g_num * want.g_den == want.g_num * got.g_den;
            (got.g_num, got.g_den) = (want.g_num, want.g_den);
            let cnp = |o: &DcqcnOverrides, p: &DcqcnParams| {
                o.cnp_interval(p.model.default_cnp_interval())
            };
            assert!(
                same_g && got == want && cnp(&one, &got) == cnp(&DcqcnOverrides::default(), &want),
                "docs/SCENARIO-FILES.md says {key} is {value} in {name}; it is not ({want:?})"
            );
        }
    }
    assert_eq!(
        keys,
        roce::cc::dcqcn::DCQCN_KEYS,
        "one row per key, in the table's order"
    );
}
