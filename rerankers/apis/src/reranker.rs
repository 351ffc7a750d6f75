//! The flow every provider shares, written once: [`ApiReranker`] sends the
//! documents in as many requests as the provider takes, and reads each
//! answer back into document order; the provider's [`Api`] says only what
//! sets it apart.
//!
//! `Api` and the answer types here are public in name only: this module is
//! private, so no other crate can name them, let alone implement the trait.

use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt, stream};
use rr_core::{BackendError, CallContext, Reranker};
use rr_http::HttpClient;
use rr_http::json::null_as_default;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::endpoint::{Connection, Endpoint};
use crate::error::RerankError;

/// What sets one rerank API apart: where it is, what it is sent and where
/// its answer keeps the items.
pub trait Api: Sized + Send + Sync + 'static {
    /// Names the reranker, and every error it reports.
    const PROVIDER: &'static str;
    /// Appended to the connection's origin.
    const PATH: &'static str;
    /// The provider's public configuration, connection included.
    type Config;
    /// The request; its fields serialise in the order the API documents.
    type Body<'a>: Serialize + Send + Sync
    where
        Self: 'a;
    /// The answer, `Default` so that a `null` body reads as no items; its
    /// items, in the order they came, are what it converts into.
    type Response: DeserializeOwned + Default + Send + Into<Vec<Option<Scored>>>;

    /// The connection, and the options every request carries.
    fn split(config: Self::Config) -> (Connection, Self);

    /// The request scoring every one of `documents` against `query`.
    fn body<'a>(&'a self, query: &'a str, documents: &'a [String]) -> Self::Body<'a>;

    /// Documents per request, and requests in flight at once (both at least
    /// 1): by default every document in one request.
    fn batches(&self) -> (usize, usize) {
        (usize::MAX, 1)
    }
}

/// A rerank API as a [`Reranker`]: the provider's endpoint and options.
/// The `Debug` output shows the endpoint's URL, never its key.
#[derive(Debug)]
pub struct ApiReranker<A> {
    endpoint: Endpoint,
    api: A,
}

impl<A: Api> ApiReranker<A> {
    /// A reranker for `config`, sending through `http`. The key is added to
    /// the client's secrets, so no error can quote it.
    pub fn new(config: A::Config, http: HttpClient) -> Self {
        let (connection, api) = A::split(config);
        ApiReranker { endpoint: Endpoint::new(A::PROVIDER, connection, A::PATH, http), api }
    }

    /// The endpoint URL.
    pub fn url(&self) -> &str {
        self.endpoint.url()
    }

    /// One score per document, in document order; no request for none.
    /// One failed request fails the whole call: a reranking with a hole in
    /// it would reorder results silently.
    pub async fn scores(&self, query: &str, documents: &[String]) -> Result<Vec<f64>, RerankError> {
        if documents.is_empty() {
            return Ok(Vec::new());
        }
        let (batch_size, in_flight) = self.api.batches();
        // Built before streaming: a closure inside the stream would make the
        // future not `Send` for every lifetime, as `async_trait` needs.
        let requests: Vec<_> = documents.chunks(batch_size).map(|batch| self.batch(query, batch)).collect();
        // `buffered` keeps the batches' order whatever order they finish in.
        let batches: Vec<Vec<f64>> = stream::iter(requests).buffered(in_flight).try_collect().await?;
        Ok(batches.concat())
    }

    /// The scores of one request, whose indices are relative to `documents`;
    /// errors about them therefore speak of the batch.
    async fn batch(&self, query: &str, documents: &[String]) -> Result<Vec<f64>, RerankError> {
        let response: A::Response = self.endpoint.post(&self.api.body(query, documents)).await?;
        document_scores(A::PROVIDER, response.into(), documents.len())
    }
}

#[async_trait]
impl<A: Api> Reranker for ApiReranker<A> {
    fn name(&self) -> &str {
        A::PROVIDER
    }

    /// The caller's `Authorization` is not forwarded: the provider has its
    /// own key (a TEI server, if any).
    async fn rerank(&self, query: &str, documents: &[String], _ctx: &CallContext) -> Result<Vec<f64>, BackendError> {
        self.scores(query, documents).await.map_err(|e| {
            let summary = e.summary();
            BackendError::new(A::PROVIDER, e).with_summary(summary)
        })
    }
}

