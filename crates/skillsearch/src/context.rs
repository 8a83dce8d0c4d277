//! What every surface of the binary starts from: the home directory, the layered settings
//! (defaults < config file < `SKILLSEARCH_*` environment < flags), the skill roots they name,
//! and opening the index. The CLI, the hook, the MCP server, the daemon and setup all use these;
//! none of them reaches into another surface.

use anyhow::{Context, Result};
use skillsearch_core::Roots;
use skillsearch_core::config::{self, PathFacts, Settings};
use skillsearch_core::index::{IndexConfig, Refresh, SkillIndex};
use std::path::{Path, PathBuf};

/// `--home`, else `SKILLSEARCH_HOME`, else `~/.skillsearch`.
pub(crate) fn home_dir(flag: Option<PathBuf>) -> Result<PathBuf> {
    if let Some(h) = flag {
        return Ok(h);
    }
    if let Some(h) = std::env::var_os("SKILLSEARCH_HOME").filter(|h| !h.is_empty()) {
        return Ok(PathBuf::from(h));
    }
    let user = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .context("neither SKILLSEARCH_HOME nor HOME is set; pass --home DIR")?;
    Ok(PathBuf::from(user).join(".skillsearch"))
}

/// Config flags given on the command line, as (key, raw value) for the flag layer.
#[derive(Default)]
pub(crate) struct Flags(Vec<(String, String)>);

impl Flags {
    /// A path-list key from a repeated flag (one path per line in the flag layer).
    pub(crate) fn paths(mut self, key: &str, dirs: &[PathBuf]) -> Self {
        if !dirs.is_empty() {
            let joined = dirs
                .iter()
                .map(|p| p.to_string_lossy())
                .collect::<Vec<_>>()
                .join("\n");
            self.0.push((key.into(), joined));
        }
        self
    }

    /// A key set when the flag was given.
    pub(crate) fn set<T: ToString>(mut self, key: &str, v: Option<T>) -> Self {
        if let Some(v) = v {
            self.0.push((key.into(), v.to_string()));
        }
        self
    }
}

/// The text of the config file at `path`. Only a regular file is read, without blocking: a
/// FIFO there would hang every command (and the hook) until something wrote to it.
pub(crate) fn read_config(path: &Path) -> Result<String> {
    skillsearch_core::fsio::read_regular_string(path).map_err(|e| {
        if skillsearch_core::fsio::is_not_regular(&e) {
            anyhow::anyhow!(
                "config file {} is {e}; replace it with a TOML file or remove it",
                path.display()
            )
        } else {
            anyhow::Error::new(e).context(format!("cannot read config file {}", path.display()))
        }
    })
}

/// Resolves defaults < config file < SKILLSEARCH_* environment < flags.
pub(crate) fn settings(home: &Path, config: Option<PathBuf>, flags: Flags) -> Result<Settings> {
    let explicit = config.or_else(|| {
        std::env::var_os("SKILLSEARCH_CONFIG")
            .filter(|c| !c.is_empty())
            .map(PathBuf::from)
    });
    let file = match explicit {
        Some(path) => {
            let text = read_config(&path)?;
            Some((path, text))
        }
        None => {
            let path = home.join("config.toml");
            match read_config(&path) {
                Ok(text) => Some((path, text)),
                Err(e)
                    if e.downcast_ref::<std::io::Error>()
                        .is_some_and(|e| e.kind() == std::io::ErrorKind::NotFound) =>
                {
                    None
                }
                Err(e) => return Err(e),
            }
        }
    };
    let layers = config::Layers {
        file,
        env: std::env::vars().collect(),
        flags: flags.0,
    };
    let mut s = config::resolve(&layers)?;
    if s.log_path
        .as_ref()
        .is_some_and(|p| p.as_os_str().is_empty())
    {
        s.log_path = Some(home.join("logs").join("decisions.jsonl"));
    }
    Ok(s)
}

/// The skill roots the settings name: explicit ones, or OpenClaw's defaults for the workspace
/// (the current directory when none is set).
pub(crate) fn roots_of(s: &Settings) -> Result<Roots> {
    if !s.skills.is_empty() {
        return Ok(Roots::explicit(s.skills.iter().cloned()));
    }
    let ws = match &s.workspace {
        Some(w) => w.clone(),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let home = std::env::var_os("HOME").map(PathBuf::from);
    Ok(Roots::openclaw(&ws, home.as_deref(), &[]))
}

/// Opens the index without a progress bar or warnings (for surfaces that answer a host).
pub(crate) fn open_index(home: &Path, roots: &Roots, refresh: Refresh) -> Result<SkillIndex> {
    open_index_with(IndexConfig::new(home), roots, refresh)
}

/// [`open_index`] for a long-lived process: the segment files are held in memory, so one
/// truncated or overwritten on disk neither crashes it nor changes its answers
/// (`IndexConfig::hold_in_memory`).
pub(crate) fn open_index_held(home: &Path, roots: &Roots, refresh: Refresh) -> Result<SkillIndex> {
    let mut cfg = IndexConfig::new(home);
    cfg.hold_in_memory = true;
    open_index_with(cfg, roots, refresh)
}

fn open_index_with(cfg: IndexConfig, roots: &Roots, refresh: Refresh) -> Result<SkillIndex> {
    let home = cfg.home.clone();
    let (idx, _) = SkillIndex::open(roots, &cfg, refresh, &|_| {})
        .with_context(|| format!("cannot open the skill index under {}", home.display()))?;
    Ok(idx)
}

/// The directories a host's turn gives PathGuard placeholders: its workspace (`{{OUTPUT_DIR}}`,
/// only when absolute), the user's home, and the host's own state directory, where the host is
/// known (its environment variable, else its default under the home directory).
pub(crate) fn host_paths(host: &str, workspace: Option<&Path>) -> PathFacts {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let home = env("HOME");
    let under_home = |d: &str| home.as_ref().map(|h| h.join(d));
    let state_dir = match host {
        "openclaw" => env("OPENCLAW_STATE_DIR").or_else(|| under_home(".openclaw")),
        "claude-code" => env("CLAUDE_CONFIG_DIR").or_else(|| under_home(".claude")),
        "codex" => env("CODEX_HOME").or_else(|| under_home(".codex")),
        "codebuddy" => env("CODEBUDDY_CONFIG_DIR").or_else(|| under_home(".codebuddy")),
        "hermes" => env("HERMES_HOME").or_else(|| under_home(".hermes")),
        "workbuddy" => under_home(".workbuddy-ai"),
        "raven" => under_home(".raven"),
        "dsh" => env("DSH_HOME")
            .filter(|d| !d.to_string_lossy().trim().is_empty())
            .or_else(|| under_home(".dsh")),
        _ => None,
    };
    PathFacts {
        output_dir: workspace.filter(|w| w.is_absolute()).map(Path::to_path_buf),
        home_dir: home,
        state_dir,
    }
}

/// [`host_paths`] for a surface that knows no host: this process's working directory is the
/// workspace.
pub(crate) fn process_paths() -> PathFacts {
    host_paths("", std::env::current_dir().ok().as_deref())
}
