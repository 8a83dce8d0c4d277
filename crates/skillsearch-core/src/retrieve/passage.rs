//! A long prompt as passages for the semantic retriever.
//!
//! A sentence encoder reads a few hundred tokens and averages them into one vector: a 180-word
//! task description becomes the mean of everything it mentions, and its later part is cut off.
//! Embedded as passages of a few sentences each, and a skill scored by the passage nearest to
//! it, the prompt keeps every part it states (docs/ranking.md, "Long prompts as passages").

/// Words of one passage at most (cross-validated on skillsbench-dev, docs/ranking.md).
pub const PASSAGE_WORDS: usize = 60;

/// Passages of one prompt at most, the first ones: what embedding a query costs stays near
/// what one whole query cost (the model reads at most 256 tokens of a text; three passages of
/// 60 words are about as many, spread over the cores). A longer prompt's later words still
/// reach the lexical retriever.
pub const MAX_PASSAGES: usize = 3;

/// The passages of `query`: its sentences (ended by `.`, `!`, `?`, `:` or `;` before
/// whitespace, or by a line break) packed in order into runs of at most `words` words; a
/// longer sentence is cut into runs of `words` words. At most [`MAX_PASSAGES`], the first
/// ones. A query of up to `words` words is one passage, the query itself (trimmed): short
/// queries are embedded exactly as before. Each passage is a slice of `query`.
pub fn passages(query: &str, words: usize) -> Vec<&str> {
    let words = words.max(1);
    let trimmed = query.trim();
    if trimmed.split_whitespace().nth(words).is_none() {
        return if trimmed.is_empty() {
            Vec::new()
        } else {
            vec![trimmed]
        };
    }
    let mut out = Vec::new();
    // The passage being packed: its byte span and word count.
    let mut open: Option<(usize, usize, usize)> = None;
    for (start, end, n) in pieces(query, words) {
        match open {
            Some((s, _, w)) if w + n <= words => open = Some((s, end, w + n)),
            _ => {
                if let Some((s, e, _)) = open.take() {
                    out.push(query[s..e].trim());
                    if out.len() == MAX_PASSAGES {
                        return out;
                    }
                }
                open = Some((start, end, n));
            }
        }
    }
    if let Some((s, e, _)) = open {
        out.push(query[s..e].trim());
    }
    out
}

/// The sentences of `text` as (start, end, words), a sentence of more than `words` words cut
/// into runs of `words`; sentences without a word are skipped.
fn pieces(text: &str, words: usize) -> Vec<(usize, usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut it = text.char_indices().peekable();
    while let Some((i, ch)) = it.next() {
        let next_blank = it.peek().is_none_or(|(_, c)| c.is_whitespace());
        if ch == '\n' || (matches!(ch, '.' | '!' | '?' | ':' | ';') && next_blank) {
            let end = i + ch.len_utf8();
            cut(text, start, end, words, &mut out);
            start = end;
        }
    }
    cut(text, start, text.len(), words, &mut out);
    out
}

/// Pushes `text[start..end]` as runs of at most `words` words.
fn cut(text: &str, start: usize, end: usize, words: usize, out: &mut Vec<(usize, usize, usize)>) {
    let mut run: Option<(usize, usize, usize)> = None;
    let mut in_word = false;
    for (i, ch) in text[start..end].char_indices() {
        let i = start + i;
        if ch.is_whitespace() {
            in_word = false;
            continue;
        }
        if !in_word {
            in_word = true;
            match &mut run {
                Some((_, _, n)) if *n < words => *n += 1,
                _ => {
                    if let Some(r) = run.take() {
                        out.push(r);
                    }
                    run = Some((i, i, 1));
                }
            }
        }
        if let Some((_, e, _)) = &mut run {
            *e = i + ch.len_utf8();
        }
    }
    out.extend(run);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> usize {
        s.split_whitespace().count()
    }

    #[test]
    fn a_short_query_is_one_passage_the_query_itself() {
        assert_eq!(
            passages("  convert a pdf to text.  ", 80),
            ["convert a pdf to text."]
        );
        assert!(passages(" \n\t ", 80).is_empty());
        let exactly = vec!["w"; 80].join(" ");
        assert_eq!(passages(&exactly, 80), [exactly.as_str()]);
    }

    #[test]
    fn sentences_are_packed_in_order_up_to_the_word_budget() {
        let q = "One two three. Four five: six seven\nEight nine ten! Eleven?";
        let three = [
            "One two three.",
            "Four five: six seven",
            "Eight nine ten! Eleven?",
        ];
        assert_eq!(passages(q, 4), three);
        // The passages after the first MAX_PASSAGES are left to the lexical retriever.
        assert_eq!(passages(&format!("{q} twelve"), 4), three);
        // Dots inside a word (file names, versions) do not end a sentence.
        assert_eq!(
            passages("read data.csv and v1.2 files now. then plot", 6),
            ["read data.csv and v1.2 files now.", "then plot"]
        );
    }

    #[test]
    fn a_long_sentence_is_cut_and_the_number_of_passages_is_bounded() {
        let one = vec!["word"; 2_000].join(" ");
        let p = passages(&one, 80);
        assert_eq!(p.len(), MAX_PASSAGES);
        assert!(p.iter().all(|s| words(s) == 80));
        let huge = "many words here. ".repeat(40_000);
        let p = passages(&huge, 80);
        assert_eq!(p.len(), MAX_PASSAGES);
        assert!(p.iter().all(|s| words(s) <= 80 && words(s) > 70));
    }

    #[test]
    fn one_word_lines_punctuation_and_cjk_hold_every_word_once() {
        let lines = (0..150)
            .map(|i| format!("w{i}"))
            .collect::<Vec<_>>()
            .join("\n");
        let p = passages(&lines, 60);
        assert_eq!(p.iter().map(|s| words(s)).collect::<Vec<_>>(), [60, 60, 30]);
        assert!(p[0].starts_with("w0\nw1\n") && p[2].ends_with("w149"));
        let marks = "... ;;; !!! ??? ::: ".repeat(20);
        let p = passages(&marks, 60);
        assert_eq!(p.iter().map(|s| words(s)).collect::<Vec<_>>(), [60, 40]);
        let cjk = "把这个文件转换成表格。然后画图！ 数据在 data.csv 里面; 请用 Python. ".repeat(6);
        let p = passages(&cjk, 20);
        assert_eq!(p.iter().map(|s| words(s)).sum::<usize>(), words(&cjk));
        assert!(p.iter().all(|s| !s.is_empty() && cjk.contains(s)));
    }
}
