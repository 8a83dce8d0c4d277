//! Skill-driven tool visibility (`activates.plugins`). Loading a plugin no longer means showing
//! its tools: a plugin is *managed* when some eligible skill names it in `activates.plugins`,
//! and a managed plugin's tools are shown only on turns whose matched skills activate it. Core
//! tools and unmanaged plugins' tools are always shown, so a corpus without `activates` behaves
//! exactly as before. When unsure (a tool two plugins claim, a bad manifest), the tool is shown.

use crate::corpus::diagnostic::Diagnostic;
use crate::corpus::frontmatter::SkillMeta;
use crate::tokens::TokenCounter;
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// The manifest file of an OpenClaw plugin.
pub const MANIFEST: &str = "openclaw.plugin.json";

/// One installed plugin.
#[derive(Debug, Clone, Serialize)]
pub struct Plugin {
    pub id: String,
    pub dir: PathBuf,
    /// Tool names from `contracts.tools`.
    pub tools: Vec<String>,
    /// Skill directories the plugin bundles (`skills`), resolved against `dir`.
    pub skills: Vec<PathBuf>,
}

/// The installed plugins and which plugin owns which tool.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Inventory {
    pub plugins: BTreeMap<String, Plugin>,
    pub diagnostics: Vec<Diagnostic>,
}

impl Inventory {
    /// Reads every plugin under `roots`: a root holding a manifest is one plugin, otherwise each
    /// subdirectory holding one is. Bad manifests become diagnostics.
    pub fn load(roots: &[PathBuf]) -> Inventory {
        let mut inv = Inventory::default();
        for root in roots {
            if root.join(MANIFEST).is_file() {
                inv.read(root);
                continue;
            }
            let Ok(rd) = std::fs::read_dir(root) else {
                inv.diagnostics.push(Diagnostic::error(
                    "plugin-root-missing",
                    root,
                    "plugin directory cannot be read; check the path",
                ));
                continue;
            };
            let mut dirs: Vec<PathBuf> = rd
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.join(MANIFEST).is_file())
                .collect();
            dirs.sort();
            for d in dirs {
                inv.read(&d);
            }
        }
        inv
    }

    fn read(&mut self, dir: &Path) {
        let path = dir.join(MANIFEST);
        let diag = |code: &str, msg: String| Diagnostic::error(code, &path, msg);
        let v: Value = match crate::fsio::read_regular(&path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
        {
            Ok(v) => v,
            Err(e) => {
                self.diagnostics.push(diag(
                    "plugin-manifest-invalid",
                    format!("not a JSON manifest ({e}); the plugin's tools stay visible"),
                ));
                return;
            }
        };
        let Some(id) = v
            .get("id")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
        else {
            self.diagnostics.push(diag(
                "plugin-manifest-no-id",
                "manifest has no `id`; the plugin's tools stay visible".into(),
            ));
            return;
        };
        let mut tools = Vec::new();
        if let Some(list) = v.pointer("/contracts/tools") {
            match list.as_array() {
                Some(items) => {
                    for t in items {
                        match t.as_str().map(str::trim).filter(|s| !s.is_empty()) {
                            Some(name) if tools.iter().any(|x| x == name) => {
                                self.diagnostics.push(Diagnostic::warning(
                                    "plugin-tool-duplicate",
                                    &path,
                                    format!("`contracts.tools` lists `{name}` twice"),
                                ))
                            }
                            Some(name) => tools.push(name.to_owned()),
                            None => self.diagnostics.push(Diagnostic::warning(
                                "plugin-tool-invalid",
                                &path,
                                format!("`contracts.tools` holds {t}, not a tool name; ignored"),
                            )),
                        }
                    }
                }
                None => self.diagnostics.push(diag(
                    "plugin-manifest-invalid",
                    "`contracts.tools` is not a list".into(),
                )),
            }
        }
        let skills = v
            .get("skills")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(|s| dir.join(s))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(first) = self.plugins.get(id) {
            self.diagnostics.push(Diagnostic::warning(
                "plugin-id-duplicate",
                &path,
                format!(
                    "plugin id `{id}` is already installed at {}; this copy is ignored",
                    first.dir.display()
                ),
            ));
            return;
        }
        self.plugins.insert(
            id.to_owned(),
            Plugin {
                id: id.to_owned(),
                dir: dir.to_path_buf(),
                tools,
                skills,
            },
        );
    }

    /// tool → owning plugin. A tool claimed by two plugins has no owner (it is always shown),
    /// with a diagnostic.
    fn owners(&self, diags: &mut Vec<Diagnostic>) -> HashMap<&str, &str> {
        let mut owners: HashMap<&str, &str> = HashMap::new();
        let mut contested = BTreeSet::new();
        for p in self.plugins.values() {
            for t in &p.tools {
                match owners.get(t.as_str()) {
                    Some(other) if *other != p.id => {
                        diags.push(Diagnostic::warning(
                            "tool-claimed-twice",
                            p.dir.join(MANIFEST),
                            format!("tool `{t}` is claimed by plugins `{other}` and `{}`; it stays visible", p.id),
                        ));
                        contested.insert(t.as_str());
                    }
                    _ => {
                        owners.insert(t, &p.id);
                    }
                }
            }
        }
        owners.retain(|t, _| !contested.contains(t));
        owners
    }
}

