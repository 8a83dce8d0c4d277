//! `skillsearch-bench tools`: the tool-visibility scenario. Builds plugins that register many
//! tools with realistic schemas, a skill corpus where some skills activate plugins, and a
//! scripted 20-turn conversation mixing plugin work and small talk; then, turn by turn, compares
//! the tool-schema tokens a host sends with and without `activates`, checks that every turn that
//! needs a plugin's tool sees it, and times the planning step.

use anyhow::{Context, Result};
use serde_json::{Value, json};
use skillsearch_core::index::{IndexConfig, Refresh, SkillIndex};
use skillsearch_core::plan::{self, Inventory, Matched};
use skillsearch_core::tokens::TokenCounter;
use skillsearch_core::{EligibilityEnv, Roots, SearchOptions};
use std::path::Path;
use std::time::Instant;

/// (plugin id, domain words for its skill, tool verbs).
const DOMAINS: &[(&str, &str, &[&str])] = &[
    (
        "jira",
        "Jira issue tracker tickets sprints bugs backlog",
        &[
            "create_issue",
            "search_issues",
            "transition_issue",
            "add_comment",
            "assign_issue",
        ],
    ),
    (
        "github",
        "GitHub pull requests repositories code review branches",
        &[
            "create_pull_request",
            "list_pull_requests",
            "merge_pull_request",
            "comment_on_pull_request",
            "get_file",
        ],
    ),
    (
        "slack",
        "Slack channels messages team chat threads",
        &[
            "post_message",
            "list_channels",
            "reply_in_thread",
            "search_messages",
            "upload_file",
        ],
    ),
    (
        "gmail",
        "Gmail email inbox drafts replies labels",
        &[
            "send_email",
            "search_email",
            "create_draft",
            "label_email",
            "get_thread",
        ],
    ),
    (
        "calendar",
        "Google Calendar meetings events scheduling invites",
        &[
            "create_event",
            "list_events",
            "find_free_slot",
            "update_event",
            "cancel_event",
        ],
    ),
    (
        "postgres",
        "PostgreSQL database SQL queries tables schemas",
        &[
            "run_query",
            "list_tables",
            "describe_table",
            "explain_query",
            "export_csv",
        ],
    ),
    (
        "s3",
        "Amazon S3 buckets objects storage uploads",
        &[
            "list_buckets",
            "list_objects",
            "get_object",
            "put_object",
            "presign_url",
        ],
    ),
    (
        "kubernetes",
        "Kubernetes cluster pods deployments rollouts",
        &[
            "get_pods",
            "describe_pod",
            "scale_deployment",
            "rollout_restart",
            "get_logs",
        ],
    ),
    (
        "stripe",
        "Stripe payments invoices refunds customers billing",
        &[
            "create_invoice",
            "refund_payment",
            "list_charges",
            "get_customer",
            "create_subscription",
        ],
    ),
    (
        "salesforce",
        "Salesforce CRM leads opportunities accounts pipeline",
        &[
            "create_lead",
            "update_opportunity",
            "search_accounts",
            "log_activity",
            "get_pipeline",
        ],
    ),
    (
        "notion",
        "Notion pages wiki notes databases documents",
        &[
            "create_page",
            "search_pages",
            "append_block",
            "query_database",
            "update_page",
        ],
    ),
    (
        "figma",
        "Figma designs frames components mockups",
        &[
            "get_file_frames",
            "export_frame",
            "list_components",
            "comment_on_frame",
            "get_styles",
        ],
    ),
    (
        "datadog",
        "Datadog metrics dashboards monitors alerts observability",
        &[
            "query_metrics",
            "list_monitors",
            "mute_monitor",
            "create_dashboard",
            "search_logs",
        ],
    ),
    (
        "pagerduty",
        "PagerDuty incidents on-call escalations paging",
        &[
            "list_incidents",
            "acknowledge_incident",
            "resolve_incident",
            "get_oncall",
            "trigger_incident",
        ],
    ),
    (
        "twilio",
        "Twilio SMS text messages phone calls",
        &[
            "send_sms",
            "list_messages",
            "make_call",
            "get_call_log",
            "buy_number",
        ],
    ),
    (
        "shopify",
        "Shopify store orders products inventory ecommerce",
        &[
            "list_orders",
            "update_inventory",
            "create_product",
            "fulfill_order",
            "refund_order",
        ],
    ),
    (
        "zendesk",
        "Zendesk support tickets customers helpdesk",
        &[
            "create_ticket",
            "search_tickets",
            "update_ticket",
            "add_internal_note",
            "merge_tickets",
        ],
    ),
    (
        "bigquery",
        "BigQuery warehouse analytics datasets SQL",
        &[
            "run_bq_query",
            "list_datasets",
            "get_table_schema",
            "estimate_cost",
            "export_results",
        ],
    ),
    (
        "confluence",
        "Confluence wiki spaces pages documentation",
        &[
            "create_wiki_page",
            "search_wiki",
            "update_wiki_page",
            "list_spaces",
            "attach_file",
        ],
    ),
    (
        "linear",
        "Linear issues projects cycles roadmap",
        &[
            "create_linear_issue",
            "list_cycles",
            "update_linear_issue",
            "search_linear",
            "add_to_project",
        ],
    ),
];

