//! Parameter sweeps: the `[sweep]` table of a scenario file, its points,
//! shards of them for cluster schedulers, and the sweep table.
//!
//! ```toml
//! [sweep]
//! seeds = [1, 2, 3]                       # optional: one run per seed
//! [sweep.grid]                            # optional: keys in file order
//! "fabric.buffer.size" = ["4MB", "8MB"]   # any dotted key `--set` takes
//! "workload[0].senders" = [4, 8, 16]
//! ```
//!
//! Contract:
//!
//! * A **point** is one combination of grid values and one seed; points
//!   are the Cartesian product with the first grid key outermost and the
//!   seeds innermost, numbered from 0 in that order. A point is applied
//!   exactly as `rocelab run FILE --set K=V ... --seed S` applies its
//!   changes ([`Point::overrides`] builds those [`Overrides`]; the loader
//!   is the one truth), so its results are those of that single run.
//!   Without `seeds`, points keep the file's seed.
//! * A single run (`rocelab run`) ignores `[sweep]` but the loader checks
//!   it ([`Sweep::from_text`]): every mistake names FILE:LINE:COLUMN and
//!   the key. [`check_points`] loads every point (what `validate` does).
//! * **Shards** ([`Shard`], `I/N` with `I` in `1..=N`): point `p` belongs
//!   to shard `p % N + 1`. A shard writes only its own folder
//!   (`shard-I-of-N/`, see [`Manifest`]); each point's rows are written
//!   last and atomically, so a point either has its rows or is missing.
//! * The **table** has one row per point and variant, in point order then
//!   variant order: CSV (`sweep.csv`: `point`, the grid keys, `seed`,
//!   `variant`, then every field of [`Summary`] in its order) and JSON
//!   lines (`sweep.jsonl`). [`merge`] assembles it from shard folders by
//!   concatenating the rows each point wrote, so a merged table is byte
//!   for byte the table of a local sweep, and names the missing points.

mod points;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::input::FileError;
use crate::results::Summary;
use crate::scenario::{self, Overrides};

pub use points::{Point, Sweep, MAX_POINTS};

/// Load every point of the sweep in `path` (with the command line's
/// changes `base`), as `run` would: the first point that does not load
/// gives the error, placed at its grid value when the mistake is under a
/// swept key. Returns the number of points.
pub fn check_points(path: &Path, base: &Overrides) -> Result<usize, FileError> {
    let text = crate::input::read_file(path)?;
    if scenario::hpcc_config::looks_like(&text) {
        // Another simulator's run file: no [sweep] in it.
        return Ok(0);
    }
    let Some(sweep) = Sweep::from_text(path, &text)? else {
        return Ok(0);
    };
    let points = sweep.points();
    for p in &points {
        scenario::from_str_with(path, &text, &p.overrides(base))
            .map_err(|e| point_error(&sweep, p, &text, e))?;
    }
    Ok(points.len())
}

/// A point's load error: at the grid value when its key is under (or
/// holds) a swept key, and naming the point.
pub fn point_error(sweep: &Sweep, p: &Point, text: &str, mut e: FileError) -> FileError {
    let under = |k: &str, of: &str| {
        k == of || k.starts_with(&format!("{of}.")) || k.starts_with(&format!("{of}["))
    };
    if let Some(ek) = e.key.as_deref() {
        let swept = sweep
            .keys
            .iter()
            .position(|k| under(ek, k) || under(k, ek.split(" (").next().unwrap_or(ek)));
        if let Some(i) = swept {
            let off = sweep.value_offsets[i][p.value_index[i]];
            e.position = Some(crate::input::line_col(text, off));
        }
    }
    e.message = format!(
        "{} (sweep point {}: {})",
        e.message
            .replace("set on the command line", "set by the sweep")
            .replace("changes set by the sweep", "sweep's changes"),
        p.index,
        p.label()
    );
    e
}

/// One shard of a sweep: `index` in `1..=count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This shard, from 1.
    pub index: usize,
    /// How many shards.
    pub count: usize,
}

impl Shard {
    /// The whole sweep as one shard.
    pub const ALL: Shard = Shard { index: 1, count: 1 };

