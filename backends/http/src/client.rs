//! The retrying JSON client.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue, USER_AGENT};
use reqwest::{Method, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::time::{Instant, timeout_at};

use crate::error::{HttpError, Secrets, status_body};
use crate::{json, transport};

/// Response bodies are read up to this many bytes; decoding sees the cut body.
pub const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// Backend calls (one per operation asked for, whatever its attempts), by `operation`
/// (`embedding request`, `Chroma query`, …).
pub const BACKEND_REQUESTS: &str = "repo_retriever_backend_requests_total";
/// Attempts made again after a transport error, a 429 or a 5xx, by `operation`.
pub const BACKEND_RETRIES: &str = "repo_retriever_backend_retries_total";
/// Backend calls that failed, by `operation` and `kind` ([`HttpError::kind`]).
pub const BACKEND_ERRORS: &str = "repo_retriever_backend_errors_total";
/// Time of a backend call, retries and their waits included, by `operation`.
pub const BACKEND_DURATION: &str = "repo_retriever_backend_request_duration_seconds";

/// How the client waits between attempts. Production uses `tokio::time::sleep`;
/// tests inject one that returns at once (and may record the delays).
pub type Sleeper = Arc<dyn Fn(Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// The delay before retrying after failed attempt number `attempt` (1-based):
/// 0.5 s, 1 s, 2 s, 4 s, then 8 s for every later attempt.
pub fn retry_delay(attempt: u32) -> Duration {
    const CAP: Duration = Duration::from_secs(8);
    let doublings = attempt.saturating_sub(1).min(5);
    Duration::from_millis(500 << doublings).min(CAP)
}

/// The longest `Retry-After` the client waits before its next attempt; a
/// longer one is waited only this long.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

/// The wait a `Retry-After` value asks for: delta-seconds or an HTTP date
/// (RFC 9110 §10.2.3), measured from `now`; `None` when it is neither.
pub fn parse_retry_after(value: &str, now: std::time::SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The wait before the next attempt after a 429 or 503: the schedule's
/// delay, or longer when the server asked for longer, up to `cap`.
pub fn delay_before_retry(attempt: u32, retry_after: Option<Duration>, cap: Duration) -> Duration {
    let scheduled = retry_delay(attempt);
    match retry_after {
        Some(asked) => scheduled.max(asked.min(cap)),
        None => scheduled,
    }
}

/// What the caller decides about every backend request.
#[derive(Clone)]
pub struct HttpSettings {
    /// Sent on every request, e.g. `repo-retriever/0.1.0`.
    pub user_agent: String,
    /// Attempts in total, including the first; values below 1 count as 1.
    pub retry_attempts: u32,
    /// Deadline of one attempt, from sending until the body is read.
    pub request_timeout: Duration,
    /// Replaced by `<redacted>` wherever a response body or error text would
    /// show them. Empty strings are ignored.
    pub secrets: Vec<String>,
    /// The longest `Retry-After` honoured on a 429 or 503.
    pub max_retry_after: Duration,
}

impl HttpSettings {
    /// The reference server's defaults: 3 attempts, 120 s per attempt, no secrets.
    pub fn new(user_agent: impl Into<String>) -> Self {
        HttpSettings {
            user_agent: user_agent.into(),
            retry_attempts: 3,
            request_timeout: Duration::from_secs(120),
            secrets: Vec::new(),
            max_retry_after: MAX_RETRY_AFTER,
        }
    }
}

impl fmt::Debug for HttpSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpSettings")
            .field("user_agent", &self.user_agent)
            .field("retry_attempts", &self.retry_attempts)
            .field("request_timeout", &self.request_timeout)
            .field("secrets", &format_args!("[{} redacted]", self.secrets.len()))
            .field("max_retry_after", &self.max_retry_after)
            .finish()
    }
}

/// The HTTP client every backend shares. Cloning is cheap and shares the
/// connection pools.
///
/// Two reqwest clients: one for `http://` built without trust roots, and one
/// for `https://` built on the first `https://` request. Building a client
/// with the platform's roots reads every file of the system certificate
/// store (hundreds, about half of a stdio start-up), which a set-up whose
/// backends are all `http://` (the usual local Chroma and embed server)
/// never needs.
#[derive(Clone)]
pub struct HttpClient {
    plain: reqwest::Client,
    tls: Arc<OnceLock<Result<reqwest::Client, String>>>,
    user_agent: HeaderValue,
    retry_attempts: u32,
    request_timeout: Duration,
    secrets: Arc<Vec<String>>,
    max_retry_after: Duration,
    sleeper: Sleeper,
}

impl fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpClient")
            .field("user_agent", &self.user_agent)
            .field("retry_attempts", &self.retry_attempts)
            .field("request_timeout", &self.request_timeout)
            .field("secrets", &format_args!("[{} redacted]", self.secrets.len()))
            .finish_non_exhaustive()
    }
}

