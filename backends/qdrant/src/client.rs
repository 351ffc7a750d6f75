//! The gRPC client with retries, and the names errors give.

use std::future::Future;
use std::time::Duration;

use qdrant_client::{Qdrant, QdrantError};
use rr_core::BackendError;
use tonic::Code;

/// The `name()` of the store.
pub const STORE_NAME: &str = "qdrant";
/// The operation name of a query in errors.
pub const QUERY_OPERATION: &str = "Qdrant query";
/// The operation name of the collection lookup in errors.
pub const INFO_OPERATION: &str = "Qdrant collection info";
/// The operation name of a count (term statistics) in errors.
pub const COUNT_OPERATION: &str = "Qdrant count";
/// The operation name of a facet (a collection's paths) in errors.
pub const FACET_OPERATION: &str = "Qdrant facet";

/// How often and how patiently a failed request is repeated.
///
/// Only failures that a later attempt can cure are retried (the server
/// unavailable or overloaded, a deadline or an aborted transaction); a
/// missing collection or a bad filter fails at once. The delays follow the
/// HTTP backends' schedule: `base`, doubling per attempt, at most 16 × `base`
/// (0.5 s … 8 s by default); Qdrant's own `retry-after` wins when it is
/// longer, up to the same ceiling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total, including the first; 0 counts as 1.
    pub attempts: u32,
    pub base: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { attempts: 3, base: Duration::from_millis(500) }
    }
}

impl RetryPolicy {
    /// The wait after failed attempt number `attempt` (1-based).
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let ceiling = self.base * 16;
        let backoff = (self.base * (1u32 << attempt.saturating_sub(1).min(4))).min(ceiling);
        retry_after.map_or(backoff, |r| r.max(backoff).min(ceiling))
    }
}

/// Whether a later attempt may succeed, and how long Qdrant asked to wait.
fn transient(error: &QdrantError) -> Option<Option<Duration>> {
    match error {
        QdrantError::ResourceExhaustedError { retry_after_seconds, .. } => {
            Some(Some(Duration::from_secs(*retry_after_seconds)))
        }
        QdrantError::ResponseError { status } => matches!(
            status.code(),
            Code::Unavailable | Code::DeadlineExceeded | Code::ResourceExhausted | Code::Aborted
        )
        .then_some(None),
        _ => None,
    }
}

/// A client that repeats transient failures (see [`RetryPolicy`]).
pub struct RetryingClient {
    client: Qdrant,
    policy: RetryPolicy,
}

impl RetryingClient {
    pub fn new(client: Qdrant, policy: RetryPolicy) -> Self {
        RetryingClient { client, policy }
    }

    /// Runs `call` until it succeeds, fails for good, or the attempts run out.
    pub(crate) async fn run<T, F, Fut>(&self, operation: &str, mut call: F) -> Result<T, BackendError>
    where
        F: FnMut(Qdrant) -> Fut,
        Fut: Future<Output = Result<T, QdrantError>>,
    {
        let attempts = self.policy.attempts.max(1);
        let mut attempt = 1;
        loop {
            match call(self.client.clone()).await {
                Ok(value) => return Ok(value),
                Err(e) => match transient(&e) {
                    Some(retry_after) if attempt < attempts => {
                        tokio::time::sleep(self.policy.delay(attempt, retry_after)).await;
                        attempt += 1;
                    }
                    _ => return Err(BackendError::new(STORE_NAME, format!("{operation} failed: {e}"))),
                },
            }
        }
    }
}
