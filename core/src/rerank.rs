//! Rerankers in sequence, and the score cut-off.
//!
//! A [`RerankChain`] is itself a [`Reranker`], so the one-store engine, the
//! federated engine and a federation's per-store rerankers take one without
//! knowing: stage 1 scores the documents in the order they arrive, the
//! documents are reordered by those scores (the pipeline's own sort: stable,
//! highest first, NaN last) and handed to stage 2, and so on. The chain
//! answers in the *original* document order with the last stage's scores,
//! so sorting by them gives the chain's final order and a cut-off compares
//! against what the last model actually said.
//!
//! Two exact ties in the last stage are the one place where those scores
//! alone could disagree with the final order: the pipeline breaks a tie by
//! original position, the chain by the position the last stage saw them in.
//! Only then does the chain raise the score that must come first by the
//! fewest representable steps (`f64::next_up`, a relative change near 1e-16)
//! needed to keep its order; untied scores are returned unchanged.

use std::cmp::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::error::BackendError;
use crate::traits::{CallContext, Reranker};

/// The name a chain gives itself: the stage names joined with this.
pub const CHAIN_SEPARATOR: &str = " > ";

/// The pipeline's order on scores: highest first, NaN last. Used with a
/// stable sort, equal scores keep their incoming order.
pub fn score_order(a: f64, b: f64) -> Ordering {
    b.partial_cmp(&a).unwrap_or_else(|| a.is_nan().cmp(&b.is_nan()))
}

/// A chain with no stage was asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a rerank chain needs at least one stage")]
pub struct EmptyChain;

/// Rerankers applied one after the other (see the module docs).
pub struct RerankChain {
    stages: Vec<Arc<dyn Reranker>>,
    min_score: Option<f64>,
    name: String,
}

impl std::fmt::Debug for RerankChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RerankChain").field("name", &self.name).field("min_score", &self.min_score).finish()
    }
}

impl RerankChain {
    /// A chain of `stages`, first to last, without a cut-off.
    pub fn new(stages: Vec<Arc<dyn Reranker>>) -> Result<Self, EmptyChain> {
        if stages.is_empty() {
            return Err(EmptyChain);
        }
        let name = stages.iter().map(|s| s.name()).collect::<Vec<_>>().join(CHAIN_SEPARATOR);
        Ok(RerankChain { stages, min_score: None, name })
    }

    /// Sets the cut-off applied to the last stage's scores (see
    /// [`Reranker::min_score`]); `None` removes it.
    pub fn with_min_score(mut self, min_score: Option<f64>) -> Self {
        self.min_score = min_score;
        self
    }

    /// The stages, first to last.
    pub fn stages(&self) -> &[Arc<dyn Reranker>] {
        &self.stages
    }
}

/// `scores[p]` belongs to document `order[p]`; returns them by document,
/// with exact ties separated as the module docs describe.
fn in_original_order(order: &[usize], scores: &[f64]) -> Vec<f64> {
    let mut ranked: Vec<(f64, usize)> = scores.iter().copied().zip(order.iter().copied()).collect();
    ranked.sort_by(|a, b| score_order(a.0, b.0));
    // From the bottom up: each score must beat the one below it, or tie with
    // it and come earlier in the original order (the pipeline's tie-break).
    for p in (0..ranked.len().saturating_sub(1)).rev() {
        let (below, below_index) = ranked[p + 1];
        let (score, index) = ranked[p];
        if score.is_nan() || below.is_nan() || below == f64::INFINITY {
            continue;
        }
        if score < below || (score == below && index > below_index) {
            ranked[p].0 = below.next_up();
        }
    }
    let mut out = vec![0.0; ranked.len()];
    for (score, index) in ranked {
        out[index] = score;
    }
    out
}

#[async_trait]
impl Reranker for RerankChain {
    fn name(&self) -> &str {
        &self.name
    }

