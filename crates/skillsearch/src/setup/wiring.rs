//! What the command-hook hosts (Claude Code, Codex, CodeBuddy) share: the commands they run, the
//! `UserPromptSubmit` hook entry they all spell the same way, the mode and skill roots carried in
//! those commands, and the checks every one of them needs.

use super::doctor::Spec;
use super::{Check, FileChange, SetupRequest, is_executable, read_optional, to_json_text};
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The hook's `timeout` written for every host, in seconds. skillsearch's own `deadline_ms`
/// (8 s by default) must stay below it, or the host kills the hook first.
pub const HOOK_TIMEOUT_S: u64 = 10;
/// The MCP server's name in every host's config.
pub const SERVER: &str = "skillsearch";
/// skillsearch's read-only MCP tools.
pub const TOOLS: &[&str] = &["skill_search", "skill_read"];

/// The mode, the roots and the binary a setup writes into the host's commands.
pub struct Wiring {
    pub binary: PathBuf,
    pub home: PathBuf,
    pub mode: &'static str,
    pub skills: Vec<PathBuf>,
}

impl Wiring {
    /// The mode asked for, else the one the host has (`auto` when only our hook is there,
    /// `on_demand` when only our server is), else `on_demand`. Skill roots: those asked for
    /// (made absolute), else those the host's commands carry, else `default_roots`.
    pub fn new(
        req: &SetupRequest,
        existing: Option<&Found>,
        default_roots: Vec<PathBuf>,
    ) -> Result<Self> {
        let mode = match req.mode.as_deref() {
            Some("auto") => "auto",
            Some("on_demand") => "on_demand",
            Some(other) => bail!("--mode: `{other}` is not one of `on_demand`, `auto`"),
            None => match existing {
                Some(f) if f.hook.is_some() && f.server.is_none() => "auto",
                _ => "on_demand",
            },
        };
        let skills = if !req.skills.is_empty() {
            let cwd = std::env::current_dir().context("cannot read the current directory")?;
            req.skills.iter().map(|p| cwd.join(p)).collect()
        } else {
            match existing.map(Found::skills) {
                Some(s) if !s.is_empty() => s,
                _ => default_roots,
            }
        };
        Ok(Wiring {
            binary: req.binary.clone(),
            home: req.home.clone(),
            mode,
            skills,
        })
    }

    pub fn auto(&self) -> bool {
        self.mode == "auto"
    }

    fn common_args(&self) -> Vec<String> {
        vec!["--home".into(), self.home.to_string_lossy().into_owned()]
    }

    fn skills_args(&self) -> Vec<String> {
        self.skills
            .iter()
            .flat_map(|d| ["--skills".to_string(), d.to_string_lossy().into_owned()])
            .collect()
    }

    /// The hook's shell command (hosts run it through `sh -c`).
    pub fn hook_command(&self, host: &str) -> String {
        let mut words = vec![self.binary.to_string_lossy().into_owned()];
        words.extend(self.common_args());
        words.extend(["hook", "--host", host, "--mode", "auto"].map(String::from));
        words.extend(self.skills_args());
        words
            .iter()
            .map(|w| shell_quote(w))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The MCP server's arguments (after the binary).
    pub fn mcp_args(&self) -> Vec<String> {
        let mut args = self.common_args();
        args.extend(["mcp", "--mode", "on_demand"].map(String::from));
        args.extend(self.skills_args());
        args
    }

    pub fn mode_note(&self) -> String {
        let how = if self.auto() {
            "auto: the UserPromptSubmit hook injects the matching skills every turn"
        } else {
            "on_demand: the skill_search / skill_read MCP tools, pre-approved"
        };
        let roots = if self.skills.is_empty() {
            "the default roots (./skills, ./.agents/skills, ~/.agents/skills, ~/.openclaw/skills)"
                .to_string()
        } else {
            self.skills
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!("Mode {how}. Skill roots: {roots}.")
    }
}

/// Quotes a word for `sh` when it needs it.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=+,@%".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Splits a shell command the way `sh` would for the quoting [`shell_quote`] produces (single
/// and double quotes, backslashes); good enough to read our own commands back.
pub fn shell_split(s: &str) -> Vec<String> {
    let (mut words, mut cur, mut in_word) = (Vec::new(), String::new(), false);
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    cur.push(c);
                }
            }
            '"' => {
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => cur.extend(chars.next()),
                        c => cur.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                cur.extend(chars.next());
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}

/// Is this hook command one of ours? (`… skillsearch … hook …`)
pub fn is_our_hook(command: &str) -> bool {
    let words = shell_split(command);
    words.first().is_some_and(|w| w.contains("skillsearch")) && words.iter().any(|w| w == "hook")
}

/// The `--skills` values of an argument list.
pub fn skills_of(args: &[String]) -> Vec<PathBuf> {
    args.windows(2)
        .filter(|w| w[0] == "--skills")
        .map(|w| PathBuf::from(&w[1]))
        .collect()
}

/// Our integration as found in a host's config.
#[derive(Debug, Default)]
pub struct Found {
    /// The hook handler object, and where it sits (group, handler).
    pub hook: Option<(Value, usize, usize)>,
    /// The MCP server's command and arguments.
    pub server: Option<(String, Vec<String>)>,
}

impl Found {
    pub fn skills(&self) -> Vec<PathBuf> {
        if let Some((cmd, args)) = &self.server {
            let _ = cmd;
            return skills_of(args);
        }
        self.hook_words().map(|w| skills_of(&w)).unwrap_or_default()
    }

