//! The MCP layer against faults no real backend produces on demand: a search that never ends
//! (cancellation must stop it), and HTTP clients that trickle their bytes (the read timeouts must
//! cut them off). The backends are stand-ins for exactly those faults; everything else about the
//! tools runs against a real Chroma in the server crate's tests.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use axum::body::Body;
use axum::extract::ConnectInfo;
use rr_core::{
    BackendError, CallContext, Candidate, Embedder, PipelineOptions, SearchEngine, VectorQuery, VectorStore,
};
use rr_mcp::McpServer;
use rr_mcp::http::{self, HttpOptions, LocalAddr};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tower::ServiceExt as _;

/// A store whose queries may never finish; it records how many started and whether one was
/// dropped.
#[derive(Default)]
struct Hang {
    started: AtomicUsize,
    dropped: Arc<AtomicBool>,
    hang: bool,
}

struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[async_trait]
impl Embedder for Hang {
    fn name(&self) -> &str {
        "hang"
    }
    async fn embed(&self, inputs: &[String], _: &CallContext) -> Result<Vec<Vec<f32>>, BackendError> {
        Ok(inputs.iter().map(|_| vec![1.0]).collect())
    }
}

#[async_trait]
impl VectorStore for Hang {
    fn name(&self) -> &str {
        "hang"
    }
    async fn query(&self, _: &VectorQuery, _: &CallContext) -> Result<Vec<Candidate>, BackendError> {
        self.started.fetch_add(1, Ordering::SeqCst);
        let _guard = SetOnDrop(self.dropped.clone());
        if self.hang {
            std::future::pending::<()>().await;
        }
        Ok(Vec::new())
    }
}

fn server(store: Arc<Hang>) -> McpServer {
    let engine = SearchEngine::new(store.clone(), store, None, PipelineOptions::default());
    McpServer::builder(engine, "repo-retriever", "test").build()
}

/// A stdio session in this process, driven by raw lines.
struct Session {
    input: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    output: tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
}

impl Session {
    fn start(server: McpServer) -> Session {
        let (client, server_end) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(server_end);
        tokio::spawn(rr_mcp::stdio::serve_io(server, read, write));
        let (output, input) = tokio::io::split(client);
        Session { input, output: BufReader::new(output).lines() }
    }

    async fn send(&mut self, line: &str) {
        self.send_bytes(line.as_bytes()).await;
    }

