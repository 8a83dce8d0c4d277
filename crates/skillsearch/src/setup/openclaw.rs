//! OpenClaw: installs the skillsearch plugin (context engine, `before_prompt_build` hook, tools)
//! and checks every gate that makes it silently inert.
//!
//! The plugin's files ship inside this binary. `setup` writes them to `<home>/openclaw/plugin`,
//! edits OpenClaw's config (plugin entry, hook permission, context-engine slot, mode), and runs
//! OpenClaw's own installer once so the capability consent OpenClaw keeps in its state database
//! is recorded for exactly these files.

use super::doctor::{self, Gate, Spec, Test, Want, flag};
use super::{Check, FileChange, SetupPlan, SetupRequest, get_path, set_path, to_json_text};
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

pub const PLUGIN_ID: &str = "skillsearch";

const INDEX_JS: &str = include_str!("../../../../hosts/openclaw/index.js");
const ENGINE_JS: &str = include_str!("../../../../hosts/openclaw/engine.js");
const PACKAGE_JSON: &str = include_str!("../../../../hosts/openclaw/package.json");
/// Checked in so the repository's `hosts/openclaw` is an installable plugin as it stands;
/// pinned to [`manifest`] and [`tool_defs`] by tests.
#[cfg(test)]
const MANIFEST_JSON: &str = include_str!("../../../../hosts/openclaw/openclaw.plugin.json");
#[cfg(test)]
const TOOLS_JSON: &str = include_str!("../../../../hosts/openclaw/tools.json");

/// Config keys only the plugin reads; every other key is a skillsearch setting it forwards.
pub const PLUGIN_ONLY_KEYS: &[(&str, &str)] = &[
    (
        "binary",
        "Path of the skillsearch binary the plugin runs. Empty: `skillsearch` on PATH.",
    ),
    (
        "home",
        "skillsearch's home (indexes, config.toml, decision log). Empty: SKILLSEARCH_HOME, else ~/.skillsearch.",
    ),
    (
        "url",
        "A running `skillsearch serve` daemon (e.g. http://127.0.0.1:7077) to use instead of a child the plugin starts. Settings then come from the daemon.",
    ),
    (
        "token",
        "Bearer token for `url`, when the daemon was started with --token.",
    ),
];

/// The plugin manifest: its `configSchema` is skillsearch's own config schema plus the
/// plugin-only keys, so every key skillsearch accepts is one OpenClaw accepts, and no other.
pub fn manifest() -> Value {
    let schema = skillsearch_core::config::schema();
    let mut props = schema["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for (k, doc) in PLUGIN_ONLY_KEYS {
        props.insert((*k).into(), json!({"type": "string", "description": doc}));
    }
    let props: serde_json::Map<String, Value> = {
        let mut v: Vec<_> = props.into_iter().collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v.into_iter().collect()
    };
    json!({
        "id": PLUGIN_ID,
        "name": "skillsearch",
        "description": "The few skills and plugin tools each turn needs, found by a warm local engine",
        "kind": "context-engine",
        "contracts": {"tools": [skillsearch_core::turn::tools::SKILL_SEARCH, skillsearch_core::turn::tools::SKILL_READ]},
        "activation": {"onStartup": true},
        "configSchema": {"type": "object", "additionalProperties": false, "properties": props},
    })
}

/// `tools.json` beside the plugin: the tool strings every host gets, from the engine's constants.
pub fn tool_defs() -> Value {
    skillsearch_core::turn::tools::tool_definitions()
}

/// Where OpenClaw keeps its config and state, as OpenClaw itself resolves them.
pub struct Paths {
    pub config: PathBuf,
    pub state: PathBuf,
}

impl Paths {
    pub fn resolve(options: &[(String, String)]) -> Result<Paths> {
        let opt = |k: &str| options.iter().find(|(key, _)| key == k).map(|(_, v)| v);
        let env = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let state = match opt("state_dir")
            .map(PathBuf::from)
            .or_else(|| env("OPENCLAW_STATE_DIR"))
        {
            Some(s) => s,
            None => env("HOME")
                .context("HOME is not set; pass --set state_dir=DIR (OpenClaw's state directory)")?
                .join(".openclaw"),
        };
        let config = opt("config")
            .map(PathBuf::from)
            .or_else(|| env("OPENCLAW_CONFIG_PATH"))
            .unwrap_or_else(|| state.join("openclaw.json"));
        Ok(Paths { config, state })
    }
}

