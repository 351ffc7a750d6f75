//! `mmr`: maximal marginal relevance (Carbonell and Goldstein), so that ten
//! near-identical chunks of one file do not crowd out everything else.
//!
//! The order is built greedily: the next candidate is the one maximising
//! `lambda · relevance − (1 − lambda) · max similarity to those already
//! chosen`, the earliest incoming one on a tie. `lambda = 1` keeps the
//! incoming order, `lambda = 0` only avoids repetition.
//!
//! Relevance comes from the incoming rank alone (a reranker sees no store
//! distance): `1 − (rank − 1) / n` for rank 1..n, so 1 for the first
//! candidate down to `1/n` for the last. It is linear on purpose: it spans
//! the same `[0, 1]` range as the cosine similarity it is traded against, so
//! `lambda` means the same thing whatever the number of candidates.
//! A reciprocal-rank relevance `1 / (k + rank)` would squeeze all candidates
//! into `[1/(k+n), 1/(k+1)]` (about 0.016 to 0.006 for k = 60), and any
//! similarity at all would then outweigh the ranking.
//!
//! Similarity is the cosine of the candidates' sub-token frequency vectors
//! (0 when either has no token). The scores returned are `n − position` in
//! the MMR order (n for the first, 1 for the last), so sorting by them gives
//! that order; they say nothing about relevance beyond it, which matters for
//! a score cut-off placed after this stage.

use std::collections::HashMap;

use async_trait::async_trait;
use rr_core::{BackendError, CallContext, Reranker};
use serde::Deserialize;

use crate::settings::{SettingsError, unit_interval};
use crate::tokens::tokens;

/// The settings of `mmr`.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MmrSettings {
    /// Relevance against diversity, 0 to 1.
    pub lambda: f64,
}

impl Default for MmrSettings {
    fn default() -> Self {
        MmrSettings { lambda: 0.7 }
    }
}

impl MmrSettings {
    pub fn validate(&self) -> Result<(), SettingsError> {
        unit_interval("lambda", self.lambda)
    }
}

/// The `mmr` reranker (module docs).
#[derive(Debug, Clone)]
pub struct Mmr {
    settings: MmrSettings,
}

impl Mmr {
    pub fn new(settings: MmrSettings) -> Result<Self, SettingsError> {
        settings.validate()?;
        Ok(Mmr { settings })
    }

    /// `n − position` in the MMR order, in document order.
    pub fn scores(&self, documents: &[String]) -> Vec<f64> {
        let n = documents.len();
        let relevance: Vec<f64> = (0..n).map(|i| 1.0 - i as f64 / n as f64).collect();
        let vectors = TermVectors::new(documents);
        let order = mmr_order(&relevance, |a, b| vectors.cosine(a, b), self.settings.lambda);
        let mut scores = vec![0.0; n];
        for (position, doc) in order.into_iter().enumerate() {
            scores[doc] = (n - position) as f64;
        }
        scores
    }
}

#[async_trait]
impl Reranker for Mmr {
    fn name(&self) -> &str {
        "mmr"
    }

    async fn rerank(&self, _query: &str, documents: &[String], _: &CallContext) -> Result<Vec<f64>, BackendError> {
        Ok(self.scores(documents))
    }
}

/// The greedy MMR order of documents `0..relevance.len()` (module docs);
/// `similarity` is asked at most once per pair.
pub fn mmr_order(relevance: &[f64], similarity: impl Fn(usize, usize) -> f64, lambda: f64) -> Vec<usize> {
    let n = relevance.len();
    let mut order = Vec::with_capacity(n);
    let mut chosen = vec![false; n];
    // The largest similarity of each document to any chosen one so far.
    let mut nearest = vec![0.0f64; n];
    while order.len() < n {
        let mut best: Option<(usize, f64)> = None;
        for i in (0..n).filter(|&i| !chosen[i]) {
            let value = lambda * relevance[i] - (1.0 - lambda) * nearest[i];
            // Strictly greater: on a tie the earlier incoming document wins.
            if best.is_none_or(|(_, b)| value > b) {
                best = Some((i, value));
            }
        }
        let Some((pick, _)) = best else { break };
        chosen[pick] = true;
        order.push(pick);
        for i in (0..n).filter(|&i| !chosen[i]) {
            nearest[i] = nearest[i].max(similarity(pick, i));
        }
    }
    order
}

/// Sparse sub-token frequency vectors with their norms.
struct TermVectors {
    /// Per document: (term id, count), sorted by term id.
    vectors: Vec<Vec<(usize, f64)>>,
    norms: Vec<f64>,
}

