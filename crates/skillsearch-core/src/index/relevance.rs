//! The lexical relevance guard for injected skills (auto mode). BM25 always ranks *something*
//! first, and a block injected every turn must not carry a skill that merely shares a word with
//! "please greet me". A hit passes when its name and description share enough of the query's
//! terms: at least one that is not generic, and two when the query has four terms or more (the
//! reference's hub guard, applied here to every injected skill). Terms come from the index's own
//! analyzer, so stemming, CJK bigrams and stopwords agree with the ranking.

use crate::index::analyzer;
use std::collections::BTreeSet;
use std::sync::LazyLock;

/// Request words that say nothing about the task.
const REQUEST_WORDS: &[&str] = &[
    "create",
    "make",
    "help",
    "please",
    "use",
    "using",
    "need",
    "want",
    "how",
    "can",
    "no",
    "show",
    "tell",
    "give",
    "get",
    "let",
    "like",
    "would",
    "could",
    "thanks",
    "thank",
    "hello",
    "hi",
    "hey",
    "one",
    "short",
    "sentence",
    "quick",
    "quickly",
    "also",
    "something",
];

/// Words too broad to justify a skill on their own.
const GENERIC: &[&str] = &[
    "extract",
    "review",
    "deploy",
    "deployment",
    "generate",
    "generator",
    "analysis",
    "optimize",
    "optimization",
    "process",
    "processing",
    "data",
    "code",
    "task",
    "file",
    "files",
    "work",
    "build",
    "check",
    "run",
    "write",
    "new",
    "list",
    "report",
];

fn analyzed(words: &[&str]) -> BTreeSet<String> {
    words.iter().flat_map(|w| analyzer::terms(w)).collect()
}

/// [`REQUEST_WORDS`] and [`GENERIC`] as terms, analysed once per process.
static SKIP: LazyLock<BTreeSet<String>> = LazyLock::new(|| analyzed(REQUEST_WORDS));
static GENERIC_TERMS: LazyLock<BTreeSet<String>> = LazyLock::new(|| analyzed(GENERIC));

/// The terms a hit is judged on: those of its name and description.
pub fn hay(name: &str, description: &str) -> BTreeSet<String> {
    analyzer::terms(&format!("{name} {description}"))
        .into_iter()
        .collect()
}

/// The verdict on one hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub passed: bool,
    pub matched: Vec<String>,
    pub required: usize,
}

/// A query's terms, analysed once and checked against many hits.
pub struct Guard {
    terms: Vec<String>,
    generic: &'static BTreeSet<String>,
}

impl Guard {
    pub fn new(query: &str) -> Guard {
        Guard::from_terms(analyzer::terms(query))
    }

    /// [`Guard::new`] for a query already analysed (`terms` as [`analyzer::terms`] gives them).
    pub fn from_terms(terms: Vec<String>) -> Guard {
        let skip = &*SKIP;
        let mut seen = BTreeSet::new();
        let terms = terms
            .into_iter()
            .filter(|t| t.chars().count() >= 2 && !skip.contains(t))
            .filter(|t| seen.insert(t.clone()))
            .collect();
        Guard {
            terms,
            generic: &GENERIC_TERMS,
        }
    }

    /// The query's distinct terms after dropping request words; a guard without terms passes
    /// nothing.
    pub fn term_count(&self) -> usize {
        self.terms.len()
    }

    pub fn check(&self, name: &str, description: &str) -> Verdict {
        self.check_hay(&hay(name, description))
    }

    /// [`Guard::check`] against a hit's [`hay`], computed once for many queries.
    pub fn check_hay(&self, hay: &BTreeSet<String>) -> Verdict {
        let matched: Vec<String> = self
            .terms
            .iter()
            .filter(|t| hay.contains(*t))
            .cloned()
            .collect();
        let required = if self.terms.len() >= 4 { 2 } else { 1 };
        let has_specific = self.terms.iter().any(|t| !self.generic.contains(t));
        let specific_matched = matched.iter().any(|t| !self.generic.contains(t));
        let passed = !self.terms.is_empty()
            && matched.len() >= required
            && (!has_specific || specific_matched);
        Verdict {
            passed,
            matched,
            required,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_talk_does_not_pass() {
        let g = Guard::new("Please greet me in one short sentence.");
        assert!(
            !g.check(
                "browser-automation",
                "Automate a browser: open pages, click, type short text into forms"
            )
            .passed
        );
        assert!(!Guard::new("").check("pdf", "PDF tools").passed);
    }

    #[test]
    fn a_task_passes_on_its_skill() {
        let g = Guard::new("what is our internal template name for quarterly decks");
        let v = g.check(
            "quarterly-decks",
            "Build the quarterly business review slide deck with our internal template",
        );
        assert!(v.passed, "{v:?}");
        assert_eq!(v.required, 2);
        let g = Guard::new("extract tables from a scanned PDF");
        assert!(
            g.check("pdf-tables", "Extract tables from PDF files")
                .passed
        );
    }

    #[test]
    fn generic_words_alone_do_not_pass_and_long_queries_need_two() {
        let g = Guard::new("extract the data");
        assert!(
            g.check("csv", "Extract data from CSV").passed,
            "only generic terms in the query: generic matches count"
        );
        let g = Guard::new("extract data from invoices");
        assert!(
            !g.check("csv", "Extract data from CSV").passed,
            "a specific term exists and none matched"
        );
        let g = Guard::new("convert markdown notes into a polished slide presentation");
        assert!(
            !g.check("notes", "Take meeting notes").passed,
            "one match of five terms"
        );
        assert!(
            g.check("slides", "Turn markdown into a slide presentation")
                .passed
        );
    }

    #[test]
    fn cjk_queries_match_on_bigrams() {
        let g = Guard::new("帮我生成季度报告幻灯片");
        assert!(g.check("季度报告", "生成季度报告幻灯片").passed);
    }
}
