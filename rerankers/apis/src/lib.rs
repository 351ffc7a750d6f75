//! Rerankers for hosted rerank APIs: Cohere `/v2/rerank`, Jina and Voyage
//! `/v1/rerank`, Hugging Face text-embeddings-inference (TEI) `/rerank`.
//!
//! The four APIs answer the same question in four shapes (`results` or
//! `data`, `relevance_score` or `score`, a wrapped list or a bare array), and
//! all of them sort their answer by relevance, not by input. Each provider
//! module only builds its request body and says where its items sit; the
//! rest is written once, in [`ApiReranker`]. Putting the scores back in
//! document order, and refusing an answer that does not score every
//! document exactly once, happens in one place (`document_scores`), so the
//! four cannot differ in what they let through.
//! A partial answer is an error naming the provider, never a shorter list:
//! the pipeline would otherwise silently reorder results.
//!
//! All HTTP goes through [`rr_http::HttpClient`]: 429 and 5xx are retried
//! with backoff, each attempt has a deadline, bodies are capped and secrets
//! redacted. A non-2xx answer is reported with the provider's own message,
//! read from its error body (see `provider_message`), because the raw body
//! of a FastAPI validation error is much harder to read than its `msg`.

mod cohere;
mod jina;
mod registry;
mod reranker;
mod tei;
mod voyage;

use std::fmt;

use rr_http::{HttpClient, HttpError, bearer};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use cohere::{CohereConfig, CohereReranker, DEFAULT_COHERE_URL};
pub use jina::{DEFAULT_JINA_URL, JinaConfig, JinaReranker};
pub use reranker::ApiReranker;
use reranker::Scored;
pub use tei::{DEFAULT_MAX_BATCH_SIZE, DEFAULT_MAX_CONCURRENT_BATCHES, TeiConfig, TeiReranker};
pub use voyage::{DEFAULT_VOYAGE_URL, VoyageConfig, VoyageReranker};

