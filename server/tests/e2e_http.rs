//! End to end over stateless Streamable HTTP: the built binary with
//! `--http 127.0.0.1:<free port>`, against the real Chroma and the embed server.
//!
//! Pinned: the SSE framing of a search (the same bytes stdio sends, wrapped in one
//! `event: message` event), no initialize or session needed, every status code and plain-text
//! body of the wire report §5, the `Authorization` pass-through (seen by a recording proxy in
//! front of the real Chroma) and the one JSON log line per request on stdout.

use crate::support;

use std::time::Duration;

use crate::support::{
    Ordered, Recorder, Server, contract_select, found_line, is_error, raw_candidates, shown_results, tool_text,
};
use reqwest::Method;
use serde_json::{Value, json};

/// A POST to `/mcp` with the given headers only (no defaults), returning status, headers, body.
async fn post_raw(url: &str, headers: &[(&str, &str)], body: &str) -> (u16, reqwest::header::HeaderMap, String) {
    let mut req = reqwest::Client::new().post(url).timeout(Duration::from_secs(60)).body(body.to_string());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.expect("POST");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    (status, headers, resp.text().await.expect("body"))
}

/// Writes one raw HTTP/1.1 request and reads the whole reply (the request must say
/// `Connection: close`).
async fn raw_http(addr: &str, request: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut reply = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut reply))
        .await
        .expect("reply in time")
        .expect("read");
    String::from_utf8_lossy(&reply).into_owned()
}

const MCP_HEADERS: [(&str, &str); 2] =
    [("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];

fn header<'a>(headers: &'a reqwest::header::HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Go's `http.Error`: the message and a newline, as plain text, not sniffable.
fn assert_plain_error(status: u16, headers: &reqwest::header::HeaderMap, body: &str, want: (u16, &str)) {
    assert_eq!((status, body), (want.0, format!("{}\n", want.1).as_str()));
    assert_eq!(header(headers, "content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(header(headers, "x-content-type-options"), Some("nosniff"));
}

/// Stateless Streamable HTTP with JSON responses (rmcp's service): one JSON-RPC response per
/// POST, equal as parsed JSON to what stdio answers.
#[tokio::test]
async fn search_over_http_is_one_json_response_equal_to_stdio() {
    let arguments = json!({"query": "where is the configuration loaded and validated", "path": "**/*.go", "limit": 3});
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "search", "arguments": arguments}});

    // The same call over stdio, the frame given the id the HTTP request uses.
    let mut stdio = Server::fixture().stdio().await;
    let (mut frame, _) = stdio.call_tool_frame("search", arguments).await;
    frame["id"] = json!(7);
    assert!(stdio.close().await.success());

    // Over HTTP: no initialize, no session.
    let h = Server::fixture().http().await;
    let (status, headers, body) = post_raw(&h.url(), &MCP_HEADERS, &call.to_string()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap(), frame);
    assert_eq!(header(&headers, "content-type"), Some("application/json"));
    assert_eq!(header(&headers, "mcp-session-id"), None, "stateless: no session id");

    // And the answer is what the contract makes of Chroma's own answer.
    let f = support::fixture();
    let embedding = support::embed_query(&f.embed_url, "where is the configuration loaded and validated").await;
    let raw = support::chroma_query_filtered(
        &f.chroma_url,
        &f.collection_id,
        &embedding,
        9,
        None,
        Some(json!({"$regex": r"^Source: [^\n]+:(?:.*/)?.*\.go(?:\n|$)"})),
    )
    .await;
    let expected = contract_select(&raw_candidates(&raw), 3);
    let messages = support::json_messages(&body);
    assert_eq!(messages.len(), 1);
    let text = tool_text(&messages[0]["result"]);
    assert!(text.starts_with(&found_line(3)));
    assert_eq!(shown_results(text), expected.shown());
}

fn v(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

#[tokio::test]
async fn initialize_tools_list_and_ping_over_http() {
    let h = Server::fixture().http().await;
    let init = h
        .post(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
        .await;
    assert_eq!(init.status, 200);
    assert_eq!(
        v(&init.body),
        json!({"jsonrpc": "2.0", "id": 1, "result": {"capabilities": {"logging": {}, "tools": {"listChanged": true}},
            "protocolVersion": "2025-06-18", "serverInfo": {"name": "repo-retriever", "version": support::expected_version_line()}}})
    );
    let list = h.post(&json!({"jsonrpc": "2.0", "id": "list", "method": "tools/list", "params": {}})).await;
    assert_eq!(list.status, 200);
    assert_eq!(
        v(&list.body),
        json!({"jsonrpc": "2.0", "id": "list", "result": {"ttlMs": 0, "cacheScope": "public", "tools": [rr_mcp::search::definition()]}})
    );
    let ping = h.post(&json!({"jsonrpc": "2.0", "id": 3, "method": "ping"})).await;
    assert_eq!(v(&ping.body), json!({"jsonrpc": "2.0", "id": 3, "result": {}}));
    // A JSON-RPC error (unknown tool) is a 200 response.
    let unknown = h
        .post(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "nope", "arguments": {}}}))
        .await;
    assert_eq!(unknown.status, 200);
    assert_eq!(
        v(&unknown.body),
        json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -32602, "message": "unknown tool \"nope\""}})
    );
    // A validation failure is a 200 tool error.
    let bad = h.post(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "search", "arguments": {"query": "q", "limit": 21}}})).await;
    assert_eq!(
        v(&bad.body),
        json!({"jsonrpc": "2.0", "id": 5, "result": {"content": [{"type": "text", "text": "limit must be between 1 and 20"}], "isError": true}})
    );
}

