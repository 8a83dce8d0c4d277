//! Top-k over a sum of term scores by MaxScore (Turtle & Flood, 1995): the terms whose
//! maximum scores add up to no more than the current threshold are *non-essential*. A
//! document found only by them cannot pass the threshold, so only the essential terms'
//! postings are walked, and the others are sought to a candidate only while it can still pass.
//!
//! Lexical retrieval ranks by a sum over (query term, field) pairs; the body's terms are common
//! and weigh little, so once the threshold has risen they are non-essential and their long
//! postings are only sought into. Tantivy's block-max WAND, which this replaces, still visited
//! them block by block on corpora whose documents resemble each other (near-duplicates spread
//! over the whole index keep every block's maximum high).
//!
//! Two choices keep the essential terms few, as in Lucene's `MaxScoreBulkScorer`: a term's
//! maximum is the best score any of its postings reaches (from the list's impacts), not BM25's
//! bound for an endless field, and terms become non-essential in order of maximum per posting,
//! so a long list worth little leaves the walk before a short one worth a lot. Together they
//! halved the candidates on the 64K benchmark corpus.
//!
//! A document's score is the sum of its terms' BM25 scores (computed as tantivy's term scorer
//! does) in the order the terms were given, so it does not depend on when or how the document
//! was reached, and equal documents score exactly alike (block-max WAND summed in posting order,
//! which made ties depend on the index's layout).

use std::sync::Arc;

use tantivy::fieldnorm::FieldNormReader;
use tantivy::query::Bm25Weight;
use tantivy::schema::IndexRecordOption;
use tantivy::{DocId, Score, SegmentReader, TERMINATED, Term};

/// One term's postings in one segment, decoded once: the documents in order, each with its
/// field norm id and term frequency, ending in `TERMINATED`. Walking and seeking plain arrays
/// is several times cheaper than tantivy's block cursor, which decodes a block at a time and
/// looks each norm up again; an index keeps the lists of the terms it was asked for (see
/// `SkillIndex::postings`), so common words are decoded once per segment, not once per query.
pub struct Decoded {
    docs: Vec<DocId>,
    norms: Vec<u8>,
    freqs: Vec<u32>,
    /// The (norm id, frequency) pairs no other posting beats on both counts (a shorter field
    /// and more occurrences): BM25 grows with the frequency and shrinks with the field's
    /// length, so the list's best score under any weight is one of theirs.
    impacts: Vec<(u8, u32)>,
}

impl Decoded {
    /// The term's postings in `reader`, `None` when the segment lacks the term. Deleted
    /// documents are included, as in tantivy's postings: the caller filters them.
    pub fn read(reader: &SegmentReader, term: &Term) -> tantivy::Result<Option<Decoded>> {
        let field = term.field();
        let Some(mut blocks) = reader
            .inverted_index(field)?
            .read_block_postings(term, IndexRecordOption::WithFreqs)?
        else {
            return Ok(None);
        };
        let norms = match reader.fieldnorms_readers().get_field(field)? {
            Some(norms) => norms,
            None => FieldNormReader::constant(reader.max_doc(), 1),
        };
        let n = blocks.doc_freq() as usize + 1;
        let mut d = Decoded {
            docs: Vec::with_capacity(n),
            norms: Vec::with_capacity(n),
            freqs: Vec::with_capacity(n),
            impacts: Vec::new(),
        };
        loop {
            let docs = blocks.docs();
            if docs.is_empty() {
                break;
            }
            d.docs.extend_from_slice(docs);
            d.freqs.extend_from_slice(blocks.freqs());
            d.norms
                .extend(docs.iter().map(|&doc| norms.fieldnorm_id(doc)));
            blocks.advance();
        }
        // The highest frequency at each norm id; kept where no shorter field has as many.
        let mut best = [0u32; 256];
        for (&norm, &freq) in d.norms.iter().zip(&d.freqs) {
            let b = &mut best[usize::from(norm)];
            *b = (*b).max(freq);
        }
        let mut most = 0;
        for (norm, &freq) in (0u8..=255).zip(best.iter()) {
            if freq > most {
                d.impacts.push((norm, freq));
                most = freq;
            }
        }
        d.docs.push(TERMINATED);
        d.norms.push(0);
        d.freqs.push(0);
        Ok(Some(d))
    }

    /// `doc`'s (field norm id, term frequency), when the list holds it.
    pub fn find(&self, doc: DocId) -> Option<(u8, u32)> {
        let at = self.docs[..self.len()].binary_search(&doc).ok()?;
        Some((self.norms[at], self.freqs[at]))
    }

