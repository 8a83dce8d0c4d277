//! `SKILL.md` parsing: split the `---` frontmatter from the body, read it as YAML, and fall back to
//! a tolerant line reader for the messy files found in the wild (unquoted colons, tabs, stray
//! quotes). Parsing never fails: the worst case is a skill named after its directory, plus a
//! diagnostic.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Eligibility requirements from `metadata.openclaw.requires`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Requires {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bins: Vec<String>,
    #[serde(default, rename = "anyBins", skip_serializing_if = "Vec::is_empty")]
    pub any_bins: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config: Vec<String>,
}

impl Requires {
    pub fn is_empty(&self) -> bool {
        self.bins.is_empty()
            && self.any_bins.is_empty()
            && self.env.is_empty()
            && self.config.is_empty()
    }
}

/// `metadata.openclaw` (alias `metadata.clawdbot`): what OpenClaw reads, plus `activates`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenClawMeta {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub always: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub os: Vec<String>,
    #[serde(
        default,
        rename = "primaryEnv",
        skip_serializing_if = "Option::is_none"
    )]
    pub primary_env: Option<String>,
    #[serde(default, rename = "skillKey", skip_serializing_if = "Option::is_none")]
    pub skill_key: Option<String>,
    #[serde(default, skip_serializing_if = "Requires::is_empty")]
    pub requires: Requires,
    /// Install recipes, kept verbatim (never executed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub install: Vec<Value>,
    /// Plugins whose tools this skill makes visible (`activates.plugins`).
    #[serde(
        default,
        rename = "activatesPlugins",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub activates_plugins: Vec<String>,
}

/// Everything the engine reads from a `SKILL.md` besides its body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillMeta {
    pub name: String,
    pub description: String,
    #[serde(
        default,
        rename = "disableModelInvocation",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub disable_model_invocation: bool,
    #[serde(default)]
    pub openclaw: OpenClawMeta,
}

/// A parsed `SKILL.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedSkill {
    pub meta: SkillMeta,
    /// The markdown after the frontmatter, leading blank lines removed.
    pub body: String,
    /// Problems found while parsing: (code, message). The caller attaches the path.
    pub problems: Vec<(&'static str, String)>,
}

/// How the frontmatter was delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fence {
    /// No frontmatter: the file does not open with `---`.
    None,
    /// Closed by a `---` (or `...`) line.
    Closed,
    /// Closed only by an indented `---` line (a common hand-edit mistake), accepted with a warning.
    Indented,
    /// Opened but never closed: the whole file is body.
    Unclosed,
}

/// Splits `text` into (frontmatter, body, how it was fenced).
fn split(text: &str) -> (Option<&str>, &str, Fence) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text.strip_prefix("---") else {
        return (None, text, Fence::None);
    };
    // The opening fence must be alone on its line.
    let Some(nl) = rest.find('\n') else {
        return (None, text, Fence::None);
    };
    if !rest[..nl].trim().is_empty() {
        return (None, text, Fence::None);
    }
    let fm_start = nl + 1;
    for (strict, fence) in [(true, Fence::Closed), (false, Fence::Indented)] {
        let mut pos = fm_start;
        while pos < rest.len() {
            let end = rest[pos..].find('\n').map_or(rest.len(), |i| pos + i);
            let raw = &rest[pos..end];
            let line = if strict { raw.trim_end() } else { raw.trim() };
            if line == "---" || line == "..." {
                let body_start = (end + 1).min(rest.len());
                return (Some(&rest[fm_start..pos]), &rest[body_start..], fence);
            }
            pos = end + 1;
        }
    }
    (None, text, Fence::Unclosed)
}

