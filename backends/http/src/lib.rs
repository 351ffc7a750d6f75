//! The one HTTP layer every backend shares.
//!
//! repo-retriever must be a byte-exact drop-in for a Go server, and most of
//! what a client can observe about a failing backend comes from one Go
//! function of that server, `doJSON`: which failures are retried and how long
//! it waits, what an error message says, how much of a response body it
//! quotes, which secrets it hides. Keeping all of that in one crate means the
//! Chroma store, the embedder and the reranker cannot drift apart from the
//! reference, or from each other.
//!
//! The contract, in short:
//!
//! - every request carries `User-Agent`, and `Authorization` when the backend
//!   has one; `POST` bodies are `application/json`, serde_json, and 2xx
//!   answers are read by [`json::decode`];
//! - connection errors and timeouts, 429 and 5xx are retried up to
//!   `retry_attempts` attempts in total, waiting [`retry_delay`] in between,
//!   or longer when a 429 or 503 carries `Retry-After` (up to
//!   [`MAX_RETRY_AFTER`]; the reference ignores the header);
//!   other statuses, a body that breaks off, and bad JSON fail at once;
//! - each attempt has one deadline that covers the whole exchange, body
//!   included; bodies are read up to [`MAX_RESPONSE_BYTES`];
//! - error texts are Go's (see [`HttpError`]); a status error quotes the body
//!   trimmed, with every secret replaced by `<redacted>`, cut at 1000 bytes.
//!
//! The redaction goes further than the reference on purpose: besides the
//! configured secrets it hides the credential of the per-call
//! `Authorization` value (a token passed through from an MCP client), and it
//! applies to every error text, not only to quoted bodies.

mod client;
mod error;
pub mod json;
mod transport;

#[cfg(feature = "test-util")]
pub mod test_util;

pub use client::{
    BACKEND_DURATION, BACKEND_ERRORS, BACKEND_REQUESTS, BACKEND_RETRIES, HttpClient, HttpSettings, MAX_RESPONSE_BYTES,
    MAX_RETRY_AFTER, Sleeper, delay_before_retry, parse_retry_after, retry_delay,
};
pub use error::{HttpError, MAX_ERROR_BODY_BYTES, REDACTED};

/// Gives the backend metrics their help texts (call once a recorder is installed).
pub fn describe_metrics() {
    metrics::describe_counter!(BACKEND_REQUESTS, "Backend calls (each with its retries), by operation.");
    metrics::describe_counter!(BACKEND_RETRIES, "Backend attempts made again, by operation.");
    metrics::describe_counter!(BACKEND_ERRORS, "Backend calls that failed, by operation and kind of failure.");
    metrics::describe_histogram!(
        BACKEND_DURATION,
        metrics::Unit::Seconds,
        "Time of a backend call, retries included, by operation."
    );
}

/// The `Authorization` value for a token: `None` when it is empty, the token
/// as it is when it already starts with `Bearer ` (any case), else
/// `Bearer <token>`.
pub fn bearer(token: &str) -> Option<String> {
    if token.is_empty() {
        return None;
    }
    let has_scheme = token.get(..7).is_some_and(|prefix| prefix.eq_ignore_ascii_case("bearer "));
    Some(if has_scheme { token.to_owned() } else { format!("Bearer {token}") })
}

/// The client a registry factory builds: the context's User-Agent, attempts,
/// per-attempt time-out and known secrets.
pub fn client_for(ctx: &rr_core::registry::FactoryContext) -> Result<HttpClient, rr_core::registry::FactoryError> {
    let mut settings = HttpSettings::new(ctx.user_agent.clone());
    settings.retry_attempts = ctx.retry_attempts;
    settings.request_timeout = ctx.request_timeout;
    settings.secrets = ctx.secrets.clone();
    HttpClient::new(settings).map_err(|e| rr_core::registry::FactoryError::new(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_matches_the_reference() {
        assert_eq!(bearer(""), None);
        assert_eq!(bearer("token").as_deref(), Some("Bearer token"));
        assert_eq!(bearer("Bearer token").as_deref(), Some("Bearer token"));
        assert_eq!(bearer("bearer token").as_deref(), Some("bearer token"));
        assert_eq!(bearer("BEARER token").as_deref(), Some("BEARER token"));
        assert_eq!(bearer("Bearertoken").as_deref(), Some("Bearer Bearertoken"));
        assert_eq!(bearer("é").as_deref(), Some("Bearer é"));
        assert_eq!(bearer("bearer").as_deref(), Some("Bearer bearer"));
    }
}
