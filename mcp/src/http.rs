//! Streamable HTTP: rmcp's stateless service at `/mcp` (JSON responses, no
//! session ids), 404 everywhere else, one JSON log line per request on
//! stdout.
//!
//! rmcp answers the protocol: a plain request through its `ServerHandler`
//! directly (`direct`, which says why and when), anything else through
//! its stateless service. Around it, [`App`] does what an operator of the
//! reference relies on: the log line (every path), then at `/mcp` the Host
//! guard (DNS rebinding), the origin and bearer token of `serve`
//! ([`crate::auth`]; the drop-in checks neither), the body cap and read
//! timeout, the framing check of [`crate::frame`] and the rate limit of
//! tool calls, in that order. `serve` also answers `/healthz`, `/readyz`
//! and `/metrics` ([`crate::telemetry`]); the drop-in answers 404 there.
//! [`App`] is one hand-written service rather than axum middleware and
//! routes: each `from_fn` layer and route clones the service below it and
//! boxes a future per request, and the router adds extensions nobody reads.
//! The listener is served by hyper directly because `axum::serve` sets no
//! header read timeout: a client that trickles its headers or body is cut
//! off.

use std::convert::Infallible;
use std::future::Future;
use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::ConnectInfo;
use http::{HeaderValue, Method, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde::Serialize;
use serde_json::value::RawValue;
use time::format_description::well_known::Rfc3339;
use tokio::net::TcpListener;

use crate::auth::{Access, Refusal, is_loopback_host};
use crate::direct::{Direct, Served};
use crate::frame::{self, KeptId, Verdict};

/// How rmcp's service answers a body it cannot decode (HTTP 415); the
/// framing check then answers it instead.
const RMCP_UNDECODABLE: &[u8] = b"fail to deserialize request body";
use crate::ratelimit::RateLimiter;
use crate::search::{ToolLog, quote};
use crate::server::{McpServer, ToolLogSlot, text_result};
use crate::telemetry::Telemetry;
use crate::timer::CoarseTimer;

/// Request bodies above this are refused with 413.
pub const MAX_BODY_BYTES: usize = 4 << 20;
/// Time a client has to send a request's headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Time a client has to send a request's body, once its headers are in.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Turns the `--http` value into a bind address: a bare port or `:port`
/// listens on all interfaces, anything else is used as given.
pub fn bind_address(value: &str) -> String {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return format!("[::]:{value}");
    }
    if let Some(port) = value.strip_prefix(':') {
        return format!("[::]:{port}");
    }
    value.to_owned()
}

/// Turns the `serve --http` value into a bind address: a bare port or
/// `:port` listens on the loopback interface only, anything else is used
/// as given.
pub fn local_bind_address(value: &str) -> String {
    let value = value.trim();
    let port = value.strip_prefix(':').unwrap_or(value);
    if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) {
        return format!("127.0.0.1:{port}");
    }
    value.to_owned()
}

/// Binds the listener of the drop-in (a bare port: every interface); falls
/// back to IPv4 when the machine has no IPv6.
pub async fn bind(value: &str) -> std::io::Result<TcpListener> {
    bind_to(bind_address(value)).await
}

/// Binds the listener of `serve` (a bare port: 127.0.0.1).
pub async fn bind_local(value: &str) -> std::io::Result<TcpListener> {
    bind_to(local_bind_address(value)).await
}

async fn bind_to(addr: String) -> std::io::Result<TcpListener> {
    match TcpListener::bind(&addr).await {
        Ok(l) => Ok(l),
        Err(e) if addr.starts_with("[::]:") => {
            TcpListener::bind(addr.replacen("[::]", "0.0.0.0", 1)).await.map_err(|_| e)
        }
        Err(e) => Err(e),
    }
}

/// The two ends of an accepted connection: the DNS-rebinding guard depends
/// on which local address a client reached, the rate limit on the peer.
#[derive(Debug, Clone, Copy)]
pub struct LocalAddr(pub Option<SocketAddr>, pub Option<SocketAddr>);

impl LocalAddr {
    /// The client's address (the rate limit's key).
    pub fn peer(&self) -> Option<SocketAddr> {
        self.1
    }
}