/// One score per document, in document order, or the first thing that is
/// wrong with the answer. A `None` item is a JSON `null` in the result list.
pub(crate) fn document_scores(
    provider: &'static str,
    results: Vec<Option<Scored>>,
    documents: usize,
) -> Result<Vec<f64>, RerankError> {
    if results.len() != documents {
        return Err(RerankError::CountMismatch { provider, results: results.len(), documents });
    }
    let mut scores: Vec<Option<f64>> = vec![None; documents];
    for (position, item) in results.into_iter().enumerate() {
        let item = item.unwrap_or_default();
        let raw = item.index.ok_or(RerankError::MissingIndex { provider, position })?;
        let index = usize::try_from(raw).ok().filter(|&i| i < documents).ok_or(RerankError::IndexOutOfRange {
            provider,
            index: raw,
            documents,
        })?;
        if scores[index].is_some() {
            return Err(RerankError::DuplicateIndex { provider, index });
        }
        let score = item.score.ok_or(RerankError::MissingScore { provider, index })?;
        if !score.is_finite() {
            return Err(RerankError::NonFiniteScore { provider, index, score });
        }
        scores[index] = Some(score);
    }
    // With as many results as documents and no index twice, every slot is
    // filled; the check stays because it is the invariant callers rely on.
    scores
        .into_iter()
        .enumerate()
        .map(|(index, score)| score.ok_or(RerankError::MissingScore { provider, index }))
        .collect()
}

/// One result as a provider sends it: which document, and its score. Both
/// are optional so that an answer missing either is reported as such rather
/// than as a decode error. TEI's items are in this shape to the letter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Scored {
    pub index: Option<i64>,
    pub score: Option<f64>,
}

/// A result of the APIs that say `relevance_score` (Cohere, Jina, Voyage).
#[derive(Debug, Deserialize)]
pub struct RelevanceItem {
    #[serde(default)]
    index: Option<i64>,
    #[serde(default)]
    relevance_score: Option<f64>,
}

impl From<RelevanceItem> for Scored {
    fn from(item: RelevanceItem) -> Self {
        Scored { index: item.index, score: item.relevance_score }
    }
}

/// `Vec<Option<RelevanceItem>>` as [`document_scores`] takes it.
pub(crate) fn relevance_items(items: Vec<Option<RelevanceItem>>) -> Vec<Option<Scored>> {
    items.into_iter().map(|item| item.map(Scored::from)).collect()
}

/// The answer of the APIs that list their items under `results` (Cohere,
/// Jina).
#[derive(Debug, Default, Deserialize)]
pub struct Results {
    #[serde(default, deserialize_with = "null_as_default")]
    results: Vec<Option<RelevanceItem>>,
}

impl From<Results> for Vec<Option<Scored>> {
    fn from(response: Results) -> Self {
        relevance_items(response.results)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(index: i64, score: f64) -> Option<Scored> {
        Some(Scored { index: Some(index), score: Some(score) })
    }

    fn scores(results: Vec<Option<Scored>>, documents: usize) -> Result<Vec<f64>, String> {
        document_scores("cohere", results, documents).map_err(|e| e.to_string())
    }

    #[test]
    fn scores_are_put_back_in_document_order() {
        assert_eq!(scores(vec![item(2, 0.9), item(0, 0.1), item(1, 0.5)], 3).unwrap(), vec![0.1, 0.5, 0.9]);
        assert_eq!(scores(vec![], 0).unwrap(), Vec::<f64>::new());
    }

    #[test]
    fn every_way_of_not_scoring_each_document_once_is_named() {
        assert_eq!(scores(vec![item(0, 0.1)], 2).unwrap_err(), "cohere rerank returned 1 results for 2 documents");
        assert_eq!(scores(vec![item(0, 0.1), item(0, 0.2)], 2).unwrap_err(), "cohere rerank returned index 0 twice");
        assert_eq!(
            scores(vec![item(0, 0.1), item(2, 0.2)], 2).unwrap_err(),
            "cohere rerank returned index 2, out of range for 2 documents"
        );
        assert_eq!(
            scores(vec![item(-1, 0.1), item(0, 0.2)], 2).unwrap_err(),
            "cohere rerank returned index -1, out of range for 2 documents"
        );
        assert_eq!(scores(vec![item(0, 0.1), None], 2).unwrap_err(), "cohere rerank result 1 has no index");
        let no_score = Some(Scored { index: Some(1), score: None });
        assert_eq!(
            scores(vec![item(0, 0.1), no_score], 2).unwrap_err(),
            "cohere rerank returned no score for document 1"
        );
    }

    #[test]
    fn non_finite_scores_are_refused() {
        assert_eq!(
            scores(vec![item(0, f64::NAN)], 1).unwrap_err(),
            "cohere rerank returned a non-finite score (NaN) for document 0"
        );
        assert_eq!(
            scores(vec![item(0, 0.5), item(1, f64::INFINITY)], 2).unwrap_err(),
            "cohere rerank returned a non-finite score (inf) for document 1"
        );
    }
}
