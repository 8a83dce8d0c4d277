//! DeepSeek Harness (`dsh`, npm `@deepseek-ai/dsh` 0.1.x): installs the skillsearch Cordis
//! plugin under `$SKILLSEARCH_HOME/dsh/plugin/` and enables it with one row in the home-level
//! patch layer every dsh profile applies, `$DSH_HOME/cordis.patch.yml` (default `~/.dsh`):
//!
//! ```yaml
//! - insert:
//!     - id: skillsearch
//!       name: /…/dsh/plugin/index.js
//!       config: {binary, mode, skills, home, deadline_ms}
//! ```
//!
//! `on_demand` registers `skill_search` / `skill_read` on the `tools` service; `auto` appends
//! the skills block on `agent/pre-step`. The row sits between two marker comments; setup
//! rewrites only those lines, and accepts the edit only when parsing the result gives the old
//! patch list plus exactly that row.

use super::plugin_config::{DEFAULT_DEADLINE_MS, Dialect, PluginConfig};
use super::{Check, FileChange, SetupPlan, SetupRequest};
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The row's id (and the plugin's `name`).
pub const ID: &str = "skillsearch";
/// The plugin, embedded so that setup works from the binary alone. `engine.js` is the OpenClaw
/// plugin's engine client.
pub const PLUGIN_FILES: &[(&str, &str)] = &[
    (
        "index.js",
        include_str!("../../../../hosts/dsh/plugin/index.js"),
    ),
    (
        "engine.js",
        include_str!("../../../../hosts/openclaw/engine.js"),
    ),
    (
        "package.json",
        include_str!("../../../../hosts/dsh/plugin/package.json"),
    ),
];
/// How the plugin reads the row's `config` (its `Config` schema): `null` is absent, `skills`
/// a list of non-empty strings.
const DIALECT: Dialect = Dialect {
    null_is_absent: true,
    skills_may_be_string: false,
    skills_non_empty: true,
    strings_typed: false,
};
const BEGIN: &str =
    "# >>> skillsearch: written by `skillsearch setup dsh`; change it with that command >>>";
const END: &str = "# <<< skillsearch <<<";
const OPTIONS: &[&str] = &["deadline_ms"];
const FIX_SETUP: &str = "skillsearch setup dsh";

/// `$DSH_HOME` (blank counts as unset, as dsh reads it), else `~/.dsh`.
pub fn dsh_home() -> Result<PathBuf> {
    if let Some(h) = std::env::var_os("DSH_HOME").filter(|h| !h.to_string_lossy().trim().is_empty())
    {
        return Ok(std::path::absolute(PathBuf::from(h))?);
    }
    let home = std::env::var_os("HOME").context("neither DSH_HOME nor HOME is set")?;
    Ok(PathBuf::from(home).join(".dsh"))
}

fn patch_path(dsh: &Path) -> PathBuf {
    dsh.join("cordis.patch.yml")
}

fn plugin_dir(home: &Path) -> PathBuf {
    home.join("dsh").join("plugin")
}

/// The patch list; an empty file is an empty list.
fn parse_patch(text: &str, path: &Path) -> Result<Vec<Value>> {
    let v: Value = serde_saphyr::from_str(text)
        .with_context(|| format!("{} is not valid YAML", path.display()))?;
    match v {
        Value::Null => Ok(Vec::new()),
        Value::Array(a) => Ok(a),
        _ => bail!("{} is not a YAML list of patch operations", path.display()),
    }
}

/// The rows with id `skillsearch` in a patch list's `insert` operations.
fn our_rows(patch: &[Value]) -> Vec<&Value> {
    patch
        .iter()
        .filter_map(|op| op.get("insert").and_then(Value::as_array))
        .flatten()
        .filter(|row| row.get("id").and_then(Value::as_str) == Some(ID))
        .collect()
}

/// The plugin's row, as setup writes it.
struct Row {
    name: String,
    config: PluginConfig,
}

