//! The text analyzer shared by indexing and querying: Unicode word runs (lowercased, at least two
//! characters), CJK runs as overlapping bigrams (`季度进展` → `季度 度进 进展`), ASCII folding and
//! English stemming.

use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, RemoveLongFilter, Stemmer, StopWordFilter, TextAnalyzer, Token,
    TokenStream, Tokenizer,
};

/// English function words, dropped at index and query time. Corpus-adaptive stopwords (terms in
/// most documents) are dropped at query time on top of these; see `search`.
pub const STOPWORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "me",
    "might",
    "more",
    "most",
    "must",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "please",
    "same",
    "shall",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

/// Name under which the analyzer is registered with the index.
pub const ANALYZER: &str = "skill";

/// Han, kana and hangul: scripts written without spaces, indexed as bigrams.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF | 0xF900..=0xFAFF | 0x20000..=0x2FA1F)
}

/// The full analyzer: [`SkillTokenizer`] + ASCII folding + long-token removal + English stemming.
pub fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SkillTokenizer)
        .filter(RemoveLongFilter::limit(48))
        .filter(AsciiFoldingFilter)
        .filter(StopWordFilter::remove(
            STOPWORDS.iter().map(|w| (*w).to_owned()),
        ))
        .filter(Stemmer::new(Language::English))
        .build()
}

/// The analyzer `terms` clones (cheaply: the stop-word set is shared). Building one builds its
/// stop-word set, and `terms` runs for every query and for every hit the relevance guard checks.
static PROTOTYPE: std::sync::LazyLock<TextAnalyzer> = std::sync::LazyLock::new(analyzer);

/// Analyses `text` into terms, in order, with repeats.
pub fn terms(text: &str) -> Vec<String> {
    let mut a = PROTOTYPE.clone();
    let mut stream = a.token_stream(text);
    let mut out = Vec::new();
    while let Some(t) = stream.next() {
        out.push(t.text.clone());
    }
    out
}

#[derive(Clone, Default)]
pub struct SkillTokenizer;

pub struct SkillTokenStream<'a> {
    text: &'a str,
    pos: usize,
    /// Tokens found but not yet emitted: (from, to) byte ranges, lowercased on emit.
    pending: std::collections::VecDeque<(usize, usize)>,
    /// Char boundaries of the current run (reused buffer).
    bounds: Vec<usize>,
    next_position: usize,
    token: Token,
}

impl Tokenizer for SkillTokenizer {
    type TokenStream<'a> = SkillTokenStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> SkillTokenStream<'a> {
        SkillTokenStream {
            text,
            pos: 0,
            pending: std::collections::VecDeque::new(),
            bounds: Vec::new(),
            next_position: 0,
            token: Token::default(),
        }
    }
}

impl SkillTokenStream<'_> {
    fn emit(&mut self, from: usize, to: usize) {
        self.token.text.clear();
        for c in self.text[from..to].chars() {
            self.token.text.extend(c.to_lowercase());
        }
        self.token.offset_from = from;
        self.token.offset_to = to;
        self.token.position = self.next_position;
        self.token.position_length = 1;
        self.next_position += 1;
    }

    /// Queues the tokens of the run starting at `start`; returns where the run ends.
    fn queue_run(&mut self, start: usize, cjk: bool) -> usize {
        self.bounds.clear();
        let mut end = start;
        for (i, ch) in self.text[start..].char_indices() {
            let keep = if cjk {
                is_cjk(ch)
            } else {
                ch.is_alphanumeric() && !is_cjk(ch)
            };
            if !keep {
                break;
            }
            self.bounds.push(start + i);
            end = start + i + ch.len_utf8();
        }
        self.bounds.push(end);
        let n = self.bounds.len() - 1;
        if cjk {
            if n == 1 {
                self.pending.push_back((start, end));
            }
            for i in 0..n.saturating_sub(1) {
                self.pending.push_back((self.bounds[i], self.bounds[i + 2]));
            }
            return end;
        }
        if n < 2 {
            return end;
        }
        // camelCase and ACRONYMWord parts, each also indexed on its own.
        let chars: Vec<char> = self.text[start..end].chars().collect();
        let mut part_start = 0;
        let mut parts = Vec::new();
        for i in 1..n {
            let (prev, cur) = (chars[i - 1], chars[i]);
            let next_lower = chars.get(i + 1).is_some_and(|c| c.is_lowercase());
            if (prev.is_lowercase() && cur.is_uppercase())
                || (prev.is_uppercase() && cur.is_uppercase() && next_lower)
            {
                parts.push((part_start, i));
                part_start = i;
            }
        }
        if !parts.is_empty() {
            parts.push((part_start, n));
            for (a, b) in parts {
                if b - a >= 2 {
                    self.pending.push_back((self.bounds[a], self.bounds[b]));
                }
            }
        }
        self.pending.push_back((start, end));
        end
    }
}

impl TokenStream for SkillTokenStream<'_> {
    fn advance(&mut self) -> bool {
        loop {
            if let Some((a, b)) = self.pending.pop_front() {
                self.emit(a, b);
                return true;
            }
            let rest = &self.text[self.pos..];
            let Some((skip, c)) = rest.char_indices().find(|(_, c)| c.is_alphanumeric()) else {
                self.pos = self.text.len();
                return false;
            };
            let start = self.pos + skip;
            self.pos = self.queue_run(start, is_cjk(c));
        }
    }

    fn token(&self) -> &Token {
        &self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.token
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Vec<String> {
        let mut t = SkillTokenizer;
        let mut s = t.token_stream(text);
        let mut out = vec![];
        while let Some(tok) = s.next() {
            out.push(tok.text.clone());
        }
        out
    }

    #[test]
    fn cjk_bigrams_and_latin_words() {
        assert_eq!(raw("季度进展"), ["季度", "度进", "进展"]);
        assert_eq!(raw("a pdf 表"), ["pdf", "表"]);
        assert_eq!(
            raw("做个PPT讲下季度进展"),
            ["做个", "ppt", "讲下", "下季", "季度", "度进", "进展"]
        );
        assert_eq!(
            raw("Fill a PDF AcroForm with pdftk!"),
            ["fill", "pdf", "acro", "form", "acroform", "with", "pdftk"]
        );
        assert_eq!(raw("Café_au-lait x y42"), ["café", "au", "lait", "y42"]);
        assert_eq!(
            raw("ResearchHelper PDFExtractor mp3"),
            [
                "research",
                "helper",
                "researchhelper",
                "pdf",
                "extractor",
                "pdfextractor",
                "mp3"
            ]
        );
    }

    #[test]
    fn full_analyzer_stems_and_folds() {
        assert_eq!(
            terms("Extracting the tables from scanned documents"),
            ["extract", "tabl", "scan", "document"]
        );
        assert_eq!(terms("café"), ["cafe"]);
        assert!(terms(&"x".repeat(100)).is_empty());
    }

    #[test]
    fn positions_increase() {
        let mut a = analyzer();
        let mut s = a.token_stream("one two 三四五");
        let mut pos = vec![];
        while let Some(t) = s.next() {
            pos.push(t.position);
        }
        assert_eq!(pos, [0, 1, 2, 3]);
    }
}
