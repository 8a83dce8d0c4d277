//! Retrieval metrics for labelled queries (the format of `shared/eval`): hit@1, recall@5/10,
//! nDCG@10 with graded gain `2^g - 1`, MRR@10, and latency percentiles.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One labelled query: `relevant` maps a skill id to a grade (1 = relevant, higher = more central).
#[derive(Debug, Clone, Deserialize)]
pub struct LabelledQuery {
    pub id: String,
    pub query: String,
    pub relevant: BTreeMap<String, u32>,
}

/// Parses JSONL; an error names the 1-based line.
pub fn parse_queries(text: &str) -> Result<Vec<LabelledQuery>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let q: LabelledQuery =
            serde_json::from_str(line).map_err(|e| format!("line {}: {e}", i + 1))?;
        out.push(q);
    }
    Ok(out)
}

/// Per-query scores.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct QueryScore {
    pub hit1: f64,
    pub recall5: f64,
    pub recall10: f64,
    pub ndcg10: f64,
    pub mrr10: f64,
}

/// Scores one ranked list of ids against its labels.
pub fn score(ranked: &[String], relevant: &BTreeMap<String, u32>) -> QueryScore {
    let rel = |id: &String| relevant.get(id).copied().unwrap_or(0);
    let n_rel = relevant.values().filter(|g| **g > 0).count();
    if n_rel == 0 {
        return QueryScore::default();
    }
    let found =
        |k: usize| ranked.iter().take(k).filter(|id| rel(id) > 0).count() as f64 / n_rel as f64;
    let gain = |g: u32| 2f64.powi(g as i32) - 1.0;
    let dcg: f64 = ranked
        .iter()
        .take(10)
        .enumerate()
        .map(|(i, id)| gain(rel(id)) / ((i + 2) as f64).log2())
        .sum();
    let mut ideal: Vec<u32> = relevant.values().copied().filter(|g| *g > 0).collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let idcg: f64 = ideal
        .iter()
        .take(10)
        .enumerate()
        .map(|(i, g)| gain(*g) / ((i + 2) as f64).log2())
        .sum();
    let mrr = ranked
        .iter()
        .take(10)
        .position(|id| rel(id) > 0)
        .map_or(0.0, |p| 1.0 / (p + 1) as f64);
    QueryScore {
        hit1: f64::from(u8::from(ranked.first().is_some_and(|id| rel(id) > 0))),
        recall5: found(5),
        recall10: found(10),
        ndcg10: if idcg > 0.0 { dcg / idcg } else { 0.0 },
        mrr10: mrr,
    }
}

/// What is wrong with a query file for this corpus, one line each: queries whose relevant
/// skills include ids the corpus does not have (they can only count as misses: a file made for
/// another corpus, or a skill that moved), and queries with no relevant skill (they score 0).
pub fn label_warnings<'a>(
    queries: &[LabelledQuery],
    ids: impl Iterator<Item = &'a str>,
) -> Vec<String> {
    let ids: std::collections::HashSet<&str> = ids.collect();
    let mut unknown: Vec<String> = Vec::new();
    let mut unlabelled: Vec<String> = Vec::new();
    for q in queries {
        let missing: Vec<&str> = q
            .relevant
            .keys()
            .map(String::as_str)
            .filter(|id| !ids.contains(id))
            .collect();
        if !missing.is_empty() {
            unknown.push(format!("{} ({})", q.id, missing.join(", ")));
        }
        if !q.relevant.values().any(|g| *g > 0) {
            unlabelled.push(q.id.clone());
        }
    }
    let some = |v: &[String]| {
        let mut s = v.iter().take(5).cloned().collect::<Vec<_>>().join("; ");
        if v.len() > 5 {
            s.push_str(&format!("; and {} more", v.len() - 5));
        }
        s
    };
    let mut out = Vec::new();
    if !unknown.is_empty() {
        out.push(format!(
            "{} of {} queries name relevant skills that are not in the corpus, which count as misses: {}",
            unknown.len(),
            queries.len(),
            some(&unknown)
        ));
    }
    if !unlabelled.is_empty() {
        out.push(format!(
            "{} of {} queries have no relevant skill and score 0: {}",
            unlabelled.len(),
            queries.len(),
            some(&unlabelled)
        ));
    }
    out
}

