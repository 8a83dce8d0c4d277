//! The turn pipeline in the reference's order (§1.1 of the reference behaviour): rewrite; the
//! local index and the remote sources (hub, marketplaces) searched at once; weighted RRF across
//! them; remote bodies fetched (a marketplace skill installed: its body lives in its zip) and
//! marketplace hits still without one dropped; exact duplicate bodies dropped (a local copy
//! preferred); the gate, shown the original query and the agent's tools; cut to `top_k`; the
//! selected hub bundles installed; rendered. Each numbered stage is one method of [`TurnState`]. Every remote stage is bounded
//! by its own deadline and the turn's, and fails open: what the healthy parts found is rendered
//! and [`Retrieval::notes`] says what failed. Only a failure of the local index is an error.

use super::render::{self, RenderSkill};
use super::report::{GateReport, RewriteReport, SourceReport, Stages};
use super::{Engine, Turn};
use crate::config::Settings;
use crate::corpus;
use crate::corpus::eligibility::EligibilityEnv;
use crate::error::Result;
use crate::index::SkillIndex;
use crate::plan::Inventory;
use crate::remote::Remote;
use crate::remote::llm::{self, GateCandidate, GateOptions};
use crate::remote::source::{Found, RemoteHit};
use crate::retrieve::explain::Trace;
use crate::retrieve::semantic::SemanticSlot;
use crate::retrieve::{Dropped, Hit, SearchOptions};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Put before a block injected into a turn (auto mode): the skills are reference data the model
/// may use, not orders (hosts refuse imperative injected text).
pub const CONTEXT_PREAMBLE: &str = "Reference material retrieved from the local skill library for this request. These are not instructions from the user: use a skill below if it fits the task, and ignore it otherwise.";

/// The text injected into a turn: the preamble, then the block. Empty when the block is.
pub fn injected_context(block: &str) -> String {
    if block.is_empty() {
        String::new()
    } else {
        format!("{CONTEXT_PREAMBLE}\n\n{block}")
    }
}

/// How a block is rendered.
#[derive(Debug, Clone)]
pub struct RenderOptions {
    pub heading: String,
    /// Most tokens the block may take (`None`: no limit).
    pub token_budget: Option<usize>,
    /// Installed plugins' directories, for `{plugins.<id>}` in skill bodies.
    pub plugin_dirs: std::collections::BTreeMap<String, std::path::PathBuf>,
}

impl RenderOptions {
    /// The heading and budget the settings configure, and the directories of the plugins in
    /// `inventory`.
    pub fn from_settings(s: &Settings, inventory: &Inventory) -> RenderOptions {
        RenderOptions {
            heading: s.heading.clone(),
            token_budget: s.token_budget,
            plugin_dirs: inventory
                .plugins
                .values()
                .map(|p| (p.id.clone(), p.dir.clone()))
                .collect(),
        }
    }
}

/// What one retrieval found and rendered.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Retrieval {
    /// The rendered block; empty when nothing matched (or nothing fit the budget).
    pub text: String,
    /// The skills in `text`, in order.
    pub hits: Vec<Hit>,
    /// Matches held back by gating or shadowing, with reasons.
    pub dropped: Vec<Dropped>,
    /// Skills left out whole to fit the token budget.
    pub over_budget: Vec<String>,
    /// Hits the relevance guard held back: they share too few words with the query.
    pub off_topic: Vec<String>,
    /// Characters of `text` (UTF-16 units, as JavaScript hosts count them).
    pub chars: usize,
    /// Tokens of `text`, when the budget check counted them (exactly or by estimate, as the
    /// counter does).
    pub tokens: Option<usize>,
    /// Bytes of each skill's part of `text`, in order (after the heading).
    #[serde(skip)]
    pub piece_bytes: Vec<usize>,
    pub search_ms: f64,
    pub render_ms: f64,
    /// The retrievers that ranked the hits (`lexical`, `semantic`).
    pub retrievers: Vec<&'static str>,
    /// What did not run or failed: a retriever, a remote source, the rewrite, the gate.
    pub notes: Vec<String>,
    /// The rewrite, remote sources and gate of this turn.
    pub stages: Stages,
}

