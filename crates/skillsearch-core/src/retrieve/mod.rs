//! Lexical retrieval over a [`SkillIndex`]: field-weighted BM25, corpus-adaptive stopwords,
//! deterministic ties, then name-collision shadowing and eligibility gating of the hits.

pub mod embed;
pub mod explain;
pub(crate) mod fusion;
pub mod passage;
pub(crate) mod query;
pub mod semantic;

use crate::corpus::eligibility::{EligibilityEnv, Exclusion};
use crate::corpus::frontmatter::SkillMeta;
use crate::error::Result;
use crate::index::analyzer;
use crate::index::maxscore::{self, TermPostings};
use crate::index::{SegmentColumns, SkillIndex};
use crate::retrieve::explain::{Trace, Traced, TracedClause};
use crate::retrieve::semantic::SemanticSlot;
use serde::Serialize;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use tantivy::query::{Bm25StatisticsProvider, Bm25Weight};
use tantivy::{DocAddress, DocId, Score, Searcher, SegmentReader, Term};

/// A ranked document, before its stored fields are read. `rel` (the id) is looked up in the
/// segment's dictionary only when something needs it before the stored fields are read (a tie
/// across segments, fusion); otherwise it comes with the stored fields.
struct Candidate {
    score: Score,
    root: usize,
    rel: Option<String>,
    addr: DocAddress,
    /// The id's ordinal in its segment's dictionary (ordered like the id within a segment).
    rel_ord: u64,
}

/// A candidate inside one segment, where the id's dictionary ordinal orders like the id.
/// Ordered so that the *worst* candidate is the greatest (the top of a max-heap).
#[derive(Clone, Copy)]
struct SegmentCandidate {
    score: Score,
    root: u64,
    rel_ord: u64,
    doc: DocId,
}

impl Ord for SegmentCandidate {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .score
            .total_cmp(&self.score)
            .then(self.root.cmp(&other.root))
            .then(self.rel_ord.cmp(&other.rel_ord))
    }
}

impl PartialOrd for SegmentCandidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for SegmentCandidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for SegmentCandidate {}

/// Source label of skills from the local index (`[local/<id>]`).
pub const LOCAL_SOURCE: &str = "local";

/// Ranking knobs. The defaults were chosen with `skillsearch eval` (see docs/ranking.md).
#[derive(Debug, Clone, Serialize)]
pub struct SearchOptions {
    pub top_k: usize,
    pub name_weight: f32,
    pub description_weight: f32,
    pub body_weight: f32,
    /// A term in more than this share of documents is dropped from the query...
    pub stopword_df: f32,
    /// The same for the body field.
    pub body_stopword_df: f32,
    /// ...once the corpus has at least this many documents.
    pub stopword_min_docs: u64,
    /// Which retrievers rank. Hybrid and semantic need a semantic retriever
    /// ([`SkillIndex::search_with`]) with every skill embedded; until then the
    /// lexical one answers alone and [`SearchResult::notes`] says why.
    pub retriever: Retriever,
    /// The fusion constant `k` of `w / (k + rank)`.
    pub rrf_k: f32,
    pub lexical_weight: f32,
    pub semantic_weight: f32,
    /// Candidates each retriever contributes to the fusion.
    pub fusion_depth: usize,
    /// The lexical retriever keeps at most this many distinct query terms, the most important
    /// first (`0`: no cap): a bound on what a huge prompt costs (see `query_term_share`).
    pub max_query_terms: usize,
    /// A query of more distinct terms than `short_query_terms` keeps its most important terms
    /// until they hold this share of its total importance (`retrieve::query`); the common
    /// words it drops are what a long prompt costs. 1 keeps every term.
    pub query_term_share: f32,
    /// Queries of at most this many distinct terms keep them all.
    pub short_query_terms: usize,
    /// BM25's `k3`: a term said `q` times in the query weighs `(k3 + 1) q / (k3 + q)`
    /// (infinite: `q`).
    pub query_tf_k3: f32,
    /// The semantic retriever embeds a query of more words as passages of at most this many
    /// words and scores a skill by its nearest passage (`retrieve::passage`); 0 embeds every
    /// query whole.
    pub passage_words: usize,
}

pub use crate::config::Retriever;

