//! Ranking metrics at a cut-off of ten, and latency percentiles.
//!
//! A ranked list is given as, for each result in rank order, the indexes of
//! the query's targets that result matches (empty: not relevant). Metrics
//! count *targets*, not chunks: a target split over three chunks is found
//! once, so a list that repeats one target cannot look better than a list
//! that finds several.

use std::collections::HashSet;

/// The cut-off of every ranking metric.
pub const K: usize = 10;

/// The metrics of one query.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryMetrics {
    /// 1/rank of the first relevant result within the top [`K`], else 0.
    pub reciprocal_rank: f64,
    pub ndcg: f64,
    pub recall_1: f64,
    pub recall_5: f64,
    pub recall_10: f64,
    /// 1-based ranks of the results that match any target, within the whole list.
    pub relevant_ranks: Vec<usize>,
}

/// All metrics of one ranked list against `targets` targets.
pub fn score(matches: &[Vec<usize>], targets: usize) -> QueryMetrics {
    QueryMetrics {
        reciprocal_rank: reciprocal_rank(matches),
        ndcg: ndcg(matches, targets),
        recall_1: recall(matches, targets, 1),
        recall_5: recall(matches, targets, 5),
        recall_10: recall(matches, targets, 10),
        relevant_ranks: matches.iter().enumerate().filter(|(_, m)| !m.is_empty()).map(|(i, _)| i + 1).collect(),
    }
}

/// 1/rank of the first result matching any target within the top [`K`].
pub fn reciprocal_rank(matches: &[Vec<usize>]) -> f64 {
    matches.iter().take(K).position(|m| !m.is_empty()).map_or(0.0, |i| 1.0 / (i + 1) as f64)
}

/// nDCG@[`K`] with binary gains: a result gains 1 when it matches a target
/// no earlier result matched (it then credits every target it matches), 0
/// otherwise; the ideal list finds min(targets, K) targets at ranks 1, 2, ….
pub fn ndcg(matches: &[Vec<usize>], targets: usize) -> f64 {
    let ideal: f64 = (0..targets.min(K)).map(discount).sum();
    if ideal == 0.0 {
        return 0.0;
    }
    let mut credited = HashSet::new();
    let mut dcg = 0.0;
    for (i, m) in matches.iter().take(K).enumerate() {
        let mut gain = false;
        for &t in m {
            gain |= credited.insert(t);
        }
        if gain {
            dcg += discount(i);
        }
    }
    dcg / ideal
}

/// 1/log2(rank + 1) for the 0-based position `i` (rank i + 1).
fn discount(i: usize) -> f64 {
    1.0 / ((i + 2) as f64).log2()
}

/// The fraction of the targets matched by at least one of the top `k` results.
pub fn recall(matches: &[Vec<usize>], targets: usize, k: usize) -> f64 {
    if targets == 0 {
        return 0.0;
    }
    let found: HashSet<usize> = matches.iter().take(k).flatten().copied().collect();
    found.len() as f64 / targets as f64
}

