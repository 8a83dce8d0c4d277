//! Token accounting: exact counts with the o200k BPE (embedded in `tiktoken-rs`, no network), and
//! the character cost of OpenClaw's skills catalog, so `stats` can show what listing every skill
//! costs next to what a top-k injection costs.

use std::sync::OnceLock;
use tiktoken_rs::CoreBPE;

/// Counts tokens. The BPE tables take ~0.3 s to load, so they are loaded on first use only, and
/// callers that can prove a text fits (bytes ≥ tokens) never load them. A counter made with
/// [`TokenCounter::estimating`] never loads them: it is for a process that answers one turn
/// (the hook), where 0.3 s is more than the whole turn may cost.
#[derive(Default)]
pub struct TokenCounter {
    bpe: OnceLock<Option<CoreBPE>>,
    estimate_only: bool,
    /// Counts of texts seen before, by hash (a long-lived process renders the same popular
    /// skills again and again). Cleared when it grows past [`MEMO_ENTRIES`].
    memo: std::sync::Mutex<std::collections::HashMap<u64, usize>>,
}

/// Most memoised counts kept.
const MEMO_ENTRIES: usize = 20_000;
/// Texts shorter than this are counted directly.
const MEMO_MIN_BYTES: usize = 512;

impl TokenCounter {
    pub fn new() -> Self {
        Self::default()
    }

    /// A counter that estimates `ceil(bytes / 3)`: above the o200k count for English prose
    /// (about 4 bytes a token) and for CJK text (3 bytes a character), so a budget it enforces
    /// holds for them.
    pub fn estimating() -> Self {
        TokenCounter {
            estimate_only: true,
            ..TokenCounter::default()
        }
    }

    /// Whether counts are exact o200k counts.
    pub fn is_exact(&self) -> bool {
        !self.estimate_only
    }

    /// The o200k token count (falls back to the estimate if the tables fail to load).
    pub fn count(&self, text: &str) -> usize {
        if self.estimate_only {
            return text.len().div_ceil(3);
        }
        let key = (text.len() >= MEMO_MIN_BYTES).then(|| {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            text.hash(&mut h);
            h.finish()
        });
        if let Some(k) = key
            && let Some(n) = self.memo.lock().ok().and_then(|m| m.get(&k).copied())
        {
            return n;
        }
        let n = match self.bpe.get_or_init(|| tiktoken_rs::o200k_base().ok()) {
            Some(bpe) => bpe.encode_ordinary(text).len(),
            None => text.len().div_ceil(3),
        };
        if let Some(k) = key
            && let Ok(mut m) = self.memo.lock()
        {
            if m.len() >= MEMO_ENTRIES {
                m.clear();
            }
            m.insert(k, n);
        }
        n
    }

    /// Whether `text` has at most `budget` tokens, without loading the tables when the byte
    /// length already proves it (a BPE token is at least one byte).
    pub fn fits(&self, text: &str, budget: usize) -> bool {
        text.len() <= budget || self.count(text) <= budget
    }
}

/// OpenClaw 2026.9.6's catalog header (`## Skills` and its instructions), in characters.
pub const OPENCLAW_CATALOG_HEADER_CHARS: usize = 238;
/// The preamble through `</available_skills>`, in characters.
pub const OPENCLAW_CATALOG_BASE_CHARS: usize = 368;
/// The fixed markup around one `<skill>` entry, in characters.
pub const OPENCLAW_CATALOG_ENTRY_CHARS: usize = 97;

/// XML-escapes as OpenClaw does for catalog fields.
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// JavaScript string length (UTF-16 code units), which is what OpenClaw's limits count: one
/// per character, two for those beyond U+FFFF. Counted on the UTF-8 bytes (every byte but a
/// continuation byte starts a character; a 4-byte sequence, lead byte 0xF0 or above, is the
/// only kind beyond U+FFFF), which is several times faster than decoding. A chunk of 127 bytes
/// counts at most 254, so its sum runs on byte lanes (ten times faster than summing `usize`s).
pub fn js_len(s: &str) -> usize {
    s.as_bytes()
        .chunks(127)
        .map(|chunk| {
            let units = chunk.iter().fold(0u8, |n, &b| {
                n + u8::from((b as i8) >= -0x40) + u8::from(b >= 0xF0)
            });
            usize::from(units)
        })
        .sum()
}

/// One `<skill>` entry exactly as OpenClaw 2026.9.6 lists it (97 characters of markup).
pub fn openclaw_catalog_entry(name: &str, description: &str, location: &str) -> String {
    format!(
        "  <skill>\n    <name>{}</name>\n    <description>{}</description>\n    <location>{}</location>\n  </skill>\n",
        xml_escape(name),
        xml_escape(description),
        xml_escape(location)
    )
}

/// Characters OpenClaw spends listing these skills: header + base + Σ(97 + name + description +
/// location), after escaping.
pub fn openclaw_catalog_chars<'a>(
    skills: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
) -> usize {
    OPENCLAW_CATALOG_HEADER_CHARS
        + OPENCLAW_CATALOG_BASE_CHARS
        + skills
            .into_iter()
            .map(|(n, d, l)| js_len(&openclaw_catalog_entry(n, d, l)))
            .sum::<usize>()
}

/// Catalogs of at most this many skills are counted exactly; above it a fixed-stride sample of
/// this many entries is counted and scaled up.
pub const CATALOG_EXACT_LIMIT: usize = 5000;