/// Parses a `SKILL.md`. `dir_name` is the skill directory's name, used when `name` is missing.
pub fn parse(text: &str, dir_name: &str) -> ParsedSkill {
    let mut problems = Vec::new();
    let (fm, body, fence) = split(text);
    let problem = match fence {
        Fence::Closed => None,
        Fence::Unclosed => Some((
            "frontmatter-unclosed",
            "frontmatter opens with `---` but no closing `---` line follows; the file was read as body only",
        )),
        Fence::Indented => Some((
            "frontmatter-fence-indented",
            "frontmatter is closed by an indented `---`; put the closing `---` at the start of its line",
        )),
        Fence::None => Some((
            "frontmatter-missing",
            "no `---` frontmatter; name taken from the directory, description left empty",
        )),
    };
    if let Some((code, message)) = problem {
        problems.push((code, message.to_owned()));
    }
    let map = mapping(fm, &mut problems);
    let meta = meta_from_map(&map, dir_name, &mut problems);
    let body = body.trim_start_matches(['\n', '\r']).to_owned();
    ParsedSkill {
        meta,
        body,
        problems,
    }
}

/// Every frontmatter field of a `SKILL.md` as written (YAML, or the line reader's reading of
/// a file YAML rejects); empty without frontmatter. For callers that pass the author's fields
/// on, such as the MCP Skills extension.
pub fn fields(text: &str) -> Map<String, Value> {
    mapping(split(text).0, &mut Vec::new())
}

/// The frontmatter as a mapping: YAML first, the tolerant line reader when YAML fails.
fn mapping(fm: Option<&str>, problems: &mut Vec<(&'static str, String)>) -> Map<String, Value> {
    match fm {
        None => Map::new(),
        Some(fm) => match serde_saphyr::from_str::<Value>(fm) {
            Ok(Value::Object(map)) => map,
            Ok(Value::Null) => Map::new(),
            Ok(other) => {
                problems.push((
                    "yaml-not-mapping",
                    format!(
                        "frontmatter is a YAML {}, not a mapping; read line by line",
                        kind(&other)
                    ),
                ));
                fallback(fm)
            }
            Err(err) => {
                let first = err.to_string();
                let first = first.lines().next().unwrap_or_default().to_owned();
                problems.push((
                    "yaml-fallback",
                    format!("frontmatter is not valid YAML ({first}); read line by line"),
                ));
                fallback(fm)
            }
        },
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "sequence",
        Value::Object(_) => "mapping",
    }
}

/// The tolerant reader: top-level `key: value` lines; indented lines continue the previous key
/// (folded block scalars, or a nested block that is re-parsed as YAML on its own).
fn fallback(fm: &str) -> Map<String, Value> {
    let mut map = Map::new();
    let mut current: Option<(String, String, Vec<String>)> = None;
    let flush = |map: &mut Map<String, Value>, cur: Option<(String, String, Vec<String>)>| {
        if let Some((key, inline, cont)) = cur {
            map.insert(key, fallback_value(&inline, &cont));
        }
    };
    for line in fm.lines() {
        let starts_indented = line.starts_with([' ', '\t']);
        if line.trim().is_empty() {
            if let Some((_, _, cont)) = current.as_mut() {
                cont.push(String::new());
            }
            continue;
        }
        if starts_indented
            || line.trim_start().starts_with('#')
            || line.trim_start().starts_with("- ")
        {
            if let Some((_, _, cont)) = current.as_mut() {
                cont.push(line.to_owned());
            }
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            // A stray line without a key: treat it as a continuation of the previous value.
            if let Some((_, _, cont)) = current.as_mut() {
                cont.push(format!("  {line}"));
            }
            continue;
        };
        flush(&mut map, current.take());
        current = Some((key.trim().to_owned(), value.trim().to_owned(), Vec::new()));
    }
    flush(&mut map, current.take());
    map
}

fn fallback_value(inline: &str, cont: &[String]) -> Value {
    let nonblank: Vec<&String> = cont.iter().filter(|l| !l.trim().is_empty()).collect();
    if nonblank.is_empty() {
        return scalar_or_json(inline);
    }
    let block_scalar = inline.is_empty() || inline.starts_with(['>', '|']);
    if block_scalar {
        // A nested mapping or list: try it as YAML on its own.
        let dedented = dedent(cont);
        if !inline.starts_with(['>', '|'])
            && let Ok(v @ (Value::Object(_) | Value::Array(_))) =
                serde_saphyr::from_str::<Value>(&dedented)
        {
            return v;
        }
        let joiner = if inline.starts_with('|') { "\n" } else { " " };
        let text = cont
            .iter()
            .map(|l| l.trim())
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(joiner);
        return Value::String(text);
    }
    // A plain scalar continued over several lines (YAML folds them with spaces).
    let mut text = strip_quotes(inline).to_owned();
    for l in nonblank {
        text.push(' ');
        text.push_str(l.trim());
    }
    Value::String(strip_quotes(&text).to_owned())
}

fn dedent(lines: &[String]) -> String {
    let indent = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    lines
        .iter()
        .map(|l| l.get(indent..).unwrap_or("").replace('\t', "  "))
        .collect::<Vec<_>>()
        .join("\n")
}

fn scalar_or_json(v: &str) -> Value {
    if v.starts_with('{') || v.starts_with('[') {
        if let Ok(parsed) = serde_json::from_str::<Value>(v) {
            return parsed;
        }
        if let Ok(parsed) = serde_saphyr::from_str::<Value>(v) {
            return parsed;
        }
    }
    Value::String(strip_quotes(v).to_owned())
}

fn strip_quotes(v: &str) -> &str {
    let v = v.trim();
    for q in ['"', '\''] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            return &v[1..v.len() - 1];
        }
    }
    v
}

