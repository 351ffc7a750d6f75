//! What can go wrong reranking, and the provider's own words read from an
//! error body.

use rr_http::HttpError;
use serde_json::Value;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
