//! `config import`: a configuration written for the reference system (Python `SearchConfig`,
//! the OpenClaw / WorkBuddy plugin config in camelCase, Hermes' `skillsearch.json`, Raven's and
//! DeepSeek Harness's plugin config), as JSON, JSON5, TOML or YAML, turned into the
//! `config.toml` skillsearch reads. Every reference key is mapped to ours or listed with the
//! reason it has no meaning here; a key neither system knows is an error naming it. The result
//! is checked by the same reader `config.toml` goes through.

use super::{ConfigError, KEYS, Kind, Layers, key_def, resolve};
use serde_json::{Map, Value};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The `config.toml` text and what was not carried over.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    /// Keys in table order, then a comment per key left out.
    pub toml: String,
    /// (reference key as written, why it was left out).
    pub left_out: Vec<(String, String)>,
}

/// Where the plugin's own config sits in a host's whole document, tried in order before the
/// document itself: OpenClaw's `openclaw.json`, Hermes' `config.yaml`, Raven's plugin manifest,
/// a DeepSeek Harness `cordis.yml` plugin entry.
const NESTED: &[&[&str]] = &[
    &["plugins", "entries", "skillsearch", "config"],
    &["plugins", "skillsearch"],
    &["plugin", "config"],
    &["skillsearch"],
];

/// Reads `text` (named `name`, whose extension picks the format; unknown: JSON, then TOML, then
/// YAML) and converts it. `user_home` expands a leading `~/` in paths, as the reference does.
pub fn import(name: &str, text: &str, user_home: Option<&Path>) -> Result<Imported, ConfigError> {
    let doc = parse(name, text)?;
    let obj = NESTED
        .iter()
        .find_map(|path| lookup(&doc, path).and_then(Value::as_object))
        .or_else(|| doc.as_object())
        .ok_or_else(|| error(name, "", "the document is not a table of keys".into()))?;
    convert(name, obj, user_home)
}

fn error(name: &str, key: &str, message: String) -> ConfigError {
    ConfigError {
        key: key.to_owned(),
        origin: format!("config file {name}"),
        message,
    }
}

fn parse(name: &str, text: &str) -> Result<Value, ConfigError> {
    let ext = Path::new(name)
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let json = || json5::from_str::<Value>(text).map_err(|e| e.to_string());
    let toml = || {
        toml::from_str::<toml::Table>(text)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::to_value(t).map_err(|e| e.to_string()))
    };
    let yaml = || serde_saphyr::from_str::<Value>(text).map_err(|e| e.to_string());
    let parsed = match ext.as_deref() {
        Some("json" | "json5") => json().map_err(|e| ("JSON", e)),
        Some("toml") => toml().map_err(|e| ("TOML", e)),
        Some("yaml" | "yml") => yaml().map_err(|e| ("YAML", e)),
        _ => json()
            .or_else(|_| toml())
            .or_else(|_| yaml())
            .map_err(|_| ("JSON, TOML or YAML", String::from("none of them reads it"))),
    };
    parsed.map_err(|(what, e)| error(name, "", format!("{name} is not valid {what}: {e}")))
}

fn lookup<'v>(doc: &'v Value, path: &[&str]) -> Option<&'v Value> {
    path.iter().try_fold(doc, |v, k| v.get(*k))
}

/// `skillsDirs` → `skills_dirs`, `timeoutMs` → `timeout_ms`; snake_case stays.
fn snake(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    for (i, c) in key.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// A key as the Python reference spells it: snake_case, WorkBuddy's names for the weights and
/// the shared install.
fn canonical(key: &str) -> String {
    let k = snake(key);
    match k.as_str() {
        "local_weight" => "weight_local".into(),
        "hub_weight" => "weight_hub".into(),
        "share_skills" => "install_to_shared".into(),
        _ => k,
    }
}

/// Reference keys with no meaning here, and why.
fn no_meaning(key: &str) -> Option<&'static str> {
    Some(match key {
        "scan_depth" => "skill roots are walked 6 directories deep, fixed",
        "index_body" => {
            "bodies are always indexed, at a low weight; set body_weight = 0.0 to ignore them"
        }
        "install_to_shared" | "bundle_cache_dir" | "cache_dir" => {
            "hub bundles are installed under <home>/cache/hub (choose the home with --home or SKILLSEARCH_HOME)"
        }
        "dedup_by" => {
            "hits collapse by qualified id, and a remote copy with a local skill's exact body is dropped"
        }
        "over_fetch" => "each source is asked for per_source_max hits",
        "index_cache_path" => {
            "the index is kept on disk under skillsearch's home and reopened, not rebuilt, per turn"
        }
        "resolve_refs" => {
            "relative links and {baseDir} are always resolved against the skill directory"
        }
        "provider" => "the model is any OpenAI-compatible endpoint: model_base_url and model",
        "agent_id" | "weight_memory" | "memory" => "removed from the reference system itself",
        _ => return None,
    })
}

