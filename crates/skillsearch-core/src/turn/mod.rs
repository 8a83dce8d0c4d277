//! One turn, as every surface delivers it. [`Engine`] is built once per process from the
//! settings and owns everything a turn needs besides the index: the ranking and render options,
//! the eligibility env, the token counter, the remote parts (hub, rewrite, gate), the
//! decision log and the semantic retriever's slot. The hook, the CLI, the MCP server and the
//! daemon each hold an `Engine` and a transport; none of them assembles the pipeline.
//!
//! The pipeline itself (rewrite → fan out → fuse → hydrate → dedup → gate → top_k → install →
//! render) is in `pipeline`; the two `on_demand` tools and their strings in [`tools`].

pub mod decision_log;
pub mod embedder;
mod pipeline;
pub mod placeholders;
pub mod render;
mod report;
pub mod tools;

pub use pipeline::{CONTEXT_PREAMBLE, RenderOptions, Retrieval, injected_context};
pub use report::{GateReport, RewriteReport, SourceReport, Stages};

use crate::config::Settings;
use crate::corpus::eligibility::EligibilityEnv;
use crate::error::Result;
use crate::index::SkillIndex;
use crate::plan::{self, Inventory, Matched, Plan, ToolSpec};
use crate::remote::Remote;
use crate::remote::source::RemoteHit;
use crate::retrieve::explain::{Explanation, GuardPart, Status, Trace, TurnPart, TurnSummary};
use crate::retrieve::semantic::SemanticSlot;
use crate::retrieve::{Hit, SearchOptions};
use crate::tokens::TokenCounter;
use decision_log::{Decision, DecisionLog};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the host tells about this turn.
#[derive(Debug, Clone, Default)]
pub struct Turn {
    /// Skills to deliver; `None`: the settings' `top_k`.
    pub top_k: Option<usize>,
    /// The agent's tools this turn, for the gate's hard rule; `None`: not known (the settings'
    /// `available_tools` then stand in, when set).
    pub tools: Option<Vec<String>>,
    /// Why the host could not send its tools (`tools` is `None`), for the decision log.
    pub tools_unknown: Option<String>,
    /// When the whole retrieval must be done; each step's own deadline is cut to fit.
    pub deadline: Option<Instant>,
    /// Skills the host found itself this turn, fused with the local and hub hits.
    pub sources: Vec<HostSource>,
    /// The host's directories for PathGuard placeholders (its workspace, home, state
    /// directory); the settings' `output_dir` / `home_dir` / `state_dir` win over them.
    pub paths: crate::config::PathFacts,
    /// The shape of a `skill_search` answer the call asked for; `None`: `search_answer`.
    pub detail: Option<crate::config::Detail>,
}

/// A ranked list of skills a host supplies with a turn (its own registry, a marketplace it
/// already searched). Its hits must carry their bodies: nothing is fetched or installed for
/// them. A hit's `meta.skill_dir`, when set, is rendered as its directory.
#[derive(Debug, Clone, Default)]
pub struct HostSource {
    /// The label, also the prefix of its hits' qualified ids (`<name>/<id>`).
    pub name: String,
    pub weight: f32,
    /// Best first.
    pub hits: Vec<RemoteHit>,
}

/// Time a remote step leaves before the turn's deadline for the local work after it (search,
/// reading bodies, render).
pub const LOCAL_RESERVE: Duration = Duration::from_millis(100);

impl Turn {
    /// A turn that must be done by `deadline`, with nothing else told.
    pub fn until(deadline: Instant) -> Turn {
        Turn {
            deadline: Some(deadline),
            ..Turn::default()
        }
    }

    /// `step`, cut to what is left before the turn's deadline less [`LOCAL_RESERVE`].
    pub fn within(&self, step: Duration) -> Duration {
        match self.deadline {
            Some(d) => step.min(
                d.saturating_duration_since(Instant::now())
                    .saturating_sub(LOCAL_RESERVE),
            ),
            None => step,
        }
    }

    /// What is left of the turn (`None`: no deadline).
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// The instant a step of length `step` must end by.
    pub fn deadline_for(&self, step: Duration) -> Instant {
        Instant::now() + self.within(step)
    }
}

/// The index of a plugin's bundled skills, by plugin id: its skills join a turn whose selected
/// hits activate the plugin (`activates.plugins`).
pub type Bundled = [(String, Arc<SkillIndex>)];