/// A response: status, body (at most [`MAX_RESPONSE_BYTES`]), whether the
/// body went on past that, and the wait a `Retry-After` header asks for.
struct Answer {
    status: u16,
    body: Vec<u8>,
    oversized: bool,
    retry_after: Option<Duration>,
}

/// A failed attempt, and whether Go's loop would try again after it.
enum AttemptError {
    /// No response: retried.
    Transport(String),
    /// The body broke off: not retried, as in Go.
    Read(String),
}

impl HttpClient {
    /// Builds the client. Fails only when the User-Agent is not a valid
    /// header value; a TLS stack that cannot be set up fails the first
    /// `https://` request instead.
    pub fn new(settings: HttpSettings) -> Result<Self, HttpError> {
        let user_agent = HeaderValue::from_str(&settings.user_agent)
            .map_err(|_| HttpError::Setup { detail: "the User-Agent is not a valid header value".into() })?;
        // Timeouts are enforced per attempt by `send_once`, which needs to tell
        // "awaiting headers" from "reading body" apart as Go does. No roots:
        // this client never sees an `https://` URL.
        let plain = reqwest::Client::builder()
            .tls_certs_only(std::iter::empty())
            .build()
            .map_err(|e| HttpError::Setup { detail: e.to_string() })?;
        Ok(HttpClient {
            plain,
            tls: Arc::new(OnceLock::new()),
            user_agent,
            retry_attempts: settings.retry_attempts.max(1),
            request_timeout: settings.request_timeout,
            secrets: Arc::new(settings.secrets.into_iter().filter(|s| !s.is_empty()).collect()),
            max_retry_after: settings.max_retry_after,
            sleeper: Arc::new(|delay| Box::pin(tokio::time::sleep(delay))),
        })
    }

    /// Replaces how the client waits between attempts (tests).
    pub fn with_sleeper(mut self, sleeper: Sleeper) -> Self {
        self.sleeper = sleeper;
        self
    }

    /// A client sharing this one's pool that also redacts `secret`. Backends
    /// call it with their own key so it is redacted whatever the caller passed.
    pub fn with_secret(&self, secret: &str) -> Self {
        let mut client = self.clone();
        if !secret.is_empty() && !self.secrets.iter().any(|s| s == secret) {
            let mut secrets = (*self.secrets).clone();
            secrets.push(secret.to_owned());
            client.secrets = Arc::new(secrets);
        }
        client
    }

    /// Total attempts per call.
    pub fn retry_attempts(&self) -> u32 {
        self.retry_attempts
    }

    /// `text` with every configured secret, and the credential inside
    /// `authorization`, replaced by `<redacted>`.
    pub fn redact(&self, text: &str, authorization: Option<&str>) -> String {
        self.secrets_for(authorization).redact(text)
    }

    fn secrets_for(&self, authorization: Option<&str>) -> Secrets {
        Secrets::new(self.secrets.iter().map(String::as_str), authorization)
    }

    /// `GET url` and decode the JSON answer. `operation` names the call in
    /// every error (`Chroma collection lookup`).
    pub async fn get_json<T>(&self, operation: &str, url: &str, authorization: Option<&str>) -> Result<T, HttpError>
    where
        T: DeserializeOwned + Default,
    {
        self.call(operation, Method::GET, url, None, authorization).await
    }

    /// `POST url` with `body` as JSON, and decode the JSON answer.
    pub async fn post_json<B, T>(
        &self,
        operation: &str,
        url: &str,
        body: &B,
        authorization: Option<&str>,
    ) -> Result<T, HttpError>
    where
        B: Serialize + ?Sized,
        T: DeserializeOwned + Default,
    {
        let secrets = self.secrets_for(authorization);
        let encoded = serde_json::to_vec(body).map_err(|e| HttpError::Encode {
            operation: operation.to_owned(),
            detail: secrets.redact(&e.to_string()),
        })?;
        self.call(operation, Method::POST, url, Some(Bytes::from(encoded)), authorization).await
    }