impl SearchOptions {
    /// The ranking the settings configure, returning `top_k` hits; the rest are defaults.
    pub fn from_settings(s: &crate::config::Settings, top_k: usize) -> Self {
        SearchOptions {
            top_k,
            name_weight: s.name_weight,
            description_weight: s.description_weight,
            body_weight: s.body_weight,
            retriever: s.retriever,
            rrf_k: s.rrf_k,
            lexical_weight: s.lexical_weight,
            semantic_weight: s.semantic_weight,
            ..SearchOptions::default()
        }
    }
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            top_k: 5,
            name_weight: 1.0,
            description_weight: 2.0,
            body_weight: 1.0,
            stopword_df: 0.5,
            body_stopword_df: 0.5,
            stopword_min_docs: 10,
            retriever: Retriever::Hybrid,
            rrf_k: 5.0,
            lexical_weight: 1.0,
            semantic_weight: 0.9,
            fusion_depth: 30,
            max_query_terms: 64,
            query_term_share: 0.7,
            short_query_terms: 16,
            query_tf_k3: 0.5,
            passage_words: passage::PASSAGE_WORDS,
        }
    }
}

/// One retrieved skill.
#[derive(Debug, Clone, Serialize)]
pub struct Hit {
    /// The skill directory relative to its root: the id `show` and `eval` use.
    pub id: String,
    /// `local/<id>`: the id shown in rendered blocks.
    pub qualified_id: String,
    pub name: String,
    pub description: String,
    pub score: f32,
    pub root: usize,
    pub path: PathBuf,
    pub skill_dir: PathBuf,
    #[serde(skip)]
    pub meta: SkillMeta,
}

impl Hit {
    /// A skill of the local index.
    fn local(id: String, root: usize, path: PathBuf, meta: SkillMeta, score: f32) -> Hit {
        Hit {
            qualified_id: format!("{LOCAL_SOURCE}/{id}"),
            id,
            name: meta.name.clone(),
            description: meta.description.clone(),
            score,
            root,
            skill_dir: path.parent().map(PathBuf::from).unwrap_or_default(),
            path,
            meta,
        }
    }
}

impl Hit {
    /// A skill from a remote source (`<source>/<id>`): no root, and no file until its bundle is
    /// installed (then `path` and `skill_dir` point into the bundle cache).
    pub fn remote(qualified_id: &str, name: &str, description: &str, score: f32) -> Hit {
        Hit {
            id: qualified_id
                .split_once('/')
                .map_or(qualified_id, |(_, id)| id)
                .to_owned(),
            qualified_id: qualified_id.to_owned(),
            name: name.to_owned(),
            description: description.to_owned(),
            score,
            root: usize::MAX,
            path: PathBuf::new(),
            skill_dir: PathBuf::new(),
            meta: SkillMeta::default(),
        }
    }

    /// Whether it comes from the local index.
    pub fn is_local(&self) -> bool {
        self.root != usize::MAX
    }

    /// The source label: `local`, or the remote source's (`hub`).
    pub fn source(&self) -> &str {
        if self.is_local() {
            LOCAL_SOURCE
        } else {
            self.qualified_id
                .split_once('/')
                .map_or("remote", |(s, _)| s)
        }
    }
}

/// A hit that was found but is not offered, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Dropped {
    pub id: String,
    pub name: String,
    pub exclusion: Exclusion,
    /// Its root's precedence (a shadowed copy may share its id with the winner).
    #[serde(skip)]
    pub root: usize,
}

/// The answer to one query.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SearchResult {
    pub hits: Vec<Hit>,
    /// Matching skills held back by gating or by a name collision.
    pub dropped: Vec<Dropped>,
    /// The analysed query terms used, and those dropped as corpus stopwords.
    pub terms: Vec<String>,
    pub stopwords: Vec<String>,
    /// Terms left out of a long query by [`SearchOptions::max_query_terms`], the commonest.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub omitted: Vec<String>,
    /// The retrievers that ranked this answer (`lexical`, `semantic`).
    pub retrievers: Vec<&'static str>,
    /// Why a requested retriever did not run (no model, vectors still being computed, ...).
    pub notes: Vec<String>,
    /// Every term of the query as the analyzer gave them, in order (for the relevance guard,
    /// which would otherwise analyse the query again).
    #[serde(skip)]
    pub analyzed: Vec<String>,
}

/// A lexical query: (term in a field, its BM25 weight over the index times the field's weight
/// and the term's count in the query), ranked by the sum of their scores.
type Lexical = Vec<(Term, Bm25Weight)>;

/// A term in a field, how much its score weighs, and how many documents hold it.
type Clause = (Term, Score, u64);