/// Reads OpenClaw's config (JSON5, as OpenClaw reads it). A missing file is an empty config.
pub fn read_config(path: &Path) -> Result<(Option<String>, Value)> {
    let Some(text) = super::read_optional(path)? else {
        return Ok((None, json!({})));
    };
    let v: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(_) => json5::from_str(&text).with_context(|| {
            format!(
                "{} is not valid JSON5; fix it (openclaw doctor) and run setup again",
                path.display()
            )
        })?,
    };
    if !v.is_object() {
        bail!("{} does not hold a JSON object", path.display());
    }
    Ok((Some(text), v))
}

fn known_options() -> &'static [&'static str] {
    &[
        "config",
        "state_dir",
        "openclaw",
        "catalog",
        "replace_context_engine",
    ]
}

/// The context engine that holds `plugins.slots.contextEngine`, unless it is OpenClaw's own
/// (`legacy`, or unset) or ours.
pub fn other_context_engine(cfg: &Value) -> Option<String> {
    get_path(cfg, &["plugins", "slots", "contextEngine"])
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|h| !h.is_empty() && *h != "legacy" && *h != PLUGIN_ID)
        .map(String::from)
}

/// Whether setup takes the context-engine slot. A free slot (unset, `legacy`) is taken in both
/// modes: in `auto` the engine injects the skills, in `on_demand` it learns the turn's tools so
/// they can be narrowed. Another engine's slot is never taken silently: in `on_demand` it is
/// kept (no slot is needed there), in `auto` setup stops and names it unless
/// `replace_context_engine` says what to do (`true`: take it; `false`: keep it and inject
/// through the `before_prompt_build` hook).
fn take_slot(holder: Option<&str>, mode: &str, replace: Option<bool>) -> Result<bool> {
    Ok(match (holder, mode, replace) {
        (None, _, _) => true,
        (Some(_), _, Some(take)) => take,
        (Some(_), "on_demand", None) => false,
        (Some(other), _, None) => bail!(
            "plugins.slots.contextEngine is `{other}`: OpenClaw runs one context engine, and setup will not take the slot from `{other}` silently. Run again with --set replace_context_engine=true to make skillsearch the context engine (`{other}` stays installed; the backup keeps the old value), or with --set replace_context_engine=false to keep `{other}` and inject skills through the before_prompt_build hook (tools are then not narrowed: only a context engine learns the turn's tool list)"
        ),
    })
}

/// OpenClaw's own skill roots for the default agent, highest precedence first (the order of
/// OpenClaw 2026.9's loader; the plugin computes the same list at run time).
pub fn openclaw_roots(cfg: &Value, paths: &Paths, openclaw: Option<&Path>) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    let ws = get_path(cfg, &["agents", "defaults", "workspace"])
        .and_then(Value::as_str)
        .map(PathBuf::from)
        .unwrap_or_else(|| paths.state.join("workspace"));
    roots.push(ws.join("skills"));
    roots.push(ws.join(".agents").join("skills"));
    if std::env::var_os("OPENCLAW_STATE_DIR").is_none()
        && let Some(h) = std::env::var_os("HOME")
    {
        roots.push(PathBuf::from(h).join(".agents").join("skills"));
    }
    roots.push(paths.state.join("skills"));
    if let Some(pkg) = openclaw.and_then(package_dir) {
        roots.push(pkg.join("skills"));
        roots.push(pkg.join("custodian-skills"));
    }
    for d in get_path(cfg, &["skills", "load", "extraDirs"])
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        roots.push(PathBuf::from(d));
    }
    roots.push(paths.state.join("plugin-skills"));
    let mut seen = std::collections::HashSet::new();
    roots.retain(|r| r.is_dir() && seen.insert(r.clone()));
    roots
}

