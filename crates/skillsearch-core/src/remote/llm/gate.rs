//! The skill gate: the model sees the user's task and the retrieved candidates and picks at most
//! `max_select` of them, or none. Any failure keeps the first `max_select` candidates.

use super::{ChatClient, extract_json_object};
use crate::tokens::prefix_chars;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const TEMPERATURE: f32 = 0.0;
const DESC_MAX: usize = 200;
const EXCERPT_MAX: usize = 300;

/// One skill the gate may pick; the caller maps its hits to these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateCandidate {
    pub qualified_id: String,
    pub description: String,
    pub body: String,
}

/// How the gate runs.
#[derive(Debug, Clone)]
pub struct GateOptions {
    /// Most skills selected; also how many candidates a failure keeps.
    pub max_select: usize,
    pub deadline: Duration,
    /// Append one JSON line per successful decision here.
    pub log_path: Option<PathBuf>,
}

impl Default for GateOptions {
    fn default() -> Self {
        GateOptions {
            max_select: 2,
            deadline: Duration::from_secs(20),
            log_path: None,
        }
    }
}

impl GateOptions {
    pub fn from_settings(s: &crate::config::Settings) -> Self {
        GateOptions {
            max_select: s.max_select,
            deadline: s.gate_timeout,
            log_path: s.gate_log_path.clone(),
        }
    }
}

/// What the gate decided, for the caller and its diagnostics.
#[derive(Debug, Clone, PartialEq)]
pub struct GateOutcome {
    /// Indices into the candidates, in the model's order (or the first `max_select` on failure).
    pub selected: Vec<usize>,
    /// The selected qualified ids, in the same order.
    pub selected_ids: Vec<String>,
    /// The model's one-sentence plan.
    pub plan: Option<String>,
    /// The model was asked (not for an empty candidate list).
    pub called: bool,
    /// The selection is the fail-open fallback; `error` says why.
    pub fell_back: bool,
    pub error: Option<String>,
    /// Ids the model named that are not candidates (ignored).
    pub unknown_ids: Vec<String>,
    /// The model's raw reply, when there was one.
    pub raw_response: Option<String>,
    pub elapsed_ms: u64,
    /// Why the decision log line could not be written (the decision stands).
    pub log_error: Option<String>,
}

/// One candidate description: newlines to spaces, `(no description)` when empty, over 200
/// characters cut to 197 plus `...`.
fn desc_line(d: &str) -> String {
    let d = d.replace(['\r', '\n'], " ");
    let d = d.trim();
    if d.is_empty() {
        "(no description)".into()
    } else if d.chars().count() > DESC_MAX {
        format!("{}...", prefix_chars(d, DESC_MAX - 3))
    } else {
        d.to_owned()
    }
}

/// The body, whitespace collapsed, first 300 characters, or `(no body)`.
fn excerpt(body: &str) -> String {
    let collapsed = body.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.is_empty() {
        "(no body)".into()
    } else {
        prefix_chars(&collapsed, EXCERPT_MAX).to_owned()
    }
}

/// Sorted, unique, non-empty tool names; `None` when there are none.
fn tool_names(tools: Option<&[String]>) -> Option<Vec<&str>> {
    let mut t: Vec<&str> = tools?
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .collect();
    t.sort_unstable();
    t.dedup();
    Some(t).filter(|t| !t.is_empty())
}

