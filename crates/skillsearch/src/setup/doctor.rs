//! `doctor` checks as data. A host describes each check as a [`Spec`]: its name, the gates that
//! can shut it (what is read, from which file and key, and what is wanted there), each with the
//! status, detail and fix it reports, and the detail when every gate is open. [`Spec::eval`] is
//! the one place that turns such a description into a [`Check`]. The entries several hosts
//! share, the `disableAllHooks` gate and the `tool-approval` check over `permissions.allow` /
//! `permissions.deny`, are written here once.

use super::wiring::mcp_tool_names;
use super::{Check, Status, get_path};
use serde_json::Value;
use std::path::Path;

/// What a gate wants of the boolean at its key. Only an actual JSON boolean counts: a missing
/// key, a string or a number is neither `true` nor `false`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// It must be `true`: a missing key shuts the gate (`alwaysLoad`).
    True,
    /// It must not be `true`: a missing key leaves the gate open (`disableAllHooks`).
    NotTrue,
    /// It must not be `false`: a missing key leaves the gate open (`enabled = false`).
    NotFalse,
}

/// What a gate reads.
#[derive(Debug, Clone)]
pub enum Test<'a> {
    /// The boolean at `key` (object keys from the root) in a parsed config file.
    Flag {
        doc: &'a Value,
        key: Vec<String>,
        want: Want,
    },
    /// A condition the host worked out itself (a hash, an environment variable, a list):
    /// `true` shuts the gate.
    Shut(bool),
}

impl Test<'_> {
    fn shuts(&self) -> bool {
        match self {
            Test::Flag { doc, key, want } => {
                let value = key
                    .iter()
                    .try_fold(*doc, |v, k| v.get(k))
                    .and_then(Value::as_bool);
                match want {
                    Want::True => value != Some(true),
                    Want::NotTrue => value == Some(true),
                    Want::NotFalse => value == Some(false),
                }
            }
            Test::Shut(shut) => *shut,
        }
    }
}

/// A [`Test::Flag`]: the boolean at `key` of `doc`.
pub fn flag<'a>(doc: &'a Value, key: &[&str], want: Want) -> Test<'a> {
    Test::Flag {
        doc,
        key: key.iter().map(|k| k.to_string()).collect(),
        want,
    }
}

/// One way a check goes wrong, and what it then says.
#[derive(Debug, Clone)]
pub struct Gate<'a> {
    pub test: Test<'a>,
    pub status: Status,
    pub detail: String,
    pub fix: String,
    /// Reported under this name instead of the check's (codex's `hook` gates come before its
    /// `hook-trust` check).
    pub name: Option<&'static str>,
}

impl<'a> Gate<'a> {
    pub fn new(
        status: Status,
        test: Test<'a>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Gate {
            test,
            status,
            detail: detail.into(),
            fix: fix.into(),
            name: None,
        }
    }

    pub fn fail(test: Test<'a>, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Gate::new(Status::Fail, test, detail, fix)
    }

    pub fn warn(test: Test<'a>, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Gate::new(Status::Warn, test, detail, fix)
    }

    /// The same gate, reported as the check `name`.
    pub fn named(self, name: &'static str) -> Self {
        Gate {
            name: Some(name),
            ..self
        }
    }
}

/// One check as data.
#[derive(Debug, Clone)]
pub struct Spec<'a> {
    pub name: &'static str,
    /// Tried in order: the first one shut is the check.
    pub gates: Vec<Gate<'a>>,
    /// The detail when every gate is open; `None` leaves the check out then (a check shown only
    /// when something is wrong).
    pub ok: Option<String>,
}

impl Spec<'_> {
    /// A check that is always `ok` with `detail` (something worth knowing, nothing to fix).
    pub fn info(name: &'static str, detail: impl Into<String>) -> Self {
        Spec {
            name,
            gates: Vec::new(),
            ok: Some(detail.into()),
        }
    }

    pub fn eval(self) -> Option<Check> {
        match self.gates.into_iter().find(|g| g.test.shuts()) {
            Some(g) => Some(Check {
                name: g.name.unwrap_or(self.name),
                status: g.status,
                detail: g.detail,
                fix: Some(g.fix),
            }),
            None => self.ok.map(|detail| Check::ok(self.name, detail)),
        }
    }
}

/// Evaluates every spec in order.
pub fn eval_all(specs: Vec<Spec>) -> Vec<Check> {
    specs.into_iter().filter_map(Spec::eval).collect()
}

/// The strings in the array at `key` (anything else in it is passed over; no array, none).
pub fn strings(doc: &Value, key: &[&str]) -> Vec<String> {
    get_path(doc, key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// The gate of a settings file's `disableAllHooks` (Claude Code, CodeBuddy): `true` runs no hook.
pub fn hooks_enabled<'a>(settings: &'a Value, file: &Path) -> Gate<'a> {
    let file = file.display();
    Gate::fail(
        flag(settings, &["disableAllHooks"], Want::NotTrue),
        format!("`disableAllHooks` is true in {file}"),
        format!("remove `disableAllHooks` from {file}"),
    )
}

