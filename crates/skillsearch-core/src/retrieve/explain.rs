//! Why a query ranked its skills as it did (`skillsearch explain`): the retrievers that found
//! each skill with their ranks and scores, the query terms it matched in which fields with
//! their BM25 parts, the fusion's `weight / (k + rank)` terms, and why a skill was held back.
//!
//! Everything here is read from one search as it ran: `SkillIndex::search_counted` fills a
//! `Trace` (the lexical query's clauses, each retriever's ranked list, the fusion's claims,
//! the answer), so an explanation cannot drift from the ranking it explains. What the trace does
//! not hold is computed with the ranking's own parts: a term's score in a document is the
//! clause's BM25 weight applied to the document's posting (the sum, in clause order, is the
//! lexical score bit for bit), and the rank of a skill asked for by id that the search did not
//! reach comes from the same top-k collection run over the whole index.

use crate::corpus::eligibility::{EligibilityEnv, Exclusion};
use crate::error::Result;
use crate::index::SkillIndex;
use crate::retrieve::fusion::Fused;
use crate::retrieve::semantic::SemanticSlot;
use crate::retrieve::{LOCAL_SOURCE, SearchOptions, SearchResult};
use serde::Serialize;
use tantivy::query::Bm25Weight;
use tantivy::{DocAddress, Score, Searcher, Term};

/// What one search did, recorded as it ran (the last pass, when it had to look deeper).
#[derive(Default)]
pub(crate) struct Trace {
    /// The searcher the search read, so documents are looked up in the same generation.
    pub searcher: Option<Searcher>,
    /// The lexical query's clauses, in the order a document's score sums them.
    pub clauses: Vec<TracedClause>,
    /// Candidates each retriever contributed (the fusion's depth).
    pub depth: usize,
    /// The lexical ranking, best first (empty when it did not run).
    pub lexical: Vec<Traced>,
    /// The semantic ranking, best first (empty when it did not run).
    pub semantic: Vec<Traced>,
    /// The fusion of the two, best first (empty when one retriever ranked alone).
    pub fused: Vec<Fused<(usize, String)>>,
    /// The answer.
    pub result: SearchResult,
    /// The relevance guard's verdict on each local hit it judged (set by the turn).
    pub guard: Vec<(String, crate::index::relevance::Verdict)>,
}

/// One clause of the lexical query: a term in a field.
pub(crate) struct TracedClause {
    pub term: String,
    pub field: &'static str,
    /// The field's weight times the term's query-frequency factor.
    pub boost: f32,
    /// Documents holding the term in the field.
    pub df: u64,
    pub clause: Term,
    pub weight: Bm25Weight,
}

/// One ranked document of a retriever.
pub(crate) struct Traced {
    pub root: usize,
    pub rel: String,
    pub score: Score,
}

/// Why a query ranked what it did. Stable JSON (`explain --json`); fields are only added.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    /// The query as given.
    pub query: String,
    /// What the index searched: the query, or a chat model's rewrite of it.
    pub searched: String,
    /// Skills a turn delivers.
    pub top_k: usize,
    /// The retrievers that ranked (`lexical`, `semantic`).
    pub retrievers: Vec<&'static str>,
    /// How the retrievers' rankings became one.
    pub ranking: Ranking,
    /// A reranker after the first ranking: the engine ships none.
    pub second_stage: SecondStage,
    /// The query terms the lexical retriever used, with the fields it searched them in.
    pub terms: Vec<QueryTerm>,
    /// Terms dropped as too common in the corpus.
    pub stopwords: Vec<String>,
    /// Terms left out of a long query as the least important.
    pub omitted: Vec<String>,
    /// Candidates each retriever contributed before shadowing and gating.
    pub depth: usize,
    /// The hits in rank order, then the matches held back, then the skills asked for by id.
    pub skills: Vec<SkillExplanation>,
    /// What an injected turn (`auto` mode) did with the hits.
    pub turn: TurnSummary,
    /// What did not run or failed.
    pub notes: Vec<String>,
}