impl Row {
    fn json(&self) -> Value {
        json!({"insert": [{
            "id": ID,
            "name": self.name,
            "config": self.config.json(),
        }]})
    }

    /// The marked block. Strings are JSON-quoted (YAML double-quoted scalars): no path can
    /// change the structure.
    fn yaml(&self) -> String {
        let q = |s: &str| serde_json::to_string(s).expect("strings serialise");
        let mut y = format!(
            "{BEGIN}\n- insert:\n    - id: {ID}\n      name: {}\n      config:\n        binary: {}\n        mode: {}\n        skills:\n",
            q(&self.name),
            q(&self.config.binary),
            self.config.mode
        );
        for s in &self.config.skills {
            y.push_str(&format!("          - {}\n", q(s)));
        }
        y.push_str(&format!(
            "        home: {}\n        deadline_ms: {}\n{END}\n",
            q(&self.config.home),
            self.config.deadline_ms
        ));
        y
    }
}

/// `text` with the marked block replaced by `block` (appended when there is none); `None` when
/// the markers are unbalanced.
fn with_block(text: &str, block: &str) -> Option<String> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let begin = lines.iter().position(|l| l.trim_end() == BEGIN);
    let end = lines.iter().position(|l| l.trim_end() == END);
    match (begin, end) {
        (Some(b), Some(e)) if b < e => {
            let mut out = lines[..b].concat();
            out.push_str(block);
            out.push_str(&lines[e + 1..].concat());
            Some(out)
        }
        (None, None) => {
            let mut out = text.to_owned();
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(block);
            Some(out)
        }
        _ => None,
    }
}

/// The row's config as the plugin reads it, or the message naming the key at fault.
fn read_config(row: &Value, path: &Path) -> std::result::Result<Row, String> {
    let name = row
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let empty = json!({});
    let cfg = match row.get("config") {
        None | Some(Value::Null) => &empty,
        Some(c) if c.is_object() => c,
        Some(_) => {
            return Err(format!(
                "the `{ID}` row's config in {} is not a mapping",
                path.display()
            ));
        }
    };
    let obj = cfg.as_object().expect("checked above");
    let config = PluginConfig::read(obj, ID, path, DIALECT)?;
    Ok(Row { name, config })
}