    /// [`HttpClient::attempts`], counted in the backend metrics: one request
    /// per call, its retries, its error by kind, and its whole duration.
    async fn call<T>(
        &self,
        operation: &str,
        method: Method,
        url: &str,
        body: Option<Bytes>,
        authorization: Option<&str>,
    ) -> Result<T, HttpError>
    where
        T: DeserializeOwned + Default,
    {
        let started = std::time::Instant::now();
        let result = self.attempts(operation, method, url, body, authorization).await;
        let label = operation.to_owned();
        metrics::counter!(BACKEND_REQUESTS, "operation" => label.clone()).increment(1);
        metrics::histogram!(BACKEND_DURATION, "operation" => label.clone()).record(started.elapsed().as_secs_f64());
        if let Err(e) = &result {
            metrics::counter!(BACKEND_ERRORS, "operation" => label, "kind" => e.kind()).increment(1);
        }
        result
    }

    /// Go's `doJSON`: the same attempts, the same retry decisions, the same
    /// error for each way of failing.
    async fn attempts<T>(
        &self,
        operation: &str,
        method: Method,
        url: &str,
        body: Option<Bytes>,
        authorization: Option<&str>,
    ) -> Result<T, HttpError>
    where
        T: DeserializeOwned + Default,
    {
        let secrets = self.secrets_for(authorization);
        let parsed = Url::parse(url).map_err(|e| HttpError::CreateRequest {
            operation: operation.to_owned(),
            detail: secrets.redact(&format!("parse {url:?}: {e}")),
        })?;
        let authorization = authorization.filter(|a| !a.is_empty());
        let go_method = if method == Method::POST { "Post" } else { "Get" };
        let client = self.client_for(&parsed)?;
        for attempt in 1..=self.retry_attempts {
            tracing::debug!(operation, method = %method, url, attempt, "backend request");
            let last = attempt == self.retry_attempts;
            match self.send_once(client, &method, &parsed, body.clone(), authorization).await {
                Err(AttemptError::Transport(detail)) => {
                    tracing::debug!(operation, attempt, detail = %secrets.redact(&detail), "backend request got no response");
                    if !last {
                        tracing::debug!(operation, attempt, "backend request failed before a response; retrying");
                        metrics::counter!(BACKEND_RETRIES, "operation" => operation.to_owned()).increment(1);
                        (self.sleeper)(retry_delay(attempt)).await;
                        continue;
                    }
                    return Err(HttpError::Transport {
                        operation: operation.to_owned(),
                        method: go_method,
                        url: url.to_owned(),
                        detail: secrets.redact(&detail),
                    });
                }
                Err(AttemptError::Read(detail)) => {
                    return Err(HttpError::Read { operation: operation.to_owned(), detail: secrets.redact(&detail) });
                }
                Ok(Answer { status, body, oversized, retry_after }) => {
                    if !(200..300).contains(&status) {
                        let body = status_body(&body, &secrets);
                        tracing::debug!(operation, attempt, status, body = %body, "backend answered with an error status");
                        if !last && (status == 429 || status >= 500) {
                            // Only these two statuses carry a meaningful Retry-After.
                            let asked = retry_after.filter(|_| status == 429 || status == 503);
                            metrics::counter!(BACKEND_RETRIES, "operation" => operation.to_owned()).increment(1);
                            (self.sleeper)(delay_before_retry(attempt, asked, self.max_retry_after)).await;
                            continue;
                        }
                        return Err(HttpError::Status { operation: operation.to_owned(), status, body });
                    }
                    if oversized {
                        return Err(HttpError::TooLarge { operation: operation.to_owned(), limit: MAX_RESPONSE_BYTES });
                    }
                    return json::decode(&body).map_err(|detail| {
                        let detail = secrets.redact(&detail);
                        tracing::debug!(operation, detail = %detail, "backend reply is not the expected JSON");
                        HttpError::Decode { operation: operation.to_owned(), detail }
                    });
                }
            }
        }
        unreachable!("retry_attempts is at least 1, and the last attempt always returns")
    }

