//! Hermes Agent: installs the skillsearch memory-provider plugin into
//! `$HERMES_HOME/plugins/skillsearch/`, takes the memory slot (`memory.provider`) and writes the
//! plugin's settings under `plugins.skillsearch` in `$HERMES_HOME/config.yaml`; and checks every
//! gate that leaves it silently inert (slot held by another provider, plugin missing or stale,
//! binary gone, a deadline past Hermes' fixed 8 s prefetch cap, a configuration it rejects).
//!
//! `config.yaml` is the user's file: it is edited in place, line by line, touching only the
//! `memory.provider` line and the `plugins.skillsearch` block, and the edit is accepted only when
//! parsing the result gives exactly the old document with those two values changed.

use super::plugin_config::{DEFAULT_DEADLINE_MS, Dialect, PluginConfig};
use super::{Check, FileChange, SetupPlan, SetupRequest, get_path, set_path};
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use skillsearch_core::config::MODES;
use std::path::{Path, PathBuf};

/// The plugin's directory name and memory-provider name.
pub const NAME: &str = "skillsearch";
/// The plugin, embedded so that setup works from the binary alone.
pub const PLUGIN_FILES: &[(&str, &str)] = &[
    (
        "plugin.yaml",
        include_str!("../../../../hosts/hermes/plugin/plugin.yaml"),
    ),
    (
        "__init__.py",
        include_str!("../../../../hosts/hermes/plugin/__init__.py"),
    ),
];
/// Hermes abandons a memory provider's prefetch after 8.0 s (`agent/memory_manager.py`, not
/// configurable) and skips the provider on later turns while the stuck call runs.
pub const PREFETCH_CAP_MS: u64 = 8000;
/// Above this, doctor warns: engine start, the reply and Hermes' own work share the 8 s.
pub const WARN_ABOVE_MS: u64 = 6000;
/// How the plugin reads `plugins.skillsearch` (its `_config`): `null` is a value (and wrong),
/// `skills` may be one string, `binary` and `home` are read only when strings.
const DIALECT: Dialect = Dialect {
    null_is_absent: false,
    skills_may_be_string: true,
    skills_non_empty: false,
    strings_typed: false,
};
/// `--set` options of `setup hermes`.
const OPTIONS: &[&str] = &["replace_memory_provider", "deadline_ms"];

/// `$HERMES_HOME`, else `~/.hermes`.
pub fn hermes_home() -> Result<PathBuf> {
    if let Some(h) = std::env::var_os("HERMES_HOME").filter(|h| !h.is_empty()) {
        return Ok(std::path::absolute(PathBuf::from(h))?);
    }
    let home = std::env::var_os("HOME").context("neither HERMES_HOME nor HOME is set")?;
    Ok(PathBuf::from(home).join(".hermes"))
}

fn config_path(hermes: &Path) -> PathBuf {
    hermes.join("config.yaml")
}

fn plugin_dir(hermes: &Path) -> PathBuf {
    hermes.join("plugins").join(NAME)
}

/// `config.yaml` as a JSON value; an empty file is an empty mapping.
fn parse_config(text: &str, path: &Path) -> Result<Value> {
    let v: Value = serde_saphyr::from_str(text)
        .with_context(|| format!("{} is not valid YAML", path.display()))?;
    match v {
        Value::Null => Ok(json!({})),
        Value::Object(_) => Ok(v),
        _ => bail!("{} is not a YAML mapping", path.display()),
    }
}

fn parse_bool(key: &str, v: &str) -> Result<bool> {
    match v {
        "true" | "yes" | "1" => Ok(true),
        "false" | "no" | "0" => Ok(false),
        _ => bail!("--set {key}={v}: expected true or false"),
    }
}