/// The `tool-approval` check of a host that approves MCP tools by name in its settings'
/// `permissions.allow` and refuses them in `permissions.deny` (Claude Code, CodeBuddy): a deny
/// rule wins, and then every tool must be allowed.
pub struct Approval<'a> {
    /// The settings (and the file they were read from, for the messages).
    pub settings: &'a Value,
    pub file: &'a Path,
    /// Whether a rule naming the whole server (`mcp__<server>`, `mcp__<server>__*`) covers its
    /// tools (Claude Code), or only a tool's exact name does (CodeBuddy).
    pub server_rules: bool,
    /// What a tool missing from `permissions.allow` is: its status, what that means (the detail
    /// after the tool's name) and the fix.
    pub unapproved: Status,
    pub unapproved_means: &'static str,
    pub unapproved_fix: String,
}

impl<'a> Approval<'a> {
    fn covers(&self, rules: &[String], tool: &str) -> bool {
        let server = format!("mcp__{}", super::wiring::SERVER);
        rules.iter().any(|r| {
            r == tool || (self.server_rules && (*r == server || *r == format!("{server}__*")))
        })
    }

    pub fn spec(self) -> Spec<'a> {
        let (allow, deny) = (
            strings(self.settings, &["permissions", "allow"]),
            strings(self.settings, &["permissions", "deny"]),
        );
        let names = mcp_tool_names();
        let denied = names.iter().find(|n| self.covers(&deny, n));
        let unapproved = names.iter().find(|n| !self.covers(&allow, n));
        let file = self.file.display();
        Spec {
            name: "tool-approval",
            gates: vec![
                Gate::fail(
                    Test::Shut(denied.is_some()),
                    format!("{} is in permissions.deny of {file}", or_empty(denied)),
                    format!("remove it from permissions.deny in {file}"),
                ),
                Gate::new(
                    self.unapproved,
                    Test::Shut(unapproved.is_some()),
                    format!("{} {}", or_empty(unapproved), self.unapproved_means),
                    self.unapproved_fix,
                ),
            ],
            ok: Some(format!("{} pre-approved", names.join(", "))),
        }
    }
}