/// The gate prompt.
pub fn gate_prompt(
    task: &str,
    candidates: &[GateCandidate],
    tools: Option<&[String]>,
    max_select: usize,
) -> String {
    let mut p = String::from(
        "You are a skill selector for an autonomous agent. A skill is a written procedure the \
         agent can follow. Choose which of the candidate skills below, if any, the agent should \
         be given for this task.\n\n# Task\n",
    );
    p.push_str(task);
    p.push_str("\n\n");
    if let Some(tools) = tool_names(tools) {
        let _ = write!(
            p,
            "# Agent Tools\nThe agent's ONLY available tools are: {}.\n\
             Hard rule: exclude every skill that needs a tool, file or environment the agent does \
             not have. Such skills include ones that need:\n\
             - a vendor API or SDK (a name ending in `-api`, or a named vendor service);\n\
             - environment placeholders such as `${{CLAUDE_PLUGIN_ROOT}}`, `{{baseDir}}`, \
             `{{overrides}}`, `.aiwg/`, `${{SKILL_HOME}}`, `$ARGUMENTS` or any other `${{...}}`;\n\
             - a slash command to trigger them;\n\
             - other agents (\"Parent agent:\") or other SKILL.md files;\n\
             - a persona, role-play or creative writing.\n\
             Only self-contained procedures that can run with the listed tools qualify.\n\n",
            tools.join(", ")
        );
    }
    p.push_str("# Candidate Skills\n");
    for c in candidates {
        let _ = writeln!(
            p,
            "- {}: {}\n  Body excerpt: {}",
            c.qualified_id,
            desc_line(&c.description),
            excerpt(&c.body)
        );
    }
    let _ = write!(
        p,
        "\n# Instructions\n\
         1. Plan: state in one sentence how the agent will do the task.\n\
         2. Filter: for each skill, ask whether it can run with the agent's tools; drop it if \
         not.\n\
         3. Match: keep a skill only if its procedure is useful for a core part of the plan; \
         sharing the topic is not enough.\n\
         4. Decide: select AT MOST {max_select}. If no skill survives, the list must be empty; \
         an irrelevant skill is worse than none.\n\n\
         Reply with a single line of JSON and nothing else: \
         {{\"plan\": \"1-sentence plan\", \"skills\": [\"qualified_id_1\"]}} \
         or {{\"plan\": \"...\", \"skills\": []}}. Use the exact qualified_ids listed above.\n"
    );
    p
}

/// Asks the model which candidates to keep, within `opts.deadline`. An empty list from the
/// model is a decision ("inject nothing"); any failure keeps the first `max_select`.
pub fn gate(
    client: &ChatClient,
    task: &str,
    candidates: &[GateCandidate],
    tools: Option<&[String]>,
    opts: &GateOptions,
) -> GateOutcome {
    let start = Instant::now();
    let mut out = GateOutcome {
        selected: Vec::new(),
        selected_ids: Vec::new(),
        plan: None,
        called: false,
        fell_back: false,
        error: None,
        unknown_ids: Vec::new(),
        raw_response: None,
        elapsed_ms: 0,
        log_error: None,
    };
    if candidates.is_empty() {
        return out;
    }
    out.called = true;
    let prompt = gate_prompt(task, candidates, tools, opts.max_select);
    let decided = client
        .chat(&prompt, TEMPERATURE, opts.deadline)
        .map_err(|e| format!("gate failed: {e}"))
        .and_then(|reply| {
            out.raw_response = Some(reply.content.clone());
            decide(&reply.content, candidates, opts.max_select)
        });
    match decided {
        Ok((selected, plan, unknown)) => {
            out.selected = selected;
            out.plan = plan;
            out.unknown_ids = unknown;
        }
        Err(e) => {
            out.error = Some(e);
            out.fell_back = true;
            out.selected = (0..candidates.len().min(opts.max_select)).collect();
        }
    }
    out.selected_ids = out
        .selected
        .iter()
        .map(|&i| candidates[i].qualified_id.clone())
        .collect();
    out.elapsed_ms = start.elapsed().as_millis() as u64;
    if let Some(e) = &out.error {
        tracing::warn!(error = %e, elapsed_ms = out.elapsed_ms, kept = ?out.selected_ids, "skill gate failed; keeping the first candidates");
    } else {
        tracing::debug!(selected = ?out.selected_ids, unknown = ?out.unknown_ids, elapsed_ms = out.elapsed_ms, "skill gate");
        if let Some(path) = &opts.log_path
            && let Err(e) = append_log(path, task, candidates, &out)
        {
            tracing::debug!(error = %e, path = %path.display(), "gate log not written");
            out.log_error = Some(format!("{}: {e}", path.display()));
        }
    }
    out
}

type Decision = (Vec<usize>, Option<String>, Vec<String>);

