//! Weighted reciprocal-rank fusion (the reference's §1.4): each ranked list contributes
//! `weight / (k + rank)` (rank from 1) to every item it holds; items are collapsed on a key and
//! ordered by the sum, ties keeping first-encounter order. Raw scores are never compared, so
//! retrievers with incomparable scores (BM25, cosine, a hub's own) fuse fairly.

use std::collections::HashMap;
use std::hash::Hash;

/// One fused item: its key, the summed score, which lists contributed (indices, in encounter
/// order), and the list whose single claim on it was the strongest (the representative).
#[derive(Debug, Clone, PartialEq)]
pub struct Fused<K> {
    pub key: K,
    pub score: f64,
    pub contributors: Vec<usize>,
    pub representative: usize,
    /// Each list's claim, in the order they were added into `score` (what `explain` shows).
    pub claims: Vec<Claim>,
}

/// One list's term of a fused score: `weight / (k + rank)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Claim {
    /// The list's index.
    pub list: usize,
    /// The item's rank in that list, from 1.
    pub rank: usize,
    pub weight: f64,
    pub value: f64,
}

/// Fuses `lists` (each `(weight, keys best first)`) with constant `k`; returns every item, best
/// first. A key repeated inside one list counts once, at its best rank.
pub fn rrf<K: Eq + Hash + Clone>(lists: &[(f64, Vec<K>)], k: f64) -> Vec<Fused<K>> {
    let mut out: Vec<Fused<K>> = Vec::new();
    let mut best_claim: Vec<f64> = Vec::new();
    let mut at: HashMap<K, usize> = HashMap::new();
    for (li, (weight, keys)) in lists.iter().enumerate() {
        let mut rank = 0usize;
        for key in keys {
            if let Some(&i) = at.get(key)
                && out[i].contributors.last() == Some(&li)
            {
                continue;
            }
            rank += 1;
            let claim = weight / (k + rank as f64);
            let part = Claim {
                list: li,
                rank,
                weight: *weight,
                value: claim,
            };
            match at.get(key) {
                Some(&i) => {
                    out[i].score += claim;
                    out[i].contributors.push(li);
                    out[i].claims.push(part);
                    if claim > best_claim[i] {
                        best_claim[i] = claim;
                        out[i].representative = li;
                    }
                }
                None => {
                    at.insert(key.clone(), out.len());
                    best_claim.push(claim);
                    out.push(Fused {
                        key: key.clone(),
                        score: claim,
                        contributors: vec![li],
                        representative: li,
                        claims: vec![part],
                    });
                }
            }
        }
    }
    // Stable: equal scores keep first-encounter order.
    out.sort_by(|a, b| b.score.total_cmp(&a.score));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_parity_anchor() {
        // Sources a (w=1.0) = [x, y] and b (w=0.85) = [y, z], k = 60.
        let f = rrf(&[(1.0, vec!["x", "y"]), (0.85, vec!["y", "z"])], 60.0);
        let got: Vec<(&str, String)> = f
            .iter()
            .map(|h| (h.key, format!("{:.8}", h.score)))
            .collect();
        assert_eq!(
            got,
            [
                ("y", "0.03006346".to_string()),
                ("x", "0.01639344".to_string()),
                ("z", "0.01370968".to_string())
            ]
        );
        assert_eq!(f[0].contributors, [0, 1]);
        // y's claims: a 1/62 = 0.01613, b 0.85/61 = 0.01393 -> a represents it.
        assert_eq!(f[0].representative, 0);
        // The claims add up to the score, in order.
        let parts: Vec<(usize, usize)> = f[0].claims.iter().map(|c| (c.list, c.rank)).collect();
        assert_eq!(parts, [(0, 2), (1, 1)]);
        assert_eq!(f[0].claims.iter().map(|c| c.value).sum::<f64>(), f[0].score);
    }

    #[test]
    fn ties_keep_first_encounter_order_and_weights_decide_rank_gaps() {
        let f = rrf(&[(1.0, vec!["a"]), (1.0, vec!["b"])], 7.0);
        assert_eq!(f.iter().map(|h| h.key).collect::<Vec<_>>(), ["a", "b"]);
        let f = rrf(&[(1.0, vec!["a", "b"]), (2.0, vec!["b"])], 7.0);
        assert_eq!(f[0].key, "b");
        assert_eq!(f[0].representative, 1);
        // A key twice in one list counts once.
        let f = rrf(&[(1.0, vec!["a", "a", "b"])], 0.0);
        assert_eq!(f[0].score, 1.0);
        assert_eq!(f[1].score, 0.5);
    }
}
