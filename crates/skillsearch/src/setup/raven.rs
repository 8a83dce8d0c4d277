//! Raven (EverMind-AI/Raven 0.1.9): installs the skillsearch plugin into
//! `~/.raven/plugins/skillsearch/` (the user plugin directory Raven scans; its
//! `raven-plugin.toml` and the `skillsearch_raven` package) and writes its settings under
//! `plugins.config.skillsearch` in `~/.raven/config.json`; and checks every gate that leaves it
//! silently inert.
//!
//! Two routes:
//! - `plugin` (the default): the plugin's `skill_search` / `skill_read` tools in `on_demand`; in
//!   `auto`, its `skills` context segment, which only a Raven with the `context_segments`
//!   contribution point builds — stock Raven 0.1.9 has none, so `auto` is inert there and doctor
//!   says so.
//! - `--set route=mcp` (`on_demand` only): Raven's own MCP client runs `skillsearch mcp`
//!   (`tools.mcpServers.skillsearch`; the model sees `mcp_skillsearch_skill_search`), and the
//!   plugin is switched off in `plugins.disabled` so the tools are not offered twice.
//!
//! Raven reads `~/.raven/config.json` (JSON, no comments) with camelCase or snake_case keys; the
//! edit keeps every key it does not own.

use super::plugin_config::{DEFAULT_DEADLINE_MS, Dialect, PluginConfig};
use super::{Check, FileChange, SetupPlan, SetupRequest, get_path, is_executable, to_json_text};
use anyhow::{Context, Result, bail};
use serde_json::{Map, Value, json};
use skillsearch_core::config::MODES;
use std::path::{Path, PathBuf};

/// The plugin id (`[plugin] id`), its directory name and its `plugins.config` key.
pub const ID: &str = "skillsearch";
/// The plugin, embedded so that setup works from the binary alone. `_engine.py` is the Hermes
/// plugin's module: both plugins speak to the engine through its `serve --stdio` client.
pub const PLUGIN_FILES: &[(&str, &str)] = &[
    (
        "raven-plugin.toml",
        include_str!("../../../../hosts/raven/plugin/raven-plugin.toml"),
    ),
    (
        "skillsearch_raven/__init__.py",
        include_str!("../../../../hosts/raven/plugin/skillsearch_raven/__init__.py"),
    ),
    (
        "skillsearch_raven/_engine.py",
        include_str!("../../../../hosts/hermes/plugin/__init__.py"),
    ),
];
/// How Raven reads `plugins.config.skillsearch` (the manifest's `config_schema`: an object of
/// [`KEYS`](super::plugin_config::KEYS), `mode` one of [`MODES`], `skills` a list of strings,
/// `deadline_ms` ≥ 1, `binary` and `home` strings; `null` is a value of the wrong type).
const DIALECT: Dialect = Dialect {
    null_is_absent: false,
    skills_may_be_string: false,
    skills_non_empty: false,
    strings_typed: true,
};
const OPTIONS: &[&str] = &["route", "deadline_ms"];
const FIX_SETUP: &str = "skillsearch setup raven";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Plugin,
    Mcp,
}

/// `~/.raven`: Raven 0.1.9 reads its config and user plugins there, from the home directory
/// (`raven/config/loader.py`, `raven/cli/_plugin_stack.py`).
pub fn raven_dir() -> Result<PathBuf> {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .context("HOME is not set: Raven keeps its configuration in ~/.raven")?;
    Ok(PathBuf::from(home).join(".raven"))
}

fn config_path(raven: &Path) -> PathBuf {
    raven.join("config.json")
}

fn plugin_dir(raven: &Path) -> PathBuf {
    raven.join("plugins").join(ID)
}

fn parse_config(text: &str, path: &Path) -> Result<Value> {
    if text.trim().is_empty() {
        return Ok(json!({}));
    }
    let v: Value = serde_json::from_str(text).with_context(|| {
        format!(
            "{} is not valid JSON (Raven allows no comments or trailing commas)",
            path.display()
        )
    })?;
    if !v.is_object() {
        bail!("{} is not a JSON object", path.display());
    }
    Ok(v)
}

/// A key of `obj` written camelCase or snake_case (Raven accepts both), the camelCase one when
/// neither is there.
fn key_of(obj: Option<&Value>, camel: &'static str, snake: &'static str) -> &'static str {
    match obj {
        Some(o) if o.get(snake).is_some() && o.get(camel).is_none() => snake,
        _ => camel,
    }
}