fn convert(
    name: &str,
    obj: &Map<String, Value>,
    user_home: Option<&Path>,
) -> Result<Imported, ConfigError> {
    let mut out: Map<String, Value> = Map::new();
    let mut left_out: Vec<(String, String)> = Vec::new();
    let mut unknown: Vec<String> = Vec::new();
    let keys: Vec<(String, &Value)> = obj.iter().map(|(k, v)| (canonical(k), v)).collect();
    let get = |k: &str| keys.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
    let written = |k: &str| -> String {
        obj.keys()
            .find(|w| canonical(w) == k)
            .cloned()
            .unwrap_or_else(|| k.to_owned())
    };
    let expand = |p: &str| -> String {
        match (p.strip_prefix("~/"), user_home) {
            (Some(rest), Some(h)) => h.join(rest).display().to_string(),
            _ if p == "~" => user_home.map_or_else(|| p.to_owned(), |h| h.display().to_string()),
            _ => p.to_owned(),
        }
    };
    let workspace = get("workspace")
        .and_then(Value::as_str)
        .filter(|w| !w.is_empty())
        .map(|w| PathBuf::from(expand(w)));

    // Skill roots, in the reference's order: skills_dir (or skillsDirs), builtin_dir, extra_dirs.
    let mut roots: Vec<String> = Vec::new();
    let mut roots_given = false;
    let add_root = |p: &str, roots: &mut Vec<String>| {
        let p = expand(p.trim());
        if p.is_empty() {
            return;
        }
        let p = match &workspace {
            Some(w) if Path::new(&p).is_relative() => w.join(&p).display().to_string(),
            _ => p,
        };
        if !roots.contains(&p) {
            roots.push(p);
        }
    };
    let bad_type = |k: &str, want: &str| error(name, k, format!("`{}` must be {want}", written(k)));
    for k in ["skills_dir", "skills_dirs", "skills", "builtin_dir"] {
        let Some(v) = get(k) else { continue };
        match k {
            "skills_dir" | "builtin_dir" => {
                let p = v.as_str().ok_or_else(|| bad_type(k, "a path"))?;
                roots_given = true;
                add_root(p, &mut roots);
            }
            "skills_dirs" | "skills" => {
                roots_given = true;
                match v {
                    Value::String(s) => s.split(',').for_each(|p| add_root(p, &mut roots)),
                    Value::Array(items) => {
                        for it in items {
                            add_root(
                                it.as_str().ok_or_else(|| bad_type(k, "a list of paths"))?,
                                &mut roots,
                            );
                        }
                    }
                    _ => return Err(bad_type(k, "a list of paths or a comma-separated string")),
                }
            }
            _ => {}
        }
    }
    if let Some(extra) = get("extra_dirs") {
        let items = extra
            .as_array()
            .ok_or_else(|| bad_type("extra_dirs", "a list"))?;
        for it in items {
            match it {
                Value::String(p) => add_root(p, &mut roots),
                Value::Object(d) => {
                    let enabled = d.get("enabled").and_then(Value::as_bool).unwrap_or(true);
                    let p = d.get("path").and_then(Value::as_str).ok_or_else(|| {
                        bad_type("extra_dirs", "a list of paths or {path, name, enabled}")
                    })?;
                    if enabled {
                        add_root(p, &mut roots);
                    }
                }
                _ => {
                    return Err(bad_type(
                        "extra_dirs",
                        "a list of paths or {path, name, enabled}",
                    ));
                }
            }
        }
        roots_given = true;
    }
    if roots_given {
        if roots.is_empty() {
            left_out.push((
                "skills_dirs".into(),
                "an empty list turns local skills off in the reference; skillsearch always searches its roots (empty: the default ones)".into(),
            ));
        } else {
            out.insert("skills".into(), Value::from(roots.clone()));
        }
    }

    let weight_local = get("weight_local").and_then(Value::as_f64);
    for (k, v) in &keys {
        let k = k.as_str();
        let w = written(k);
        let secs = |scale: f64| -> Result<Value, ConfigError> {
            let n = number(v).ok_or_else(|| bad_type(k, "a number"))?;
            Ok(Value::from(n / scale))
        };
        let (ours, value): (&str, Value) = match k {
            "skills_dir" | "builtin_dir" | "skills_dirs" | "skills" | "extra_dirs" => continue,
            "timeout_ms" => (
                "deadline_ms",
                Value::from(number(v).ok_or_else(|| bad_type(k, "a number"))?.round() as i64),
            ),
            "timeout_s" => (
                "deadline_ms",
                Value::from(
                    (number(v).ok_or_else(|| bad_type(k, "a number"))? * 1000.0).round() as i64,
                ),
            ),
            "hub_timeout_ms" => ("hub_timeout_s", secs(1000.0)?),
            "rewrite_timeout_ms" => ("rewrite_timeout_s", secs(1000.0)?),
            "gate_timeout_ms" => ("gate_timeout_s", secs(1000.0)?),
            "hub_download_timeout_ms" => ("hub_download_timeout_s", secs(1000.0)?),
            "model_timeout_ms" => ("model_timeout_s", secs(1000.0)?),
            "marketplace_timeout_ms" => ("marketplace_timeout_s", secs(1000.0)?),
            "marketplace_download_timeout_ms" => ("marketplace_download_timeout_s", secs(1000.0)?),
            "weight_local" => {
                if weight_local.is_none() {
                    return Err(bad_type(k, "a number"));
                }
                // Only the ratio of the weights matters in weighted RRF; local is ours' unit.
                left_out.push((
                    w,
                    "local hits have weight 1 in skillsearch; the remote sources' weights are divided by it".into(),
                ));
                continue;
            }
            "weight_hub" | "weight_clawhub" | "weight_skillhub_cn" => {
                let remote = number(v).ok_or_else(|| bad_type(k, "a number"))?;
                let local = weight_local.filter(|l| *l > 0.0).unwrap_or(1.0);
                (k, Value::from(remote / local))
            }
            "available_tools" => (
                "available_tools",
                match v {
                    // The reference's environment form: comma-separated.
                    Value::String(s) => Value::from(
                        s.split(',')
                            .map(str::trim)
                            .filter(|t| !t.is_empty())
                            .collect::<Vec<_>>(),
                    ),
                    _ => (*v).clone(),
                },
            ),
            "gate" => (
                "gate",
                match v {
                    Value::Null => Value::from("auto"),
                    Value::String(s) if s.trim().is_empty() => Value::from("auto"),
                    _ => coerce(k, v),
                },
            ),
            _ if key_def(k).is_some() => (k, coerce(k, v)),
            _ => {
                if let Some(why) = no_meaning(k) {
                    left_out.push((w, why.into()));
                } else {
                    unknown.push(w);
                }
                continue;
            }
        };
        // Text fields treat "" as unset, as the reference does (an endpoint keeps it: off).
        if value.as_str() == Some("")
            && !matches!(
                ours,
                "hub_endpoint"
                    | "clawhub_endpoint"
                    | "skillhub_cn_endpoint"
                    | "model_base_url"
                    | "embedding_base_url"
            )
        {
            continue;
        }
        out.insert(ours.into(), value);
    }
    if !unknown.is_empty() {
        return Err(error(
            name,
            &unknown[0],
            format!(
                "unknown key{} {} in {name}: neither skillsearch nor the reference system reads {}; remove {} and import again",
                if unknown.len() == 1 { "" } else { "s" },
                unknown
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                if unknown.len() == 1 { "it" } else { "them" },
                if unknown.len() == 1 { "it" } else { "them" },
            ),
        ));
    }

    let mut toml_text = format!("# converted from {name} by `skillsearch config import`\n");
    for def in KEYS {
        if let Some(v) = out.get(def.name) {
            let line = toml_line(def.name, v)
                .ok_or_else(|| bad_type(def.name, "a string, number, boolean or list"))?;
            toml_text.push_str(&line);
        }
    }
    if !left_out.is_empty() {
        toml_text.push_str("\n# not carried over:\n");
        for (k, why) in &left_out {
            let _ = writeln!(toml_text, "# {k}: {why}");
        }
    }
    // The same reader as config.toml: a wrong value is an error naming the key.
    resolve(&Layers {
        file: Some((PathBuf::from(name), toml_text.clone())),
        ..Layers::default()
    })
    .map_err(|e| ConfigError {
        message: format!("{} (after import from {name})", e.message),
        ..e
    })?;
    Ok(Imported {
        toml: toml_text,
        left_out,
    })
}

