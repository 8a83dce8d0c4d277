//! Which of a query's terms the lexical retriever uses, and how much each weighs (see
//! docs/ranking.md, "Long prompts").
//!
//! A term's weight in the query is its count in the query saturated like BM25's `k3` factor,
//! `(k3 + 1) · qtf / (k3 + qtf)`: a word the prompt repeats weighs more than one it mentions
//! once, but a word said ten times is not ten times as important. Its *importance* is that
//! factor times the most it can add to a document's score, `Σ_fields w_f · idf_f`.
//!
//! A short query keeps every term. A long one keeps its most important terms until they hold
//! `share` of the query's total importance: the tail it drops is the common words, whose long
//! postings are what a long prompt costs, and which together add little to any score. Terms that
//! name a file type (`report.xlsx`, `.pdf`) are always kept: a prompt's file formats say which
//! skill it needs, yet they are common words in the corpus.

use regex::Regex;
use std::sync::LazyLock;

/// BM25's query-term-frequency factor, `(k3 + 1) · qtf / (k3 + qtf)`; 1 for a term said once.
/// `k3 = ∞` is the raw count.
pub(crate) fn qtf_factor(qtf: u32, k3: f32) -> f32 {
    let q = qtf as f32;
    if !k3.is_finite() {
        return q;
    }
    (k3 + 1.0) * q / (k3 + q)
}

/// One distinct query term as the planner sees it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Candidate {
    /// The most this term can add to a document's score, up to BM25's constant `k1 + 1`:
    /// its query factor times `Σ_fields w_f · idf_f`.
    pub importance: f32,
    /// It names a file type in the query (kept whatever its weight).
    pub protected: bool,
}

/// The indices of the terms to keep, in the given order, and of those left out.
///
/// Terms are taken by importance, highest first (ties by position), until the kept ones hold
/// `share` of the total importance, and at most `max_terms` of them (`0`: no cap). A query of
/// at most `short` terms keeps them all (up to the cap). Protected terms are always kept.
pub(crate) fn plan(
    terms: &[Candidate],
    share: f32,
    short: usize,
    max_terms: usize,
) -> (Vec<usize>, Vec<usize>) {
    let mut order: Vec<usize> = (0..terms.len()).collect();
    order.sort_by(|&a, &b| {
        terms[b]
            .protected
            .cmp(&terms[a].protected)
            .then(terms[b].importance.total_cmp(&terms[a].importance))
            .then(a.cmp(&b))
    });
    let total: f64 = terms.iter().map(|t| f64::from(t.importance)).sum();
    let goal = total * f64::from(share.clamp(0.0, 1.0));
    let cap = if max_terms == 0 {
        usize::MAX
    } else {
        max_terms
    };
    let mut keep = vec![false; terms.len()];
    let mut held = 0.0f64;
    for (n, &i) in order.iter().enumerate() {
        if n >= cap {
            break;
        }
        let needed = terms.len() <= short || terms[i].protected || held < goal;
        if !needed {
            break;
        }
        keep[i] = true;
        held += f64::from(terms[i].importance);
    }
    let (kept, left): (Vec<usize>, Vec<usize>) = (0..terms.len()).partition(|&i| keep[i]);
    (kept, left)
}

/// File extensions named in `query` (`input.mp4`, `.xlsx`, `*.pdf`), lowercased: a dot after a
/// word character, slash, star or at the start of a word, then a letter and up to five more
/// letters or digits, ending the word.
pub(crate) fn file_types(query: &str) -> Vec<String> {
    static EXT: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?:^|[\w/*\s`'(\[-])\.([A-Za-z][A-Za-z0-9]{1,5})\b").expect("valid regex")
    });
    let mut out: Vec<String> = EXT
        .captures_iter(query)
        .map(|c| c[1].to_ascii_lowercase())
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::{Candidate, file_types, plan, qtf_factor};

    fn c(importance: f32) -> Candidate {
        Candidate {
            importance,
            protected: false,
        }
    }

    #[test]
    fn repeats_count_more_but_saturate() {
        assert_eq!(qtf_factor(1, 1.2), 1.0);
        assert!(qtf_factor(3, 1.2) > qtf_factor(2, 1.2));
        assert!(qtf_factor(2, 1.2) > 1.0);
        // Never more than k3 + 1, however often the word is repeated.
        assert!(qtf_factor(1000, 1.2) < 2.2);
        assert_eq!(qtf_factor(7, f32::INFINITY), 7.0);
    }

    #[test]
    fn a_short_query_keeps_every_term() {
        let terms = [c(5.0), c(0.01), c(0.02)];
        assert_eq!(plan(&terms, 0.5, 16, 0).0, [0, 1, 2]);
    }

    #[test]
    fn a_long_query_drops_its_least_important_tail() {
        // 20 terms: two that matter, eighteen worth little.
        let mut terms = vec![c(10.0), c(8.0)];
        terms.extend((0..18).map(|_| c(0.1)));
        let (kept, left) = plan(&terms, 0.9, 16, 0);
        assert_eq!(kept, [0, 1]);
        assert_eq!(left.len(), 18);
        // A share of 1 keeps everything; the cap still applies.
        assert_eq!(plan(&terms, 1.0, 16, 0).0.len(), 20);
        assert_eq!(plan(&terms, 1.0, 16, 5).0, [0, 1, 2, 3, 4]);
    }

    #[test]
    fn a_protected_term_is_kept_however_light() {
        let mut terms = vec![c(10.0), c(8.0)];
        terms.extend((0..18).map(|_| c(0.1)));
        terms[7].protected = true;
        let (kept, _) = plan(&terms, 0.9, 16, 0);
        assert_eq!(kept, [0, 1, 7]);
    }

    #[test]
    fn file_types_are_found() {
        assert_eq!(
            file_types("Read `/root/input.mp4`, write report.XLSX and all *.pdf or .docx files."),
            ["docx", "mp4", "pdf", "xlsx"]
        );
        // Versions, decimals and abbreviations are not file types.
        assert!(file_types("python 3.11, a 2.5x speedup, e.g. this").is_empty());
    }
}