/// The note when the query's embedding or the vector search failed and lexical answered alone.
fn semantic_failed(e: impl std::fmt::Display) -> String {
    format!("semantic retrieval failed: {e} (lexical only)")
}

impl SkillIndex {
    /// Answers `query` lexically (hybrid and semantic ranking need a [`SemanticSlot`]: see
    /// [`SkillIndex::search_with`]). An empty query returns no hits, not an error; so does an
    /// all-stopword one.
    pub fn search(
        &self,
        query: &str,
        opts: &SearchOptions,
        gate: &EligibilityEnv,
    ) -> Result<SearchResult> {
        self.search_with(query, opts, gate, None)
    }

    /// [`SkillIndex::search`] with the process's semantic retriever, when it has one: the
    /// retrievers `opts` asks for rank (lexical alone when the slot is empty or this index's
    /// vectors are not complete yet; [`SearchResult::notes`] says why).
    pub fn search_with(
        &self,
        query: &str,
        opts: &SearchOptions,
        gate: &EligibilityEnv,
        semantic: Option<&SemanticSlot>,
    ) -> Result<SearchResult> {
        let _searching = self.searching();
        self.search_counted(query, opts, gate, semantic, None)
    }

    /// [`SkillIndex::search_with`] for a caller that already counts itself as searching (a
    /// whole turn, see [`SkillIndex::may_split`]), recording what it does in `trace` when
    /// given one (`explain`): the same run, not a second one.
    pub(crate) fn search_counted(
        &self,
        query: &str,
        opts: &SearchOptions,
        gate: &EligibilityEnv,
        semantic_given: Option<&SemanticSlot>,
        mut trace: Option<&mut Trace>,
    ) -> Result<SearchResult> {
        let searcher = self.searcher();
        if let Some(t) = trace.as_deref_mut() {
            *t = Trace {
                searcher: Some(searcher.clone()),
                ..Trace::default()
            };
        }
        let n_docs = searcher.num_docs();
        let analyzed = analyzer::terms(query);
        let mut counts: BTreeMap<String, u32> = BTreeMap::new();
        for t in &analyzed {
            *counts.entry(t.clone()).or_default() += 1;
        }
        let mut result = SearchResult {
            analyzed,
            ..SearchResult::default()
        };
        let fields = [
            (self.f.name, opts.name_weight, opts.stopword_df),
            (
                self.f.description,
                opts.description_weight,
                opts.stopword_df,
            ),
            (self.f.body, opts.body_weight, opts.body_stopword_df),
        ];
        // Each term's clauses (one per field it occurs in), and how much it can add to a score
        // (see `query`: the longest prompts keep only their most important terms).
        let protected: Vec<String> = query::file_types(query)
            .iter()
            .flat_map(|e| analyzer::terms(e))
            .collect();
        let mut planned: Vec<(&String, Vec<Clause>)> = Vec::new();
        let mut candidates: Vec<query::Candidate> = Vec::new();
        for (term, count) in &counts {
            let mut term_clauses = Vec::new();
            let mut importance = 0.0f32;
            let mut stop = false;
            let factor = query::qtf_factor(*count, opts.query_tf_k3);
            for &(field, weight, max_df) in &fields {
                if weight <= 0.0 {
                    continue;
                }
                let t = Term::from_field_text(field, term);
                let df = searcher.doc_freq(&t).map_err(|e| self.index_err(e))?;
                if df == 0 {
                    continue;
                }
                if n_docs >= opts.stopword_min_docs && df as f32 / n_docs as f32 > max_df {
                    stop = true;
                    continue;
                }
                let idf = (1.0 + (n_docs as f32 - df as f32 + 0.5) / (df as f32 + 0.5)).ln();
                importance += weight * factor * idf;
                term_clauses.push((t, weight * factor, df));
            }
            if !term_clauses.is_empty() {
                candidates.push(query::Candidate {
                    importance,
                    protected: protected.contains(term),
                });
                planned.push((term, term_clauses));
            } else if stop {
                result.stopwords.push(term.clone());
            }
        }
        let (kept, left) = query::plan(
            &candidates,
            opts.query_term_share,
            opts.short_query_terms,
            opts.max_query_terms,
        );
        for i in left {
            result.omitted.push(planned[i].0.clone());
        }
        let mut clauses = Vec::new();
        let mut planned: Vec<Option<(&String, Vec<Clause>)>> =
            planned.into_iter().map(Some).collect();
        for i in kept {
            if let Some((term, term_clauses)) = planned[i].take() {
                result.terms.push(term.clone());
                clauses.extend(term_clauses);
            }
        }
        let want_semantic = opts.retriever != Retriever::Lexical && !query.trim().is_empty();
        let semantic = if want_semantic {
            semantic_given.and_then(SemanticSlot::get)
        } else {
            None
        };
        if want_semantic && semantic.is_none() {
            result.notes.push(match semantic_given.and_then(SemanticSlot::off) {
                Some(why) => format!("semantic retrieval is off: {why}"),
                None => "semantic retrieval is off in this process (no sentence model loaded): lexical only".into(),
            });
        }
        if opts.top_k == 0 || (clauses.is_empty() && semantic.is_none()) {
            if let Some(t) = trace {
                t.result = result.clone();
            }
            return Ok(result);
        }
        // Built even when only the semantic retriever was asked for: if embedding the query
        // fails (endpoint down or slow, a bad vector), the lexical one answers instead.
        let weight: Option<Lexical> = if clauses.is_empty() {
            None
        } else {
            // BM25's statistics as `Bm25Weight::for_terms` gathers them, read once per query and
            // field rather than once per clause, with the document frequency counted above.
            let stats: &dyn Bm25StatisticsProvider = &searcher;
            let total_docs = stats.total_num_docs().map_err(|e| self.index_err(e))?;
            let mut average_norms: Vec<(tantivy::schema::Field, Score)> = Vec::new();
            let mut lexical = Vec::with_capacity(clauses.len());
            for (t, boost, df) in clauses {
                let field = t.field();
                let average = match average_norms.iter().find(|(f, _)| *f == field) {
                    Some(&(_, a)) => a,
                    None => {
                        let tokens = stats
                            .total_num_tokens(field)
                            .map_err(|e| self.index_err(e))?;
                        let a = tokens as Score / total_docs as Score;
                        average_norms.push((field, a));
                        a
                    }
                };
                let w = Bm25Weight::for_one_term_without_explain(df, total_docs, average);
                let w = w.boost_by(boost);
                if let Some(tr) = trace.as_deref_mut() {
                    tr.clauses.push(TracedClause {
                        term: t.value().as_str().unwrap_or_default().to_owned(),
                        field: self.field_label(field),
                        boost,
                        df,
                        clause: t.clone(),
                        weight: w.clone(),
                    });
                }
                lexical.push((t, w));
            }
            Some(lexical)
        };
        // A few more than k, for hits that gating or shadowing drops; grows only if needed.
        let mut limit = opts.top_k + 4;
        if semantic.is_some() {
            limit = limit.max(opts.fusion_depth);
        }
        // The semantic retriever names the generation its addresses belong to the same way.
        let generation = self.generation_of(&searcher);
        let mut semantic_on = semantic.is_some();
        // Hybrid: the query is embedded on another thread while the lexical retriever runs.
        let mut prefetched = None;
        if let (Some(sem), Some(w)) = (semantic.as_ref(), weight.as_ref())
            && opts.retriever == Retriever::Hybrid
            && sem.coverage(self).is_ok_and(|c| c.complete())
        {
            let (lexical, embedded) = std::thread::scope(|s| {
                let embedding =
                    s.spawn(|| sem.query_vectors(query, opts.passage_words).map(|_| ()));
                let lexical = self.top_candidates(&searcher, w, limit);
                (lexical, embedding.join())
            });
            prefetched = Some(lexical?);
            let failed = match embedded {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(_) => Some("the embedding thread panicked".to_owned()),
            };
            if let Some(e) = failed {
                semantic_on = false;
                result.notes.push(semantic_failed(e));
            }
        }
        loop {
            let mut exhausted = true;
            let mut nearest = Vec::new();
            if let Some(sem) = semantic.as_ref().filter(|_| semantic_on) {
                match sem.search(self, query, opts.passage_words, limit) {
                    Ok(Some((found, generation_of, coverage))) if generation_of == generation => {
                        exhausted &= found.len() < limit || coverage.total <= limit;
                        nearest = found;
                    }
                    Ok(Some(_)) => {
                        semantic_on = false;
                        result.notes.push(
                            "semantic retrieval skipped: the index changed during the query".into(),
                        );
                    }
                    Ok(None) => {
                        semantic_on = false;
                        let c = sem.coverage(self).unwrap_or_default();
                        result.notes.push(format!(
                            "semantic retrieval pending: {} of {} skills embedded (lexical only until done)",
                            c.embedded, c.total
                        ));
                    }
                    Err(e) => {
                        semantic_on = false;
                        result.notes.push(semantic_failed(e));
                    }
                }
            }
            let lexical_on =
                weight.is_some() && (!semantic_on || opts.retriever != Retriever::Semantic);
            let mut lexical = match weight.as_ref().filter(|_| lexical_on) {
                Some(w) => {
                    let (found, done) = match prefetched.take() {
                        Some(found) => found,
                        None => self.top_candidates(&searcher, w, limit)?,
                    };
                    exhausted &= done;
                    found
                }
                None => Vec::new(),
            };
            if let Some(tr) = trace.as_deref_mut() {
                tr.depth = limit;
                tr.fused.clear();
                tr.semantic = nearest
                    .iter()
                    .map(|c| Traced {
                        root: c.key.root,
                        rel: c.key.rel.clone(),
                        score: c.score,
                    })
                    .collect();
                self.resolve_ids(&searcher, &mut lexical)?;
                tr.lexical = lexical
                    .iter()
                    .map(|c| Traced {
                        root: c.root,
                        rel: c.rel.clone().unwrap_or_default(),
                        score: c.score,
                    })
                    .collect();
            }
            let ranked: Vec<Candidate> = if semantic_on {
                let sem: Vec<Candidate> = nearest
                    .into_iter()
                    .map(|c| Candidate {
                        score: c.score,
                        root: c.key.root,
                        rel: Some(c.key.rel),
                        addr: c.key.address,
                        rel_ord: 0,
                    })
                    .collect();
                if lexical_on {
                    self.resolve_ids(&searcher, &mut lexical)?;
                    fuse(
                        lexical,
                        sem,
                        opts,
                        trace.as_deref_mut().map(|t| &mut t.fused),
                    )
                } else {
                    sem
                }
            } else {
                lexical
            };
            result.retrievers.clear();
            if lexical_on {
                result.retrievers.push("lexical");
            }
            if semantic_on {
                result.retrievers.push("semantic");
            }
            self.finish(&searcher, ranked, opts, gate, &mut result)?;
            if exhausted || result.hits.len() == opts.top_k {
                if let Some(t) = trace {
                    t.result = result.clone();
                }
                return Ok(result);
            }
            limit *= 4;
        }
    }

