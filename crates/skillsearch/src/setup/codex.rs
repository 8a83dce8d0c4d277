//! Codex CLI (verified with 0.171.0): `$CODEX_HOME/config.toml` carries the MCP server with
//! `default_tools_approval_mode = "approve"` (on_demand; without it `approval_policy = "never"`
//! fails every call) and the trust record of our hook; `$CODEX_HOME/hooks.json` carries the
//! `UserPromptSubmit` hook (auto). Codex runs a non-managed hook only when
//! `hooks.state."<hooks.json>:user_prompt_submit:<group>:<handler>".trusted_hash` matches the
//! hook's current hash, so setup records that hash: the plain `codex exec` then runs it.

use super::doctor::{self, Gate, Spec, Test, Want, flag};
use super::wiring::{self, Found, HOOK_TIMEOUT_S, SERVER, Wiring};
use super::{Check, FileChange, SetupPlan, SetupRequest, get_path, read_optional};
use anyhow::{Context, Result, bail};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

const HOST: &str = "codex";
/// Codex's name for the event in trust keys and hashes.
const EVENT: &str = "user_prompt_submit";
/// Codex's hook timeout when a handler sets none, in seconds.
const CODEX_DEFAULT_TIMEOUT_S: u64 = 600;

pub struct Paths {
    pub config: PathBuf,
    pub hooks: PathBuf,
    pub skills: PathBuf,
}

impl Paths {
    pub fn from_env() -> Result<Self> {
        let dir = match wiring::env_dir("CODEX_HOME") {
            Some(d) => d,
            None => wiring::user_home()?.join(".codex"),
        };
        Ok(Paths {
            config: dir.join("config.toml"),
            hooks: dir.join("hooks.json"),
            skills: dir.join("skills"),
        })
    }
}

/// The key Codex files a hook's trust under.
pub fn trust_key(hooks_json: &Path, group: usize, handler: usize) -> String {
    format!("{}:{EVENT}:{group}:{handler}", hooks_json.display())
}