/// HTTP options of the MCP endpoint.
#[derive(Debug, Clone, Default)]
pub struct HttpOptions {
    /// Tool calls per minute per client address; `None` or 0: unlimited.
    pub rate_limit: Option<u32>,
    /// Tokens and allowed origins (`serve`); `None`: neither is checked, and
    /// the client's `Authorization` reaches the backends (the drop-in).
    pub access: Option<Arc<Access>>,
    /// `/healthz`, `/readyz` and `/metrics` beside `/mcp` (`serve`); `None`:
    /// every other path is 404 (the drop-in).
    pub telemetry: Option<Telemetry>,
}

/// The router: `/mcp` for MCP, 404 elsewhere, every request logged. The
/// connection's addresses come in the request's [`ConnectInfo`] extension;
/// [`serve`] calls [`App`] directly instead.
pub fn router(server: McpServer, options: HttpOptions) -> Router {
    Router::new().fallback_service(App::new(server, options))
}

/// Serves until the process ends.
pub async fn serve(listener: TcpListener, server: McpServer, options: HttpOptions) -> std::io::Result<()> {
    let app = App::new(server, options);
    let timer = CoarseTimer::start();
    loop {
        let (stream, remote) = match listener.accept().await {
            Ok(accepted) => accepted,
            // Out of descriptors and the like: the listener itself is fine.
            Err(e) => {
                tracing::debug!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let local = LocalAddr(stream.local_addr().ok(), Some(remote));
        let service = Connection { app: app.clone(), local };
        let timer = timer.clone();
        tokio::spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.timer(timer).header_read_timeout(HEADER_READ_TIMEOUT);
            if let Err(e) = builder.serve_connection(TokioIo::new(stream), service).await {
                tracing::debug!(error = %e, "HTTP connection ended");
            }
        });
    }
}

/// An answer as [`App`] builds it: the whole body in hand. Every answer is
/// complete when its handler returns (JSON responses, no streams), and the
/// log line states its exact size.
type Reply = http::Response<Bytes>;

/// A boxed future of one answer: the one allocation a request costs here
/// beyond what it carries.
type ReplyFuture = Pin<Box<dyn Future<Output = Result<http::Response<Full<Bytes>>, Infallible>> + Send>>;

/// The HTTP application: the log line around every request, the checks of
/// `/mcp`, then the direct path or rmcp's stateless service.
#[derive(Clone)]
pub struct App(Arc<AppInner>);

struct AppInner {
    limiter: Option<RateLimiter>,
    access: Option<Arc<Access>>,
    telemetry: Option<Telemetry>,
    /// The direct path: plain requests without rmcp's per-request service.
    direct: Direct,
    rmcp: StreamableHttpService<McpServer, NeverSessionManager>,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App").field("rate_limited", &self.0.limiter.is_some()).finish()
    }
}

impl App {
    pub fn new(server: McpServer, options: HttpOptions) -> App {
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            // The Host guard below is the reference's (it depends on the local
            // address reached); rmcp's loopback-only list would refuse every
            // client of a server bound to all interfaces.
            .disable_allowed_hosts()
            .with_max_request_body_bytes(MAX_BODY_BYTES);
        let direct = Direct::new(server.clone());
        let rmcp =
            StreamableHttpService::new(move || Ok(server.clone()), Arc::new(NeverSessionManager::default()), config);
        let limiter = options.rate_limit.filter(|n| *n > 0).map(RateLimiter::new);
        App(Arc::new(AppInner { limiter, access: options.access, telemetry: options.telemetry, direct, rmcp }))
    }

    /// Answers one request that came over `connection`, and logs it.
    pub async fn handle<B>(&self, mut request: http::Request<B>, connection: Option<LocalAddr>) -> Reply
    where
        B: HttpBody<Data = Bytes> + Send + 'static,
        B::Error: Into<axum::BoxError>,
    {
        let started = Instant::now();
        let method = request.method().clone();
        let uri = request.uri().clone();
        let slot = ToolLogSlot::default();
        let reply = if uri.path() == "/mcp" {
            let cors = self.cors_origin(request.headers());
            let preflight =
                method == Method::OPTIONS && request.headers().contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
            let mut reply = match (&cors, preflight) {
                (Some(_), true) => host_guard(&request, connection).unwrap_or_else(preflight_reply),
                _ => {
                    request.extensions_mut().insert(slot.clone());
                    self.endpoint(request, connection).await
                }
            };
            if let Some(origin) = cors {
                allow_origin(&mut reply, origin);
            }
            reply
        } else if let Some(telemetry) = &self.0.telemetry
            && let Some(reply) =
                status_reply(&method, uri.path(), request.headers(), telemetry, self.0.access.as_deref()).await
        {
            reply
        } else {
            plain(StatusCode::NOT_FOUND, "404 page not found")
        };
        log_request(started, &method, &uri, &reply, slot.take());
        reply
    }

