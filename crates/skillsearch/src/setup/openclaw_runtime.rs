//! Doctor's agent-runtime check for OpenClaw: per agent, which runtime (OpenClaw's built-in one
//! or a plugin agent harness) will run its turns on the installed release, and whether
//! skillsearch's skills block and tool narrowing still reach the model there.
//!
//! The rules, as read from the code of 2026.7.35 and 2026.9.6 and tried with a probe harness on
//! both (docs/decisions.md, "OpenClaw agent runtimes"):
//! - A whole-agent `agentRuntime` / `embeddedHarness` (`agents.defaults`, an agent entry) is
//!   rejected by the config schema of both releases: no turn runs at all.
//! - `OPENCLAW_AGENT_RUNTIME` is read by neither.
//! - The policy is an object `{ "id": … }` on model and provider entries; the first match wins:
//!   the agent's `models["p/m"]`, then `agents.defaults.models["p/m"]`; the
//!   `models.providers.<p>.models[]` entry; the agent's, then the defaults', `models["p/*"]`;
//!   `models.providers.<p>.agentRuntime`. Nothing: `auto`.
//! - `openclaw` and `pi` are the built-in runtime; `auto`/`default` let a registered plugin
//!   harness that supports the model claim the turn (the built-in runtime otherwise; `openai`
//!   without a custom `baseUrl` implies the Codex harness when it is installed); any other id is
//!   that plugin harness, and the turn fails when it is missing or declines the model (2026.9.6
//!   hands a declined turn to the built-in runtime when the harness says `fallbackRuntime`).
//! - Agents: `agents.list[]` (both; 2026.9.6 migrates it) and `agents.entries.<id>` (2026.9.6
//!   only; invalid on 2026.7.35).
//! - A plugin harness gets the raw prompt and the skills block as data: OpenClaw builds no
//!   system prompt and runs no `before_prompt_build` for it, so skillsearch's injection and
//!   `toolsAllow` reach the model only if the harness applies them; 2026.9.6 refuses a turn with
//!   a restrictive tool policy unless the harness declares exact tool-policy support, 2026.7.35
//!   does not enforce the allowlist. Only turns on the built-in runtime are green.
//! - Session pins (2026.9.6: `/model … --runtime X`, a locked session) override all of this
//!   per session; the config cannot show them.

use super::{Check, get_path};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// An OpenClaw release, `(year, month, patch)`.
pub(super) type Version = (u32, u32, u32);

/// `OpenClaw 2026.9.6 (eb377ac)` → `(2026, 9, 6)`.
pub(super) fn parse_version(s: &str) -> Option<Version> {
    let v = s
        .split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()))?;
    let mut parts = v.split('.').map(|p| {
        p.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse::<u32>()
            .ok()
    });
    Some((
        parts.next()??,
        parts.next()??,
        parts.next().flatten().unwrap_or(0),
    ))
}

/// The release `openclaw --version` reports, when it runs.
pub(super) fn installed_version(bin: &Path, config: &Path, state: &Path) -> Option<Version> {
    let out = std::process::Command::new(bin)
        .arg("--version")
        .env("OPENCLAW_CONFIG_PATH", config)
        .env("OPENCLAW_STATE_DIR", state)
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    parse_version(&String::from_utf8_lossy(&out.stdout))
}

/// What an enabled plugin says about agent harnesses.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct HarnessPlugin {
    pub id: String,
    /// `activation.onAgentHarnesses` of its manifest.
    pub declared: Vec<String>,
}

