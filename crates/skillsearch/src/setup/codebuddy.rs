//! CodeBuddy Code / WorkBuddy's engine (verified with codebuddy-headless 2.163.0): the user
//! `settings.json` carries the `UserPromptSubmit` hook (auto) and the pre-approval of
//! skillsearch's tools; the user `.mcp.json` carries the MCP server (on_demand). Both live in
//! `$CODEBUDDY_CONFIG_DIR` (default `~/.codebuddy`). Hooks declared inside a `--plugin-dir`
//! plugin do not fire in 2.163.0, so setup writes the settings hook instead. MCP tools are
//! always deferred behind `ToolSearch` (the model calls `ToolSearch`, then `DeferExecuteTool`).

use super::doctor::{self, Approval, Gate, Spec, Want, flag};
use super::wiring::{self, SERVER};
use super::{Check, SetupPlan, SetupRequest, Status, get_path};
use anyhow::Result;
use serde_json::json;
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
    let paths = Paths::from_env()?;
    let host = wiring::SettingsHost {
        host: HOST,
        settings: &paths.settings,
        servers: &paths.mcp,
        skills: &paths.skills,
        try_it: "`codebuddy -p \"…\"` (and WorkBuddy's engine)",
    };
    wiring::setup_settings_host(
        req,
        &host,
        |w| json!({"type": "stdio", "command": w.binary.to_string_lossy(), "args": w.mcp_args()}),
        |_| Ok(()),
    )
}

pub fn doctor(home: &Path) -> Result<Vec<Check>> {
    let paths = Paths::from_env()?;
    let (_, settings) = wiring::read_json(&paths.settings)?;
    let (_, mcp) = wiring::read_json(&paths.mcp)?;
    let found = wiring::find_in_json(&settings, &mcp);
    let mut specs = Vec::new();
    if found.hook.is_some() {
        specs.push(Spec {
            name: "hook",
            gates: vec![doctor::hooks_enabled(&settings, &paths.settings)],
            ok: Some(format!(
                "UserPromptSubmit runs skillsearch from {} (plugin-dir hooks do not fire)",
                paths.settings.display()
            )),
        });
    }
    // Any entry of ours, even one without a command `found` would not count.
    if get_path(&mcp, &["mcpServers", SERVER]).is_some() {
        specs.push(Spec {
            name: "mcp-server",
            gates: vec![Gate::fail(
                flag(&mcp, &["mcpServers", SERVER, "disabled"], Want::NotTrue),
                format!(
                    "mcpServers.{SERVER}.disabled is true in {}",
                    paths.mcp.display()
                ),
                format!("skillsearch setup {HOST}"),
            )],
            ok: Some(format!("mcpServers.{SERVER} in {}", paths.mcp.display())),
        });
        specs.push(
            Approval {
                settings: &settings,
                file: &paths.settings,
                server_rules: false,
                unapproved: Status::Warn,
                unapproved_means: "is not in permissions.allow: only `-y` runs it without asking",
                unapproved_fix: format!("skillsearch setup {HOST}"),
            }
            .spec(),
        );
        specs.push(Spec::info(
            "tool-search",
            format!(
                "MCP tools are deferred: the model finds mcp__{SERVER}__skill_search through ToolSearch, then runs it with DeferExecuteTool"
            ),
        ));
    }
    Ok(wiring::doctor(&found, HOST, home, 60, specs))
}
