//! Errors in files users write, and TOML decoding that names the key.
//!
//! Every loader (topology, workload, scenario, imports) reports a
//! [`FileError`]: the file, the line and column when known, the dotted key
//! (`fabric.pfc.threshold.xoff`, `workload[1].size`) and what was expected.
//! Decoding never panics on any input.
//!
//! Both decoders read what people write, so durations and rates must carry
//! their unit: they decode inside [`roce::time::with_units_required`], and
//! a bare number (`duration = 20`, `rate = 100`; a bare `0` stays) is an
//! error naming the key and the units it takes, never 20 ps or 100 bit/s.

use std::fmt;
use std::path::{Path, PathBuf};

use roce::time::with_units_required;
use serde::de::DeserializeOwned;

/// A mistake in an input file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileError {
    /// The file (as the user named it).
    pub file: PathBuf,
    /// 1-based line and column, when known.
    pub position: Option<(usize, usize)>,
    /// Dotted key path, when the mistake is under a key.
    pub key: Option<String>,
    /// What is wrong and what was expected.
    pub message: String,
}

impl FileError {
    /// A mistake under `key` (empty: the whole file).
    pub fn new(file: &Path, key: &str, message: impl Into<String>) -> FileError {
        FileError {
            file: file.to_path_buf(),
            position: None,
            key: (!key.is_empty()).then(|| key.to_string()),
            message: message.into(),
        }
    }

    /// The same error with the position of byte `offset` in `text`.
    pub fn at(mut self, text: &str, offset: usize) -> FileError {
        self.position = Some(line_col(text, offset));
        self
    }

    /// The same error with `prefix.` put before its key.
    pub fn under(mut self, prefix: &str) -> FileError {
        if !prefix.is_empty() {
            self.key = Some(match self.key {
                Some(k) if k.starts_with('[') => format!("{prefix}{k}"),
                Some(k) => format!("{prefix}.{k}"),
                None => prefix.to_string(),
            });
        }
        self
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some((line, col)) = self.position {
            write!(f, ":{line}:{col}")?;
        }
        if let Some(key) = &self.key {
            write!(f, ": key `{key}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for FileError {}

/// Read a file into a string, naming the file on failure.
pub fn read_file(path: &Path) -> Result<String, FileError> {
    std::fs::read_to_string(path)
        .map_err(|e| FileError::new(path, "", format!("cannot read the file: {e}")))
}

/// Decode TOML text into `T`, naming file, line, column and key on error.
pub fn decode_str<T: DeserializeOwned>(file: &Path, text: &str) -> Result<T, FileError> {
    let de = toml::Deserializer::new(text);
    with_units_required(|| serde_path_to_error::deserialize(de)).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let err = toml_error(file, &path, inner.message());
        match inner.span() {
            Some(span) => err.at(text, span.start),
            None => err,
        }
    })
}

/// Decode an already parsed TOML value into `T`; keys in errors are put
/// under `prefix` (the value's own key in the file).
pub fn decode_value<T: DeserializeOwned>(
    file: &Path,
    value: toml::Value,
    prefix: &str,
) -> Result<T, FileError> {
    with_units_required(|| serde_path_to_error::deserialize(value)).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        toml_error(file, &path, inner.message()).under(prefix)
    })
}

/// Build the error from serde's path and message; an unknown field's name
/// is in the key (serde's path may already hold it).
fn toml_error(file: &Path, path: &str, message: &str) -> FileError {
    let mut key = if path == "." {
        String::new()
    } else {
        path.to_string()
    };
    if let Some(rest) = message.strip_prefix("unknown field `") {
        if let Some(end) = rest.find('`').filter(|&end| !key.ends_with(&rest[..end])) {
            if !key.is_empty() {
                key.push('.');
            }
            key.push_str(&rest[..end]);
        }
    }
    FileError::new(file, &key, message.trim_end().to_string())
}

/// Byte offset in TOML `text` of the value under dotted `key`
/// (`workload[1].size`), or of its nearest enclosing key written in the
/// file when the key itself is not (a default, or a derived setting).
/// `None` when not even the first step of the key is in the text.
pub fn key_offset(text: &str, key: &str) -> Option<usize> {
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let mut item: &toml_edit::Item = doc.as_item();
    let mut found = None;
    for part in key.split('.') {
        let (name, indices) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !name.is_empty() {
            let Some((k, v)) = item.as_table_like().and_then(|t| t.get_key_value(name)) else {
                return found;
            };
            found = k.span().or_else(|| v.span()).map(|r| r.start).or(found);
            item = v;
        }
        for idx in indices.split(['[', ']']).filter(|s| !s.is_empty()) {
            let Some(next) = idx.parse::<usize>().ok().and_then(|i| item.get(i)) else {
                return found;
            };
            found = next.span().map(|r| r.start).or(found);
            item = next;
        }
    }
    found
}

impl FileError {
    /// The same error placed at its key in `text`, when it has no position
    /// yet and the key (or an enclosing one) is written there.
    pub fn locate(self, text: &str) -> FileError {
        if self.position.is_some() {
            return self;
        }
        match self.key.as_deref().and_then(|k| key_offset(text, k)) {
            Some(off) => self.at(text, off),
            None => self,
        }
    }
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        size: u32,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        inner: Inner,
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let e = decode_str::<Outer>(Path::new("x.toml"), "[inner]\nsize = \"big\"\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("inner.size"));
        assert_eq!(e.position.map(|p| p.0), Some(2));
        let shown = e.to_string();
        assert!(shown.starts_with("x.toml:2:"), "{shown}");
        let e =
            decode_str::<Outer>(Path::new("x.toml"), "[inner]\nsize = 1\nsise = 2\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("inner.sise"));
        assert!(e.message.contains("expected"), "{}", e.message);
    }
}
#[cfg(test)]
mod key_tests {
    #[test]
    fn finds_keys() {
        let t = "topology = \"x\"\n[fabric.pfc]\nheadroom = { mode = \"fixed\" }\n[[w]]\na = 1\n[[w]]\nb = 2\n";
        assert_eq!(super::key_offset(t, "topology"), Some(0));
        assert_eq!(
            super::line_col(t, super::key_offset(t, "fabric.pfc.headroom").unwrap()).0,
            3
        );
        assert_eq!(
            super::line_col(t, super::key_offset(t, "w[1].b").unwrap()).0,
            7
        );
        assert_eq!(
            super::line_col(t, super::key_offset(t, "w[1].c").unwrap()).0,
            6
        );
    }
}