/// Enabled plugins (loaded paths and `<state>/extensions/*`) whose code calls
/// `registerAgentHarness` or whose manifest declares harnesses.
pub(super) fn harness_plugins(cfg: &Value, state: &Path) -> Vec<HarnessPlugin> {
    let mut dirs: Vec<PathBuf> = get_path(cfg, &["plugins", "load", "paths"])
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(PathBuf::from)
                .collect()
        })
        .unwrap_or_default();
    if let Ok(rd) = std::fs::read_dir(state.join("extensions")) {
        dirs.extend(rd.flatten().map(|e| e.path()));
    }
    let mut out = Vec::new();
    for dir in dirs {
        let Ok(text) = std::fs::read_to_string(dir.join("openclaw.plugin.json")) else {
            continue;
        };
        let Ok(m) = json5::from_str::<Value>(&text) else {
            continue;
        };
        let Some(id) = m.get("id").and_then(Value::as_str) else {
            continue;
        };
        if get_path(cfg, &["plugins", "entries", id, "enabled"]) == Some(&Value::Bool(false)) {
            continue;
        }
        let declared: Vec<String> = m
            .pointer("/activation/onAgentHarnesses")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default();
        if !declared.is_empty() || registers_harness(&dir) {
            out.push(HarnessPlugin {
                id: id.to_owned(),
                declared,
            });
        }
    }
    out
}

/// Whether a plugin's own top-level scripts (and `dist/`) call `registerAgentHarness`.
fn registers_harness(dir: &Path) -> bool {
    [dir.to_path_buf(), dir.join("dist")].iter().any(|d| {
        std::fs::read_dir(d)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| {
                let p = e.path();
                let script = p
                    .extension()
                    .is_some_and(|x| matches!(x.to_str(), Some("js" | "mjs" | "cjs" | "ts")));
                script
                    && e.metadata()
                        .is_ok_and(|m| m.is_file() && m.len() <= 4 << 20)
                    && std::fs::read_to_string(&p).is_ok_and(|t| t.contains("registerAgentHarness"))
            })
    })
}

/// Where a runtime policy was found, and its id as written.
#[derive(Debug, Clone, PartialEq)]
struct Policy {
    id: String,
    at: String,
}

/// What runs one agent's turns.
#[derive(Debug, Clone, PartialEq)]
enum Runtime {
    BuiltIn(Policy),
    Auto(Option<Policy>),
    Plugin(Policy),
}

fn normalise(id: &str) -> String {
    match id.trim().to_ascii_lowercase().as_str() {
        "pi" | "openclaw" => "openclaw".into(),
        "" | "auto" | "default" => "auto".into(),
        "codex-app-server" => "codex".into(),
        other => other.to_owned(),
    }
}

/// The `{ id }` policy at `v`, `Err` with the place when it has another shape (a string: the
/// config is invalid).
fn policy_at(v: Option<&Value>, at: String) -> Result<Option<Policy>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(o)) => Ok(o
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
            .map(|id| Policy {
                id: id.trim().to_owned(),
                at,
            })),
        Some(_) => Err(at),
    }
}

/// One agent: its id, its entry (`None`: only the defaults), the model it runs.
struct Agent<'a> {
    id: String,
    entry: Option<&'a Value>,
    model: Option<String>,
}

fn model_of(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("primary").and_then(Value::as_str).map(String::from),
        _ => None,
    }
}

fn agents(cfg: &Value) -> Vec<Agent<'_>> {
    let default_model = model_of(get_path(cfg, &["agents", "defaults", "model"]));
    let mut out: Vec<Agent> = Vec::new();
    fn add<'a>(id: String, entry: &'a Value, default_model: &Option<String>) -> Agent<'a> {
        Agent {
            model: model_of(entry.get("model")).or_else(|| default_model.clone()),
            id,
            entry: Some(entry),
        }
    }
    if let Some(list) = get_path(cfg, &["agents", "list"]).and_then(Value::as_array) {
        for (i, e) in list.iter().enumerate() {
            let id = e
                .get("id")
                .and_then(Value::as_str)
                .map_or_else(|| format!("#{i}"), String::from);
            out.push(add(id, e, &default_model));
        }
    }
    if let Some(map) = get_path(cfg, &["agents", "entries"]).and_then(Value::as_object) {
        for (id, e) in map {
            if !out.iter().any(|a| &a.id == id) {
                out.push(add(id.clone(), e, &default_model));
            }
        }
    }
    if out.is_empty() {
        out.push(Agent {
            id: "main".into(),
            entry: None,
            model: default_model,
        });
    }
    out
}