    /// Parse `I/N` (`1 <= I <= N`).
    pub fn parse(s: &str) -> Result<Shard, String> {
        let bad = || format!("{s:?}: expected I/N with 1 <= I <= N, e.g. 2/8");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: usize = i.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if index == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    /// The shard a scheduler's environment names, or `None` outside an
    /// array job. `get` reads a variable; `count` is the `--shards` flag.
    ///
    /// * Slurm: `SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN + 1` of
    ///   `--shards` or else `SLURM_ARRAY_TASK_COUNT` (array ids may start
    ///   at 0 or 1; the whole array must be one contiguous range when the
    ///   count is Slurm's).
    /// * Kubernetes Indexed Job: `JOB_COMPLETION_INDEX + 1` of `--shards`
    ///   or `ROCELAB_SHARDS`.
    pub fn from_env(
        get: &dyn Fn(&str) -> Option<String>,
        count: Option<usize>,
    ) -> Result<Option<Shard>, String> {
        let num = |name: &str| -> Result<Option<usize>, String> {
            match get(name) {
                None => Ok(None),
                Some(v) => v
                    .trim()
                    .parse()
                    .map(Some)
                    .map_err(|_| format!("{name}={v:?}: expected a number")),
            }
        };
        let check = |index: usize, count: usize, from: &str| {
            if index == 0 || index > count {
                Err(format!(
                    "{from}: shard {index} of {count}: expected 1 to {count}"
                ))
            } else {
                Ok(Some(Shard { index, count }))
            }
        };
        if let Some(id) = num("SLURM_ARRAY_TASK_ID")? {
            let min = num("SLURM_ARRAY_TASK_MIN")?
                .ok_or("SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_MIN is not")?;
            let index = id
                .checked_sub(min)
                .ok_or("SLURM_ARRAY_TASK_ID is below SLURM_ARRAY_TASK_MIN")?
                + 1;
            let n = match count {
                Some(n) => n,
                None => {
                    let n = num("SLURM_ARRAY_TASK_COUNT")?.ok_or(
                        "SLURM_ARRAY_TASK_COUNT is not set: expected --shards N or --shard I/N",
                    )?;
                    let max = num("SLURM_ARRAY_TASK_MAX")?;
                    if max.is_some_and(|max| max + 1 != min + n) {
                        return Err(format!(
                            "the array {min}-{} has {n} tasks: not one contiguous range; expected --shard I/N",
                            max.unwrap_or(0)
                        ));
                    }
                    n
                }
            };
            return check(index, n, "SLURM_ARRAY_TASK_ID");
        }
        if let Some(idx) = num("JOB_COMPLETION_INDEX")? {
            let n = match count {
                Some(n) => n,
                None => num("ROCELAB_SHARDS")?.ok_or(
                    "JOB_COMPLETION_INDEX is set: expected the shard count in --shards N or ROCELAB_SHARDS",
                )?,
            };
            return check(idx + 1, n, "JOB_COMPLETION_INDEX");
        }
        Ok(None)
    }

    /// Whether point `p` is this shard's.
    pub fn owns(&self, p: usize) -> bool {
        p % self.count == self.index - 1
    }

    /// The shard's folder name: `shard-I-of-N`.
    pub fn dir_name(&self) -> String {
        format!("shard-{}-of-{}", self.index, self.count)
    }
}

/// What a shard folder holds about the sweep (`manifest.json`): the whole
/// sweep's points, so that any shard's folder can name what is missing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// `rocelab-sweep-shard`.
    pub schema: String,
    /// Format version of the shard folder.
    pub version: u32,
    /// Scenario name.
    pub scenario: String,
    /// The scenario file as given.
    pub file: String,
    /// The grid keys.
    pub keys: Vec<String>,
    /// Every point's label ([`Point::label`]), by point number.
    pub points: Vec<String>,
    /// This shard (from 1).
    pub shard: usize,
    /// Shards in all.
    pub shards: usize,
}

/// The `schema` of [`Manifest`].
pub const MANIFEST_SCHEMA: &str = "rocelab-sweep-shard";
/// The `version` of [`Manifest`].
pub const MANIFEST_VERSION: u32 = 1;

impl Manifest {
    /// The manifest of `shard` of `sweep`.
    pub fn new(scenario: &str, file: &Path, sweep: &Sweep, shard: Shard) -> Manifest {
        Manifest {
            schema: MANIFEST_SCHEMA.to_string(),
            version: MANIFEST_VERSION,
            scenario: scenario.to_string(),
            file: file.display().to_string(),
            keys: sweep.keys.clone(),
            points: sweep.points().iter().map(Point::label).collect(),
            shard: shard.index,
            shards: shard.count,
        }
    }
}

/// The folder of point `p` inside a shard folder.
pub fn point_dir(shard_dir: &Path, p: usize) -> PathBuf {
    shard_dir.join("points").join(format!("{p:06}"))
}