/// Raven's agent workspace (`agents.defaults.workspace`, default `~/.raven/workspace`).
fn workspace(cfg: &Value, raven: &Path) -> PathBuf {
    let w = get_path(cfg, &["agents", "defaults", "workspace"]).and_then(Value::as_str);
    match w {
        Some(w) if !w.trim().is_empty() => match w.strip_prefix("~/") {
            Some(rest) => raven.parent().unwrap_or(raven).join(rest),
            None => PathBuf::from(w),
        },
        _ => raven.join("workspace"),
    }
}

/// The MCP server entry of the `mcp` route.
fn mcp_server(section: &PluginConfig) -> Value {
    let mut args = vec![
        json!("--home"),
        json!(section.home),
        json!("mcp"),
        json!("--mode"),
        json!("on_demand"),
    ];
    for s in &section.skills {
        args.push(json!("--skills"));
        args.push(json!(s));
    }
    json!({"command": section.binary, "args": args})
}

/// The section, or the message naming the key at fault.
fn read_section(cfg: &Value, path: &Path) -> std::result::Result<Option<PluginConfig>, String> {
    let Some(raw) = get_path(cfg, &["plugins", "config", ID]) else {
        return Ok(None);
    };
    let Some(obj) = raw.as_object() else {
        return Err(format!(
            "`plugins.config.{ID}` in {} is not an object",
            path.display()
        ));
    };
    PluginConfig::read(obj, &format!("plugins.config.{ID}"), path, DIALECT).map(Some)
}

/// The object at `path` of `doc`, created (and a `null` replaced) as needed.
fn object_at<'a>(doc: &'a mut Value, path: &[&str]) -> Result<&'a mut Map<String, Value>> {
    let mut cur = doc;
    for k in path {
        let obj = cur
            .as_object_mut()
            .with_context(|| format!("`{}` is not an object", path.join(".")))?;
        let next = obj.entry(k.to_string()).or_insert_with(|| json!({}));
        if next.is_null() {
            *next = json!({});
        }
        cur = next;
    }
    cur.as_object_mut()
        .with_context(|| format!("`{}` is not an object", path.join(".")))
}

/// The `tools.mcpServers` key this file uses (`mcp_servers` when only that one is written).
fn mcp_key(cfg: &Value) -> &'static str {
    key_of(cfg.get("tools"), "mcpServers", "mcp_servers")
}

fn mcp_entry(cfg: &Value) -> Option<&Value> {
    ["mcpServers", "mcp_servers"]
        .iter()
        .find_map(|k| get_path(cfg, &["tools", k, ID]))
}

fn disabled(cfg: &Value) -> bool {
    get_path(cfg, &["plugins", "disabled"])
        .and_then(Value::as_array)
        .is_some_and(|d| d.iter().any(|v| v.as_str() == Some(ID)))
}