    /// Turns ranked candidates into hits: reads their stored fields, drops those a skill of the
    /// same name in a root of higher precedence shadows, and those the gate excludes.
    fn finish(
        &self,
        searcher: &Searcher,
        ranked: Vec<Candidate>,
        opts: &SearchOptions,
        gate: &EligibilityEnv,
        result: &mut SearchResult,
    ) -> Result<()> {
        result.hits.clear();
        result.dropped.clear();
        for Candidate {
            score,
            root,
            rel,
            addr,
            ..
        } in ranked
        {
            if result.hits.len() == opts.top_k {
                break;
            }
            let stored = self.stored_hit(searcher, addr)?;
            let rel = rel.unwrap_or_else(|| stored.rel.clone());
            let meta = stored.meta.clone();
            let path = &stored.path;
            if let Some(exclusion) = self.held_back(searcher, root, &meta, gate)? {
                result.dropped.push(Dropped {
                    id: rel,
                    name: meta.name.clone(),
                    exclusion,
                    root,
                });
                continue;
            }
            result
                .hits
                .push(Hit::local(rel, root, PathBuf::from(path), meta, score));
        }
        Ok(())
    }

    /// Why the skill `meta` of root `root` is not offered, if it is not: a skill of the same
    /// name in a root of higher precedence shadows it, or this machine cannot run it. Only a
    /// skill in a root of higher precedence shadows; two skills of one name in the same root
    /// are both kept (their ids differ) and reported by `index`.
    pub(crate) fn held_back(
        &self,
        searcher: &Searcher,
        root: usize,
        meta: &SkillMeta,
        gate: &EligibilityEnv,
    ) -> Result<Option<Exclusion>> {
        let winner = if self.roots.0.len() > 1 && root > 0 {
            self.shadowing(searcher, &meta.name, root)?
        } else {
            None
        };
        if let Some(w_rel) = winner {
            return Ok(Some(Exclusion {
                code: "shadowed".into(),
                reason: format!(
                    "name `{}` is taken by `{w_rel}` in a root of higher precedence",
                    meta.name
                ),
            }));
        }
        Ok(gate.check(meta).err())
    }