/// The hash Codex compares with the recorded trust: SHA-256 over the compact JSON (keys
/// sorted) of the hook's normalised declaration, `{event_name, hooks: [handler], matcher?}`,
/// with the handler's defaults filled in.
pub fn trust_hash(handler: &Value, matcher: Option<&str>) -> String {
    let mut h = serde_json::Map::new();
    h.insert("type".into(), Value::String("command".into()));
    h.insert(
        "command".into(),
        handler.get("command").cloned().unwrap_or(Value::Null),
    );
    h.insert(
        "timeout".into(),
        Value::from(
            handler
                .get("timeout")
                .or_else(|| handler.get("timeoutSec"))
                .and_then(Value::as_u64)
                .unwrap_or(CODEX_DEFAULT_TIMEOUT_S),
        ),
    );
    h.insert(
        "async".into(),
        Value::Bool(
            handler
                .get("async")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        ),
    );
    if let Some(m) = handler.get("statusMessage").and_then(Value::as_str) {
        h.insert("statusMessage".into(), Value::String(m.into()));
    }
    let mut ident = serde_json::Map::new();
    ident.insert("event_name".into(), Value::String(EVENT.into()));
    ident.insert("hooks".into(), Value::Array(vec![Value::Object(h)]));
    if let Some(m) = matcher {
        ident.insert("matcher".into(), Value::String(m.into()));
    }
    let canonical = canonical_json(&Value::Object(ident));
    let digest = Sha256::digest(canonical.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Compact JSON with object keys sorted at every level.
fn canonical_json(v: &Value) -> String {
    match v {
        Value::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| {
                    format!(
                        "{}:{}",
                        Value::String((*k).clone()),
                        canonical_json(&o[k.as_str()])
                    )
                })
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(canonical_json).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

/// A TOML basic string.
fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// The key path a `[table]` header line names, or `None` for anything else.
fn header_path(line: &str) -> Option<Vec<String>> {
    let t = line.trim();
    if !t.starts_with('[') || t.starts_with("[[") {
        return None;
    }
    let doc: toml::Table = toml::from_str(t).ok()?;
    let mut path = Vec::new();
    let mut cur = &doc;
    loop {
        let (k, v) = cur.iter().next()?;
        path.push(k.clone());
        match v.as_table() {
            Some(inner) if !inner.is_empty() => cur = inner,
            _ => return Some(path),
        }
    }
}

/// Removes every `[table]` (with its body) whose path `drop` selects; the rest of the text,
/// comments included, stays as it was.
fn remove_tables(text: &str, drop: impl Fn(&[String]) -> bool) -> String {
    let mut out = String::new();
    let mut skipping = false;
    for line in text.split_inclusive('\n') {
        let t = line.trim_start();
        if t.starts_with('[') {
            skipping = header_path(line).is_some_and(|p| drop(&p));
        }
        if !skipping {
            out.push_str(line);
        }
    }
    out
}

/// The keys of `[mcp_servers.skillsearch]` setup writes. Any other key there (`env`,
/// `startup_timeout_sec`, `enabled_tools`, …) is the user's and survives setup rewriting it.
const OWNED_SERVER_KEYS: [&str; 3] = ["command", "args", "default_tools_approval_mode"];

/// The user's own keys in our server table.
fn user_server_keys(config: &toml::Table) -> toml::Table {
    config
        .get("mcp_servers")
        .and_then(|m| m.get(SERVER))
        .and_then(toml::Value::as_table)
        .map(|t| {
            t.iter()
                .filter(|(k, _)| !OWNED_SERVER_KEYS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// `keys` as the rest of `[mcp_servers.skillsearch]`, to follow its owned lines: plain keys
/// first, then sub-tables (`[mcp_servers.skillsearch.env]`) under their full headers.
fn user_keys_text(keys: &toml::Table) -> Result<String> {
    if keys.is_empty() {
        return Ok(String::new());
    }
    let mut servers = toml::Table::new();
    servers.insert(SERVER.into(), toml::Value::Table(keys.clone()));
    let mut doc = toml::Table::new();
    doc.insert("mcp_servers".into(), toml::Value::Table(servers));
    let text = toml::to_string(&doc).context("cannot write the user's keys of the server table")?;
    let header = format!("[mcp_servers.{SERVER}]\n");
    Ok(match text.strip_prefix(&header) {
        Some(rest) => rest.to_owned(),
        None => format!("\n{text}"),
    })
}

fn is_server_table(p: &[String]) -> bool {
    p.len() >= 2 && p[0] == "mcp_servers" && p[1] == SERVER
}

fn found(config: &toml::Table, hooks: &Value) -> Found {
    let server = config
        .get("mcp_servers")
        .and_then(|m| m.get(SERVER))
        .and_then(|s| {
            let cmd = s.get("command")?.as_str()?.to_string();
            let args = s
                .get("args")
                .and_then(|a| a.as_array())
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            Some((cmd, args))
        });
    Found {
        hook: wiring::find_prompt_hook(hooks),
        server,
    }
}

fn parse_config(path: &Path, text: &str) -> Result<toml::Table> {
    toml::from_str(text).with_context(|| format!("{} is not valid TOML", path.display()))
}

pub fn setup(req: &SetupRequest) -> Result<SetupPlan> {
    if let Some((k, _)) = req.options.first() {
        bail!("setup codex: unknown option `{k}` (it takes none)");
    }
    let paths = Paths::from_env()?;
    let c_text = read_optional(&paths.config)?;
    let config = parse_config(&paths.config, c_text.as_deref().unwrap_or(""))?;
    let (h_text, mut hooks) = wiring::read_json(&paths.hooks)?;
    let f = found(&config, &hooks);
    let w = Wiring::new(
        req,
        (f.hook.is_some() || f.server.is_some()).then_some(&f),
        vec![paths.skills.clone()],
    )?;

    // hooks.json: ours in auto, none in on_demand.
    let old_at = f.hook.as_ref().map(|(_, g, i)| (*g, *i));
    let cmd = w.auto().then(|| w.hook_command(HOST));
    let at = wiring::merge_prompt_hook(&mut hooks, &paths.hooks, cmd.as_deref())?;

    // config.toml: drop our server table and our old trust record, then append what the mode
    // needs.
    let mut stale_keys: Vec<String> = old_at
        .map(|(g, i)| trust_key(&paths.hooks, g, i))
        .into_iter()
        .collect();
    if let Some((g, i)) = at {
        stale_keys.push(trust_key(&paths.hooks, g, i));
    }
    let mut text = remove_tables(c_text.as_deref().unwrap_or(""), |p| {
        is_server_table(p)
            || (p.len() == 3 && p[0] == "hooks" && p[1] == "state" && stale_keys.contains(&p[2]))
    });
    let mut append = String::new();
    if let (Some((g, i)), Some(cmd)) = (at, cmd.as_deref()) {
        let handler =
            serde_json::json!({"type": "command", "command": cmd, "timeout": HOOK_TIMEOUT_S});
        append.push_str(&format!(
            "[hooks.state.{}]\ntrusted_hash = {}\n",
            toml_str(&trust_key(&paths.hooks, g, i)),
            toml_str(&trust_hash(&handler, None)),
        ));
    }
    let user_keys = user_server_keys(&config);
    if !w.auto() {
        let args: Vec<String> = w.mcp_args().iter().map(|a| toml_str(a)).collect();
        append.push_str(&format!(
            "[mcp_servers.{SERVER}]\ncommand = {}\nargs = [{}]\ndefault_tools_approval_mode = \"approve\"\n{}",
            toml_str(&w.binary.to_string_lossy()),
            args.join(", "),
            user_keys_text(&user_keys)?,
        ));
    }
    if !append.is_empty() {
        let trimmed = text.trim_end().len();
        text.truncate(trimmed);
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(&append);
    }
    parse_config(&paths.config, &text).with_context(|| {
        format!(
            "after merging skillsearch's tables; is `mcp_servers.{SERVER}` or `hooks.state` written inline in {}?",
            paths.config.display()
        )
    })?;

    let mut plan = SetupPlan::default();
    plan.changes.push(FileChange::to(&paths.config, text)?);
    if h_text.is_some() || w.auto() {
        plan.changes
            .push(wiring::json_change(&paths.hooks, h_text, &hooks));
    }
    plan.notes.push(w.mode_note());
    if w.auto() && !user_keys.is_empty() {
        let keys: Vec<&str> = user_keys.keys().map(String::as_str).collect();
        plan.notes.push(format!(
            "Auto mode runs no MCP server, so `[mcp_servers.{SERVER}]` is removed from {} with your keys in it ({}); the backup keeps them.",
            paths.config.display(),
            keys.join(", ")
        ));
    }
    plan.notes.push(format!(
        "Then: `codex exec \"…\"` uses skillsearch (the hook's trust is recorded); `skillsearch doctor {HOST}` checks it."
    ));
    Ok(plan)
}

pub fn doctor(home: &Path) -> Result<Vec<Check>> {
    let paths = Paths::from_env()?;
    let c_text = read_optional(&paths.config)?.unwrap_or_default();
    let config = parse_config(&paths.config, &c_text)?;
    let (_, hooks) = wiring::read_json(&paths.hooks)?;
    let f = found(&config, &hooks);
    // The checks read config.toml as JSON: the same keys and values, one way to read them.
    let cfg = serde_json::to_value(&config)
        .with_context(|| format!("{} as JSON", paths.config.display()))?;
    let config_file = paths.config.display();
    let mut specs = Vec::new();
    if let Some((handler, g, i)) = &f.hook {
        let key = trust_key(&paths.hooks, *g, *i);
        let matcher = hooks["hooks"]["UserPromptSubmit"][*g]
            .get("matcher")
            .and_then(Value::as_str);
        let want = trust_hash(handler, matcher);
        let have =
            get_path(&cfg, &["hooks", "state", &key, "trusted_hash"]).and_then(Value::as_str);
        let mut gates: Vec<Gate> = ["hooks", "codex_hooks"]
            .into_iter()
            .map(|k| {
                Gate::fail(
                    flag(&cfg, &["features", k], Want::NotFalse),
                    format!("[features] {k} = false in {config_file}"),
                    format!("remove `{k} = false` from [features] in {config_file}"),
                )
                .named("hook")
            })
            .collect();
        gates.push(
            Gate::fail(
                flag(&cfg, &["hooks", "state", &key, "enabled"], Want::NotFalse),
                format!("the hook is disabled (hooks.state.\"{key}\".enabled = false)"),
                format!("set enabled = true there, or skillsearch setup {HOST}"),
            )
            .named("hook"),
        );
        gates.push(Gate::fail(
            Test::Shut(have != Some(want.as_str())),
            format!(
                "the hook in {} is not trusted{}: codex skips it silently",
                paths.hooks.display(),
                if have.is_some() {
                    " (changed since it was trusted)"
                } else {
                    ""
                }
            ),
            format!("skillsearch setup {HOST} (records its trust), or trust it in codex's /hooks"),
        ));
        specs.push(Spec {
            name: "hook-trust",
            gates,
            ok: Some(format!("UserPromptSubmit hook trusted ({key})")),
        });
    }
    if let Some(server) = get_path(&cfg, &["mcp_servers", SERVER]) {
        let tools = |k: &str| doctor::strings(server, &[k]);
        let (enabled, disabled) = (tools("enabled_tools"), tools("disabled_tools"));
        let lists = |l: &[String]| l.iter().any(|t| t == "skill_search");
        let filtered = lists(&disabled) || (!enabled.is_empty() && !lists(&enabled));
        specs.push(Spec {
            name: "mcp-server",
            gates: vec![
                Gate::fail(
                    flag(&cfg, &["mcp_servers", SERVER, "enabled"], Want::NotFalse),
                    format!("mcp_servers.{SERVER}.enabled = false in {config_file}"),
                    format!("skillsearch setup {HOST}"),
                ),
                Gate::fail(
                    Test::Shut(filtered),
                    format!("skill_search is filtered out by enabled_tools / disabled_tools of mcp_servers.{SERVER}"),
                    format!("skillsearch setup {HOST}"),
                ),
            ],
            ok: Some(format!("mcp_servers.{SERVER} in {config_file}")),
        });
        let approve =
            |key: &[&str]| get_path(server, key).and_then(Value::as_str) == Some("approve");
        let approved = approve(&["default_tools_approval_mode"])
            || wiring::TOOLS
                .iter()
                .all(|t| approve(&["tools", t, "approval_mode"]));
        let policy = get_path(&cfg, &["approval_policy"])
            .and_then(Value::as_str)
            .unwrap_or("on-request");
        specs.push(Spec {
            name: "tool-approval",
            gates: vec![Gate::fail(
                Test::Shut(!approved),
                format!("skill_search is not pre-approved (approval_policy = \"{policy}\"): a headless call fails with \"requires approval\""),
                format!("skillsearch setup {HOST} (sets default_tools_approval_mode = \"approve\")"),
            )],
            ok: Some("skillsearch's read-only tools are pre-approved".into()),
        });
    }
    Ok(wiring::doctor(
        &f,
        HOST,
        home,
        CODEX_DEFAULT_TIMEOUT_S,
        specs,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_hash_is_over_sorted_compact_json() {
        let h = serde_json::json!({"type": "command", "command": "x", "timeout": 10});
        let expect = r#"{"event_name":"user_prompt_submit","hooks":[{"async":false,"command":"x","timeout":10,"type":"command"}]}"#;
        let digest = Sha256::digest(expect.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(trust_hash(&h, None), format!("sha256:{hex}"));
    }

    #[test]
    fn tables_are_removed_with_their_bodies_only() {
        let text = "# mine\nmodel = \"m\"\n\n[mcp_servers.skillsearch]\ncommand = \"a\"\n[mcp_servers.skillsearch.env]\nX = \"1\"\n[mcp_servers.other]\ncommand = \"b\" # keep\n[hooks.state.\"/h.json:user_prompt_submit:0:0\"]\ntrusted_hash = \"x\"\n";
        let out = remove_tables(text, |p| {
            is_server_table(p) || p.get(2).is_some_and(|k| k.starts_with("/h.json"))
        });
        assert_eq!(
            out,
            "# mine\nmodel = \"m\"\n\n[mcp_servers.other]\ncommand = \"b\" # keep\n"
        );
        assert_eq!(
            header_path("[hooks.state.\"/a b:c:0:0\"]").unwrap(),
            ["hooks", "state", "/a b:c:0:0"]
        );
        assert!(header_path("[[arr]]").is_none());
    }
}