pub fn setup(req: &SetupRequest) -> Result<SetupPlan> {
    let mut replace = false;
    let mut deadline: Option<u64> = None;
    for (k, v) in &req.options {
        match k.as_str() {
            "replace_memory_provider" => replace = parse_bool(k, v)?,
            "deadline_ms" => {
                let ms: u64 = v
                    .parse()
                    .ok()
                    .filter(|ms| *ms > 0)
                    .with_context(|| format!("--set deadline_ms={v}: expected milliseconds"))?;
                if ms >= PREFETCH_CAP_MS {
                    bail!(
                        "--set deadline_ms={ms}: Hermes abandons a prefetch after {PREFETCH_CAP_MS} ms and then skips the provider while it runs; use at most {WARN_ABOVE_MS}"
                    );
                }
                deadline = Some(ms);
            }
            other => bail!(
                "--set {other}: not an option of setup hermes; accepted: {}",
                OPTIONS.join(", ")
            ),
        }
    }
    let hermes = hermes_home()?;
    let cfg_path = config_path(&hermes);
    let before_text = super::read_optional(&cfg_path)?.unwrap_or_default();
    let before = parse_config(&before_text, &cfg_path)?;

    let holder = get_path(&before, &["memory", "provider"])
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|p| !p.is_empty() && *p != NAME);
    if let (Some(other), false) = (holder, replace) {
        bail!(
            "memory.provider in {} is `{other}`: Hermes runs one external memory provider, and setup will not take the slot from `{other}` silently. To switch to skillsearch, run again with --set replace_memory_provider=true (`{other}` stays installed and can be restored from the backup)",
            cfg_path.display()
        );
    }

    let existing = get_path(&before, &["plugins", NAME]).and_then(Value::as_object);
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
        // Hermes' own roots: its skills directory, then `skills.external_dirs`.
        let mut roots = vec![hermes.join("skills").display().to_string()];
        if let Some(dirs) =
            get_path(&before, &["skills", "external_dirs"]).and_then(Value::as_array)
        {
            roots.extend(dirs.iter().filter_map(Value::as_str).map(str::to_owned));
        }
        roots
    };
    let deadline = deadline
        .or_else(|| {
            existing
                .and_then(|e| e.get("deadline_ms"))
                .and_then(Value::as_u64)
                .filter(|ms| *ms > 0 && *ms < PREFETCH_CAP_MS)
        })
        .unwrap_or(DEFAULT_DEADLINE_MS);
    let section = PluginConfig {
        binary: req.binary.display().to_string(),
        mode,
        skills,
        home: std::path::absolute(&req.home)?.display().to_string(),
        deadline_ms: deadline,
    };

    let mut after = set_block(&before_text, "memory", "provider", &|ci| {
        format!("{}provider: {NAME}\n", " ".repeat(ci))
    })?;
    after = set_block(&after, "plugins", NAME, &|ci| yaml(&section, ci))?;

    // The edit must change exactly these two values and nothing else.
    let mut expected = before.clone();
    for top in ["memory", "plugins"] {
        if expected.get(top).is_some_and(Value::is_null) {
            expected[top] = json!({});
        }
    }
    set_path(&mut expected, &["memory", "provider"], json!(NAME))?;
    set_path(&mut expected, &["plugins", NAME], section.json())?;
    let got = parse_config(&after, &cfg_path).ok();
    if got.as_ref() != Some(&expected) {
        bail!(
            "cannot edit {} safely (its `memory` or `plugins` section is written in a form this edit does not handle); set these by hand:\nmemory:\n  provider: {NAME}\nplugins:\n{}",
            cfg_path.display(),
            yaml(&section, 2)
        );
    }

    let mut changes = Vec::new();
    let dir = plugin_dir(&hermes);
    for (file, text) in PLUGIN_FILES {
        changes.push(FileChange::to(dir.join(file), (*text).to_owned())?);
    }
    changes.push(FileChange::to(&cfg_path, after)?);
    let mut notes = vec![format!(
        "Hermes ({}) now runs skillsearch as its memory provider in `{}` mode over {} skill root(s), deadline {} ms (Hermes' prefetch cap is {PREFETCH_CAP_MS} ms).",
        hermes.display(),
        section.mode,
        section.skills.len(),
        section.deadline_ms
    )];
    if let (Some(other), true) = (holder, replace) {
        notes.push(format!(
            "memory.provider was `{other}`; it is now `{NAME}` (the backup of config.yaml keeps the old value)."
        ));
    }
    if section.deadline_ms > WARN_ABOVE_MS {
        notes.push(format!(
            "deadline_ms {} leaves little of Hermes' {PREFETCH_CAP_MS} ms prefetch cap; {DEFAULT_DEADLINE_MS} is the default.",
            section.deadline_ms
        ));
    }
    notes.push("Check it with: skillsearch doctor hermes".to_owned());
    Ok(SetupPlan {
        changes,
        notes,
        ..Default::default()
    })
}