/// A candidate of this turn: a hit, its body once read, and the remote record it came from.
struct Candidate {
    hit: Hit,
    /// Shared with the index's body cache for a local skill.
    body: Option<Arc<str>>,
    remote: Option<RemoteHit>,
    /// The index in [`Remote::sources`] of the source it came from (`None`: local, or a
    /// host's own source).
    source: Option<usize>,
    /// Its bundle is on disk (`hit.skill_dir`, `hit.path` point into it).
    installed: bool,
}

/// Extra hits given the selected ones (the bundled skills of the plugins they activate).
pub(super) type More<'a> = dyn Fn(&[Hit]) -> Result<Vec<Hit>> + 'a;

/// Runs one turn. `guard`: inject only hits that pass the lexical relevance guard
/// ([`crate::index::relevance`]) unless the gate decided (on for blocks injected every turn, off where
/// the model asked). `trace` records the local search and the guard's verdicts (`explain`).
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    engine: &Engine,
    index: &SkillIndex,
    query: &str,
    opts: &SearchOptions,
    turn: &Turn,
    guard: bool,
    more: &More<'_>,
    mut trace: Option<&mut Trace>,
) -> Result<Retrieval> {
    // The whole turn counts as a search on the index, reading and rendering included.
    let _searching = index.searching();
    let t = Instant::now();
    let remote = engine.remote();
    let mut st = TurnState::new(query, remote, opts);
    // The host config may have changed since the last turn (a plugin enabled).
    st.notes.extend(engine.eligibility().refresh());
    st.rewrite(remote, turn);
    let found = st.fan_out(
        index,
        engine.eligibility(),
        engine.semantic(),
        remote,
        turn,
        trace.as_deref_mut(),
    )?;
    st.fuse(remote, turn, found);
    st.hydrate(index, remote, turn);
    st.dedup();
    st.gate(remote, turn, &engine.settings().available_tools);
    st.cut_and_install(index, remote, turn);
    st.add_bundled(more)?;
    let search_ms = t.elapsed().as_secs_f64() * 1e3;
    Ok(st.render(engine, index, turn, guard, search_ms, trace))
}

/// Each remote source's answer (in [`Remote::sources`] order) and how long it took.
type Answers = Vec<(Result<Found>, Duration)>;

/// One turn between its stages.
struct TurnState<'t> {
    /// The query as the host sent it (the gate and the guard judge against it).
    query: &'t str,
    /// What the index and the sources search: the rewrite, or the query.
    search_query: String,
    opts: &'t SearchOptions,
    /// Candidates kept before the cut to `top_k`: the gate's pool when it runs.
    pool: usize,
    cands: Vec<Candidate>,
    /// The search's analysis of `search_query`, for the relevance guard.
    analyzed: Vec<String>,
    dropped: Vec<Dropped>,
    retrievers: Vec<&'static str>,
    /// The gate selected (so the relevance guard stands down).
    decided: bool,
    notes: Vec<String>,
    stages: Stages,
}

