//! Streamable HTTP: rmcp's stateless service at `/mcp` (JSON responses, no
//! session ids), 404 everywhere else, one JSON log line per request on
//! stdout.
//!
//! rmcp answers the protocol: a plain request through its `ServerHandler`
//! directly (`direct`, which says why and when), anything else through
//! its stateless service. Two tower layers around it do what an
//! operator of the reference relies on: the log line (outermost, every
//! path), then at `/mcp` the Host guard (DNS rebinding), the body cap and
//! read timeout, the framing check of [`crate::frame`] and the rate limit of
//! tool calls, in that order. They are one layer, not four, because each
//! `from_fn` layer clones and boxes the service below it per request. The listener
//! is served by hyper directly because `axum::serve` sets no header read
//! timeout: a client that trickles its headers or body is cut off.

use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::{self, Next};
use axum::response::Response;
use http::{HeaderValue, Method, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde::Serialize;
use serde_json::value::RawValue;
use time::format_description::well_known::Rfc3339;
use tokio::net::TcpListener;
use tower::ServiceExt as _;

use crate::direct::{Direct, Served};
use crate::frame::{self, KeptId, Verdict};

/// How rmcp's service answers a body it cannot decode (HTTP 415); the
/// framing check then answers it instead.
const RMCP_UNDECODABLE: &[u8] = b"fail to deserialize request body";
use crate::ratelimit::RateLimiter;
use crate::search::{ToolLog, quote};
use crate::server::{McpServer, ToolLogSlot, text_result};
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

/// Binds the listener; falls back to IPv4 when the machine has no IPv6.
pub async fn bind(value: &str) -> std::io::Result<TcpListener> {
    let addr = bind_address(value);
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
#[derive(Debug, Clone, Copy, Default)]
pub struct HttpOptions {
    /// Tool calls per minute per client address; `None` or 0: unlimited.
    pub rate_limit: Option<u32>,
}

/// The router: `/mcp` for MCP, 404 elsewhere, every request logged.
pub fn router(server: McpServer, options: HttpOptions) -> Router {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        // The Host guard below is the reference's (it depends on the local
        // address reached); rmcp's loopback-only list would refuse every
        // client of a server bound to all interfaces.
        .disable_allowed_hosts()
        .with_max_request_body_bytes(MAX_BODY_BYTES);
    let direct = Arc::new(Direct::new(server.clone()));
    let mcp = StreamableHttpService::new(move || Ok(server.clone()), Arc::new(NeverSessionManager::default()), config);
    let limiter = options.rate_limit.filter(|n| *n > 0).map(|n| Arc::new(RateLimiter::new(n)));
    let state = Endpoint { limiter, direct };
    let endpoint =
        Router::new().route_service("/mcp", mcp).layer(middleware::from_fn_with_state(state, endpoint_checks));
    Router::new().merge(endpoint).fallback(not_found).layer(middleware::from_fn(log_request))
}

/// Serves until the process ends.
pub async fn serve(listener: TcpListener, server: McpServer, options: HttpOptions) -> std::io::Result<()> {
    let app = router(server, options);
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
        let app = app.clone();
        let timer = timer.clone();
        tokio::spawn(async move {
            let service = tower::service_fn(move |mut request: http::Request<hyper::body::Incoming>| {
                request.extensions_mut().insert(ConnectInfo(local));
                app.clone().oneshot(request.map(Body::new))
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.timer(timer).header_read_timeout(HEADER_READ_TIMEOUT);
            let connection = builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "HTTP connection ended");
            }
        });
    }
}

/// A plain-text error as Go's `http.Error` writes it.
fn plain(status: StatusCode, message: &str) -> Response {
    let mut response = Response::new(Body::from(format!("{message}\n")));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    response
}

fn json(status: StatusCode, body: String) -> Response {
    json_bytes(status, body.into_bytes())
}

fn json_bytes(status: StatusCode, body: Vec<u8>) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

async fn not_found() -> Response {
    plain(StatusCode::NOT_FOUND, "404 page not found")
}

fn is_loopback_host(host: &str) -> bool {
    let bare = if let Some(rest) = host.strip_prefix('[') {
        rest.split_once(']').map_or(rest, |(h, _)| h)
    } else if host.matches(':').count() == 1 {
        host.split_once(':').map_or(host, |(h, _)| h)
    } else {
        host
    };
    // An IPv4-mapped IPv6 address counts as its IPv4 address, as in Go's netip.
    bare.eq_ignore_ascii_case("localhost") || bare.parse::<IpAddr>().is_ok_and(|ip| ip.to_canonical().is_loopback())
}

fn connection(request: &Request) -> Option<LocalAddr> {
    request.extensions().get::<ConnectInfo<LocalAddr>>().map(|c| c.0)
}

/// What the checks of `/mcp` hold: the rate limit, and the direct path
/// that serves plain requests without rmcp's per-request service.
#[derive(Debug, Clone)]
struct Endpoint {
    limiter: Option<Arc<RateLimiter>>,
    direct: Arc<Direct>,
}

/// The checks of `/mcp`, in order: Host guard, body, framing, rate limit.
async fn endpoint_checks(State(endpoint): State<Endpoint>, request: Request, next: Next) -> Response {
    if let Some(refusal) = host_guard(&request) {
        return refusal;
    }
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    match read_body(request).await {
        Ok((parts, bytes)) => check_frame(parts, bytes, &endpoint, next).await,
        Err(refusal) => refusal,
    }
}

/// A client that reached a loopback address must name a loopback host: a
/// page elsewhere cannot reach a local server through a rebound DNS name.
fn host_guard(request: &Request) -> Option<Response> {
    // A dual-stack listener (`--http 8080`) sees IPv4 clients as `::ffff:a.b.c.d`.
    if connection(request).and_then(|c| c.0).is_some_and(|a| a.ip().to_canonical().is_loopback()) {
        let host = request.headers().get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
        if !is_loopback_host(host) {
            return Some(plain(StatusCode::FORBIDDEN, &format!("Forbidden: invalid Host header {}", quote(host))));
        }
    }
    None
}

/// Buffers the body within [`MAX_BODY_BYTES`] and [`BODY_READ_TIMEOUT`].
async fn read_body(request: Request) -> Result<(http::request::Parts, Bytes), Response> {
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

/// [`frame::screen`] on the body: what rmcp would refuse without a
/// JSON-RPC answer is answered here; a kept id is put back in the reply.
/// A plain request is then served by [`Direct`], anything else by rmcp's
/// service. Either decodes the typed message itself; only a body rmcp
/// cannot decode is decoded again, by [`frame::inspect`], for the answer.
async fn check_frame(parts: http::request::Parts, bytes: Bytes, endpoint: &Endpoint, next: Next) -> Response {
    let (body, kept, method) = match frame::screen(&bytes) {
        Err(verdict) => return answer(verdict, &bytes),
        Ok(screened) => {
            let limiter = endpoint.limiter.as_deref();
            if let Some(limited) = rate_limit(limiter, &parts, screened.method.as_deref(), screened.readable_id) {
                return limited;
            }
            match screened.swapped {
                None => (bytes.clone(), None, screened.method),
                Some(swapped) => (Bytes::from(swapped), screened.kept, screened.method),
            }
        }
    };
    let parts = match endpoint.direct.serve(parts, &body, method.as_deref()).await {
        Served::Reply(reply) => {
            let response = json_bytes(StatusCode::OK, reply);
            return match kept {
                None => response,
                Some(kept) => restore_kept_id(response, kept).await,
            };
        }
        Served::ToRmcp(parts) => parts,
        Served::Unencodable(text) => {
            let mut response = Response::new(Body::from(text));
            *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            return response;
        }
    };
    let response = next.run(Request::from_parts(parts, Body::from(body))).await;
    if response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE {
        let (head, body) = response.into_parts();
        let text = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
        if text.starts_with(RMCP_UNDECODABLE) {
            match frame::inspect(&bytes) {
                Verdict::Forward { .. } => {}
                verdict => return answer(verdict, &bytes),
            }
        }
        return Response::from_parts(head, Body::from(text));
    }
    match kept {
        None => response,
        Some(kept) => restore_kept_id(response, kept).await,
    }
}

/// The reply to a body the framing check decided alone.
fn answer(verdict: Verdict, bytes: &[u8]) -> Response {
    match verdict {
        Verdict::Answer(frame) => json(StatusCode::BAD_REQUEST, frame),
        // Not even a readable notification: nothing to answer.
        Verdict::Ignore if !bytes.iter().all(u8::is_ascii_whitespace) => {
            let mut response = Response::new(Body::empty());
            *response.status_mut() = StatusCode::ACCEPTED;
            response
        }
        Verdict::Ignore => plain(StatusCode::BAD_REQUEST, "POST requires a non-empty body"),
        Verdict::Forward { .. } => plain(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error"),
    }
}

async fn restore_kept_id(response: Response, kept: KeptId) -> Response {
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    let restored = match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(value) => frame::restore_id(value, |p| (p == kept.placeholder).then(|| kept.original.clone())),
        Err(_) => return Response::from_parts(parts, Body::from(bytes)),
    };
    let mut response = Response::from_parts(parts, Body::from(restored));
    response.headers_mut().remove(header::CONTENT_LENGTH);
    response
}

/// A tool call over the limit gets the limit's tool error; nothing else counts.
fn rate_limit(
    limiter: Option<&RateLimiter>,
    parts: &http::request::Parts,
    method: Option<&str>,
    id: Option<&RawValue>,
) -> Option<Response> {
    let limiter = limiter?;
    let client = parts.extensions.get::<ConnectInfo<LocalAddr>>().and_then(|c| c.0.peer()).map(|a| a.ip());
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
    request_id: String,
    transport: &'static str,
    duration_ms: u128,
    http: HttpFields<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mcp: Option<ToolLog>,
}

async fn log_request(mut request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().to_string();
    let path = percent_encoding::percent_decode_str(request.uri().path()).decode_utf8_lossy().into_owned();
    let slot = ToolLogSlot::default();
    request.extensions_mut().insert(slot.clone());
    let response = next.run(request).await;
    let (parts, body) = response.into_parts();
    // JSON responses are complete when the handler returns; buffering lets
    // the log state their exact size.
    let bytes = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    let mcp = slot.take();
    let status = parts.status.as_u16();
    let failed = status >= 400 || mcp.as_ref().is_some_and(|m| m.outcome == "error");
    let event = RequestEvent {
        timestamp: time::OffsetDateTime::now_utc().format(&Rfc3339).unwrap_or_default(),
        level: if failed { "ERROR" } else { "INFO" },
        event: "mcp.request.completed",
        request_id: uuid::Uuid::new_v4().to_string(),
        transport: "streamable_http",
        duration_ms: started.elapsed().as_millis(),
        http: HttpFields { method: &method, path: &path, status_code: status, response_bytes: bytes.len() },
        mcp,
    };
    if let Ok(line) = serde_json::to_string(&event) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
    Response::from_parts(parts, Body::from(bytes))
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