/// The HTTP-level answers: rmcp's status codes for the transport's rules (their texts are
/// rmcp's, CONTRACT §6), ours for the Host guard, the body rules and every other path.
#[tokio::test]
async fn http_status_codes_and_plain_text_bodies() {
    let h = Server::fixture().http().await;
    let url = h.url();
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();

    // A notification only: 202 and an empty body.
    let reply = h.notify("notifications/initialized").await;
    assert_eq!((reply.status, reply.body.as_str()), (202, ""));

    // Methods other than POST: 405 with `Allow: POST`.
    for method in [Method::GET, Method::DELETE, Method::PUT] {
        let resp = reqwest::Client::new()
            .request(method.clone(), &url)
            .header("Accept", "application/json, text/event-stream")
            .send()
            .await
            .unwrap();
        let (status, headers) = (resp.status().as_u16(), resp.headers().clone());
        let body = resp.text().await.unwrap();
        assert_eq!((status, body.as_str()), (405, "Method Not Allowed"), "{method}");
        assert_eq!(header(&headers, "allow"), Some("POST"), "{method}");
    }

    // Content type: 415.
    for headers in [
        &[("Content-Type", "text/plain"), ("Accept", "application/json, text/event-stream")][..],
        &[("Accept", "application/json, text/event-stream")],
    ] {
        let (s, _, b) = post_raw(&url, headers, &ping).await;
        assert_eq!(s, 415, "{headers:?}");
        assert!(b.contains("Content-Type must be application/json"), "{b}");
    }
    // Parameters are allowed.
    let (s, _, b) = post_raw(
        &url,
        &[("Content-Type", "application/json; charset=utf-8"), ("Accept", "application/json, text/event-stream")],
        &ping,
    )
    .await;
    assert_eq!((s, v(&b)), (200, json!({"jsonrpc": "2.0", "id": 1, "result": {}})));

    // Accept must name both JSON and SSE: 406.
    for accept in ["application/json", "text/event-stream", "text/html", "application/json, text/html"] {
        let (s, _, b) = post_raw(&url, &[("Content-Type", "application/json"), ("Accept", accept)], &ping).await;
        assert_eq!(s, 406, "Accept: {accept}");
        assert!(b.contains("must accept both application/json and text/event-stream"), "{b}");
    }
    // No Accept header at all (reqwest would add `*/*`, so this one is written by hand).
    let addr = h.base_url().trim_start_matches("http://").to_string();
    let reply = raw_http(
        &addr,
        &format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{ping}",
            ping.len()
        ),
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 406 "), "{reply}");
    let (s, _, _) = post_raw(
        &url,
        &[("Content-Type", "application/json"), ("Accept", "text/event-stream;q=0.5, application/json;q=0.9")],
        &ping,
    )
    .await;
    assert_eq!(s, 200);

    // Bodies.
    let (s, hd, b) = post_raw(&url, &MCP_HEADERS, "").await;
    assert_eq!((s, header(&hd, "content-type")), (400, Some("application/json")));
    assert_eq!(
        v(&b),
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "parse error: the request body is empty"}})
    );
    // A body that is not JSON-RPC gets a JSON-RPC error, with the id when it can be read.
    let (s, hd, b) = post_raw(&url, &MCP_HEADERS, "{not json").await;
    assert_eq!((s, header(&hd, "content-type")), (400, Some("application/json")));
    assert_eq!((v(&b)["id"].clone(), v(&b)["error"]["code"].clone()), (Value::Null, json!(-32700)), "{b}");
    let (s, _, b) = post_raw(&url, &MCP_HEADERS, r#"{"jsonrpc":"2.0","id":8,"method":7}"#).await;
    assert_eq!((s, v(&b)["id"].clone(), v(&b)["error"]["code"].clone()), (400, json!(8), json!(-32600)), "{b}");
    let (s, _, b) =
        post_raw(&url, &MCP_HEADERS, &json!({"jsonrpc": "2.0", "id": 1, "method": "foo/bar"}).to_string()).await;
    assert_eq!(
        (s, v(&b)),
        (
            200,
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "method not found: \"foo/bar\""}})
        )
    );
    // Ids beyond 64 bits come back as they were sent.
    let (s, _, b) =
        post_raw(&url, &MCP_HEADERS, r#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}"#).await;
    assert_eq!(s, 200);
    assert!(b.contains(r#""id":123456789012345678901234567890"#), "{b}");

    // Protocol version header: 400.
    let mut headers = MCP_HEADERS.to_vec();
    headers.push(("Mcp-Protocol-Version", "1999-01-01"));
    let (s, _, b) = post_raw(&url, &headers, &ping).await;
    assert_eq!(s, 400, "{b}");
    assert!(b.contains("1999-01-01"), "{b}");

    // DNS-rebinding guard on a loopback listener: a foreign Host is refused, loopback names pass.
    let mut headers = MCP_HEADERS.to_vec();
    headers.push(("Host", "evil.com"));
    let (s, hd, b) = post_raw(&url, &headers, &ping).await;
    assert_plain_error(s, &hd, &b, (403, "Forbidden: invalid Host header \"evil.com\""));
    for host in ["localhost", "localhost:1234", "127.0.0.1", "[::1]:80"] {
        let mut headers = MCP_HEADERS.to_vec();
        headers.push(("Host", host));
        let (s, _, _) = post_raw(&url, &headers, &ping).await;
        assert_eq!(s, 200, "Host: {host}");
    }

    // Every other path: Go's mux 404.
    for (method, path) in [(Method::GET, "/"), (Method::POST, "/mcp/"), (Method::GET, "/foo"), (Method::POST, "/sse")] {
        let (status, body) = h.raw(method.clone(), path, Some(ping.clone())).await;
        assert_eq!((status, body.as_str()), (404, "404 page not found\n"), "{method} {path}");
    }
}

// -------------------------------------------------------------------------------------------
// Authorization pass-through
// -------------------------------------------------------------------------------------------

#[tokio::test]
async fn incoming_authorization_is_passed_through_to_chroma_only() {
    let f = support::fixture();
    let chroma = Recorder::forward(&f.chroma_url).await;
    let embed = Recorder::forward(&f.embed_url).await;
    let h = Server::with_backends(chroma.url(), &f.collection, embed.url()).http().await;
    let args = json!({"query": "store list widgets", "source": "acme/widgets@main", "path": "/internal/*", "limit": 4});

    let result = h.client_with_bearer("xyz").await.call_tool("search", args.clone()).await;
    assert!(!is_error(&result), "{result}");
    let to_chroma = chroma.requests();
    assert!(!to_chroma.is_empty());
    for r in &to_chroma {
        assert_eq!(r.header("authorization"), Some("Bearer xyz"), "{} {}", r.method, r.path);
        assert_eq!(r.header("user-agent"), Some(format!("repo-retriever/{}", env!("CARGO_PKG_VERSION")).as_str()));
    }
    // The query Chroma received is the contract's, field for field.
    let queries: Vec<_> = to_chroma.iter().filter(|r| r.path.ends_with("/query")).collect();
    assert_eq!(queries.len(), 1);
    assert_eq!(
        queries[0].path,
        format!("/api/v2/tenants/default_tenant/databases/default_database/collections/{}/query", f.collection_id)
    );
    let body = queries[0].json();
    let embedding = support::embed_query(&f.embed_url, "store list widgets").await;
    assert_eq!(body["n_results"], json!(12));
    assert_eq!(body["include"], json!(["documents", "metadatas", "distances"]));
    assert_eq!(
        body["where"],
        json!({"$and": [
            {"organization": {"$eq": "acme"}}, {"repository": {"$eq": "widgets"}}, {"branch": {"$eq": "main"}}
        ]})
    );
    assert_eq!(body["where_document"], json!({"$regex": r"^Source: [^\n]+:internal/.*(?:\n|$)"}));
    let sent: Vec<f64> = body["query_embeddings"][0].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    assert_eq!(sent.len(), embedding.len());
    for (a, b) in sent.iter().zip(&embedding) {
        assert!((a - b).abs() < 1e-6, "query embedding differs: {a} vs {b}");
    }
    assert_eq!(body.as_object().unwrap().len(), 5, "no other fields: {body}");
    // The embedder gets no Authorization at all (no key configured), never the client's.
    let embeds = embed.requests();
    assert_eq!(embeds.len(), 1);
    assert_eq!(embeds[0].header("authorization"), None);

    // Without an incoming header Chroma gets none.
    let before = chroma.requests().len();
    let result = h.client().await.call_tool("search", args.clone()).await;
    assert!(!is_error(&result));
    let later = &chroma.requests()[before..];
    assert!(!later.is_empty());
    assert!(later.iter().all(|r| r.header("authorization").is_none()), "{later:?}");

    // A configured bearer token always wins over the incoming header.
    let chroma2 = Recorder::forward(&f.chroma_url).await;
    let h2 = Server::with_backends(chroma2.url(), &f.collection, &f.embed_url)
        .args(["--bearer-token", "configured-token"])
        .http()
        .await;
    let result = h2.client_with_bearer("xyz").await.call_tool("search", args).await;
    assert!(!is_error(&result));
    let seen = chroma2.requests();
    assert!(!seen.is_empty());
    assert!(seen.iter().all(|r| r.header("authorization") == Some("Bearer configured-token")), "{seen:?}");
}

// -------------------------------------------------------------------------------------------
// The request log on stdout
// -------------------------------------------------------------------------------------------

fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.iter().map(|g| g.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
        && groups.iter().all(|g| g.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()))
}

fn is_rfc3339_utc(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && (s.ends_with('Z') || s[19..].contains(['+', '-']))
        && s[..4].parse::<u32>().is_ok_and(|y| y >= 2024)
}

/// Checks the fixed part of one log line and returns it parsed.
fn check_line(raw: &str, method: &str, path: &str, status: u16, response_bytes: usize, level: &str) -> Value {
    let ordered = Ordered::parse(raw);
    let v: Value = serde_json::from_str(raw).unwrap();
    let mut keys = vec!["timestamp", "level", "event", "request_id", "transport", "duration_ms", "http"];
    if v.get("mcp").is_some() {
        keys.push("mcp");
    }
    assert_eq!(ordered.keys(), keys, "{raw}");
    assert_eq!(ordered.get("http").unwrap().keys(), ["method", "path", "status_code", "response_bytes"], "{raw}");
    assert!(is_rfc3339_utc(v["timestamp"].as_str().unwrap()), "{raw}");
    assert_eq!(v["level"], level, "{raw}");
    assert_eq!(v["event"], "mcp.request.completed");
    assert!(is_uuid(v["request_id"].as_str().unwrap()), "{raw}");
    assert_eq!(v["transport"], "streamable_http");
    assert!(v["duration_ms"].is_u64(), "{raw}");
    assert_eq!(
        v["http"],
        json!({"method": method, "path": path, "status_code": status, "response_bytes": response_bytes}),
        "{raw}"
    );
    v
}

/// Keys in the order of `canonical`, each at most once (optional ones may be missing).
fn assert_key_order(keys: &[&str], canonical: &[&str], raw: &str) {
    let mut at = 0;
    for key in keys {
        match canonical[at..].iter().position(|c| c == key) {
            Some(p) => at += p + 1,
            None => panic!("key {key:?} out of order or unknown ({keys:?} vs {canonical:?}): {raw}"),
        }
    }
}

/// The `mcp` object of a tool-call log line: keys in the contract's order, the parameters
/// (query, source, path, limit) trimmed with the default limit applied, and the given fields.
/// `error` and `documents_found` must be missing (or empty) unless given; an empty `source` or
/// `path` may be missing.
fn check_mcp(raw: &str, params: (&str, &str, &str, i64), fields: &[(&str, Value)]) {
    let ordered = Ordered::parse(raw);
    let mcp_o = ordered.get("mcp").unwrap_or_else(|| panic!("no mcp object: {raw}"));
    let canonical = ["tool", "parameters", "outcome", "error", "response_content_bytes", "documents_found"];
    assert_key_order(&mcp_o.keys(), &canonical, raw);
    let p_keys = mcp_o.get("parameters").expect("parameters").keys();
    assert_key_order(&p_keys, &["query", "source", "path", "limit"], raw);
    let v: Value = serde_json::from_str(raw).unwrap();
    let mcp = &v["mcp"];
    assert_eq!(mcp["tool"], "search", "{raw}");
    let p = &mcp["parameters"];
    assert_eq!(p["query"], params.0, "{raw}");
    assert_eq!(p["limit"], params.3, "{raw}");
    for (key, want) in [("source", params.1), ("path", params.2)] {
        match p.get(key) {
            Some(got) => assert_eq!(got, want, "{key}: {raw}"),
            None => assert_eq!(want, "", "{key} missing: {raw}"),
        }
    }
    for (key, want) in fields {
        assert_eq!(&mcp[*key], want, "{key}: {raw}");
    }
    for key in ["error", "documents_found"] {
        if !fields.iter().any(|(k, _)| *k == key) {
            assert!(mcp.get(key).is_none_or(|x| x == ""), "{key} should be absent: {raw}");
        }
    }
    assert_eq!(mcp.as_object().unwrap().len(), 2 + fields.len(), "unexpected mcp fields: {raw}");
}

#[tokio::test]
async fn one_json_log_line_per_request_with_fields_in_order() {
    let h = Server::fixture().http().await;
    let url = h.url();
    let mut expected_lines = 0;
    let next = |n: &mut usize| {
        *n += 1;
        *n
    };

    // 1. A successful search, with whitespace to trim and the default limit.
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "search",
        "arguments": {"query": "  retry with exponential backoff  ", "path": " docs/* "}}});
    let (status, _, body) = post_raw(&url, &MCP_HEADERS, &call.to_string()).await;
    assert_eq!(status, 200);
    let result = support::json_messages(&body).remove(0)["result"].clone();
    let text = tool_text(&result).to_string();
    let n_results = shown_results(&text).len();
    let logs = h.wait_logs(next(&mut expected_lines)).await;
    let raw = h.stdout_lines()[0].clone();
    check_line(&raw, "POST", "/mcp", 200, body.len(), "INFO");
    check_mcp(
        &raw,
        ("retry with exponential backoff", "", "docs/*", 5),
        &[
            ("outcome", json!("success")),
            ("response_content_bytes", json!(text.len())),
            ("documents_found", json!(n_results)),
        ],
    );
    assert_eq!(logs.len(), 1);

    // 2. A validation failure: ERROR with the message.
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "search",
        "arguments": {"query": " q ", "source": " acme/widgets@main ", "limit": 21}}});
    let (_, _, body) = post_raw(&url, &MCP_HEADERS, &call.to_string()).await;
    h.wait_logs(next(&mut expected_lines)).await;
    let raw = h.stdout_lines()[1].clone();
    check_line(&raw, "POST", "/mcp", 200, body.len(), "ERROR");
    check_mcp(
        &raw,
        ("q", "acme/widgets@main", "", 21),
        &[
            ("outcome", json!("error")),
            ("error", json!("limit must be between 1 and 20")),
            ("response_content_bytes", json!("limit must be between 1 and 20".len())),
        ],
    );

    // 3. Non-tool requests: a notification (202), a 405, a 404; no `mcp` object.
    let (s, _, _) =
        post_raw(&url, &MCP_HEADERS, &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string())
            .await;
    assert_eq!(s, 202);
    h.wait_logs(next(&mut expected_lines)).await;
    check_line(&h.stdout_lines()[2], "POST", "/mcp", 202, 0, "INFO");
    let (s, b) = h.raw(Method::GET, "/mcp", None).await;
    assert_eq!(s, 405);
    h.wait_logs(next(&mut expected_lines)).await;
    check_line(&h.stdout_lines()[3], "GET", "/mcp", 405, b.len(), "ERROR");
    let (s, b) = h.raw(Method::GET, "/nope", None).await;
    assert_eq!(s, 404);
    h.wait_logs(next(&mut expected_lines)).await;
    check_line(&h.stdout_lines()[4], "GET", "/nope", 404, b.len(), "ERROR");
    // A non-tool request that succeeds.
    let (_, _, b) =
        post_raw(&url, &MCP_HEADERS, &json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}).to_string()).await;
    h.wait_logs(next(&mut expected_lines)).await;
    let ping_line = check_line(&h.stdout_lines()[5], "POST", "/mcp", 200, b.len(), "INFO");
    assert!(ping_line.get("mcp").is_none());

    // Every line is distinct, and nothing else was written.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let logs = h.logs();
    assert_eq!(logs.len(), expected_lines, "{:#?}", h.stdout_lines());
    let ids: std::collections::HashSet<_> =
        logs.iter().map(|l| l["request_id"].as_str().unwrap().to_string()).collect();
    assert_eq!(ids.len(), logs.len(), "request ids repeat");
    assert_eq!(h.stderr(), "", "stderr stays quiet without --debug");
}