/// How the final score is made.
#[derive(Debug, Clone, Serialize)]
pub struct Ranking {
    /// `bm25` (lexical alone), `cosine` (semantic alone), `rrf` (both, fused), or `none`
    /// (nothing ranked).
    pub method: &'static str,
    /// RRF's `k`, when fused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rrf_k: Option<f32>,
    /// RRF's weight per retriever, when fused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weights: Option<Weights>,
    /// Field weights of the lexical query.
    pub fields: Weights3,
}

/// RRF's weights.
#[derive(Debug, Clone, Serialize)]
pub struct Weights {
    pub lexical: f32,
    pub semantic: f32,
}

/// The lexical query's field weights.
#[derive(Debug, Clone, Serialize)]
pub struct Weights3 {
    pub name: f32,
    pub description: f32,
    pub body: f32,
}

/// The second stage: none ships.
#[derive(Debug, Clone, Serialize)]
pub struct SecondStage {
    pub ran: bool,
    pub note: String,
}

/// What the engine says of its second stage.
pub const NO_SECOND_STAGE: &str =
    "the engine ships no second-stage reranker: the first ranking's score is final";

/// A query term and the fields it was searched in.
#[derive(Debug, Clone, Serialize)]
pub struct QueryTerm {
    pub term: String,
    pub fields: Vec<TermField>,
}

/// A term in one field: its weight in the query and how many documents hold it there.
#[derive(Debug, Clone, Serialize)]
pub struct TermField {
    pub field: &'static str,
    pub weight: f32,
    pub df: u64,
}

/// Where a skill ended up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Among the hits, at `rank`.
    Hit,
    /// Ranked high enough, but shadowed or ineligible (`held_back` says why).
    HeldBack,
    /// A retriever found it, ranked below the hits.
    NotReached,
    /// No query term matched it and no semantic retriever ranked.
    NoMatch,
    /// Its `SKILL.md` is in the index but is not a usable skill (see `skillsearch index`).
    Invalid,
    /// No skill of that id in the index.
    NotInIndex,
}

/// One skill's explanation.
#[derive(Debug, Clone, Serialize)]
pub struct SkillExplanation {
    /// The id as asked for, or the skill's id.
    pub id: String,
    /// `local/<id>` (empty when not in the index).
    pub qualified_id: String,
    pub name: String,
    /// Named with `--skill`.
    pub asked: bool,
    pub status: Status,
    /// Its rank among the hits (from 1).
    pub rank: Option<usize>,
    /// The score the search gave it (as `search --json` shows it), for a hit or a held-back
    /// match.
    pub score: Option<f32>,
    pub lexical: Option<LexicalPart>,
    pub semantic: Option<SemanticPart>,
    /// How its score was fused, when both retrievers ranked.
    pub fusion: Option<FusionPart>,
    /// Why it is not offered (shadowed or ineligible), even when not reached.
    pub held_back: Option<Exclusion>,
    /// What an injected turn did with this hit.
    pub turn: Option<TurnPart>,
}

/// The lexical retriever's view of a skill.
#[derive(Debug, Clone, Serialize)]
pub struct LexicalPart {
    /// Its rank by BM25 over the whole index (from 1), when any term matched.
    pub rank: Option<usize>,
    /// Within the candidates the search ranked (`depth`).
    pub considered: bool,
    /// The BM25 score: the sum of `matches`' scores.
    pub score: f32,
    /// Each (term, field) clause that matched, in the order they are summed.
    pub matches: Vec<TermMatch>,
}

/// A query term found in a field of the skill.
#[derive(Debug, Clone, Serialize)]
pub struct TermMatch {
    pub term: String,
    pub field: &'static str,
    /// Occurrences in the field.
    pub tf: u32,
    pub score: f32,
}

/// The semantic retriever's view of a skill.
#[derive(Debug, Clone, Serialize)]
pub struct SemanticPart {
    /// Its rank by cosine over the whole index (from 1).
    pub rank: Option<usize>,
    pub considered: bool,
    /// The cosine similarity of its vector and the query's (a long query's: the nearest of its
    /// passages, `retrieve::passage`).
    pub score: f32,
}

/// A fused score: the sum of its claims.
#[derive(Debug, Clone, Serialize)]
pub struct FusionPart {
    pub k: f32,
    pub claims: Vec<FusionClaim>,
    pub score: f64,
}

