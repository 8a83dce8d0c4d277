//! The text analyzer shared by indexing and querying: Unicode word runs (lowercased, at least two
//! characters), CJK runs as overlapping bigrams (`季度进展` → `季度 度进 进展`), ASCII folding and
//! English stemming.

use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, RemoveLongFilter, Stemmer, TextAnalyzer, Token, TokenStream,
    Tokenizer,
};

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
        .filter(Stemmer::new(Language::English))
        .build()
}

/// Analyses `text` into terms, in order, with repeats.
pub fn terms(text: &str) -> Vec<String> {
    let mut a = analyzer();
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
    /// Byte offsets of the chars of the current CJK run, plus its end offset.
    cjk: Vec<usize>,
    cjk_next: usize,
    next_position: usize,
    token: Token,
}

impl Tokenizer for SkillTokenizer {
    type TokenStream<'a> = SkillTokenStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> SkillTokenStream<'a> {
        SkillTokenStream {
            text,
            pos: 0,
            cjk: Vec::new(),
            cjk_next: 0,
            next_position: 0,
            token: Token::default(),
        }
    }
}

impl SkillTokenStream<'_> {
    fn emit(&mut self, from: usize, to: usize, lowercase: bool) {
        let position = self.next_position;
        self.next_position += 1;
        self.token.text.clear();
        if lowercase {
            for c in self.text[from..to].chars() {
                self.token.text.extend(c.to_lowercase());
            }
        } else {
            self.token.text.push_str(&self.text[from..to]);
        }
        self.token.offset_from = from;
        self.token.offset_to = to;
        self.token.position = position;
        self.token.position_length = 1;
    }
}

impl TokenStream for SkillTokenStream<'_> {
    fn advance(&mut self) -> bool {
        loop {
            if !self.cjk.is_empty() {
                let n_chars = self.cjk.len() - 1;
                let i = self.cjk_next;
                if n_chars == 1 && i == 0 {
                    self.cjk_next = 1;
                    let (a, b) = (self.cjk[0], self.cjk[1]);
                    self.emit(a, b, false);
                    return true;
                }
                if n_chars >= 2 && i + 2 <= n_chars {
                    self.cjk_next += 1;
                    let (a, b) = (self.cjk[i], self.cjk[i + 2]);
                    self.emit(a, b, false);
                    return true;
                }
                self.cjk.clear();
                self.cjk_next = 0;
            }
            let rest = &self.text[self.pos..];
            let Some((skip, c)) = rest.char_indices().find(|(_, c)| c.is_alphanumeric()) else {
                self.pos = self.text.len();
                return false;
            };
            let start = self.pos + skip;
            if is_cjk(c) {
                let mut end = start;
                for (i, ch) in self.text[start..].char_indices() {
                    if !is_cjk(ch) {
                        break;
                    }
                    self.cjk.push(start + i);
                    end = start + i + ch.len_utf8();
                }
                self.cjk.push(end);
                self.pos = end;
                continue;
            }
            let mut end = start;
            let mut n = 0;
            for (i, ch) in self.text[start..].char_indices() {
                if !ch.is_alphanumeric() || is_cjk(ch) {
                    break;
                }
                n += 1;
                end = start + i + ch.len_utf8();
            }
            self.pos = end;
            if n >= 2 {
                self.emit(start, end, true);
                return true;
            }
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
            ["fill", "pdf", "acroform", "with", "pdftk"]
        );
        assert_eq!(raw("Café_au-lait x y42"), ["café", "au", "lait", "y42"]);
    }

    #[test]
    fn full_analyzer_stems_and_folds() {
        assert_eq!(
            terms("Extracting tables from scanned documents"),
            ["extract", "tabl", "from", "scan", "document"]
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
