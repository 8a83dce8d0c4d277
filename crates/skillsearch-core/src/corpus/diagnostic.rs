//! Diagnostics: what went wrong with one input, reported instead of failing the whole job.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Something was recovered (fallback parser, truncated body, lossy decode); the skill is indexed.
    Warning,
    /// The file or directory could not be used; everything else still is.
    Error,
}

/// One problem with one file or directory, with a stable machine-readable code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    pub severity: Severity,
    /// Stable kebab-case code, e.g. `yaml-fallback`, `binary-file`, `root-missing`.
    pub code: String,
    /// The file or directory at fault.
    pub path: PathBuf,
    /// A sentence saying what is wrong and, where it helps, what to do.
    pub message: String,
}

impl Diagnostic {
    pub fn warning(code: &str, path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Warning,
            code: code.to_owned(),
            path: path.into(),
            message: message.into(),
        }
    }

    pub fn error(code: &str, path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Error,
            code: code.to_owned(),
            path: path.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let level = match self.severity {
            Severity::Warning => "warning",
            Severity::Error => "error",
        };
        write!(
            f,
            "{level}[{}]: {}: {}",
            self.code,
            self.path.display(),
            self.message
        )
    }
}
