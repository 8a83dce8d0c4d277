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
///
/// A scan by hand: the regular expression it replaced
/// (`(?:^|[\w/*\s`'(\[-])\.([A-Za-z][A-Za-z0-9]{1,5})\b`) took ~3 ms and a few megabytes to
/// compile (Unicode word classes), paid by every fresh process, the hook's every turn included.
/// Matches do not overlap, as the expression's did: the character before a dot must not lie
/// inside the previous match (`archive.tar.gz` names `tar` only).
pub(crate) fn file_types(query: &str) -> Vec<String> {
    // The expression's Unicode `\w` (letters, marks, digits, connectors), from the tables
    // regex-syntax already holds; `\s` is Rust's `is_whitespace` (both Unicode White_Space).
    let is_word = regex_syntax::is_word_character;
    let b = query.as_bytes();
    let mut out = Vec::new();
    // Byte offset where the last match ended; a dot's leading character must start at or after it.
    let mut free = 0;
    for (i, _) in query.match_indices('.') {
        let lead = query[..i].chars().next_back();
        let lead_ok = match lead {
            None => true,
            Some(c) => {
                i - c.len_utf8() >= free
                    && (is_word(c) || c.is_whitespace() || "/*`'([-".contains(c))
            }
        };
        if !lead_ok {
            continue;
        }
        let ext = &b[i + 1..];
        if !ext.first().is_some_and(u8::is_ascii_alphabetic) {
            continue;
        }
        let len = ext
            .iter()
            .take(6)
            .take_while(|c| c.is_ascii_alphanumeric())
            .count();
        // The word must end after the extension: one to five more characters, then no word
        // character (the expression's `\b`; it backtracks, so a longer run never matches).
        let after = query[i + 1 + len..].chars().next();
        if len < 2 || after.is_some_and(is_word) {
            continue;
        }
        out.push(query[i + 1..i + 1 + len].to_ascii_lowercase());
        free = i + 1 + len;
    }
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
        assert_eq!(
            file_types("archive.tar.gz, x.abcdefg, .j, é.Pdf"),
            ["pdf", "tar"]
        );
    }

    /// The scan finds what the regular expression it replaced found, on random text made of
    /// the characters that matter (dots, letters, digits, the accepted leads, others, non-ASCII).
    #[test]
    fn file_types_agree_with_the_regular_expression() {
        let re = regex::Regex::new(r"(?:^|[\w/*\s`'(\[-])\.([A-Za-z][A-Za-z0-9]{1,5})\b").unwrap();
        let by_re = |q: &str| {
            let mut v: Vec<String> = re
                .captures_iter(q)
                .map(|c| c[1].to_ascii_lowercase())
                .collect();
            v.sort();
            v.dedup();
            v
        };
        let alphabet: Vec<char> = "....aZpdfx9_ /*`'([-,;:)é日\u{301}\n".chars().collect();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            let mut q = String::new();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            for _ in 0..(seed % 24) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                q.push(alphabet[(seed % alphabet.len() as u64) as usize]);
            }
            assert_eq!(file_types(&q), by_re(&q), "{q:?}");
        }
    }
}