pub fn setup(req: &SetupRequest) -> Result<SetupPlan> {
    let mut deadline: Option<u64> = None;
    for (k, v) in &req.options {
        match k.as_str() {
            "deadline_ms" => {
                deadline = Some(
                    v.parse()
                        .ok()
                        .filter(|ms: &u64| *ms > 0)
                        .with_context(|| format!("--set deadline_ms={v}: expected milliseconds"))?,
                )
            }
            other => bail!(
                "--set {other}: not an option of setup dsh; accepted: {}",
                OPTIONS.join(", ")
            ),
        }
    }
    let dsh = dsh_home()?;
    let path = patch_path(&dsh);
    let before_text = super::read_optional(&path)?.unwrap_or_default();
    let before = parse_patch(&before_text, &path)?;
    let marked = before_text.lines().any(|l| l.trim_end() == BEGIN);
    let rows = our_rows(&before);
    if !marked && !rows.is_empty() {
        bail!(
            "{} already has a `{ID}` row that setup did not write; remove it (or put it between the lines `{BEGIN}` and `{END}`) and run setup again",
            path.display()
        );
    }
    let existing = rows.first().and_then(|r| read_config(r, &path).ok());
    let mode = req
        .mode
        .clone()
        .or_else(|| existing.as_ref().map(|r| r.config.mode.clone()))
        .unwrap_or_else(|| "on_demand".to_owned());
    let skills = if !req.skills.is_empty() {
        req.skills
            .iter()
            .map(|s| std::path::absolute(s).map(|p| p.display().to_string()))
            .collect::<std::io::Result<_>>()?
    } else if let Some(r) = existing.as_ref().filter(|r| !r.config.skills.is_empty()) {
        r.config.skills.clone()
    } else {
        vec![dsh.join("skills").display().to_string()]
    };
    let home = std::path::absolute(&req.home)?;
    let dir = plugin_dir(&home);
    let row = Row {
        name: dir.join("index.js").display().to_string(),
        config: PluginConfig {
            binary: req.binary.display().to_string(),
            mode,
            skills,
            home: home.display().to_string(),
            deadline_ms: deadline
                .or_else(|| existing.as_ref().map(|r| r.config.deadline_ms))
                .unwrap_or(DEFAULT_DEADLINE_MS),
        },
    };
    let Some(after_text) = with_block(&before_text, &row.yaml()) else {
        bail!(
            "{} has only one of the lines `{BEGIN}` and `{END}`; restore or remove it, then run setup again",
            path.display()
        );
    };
    // The edit must leave every other operation as it was and add exactly our row.
    let expected: Vec<Value> = before
        .iter()
        .filter(|op| {
            !op.get("insert")
                .and_then(Value::as_array)
                .is_some_and(|rows| {
                    rows.len() == 1 && rows[0].get("id").and_then(Value::as_str) == Some(ID)
                })
        })
        .cloned()
        .collect();
    let got = parse_patch(&after_text, &path).ok();
    let ours = got
        .as_ref()
        .and_then(|g| g.iter().position(|op| *op == row.json()));
    let kept = match (&got, ours) {
        (Some(g), Some(i)) => {
            let mut rest = g.clone();
            rest.remove(i);
            rest == expected
        }
        _ => false,
    };
    if !kept {
        bail!(
            "cannot edit {} safely (its `{ID}` row is not where setup put it); remove that row and run setup again, or add this operation by hand:\n{}",
            path.display(),
            row.yaml()
        );
    }

    let mut changes = Vec::new();
    for (file, text) in PLUGIN_FILES {
        changes.push(FileChange::to(dir.join(file), (*text).to_owned())?);
    }
    changes.push(FileChange::to(&path, after_text)?);
    let mut notes = vec![format!(
        "Every dsh profile under {} now loads the skillsearch plugin ({}) in `{}` mode over {} skill root(s), deadline {} ms.",
        dsh.display(),
        dir.display(),
        row.config.mode,
        row.config.skills.len(),
        row.config.deadline_ms
    )];
    if row.config.mode == "on_demand" {
        notes.push("skill_search and skill_read sit beside dsh's own skill tool (`tool-skill`); disable that row in cordis.patch.yml if the model should use skillsearch alone.".to_owned());
    }
    notes.push("Check it with: skillsearch doctor dsh (and `dsh --profile headless --dump-config` shows the composed tree)".to_owned());
    Ok(SetupPlan {
        changes,
        notes,
        ..Default::default()
    })
}