/// One retriever's claim, `weight / (k + rank)`.
#[derive(Debug, Clone, Serialize)]
pub struct FusionClaim {
    pub retriever: &'static str,
    pub weight: f64,
    pub rank: usize,
    pub value: f64,
}

/// What an injected turn did with one hit.
#[derive(Debug, Clone, Serialize)]
pub struct TurnPart {
    /// In the block a model reads.
    pub injected: bool,
    /// The relevance guard's verdict, when it judged.
    pub relevance_guard: Option<GuardPart>,
    /// Left out whole to fit the token budget.
    pub over_budget: bool,
}

/// The relevance guard's verdict: the query words the skill's name and description share,
/// and how many it needed.
#[derive(Debug, Clone, Serialize)]
pub struct GuardPart {
    pub passed: bool,
    pub matched: Vec<String>,
    pub required: usize,
}

/// The injected turn as a whole.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TurnSummary {
    /// Qualified ids in the block, in order (remote ones included).
    pub injected: Vec<String>,
    /// Hits the relevance guard held back.
    pub off_topic: Vec<String>,
    /// Hits left out to fit the token budget.
    pub over_budget: Vec<String>,
    pub token_budget: Option<usize>,
    /// Tokens of the block, when the budget check counted them.
    pub tokens: Option<usize>,
    /// Whether a chat model's gate picked the hits (the relevance guard then stands down).
    pub gate_decided: bool,
}