/// (prompt, plugin the turn needs, if any).
const CONVERSATION: &[(&str, Option<&str>)] = &[
    ("hi there! how's it going?", None),
    (
        "create a jira ticket for the login bug we found in the sprint",
        Some("jira"),
    ),
    ("thanks, that was quick", None),
    (
        "open a github pull request for the fix branch and request code review",
        Some("github"),
    ),
    (
        "post a message in the slack team channel saying the fix is in review",
        Some("slack"),
    ),
    ("what's a good name for a cat?", None),
    (
        "query the postgres database for yesterday's failed logins",
        Some("postgres"),
    ),
    (
        "schedule a calendar meeting with the team for friday",
        Some("calendar"),
    ),
    ("explain recursion in one sentence", None),
    (
        "check the kubernetes pods of the auth deployment and restart the rollout",
        Some("kubernetes"),
    ),
    ("refund the stripe payment for invoice 1043", Some("stripe")),
    ("great, thank you so much", None),
    (
        "search the datadog metrics dashboard for the latency alert",
        Some("datadog"),
    ),
    (
        "acknowledge the pagerduty incident that paged me",
        Some("pagerduty"),
    ),
    ("tell me a fun fact about octopuses", None),
    (
        "write the postmortem as a confluence wiki page",
        Some("confluence"),
    ),
    (
        "email the customer from my gmail inbox with a short apology",
        Some("gmail"),
    ),
    ("how many days until the weekend?", None),
    (
        "update the zendesk support ticket with the resolution",
        Some("zendesk"),
    ),
    ("bye for now", None),
];

fn schema(plugin: &str, verb: &str, words: &str) -> Value {
    let name = format!("{plugin}_{verb}");
    let mut props = serde_json::Map::new();
    let fields = [
        "id", "query", "title", "body", "limit", "cursor", "filters", "fields",
    ];
    for (i, f) in fields.iter().enumerate() {
        let p = match *f {
            "limit" => {
                json!({"type": "integer", "minimum": 1, "maximum": 500, "description": format!("Maximum number of {plugin} results to return for {verb}; defaults to 50 when omitted.")})
            }
            "filters" => {
                json!({"type": "object", "description": format!("Optional filters narrowing the {plugin} {verb} call, keyed by field name; values are exact matches unless they start with a comparison operator."), "additionalProperties": {"type": "string"}})
            }
            "fields" => {
                json!({"type": "array", "items": {"type": "string", "enum": ["id", "name", "status", "owner", "created_at", "updated_at", "url"]}, "description": "Which fields to include in each returned item."})
            }
            _ => {
                json!({"type": "string", "description": format!("The {f} for {verb} in {plugin} ({words}); see the plugin documentation for accepted formats and limits.")})
            }
        };
        if i < 6 || verb.len().is_multiple_of(2) {
            props.insert((*f).to_owned(), p);
        }
    }
    json!({"type": "function", "function": {
        "name": name,
        "description": format!("{} in {plugin}. Use it when the user asks to {} something in {words}. Returns a JSON object with the result, or an error message explaining what to fix.", verb.replace('_', " "), verb.replace('_', " ")),
        "parameters": {"type": "object", "properties": props, "required": ["id"]}
    }})
}