/// Every index of `0..n` (`n` ≤ [`CATALOG_EXACT_LIMIT`]), else about that many at a fixed stride.
pub fn stride_sample(n: usize) -> Vec<usize> {
    (0..n).step_by((n / CATALOG_EXACT_LIMIT).max(1)).collect()
}

/// What OpenClaw's catalog of some skills costs per turn.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct CatalogCost {
    pub skills: usize,
    pub chars: usize,
    /// o200k tokens of the entries (a scaled sample above [`CATALOG_EXACT_LIMIT`] skills), plus
    /// the fixed header and preamble at 4 characters a token.
    pub tokens: f64,
    /// Whether every entry was counted (with an exact counter).
    pub exact: bool,
}

/// The per-turn cost of OpenClaw's catalog of `skills` (name, description, location each).
pub fn openclaw_catalog_cost(skills: &[(&str, &str, &str)], counter: &TokenCounter) -> CatalogCost {
    let chars = openclaw_catalog_chars(skills.iter().copied());
    let sample = stride_sample(skills.len());
    let scale = skills.len() as f64 / sample.len().max(1) as f64;
    let entries: f64 = sample
        .iter()
        .map(|&i| {
            let (n, d, l) = skills[i];
            counter.count(&openclaw_catalog_entry(n, d, l)) as f64
        })
        .sum::<f64>()
        * scale;
    // The fixed header and preamble are not reproduced here; count them at 4 characters a token.
    let fixed = (OPENCLAW_CATALOG_HEADER_CHARS + OPENCLAW_CATALOG_BASE_CHARS) as f64 / 4.0;
    CatalogCost {
        skills: skills.len(),
        chars,
        tokens: entries + fixed,
        exact: counter.is_exact() && sample.len() == skills.len(),
    }
}

/// Characters of `s`, at most `n`, cut on a character boundary.
pub(crate) fn prefix_chars(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_cost_is_exact_up_to_the_limit_and_scaled_above_it() {
        let counter = TokenCounter::estimating();
        let one = ("pdf", "Extract tables from PDF files", "/s/pdf/SKILL.md");
        let fixed = (OPENCLAW_CATALOG_HEADER_CHARS + OPENCLAW_CATALOG_BASE_CHARS) as f64 / 4.0;
        let entry = counter.count(&openclaw_catalog_entry(one.0, one.1, one.2)) as f64;
        let small = openclaw_catalog_cost(&[one; 3], &counter);
        assert_eq!(small.skills, 3);
        assert_eq!(small.tokens, 3.0 * entry + fixed);
        assert_eq!(small.chars, openclaw_catalog_chars([one; 3]));
        // An estimating counter is never exact.
        assert!(!small.exact);
        let many = vec![one; CATALOG_EXACT_LIMIT * 2 + 1];
        let big = openclaw_catalog_cost(&many, &counter);
        assert!(stride_sample(many.len()).len() < many.len());
        assert!((big.tokens - (many.len() as f64 * entry + fixed)).abs() < 1e-6 * big.tokens);
        assert!(!big.exact);
    }

    #[test]
    fn js_len_counts_utf16_code_units() {
        for s in [
            "",
            "plain ascii",
            "caf\u{e9} \u{2014} \u{516d}\u{723b}",
            "emoji \u{1f600}\u{1f680} and \u{10348}",
            "\u{7f}\u{80}\u{7ff}\u{800}\u{ffff}\u{10000}\u{10ffff}",
        ] {
            assert_eq!(js_len(s), s.encode_utf16().count(), "{s:?}");
        }
        assert_eq!(js_len("\u{1f600}"), 2);
        // Long texts, counted a chunk at a time: characters cut at chunk edges, and chunks of
        // only ASCII (the most a chunk counts, 127) or only 4-byte characters.
        for s in [
            "a".repeat(1000),
            "\u{1f600}".repeat(500),
            "caf\u{e9} \u{1f600}\u{516d} x".repeat(300),
        ] {
            assert_eq!(js_len(&s), s.encode_utf16().count());
        }
    }

    #[test]
    fn entry_markup_is_97_characters() {
        assert_eq!(
            js_len(&openclaw_catalog_entry("", "", "")),
            OPENCLAW_CATALOG_ENTRY_CHARS
        );
        assert_eq!(
            openclaw_catalog_chars([("ab", "a<b", "/x/SKILL.md")]),
            238 + 368 + 97 + 2 + 6 + 11
        );
    }

    #[test]
    fn counts_tokens_and_proves_fit_by_bytes() {
        let c = TokenCounter::new();
        assert!(c.fits("short", 10));
        assert!(c.bpe.get().is_none(), "bytes alone proved the fit");
        assert_eq!(c.count("hello world"), 2);
        assert!(!c.fits(&"word ".repeat(50), 10));
        let e = TokenCounter::estimating();
        assert!(!e.is_exact());
        let prose =
            "Extract every table from the scanned invoice, then check each header row. ".repeat(20);
        assert!(
            e.count(&prose) >= c.count(&prose),
            "the estimate stays above the real count"
        );
        let cjk = "季度进展汇报把本季度的进展指标和风险整理成幻灯片".repeat(10);
        assert!(e.count(&cjk) >= c.count(&cjk));
    }
}
