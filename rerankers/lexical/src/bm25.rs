//! `bm25-fusion`: the incoming ranking fused with a BM25 ranking of the same
//! candidates by reciprocal rank.
//!
//! Fusing ranks rather than adding scores is the point: a vector distance
//! and a BM25 score are on unrelated scales, and ranks are not. A candidate
//! at incoming rank `r_v` and BM25 rank `r_l` (both 1-based) scores
//! `weight_vector / (k + r_v) + weight_lexical / (k + r_l)`; a candidate that
//! contains no query term has no BM25 rank and gets only the first term, as
//! a document missing from one list does in hybrid search. Equal scores are
//! left equal, so the pipeline's stable sort keeps them in incoming order.

use std::collections::HashMap;

use async_trait::async_trait;
use rr_core::{BackendError, CallContext, Reranker};
use serde::Deserialize;

use crate::settings::{SettingsError, positive, unit_interval};
use crate::tokens::tokens;

/// The settings of `bm25-fusion`; every field has a default.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Bm25FusionSettings {
    /// The reciprocal-rank constant: larger values flatten the advantage of
    /// the first ranks. 60 is the value of Cormack et al. and of the
    /// federated search's fusion.
    pub k: f64,
    /// BM25 term-frequency saturation.
    pub k1: f64,
    /// BM25 length normalisation, 0 (none) to 1 (full).
    pub b: f64,
    /// Weight of the incoming ranking.
    pub weight_vector: f64,
    /// Weight of the BM25 ranking.
    pub weight_lexical: f64,
}

impl Default for Bm25FusionSettings {
    fn default() -> Self {
        Bm25FusionSettings { k: 60.0, k1: 1.2, b: 0.75, weight_vector: 1.0, weight_lexical: 1.0 }
    }
}

impl Bm25FusionSettings {
    /// Refuses settings that would make the scores meaningless.
    pub fn validate(&self) -> Result<(), SettingsError> {
        positive("k", self.k, false)?;
        positive("k1", self.k1, true)?;
        unit_interval("b", self.b)?;
        positive("weight_vector", self.weight_vector, true)?;
        positive("weight_lexical", self.weight_lexical, true)?;
        if self.weight_vector == 0.0 && self.weight_lexical == 0.0 {
            return Err(SettingsError("weight_vector and weight_lexical cannot both be 0".into()));
        }
        Ok(())
    }
}

/// The `bm25-fusion` reranker (module docs).
#[derive(Debug, Clone)]
pub struct Bm25Fusion {
    settings: Bm25FusionSettings,
}

impl Bm25Fusion {
    pub fn new(settings: Bm25FusionSettings) -> Result<Self, SettingsError> {
        settings.validate()?;
        Ok(Bm25Fusion { settings })
    }

    /// The fused scores, in document order, for documents in ranking order.
    pub fn scores(&self, query: &str, documents: &[String]) -> Vec<f64> {
        let s = &self.settings;
        let lexical = bm25_scores(query, documents, s.k1, s.b);
        let incoming: Vec<usize> = (0..documents.len()).collect();
        let mut matched: Vec<usize> = (0..documents.len()).filter(|&i| lexical[i] > 0.0).collect();
        // Stable: equal BM25 scores keep incoming order.
        matched.sort_by(|&a, &b| lexical[b].total_cmp(&lexical[a]));
        reciprocal_rank_fusion(documents.len(), s.k, &[(s.weight_vector, &incoming), (s.weight_lexical, &matched)])
    }
}

#[async_trait]
impl Reranker for Bm25Fusion {
    fn name(&self) -> &str {
        "bm25-fusion"
    }

    async fn rerank(&self, query: &str, documents: &[String], _: &CallContext) -> Result<Vec<f64>, BackendError> {
        Ok(self.scores(query, documents))
    }
}