pub fn setup(req: &SetupRequest) -> Result<SetupPlan> {
    let mut route: Option<Route> = None;
    let mut deadline: Option<u64> = None;
    for (k, v) in &req.options {
        match k.as_str() {
            "route" => {
                route = Some(match v.as_str() {
                    "plugin" => Route::Plugin,
                    "mcp" => Route::Mcp,
                    _ => bail!("--set route={v}: expected `plugin` or `mcp`"),
                })
            }
            "deadline_ms" => {
                deadline = Some(
                    v.parse()
                        .ok()
                        .filter(|ms: &u64| *ms > 0)
                        .with_context(|| format!("--set deadline_ms={v}: expected milliseconds"))?,
                )
            }
            other => bail!(
                "--set {other}: not an option of setup raven; accepted: {}",
                OPTIONS.join(", ")
            ),
        }
    }
    let raven = raven_dir()?;
    let cfg_path = config_path(&raven);
    let before_text = super::read_optional(&cfg_path)?.unwrap_or_default();
    let before = parse_config(&before_text, &cfg_path)?;
    // Without --set route, keep the route the file has.
    let route = route.unwrap_or(if mcp_entry(&before).is_some() && disabled(&before) {
        Route::Mcp
    } else {
        Route::Plugin
    });

    let existing = get_path(&before, &["plugins", "config", ID]).and_then(Value::as_object);
    let mode = req
        .mode
        .clone()
        .or_else(|| {
            existing
                .and_then(|e| e.get("mode"))
                .and_then(Value::as_str)
                .filter(|m| MODES.contains(m))
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "on_demand".to_owned());
    if route == Route::Mcp && mode == "auto" {
        bail!(
            "--set route=mcp serves on_demand only: Raven gives an MCP server no per-turn hook to inject skills. Use --mode on_demand, or the plugin route (--set route=plugin) for auto"
        );
    }
    let skills: Vec<String> = if !req.skills.is_empty() {
        req.skills
            .iter()
            .map(|s| std::path::absolute(s).map(|p| p.display().to_string()))
            .collect::<std::io::Result<_>>()?
    } else if let Some(list) = existing
        .and_then(|e| e.get("skills"))
        .and_then(Value::as_array)
        .filter(|l| !l.is_empty() && l.iter().all(Value::is_string))
    {
        list.iter()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect()
    } else {
        vec![
            workspace(&before, &raven)
                .join("skills")
                .display()
                .to_string(),
        ]
    };
    let deadline_ms = deadline
        .or_else(|| {
            existing
                .and_then(|e| e.get("deadline_ms"))
                .and_then(Value::as_u64)
                .filter(|ms| *ms > 0)
        })
        .unwrap_or(DEFAULT_DEADLINE_MS);
    let section = PluginConfig {
        binary: req.binary.display().to_string(),
        mode,
        skills,
        home: std::path::absolute(&req.home)?.display().to_string(),
        deadline_ms,
    };

    let mut after = before.clone();
    object_at(&mut after, &["plugins", "config"])?.insert(ID.to_owned(), section.json());
    let plugins = object_at(&mut after, &["plugins"])?;
    let list = plugins.entry("disabled").or_insert_with(|| json!([]));
    let Some(list) = list.as_array_mut() else {
        bail!("`plugins.disabled` in {} is not a list", cfg_path.display());
    };
    list.retain(|v| v.as_str() != Some(ID));
    if route == Route::Mcp {
        list.push(json!(ID));
    } else if list.is_empty() && get_path(&before, &["plugins", "disabled"]).is_none() {
        plugins.remove("disabled");
    }
    let key = mcp_key(&before);
    if route == Route::Mcp {
        object_at(&mut after, &["tools", key])?.insert(ID.to_owned(), mcp_server(&section));
    } else {
        for k in ["mcpServers", "mcp_servers"] {
            if let Some(servers) = after
                .get_mut("tools")
                .and_then(|t| t.get_mut(k))
                .and_then(Value::as_object_mut)
            {
                servers.remove(ID);
            }
        }
    }

    let mut changes = Vec::new();
    let dir = plugin_dir(&raven);
    for (file, text) in PLUGIN_FILES {
        changes.push(FileChange::to(dir.join(file), (*text).to_owned())?);
    }
    let after_text = if after == before && !before_text.trim().is_empty() {
        before_text
    } else {
        to_json_text(&after)
    };
    changes.push(FileChange::to(&cfg_path, after_text)?);
    let mut notes = vec![match route {
        Route::Plugin => format!(
            "Raven ({}) now loads the skillsearch plugin from {} in `{}` mode over {} skill root(s), deadline {} ms.",
            raven.display(),
            dir.display(),
            section.mode,
            section.skills.len(),
            section.deadline_ms
        ),
        Route::Mcp => format!(
            "Raven ({}) now runs `skillsearch mcp` as its MCP server `{ID}` (tools mcp_{ID}_skill_search / mcp_{ID}_skill_read) over {} skill root(s); the plugin is listed in plugins.disabled.",
            raven.display(),
            section.skills.len()
        ),
    }];
    if section.mode == "auto" {
        notes.push(
            "auto injects through the plugin's `skills` context segment, which stock Raven 0.1.9 never builds (it has no `context_segments` contribution point): there, turns get no skills. on_demand works on stock Raven.".to_owned(),
        );
    }
    notes.push("Check it with: skillsearch doctor raven".to_owned());
    Ok(SetupPlan {
        changes,
        notes,
        ..Default::default()
    })
}

pub fn doctor(_home: &Path) -> Result<Vec<Check>> {
    let raven = raven_dir()?;
    let mut checks = Vec::new();
    let cfg_path = config_path(&raven);
    let cfg = match super::read_optional(&cfg_path)? {
        None => {
            checks.push(Check::fail(
                "config",
                format!("{} does not exist", cfg_path.display()),
                FIX_SETUP,
            ));
            return Ok(checks);
        }
        Some(text) => match parse_config(&text, &cfg_path) {
            Ok(v) => v,
            Err(e) => {
                checks.push(Check::fail(
                    "config",
                    format!("{e:#}"),
                    format!("fix {}, then run {FIX_SETUP}", cfg_path.display()),
                ));
                return Ok(checks);
            }
        },
    };
    let section = match read_section(&cfg, &cfg_path) {
        Ok(Some(s)) => s,
        Ok(None) => {
            checks.push(Check::fail(
                "config",
                format!("no plugins.config.{ID} in {}", cfg_path.display()),
                FIX_SETUP,
            ));
            return Ok(checks);
        }
        Err(msg) => {
            checks.push(Check::fail(
                "config",
                msg,
                format!("{FIX_SETUP} --mode on_demand (or auto), or correct the key"),
            ));
            return Ok(checks);
        }
    };
    let mcp = mcp_entry(&cfg);
    let off = disabled(&cfg);
    let route = if mcp.is_some() && off {
        Route::Mcp
    } else {
        Route::Plugin
    };
    checks.push(Check::ok(
        "config",
        format!(
            "plugins.config.{ID} in {}: mode {}, route {}",
            cfg_path.display(),
            section.mode,
            if route == Route::Mcp { "mcp" } else { "plugin" }
        ),
    ));

    let dir = plugin_dir(&raven);
    if route == Route::Plugin {
        checks.push(super::plugin_files_check(&dir, PLUGIN_FILES, FIX_SETUP)?);
        if off {
            checks.push(Check::fail(
                "plugin-enabled",
                format!("`{ID}` is in plugins.disabled: Raven does not load the plugin"),
                format!("{FIX_SETUP} --set route=plugin"),
            ));
        }
        if mcp.is_some() {
            checks.push(Check::warn(
                "mcp-server",
                format!(
                    "tools.mcpServers.{ID} is set too: the model is offered skill_search twice"
                ),
                format!("{FIX_SETUP} --set route=plugin (or --set route=mcp)"),
            ));
        }
        if section.mode == "auto" {
            checks.push(Check::warn(
                "context-segments",
                "auto injects through the plugin's `skills` context segment; stock Raven 0.1.9 has no `context_segments` contribution point and never builds it, so turns there get no skills",
                format!("{FIX_SETUP} --mode on_demand (works on stock Raven), or run a Raven that builds plugin segments"),
            ));
        }
    } else {
        let command = mcp
            .and_then(|m| m.get("command"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let args: Vec<&str> = mcp
            .and_then(|m| m.get("args"))
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        checks.push(if !is_executable(Path::new(command)) {
            Check::fail(
                "mcp-server",
                format!("tools.mcpServers.{ID}.command `{command}` is not an executable file"),
                format!("{FIX_SETUP} --set route=mcp"),
            )
        } else if !args.contains(&"mcp") || args.contains(&"auto") {
            Check::fail(
                "mcp-server",
                format!(
                    "tools.mcpServers.{ID}.args {args:?} do not run `skillsearch mcp --mode on_demand`"
                ),
                format!("{FIX_SETUP} --set route=mcp"),
            )
        } else {
            Check::ok(
                "mcp-server",
                format!("{command} {}", args.join(" ")),
            )
        });
    }

    let binary = super::binary_check(
        &mut checks,
        &section.binary,
        &format!("no plugins.config.{ID}.binary"),
        "Raven",
        FIX_SETUP,
    );
    let roots = if section.skills.is_empty() {
        vec![workspace(&cfg, &raven).join("skills").display().to_string()]
    } else {
        section.skills.clone()
    };
    checks.push(super::roots_check(&roots, FIX_SETUP));
    if let Some(b) = binary {
        checks.push(super::probe_engine(
            &b,
            &section.home,
            &section.mode,
            section.deadline_ms,
            &roots,
            "raven",
        ));
    }
    Ok(checks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::plugin_config::KEYS;

    #[test]
    fn the_embedded_manifest_lists_every_key_setup_writes() {
        let manifest: toml::Value = toml::from_str(PLUGIN_FILES[0].1).unwrap();
        let props = manifest["plugin"]["config_schema"]["properties"]
            .as_table()
            .unwrap();
        let mut names: Vec<&str> = props.keys().map(String::as_str).collect();
        names.sort_unstable();
        let mut keys = KEYS.to_vec();
        keys.sort_unstable();
        assert_eq!(names, keys);
        let modes: Vec<&str> = props["mode"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(toml::Value::as_str)
            .collect();
        assert_eq!(modes.len(), MODES.len());
        assert!(MODES.iter().all(|m| modes.contains(m)));
    }

    #[test]
    fn a_section_naming_an_unknown_key_or_mode_is_an_error_naming_it() {
        let p = Path::new("config.json");
        let bad = json!({"plugins": {"config": {ID: {"mode": "atuo"}}}});
        let e = read_section(&bad, p).err().unwrap();
        assert!(
            e.contains("plugins.config.skillsearch.mode") && e.contains("atuo"),
            "{e}"
        );
        let bad = json!({"plugins": {"config": {ID: {"moode": "auto"}}}});
        let e = read_section(&bad, p).err().unwrap();
        assert!(
            e.contains("unknown key `plugins.config.skillsearch.moode`"),
            "{e}"
        );
        let good = json!({"plugins": {"config": {ID: {"mode": "auto", "deadline_ms": 700}}}});
        let s = read_section(&good, p).unwrap().unwrap();
        assert_eq!((s.mode.as_str(), s.deadline_ms), ("auto", 700));
    }
}
