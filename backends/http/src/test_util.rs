//! A scripted fake HTTP server for the backends' fault tests.
//!
//! Real servers are used where behaviour matters; this one exists for the
//! faults a real server will not produce on demand (a 500 three times, a hung
//! socket, a body that stops halfway, garbage JSON). It records every request
//! so a test can assert on headers and exact body bytes, and answers from a
//! closure or a fixed sequence of replies. A [`Recorder`] stands between a
//! client and a real backend (or answers itself) and records every request.

use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;

use crate::{HttpClient, HttpSettings, Sleeper};

/// One request as the fake server saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// Path and query, e.g. `/api/v2/tenants/t/databases/d/collections/c`.
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    /// A request as the recorders keep it: method, path with query, headers, body.
    fn of(parts: &axum::http::request::Parts, body: Vec<u8>) -> Self {
        Recorded {
            method: parts.method.to_string(),
            path: parts.uri.path_and_query().map(|p| p.to_string()).unwrap_or_default(),
            headers: parts
                .headers
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
                .collect(),
            body,
        }
    }
}

impl Recorded {
    /// The first header called `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The body as text (lossy).
    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON; panics naming the request when it is not.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{} {}: body is not JSON ({e})", self.method, self.path))
    }
}

/// What the fake server answers.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A complete response.
    Full { status: u16, body: Vec<u8> },
    /// Never answer.
    Hang,
    /// Send the head and the first bytes of the body, then stall forever.
    StallBody { status: u16, first: Vec<u8> },
    /// A complete response with extra headers (`Retry-After`, …).
    WithHeaders { status: u16, headers: Vec<(String, String)>, body: Vec<u8> },
    /// `200` with a body of `len` bytes of `byte`, streamed in 64 KiB chunks
    /// (an oversized reply, without holding it in memory).
    Huge { len: usize, byte: u8 },
    /// `200` whose body trickles `chunk` every `every` forever (a slow body).
    Trickle { chunk: Vec<u8>, every: Duration },
}

impl Reply {
    /// `200` with `value` as the JSON body.
    pub fn json(value: serde_json::Value) -> Self {
        Reply::Full { status: 200, body: value.to_string().into_bytes() }
    }

    /// Any status with any body bytes.
    pub fn status(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Reply::Full { status, body: body.into() }
    }
}

type Handler = dyn Fn(&Recorded) -> Reply + Send + Sync;

struct Shared {
    handler: Box<Handler>,
    log: Mutex<Vec<Recorded>>,
}

