//! An OpenAI-compatible `/v1/rerank` endpoint as a [`Reranker`].
//!
//! The request is the reference server's byte for byte (`{"model","query",
//! "documents"}` in that order, the API key as a bearer token), and so are
//! the checks on the answer: a partial or inconsistent set of scores would
//! silently reorder results, so it fails the search with the reference's
//! words instead. Scores are returned in document order; sorting is the
//! pipeline's business.

mod registry;

use async_trait::async_trait;
use rr_core::{BackendError, CallContext, Reranker};
use rr_http::json::null_as_default;
use rr_http::{HttpClient, HttpError, bearer};
use serde::{Deserialize, Serialize};

/// The operation name in errors and logs.
pub const OPERATION: &str = "reranking request";

/// Where the reranking model is served.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct OpenAiRerankerConfig {
    /// Origin of the API, without a trailing `/`; `/v1/rerank` is appended.
    pub api_url: String,
    pub model: String,
    /// Sent as `Bearer <key>` (as is when it already has the scheme).
    pub api_key: Option<String>,
}

impl std::fmt::Debug for OpenAiRerankerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiRerankerConfig")
            .field("api_url", &self.api_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// What can go wrong reranking.
#[derive(Debug, thiserror::Error)]
pub enum RerankError {
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error("reranking request returned {results} results for {documents} documents")]
    CountMismatch { results: usize, documents: usize },
    /// An index outside the documents, or one seen twice.
    #[error("reranking request returned invalid result indices")]
    InvalidIndices,
    /// Kept from the reference although the two checks above already rule it
    /// out: it is the invariant the pipeline relies on.
    #[error("reranking request did not score every document")]
    Unscored,
}

/// An OpenAI-compatible reranking endpoint.
pub struct OpenAiReranker {
    http: HttpClient,
    url: String,
    model: String,
    authorization: Option<String>,
}

impl std::fmt::Debug for OpenAiReranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiReranker").field("url", &self.url).field("model", &self.model).finish_non_exhaustive()
    }
}

#[derive(Serialize)]
struct RerankBody<'a> {
    model: &'a str,
    query: &'a str,
    documents: &'a [String],
}

#[derive(Debug, Default, Deserialize)]
struct RerankResponse {
    #[serde(default, deserialize_with = "null_as_default")]
    results: Vec<Option<RerankItem>>,
}

/// A missing or `null` field reads as 0, as the reference reads it.
#[derive(Debug, Default, Deserialize)]
struct RerankItem {
    #[serde(default, deserialize_with = "null_as_default")]
    index: i64,
    #[serde(default, deserialize_with = "null_as_default")]
    relevance_score: f64,
}

/// One score per document, in document order, checked as the reference does.
fn document_scores(results: Vec<Option<RerankItem>>, documents: usize) -> Result<Vec<f64>, RerankError> {
    if results.len() != documents {
        return Err(RerankError::CountMismatch { results: results.len(), documents });
    }
    let mut scores: Vec<Option<f64>> = vec![None; documents];
    for item in results.into_iter().map(Option::unwrap_or_default) {
        let slot = usize::try_from(item.index)
            .ok()
            .and_then(|i| scores.get_mut(i))
            .filter(|slot| slot.is_none())
            .ok_or(RerankError::InvalidIndices)?;
        *slot = Some(item.relevance_score);
    }
    every_document_scored(scores)
}

fn every_document_scored(scores: Vec<Option<f64>>) -> Result<Vec<f64>, RerankError> {
    scores.into_iter().map(|score| score.ok_or(RerankError::Unscored)).collect()
}

impl OpenAiReranker {
    /// A reranker for `config`, sending through `http`. The API key is added
    /// to the client's secrets.
    pub fn new(config: OpenAiRerankerConfig, http: HttpClient) -> Self {
        let key = config.api_key.unwrap_or_default();
        OpenAiReranker {
            http: http.with_secret(&key),
            url: format!("{}/v1/rerank", config.api_url.trim_end_matches('/')),
            model: config.model,
            authorization: bearer(&key),
        }
    }

    /// The endpoint URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Scores `documents` against `query`, one score per document in order.
    pub async fn scores(&self, query: &str, documents: &[String]) -> Result<Vec<f64>, RerankError> {
        if documents.is_empty() {
            return Ok(Vec::new());
        }
        let body = RerankBody { model: &self.model, query, documents };
        let response: RerankResponse =
            self.http.post_json(OPERATION, &self.url, &body, self.authorization.as_deref()).await?;
        document_scores(response.results, documents.len())
    }
}

#[async_trait]
impl Reranker for OpenAiReranker {
    fn name(&self) -> &str {
        "openai"
    }

    /// The caller's `Authorization` is not forwarded: the reranking service
    /// has its own key.
    async fn rerank(&self, query: &str, documents: &[String], _ctx: &CallContext) -> Result<Vec<f64>, BackendError> {
        self.scores(query, documents).await.map_err(|e| {
            let summary = match &e {
                RerankError::Http(http) => http.summary(),
                other => other.to_string(),
            };
            BackendError::new(self.name(), e).with_summary(summary)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rr_http::json;

    fn scores(body: &str, documents: usize) -> Result<Vec<f64>, String> {
        let response: RerankResponse = json::decode(body.as_bytes())?;
        document_scores(response.results, documents).map_err(|e| e.to_string())
    }

    #[test]
    fn scores_come_back_in_document_order() {
        let body = r#"{"results":[{"index":2,"relevance_score":0.9},{"index":0,"relevance_score":0.1},{"index":1,"relevance_score":0.5}]}"#;
        assert_eq!(scores(body, 3).unwrap(), vec![0.1, 0.5, 0.9]);
    }

    #[test]
    fn missing_fields_read_as_zero_like_go() {
        let body = r#"{"results":[{"index":1},{"relevance_score":0.7}]}"#;
        assert_eq!(scores(body, 2).unwrap(), vec![0.7, 0.0]);
        let body = r#"{"results":[null,{"index":1,"relevance_score":null}]}"#;
        assert_eq!(scores(body, 2).unwrap(), vec![0.0, 0.0]);
    }

    #[test]
    fn validation_messages_are_the_reference_ones() {
        assert_eq!(
            scores(r#"{"results":[{"index":0}]}"#, 2).unwrap_err(),
            "reranking request returned 1 results for 2 documents"
        );
        assert_eq!(
            scores(r#"{"results":null}"#, 2).unwrap_err(),
            "reranking request returned 0 results for 2 documents"
        );
        assert_eq!(scores("null", 2).unwrap_err(), "reranking request returned 0 results for 2 documents");
        let invalid = "reranking request returned invalid result indices";
        assert_eq!(scores(r#"{"results":[{"index":0},{"index":2}]}"#, 2).unwrap_err(), invalid);
        assert_eq!(scores(r#"{"results":[{"index":-1},{"index":0}]}"#, 2).unwrap_err(), invalid);
        assert_eq!(scores(r#"{"results":[{"index":1},{"index":1}]}"#, 2).unwrap_err(), invalid);
        assert_eq!(scores(r#"{"results":[{"index":0},{}]}"#, 2).unwrap_err(), invalid, "a missing index is 0");
    }

    #[test]
    fn an_unscored_document_is_reported() {
        // Unreachable through a response once count and indices are checked,
        // so the final check is exercised directly.
        assert_eq!(
            every_document_scored(vec![Some(1.0), None]).unwrap_err().to_string(),
            "reranking request did not score every document"
        );
        assert_eq!(every_document_scored(vec![Some(1.0), Some(0.5)]).unwrap(), vec![1.0, 0.5]);
    }
}
