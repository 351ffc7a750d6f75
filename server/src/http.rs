//! Streamable HTTP transport: stateless MCP at `/mcp`, one JSON log line per
//! request on stdout, 404 everywhere else.
//!
//! Each POST is its own short-lived, already-initialised session, so no
//! session id is issued or required. The checks run in the reference's
//! order with its status codes and plain-text bodies, and responses are sent
//! as Server-Sent Events exactly as it sends them.

use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::serve::IncomingStream;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use http_body_util::BodyExt;
use rr_core::CallContext;
use serde::Serialize;
use serde_json::Value;
use time::format_description::well_known::Rfc3339;
use tokio::net::TcpListener;

use crate::protocol::{self, McpService, Message, SUPPORTED_VERSIONS, Session};
use crate::tool::ToolLog;
use crate::wire;

/// Request bodies above this are refused with 413.
pub const MAX_BODY_BYTES: usize = 4 << 20;

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

/// The local end of an accepted connection: the DNS-rebinding guard depends
/// on which address a client reached, not on what the listener is bound to.
#[derive(Debug, Clone, Copy)]
pub struct LocalAddr(pub Option<SocketAddr>, pub Option<SocketAddr>);

impl LocalAddr {
    /// The client's address (the rate limit's key).
    pub fn peer(&self) -> Option<SocketAddr> {
        self.1
    }
}

impl axum::extract::connect_info::Connected<IncomingStream<'_, TcpListener>> for LocalAddr {
    fn connect_info(stream: IncomingStream<'_, TcpListener>) -> Self {
        LocalAddr(stream.io().local_addr().ok(), Some(*stream.remote_addr()))
    }
}

/// The router: `/mcp` for MCP, 404 elsewhere, every request logged.
pub fn router(service: Arc<McpService>) -> Router {
    Router::new()
        .route("/mcp", axum::routing::any(handle_mcp))
        .fallback(not_found)
        .layer(middleware::from_fn(log_request))
        .with_state(service)
}

/// Serves until the process ends.
pub async fn serve(listener: TcpListener, service: Arc<McpService>) -> std::io::Result<()> {
    axum::serve(listener, router(service).into_make_service_with_connect_info::<LocalAddr>()).await
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

/// Splits every `Accept` header on commas and checks for JSON and SSE.
fn accepts_json_and_sse(headers: &HeaderMap) -> bool {
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(header::ACCEPT) {
        for item in value.to_str().unwrap_or("").split(',') {
            let media = item.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
            match media.as_str() {
                "application/json" | "application/*" => json = true,
                "text/event-stream" | "text/*" => sse = true,
                "*/*" => (json, sse) = (true, true),
                _ => {}
            }
        }
    }
    json && sse
}

fn content_type_is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|base| base.trim().eq_ignore_ascii_case("application/json"))
}

async fn handle_mcp(
    State(service): State<Arc<McpService>>,
    ConnectInfo(local): ConnectInfo<LocalAddr>,
    request: Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let headers = &parts.headers;
    // A dual-stack listener (`--http 8080`) sees IPv4 clients as `::ffff:a.b.c.d`; Go's
    // `IP.IsLoopback` treats those as the IPv4 address, so must we.
    if local.0.is_some_and(|a| a.ip().to_canonical().is_loopback()) {
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
        if !is_loopback_host(host) {
            return plain(
                StatusCode::FORBIDDEN,
                &format!("Forbidden: invalid Host header {}", protocol::go_quote(host)),
            );
        }
    }
    let version = headers.get("mcp-protocol-version").and_then(|v| v.to_str().ok()).map(str::to_owned);
    if let Some(v) = &version
        && !SUPPORTED_VERSIONS.contains(&v.as_str())
    {
        return plain(
            StatusCode::BAD_REQUEST,
            &format!(
                "Bad Request: Unsupported protocol version (supported versions: {})",
                SUPPORTED_VERSIONS.join(",")
            ),
        );
    }
    if parts.method != Method::POST {
        let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
        response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("POST"));
        return response;
    }
    if !content_type_is_json(headers) {
        return plain(StatusCode::UNSUPPORTED_MEDIA_TYPE, "Content-Type must be 'application/json'");
    }
    if !accepts_json_and_sse(headers) {
        return plain(StatusCode::BAD_REQUEST, "Accept must contain both 'application/json' and 'text/event-stream'");
    }
    let body: Bytes = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(b) => b,
        Err(_) => return plain(StatusCode::PAYLOAD_TOO_LARGE, "http: request body too large"),
    };
    if body.is_empty() {
        return plain(StatusCode::BAD_REQUEST, "POST requires a non-empty body");
    }
    let messages = match decode_body(&body, version.as_deref()) {
        Ok(m) => m,
        Err(message) => return plain(StatusCode::BAD_REQUEST, &message),
    };
    for message in &messages {
        if let Err(e) = protocol::check_request(message) {
            return plain(StatusCode::BAD_REQUEST, &e);
        }
        if let Message::Request { method, .. } = message
            && !service.knows_method(method)
        {
            return plain(
                StatusCode::BAD_REQUEST,
                &format!("JSON RPC not handled: {} unsupported", protocol::go_quote(method)),
            );
        }
    }
    let ctx = CallContext {
        authorization: headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .map(str::to_owned),
    };
    let mut session = Session::stateless();
    let mut events = String::new();
    let mut tool_log = None;
    let mut answered = false;
    for message in messages {
        if let Message::Request { id, method, params } = message {
            answered = true;
            let client = local.peer().map(|a| a.ip());
            let reply = service.handle_request_from(&mut session, &id, &method, params.as_ref(), &ctx, client).await;
            events.push_str("event: message\ndata: ");
            events.push_str(&reply.frame);
            events.push_str("\n\n");
            if reply.tool_log.is_some() {
                tool_log = reply.tool_log;
            }
        }
    }
    if !answered {
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::ACCEPTED;
        return response;
    }
    let mut response = Response::new(Body::from(events));
    let h = response.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, no-transform"));
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(header::CONNECTION, HeaderValue::from_static("keep-alive"));
    if let Some(log) = tool_log {
        response.extensions_mut().insert(log);
    }
    response
}

