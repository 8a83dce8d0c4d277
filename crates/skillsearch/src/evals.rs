//! Stored eval runs: `eval --save` appends one JSON line per run to `<home>/evals/runs.jsonl`
//! (when, which set of queries, over which skills, the metrics `eval --json` prints), and
//! `ui` shows them per set over time.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use skillsearch_core::eval::Summary;
use std::path::{Path, PathBuf};

/// One stored run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct SavedRun {
    /// RFC 3339 UTC, when the run ended.
    pub ts: String,
    /// The name runs are grouped by: `--set`, else the queries file's stem.
    pub set: String,
    pub queries: PathBuf,
    pub skills: PathBuf,
    pub metrics: Summary,
}

/// Where runs are stored under `home`.
pub(crate) fn runs_path(home: &Path) -> PathBuf {
    home.join("evals").join("runs.jsonl")
}

/// The set a run belongs to: `set` when given (not blank), else the queries file's stem.
pub(crate) fn set_name(set: Option<&str>, queries: &Path) -> String {
    set.map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .or_else(|| {
            queries
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "queries".to_owned())
}

/// Appends `run` to the store under `home`.
pub(crate) fn save(home: &Path, run: &SavedRun) -> Result<PathBuf> {
    let path = runs_path(home);
    let mut line = serde_json::to_vec(run).context("cannot encode the eval run")?;
    line.push(b'\n');
    skillsearch_core::secrets::append_private(&path, &line)
        .with_context(|| format!("cannot save the eval run to {}", path.display()))?;
    Ok(path)
}

/// Every stored run, oldest first (a missing store is none; a line that does not parse is
/// skipped with a warning naming it).
pub(crate) fn load(home: &Path) -> Result<Vec<SavedRun>> {
    let path = runs_path(home);
    let text = match skillsearch_core::fsio::read_regular_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(anyhow::Error::new(e)
                .context(format!("cannot read the eval runs {}", path.display())));
        }
    };
    let mut runs = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        match serde_json::from_str(line) {
            Ok(r) => runs.push(r),
            Err(e) => tracing::warn!("{} line {}: not an eval run: {e}", path.display(), i + 1),
        }
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_appended_and_read_back_and_a_bad_line_is_skipped() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(load(tmp.path()).unwrap().is_empty());
        let run = |ts: &str, hit1: f64| SavedRun {
            ts: ts.into(),
            set: set_name(None, Path::new("/q/metatool-dev.jsonl")),
            queries: "/q/metatool-dev.jsonl".into(),
            skills: "/s".into(),
            metrics: Summary {
                hit1,
                queries: 3,
                retriever: "lexical".into(),
                ..Summary::default()
            },
        };
        save(tmp.path(), &run("2026-12-01T00:00:00.000Z", 0.4)).unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(runs_path(tmp.path()))
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"{broken\n"))
            .unwrap();
        save(tmp.path(), &run("2026-12-02T00:00:00.000Z", 0.5)).unwrap();
        let runs = load(tmp.path()).unwrap();
        assert_eq!(
            runs,
            [
                run("2026-12-01T00:00:00.000Z", 0.4),
                run("2026-12-02T00:00:00.000Z", 0.5)
            ]
        );
        assert_eq!(runs[0].set, "metatool-dev");
        assert_eq!(set_name(Some(" mine "), Path::new("q.jsonl")), "mine");
    }
}