fn or_empty(s: Option<&String>) -> &str {
    s.map_or("", String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shuts(doc: &Value, want: Want) -> bool {
        flag(doc, &["a", "b"], want).shuts()
    }

    #[test]
    fn flags_read_only_booleans_and_a_missing_key_as_neither() {
        let (t, f) = (json!({"a": {"b": true}}), json!({"a": {"b": false}}));
        let (missing, string) = (json!({"a": {}}), json!({"a": {"b": "true"}}));
        let not_object = json!({"a": 3});
        assert!(!shuts(&t, Want::True) && shuts(&f, Want::True));
        assert!(shuts(&missing, Want::True) && shuts(&string, Want::True));
        assert!(shuts(&not_object, Want::True));
        assert!(shuts(&t, Want::NotTrue) && !shuts(&f, Want::NotTrue));
        assert!(!shuts(&missing, Want::NotTrue) && !shuts(&string, Want::NotTrue));
        assert!(shuts(&f, Want::NotFalse) && !shuts(&t, Want::NotFalse));
        assert!(!shuts(&missing, Want::NotFalse) && !shuts(&not_object, Want::NotFalse));
    }

    #[test]
    fn the_first_shut_gate_is_the_check_else_ok_or_nothing() {
        let doc = json!({"x": true, "y": true});
        let spec = |ok: Option<&str>| Spec {
            name: "c",
            gates: vec![
                Gate::warn(flag(&doc, &["x"], Want::NotTrue), "x set", "unset x"),
                Gate::fail(flag(&doc, &["y"], Want::NotTrue), "y set", "unset y").named("d"),
            ],
            ok: ok.map(String::from),
        };
        let c = spec(Some("fine")).eval().unwrap();
        assert_eq!(
            (c.name, c.status, c.detail.as_str()),
            ("c", Status::Warn, "x set")
        );
        assert_eq!(c.fix.as_deref(), Some("unset x"));
        let mut second = spec(None);
        second.gates.remove(0);
        let c = second.eval().unwrap();
        assert_eq!(
            (c.name, c.status, c.detail.as_str()),
            ("d", Status::Fail, "y set")
        );

        let open = json!({});
        let spec = |ok: Option<&str>| Spec {
            name: "c",
            gates: vec![Gate::fail(flag(&open, &["x"], Want::NotTrue), "x", "x")],
            ok: ok.map(String::from),
        };
        let c = spec(Some("fine")).eval().unwrap();
        assert_eq!(
            (c.name, c.status, c.detail.as_str()),
            ("c", Status::Ok, "fine")
        );
        assert!(c.fix.is_none());
        assert!(spec(None).eval().is_none());
        assert_eq!(
            eval_all(vec![spec(None), Spec::info("i", "so"), spec(Some("k"))])
                .iter()
                .map(|c| c.name)
                .collect::<Vec<_>>(),
            ["i", "c"]
        );
    }

    fn approval(settings: &Value, server_rules: bool) -> Check {
        Approval {
            settings,
            file: Path::new("/s.json"),
            server_rules,
            unapproved: if server_rules {
                Status::Fail
            } else {
                Status::Warn
            },
            unapproved_means: "is not allowed",
            unapproved_fix: "allow it".into(),
        }
        .spec()
        .eval()
        .unwrap()
    }

    const SEARCH: &str = "mcp__skillsearch__skill_search";
    const READ: &str = "mcp__skillsearch__skill_read";

    #[test]
    fn approval_deny_wins_over_allow() {
        // Denied and allowed, or denied and (so) not allowed: the deny rule is what is reported,
        // and it fails even where a tool merely not allowed is a warning.
        for allow in [json!([SEARCH, READ]), json!([SEARCH])] {
            let s = json!({"permissions": {"allow": allow, "deny": [READ]}});
            for server_rules in [true, false] {
                let c = approval(&s, server_rules);
                assert_eq!(c.status, Status::Fail, "{s}");
                assert_eq!(
                    c.detail,
                    format!("{READ} is in permissions.deny of /s.json")
                );
                assert_eq!(
                    c.fix.as_deref(),
                    Some("remove it from permissions.deny in /s.json")
                );
            }
        }
        let all = json!({"permissions": {"allow": [SEARCH, READ]}});
        let c = approval(&all, false);
        assert_eq!(c.status, Status::Ok);
        assert_eq!(c.detail, format!("{SEARCH}, {READ} pre-approved"));
    }

    #[test]
    fn approval_of_a_missing_list_or_tool_takes_the_hosts_status() {
        for s in [
            json!({}),
            json!({"permissions": 3}),
            json!({"permissions": {"allow": "x"}}),
            json!({"permissions": {"allow": [1, 2]}}),
            json!({"permissions": {"allow": [READ]}}),
        ] {
            for (server_rules, status) in [(true, Status::Fail), (false, Status::Warn)] {
                let c = approval(&s, server_rules);
                assert_eq!(c.status, status, "{s}");
                assert_eq!(c.detail, format!("{SEARCH} is not allowed"), "{s}");
                assert_eq!(c.fix.as_deref(), Some("allow it"));
            }
        }
        let c = approval(&json!({"permissions": {"allow": [SEARCH]}}), true);
        assert_eq!(c.detail, format!("{READ} is not allowed"));
    }

    #[test]
    fn server_wide_rules_cover_the_tools_only_where_the_host_says_so() {
        for rule in ["mcp__skillsearch", "mcp__skillsearch__*"] {
            let allowed = json!({"permissions": {"allow": [rule]}});
            assert_eq!(approval(&allowed, true).status, Status::Ok, "{rule}");
            assert_eq!(approval(&allowed, false).status, Status::Warn, "{rule}");
            let denied = json!({"permissions": {"allow": [SEARCH, READ], "deny": [rule]}});
            let c = approval(&denied, true);
            assert_eq!(c.status, Status::Fail, "{rule}");
            assert!(c.detail.starts_with(SEARCH), "{}", c.detail);
            assert_eq!(approval(&denied, false).status, Status::Ok, "{rule}");
        }
        for near in ["mcp__skillsearch*", "mcp__skillsearch__", "mcp__other__*"] {
            let s = json!({"permissions": {"allow": [near]}});
            assert_ne!(approval(&s, true).status, Status::Ok, "{near}");
        }
    }

    #[test]
    fn hooks_enabled_names_the_file() {
        let off = json!({"disableAllHooks": true});
        let g = hooks_enabled(&off, Path::new("/s.json"));
        assert!(g.test.shuts());
        assert_eq!(g.detail, "`disableAllHooks` is true in /s.json");
        assert_eq!(g.fix, "remove `disableAllHooks` from /s.json");
        assert!(
            !hooks_enabled(&json!({"disableAllHooks": "true"}), Path::new("/s"))
                .test
                .shuts()
        );
    }

    #[test]
    fn strings_pass_over_what_is_not_a_string() {
        let v = json!({"p": {"l": ["a", 1, null, "b"], "s": "a"}});
        assert_eq!(strings(&v, &["p", "l"]), ["a", "b"]);
        assert!(strings(&v, &["p", "s"]).is_empty());
        assert!(strings(&v, &["p", "none"]).is_empty());
    }
}