    /// How many documents the list holds.
    pub fn len(&self) -> usize {
        self.docs.len() - 1
    }

    /// The heap bytes it holds, for a cache's budget.
    pub fn bytes(&self) -> usize {
        self.docs.capacity() * 4
            + self.norms.capacity()
            + self.freqs.capacity() * 4
            + self.impacts.capacity() * 8
    }
}

/// A cursor over one term's decoded postings, scored by BM25 with the query's weight for it.
pub struct TermPostings {
    postings: Arc<Decoded>,
    at: usize,
    weight: Bm25Weight,
    /// The best score of any posting in the list.
    max: Score,
}

impl TermPostings {
    /// `weight` is the term's BM25 weight over the whole index, already multiplied by the
    /// clause's boost.
    pub fn new(postings: Arc<Decoded>, weight: Bm25Weight) -> TermPostings {
        let max = postings
            .impacts
            .iter()
            .map(|&(norm, freq)| weight.score(norm, freq))
            .fold(0.0, Score::max);
        TermPostings {
            postings,
            at: 0,
            weight,
            max,
        }
    }

    fn doc(&self) -> DocId {
        self.postings.docs[self.at]
    }

    fn advance(&mut self) -> DocId {
        if self.at < self.postings.len() {
            self.at += 1;
        }
        self.doc()
    }

    /// Moves to the first document at or after `target` (a document id, so below
    /// `TERMINATED`): galloping, then a binary search.
    fn seek(&mut self, target: DocId) -> DocId {
        let docs = &self.postings.docs;
        if docs[self.at] >= target {
            return docs[self.at];
        }
        // docs[lo] < target <= docs[hi]; the last entry, TERMINATED, is past every target.
        let mut lo = self.at;
        let mut step = 1;
        let last = docs.len() - 1;
        let hi = loop {
            let probe = (lo + step).min(last);
            if docs[probe] >= target {
                break probe;
            }
            lo = probe;
            step *= 2;
        };
        self.at = lo + 1 + docs[lo + 1..hi].partition_point(|&d| d < target);
        docs[self.at]
    }

    fn score(&self) -> Score {
        let p = &*self.postings;
        self.weight.score(p.norms[self.at], p.freqs[self.at])
    }

    fn max_score(&self) -> Score {
        self.max
    }
}

/// Room for rounding when comparing bounds with the threshold: a bound is a sum in another order
/// than the score's, so a document is only pruned when it falls short by more than this.
fn slack(threshold: Score) -> f64 {
    f64::from(threshold.abs()) * 1e-4 + 1e-6
}

/// Documents per window of the essential walk.
const WINDOW: u32 = 4096;

/// No entry (the end of a document's list of matches in a window).
const NONE: u32 = u32::MAX;