/// A tool the host offers this turn: its name, and its schema when the host gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    /// The OpenAI-style wire form `{"type":"function","function":{name, description, parameters}}`.
    pub schema: Option<Value>,
}

/// Reads a host tool list: names, OpenAI `{"type":"function","function":{…}}` objects, or
/// `{"name", "description", "parameters" | "input_schema"}` objects. Empty names and repeats are
/// dropped with a diagnostic naming `origin`.
pub fn parse_tools(v: &Value, origin: &Path) -> (Vec<ToolSpec>, Vec<Diagnostic>) {
    let mut out: Vec<ToolSpec> = Vec::new();
    let mut diags = Vec::new();
    let items: &[Value] = match v {
        Value::Array(a) => a,
        Value::Object(o) => o
            .get("tools")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice),
        _ => &[],
    };
    if items.is_empty() && !matches!(v, Value::Array(_)) {
        diags.push(Diagnostic::error(
            "tools-invalid",
            origin,
            "expected a list of tools (or an object with `tools`)",
        ));
    }
    for item in items {
        let (name, schema) = match item {
            Value::String(s) => (s.trim().to_owned(), None),
            Value::Object(o) => {
                let f = o.get("function").and_then(Value::as_object).unwrap_or(o);
                let name = f
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .trim()
                    .to_owned();
                let params = f
                    .get("parameters")
                    .or_else(|| f.get("input_schema"))
                    .or_else(|| f.get("inputSchema"))
                    .cloned();
                let desc = f
                    .get("description")
                    .cloned()
                    .unwrap_or(Value::String(String::new()));
                let schema = json!({"type": "function", "function": {"name": name, "description": desc, "parameters": params.unwrap_or(json!({"type": "object", "properties": {}}))}});
                (name, Some(schema))
            }
            other => {
                diags.push(Diagnostic::warning(
                    "tool-invalid",
                    origin,
                    format!("{other} is not a tool; ignored"),
                ));
                continue;
            }
        };
        if name.is_empty() {
            diags.push(Diagnostic::warning(
                "tool-empty-name",
                origin,
                "a tool with an empty name was ignored",
            ));
        } else if out.iter().any(|t| t.name == name) {
            diags.push(Diagnostic::warning(
                "tool-duplicate",
                origin,
                format!("tool `{name}` is listed twice; the first is used"),
            ));
        } else {
            out.push(ToolSpec { name, schema });
        }
    }
    (out, diags)
}

/// Why one tool or plugin was shown or hidden.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Reason {
    pub subject: String,
    /// `tool` or `plugin`.
    pub kind: &'static str,
    /// `visible`, `hidden`, `activated` or `ignored`.
    pub decision: &'static str,
    pub reason: String,
}

/// Token cost of the tool schemas, as an OpenAI-style host sends them.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ToolTokens {
    pub shown: usize,
    pub hidden: usize,
    /// Tools whose schema the host did not give (not counted).
    pub unknown_schemas: usize,
    pub exact: bool,
}

/// The visible tools for one turn, with reasons and costs.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Plan {
    pub visible_tools: Vec<String>,
    pub hidden_tools: Vec<String>,
    pub activated_plugins: Vec<String>,
    pub managed_plugins: Vec<String>,
    pub reasons: Vec<Reason>,
    pub tokens: ToolTokens,
    pub diagnostics: Vec<Diagnostic>,
}

/// One skill matched on this turn: its id and metadata.
pub struct Matched<'a> {
    pub id: &'a str,
    pub meta: &'a SkillMeta,
}

impl<'a> From<&'a crate::retrieve::Hit> for Matched<'a> {
    fn from(h: &'a crate::retrieve::Hit) -> Self {
        Matched {
            id: &h.qualified_id,
            meta: &h.meta,
        }
    }
}

impl Plan {
    /// The plan as surfaces report it (`plan --json`, the daemon's `/v1/plan`).
    pub fn report(&self, matched_skills: &[&str]) -> Value {
        json!({
            "matched_skills": matched_skills,
            "visible_tools": self.visible_tools,
            "hidden_tools": self.hidden_tools,
            "activated_plugins": self.activated_plugins,
            "managed_plugins": self.managed_plugins,
            "reasons": self.reasons,
            "tokens": self.tokens,
            "diagnostics": self.diagnostics,
        })
    }
}