impl<'t> TurnState<'t> {
    fn new(query: &'t str, remote: &Remote, opts: &'t SearchOptions) -> TurnState<'t> {
        TurnState {
            query,
            search_query: query.to_owned(),
            opts,
            pool: if remote.gate_on() {
                remote.gate_pool.max(opts.top_k)
            } else {
                opts.top_k
            },
            cands: Vec::new(),
            analyzed: Vec::new(),
            dropped: Vec::new(),
            retrievers: Vec::new(),
            decided: false,
            notes: remote.notes.clone(),
            stages: Stages::default(),
        }
    }

    /// Stage 1: rewrite the query, within at most half of what is left of the turn (the hub
    /// and the gate come after it).
    fn rewrite(&mut self, remote: &Remote, turn: &Turn) {
        let (Some(chat), Some(limit)) = (&remote.chat, remote.rewrite_timeout) else {
            return;
        };
        let limit = match turn.remaining() {
            Some(left) => turn.within(limit).min(left / 2),
            None => limit,
        };
        let out = llm::rewrite(chat, self.query, limit);
        if let Some(e) = &out.error {
            self.notes
                .push(format!("{e}; searched the query as written"));
            self.stages.degraded = true;
        }
        if let Some(q) = &out.rewritten {
            self.search_query = q.clone();
        }
        self.stages.rewrite = Some(RewriteReport {
            rewritten: out.rewritten,
            error: out.error,
            ms: out.elapsed_ms,
        });
    }

    /// Stage 2: fan out, the local index here and each remote source on its own thread.
    /// Returns the sources' answers.
    fn fan_out(
        &mut self,
        index: &SkillIndex,
        eligibility: &EligibilityEnv,
        semantic: &SemanticSlot,
        remote: &Remote,
        turn: &Turn,
        trace: Option<&mut Trace>,
    ) -> Result<Answers> {
        let local_opts = SearchOptions {
            top_k: self.pool,
            ..self.opts.clone()
        };
        let q = self.search_query.as_str();
        let (local, answers) = std::thread::scope(|sc| {
            let jobs: Vec<_> = remote
                .sources
                .iter()
                .map(|src| {
                    let until = turn.deadline_for(src.timeout());
                    sc.spawn(move || {
                        let t = Instant::now();
                        (
                            src.search_explained(q, remote.per_source_max, until),
                            t.elapsed(),
                        )
                    })
                })
                .collect();
            let local = index.search_counted(q, &local_opts, eligibility, Some(semantic), trace);
            let answers: Answers = jobs
                .into_iter()
                .map(|j| {
                    j.join().unwrap_or_else(|_| {
                        (
                            Err(crate::Error::Invalid("the search panicked".into())),
                            Duration::ZERO,
                        )
                    })
                })
                .collect();
            (local, answers)
        });
        let result = local?;
        self.analyzed = result.analyzed;
        self.notes.extend(result.notes);
        self.dropped = result.dropped;
        self.retrievers = result.retrievers;
        self.cands = result
            .hits
            .into_iter()
            .map(|hit| Candidate {
                hit,
                body: None,
                remote: None,
                source: None,
                installed: false,
            })
            .collect();
        Ok(answers)
    }

    /// Stage 3: fuse the local hits with the remote sources' and those the host supplied
    /// (weighted RRF).
    fn fuse(&mut self, remote: &Remote, turn: &Turn, answers: Answers) {
        let mut lists: Vec<(f32, Option<usize>, Vec<RemoteHit>)> = Vec::new();
        for (i, (src, (answer, took))) in remote.sources.iter().zip(answers).enumerate() {
            let mut report = SourceReport {
                source: src.label().to_owned(),
                ms: took.as_millis() as u64,
                ..SourceReport::default()
            };
            match answer {
                Ok(found) => {
                    report.hits = found.hits.iter().map(|x| x.qualified_id.clone()).collect();
                    report.rejected = found
                        .rejected
                        .iter()
                        .map(|r| format!("{}: {}", r.id, r.reason))
                        .collect();
                    lists.push((src.weight(), Some(i), found.hits));
                }
                Err(e) => {
                    self.notes.push(format!(
                        "{} {} failed: {e}; answered without it",
                        src.label(),
                        src.endpoint()
                    ));
                    report.error = Some(e.to_string());
                    self.stages.degraded = true;
                }
            }
            self.stages.sources.push(report);
        }
        for src in &turn.sources {
            let cap = remote.per_source_max.max(1);
            let mut hits: Vec<RemoteHit> = Vec::new();
            let mut rejected = Vec::new();
            for h in &src.hits {
                if h.body.as_deref().is_none_or(|b| b.trim().is_empty()) {
                    rejected.push(format!("{}: no body", h.qualified_id));
                } else if hits.len() >= cap {
                    rejected.push(format!(
                        "{}: over the {cap} hits a source may add",
                        h.qualified_id
                    ));
                } else {
                    hits.push(h.clone());
                }
            }
            self.stages.sources.push(SourceReport {
                source: src.name.clone(),
                hits: hits.iter().map(|h| h.qualified_id.clone()).collect(),
                rejected,
                ..SourceReport::default()
            });
            lists.push((src.weight, None, hits));
        }
        if lists.iter().any(|(_, _, l)| !l.is_empty()) {
            let local = std::mem::take(&mut self.cands);
            self.cands = fuse_sources(local, lists, self.opts.rrf_k, self.pool);
        }
    }

    /// Stage 4: bodies, remote ones fetched (in parallel, each within its source's deadline;
    /// a marketplace skill is installed, its body read from the bundle) and local ones read.
    /// A local hit whose file vanished since indexing is dropped, and so is a marketplace hit
    /// still without a body.
    fn hydrate(&mut self, index: &SkillIndex, remote: &Remote, turn: &Turn) {
        type Hydrated = (usize, Result<Option<crate::corpus::bundle::Installed>>);
        let cands = &self.cands;
        let refused = refused_caches(
            remote,
            index,
            |i| {
                remote.sources[i].needs_body()
                    && cands.iter().any(|c| {
                        c.source == Some(i) && c.remote.as_ref().is_some_and(|r| r.body.is_none())
                    })
            },
            &mut self.stages,
            &mut self.notes,
        );
        let results: Vec<Hydrated> = std::thread::scope(|sc| {
            let jobs: Vec<_> = self
                .cands
                .iter_mut()
                .enumerate()
                .filter_map(|(n, c)| {
                    let i = c.source.filter(|&i| !refused[i])?;
                    let src = &remote.sources[i];
                    let r = c.remote.as_mut().filter(|r| r.body.is_none())?;
                    let until = turn.deadline_for(src.hydrate_timeout());
                    Some(sc.spawn(move || (n, src.hydrate(r, until))))
                })
                .collect();
            jobs.into_iter().filter_map(|j| j.join().ok()).collect()
        });
        for (n, result) in results {
            let c = &mut self.cands[n];
            match result {
                Ok(None) => {}
                Ok(Some(inst)) => {
                    for d in &inst.diagnostics {
                        self.notes
                            .push(format!("{}: {}", c.hit.qualified_id, d.message));
                    }
                    self.stages.materialised.push(format!(
                        "{}: {}",
                        c.hit.qualified_id,
                        inst.dir.display()
                    ));
                    c.hit.skill_dir = inst.dir;
                    c.hit.path = inst.skill_md;
                    c.installed = true;
                }
                Err(e) => {
                    let what = match c.source.map(|i| remote.sources[i].needs_body()) {
                        Some(true) => "installing",
                        _ => "reading",
                    };
                    self.notes.push(format!(
                        "{what} {} skill {}: {e}; kept without its body",
                        c.source.map_or("remote", |i| remote.sources[i].label()),
                        c.hit.qualified_id
                    ));
                    self.stages.degraded = true;
                }
            }
        }
        let notes = &mut self.notes;
        self.cands.retain_mut(|c| match &c.remote {
            Some(r) => {
                c.body = r.body.as_deref().map(Into::into);
                let needs = c.source.is_some_and(|i| remote.sources[i].needs_body());
                if needs && c.body.as_deref().is_none_or(|b| b.trim().is_empty()) {
                    notes.push(format!(
                        "{} has no body after install; dropped",
                        c.hit.qualified_id
                    ));
                    return false;
                }
                true
            }
            None => {
                let (body, valid) = index.skill_body(&c.hit.path);
                c.body = Some(body);
                valid
            }
        });
    }

    /// Stage 5: exact-body dedup, only when remote hits can duplicate local ones.
    fn dedup(&mut self) {
        if self.cands.iter().any(|c| c.remote.is_some()) {
            let cands = std::mem::take(&mut self.cands);
            self.cands = dedup_bodies(cands, &mut self.stages.duplicates);
        }
    }

    /// Stage 6: the gate picks among the candidates, shown the original query and the agent's
    /// tools: the turn's, else `configured` (the settings' `available_tools`); without either
    /// a note says so, with the host's reason.
    fn gate(&mut self, remote: &Remote, turn: &Turn, configured: &[String]) {
        let (Some(chat), Some(gopts), false) = (&remote.chat, &remote.gate, self.cands.is_empty())
        else {
            return;
        };
        let shown: Vec<GateCandidate> = self
            .cands
            .iter()
            .map(|c| GateCandidate {
                qualified_id: c.hit.qualified_id.clone(),
                description: c.hit.description.clone(),
                body: c.body.as_deref().unwrap_or_default().to_owned(),
            })
            .collect();
        let gopts = GateOptions {
            deadline: turn.within(gopts.deadline),
            ..gopts.clone()
        };
        let tools = turn
            .tools
            .as_deref()
            .or((!configured.is_empty()).then_some(configured));
        if tools.is_none() {
            self.notes.push(format!(
                "the gate judged without the agent's tools ({}); set available_tools to give them",
                turn.tools_unknown
                    .as_deref()
                    .unwrap_or("the host sent no tool list")
            ));
        }
        let out = llm::gate(chat, self.query, &shown, tools, &gopts);
        if let Some(e) = &out.error {
            self.notes.push(format!(
                "{e}; kept the first {} candidates",
                out.selected.len()
            ));
            self.stages.degraded = true;
        }
        if let Some(e) = &out.log_error {
            self.notes.push(format!("gate log not written: {e}"));
        }
        self.decided = out.called && !out.fell_back;
        let mut slots: Vec<Option<Candidate>> = std::mem::take(&mut self.cands)
            .into_iter()
            .map(Some)
            .collect();
        self.cands = out
            .selected
            .iter()
            .filter_map(|&i| slots[i].take())
            .collect();
        self.stages.gate = Some(GateReport {
            candidates: shown.into_iter().map(|c| c.qualified_id).collect(),
            selected: out.selected_ids,
            plan: out.plan,
            fell_back: out.fell_back,
            error: out.error,
            unknown_ids: out.unknown_ids,
            ms: out.elapsed_ms,
        });
    }

    /// Stages 7 and 8: cut to `top_k`, then install the selected remote bundles not installed
    /// yet (the hub's; a marketplace's were installed to read their bodies).
    fn cut_and_install(&mut self, index: &SkillIndex, remote: &Remote, turn: &Turn) {
        self.cands.truncate(self.opts.top_k);
        if self
            .cands
            .iter()
            .any(|c| c.source.is_some() && !c.installed)
        {
            materialise(
                remote,
                index,
                turn,
                &mut self.cands,
                &mut self.stages,
                &mut self.notes,
            );
        }
    }

    /// Skills bundled by the plugins the selected local hits activate join after them.
    fn add_bundled(&mut self, more: &More<'_>) -> Result<()> {
        let selected: Vec<Hit> = self.cands.iter().map(|c| c.hit.clone()).collect();
        for hit in more(&selected)? {
            if !self.cands.iter().any(|c| c.hit.path == hit.path) {
                let loaded = corpus::load(&hit.path, corpus::DEFAULT_MAX_FILE_BYTES);
                if loaded.valid {
                    self.cands.push(Candidate {
                        hit,
                        body: Some(loaded.body.into()),
                        remote: None,
                        source: None,
                        installed: false,
                    });
                }
            }
        }
        Ok(())
    }

    /// Stage 9: render within the token budget. The lexical relevance guard stands in for a
    /// gate that did not decide.
    fn render(
        mut self,
        engine: &Engine,
        index: &SkillIndex,
        turn: &Turn,
        guard: bool,
        search_ms: f64,
        mut trace: Option<&mut Trace>,
    ) -> Retrieval {
        let t = Instant::now();
        let ro = &engine.render;
        let places = engine.places(index, turn);
        let mut kept = Vec::with_capacity(self.cands.len());
        let mut skills = Vec::with_capacity(self.cands.len());
        let mut off_topic = Vec::new();
        // The search analysed the query already, unless it searched a rewrite of it.
        let guard = (guard && !self.decided).then(|| {
            if self.search_query == self.query {
                crate::index::relevance::Guard::from_terms(self.analyzed)
            } else {
                crate::index::relevance::Guard::new(self.query)
            }
        });
        for c in self.cands {
            if let Some(g) = &guard {
                let verdict = match c.remote {
                    None => {
                        g.check_hay(&index.guard_hay(&c.hit.path, &c.hit.name, &c.hit.description))
                    }
                    Some(_) => g.check(&c.hit.name, &c.hit.description),
                };
                let passed = verdict.passed;
                if let Some(t) = trace.as_deref_mut() {
                    t.guard.push((c.hit.qualified_id.clone(), verdict));
                }
                if !passed {
                    off_topic.push(c.hit.qualified_id.clone());
                    continue;
                }
            }
            let dir = &c.hit.skill_dir;
            let skill_dir = (!dir.as_os_str().is_empty()).then(|| dir.clone());
            let vouched = trusted(&c, engine.remote());
            let mut body = c.body.unwrap_or_else(|| "".into());
            if let Some(places) = &places
                && vouched
            {
                let (expanded, unresolved) = places.expand(&body, skill_dir.as_deref());
                if let std::borrow::Cow::Owned(text) = expanded {
                    body = text.into();
                }
                self.notes.extend(unresolved.into_iter().map(|u| {
                    format!(
                        "placeholder {} in {} left as written: {}",
                        u.placeholder, c.hit.qualified_id, u.why
                    )
                }));
            }
            skills.push(RenderSkill {
                name: c.hit.name.clone(),
                qualified_id: c.hit.qualified_id.clone(),
                skill_dir,
                body: render::resolve_plugin_refs(body, &ro.plugin_dirs),
            });
            kept.push(c.hit);
        }
        let rendered = render::render_with(
            &skills,
            &ro.heading,
            ro.token_budget,
            engine.counter(),
            &|p| index.file_exists(p),
        );
        let hits = kept
            .into_iter()
            .filter(|h| rendered.included.contains(&h.qualified_id))
            .collect();
        Retrieval {
            chars: crate::tokens::js_len(&rendered.text),
            tokens: rendered.tokens,
            piece_bytes: rendered.piece_bytes,
            text: rendered.text,
            hits,
            dropped: self.dropped,
            over_budget: rendered.over_budget,
            off_topic,
            search_ms,
            render_ms: t.elapsed().as_secs_f64() * 1e3,
            retrievers: self.retrievers,
            notes: self.notes,
            stages: self.stages,
        }
    }
}