/// The `openclaw` package directory behind its launcher (`…/node_modules/.bin/openclaw` links
/// to `…/node_modules/openclaw/openclaw.mjs`).
fn package_dir(bin: &Path) -> Option<PathBuf> {
    let real = bin.canonicalize().ok()?;
    real.ancestors()
        .find(|d| {
            std::fs::read_to_string(d.join("package.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .is_some_and(|v| v["name"] == "openclaw")
        })
        .map(Path::to_path_buf)
}

/// Names of the skills OpenClaw always lists (`metadata.openclaw.always: true`).
fn always_skills(roots: &[PathBuf]) -> Vec<String> {
    let (files, _) = skillsearch_core::corpus::discover(&skillsearch_core::Roots::explicit(
        roots.iter().cloned(),
    ));
    let mut names: Vec<String> = files
        .iter()
        .map(|f| skillsearch_core::corpus::load(&f.path, 1 << 20))
        .filter(|s| s.valid && s.meta.openclaw.always)
        .map(|s| s.meta.name)
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The plan: plugin files under `<home>/openclaw/plugin`, and OpenClaw's config edited to load,
/// trust and select it.
pub fn setup(req: &SetupRequest) -> Result<SetupPlan> {
    for (k, _) in &req.options {
        if !known_options().contains(&k.as_str()) {
            bail!(
                "--set {k}: not an option of `setup openclaw`; known: {}",
                known_options().join(", ")
            );
        }
    }
    let paths = Paths::resolve(&req.options)?;
    let plugin_dir = plugin_dir(&req.home);
    let mut plan = SetupPlan::default();
    for (name, text) in plugin_files() {
        plan.changes
            .push(FileChange::to(plugin_dir.join(name), text)?);
    }
    let (before, mut cfg) = read_config(&paths.config)?;
    let was_loaded = get_path(&cfg, &["plugins", "load", "paths"])
        .and_then(Value::as_array)
        .is_some_and(|a| {
            a.iter()
                .any(|p| p.as_str() == Some(&*plugin_dir.to_string_lossy()))
        });
    let had_comments = before
        .as_deref()
        .is_some_and(|t| serde_json::from_str::<Value>(t).is_err());
    let entry = ["plugins", "entries", PLUGIN_ID];
    let dir_text = plugin_dir.display().to_string();
    let mut load: Vec<Value> = get_path(&cfg, &["plugins", "load", "paths"])
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !load.iter().any(|p| p.as_str() == Some(dir_text.as_str())) {
        load.push(Value::String(dir_text.clone()));
    }
    set_path(&mut cfg, &["plugins", "load", "paths"], Value::Array(load))?;
    set_path(
        &mut cfg,
        &[entry[0], entry[1], entry[2], "enabled"],
        json!(true),
    )?;
    set_path(
        &mut cfg,
        &[
            entry[0],
            entry[1],
            entry[2],
            "hooks",
            "allowConversationAccess",
        ],
        json!(true),
    )?;
    let mut pc = get_path(&cfg, &[entry[0], entry[1], entry[2], "config"])
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mode = req
        .mode
        .clone()
        .or_else(|| pc.get("mode").and_then(Value::as_str).map(String::from))
        .unwrap_or_else(|| "on_demand".into());
    let replace = match req
        .options
        .iter()
        .rev()
        .find(|(k, _)| k == "replace_context_engine")
        .map(|(_, v)| v.as_str())
    {
        None => None,
        Some("true") => Some(true),
        Some("false") => Some(false),
        Some(other) => {
            bail!("--set replace_context_engine={other}: expected true or false")
        }
    };
    let holder = other_context_engine(&cfg);
    let slot = ["plugins", "slots", "contextEngine"];
    if take_slot(holder.as_deref(), &mode, replace)? {
        set_path(&mut cfg, &slot, json!(PLUGIN_ID))?;
        if let Some(other) = &holder {
            plan.notes.push(format!(
                "plugins.slots.contextEngine was `{other}`; it is now `{PLUGIN_ID}` (the backup of the config keeps the old value)."
            ));
        }
    } else if let Some(other) = &holder {
        // OpenClaw's installer sets the slot for a context-engine plugin: put it back after.
        plan.pins.push(super::Pin {
            file: paths.config.clone(),
            path: slot.iter().map(|s| s.to_string()).collect(),
            value: json!(other),
        });
        plan.notes.push(format!(
            "plugins.slots.contextEngine stays `{other}`: {}",
            if mode == "auto" {
                "skills are injected through the before_prompt_build hook, and tools are not narrowed (only a context engine learns the turn's tool list)"
            } else {
                "on_demand needs no slot; tools are not narrowed (only a context engine learns the turn's tool list)"
            }
        ));
    }
    pc.insert("mode".into(), json!(mode));
    pc.insert("binary".into(), json!(req.binary.display().to_string()));
    pc.insert("home".into(), json!(req.home.display().to_string()));
    if !req.skills.is_empty() {
        let abs: Vec<String> = req
            .skills
            .iter()
            .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()))
            .map(|p| p.display().to_string())
            .collect();
        pc.insert("skills".into(), json!(abs));
    }
    set_path(
        &mut cfg,
        &[entry[0], entry[1], entry[2], "config"],
        Value::Object(pc),
    )?;
    let openclaw = req
        .options
        .iter()
        .find(|(k, _)| k == "openclaw")
        .map(|(_, v)| PathBuf::from(v))
        .or_else(|| super::on_path("openclaw"));
    match req
        .options
        .iter()
        .rev()
        .find(|(k, _)| k == "catalog")
        .map(|(_, v)| v.as_str())
    {
        None | Some("keep") => {}
        Some("handover") => {
            // OpenClaw lists only what this allowlist names; skillsearch serves the rest per
            // turn. Skills OpenClaw always lists stay listed.
            let roots = openclaw_roots(&cfg, &paths, openclaw.as_deref());
            let always = always_skills(&roots);
            plan.notes.push(format!(
                "Catalog handed over: agents.defaults.skills = {:?} ({} always-on skills stay in OpenClaw's own list; remove the key to list every skill again). Agents with their own agents.entries.*.skills keep their list.",
                always,
                always.len()
            ));
            set_path(&mut cfg, &["agents", "defaults", "skills"], json!(always))?;
        }
        Some(other) => bail!(
            "--set catalog={other}: use `handover` (OpenClaw stops listing skills that skillsearch serves) or `keep`"
        ),
    }
    let after = to_json_text(&cfg);
    let config_change = FileChange {
        path: paths.config.clone(),
        before,
        after,
        executable: false,
    };
    let files_change = plan.changes.iter().any(FileChange::changes);
    plan.changes.push(config_change);
    if had_comments {
        plan.notes.push(format!(
            "Note: {} had JSON5 comments or trailing commas; it is rewritten as plain JSON (the backup keeps the original).",
            paths.config.display()
        ));
    }
    // OpenClaw records consent and provenance for the exact files it installed: rerun its
    // installer whenever they change, or when this config never loaded them.
    if files_change || !was_loaded {
        let mut args = vec![
            "plugins".to_string(),
            "install".into(),
            "-l".into(),
            dir_text.clone(),
        ];
        // 2026.8+ wants --force for a source outside ClawHub and --accept-capabilities for
        // consent; 2026.7 rejects both next to --link.
        if openclaw
            .as_deref()
            .and_then(openclaw_version)
            .is_none_or(|v| v >= (2026, 8))
        {
            args.push("--force".into());
            args.push("--accept-capabilities".into());
        }
        match openclaw {
            Some(bin) => plan.commands.push(super::Command {
                program: bin,
                args,
                env: vec![
                    ("OPENCLAW_CONFIG_PATH".into(), paths.config.display().to_string()),
                    ("OPENCLAW_STATE_DIR".into(), paths.state.display().to_string()),
                ],
                why: "records OpenClaw's capability consent for the plugin's files".into(),
            }),
            None => plan.notes.push(format!(
                "openclaw is not on PATH: run `openclaw plugins install -l {dir_text} --force --accept-capabilities` yourself (or pass --set openclaw=PATH) so OpenClaw records its consent."
            )),
        }
    }
    plan.notes.push(format!(
        "skillsearch serves OpenClaw in {mode} mode{}. Check it with: skillsearch doctor openclaw",
        if req.skills.is_empty() {
            ", from OpenClaw's own skill roots for the agent's workspace".to_string()
        } else {
            String::new()
        }
    ));
    Ok(plan)
}

/// `(year, month)` of the OpenClaw release behind `bin` (`openclaw --version` prints
/// `OpenClaw 2026.9.6 (eb377ac)`).
pub fn openclaw_version(bin: &Path) -> Option<(u32, u32)> {
    let out = std::process::Command::new(bin)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    parse_version(&String::from_utf8_lossy(&out.stdout))
}

fn parse_version(text: &str) -> Option<(u32, u32)> {
    let v = text.split_whitespace().find(|w| w.starts_with("20"))?;
    let mut parts = v.split(['.', '-']);
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

pub fn plugin_dir(home: &Path) -> PathBuf {
    let home = std::path::absolute(home).unwrap_or_else(|_| home.to_path_buf());
    home.join("openclaw").join("plugin")
}

fn plugin_files() -> Vec<(&'static str, String)> {
    vec![
        ("package.json", PACKAGE_JSON.to_string()),
        ("index.js", INDEX_JS.to_string()),
        ("engine.js", ENGINE_JS.to_string()),
        ("openclaw.plugin.json", to_json_text(&manifest())),
        ("tools.json", to_json_text(&tool_defs())),
    ]
}

/// Every gate that can leave the plugin silently inert, each with its one-line fix.
pub fn doctor(home: &Path) -> Result<Vec<Check>> {
    let mut checks = Vec::new();
    let paths = Paths::resolve(&[])?;
    let fix_setup = "skillsearch setup openclaw";
    let (text, cfg) = match read_config(&paths.config) {
        Ok((Some(t), v)) => (t, v),
        Ok((None, _)) => {
            checks.push(Check::fail(
                "config",
                format!("no OpenClaw config at {}", paths.config.display()),
                format!("{fix_setup} (or set OPENCLAW_CONFIG_PATH / OPENCLAW_STATE_DIR to the one OpenClaw uses)"),
            ));
            return Ok(checks);
        }
        Err(e) => {
            checks.push(Check::fail(
                "config",
                format!("{e:#}"),
                "openclaw doctor --fix",
            ));
            return Ok(checks);
        }
    };
    let _ = text;
    checks.push(Check::ok("config", format!("{}", paths.config.display())));
    let entry = get_path(&cfg, &["plugins", "entries", PLUGIN_ID]);
    let pc = entry
        .and_then(|e| e.get("config"))
        .cloned()
        .unwrap_or_else(|| json!({}));
    let mode = pc
        .get("mode")
        .and_then(Value::as_str)
        .unwrap_or("on_demand")
        .to_string();

    // Installed: the plugin directory is loaded, its files are this binary's.
    let loaded: Vec<PathBuf> = get_path(&cfg, &["plugins", "load", "paths"])
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(PathBuf::from)
                .collect()
        })
        .unwrap_or_default();
    let ours = loaded
        .iter()
        .find(|d| manifest_id(d).as_deref() == Some(PLUGIN_ID));
    match ours {
        None => checks.push(Check::fail(
            "plugin installed",
            "no directory in plugins.load.paths holds the skillsearch plugin",
            fix_setup,
        )),
        Some(dir) => {
            let stale: Vec<&str> = plugin_files()
                .iter()
                .filter(|(name, want)| {
                    std::fs::read_to_string(dir.join(name)).ok().as_deref() != Some(want.as_str())
                })
                .map(|(name, _)| *name)
                .collect();
            if stale.is_empty() {
                checks.push(Check::ok("plugin installed", format!("{}", dir.display())));
            } else {
                checks.push(Check::fail(
                    "plugin installed",
                    format!(
                        "{} differs from this skillsearch {} ({})",
                        dir.display(),
                        env!("CARGO_PKG_VERSION"),
                        stale.join(", ")
                    ),
                    fix_setup,
                ));
            }
        }
    }
    let denied = get_path(&cfg, &["plugins", "deny"])
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|v| v == PLUGIN_ID));
    let not_allowed = get_path(&cfg, &["plugins", "allow"])
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty() && !a.iter().any(|v| v == PLUGIN_ID));
    let allow_fix = "add \"skillsearch\" to plugins.allow and remove it from plugins.deny";
    let entry_hooks = |k| ["plugins", "entries", PLUGIN_ID, "hooks", k];
    let specs = vec![
        Spec {
            name: "plugin enabled",
            gates: vec![
                Gate::fail(
                    flag(&cfg, &["plugins", "enabled"], Want::NotFalse),
                    "plugins.enabled is false: no plugin loads",
                    "set plugins.enabled to true in openclaw.json",
                ),
                Gate::fail(
                    Test::Shut(denied),
                    "plugins.deny lists skillsearch",
                    allow_fix,
                ),
                Gate::fail(
                    Test::Shut(not_allowed),
                    "plugins.allow does not list skillsearch",
                    allow_fix,
                ),
                Gate::fail(
                    flag(
                        &cfg,
                        &["plugins", "entries", PLUGIN_ID, "enabled"],
                        Want::True,
                    ),
                    "plugins.entries.skillsearch.enabled is not true",
                    "openclaw plugins enable skillsearch --accept-capabilities",
                ),
            ],
            ok: Some("plugins.entries.skillsearch.enabled".into()),
        },
        Spec {
            name: "hook permission",
            gates: vec![Gate::fail(
                flag(&cfg, &entry_hooks("allowConversationAccess"), Want::True),
                "hooks.allowConversationAccess is not true: OpenClaw drops the before_prompt_build hook without a word (no tool visibility, no auto mode before 2026.8)",
                format!(
                    "{fix_setup} (it sets plugins.entries.skillsearch.hooks.allowConversationAccess = true)"
                ),
            )],
            ok: Some("plugins.entries.skillsearch.hooks.allowConversationAccess".into()),
        },
        Spec {
            name: "prompt injection",
            gates: vec![Gate::fail(
                flag(&cfg, &entry_hooks("allowPromptInjection"), Want::NotFalse),
                "hooks.allowPromptInjection is false: injected skills are blocked",
                "remove plugins.entries.skillsearch.hooks.allowPromptInjection",
            )],
            ok: None,
        },
    ];
    checks.extend(doctor::eval_all(specs));
    let slot = get_path(&cfg, &["plugins", "slots", "contextEngine"]).and_then(Value::as_str);
    let held = match slot {
        Some(PLUGIN_ID) => None,
        Some(other) => Some(format!("`{other}`")),
        None => Some("unset (legacy)".to_owned()),
    };
    let take = "skillsearch setup openclaw --set replace_context_engine=true";
    checks.push(match (held, mode.as_str()) {
        (None, "auto") => Check::ok(
            "route",
            "auto: skills are injected by skillsearch's context engine (plugins.slots.contextEngine = skillsearch), tools narrowed to the turn's",
        ),
        (None, _) => Check::ok(
            "route",
            "on_demand: skill_search / skill_read tools; skillsearch's context engine learns the turn's tools, so they are narrowed",
        ),
        (Some(holder), "auto") => Check::warn(
            "route",
            format!("auto: skills are injected by the before_prompt_build hook (plugins.slots.contextEngine is {holder}); tools are not narrowed, since only a context engine learns the turn's tool list"),
            if slot.is_some_and(|s| s != "legacy") { take } else { fix_setup },
        ),
        (Some(holder), _) => Check::warn(
            "route",
            format!("on_demand: skill_search / skill_read tools (plugins.slots.contextEngine is {holder}); tools are not narrowed, since only a context engine learns the turn's tool list"),
            if slot.is_some_and(|s| s != "legacy") { take } else { fix_setup },
        ),
    });
    // Our config against the manifest's schema: an undeclared key or a bad value makes OpenClaw
    // refuse the whole plugin config.
    let problems = validate_config(&pc);
    if problems.is_empty() {
        checks.push(Check::ok(
            "plugin config",
            format!("valid against the manifest (mode {mode})"),
        ));
    } else {
        checks.push(Check::fail(
            "plugin config",
            problems.join("; "),
            "fix plugins.entries.skillsearch.config in openclaw.json, or rerun setup",
        ));
    }
    // A daemon instead of a child: it must be listening. Otherwise the binary the plugin runs.
    if let Some(url) = pc
        .get("url")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty())
    {
        checks.push(match daemon_reachable(url) {
            Ok(()) => Check::ok("daemon", format!("{url} accepts connections")),
            Err(e) => Check::fail(
                "daemon",
                format!("plugin config url {url}: {e}"),
                "start it (skillsearch serve --listen <addr>) or remove `url` to let the plugin start its own engine",
            ),
        });
    } else {
        let binary = pc
            .get("binary")
            .and_then(Value::as_str)
            .filter(|b| !b.is_empty())
            .map(PathBuf::from);
        match binary.clone().or_else(|| super::on_path("skillsearch")) {
            Some(b) if super::is_executable(&b) => {
                checks.push(Check::ok("binary", format!("{}", b.display())))
            }
            Some(b) => checks.push(Check::fail(
                "binary",
                format!("{} is not an executable file", b.display()),
                fix_setup,
            )),
            None => checks.push(Check::fail(
                "binary",
                "no `binary` in the plugin config and no skillsearch on PATH",
                fix_setup,
            )),
        }
    }
    // The hook's deadline against OpenClaw's hook timeout.
    let deadline = pc
        .get("deadline_ms")
        .and_then(Value::as_u64)
        .unwrap_or(8000);
    let timeout = get_path(
        &cfg,
        &["plugins", "entries", PLUGIN_ID, "hooks", "timeoutMs"],
    )
    .and_then(Value::as_u64)
    .unwrap_or(15_000);
    if deadline + 1000 > timeout {
        checks.push(Check::warn(
            "deadline",
            format!(
                "deadline_ms {deadline} leaves under 1 s of OpenClaw's {timeout} ms hook timeout"
            ),
            "lower plugins.entries.skillsearch.config.deadline_ms",
        ));
    } else {
        checks.push(Check::ok(
            "deadline",
            format!("{deadline} ms, inside OpenClaw's {timeout} ms hook timeout"),
        ));
    }
    // Tool policy hiding our tools in on_demand mode.
    if mode == "on_demand" {
        let deny = get_path(&cfg, &["tools", "deny"])
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let allow = get_path(&cfg, &["tools", "allow"])
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let hidden: Vec<&str> = ["skill_search", "skill_read"]
            .into_iter()
            .filter(|t| {
                deny.iter().any(|d| d == t) || (!allow.is_empty() && !allow.iter().any(|a| a == t))
            })
            .collect();
        if hidden.is_empty() {
            checks.push(Check::ok(
                "tools visible",
                "skill_search and skill_read are direct-only: Tool Search does not hide them",
            ));
        } else {
            checks.push(Check::fail(
                "tools visible",
                format!("tools.allow / tools.deny hide {}", hidden.join(", ")),
                "add skill_search and skill_read to tools.allow (or remove them from tools.deny)",
            ));
        }
    }
    // Which runtime runs each agent's turns on the installed release (plugin harnesses).
    let bin = super::on_path("openclaw");
    let version = bin
        .as_deref()
        .and_then(|b| super::openclaw_runtime::installed_version(b, &paths.config, &paths.state));
    let harnesses = super::openclaw_runtime::harness_plugins(&cfg, &paths.state);
    let env_runtime = std::env::var("OPENCLAW_AGENT_RUNTIME").ok();
    checks.extend(super::openclaw_runtime::runtime_checks(
        &cfg,
        version,
        &harnesses,
        env_runtime.as_deref(),
    ));
    checks.extend(runtime_inspection(&paths, &mode));
    let _ = home;
    Ok(checks)
}