    pub fn hook_words(&self) -> Option<Vec<String>> {
        let cmd = self.hook.as_ref()?.0.get("command")?.as_str()?;
        Some(shell_split(cmd))
    }

    /// Every binary our entries run.
    pub fn binaries(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        if let Some(w) = self.hook_words().and_then(|w| w.into_iter().next()) {
            out.push(PathBuf::from(w));
        }
        if let Some((cmd, _)) = &self.server {
            out.push(PathBuf::from(cmd));
        }
        out
    }

    /// The hook's `timeout` in seconds, or `default` when it sets none.
    pub fn hook_timeout(&self, default: u64) -> Option<u64> {
        let h = &self.hook.as_ref()?.0;
        Some(
            h.get("timeout")
                .or_else(|| h.get("timeoutSec"))
                .and_then(Value::as_u64)
                .unwrap_or(default),
        )
    }
}

/// Our `UserPromptSubmit` handler in a `{"hooks": {"UserPromptSubmit": [...]}}` document.
/// The tool names a model sees for a JSON-configured MCP server (`mcp__<server>__<tool>`).
pub fn mcp_tool_names() -> Vec<String> {
    TOOLS
        .iter()
        .map(|t| format!("mcp__{SERVER}__{t}"))
        .collect()
}

/// Our prompt hook in `settings`, and our server in `servers` (a JSON file with `mcpServers`).
pub fn find_in_json(settings: &Value, servers: &Value) -> Found {
    let server = super::get_path(servers, &["mcpServers", SERVER]).and_then(|s| {
        let cmd = s.get("command")?.as_str()?.to_string();
        let args = s
            .get("args")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        Some((cmd, args))
    });
    Found {
        hook: find_prompt_hook(settings),
        server,
    }
}

pub fn find_prompt_hook(root: &Value) -> Option<(Value, usize, usize)> {
    let groups = root.get("hooks")?.get("UserPromptSubmit")?.as_array()?;
    groups.iter().enumerate().find_map(|(g, group)| {
        group
            .get("hooks")?
            .as_array()?
            .iter()
            .enumerate()
            .find(|(_, h)| {
                h.get("command")
                    .and_then(Value::as_str)
                    .is_some_and(is_our_hook)
            })
            .map(|(i, h)| (h.clone(), g, i))
    })
}

/// Removes our `UserPromptSubmit` handlers (and groups left empty) and, when `command` is given,
/// appends one group running it. Returns where ours now is (group, handler).
pub fn merge_prompt_hook(
    root: &mut Value,
    file: &Path,
    command: Option<&str>,
) -> Result<Option<(usize, usize)>> {
    if !root.is_object() {
        bail!("{} is not a JSON object", file.display());
    }
    let hooks = root
        .as_object_mut()
        .expect("checked")
        .entry("hooks")
        .or_insert_with(|| json!({}));
    let Some(hooks) = hooks.as_object_mut() else {
        bail!("`hooks` in {} is not an object", file.display());
    };
    let groups = hooks.entry("UserPromptSubmit").or_insert_with(|| json!([]));
    let Some(groups) = groups.as_array_mut() else {
        bail!(
            "`hooks.UserPromptSubmit` in {} is not an array",
            file.display()
        );
    };
    for group in groups.iter_mut() {
        if let Some(list) = group.get_mut("hooks").and_then(Value::as_array_mut) {
            list.retain(|h| {
                !h.get("command")
                    .and_then(Value::as_str)
                    .is_some_and(is_our_hook)
            });
        }
    }
    groups.retain(|g| {
        g.get("hooks")
            .and_then(Value::as_array)
            .is_none_or(|l| !l.is_empty())
    });
    let at = command.map(|cmd| {
        groups.push(
            json!({"hooks": [{"type": "command", "command": cmd, "timeout": HOOK_TIMEOUT_S}]}),
        );
        (groups.len() - 1, 0)
    });
    if groups.is_empty() {
        hooks.remove("UserPromptSubmit");
    }
    if hooks.is_empty() {
        root.as_object_mut().expect("checked").remove("hooks");
    }
    Ok(at)
}

/// Adds (or, with `add == false`, removes) `entries` in the string array at `path`.
pub fn merge_string_list(
    root: &mut Value,
    file: &Path,
    path: &[&str],
    entries: &[String],
    add: bool,
) -> Result<()> {
    let current = super::get_path(root, path).cloned();
    let mut list = match current {
        None => vec![],
        Some(Value::Array(a)) => a,
        Some(_) => bail!("`{}` in {} is not an array", path.join("."), file.display()),
    };
    let before = list.len();
    list.retain(|v| !v.as_str().is_some_and(|s| entries.iter().any(|e| e == s)));
    if add {
        list.extend(entries.iter().map(|e| Value::String(e.clone())));
    } else if list.len() == before {
        return Ok(());
    }
    if list.is_empty() && !add {
        return remove_path(root, path);
    }
    super::set_path(root, path, Value::Array(list))
        .with_context(|| format!("in {}", file.display()))
}

/// Removes the key at `path` if it is there, and objects left empty above it.
pub fn remove_path(root: &mut Value, path: &[&str]) -> Result<()> {
    fn go(v: &mut Value, path: &[&str]) {
        let Some(obj) = v.as_object_mut() else { return };
        match path {
            [] => {}
            [last] => {
                obj.remove(*last);
            }
            [first, rest @ ..] => {
                if let Some(child) = obj.get_mut(*first) {
                    go(child, rest);
                    if child.as_object().is_some_and(|o| o.is_empty()) {
                        obj.remove(*first);
                    }
                }
            }
        }
    }
    go(root, path);
    Ok(())
}

/// A JSON config file: its text (if any) and its value (an empty object when missing).
pub fn read_json(path: &Path) -> Result<(Option<String>, Value)> {
    let text = read_optional(path)?;
    let value = match text.as_deref().map(str::trim) {
        None | Some("") => json!({}),
        Some(t) => {
            let v: Value = serde_json::from_str(t)
                .with_context(|| format!("{} is not valid JSON", path.display()))?;
            if !v.is_object() {
                bail!("{} is not a JSON object", path.display());
            }
            v
        }
    };
    Ok((text, value))
}

/// The change that writes `value` to `path`, given the text it has now.
pub fn json_change(path: &Path, before: Option<String>, value: &Value) -> FileChange {
    FileChange {
        path: path.to_path_buf(),
        before,
        after: to_json_text(value),
        executable: false,
    }
}

/// A directory named by an environment variable, if set and not empty.
pub fn env_dir(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The user's home directory (`HOME`).
pub fn user_home() -> Result<PathBuf> {
    env_dir("HOME").context("HOME is not set")
}

/// Every check of a command-hook host, in order: which of hook and server are installed (and
/// nothing more when neither is), the binaries, the host's own checks, the skill roots, and the
/// deadline against the hook's timeout (`default_timeout_s` when the hook sets none).
pub fn doctor(
    found: &Found,
    host: &str,
    home: &Path,
    default_timeout_s: u64,
    own: Vec<Spec>,
) -> Vec<Check> {
    let mut checks = vec![check_exclusive(found, host)];
    if found.hook.is_none() && found.server.is_none() {
        return checks;
    }
    checks.push(check_binaries(found, host));
    checks.extend(super::doctor::eval_all(own));
    checks.push(check_roots(found, host));
    checks.push(check_deadline(home, found.hook_timeout(default_timeout_s)));
    checks
}

/// `binary`: every binary our entries run exists and is executable.
fn check_binaries(found: &Found, host: &str) -> Check {
    let bins = found.binaries();
    if bins.is_empty() {
        return Check::fail(
            "binary",
            "no skillsearch command is configured",
            format!("skillsearch setup {host}"),
        );
    }
    match bins.iter().find(|b| !is_executable(b)) {
        Some(b) => Check::fail(
            "binary",
            format!(
                "{} is not an executable file: the host runs nothing",
                b.display()
            ),
            format!("run `skillsearch setup {host}` with the skillsearch binary you want to keep"),
        ),
        None => Check::ok("binary", format!("{} is executable", bins[0].display())),
    }
}

/// `skill-roots`: the roots the commands carry exist.
fn check_roots(found: &Found, host: &str) -> Check {
    let roots = found.skills();
    if roots.is_empty() {
        return Check::ok(
            "skill-roots",
            "no --skills: the default roots of the host's working directory",
        );
    }
    match roots.iter().find(|r| !r.is_dir()) {
        Some(r) => Check::warn(
            "skill-roots",
            format!("{} is not a directory: nothing is found there", r.display()),
            format!(
                "mkdir -p {} (or skillsearch setup {host} --skills DIR)",
                shell_quote(&r.to_string_lossy())
            ),
        ),
        None => Check::ok(
            "skill-roots",
            roots
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        ),
    }
}

/// `deadline`: skillsearch's `deadline_ms` finishes inside the host's hook timeout.
fn check_deadline(home: &Path, timeout_s: Option<u64>) -> Check {
    let s = match crate::context::settings(home, None, crate::context::Flags::default()) {
        Ok(s) => s,
        Err(e) => {
            return Check::fail(
                "config",
                format!("{e:#}"),
                "fix the named key (skillsearch config show lists every key)",
            );
        }
    };
    let Some(t) = timeout_s else {
        return Check::ok(
            "deadline",
            format!("deadline_ms = {} (no hook installed)", s.deadline_ms),
        );
    };
    if s.deadline_ms + 500 > t * 1000 {
        Check::fail(
            "deadline",
            format!(
                "deadline_ms = {} does not finish inside the hook timeout of {t} s: the host kills the hook first",
                s.deadline_ms
            ),
            format!(
                "set deadline_ms = {} in {}",
                (t * 1000).saturating_sub(2000).max(50),
                home.join("config.toml").display()
            ),
        )
    } else {
        Check::ok(
            "deadline",
            format!(
                "deadline_ms = {} inside the hook timeout of {t} s",
                s.deadline_ms
            ),
        )
    }
}

/// `modes`: only one of hook and server is installed (modes are exclusive).
fn check_exclusive(found: &Found, host: &str) -> Check {
    match (&found.hook, &found.server) {
        (Some(_), Some(_)) => Check::warn(
            "modes",
            "both the hook and the MCP server are installed; each follows skillsearch's configured mode, so one is idle",
            format!("skillsearch setup {host} --mode auto (or --mode on_demand)"),
        ),
        (Some(_), None) => Check::ok("modes", "auto (hook)"),
        (None, Some(_)) => Check::ok("modes", "on_demand (MCP server)"),
        (None, None) => Check::fail(
            "installed",
            "neither the skillsearch hook nor its MCP server is configured",
            format!("skillsearch setup {host}"),
        ),
    }
}

/// Where a host that keeps its hook and tool approvals in a `settings.json` and its MCP servers
/// in another JSON file's `mcpServers` (Claude Code, CodeBuddy) has them.
pub struct SettingsHost<'a> {
    pub host: &'a str,
    pub settings: &'a Path,
    pub servers: &'a Path,
    pub skills: &'a Path,
    /// The command line the closing note suggests (`claude -p "…"`).
    pub try_it: &'a str,
}

/// The setup of a [`SettingsHost`]: in `auto` the `UserPromptSubmit` hook, in `on_demand` the
/// tool approvals and the MCP server entry `server_entry` gives (merged into the user's own
/// keys, then `finish` runs on the servers document).
pub fn setup_settings_host(
    req: &SetupRequest,
    h: &SettingsHost<'_>,
    server_entry: impl FnOnce(&Wiring) -> Value,
    finish: impl FnOnce(&mut Value) -> Result<()>,
) -> Result<super::SetupPlan> {
    if let Some((k, _)) = req.options.first() {
        bail!("setup {}: unknown option `{k}` (it takes none)", h.host);
    }
    let (s_text, mut settings) = read_json(h.settings)?;
    let (m_text, mut servers) = read_json(h.servers)?;
    let found = find_in_json(&settings, &servers);
    let w = Wiring::new(
        req,
        (found.hook.is_some() || found.server.is_some()).then_some(&found),
        vec![h.skills.to_path_buf()],
    )?;
    let hook = w.auto().then(|| w.hook_command(h.host));
    merge_prompt_hook(&mut settings, h.settings, hook.as_deref())?;
    merge_string_list(
        &mut settings,
        h.settings,
        &["permissions", "allow"],
        &mcp_tool_names(),
        !w.auto(),
    )?;
    if w.auto() {
        remove_path(&mut servers, &["mcpServers", SERVER])?;
    } else {
        // Keys setup owns; the user's own (`env`, `timeout`, …) stay.
        super::merge_keys(&mut servers, &["mcpServers", SERVER], server_entry(&w))?;
        finish(&mut servers)?;
    }
    let mut plan = super::SetupPlan::default();
    plan.changes
        .push(json_change(h.settings, s_text, &settings));
    if m_text.is_some() || !w.auto() {
        plan.changes.push(json_change(h.servers, m_text, &servers));
    }
    plan.notes.push(w.mode_note());
    plan.notes.push(format!(
        "Then: {} uses skillsearch; `skillsearch doctor {}` checks it.",
        h.try_it, h.host
    ));
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doctor_puts_the_hosts_checks_between_the_shared_ones() {
        let home = tempfile::tempdir().unwrap();
        let own = || {
            vec![
                Spec::info("own", "x"),
                Spec {
                    name: "quiet",
                    gates: vec![],
                    ok: None,
                },
            ]
        };
        let names = |checks: Vec<Check>| checks.iter().map(|c| c.name).collect::<Vec<_>>();
        let none = doctor(&Found::default(), "h", home.path(), 60, own());
        assert_eq!(names(none), ["installed"]);
        let server = Found {
            hook: None,
            server: Some(("/nonexistent/skillsearch".into(), vec![])),
        };
        let checks = doctor(&server, "h", home.path(), 60, own());
        assert_eq!(checks[1].status, crate::setup::Status::Fail, "{checks:?}");
        assert_eq!(
            names(checks),
            ["modes", "binary", "own", "skill-roots", "deadline"]
        );
    }

    #[test]
    fn quoting_round_trips() {
        for w in ["/usr/bin/skillsearch", "/a b/c's", "", "x\"y", "--skills"] {
            let q = shell_quote(w);
            assert_eq!(shell_split(&q), vec![w.to_string()], "{q}");
        }
        assert_eq!(
            shell_split("a 'b c'  \"d e\" f\\ g"),
            ["a", "b c", "d e", "f g"]
        );
    }

    #[test]
    fn prompt_hook_merge_keeps_others_and_is_stable() {
        let mut v = json!({"hooks": {"UserPromptSubmit": [
            {"hooks": [{"type": "command", "command": "other"}]},
            {"hooks": [{"type": "command", "command": "/old/skillsearch hook --host codex"}]}
        ], "Stop": []}, "x": 1});
        let p = Path::new("f.json");
        let at = merge_prompt_hook(&mut v, p, Some("/new/skillsearch hook")).unwrap();
        assert_eq!(at, Some((1, 0)));
        let groups = v["hooks"]["UserPromptSubmit"].as_array().unwrap();
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0]["hooks"][0]["command"], "other");
        assert_eq!(groups[1]["hooks"][0]["timeout"], HOOK_TIMEOUT_S);
        let once = v.clone();
        merge_prompt_hook(&mut v, p, Some("/new/skillsearch hook")).unwrap();
        assert_eq!(v, once);
        assert_eq!(find_prompt_hook(&v).unwrap().1, 1);
        merge_prompt_hook(&mut v, p, None).unwrap();
        assert!(find_prompt_hook(&v).is_none());
        assert_eq!(v["hooks"]["UserPromptSubmit"].as_array().unwrap().len(), 1);
        let mut bad = json!({"hooks": {"UserPromptSubmit": 3}});
        let e = merge_prompt_hook(&mut bad, p, None).unwrap_err();
        assert!(e.to_string().contains("hooks.UserPromptSubmit"), "{e}");
    }

    #[test]
    fn string_lists_add_and_remove() {
        let mut v = json!({"permissions": {"allow": ["Bash(ls)"]}});
        let p = Path::new("f.json");
        let e = vec!["a".to_string(), "b".to_string()];
        merge_string_list(&mut v, p, &["permissions", "allow"], &e, true).unwrap();
        merge_string_list(&mut v, p, &["permissions", "allow"], &e, true).unwrap();
        assert_eq!(v["permissions"]["allow"], json!(["Bash(ls)", "a", "b"]));
        merge_string_list(&mut v, p, &["permissions", "allow"], &e, false).unwrap();
        assert_eq!(v["permissions"]["allow"], json!(["Bash(ls)"]));
        let mut w = json!({});
        merge_string_list(&mut w, p, &["permissions", "allow"], &e, false).unwrap();
        assert_eq!(w, json!({}));
    }
}