    async fn rerank(&self, query: &str, documents: &[String], ctx: &CallContext) -> Result<Vec<f64>, BackendError> {
        self.rerank_timed(query, documents, ctx).await.map(|(scores, _)| scores)
    }

    /// [`Reranker::rerank`], also reporting each stage's name and the time
    /// it took, in stage order. No stage is called for no document (and no
    /// timing is reported).
    async fn rerank_timed(
        &self,
        query: &str,
        documents: &[String],
        ctx: &CallContext,
    ) -> Result<(Vec<f64>, Vec<(String, Duration)>), BackendError> {
        let mut timings = Vec::with_capacity(self.stages.len());
        if documents.is_empty() {
            return Ok((Vec::new(), timings));
        }
        // `order[i]`: the original index of the document at position i of
        // the current ranking.
        let mut order: Vec<usize> = (0..documents.len()).collect();
        let mut scores: Vec<f64> = Vec::new();
        for (n, stage) in self.stages.iter().enumerate() {
            if n > 0 {
                let mut ranked: Vec<(f64, usize)> = scores.iter().copied().zip(order.iter().copied()).collect();
                ranked.sort_by(|a, b| score_order(a.0, b.0));
                order = ranked.into_iter().map(|(_, i)| i).collect();
            }
            let input: Vec<String> = order.iter().map(|&i| documents[i].clone()).collect();
            let started = Instant::now();
            scores = stage.rerank(query, &input, ctx).await?;
            timings.push((stage.name().to_owned(), started.elapsed()));
            if scores.len() != input.len() {
                return Err(BackendError::new(
                    &self.name,
                    format!(
                        "reranker \"{}\" returned {} scores for {} documents",
                        stage.name(),
                        scores.len(),
                        input.len()
                    ),
                ));
            }
        }
        Ok((in_original_order(&order, &scores), timings))
    }