impl SkillIndex {
    /// The explanation of the search `trace` recorded, with the skills `wanted` (ids, `local/`
    /// optional) added; the turn's part is left for the caller.
    pub(crate) fn explanation(
        &self,
        trace: &Trace,
        opts: &SearchOptions,
        gate: &EligibilityEnv,
        semantic: Option<&SemanticSlot>,
        searched: &str,
        wanted: &[String],
    ) -> Result<Explanation> {
        let (searcher, keys) = self.snapshot()?;
        let searcher = trace.searcher.clone().unwrap_or(searcher);
        let result = &trace.result;
        let fused = !trace.fused.is_empty();
        let ranking = Ranking {
            method: match (
                result.retrievers.contains(&"lexical"),
                result.retrievers.contains(&"semantic"),
            ) {
                (true, true) => "rrf",
                (true, false) => "bm25",
                (false, true) => "cosine",
                (false, false) => "none",
            },
            rrf_k: fused.then_some(opts.rrf_k),
            weights: fused.then_some(Weights {
                lexical: opts.lexical_weight,
                semantic: opts.semantic_weight,
            }),
            fields: Weights3 {
                name: opts.name_weight,
                description: opts.description_weight,
                body: opts.body_weight,
            },
        };
        let mut terms: Vec<QueryTerm> = Vec::new();
        for c in &trace.clauses {
            let field = TermField {
                field: c.field,
                weight: c.boost,
                df: c.df,
            };
            match terms.iter_mut().find(|t| t.term == c.term) {
                Some(t) => t.fields.push(field),
                None => terms.push(QueryTerm {
                    term: c.term.clone(),
                    fields: vec![field],
                }),
            }
        }
        let key_of = |root: usize, rel: &str| {
            keys.iter()
                .find(|k| k.root == root && k.rel == rel)
                .cloned()
        };
        // (root, id, status, rank, score, exclusion, asked)
        let mut found: Vec<Entry> = Vec::new();
        for (i, h) in result.hits.iter().enumerate() {
            found.push(Entry {
                id: h.id.clone(),
                name: h.name.clone(),
                key: key_of(h.root, &h.id),
                status: Status::Hit,
                rank: Some(i + 1),
                score: Some(h.score),
                held_back: None,
                asked: false,
            });
        }
        for d in &result.dropped {
            let key = key_of(d.root, &d.id);
            found.push(Entry {
                id: d.id.clone(),
                name: d.name.clone(),
                score: key
                    .as_ref()
                    .and_then(|k| self.run_score(trace, k.root, &k.rel)),
                key,
                status: Status::HeldBack,
                rank: None,
                held_back: Some(d.exclusion.clone()),
                asked: false,
            });
        }
        for w in wanted {
            let id = w.strip_prefix(&format!("{LOCAL_SOURCE}/")).unwrap_or(w);
            // The hit or held-back match of that id (the first root's, as `show` looks it up).
            if let Some(e) = found.iter_mut().find(|e| e.id == id) {
                e.asked = true;
                continue;
            }
            // First root first, as `show` looks an id up.
            let key = keys.iter().find(|k| k.rel == id && k.valid).cloned();
            let key = key.or_else(|| keys.iter().find(|k| k.rel == id).cloned());
            let Some(key) = key else {
                found.push(Entry {
                    id: w.clone(),
                    name: String::new(),
                    key: None,
                    status: Status::NotInIndex,
                    rank: None,
                    score: None,
                    held_back: None,
                    asked: true,
                });
                continue;
            };
            let stored = self.stored(&searcher, key.address)?;
            let (status, held_back) = if key.valid {
                (
                    Status::NotReached,
                    self.held_back(&searcher, key.root, &stored.meta, gate)?,
                )
            } else {
                (Status::Invalid, None)
            };
            found.push(Entry {
                id: key.rel.clone(),
                name: stored.meta.name.clone(),
                key: Some(key),
                status,
                rank: None,
                score: None,
                held_back,
                asked: true,
            });
        }
        // Whole-index rankings, only for skills the search did not reach.
        let mut full_lexical: Option<Vec<(usize, String)>> = None;
        let mut full_semantic: Option<Vec<(usize, String, f32)>> = None;
        let semantic_ran = result.retrievers.contains(&"semantic");
        let mut skills = Vec::with_capacity(found.len());
        for e in found {
            let Some(key) = &e.key else {
                skills.push(e.into_explanation(None, None, None));
                continue;
            };
            let lexical = if result.retrievers.contains(&"lexical") {
                let matches = self.matches(&searcher, trace, key.address)?;
                let at = trace
                    .lexical
                    .iter()
                    .position(|t| t.root == key.root && t.rel == key.rel);
                let score: Score = matches.iter().map(|m| m.score).sum();
                let rank = match at {
                    Some(i) => Some(i + 1),
                    None if matches.is_empty() => None,
                    None => {
                        if full_lexical.is_none() {
                            full_lexical = Some(self.whole_lexical(&searcher, trace)?);
                        }
                        full_lexical.as_ref().and_then(|all| {
                            all.iter()
                                .position(|(r, rel)| *r == key.root && *rel == key.rel)
                                .map(|i| i + 1)
                        })
                    }
                };
                (!trace.clauses.is_empty()).then_some(LexicalPart {
                    rank,
                    considered: at.is_some(),
                    score: at.map_or(score, |i| trace.lexical[i].score),
                    matches,
                })
            } else {
                None
            };
            let semantic_part = if semantic_ran {
                let at = trace
                    .semantic
                    .iter()
                    .position(|t| t.root == key.root && t.rel == key.rel);
                match at {
                    Some(i) => Some(SemanticPart {
                        rank: Some(i + 1),
                        considered: true,
                        score: trace.semantic[i].score,
                    }),
                    None => {
                        if full_semantic.is_none() {
                            full_semantic = Some(self.whole_semantic(
                                semantic,
                                searched,
                                opts.passage_words,
                            )?);
                        }
                        full_semantic.as_ref().and_then(|all| {
                            all.iter()
                                .position(|(r, rel, _)| *r == key.root && *rel == key.rel)
                                .map(|i| SemanticPart {
                                    rank: Some(i + 1),
                                    considered: false,
                                    score: all[i].2,
                                })
                        })
                    }
                }
            } else {
                None
            };
            let fusion = trace
                .fused
                .iter()
                .find(|f| f.key.0 == key.root && f.key.1 == key.rel)
                .map(|f| FusionPart {
                    k: opts.rrf_k,
                    claims: f
                        .claims
                        .iter()
                        .map(|c| FusionClaim {
                            retriever: if c.list == 0 { "lexical" } else { "semantic" },
                            weight: c.weight,
                            rank: c.rank,
                            value: c.value,
                        })
                        .collect(),
                    score: f.score,
                });
            skills.push(e.into_explanation(lexical, semantic_part, fusion));
        }
        for s in &mut skills {
            let matched =
                s.lexical.as_ref().is_some_and(|l| !l.matches.is_empty()) || s.semantic.is_some();
            if s.status == Status::NotReached && !matched {
                s.status = Status::NoMatch;
            }
        }
        Ok(Explanation {
            query: searched.to_owned(),
            searched: searched.to_owned(),
            top_k: opts.top_k,
            retrievers: result.retrievers.clone(),
            ranking,
            second_stage: SecondStage {
                ran: false,
                note: NO_SECOND_STAGE.to_owned(),
            },
            terms,
            stopwords: result.stopwords.clone(),
            omitted: result.omitted.clone(),
            depth: trace.depth,
            skills,
            turn: TurnSummary::default(),
            notes: result.notes.clone(),
        })
    }

