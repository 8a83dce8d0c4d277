//! Everything the binary writes to stdout goes through here.

use anyhow::Result;
use skillsearch_core::{Diagnostic, Severity};
use std::io::Write;

pub struct Out {
    w: std::io::BufWriter<Box<dyn Write>>,
}

impl Out {
    pub fn stdout() -> Self {
        Out {
            w: std::io::BufWriter::new(Box::new(std::io::stdout())),
        }
    }

    /// Discards everything (tests).
    #[cfg(test)]
    pub fn sink() -> Self {
        Out {
            w: std::io::BufWriter::new(Box::new(std::io::sink())),
        }
    }

    pub fn line(&mut self, s: &str) -> Result<()> {
        writeln!(self.w, "{s}")?;
        self.w.flush()?;
        Ok(())
    }

    /// Exactly one JSON document and a newline.
    pub fn json<T: serde::Serialize>(&mut self, v: &T) -> Result<()> {
        serde_json::to_writer(&mut self.w, v)?;
        writeln!(self.w)?;
        self.w.flush()?;
        Ok(())
    }
}

impl Out {
    /// One JSON document, indented for people.
    pub fn json_pretty<T: serde::Serialize>(&mut self, v: &T) -> Result<()> {
        serde_json::to_writer_pretty(&mut self.w, v)?;
        writeln!(self.w)?;
        self.w.flush()?;
        Ok(())
    }
}

pub fn print_diagnostics(out: &mut Out, diags: &[Diagnostic]) -> Result<()> {
    if diags.is_empty() {
        return out.line("no problems found");
    }
    let errors = diags
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    out.line(&format!(
        "{} problems ({errors} errors, {} warnings):",
        diags.len(),
        diags.len() - errors
    ))?;
    for d in diags {
        // A diagnostic names a path and often a skill's name: one line, nothing raw.
        out.line(&format!("  {}", shown(&d.to_string())))?;
    }
    Ok(())
}

/// A name, id, path or description from a skill's files as one line for a terminal: control
/// characters (ESC sequences, newlines) and bidi overrides become spaces (`render::one_line`).
pub fn shown(s: &str) -> std::borrow::Cow<'_, str> {
    skillsearch_core::turn::render::one_line(s)
}

/// [`shown`], whitespace collapsed, cut to `max` characters with an ellipsis.
pub fn one_line(s: &str, max: usize) -> String {
    let flat = shown(s).split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
    format!("{cut}…")
}