/// `plugins.skillsearch` as setup writes it: the block under `plugins:`, its key at indent `ci`.
/// Strings are JSON-quoted, which YAML reads as double-quoted scalars, so no path can change the
/// structure.
fn yaml(section: &PluginConfig, ci: usize) -> String {
    let (i, j) = (" ".repeat(ci), " ".repeat(ci + 2));
    let q = |s: &str| serde_json::to_string(s).expect("strings serialise");
    let mut y = format!(
        "{i}{NAME}:\n{j}binary: {}\n{j}mode: {}\n{j}skills:\n",
        q(&section.binary),
        section.mode
    );
    for s in &section.skills {
        y.push_str(&format!("{j}  - {}\n", q(s)));
    }
    y.push_str(&format!(
        "{j}home: {}\n{j}deadline_ms: {}\n",
        q(&section.home),
        section.deadline_ms
    ));
    y
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

fn blank_or_comment(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

/// What follows `key:` on `line` (after its indentation), if the line is that key.
fn after_key<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let rest = line
        .trim_start_matches(' ')
        .strip_prefix(key)?
        .strip_prefix(':')?;
    (rest.is_empty() || rest.starts_with([' ', '\t', '\r', '\n'])).then_some(rest)
}

/// Replaces (or adds) the child `child` of the top-level mapping `top` in YAML `text` with the
/// lines `render(child_indent)`, leaving every other line as it is.
fn set_block(
    text: &str,
    top: &str,
    child: &str,
    render: &dyn Fn(usize) -> String,
) -> Result<String> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let Some(t) = lines
        .iter()
        .position(|l| indent(l) == 0 && after_key(l, top).is_some())
    else {
        let mut out = text.to_owned();
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&format!("{top}:\n{}", render(2)));
        return Ok(out);
    };
    let inline = after_key(lines[t], top).unwrap_or("");
    let inline = inline.split(" #").next().unwrap_or("").trim();
    let head = match inline {
        "" => lines[t].to_owned(),
        "{}" | "null" | "~" => format!("{top}:\n"),
        other => bail!("`{top}: {other}` is written inline; this edit needs a block mapping"),
    };
    let mut end = t + 1;
    while end < lines.len() && (blank_or_comment(lines[end]) || indent(lines[end]) > 0) {
        end += 1;
    }
    let content_end = (t + 1..end)
        .rev()
        .find(|&j| !blank_or_comment(lines[j]))
        .map_or(t + 1, |j| j + 1);
    let ci = (t + 1..content_end)
        .find(|&j| !blank_or_comment(lines[j]))
        .map_or(2, |j| indent(lines[j]));
    let (from, to) = match (t + 1..content_end)
        .find(|&j| indent(lines[j]) == ci && after_key(lines[j], child).is_some())
    {
        Some(c) => {
            let mut e = c + 1;
            while e < content_end {
                let l = lines[e];
                let seq_item = indent(l) == ci && l.trim_start().starts_with('-');
                if blank_or_comment(l) || indent(l) > ci || seq_item {
                    e += 1;
                } else {
                    break;
                }
            }
            while e > c + 1 && blank_or_comment(lines[e - 1]) {
                e -= 1;
            }
            (c, e)
        }
        None => (content_end, content_end),
    };
    let mut out: String = lines[..t].concat();
    out.push_str(&head);
    out.push_str(&lines[t + 1..from].concat());
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&render(ci));
    out.push_str(&lines[to..].concat());
    Ok(out)
}

/// `plugins.skillsearch` as the plugin reads it, or the message naming the key at fault.
fn read_section(cfg: &Value, path: &Path) -> std::result::Result<Option<PluginConfig>, String> {
    let Some(raw) = get_path(cfg, &["plugins", NAME]) else {
        return Ok(None);
    };
    let Some(obj) = raw.as_object() else {
        return Err(format!(
            "`plugins.{NAME}` in {} is not a mapping",
            path.display()
        ));
    };
    PluginConfig::read(obj, &format!("plugins.{NAME}"), path, DIALECT).map(Some)
}

const FIX_SETUP: &str = "skillsearch setup hermes";