impl TermVectors {
    fn new(documents: &[String]) -> Self {
        let mut ids: HashMap<String, usize> = HashMap::new();
        let vectors: Vec<Vec<(usize, f64)>> = documents
            .iter()
            .map(|d| {
                let mut counts: HashMap<usize, f64> = HashMap::new();
                for t in tokens(d) {
                    let next = ids.len();
                    *counts.entry(*ids.entry(t).or_insert(next)).or_default() += 1.0;
                }
                let mut v: Vec<(usize, f64)> = counts.into_iter().collect();
                v.sort_unstable_by_key(|(id, _)| *id);
                v
            })
            .collect();
        let norms = vectors.iter().map(|v| v.iter().map(|(_, c)| c * c).sum::<f64>().sqrt()).collect();
        TermVectors { vectors, norms }
    }

    fn cosine(&self, a: usize, b: usize) -> f64 {
        if self.norms[a] == 0.0 || self.norms[b] == 0.0 {
            return 0.0;
        }
        let (x, y) = (&self.vectors[a], &self.vectors[b]);
        let (mut i, mut j, mut dot) = (0, 0, 0.0);
        while i < x.len() && j < y.len() {
            match x[i].0.cmp(&y[j].0) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    dot += x[i].1 * y[j].1;
                    i += 1;
                    j += 1;
                }
            }
        }
        dot / (self.norms[a] * self.norms[b])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(texts: &[&str]) -> Vec<String> {
        texts.iter().map(|s| s.to_string()).collect()
    }

    /// d0 and d1 share parse, config, file, reader (d1 adds loop):
    /// cosine 4 / (2 · √5) = 0.894427. d2 shares nothing with either.
    /// Relevance by rank with n = 3: 1, 2/3, 1/3.
    const NEAR_DUPLICATES: [&str; 3] =
        ["parse config file reader", "parse config file reader loop", "http server socket"];

    #[test]
    fn cosine_of_term_frequencies() {
        let v = TermVectors::new(&docs(&NEAR_DUPLICATES));
        assert!((v.cosine(0, 1) - 4.0 / (2.0 * 5f64.sqrt())).abs() < 1e-12);
        assert_eq!(v.cosine(0, 2), 0.0);
        assert!((v.cosine(1, 1) - 1.0).abs() < 1e-12);
        // "config config" against "config file": 2 / (2 · √2).
        let v = TermVectors::new(&docs(&["config config", "config file", ""]));
        assert!((v.cosine(0, 1) - 1.0 / 2f64.sqrt()).abs() < 1e-12);
        assert_eq!(v.cosine(0, 2), 0.0);
    }

    #[tokio::test]
    async fn near_duplicate_moves_below_the_distinct_document() {
        // lambda 0.5. Step 1: d0 0.5·1 = 0.5 beats d1 0.333 and d2 0.167.
        // Step 2: d1 0.5·2/3 − 0.5·0.894 = −0.114, d2 0.5·1/3 − 0 = 0.167: d2.
        let r = Mmr::new(MmrSettings { lambda: 0.5 }).unwrap();
        assert_eq!(r.name(), "mmr");
        let got = r.rerank("ignored", &docs(&NEAR_DUPLICATES), &CallContext::default()).await.unwrap();
        assert_eq!(got, [3.0, 1.0, 2.0]);
    }

    #[tokio::test]
    async fn lambda_one_keeps_the_incoming_order() {
        let r = Mmr::new(MmrSettings { lambda: 1.0 }).unwrap();
        let got = r.rerank("q", &docs(&NEAR_DUPLICATES), &CallContext::default()).await.unwrap();
        assert_eq!(got, [3.0, 2.0, 1.0]);
    }

    #[test]
    fn lambda_zero_only_avoids_repetition() {
        // All start at 0: d0 first (earliest). Then d1 −0.894, d2 0, d3 −1: d2.
        // Then d1 and d3 are both at their nearest chosen: d1 −0.894 beats d3 −1.
        let d = docs(&[
            "parse config file reader",
            "parse config file reader loop",
            "http server",
            "parse config file reader",
        ]);
        assert_eq!(Mmr::new(MmrSettings { lambda: 0.0 }).unwrap().scores(&d), [4.0, 2.0, 3.0, 1.0]);
    }

    #[tokio::test]
    async fn empty_and_single_inputs() {
        let r = Mmr::new(MmrSettings::default()).unwrap();
        let ctx = CallContext::default();
        assert!(r.rerank("q", &[], &ctx).await.unwrap().is_empty());
        assert_eq!(r.rerank("q", &docs(&["anything"]), &ctx).await.unwrap(), [1.0]);
        assert_eq!(r.rerank("q", &docs(&["", ""]), &ctx).await.unwrap(), [2.0, 1.0]);
    }

    #[test]
    fn lambda_outside_the_unit_interval_is_refused() {
        let err = |lambda| Mmr::new(MmrSettings { lambda }).unwrap_err().to_string();
        assert_eq!(err(1.5), "lambda must be between 0 and 1, not 1.5");
        assert_eq!(err(-0.1), "lambda must be between 0 and 1, not -0.1");
        assert_eq!(err(f64::NAN), "lambda must be between 0 and 1, not NaN");
        assert_eq!(MmrSettings::default().lambda, 0.7);
    }
}