/// Whether something listens at an `http://host:port` URL (connect within 2 s).
fn daemon_reachable(url: &str) -> Result<()> {
    use std::net::ToSocketAddrs;
    let rest = url
        .strip_prefix("http://")
        .context("only http:// URLs are served by `skillsearch serve`")?;
    let authority = rest.split('/').next().unwrap_or(rest);
    let addr = if authority.contains(':') {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    let sock = addr
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {addr}"))?
        .next()
        .with_context(|| format!("{addr} resolves to nothing"))?;
    std::net::TcpStream::connect_timeout(&sock, std::time::Duration::from_secs(2))
        .with_context(|| format!("nothing listens at {sock}"))?;
    Ok(())
}

fn manifest_id(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("openclaw.plugin.json")).ok()?;
    let v: Value = json5::from_str(&text).ok()?;
    v.get("id")?.as_str().map(String::from)
}

/// Checks a plugin config against the manifest schema (the subset skillsearch's schema uses).
pub fn validate_config(pc: &Value) -> Vec<String> {
    let m = manifest();
    let props = &m["configSchema"]["properties"];
    let mut out = Vec::new();
    let Some(obj) = pc.as_object() else {
        return vec!["the plugin config is not an object".into()];
    };
    for (k, v) in obj {
        let Some(schema) = props.get(k) else {
            out.push(format!("unknown key `{k}`"));
            continue;
        };
        let ty = schema["type"].as_str().unwrap_or("");
        let ok = match ty {
            "string" => v.is_string(),
            "integer" => v.is_i64() || v.is_u64(),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            "array" => v.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
            _ => true,
        };
        if !ok {
            out.push(format!("`{k}` must be of type {ty}, not {v}"));
            continue;
        }
        if let Some(e) = schema["enum"].as_array().filter(|e| !e.contains(v)) {
            let allowed: Vec<String> = e.iter().map(|x| x.to_string()).collect();
            out.push(format!("`{k}` is {v}, not one of {}", allowed.join(", ")));
        }
        if let (Some(n), Some(min)) = (v.as_f64(), schema["minimum"].as_f64())
            && n < min
        {
            out.push(format!("`{k}` is {n}, below {min}"));
        }
        if let (Some(n), Some(max)) = (v.as_f64(), schema["maximum"].as_f64())
            && n > max
        {
            out.push(format!("`{k}` is {n}, above {max}"));
        }
    }
    out
}