    /// The score the search gave `(root, rel)`: fused, else the retriever's that ranked.
    fn run_score(&self, trace: &Trace, root: usize, rel: &str) -> Option<f32> {
        if !trace.fused.is_empty() {
            return trace
                .fused
                .iter()
                .find(|f| f.key.0 == root && f.key.1 == rel)
                .map(|f| f.score as f32);
        }
        trace
            .lexical
            .iter()
            .chain(&trace.semantic)
            .find(|t| t.root == root && t.rel == rel)
            .map(|t| t.score)
    }

    /// The query's clauses that match the document at `addr`, each scored as ranking scores it.
    fn matches(
        &self,
        searcher: &Searcher,
        trace: &Trace,
        addr: DocAddress,
    ) -> Result<Vec<TermMatch>> {
        let reader = searcher.segment_reader(addr.segment_ord);
        let mut out = Vec::new();
        for c in &trace.clauses {
            let Some(postings) = self.postings(reader, &c.clause)? else {
                continue;
            };
            if let Some((norm, tf)) = postings.find(addr.doc_id) {
                out.push(TermMatch {
                    term: c.term.clone(),
                    field: c.field,
                    tf,
                    score: c.weight.score(norm, tf),
                });
            }
        }
        Ok(out)
    }

    /// Every document the lexical query matches, ranked as the search ranks (ids resolved).
    fn whole_lexical(&self, searcher: &Searcher, trace: &Trace) -> Result<Vec<(usize, String)>> {
        let weight: Vec<(Term, Bm25Weight)> = trace
            .clauses
            .iter()
            .map(|c| (c.clause.clone(), c.weight.clone()))
            .collect();
        let n = (searcher.num_docs() as usize).max(1);
        let (mut all, _) = self.top_candidates(searcher, &weight, n)?;
        self.resolve_ids(searcher, &mut all)?;
        Ok(all
            .into_iter()
            .map(|c| (c.root, c.rel.unwrap_or_default()))
            .collect())
    }

    /// Every skill ranked by cosine to `query`, as the semantic retriever ranks them.
    fn whole_semantic(
        &self,
        slot: Option<&SemanticSlot>,
        query: &str,
        words: usize,
    ) -> Result<Vec<(usize, String, f32)>> {
        let Some(sem) = slot.and_then(SemanticSlot::get) else {
            return Ok(Vec::new());
        };
        let total = sem.coverage(self)?.total.max(1);
        Ok(match sem.search(self, query, words, total)? {
            Some((found, _, _)) => found
                .into_iter()
                .map(|c| (c.key.root, c.key.rel, c.score))
                .collect(),
            None => Vec::new(),
        })
    }
}

/// A skill being explained, before its retrievers' parts.
struct Entry {
    id: String,
    name: String,
    key: Option<crate::index::DocKey>,
    status: Status,
    rank: Option<usize>,
    score: Option<f32>,
    held_back: Option<Exclusion>,
    asked: bool,
}

impl Entry {
    fn into_explanation(
        self,
        lexical: Option<LexicalPart>,
        semantic: Option<SemanticPart>,
        fusion: Option<FusionPart>,
    ) -> SkillExplanation {
        SkillExplanation {
            qualified_id: if self.key.is_some() {
                format!("{LOCAL_SOURCE}/{}", self.id)
            } else {
                String::new()
            },
            id: self.id,
            name: self.name,
            asked: self.asked,
            status: self.status,
            rank: self.rank,
            score: self.score,
            lexical,
            semantic,
            fusion,
            held_back: self.held_back,
            turn: None,
        }
    }
}