    /// The reqwest client for `url`'s scheme, building the TLS one on first
    /// use (see [`HttpClient`]).
    fn client_for(&self, url: &Url) -> Result<&reqwest::Client, HttpError> {
        if url.scheme() != "https" {
            return Ok(&self.plain);
        }
        self.tls
            .get_or_init(|| {
                tracing::debug!("setting up TLS with the platform's trust roots");
                reqwest::Client::builder().build().map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|detail| HttpError::Setup { detail: detail.clone() })
    }

    /// Whether the `https://` client has been built (tests).
    pub fn tls_ready(&self) -> bool {
        self.tls.get().is_some()
    }

    /// One attempt under one deadline covering the head and the whole body.
    async fn send_once(
        &self,
        client: &reqwest::Client,
        method: &Method,
        url: &Url,
        body: Option<Bytes>,
        authorization: Option<&str>,
    ) -> Result<Answer, AttemptError> {
        let deadline = Instant::now() + self.request_timeout;
        let mut request = client.request(method.clone(), url.clone()).header(USER_AGENT, self.user_agent.clone());
        if let Some(body) = body {
            request = request.header(CONTENT_TYPE, "application/json").body(body);
        }
        if let Some(authorization) = authorization {
            // Go's transport refuses such a value in the same words, as a
            // request error (and so retries it).
            let value = HeaderValue::from_str(authorization).map_err(|_| {
                AttemptError::Transport("net/http: invalid header field value for \"Authorization\"".to_owned())
            })?;
            request = request.header(AUTHORIZATION, value);
        }
        let mut response = match timeout_at(deadline, request.send()).await {
            Err(_) => return Err(AttemptError::Transport(transport::AWAITING_HEADERS_TIMEOUT.to_owned())),
            Ok(Err(e)) => return Err(AttemptError::Transport(transport::describe_send_error(&e, url))),
            Ok(Ok(response)) => response,
        };
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, std::time::SystemTime::now()));
        let mut bytes = Vec::new();
        let mut oversized = false;
        loop {
            match timeout_at(deadline, response.chunk()).await {
                Err(_) => return Err(AttemptError::Read(transport::READING_BODY_TIMEOUT.to_owned())),
                Ok(Err(e)) => return Err(AttemptError::Read(transport::describe_read_error(&e))),
                Ok(Ok(None)) => break,
                Ok(Ok(Some(chunk))) => {
                    let room = MAX_RESPONSE_BYTES - bytes.len();
                    if chunk.len() > room {
                        // Memory stays bounded: the rest is not read at all.
                        bytes.extend_from_slice(&chunk[..room]);
                        oversized = true;
                        break;
                    }
                    bytes.extend_from_slice(&chunk);
                }
            }
        }
        Ok(Answer { status, body: bytes, oversized, retry_after })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_schedule_is_the_reference_one() {
        let secs: Vec<f64> = (1..=8).map(|a| retry_delay(a).as_secs_f64()).collect();
        assert_eq!(secs, vec![0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0, 8.0]);
        assert_eq!(retry_delay(0), Duration::from_millis(500));
        assert_eq!(retry_delay(u32::MAX), Duration::from_secs(8));
    }

    #[test]
    fn retry_after_is_honoured_up_to_the_cap() {
        let now = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        assert_eq!(parse_retry_after("3", now), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(7));
        assert_eq!(parse_retry_after(&later, now), Some(Duration::from_secs(7)));
        let past = httpdate::fmt_http_date(now - Duration::from_secs(7));
        assert_eq!(parse_retry_after(&past, now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-1", now), None);
        let cap = Duration::from_secs(30);
        assert_eq!(delay_before_retry(1, None, cap), Duration::from_millis(500));
        assert_eq!(delay_before_retry(1, Some(Duration::from_secs(4)), cap), Duration::from_secs(4));
        assert_eq!(delay_before_retry(1, Some(Duration::from_secs(3600)), cap), cap);
        assert_eq!(delay_before_retry(3, Some(Duration::ZERO), cap), Duration::from_secs(2), "never shorter");
    }

    #[test]
    fn debug_output_hides_secrets() {
        let mut settings = HttpSettings::new("repo-retriever/0.0.0");
        settings.secrets = vec!["hunter2".into()];
        assert!(!format!("{settings:?}").contains("hunter2"));
        let client = HttpClient::new(settings).unwrap().with_secret("other-key");
        let shown = format!("{client:?}");
        assert!(!shown.contains("hunter2") && !shown.contains("other-key"), "{shown}");
        assert!(shown.contains("[2 redacted]"), "{shown}");
    }

    #[test]
    fn attempts_are_at_least_one() {
        let mut settings = HttpSettings::new("ua");
        settings.retry_attempts = 0;
        assert_eq!(HttpClient::new(settings).unwrap().retry_attempts(), 1);
    }

    #[test]
    fn redact_covers_configured_and_per_call_secrets() {
        let mut settings = HttpSettings::new("ua");
        settings.secrets = vec!["k1".into(), String::new()];
        let client = HttpClient::new(settings).unwrap().with_secret("k2").with_secret("");
        assert_eq!(client.redact("k1 k2 tok x", Some("Bearer tok")), "<redacted> <redacted> <redacted> x");
    }
}
