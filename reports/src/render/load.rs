//! Reading a run's `results.json` for the report, and the error of every
//! file the report reads (also [`super::context::load_context`]'s).

use std::path::{Path, PathBuf};

use sim::scenario::ScenarioResults;

/// Why a results file could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{}: {message}", path.display())]
pub struct LoadError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub message: String,
}

/// Read a `results.json` written by `rocelab run`.
pub fn load(path: &Path) -> Result<ScenarioResults, LoadError> {
    let err = |message: String| LoadError {
        path: path.to_path_buf(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(format!("cannot read: {e}")))?;
    let doc: ScenarioResults = serde_json::from_str(&text).map_err(|e| {
        err(format!(
            "not a rocelab results.json (expected {{\"scenario\", \"seed\", \"variants\": \
             [{{\"summary\", \"flows\", \"ports\", \"nics\", \"queues\"}}]}}): {e}"
        ))
    })?;
    if doc.variants.is_empty() {
        return Err(err("`variants` is empty: expected at least one run".into()));
    }
    Ok(doc)
}