pub fn doctor(home: &Path) -> Result<Vec<Check>> {
    let dsh = dsh_home()?;
    let path = patch_path(&dsh);
    let mut checks = Vec::new();
    let Some(text) = super::read_optional(&path)? else {
        checks.push(Check::fail(
            "patch",
            format!(
                "{} does not exist: no dsh profile loads skillsearch",
                path.display()
            ),
            FIX_SETUP,
        ));
        return Ok(checks);
    };
    let patch = match parse_patch(&text, &path) {
        Ok(p) => p,
        Err(e) => {
            checks.push(Check::fail(
                "patch",
                format!("{e:#}"),
                format!("fix {}, then run {FIX_SETUP}", path.display()),
            ));
            return Ok(checks);
        }
    };
    let rows = our_rows(&patch);
    let row = match rows.as_slice() {
        [] => {
            checks.push(Check::fail(
                "patch",
                format!("no `{ID}` row in {}", path.display()),
                FIX_SETUP,
            ));
            return Ok(checks);
        }
        [one] => *one,
        _ => {
            checks.push(Check::fail(
                "patch",
                format!(
                    "{} inserts the `{ID}` row {} times",
                    path.display(),
                    rows.len()
                ),
                format!("keep one (the one between the skillsearch markers), then {FIX_SETUP}"),
            ));
            return Ok(checks);
        }
    };
    if row.get("disabled").and_then(Value::as_bool) == Some(true) {
        checks.push(Check::fail(
            "patch",
            format!("the `{ID}` row in {} is disabled", path.display()),
            FIX_SETUP,
        ));
    }
    let cfg = match read_config(row, &path) {
        Ok(r) => r,
        Err(msg) => {
            checks.push(Check::fail(
                "config",
                msg,
                format!("{FIX_SETUP} --mode on_demand (or auto), or correct the key"),
            ));
            return Ok(checks);
        }
    };
    checks.push(Check::ok(
        "patch",
        format!("{}: `{ID}` row, mode {}", path.display(), cfg.config.mode),
    ));

    let dir = plugin_dir(home);
    let index = dir.join("index.js");
    checks.push(if Path::new(&cfg.name) != index {
        Check::fail(
            "plugin-files",
            format!(
                "the `{ID}` row loads `{}`, not this home's plugin {}",
                cfg.name,
                index.display()
            ),
            FIX_SETUP,
        )
    } else {
        super::plugin_files_check(&dir, PLUGIN_FILES, FIX_SETUP)?
    });

    let binary = super::binary_check(
        &mut checks,
        &cfg.config.binary,
        &format!("the `{ID}` row names no binary"),
        "dsh",
        FIX_SETUP,
    );
    let roots = if cfg.config.skills.is_empty() {
        vec![dsh.join("skills").display().to_string()]
    } else {
        cfg.config.skills.clone()
    };
    checks.push(super::roots_check(&roots, FIX_SETUP));
    if let Some(b) = binary {
        checks.push(super::probe_engine(
            &b,
            &cfg.config.home,
            &cfg.config.mode,
            cfg.config.deadline_ms,
            &roots,
            "dsh",
        ));
    }
    Ok(checks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> Row {
        Row {
            name: "/h/dsh/plugin/index.js".into(),
            config: PluginConfig {
                binary: "/opt/bin/skillsearch".into(),
                mode: "auto".into(),
                skills: vec!["/s/one".into(), "/s/t w\"o: x".into()],
                home: "/h".into(),
                deadline_ms: 5000,
            },
        }
    }

    #[test]
    fn the_block_parses_to_the_row_and_replaces_itself() {
        let user = "# mine\n- id: hmr\n  disabled: true\n";
        let once = with_block(user, &row().yaml()).unwrap();
        assert!(once.starts_with(user));
        let parsed = parse_patch(&once, Path::new("p.yml")).unwrap();
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[1], row().json());
        let mut other = row();
        other.config.mode = "on_demand".into();
        let twice = with_block(&once, &other.yaml()).unwrap();
        assert_eq!(
            parse_patch(&twice, Path::new("p.yml")).unwrap()[1],
            other.json()
        );
        assert_eq!(twice.matches(BEGIN).count(), 1);
        assert!(with_block(&format!("{user}{BEGIN}\n"), &row().yaml()).is_none());
    }

    #[test]
    fn a_row_naming_an_unknown_key_or_mode_is_an_error_naming_it() {
        let p = Path::new("cordis.patch.yml");
        let bad = json!({"id": ID, "config": {"mode": "atuo"}});
        let e = read_config(&bad, p).err().unwrap();
        assert!(e.contains("skillsearch.mode") && e.contains("atuo"), "{e}");
        let bad = json!({"id": ID, "config": {"moode": "auto"}});
        assert!(
            read_config(&bad, p)
                .err()
                .unwrap()
                .contains("unknown key `skillsearch.moode`")
        );
        let ok = read_config(&json!({"id": ID}), p).unwrap();
        assert_eq!(
            (ok.config.mode.as_str(), ok.config.deadline_ms),
            ("on_demand", DEFAULT_DEADLINE_MS)
        );
    }
}