/// The policy chain for `agent` running `model` (`p/m`).
fn resolve(cfg: &Value, agent: &Agent, model: &str) -> Result<Runtime, String> {
    let (p, m) = model.split_once('/').unwrap_or(("", model));
    let defaults = get_path(cfg, &["agents", "defaults", "models"]);
    let own = agent.entry.and_then(|e| e.get("models"));
    let key_policy = |map: Option<&Value>, key: &str, label: &str| {
        policy_at(
            map.and_then(|v| v.get(key))
                .and_then(|e| e.get("agentRuntime")),
            format!("{label}[\"{key}\"].agentRuntime"),
        )
    };
    let own_label = format!("agent `{}` models", agent.id);
    let mut chain: Vec<Result<Option<Policy>, String>> = vec![
        key_policy(own, model, &own_label),
        key_policy(own, m, &own_label),
        key_policy(defaults, model, "agents.defaults.models"),
        key_policy(defaults, m, "agents.defaults.models"),
    ];
    let provider_model = get_path(cfg, &["models", "providers", p, "models"])
        .and_then(Value::as_array)
        .and_then(|a| {
            a.iter()
                .find(|e| e.get("id").and_then(Value::as_str) == Some(m))
        });
    chain.push(policy_at(
        provider_model.and_then(|e| e.get("agentRuntime")),
        format!("models.providers.{p}.models[{m}].agentRuntime"),
    ));
    let wildcard = format!("{p}/*");
    chain.push(key_policy(own, &wildcard, &own_label));
    chain.push(key_policy(defaults, &wildcard, "agents.defaults.models"));
    chain.push(policy_at(
        get_path(cfg, &["models", "providers", p, "agentRuntime"]),
        format!("models.providers.{p}.agentRuntime"),
    ));
    for step in chain {
        if let Some(policy) = step? {
            return Ok(match normalise(&policy.id).as_str() {
                "openclaw" => Runtime::BuiltIn(policy),
                "auto" => Runtime::Auto(Some(policy)),
                id => Runtime::Plugin(Policy {
                    id: id.to_owned(),
                    at: policy.at,
                }),
            });
        }
    }
    Ok(Runtime::Auto(None))
}

fn release(v: Option<Version>) -> String {
    v.map_or_else(
        || "the installed OpenClaw (version unknown: openclaw is not on PATH)".to_owned(),
        |(y, m, p)| format!("OpenClaw {y}.{m}.{p}"),
    )
}