    /// The `Origin` of a browser's request to `serve` when the operator
    /// allows it (a loopback origin, or one `--allow-origin` lists): the
    /// answer then carries CORS headers, so that the browser lets the page
    /// read it. The drop-in sends none, as the reference.
    fn cors_origin(&self, headers: &http::HeaderMap) -> Option<HeaderValue> {
        let access = self.0.access.as_ref()?;
        let origin = headers.get(header::ORIGIN)?;
        origin.to_str().is_ok_and(|o| access.origins.allows(o)).then(|| origin.clone())
    }

    /// The checks of `/mcp`, in order: Host guard, origin and token, body,
    /// framing, rate limit.
    async fn endpoint<B>(&self, mut request: http::Request<B>, connection: Option<LocalAddr>) -> Reply
    where
        B: HttpBody<Data = Bytes> + Send + 'static,
        B::Error: Into<axum::BoxError>,
    {
        if let Some(refusal) = host_guard(&request, connection) {
            return refusal;
        }
        if let Some(access) = &self.0.access {
            let headers = request.headers();
            let origin = headers.get(header::ORIGIN).map(HeaderValue::as_bytes);
            let authorization = headers.get(header::AUTHORIZATION).map(HeaderValue::as_bytes);
            match access.check(origin, authorization) {
                Err(refusal) => return refused(&refusal),
                Ok(role) => {
                    // The token is this server's: it goes no further (not to a backend).
                    request.headers_mut().remove(header::AUTHORIZATION);
                    if let Some(role) = role {
                        request.extensions_mut().insert(role);
                    }
                }
            }
        }
        if request.method() != Method::POST {
            return buffered(self.0.rmcp.handle(request.map(Body::new)).await).await;
        }
        match read_body(request).await {
            Ok((parts, bytes)) => self.check_frame(parts, bytes, connection).await,
            Err(refusal) => refusal,
        }
    }

    /// [`frame::screen`] on the body: what rmcp would refuse without a
    /// JSON-RPC answer is answered here; a kept id is put back in the reply.
    /// A plain request is then served by [`Direct`], anything else by rmcp's
    /// service. Either decodes the typed message itself; only a body rmcp
    /// cannot decode is decoded again, by [`frame::inspect`], for the answer.
    async fn check_frame(&self, parts: http::request::Parts, bytes: Bytes, connection: Option<LocalAddr>) -> Reply {
        let (body, kept, method) = match frame::screen(&bytes) {
            Err(verdict) => return answer(verdict, &bytes),
            Ok(screened) => {
                let client = connection.and_then(|c| c.peer()).map(|a| a.ip());
                if let Some(limited) =
                    rate_limit(self.0.limiter.as_ref(), client, screened.method.as_deref(), screened.readable_id)
                {
                    return limited;
                }
                match screened.swapped {
                    None => (bytes.clone(), None, screened.method),
                    Some(swapped) => (Bytes::from(swapped), screened.kept, screened.method),
                }
            }
        };
        let parts = match self.0.direct.serve(parts, &body, method.as_deref()).await {
            Served::Reply(reply) => {
                let response = json_bytes(StatusCode::OK, reply);
                return match kept {
                    None => response,
                    Some(kept) => restore_kept_id(response, kept),
                };
            }
            Served::ToRmcp(parts) => parts,
            Served::Unencodable(text) => {
                let mut response = http::Response::new(Bytes::from(text));
                *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
                return response;
            }
        };
        let response = self.0.rmcp.handle(http::Request::from_parts(parts, Full::new(body))).await;
        let response = buffered(response).await;
        if response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE {
            if response.body().starts_with(RMCP_UNDECODABLE) {
                match frame::inspect(&bytes) {
                    Verdict::Forward { .. } => {}
                    verdict => return answer(verdict, &bytes),
                }
            }
            return response;
        }
        match kept {
            None => response,
            Some(kept) => restore_kept_id(response, kept),
        }
    }
}