/// Calls `callback(doc, score)` for documents whose score is above the threshold, which starts
/// at `Score::MIN` and becomes whatever `callback` returns, like tantivy's
/// `Weight::for_each_pruning`: every document scoring at least as high as the final threshold
/// is reported. Returns whether every matching document was reported (none was skipped or
/// fell below the threshold).
///
/// The essential terms are walked a window of documents at a time, term after term (as Lucene's
/// `MaxScoreBulkScorer` does): each posting adds its score to its document's slot and links
/// itself into the document's list of matches, so a query of many terms costs a constant per
/// posting rather than a scan over every term per candidate document. A document then goes on
/// only if its essential score plus what the non-essential terms can add may pass the
/// threshold; its score is summed again, exactly, in the given order.
pub fn for_each_pruning(
    terms: Vec<TermPostings>,
    callback: &mut dyn FnMut(DocId, Score) -> Score,
) -> bool {
    // Each term with its position in the given order, by maximum score per posting ascending:
    // the order in which terms become non-essential as the threshold rises.
    let mut s: Vec<(usize, TermPostings)> = terms
        .into_iter()
        .enumerate()
        .filter(|(_, t)| t.doc() != TERMINATED)
        .collect();
    let ratio = |t: &TermPostings| f64::from(t.max_score()) / t.postings.len().max(1) as f64;
    s.sort_by(|a, b| ratio(&a.1).total_cmp(&ratio(&b.1)).then(a.0.cmp(&b.0)));
    let n = s.len();
    // upto[j]: the most that scorers 0..=j can add.
    let upto: Vec<f64> = s
        .iter()
        .scan(0.0f64, |acc, (_, t)| {
            *acc += f64::from(t.max_score());
            Some(*acc)
        })
        .collect();
    let window = WINDOW as usize;
    // Per document of the window: the essential terms' score so far, and its first match.
    let mut sums = vec![0.0f64; window];
    let mut head = vec![NONE; window];
    // Which slots hold a match, a bit each: the window's matched documents are found in order
    // by visiting the set bits, not by a pass over every slot (a short query of rare terms
    // matches a few documents a window, and the pass cost as much as all of its postings).
    let mut touched = vec![0u64; window / 64];
    // The matches: (sorted position of the term, its score, the document's next match).
    let mut links: Vec<(u32, Score, u32)> = Vec::new();
    // The terms found at a candidate: (position in the given order, score).
    let mut found: Vec<(usize, Score)> = Vec::with_capacity(n);
    let mut threshold = Score::MIN;
    // Terms below `first` are non-essential.
    let mut first = 0;
    let mut complete = true;
    // Each window starts at the essential terms' next document; none left when all are
    // non-essential.
    while let Some(start) = s[first..].iter().map(|(_, t)| t.doc()).min() {
        if start == TERMINATED {
            break;
        }
        let end = start.saturating_add(WINDOW).min(TERMINATED);
        // Within the window the split is fixed: the terms below `walked` are sought into, the
        // others were walked (a term that becomes non-essential meanwhile is already counted).
        let walked = first;
        links.clear();
        for (j, (_, t)) in s.iter_mut().enumerate().skip(walked) {
            let mut doc = t.doc();
            while doc < end {
                let slot = (doc - start) as usize;
                let v = t.score();
                touched[slot / 64] |= 1 << (slot % 64);
                sums[slot] += f64::from(v);
                links.push((j as u32, v, head[slot]));
                head[slot] = (links.len() - 1) as u32;
                doc = t.advance();
            }
        }
        let below = if walked > 0 { upto[walked - 1] } else { 0.0 };
        let slots = touched.iter_mut().enumerate().flat_map(|(w, bits)| {
            let mut b = std::mem::take(bits);
            std::iter::from_fn(move || {
                (b != 0).then(|| {
                    let bit = b.trailing_zeros() as usize;
                    b &= b - 1;
                    w * 64 + bit
                })
            })
        });
        for slot in slots {
            let mut link = head[slot];
            head[slot] = NONE;
            let mut sum = std::mem::take(&mut sums[slot]);
            let doc = start + slot as DocId;
            let bar = f64::from(threshold) - slack(threshold);
            if sum + below < bar {
                complete = false;
                continue;
            }
            found.clear();
            while link != NONE {
                let (j, v, next) = links[link as usize];
                found.push((s[j as usize].0, v));
                link = next;
            }
            let mut pruned = false;
            for j in (0..walked).rev() {
                if sum + upto[j] < bar {
                    pruned = true;
                    break;
                }
                let t = &mut s[j].1;
                if t.seek(doc) == doc {
                    let v = t.score();
                    found.push((s[j].0, v));
                    sum += f64::from(v);
                }
            }
            if pruned {
                complete = false;
                continue;
            }
            // Summed in the given order: the same sum for the same terms, whatever the path.
            found.sort_unstable_by_key(|f| f.0);
            let score: Score = found.iter().map(|f| f.1).sum();
            if score > threshold {
                threshold = callback(doc, score);
                let bar = f64::from(threshold) - slack(threshold);
                while first < n && upto[first] < bar {
                    // Its documents past this window are no longer all enumerated.
                    complete &= s[first].1.doc() == TERMINATED;
                    first += 1;
                }
            } else {
                complete = false;
            }
        }
    }
    complete
}

#[cfg(test)]
mod tests {
    use super::{Decoded, TermPostings, for_each_pruning};
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use tantivy::collector::TopDocs;
    use tantivy::query::{Bm25Weight, BooleanQuery, BoostQuery, Occur, Query, TermQuery};
    use tantivy::schema::{Field, IndexRecordOption, Schema, TEXT};
    use tantivy::{DocId, Index, Score, Term, doc};

    const WORDS: [&str; 8] = [
        "alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta",
    ];