/// Where a provider is reached, and with which key.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Connection {
    /// Origin of the API, e.g. `https://api.cohere.com`; the provider's path
    /// (`/v2/rerank`, `/v1/rerank`, `/rerank`) is appended.
    pub api_url: String,
    /// Sent as `Authorization: Bearer <key>` (as is when it already has the
    /// scheme).
    pub api_key: Option<String>,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("api_url", &self.api_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// What can go wrong reranking. Every message names the provider.
#[derive(Debug, thiserror::Error)]
pub enum RerankError {
    /// The provider answered with a non-2xx status (after any retries);
    /// `message` is its own error text, redacted, or the body as it came.
    #[error("{provider} rerank failed with HTTP {status}{}", colon_then(.message))]
    Status { provider: &'static str, status: u16, message: String },
    /// No usable answer: connection, timeout, body read or JSON decode
    /// failures, worded by the shared HTTP layer with `<provider> rerank`.
    #[error(transparent)]
    Http(HttpError),
    #[error("{provider} rerank returned {results} results for {documents} documents")]
    CountMismatch { provider: &'static str, results: usize, documents: usize },
    #[error("{provider} rerank result {position} has no index")]
    MissingIndex { provider: &'static str, position: usize },
    #[error("{provider} rerank returned index {index}, out of range for {documents} documents")]
    IndexOutOfRange { provider: &'static str, index: i64, documents: usize },
    #[error("{provider} rerank returned index {index} twice")]
    DuplicateIndex { provider: &'static str, index: usize },
    #[error("{provider} rerank returned no score for document {index}")]
    MissingScore { provider: &'static str, index: usize },
    #[error("{provider} rerank returned a non-finite score ({score}) for document {index}")]
    NonFiniteScore { provider: &'static str, index: usize, score: f64 },
}

impl RerankError {
    /// The error without URLs or the provider's reply text.
    pub fn summary(&self) -> String {
        match self {
            RerankError::Status { provider, status, .. } => format!("{provider} rerank failed with HTTP {status}"),
            RerankError::Http(e) => e.summary(),
            other => other.to_string(),
        }
    }
}

fn colon_then(message: &str) -> String {
    if message.is_empty() { String::new() } else { format!(": {message}") }
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

/// The provider's own words from an error body: Cohere's `message`, Jina's
/// and Voyage's `detail` (a string, or FastAPI's list of validation errors),
/// TEI's `error` with its `error_type`, and the `{"error":{"message"}}` of
/// gateways in front of any of them. `None` when the body is none of these
/// (an HTML page from a proxy, a body cut at 1000 bytes); the caller then
/// quotes the body as it came.
pub(crate) fn provider_message(body: &str) -> Option<String> {
    let value: Value = serde_json::from_str(body).ok()?;
    let object = value.as_object()?;
    let message = if let Some(message) = object.get("message").and_then(Value::as_str) {
        message.to_owned()
    } else if let Some(detail) = object.get("detail") {
        match detail {
            Value::String(text) => text.clone(),
            Value::Array(errors) => errors.iter().map(validation_error).collect::<Vec<_>>().join("; "),
            _ => return None,
        }
    } else {
        match object.get("error")? {
            Value::String(error) => match object.get("error_type").and_then(Value::as_str) {
                Some(kind) => format!("{error} ({kind})"),
                None => error.clone(),
            },
            Value::Object(inner) => inner.get("message").and_then(Value::as_str)?.to_owned(),
            _ => return None,
        }
    };
    Some(message).filter(|m| !m.trim().is_empty())
}

/// One FastAPI validation error, `{"loc":["body","top_n"],"msg":"..."}`, as
/// `body.top_n: ...`.
fn validation_error(error: &Value) -> String {
    let Some(msg) = error.get("msg").and_then(Value::as_str) else {
        return error.to_string();
    };
    let loc: Vec<String> = error
        .get("loc")
        .and_then(Value::as_array)
        .map(|parts| parts.iter().map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_owned)).collect())
        .unwrap_or_default();
    if loc.is_empty() { msg.to_owned() } else { format!("{}: {msg}", loc.join(".")) }
}

/// One provider's rerank URL with its client and credentials.
#[derive(Clone)]
pub(crate) struct Endpoint {
    provider: &'static str,
    /// `<provider> rerank`, the operation the shared HTTP layer names.
    operation: String,
    http: HttpClient,
    url: String,
    authorization: Option<String>,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("provider", &self.provider)
            .field("url", &self.url)
            .field("authorization", &self.authorization.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// `path` appended to the connection's origin; the key is added to the
    /// client's secrets so no error can quote it.
    pub(crate) fn new(provider: &'static str, connection: Connection, path: &str, http: HttpClient) -> Self {
        let key = connection.api_key.unwrap_or_default();
        Endpoint {
            provider,
            operation: format!("{provider} rerank"),
            http: http.with_secret(&key),
            url: format!("{}{path}", connection.api_url.trim_end_matches('/')),
            authorization: bearer(&key),
        }
    }

    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    pub(crate) async fn post<B, T>(&self, body: &B) -> Result<T, RerankError>
    where
        B: Serialize + ?Sized,
        T: DeserializeOwned + Default,
    {
        self.http
            .post_json(&self.operation, &self.url, body, self.authorization.as_deref())
            .await
            .map_err(|e| self.error(e))
    }

    fn error(&self, error: HttpError) -> RerankError {
        match error {
            HttpError::Status { status, body, .. } => {
                // The body is redacted already, but unescaping its JSON can
                // reveal a key that was escaped in it, so redact once more.
                let message = provider_message(&body)
                    .map(|m| self.http.redact(&m, self.authorization.as_deref()))
                    .unwrap_or(body);
                RerankError::Status { provider: self.provider, status, message }
            }
            other => RerankError::Http(other),
        }
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

    #[test]
    fn provider_messages_are_read_from_each_error_shape() {
        let read = |body: &str| provider_message(body);
        assert_eq!(
            read(r#"{"message":"invalid request: list of documents must not be empty"}"#).as_deref(),
            Some("invalid request: list of documents must not be empty")
        );
        assert_eq!(
            read(r#"{"detail":"Provided API key is invalid."}"#).as_deref(),
            Some("Provided API key is invalid.")
        );
        assert_eq!(
            read(r#"{"detail":[{"type":"int_parsing","loc":["body","top_n"],"msg":"Input should be a valid integer"},{"loc":["body",0],"msg":"bad"}]}"#).as_deref(),
            Some("body.top_n: Input should be a valid integer; body.0: bad")
        );
        assert_eq!(
            read(r#"{"error":"batch size 70 > maximum allowed batch size 32","error_type":"validation"}"#).as_deref(),
            Some("batch size 70 > maximum allowed batch size 32 (validation)")
        );
        assert_eq!(read(r#"{"error":{"message":"upstream quota","type":"x"}}"#).as_deref(), Some("upstream quota"));
        assert_eq!(read(r#"{"error":"plain"}"#).as_deref(), Some("plain"));
        for unreadable in ["<html>502</html>", "", "[]", r#"{"message":""}"#, r#"{"detail":{"a":1}}"#, r#"{"other":1}"#]
        {
            assert_eq!(read(unreadable), None, "{unreadable}");
        }
    }

    #[test]
    fn status_errors_without_a_body_end_at_the_status() {
        let err = RerankError::Status { provider: "tei", status: 502, message: String::new() };
        assert_eq!(err.to_string(), "tei rerank failed with HTTP 502");
    }

    #[test]
    fn debug_hides_the_key() {
        let connection = Connection { api_url: "https://api.cohere.com".into(), api_key: Some("co-secret".into()) };
        let shown = format!("{connection:?}");
        assert!(!shown.contains("co-secret") && shown.contains("<redacted>"), "{shown}");
    }
}