/// Axum's view of [`App`] (for [`router`]): the connection from the
/// request's [`ConnectInfo`].
impl tower::Service<http::Request<Body>> for App {
    type Response = http::Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = ReplyFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> ReplyFuture {
        let app = self.clone();
        let connection = request.extensions().get::<ConnectInfo<LocalAddr>>().map(|c| c.0);
        Box::pin(async move { Ok(app.handle(request, connection).await.map(Full::new)) })
    }
}

/// `/healthz` (the process answers), `/readyz` (the store can be read) and
/// `/metrics` (Prometheus text; with tokens configured, it needs one, any
/// role); `None` for any other path.
async fn status_reply(
    method: &Method,
    path: &str,
    headers: &http::HeaderMap,
    telemetry: &Telemetry,
    access: Option<&Access>,
) -> Option<Reply> {
    if !matches!(path, "/healthz" | "/readyz" | "/metrics") {
        return None;
    }
    if method != Method::GET && method != Method::HEAD {
        let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
        response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return Some(response);
    }
    Some(match path {
        "/healthz" => plain(StatusCode::OK, "ok"),
        "/readyz" => match telemetry.ready().await {
            Ok(()) => plain(StatusCode::OK, "ready"),
            Err(e) => plain(StatusCode::SERVICE_UNAVAILABLE, &format!("not ready: {e}")),
        },
        _ => {
            if let Some(access) = access {
                let origin = headers.get(header::ORIGIN).map(HeaderValue::as_bytes);
                let authorization = headers.get(header::AUTHORIZATION).map(HeaderValue::as_bytes);
                if let Err(refusal) = access.check(origin, authorization) {
                    return Some(refused(&refusal));
                }
            }
            let mut response = http::Response::new(Bytes::from(telemetry.render().await));
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
            response
        }
    })
}

/// Serves `/healthz`, `/readyz` and `/metrics` alone (`serve --metrics` of a
/// stdio server), until the process ends; `/metrics` needs a token of
/// `access` when it has any.
pub async fn serve_status(
    listener: TcpListener,
    telemetry: Telemetry,
    access: Option<Arc<Access>>,
) -> std::io::Result<()> {
    let timer = CoarseTimer::start();
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::debug!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let telemetry = telemetry.clone();
        let access = access.clone();
        let timer = timer.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
                let telemetry = telemetry.clone();
                let access = access.clone();
                async move {
                    let (method, path) = (request.method(), request.uri().path());
                    let headers = request.headers();
                    let reply = match status_reply(method, path, headers, &telemetry, access.as_deref()).await {
                        Some(reply) => reply,
                        None => plain(StatusCode::NOT_FOUND, "404 page not found"),
                    };
                    Ok::<_, Infallible>(reply.map(Full::new))
                }
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.timer(timer).header_read_timeout(HEADER_READ_TIMEOUT);
            if let Err(e) = builder.serve_connection(TokioIo::new(stream), service).await {
                tracing::debug!(error = %e, "HTTP connection ended");
            }
        });
    }
}

/// [`App`] on one accepted connection, as hyper calls it.
#[derive(Clone)]
struct Connection {
    app: App,
    local: LocalAddr,
}

impl hyper::service::Service<http::Request<hyper::body::Incoming>> for Connection {
    type Response = http::Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = ReplyFuture;

    fn call(&self, request: http::Request<hyper::body::Incoming>) -> ReplyFuture {
        let (app, local) = (self.app.clone(), self.local);
        Box::pin(async move { Ok(app.handle(request, Some(local)).await.map(Full::new)) })
    }
}

/// rmcp's answer with its body read (its JSON answers are complete).
async fn buffered<B: HttpBody<Data = Bytes>>(response: http::Response<B>) -> Reply {
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    http::Response::from_parts(parts, bytes)
}

/// The request headers a page may send to `/mcp`: the token, the body's
/// type and the headers of the Streamable HTTP transport.
const CORS_ALLOW_HEADERS: &str =
    "authorization, content-type, accept, mcp-protocol-version, mcp-session-id, last-event-id";