    async fn send_bytes(&mut self, line: &[u8]) {
        self.input.write_all(&[line, b"\n"].concat()).await.unwrap();
    }

    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(10), self.output.next_line()).await.unwrap().unwrap();
        serde_json::from_str(&line.expect("a line")).unwrap()
    }
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// `notifications/cancelled` reaches the running search: its store query is dropped,
/// the request is not answered, and the session goes on.
#[tokio::test]
async fn cancellation_stops_the_running_search() {
    let store = Arc::new(Hang { hang: true, ..Hang::default() });
    let mut s = Session::start(server(store.clone()));
    s.send(INITIALIZE).await;
    assert_eq!(s.next().await["id"], 0);
    s.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await;
    s.send(
        r#"{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"search","arguments":{"query":"x"}}}"#,
    )
    .await;
    let started = Instant::now();
    while store.started.load(Ordering::SeqCst) == 0 {
        assert!(started.elapsed() < Duration::from_secs(10), "the search never reached the store");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!store.dropped.load(Ordering::SeqCst));
    s.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow","reason":"user"}}"#)
        .await;
    while !store.dropped.load(Ordering::SeqCst) {
        assert!(started.elapsed() < Duration::from_secs(10), "the cancelled search kept running");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    s.send(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#).await;
    // The next frame answers the ping: the cancelled request gets none.
    assert_eq!(s.next().await, json!({"jsonrpc": "2.0", "id": 2, "result": {}}));
}

/// The error code and id of a JSON-RPC error frame.
fn code_and_id(frame: &Value) -> (i64, Value) {
    (frame["error"]["code"].as_i64().unwrap_or_else(|| panic!("not an error: {frame}")), frame["id"].clone())
}

/// Bytes that are not UTF-8, a key among them.
const NOT_UTF8_KEY: &[u8] = b"{\"jsonrpc\":\"2.0\",\"i\xffd\":3,\"method\":\"ping\"}";
const NOT_UTF8_METHOD_KEY: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":4,\"met\xffhod\":\"ping\"}";
const NULL_ID: &str = r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#;

/// Messages a fuzzer found answered wrongly or not at all, over stdio: each gets a JSON-RPC error
/// with a JSON-RPC code, and the session goes on.
#[tokio::test]
async fn stdio_protocol_edges_get_json_rpc_errors() {
    let mut s = Session::start(server(Arc::new(Hang::default())));
    s.send(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).await;
    assert_eq!(code_and_id(&s.next().await), (-32600, json!(1)), "tools/list before initialize");
    s.send(INITIALIZE).await;
    assert_eq!(s.next().await["id"], 0);
    s.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await;
    s.send(&INITIALIZE.replace(r#""id":0"#, r#""id":2"#)).await;
    let duplicate = s.next().await;
    assert_eq!(code_and_id(&duplicate), (-32600, json!(2)));
    assert_eq!(duplicate["error"]["message"], "duplicate \"initialize\" received");
    s.send_bytes(NOT_UTF8_KEY).await;
    let frame = s.next().await;
    assert_eq!(code_and_id(&frame), (-32700, Value::Null), "{frame}");
    assert_eq!(frame["error"]["message"], "parse error: the message is not valid UTF-8");
    s.send_bytes(NOT_UTF8_METHOD_KEY).await;
    assert_eq!(code_and_id(&s.next().await), (-32700, json!(4)));
    s.send(NULL_ID).await;
    let frame = s.next().await;
    assert_eq!(code_and_id(&frame), (-32600, Value::Null), "{frame}");
    assert_eq!(frame["error"]["message"], "invalid request: \"id\" must be a string or a number, not null");
    s.send(PING).await;
    assert_eq!(s.next().await, json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
}

/// The same messages over HTTP, and an empty body: a JSON-RPC error (status 400), never plain
/// text or nothing.
#[tokio::test]
async fn http_protocol_edges_get_json_rpc_errors() {
    let app = http::router(server(Arc::new(Hang::default())), HttpOptions::default());
    let local = "127.0.0.1:8080";
    let cases: [(&[u8], i64, Value); 5] = [
        (b"", -32700, Value::Null),
        (b" \n ", -32700, Value::Null),
        (NOT_UTF8_KEY, -32700, Value::Null),
        (NOT_UTF8_METHOD_KEY, -32700, json!(4)),
        (NULL_ID.as_bytes(), -32600, Value::Null),
    ];
    for (body, code, id) in cases {
        let mut request = post("", "localhost", "192.0.2.7:1", local);
        *request.body_mut() = Body::from(body.to_vec());
        let response = app.clone().oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let content_type = response.headers().get("content-type").cloned();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
        let frame: Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{body:?}: {e}"));
        assert_eq!((status, code_and_id(&frame)), (400, (code, id)), "{body:?}");
        assert_eq!(content_type.unwrap(), "application/json");
    }
}

fn post(body: &str, host: &str, peer: &str, local: &str) -> axum::http::Request<Body> {
    let mut request = axum::http::Request::post("/mcp")
        .header("host", host)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(Body::from(body.to_owned()))
        .unwrap();
    let connection = LocalAddr(Some(local.parse().unwrap()), Some(peer.parse().unwrap()));
    request.extensions_mut().insert(ConnectInfo(connection));
    request
}

async fn send(app: &axum::Router, request: axum::http::Request<Body>) -> (u16, String) {
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status().as_u16();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

const PING: &str = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;

/// Bound to all interfaces, a client that reached a non-loopback address may send any
/// Host; one that arrived on a loopback address (IPv4, IPv6 or IPv4-mapped) may not, as in the
/// reference, whose guard looks at the connection's local address.
#[tokio::test]
async fn host_guard_depends_on_the_local_address_reached() {
    let app = http::router(server(Arc::new(Hang::default())), HttpOptions::default());
    let peer = "203.0.113.9:5555";
    for local in ["192.0.2.2:8080", "[2001:db8::1]:8080"] {
        let (status, body) = send(&app, post(PING, "evil.com", peer, local)).await;
        let pong = json!({"jsonrpc": "2.0", "id": 1, "result": {}});
        assert_eq!((status, serde_json::from_str::<Value>(&body).unwrap()), (200, pong), "{local}");
    }
    for local in ["127.0.0.1:8080", "[::1]:8080", "[::ffff:127.0.0.1]:8080"] {
        let (status, body) = send(&app, post(PING, "evil.com", peer, local)).await;
        assert_eq!((status, body.as_str()), (403, "Forbidden: invalid Host header \"evil.com\"\n"), "{local}");
    }
}

/// Tool calls over the per-address limit get a tool error with a retry hint; other requests and
/// other addresses are not counted.
#[tokio::test]
async fn rate_limit_is_a_tool_error_with_a_retry_hint() {
    let app =
        http::router(server(Arc::new(Hang::default())), HttpOptions { rate_limit: Some(2), ..HttpOptions::default() });
    let call = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":{"query":"x"}}}"#;
    let local = "127.0.0.1:8080";
    let mut results = Vec::new();
    for _ in 0..3 {
        send(&app, post(PING, "localhost", "192.0.2.7:1", local)).await;
        let (_, body) = send(&app, post(call, "localhost", "192.0.2.7:1", local)).await;
        results.push(serde_json::from_str::<Value>(&body).unwrap());
    }
    assert!(results[1]["result"].get("isError").is_none(), "{}", results[1]);
    assert_eq!(results[2]["id"], 7);
    assert_eq!(results[2]["result"]["isError"], true);
    assert_eq!(
        results[2]["result"]["content"][0]["text"],
        "Rate limit exceeded: at most 2 tool calls per minute per client address. Retry in 60 seconds."
    );
    let (_, body) = send(&app, post(call, "localhost", "192.0.2.8:1", local)).await;
    assert!(serde_json::from_str::<Value>(&body).unwrap()["result"].get("isError").is_none(), "{body}");
}

async fn listening() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(http::serve(listener, server(Arc::new(Hang::default())), HttpOptions::default()));
    addr
}

/// Sends `head`, then one byte of `rest` every 2 s; returns what the server answered and when it
/// closed the connection.
async fn trickle(addr: &str, head: &str, rest: &[u8]) -> (String, Duration) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let (mut read, mut write) = stream.into_split();
    let bytes = rest.to_vec();
    let writer = tokio::spawn(async move {
        for b in bytes {
            tokio::time::sleep(Duration::from_secs(2)).await;
            if write.write_all(&[b]).await.is_err() {
                break;
            }
        }
    });
    let mut reply = Vec::new();
    let limit = http::HEADER_READ_TIMEOUT.max(http::BODY_READ_TIMEOUT) + Duration::from_secs(8);
    let finished = tokio::time::timeout(limit, read.read_to_end(&mut reply)).await;
    writer.abort();
    assert!(finished.is_ok(), "the connection was still open after {limit:?}");
    (String::from_utf8_lossy(&reply).into_owned(), started.elapsed())
}

/// A client that sends its headers a byte every 2 s is cut off.
#[tokio::test]
async fn slow_headers_are_cut_off() {
    let addr = listening().await;
    let (_, took) = trickle(&addr, "POST /mcp HTTP/1.1\r\nHost: localhost\r\n", &[b'X'; 60]).await;
    assert!(took < http::HEADER_READ_TIMEOUT + Duration::from_secs(4), "{took:?}");
}

/// A client that sends its body a byte every 2 s is answered 408 and cut off.
#[tokio::test]
async fn slow_bodies_are_cut_off() {
    let addr = listening().await;
    let head = "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 60\r\n\r\n";
    let (reply, took) = trickle(&addr, head, &[b' '; 60]).await;
    assert!(reply.starts_with("HTTP/1.1 408 "), "{reply}");
    assert!(took < http::BODY_READ_TIMEOUT + Duration::from_secs(4), "{took:?}");
}

/// Status, content type and body of `request` as `app` answers it.
async fn answer(app: &axum::Router, request: axum::http::Request<Body>) -> (u16, Option<String>, String) {
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status().as_u16();
    let content_type = response.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned());
    let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
    (status, content_type, String::from_utf8(body.to_vec()).unwrap())
}

/// Plain requests are served without rmcp's per-request service; each gets the bytes
/// rmcp's stateless service gives it (a `q=1` in `Accept` changes nothing for rmcp, but sends the
/// request its way), at every protocol version a client may name.
#[tokio::test]
async fn requests_served_directly_get_rmcp_answers() {
    let app = http::router(server(Arc::new(Hang::default())), HttpOptions::default());
    let requests = [
        PING,
        r#"{"jsonrpc":"2.0","id":"s","method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"search","arguments":{"query":"x"}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"search","arguments":{"limit":2}}}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"nope","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"search","arguments":{"query":"y"},"_meta":{"progressToken":1}}}"#,
        r#"{"jsonrpc":"2.0","id":6,"method":"resources/list"}"#,
        r#"{"jsonrpc":"2.0","id":7,"method":"prompts/list"}"#,
        r#"{"jsonrpc":"2.0","id":8,"method":"logging/setLevel","params":{"level":"info"}}"#,
        r#"{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{"uri":"repo://x"}}"#,
        r#"{"jsonrpc":"2.0","id":10,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"b"}}}"#,
    ];
    let (local, peer) = ("127.0.0.1:8080", "127.0.0.1:5555");
    for version in [None, Some("2024-11-05"), Some("2025-03-26"), Some("2025-06-18"), Some("2025-11-25")] {
        for body in requests {
            let mut direct = post(body, "localhost", peer, local);
            let mut through_rmcp = post(body, "localhost", peer, local);
            through_rmcp.headers_mut().insert("accept", "application/json;q=1, text/event-stream".parse().unwrap());
            if let Some(version) = version {
                direct.headers_mut().insert("mcp-protocol-version", version.parse().unwrap());
                through_rmcp.headers_mut().insert("mcp-protocol-version", version.parse().unwrap());
            }
            let served = answer(&app, direct).await;
            assert_eq!(served, answer(&app, through_rmcp).await, "{version:?} {body}");
            assert_eq!((served.0, served.1.as_deref()), (200, Some("application/json")), "{version:?} {body}");
        }
    }
}

/// Over HTTP, a client that hangs up stops its running search.
#[tokio::test]
async fn a_client_that_hangs_up_stops_its_search() {
    let store = Arc::new(Hang { hang: true, ..Hang::default() });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(http::serve(listener, server(store.clone()), HttpOptions::default()));
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"query":"x"}}}"#;
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    stream.write_all(format!("{head}{body}").as_bytes()).await.unwrap();
    let started = Instant::now();
    while store.started.load(Ordering::SeqCst) == 0 {
        assert!(started.elapsed() < Duration::from_secs(10), "the search never reached the store");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!store.dropped.load(Ordering::SeqCst));
    drop(stream);
    while !store.dropped.load(Ordering::SeqCst) {
        assert!(started.elapsed() < Duration::from_secs(10), "the search outlived its client");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