    /// The chain's own cut-off, else the last stage's.
    fn min_score(&self) -> Option<f64> {
        self.min_score.or_else(|| self.stages.last().and_then(|s| s.min_score()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::Mutex;

    /// Scores each document from a table keyed by its text, and records the
    /// order it was shown the documents in.
    struct Table {
        name: &'static str,
        scores: HashMap<&'static str, f64>,
        seen: Mutex<Vec<Vec<String>>>,
    }

    impl Table {
        fn new(name: &'static str, scores: &[(&'static str, f64)]) -> Arc<Self> {
            Arc::new(Table { name, scores: scores.iter().copied().collect(), seen: Mutex::default() })
        }
    }

    #[async_trait]
    impl Reranker for Table {
        fn name(&self) -> &str {
            self.name
        }
        async fn rerank(&self, _: &str, docs: &[String], _: &CallContext) -> Result<Vec<f64>, BackendError> {
            self.seen.lock().unwrap().push(docs.to_vec());
            Ok(docs.iter().map(|d| self.scores[d.as_str()]).collect())
        }
    }

    struct Short;
    #[async_trait]
    impl Reranker for Short {
        fn name(&self) -> &str {
            "short"
        }
        async fn rerank(&self, _: &str, _: &[String], _: &CallContext) -> Result<Vec<f64>, BackendError> {
            Ok(vec![1.0])
        }
    }

    fn docs(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn order(documents: &[String], scores: &[f64]) -> Vec<String> {
        let mut ranked: Vec<(f64, &String)> = scores.iter().copied().zip(documents).collect();
        ranked.sort_by(|a, b| score_order(a.0, b.0));
        ranked.into_iter().map(|(_, d)| d.clone()).collect()
    }

    #[tokio::test]
    async fn two_stages_feed_the_first_order_to_the_second_and_answer_in_document_order() {
        let first = Table::new("first", &[("a", 0.1), ("b", 0.9), ("c", 0.5), ("d", 0.7)]);
        let second = Table::new("second", &[("a", 3.0), ("b", 1.0), ("c", 4.0), ("d", 2.0)]);
        let chain = RerankChain::new(vec![first.clone(), second.clone()]).unwrap();
        assert_eq!(chain.name(), "first > second");
        let input = docs(&["a", "b", "c", "d"]);
        let (scores, timings) = chain.rerank_timed("q", &input, &CallContext::default()).await.unwrap();
        assert_eq!(first.seen.lock().unwrap().as_slice(), [docs(&["a", "b", "c", "d"])]);
        assert_eq!(second.seen.lock().unwrap().as_slice(), [docs(&["b", "d", "c", "a"])]);
        assert_eq!(scores, [3.0, 1.0, 4.0, 2.0]);
        assert_eq!(order(&input, &scores), ["c", "a", "d", "b"]);
        let names: Vec<&str> = timings.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["first", "second"]);
    }

    #[tokio::test]
    async fn a_tie_in_the_last_stage_keeps_the_order_that_stage_saw() {
        // Stage 1 puts c before a; stage 2 ties them. Sorted by original
        // position a would come first, so c's score is raised by one step.
        let first = Table::new("first", &[("a", 0.1), ("b", 0.0), ("c", 0.9)]);
        let second = Table::new("second", &[("a", 2.0), ("b", 5.0), ("c", 2.0)]);
        let chain = RerankChain::new(vec![first, second]).unwrap();
        let input = docs(&["a", "b", "c"]);
        let scores = chain.rerank("q", &input, &CallContext::default()).await.unwrap();
        assert_eq!(scores, [2.0, 5.0, 2.0f64.next_up()]);
        assert_eq!(order(&input, &scores), ["b", "c", "a"]);
    }

    #[tokio::test]
    async fn one_stage_chain_equals_the_stage() {
        let stage = Table::new("only", &[("a", 0.2), ("b", f64::NAN), ("c", 0.2), ("d", 0.8)]);
        let chain = RerankChain::new(vec![stage.clone()]).unwrap();
        assert_eq!(chain.name(), "only");
        assert_eq!(chain.min_score(), None);
        let input = docs(&["a", "b", "c", "d"]);
        let ctx = CallContext::default();
        let direct = stage.rerank("q", &input, &ctx).await.unwrap();
        let chained = chain.rerank("q", &input, &ctx).await.unwrap();
        assert_eq!(format!("{direct:?}"), format!("{chained:?}"));
        assert_eq!(order(&input, &chained), ["d", "a", "c", "b"]);
    }

    #[tokio::test]
    async fn empty_input_calls_no_stage() {
        let stage = Table::new("only", &[]);
        let chain = RerankChain::new(vec![stage.clone()]).unwrap();
        let (scores, timings) = chain.rerank_timed("q", &[], &CallContext::default()).await.unwrap();
        assert!(scores.is_empty() && timings.is_empty());
        assert!(stage.seen.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_stage_with_the_wrong_number_of_scores_fails_the_chain() {
        let first = Table::new("first", &[("a", 1.0), ("b", 2.0)]);
        let chain = RerankChain::new(vec![first, Arc::new(Short)]).unwrap();
        let err = chain.rerank("q", &docs(&["a", "b"]), &CallContext::default()).await.unwrap_err();
        assert_eq!(err.to_string(), "reranker \"short\" returned 1 scores for 2 documents");
        assert_eq!(err.backend(), "first > short");
    }

    #[test]
    fn no_stage_is_an_error_and_the_cut_off_is_the_chains_or_the_last_stages() {
        assert_eq!(RerankChain::new(Vec::new()).unwrap_err().to_string(), "a rerank chain needs at least one stage");
        let inner = RerankChain::new(vec![Table::new("x", &[])]).unwrap().with_min_score(Some(0.5));
        let outer = RerankChain::new(vec![Arc::new(inner)]).unwrap();
        assert_eq!(outer.min_score(), Some(0.5));
        assert_eq!(outer.with_min_score(Some(0.25)).min_score(), Some(0.25));
    }
}
