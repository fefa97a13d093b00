//! Ranking metrics as BEIR reports them (trec_eval's definitions): nDCG@k with linear gains,
//! Recall@k and MRR@k, for one query's ranked document ids against its judgements.

use std::collections::HashMap;

/// Relevance judgements of one query: document id → grade (> 0 is relevant).
pub type Judgements = HashMap<String, u32>;

/// nDCG@k: discounted cumulative gain of the top `k` over that of the ideal ranking.
pub fn ndcg_at(ranked: &[String], judged: &Judgements, k: usize) -> f64 {
    let dcg: f64 = ranked
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, id)| f64::from(judged.get(id).copied().unwrap_or(0)) / (i as f64 + 2.0).log2())
        .sum();
    let mut ideal: Vec<u32> = judged.values().copied().filter(|g| *g > 0).collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let idcg: f64 = ideal
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, g)| f64::from(*g) / (i as f64 + 2.0).log2())
        .sum();
    if idcg == 0.0 { 0.0 } else { dcg / idcg }
}

/// Recall@k: the share of the relevant documents found in the top `k`.
pub fn recall_at(ranked: &[String], judged: &Judgements, k: usize) -> f64 {
    let relevant = judged.values().filter(|g| **g > 0).count();
    if relevant == 0 {
        return 0.0;
    }
    let found = ranked
        .iter()
        .take(k)
        .filter(|id| judged.get(*id).is_some_and(|g| *g > 0))
        .count();
    found as f64 / relevant as f64
}

/// MRR@k: the reciprocal rank of the first relevant document in the top `k` (0 if none).
pub fn reciprocal_rank_at(ranked: &[String], judged: &Judgements, k: usize) -> f64 {
    ranked
        .iter()
        .take(k)
        .position(|id| judged.get(id).is_some_and(|g| *g > 0))
        .map_or(0.0, |i| 1.0 / (i as f64 + 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    fn judged(pairs: &[(&str, u32)]) -> Judgements {
        pairs.iter().map(|(id, g)| ((*id).to_owned(), *g)).collect()
    }

    #[test]
    fn ndcg_by_hand() {
        let j = judged(&[("a", 1), ("b", 1)]);
        assert_eq!(ndcg_at(&ids(&["a", "b", "c"]), &j, 10), 1.0);
        // Relevant at ranks 2 and 3: (1/log2 3 + 1/log2 4) / (1 + 1/log2 3).
        let expected = (1.0 / 3f64.log2() + 0.5) / (1.0 + 1.0 / 3f64.log2());
        let got = ndcg_at(&ids(&["x", "a", "b"]), &j, 10);
        assert!((got - expected).abs() < 1e-12, "{got} vs {expected}");
        assert_eq!(ndcg_at(&ids(&["x", "y", "a"]), &j, 2), 0.0);
        assert_eq!(ndcg_at(&ids(&["a"]), &judged(&[("a", 0)]), 10), 0.0);
    }

    #[test]
    fn graded_gains_are_linear() {
        let j = judged(&[("a", 2), ("b", 1)]);
        let got = ndcg_at(&ids(&["b", "a"]), &j, 10);
        let expected = (1.0 + 2.0 / 3f64.log2()) / (2.0 + 1.0 / 3f64.log2());
        assert!((got - expected).abs() < 1e-12);
    }

    #[test]
    fn recall_and_reciprocal_rank() {
        let j = judged(&[("a", 1), ("b", 1), ("z", 0)]);
        let ranked = ids(&["x", "z", "b", "y"]);
        assert_eq!(recall_at(&ranked, &j, 100), 0.5);
        assert_eq!(recall_at(&ranked, &j, 2), 0.0);
        assert!((reciprocal_rank_at(&ranked, &j, 10) - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(reciprocal_rank_at(&ranked, &j, 2), 0.0);
    }
}