/// One message or a batch; batching is refused from 2025-06-18 on.
fn decode_body(body: &[u8], version: Option<&str>) -> Result<Vec<Message>, String> {
    let value: Value = serde_json::from_slice(body).map_err(|e| format!("malformed payload: {e}"))?;
    let values = match value {
        Value::Array(items) => {
            if let Some(v) = version
                && v >= "2025-06-18"
            {
                return Err(format!(
                    "JSON-RPC batching is not supported in 2025-06-18 and later (request version: {v})"
                ));
            }
            items
        }
        single => vec![single],
    };
    values.iter().map(|v| protocol::decode(v).map_err(|e| format!("malformed payload: {}", e.0))).collect()
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

async fn log_request(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().to_string();
    let path = percent_encoding::percent_decode_str(request.uri().path()).decode_utf8_lossy().into_owned();
    let response = next.run(request).await;
    let (mut parts, body) = response.into_parts();
    // Responses are complete when the handler returns; buffering lets the
    // log state their exact size.
    let bytes = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    let mcp = parts.extensions.remove::<ToolLog>();
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
        let _ = writeln!(out, "{}", wire::go_escape(&line));
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
    fn accept_rules() {
        let mut h = HeaderMap::new();
        assert!(!accepts_json_and_sse(&h));
        h.insert(header::ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
        assert!(accepts_json_and_sse(&h));
        h.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        assert!(accepts_json_and_sse(&h));
        h.insert(header::ACCEPT, HeaderValue::from_static("application/json;q=0.9"));
        assert!(!accepts_json_and_sse(&h));
        h.append(header::ACCEPT, HeaderValue::from_static("TEXT/*"));
        assert!(accepts_json_and_sse(&h));
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        let t = time::OffsetDateTime::from_unix_timestamp_nanos(1_700_000_000_120_000_000).unwrap();
        assert_eq!(t.format(&Rfc3339).unwrap(), "2023-11-14T22:13:20.12Z");
        let t = time::OffsetDateTime::from_unix_timestamp(1_700_000_000).unwrap();
        assert_eq!(t.format(&Rfc3339).unwrap(), "2023-11-14T22:13:20Z");
    }

    mod guard {
        use std::sync::Arc;

        use async_trait::async_trait;
        use axum::body::Body;
        use axum::extract::connect_info::MockConnectInfo;
        use http::Request;
        use rr_core::{
            BackendError, CallContext, Candidate, Embedder, PipelineOptions, SearchEngine, VectorQuery, VectorStore,
        };
        use tower::ServiceExt as _;

        use super::super::{LocalAddr, router};
        use crate::protocol::McpService;

        struct Nothing;

        #[async_trait]
        impl Embedder for Nothing {
            fn name(&self) -> &str {
                "nothing"
            }
            async fn embed(&self, inputs: &[String], _: &CallContext) -> Result<Vec<Vec<f32>>, BackendError> {
                Ok(inputs.iter().map(|_| vec![1.0]).collect())
            }
        }

        #[async_trait]
        impl VectorStore for Nothing {
            fn name(&self) -> &str {
                "nothing"
            }
            async fn query(&self, _: &VectorQuery, _: &CallContext) -> Result<Vec<Candidate>, BackendError> {
                Ok(Vec::new())
            }
        }

        /// A ping with `Host: evil.com` arriving on `local`.
        async fn ping_from(local: &str) -> (u16, String) {
            let engine = SearchEngine::new(Arc::new(Nothing), Arc::new(Nothing), None, PipelineOptions::default());
            let service = Arc::new(McpService::new(engine, "t", "t"));
            let local = LocalAddr(Some(local.parse().unwrap()), Some("203.0.113.9:5555".parse().unwrap()));
            let app = router(service).layer(MockConnectInfo(local));
            let request = Request::post("/mcp")
                .header("host", "evil.com")
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .body(Body::from(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#))
                .unwrap();
            let response = app.oneshot(request).await.unwrap();
            let status = response.status().as_u16();
            let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
            (status, String::from_utf8(body.to_vec()).unwrap())
        }

        /// Issue #2: bound to all interfaces, a client that reached a
        /// non-loopback address may send any Host; one that arrived on a
        /// loopback address (IPv4, IPv6 or IPv4-mapped) may not, as in the
        /// reference, whose guard looks at the connection's local address.
        #[tokio::test]
        async fn issue2_host_guard_depends_on_the_local_address_reached() {
            let ok = (200, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n".to_owned());
            assert_eq!(ping_from("192.0.2.2:8080").await, ok);
            assert_eq!(ping_from("[2001:db8::1]:8080").await, ok);
            let refused = (403, "Forbidden: invalid Host header \"evil.com\"\n".to_owned());
            assert_eq!(ping_from("127.0.0.1:8080").await, refused);
            assert_eq!(ping_from("[::1]:8080").await, refused);
            assert_eq!(ping_from("[::ffff:127.0.0.1]:8080").await, refused);
        }
    }
}