/// Runs the scenario with `n_plugins` plugins (each registering 5 tools) and prints figures.
pub fn run(n_plugins: usize, as_json: bool) -> Result<()> {
    let tmp = std::env::temp_dir().join(format!("skillsearch-tools-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let (skills, plugins, home) = (tmp.join("skills"), tmp.join("plugins"), tmp.join("home"));
    let counter = TokenCounter::new();
    let mut host_tools: Vec<Value> = vec![
        json!({"type": "function", "function": {"name": "read", "description": "Read a file from the workspace.", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}),
        json!({"type": "function", "function": {"name": "exec", "description": "Run a shell command in the workspace.", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}),
    ];
    for (id, words, verbs) in DOMAINS.iter().take(n_plugins) {
        let dir = plugins.join(id);
        std::fs::create_dir_all(&dir)?;
        let tools: Vec<String> = verbs.iter().map(|v| format!("{id}_{v}")).collect();
        std::fs::write(
            dir.join("openclaw.plugin.json"),
            serde_json::to_vec(&json!({"id": id, "contracts": {"tools": tools}}))?,
        )?;
        for v in *verbs {
            host_tools.push(schema(id, v, words));
        }
        let sd = skills.join(format!("{id}-workflow"));
        std::fs::create_dir_all(&sd)?;
        std::fs::write(
            sd.join("SKILL.md"),
            format!(
                "---\nname: {id}-workflow\ndescription: Work with {words}.\nmetadata:\n  openclaw:\n    activates:\n      plugins: [\"{id}\"]\n---\n\nUse the {id} tools for {words}.\n"
            ),
        )?;
    }
    for (name, desc) in [
        (
            "writing-style",
            "Write clear, friendly prose and short answers",
        ),
        ("code-review", "Review a code change for bugs and style"),
    ] {
        let sd = skills.join(name);
        std::fs::create_dir_all(&sd)?;
        std::fs::write(
            sd.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: {desc}\n---\n\n{desc}.\n"),
        )?;
    }
    let (tools, _) = plan::parse_tools(&Value::Array(host_tools), Path::new("host"));
    let inventory = Inventory::load(std::slice::from_ref(&plugins));
    let (idx, _) = SkillIndex::open(
        &Roots::explicit([&skills]),
        &IndexConfig::new(&home),
        Refresh::Always,
        &|_| {},
    )
    .context("cannot build the scenario's index")?;
    let gate = EligibilityEnv::allow_all();
    let opts = SearchOptions {
        top_k: 2,
        ..SearchOptions::default()
    };
    let managed = idx.managed_plugins(&gate)?;
    let all_tokens: usize = tools
        .iter()
        .map(|t| {
            counter.count(
                &serde_json::to_string(t.schema.as_ref().unwrap_or(&Value::Null))
                    .unwrap_or_default(),
            )
        })
        .sum();
    let mut baseline = 0usize;
    let mut with = 0usize;
    let mut needing = 0usize;
    let mut served = 0usize;
    let mut plan_us = Vec::new();
    let mut turns = Vec::new();
    for (prompt, need) in CONVERSATION {
        let hits = idx.search(prompt, &opts, &gate)?.hits;
        let t = Instant::now();
        let matched: Vec<Matched<'_>> = hits.iter().map(Matched::from).collect();
        let p = plan::plan(&matched, &managed, &[], &tools, &inventory, &counter);
        plan_us.push(t.elapsed().as_secs_f64() * 1e3);
        baseline += all_tokens;
        with += p.tokens.shown;
        let ok = match need.filter(|n| DOMAINS.iter().take(n_plugins).any(|(id, _, _)| id == n)) {
            None => true,
            Some(n) => {
                needing += 1;
                let has = tools
                    .iter()
                    .filter(|t| t.name.starts_with(&format!("{n}_")))
                    .all(|t| p.visible_tools.contains(&t.name));
                served += usize::from(has);
                has
            }
        };
        turns.push(json!({"prompt": prompt, "needs": need, "matched": hits.iter().map(|h| &h.id).collect::<Vec<_>>(), "shown_tokens": p.tokens.shown, "visible": p.visible_tools.len(), "ok": ok}));
    }
    let _ = std::fs::remove_dir_all(&tmp);
    let reduction = 100.0 * (1.0 - with as f64 / baseline.max(1) as f64);
    let mut sorted = plan_us.clone();
    sorted.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        sorted[((p / 100.0 * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1]
    };
    let summary = json!({
        "plugins": n_plugins,
        "tools": tools.len(),
        "turns": CONVERSATION.len(),
        "schema_tokens_per_turn_without_activation": all_tokens,
        "schema_tokens_without_activation": baseline,
        "schema_tokens_with_activation": with,
        "reduction_percent": (reduction * 10.0).round() / 10.0,
        "turns_needing_plugin_tools": needing,
        "turns_that_had_them": served,
        "plan_ms_p50": pct(50.0),
        "plan_ms_p95": pct(95.0),
        "turn_detail": turns,
    });
    if as_json {
        println!("{summary}");
    } else {
        println!(
            "tool visibility: {n_plugins} plugins, {} tools (mean {} tokens per schema), {} turns",
            tools.len(),
            all_tokens / tools.len().max(1),
            CONVERSATION.len()
        );
        println!(
            "  schema tokens sent, whole conversation: {baseline} without activation, {with} with ({reduction:.1}% fewer)"
        );
        println!("  turns needing a plugin's tools: {needing}; turns that had them: {served}");
        println!(
            "  planning time per turn: p50 {:.3} ms, p95 {:.3} ms",
            pct(50.0),
            pct(95.0)
        );
    }
    Ok(())
}