/// The summary `eval` prints; key names are the JSON contract.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    #[serde(rename = "hit@1")]
    pub hit1: f64,
    #[serde(rename = "recall@5")]
    pub recall5: f64,
    #[serde(rename = "recall@10")]
    pub recall10: f64,
    #[serde(rename = "ndcg@10")]
    pub ndcg10: f64,
    #[serde(rename = "mrr@10")]
    pub mrr10: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub queries: usize,
    pub skills: usize,
    /// The retrievers that ranked (`lexical`, `semantic`, `hybrid`): what actually ran, which
    /// is lexical when no sentence model was available.
    pub retriever: String,
}

/// Averages per-query scores; latencies are per query in milliseconds.
pub fn summarise(scores: &[QueryScore], latencies_ms: &[f64], skills: usize) -> Summary {
    let n = scores.len().max(1) as f64;
    let avg = |f: fn(&QueryScore) -> f64| scores.iter().map(f).sum::<f64>() / n;
    Summary {
        hit1: avg(|s| s.hit1),
        recall5: avg(|s| s.recall5),
        recall10: avg(|s| s.recall10),
        ndcg10: avg(|s| s.ndcg10),
        mrr10: avg(|s| s.mrr10),
        p50_ms: percentile(latencies_ms, 50.0),
        p95_ms: percentile(latencies_ms, 95.0),
        queries: scores.len(),
        skills,
        retriever: String::new(),
    }
}

/// Nearest-rank percentile; 0 for no samples.
pub fn percentile(samples: &[f64], p: f64) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn metrics_on_a_known_ranking() {
        let rel = BTreeMap::from([("a".to_owned(), 2), ("b".to_owned(), 1)]);
        let s = score(&ids(&["x", "a", "y", "b"]), &rel);
        assert_eq!(s.hit1, 0.0);
        assert_eq!(s.recall5, 1.0);
        assert_eq!(s.mrr10, 0.5);
        let dcg = 3.0 / 3f64.log2() + 1.0 / 5f64.log2();
        let idcg = 3.0 + 1.0 / 3f64.log2();
        assert!((s.ndcg10 - dcg / idcg).abs() < 1e-12);
        let s = score(&ids(&["b"]), &rel);
        assert_eq!((s.hit1, s.recall10, s.mrr10), (1.0, 0.5, 1.0));
    }

    #[test]
    fn labels_that_do_not_fit_the_corpus_are_reported() {
        let qs = parse_queries(concat!(
            "{\"id\":\"a\",\"query\":\"q\",\"relevant\":{\"pdf\":1}}\n",
            "{\"id\":\"b\",\"query\":\"q\",\"relevant\":{\"pdf\":1,\"gone\":2}}\n",
            "{\"id\":\"c\",\"query\":\"q\",\"relevant\":{}}\n",
        ))
        .unwrap();
        let w = label_warnings(&qs, ["pdf", "git"].into_iter());
        assert_eq!(
            w,
            [
                "1 of 3 queries name relevant skills that are not in the corpus, which count as misses: b (gone)",
                "1 of 3 queries have no relevant skill and score 0: c",
            ]
        );
        assert!(label_warnings(&qs[..1], ["pdf"].into_iter()).is_empty());
    }

    #[test]
    fn percentiles_and_parse_errors_name_the_line() {
        assert_eq!(percentile(&[5.0, 1.0, 3.0, 2.0, 4.0], 50.0), 3.0);
        assert_eq!(
            percentile(
                &[1.0; 20].iter().copied().chain([9.0]).collect::<Vec<_>>(),
                95.0
            ),
            1.0
        );
        let err = parse_queries("{\"id\":\"1\",\"query\":\"q\",\"relevant\":{\"a\":1}}\nnot json")
            .unwrap_err();
        assert!(err.starts_with("line 2:"), "{err}");
    }
}