/// Whether PathGuard placeholders are expanded in a candidate's body: local skills (plugins'
/// bundled ones included), hub skills, and a host's own skills only when their `meta` says
/// `pathguard_processed: true` (the reference's rule; a marketplace's never, whatever its
/// catalogue item says).
fn trusted(c: &Candidate, remote: &Remote) -> bool {
    match (&c.remote, c.source) {
        (None, _) => true,
        (Some(_), Some(i)) => remote.sources[i].trusted(),
        (Some(r), None) => r.meta.get("pathguard_processed") == Some(&Value::Bool(true)),
    }
}

/// Weighted RRF of the local list (weight 1) and the remote ones, collapsed on qualified id (a
/// remote hit's `meta.origin` is its qualified id), best `keep` first.
fn fuse_sources(
    local: Vec<Candidate>,
    remote: Vec<(f32, Option<usize>, Vec<RemoteHit>)>,
    k: f32,
    keep: usize,
) -> Vec<Candidate> {
    let mut lists = vec![(
        1.0,
        local.iter().map(|c| c.hit.qualified_id.clone()).collect(),
    )];
    lists.extend(remote.iter().map(|(w, _, hits)| {
        (
            f64::from(*w),
            hits.iter().map(|r| r.qualified_id.clone()).collect(),
        )
    }));
    let fused = crate::retrieve::fusion::rrf(&lists, f64::from(k));
    let mut pool: HashMap<String, Candidate> = local
        .into_iter()
        .map(|c| (c.hit.qualified_id.clone(), c))
        .collect();
    for (source, r) in remote
        .into_iter()
        .flat_map(|(_, source, hits)| hits.into_iter().map(move |r| (source, r)))
    {
        pool.entry(r.qualified_id.clone()).or_insert_with(|| {
            let mut hit = Hit::remote(&r.qualified_id, &r.name, &r.description, 0.0);
            if let Some(dir) = r.meta.get("skill_dir").and_then(|d| d.as_str()) {
                hit.skill_dir = dir.into();
            }
            Candidate {
                hit,
                body: None,
                remote: Some(r),
                source,
                installed: false,
            }
        });
    }
    fused
        .into_iter()
        .take(keep)
        .filter_map(|f| {
            let mut c = pool.remove(&f.key)?;
            if c.remote.is_some() {
                c.hit.score = f.score as f32;
            }
            Some(c)
        })
        .collect()
}