/// The nearest-rank percentile `p` (0 < p ≤ 100) of `values`: the smallest
/// value that at least p % of the values are at or below. 0 for no value.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The mean, 0 for no value.
pub fn mean(values: impl IntoIterator<Item = f64>) -> f64 {
    let (sum, n) = values.into_iter().fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 { 0.0 } else { sum / n as f64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-12, "{a} != {b}");
    }

    /// Ranks of a list: `[]` not relevant, `[0]` matches target 0, ….
    fn list(spec: &[&[usize]]) -> Vec<Vec<usize>> {
        spec.iter().map(|m| m.to_vec()).collect()
    }

    #[test]
    fn reciprocal_rank_is_one_over_the_first_relevant_rank_within_ten() {
        // First relevant at rank 3: 1/3.
        close(reciprocal_rank(&list(&[&[], &[], &[1], &[0]])), 1.0 / 3.0);
        close(reciprocal_rank(&list(&[&[0]])), 1.0);
        // Nothing relevant: 0.
        close(reciprocal_rank(&list(&[&[], &[]])), 0.0);
        // Relevant only at rank 11, past the cut-off: 0.
        let mut late = vec![Vec::new(); 10];
        late.push(vec![0]);
        close(reciprocal_rank(&late), 0.0);
        // At rank 10 it still counts: 1/10.
        late.swap(9, 10);
        close(reciprocal_rank(&late), 0.1);
    }

    #[test]
    fn ndcg_credits_each_target_once() {
        // Two targets, found at ranks 1 and 3:
        // DCG = 1/log2(2) + 1/log2(4) = 1 + 0.5 = 1.5;
        // IDCG = 1/log2(2) + 1/log2(3) = 1 + 0.630929753571… = 1.630929753571…;
        // nDCG = 1.5 / 1.630929753571… = 0.919720…
        let v = ndcg(&list(&[&[0], &[], &[1]]), 2);
        close(v, 1.5 / (1.0 + 1.0 / 3f64.log2()));
        assert!((v - 0.919720).abs() < 1e-6, "{v}");
        // Rank 2 is a second chunk of target 0: it gains nothing, so the
        // list scores as if rank 2 were irrelevant (the same 1.5 / 1.6309…).
        close(ndcg(&list(&[&[0], &[0], &[1]]), 2), v);
        // One target at rank 2: DCG = 1/log2(3) = 0.6309…; IDCG = 1; nDCG = 0.6309…
        close(ndcg(&list(&[&[], &[0]]), 1), 1.0 / 3f64.log2());
        // A perfect list: 1.
        close(ndcg(&list(&[&[1], &[0]]), 2), 1.0);
        // One result matching both targets gains 1 once and credits both:
        // DCG = 1; IDCG = 1 + 1/log2(3) = 1.6309…; a later chunk of target 1 gains 0.
        close(ndcg(&list(&[&[0, 1], &[1]]), 2), 1.0 / (1.0 + 1.0 / 3f64.log2()));
        // Nothing found, or no target: 0.
        close(ndcg(&list(&[&[], &[]]), 3), 0.0);
        close(ndcg(&list(&[&[]]), 0), 0.0);
    }

    #[test]
    fn ndcg_ideal_is_capped_at_ten_targets() {
        // Twelve targets, ranks 1..10 each find a new one: DCG = IDCG (ten
        // gains of 1 at ranks 1..10) so nDCG = 1, although recall@10 = 10/12.
        let found: Vec<Vec<usize>> = (0..10).map(|t| vec![t]).collect();
        close(ndcg(&found, 12), 1.0);
        close(recall(&found, 12, 10), 10.0 / 12.0);
    }

    #[test]
    fn recall_counts_targets_in_the_top_k() {
        // Three targets; ranks: 1 → t0, 2 → t0 again, 4 → t2, 6 → t1.
        let l = list(&[&[0], &[0], &[], &[2], &[], &[1]]);
        // Top 1: {t0} → 1/3.
        close(recall(&l, 3, 1), 1.0 / 3.0);
        // Top 5: {t0, t2} → 2/3.
        close(recall(&l, 3, 5), 2.0 / 3.0);
        // Top 10: {t0, t1, t2} → 3/3.
        close(recall(&l, 3, 10), 1.0);
        close(recall(&l, 0, 10), 0.0);
    }

    #[test]
    fn score_gathers_everything_and_the_relevant_ranks() {
        // Two targets; t1 at rank 2, t0 at rank 4.
        // RR = 1/2; DCG = 1/log2(3) + 1/log2(5); IDCG = 1 + 1/log2(3);
        // R@1 = 0, R@5 = 2/2 = 1, R@10 = 1.
        let s = score(&list(&[&[], &[1], &[], &[0]]), 2);
        close(s.reciprocal_rank, 0.5);
        close(s.ndcg, (1.0 / 3f64.log2() + 1.0 / 5f64.log2()) / (1.0 + 1.0 / 3f64.log2()));
        close(s.recall_1, 0.0);
        close(s.recall_5, 1.0);
        close(s.recall_10, 1.0);
        assert_eq!(s.relevant_ranks, [2, 4]);
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=10).map(f64::from).rev().collect();
        // p50 of ten values: rank ceil(0.5·10) = 5 → the 5th smallest, 5.
        close(percentile(&v, 50.0), 5.0);
        // p99: rank ceil(0.99·10) = 10 → the largest, 10.
        close(percentile(&v, 99.0), 10.0);
        // Three values: p50 → rank ceil(1.5) = 2 → 7; p99 → rank 3 → 9.
        close(percentile(&[9.0, 1.0, 7.0], 50.0), 7.0);
        close(percentile(&[9.0, 1.0, 7.0], 99.0), 9.0);
        close(percentile(&[4.0], 99.0), 4.0);
        close(percentile(&[], 50.0), 0.0);
        // Mean of 1, 2, 6 = 9/3 = 3.
        close(mean([1.0, 2.0, 6.0]), 3.0);
        close(mean([]), 0.0);
    }
}
