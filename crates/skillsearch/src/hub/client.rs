//! The hub commands that talk to a running hub (`hub publish`, `versions`, `yank`, `delete`,
//! through the core [`HubClient`], so every call has the client's deadline and replica
//! failover) and the one that works on a store directory (`hub token create`).

use crate::output::Out;
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use skillsearch_core::config::Settings;
use skillsearch_core::corpus::{self, Roots, bundle::SKILL_FILE};
use skillsearch_core::registry::store::Scope;
use skillsearch_core::{HubClient, HubSettings};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What a client command does.
pub(crate) enum HubClientCommand {
    /// Publish every skill directory under each path.
    Publish {
        paths: Vec<PathBuf>,
        json: bool,
    },
    Versions {
        name: String,
        json: bool,
    },
    Yank {
        name: String,
        version: String,
    },
    Delete {
        name: String,
    },
    /// Create a token in `store` (a directory or a PostgreSQL URI).
    TokenCreate {
        scope: String,
        store: String,
    },
    /// Bring the PostgreSQL store at `store` to this build's schema.
    Migrate {
        store: String,
    },
}

fn client(home: &Path, settings: &Settings) -> Result<HubClient> {
    let hs = HubSettings::from_settings(settings, home).context(
        "no hub to talk to: give --hub URL or set hub_endpoint (config.toml or SKILLSEARCH_HUB_ENDPOINT)",
    )?;
    Ok(HubClient::new(&hs)?)
}

/// The skill directories under `path`: itself when it holds `SKILL.md`, else every skill found
/// below it (as a skill root is walked).
fn skill_dirs(path: &Path) -> Result<Vec<PathBuf>> {
    let meta = std::fs::metadata(path)
        .with_context(|| format!("cannot publish {}: no such directory", path.display()))?;
    if !meta.is_dir() {
        bail!(
            "cannot publish {}: not a directory (give a skill directory, or a directory of skills)",
            path.display()
        );
    }
    if path.join(SKILL_FILE).is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let (files, _) = corpus::discover(&Roots::explicit([path.to_path_buf()]));
    let dirs: Vec<PathBuf> = files
        .iter()
        .filter_map(|f| f.path.parent().map(Path::to_path_buf))
        .collect();
    if dirs.is_empty() {
        bail!(
            "no {SKILL_FILE} under {}: nothing to publish",
            path.display()
        );
    }
    Ok(dirs)
}

pub(crate) fn run_client(home: &Path, settings: &Settings, cmd: HubClientCommand) -> Result<u8> {
    let mut out = Out::stdout();
    match cmd {
        HubClientCommand::TokenCreate { scope, store } => {
            let scope = Scope::parse(&scope)
                .with_context(|| format!("--scope must be read or publish, not `{scope}`"))?;
            let token = super::store::create_token(&store, scope)?;
            out.line(&token)?;
            eprintln!(
                "skillsearch: a {} token for the hub store {}; it is shown only now (the store keeps its SHA-256)",
                match scope {
                    Scope::Read => "read",
                    Scope::Publish => "publish",
                },
                skillsearch_core::registry::pg::redact_uri(&store)
            );
            Ok(0)
        }
        HubClientCommand::Migrate { store } => {
            let v = super::store::migrate(&store)?;
            out.line(&format!(
                "{}: schema version {v}",
                skillsearch_core::registry::pg::redact_uri(&store)
            ))?;
            Ok(0)
        }
        HubClientCommand::Publish { paths, json } => {
            let c = client(home, settings)?;
            let mut dirs = Vec::new();
            for p in &paths {
                dirs.extend(skill_dirs(p)?);
            }
            dirs.sort();
            dirs.dedup();
            let mut failed = 0usize;
            for dir in &dirs {
                match publish_one(&c, dir) {
                    Ok(result) => {
                        if json {
                            out.json(&json!({"dir": dir, "result": result}))?;
                        } else {
                            let word = if result["created"] == Value::Bool(true) {
                                "published"
                            } else {
                                "unchanged"
                            };
                            out.line(&format!(
                                "{word} {} {}",
                                result["name"].as_str().unwrap_or_default(),
                                result["version"].as_str().unwrap_or_default()
                            ))?;
                            for s in result["skipped"].as_array().into_iter().flatten() {
                                eprintln!(
                                    "skillsearch: warning: {}: not published: {}",
                                    dir.display(),
                                    s.as_str().unwrap_or_default()
                                );
                            }
                        }
                    }
                    Err(e) => {
                        failed += 1;
                        if json {
                            out.json(&json!({"dir": dir, "error": format!("{e:#}")}))?;
                        } else {
                            eprintln!("skillsearch: error: {}: {e:#}", dir.display());
                        }
                    }
                }
            }
            if failed > 0 {
                eprintln!(
                    "skillsearch: error: {failed} of {} skills not published",
                    dirs.len()
                );
                return Ok(1);
            }
            Ok(0)
        }
        HubClientCommand::Versions { name, json } => {
            let c = client(home, settings)?;
            let r = c.versions(&name, Instant::now() + c.timeout())?;
            if json {
                out.json(&r)?;
                return Ok(0);
            }
            let current = r["current"].as_str();
            for v in r["versions"].as_array().into_iter().flatten() {
                let ver = v["version"].as_str().unwrap_or_default();
                let mark = if v["yanked"] == Value::Bool(true) {
                    "yanked"
                } else if Some(ver) == current {
                    "current"
                } else {
                    ""
                };
                out.line(
                    format!(
                        "{ver}\t{}\t{} bytes\t{mark}",
                        v["sha256"].as_str().unwrap_or_default(),
                        v["size"]
                    )
                    .trim_end(),
                )?;
            }
            Ok(0)
        }
        HubClientCommand::Yank { name, version } => {
            let c = client(home, settings)?;
            let r = c.yank(&name, &version, Instant::now() + c.timeout())?;
            out.line(&format!(
                "yanked {name} {version}; now served: {}",
                r["current"].as_str().unwrap_or("none")
            ))?;
            Ok(0)
        }
        HubClientCommand::Delete { name } => {
            let c = client(home, settings)?;
            let r = c.delete(&name, Instant::now() + c.timeout())?;
            out.line(&format!(
                "deleted {name} ({} versions)",
                r["deleted_versions"]
            ))?;
            Ok(0)
        }
    }
}

fn publish_one(c: &HubClient, dir: &Path) -> Result<Value> {
    let zip = skillsearch_core::registry::pack_dir(dir)
        .with_context(|| format!("cannot read {}", dir.join(SKILL_FILE).display()))?
        .with_context(|| format!("cannot pack {}", dir.display()))?;
    Ok(c.publish(&zip, Instant::now() + c.download_timeout())?)
}