/// A fake server on `127.0.0.1:<free port>`, stopped when dropped.
pub struct FakeServer {
    url: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for FakeServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeServer").field("url", &self.url).finish_non_exhaustive()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeServer {
    /// Answers every request with `handler(request)`.
    pub async fn start(handler: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> Self {
        let shared = Arc::new(Shared { handler: Box::new(handler), log: Mutex::new(Vec::new()) });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind a local port");
        let url = format!("http://{}", listener.local_addr().expect("local address"));
        let app = axum::Router::new().fallback(serve).with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeServer { url, shared, task }
    }

    /// Answers the n-th request with `replies[n]`, and every later one with
    /// the last reply.
    pub async fn sequence(replies: Vec<Reply>) -> Self {
        assert!(!replies.is_empty(), "a sequence needs at least one reply");
        let next = Mutex::new(0usize);
        FakeServer::start(move |_| {
            let mut n = next.lock().unwrap_or_else(PoisonError::into_inner);
            let reply = replies[(*n).min(replies.len() - 1)].clone();
            *n += 1;
            reply
        })
        .await
    }

    /// `http://127.0.0.1:<port>`, without a trailing slash.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.log.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// How many requests arrived so far.
    pub fn request_count(&self) -> usize {
        self.shared.log.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

async fn serve(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.map(|b| b.to_vec()).unwrap_or_default();
    let recorded = Recorded::of(&parts, body);
    let reply = (shared.handler)(&recorded);
    shared.log.lock().unwrap_or_else(PoisonError::into_inner).push(recorded);
    match reply {
        Reply::Full { status, body } => response(status, Body::from(body)),
        Reply::Hang => std::future::pending().await,
        Reply::StallBody { status, first } => {
            let stream = futures::stream::once(async move { Ok::<_, Infallible>(Bytes::from(first)) })
                .chain(futures::stream::pending());
            response(status, Body::from_stream(stream))
        }
        Reply::WithHeaders { status, headers, body } => {
            let mut r = response(status, Body::from(body));
            for (name, value) in headers {
                let name = axum::http::HeaderName::try_from(name).expect("a valid header name");
                r.headers_mut().insert(name, axum::http::HeaderValue::try_from(value).expect("a valid header value"));
            }
            r
        }
        Reply::Huge { len, byte } => {
            const CHUNK: usize = 64 << 10;
            let block = Bytes::from(vec![byte; CHUNK]);
            let stream = futures::stream::iter((0..len.div_ceil(CHUNK)).map(move |i| {
                let size = CHUNK.min(len - i * CHUNK);
                Ok::<_, Infallible>(block.slice(..size))
            }));
            response(200, Body::from_stream(stream))
        }
        Reply::Trickle { chunk, every } => {
            let stream = futures::stream::unfold((), move |()| {
                let chunk = chunk.clone();
                async move {
                    tokio::time::sleep(every).await;
                    Some((Ok::<_, Infallible>(Bytes::from(chunk)), ()))
                }
            });
            response(200, Body::from_stream(stream))
        }
    }
}

fn response(status: u16, body: Body) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = axum::http::StatusCode::from_u16(status).expect("a valid status code");
    response
}

/// A URL on which nothing listens: a port that was bound and released.
pub async fn refused_url() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind a local port");
    let addr = listener.local_addr().expect("local address");
    drop(listener);
    format!("http://{addr}")
}

/// A sleeper that returns at once and records each requested delay.
pub fn recording_sleeper() -> (Sleeper, Arc<Mutex<Vec<Duration>>>) {
    let delays = Arc::new(Mutex::new(Vec::new()));
    let log = delays.clone();
    let sleeper: Sleeper = Arc::new(move |delay| {
        log.lock().unwrap_or_else(PoisonError::into_inner).push(delay);
        Box::pin(async {})
    });
    (sleeper, delays)
}

/// Settings for tests: `repo-retriever/test`, the given attempts, a 5 s timeout.
pub fn settings(retry_attempts: u32) -> HttpSettings {
    HttpSettings {
        user_agent: "repo-retriever/test".to_owned(),
        retry_attempts,
        request_timeout: Duration::from_secs(5),
        secrets: Vec::new(),
        max_retry_after: crate::MAX_RETRY_AFTER,
    }
}

/// A client whose retries do not wait.
pub fn instant_client(settings: HttpSettings) -> HttpClient {
    HttpClient::new(settings).expect("build the HTTP client").with_sleeper(recording_sleeper().0)
}

type Responder = dyn Fn(&Recorded) -> (u16, String) + Send + Sync;

enum RecorderMode {
    Forward { target: String, client: reqwest::Client },
    Fake(Box<Responder>),
}

/// An HTTP server on a free loopback port that records every request, then either forwards it to
/// a real backend (and relays the answer) or answers it itself. It lives on the runtime of the
/// test that started it and stops when dropped.
pub struct Recorder {
    url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Recorder {
    /// Records, then forwards to `target` (e.g. the real Chroma) and relays status, content type
    /// and body.
    pub async fn forward(target: &str) -> Recorder {
        Self::start(RecorderMode::Forward {
            target: target.trim_end_matches('/').to_string(),
            client: reqwest::Client::new(),
        })
        .await
    }

    /// Records, then answers with whatever `respond` returns (status, JSON body).
    pub async fn fake(respond: impl Fn(&Recorded) -> (u16, String) + Send + Sync + 'static) -> Recorder {
        Self::start(RecorderMode::Fake(Box::new(respond))).await
    }

    async fn start(mode: RecorderMode) -> Recorder {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the recorder");
        let url = format!("http://{}", listener.local_addr().expect("recorder address"));
        let requests: Arc<Mutex<Vec<Recorded>>> = Arc::default();
        let mode = Arc::new(mode);
        let log = requests.clone();
        let handler = move |request: axum::extract::Request| {
            let mode = mode.clone();
            let log = log.clone();
            async move {
                let (parts, body) = request.into_parts();
                let body = axum::body::to_bytes(body, 64 << 20).await.unwrap_or_default().to_vec();
                let recorded = Recorded::of(&parts, body);
                log.lock().unwrap_or_else(PoisonError::into_inner).push(recorded.clone());
                let (status, content_type, body) = match mode.as_ref() {
                    RecorderMode::Fake(respond) => {
                        let (status, body) = respond(&recorded);
                        (status, "application/json".to_string(), body.into_bytes())
                    }
                    RecorderMode::Forward { target, client } => {
                        let method = reqwest::Method::from_bytes(recorded.method.as_bytes()).expect("method");
                        let mut req = client.request(method, format!("{target}{}", recorded.path));
                        for (k, v) in &recorded.headers {
                            if !k.eq_ignore_ascii_case("host") && !k.eq_ignore_ascii_case("content-length") {
                                req = req.header(k.as_str(), v.as_str());
                            }
                        }
                        match req.body(recorded.body.clone()).send().await {
                            Ok(resp) => {
                                let status = resp.status().as_u16();
                                let ct = resp
                                    .headers()
                                    .get("content-type")
                                    .and_then(|v| v.to_str().ok())
                                    .unwrap_or("application/json")
                                    .to_string();
                                (status, ct, resp.bytes().await.unwrap_or_default().to_vec())
                            }
                            Err(e) => (502, "text/plain".to_string(), format!("recorder: {e}").into_bytes()),
                        }
                    }
                };
                axum::response::Response::builder()
                    .status(status)
                    .header("content-type", content_type)
                    .body(axum::body::Body::from(body))
                    .expect("response")
            }
        };
        let app = axum::Router::new().fallback(handler);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Recorder { url, requests, task }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Everything received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Requests whose path starts with `prefix`.
    pub fn requests_to(&self, prefix: &str) -> Vec<Recorded> {
        self.requests().into_iter().filter(|r| r.path.starts_with(prefix)).collect()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").field("url", &self.url).finish_non_exhaustive()
    }
}