    /// The name `explain` gives a field of the lexical query.
    fn field_label(&self, field: tantivy::schema::Field) -> &'static str {
        if field == self.f.name {
            "name"
        } else if field == self.f.description {
            "description"
        } else if field == self.f.body {
            "body"
        } else {
            "other"
        }
    }

    /// The best `k` documents over all segments by (score desc, root asc, id asc), and whether
    /// that is every match. Ties are broken by precedence and id inside the collection itself,
    /// so the answer never depends on how documents are laid out in segments. Segments are
    /// searched in parallel.
    fn top_candidates(
        &self,
        searcher: &Searcher,
        weight: &Lexical,
        k: usize,
    ) -> Result<(Vec<Candidate>, bool)> {
        let readers = searcher.segment_readers();
        let generation = searcher.generation().generation_id();
        // Segments after the first are searched on the rayon pool (threads that already
        // exist: a spawn per query cost a daemon under load a tenth of its throughput) while
        // this thread searches the first.
        let mut per_segment: Vec<Result<(Vec<Candidate>, bool)>> =
            readers.iter().map(|_| Ok((Vec::new(), true))).collect();
        let one = |ord: usize, r: &SegmentReader| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.segment_top(weight, r, ord as u32, generation, k)
            }))
            .unwrap_or_else(|_| Err(crate::Error::Invalid("a search thread panicked".into())))
        };
        if !self.may_split() {
            for (i, (r, slot)) in readers.iter().zip(per_segment.iter_mut()).enumerate() {
                *slot = one(i, r);
            }
        } else if let Some((first, rest)) = per_segment.split_first_mut() {
            let one = &one;
            rayon::in_place_scope(|s| {
                for (i, (r, slot)) in readers.iter().skip(1).zip(rest).enumerate() {
                    s.spawn(move |_| *slot = one(i + 1, r));
                }
                *first = one(0, &readers[0]);
            });
        }
        let mut all = Vec::new();
        let mut exhausted = true;
        for r in per_segment {
            let (cands, done) = r?;
            exhausted &= done;
            all.extend(cands);
        }
        // By (score desc, root asc, id asc). Within a segment the id's ordinal orders like the
        // id; only runs of equal (score, root) that span segments need the ids themselves.
        let same = |a: &Candidate, b: &Candidate| a.score == b.score && a.root == b.root;
        all.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then(a.root.cmp(&b.root))
                .then(a.addr.segment_ord.cmp(&b.addr.segment_ord))
                .then(a.rel_ord.cmp(&b.rel_ord))
        });
        let mut start = 0;
        while start < all.len().min(k + 1) {
            let end = start
                + all[start..]
                    .iter()
                    .take_while(|c| same(c, &all[start]))
                    .count();
            let run = &mut all[start..end];
            if run
                .iter()
                .any(|c| c.addr.segment_ord != run[0].addr.segment_ord)
            {
                self.resolve_ids(searcher, run)?;
                run.sort_by(|a, b| a.rel.cmp(&b.rel));
            }
            start = end;
        }
        if all.len() > k {
            all.truncate(k);
            exhausted = false;
        }
        Ok((all, exhausted))
    }

    /// Fills in the ids of candidates that have none, from their segments' dictionaries.
    fn resolve_ids(&self, searcher: &Searcher, cands: &mut [Candidate]) -> Result<()> {
        let mut columns: HashMap<u32, Arc<SegmentColumns>> = HashMap::new();
        for c in cands.iter_mut().filter(|c| c.rel.is_none()) {
            let seg = c.addr.segment_ord;
            let column = match columns.entry(seg) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    let generation = searcher.generation().generation_id();
                    e.insert(self.columns(searcher.segment_reader(seg), generation)?)
                }
            };
            let mut rel = String::new();
            if let Some(col) = &column.rel {
                col.ord_to_str(c.rel_ord, &mut rel)
                    .map_err(|e| crate::Error::Format {
                        what: "index",
                        path: self.dir().to_path_buf(),
                        message: e.to_string(),
                    })?;
            }
            c.rel = Some(rel);
        }
        Ok(())
    }

    /// One segment's best `k` by (score desc, root asc, id asc); true when nothing else matched.
    fn segment_top(
        &self,
        weight: &Lexical,
        reader: &SegmentReader,
        seg_ord: u32,
        generation: u64,
        k: usize,
    ) -> Result<(Vec<Candidate>, bool)> {
        let columns = self.columns(reader, generation)?;
        let (root_col, rel_col) = (&columns.root, &columns.rel);
        let alive = reader.alive_bitset();
        let mut heap: BinaryHeap<SegmentCandidate> = BinaryHeap::with_capacity(k + 1);
        let mut terms = Vec::with_capacity(weight.len());
        for (t, w) in weight {
            if let Some(p) = self.postings(reader, t)? {
                terms.push(TermPostings::new(p, w.clone()));
            }
        }
        let complete = maxscore::for_each_pruning(terms, &mut |doc, score| {
            if alive.is_none_or(|a| a.is_alive(doc)) {
                let c = SegmentCandidate {
                    score,
                    root: root_col.first(doc).unwrap_or(0),
                    rel_ord: rel_col
                        .as_ref()
                        .and_then(|c| c.ords().first(doc))
                        .unwrap_or(0),
                    doc,
                };
                if heap.len() < k {
                    heap.push(c);
                } else if heap.peek().is_some_and(|worst| c < *worst) {
                    heap.pop();
                    heap.push(c);
                }
            }
            // A document scoring exactly the k-th best may still win on precedence or id, so
            // the threshold sits just below it (pruning lets through scores above it).
            match heap.peek() {
                Some(worst) if heap.len() == k => worst.score.next_down(),
                _ => Score::MIN,
            }
        });
        let out = heap
            .into_vec()
            .into_iter()
            .map(|c| Candidate {
                score: c.score,
                root: c.root as usize,
                rel: None,
                addr: DocAddress::new(seg_ord, c.doc),
                rel_ord: c.rel_ord,
            })
            .collect();
        Ok((out, complete))
    }

    /// Looks a skill up by id (`<id>` or `local/<id>`), first root first.
    pub fn get(&self, id: &str) -> Result<Option<Hit>> {
        let id = id.strip_prefix("local/").unwrap_or(id);
        let (searcher, keys) = self.snapshot()?;
        for key in keys.iter().cloned() {
            if key.rel == id && key.valid {
                let meta = self.stored(&searcher, key.address)?.meta;
                return Ok(Some(Hit::local(key.rel, key.root, key.path, meta, 0.0)));
            }
        }
        Ok(None)
    }

    /// Every valid skill with its metadata, in precedence order, and whether a higher-precedence
    /// skill of the same name shadows it.
    pub fn skills(&self) -> Result<Vec<(Hit, bool)>> {
        let (searcher, keys) = self.snapshot()?;
        let mut first_root: std::collections::HashMap<String, usize> =
            std::collections::HashMap::new();
        let mut out = Vec::new();
        for key in keys.iter().cloned() {
            if !key.valid {
                continue;
            }
            let meta = self.stored(&searcher, key.address)?.meta;
            let shadowed = *first_root.entry(meta.name.clone()).or_insert(key.root) < key.root;
            out.push((Hit::local(key.rel, key.root, key.path, meta, 0.0), shadowed));
        }
        Ok(out)
    }
}