/// Plans one turn. `managed` maps each plugin named by an *eligible* skill's `activates` to
/// those skills; `extra_managed` adds plugins configuration manages explicitly. `tools` is the
/// host's list this turn; when empty, every inventory tool is planned (names only).
pub fn plan(
    matched: &[Matched<'_>],
    managed: &BTreeMap<String, Vec<String>>,
    extra_managed: &[String],
    tools: &[ToolSpec],
    inventory: &Inventory,
    counter: &TokenCounter,
) -> Plan {
    let mut p = Plan::default();
    let mut diags = inventory.diagnostics.clone();
    let owners = inventory.owners(&mut diags);
    let managed_set: BTreeSet<&str> = managed
        .keys()
        .map(String::as_str)
        .chain(extra_managed.iter().map(String::as_str))
        .collect();
    p.managed_plugins = managed_set.iter().map(|s| (*s).to_owned()).collect();
    let mut activated: BTreeMap<&str, &str> = BTreeMap::new();
    for m in matched {
        for plugin in &m.meta.openclaw.activates_plugins {
            if !inventory.plugins.contains_key(plugin) {
                diags.push(Diagnostic::warning(
                    "plugin-not-installed",
                    PathBuf::from(m.id),
                    format!(
                        "skill `{}` activates plugin `{plugin}`, which is not installed; ignored",
                        m.meta.name
                    ),
                ));
                p.reasons.push(Reason {
                    subject: plugin.clone(),
                    kind: "plugin",
                    decision: "ignored",
                    reason: format!("activated by `{}` but not installed", m.id),
                });
                continue;
            }
            if activated.insert(plugin, m.id).is_none() {
                p.reasons.push(Reason {
                    subject: plugin.clone(),
                    kind: "plugin",
                    decision: "activated",
                    reason: format!("activated by skill `{}`", m.id),
                });
            }
        }
    }
    p.activated_plugins = activated.keys().map(|s| (*s).to_owned()).collect();
    let inventory_tools: Vec<ToolSpec>;
    let tools = if tools.is_empty() {
        inventory_tools = inventory
            .plugins
            .values()
            .flat_map(|pl| pl.tools.iter())
            .map(|t| ToolSpec {
                name: t.clone(),
                schema: None,
            })
            .collect();
        &inventory_tools
    } else {
        tools
    };
    let mut tokens = ToolTokens {
        exact: counter.is_exact(),
        ..ToolTokens::default()
    };
    for t in tools {
        let (visible, reason) = match owners.get(t.name.as_str()) {
            None => (true, "core tool (no plugin owns it)".to_owned()),
            Some(owner) if !managed_set.contains(owner) => (
                true,
                format!("plugin `{owner}` is not managed by any skill"),
            ),
            Some(owner) => match activated.get(owner) {
                Some(skill) => (
                    true,
                    format!("plugin `{owner}` activated by skill `{skill}`"),
                ),
                None => (
                    false,
                    format!(
                        "plugin `{owner}` is managed and no skill matched this turn activates it"
                    ),
                ),
            },
        };
        let cost = t
            .schema
            .as_ref()
            .map(|s| counter.count(&serde_json::to_string(s).unwrap_or_default()));
        if cost.is_none() {
            tokens.unknown_schemas += 1;
        }
        if visible {
            p.visible_tools.push(t.name.clone());
            tokens.shown += cost.unwrap_or(0);
        } else {
            p.hidden_tools.push(t.name.clone());
            tokens.hidden += cost.unwrap_or(0);
        }
        p.reasons.push(Reason {
            subject: t.name.clone(),
            kind: "tool",
            decision: if visible { "visible" } else { "hidden" },
            reason,
        });
    }
    p.tokens = tokens;
    p.diagnostics = diags;
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::frontmatter::OpenClawMeta;

    fn plugin_dir(root: &Path, id: &str, manifest: &str) {
        let d = root.join(id);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(MANIFEST), manifest).unwrap();
    }

    fn meta(name: &str, activates: &[&str]) -> SkillMeta {
        SkillMeta {
            name: name.into(),
            openclaw: OpenClawMeta {
                activates_plugins: activates.iter().map(|s| s.to_string()).collect(),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn tools(names: &[&str]) -> Vec<ToolSpec> {
        names
            .iter()
            .map(|n| ToolSpec { name: n.to_string(), schema: Some(json!({"type": "function", "function": {"name": n, "description": "does a thing with many words", "parameters": {"type": "object"}}})) })
            .collect()
    }

    #[test]
    fn managed_plugins_are_shown_only_when_activated() {
        let tmp = tempfile::tempdir().unwrap();
        plugin_dir(
            tmp.path(),
            "bigdata",
            r#"{"id":"bigdata","contracts":{"tools":["bd_query","bd_schema"]}}"#,
        );
        plugin_dir(
            tmp.path(),
            "charts",
            r#"{"id":"charts","contracts":{"tools":["chart_make"]}}"#,
        );
        plugin_dir(
            tmp.path(),
            "weather",
            r#"{"id":"weather","contracts":{"tools":["forecast"]}}"#,
        );
        let inv = Inventory::load(&[tmp.path().to_path_buf()]);
        assert!(inv.diagnostics.is_empty(), "{:?}", inv.diagnostics);
        let managed = BTreeMap::from([
            ("bigdata".to_owned(), vec!["data-analyst".to_owned()]),
            ("charts".to_owned(), vec!["data-analyst".to_owned()]),
        ]);
        let all = tools(&[
            "read",
            "exec",
            "bd_query",
            "bd_schema",
            "chart_make",
            "forecast",
        ]);
        let c = TokenCounter::new();
        // Small talk: no skill matched.
        let p = plan(&[], &managed, &[], &all, &inv, &c);
        assert_eq!(p.visible_tools, ["read", "exec", "forecast"]);
        assert_eq!(p.hidden_tools, ["bd_query", "bd_schema", "chart_make"]);
        assert!(p.tokens.hidden > 0 && p.tokens.shown > 0);
        // A data turn: the analyst skill matched.
        let m = meta("data-analyst", &["bigdata", "charts", "not-installed"]);
        let p = plan(
            &[Matched {
                id: "data-analyst",
                meta: &m,
            }],
            &managed,
            &[],
            &all,
            &inv,
            &c,
        );
        assert!(p.hidden_tools.is_empty());
        assert_eq!(p.activated_plugins, ["bigdata", "charts"]);
        assert!(
            p.diagnostics
                .iter()
                .any(|d| d.code == "plugin-not-installed")
        );
        assert!(
            p.reasons.iter().any(|r| r.subject == "bd_query"
                && r.reason.contains("activated by skill `data-analyst`"))
        );
        // No activates anywhere: nothing is managed, everything is shown.
        let p = plan(&[], &BTreeMap::new(), &[], &all, &inv, &c);
        assert!(p.hidden_tools.is_empty());
    }

    #[test]
    fn bad_manifests_and_contested_tools_stay_visible() {
        let tmp = tempfile::tempdir().unwrap();
        plugin_dir(tmp.path(), "broken", "{not json");
        plugin_dir(tmp.path(), "noid", r#"{"contracts":{"tools":["x"]}}"#);
        plugin_dir(
            tmp.path(),
            "a",
            r#"{"id":"a","contracts":{"tools":["shared","only_a","only_a"]}}"#,
        );
        plugin_dir(
            tmp.path(),
            "b",
            r#"{"id":"b","contracts":{"tools":["shared"]}}"#,
        );
        let inv = Inventory::load(&[tmp.path().to_path_buf()]);
        let codes: Vec<_> = inv.diagnostics.iter().map(|d| d.code.as_str()).collect();
        assert!(
            codes.contains(&"plugin-manifest-invalid")
                && codes.contains(&"plugin-manifest-no-id")
                && codes.contains(&"plugin-tool-duplicate"),
            "{codes:?}"
        );
        let managed = BTreeMap::from([
            ("a".to_owned(), vec!["s".to_owned()]),
            ("b".to_owned(), vec!["s".to_owned()]),
        ]);
        let p = plan(
            &[],
            &managed,
            &[],
            &tools(&["shared", "only_a", "x"]),
            &inv,
            &TokenCounter::new(),
        );
        assert_eq!(
            p.visible_tools,
            ["shared", "x"],
            "contested and unknown tools are shown"
        );
        assert_eq!(p.hidden_tools, ["only_a"]);
        assert!(p.diagnostics.iter().any(|d| d.code == "tool-claimed-twice"));
    }

    #[test]
    fn host_tool_lists_in_every_shape() {
        let v = json!(["read", {"type": "function", "function": {"name": "exec", "description": "run", "parameters": {"type": "object"}}}, {"name": "web", "input_schema": {}}, "", "read", 42]);
        let (t, d) = parse_tools(&v, Path::new("tools.json"));
        let names: Vec<_> = t.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["read", "exec", "web"]);
        assert!(t[0].schema.is_none() && t[1].schema.is_some());
        let codes: Vec<_> = d.iter().map(|d| d.code.as_str()).collect();
        assert_eq!(codes, ["tool-empty-name", "tool-duplicate", "tool-invalid"]);
        let (_, d) = parse_tools(&json!("nope"), Path::new("tools.json"));
        assert_eq!(d[0].code, "tools-invalid");
    }
}