/// The rows of one point: the CSV header, its CSV lines and its JSON
/// lines. `variants`: `(seed, summary)` of each variant the point ran.
pub fn rows(keys: &[String], p: &Point, variants: &[(u64, &Summary)]) -> (String, String, String) {
    let mut header = String::from("point");
    for k in keys {
        header.push(',');
        header.push_str(&csv_cell(k));
    }
    header.push_str(",seed,variant");
    let (mut csv, mut jsonl) = (String::new(), String::new());
    for (i, (seed, s)) in variants.iter().enumerate() {
        let fields = summary_fields(s);
        if i == 0 {
            for (name, _) in fields.iter().filter(|(n, _)| n != "variant") {
                header.push(',');
                header.push_str(&csv_cell(name));
            }
            header.push('\n');
        }
        let _ = write!(csv, "{}", p.index);
        for (_, v) in &p.set {
            csv.push(',');
            csv.push_str(&csv_cell(&match v {
                toml::Value::String(s) => s.clone(),
                other => other.to_string(),
            }));
        }
        let _ = write!(csv, ",{seed},{}", csv_cell(&s.variant));
        for (name, v) in &fields {
            if name == "variant" {
                continue;
            }
            csv.push(',');
            csv.push_str(&csv_cell(&match v {
                serde_json::Value::Null => String::new(),
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            }));
        }
        csv.push('\n');
        let set: Vec<String> = p
            .set
            .iter()
            .map(|(k, v)| {
                format!(
                    "{}:{}",
                    json(&serde_json::Value::String(k.clone())),
                    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
                )
            })
            .collect();
        let _ = writeln!(
            jsonl,
            "{{\"point\":{},\"set\":{{{}}},\"seed\":{seed},\"variant\":{},\"summary\":{}}}",
            p.index,
            set.join(","),
            json(&serde_json::Value::String(s.variant.clone())),
            serde_json::to_string(s).unwrap_or_default()
        );
    }
    if variants.is_empty() {
        header.push('\n');
    }
    (header, csv, jsonl)
}

fn json(v: &serde_json::Value) -> String {
    v.to_string()
}

/// A summary's fields in declaration order.
fn summary_fields(s: &Summary) -> Vec<(String, serde_json::Value)> {
    serde_json::to_string(s)
        .ok()
        .and_then(|t| serde_json::from_str::<Ordered>(&t).ok())
        .map(|o| o.0)
        .unwrap_or_default()
}

