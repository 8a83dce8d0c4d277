//! WorkBuddy desktop (Tencent's agent app on the CodeBuddy engine; the app itself cannot be
//! installed here): a marketplace with one plugin, written under `<home>/workbuddy/`. The
//! plugin (`.codebuddy-plugin/plugin.json`) carries the `UserPromptSubmit` hook in `auto`
//! (`hooks/hooks.json`, WorkBuddy runs plugin hooks) or the MCP server in `on_demand`
//! (`mcp/servers.json`); `.codebuddy-plugin/marketplace.json` at the marketplace's root makes it
//! installable from WorkBuddy's plugin settings. Default skill roots: WorkBuddy's own
//! (`~/.workbuddy-ai/skills`, `~/.workbuddy-ai/plugins/cache`).

use super::doctor::Spec;
use super::wiring::{self, Wiring};
use super::{Check, FileChange, SetupPlan, SetupRequest, to_json_text};
use anyhow::{Result, bail};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const HOST: &str = "workbuddy";
/// The marketplace's name, as WorkBuddy lists it.
pub const MARKETPLACE: &str = "skillsearch-local";

/// The marketplace directory and its plugin's files.
pub struct Paths {
    pub marketplace: PathBuf,
    pub plugin: PathBuf,
    pub hooks: PathBuf,
    pub servers: PathBuf,
}

impl Paths {
    pub fn of(home: &Path) -> Paths {
        let home = std::path::absolute(home).unwrap_or_else(|_| home.to_path_buf());
        let marketplace = home.join("workbuddy");
        let plugin = marketplace.join("plugin");
        Paths {
            hooks: plugin.join("hooks").join("hooks.json"),
            servers: plugin.join("mcp").join("servers.json"),
            marketplace,
            plugin,
        }
    }
}

/// WorkBuddy's own skill roots.
fn default_roots() -> Result<Vec<PathBuf>> {
    let data = wiring::user_home()?.join(".workbuddy-ai");
    Ok(vec![
        data.join("skills"),
        data.join("plugins").join("cache"),
    ])
}

fn plugin_manifest() -> Value {
    json!({
        "name": "skillsearch",
        "version": env!("CARGO_PKG_VERSION"),
        "description": "The few skills each turn needs, found by a local engine: injected every turn (auto) or through skill_search / skill_read (on_demand)",
        "author": {"name": "skillsearch"},
        "hooks": "./hooks/hooks.json",
        "mcpServers": "./mcp/servers.json"
    })
}

fn marketplace_manifest() -> Value {
    json!({
        "name": MARKETPLACE,
        "owner": {"name": "skillsearch"},
        "plugins": [{
            "name": "skillsearch",
            "source": "./plugin",
            "description": plugin_manifest()["description"],
            "version": env!("CARGO_PKG_VERSION")
        }]
    })
}

pub fn setup(req: &SetupRequest) -> Result<SetupPlan> {
    if let Some((k, _)) = req.options.first() {
        bail!("setup {HOST}: unknown option `{k}` (it takes none)");
    }
    let p = Paths::of(&req.home);
    let (h_text, mut hooks) = wiring::read_json(&p.hooks)?;
    let (m_text, mut servers) = wiring::read_json(&p.servers)?;
    let found = wiring::find_in_json(&hooks, &servers);
    let w = Wiring::new(
        req,
        (found.hook.is_some() || found.server.is_some()).then_some(&found),
        default_roots()?,
    )?;
    let hook = w.auto().then(|| w.hook_command(HOST));
    wiring::merge_prompt_hook(&mut hooks, &p.hooks, hook.as_deref())?;
    if w.auto() {
        wiring::remove_path(&mut servers, &["mcpServers", wiring::SERVER])?;
    } else {
        let entry =
            json!({"type": "stdio", "command": w.binary.to_string_lossy(), "args": w.mcp_args()});
        super::merge_keys(&mut servers, &["mcpServers", wiring::SERVER], entry)?;
    }
    // Both files are written in either mode (plugin.json names them); the other mode's is `{}`.
    let mut plan = SetupPlan::default();
    plan.changes.push(FileChange::to(
        p.plugin.join(".codebuddy-plugin").join("plugin.json"),
        to_json_text(&plugin_manifest()),
    )?);
    plan.changes.push(FileChange::to(
        p.marketplace
            .join(".codebuddy-plugin")
            .join("marketplace.json"),
        to_json_text(&marketplace_manifest()),
    )?);
    plan.changes
        .push(wiring::json_change(&p.hooks, h_text, &hooks));
    plan.changes
        .push(wiring::json_change(&p.servers, m_text, &servers));
    plan.notes.push(w.mode_note());
    plan.notes.push(format!(
        "Then, in WorkBuddy: add the marketplace {} (plugin settings, add a local marketplace) and install `skillsearch` from `{MARKETPLACE}`. WorkBuddy itself cannot be run on the machine skillsearch was tested on: the plugin's hook and MCP server are tested through the CodeBuddy engine it is built on. `skillsearch doctor {HOST}` checks the files.",
        p.marketplace.display()
    ));
    Ok(plan)
}

pub fn doctor(home: &Path) -> Result<Vec<Check>> {
    let p = Paths::of(home);
    let (_, hooks) = wiring::read_json(&p.hooks)?;
    let (_, servers) = wiring::read_json(&p.servers)?;
    let found = wiring::find_in_json(&hooks, &servers);
    let manifest = p.plugin.join(".codebuddy-plugin").join("plugin.json");
    let market = p
        .marketplace
        .join(".codebuddy-plugin")
        .join("marketplace.json");
    let current = |path: &Path, want: &Value| {
        super::read_optional(path)
            .ok()
            .flatten()
            .is_some_and(|t| serde_json::from_str::<Value>(&t).ok().as_ref() == Some(want))
    };
    let mut checks = Vec::new();
    checks.push(
        if current(&manifest, &plugin_manifest()) && current(&market, &marketplace_manifest()) {
            Check::ok(
                "plugin",
                format!("marketplace `{MARKETPLACE}` at {}", p.marketplace.display()),
            )
        } else {
            Check::fail(
                "plugin",
                format!(
                    "{} or {} is missing or not what this skillsearch writes",
                    manifest.display(),
                    market.display()
                ),
                format!("skillsearch setup {HOST}"),
            )
        },
    );
    let own = vec![Spec::info(
        "workbuddy-app",
        format!(
            "not checked: whether WorkBuddy installed and enabled the plugin (the app keeps that itself); install `skillsearch` from the marketplace at {}",
            p.marketplace.display()
        ),
    )];
    checks.extend(wiring::doctor(
        &found,
        HOST,
        home,
        wiring::HOOK_TIMEOUT_S,
        own,
    ));
    Ok(checks)
}