/// Which skills a tool plan starts from.
#[derive(Debug, Clone)]
pub enum PlanFrom<'a> {
    /// The skills this prompt matches (the engine searches).
    Prompt { query: &'a str, top_k: usize },
    /// Skills the host already matched, by id (`local/` optional); unknown or ineligible ones
    /// are left out.
    Given(&'a [String]),
}

/// A tool plan and what it came from.
#[derive(Debug)]
pub struct PlanAnswer {
    pub plan: Plan,
    /// The matched skills' ids, as searched or given.
    pub matched: Vec<String>,
    pub search_ms: f64,
    pub plan_ms: f64,
}

/// Everything a turn needs besides the index, built once per process.
pub struct Engine {
    settings: Settings,
    search: SearchOptions,
    render: RenderOptions,
    eligibility: EligibilityEnv,
    counter: TokenCounter,
    remote: Remote,
    inventory: Inventory,
    log: Option<DecisionLog>,
    /// The semantic retriever, once whoever loads the embedder attached one.
    semantic: Arc<SemanticSlot>,
}

impl Engine {
    /// The engine the settings configure: ranking, rendering (installed plugins' directories
    /// included, for `{plugins.<id>}`), this process's eligibility env, an exact token counter
    /// (loaded on first use), the remote parts (bundles under `<home>/cache/hub`), the
    /// decision log, and an empty semantic slot (lexical ranking until an embedder is attached
    /// to [`Engine::semantic`]).
    pub fn new(settings: &Settings, home: &Path) -> Engine {
        let inventory = Inventory::load(&settings.plugins);
        Engine {
            search: SearchOptions::from_settings(settings, settings.top_k),
            render: RenderOptions::from_settings(settings, &inventory),
            eligibility: EligibilityEnv::for_settings(settings),
            counter: TokenCounter::new(),
            remote: Remote::from_settings(settings, home),
            log: DecisionLog::from_settings(settings),
            inventory,
            settings: settings.clone(),
            semantic: Arc::default(),
        }
    }

    /// The same engine counting tokens with `counter` (the hook estimates: loading the BPE
    /// tables costs more than its whole turn may).
    pub fn with_counter(mut self, counter: TokenCounter) -> Engine {
        self.counter = counter;
        self
    }

    /// The same engine ranking with `opts` (the CLI's ranking flags); `top_k` stays the
    /// default a turn may override.
    pub fn with_search_options(mut self, opts: SearchOptions) -> Engine {
        self.search = opts;
        self
    }

    /// The same engine judging eligibility against `env` instead of this process.
    pub fn with_eligibility(mut self, env: EligibilityEnv) -> Engine {
        self.eligibility = env;
        self
    }

    /// The same engine ranking with the semantic retriever in `slot` (one a caller already
    /// filled).
    pub fn with_semantic(mut self, slot: Arc<SemanticSlot>) -> Engine {
        self.semantic = slot;
        self
    }

    /// The same engine with a token budget for rendered blocks (`None`: no limit).
    pub fn with_token_budget(mut self, budget: Option<usize>) -> Engine {
        self.render.token_budget = budget;
        self
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn counter(&self) -> &TokenCounter {
        &self.counter
    }

    pub fn remote(&self) -> &Remote {
        &self.remote
    }

    pub fn eligibility(&self) -> &EligibilityEnv {
        &self.eligibility
    }

    pub fn inventory(&self) -> &Inventory {
        &self.inventory
    }

    /// The slot of the semantic retriever every search of this engine uses: attach one (or say
    /// why there is none) and hybrid ranking follows.
    pub fn semantic(&self) -> &Arc<SemanticSlot> {
        &self.semantic
    }

    /// A lexical search of `index` or, when the engine has a semantic retriever, the
    /// retrievers `opts` asks for (the plan's and bundled skills' search; [`Engine::retrieve`]
    /// runs the whole turn).
    fn search(
        &self,
        index: &SkillIndex,
        query: &str,
        opts: &SearchOptions,
    ) -> Result<crate::retrieve::SearchResult> {
        index.search_with(query, opts, &self.eligibility, Some(&self.semantic))
    }

    /// The ranking of a turn that asks for `top_k` skills (`None`: the settings' `top_k`).
    pub fn search_options(&self, top_k: Option<usize>) -> SearchOptions {
        SearchOptions {
            top_k: top_k.unwrap_or(self.search.top_k),
            ..self.search.clone()
        }
    }

    /// The whole-turn deadline of a turn that starts at `started`.
    pub fn deadline(&self, started: Instant) -> Instant {
        started + Duration::from_millis(self.settings.deadline_ms)
    }

    /// The block injected into a turn (`auto` mode): the pipeline with the relevance guard on.
    /// Only a failure of the local index is an error; every remote part fails open.
    pub fn retrieve(&self, index: &SkillIndex, query: &str, turn: &Turn) -> Result<Retrieval> {
        self.retrieve_bundled(index, query, turn, &[])
    }

    /// [`Engine::retrieve`], plus the bundled skills of the plugins the selected hits activate,
    /// searched with the same query in their own indexes; they follow the selected hits, and the
    /// budget and relevance guard apply to them alike.
    pub fn retrieve_bundled(
        &self,
        index: &SkillIndex,
        query: &str,
        turn: &Turn,
        bundled: &Bundled,
    ) -> Result<Retrieval> {
        let opts = self.search_options(turn.top_k);
        let more = |hits: &[Hit]| -> Result<Vec<Hit>> {
            let mut out = Vec::new();
            for (plugin, pidx) in bundled {
                if hits
                    .iter()
                    .any(|h| h.meta.openclaw.activates_plugins.contains(plugin))
                {
                    out.extend(self.search(pidx, query, &opts)?.hits);
                }
            }
            Ok(out)
        };
        pipeline::run(self, index, query, &opts, turn, true, &more, None)
    }

    /// Why `query` ranks what it does: the turn [`Engine::retrieve`] runs (relevance guard and
    /// token budget included), its local search recorded as it ran, explained hit by hit, then
    /// the matches held back, then each skill of `wanted` (ids, `local/` optional) wherever
    /// it stands. Only a failure of the local index is an error.
    pub fn explain(
        &self,
        index: &SkillIndex,
        query: &str,
        turn: &Turn,
        wanted: &[String],
    ) -> Result<Explanation> {
        let opts = self.search_options(turn.top_k);
        let mut trace = Trace::default();
        let none = |_: &[Hit]| -> Result<Vec<Hit>> { Ok(Vec::new()) };
        let r = pipeline::run(
            self,
            index,
            query,
            &opts,
            turn,
            true,
            &none,
            Some(&mut trace),
        )?;
        let searched = r
            .stages
            .rewrite
            .as_ref()
            .and_then(|w| w.rewritten.clone())
            .unwrap_or_else(|| query.to_owned());
        let mut ex = index.explanation(
            &trace,
            &opts,
            &self.eligibility,
            Some(&self.semantic),
            &searched,
            wanted,
        )?;
        ex.query = query.to_owned();
        let injected: Vec<String> = r.hits.iter().map(|h| h.qualified_id.clone()).collect();
        for s in ex.skills.iter_mut().filter(|s| s.status == Status::Hit) {
            let verdict = trace.guard.iter().find(|(id, _)| *id == s.qualified_id);
            s.turn = Some(TurnPart {
                injected: injected.contains(&s.qualified_id),
                relevance_guard: verdict.map(|(_, v)| GuardPart {
                    passed: v.passed,
                    matched: v.matched.clone(),
                    required: v.required,
                }),
                over_budget: r.over_budget.contains(&s.qualified_id),
            });
        }
        ex.turn = TurnSummary {
            injected,
            off_topic: r.off_topic,
            over_budget: r.over_budget,
            token_budget: self.render.token_budget,
            tokens: r.tokens,
            gate_decided: r.stages.gate.as_ref().is_some_and(|g| !g.fell_back),
        };
        ex.notes = r.notes;
        Ok(ex)
    }

    /// What a `skill_search` call returns, and the retrieval behind it (for the decision log).
    /// Never fails: problems are fixed replies ([`tools::UNAVAILABLE_REPLY`]).
    pub fn skill_search(
        &self,
        index: &SkillIndex,
        query: &str,
        turn: &Turn,
    ) -> (String, Option<Retrieval>) {
        tools::skill_search(self, index, query, turn)
    }

    /// What a `skill_read` call returns: a skill in full, or one of its files, from character
    /// `offset` on and at most [`tools::MAX_READ_TOKENS`] (a part that is not the last says
    /// which offset reads on). A hub skill (`hub/<id>`) is read from its installed bundle.
    /// Never fails.
    pub fn skill_read(
        &self,
        index: &SkillIndex,
        id: &str,
        path: Option<&str>,
        offset: usize,
        turn: &Turn,
    ) -> String {
        tools::skill_read_any(self, index, id, path, offset, turn)
    }

    /// Which tools this turn shows: core tools, unmanaged plugins' tools, and the tools of the
    /// plugins the matched skills activate. `tools` is the host's list (empty: every inventory
    /// tool, names only).
    pub fn plan(
        &self,
        index: &SkillIndex,
        from: PlanFrom<'_>,
        tools: &[ToolSpec],
    ) -> Result<PlanAnswer> {
        let started = Instant::now();
        let _ = self.eligibility.refresh();
        let matched: Vec<(String, crate::corpus::frontmatter::SkillMeta)> = match from {
            PlanFrom::Prompt { query, top_k } => self
                .search(index, query, &self.search_options(Some(top_k)))?
                .hits
                .into_iter()
                .map(|h| (h.qualified_id, h.meta))
                .collect(),
            PlanFrom::Given(given) => {
                let wanted: std::collections::BTreeSet<&str> = given
                    .iter()
                    .map(|id| id.strip_prefix("local/").unwrap_or(id))
                    .collect();
                let mut metas: Vec<(String, crate::corpus::frontmatter::SkillMeta)> = Vec::new();
                for (_, skills) in index.activations()? {
                    for (id, meta) in skills {
                        if wanted.contains(id.as_str())
                            && self.eligibility.check(&meta).is_ok()
                            && !metas.iter().any(|(m, _)| *m == id)
                        {
                            metas.push((id, meta));
                        }
                    }
                }
                metas
            }
        };
        let search_ms = ms_since(started);
        let t = Instant::now();
        // Managed plugins: those some *eligible* skill activates.
        let managed = index.managed_plugins(&self.eligibility)?;
        let shown: Vec<Matched<'_>> = matched
            .iter()
            .map(|(id, meta)| Matched { id, meta })
            .collect();
        let plan = plan::plan(&shown, &managed, &[], tools, &self.inventory, &self.counter);
        let matched = match from {
            PlanFrom::Given(given) => given.to_vec(),
            PlanFrom::Prompt { .. } => matched.into_iter().map(|(id, _)| id).collect(),
        };
        Ok(PlanAnswer {
            plan,
            matched,
            search_ms,
            plan_ms: ms_since(t),
        })
    }

    /// What PathGuard placeholders resolve to this turn, or `None` when `resolve_placeholders`
    /// is off. Directories: the settings' own, then the host's, then `workspace` as the output
    /// directory. Roots: `index`'s, the hub's bundle cache and the installed plugins'.
    pub fn places(&self, index: &SkillIndex, turn: &Turn) -> Option<placeholders::Places> {
        let configured = self.settings.placeholders.as_ref()?;
        let facts = configured.or(&turn.paths).or(&crate::config::PathFacts {
            output_dir: self.settings.workspace.clone(),
            ..Default::default()
        });
        let mut roots: Vec<std::path::PathBuf> =
            index.roots().0.iter().map(|r| r.path.clone()).collect();
        roots.push(self.remote.hub_cache.clone());
        roots.extend(self.render.plugin_dirs.values().cloned());
        Some(placeholders::Places { facts, roots })
    }

    /// Whether decisions are logged.
    pub fn logs(&self) -> bool {
        self.log.is_some()
    }

    /// Appends `decision` to the decision log, when one is configured.
    pub fn record(&self, decision: &Decision) -> std::io::Result<()> {
        match &self.log {
            Some(log) => log.append(decision),
            None => Ok(()),
        }
    }

    /// The decision log's file, when one is configured.
    pub fn log_path(&self) -> Option<&Path> {
        self.log.as_ref().map(DecisionLog::path)
    }
}

/// Milliseconds since `t`, to the microsecond.
pub fn ms_since(t: Instant) -> f64 {
    (t.elapsed().as_secs_f64() * 1e6).round() / 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_deadline_cuts_every_step() {
        let t = Turn::default();
        assert_eq!(t.within(Duration::from_secs(5)), Duration::from_secs(5));
        let t = Turn::until(Instant::now() + Duration::from_millis(300));
        assert!(t.within(Duration::from_secs(5)) <= Duration::from_millis(200));
        let t = Turn::until(Instant::now() - Duration::from_millis(1));
        assert_eq!(t.within(Duration::from_secs(5)), Duration::ZERO);
    }
}
