//! Claude Code (verified with 2.1.197): user settings carry the `UserPromptSubmit` hook (auto)
//! and the pre-approval of skillsearch's read-only MCP tools; the user-scope `mcpServers` in
//! `.claude.json` carry the MCP server (on_demand). Both honour `CLAUDE_CONFIG_DIR`.

use super::doctor::{self, Approval, Gate, Spec, Test, Want, flag};
use super::wiring::{self, SERVER};
use super::{Check, SetupPlan, SetupRequest, Status, get_path};
use anyhow::Result;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const HOST: &str = "claude-code";
/// Claude Code's managed (administrator) settings on Linux.
const MANAGED_SETTINGS: &str = "/etc/claude-code/managed-settings.json";

/// Where Claude Code keeps its user configuration.
pub struct Paths {
    /// `settings.json` (hooks, permissions, env).
    pub settings: PathBuf,
    /// `.claude.json` (user-scope MCP servers).
    pub state: PathBuf,
    /// The user's own skills directory.
    pub skills: PathBuf,
}

impl Paths {
    pub fn from_env() -> Result<Self> {
        Ok(match wiring::env_dir("CLAUDE_CONFIG_DIR") {
            Some(dir) => Paths {
                settings: dir.join("settings.json"),
                state: dir.join(".claude.json"),
                skills: dir.join("skills"),
            },
            None => {
                let home = wiring::user_home()?;
                Paths {
                    settings: home.join(".claude").join("settings.json"),
                    state: home.join(".claude.json"),
                    skills: home.join(".claude").join("skills"),
                }
            }
        })
    }
}

pub fn setup(req: &SetupRequest) -> Result<SetupPlan> {
    let paths = Paths::from_env()?;
    let host = wiring::SettingsHost {
        host: HOST,
        settings: &paths.settings,
        servers: &paths.state,
        skills: &paths.skills,
        try_it: "`claude -p \"…\"`",
    };
    wiring::setup_settings_host(
        req,
        &host,
        // `alwaysLoad`: `claude -p` connects MCP servers in the background and may send the
        // first request before the tools are listed; an always-loaded server is awaited.
        |w| json!({"type": "stdio", "command": w.binary.to_string_lossy(), "args": w.mcp_args(), "alwaysLoad": true}),
        |state| {
            if get_path(state, &["mcpServers", SERVER, "env"]).is_none() {
                super::set_path(state, &["mcpServers", SERVER, "env"], json!({}))?;
            }
            Ok(())
        },
    )
}

pub fn doctor(home: &Path) -> Result<Vec<Check>> {
    let paths = Paths::from_env()?;
    let (_, settings) = wiring::read_json(&paths.settings)?;
    let (_, state) = wiring::read_json(&paths.state)?;
    let (_, policy) = wiring::read_json(Path::new(MANAGED_SETTINGS)).unwrap_or_default();
    let found = wiring::find_in_json(&settings, &state);
    let mut specs = Vec::new();
    if found.hook.is_some() {
        let mut gates: Vec<Gate> = ["allowManagedHooksOnly", "disableAllHooks"]
            .into_iter()
            .map(|k| {
                Gate::fail(
                    flag(&policy, &[k], Want::NotTrue),
                    format!("managed policy {MANAGED_SETTINGS} sets `{k}`: user hooks do not run"),
                    "ask the administrator to add the skillsearch hook to the managed settings, or use --mode on_demand",
                )
            })
            .collect();
        gates.push(doctor::hooks_enabled(&settings, &paths.settings));
        specs.push(Spec {
            name: "hook",
            gates,
            ok: Some(format!(
                "UserPromptSubmit runs skillsearch ({})",
                paths.settings.display()
            )),
        });
    }
    if found.server.is_some() {
        specs.push(Spec {
            name: "mcp-server",
            gates: vec![Gate::warn(
                flag(&state, &["mcpServers", SERVER, "alwaysLoad"], Want::True),
                "the server is not alwaysLoad: `claude -p` may send the first request before its tools are listed",
                format!("skillsearch setup {HOST} (sets alwaysLoad)"),
            )],
            ok: Some(format!(
                "mcpServers.{SERVER} in {} (alwaysLoad)",
                paths.state.display()
            )),
        });
        specs.push(
            Approval {
                settings: &settings,
                file: &paths.settings,
                server_rules: true,
                unapproved: Status::Fail,
                unapproved_means: "is not pre-approved: headless `claude -p` refuses the call",
                unapproved_fix: format!("skillsearch setup {HOST} (adds it to permissions.allow)"),
            }
            .spec(),
        );
        let search = std::env::var("ENABLE_TOOL_SEARCH").ok().or_else(|| {
            get_path(&settings, &["env", "ENABLE_TOOL_SEARCH"])
                .and_then(Value::as_str)
                .map(String::from)
        });
        let search = search.as_deref().unwrap_or_default();
        specs.push(Spec {
            name: "tool-search",
            gates: vec![Gate::warn(
                Test::Shut(search == "true" || search == "1" || search.starts_with("auto")),
                format!(
                    "ENABLE_TOOL_SEARCH={search}: skill_search may be deferred behind ToolSearch"
                ),
                "unset ENABLE_TOOL_SEARCH (or use --mode auto)",
            )],
            ok: Some("MCP tools are offered directly (no ToolSearch)".into()),
        });
    }
    Ok(wiring::doctor(&found, HOST, home, 60, specs))
}
