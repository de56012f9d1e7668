//! Changes to a scenario document by dotted key: the command line's
//! `--set`, `--seed` and `--variant` ([`Overrides`]), dotted keys
//! (`fabric.pfc.enabled`, `workload[0].size`) and the merging of one table
//! over another that variants and `[[override]]` entries use. Plain TOML
//! tables in, plain TOML tables out: below the loader, the sweeps and the
//! overrides, which all change documents this way.

use std::path::Path;

use crate::input::FileError;

/// Changes made on the command line (`rocelab run --set K=V --seed N
/// --variant NAME`), applied as a variant would apply them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    /// `(dotted key, value)` pairs in order: each is set on the base
    /// document and again over every merged variant, so the command line
    /// wins over the file. `--seed N` is `seed = N`.
    pub set: Vec<(String, toml::Value)>,
    /// Resolve and run only this variant.
    pub variant: Option<String>,
}

impl Overrides {
    /// Parse one `KEY=VALUE`: the key is a dotted path of the scenario
    /// document (`fabric.pfc.enabled`, `workload[0].size`), the value a
    /// TOML value (`false`, `3`, `"1MB"`, `[3, 4]`, `{ a = 1 }`); a value
    /// that is not TOML is taken as a string (`nic.cc.algorithm=dcqcn`).
    pub fn parse_set(arg: &str) -> Result<(String, toml::Value), String> {
        let (key, value) = arg
            .split_once('=')
            .ok_or_else(|| format!("{arg:?}: expected KEY=VALUE"))?;
        let key = key.trim();
        parse_key(key)?;
        let value = value.trim();
        let parsed = format!("v = {value}")
            .parse::<toml::Table>()
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(value.to_string()));
        Ok((key.to_string(), parsed))
    }

    /// Set every `(key, value)` on `table`, naming the key on failure.
    pub(super) fn set_all(&self, file: &Path, table: &mut toml::Table) -> Result<(), FileError> {
        for (k, v) in &self.set {
            set_key(table, k, v.clone())
                .map_err(|m| FileError::new(file, k, format!("{m} (set on the command line)")))?;
        }
        Ok(())
    }
}

/// One step of a dotted key: a table key, then array indexes.
pub(crate) type KeyStep<'a> = (&'a str, Vec<usize>);

/// `a.b[2].c` as steps; an error says what is wrong with the key.
pub(crate) fn parse_key(key: &str) -> Result<Vec<KeyStep<'_>>, String> {
    let bad =
        || format!("{key:?}: expected a dotted key such as fabric.pfc.enabled or workload[0].size");
    let mut steps = Vec::new();
    for part in key.split('.') {
        let (name, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(bad());
        }
        let mut idx = Vec::new();
        while !rest.is_empty() {
            let close = rest.find(']').ok_or_else(bad)?;
            if !rest.starts_with('[') {
                return Err(bad());
            }
            idx.push(rest[1..close].parse::<usize>().map_err(|_| bad())?);
            rest = &rest[close + 1..];
        }
        steps.push((name, idx));
    }
    Ok(steps)
}

/// Set `key` (a dotted path, see [`Overrides::parse_set`]) in `table`,
/// creating missing tables; array elements must exist.
fn set_key(table: &mut toml::Table, key: &str, value: toml::Value) -> Result<(), String> {
    let steps = parse_key(key)?;
    let mut cur = table;
    let last = steps.len() - 1;
    for (i, (name, idx)) in steps.into_iter().enumerate() {
        if i == last && idx.is_empty() {
            cur.insert(name.to_string(), value);
            return Ok(());
        }
        let mut v = cur
            .entry(name.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        for (j, &n) in idx.iter().enumerate() {
            let len = match v {
                toml::Value::Array(a) => a.len(),
                other => return Err(format!("{name} is a {}, not an array", other.type_str())),
            };
            let toml::Value::Array(a) = v else {
                unreachable!("checked above")
            };
            let Some(el) = a.get_mut(n) else {
                return Err(format!("{name}[{n}]: the array has {len} elements"));
            };
            if i == last && j == idx.len() - 1 {
                *el = value;
                return Ok(());
            }
            v = el;
        }
        cur = match v {
            toml::Value::Table(t) => t,
            other => return Err(format!("{name} is a {}, not a table", other.type_str())),
        };
    }
    Ok(())
}

/// Merge `over` into `base`: tables key by key, everything else replaced.
pub(crate) fn merge(base: &mut toml::Table, over: toml::Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}