/// A JSON object with its keys in text order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ordered(pub Vec<(String, serde_json::Value)>);

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Ordered, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Ordered, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, serde_json::Value>()? {
                    out.push((k, v));
                }
                Ok(Ordered(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// A CSV cell (RFC 4180): quoted when it holds a comma, quote or newline.
pub fn csv_cell(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// One row of the table as read back from `sweep.jsonl`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Row {
    /// Point number.
    pub point: usize,
    /// The grid values, in key order.
    pub set: Ordered,
    /// The seed of the run.
    pub seed: u64,
    /// Variant name.
    pub variant: String,
    /// The summary's fields in their order.
    pub summary: Ordered,
}

/// The assembled table of a sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// The sweep (from a shard's manifest).
    pub manifest: Manifest,
    /// `sweep.csv`.
    pub csv: String,
    /// `sweep.jsonl`.
    pub jsonl: String,
}

impl Table {
    /// The rows, parsed from the JSON lines.
    pub fn rows(&self) -> Vec<Row> {
        self.jsonl
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

/// Why shard folders did not merge.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    /// A folder or file could not be read, or is not a shard's.
    #[error("{path}: {message}")]
    Bad {
        /// The folder or file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// Points have no rows in any folder.
    #[error("{} of {total} points are missing: {}", missing.len(), missing.iter().map(|(p, l, s)| format!("point {p} ({l}; shard {s})")).collect::<Vec<_>>().join(", "))]
    Missing {
        /// Points in the sweep.
        total: usize,
        /// `(point, label, shard I/N that owns it)` of each missing point.
        missing: Vec<(usize, String, String)>,
    },
}

/// The shard folders `dir` stands for: itself when it holds a
/// `manifest.json`, else its `shard-*` subfolders that do (sorted).
pub fn shard_dirs(dir: &Path) -> Result<Vec<PathBuf>, MergeError> {
    let bad = |m: String| MergeError::Bad {
        path: dir.display().to_string(),
        message: m,
    };
    if dir.join("manifest.json").is_file() {
        return Ok(vec![dir.to_path_buf()]);
    }
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| bad(e.to_string()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("shard-"))
                && p.join("manifest.json").is_file()
        })
        .collect();
    out.sort();
    if out.is_empty() {
        return Err(bad(
            "no manifest.json and no shard-*/manifest.json: expected a sweep's output folder"
                .into(),
        ));
    }
    Ok(out)
}

/// Read a shard folder's manifest.
pub fn read_manifest(dir: &Path) -> Result<Manifest, MergeError> {
    let path = dir.join("manifest.json");
    let bad = |m: String| MergeError::Bad {
        path: path.display().to_string(),
        message: m,
    };
    let text = std::fs::read_to_string(&path).map_err(|e| bad(e.to_string()))?;
    let m: Manifest = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    if m.schema != MANIFEST_SCHEMA || m.version != MANIFEST_VERSION {
        return Err(bad(format!(
            "schema {:?} version {}: expected {MANIFEST_SCHEMA:?} version {MANIFEST_VERSION}",
            m.schema, m.version
        )));
    }
    Ok(m)
}

/// Assemble the table from shard folders (each `dirs` entry a shard
/// folder or a folder of them): every point's rows, in point order, from
/// the first folder that has them. Folders of different sweeps, and
/// points no folder has, are errors.
pub fn merge(dirs: &[PathBuf]) -> Result<Table, MergeError> {
    let mut shards: Vec<(PathBuf, Manifest)> = Vec::new();
    for d in dirs {
        for s in shard_dirs(d)? {
            let m = read_manifest(&s)?;
            shards.push((s, m));
        }
    }
    let Some((first_dir, first)) = shards.first().cloned() else {
        return Err(MergeError::Bad {
            path: String::new(),
            message: "no folders given".into(),
        });
    };
    for (d, m) in &shards {
        if m.points != first.points || m.keys != first.keys || m.scenario != first.scenario {
            return Err(MergeError::Bad {
                path: d.display().to_string(),
                message: format!(
                    "a shard of another sweep than {} ({} points of scenario {:?}): expected shards of one sweep",
                    first_dir.display(),
                    first.points.len(),
                    first.scenario
                ),
            });
        }
    }
    let mut header: Option<String> = None;
    let (mut csv, mut jsonl) = (String::new(), String::new());
    let mut missing = Vec::new();
    for (p, label) in first.points.iter().enumerate() {
        let found = shards.iter().find_map(|(d, _)| {
            let pd = point_dir(d, p);
            let c = std::fs::read_to_string(pd.join("rows.csv")).ok()?;
            let j = std::fs::read_to_string(pd.join("rows.jsonl")).ok()?;
            Some((pd, c, j))
        });
        let Some((pd, c, j)) = found else {
            let owner = Shard {
                index: p % first.shards + 1,
                count: first.shards,
            };
            missing.push((p, label.clone(), format!("{}/{}", owner.index, owner.count)));
            continue;
        };
        let (h, body) = c.split_once('\n').unwrap_or((&c, ""));
        match &header {
            None => header = Some(format!("{h}\n")),
            Some(have) if have.trim_end() != h => {
                return Err(MergeError::Bad {
                    path: pd.join("rows.csv").display().to_string(),
                    message: "its columns differ from the other points': expected one version of rocelab for the whole sweep".into(),
                })
            }
            Some(_) => {}
        }
        csv.push_str(body);
        jsonl.push_str(&j);
    }
    if !missing.is_empty() {
        return Err(MergeError::Missing {
            total: first.points.len(),
            missing,
        });
    }
    Ok(Table {
        manifest: Manifest {
            shard: 1,
            shards: 1,
            ..first
        },
        csv: format!("{}{csv}", header.unwrap_or_default()),
        jsonl,
    })
}

/// Write a file atomically (a temporary beside it, then a rename), so a
/// killed shard leaves either the whole file or none.
pub fn write_atomic(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, data)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep(text: &str) -> Result<Option<Sweep>, FileError> {
        Sweep::from_text(Path::new("s.toml"), text)
    }

    #[test]
    fn points_are_the_product_first_key_outermost_seeds_innermost() {
        let s = sweep(
            "topology = \"t\"\n[sweep]\nseeds = [7, 9]\n[sweep.grid]\n\"b.x\" = [1, 2]\n\"a.y\" = [\"p\", \"q\", \"r\"]\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.keys, ["b.x", "a.y"], "file order, not sorted");
        let pts = s.points();
        assert_eq!(pts.len(), 12);
        assert_eq!(pts[0].label(), "b.x=1 a.y=\"p\" seed=7");
        assert_eq!(pts[1].label(), "b.x=1 a.y=\"p\" seed=9");
        assert_eq!(pts[2].label(), "b.x=1 a.y=\"q\" seed=7");
        assert_eq!(pts[11].label(), "b.x=2 a.y=\"r\" seed=9");
        let ov = pts[3].overrides(&Overrides::default());
        assert_eq!(
            ov.set,
            vec![
                ("b.x".to_string(), toml::Value::Integer(1)),
                ("a.y".to_string(), toml::Value::String("q".into())),
                ("seed".to_string(), toml::Value::Integer(9)),
            ]
        );
    }

    #[test]
    fn mistakes_name_line_column_and_key() {
        let cases = [
            (
                "[sweep]\nseeds = [1, 1]\n",
                2,
                13,
                "sweep.seeds[1]",
                "twice",
            ),
            (
                "[sweep]\nseeds = [-1]\n",
                2,
                10,
                "sweep.seeds[0]",
                "0 or more",
            ),
            ("[sweep]\nseeds = []\n", 2, 1, "sweep.seeds", "non-empty"),
            (
                "[sweep]\n[sweep.grid]\n\"a..b\" = [1]\n",
                3,
                1,
                "sweep.grid.\"a..b\"",
                "dotted key",
            ),
            (
                "[sweep]\n[sweep.grid]\nseed = [1]\n",
                3,
                1,
                "sweep.grid.\"seed\"",
                "sweep.seeds",
            ),
            (
                "[sweep]\n[sweep.grid]\n\"x.y\" = 3\n",
                3,
                1,
                "sweep.grid.\"x.y\"",
                "list of values",
            ),
            (
                "[sweep]\n[sweep.grid]\n\"x.y\" = [2, 2]\n",
                3,
                13,
                "sweep.grid.\"x.y\"[1]",
                "twice",
            ),
            ("[sweep]\ngird = 1\n", 2, 1, "sweep.gird", "unknown key"),
            ("[sweep]\n", 1, 2, "sweep", "nothing to sweep"),
            ("sweep = 3\n", 1, 1, "sweep", "expected a table"),
        ];
        for (text, line, col, key, msg) in cases {
            let e = sweep(text).unwrap_err();
            assert_eq!(e.position, Some((line, col)), "{text}: {e}");
            assert_eq!(e.key.as_deref(), Some(key), "{text}: {e}");
            assert!(e.message.contains(msg), "{text}: {e}");
        }
        assert_eq!(sweep("name = \"x\"\n").unwrap(), None);
    }

    #[test]
    fn shards_partition_points_and_come_from_the_scheduler() {
        let shards: Vec<Shard> = (1..=3).map(|i| Shard { index: i, count: 3 }).collect();
        for p in 0..10 {
            assert_eq!(shards.iter().filter(|s| s.owns(p)).count(), 1);
        }
        assert_eq!(Shard::parse("2/8"), Ok(Shard { index: 2, count: 8 }));
        assert!(Shard::parse("0/8").is_err() && Shard::parse("9/8").is_err());
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        // Arrays starting at 0 and at 1 give the same shards.
        let zero = env(&[
            ("SLURM_ARRAY_TASK_ID", "0"),
            ("SLURM_ARRAY_TASK_MIN", "0"),
            ("SLURM_ARRAY_TASK_MAX", "5"),
            ("SLURM_ARRAY_TASK_COUNT", "6"),
        ]);
        let one = env(&[
            ("SLURM_ARRAY_TASK_ID", "1"),
            ("SLURM_ARRAY_TASK_MIN", "1"),
            ("SLURM_ARRAY_TASK_MAX", "6"),
            ("SLURM_ARRAY_TASK_COUNT", "6"),
        ]);
        let want = Ok(Some(Shard { index: 1, count: 6 }));
        assert_eq!(Shard::from_env(&zero, None), want);
        assert_eq!(Shard::from_env(&one, None), want);
        let strided = env(&[
            ("SLURM_ARRAY_TASK_ID", "2"),
            ("SLURM_ARRAY_TASK_MIN", "0"),
            ("SLURM_ARRAY_TASK_MAX", "10"),
            ("SLURM_ARRAY_TASK_COUNT", "6"),
        ]);
        assert!(Shard::from_env(&strided, None).is_err());
        let k8s = env(&[("JOB_COMPLETION_INDEX", "3")]);
        assert_eq!(
            Shard::from_env(&k8s, Some(4)),
            Ok(Some(Shard { index: 4, count: 4 }))
        );
        assert!(Shard::from_env(&k8s, None).is_err(), "no count");
        assert!(Shard::from_env(&k8s, Some(3)).is_err(), "index past count");
        assert_eq!(Shard::from_env(&env(&[]), None), Ok(None));
    }

    #[test]
    fn csv_cells_are_quoted_when_needed() {
        assert_eq!(csv_cell("a"), "a");
        assert_eq!(csv_cell("a,b"), "\"a,b\"");
        assert_eq!(csv_cell("say \"x\""), "\"say \"\"x\"\"\"");
    }
}