/// The answer to a CORS preflight (`OPTIONS` with
/// `Access-Control-Request-Method`) from an allowed origin: answered
/// before the token check, since a browser sends no token with it.
fn preflight_reply() -> Reply {
    let mut response = http::Response::new(Bytes::new());
    *response.status_mut() = StatusCode::NO_CONTENT;
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("GET, POST, DELETE, OPTIONS"));
    headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static(CORS_ALLOW_HEADERS));
    headers.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
    response
}

/// CORS headers on an answer to an allowed `origin`, refusals included (a
/// page can then tell a 401 from a network error). The origin is named
/// rather than `*`, and caches told that the answer depends on it.
fn allow_origin(reply: &mut Reply, origin: HeaderValue) {
    let headers = reply.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static("mcp-session-id, www-authenticate"));
    headers.append(header::VARY, HeaderValue::from_static("Origin"));
}

/// A plain-text error as Go's `http.Error` writes it.
fn plain(status: StatusCode, message: &str) -> Reply {
    let mut response = http::Response::new(Bytes::from(format!("{message}\n")));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    response
}

/// The answer to a request refused by [`Access::check`].
fn refused(refusal: &Refusal) -> Reply {
    let status = StatusCode::from_u16(refusal.status).unwrap_or(StatusCode::FORBIDDEN);
    let mut response = plain(status, refusal.message);
    if let Some(challenge) = refusal.challenge {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
    }
    response
}

fn json(status: StatusCode, body: String) -> Reply {
    json_bytes(status, body.into_bytes())
}

fn json_bytes(status: StatusCode, body: Vec<u8>) -> Reply {
    let mut response = http::Response::new(Bytes::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// A client that reached a loopback address must name a loopback host: a
/// page elsewhere cannot reach a local server through a rebound DNS name.
fn host_guard<B>(request: &http::Request<B>, connection: Option<LocalAddr>) -> Option<Reply> {
    // A dual-stack listener (`--http 8080`) sees IPv4 clients as `::ffff:a.b.c.d`.
    if connection.and_then(|c| c.0).is_some_and(|a| a.ip().to_canonical().is_loopback()) {
        let host = request.headers().get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
        if !is_loopback_host(host) {
            return Some(plain(StatusCode::FORBIDDEN, &format!("Forbidden: invalid Host header {}", quote(host))));
        }
    }
    None
}

/// Buffers the body within [`MAX_BODY_BYTES`] and [`BODY_READ_TIMEOUT`].
async fn read_body<B>(request: http::Request<B>) -> Result<(http::request::Parts, Bytes), Reply>
where
    B: HttpBody<Data = Bytes>,
    B::Error: Into<axum::BoxError>,
{
    let declared = request.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Err(plain(StatusCode::PAYLOAD_TOO_LARGE, "http: request body too large"));
    }
    let (parts, body) = request.into_parts();
    match tokio::time::timeout(BODY_READ_TIMEOUT, Limited::new(body, MAX_BODY_BYTES).collect()).await {
        Ok(Ok(collected)) => Ok((parts, collected.to_bytes())),
        Ok(Err(e)) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
            Err(plain(StatusCode::PAYLOAD_TOO_LARGE, "http: request body too large"))
        }
        Ok(Err(_)) => Err(plain(StatusCode::BAD_REQUEST, "Bad Request: the request body could not be read")),
        Err(_) => {
            let mut response = plain(StatusCode::REQUEST_TIMEOUT, "Request Timeout: the body was not sent in time");
            response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            Err(response)
        }
    }
}

/// The reply to a body the framing check decided alone.
fn answer(verdict: Verdict, bytes: &[u8]) -> Reply {
    match verdict {
        Verdict::Answer(frame) => json(StatusCode::BAD_REQUEST, frame),
        // Not even a readable notification: nothing to answer.
        Verdict::Ignore if !bytes.iter().all(u8::is_ascii_whitespace) => {
            let mut response = http::Response::new(Bytes::new());
            *response.status_mut() = StatusCode::ACCEPTED;
            response
        }
        Verdict::Ignore => json(
            StatusCode::BAD_REQUEST,
            frame::error_frame(None, frame::PARSE_ERROR, "parse error: the request body is empty"),
        ),
        Verdict::Forward { .. } => plain(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error"),
    }
}

fn restore_kept_id(response: Reply, kept: KeptId) -> Reply {
    let (parts, bytes) = response.into_parts();
    let restored = match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(value) => frame::restore_id(value, |p| (p == kept.placeholder).then(|| kept.original.clone())),
        Err(_) => return http::Response::from_parts(parts, bytes),
    };
    let mut response = http::Response::from_parts(parts, Bytes::from(restored));
    response.headers_mut().remove(header::CONTENT_LENGTH);
    response
}

