//! PathGuard placeholders: `{{SKILL_DIR}}`, `{{SKILL_DIR:<name>}}`, `{{HOME}}`, `{{OUTPUT_DIR}}`
//! and `{{AGENT_STATE_DIR}}` in a skill's body, replaced by the host's directories as the
//! reference system does (opt-in: `resolve_placeholders`). Only trusted skills are expanded (the
//! caller decides: local and hub skills, and a host's own skills that say they were processed);
//! nothing here touches the filesystem.
//!
//! A placeholder that cannot be resolved (an unknown name, no directory known for it, a sibling
//! name that is absolute, has `.`/`..` parts or leaves the skill root) stays as written, and the
//! caller gets a reason to report, so the model never reads a guessed path.

use crate::config::PathFacts;
use regex::Regex;
use std::borrow::Cow;
use std::path::{Component, Path, PathBuf};
use std::sync::LazyLock;

/// `{{NAME}}` or `{{NAME:argument}}`, NAME in capitals: the placeholder shape. Lower-case
/// `{{x}}` (template syntax in examples) is not a placeholder and is never reported.
static PLACEHOLDER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\{\{([A-Z][A-Z0-9_]*)(?::([^{}\r\n]*))?\}\}").expect("valid regex")
});

/// Where one skill's placeholders point.
#[derive(Debug, Clone, Copy, Default)]
pub struct SkillPlace<'a> {
    /// The skill's directory (`{{SKILL_DIR}}`); `None`: not known.
    pub skill_dir: Option<&'a Path>,
    /// The root the skill was found under: `{{SKILL_DIR:<name>}}` must stay inside it.
    pub root: Option<&'a Path>,
}

/// A placeholder left as written, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    /// As written, braces included.
    pub placeholder: String,
    pub why: &'static str,
}

/// What a turn's placeholders resolve against: the directories, and the roots skills were found
/// under (each skill's own root is the deepest that holds its directory).
#[derive(Debug, Clone, Default)]
pub struct Places {
    pub facts: PathFacts,
    pub roots: Vec<PathBuf>,
}

impl Places {
    /// [`expand`] for the skill in `skill_dir`.
    pub fn expand<'b>(
        &self,
        body: &'b str,
        skill_dir: Option<&Path>,
    ) -> (Cow<'b, str>, Vec<Unresolved>) {
        let root = skill_dir.and_then(|d| {
            self.roots
                .iter()
                .filter(|r| !r.as_os_str().is_empty() && d.starts_with(r))
                .max_by_key(|r| r.components().count())
        });
        expand(
            body,
            SkillPlace {
                skill_dir,
                root: root.map(PathBuf::as_path),
            },
            &self.facts,
        )
    }
}

/// `body` with every placeholder it can resolve replaced, and the ones it left as written
/// (each distinct one once, in order of appearance).
pub fn expand<'b>(
    body: &'b str,
    place: SkillPlace<'_>,
    facts: &PathFacts,
) -> (Cow<'b, str>, Vec<Unresolved>) {
    if !body.contains("{{") {
        return (Cow::Borrowed(body), Vec::new());
    }
    let mut unresolved: Vec<Unresolved> = Vec::new();
    let out = PLACEHOLDER.replace_all(body, |c: &regex::Captures<'_>| {
        let written = &c[0];
        match resolve(&c[1], c.get(2).map(|a| a.as_str()), place, facts) {
            Ok(path) => path.display().to_string(),
            Err(why) => {
                if !unresolved.iter().any(|u| u.placeholder == written) {
                    unresolved.push(Unresolved {
                        placeholder: written.to_owned(),
                        why,
                    });
                }
                written.to_owned()
            }
        }
    });
    (out, unresolved)
}

