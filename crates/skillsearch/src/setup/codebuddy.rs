//! CodeBuddy Code / WorkBuddy's engine (verified with codebuddy-headless 2.163.0): the user
//! `settings.json` carries the `UserPromptSubmit` hook (auto) and the pre-approval of
//! skillsearch's tools; the user `.mcp.json` carries the MCP server (on_demand). Both live in
//! `$CODEBUDDY_CONFIG_DIR` (default `~/.codebuddy`). Hooks declared inside a `--plugin-dir`
//! plugin do not fire in 2.163.0, so setup writes the settings hook instead. MCP tools are
//! always deferred behind `ToolSearch` (the model calls `ToolSearch`, then `DeferExecuteTool`).

use super::wiring::{self, SERVER, Wiring};
use super::{Check, SetupPlan, SetupRequest, get_path};
use anyhow::{Result, bail};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const HOST: &str = "codebuddy";

pub struct Paths {
    pub settings: PathBuf,
    pub mcp: PathBuf,
    pub skills: PathBuf,
}

impl Paths {
    pub fn from_env() -> Result<Self> {
        let dir = match wiring::env_dir("CODEBUDDY_CONFIG_DIR") {
            Some(d) => d,
            None => wiring::user_home()?.join(".codebuddy"),
        };
        Ok(Paths {
            settings: dir.join("settings.json"),
            mcp: dir.join(".mcp.json"),
            skills: dir.join("skills"),
        })
    }
}

pub fn setup(req: &SetupRequest) -> Result<SetupPlan> {
    if let Some((k, _)) = req.options.first() {
        bail!("setup codebuddy: unknown option `{k}` (it takes none)");
    }
    let paths = Paths::from_env()?;
    let (s_text, mut settings) = wiring::read_json(&paths.settings)?;
    let (m_text, mut mcp) = wiring::read_json(&paths.mcp)?;
    let found = wiring::find_in_json(&settings, &mcp);
    let w = Wiring::new(
        req,
        (found.hook.is_some() || found.server.is_some()).then_some(&found),
        vec![paths.skills.clone()],
    )?;
    let hook = w.auto().then(|| w.hook_command(HOST));
    wiring::merge_prompt_hook(&mut settings, &paths.settings, hook.as_deref())?;
    wiring::merge_string_list(
        &mut settings,
        &paths.settings,
        &["permissions", "allow"],
        &wiring::mcp_tool_names(),
        !w.auto(),
    )?;
    if w.auto() {
        wiring::remove_path(&mut mcp, &["mcpServers", SERVER])?;
    } else {
        let entry =
            json!({"type": "stdio", "command": w.binary.to_string_lossy(), "args": w.mcp_args()});
        super::set_path(&mut mcp, &["mcpServers", SERVER], entry)?;
    }
    let mut plan = SetupPlan::default();
    plan.changes
        .push(wiring::json_change(&paths.settings, s_text, &settings));
    if m_text.is_some() || !w.auto() {
        plan.changes
            .push(wiring::json_change(&paths.mcp, m_text, &mcp));
    }
    plan.notes.push(w.mode_note());
    plan.notes.push(format!(
        "Then: `codebuddy -p \"…\"` (and WorkBuddy's engine) uses skillsearch; `skillsearch doctor {HOST}` checks it."
    ));
    Ok(plan)
}

pub fn doctor(home: &Path) -> Result<Vec<Check>> {
    let paths = Paths::from_env()?;
    let (_, settings) = wiring::read_json(&paths.settings)?;
    let (_, mcp) = wiring::read_json(&paths.mcp)?;
    let found = wiring::find_in_json(&settings, &mcp);
    let mut checks = vec![wiring::check_exclusive(&found, HOST)];
    if found.hook.is_none() && found.server.is_none() {
        return Ok(checks);
    }
    checks.push(wiring::check_binaries(&found, HOST));
    if found.hook.is_some() {
        checks.push(
            if settings.get("disableAllHooks").and_then(Value::as_bool) == Some(true) {
                Check::fail(
                    "hook",
                    format!("`disableAllHooks` is true in {}", paths.settings.display()),
                    format!("remove `disableAllHooks` from {}", paths.settings.display()),
                )
            } else {
                Check::ok(
                    "hook",
                    format!(
                        "UserPromptSubmit runs skillsearch from {} (plugin-dir hooks do not fire)",
                        paths.settings.display()
                    ),
                )
            },
        );
    }
    if let Some(server) = get_path(&mcp, &["mcpServers", SERVER]) {
        checks.push(
            if server.get("disabled").and_then(Value::as_bool) == Some(true) {
                Check::fail(
                    "mcp-server",
                    format!(
                        "mcpServers.{SERVER}.disabled is true in {}",
                        paths.mcp.display()
                    ),
                    format!("skillsearch setup {HOST}"),
                )
            } else {
                Check::ok(
                    "mcp-server",
                    format!("mcpServers.{SERVER} in {}", paths.mcp.display()),
                )
            },
        );
        let rules = |key: &str| -> Vec<String> {
            get_path(&settings, &["permissions", key])
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default()
        };
        let (allow, deny) = (rules("allow"), rules("deny"));
        let names = wiring::mcp_tool_names();
        checks.push(if let Some(n) = names.iter().find(|n| deny.contains(n)) {
            Check::fail(
                "tool-approval",
                format!("{n} is in permissions.deny of {}", paths.settings.display()),
                format!(
                    "remove it from permissions.deny in {}",
                    paths.settings.display()
                ),
            )
        } else if let Some(n) = names.iter().find(|n| !allow.contains(n)) {
            Check::warn(
                "tool-approval",
                format!("{n} is not in permissions.allow: only `-y` runs it without asking"),
                format!("skillsearch setup {HOST}"),
            )
        } else {
            Check::ok(
                "tool-approval",
                format!("{} pre-approved", names.join(", ")),
            )
        });
        checks.push(Check::ok(
            "tool-search",
            format!(
                "MCP tools are deferred: the model finds mcp__{SERVER}__skill_search through ToolSearch, then runs it with DeferExecuteTool"
            ),
        ));
    }
    checks.push(wiring::check_roots(&found, HOST));
    checks.push(wiring::check_deadline(home, found.hook_timeout(60)));
    Ok(checks)
}