#[tokio::test]
async fn backend_failure_is_logged_as_error_without_the_backend_text() {
    let f = support::fixture();
    let h = Server::with_backends(&f.chroma_url, "e2e-http-missing", &f.embed_url).http().await;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "search",
        "arguments": {"query": "configuration", "limit": 2}}});
    let (status, _, body) = post_raw(&h.url(), &MCP_HEADERS, &call.to_string()).await;
    assert_eq!(status, 200);
    let result = support::json_messages(&body).remove(0)["result"].clone();
    assert!(is_error(&result));
    let text = tool_text(&result).to_string();
    assert_eq!(
        text,
        r#"repository content search failed: Chroma collection lookup failed with HTTP 404: {"error":"NotFoundError","message":"Collection [e2e-http-missing] does not exist"}"#
    );
    h.wait_logs(1).await;
    let raw = h.stdout_lines()[0].clone();
    check_line(&raw, "POST", "/mcp", 200, body.len(), "ERROR");
    check_mcp(
        &raw,
        ("configuration", "", "", 2),
        &[
            ("outcome", json!("error")),
            ("error", json!("repository content search failed")),
            ("response_content_bytes", json!(text.len())),
        ],
    );
    assert!(!raw.contains("NotFoundError"), "the backend's text stays out of the log: {raw}");
}