pub fn doctor(_home: &Path) -> Result<Vec<Check>> {
    let hermes = hermes_home()?;
    let mut checks = Vec::new();
    let cfg_path = config_path(&hermes);
    let cfg = match super::read_optional(&cfg_path)? {
        None => {
            checks.push(Check::fail(
                "config",
                format!("{} does not exist", cfg_path.display()),
                FIX_SETUP,
            ));
            None
        }
        Some(text) => match parse_config(&text, &cfg_path) {
            Ok(v) => Some(v),
            Err(e) => {
                checks.push(Check::fail(
                    "config",
                    format!("{e:#}"),
                    format!(
                        "fix the YAML in {}, then run {FIX_SETUP}",
                        cfg_path.display()
                    ),
                ));
                None
            }
        },
    };
    let section = match &cfg {
        None => None,
        Some(cfg) => match read_section(cfg, &cfg_path) {
            Ok(Some(s)) => {
                checks.push(Check::ok(
                    "config",
                    format!("plugins.{NAME} in {}: mode {}", cfg_path.display(), s.mode),
                ));
                Some(s)
            }
            Ok(None) => {
                checks.push(Check::fail(
                    "config",
                    format!("no plugins.{NAME} in {}", cfg_path.display()),
                    FIX_SETUP,
                ));
                None
            }
            Err(msg) => {
                checks.push(Check::fail(
                    "config",
                    msg,
                    format!("{FIX_SETUP} --mode on_demand (or auto), or correct the key"),
                ));
                None
            }
        },
    };

    if let Some(cfg) = &cfg {
        match get_path(cfg, &["memory", "provider"]).and_then(Value::as_str) {
            Some(NAME) => checks.push(Check::ok("memory-slot", format!("memory.provider is {NAME}"))),
            Some(other) if !other.trim().is_empty() => checks.push(Check::fail(
                "memory-slot",
                format!("memory.provider is `{other}`: Hermes runs one external provider, so skillsearch is inert"),
                format!("{FIX_SETUP} --set replace_memory_provider=true"),
            )),
            _ => checks.push(Check::fail(
                "memory-slot",
                "memory.provider is not set: the plugin is installed but never loaded",
                FIX_SETUP,
            )),
        }
    }

    let dir = plugin_dir(&hermes);
    checks.push(super::plugin_files_check(&dir, PLUGIN_FILES, FIX_SETUP)?);

    let Some(s) = section else {
        return Ok(checks);
    };
    let binary = super::binary_check(
        &mut checks,
        &s.binary,
        &format!("no plugins.{NAME}.binary"),
        "Hermes",
        FIX_SETUP,
    );

    checks.push(if s.deadline_ms >= PREFETCH_CAP_MS {
        Check::fail(
            "deadline",
            format!(
                "plugins.{NAME}.deadline_ms is {} ms: Hermes abandons a prefetch after {PREFETCH_CAP_MS} ms and then skips skillsearch while it runs",
                s.deadline_ms
            ),
            format!("{FIX_SETUP} --set deadline_ms={DEFAULT_DEADLINE_MS}"),
        )
    } else if s.deadline_ms > WARN_ABOVE_MS {
        Check::warn(
            "deadline",
            format!(
                "plugins.{NAME}.deadline_ms is {} ms, close to Hermes' {PREFETCH_CAP_MS} ms prefetch cap",
                s.deadline_ms
            ),
            format!("{FIX_SETUP} --set deadline_ms={DEFAULT_DEADLINE_MS}"),
        )
    } else {
        Check::ok(
            "deadline",
            format!(
                "{} ms, inside Hermes' {PREFETCH_CAP_MS} ms prefetch cap",
                s.deadline_ms
            ),
        )
    });

    // on_demand tools reach the model only while Hermes' `memory` toolset is on; an explicit
    // CLI toolset list without it (and without a `hermes-*` composite that includes it) hides them.
    let cli_toolsets = cfg
        .as_ref()
        .and_then(|c| get_path(c, &["platform_toolsets", "cli"]))
        .and_then(Value::as_array);
    if let Some(list) = cli_toolsets.filter(|_| s.mode == "on_demand") {
        let names: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
        if !names.contains(&"memory") && !names.iter().any(|n| n.starts_with("hermes-")) {
            checks.push(Check::warn(
                "memory-toolset",
                "platform_toolsets.cli has no `memory` toolset: Hermes then leaves skill_search / skill_read out of the CLI's tools",
                "add `memory` to platform_toolsets.cli in config.yaml (or enable it in `hermes tools`)",
            ));
        }
    }

    let roots = if s.skills.is_empty() {
        vec![hermes.join("skills").display().to_string()]
    } else {
        s.skills.clone()
    };
    checks.push(super::roots_check(&roots, FIX_SETUP));

    if let Some(b) = binary {
        checks.push(super::probe_engine(
            &b,
            &s.home,
            &s.mode,
            s.deadline_ms,
            &roots,
            "hermes",
        ));
    }
    Ok(checks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::plugin_config::KEYS;

    fn section() -> PluginConfig {
        PluginConfig {
            binary: "/opt/bin/skillsearch".into(),
            mode: "auto".into(),
            skills: vec!["/s/one".into(), "/s/t w\"o".into()],
            home: "/h".into(),
            deadline_ms: 5000,
        }
    }

    fn edit(text: &str) -> String {
        let s = section();
        let t = set_block(text, "memory", "provider", &|ci| {
            format!("{}provider: {NAME}\n", " ".repeat(ci))
        })
        .unwrap();
        set_block(&t, "plugins", NAME, &|ci| yaml(&s, ci)).unwrap()
    }

    fn parse(t: &str) -> Value {
        parse_config(t, Path::new("config.yaml")).unwrap()
    }

    #[test]
    fn edit_keeps_every_other_line_and_is_idempotent() {
        let user = "# my hermes\nmodel:\n  provider: custom   # keep me\n  default: gpt\nmemory:\n    memory_enabled: true\n    provider: ''\n    user_char_limit: 1375\n\nplugins:\n    enabled:\n    - foo\n    foo:\n        x: 1\ndisplay:\n  skin: dark\n";
        let once = edit(user);
        assert_eq!(edit(&once), once, "second run changes nothing");
        for kept in [
            "# my hermes\n",
            "  provider: custom   # keep me\n",
            "    memory_enabled: true\n",
            "    user_char_limit: 1375\n",
            "    - foo\n",
            "        x: 1\n",
            "display:\n  skin: dark\n",
        ] {
            assert!(once.contains(kept), "lost {kept:?} in\n{once}");
        }
        let mut expected = parse(user);
        expected["memory"]["provider"] = json!(NAME);
        expected["plugins"][NAME] = section().json();
        assert_eq!(parse(&once), expected, "{once}");
        assert!(once.contains("    provider: skillsearch\n"), "{once}");
    }

    #[test]
    fn edit_replaces_an_old_block_and_adds_missing_sections() {
        let old = "plugins:\n  skillsearch:\n    mode: on_demand\n    skills:\n    - /old\n\n  other:\n    a: 1\n";
        let t = edit(old);
        let v = parse(&t);
        assert_eq!(v["plugins"][NAME], section().json());
        assert_eq!(v["plugins"]["other"], json!({"a": 1}));
        assert_eq!(v["memory"], json!({"provider": NAME}));
        assert!(!t.contains("/old"));
        let v = parse(&edit(""));
        assert_eq!(v["memory"]["provider"], json!(NAME));
        assert_eq!(v["plugins"][NAME]["skills"][1], json!("/s/t w\"o"));
        let v = parse(&edit("memory: {}\nplugins: null\nx: 1"));
        assert_eq!(v["x"], json!(1));
        assert_eq!(v["memory"]["provider"], json!(NAME));
        assert!(
            set_block("memory: {provider: mem0}\n", "memory", "provider", &|_| {
                String::new()
            })
            .is_err()
        );
    }

    #[test]
    fn section_errors_name_the_key() {
        let p = Path::new("c.yaml");
        let bad = json!({"plugins": {NAME: {"mode": "atuo"}}});
        let e = read_section(&bad, p).err().unwrap();
        assert!(
            e.contains("plugins.skillsearch.mode") && e.contains("atuo"),
            "{e}"
        );
        let bad = json!({"plugins": {NAME: {"moode": "auto"}}});
        assert!(
            read_section(&bad, p)
                .err()
                .unwrap()
                .contains("plugins.skillsearch.moode")
        );
        let ok = json!({"plugins": {NAME: section().json()}});
        assert_eq!(read_section(&ok, p).unwrap().unwrap().deadline_ms, 5000);
    }

    #[test]
    fn embedded_plugin_matches_the_keys_and_cap_here() {
        let init = PLUGIN_FILES[1].1;
        assert!(init.contains("register_memory_provider"));
        assert!(init.contains(&format!("DEFAULT_DEADLINE_MS = {DEFAULT_DEADLINE_MS}")));
        let keys = KEYS
            .iter()
            .map(|k| format!("\"{k}\""))
            .collect::<Vec<_>>()
            .join(", ");
        assert!(init.contains(&format!("KEYS = ({keys})")), "{keys}");
    }
}