/// A tool call over the limit gets the limit's tool error; nothing else counts.
fn rate_limit(
    limiter: Option<&RateLimiter>,
    client: Option<IpAddr>,
    method: Option<&str>,
    id: Option<&RawValue>,
) -> Option<Reply> {
    let limiter = limiter?;
    if let (Some("tools/call"), Some(id), Some(ip)) = (method, id, client)
        && let Err(text) = limiter.check(ip)
    {
        #[derive(Serialize)]
        struct Reply<'a> {
            jsonrpc: &'static str,
            id: &'a RawValue,
            result: rmcp::model::CallToolResult,
        }
        let reply = Reply { jsonrpc: "2.0", id, result: text_result(text, true) };
        return Some(json(StatusCode::OK, serde_json::to_string(&reply).unwrap_or_default()));
    }
    None
}

#[derive(Serialize)]
struct HttpFields<'a> {
    method: &'a str,
    path: &'a str,
    status_code: u16,
    response_bytes: usize,
}

#[derive(Serialize)]
struct RequestEvent<'a> {
    timestamp: String,
    level: &'static str,
    event: &'static str,
    request_id: &'a str,
    transport: &'static str,
    duration_ms: u128,
    http: HttpFields<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mcp: Option<ToolLog>,
}

fn log_request(started: Instant, method: &Method, uri: &http::Uri, reply: &Reply, mcp: Option<ToolLog>) {
    let path = percent_encoding::percent_decode_str(uri.path()).decode_utf8_lossy();
    let status = reply.status().as_u16();
    let failed = status >= 400 || mcp.as_ref().is_some_and(|m| m.outcome == "error");
    let mut request_id = [0; uuid::fmt::Hyphenated::LENGTH];
    let event = RequestEvent {
        timestamp: time::OffsetDateTime::now_utc().format(&Rfc3339).unwrap_or_default(),
        level: if failed { "ERROR" } else { "INFO" },
        event: "mcp.request.completed",
        request_id: uuid::Uuid::new_v4().hyphenated().encode_lower(&mut request_id),
        transport: "streamable_http",
        duration_ms: started.elapsed().as_millis(),
        http: HttpFields {
            method: method.as_str(),
            path: &path,
            status_code: status,
            response_bytes: reply.body().len(),
        },
        mcp,
    };
    let mut line = serde_json::to_vec(&event).unwrap_or_default();
    if !line.is_empty() {
        line.push(b'\n');
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(&line);
        let _ = out.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_addresses() {
        assert_eq!(bind_address("8080"), "[::]:8080");
        assert_eq!(bind_address(":8080"), "[::]:8080");
        assert_eq!(bind_address("127.0.0.1:8080"), "127.0.0.1:8080");
        assert_eq!(bind_address("localhost:0"), "localhost:0");
        assert_eq!(local_bind_address("8080"), "127.0.0.1:8080");
        assert_eq!(local_bind_address(":8080"), "127.0.0.1:8080");
        assert_eq!(local_bind_address("0.0.0.0:8080"), "0.0.0.0:8080");
        assert_eq!(local_bind_address("[::]:8080"), "[::]:8080");
    }

    #[test]
    fn loopback_hosts() {
        for h in [
            "localhost",
            "LOCALHOST:80",
            "127.0.0.1",
            "127.9.9.9:1234",
            "[::1]:8080",
            "::1",
            "[::1]",
            "[::ffff:127.0.0.1]:80",
        ] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in ["evil.com", "evil.com:80", "10.0.0.1", "", "[::2]:1", "localhost.evil.com"] {
            assert!(!is_loopback_host(h), "{h}");
        }
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        let t = time::OffsetDateTime::from_unix_timestamp_nanos(1_700_000_000_120_000_000).unwrap();
        assert_eq!(t.format(&Rfc3339).unwrap(), "2023-11-14T22:13:20.12Z");
    }
}