    /// 3,000 documents of two text fields from a seeded generator: `distinct` different ones,
    /// repeated in turn (so equal documents are spread over the whole index, and many scores
    /// tie), the body's words more common and more numerous than the title's.
    fn index(distinct: usize) -> (Index, Field, Field, Vec<usize>) {
        let mut b = Schema::builder();
        let title = b.add_text_field("title", TEXT);
        let body = b.add_text_field("body", TEXT);
        let index = Index::create_in_ram(b.build());
        let mut w = index.writer_with_num_threads(1, 15_000_000).unwrap();
        let mut x: u64 = 7;
        let mut next = |m: usize| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) as usize % m
        };
        let docs: Vec<(String, String)> = (0..distinct)
            .map(|_| {
                let t: Vec<&str> = (0..1 + next(3)).map(|_| WORDS[next(5)]).collect();
                let b: Vec<&str> = (0..next(40)).map(|_| WORDS[next(8)]).collect();
                (t.join(" "), b.join(" "))
            })
            .collect();
        let mut which = Vec::new();
        // Three windows of the essential walk (4,096 documents each).
        for i in 0..9000 {
            let (t, b) = &docs[i % distinct];
            w.add_document(doc!(title => t.as_str(), body => b.as_str()))
                .unwrap();
            which.push(i % distinct);
        }
        w.commit().unwrap();
        (index, title, body, which)
    }

    /// The query's clauses (each word in both fields, the title weighing double) and its
    /// scorers over the one segment.
    fn query(
        index: &Index,
        fields: [Field; 2],
        words: &[&str],
    ) -> (BooleanQuery, Vec<TermPostings>) {
        let searcher = index.reader().unwrap().searcher();
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        let mut scorers = Vec::new();
        for word in words {
            for (field, boost) in [(fields[0], 2.0), (fields[1], 1.0)] {
                let term = Term::from_field_text(field, word);
                let weight = Bm25Weight::for_terms(&searcher, std::slice::from_ref(&term))
                    .unwrap()
                    .boost_by(boost);
                if let Some(p) = Decoded::read(searcher.segment_reader(0), &term).unwrap() {
                    scorers.push(TermPostings::new(Arc::new(p), weight));
                }
                let q = TermQuery::new(term, IndexRecordOption::WithFreqs);
                clauses.push((Occur::Should, Box::new(BoostQuery::new(Box::new(q), boost))));
            }
        }
        (BooleanQuery::new(clauses), scorers)
    }

    /// Keeps the best `k` scores and returns the threshold a top-k collector would.
    fn top_k(heap: &mut Vec<Score>, k: usize, score: Score) -> Score {
        heap.push(score);
        heap.sort_by(|a, b| b.total_cmp(a));
        heap.truncate(k);
        if heap.len() == k {
            heap[k - 1].next_down()
        } else {
            Score::MIN
        }
    }

    #[test]
    fn reports_every_document_of_the_top_k_with_its_score() {
        for distinct in [3000, 40] {
            let (index, title, body, _) = index(distinct);
            let searcher = index.reader().unwrap().searcher();
            for (words, k) in [
                (&["alpha", "eta"][..], 5usize),
                (&["beta", "gamma", "theta", "zeta"][..], 10),
                (&["delta"][..], 3),
                (&["eps", "alpha", "beta", "gamma", "delta"][..], 20),
                (&["theta"][..], 5000),
                (&["nothing"][..], 5),
            ] {
                let (boolean, scorers) = query(&index, [title, body], words);
                // Every matching document's score, the slow way.
                let all = searcher
                    .search(&boolean, &TopDocs::with_limit(100_000).order_by_score())
                    .unwrap();
                let want: BTreeMap<DocId, Score> =
                    all.iter().map(|(s, a)| (a.doc_id, *s)).collect();
                let kth = all.get(k - 1).map_or(Score::MIN, |(s, _)| *s);
                let mut heap = Vec::new();
                let mut got: BTreeMap<DocId, Score> = BTreeMap::new();
                let complete = for_each_pruning(scorers, &mut |doc, score| {
                    got.insert(doc, score);
                    top_k(&mut heap, k, score)
                });
                let case = format!("{distinct} distinct, {words:?}, k {k}");
                for (doc, score) in &want {
                    // Every document that can be among the best k (allowing for rounding).
                    if *score >= kth + kth.abs() * 1e-5 {
                        let g = got
                            .get(doc)
                            .unwrap_or_else(|| panic!("{case}: doc {doc} ({score}) missed"));
                        assert!(
                            (g - score).abs() <= score.abs() * 1e-5,
                            "{case}: doc {doc}: {g} vs {score}"
                        );
                    }
                }
                assert!(
                    got.keys().all(|d| want.contains_key(d)),
                    "{case}: a non-match"
                );
                if complete {
                    assert_eq!(
                        got.len(),
                        all.len(),
                        "{case}: complete but not all reported"
                    );
                }
                if all.len() <= k {
                    assert!(complete, "{case}: all reported but not complete");
                }
            }
        }
    }

    #[test]
    fn equal_documents_score_exactly_alike_wherever_they_are() {
        // 40 distinct documents, each 75 times over the index: the threshold rises while the
        // copies of the best are still being found, so they are reached by different paths.
        let (index, title, body, which) = index(40);
        for words in [
            &["alpha", "beta", "eta", "theta"][..],
            &["gamma", "zeta", "eps"][..],
        ] {
            let (_, scorers) = query(&index, [title, body], words);
            let mut heap = Vec::new();
            let mut by_doc: BTreeMap<usize, Vec<Score>> = BTreeMap::new();
            for_each_pruning(scorers, &mut |doc, score| {
                by_doc.entry(which[doc as usize]).or_default().push(score);
                top_k(&mut heap, 100, score)
            });
            let best = by_doc.values().map(Vec::len).max().unwrap_or(0);
            assert!(
                best > 50,
                "{words:?}: copies of the best were not all reported"
            );
            for (d, scores) in by_doc {
                assert!(
                    scores.iter().all(|s| s.to_bits() == scores[0].to_bits()),
                    "{words:?}: copies of document {d} scored {scores:?}"
                );
            }
        }
    }

    #[test]
    fn decoded_postings_hold_every_document_and_seek_like_tantivy() {
        use tantivy::postings::Postings;
        use tantivy::{DocSet, TERMINATED};
        // 3,000 documents: full blocks of 128 and a shorter tail; one word in almost every
        // document, one in few.
        let (index, title, body, _) = index(3000);
        let searcher = index.reader().unwrap().searcher();
        let reader = searcher.segment_reader(0);
        let w = Bm25Weight::for_one_term_without_explain(10, 3000, 5.0);
        for (field, word) in [(body, "alpha"), (title, "alpha"), (body, "theta")] {
            let term = Term::from_field_text(field, word);
            let want = || {
                reader
                    .inverted_index(field)
                    .unwrap()
                    .read_postings(&term, tantivy::schema::IndexRecordOption::WithFreqs)
                    .unwrap()
                    .unwrap()
            };
            let mut all = Vec::new();
            let mut p = want();
            while p.doc() != TERMINATED {
                all.push((p.doc(), p.term_freq()));
                p.advance();
            }
            let decoded = Arc::new(Decoded::read(reader, &term).unwrap().unwrap());
            assert_eq!(decoded.len(), all.len(), "{word}");
            assert!(all.len() > 128, "{word}: fewer than a block");
            let mut t = TermPostings::new(decoded.clone(), w.clone());
            for &(doc, tf) in &all {
                assert_eq!((t.doc(), t.postings.freqs[t.at]), (doc, tf), "{word}");
                t.advance();
            }
            assert_eq!(t.doc(), TERMINATED);
            assert_eq!(t.advance(), TERMINATED, "{word}: advancing past the end");
            // The maximum from the impacts is the best posting's score, under any weight.
            for weight in [
                w.clone(),
                Bm25Weight::for_one_term_without_explain(900, 3000, 40.0),
            ] {
                let t = TermPostings::new(decoded.clone(), weight.clone());
                let norms = reader
                    .fieldnorms_readers()
                    .get_field(field)
                    .unwrap()
                    .unwrap();
                let best = all
                    .iter()
                    .map(|&(doc, tf)| weight.score(norms.fieldnorm_id(doc), tf))
                    .fold(0.0, Score::max);
                assert_eq!(t.max_score(), best, "{word}");
                assert!(
                    best < weight.max_score(),
                    "{word}: no tighter than BM25's bound"
                );
            }
            // Seeks of every stride, against tantivy's own.
            for stride in [1u32, 2, 7, 130, 1000] {
                let (mut t, mut p) = (TermPostings::new(decoded.clone(), w.clone()), want());
                let mut target = 0;
                while target < 3100 {
                    let expect = if p.doc() >= target {
                        p.doc()
                    } else {
                        p.seek(target)
                    };
                    assert_eq!(t.seek(target), expect, "{word}: seek {target} by {stride}");
                    target += stride;
                }
            }
        }
        assert!(
            Decoded::read(reader, &Term::from_field_text(body, "nothing"))
                .unwrap()
                .is_none()
        );
    }
}