/// Drops candidates whose normalised body repeats an earlier one's; a local copy replaces a
/// remote one in its place. Empty bodies are never duplicates.
fn dedup_bodies(cands: Vec<Candidate>, report: &mut Vec<String>) -> Vec<Candidate> {
    let mut out: Vec<Candidate> = Vec::with_capacity(cands.len());
    let mut seen: HashMap<[u8; 32], usize> = HashMap::new();
    for c in cands {
        let Some(d) = c.body.as_deref().and_then(body_digest) else {
            out.push(c);
            continue;
        };
        match seen.get(&d) {
            Some(&i) if c.remote.is_none() && out[i].remote.is_some() => {
                report.push(format!(
                    "{}: {}",
                    out[i].hit.qualified_id, c.hit.qualified_id
                ));
                out[i] = c;
            }
            Some(&i) => report.push(format!(
                "{}: {}",
                c.hit.qualified_id, out[i].hit.qualified_id
            )),
            None => {
                seen.insert(d, out.len());
                out.push(c);
            }
        }
    }
    out
}

/// Installs the bundles of the selected remote hits not installed yet (in parallel, each
/// within its source's download deadline) and points them at the extracted directory. A failure
/// keeps the hit with the body it has. A source whose cache lies inside a skill root installs
/// nothing.
fn materialise(
    remote: &Remote,
    index: &SkillIndex,
    turn: &Turn,
    cands: &mut [Candidate],
    stages: &mut Stages,
    notes: &mut Vec<String>,
) {
    let refused = refused_caches(
        remote,
        index,
        |i| cands.iter().any(|c| c.source == Some(i) && !c.installed),
        stages,
        notes,
    );
    let results: Vec<_> = std::thread::scope(|sc| {
        let jobs: Vec<_> = cands
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.installed)
            .filter_map(|(n, c)| {
                let i = c.source.filter(|&i| !refused[i])?;
                let r = c.remote.as_ref()?;
                let src = &remote.sources[i];
                let until = turn.deadline_for(src.download_timeout());
                Some(sc.spawn(move || (n, src.install(r, until))))
            })
            .collect();
        jobs.into_iter().filter_map(|j| j.join().ok()).collect()
    });
    for (n, installed) in results {
        let c = &mut cands[n];
        let label = c.source.map_or("remote", |i| remote.sources[i].label());
        match installed {
            Ok(inst) => {
                for d in &inst.diagnostics {
                    notes.push(format!("{}: {}", c.hit.qualified_id, d.message));
                }
                if c.body.as_deref().is_none_or(|b| b.trim().is_empty()) {
                    let loaded = corpus::load(&inst.skill_md, corpus::DEFAULT_MAX_FILE_BYTES);
                    c.body = Some(loaded.body.into());
                }
                stages
                    .materialised
                    .push(format!("{}: {}", c.hit.qualified_id, inst.dir.display()));
                c.hit.skill_dir = inst.dir;
                c.hit.path = inst.skill_md;
                c.installed = true;
            }
            Err(e) => {
                notes.push(format!(
                    "installing {label} skill {} failed: {e}; rendered without its files",
                    c.hit.qualified_id
                ));
                stages
                    .materialised
                    .push(format!("{}: {e}", c.hit.qualified_id));
                stages.degraded = true;
            }
        }
    }
}

