//! Lexical retrieval over a [`SkillIndex`]: field-weighted BM25, corpus-adaptive stopwords,
//! deterministic ties, then name-collision shadowing and eligibility gating of the hits.

use crate::analyzer;
use crate::error::Result;
use crate::frontmatter::SkillMeta;
use crate::gate::{Exclusion, GateEnv};
use crate::index::SkillIndex;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, Occur, Query, TermQuery};
use tantivy::schema::{IndexRecordOption, Value as _};
use tantivy::{TantivyDocument, Term};

/// Source label of skills from the local index (`[local/<id>]`).
pub const LOCAL_SOURCE: &str = "local";

/// Ranking knobs. The defaults were chosen with `skillsearch eval` (see ARCHITECTURE.md).
#[derive(Debug, Clone, Serialize)]
pub struct SearchOptions {
    pub top_k: usize,
    pub name_weight: f32,
    pub description_weight: f32,
    pub body_weight: f32,
    /// A term in more than this share of documents is dropped from the query...
    pub stopword_df: f32,
    /// ...once the corpus has at least this many documents.
    pub stopword_min_docs: u64,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            top_k: 5,
            name_weight: 1.0,
            description_weight: 2.0,
            body_weight: 1.0,
            stopword_df: 0.5,
            stopword_min_docs: 10,
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

/// A hit that was found but is not offered, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Dropped {
    pub id: String,
    pub name: String,
    pub exclusion: Exclusion,
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
}

impl SkillIndex {
    /// Answers `query`. An empty or all-stopword query returns no hits, not an error.
    pub fn search(
        &self,
        query: &str,
        opts: &SearchOptions,
        gate: &GateEnv,
    ) -> Result<SearchResult> {
        let searcher = self.searcher();
        let n_docs = searcher.num_docs();
        let mut counts: BTreeMap<String, u32> = BTreeMap::new();
        for t in analyzer::terms(query) {
            *counts.entry(t).or_default() += 1;
        }
        let mut result = SearchResult::default();
        let fields = [
            (self.f.name, opts.name_weight),
            (self.f.description, opts.description_weight),
            (self.f.body, opts.body_weight),
        ];
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for (term, count) in &counts {
            let mut used = false;
            let mut stop = false;
            for &(field, weight) in &fields {
                if weight <= 0.0 {
                    continue;
                }
                let t = Term::from_field_text(field, term);
                let df = searcher.doc_freq(&t).map_err(|e| self.index_err(e))?;
                if df == 0 {
                    continue;
                }
                if n_docs >= opts.stopword_min_docs && df as f32 / n_docs as f32 > opts.stopword_df
                {
                    stop = true;
                    continue;
                }
                used = true;
                let q = TermQuery::new(t, IndexRecordOption::WithFreqs);
                clauses.push((
                    Occur::Should,
                    Box::new(BoostQuery::new(Box::new(q), weight * *count as f32)),
                ));
            }
            if used {
                result.terms.push(term.clone());
            } else if stop {
                result.stopwords.push(term.clone());
            }
        }
        if clauses.is_empty() || opts.top_k == 0 {
            return Ok(result);
        }
        let query = BooleanQuery::new(clauses);
        let mut limit = opts.top_k * 3 + 8;
        loop {
            let mut top = searcher
                .search(&query, &TopDocs::with_limit(limit).order_by_score())
                .map_err(|e| self.index_err(e))?;
            let exhausted = top.len() < limit;
            // Deterministic ties: equal scores fall back to root precedence, then id.
            let mut keyed = Vec::with_capacity(top.len());
            for (score, addr) in top.drain(..) {
                let doc: TantivyDocument = searcher.doc(addr).map_err(|e| self.index_err(e))?;
                let root = doc
                    .get_first(self.f.root)
                    .and_then(|v| v.as_u64())
                    .unwrap_or(0) as usize;
                let rel = doc
                    .get_first(self.f.rel)
                    .and_then(|v| v.as_str())
                    .unwrap_or("")
                    .to_owned();
                let path = doc
                    .get_first(self.f.path)
                    .and_then(|v| v.as_str())
                    .unwrap_or("")
                    .to_owned();
                keyed.push((score, root, rel, path, addr));
            }
            keyed.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
            result.hits.clear();
            result.dropped.clear();
            for (score, root, rel, path, addr) in keyed {
                if result.hits.len() == opts.top_k {
                    break;
                }
                let stored = self.stored(&searcher, addr)?;
                let meta = stored.meta;
                // Only a skill in a root of higher precedence shadows; two skills of one name in
                // the same root are both kept (their ids differ) and reported by `index`.
                let winner = self.docs_named(&searcher, &meta.name)?.into_iter().next();
                if let Some((w_root, w_rel)) = winner
                    && w_root < root
                {
                    result.dropped.push(Dropped {
                        id: rel,
                        name: meta.name.clone(),
                        exclusion: Exclusion {
                            code: "shadowed".into(),
                            reason: format!(
                                "name `{}` is taken by `{w_rel}` in a root of higher precedence",
                                meta.name
                            ),
                        },
                    });
                    continue;
                }
                if let Err(exclusion) = gate.check(&meta) {
                    result.dropped.push(Dropped {
                        id: rel,
                        name: meta.name.clone(),
                        exclusion,
                    });
                    continue;
                }
                let path = PathBuf::from(path);
                let skill_dir = path.parent().map(PathBuf::from).unwrap_or_default();
                result.hits.push(Hit {
                    qualified_id: format!("{LOCAL_SOURCE}/{rel}"),
                    id: rel,
                    name: meta.name.clone(),
                    description: meta.description.clone(),
                    score,
                    root,
                    path,
                    skill_dir,
                    meta,
                });
            }
            if result.hits.len() == opts.top_k || exhausted {
                return Ok(result);
            }
            limit *= 4;
        }
    }