/// `v` as the key's kind wants it when it is a string holding one (the Hermes file keeps
/// numbers as strings; the reference's booleans accept `"1"`, `"yes"`, `"on"`...).
fn coerce(key: &str, v: &Value) -> Value {
    let Some(def) = key_def(key) else {
        return v.clone();
    };
    let Value::String(s) = v else {
        return v.clone();
    };
    let t = s.trim();
    match def.kind {
        Kind::Int { .. } => t.parse::<i64>().map_or_else(|_| v.clone(), Value::from),
        Kind::Float { .. } => number(v).map_or_else(|| v.clone(), Value::from),
        Kind::Bool | Kind::AutoBool => match t.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Value::Bool(true),
            "false" | "0" | "no" | "off" => Value::Bool(false),
            _ => v.clone(),
        },
        _ => v.clone(),
    }
}

/// A number, or a string holding one (the Hermes file keeps numbers as strings).
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .filter(|n: &f64| n.is_finite())
}

fn toml_line(key: &str, v: &Value) -> Option<String> {
    let value = match v {
        Value::Bool(b) => toml::Value::Boolean(*b),
        Value::Number(n) if n.is_i64() => toml::Value::Integer(n.as_i64()?),
        Value::Number(n) => toml::Value::Float(n.as_f64()?),
        Value::String(s) => toml::Value::String(s.clone()),
        Value::Array(items) => toml::Value::Array(
            items
                .iter()
                .map(|i| i.as_str().map(|s| toml::Value::String(s.to_owned())))
                .collect::<Option<Vec<_>>>()?,
        ),
        _ => return None,
    };
    Some(format!("{key} = {value}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home() -> Option<&'static Path> {
        Some(Path::new("/home/u"))
    }

    #[test]
    fn a_python_search_config_maps_key_by_key() {
        let text = r#"
skills_dir = "skills"
builtin_dir = "/opt/builtin"
workspace = "/work/ws"
extra_dirs = ["~/more", { path = "/team", name = "team" }, { path = "/off", enabled = false }]
scan_depth = 5
index_body = false
weight_local = 2.0
weight_hub = 0.85
over_fetch = 2
dedup_by = "qualified_id"
top_k = 3
gate = true
resolve_placeholders = true
output_dir = "/work/out"
hub_endpoint = ""
"#;
        let got = import("search.toml", text, home()).unwrap();
        let t = &got.toml;
        assert!(
            t.contains(r#"skills = ["/work/ws/skills", "/opt/builtin", "/home/u/more", "/team"]"#),
            "{t}"
        );
        assert!(t.contains("weight_hub = 0.425\n"), "{t}");
        assert!(
            t.contains("top_k = 3\n") && t.contains("gate = true\n"),
            "{t}"
        );
        assert!(
            t.contains("resolve_placeholders = true\noutput_dir = \"/work/out\"\n"),
            "{t}"
        );
        assert!(
            t.contains("hub_endpoint = \"\"\n"),
            "an explicit empty endpoint stays off: {t}"
        );
        for k in [
            "scan_depth",
            "index_body",
            "weight_local",
            "over_fetch",
            "dedup_by",
        ] {
            assert!(t.contains(&format!("# {k}: ")), "{k} explained: {t}");
        }
        assert_eq!(got.left_out.len(), 5);
    }

    #[test]
    fn an_openclaw_config_is_found_inside_openclaw_json() {
        let text = r#"{
  // OpenClaw's own document, JSON5
  "plugins": {"entries": {"skillsearch": {"enabled": true, "config": {
    "mode": "auto", "skillsDirs": "~/.openclaw/skills, /shared/skills",
    "bundleCacheDir": "", "topK": 4, "timeoutMs": 6000, "hubTimeoutMs": 1500,
    "gateTimeoutMs": 20000, "indexBody": true, "availableTools": ["read"],
    "clawhubEndpoint": "https://clawhub.ai", "modelBaseUrl": "http://127.0.0.1:9/v1",
    "model": "m", "modelApiKey": "sk-x"
  }}}}
}"#;
        let t = import("openclaw.json", text, home()).unwrap().toml;
        assert!(t.contains("mode = \"auto\"\n"), "{t}");
        assert!(
            t.contains(r#"skills = ["/home/u/.openclaw/skills", "/shared/skills"]"#),
            "{t}"
        );
        assert!(
            t.contains("top_k = 4\n") && t.contains("deadline_ms = 6000\n"),
            "{t}"
        );
        assert!(
            t.contains("hub_timeout_s = 1.5\n") && t.contains("gate_timeout_s = 20.0\n"),
            "{t}"
        );
        assert!(t.contains("model_api_key = \"sk-x\"\n"), "{t}");
        assert!(t.contains("# bundleCacheDir: "), "{t}");
        assert!(
            t.contains("clawhub_endpoint = \"https://clawhub.ai\"\n"),
            "{t}"
        );
        assert!(t.contains("available_tools = [\"read\"]\n"), "{t}");
    }

    #[test]
    fn workbuddy_names_its_weights_its_own_way() {
        let text = r#"{"localWeight": 2, "hubWeight": 0.85, "weightClawhub": 0.75, "rrfK": 10, "indexCachePath": "/d/i.json", "shareSkills": true, "logPath": "/d/s.log"}"#;
        let got = import("config.json", text, home()).unwrap();
        let t = &got.toml;
        assert!(
            t.contains("weight_hub = 0.425\n")
                && t.contains("weight_clawhub = 0.375\n")
                && t.contains("rrf_k = 10\n"),
            "{t}"
        );
        assert!(t.contains("log_path = \"/d/s.log\"\n"), "{t}");
        assert!(
            t.contains("# indexCachePath: ") && t.contains("# shareSkills: "),
            "{t}"
        );
    }

    #[test]
    fn a_hermes_file_with_numbers_as_strings() {
        let text = r#"{"skills_dir": "/h/skills", "top_k": "2", "max_select": "2", "timeout_s": "8.0", "mode": "on_demand", "hub_api_key": ""}"#;
        let t = import("skillsearch.json", text, home()).unwrap().toml;
        assert!(t.contains("deadline_ms = 8000\n"), "{t}");
        assert!(
            t.contains("top_k = 2\nmax_select = 2\n") || t.contains("top_k = 2\n"),
            "{t}"
        );
        assert!(t.contains("max_select = 2\n"), "{t}");
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors_naming_them() {
        let e = import(
            "c.json",
            r#"{"topK": 2, "colour": "red", "sizeLimit": 3}"#,
            home(),
        )
        .unwrap_err();
        assert!(
            e.message.contains("`colour`, `sizeLimit`") && e.message.contains("c.json"),
            "{}",
            e.message
        );
        let e = import("c.json", r#"{"topK": "many"}"#, home()).unwrap_err();
        assert_eq!(e.key, "top_k");
        let e = import("c.yaml", "mode: [auto", home()).unwrap_err();
        assert!(e.message.contains("not valid YAML"), "{}", e.message);
        let e = import("c.json", "[1, 2]", home()).unwrap_err();
        assert!(e.message.contains("not a table"), "{}", e.message);
        let e = import("c.toml", "skills_dir = 3", home()).unwrap_err();
        assert!(
            e.message.contains("`skills_dir` must be a path"),
            "{}",
            e.message
        );
    }

    #[test]
    fn a_yaml_cordis_entry_and_an_empty_root_list() {
        let text = "skillsearch:\n  skillsDirs: []\n  rewrite: false\n  gate: null\n";
        let got = import("cordis.yml", text, home()).unwrap();
        assert!(
            got.toml.contains("rewrite = false\ngate = \"auto\"\n"),
            "{}",
            got.toml
        );
        assert!(!got.toml.contains("skills ="), "{}", got.toml);
        assert!(
            got.toml.contains("# skills_dirs: an empty list"),
            "{}",
            got.toml
        );
    }
}