/// Weighted RRF of the lexical and semantic rankings; a hit's score becomes its fused score.
/// `keep` receives the fusion's arithmetic (`explain`).
fn fuse(
    lexical: Vec<Candidate>,
    semantic: Vec<Candidate>,
    opts: &SearchOptions,
    keep: Option<&mut Vec<crate::retrieve::fusion::Fused<(usize, String)>>>,
) -> Vec<Candidate> {
    let key = |c: &Candidate| (c.root, c.rel.clone().unwrap_or_default());
    let lists = [
        (
            f64::from(opts.lexical_weight),
            lexical.iter().map(key).collect(),
        ),
        (
            f64::from(opts.semantic_weight),
            semantic.iter().map(key).collect(),
        ),
    ];
    let mut by_key: std::collections::HashMap<(usize, String), Candidate> = semantic
        .into_iter()
        .chain(lexical)
        .map(|c| (key(&c), c))
        .collect();
    let fused = crate::retrieve::fusion::rrf(&lists, f64::from(opts.rrf_k));
    if let Some(keep) = keep {
        keep.clone_from(&fused);
    }
    fused
        .into_iter()
        .filter_map(|f| {
            by_key.remove(&f.key).map(|mut c| {
                c.score = f.score as f32;
                c
            })
        })
        .collect()
}