/// What the host itself reports after loading the plugin: `openclaw plugins inspect
/// skillsearch --runtime --json` (the only place blocked hooks and contract errors appear).
fn runtime_inspection(paths: &Paths, mode: &str) -> Vec<Check> {
    let Some(bin) = super::on_path("openclaw") else {
        return vec![Check::warn(
            "runtime",
            "openclaw is not on PATH, so the loaded plugin could not be inspected",
            "put openclaw on PATH and run skillsearch doctor openclaw again",
        )];
    };
    let res = std::process::Command::new(&bin)
        .args(["plugins", "inspect", PLUGIN_ID, "--runtime", "--json"])
        .env("OPENCLAW_CONFIG_PATH", &paths.config)
        .env("OPENCLAW_STATE_DIR", &paths.state)
        .stdin(std::process::Stdio::null())
        .output();
    let v: Value = match res {
        Ok(o) if o.status.success() => match serde_json::from_slice(&o.stdout) {
            Ok(v) => v,
            Err(e) => {
                return vec![Check::warn(
                    "runtime",
                    format!("openclaw plugins inspect printed no JSON: {e}"),
                    "run `openclaw plugins inspect skillsearch --runtime --json` and read its errors",
                )];
            }
        },
        Ok(o) => {
            return vec![Check::fail(
                "runtime",
                format!(
                    "openclaw plugins inspect skillsearch failed: {}",
                    String::from_utf8_lossy(&o.stderr)
                        .trim()
                        .lines()
                        .last()
                        .unwrap_or("")
                ),
                "skillsearch setup openclaw",
            )];
        }
        Err(e) => {
            return vec![Check::warn(
                "runtime",
                format!("cannot run {}: {e}", bin.display()),
                "check the openclaw install",
            )];
        }
    };
    let mut out = Vec::new();
    let status = v["plugin"]["status"].as_str().unwrap_or("unknown");
    if status == "loaded" {
        out.push(Check::ok("runtime loaded", "OpenClaw loads the plugin"));
    } else {
        out.push(Check::fail(
            "runtime loaded",
            format!("OpenClaw reports the plugin as {status}"),
            "skillsearch setup openclaw",
        ));
    }
    let diags: Vec<String> = v["diagnostics"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| {
            d.get("message")
                .and_then(Value::as_str)
                .map(String::from)
                .unwrap_or_else(|| d.to_string())
        })
        .collect();
    if diags.is_empty() {
        out.push(Check::ok("runtime diagnostics", "none"));
    } else {
        out.push(Check::fail(
            "runtime diagnostics",
            diags.join("; "),
            "follow the message above, then rerun skillsearch setup openclaw",
        ));
    }
    let hooks: Vec<&str> = v["typedHooks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|h| h["name"].as_str())
        .collect();
    if hooks.contains(&"before_prompt_build") {
        out.push(Check::ok(
            "runtime hook",
            "before_prompt_build is registered",
        ));
    } else {
        out.push(Check::fail(
            "runtime hook",
            "before_prompt_build is not registered (blocked or not loaded)",
            "skillsearch setup openclaw",
        ));
    }
    let engines = v["plugin"]["contextEngineIds"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if engines.iter().any(|e| e == PLUGIN_ID) {
        out.push(Check::ok(
            "runtime context engine",
            "the skillsearch context engine is registered",
        ));
    } else {
        out.push(Check::fail(
            "runtime context engine",
            "no skillsearch context engine registered: turns degrade to legacy",
            "skillsearch setup openclaw",
        ));
    }
    if mode == "on_demand" {
        let tools: Vec<&str> = v["plugin"]["toolNames"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if tools.contains(&"skill_search") && tools.contains(&"skill_read") {
            out.push(Check::ok(
                "runtime tools",
                "skill_search and skill_read are registered",
            ));
        } else {
            out.push(Check::fail("runtime tools", "skill_search / skill_read are not registered (tools.json missing beside the plugin?)", "skillsearch setup openclaw"));
        }
    }
    if v["install"]["sourcePath"].is_null() {
        out.push(Check::warn("install record", "OpenClaw has no install record for the plugin, so it warns that it cannot verify where it came from", "skillsearch setup openclaw"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checked_in_manifest_and_tools_match_the_engine() {
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../hosts/openclaw");
            std::fs::write(
                format!("{dir}/openclaw.plugin.json"),
                to_json_text(&manifest()),
            )
            .unwrap();
            std::fs::write(format!("{dir}/tools.json"), to_json_text(&tool_defs())).unwrap();
            return;
        }
        let want = to_json_text(&manifest());
        assert_eq!(
            MANIFEST_JSON, want,
            "hosts/openclaw/openclaw.plugin.json is stale; write this:\n{want}"
        );
        let want = to_json_text(&tool_defs());
        assert_eq!(
            TOOLS_JSON, want,
            "hosts/openclaw/tools.json is stale; write this:\n{want}"
        );
    }

    #[test]
    fn versions_parse() {
        assert_eq!(
            parse_version("OpenClaw 2026.9.6 (eb377ac)\n"),
            Some((2026, 9))
        );
        assert_eq!(
            parse_version("OpenClaw 2026.7.35 (aa94808) — All your chats"),
            Some((2026, 7))
        );
        assert_eq!(parse_version("garbage"), None);
    }

    #[test]
    fn manifest_config_schema_is_skillsearch_schema_both_ways() {
        let m = manifest();
        let ours = skillsearch_core::config::schema();
        let props = m["configSchema"]["properties"].as_object().unwrap();
        assert_eq!(m["configSchema"]["additionalProperties"], json!(false));
        for (k, v) in ours["properties"].as_object().unwrap() {
            assert_eq!(
                props.get(k),
                Some(v),
                "skillsearch key `{k}` differs in the manifest"
            );
        }
        for k in props.keys() {
            assert!(
                ours["properties"].get(k).is_some() || PLUGIN_ONLY_KEYS.iter().any(|(p, _)| p == k),
                "manifest key `{k}` is neither a skillsearch key nor a plugin key"
            );
        }
    }
}
