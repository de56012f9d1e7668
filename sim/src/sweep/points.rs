//! The `[sweep]` table of a scenario file, checked, and its points (see
//! the contract in [`super`]). Below the scenario loader, which checks
//! the table of every file it loads; the loader's own dotted keys and
//! [`Overrides`] are what a point applies.

use std::path::Path;

use crate::input::FileError;
use crate::scenario::{self, Overrides};

/// Most points one sweep may have (a guard against a runaway product).
pub const MAX_POINTS: usize = 1_000_000;

/// Keys a grid may not sweep, and what to use instead.
const NOT_SWEPT: &[(&str, &str)] = &[
    ("seed", "list seeds in sweep.seeds"),
    ("sweep", "a sweep cannot sweep itself"),
    (
        "variant",
        "variants run at every point: sweep their keys instead",
    ),
    ("name", "the name is the same at every point"),
];

/// A checked `[sweep]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct Sweep {
    /// Grid keys (dotted, as `--set` takes them), in file order.
    pub keys: Vec<String>,
    /// The values of each key, in file order.
    pub values: Vec<Vec<toml::Value>>,
    /// Byte offset in the file of each value (for errors of a point).
    pub value_offsets: Vec<Vec<usize>>,
    /// Seeds; empty: the file's seed.
    pub seeds: Vec<u64>,
}

/// One point of a sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Its number (0-based, in sweep order).
    pub index: usize,
    /// `(key, value)` per grid key, in key order.
    pub set: Vec<(String, toml::Value)>,
    /// Index of each value in its key's list (parallel to `set`).
    pub value_index: Vec<usize>,
    /// The seed of this point (`None`: the file's).
    pub seed: Option<u64>,
}

impl Point {
    /// The changes a single run of this point makes: `base` (the command
    /// line's), then the grid values, then the seed.
    pub fn overrides(&self, base: &Overrides) -> Overrides {
        let mut set = base.set.clone();
        set.extend(self.set.iter().cloned());
        if let Some(s) = self.seed {
            // Seeds were checked to fit an i64 when the sweep was read.
            set.push(("seed".to_string(), toml::Value::Integer(s as i64)));
        }
        Overrides {
            set,
            variant: base.variant.clone(),
        }
    }

    /// `key=value ... seed=S` with TOML values: what `--set` takes.
    pub fn label(&self) -> String {
        let mut parts: Vec<String> = self.set.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if let Some(s) = self.seed {
            parts.push(format!("seed={s}"));
        }
        parts.join(" ")
    }
}

impl Sweep {
    /// The `[sweep]` table of a scenario file's `text`, checked; `None`
    /// when there is none. TOML syntax errors are the loader's to report
    /// (they give `None` here).
    pub fn from_text(path: &Path, text: &str) -> Result<Option<Sweep>, FileError> {
        let Ok(doc) = toml_edit::ImDocument::parse(text) else {
            return Ok(None);
        };
        let Some((skey, item)) = doc.as_table().get_key_value("sweep") else {
            return Ok(None);
        };
        let at = |e: FileError, span: Option<std::ops::Range<usize>>| match span {
            Some(s) => e.at(text, s.start),
            None => e,
        };
        let Some(table) = item.as_table_like() else {
            return Err(at(
                FileError::new(path, "sweep", "expected a table with `grid` and/or `seeds`"),
                skey.span(),
            ));
        };
        let mut sweep = Sweep {
            keys: Vec::new(),
            values: Vec::new(),
            value_offsets: Vec::new(),
            seeds: Vec::new(),
        };
        for (k, v) in table.iter() {
            let kspan = table.get_key_value(k).and_then(|(k, _)| k.span());
            match k {
                "grid" => sweep.read_grid(path, text, v, kspan)?,
                "seeds" => sweep.seeds = read_seeds(path, text, v, kspan)?,
                other => {
                    return Err(at(
                        FileError::new(
                            path,
                            &format!("sweep.{other}"),
                            "unknown key: expected `grid` (a table of dotted keys and value lists) or `seeds` (a list of seeds)",
                        ),
                        kspan,
                    ))
                }
            }
        }
        if sweep.keys.is_empty() && sweep.seeds.is_empty() {
            return Err(at(
                FileError::new(
                    path,
                    "sweep",
                    "nothing to sweep: expected `grid` with at least one key or `seeds`",
                ),
                skey.span(),
            ));
        }
        let n = sweep
            .values
            .iter()
            .map(Vec::len)
            .chain([sweep.seeds.len().max(1)])
            .try_fold(1usize, |acc, n| acc.checked_mul(n))
            .filter(|&n| n <= MAX_POINTS);
        if n.is_none() {
            return Err(at(
                FileError::new(
                    path,
                    "sweep",
                    format!("the grid has more than {MAX_POINTS} points: expected fewer"),
                ),
                skey.span(),
            ));
        }
        Ok(Some(sweep))
    }