fn as_text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.trim().to_owned()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn as_bool(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => matches!(
            s.trim().to_ascii_lowercase().as_str(),
            "true" | "yes" | "on" | "1"
        ),
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        _ => false,
    }
}

/// A list of strings from a list, or from one string (comma- or space-separated).
fn as_list(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|i| as_text(Some(i)))
            .filter(|s| !s.is_empty())
            .collect(),
        Some(Value::String(s)) => s
            .split([',', ' '])
            .map(|p| strip_quotes(p).to_owned())
            .filter(|p| !p.is_empty())
            .collect(),
        _ => Vec::new(),
    }
}

/// `metadata` may be a mapping, or a string holding JSON/JSON5 (OpenClaw re-parses it).
fn metadata_map(v: Option<&Value>) -> Option<Map<String, Value>> {
    match v? {
        Value::Object(m) => Some(m.clone()),
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(m)) => Some(m),
            _ => match serde_saphyr::from_str::<Value>(s) {
                Ok(Value::Object(m)) => Some(m),
                _ => None,
            },
        },
        _ => None,
    }
}

fn meta_from_map(
    map: &Map<String, Value>,
    dir_name: &str,
    problems: &mut Vec<(&'static str, String)>,
) -> SkillMeta {
    let name = as_text(map.get("name"))
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| dir_name.to_owned());
    let description = as_text(map.get("description")).unwrap_or_default();
    let disable_model_invocation = as_bool(map.get("disable-model-invocation"));
    let mut openclaw = OpenClawMeta::default();
    if let Some(metadata) = metadata_map(map.get("metadata")) {
        let oc = ["openclaw", "clawdbot"]
            .iter()
            .find_map(|k| match metadata.get(*k) {
                Some(Value::Object(m)) => Some(m.clone()),
                Some(v @ Value::String(_)) => metadata_map(Some(v)),
                _ => None,
            });
        if let Some(oc) = oc {
            openclaw.always = as_bool(oc.get("always"));
            openclaw.os = as_list(oc.get("os"));
            openclaw.primary_env = as_text(oc.get("primaryEnv")).filter(|s| !s.is_empty());
            openclaw.skill_key = as_text(oc.get("skillKey")).filter(|s| !s.is_empty());
            if let Some(Value::Object(req)) = oc.get("requires") {
                openclaw.requires = Requires {
                    bins: as_list(req.get("bins")),
                    any_bins: as_list(req.get("anyBins")),
                    env: as_list(req.get("env")),
                    config: as_list(req.get("config")),
                };
            }
            openclaw.install = match oc.get("install") {
                Some(Value::Array(items)) => items.clone(),
                Some(v @ Value::Object(_)) => vec![v.clone()],
                _ => Vec::new(),
            };
            match oc.get("activates") {
                Some(Value::Object(act)) => {
                    let plugins = act.get("plugins");
                    if matches!(plugins, Some(Value::String(_))) {
                        problems.push((
                            "activates-not-list",
                            "`activates.plugins` is a string, not a list; read as a comma-separated list".to_owned(),
                        ));
                    }
                    openclaw.activates_plugins = as_list(plugins);
                }
                Some(other) => problems.push((
                    "activates-invalid",
                    format!(
                        "`activates` is a {}, not a mapping with `plugins`; ignored",
                        kind(other)
                    ),
                )),
                None => {}
            }
        }
    }
    SkillMeta {
        name,
        description,
        disable_model_invocation,
        openclaw,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_frontmatter_with_folded_description_and_metadata() {
        let text = "---\nname: pdf-tools\ndescription: >\n  Extract tables\n  from PDFs.\nmetadata:\n  openclaw:\n    always: true\n    os: [linux]\n    primaryEnv: PDF_KEY\n    requires:\n      bins: [pdftk]\n      anyBins: [qpdf, mutool]\n      env: [PDF_KEY]\n      config: [plugins.entries.pdf.enabled]\n    install:\n      - kind: brew\n        formula: pdftk\n    activates:\n      plugins: [pdf-plugin]\n---\n\n# PDF\nBody here.\n";
        let p = parse(text, "dir");
        assert_eq!(p.problems, vec![]);
        assert_eq!(p.meta.name, "pdf-tools");
        assert_eq!(p.meta.description, "Extract tables from PDFs.");
        let oc = &p.meta.openclaw;
        assert!(oc.always);
        assert_eq!(oc.os, ["linux"]);
        assert_eq!(oc.primary_env.as_deref(), Some("PDF_KEY"));
        assert_eq!(oc.requires.bins, ["pdftk"]);
        assert_eq!(oc.requires.any_bins, ["qpdf", "mutool"]);
        assert_eq!(oc.requires.env, ["PDF_KEY"]);
        assert_eq!(oc.requires.config, ["plugins.entries.pdf.enabled"]);
        assert_eq!(oc.install.len(), 1);
        assert_eq!(oc.activates_plugins, ["pdf-plugin"]);
        assert_eq!(p.body, "# PDF\nBody here.\n");
    }

    #[test]
    fn json_metadata_string_and_clawdbot_alias() {
        let text = "---\nname: w\ndescription: weather\nmetadata: {\"clawdbot\":{\"emoji\":\"x\",\"requires\":{\"bins\":[\"curl\"]}}}\n---\nb";
        let p = parse(text, "d");
        assert_eq!(p.meta.openclaw.requires.bins, ["curl"]);
        let text = "---\nname: w\nmetadata: '{\"openclaw\":{\"always\":\"true\"},\"clawdbot\":{\"os\":[\"darwin\"]}}'\n---\nb";
        let p = parse(text, "d");
        assert!(p.meta.openclaw.always, "openclaw wins over clawdbot");
        assert!(p.meta.openclaw.os.is_empty());
    }

    #[test]
    fn unquoted_colon_falls_back_to_lines() {
        let text = "---\nname: \"git-helper\"\ndescription: Use when: the user asks about git: commits\nmetadata: {\"openclaw\":{\"requires\":{\"bins\":[\"git\"]}}}\n---\nbody";
        let p = parse(text, "d");
        assert_eq!(p.problems.len(), 1);
        assert_eq!(p.problems[0].0, "yaml-fallback");
        assert_eq!(p.meta.name, "git-helper");
        assert_eq!(
            p.meta.description,
            "Use when: the user asks about git: commits"
        );
        assert_eq!(p.meta.openclaw.requires.bins, ["git"]);
        assert_eq!(p.body, "body");
    }

    #[test]
    fn fallback_reads_nested_blocks_and_folded_text() {
        let text = "---\nname: x: y\ndescription: >\n  line one\n  line two\nmetadata:\n  openclaw:\n    requires:\n      env: [A]\n---\n";
        let p = parse(text, "d");
        assert_eq!(p.problems[0].0, "yaml-fallback");
        assert_eq!(p.meta.name, "x: y");
        assert_eq!(p.meta.description, "line one line two");
        assert_eq!(p.meta.openclaw.requires.env, ["A"]);
    }

    #[test]
    fn missing_and_unclosed_frontmatter() {
        let p = parse("# Just a body\n", "my-dir");
        assert_eq!(p.meta.name, "my-dir");
        assert_eq!(p.problems[0].0, "frontmatter-missing");
        assert_eq!(p.body, "# Just a body\n");
        let p = parse("---\nname: x\ndescription: y\n", "my-dir");
        assert_eq!(p.meta.name, "my-dir");
        assert_eq!(p.problems[0].0, "frontmatter-unclosed");
        let p = parse(
            "---\nname: x\ndescription: |\n  text\n  ---\n\n# Body\n",
            "my-dir",
        );
        assert_eq!(p.meta.name, "x");
        assert_eq!(p.problems[0].0, "frontmatter-fence-indented");
        assert_eq!(p.body, "# Body\n");
    }

    #[test]
    fn empty_name_falls_back_to_directory_and_crlf_is_handled() {
        let p = parse(
            "---\r\nname: \"\"\r\ndescription: d\r\n---\r\n\r\nbody\r\n",
            "the-dir",
        );
        assert_eq!(p.meta.name, "the-dir");
        assert_eq!(p.meta.description, "d");
        assert_eq!(p.body, "body\r\n");
    }

    #[test]
    fn alias_bomb_is_refused_quickly_and_read_line_by_line() {
        let mut fm = String::from(
            "---\nname: bomb\ndescription: lots of laughs\na0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n",
        );
        for i in 1..10 {
            let prev = format!("*a{}", i - 1);
            fm.push_str(&format!(
                "a{i}: &a{i} [{}]\n",
                [prev.as_str(); 9].join(", ")
            ));
        }
        fm.push_str("---\nbody");
        let started = std::time::Instant::now();
        let p = parse(&fm, "d");
        // Expanded, the bomb is 9^10 nodes (hours of work); refused, it takes milliseconds.
        // The bound is loose so a loaded machine cannot fail it.
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
        assert_eq!(
            p.problems.first().map(|p| p.0),
            Some("yaml-fallback"),
            "{:?}",
            p.problems
        );
        assert_eq!(p.meta.name, "bomb");
        assert_eq!(p.meta.description, "lots of laughs");
        assert_eq!(p.body, "body");
    }

    #[test]
    fn activates_as_a_string_is_read_and_reported() {
        let p = parse(
            "---\nname: a\nmetadata:\n  openclaw:\n    activates:\n      plugins: \"big, charts\"\n---\n",
            "d",
        );
        assert_eq!(p.meta.openclaw.activates_plugins, ["big", "charts"]);
        assert_eq!(p.problems[0].0, "activates-not-list");
        let p = parse(
            "---\nname: a\nmetadata:\n  openclaw:\n    activates: [big]\n---\n",
            "d",
        );
        assert!(p.meta.openclaw.activates_plugins.is_empty());
        assert_eq!(p.problems[0].0, "activates-invalid");
    }

    #[test]
    fn non_mapping_yaml_and_bom() {
        let p = parse("\u{feff}---\n- a\n- b\n---\nbody", "d");
        assert_eq!(p.problems[0].0, "yaml-not-mapping");
        assert_eq!(p.meta.name, "d");
        let p = parse("---\nname: n\ndisable-model-invocation: true\n---\n", "d");
        assert!(p.meta.disable_model_invocation);
    }
}