fn resolve(
    name: &str,
    arg: Option<&str>,
    place: SkillPlace<'_>,
    facts: &PathFacts,
) -> Result<PathBuf, &'static str> {
    let known = |p: &Option<PathBuf>| p.clone().filter(|p| !p.as_os_str().is_empty());
    let output = known(&facts.output_dir);
    match (name, arg) {
        ("SKILL_DIR", None) => place
            .skill_dir
            .map(Path::to_path_buf)
            .ok_or("the skill has no directory"),
        ("SKILL_DIR", Some(sibling)) => {
            let dir = place.skill_dir.ok_or("the skill has no directory")?;
            sibling_dir(dir, sibling, place.root)
        }
        ("OUTPUT_DIR", None) => {
            output.ok_or("the host told no workspace and output_dir is not set")
        }
        ("HOME", None) => known(&facts.home_dir)
            .or(output)
            .ok_or("no home directory is known and output_dir is not set"),
        ("AGENT_STATE_DIR", None) => known(&facts.state_dir)
            .or(output)
            .ok_or("no state directory is known for this host and output_dir is not set"),
        ("OUTPUT_DIR" | "HOME" | "AGENT_STATE_DIR", Some(_)) => {
            Err("this placeholder takes no `:` argument")
        }
        _ => Err("unknown placeholder"),
    }
}