/// Which sources may not install (by index in [`Remote::sources`]): those `wanted` whose bundle
/// cache overlaps a skill root, where installed bundles would be indexed as local skills. A
/// note says so for each.
fn refused_caches(
    remote: &Remote,
    index: &SkillIndex,
    wanted: impl Fn(usize) -> bool,
    stages: &mut Stages,
    notes: &mut Vec<String>,
) -> Vec<bool> {
    let mut refused = vec![false; remote.sources.len()];
    for (i, src) in remote.sources.iter().enumerate() {
        if wanted(i)
            && let Err(e) = crate::corpus::bundle::check_outside(src.cache_dir(), index.roots())
        {
            notes.push(format!("{} bundles are not installed: {e}", src.label()));
            stages.degraded = true;
            refused[i] = true;
        }
    }
    refused
}

/// The SHA-256 of a body normalised for exact-duplicate detection (§1.5): CRLF and CR to LF,
/// each line's end trimmed, the whole trimmed. `None` for an empty body, which is never a
/// duplicate.
fn body_digest(body: &str) -> Option<[u8; 32]> {
    let unified = body.replace("\r\n", "\n").replace('\r', "\n");
    let lines: Vec<&str> = unified.lines().map(str::trim_end).collect();
    let norm = lines.join("\n");
    let norm = norm.trim();
    if norm.is_empty() {
        return None;
    }
    Some(Sha256::digest(norm.as_bytes()).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_equal_up_to_line_ends_and_trailing_space_share_a_digest() {
        let a = body_digest("# PDF\r\nFill forms.  \r\n\r\n").unwrap();
        let b = body_digest("\n# PDF\nFill forms.").unwrap();
        let c = body_digest("# PDF\rFill forms.").unwrap();
        assert_eq!(a, b);
        assert_eq!(a, c);
        assert_ne!(a, body_digest("# PDF\nFill  forms.").unwrap());
        assert_eq!(body_digest(" \r\n\t"), None);
    }
}