    /// Looks a skill up by id (`<id>` or `local/<id>`), first root first.
    pub fn get(&self, id: &str) -> Result<Option<Hit>> {
        let id = id.strip_prefix("local/").unwrap_or(id);
        let searcher = self.searcher();
        for key in self.doc_keys()?.iter().cloned() {
            if key.rel == id && key.valid {
                let meta = self.stored(&searcher, key.address)?.meta;
                let skill_dir = key.path.parent().map(PathBuf::from).unwrap_or_default();
                return Ok(Some(Hit {
                    qualified_id: format!("{LOCAL_SOURCE}/{}", key.rel),
                    id: key.rel,
                    name: meta.name.clone(),
                    description: meta.description.clone(),
                    score: 0.0,
                    root: key.root,
                    path: key.path,
                    skill_dir,
                    meta,
                }));
            }
        }
        Ok(None)
    }

    /// Every valid skill with its metadata, in precedence order, and whether a higher-precedence
    /// skill of the same name shadows it.
    pub fn skills(&self) -> Result<Vec<(Hit, bool)>> {
        let searcher = self.searcher();
        let mut first_root: std::collections::HashMap<String, usize> =
            std::collections::HashMap::new();
        let mut out = Vec::new();
        for key in self.doc_keys()?.iter().cloned() {
            if !key.valid {
                continue;
            }
            let meta = self.stored(&searcher, key.address)?.meta;
            let shadowed = *first_root.entry(meta.name.clone()).or_insert(key.root) < key.root;
            let skill_dir = key.path.parent().map(PathBuf::from).unwrap_or_default();
            out.push((
                Hit {
                    qualified_id: format!("{LOCAL_SOURCE}/{}", key.rel),
                    id: key.rel,
                    name: meta.name.clone(),
                    description: meta.description.clone(),
                    score: 0.0,
                    root: key.root,
                    path: key.path,
                    skill_dir,
                    meta,
                },
                shadowed,
            ));
        }
        Ok(out)
    }
}