/// `{{SKILL_DIR:<name>}}`: the skill `name` beside this one (`<parent of skill dir>/<name>`),
/// refused when `name` is empty, absolute or has `.`/`..` parts, or when the result is outside
/// `root`.
fn sibling_dir(dir: &Path, name: &str, root: Option<&Path>) -> Result<PathBuf, &'static str> {
    let name = name.trim();
    let rel = Path::new(name);
    if name.is_empty()
        || name.contains('\\')
        || !rel.components().all(|c| matches!(c, Component::Normal(_)))
    {
        return Err(
            "the sibling name must be a plain relative name (no `/` at the start, no `.` or `..`)",
        );
    }
    let parent = dir.parent().ok_or("the skill directory has no parent")?;
    let target = parent.join(rel);
    match root {
        Some(root) if target.starts_with(root) && target != root => Ok(target),
        Some(_) => Err("the sibling would be outside the skill root"),
        None => Err("the skill root is not known"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(output: Option<&str>, home: Option<&str>, state: Option<&str>) -> PathFacts {
        PathFacts {
            output_dir: output.map(PathBuf::from),
            home_dir: home.map(PathBuf::from),
            state_dir: state.map(PathBuf::from),
        }
    }

    fn place<'a>(dir: &'a str, root: &'a str) -> SkillPlace<'a> {
        SkillPlace {
            skill_dir: Some(Path::new(dir)),
            root: Some(Path::new(root)),
        }
    }

    #[test]
    fn every_placeholder_resolves_from_the_facts() {
        let body = "run {{SKILL_DIR}}/x.sh, see {{SKILL_DIR:pdf}}/SKILL.md, \
                    write to {{OUTPUT_DIR}}/out, keep {{AGENT_STATE_DIR}}/s in {{HOME}}";
        let (out, left) = expand(
            body,
            place("/r/docx", "/r"),
            &facts(Some("/w"), Some("/home/u"), Some("/home/u/.openclaw")),
        );
        assert_eq!(
            out,
            "run /r/docx/x.sh, see /r/pdf/SKILL.md, write to /w/out, keep /home/u/.openclaw/s in /home/u"
        );
        assert!(left.is_empty());
    }

    #[test]
    fn home_and_state_fall_back_to_the_output_dir_as_the_reference_does() {
        let (out, left) = expand(
            "{{HOME}} {{AGENT_STATE_DIR}}",
            place("/r/a", "/r"),
            &facts(Some("/w"), None, None),
        );
        assert_eq!(out, "/w /w");
        assert!(left.is_empty());
    }

    #[test]
    fn without_a_workspace_output_dir_fails_closed() {
        let (out, left) = expand(
            "save to {{OUTPUT_DIR}}/a and {{OUTPUT_DIR}}/b, {{HOME}}",
            place("/r/a", "/r"),
            &PathFacts::default(),
        );
        assert_eq!(
            out,
            "save to {{OUTPUT_DIR}}/a and {{OUTPUT_DIR}}/b, {{HOME}}"
        );
        assert_eq!(
            left.iter()
                .map(|u| u.placeholder.as_str())
                .collect::<Vec<_>>(),
            ["{{OUTPUT_DIR}}", "{{HOME}}"],
            "each distinct placeholder reported once"
        );
    }

    #[test]
    fn sibling_names_cannot_leave_the_root() {
        let f = facts(Some("/w"), None, None);
        for bad in [
            "{{SKILL_DIR:../etc}}",
            "{{SKILL_DIR:/etc}}",
            "{{SKILL_DIR:..}}",
            "{{SKILL_DIR:.}}",
            "{{SKILL_DIR:a/../../x}}",
            "{{SKILL_DIR:./a}}",
            "{{SKILL_DIR:}}",
            "{{SKILL_DIR:a\\..\\b}}",
        ] {
            let (out, left) = expand(bad, place("/r/s", "/r"), &f);
            assert_eq!(out, bad, "{bad} must stay as written");
            assert_eq!(left.len(), 1, "{bad} must be reported");
        }
        // A skill at the root's top: its siblings would be outside the root.
        let (out, left) = expand("{{SKILL_DIR:b}}", place("/r", "/r"), &f);
        assert_eq!(out, "{{SKILL_DIR:b}}");
        assert_eq!(left[0].why, "the sibling would be outside the skill root");
        // Nested names inside the root are fine.
        let (out, _) = expand("{{SKILL_DIR:team/b}}", place("/r/x/a", "/r"), &f);
        assert_eq!(out, "/r/x/team/b");
        // No root known: refused rather than guessed.
        let none = SkillPlace {
            skill_dir: Some(Path::new("/r/a")),
            root: None,
        };
        assert_eq!(expand("{{SKILL_DIR:b}}", none, &f).1.len(), 1);
    }

    #[test]
    fn unknown_and_malformed_placeholders_stay_with_a_reason() {
        let (out, left) = expand(
            "{{API_KEY}} {{HOME:x}} {{SKILL_DIR}}",
            SkillPlace::default(),
            &facts(Some("/w"), Some("/h"), None),
        );
        assert_eq!(out, "{{API_KEY}} {{HOME:x}} {{SKILL_DIR}}");
        let why: Vec<_> = left.iter().map(|u| u.why).collect();
        assert_eq!(
            why,
            [
                "unknown placeholder",
                "this placeholder takes no `:` argument",
                "the skill has no directory"
            ]
        );
    }

    #[test]
    fn template_syntax_is_not_a_placeholder() {
        let body = "Hello {{ name }} and {{user.id}}; {{#each x}}";
        let (out, left) = expand(body, place("/r/a", "/r"), &PathFacts::default());
        assert!(matches!(out, Cow::Borrowed(_)) || out == body);
        assert_eq!(out, body);
        assert!(left.is_empty());
    }

    #[test]
    fn an_empty_fact_counts_as_unknown() {
        let (out, left) = expand(
            "{{OUTPUT_DIR}}",
            place("/r/a", "/r"),
            &facts(Some(""), None, None),
        );
        assert_eq!(out, "{{OUTPUT_DIR}}");
        assert_eq!(left.len(), 1);
    }

    #[test]
    fn a_skill_resolves_against_the_deepest_root_that_holds_it() {
        let places = Places {
            facts: PathFacts::default(),
            roots: vec!["/r".into(), "/r/plugins/p".into(), "".into()],
        };
        let (out, _) = places.expand("{{SKILL_DIR:b}}", Some(Path::new("/r/plugins/p/a")));
        assert_eq!(out, "/r/plugins/p/b");
        // The plugin root's top is its own root: no sibling outside it.
        let (out, left) = places.expand("{{SKILL_DIR:b}}", Some(Path::new("/r/plugins/p")));
        assert_eq!(out, "{{SKILL_DIR:b}}");
        assert_eq!(left.len(), 1);
        // Under no root at all.
        let (_, left) = places.expand("{{SKILL_DIR:b}}", Some(Path::new("/elsewhere/a")));
        assert_eq!(left[0].why, "the skill root is not known");
    }
}