    fn read_grid(
        &mut self,
        path: &Path,
        text: &str,
        item: &toml_edit::Item,
        kspan: Option<std::ops::Range<usize>>,
    ) -> Result<(), FileError> {
        let err = |key: &str, span: Option<std::ops::Range<usize>>, m: String| {
            let e = FileError::new(path, key, m);
            match span {
                Some(s) => e.at(text, s.start),
                None => e,
            }
        };
        let Some(grid) = item.as_table_like() else {
            return Err(err(
                "sweep.grid",
                kspan,
                "expected a table: \"dotted.key\" = [values]".into(),
            ));
        };
        for (k, v) in grid.iter() {
            let span = grid.get_key_value(k).and_then(|(k, _)| k.span());
            let key = format!("sweep.grid.\"{k}\"");
            let steps = scenario::parse_key(k).map_err(|m| err(&key, span.clone(), m))?;
            if let Some((_, why)) = NOT_SWEPT.iter().find(|(n, _)| *n == steps[0].0) {
                return Err(err(&key, span, format!("{k:?} cannot be swept: {why}")));
            }
            let Some(arr) = v.as_array() else {
                return Err(err(
                    &key,
                    span,
                    "expected a non-empty list of values, e.g. [1, 2]".into(),
                ));
            };
            if arr.is_empty() {
                return Err(err(
                    &key,
                    span,
                    "empty list: expected at least one value".into(),
                ));
            }
            let mut values = Vec::new();
            let mut offsets = Vec::new();
            for (i, el) in arr.iter().enumerate() {
                let value = to_value(el);
                let espan = trimmed(text, el.span());
                let off = espan.as_ref().map(|s| s.start);
                if values.contains(&value) {
                    return Err(err(
                        &format!("{key}[{i}]"),
                        espan,
                        format!("{value} is listed twice: expected distinct values"),
                    ));
                }
                values.push(value);
                offsets.push(off.or(span.as_ref().map(|s| s.start)).unwrap_or(0));
            }
            if self.keys.iter().any(|have| have == k) {
                return Err(err(
                    &key,
                    span,
                    "listed twice: expected each key once".into(),
                ));
            }
            self.keys.push(k.to_string());
            self.values.push(values);
            self.value_offsets.push(offsets);
        }
        Ok(())
    }

    /// Every point, in sweep order.
    pub fn points(&self) -> Vec<Point> {
        let seeds: Vec<Option<u64>> = if self.seeds.is_empty() {
            vec![None]
        } else {
            self.seeds.iter().map(|&s| Some(s)).collect()
        };
        let combos: usize = self.values.iter().map(Vec::len).product();
        let mut out = Vec::with_capacity(combos * seeds.len());
        for c in 0..combos {
            // Mixed-radix digits of c, the first key most significant.
            let mut idx = vec![0; self.keys.len()];
            let mut rest = c;
            for (i, vals) in self.values.iter().enumerate().rev() {
                idx[i] = rest % vals.len();
                rest /= vals.len();
            }
            for &seed in &seeds {
                out.push(Point {
                    index: out.len(),
                    set: self
                        .keys
                        .iter()
                        .zip(&idx)
                        .enumerate()
                        .map(|(k, (key, &i))| (key.clone(), self.values[k][i].clone()))
                        .collect(),
                    value_index: idx.clone(),
                    seed,
                });
            }
        }
        out
    }
}

/// The span of an array element from its first character: `toml_edit`
/// may start it at the whitespace before the value.
fn trimmed(text: &str, span: Option<std::ops::Range<usize>>) -> Option<std::ops::Range<usize>> {
    span.map(|r| {
        let lead = text
            .get(r.clone())
            .map_or(0, |t| t.len() - t.trim_start().len());
        r.start + lead..r.end
    })
}

/// A `toml_edit` value as a `toml` value (its text without decoration).
fn to_value(v: &toml_edit::Value) -> toml::Value {
    let mut v = v.clone();
    v.decor_mut().clear();
    format!("v = {v}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(v.to_string()))
}

fn read_seeds(
    path: &Path,
    text: &str,
    item: &toml_edit::Item,
    kspan: Option<std::ops::Range<usize>>,
) -> Result<Vec<u64>, FileError> {
    let err = |key: &str, span: Option<std::ops::Range<usize>>, m: String| {
        let e = FileError::new(path, key, m);
        match span {
            Some(s) => e.at(text, s.start),
            None => e,
        }
    };
    let arr = item.as_array().filter(|a| !a.is_empty()).ok_or_else(|| {
        err(
            "sweep.seeds",
            kspan.clone(),
            "expected a non-empty list of seeds, e.g. [1, 2, 3]".into(),
        )
    })?;
    let mut seeds = Vec::new();
    for (i, el) in arr.iter().enumerate() {
        let key = format!("sweep.seeds[{i}]");
        let espan = trimmed(text, el.span());
        let seed = el
            .as_integer()
            .and_then(|s| u64::try_from(s).ok())
            .ok_or_else(|| {
                err(
                    &key,
                    espan.clone(),
                    format!("{}: expected a seed (an integer 0 or more)", to_value(el)),
                )
            })?;
        if seeds.contains(&seed) {
            return Err(err(
                &key,
                espan,
                format!("{seed} is listed twice: expected distinct seeds"),
            ));
        }
        seeds.push(seed);
    }
    Ok(seeds)
}