/// Parses a reply into (selected indices, plan, unknown ids).
fn decide(
    reply: &str,
    candidates: &[GateCandidate],
    max_select: usize,
) -> Result<Decision, String> {
    let obj = extract_json_object(reply).ok_or_else(|| {
        format!(
            "gate reply holds no JSON object: {:?}",
            prefix_chars(reply.trim(), 200)
        )
    })?;
    let skills = match obj.get("skills") {
        Some(Value::Array(a)) => a,
        Some(other) => return Err(format!("gate reply's `skills` is not a list: {other}")),
        None => return Err("gate reply has no `skills` key".into()),
    };
    let plan = obj
        .get("plan")
        .and_then(Value::as_str)
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty());
    let mut selected = Vec::new();
    let mut seen = HashSet::new();
    let mut unknown = Vec::new();
    for id in skills.iter().filter_map(Value::as_str).map(str::trim) {
        match candidates.iter().position(|c| c.qualified_id == id) {
            Some(i) if seen.insert(i) => {
                if selected.len() < max_select {
                    selected.push(i);
                }
            }
            Some(_) => {}
            None => unknown.push(id.to_owned()),
        }
    }
    Ok((selected, plan, unknown))
}

fn append_log(
    path: &Path,
    task: &str,
    candidates: &[GateCandidate],
    out: &GateOutcome,
) -> std::io::Result<()> {
    let ts = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let rejected: Vec<&str> = candidates
        .iter()
        .enumerate()
        .filter(|(i, _)| !out.selected.contains(i))
        .map(|(_, c)| c.qualified_id.as_str())
        .collect();
    let line = json!({
        "ts": ts,
        "task": crate::secrets::redact(prefix_chars(task, 1000)),
        "candidates": candidates.iter().map(|c| c.qualified_id.as_str()).collect::<Vec<_>>(),
        "plan": out.plan.as_deref().map(crate::secrets::redact),
        "selected": out.selected_ids,
        "rejected": rejected,
        "raw_response": crate::secrets::redact(prefix_chars(out.raw_response.as_deref().unwrap_or(""), 4000)),
    });
    crate::secrets::append_private(path, format!("{line}\n").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(id: &str, desc: &str, body: &str) -> GateCandidate {
        GateCandidate {
            qualified_id: id.into(),
            description: desc.into(),
            body: body.into(),
        }
    }

    #[test]
    fn candidate_lines_follow_the_length_rules() {
        assert_eq!(desc_line(""), "(no description)");
        assert_eq!(desc_line("a\nb"), "a b");
        let long = "x".repeat(201);
        assert_eq!(desc_line(&long), format!("{}...", "x".repeat(197)));
        assert_eq!(desc_line(&"y".repeat(200)), "y".repeat(200));
        assert_eq!(excerpt("  \n "), "(no body)");
        assert_eq!(excerpt("a \n\t b"), "a b");
        assert_eq!(excerpt(&"é".repeat(400)).chars().count(), 300);
    }

    #[test]
    fn decide_maps_caps_and_ignores_unknown_ids() {
        let c = [cand("a", "", ""), cand("b", "", ""), cand("c", "", "")];
        let (sel, plan, unknown) = decide(
            r#"{"plan": "p", "skills": ["zz", "c", "c", "a", "b"]}"#,
            &c,
            2,
        )
        .unwrap();
        assert_eq!(
            (sel, plan.as_deref(), unknown),
            (vec![2, 0], Some("p"), vec!["zz".to_owned()])
        );
        assert_eq!(
            decide(r#"{"skills": []}"#, &c, 2).unwrap().0,
            Vec::<usize>::new()
        );
        assert!(
            decide(r#"{"plan": "p"}"#, &c, 2)
                .unwrap_err()
                .contains("no `skills`")
        );
        assert!(
            decide(r#"{"skills": "a"}"#, &c, 2)
                .unwrap_err()
                .contains("not a list")
        );
        assert!(
            decide("nope", &c, 2)
                .unwrap_err()
                .contains("no JSON object")
        );
    }

    #[test]
    fn tools_are_sorted_unique_and_empty_means_none() {
        let t = vec![
            "write".to_owned(),
            "bash".into(),
            "write".into(),
            " ".into(),
        ];
        assert_eq!(tool_names(Some(&t)), Some(vec!["bash", "write"]));
        assert_eq!(tool_names(Some(&[])), None);
        assert_eq!(tool_names(None), None);
    }
}
