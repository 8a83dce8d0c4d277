//! A whole turn with every remote part (reference §1.1): rewrite, the hub fused with the local
//! index, hydrate, exact-body dedup, the gate, bundle install, render; against a fake SkillHub
//! and a fake OpenAI-compatible chat model on 127.0.0.1. Then each remote part failing: the turn
//! still completes with what the healthy parts found, and the notes say what failed.

use serde_json::json;
use skillsearch_core::config::{self, Layers};
use skillsearch_core::index::{IndexConfig, Refresh, SkillIndex};
use skillsearch_core::retrieve::Retriever;
use skillsearch_core::tokens::TokenCounter;
use skillsearch_core::turn::Retrieval;
use skillsearch_core::{EligibilityEnv, Engine, Roots, SearchOptions, Turn};
use skillsearch_testkit::{
    Fake, Reply, Req, chat_reply, dead_base, hub_ok, write_skill, zip_of, zip_reply,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const HUB_SKILL_MD: &str = "---\nname: pdf-forms\ndescription: Fill PDF forms\n---\n\n# PDF forms\nRun scripts/fill.sh to fill the AcroForm fields.\n";

fn good_bundle() -> Vec<u8> {
    zip_of(&[
        ("pdf-forms/SKILL.md", HUB_SKILL_MD.as_bytes()),
        ("pdf-forms/scripts/fill.sh", b"echo fill\n"),
    ])
}

/// A hub offering `pdf-forms` (id `u-pdf`) and an off-topic skill, with `bundle` as its zip.
fn hub(bundle: Vec<u8>) -> Fake {
    Fake::start(move |r| {
        let path = r.path.as_str();
        if path == "/openapi/v1/skills" {
            return hub_ok(json!({"items": [
                {"id": "u-pdf", "skill_id": "acme/pdf-forms", "name": "pdf-forms",
                 "description": "Fill PDF form fields", "quality_score": 0.9, "score_safety": 0.95},
                {"id": "u-k8s", "name": "k8s-deploy", "description": "Deploy to Kubernetes",
                 "quality_score": 0.9}
            ]}));
        }
        match path {
            "/openapi/v1/skills/u-pdf" => hub_ok(json!({
                "id": "u-pdf", "skill_id": "acme/pdf-forms", "version": "1.0.0",
                "name": "pdf-forms", "skill_md": HUB_SKILL_MD, "score_safety": 0.95
            })),
            "/openapi/v1/skills/u-pdf/download" => zip_reply(bundle.clone()),
            _ => Reply::Json(404, json!({"error": "not found", "status": 60001})),
        }
    })
}

/// A chat model answering the rewrite with `rewrite` and the gate with `gate`.
fn model(
    rewrite: impl Fn() -> Reply + Send + Sync + 'static,
    gate: impl Fn() -> Reply + Send + Sync + 'static,
) -> Fake {
    Fake::start(move |r: &Req| {
        if r.prompt().contains("You are a skill selector") {
            gate()
        } else {
            rewrite()
        }
    })
}

struct World {
    tmp: tempfile::TempDir,
    idx: SkillIndex,
}

impl World {
    fn home(&self) -> PathBuf {
        self.tmp.path().join("home")
    }
}

/// A local library: `pdf-extract` (on topic), `csv-report` and `git-hooks` (off topic), and,
/// when `copy_of_hub` is set, a local copy of the hub's skill with the same body.
fn world(copy_of_hub: bool) -> World {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("skills");
    let mut skills = vec![
        (
            "pdf-extract",
            "Read the fields of a PDF form",
            "Use pdftk dump_data_fields on the PDF file.",
        ),
        (
            "csv-report",
            "Summarise CSV files into a report",
            "Load the CSV with pandas.",
        ),
        (
            "git-hooks",
            "Install git pre-commit hooks",
            "Write .git/hooks/pre-commit.",
        ),
    ];
    if copy_of_hub {
        skills.push((
            "pdf-forms-copy",
            "Fill PDF forms (installed copy)",
            "# PDF forms\r\nRun scripts/fill.sh to fill the AcroForm fields.   \r\n",
        ));
    }
    for (name, desc, body) in skills {
        write_skill(&root, name, name, desc, body);
    }
    let home = tmp.path().join("home");
    let (idx, _) = SkillIndex::open(
        &Roots::explicit([&root]),
        &IndexConfig::new(&home),
        Refresh::Always,
        &|_| {},
    )
    .unwrap();
    World { tmp, idx }
}

/// The engine these settings make, ranking lexically, rendering without a budget.
fn remote(home: &Path, env: &[(&str, &str)]) -> Engine {
    let s = config::resolve(&Layers {
        env: env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        ..Layers::default()
    })
    .unwrap();
    let e = Engine::new(&s, home)
        .with_eligibility(EligibilityEnv::allow_all())
        .with_counter(TokenCounter::estimating())
        .with_search_options(SearchOptions {
            retriever: Retriever::Lexical,
            ..SearchOptions::default()
        })
        .with_token_budget(None);
    assert!(e.remote().is_active());
    e
}

fn turn(w: &World, query: &str, top_k: usize, engine: &Engine, t: &Turn) -> Retrieval {
    let t = Turn {
        top_k: Some(top_k),
        ..t.clone()
    };
    engine.retrieve(&w.idx, query, &t).unwrap()
}

fn ids(r: &Retrieval) -> Vec<&str> {
    r.hits.iter().map(|h| h.qualified_id.as_str()).collect()
}

const QUERY: &str = "fill the fields of a PDF form";

#[test]
fn hub_hits_fuse_with_local_ones_and_the_selected_bundle_is_installed() {
    let w = world(false);
    let hub = hub(good_bundle());
    let r = remote(&w.home(), &[("SKILLSEARCH_HUB_ENDPOINT", &hub.base)]);
    let got = turn(&w, QUERY, 2, &r, &Turn::default());
    assert_eq!(
        ids(&got),
        ["local/pdf-extract", "hub/u-pdf"],
        "{:#?}",
        got.stages
    );
    assert!(got.notes.is_empty(), "{:?}", got.notes);
    assert!(!got.stages.degraded);
    let src = &got.stages.sources[0];
    assert_eq!(
        (src.source.as_str(), src.hits.clone()),
        ("hub", vec!["hub/u-pdf".to_owned()])
    );
    assert!(
        src.rejected
            .iter()
            .any(|x| x.starts_with("u-k8s: not relevant")),
        "{src:?}"
    );
    // Installed under the hub cache; rendered with its directory and its body.
    let hit = &got.hits[1];
    assert_eq!(hit.source(), "hub");
    let cache = w.home().join("cache/hub");
    assert!(
        hit.skill_dir.starts_with(&cache),
        "{}",
        hit.skill_dir.display()
    );
    assert!(hit.skill_dir.join("scripts/fill.sh").is_file());
    assert!(
        got.text.contains("### Skill: pdf-forms  [hub/u-pdf]"),
        "{}",
        got.text
    );
    assert!(got.text.contains(&format!(
        "**Skill directory**: `{}`",
        hit.skill_dir.display()
    )));
    assert!(
        got.text
            .contains("Run scripts/fill.sh to fill the AcroForm fields.")
    );
    assert!(
        !got.text.contains("name: pdf-forms"),
        "frontmatter is stripped"
    );
    assert_eq!(got.stages.materialised.len(), 1);
    // The second turn reuses the installed bundle: no second download.
    let again = turn(&w, QUERY, 2, &r, &Turn::default());
    assert_eq!(ids(&again), ids(&got));
    assert_eq!(hub.count("/download"), 1);
}

#[test]
fn a_local_copy_of_a_hub_skill_replaces_it() {
    let w = world(true);
    let hub = hub(good_bundle());
    let r = remote(&w.home(), &[("SKILLSEARCH_HUB_ENDPOINT", &hub.base)]);
    let got = turn(&w, QUERY, 3, &r, &Turn::default());
    assert!(!ids(&got).contains(&"hub/u-pdf"), "{:?}", ids(&got));
    assert!(
        ids(&got).contains(&"local/pdf-forms-copy"),
        "{:?}",
        ids(&got)
    );
    assert_eq!(
        got.stages.duplicates,
        ["hub/u-pdf: local/pdf-forms-copy"],
        "{:#?}",
        got.stages
    );
    assert_eq!(
        hub.count("/download"),
        0,
        "a dropped duplicate is never installed"
    );
}

#[test]
fn the_gate_sees_the_original_query_and_the_tools_and_picks() {
    let w = world(false);
    let hub = hub(good_bundle());
    let llm = model(
        || chat_reply(r#"{"rewritten_query": "pdf form filling"}"#),
        || {
            chat_reply(
                "Plan first.\n```json\n{\"plan\": \"fill the form\", \"skills\": [\"hub/u-pdf\", \"local/nope\"]}\n```",
            )
        },
    );
    let base = format!("{}/v1", llm.base);
    let r = remote(
        &w.home(),
        &[
            ("SKILLSEARCH_HUB_ENDPOINT", &hub.base),
            ("SKILLSEARCH_MODEL", "m"),
            ("SKILLSEARCH_MODEL_BASE_URL", &base),
        ],
    );
    assert!(
        r.remote().gate_on() && r.remote().rewrite_on(),
        "gate is on by default with a hub"
    );
    let t = Turn {
        tools: Some(vec!["read".into(), "exec".into(), "read".into()]),
        deadline: None,
        ..Turn::default()
    };
    let got = turn(&w, QUERY, 2, &r, &t);
    assert_eq!(ids(&got), ["hub/u-pdf"], "{:#?}", got.stages);
    let rw = got.stages.rewrite.as_ref().unwrap();
    assert_eq!(rw.rewritten.as_deref(), Some("pdf form filling"));
    let g = got.stages.gate.as_ref().unwrap();
    assert!(!g.fell_back && g.error.is_none(), "{g:?}");
    assert_eq!(g.selected, ["hub/u-pdf"]);
    assert_eq!(g.unknown_ids, ["local/nope"]);
    assert_eq!(g.plan.as_deref(), Some("fill the form"));
    assert!(g.candidates.contains(&"local/pdf-extract".to_owned()));
    let prompts: Vec<String> = llm
        .requests()
        .iter()
        .map(|q| q.prompt().to_owned())
        .collect();
    assert_eq!(prompts.len(), 2);
    assert!(
        prompts[0].ends_with(QUERY),
        "the rewrite reads the raw query"
    );
    let gate_prompt = &prompts[1];
    assert!(
        gate_prompt.contains(QUERY),
        "the gate reads the original query"
    );
    assert!(!gate_prompt.contains("pdf form filling"));
    assert!(gate_prompt.contains("The agent's ONLY available tools are: exec, read."));
    assert!(gate_prompt.contains("- hub/u-pdf: Fill PDF form fields"));
    // The hub was searched with the rewrite.
    let discover = hub
        .requests()
        .into_iter()
        .find(|q| q.path == "/openapi/v1/skills")
        .unwrap();
    assert!(discover.target.contains("pdf"), "{}", discover.target);
}

#[test]
fn a_gate_that_picks_nothing_injects_nothing() {
    let w = world(false);
    let llm = model(
        || chat_reply(r#"{"rewritten_query": null}"#),
        || chat_reply(r#"{"plan": "answer directly", "skills": []}"#),
    );
    let base = format!("{}/v1", llm.base);
    let r = remote(
        &w.home(),
        &[
            ("SKILLSEARCH_MODEL", "m"),
            ("SKILLSEARCH_MODEL_BASE_URL", &base),
            ("SKILLSEARCH_GATE", "on"),
        ],
    );
    let got = turn(&w, QUERY, 2, &r, &Turn::default());
    assert!(
        got.hits.is_empty() && got.text.is_empty(),
        "{:?}",
        ids(&got)
    );
    assert_eq!(
        got.notes,
        [
            "the gate judged without the agent's tools (the host sent no tool list); set available_tools to give them"
        ],
    );
    assert_eq!(got.stages.rewrite.as_ref().unwrap().rewritten, None);
}

/// Every remote part broken at once, in each of its ways: the local hits still come through,
/// and each failure is named.
#[test]
fn broken_remote_parts_leave_the_local_answer_and_say_what_failed() {
    let w = world(false);
    type Case = (&'static str, Box<dyn Fn() -> Reply + Send + Sync>);
    let model_faults: Vec<Case> = vec![
        (
            "garbage",
            Box::new(|| chat_reply("I would pick the PDF one.")),
        ),
        ("empty", Box::new(|| chat_reply(""))),
        (
            "http 500",
            Box::new(|| Reply::Json(500, json!({"error": {"message": "boom"}}))),
        ),
        (
            "not json",
            Box::new(|| {
                Reply::Raw(
                    200,
                    vec![("Content-Type", "text/html".into())],
                    b"<html>".to_vec(),
                )
            }),
        ),
    ];
    for (what, fault) in model_faults {
        let fault = Arc::new(fault);
        let f2 = fault.clone();
        let llm = model(move || fault(), move || f2());
        let base = format!("{}/v1", llm.base);
        let dead = dead_base();
        let r = remote(
            &w.home(),
            &[
                ("SKILLSEARCH_HUB_ENDPOINT", &dead),
                ("SKILLSEARCH_MODEL", "m"),
                ("SKILLSEARCH_MODEL_BASE_URL", &base),
            ],
        );
        let got = turn(&w, QUERY, 2, &r, &Turn::default());
        assert_eq!(
            ids(&got),
            ["local/pdf-extract"],
            "{what}: {:#?}",
            got.stages
        );
        assert!(got.stages.degraded, "{what}");
        let notes = got.notes.join("\n");
        assert!(
            notes.contains("searched the query as written"),
            "{what}: {notes}"
        );
        assert!(
            notes.contains(&format!("hub {dead} failed")),
            "{what}: {notes}"
        );
        assert!(
            notes.contains("kept the first 1 candidates"),
            "{what}: {notes}"
        );
        assert!(got.stages.gate.as_ref().unwrap().fell_back, "{what}");
        assert!(got.text.contains("### Skill: pdf-extract"), "{what}");
    }
}

#[test]
fn a_hanging_hub_and_model_are_cut_at_the_turn_deadline() {
    let w = world(false);
    let slow = Fake::start(|_| Reply::Hang(Duration::from_secs(20)));
    let base = format!("{}/v1", slow.base);
    let r = remote(
        &w.home(),
        &[
            ("SKILLSEARCH_HUB_ENDPOINT", &slow.base),
            ("SKILLSEARCH_HUB_TIMEOUT_S", "10"),
            ("SKILLSEARCH_MODEL", "m"),
            ("SKILLSEARCH_MODEL_BASE_URL", &base),
        ],
    );
    let started = Instant::now();
    let t = Turn {
        tools: None,
        deadline: Some(started + Duration::from_millis(900)),
        ..Turn::default()
    };
    let got = turn(&w, QUERY, 2, &r, &t);
    let took = started.elapsed();
    assert!(took < Duration::from_millis(2500), "took {took:?}");
    assert_eq!(ids(&got), ["local/pdf-extract"], "{:#?}", got.stages);
    assert!(got.stages.degraded);
    assert!(got.stages.rewrite.as_ref().unwrap().error.is_some());
    assert!(got.stages.sources[0].error.is_some());
}

#[test]
fn a_hostile_bundle_is_not_installed_and_the_skill_keeps_its_body() {
    let w = world(false);
    let evil = zip_of(&[
        ("pdf-forms/SKILL.md", HUB_SKILL_MD.as_bytes()),
        ("../escape.sh", b"rm -rf /\n"),
    ]);
    let hub = hub(evil);
    let r = remote(&w.home(), &[("SKILLSEARCH_HUB_ENDPOINT", &hub.base)]);
    let got = turn(&w, QUERY, 2, &r, &Turn::default());
    assert_eq!(ids(&got), ["local/pdf-extract", "hub/u-pdf"]);
    let hit = &got.hits[1];
    assert_eq!(
        hit.skill_dir,
        PathBuf::new(),
        "no directory for a bundle that was refused"
    );
    assert!(
        got.text.contains("Run scripts/fill.sh"),
        "the body from the hub record"
    );
    assert!(
        got.notes
            .iter()
            .any(|n| n.contains("installing hub skill hub/u-pdf failed")),
        "{:?}",
        got.notes
    );
    assert!(!w.tmp.path().join("home/cache/escape.sh").exists());
    assert!(!w.home().join("cache/hub").read_dir().is_ok_and(|mut d| {
        d.any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().contains("pdf")))
    }));
}

#[test]
fn a_bundle_cache_inside_a_skill_root_is_refused() {
    let w = world(false);
    let hub = hub(good_bundle());
    // The home (and so the cache) inside the skill root.
    let home = w.tmp.path().join("skills/.home");
    let r = remote(&home, &[("SKILLSEARCH_HUB_ENDPOINT", &hub.base)]);
    let got = turn(&w, QUERY, 2, &r, &Turn::default());
    assert_eq!(ids(&got), ["local/pdf-extract", "hub/u-pdf"]);
    assert!(
        got.notes
            .iter()
            .any(|n| n.contains("hub bundles are not installed")
                && n.contains("overlaps skill root")),
        "{:?}",
        got.notes
    );
    assert_eq!(hub.count("/download"), 0);
}

/// Where the host cannot send the agent's tools, `available_tools` stands in; without it the
/// decision log gets the host's reason (#22 item 5).
#[test]
fn the_gate_takes_configured_tools_or_says_why_it_has_none() {
    let w = world(false);
    let llm = model(
        || chat_reply(r#"{"rewritten_query": null}"#),
        || chat_reply(r#"{"plan": "p", "skills": []}"#),
    );
    let base = format!("{}/v1", llm.base);
    let env = [
        ("SKILLSEARCH_MODEL", "m"),
        ("SKILLSEARCH_MODEL_BASE_URL", base.as_str()),
        ("SKILLSEARCH_GATE", "on"),
        ("SKILLSEARCH_REWRITE", "false"),
    ];
    let mut with_tools = env.to_vec();
    with_tools.push(("SKILLSEARCH_AVAILABLE_TOOLS", "read:exec"));
    let r = remote(&w.home(), &with_tools);
    let got = turn(&w, QUERY, 2, &r, &Turn::default());
    assert!(got.notes.is_empty(), "{:?}", got.notes);
    let prompt = llm.requests().last().unwrap().prompt().to_owned();
    assert!(
        prompt.contains("The agent's ONLY available tools are: exec, read."),
        "{prompt}"
    );

    let r = remote(&w.home(), &env);
    let t = Turn {
        tools_unknown: Some("Hermes passes memory providers no tool list".into()),
        ..Turn::default()
    };
    let got = turn(&w, QUERY, 2, &r, &t);
    assert_eq!(
        got.notes,
        [
            "the gate judged without the agent's tools (Hermes passes memory providers no tool list); set available_tools to give them"
        ],
    );
}

/// A ClawHub offering `pdf-fill` (its body names `{{HOME}}`) and `pdf-empty` (a bundle whose
/// `SKILL.md` has no body), each downloaded straight from the download route.
fn clawhub() -> Fake {
    let fill = zip_of(&[(
        "pdf-fill/SKILL.md",
        b"---\nname: pdf-fill\ndescription: Fill PDF forms\n---\n\n# Fill PDF forms\nWrite the filled form to {{HOME}}/forms with qpdf.\n" as &[u8],
    )]);
    let empty = zip_of(&[(
        "pdf-empty/SKILL.md",
        b"---\nname: pdf-empty\ndescription: Fill PDF forms fast\n---\n" as &[u8],
    )]);
    Fake::start(move |r| match r.path.as_str() {
        "/api/v1/search" => Reply::Json(
            200,
            json!({"results": [
                {"slug": "pdf-fill", "displayName": "pdf-fill", "summary": "Fill the fields of PDF forms",
                 "score": 0.9, "version": "1.0.0", "pathguard_processed": true},
                {"slug": "pdf-empty", "displayName": "pdf-empty", "summary": "Fill PDF form fields fast",
                 "score": 0.8}
            ]}),
        ),
        "/api/v1/download" if r.query().contains("slug=pdf-fill") => zip_reply(fill.clone()),
        "/api/v1/download" if r.query().contains("slug=pdf-empty") => zip_reply(empty.clone()),
        _ => Reply::Body(404, "Not found".into()),
    })
}

#[test]
fn marketplace_skills_are_installed_before_the_gate_and_never_expanded() {
    let w = world(false);
    let market = clawhub();
    let llm = model(
        || chat_reply("{}"),
        || chat_reply(r#"{"plan": "fill it", "skills": ["clawhub/pdf-fill"]}"#),
    );
    let base = format!("{}/v1", llm.base);
    let r = remote(
        &w.home(),
        &[
            ("SKILLSEARCH_CLAWHUB_ENDPOINT", &market.base),
            ("SKILLSEARCH_MODEL", "m"),
            ("SKILLSEARCH_MODEL_BASE_URL", &base),
            ("SKILLSEARCH_REWRITE", "false"),
            ("SKILLSEARCH_RESOLVE_PLACEHOLDERS", "true"),
            ("SKILLSEARCH_HOME_DIR", "/home/tester"),
        ],
    );
    assert!(
        r.remote().gate_on(),
        "a marketplace turns the gate on by default"
    );
    let t = Turn {
        tools: Some(vec!["read".into()]),
        ..Turn::default()
    };
    let got = turn(&w, QUERY, 2, &r, &t);
    assert_eq!(ids(&got), ["clawhub/pdf-fill"], "{:#?}", got.stages);
    assert!(
        got.notes
            .iter()
            .any(|n| n == "clawhub/pdf-empty has no body after install; dropped"),
        "{:?}",
        got.notes
    );
    // The gate read the body the install gave it; the dropped hit never reached it.
    let g = got.stages.gate.as_ref().unwrap();
    assert!(
        !g.candidates.contains(&"clawhub/pdf-empty".to_owned()),
        "{g:?}"
    );
    let gate_prompt = llm.requests().last().unwrap().prompt().to_owned();
    assert!(gate_prompt.contains("- clawhub/pdf-fill: Fill the fields of PDF forms"));
    assert!(gate_prompt.contains("Write the filled form to {{HOME}}/forms"));
    // Installed under <home>/cache/clawhub once, before the gate, and not again after it.
    let hit = &got.hits[0];
    assert!(
        hit.skill_dir.starts_with(w.home().join("cache/clawhub")),
        "{}",
        hit.skill_dir.display()
    );
    assert_eq!(market.count("/api/v1/download"), 2);
    // A marketplace body is never expanded, whatever its catalogue item claims.
    assert!(
        got.text.contains("Write the filled form to {{HOME}}/forms"),
        "{}",
        got.text
    );
    assert!(got.text.contains(&format!(
        "**Skill directory**: `{}`",
        hit.skill_dir.display()
    )));
    assert_eq!(got.stages.sources[0].source, "clawhub");
    // skill_read follows the id into the installed bundle, unexpanded; an unknown id (the
    // marketplace answers 404) gets the fixed reply naming it.
    let read = r.skill_read(&w.idx, "clawhub/pdf-fill", None, 0, &Turn::default());
    assert!(
        read.contains("### Skill: pdf-fill  [clawhub/pdf-fill]"),
        "{read}"
    );
    assert!(read.contains("{{HOME}}/forms"), "{read}");
    assert_eq!(
        market.count("/api/v1/download"),
        2,
        "read from this process's install"
    );
    let read = r.skill_read(&w.idx, "clawhub/nope", None, 0, &Turn::default());
    assert!(read.contains("clawhub/nope"), "{read}");
    assert!(!read.contains("### Skill"), "{read}");
}

#[test]
fn a_marketplace_that_is_down_leaves_the_local_answer() {
    let w = world(false);
    let r = remote(
        &w.home(),
        &[("SKILLSEARCH_SKILLHUB_CN_ENDPOINT", &dead_base())],
    );
    let got = turn(&w, QUERY, 2, &r, &Turn::default());
    assert_eq!(ids(&got), ["local/pdf-extract"], "{:#?}", got.stages);
    assert!(got.stages.degraded);
    assert!(
        got.notes
            .iter()
            .any(|n| n.starts_with("skillhub_cn http://") && n.ends_with("; answered without it")),
        "{:?}",
        got.notes
    );
    assert!(got.stages.sources[0].error.is_some());
}