/// Okapi BM25 of each document against the distinct sub-tokens of `query`,
/// with document frequencies and the average length taken over `documents`.
///
/// IDF is Lucene's `ln(1 + (N - n + 0.5) / (n + 0.5))`: the classic form goes
/// negative for a term in more than half the documents, which over a few
/// dozen candidates from one repository is the common case, and would then
/// rank a document lower for containing a query term.
pub fn bm25_scores(query: &str, documents: &[String], k1: f64, b: f64) -> Vec<f64> {
    let mut terms: Vec<String> = Vec::new();
    for t in tokens(query) {
        if !terms.contains(&t) {
            terms.push(t);
        }
    }
    let position: HashMap<&str, usize> = terms.iter().enumerate().map(|(i, t)| (t.as_str(), i)).collect();
    // Per document: its length in tokens and each query term's frequency.
    let stats: Vec<(usize, Vec<u32>)> = documents
        .iter()
        .map(|d| {
            let doc_tokens = tokens(d);
            let mut tf = vec![0u32; terms.len()];
            for t in &doc_tokens {
                if let Some(&i) = position.get(t.as_str()) {
                    tf[i] += 1;
                }
            }
            (doc_tokens.len(), tf)
        })
        .collect();
    let n = documents.len() as f64;
    let average = stats.iter().map(|(len, _)| *len as f64).sum::<f64>() / n;
    let idf: Vec<f64> = (0..terms.len())
        .map(|i| {
            let df = stats.iter().filter(|(_, tf)| tf[i] > 0).count() as f64;
            (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
        })
        .collect();
    stats
        .iter()
        .map(|(len, tf)| {
            // A document holding a query term has a token, so `average > 0` here.
            let norm = 1.0 - b + b * *len as f64 / average;
            tf.iter()
                .zip(&idf)
                .filter(|(f, _)| **f > 0)
                .map(|(&f, idf)| {
                    let f = f64::from(f);
                    idf * f * (k1 + 1.0) / (f + k1 * norm)
                })
                .sum()
        })
        .collect()
}

/// Reciprocal-rank fusion of weighted rankings of `n` documents: each
/// ranking lists document indices best first (a document may be missing),
/// and a document scores `Σ weight / (k + rank)` over the rankings it is in,
/// rank 1-based. Scores come back in document order.
pub fn reciprocal_rank_fusion(n: usize, k: f64, rankings: &[(f64, &[usize])]) -> Vec<f64> {
    let mut scores = vec![0.0; n];
    for (weight, ranking) in rankings {
        for (rank, &doc) in ranking.iter().enumerate() {
            if let Some(score) = scores.get_mut(doc) {
                *score += weight / (k + (rank + 1) as f64);
            }
        }
    }
    scores
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(texts: &[&str]) -> Vec<String> {
        texts.iter().map(|s| s.to_string()).collect()
    }

    fn close(got: &[f64], want: &[f64]) {
        assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-9, "{got:?} vs {want:?}");
        }
    }

    /// Three documents, in incoming order:
    ///   d0 "read config file"       → read, config, file                   (3 tokens)
    ///   d1 "parse json"             → parse, json                          (2 tokens)
    ///   d2 "parseConfig parseToml"  → parseconfig, parse, config,
    ///                                 parsetoml, parse, toml               (6 tokens)
    /// Query "parse config toml"; N = 3, average length (3 + 2 + 6) / 3 = 11/3.
    /// IDF: parse and config are in 2 documents, ln(1 + 1.5 / 2.5) = ln 1.6
    /// = 0.470004; toml in 1, ln(1 + 2.5 / 1.5) = ln(8/3) = 0.980829.
    /// Length norm 1 - b + b·len/avg with k1 = 1.2, b = 0.75:
    ///   d0: norm 0.863636; config tf 1: 2.2 / (1 + 1.036364) = 1.080357 → 0.507772
    ///   d1: norm 0.659091; parse tf 1:  2.2 / (1 + 0.790909) = 1.228426 → 0.577365
    ///   d2: norm 1.477273; parse tf 2:  4.4 / (2 + 1.772727) = 1.166265
    ///                      config tf 1: 2.2 / (1 + 1.772727) = 0.793443
    ///                      toml tf 1:   2.2 / (1 + 1.772727) = 0.793443
    ///       0.470004 · (1.166265 + 0.793443) + 0.980829 · 0.793443 = 1.699301
    const THREE: [&str; 3] = ["read config file", "parse json", "parseConfig parseToml"];

    #[test]
    fn bm25_matches_the_hand_computation() {
        let ln16 = 1.6f64.ln();
        let ln83 = (8.0f64 / 3.0).ln();
        let norm = |len: f64| 1.2 * (0.25 + 0.75 * len * 3.0 / 11.0);
        let (d2_one, d2_two) = (2.2 / (1.0 + norm(6.0)), 4.4 / (2.0 + norm(6.0)));
        let want =
            [ln16 * 2.2 / (1.0 + norm(3.0)), ln16 * 2.2 / (1.0 + norm(2.0)), ln16 * (d2_two + d2_one) + ln83 * d2_one];
        close(&bm25_scores("parse config toml", &docs(&THREE), 1.2, 0.75), &want);
        for (w, by_hand) in want.iter().zip([0.507772, 0.577365, 1.699301]) {
            assert!((w - by_hand).abs() < 5e-7, "{w} vs {by_hand}");
        }
        // b = 0 ignores length: d1 then scores like d0's single match.
        let flat = bm25_scores("parse config toml", &docs(&THREE), 1.2, 0.0);
        close(&flat[..2], &[ln16, ln16]);
        // A repeated query term counts once; no query token, no score.
        close(&bm25_scores("parse parse config toml", &docs(&THREE), 1.2, 0.75), &want);
        close(&bm25_scores("the, is", &docs(&THREE), 1.2, 0.75), &[0.0, 0.0, 0.0]);
    }

    #[test]
    fn rrf_of_two_known_rankings() {
        // Incoming d0 d1 d2, lexical d2 d1 d0, k = 60:
        // d0 = 1/61 + 1/63 = 0.0322665, d1 = 2/62 = 0.0322581, d2 = 1/63 + 1/61.
        let fused = reciprocal_rank_fusion(3, 60.0, &[(1.0, &[0, 1, 2]), (1.0, &[2, 1, 0])]);
        close(&fused, &[1.0 / 61.0 + 1.0 / 63.0, 2.0 / 62.0, 1.0 / 63.0 + 1.0 / 61.0]);
        assert_eq!(fused[0], fused[2], "an exact tie, left for the stable sort");
        // Lexical weight 2: d0 = 1/61 + 2/63 = 0.04814, d1 = 3/62 = 0.04839, d2 = 1/63 + 2/61 = 0.04866.
        let fused = reciprocal_rank_fusion(3, 60.0, &[(1.0, &[0, 1, 2]), (2.0, &[2, 1, 0])]);
        close(&fused, &[1.0 / 61.0 + 2.0 / 63.0, 3.0 / 62.0, 1.0 / 63.0 + 2.0 / 61.0]);
        // A document missing from a ranking gets nothing from it.
        close(&reciprocal_rank_fusion(3, 1.0, &[(1.0, &[0, 1, 2]), (1.0, &[2])]), &[0.5, 1.0 / 3.0, 0.25 + 0.5]);
    }

    #[tokio::test]
    async fn fusion_of_incoming_order_and_bm25() {
        let r = Bm25Fusion::new(Bm25FusionSettings::default()).unwrap();
        assert_eq!(r.name(), "bm25-fusion");
        // BM25 order is d2 (1.87), d1 (0.54), d0 (0.47): the reverse of the
        // incoming order, so d0 and d2 tie at 1/61 + 1/63 and d1 has 2/62.
        let got = r.rerank("parse config toml", &docs(&THREE), &CallContext::default()).await.unwrap();
        close(&got, &[1.0 / 61.0 + 1.0 / 63.0, 2.0 / 62.0, 1.0 / 63.0 + 1.0 / 61.0]);
        // Only d1 matches "json": it alone gets a lexical rank.
        let got = r.rerank("json", &docs(&THREE), &CallContext::default()).await.unwrap();
        close(&got, &[1.0 / 61.0, 1.0 / 62.0 + 1.0 / 61.0, 1.0 / 63.0]);
    }

    #[tokio::test]
    async fn empty_and_single_inputs() {
        let r = Bm25Fusion::new(Bm25FusionSettings::default()).unwrap();
        let ctx = CallContext::default();
        assert!(r.rerank("parse", &[], &ctx).await.unwrap().is_empty());
        close(&r.rerank("parse", &docs(&["parse it"]), &ctx).await.unwrap(), &[2.0 / 61.0]);
        close(&r.rerank("other", &docs(&["parse it"]), &ctx).await.unwrap(), &[1.0 / 61.0]);
        close(&r.rerank("parse", &docs(&[""]), &ctx).await.unwrap(), &[1.0 / 61.0]);
    }

    #[test]
    fn settings_are_validated() {
        let err = |s: Bm25FusionSettings| Bm25Fusion::new(s).unwrap_err().to_string();
        let d = Bm25FusionSettings::default();
        assert_eq!(err(Bm25FusionSettings { k: 0.0, ..d }), "k must be a positive number, not 0");
        assert_eq!(err(Bm25FusionSettings { k: -5.0, ..d }), "k must be a positive number, not -5");
        assert_eq!(err(Bm25FusionSettings { k: f64::INFINITY, ..d }), "k must be a positive number, not inf");
        assert_eq!(err(Bm25FusionSettings { k1: -0.5, ..d }), "k1 must be a non-negative number, not -0.5");
        assert_eq!(err(Bm25FusionSettings { b: 1.5, ..d }), "b must be between 0 and 1, not 1.5");
        assert_eq!(
            err(Bm25FusionSettings { weight_lexical: -1.0, ..d }),
            "weight_lexical must be a non-negative number, not -1"
        );
        assert_eq!(
            err(Bm25FusionSettings { weight_vector: 0.0, weight_lexical: 0.0, ..d }),
            "weight_vector and weight_lexical cannot both be 0"
        );
        assert!(Bm25Fusion::new(Bm25FusionSettings { k1: 0.0, b: 0.0, weight_vector: 0.0, ..d }).is_ok());
    }
}