/// The checks, given the config, the release (`None`: unknown), the enabled plugins that
/// provide harnesses, and `OPENCLAW_AGENT_RUNTIME` when set.
pub(super) fn runtime_checks(
    cfg: &Value,
    version: Option<Version>,
    harnesses: &[HarnessPlugin],
    env_runtime: Option<&str>,
) -> Vec<Check> {
    let mut out = Vec::new();
    let rel = release(version);
    let name = "agent runtime";
    let new_rules = version.is_none_or(|v| v >= (2026, 8, 0));
    // Whole-agent keys make the config invalid on both releases.
    let mut whole: Vec<String> = Vec::new();
    for key in ["agentRuntime", "embeddedHarness"] {
        if get_path(cfg, &["agents", "defaults", key]).is_some() {
            whole.push(format!("agents.defaults.{key}"));
        }
        if let Some(list) = get_path(cfg, &["agents", "list"]).and_then(Value::as_array) {
            for (i, e) in list.iter().enumerate() {
                if e.get(key).is_some() {
                    whole.push(format!("agents.list[{i}].{key}"));
                }
            }
        }
        if let Some(map) = get_path(cfg, &["agents", "entries"]).and_then(Value::as_object) {
            for (id, e) in map {
                if e.get(key).is_some() {
                    whole.push(format!("agents.entries.{id}.{key}"));
                }
            }
        }
    }
    if !whole.is_empty() {
        out.push(Check::fail(
            name,
            format!("{rel} rejects a whole-agent runtime ({}): the config is invalid and no turn runs", whole.join(", ")),
            "remove those keys and set {\"id\": …} on models.providers.<p>.agentRuntime or agents.defaults.models[\"p/m\"].agentRuntime instead (`openclaw doctor --fix` removes them too, but also disables every skill it finds unusable)",
        ));
    }
    if !new_rules && get_path(cfg, &["agents", "entries"]).is_some() {
        out.push(Check::fail(
            name,
            format!("{rel} does not know agents.entries: the config is invalid and no turn runs"),
            "move the agents to agents.list[] (2026.8 and later read agents.entries)",
        ));
    }
    if let Some(v) = env_runtime {
        out.push(Check::warn(
            name,
            format!(
                "OPENCLAW_AGENT_RUNTIME={v} is set, and {rel} never reads it: it changes nothing"
            ),
            "unset OPENCLAW_AGENT_RUNTIME; set the runtime on provider/model entries",
        ));
    }
    let known: Vec<String> = harnesses
        .iter()
        .map(|h| {
            if h.declared.is_empty() {
                format!("plugin `{}`", h.id)
            } else {
                format!("plugin `{}` ({})", h.id, h.declared.join(", "))
            }
        })
        .collect();
    let pin_note = if new_rules {
        "; a session pinned with `/model … --runtime` keeps its own runtime"
    } else {
        ""
    };
    let serve_fix = |p: &str, m: &str| {
        format!(
            "to serve it with skillsearch, set {{\"id\": \"openclaw\"}} on agents.defaults.models[\"{p}/{m}\"].agentRuntime (or models.providers.{p}.agentRuntime)"
        )
    };
    let harness_gap = if new_rules {
        "OpenClaw builds no system prompt and runs no before_prompt_build for a plugin harness: skillsearch's skills block and toolsAllow reach the model only if the harness applies them, and a restrictive tool policy fails the turn unless the harness declares exact tool-policy support"
    } else {
        "OpenClaw builds no system prompt and runs no before_prompt_build for a plugin harness: skillsearch's skills block reaches the model only if the harness inserts it, and this release does not enforce a tool allowlist for it"
    };
    for agent in agents(cfg) {
        let Some(model) = agent.model.clone() else {
            out.push(Check::warn(
                name,
                format!("agent `{}` names no model (nor do agents.defaults), so its runtime cannot be told", agent.id),
                "set agents.defaults.model.primary",
            ));
            continue;
        };
        let (p, m) = model.split_once('/').unwrap_or(("", model.as_str()));
        let who = format!("agent `{}` ({model})", agent.id);
        match resolve(cfg, &agent, &model) {
            Err(at) => out.push(Check::fail(
                name,
                format!("{who}: {at} is not an object {{\"id\": …}}; {rel} rejects the config and no turn runs"),
                format!("write {at} as {{\"id\": \"openclaw\"}}"),
            )),
            Ok(Runtime::BuiltIn(policy)) => out.push(Check::ok(
                name,
                format!("{who}: OpenClaw's built-in runtime ({} = {}), where skillsearch's skills block and tool narrowing apply{pin_note}", policy.at, policy.id),
            )),
            Ok(Runtime::Plugin(policy)) => {
                let provided = harnesses
                    .iter()
                    .any(|h| h.declared.contains(&policy.id) || h.declared.is_empty());
                if provided {
                    out.push(Check::warn(
                        name,
                        format!("{who}: the plugin harness `{}` ({}) runs its turns; {harness_gap}{pin_note}", policy.id, policy.at),
                        serve_fix(p, m),
                    ));
                } else {
                    out.push(Check::fail(
                        name,
                        format!("{who}: {} names the plugin harness `{}`, and no enabled plugin provides it: every turn fails closed", policy.at, policy.id),
                        format!("install and enable the plugin that registers `{}`, or {}", policy.id, serve_fix(p, m)),
                    ));
                }
            }
            Ok(Runtime::Auto(policy)) => {
                let from = policy.map_or_else(|| "no runtime policy: auto".to_owned(), |po| format!("{} = {}", po.at, po.id));
                let implied_codex = p == "openai"
                    && get_path(cfg, &["models", "providers", "openai", "baseUrl"]).is_none();
                if !known.is_empty() || implied_codex {
                    let who_claims = if known.is_empty() {
                        "the Codex harness (implied for openai when installed)".to_owned()
                    } else {
                        known.join(", ")
                    };
                    out.push(Check::warn(
                        name,
                        format!("{who}: {from}; {who_claims} may claim its turns, and then {harness_gap}{pin_note}"),
                        serve_fix(p, m),
                    ));
                } else {
                    out.push(Check::ok(
                        name,
                        format!("{who}: {from}, and no enabled plugin provides an agent harness, so OpenClaw's built-in runtime runs its turns, where skillsearch's skills block and tool narrowing apply{pin_note}"),
                    ));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base() -> Value {
        json!({
            "models": {"providers": {"fake": {"baseUrl": "http://x/v1", "models": [{"id": "fake-model"}]}}},
            "agents": {"defaults": {"model": {"primary": "fake/fake-model"}}}
        })
    }

    fn levels(checks: &[Check]) -> Vec<String> {
        checks
            .iter()
            .map(|c| format!("{:?}: {}", c.status, c.detail))
            .collect()
    }

    impl Check {
        fn is_ok(&self) -> bool {
            self.status == super::super::Status::Ok
        }
    }

    const V96: Option<Version> = Some((2026, 9, 6));
    const V735: Option<Version> = Some((2026, 7, 35));

    #[test]
    fn versions_parse_as_openclaw_prints_them() {
        assert_eq!(
            parse_version("OpenClaw 2026.9.6 (eb377ac)\n"),
            Some((2026, 9, 6))
        );
        assert_eq!(
            parse_version("OpenClaw 2026.7.35 (aa94808)"),
            Some((2026, 7, 35))
        );
        assert_eq!(parse_version("nothing"), None);
    }

    #[test]
    fn nothing_set_and_no_harness_is_the_built_in_runtime() {
        let c = runtime_checks(&base(), V96, &[], None);
        assert_eq!(c.len(), 1, "{:?}", levels(&c));
        assert!(c[0].is_ok(), "{:?}", levels(&c));
        assert!(
            c[0].detail
                .contains("agent `main` (fake/fake-model): no runtime policy: auto"),
            "{}",
            c[0].detail
        );
    }

    #[test]
    fn the_policy_chain_picks_the_first_match_in_openclaws_order() {
        let mut cfg = base();
        cfg["models"]["providers"]["fake"]["agentRuntime"] = json!({"id": "probe"});
        cfg["agents"]["defaults"]["models"] = json!({"fake/*": {"agentRuntime": {"id": "pi"}}});
        let probe = [HarnessPlugin {
            id: "probe-harness".into(),
            declared: vec!["probe".into()],
        }];
        // The wildcard beats the provider.
        let c = runtime_checks(&cfg, V96, &probe, None);
        assert!(
            c[0].is_ok()
                && c[0]
                    .detail
                    .contains("agents.defaults.models[\"fake/*\"].agentRuntime = pi"),
            "{:?}",
            levels(&c)
        );
        // The provider's model entry beats the wildcard.
        cfg["models"]["providers"]["fake"]["models"][0]["agentRuntime"] = json!({"id": "probe"});
        let c = runtime_checks(&cfg, V96, &probe, None);
        assert!(
            !c[0].is_ok() && c[0].detail.contains("the plugin harness `probe`"),
            "{:?}",
            levels(&c)
        );
        assert!(
            c[0].detail
                .contains("restrictive tool policy fails the turn"),
            "{}",
            c[0].detail
        );
        let c = runtime_checks(&cfg, V735, &probe, None);
        assert!(
            c[0].detail.contains("does not enforce a tool allowlist"),
            "{}",
            c[0].detail
        );
        // An exact entry beats both; per agent, its own map beats the defaults.
        cfg["agents"]["defaults"]["models"]["fake/fake-model"] =
            json!({"agentRuntime": {"id": "openclaw"}});
        cfg["agents"]["list"] = json!([
            {"id": "main"},
            {"id": "other", "models": {"fake/fake-model": {"agentRuntime": {"id": "probe"}}}}
        ]);
        let c = runtime_checks(&cfg, V96, &probe, None);
        assert_eq!(c.len(), 2, "{:?}", levels(&c));
        assert!(
            c[0].is_ok() && c[0].detail.starts_with("agent `main`"),
            "{:?}",
            levels(&c)
        );
        assert!(
            !c[1].is_ok()
                && c[1].detail.starts_with("agent `other`")
                && c[1].detail.contains("`probe`"),
            "{:?}",
            levels(&c)
        );
    }

    #[test]
    fn a_missing_harness_fails_closed_and_auto_with_a_harness_is_not_green() {
        let mut cfg = base();
        cfg["models"]["providers"]["fake"]["agentRuntime"] = json!({"id": "codex-app-server"});
        let c = runtime_checks(&cfg, V96, &[], None);
        assert!(
            c[0].detail
                .contains("names the plugin harness `codex`, and no enabled plugin provides it"),
            "{:?}",
            levels(&c)
        );
        assert_eq!(c[0].status, super::super::Status::Fail);
        let probe = [HarnessPlugin {
            id: "probe-harness".into(),
            declared: vec![],
        }];
        let c = runtime_checks(&base(), V96, &probe, None);
        assert!(
            !c[0].is_ok()
                && c[0]
                    .detail
                    .contains("plugin `probe-harness` may claim its turns"),
            "{:?}",
            levels(&c)
        );
        // openai without a custom baseUrl implies Codex.
        let mut cfg = base();
        cfg["agents"]["defaults"]["model"] = json!("openai/gpt-5");
        let c = runtime_checks(&cfg, V96, &[], None);
        assert!(
            !c[0].is_ok() && c[0].detail.contains("Codex harness"),
            "{:?}",
            levels(&c)
        );
    }

    #[test]
    fn invalid_configs_and_the_ignored_variable_are_named() {
        let mut cfg = base();
        cfg["agents"]["defaults"]["agentRuntime"] = json!({"id": "pi"});
        let c = runtime_checks(&cfg, V735, &[], Some("pi"));
        let l = levels(&c);
        assert!(
            l[0].starts_with("Fail")
                && l[0].contains("agents.defaults.agentRuntime")
                && l[0].contains("no turn runs"),
            "{l:?}"
        );
        assert!(
            l.iter().any(|x| x.starts_with("Warn")
                && x.contains("OPENCLAW_AGENT_RUNTIME=pi")
                && x.contains("never reads it")),
            "{l:?}"
        );
        let mut cfg = base();
        cfg["agents"]["entries"] = json!({"main": {}});
        assert!(
            levels(&runtime_checks(&cfg, V735, &[], None))[0]
                .contains("does not know agents.entries")
        );
        assert!(runtime_checks(&cfg, V96, &[], None)[0].is_ok());
        let mut cfg = base();
        cfg["models"]["providers"]["fake"]["agentRuntime"] = json!("openclaw");
        let l = levels(&runtime_checks(&cfg, V96, &[], None));
        assert!(
            l[0].starts_with("Fail") && l[0].contains("is not an object"),
            "{l:?}"
        );
    }

    #[test]
    fn plugins_that_register_harnesses_are_found_and_disabled_ones_skipped() {
        let t = tempfile::tempdir().unwrap();
        let a = t.path().join("a");
        let b = t.path().join("state/extensions/b");
        for (d, id) in [(&a, "a"), (&b, "b")] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(
                d.join("openclaw.plugin.json"),
                format!("{{\"id\": \"{id}\"}}"),
            )
            .unwrap();
        }
        std::fs::write(a.join("index.js"), "api.registerAgentHarness({id: 'x'})").unwrap();
        std::fs::write(b.join("index.js"), "api.registerTool({})").unwrap();
        let cfg = json!({"plugins": {"load": {"paths": [a]}}});
        let found = harness_plugins(&cfg, &t.path().join("state"));
        assert_eq!(
            found,
            [HarnessPlugin {
                id: "a".into(),
                declared: vec![]
            }]
        );
        let cfg =
            json!({"plugins": {"load": {"paths": [a]}, "entries": {"a": {"enabled": false}}}});
        assert!(harness_plugins(&cfg, &t.path().join("state")).is_empty());
    }
}
